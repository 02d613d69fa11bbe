//! Inspect AI logs (`.json`, and `.eval` = a zip of per-sample JSON) → one reconstructed
//! execution per sample (docs/import.md#inspect-ai).
//!
//! Every `model` event is one request whose context is its own `input` messages and `tools`,
//! exactly as Inspect sent them; a model event inside a `scorer` span (or step) is the
//! evaluator's call, not the policy's. The sample's `scores` become assessments of its output.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::convo::Turn;
use super::error::bad;
use super::input::{
    Counter, file_name, json_element_lines, line_of, parse_document, read_document, typed,
};
use super::mini_swe_agent::HIDDEN_REASONING;
use super::session::{Closure, Extras, Logged, Response, Session};
use super::sniff::{Fit, Probe, Shape};
use super::{About, Importer, Job};
use gyre_engine::record::{ClosureStatus, Source};
use gyre_text::{Message, ToolCall};

/// The Inspect AI importer.
pub struct Inspect;

static ABOUT: About = About {
    name: "inspect",
    what: "an Inspect AI log",
    summary: "An Inspect AI log (`.json` or `.eval`): one execution per sample, one request per \
              model event, scores as assessments",
    input: "LOG",
    input_help: "The log: a `.json` eval log, or a `.eval` archive (zip of `samples/*.json`)",
    many: false,
    directories: false,
    reconstructed: true,
    help: "\
Examples:
  gyre import inspect logs/2025-05-12T20-28-26-04-00_security-guide.json --out guide.jsonl
  gyre import inspect logs/run.eval --out run.jsonl --force

Each sample (each epoch of it) is one execution; the epochs of a sample are one group. A model
call's context is the exact `input` it was sent; calls made while scoring are the evaluator's.
The sample's scores are assessments (C/I/P/N = 1/0/0.5/0), the first scorer's is the reward.
docs/import.md has the mapping.",
};

/// Why a response is not a target when Inspect logged its reasoning redacted or as a bare
/// signature.
const REDACTED_REASONING: &str = HIDDEN_REASONING;

/// One sample (`samples[]` of a `.json` log, `samples/<id>_epoch_<n>.json` of a `.eval`).
#[derive(Deserialize)]
struct Sample {
    id: Value,
    #[serde(default)]
    epoch: Option<u64>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    events: Vec<Value>,
    #[serde(default)]
    scores: Option<Map<String, Value>>,
    #[serde(default)]
    attachments: HashMap<String, String>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    limit: Option<Value>,
}

/// A `model` event.
#[derive(Deserialize)]
struct ModelEvent {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    input: Vec<ChatMessage>,
    #[serde(default)]
    tools: Vec<ToolInfo>,
    output: ModelOutput,
}

/// An Inspect chat message.
#[derive(Deserialize)]
struct ChatMessage {
    #[serde(default)]
    id: Option<String>,
    role: String,
    #[serde(default)]
    content: Content,
    #[serde(default)]
    tool_calls: Option<Vec<InspectCall>>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

/// `content`: text, or a list of parts.
#[derive(Deserialize, Default)]
#[serde(untagged)]
enum Content {
    #[default]
    None,
    Text(String),
    Parts(Vec<Value>),
}

/// An Inspect tool call (`function` is the name, `arguments` an object).
#[derive(Deserialize)]
struct InspectCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// A tool definition (`name`, `description`, `parameters`).
#[derive(Deserialize)]
struct ToolInfo {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
}

#[derive(Deserialize)]
struct ModelOutput {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChatMessage,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_cache_read: Option<u64>,
    #[serde(default)]
    input_tokens_cache_write: Option<u64>,
}

impl Importer for Inspect {
    type Item = (Session, Extras);

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        match &probe.shape {
            Shape::Zip(names) => {
                if names
                    .iter()
                    .any(|n| n == "header.json" || n.starts_with("samples/"))
                    || names.iter().any(|n| n.starts_with("_journal/"))
                {
                    Fit::Yes
                } else {
                    Fit::No
                }
            }
            // A log written on one line.
            Shape::Jsonl(_) => match probe.object_keys() {
                Some(keys)
                    if keys.contains(&"eval")
                        && (keys.contains(&"samples") || keys.contains(&"status")) =>
                {
                    Fit::Yes
                }
                _ => Fit::No,
            },
            Shape::Document(head) if !head.array => {
                if head.has("eval") && (head.has("samples") || head.has("status")) {
                    Fit::Yes
                } else if !head.complete && head.keys.iter().all(|k| k == "version") {
                    Fit::Unknown
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
        emit: &mut dyn FnMut(&mut Job, (Session, Extras)) -> Result<()>,
    ) -> Result<()> {
        for path in inputs {
            let samples = read_samples(path)?;
            let epochs = samples_per_id(&samples);
            for (sample, place) in samples {
                let item = read_sample(path, &place, sample, &epochs, job)?;
                emit(job, item)?;
            }
        }
        Ok(())
    }

    fn records(&self, (session, extras): (Session, Extras), job: &mut Job) -> Result<()> {
        super::session::records_with(session, &extras, job)
    }
}

/// Where a sample is in the input: its line in a `.json` log, or its entry of a `.eval`.
struct Place {
    line: u64,
    entry: Option<String>,
    /// The task, the model and the eval's ids (from the log's `eval`).
    eval: Map<String, Value>,
}

/// The samples of a log with where each is.
fn read_samples(path: &Path) -> Result<Vec<(Sample, Place)>> {
    let eval_meta = |eval: Option<&Value>| -> Map<String, Value> {
        let mut m = Map::new();
        for k in ["task", "model", "eval_id", "run_id", "created"] {
            if let Some(v) = eval.and_then(|e| e.get(k)) {
                m.insert(k.into(), v.clone());
            }
        }
        m
    };
    if matches!(Probe::of(path).shape, Shape::Zip(_)) {
        let file = std::fs::File::open(path)
            .map_err(|e| bad(path, 0, super::input::io_reason(&e), None))?;
        let mut zip = zip::ZipArchive::new(file)
            .map_err(|e| bad(path, 0, format!("not a readable zip archive: {e}"), None))?;
        let header = read_entry(path, &mut zip, "header.json")
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        let eval = eval_meta(header.as_ref().and_then(|h| h.get("eval")));
        let mut names: Vec<String> = zip
            .file_names()
            .filter(|n| n.starts_with("samples/") && n.ends_with(".json"))
            .map(str::to_owned)
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            let text = read_entry(path, &mut zip, &name)?;
            let at = PathBuf::from(format!("{}:{name}", path.display()));
            let doc = parse_document(&at, &text)?;
            let sample: Sample =
                typed(&doc).map_err(|(msg, field)| bad(&at, 1, msg, Some(&field)))?;
            out.push((
                sample,
                Place {
                    line: 0,
                    entry: Some(name),
                    eval: eval.clone(),
                },
            ));
        }
        return Ok(out);
    }
    let text = read_document(path, &Counter::default())?;
    let doc = parse_document(path, &text)?;
    let eval = eval_meta(doc.get("eval"));
    let Some(samples) = doc.get("samples").and_then(Value::as_array) else {
        return Err(bad(
            path,
            1,
            "not an Inspect AI log with samples: no `samples` array (a log written with \
             `--no-log-samples` holds no model calls)",
            Some("samples"),
        ));
    };
    let lines = json_element_lines(&text, Some("samples"));
    samples
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let line = line_of(&lines, i);
            let sample: Sample = typed(v).map_err(|(msg, field)| {
                bad(
                    path,
                    line,
                    msg,
                    Some(&super::input::sub_path(&format!("samples[{i}]"), &field)),
                )
            })?;
            Ok((
                sample,
                Place {
                    line,
                    entry: None,
                    eval: eval.clone(),
                },
            ))
        })
        .collect()
}

/// One entry of a zip archive as text (bounded like any document).
fn read_entry(path: &Path, zip: &mut zip::ZipArchive<std::fs::File>, name: &str) -> Result<String> {
    let at = PathBuf::from(format!("{}:{name}", path.display()));
    let entry = zip
        .by_name(name)
        .map_err(|e| bad(&at, 0, format!("cannot read the entry: {e}"), None))?;
    let max = super::input::max_line_bytes() as u64;
    let mut bytes = Vec::new();
    entry
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(&at, 0, format!("cannot read the entry: {e}"), None))?;
    if bytes.len() as u64 > max {
        return Err(bad(
            &at,
            0,
            format!("larger than {} MiB; not a log document", max >> 20),
            None,
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        bad(
            &at,
            0,
            format!("invalid UTF-8 at byte {}", e.utf8_error().valid_up_to() + 1),
            None,
        )
    })
}

/// How many epochs each sample id has.
fn samples_per_id(samples: &[(Sample, Place)]) -> HashMap<String, usize> {
    let mut n: HashMap<String, usize> = HashMap::new();
    for (s, _) in samples {
        *n.entry(id_text(&s.id)).or_default() += 1;
    }
    n
}

fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `attachment://<hash>` references resolved from the sample's attachments.
fn resolve(text: &str, attachments: &HashMap<String, String>) -> String {
    match text.strip_prefix("attachment://") {
        Some(hash) => attachments
            .get(hash)
            .cloned()
            .unwrap_or_else(|| text.to_owned()),
        None => text.to_owned(),
    }
}

/// A message's text and reasoning (parts joined by newlines; an image or other media as
/// `[type]`), and whether its reasoning is redacted (the log holds a signature or ciphertext).
fn content_text(c: &Content, att: &HashMap<String, String>) -> (String, Option<String>, bool) {
    match c {
        Content::None => (String::new(), None, false),
        Content::Text(s) => (resolve(s, att), None, false),
        Content::Parts(parts) => {
            let mut text = Vec::new();
            let mut reasoning = Vec::new();
            let mut redacted = false;
            for p in parts {
                let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
                match kind {
                    "text" => text.push(resolve(
                        p.get("text").and_then(Value::as_str).unwrap_or(""),
                        att,
                    )),
                    "reasoning" => {
                        let r = resolve(
                            p.get("reasoning").and_then(Value::as_str).unwrap_or(""),
                            att,
                        );
                        if p.get("redacted").and_then(Value::as_bool) == Some(true)
                            || (r.trim().is_empty()
                                && p.get("signature").is_some_and(|s| !s.is_null()))
                        {
                            redacted = true;
                        } else {
                            reasoning.push(r);
                        }
                    }
                    other => text.push(format!(
                        "[{}]",
                        if other.is_empty() { "part" } else { other }
                    )),
                }
            }
            let reasoning = (!reasoning.is_empty()).then(|| reasoning.join("\n"));
            (text.join("\n"), reasoning, redacted)
        }
    }
}

/// A message as the chat template sees it, with its span source and whether its reasoning is
/// hidden.
fn message(m: &ChatMessage, att: &HashMap<String, String>) -> Option<(Message, Source, bool)> {
    let (content, reasoning, redacted) = content_text(&m.content, att);
    Some(match m.role.as_str() {
        "system" => (Message::new("system", content), Source::System, false),
        "user" => (Message::new("user", content), Source::User, false),
        "tool" => (
            Message::tool(m.tool_call_id.as_deref().unwrap_or(""), content),
            Source::Tool,
            false,
        ),
        "assistant" => {
            let tool_calls = m
                .tool_calls
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, c)| ToolCall {
                    id: c.id.clone().unwrap_or_else(|| format!("call_{i}")),
                    name: c.function.clone().unwrap_or_default(),
                    arguments: c
                        .arguments
                        .clone()
                        .unwrap_or_else(|| Value::Object(Map::new())),
                })
                .collect();
            (
                Message {
                    role: "assistant".into(),
                    content,
                    reasoning_content: reasoning,
                    tool_calls,
                    tool_call_id: None,
                },
                Source::Assistant,
                redacted,
            )
        }
        _ => return None,
    })
}

/// A message's identity within a sample: equal messages are one turn (the next call's input
/// repeats the conversation so far).
fn identity(m: &Message) -> String {
    serde_json::to_string(&json!([
        m.role,
        m.content,
        m.reasoning_content,
        m.tool_call_id,
        m.tool_calls
            .iter()
            .map(|c| json!([c.id, c.name, c.arguments]))
            .collect::<Vec<_>>()
    ]))
    .unwrap_or_default()
}

/// Inspect's score value as a reward: a number, a boolean, or the letters of its
/// `CORRECT`/`INCORRECT`/`PARTIAL`/`NOANSWER` (`C`/`I`/`P`/`N`); `None` for anything else (a
/// dict or list of values, free text).
fn score_value(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|x| x.is_finite()),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::String(s) => match s.as_str() {
            "C" => Some(1.0),
            "I" | "N" => Some(0.0),
            "P" => Some(0.5),
            other => other.trim().parse::<f64>().ok().filter(|x| x.is_finite()),
        },
        _ => None,
    }
}

/// One sample as a session, its evaluator calls and its scores.
fn read_sample(
    path: &Path,
    place: &Place,
    sample: Sample,
    epochs: &HashMap<String, usize>,
    job: &mut Job,
) -> Result<(Session, Extras)> {
    let id = id_text(&sample.id);
    let epoch = sample.epoch.unwrap_or(1);
    let several = epochs.get(&id).copied().unwrap_or(1) > 1;
    let execution = if several {
        format!("{id}/epoch-{epoch}")
    } else {
        id.clone()
    };
    let at = match &place.entry {
        Some(name) => PathBuf::from(format!("{}:{name}", path.display())),
        None => path.to_path_buf(),
    };
    let att = &sample.attachments;
    let mut turns: Vec<Turn> = Vec::new();
    let mut by_identity: HashMap<String, u32> = HashMap::new();
    // Output message id (or identity) → response index, for restoration.
    let mut outputs: HashMap<String, usize> = HashMap::new();
    let mut responses: Vec<Response> = Vec::new();
    let mut evaluator: Vec<bool> = Vec::new();
    let mut tools_seen: Option<Vec<Value>> = None;
    let mut tools_vary = false;
    // Open spans and steps: (id or name, type).
    let mut open: Vec<(String, String)> = Vec::new();
    let mut times: Vec<f64> = Vec::new();
    let mut hidden = 0u64;
    let mut skipped_roles = 0u64;
    for (k, ev) in sample.events.iter().enumerate() {
        if let Some(t) = ev
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(super::parse_timestamp)
        {
            times.push(t);
        }
        let kind = ev.get("event").and_then(Value::as_str).unwrap_or("");
        let str_of = |key: &str| ev.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
        match kind {
            "span_begin" => open.push((str_of("id"), str_of("type"))),
            "span_end" => {
                let sid = str_of("id");
                if let Some(i) = open.iter().rposition(|(s, _)| *s == sid) {
                    open.truncate(i);
                }
            }
            "step" => {
                let name = format!("step:{}", str_of("name"));
                if str_of("action") == "begin" {
                    open.push((name, str_of("type")));
                } else if let Some(i) = open.iter().rposition(|(s, _)| *s == name) {
                    open.truncate(i);
                }
            }
            "model" => {
                let m: ModelEvent = typed(ev).map_err(|(msg, field)| {
                    bad(
                        &at,
                        place.line,
                        msg,
                        Some(&super::input::sub_path(&format!("events[{k}]"), &field)),
                    )
                })?;
                let by_scorer = open.iter().any(|(_, t)| t == "scorer");
                let mut context = Vec::with_capacity(m.input.len());
                for msg in &m.input {
                    let Some((message, source, _)) = message(msg, att) else {
                        skipped_roles += 1;
                        continue;
                    };
                    let ident = identity(&message);
                    let restored = msg
                        .id
                        .as_ref()
                        .and_then(|i| outputs.get(i))
                        .or_else(|| outputs.get(&ident))
                        .copied()
                        .filter(|_| message.role == "assistant");
                    let key = match restored {
                        Some(r) => format!("response {r}"),
                        None => ident,
                    };
                    let turn = *by_identity.entry(key.clone()).or_insert_with(|| {
                        let mut t = Turn::new(&key, message, source);
                        t.response = restored;
                        turns.push(t);
                        turns.len() as u32 - 1
                    });
                    context.push(turn);
                }
                let Some(choice) = m.output.choices.first() else {
                    job.log.warn_grouped(
                        "inspect-no-choice",
                        format!(
                            "{execution}: a model event with no output choice (an error?) is \
                             not a request (events[{k}])"
                        ),
                    );
                    continue;
                };
                let Some((out, _, redacted)) = message(&choice.message, att) else {
                    continue;
                };
                let tools: Vec<Value> = m
                    .tools
                    .iter()
                    .map(|t| {
                        json!({"type": "function", "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.parameters,
                        }})
                    })
                    .collect();
                match &tools_seen {
                    None => tools_seen = Some(tools),
                    Some(seen) if *seen != tools => tools_vary = true,
                    Some(_) => {}
                }
                let r = responses.len();
                if let Some(i) = &choice.message.id {
                    outputs.insert(i.clone(), r);
                }
                outputs.insert(identity(&out), r);
                let not_trainable = redacted.then(|| REDACTED_REASONING.to_owned());
                if redacted {
                    hidden += 1;
                }
                let usage = m.output.usage.as_ref();
                let model = m.output.model.clone().or(m.model.clone());
                let anthropic = m
                    .model
                    .as_deref()
                    .is_some_and(|x| x.starts_with("anthropic/"));
                let usage_input = usage.and_then(|u| {
                    let base = u.input_tokens?;
                    Some(if anthropic {
                        base + u.input_tokens_cache_read.unwrap_or(0)
                            + u.input_tokens_cache_write.unwrap_or(0)
                    } else {
                        base
                    })
                });
                let mut meta = Map::new();
                meta.insert("event_index".into(), json!(k));
                if let Some(i) = &choice.message.id {
                    meta.insert("message_id".into(), json!(i));
                }
                if by_scorer {
                    meta.insert("scorer".into(), Value::Bool(true));
                }
                let source_line = match &place.entry {
                    Some(name) => format!("{}:{name}", file_name(path)),
                    None => format!("{}:{}", file_name(path), place.line),
                };
                meta.insert("source_line".into(), json!(source_line));
                responses.push(Response {
                    context,
                    message: out,
                    not_trainable,
                    agent: if by_scorer {
                        "scorer".into()
                    } else {
                        "main".into()
                    },
                    summary: false,
                    t: m.timestamp.as_deref().and_then(super::parse_timestamp),
                    model,
                    finish: choice.stop_reason.clone(),
                    meta,
                    usage_input,
                    usage_output: usage.and_then(|u| u.output_tokens),
                    line: place.line,
                });
                evaluator.push(by_scorer);
            }
            _ => {}
        }
    }
    if tools_vary {
        job.log.warn_grouped(
            "inspect-tools-vary",
            format!(
                "{execution}: the tools offered change between model calls; every request is \
                 rendered with the first call's tools"
            ),
        );
    }
    if skipped_roles > 0 {
        job.log.warn(format!(
            "{execution}: {skipped_roles} input messages of an unknown role are left out"
        ));
    }
    if hidden > 0 {
        job.log.warn(format!(
            "{execution}: {hidden} responses are not targets: their reasoning is logged redacted \
             (hidden reasoning)"
        ));
    }
    let t0 = times.iter().copied().fold(f64::INFINITY, f64::min);
    let t1 = times.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (t0, t1) = if times.is_empty() {
        (0.0, 0.0)
    } else {
        (t0, t1)
    };
    let mut assessments = Vec::new();
    let mut cmeta = Map::new();
    if let Some(scores) = &sample.scores {
        cmeta.insert("scores".into(), Value::Object(scores.clone()));
        for (name, s) in scores {
            let value = s.get("value").unwrap_or(&Value::Null);
            match score_value(value) {
                Some(score) => assessments.push(Logged {
                    score,
                    evaluator: format!("inspect scorer {name}"),
                    t: t1,
                    critique: s
                        .get("explanation")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                }),
                None => job.log.warn_grouped(
                    "inspect-score-not-number",
                    format!(
                        "{execution}: the score of `{name}` is not one number ({}): kept in the \
                         closure's meta.scores, not an assessment",
                        gyre_text::sanitize(
                            &value.to_string().chars().take(60).collect::<String>()
                        )
                    ),
                ),
            }
        }
    }
    if assessments.len() > 1 {
        job.log.warn_grouped(
            "inspect-several-scorers",
            format!(
                "{execution}: {} scores; the first ({}) is the reward, the others are kept as \
                 later assessments",
                assessments.len(),
                assessments[0].evaluator
            ),
        );
    }
    if job.opts.score.is_some() && !assessments.is_empty() {
        job.log.warn_grouped(
            "inspect-score-given",
            format!(
                "{execution}: --score is the reward; the log's own scores follow it as later \
                 assessments"
            ),
        );
    }
    let status = if sample.error.as_ref().is_some_and(|e| !e.is_null()) {
        ClosureStatus::Error
    } else if sample.limit.as_ref().is_some_and(|l| !l.is_null()) {
        ClosureStatus::Timeout
    } else {
        ClosureStatus::Completed
    };
    for (k, v) in [("error", &sample.error), ("limit", &sample.limit)] {
        if let Some(v) = v.as_ref().filter(|v| !v.is_null()) {
            cmeta.insert(k.into(), v.clone());
        }
    }
    let mut meta = place.eval.clone();
    meta.insert("source".into(), json!("inspect"));
    meta.insert("reconstructed".into(), Value::Bool(true));
    meta.insert("sample_id".into(), sample.id.clone());
    meta.insert("epoch".into(), json!(epoch));
    let task = sample.input.as_ref().map(|i| match i {
        Value::String(s) => s.chars().take(500).collect::<String>(),
        other => other.to_string().chars().take(500).collect(),
    });
    let extras = Extras {
        evaluator,
        assessments,
    };
    Ok((
        Session {
            execution,
            file: at,
            line: place.line,
            t: t0,
            task,
            meta,
            turns,
            tools: tools_seen.unwrap_or_default(),
            responses,
            closure: Closure {
                t: t1,
                status,
                artifact: json!("output"),
                version: Some(json!(1)),
                meta: cmeta,
            },
            group: several.then_some(id),
            scored: true,
        },
        extras,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_values() {
        assert_eq!(score_value(&json!("C")), Some(1.0));
        assert_eq!(score_value(&json!("I")), Some(0.0));
        assert_eq!(score_value(&json!("P")), Some(0.5));
        assert_eq!(score_value(&json!(0.25)), Some(0.25));
        assert_eq!(score_value(&json!(true)), Some(1.0));
        assert_eq!(score_value(&json!({"a": 1})), None);
        assert_eq!(score_value(&json!("maybe")), None);
    }
}
