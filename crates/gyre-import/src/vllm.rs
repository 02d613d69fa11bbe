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
//! team logged beside its traffic): checked as the loader checks them and copied through.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::convo::Turn;
use super::error::diag;
use super::input::{Counter, file_name, json_values, typed};
use super::openai::ChatMessage;
use super::sniff::{Fit, Probe, Shape};
use super::write::{At, ClosureOut, RequestOut, ToolCallOut, spans_out};
use super::{About, Importer, Job, Progress};
use gyre_engine::record::{Actor, Purpose, Record, Source, parse_line};
use gyre_engine::report::plural;
use gyre_format::copy::{RequestCopy, TrainedCopy};
use gyre_text::Message;
use gyre_text::label::Span;

/// The vLLM traffic importer.
pub struct Vllm;

static ABOUT: About = About {
    name: "vllm",
    what: "a vLLM/SGLang traffic log",
    summary: "Logged vLLM/SGLang chat traffic with token ids and log-probs: exact records",
    input: "TRAFFIC.jsonl",
    input_help: "JSONL files (plain, .gz or .zst), read in order",
    many: true,
    directories: false,
    reconstructed: false,
    help: "\
Examples:
  gyre import vllm traffic.jsonl --out runs.jsonl
  gyre import vllm day1.jsonl.zst day2.jsonl.zst --out runs.jsonl.zst

Each line: {\"execution\", \"agent\", \"purpose\", \"request\": <chat request>, \"response\": <chat
response with prompt_token_ids, choices[0].token_ids and choices[0].logprobs>}; lines with a
`kind` are gyre/1 records, checked and copied through (closures, assessments). docs/import.md has
an example.",
};

/// An id written as a string or an integer.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
enum Id {
    Text(String),
    Number(i64),
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Text(s) => f.write_str(s),
            Id::Number(n) => write!(f, "{n}"),
        }
    }
}

/// One logged call.
#[derive(Deserialize)]
struct Call {
    execution: Id,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    purpose: Option<String>,
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    id: Option<Id>,
    #[serde(default)]
    t: Option<f64>,
    request: ChatRequest,
    response: ChatResponse,
}

#[derive(Deserialize)]
struct ChatRequest {
    #[serde(default)]
    messages: Vec<ChatMessage>,
    #[serde(default)]
    tools: Vec<Value>,
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    created: Option<f64>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    prompt_token_ids: Option<Vec<u32>>,
    #[serde(default)]
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    token_ids: Option<Vec<u32>>,
    #[serde(default)]
    logprobs: Option<Logprobs>,
    #[serde(default)]
    message: Option<ChatMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Logprobs {
    #[serde(default)]
    content: Option<Vec<LogprobItem>>,
}

#[derive(Deserialize)]
struct LogprobItem {
    logprob: f64,
}

/// A line of traffic, read and checked.
pub enum Traffic {
    /// A call, ready to write.
    Call(Box<Checked>),
    /// A gyre/1 record logged beside the traffic (its own line is kept for `meta`).
    Record(Box<(Record, Value)>, PathBuf, u64),
}

/// A call whose fields are all there.
pub struct Checked {
    file: PathBuf,
    line: u64,
    execution: String,
    id: String,
    agent: String,
    purpose: Purpose,
    actor: Actor,
    t: Option<f64>,
    model: Option<String>,
    prompt: Vec<u32>,
    output: Vec<u32>,
    logprobs: Vec<f64>,
    messages: Vec<ChatMessage>,
    tools: Vec<Value>,
    response_message: Option<ChatMessage>,
    finish: Option<String>,
    response_id: Option<Value>,
}

impl Importer for Vllm {
    type Item = Traffic;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        match (&probe.shape, probe.first_object()) {
            (Shape::Jsonl(_), Some(o)) if super::sniff::is_gyre_record(o) => Fit::Unknown,
            (Shape::Jsonl(_), Some(o))
                if o.contains_key("request") || o.contains_key("response") =>
            {
                Fit::Yes
            }
            // A call too long for the bytes looked at.
            (Shape::Document(head), _) if !head.array => {
                if head.has("request") || head.has("response") || head.has("execution") {
                    Fit::Yes
                } else {
                    Fit::No
                }
            }
            _ => Fit::No,
        }
    }

    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Traffic) -> Result<()>,
    ) -> Result<()> {
        let total: u64 = inputs
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum();
        let counter = Counter::default();
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut calls = 0u64;
        for path in inputs {
            json_values(path, &counter, total, job, &mut |job, n, v| {
                if let Some(item) = read_value(path, n, v, &mut counts, job) {
                    calls += u64::from(matches!(item, Traffic::Call(_)));
                    // Nothing is written once the input is known to be bad.
                    if !job.log.has_problems() {
                        emit(job, item)?;
                    }
                }
                Ok(())
            })?;
        }
        (job.progress)(Progress::Reading { done: total, total });
        if calls == 0 && !job.log.has_problems() {
            let path = &inputs[0];
            job.log.fatal(diag(
                path,
                0,
                format!(
                    "nothing to import: no logged calls (lines with `request` and `response`); \
                     this is {}",
                    Probe::of(path).describe(&[])
                ),
                None,
            ));
        }
        Ok(())
    }

    fn records(&self, item: Traffic, job: &mut Job) -> Result<()> {
        match item {
            Traffic::Call(c) => write_call(&c, job),
            Traffic::Record(rec, file, line) => {
                copy_record(rec.0, &rec.1, At { file: &file, line }, job)
            }
        }
    }
}

/// One JSON value of the log: a record or a call, checked; `None` (with a problem logged) when
/// it cannot be written.
fn read_value(
    path: &Path,
    n: u64,
    v: Value,
    counts: &mut HashMap<String, usize>,
    job: &mut Job,
) -> Option<Traffic> {
    let Value::Object(obj) = &v else {
        job.log
            .problem(diag(path, n, "a line must be a JSON object", None));
        return None;
    };
    if obj.contains_key("kind") {
        return match parse_line(v.to_string().as_bytes()) {
            Ok(parsed) => match parsed.record {
                Record::Header(_) => {
                    job.log.warn(format!(
                        "{}:{n}: a header line in the traffic log is not copied (the output has \
                         its own)",
                        file_name(path)
                    ));
                    None
                }
                Record::Unknown(kind) => {
                    job.log.problem(diag(
                        path,
                        n,
                        format!("unknown record kind {kind:?}"),
                        Some("kind"),
                    ));
                    None
                }
                rec => Some(Traffic::Record(Box::new((rec, v)), path.to_path_buf(), n)),
            },
            Err(e) => {
                job.log
                    .problem(diag(path, n, e.message, e.field.as_deref()));
                None
            }
        };
    }
    let call: Call = match typed(&v) {
        Ok(c) => c,
        Err((msg, field)) => {
            job.log.problem(diag(path, n, msg, Some(&field)));
            return None;
        }
    };
    match check_call(path, n, call, counts) {
        Ok(c) => Some(Traffic::Call(Box::new(c))),
        Err((msg, field)) => {
            job.log.problem(diag(path, n, msg, Some(&field)));
            None
        }
    }
}

/// The fields a call needs, or what is missing (message, field).
fn check_call(
    path: &Path,
    n: u64,
    call: Call,
    counts: &mut HashMap<String, usize>,
) -> Result<Checked, (String, String)> {
    let missing_ids = |field: &str| {
        (
            "missing token ids (vLLM returns them with \"return_token_ids\": true)".to_owned(),
            field.to_owned(),
        )
    };
    let Call {
        execution,
        agent,
        purpose,
        actor,
        id,
        t,
        request,
        response,
    } = call;
    let prompt = response
        .prompt_token_ids
        .ok_or_else(|| missing_ids("response.prompt_token_ids"))?;
    let choice = response.choices.into_iter().next().ok_or_else(|| {
        (
            "the response has no choices".to_owned(),
            "response.choices".to_owned(),
        )
    })?;
    let output = choice
        .token_ids
        .ok_or_else(|| missing_ids("response.choices[0].token_ids"))?;
    let logprobs: Vec<f64> = choice
        .logprobs
        .and_then(|l| l.content)
        .ok_or_else(|| {
            (
                "no log-probs (request them with \"logprobs\": true)".to_owned(),
                "response.choices[0].logprobs.content".to_owned(),
            )
        })?
        .into_iter()
        .map(|i| i.logprob)
        .collect();
    if logprobs.len() != output.len() {
        return Err((
            format!(
                "{} for {}",
                plural(logprobs.len(), "log-prob"),
                plural(output.len(), "output token")
            ),
            "response.choices[0].logprobs.content".to_owned(),
        ));
    }
    let purpose = match purpose.as_deref() {
        None | Some("task") => Purpose::Task,
        Some("summary") => Purpose::Summary,
        Some(other) => {
            return Err((
                format!("purpose {other:?} is neither \"task\" nor \"summary\""),
                "purpose".to_owned(),
            ));
        }
    };
    // Never train on output whose sampler is not named as the policy.
    let actor = match actor.as_deref() {
        None | Some("policy") => Actor::Policy,
        Some(_) => Actor::Evaluator,
    };
    let execution = execution.to_string();
    let count = counts.entry(execution.clone()).or_default();
    *count += 1;
    let id = id.map_or_else(|| format!("r{count}"), |i| i.to_string());
    Ok(Checked {
        file: path.to_path_buf(),
        line: n,
        execution,
        id,
        agent: agent.unwrap_or_else(|| "main".into()),
        purpose,
        actor,
        t: t.or(response.created),
        model: response.model,
        prompt,
        output,
        logprobs,
        messages: request.messages,
        tools: request.tools,
        response_message: choice.message,
        finish: choice.finish_reason,
        response_id: response.id,
    })
}

/// Turns of an OpenAI chat request's `messages` (an unknown role is rendered as `user`).
fn request_turns(messages: &[ChatMessage]) -> Vec<Turn> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let identity = format!("message {i}");
            m.turn(&identity).unwrap_or_else(|| {
                Turn::new(
                    &identity,
                    Message::new("user", m.content.text()),
                    Source::User,
                )
            })
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

/// `[start, end)` of each `<tool_call>` … `</tool_call>` run of `output`.
pub(crate) fn call_runs(
    output: &[u32],
    open: Option<u32>,
    close: Option<u32>,
) -> Vec<(usize, usize)> {
    let (Some(open), Some(close)) = (open, close) else {
        return Vec::new();
    };
    let mut runs = Vec::new();
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
    runs
}

fn write_call(c: &Checked, job: &mut Job) -> Result<()> {
    let name = file_name(&c.file);
    let n = c.line;
    // Spans: the rendered messages, aligned with the recorded prompt.
    let turns = request_turns(&c.messages);
    let refs: Vec<&Turn> = turns.iter().collect();
    let (spans, aligned) = match job.builder.render_labelled(&refs, &c.tools) {
        Ok((rendered, rspans)) => align(&c.prompt, &rendered, &rspans),
        Err(e) => {
            job.log.warn(format!(
                "{name}:{n}: the messages do not render through the chat template ({e}); the \
                 prompt is labelled `context`"
            ));
            (
                vec![Span {
                    end: c.prompt.len(),
                    source: Source::Context,
                    call_id: None,
                }],
                0,
            )
        }
    };
    // Tool calls: the i-th <tool_call> … </tool_call> run is the i-th call.
    let calls = super::openai::tool_calls(
        c.response_message
            .as_ref()
            .and_then(|m| m.tool_calls.as_deref()),
    );
    let tok = job.builder.tokenizer();
    let runs = call_runs(
        &c.output,
        tok.token_id("<tool_call>"),
        tok.token_id("</tool_call>"),
    );
    let tool_calls: Vec<ToolCallOut> = if runs.len() == calls.len() {
        calls
            .iter()
            .zip(&runs)
            .map(|(call, &(s, e))| ToolCallOut {
                id: &call.id,
                name: Some(&call.name),
                start: s as u32,
                end: e as u32,
            })
            .collect()
    } else {
        if !calls.is_empty() {
            job.log.warn(format!(
                "{name}:{n}: {} tool calls but {} <tool_call> runs in the output; tool_calls \
                 left out",
                calls.len(),
                runs.len()
            ));
        }
        Vec::new()
    };
    let mut meta = Map::new();
    if let Some(rid) = &c.response_id {
        meta.insert("response_id".into(), rid.clone());
    }
    meta.insert("source_line".into(), json!(format!("{name}:{n}")));
    meta.insert("aligned_prompt_tokens".into(), json!(aligned));
    let spans = spans_out(&spans);
    job.out.request(
        &RequestOut {
            purpose: c.purpose,
            actor: c.actor,
            t: c.t,
            model: c.model.as_deref(),
            logprobs: Some(&c.logprobs),
            tool_calls: &tool_calls,
            finish: c.finish.as_deref(),
            meta: Some(&meta),
            ..RequestOut::new(&c.execution, &c.id, &c.agent, &c.prompt, &spans, &c.output)
        },
        At {
            file: &c.file,
            line: n,
        },
    )
}

/// Writes a gyre/1 record logged beside the traffic, every field as read, through the same
/// checks as every line.
fn copy_record(rec: Record, raw: &Value, at: At, job: &mut Job) -> Result<()> {
    match rec {
        Record::Execution(e) => job.out.execution(&e.as_ref().into(), at),
        Record::Request(r) => job.out.request(&RequestCopy::from(r.as_ref()).out(), at),
        Record::Assessment(a) => job.out.assessment(&a.as_ref().into(), at),
        Record::Closure(c) => job.out.closure(
            &ClosureOut {
                meta: raw.get("meta").and_then(Value::as_object),
                ..c.as_ref().into()
            },
            at,
        ),
        Record::Trained(t) => job.out.trained(&TrainedCopy::from(t.as_ref()).out(), at),
        Record::Header(_) | Record::Unknown(_) => Ok(()),
    }
}
