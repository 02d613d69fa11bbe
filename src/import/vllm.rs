//! Logged vLLM / SGLang chat traffic → exact gyre/1 records (docs/import.md#vllm).
//!
//! Each line is `{"execution", "agent", "purpose", "request": <chat request>, "response": <chat
//! response>}`, the response as vLLM returns it with `"return_token_ids": true` and
//! `"logprobs": true`: top-level `prompt_token_ids`, `choices[0].token_ids` and
//! `choices[0].logprobs.content[].logprob`. Token ids and log-probs are taken as recorded (these
//! records are *not* reconstructed). Spans come from rendering `request.messages` through the
//! chat template and aligning the result with `prompt_token_ids`: the common prefix and the
//! common suffix take the rendered labels, anything in between is `context`.
//!
//! Lines with a `kind` field are gyre/1 records (an `execution`, `assessment` or `closure` the
//! team logged beside its traffic) and are copied through unchanged.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::PathBuf;

use color_eyre::eyre::{Result, WrapErr};
use serde_json::{Map, Value, json};

use super::convo::{Builder, Turn};
use super::encode::Span;
use super::error::{Problems, diag};
use super::swe_agent::{content_text, openai_tool_calls};
use super::write::{Gyre1, HeaderOut, Line, RequestOut, Sink, ToolCallOut, spans_out};
use super::{Progress, Summary, open_input, strip_position};
use crate::engine::load::Diagnostic;
use crate::engine::record::Source;
use crate::engine::record::{Actor, Purpose};
use crate::text::Message;

/// Earlier requests per execution checked as `extends` candidates.
const DELTA_CANDIDATES: usize = 8;

fn id_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) if n.is_u64() || n.is_i64() => Some(n.to_string()),
        _ => None,
    }
}

fn token_ids(v: Option<&Value>, field: &str) -> Result<Vec<u32>, (String, String)> {
    let Some(Value::Array(a)) = v else {
        return Err((
            "missing token ids (vLLM returns them with \"return_token_ids\": true)".to_owned(),
            field.to_owned(),
        ));
    };
    a.iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_u64()
                .filter(|&n| n <= u32::MAX as u64)
                .map(|n| n as u32)
                .ok_or_else(|| {
                    (
                        "token ids must be integers in 0..2^32".to_owned(),
                        format!("{field}[{i}]"),
                    )
                })
        })
        .collect()
}

/// Turns of an OpenAI chat request's `messages`.
fn request_turns(messages: &[Value]) -> Vec<Turn> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
            let content = content_text(m.get("content"));
            let (msg, source) = match role {
                "system" | "developer" => (Message::new("system", content), Source::System),
                "assistant" => (
                    Message {
                        role: "assistant".into(),
                        content,
                        reasoning_content: m
                            .get("reasoning_content")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        tool_calls: openai_tool_calls(m.get("tool_calls")),
                        tool_call_id: None,
                    },
                    Source::Assistant,
                ),
                "tool" => (
                    Message::tool(
                        m.get("tool_call_id").and_then(Value::as_str).unwrap_or(""),
                        content,
                    ),
                    Source::Tool,
                ),
                _ => (Message::new("user", content), Source::User),
            };
            Turn::new(&format!("message {i}"), msg, source)
        })
        .collect()
}

/// Labels for `prompt` from a rendering (`rendered`, `spans`) of the same messages: the common
/// prefix and the common suffix take the rendered labels, the rest is `context`. Returns the
/// spans and the number of aligned tokens.
pub fn align(prompt: &[u32], rendered: &[u32], spans: &[Span]) -> (Vec<Span>, usize) {
    let k = prompt
        .iter()
        .zip(rendered)
        .take_while(|(a, b)| a == b)
        .count();
    let room = prompt.len().min(rendered.len()) - k;
    let m = prompt
        .iter()
        .rev()
        .zip(rendered.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let label = |i: usize| -> (Source, Option<&str>) {
        let j = spans.partition_point(|s| s.end <= i);
        spans.get(j).map_or((Source::Context, None), |s| {
            (s.source, s.call_id.as_deref())
        })
    };
    let mut out: Vec<Span> = Vec::new();
    let n = prompt.len();
    for i in 0..n {
        let (source, call) = if i < k {
            label(i)
        } else if i >= n - m {
            label(i + rendered.len() - n)
        } else {
            (Source::Context, None)
        };
        match out.last_mut() {
            Some(s) if s.source == source && s.call_id.as_deref() == call => s.end = i + 1,
            _ => out.push(Span {
                end: i + 1,
                source,
                call_id: call.map(str::to_owned),
            }),
        }
    }
    (out, k + m)
}

/// An earlier request, remembered by the length and hash of its input + output (memory stays
/// flat however many executions interleave).
struct Prev {
    id: String,
    len: usize,
    hash: PrefixHash,
}

/// Two independent polynomial hashes mod 2^61 − 1 (128 bits): equal prefixes hash equal; a
/// collision between different token sequences is out of reach in practice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PrefixHash(u64, u64);

impl PrefixHash {
    const P: u128 = (1 << 61) - 1;

    fn push(self, id: u32) -> Self {
        let step = |h: u64, base: u128| ((h as u128 * base + id as u128 + 1) % Self::P) as u64;
        PrefixHash(step(self.0, 1_000_003), step(self.1, 2_147_483_629))
    }

    fn of(ids: &[u32]) -> Self {
        ids.iter().fold(Self::default(), |h, &id| h.push(id))
    }
}

/// The longest earlier request whose input + output is a prefix of `prompt`.
fn longest_prefix<'a>(prompt: &[u32], history: &'a [Prev]) -> Option<&'a Prev> {
    let mut best: Option<&Prev> = None;
    let mut h = PrefixHash::default();
    let wanted =
        |n: usize, h: PrefixHash| history.iter().filter(move |p| p.len == n && p.hash == h);
    for (n, &id) in prompt.iter().enumerate() {
        if let Some(p) = wanted(n, h).next() {
            best = Some(p);
        }
        h = h.push(id);
    }
    if let Some(p) = wanted(prompt.len(), h).next() {
        best = Some(p);
    }
    best
}

/// Imports vLLM traffic logs into `sink` (header first).
pub fn import(
    files: &[PathBuf],
    builder: &mut Builder,
    tokenizer_header: &Value,
    sink: &mut Sink,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary> {
    let mut header = Map::new();
    header.insert("source".into(), json!("vllm"));
    header.insert("reconstructed".into(), Value::Bool(false));
    header.insert(
        "importer".into(),
        json!(format!("gyre {} import vllm", env!("CARGO_PKG_VERSION"))),
    );
    header.insert(
        "inputs".into(),
        json!(
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
        ),
    );
    sink.line(&Line::Header(HeaderOut {
        format: Gyre1,
        tokenizer: Some(tokenizer_header),
        meta: Some(&header),
    }))?;
    let call_open = builder.tokenizer().token_id("<tool_call>");
    let call_close = builder.tokenizer().token_id("</tool_call>");
    let total: u64 = files
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let mut summary = Summary::default();
    let mut problems = Problems::default();
    let mut prev: HashMap<String, Vec<Prev>> = HashMap::new();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut done = 0u64;
    for path in files {
        let mut reader = open_input(path)?;
        let mut buf = String::new();
        let mut n = 0u64;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        loop {
            buf.clear();
            let got = reader
                .read_line(&mut buf)
                .wrap_err_with(|| format!("reading {}", path.display()))?;
            if got == 0 {
                break;
            }
            n += 1;
            done += got as u64;
            if n % 16 == 0 {
                progress(Progress::Reading { done, total });
            }
            let text = buf.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            let bad =
                |msg: String, field: Option<&str>| -> Diagnostic { diag(path, n, msg, field) };
            let v: Value = match serde_json::from_str(text) {
                Ok(v) => v,
                Err(e) => {
                    problems.push(bad(
                        format!("malformed JSON: {}", strip_position(&e.to_string())),
                        None,
                    ));
                    continue;
                }
            };
            let Some(obj) = v.as_object() else {
                problems.push(bad("a line must be a JSON object".into(), None));
                continue;
            };
            if let Some(kind) = obj.get("kind") {
                if kind != "header" {
                    sink.line(&v)?;
                }
                if kind == "closure" {
                    if let Some(e) = obj.get("execution").and_then(id_string) {
                        prev.remove(&e);
                    }
                }
                continue;
            }
            let Some(execution) = obj.get("execution").and_then(id_string) else {
                problems.push(bad("missing execution id".into(), Some("execution")));
                continue;
            };
            let Some(request) = obj.get("request").filter(|r| r.is_object()) else {
                problems.push(bad("missing the chat request".into(), Some("request")));
                continue;
            };
            let Some(response) = obj.get("response").filter(|r| r.is_object()) else {
                problems.push(bad("missing the chat response".into(), Some("response")));
                continue;
            };
            let Some(choice) = response.get("choices").and_then(|c| c.get(0)) else {
                problems.push(bad(
                    "the response has no choices".into(),
                    Some("response.choices"),
                ));
                continue;
            };
            let prompt = match token_ids(
                response.get("prompt_token_ids"),
                "response.prompt_token_ids",
            ) {
                Ok(p) => p,
                Err((m, f)) => {
                    problems.push(bad(m, Some(&f)));
                    continue;
                }
            };
            let output = match token_ids(choice.get("token_ids"), "response.choices[0].token_ids") {
                Ok(p) => p,
                Err((m, f)) => {
                    problems.push(bad(m, Some(&f)));
                    continue;
                }
            };
            let Some(lp_items) = choice
                .get("logprobs")
                .and_then(|l| l.get("content"))
                .and_then(Value::as_array)
            else {
                problems.push(bad(
                    "no log-probs (request them with \"logprobs\": true)".into(),
                    Some("response.choices[0].logprobs.content"),
                ));
                continue;
            };
            let mut logprobs = Vec::with_capacity(lp_items.len());
            let mut lp_ok = true;
            for (i, item) in lp_items.iter().enumerate() {
                match item.get("logprob").and_then(Value::as_f64) {
                    Some(x) => logprobs.push(x),
                    None => {
                        problems.push(bad(
                            "log-prob is not a number".into(),
                            Some(&format!(
                                "response.choices[0].logprobs.content[{i}].logprob"
                            )),
                        ));
                        lp_ok = false;
                        break;
                    }
                }
            }
            if !lp_ok {
                continue;
            }
            if logprobs.len() != output.len() {
                problems.push(bad(
                    format!(
                        "{} log-probs for {} output tokens",
                        logprobs.len(),
                        output.len()
                    ),
                    Some("response.choices[0].logprobs.content"),
                ));
                continue;
            }
            let purpose = match obj.get("purpose").and_then(Value::as_str) {
                None | Some("task") => Purpose::Task,
                Some("summary") => Purpose::Summary,
                Some(other) => {
                    problems.push(bad(
                        format!("purpose {other:?} is neither \"task\" nor \"summary\""),
                        Some("purpose"),
                    ));
                    continue;
                }
            };
            if !problems.0.is_empty() {
                continue; // nothing is written once the input is known to be bad
            }
            // Spans: the rendered messages, aligned with the recorded prompt.
            let array = |key: &str| {
                request
                    .get(key)
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice)
            };
            let turns = request_turns(array("messages"));
            let refs: Vec<&Turn> = turns.iter().collect();
            let (spans, aligned) = match builder.render_labelled(&refs, array("tools")) {
                Ok((rendered, rspans)) => align(&prompt, &rendered, &rspans),
                Err(e) => {
                    summary.warnings.push(format!(
                        "{name}:{n}: the messages do not render through the chat template \
                         ({e}); the prompt is labelled `context`"
                    ));
                    (
                        vec![Span {
                            end: prompt.len(),
                            source: Source::Context,
                            call_id: None,
                        }],
                        0,
                    )
                }
            };
            // Tool calls: the i-th <tool_call> … </tool_call> run is the i-th call.
            let call_ids: Vec<(String, String)> =
                openai_tool_calls(choice.get("message").and_then(|m| m.get("tool_calls")))
                    .into_iter()
                    .map(|c| (c.id, c.name))
                    .collect();
            let mut runs = Vec::new();
            if let (Some(open), Some(close)) = (call_open, call_close) {
                let mut start = None;
                for (j, &t) in output.iter().enumerate() {
                    if t == open {
                        start = Some(j);
                    } else if t == close {
                        if let Some(s) = start.take() {
                            runs.push((s, j + 1));
                        }
                    }
                }
            }
            let tool_calls: Vec<(String, String, usize, usize)> = if runs.len() == call_ids.len() {
                call_ids
                    .into_iter()
                    .zip(runs)
                    .map(|((id, name), (s, e))| (id, name, s, e))
                    .collect()
            } else {
                if !call_ids.is_empty() {
                    summary.warnings.push(format!(
                        "{name}:{n}: {} tool calls but {} <tool_call> runs in the output; \
                         tool_calls left out",
                        call_ids.len(),
                        runs.len()
                    ));
                }
                Vec::new()
            };
            // Delta encoding against an earlier request of the execution.
            let history = prev.entry(execution.clone()).or_default();
            let (extends, covered) = match longest_prefix(&prompt, history) {
                Some(p) => (Some(p.id.clone()), p.len),
                None => (None, 0),
            };
            let count = counts.entry(execution.clone()).or_default();
            *count += 1;
            let id = obj
                .get("id")
                .and_then(id_string)
                .unwrap_or_else(|| format!("r{count}"));
            let mut meta = Map::new();
            if let Some(rid) = response.get("id") {
                meta.insert("response_id".into(), rid.clone());
            }
            meta.insert("source_line".into(), json!(format!("{name}:{n}")));
            meta.insert("aligned_prompt_tokens".into(), json!(aligned));
            let agent = obj
                .get("agent")
                .and_then(id_string)
                .unwrap_or_else(|| "main".into());
            let t = obj
                .get("t")
                .and_then(Value::as_f64)
                .or_else(|| response.get("created").and_then(Value::as_f64));
            let tail = super::encode::tail_spans(&spans, covered);
            let spans = spans_out(&tail);
            let calls: Vec<ToolCallOut> = tool_calls
                .iter()
                .map(|(id, name, s, e)| ToolCallOut {
                    id,
                    name: Some(name),
                    start: *s as u32,
                    end: *e as u32,
                })
                .collect();
            // Never train on output whose sampler is not named as the policy.
            let actor = match obj.get("actor").and_then(Value::as_str) {
                None | Some("policy") => Actor::Policy,
                Some(_) => Actor::Evaluator,
            };
            sink.line(&Line::Request(RequestOut {
                execution: &execution,
                id: &id,
                agent: &agent,
                purpose,
                actor,
                t,
                model: response.get("model").and_then(Value::as_str),
                extends: extends.as_deref(),
                input: &prompt[covered..],
                spans: &spans,
                output: &output,
                logprobs: Some(&logprobs),
                tool_calls: &calls,
                finish: choice.get("finish_reason").and_then(Value::as_str),
                meta: Some(&meta),
            }))?;
            summary.requests += 1;
            summary.input_tokens += prompt.len() as u64;
            summary.output_tokens += output.len() as u64;
            summary.written_input_tokens += (prompt.len() - covered) as u64;
            let mut hash = PrefixHash::of(&prompt);
            for &t in &output {
                hash = hash.push(t);
            }
            history.push(Prev {
                id,
                len: prompt.len() + output.len(),
                hash,
            });
            if history.len() > DELTA_CANDIDATES {
                history.remove(0);
            }
        }
    }
    progress(Progress::Reading { done: total, total });
    problems.check()?;
    summary.executions = counts.len() as u64;
    Ok(summary)
}
