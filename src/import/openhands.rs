//! OpenHands event streams → reconstructed executions (docs/import.md#openhands).
//!
//! Three shapes, one execution per event stream:
//! - a JSON document: an array of events, or an object holding one under `events` / `history`
//!   (a saved trajectory);
//! - a session's `events/` folder (one `<id>.json` file per event), or the session folder
//!   holding it;
//! - an evaluation `output.jsonl`: one instance per line (`instance_id`, `instruction`,
//!   `history`, `error`, `test_result`, `metadata`), one execution each.
//!
//! One request per distinct `tool_call_metadata.model_response.id` (the actions of one model
//! response share it); an agent `message`/`finish` action without metadata is a plain-text
//! response and a request of its own. The system prompt is the `system` action (with its tool
//! definitions), the runtime information the model was given is the `recall` observation.
//! Observations become tool results, linked to their call by `tool_call_metadata.tool_call_id`
//! or by `cause` (the id of the action they answer).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use color_eyre::eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::claude_code::SYSTEM_NOTE;
use super::convo::Turn;
use super::error::{bad, diag};
use super::input::{
    Counter, Lines, file_name, json_element_lines, line_of, line_values, parse_document,
    read_document, sub_path, typed,
};
use super::openai::ChatMessage;
use super::session::{Closure, Response, Session};
use super::sniff::{Fit, Probe, Shape};
use super::timestamp::parse_timestamp;
use super::{About, Importer, Job, Progress};
use crate::engine::record::{ClosureStatus, Source};
use crate::text::Message;

/// The OpenHands importer.
pub struct Openhands;

static ABOUT: About = About {
    name: "openhands",
    what: "an OpenHands event stream",
    summary: "OpenHands: an event stream, a session's events/ folder or an evaluation output.jsonl",
    input: "EVENTS",
    input_help: "A trajectory (JSON array of events), a session's events/ folder (or the session \
                 folder), or an evaluation output.jsonl",
    many: false,
    directories: true,
    reconstructed: true,
    help: "\
Examples:
  gyre import openhands trajectory.json --out trajectory.jsonl
  gyre import openhands ~/.openhands/sessions/<id>/events --score 0 --out session.jsonl
  gyre import openhands evaluation/outputs/…/output.jsonl --out instances.jsonl

output.jsonl holds one instance per line: one execution each (id = instance_id). docs/import.md
has the mapping.",
};

/// An event id: an integer, sometimes written as a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct EventId(i64);

impl<'de> Deserialize<'de> for EventId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(i) => Ok(EventId(i)),
            Raw::Text(s) => {
                s.trim().parse().map(EventId).map_err(|_| {
                    serde::de::Error::custom(format!("event id {s:?} is not a number"))
                })
            }
        }
    }
}

/// One event, as `event_to_dict` writes it (the fields used).
#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    id: Option<EventId>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    cause: Option<EventId>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    observation: Option<String>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    extras: Option<Value>,
    #[serde(default)]
    tool_call_metadata: Option<ToolCallMetadata>,
}

#[derive(Deserialize)]
struct ToolCallMetadata {
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    model_response: Option<ModelResponse>,
}

#[derive(Deserialize)]
struct ModelResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<ModelChoice>,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct ModelChoice {
    message: ChatMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// `args` of the `system` action (`SystemMessageAction`).
#[derive(Deserialize)]
struct SystemArgs {
    #[serde(default)]
    content: String,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    openhands_version: Option<String>,
    #[serde(default)]
    agent_class: Option<String>,
}

/// `args` of `message` and `finish` actions.
#[derive(Deserialize, Default)]
struct TextArgs {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    thought: Option<String>,
    #[serde(default)]
    final_thought: Option<String>,
}

/// `extras` of a `recall` observation (`RecallObservation`).
#[derive(Deserialize, Default)]
struct RecallExtras {
    #[serde(default)]
    recall_type: Option<String>,
    #[serde(default)]
    repo_name: Option<String>,
    #[serde(default)]
    repo_directory: Option<String>,
    #[serde(default)]
    repo_branch: Option<String>,
    #[serde(default)]
    repo_instructions: Option<String>,
    #[serde(default)]
    runtime_hosts: Option<Map<String, Value>>,
    #[serde(default)]
    additional_agent_instructions: Option<String>,
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    custom_secrets_descriptions: Option<Map<String, Value>>,
    #[serde(default)]
    conversation_instructions: Option<String>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    microagent_knowledge: Vec<Knowledge>,
}

#[derive(Deserialize)]
struct Knowledge {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    trigger: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

/// `extras` of `agent_state_changed`.
#[derive(Deserialize, Default)]
struct StateExtras {
    #[serde(default)]
    agent_state: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// One evaluation instance (a line of `output.jsonl`).
#[derive(Deserialize)]
struct Instance {
    instance_id: Value,
    #[serde(default)]
    instruction: Option<String>,
    #[serde(default)]
    history: Option<Vec<Value>>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    test_result: Option<Value>,
    #[serde(default)]
    metadata: Option<Value>,
}

impl Importer for Openhands {
    type Item = Session;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        let is_event = |keys: &[&str]| keys.contains(&"action") || keys.contains(&"observation");
        match &probe.shape {
            Shape::Directory { events } => {
                if events.is_some() {
                    Fit::Yes
                } else {
                    Fit::No
                }
            }
            Shape::Jsonl(_) => {
                let Some(o) = probe.first_object() else {
                    return Fit::No;
                };
                if o.contains_key("instance_id") {
                    return Fit::Yes;
                }
                for key in ["events", "history"] {
                    if let Some(keys) = probe.element_keys(Some(key)) {
                        return if is_event(&keys) { Fit::Yes } else { Fit::No };
                    }
                }
                if is_event(&o.keys().map(String::as_str).collect::<Vec<_>>()) {
                    Fit::Yes
                } else {
                    Fit::No
                }
            }
            Shape::Document(head) if head.array => match probe.element_keys(None) {
                Some(keys) if is_event(&keys) => Fit::Yes,
                Some(keys) if keys.is_empty() => Fit::Unknown,
                _ => Fit::No,
            },
            Shape::Document(head) => {
                for key in ["events", "history"] {
                    if head.has(key) {
                        return match head.element(key) {
                            Some([]) => Fit::Unknown,
                            Some(keys) => {
                                if keys.iter().any(|k| k == "action" || k == "observation") {
                                    Fit::Yes
                                } else {
                                    Fit::No
                                }
                            }
                            None => Fit::Unknown,
                        };
                    }
                }
                if head.has("instance_id") || head.has("instruction") {
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
        emit: &mut dyn FnMut(&mut Job, Session) -> Result<()>,
    ) -> Result<()> {
        for path in inputs {
            if path.is_dir() {
                let session = read_events_dir(path, job)?;
                emit(job, session)?;
            } else if is_output_jsonl(path) {
                read_output_jsonl(path, job, emit)?;
            } else {
                let session = read_document_stream(path, job)?;
                emit(job, session)?;
            }
        }
        Ok(())
    }

    fn records(&self, item: Session, job: &mut Job) -> Result<()> {
        super::session::records(item, job)
    }
}

/// Whether the file is an evaluation `output.jsonl` (its first line is an instance).
fn is_output_jsonl(path: &Path) -> bool {
    Probe::of(path)
        .first_object()
        .is_some_and(|o| o.contains_key("instance_id"))
}

/// Where an event was read.
#[derive(Clone)]
struct Pos {
    file: PathBuf,
    line: u64,
    /// JSON path of the event in its line or document (`[3]`, `history[3]`); empty for a
    /// file holding one event.
    path: String,
}

impl Pos {
    fn field(&self, inner: &str) -> String {
        if self.path.is_empty() {
            inner.to_owned()
        } else {
            sub_path(&self.path, inner)
        }
    }
}

/// The events of a stream, typed; a bad event is a problem at its position.
fn typed_events(raw: Vec<(Value, Pos)>, job: &mut Job) -> Vec<(Event, Pos)> {
    let mut out = Vec::with_capacity(raw.len());
    for (v, pos) in raw {
        if !v.is_object() {
            job.log.problem(diag(
                &pos.file,
                pos.line,
                "an event must be an object",
                Some(&pos.field(".")),
            ));
            continue;
        }
        match typed::<Event>(&v) {
            Ok(e) => out.push((e, pos)),
            Err((msg, field)) => {
                job.log
                    .problem(diag(&pos.file, pos.line, msg, Some(&pos.field(&field))))
            }
        }
    }
    out
}

/// A JSON document: an array of events or an object with `events` / `history`.
fn read_document_stream(path: &Path, job: &mut Job) -> Result<Session> {
    let text = read_document(path, &Counter::default())?;
    let doc = parse_document(path, &text)?;
    let (events, key) = match doc {
        Value::Array(a) => (a, None),
        Value::Object(mut o) => {
            let Some(k) = ["events", "history"]
                .into_iter()
                .find(|k| o.get(*k).is_some_and(Value::is_array))
            else {
                return Err(bad(
                    path,
                    1,
                    "not an OpenHands event stream: expected an array of events (or an object \
                     with `events` or `history`)",
                    None,
                ));
            };
            let Some(Value::Array(a)) = o.remove(k) else {
                unreachable!("checked to be an array")
            };
            (a, Some(k))
        }
        _ => {
            return Err(bad(
                path,
                1,
                "not an OpenHands event stream: expected an array of events",
                None,
            ));
        }
    };
    let lines = json_element_lines(&text, key);
    let raw = flatten_pairs(events)
        .into_iter()
        .map(|(i, v)| {
            let pos = Pos {
                file: path.to_path_buf(),
                line: line_of(&lines, i),
                path: match key {
                    Some(k) => format!("{k}[{i}]"),
                    None => format!("[{i}]"),
                },
            };
            (v, pos)
        })
        .collect();
    let events = typed_events(raw, job);
    job.log.check()?;
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "events".into());
    let mut s = build(path, 0, id, events, job)?;
    s.meta.insert("events_file".into(), json!(file_name(path)));
    Ok(s)
}

/// The old evaluation format keeps `history` as `[action, observation]` pairs: flattened, each
/// element keeping the index of its pair.
fn flatten_pairs(events: Vec<Value>) -> Vec<(usize, Value)> {
    let mut out = Vec::with_capacity(events.len());
    for (i, e) in events.into_iter().enumerate() {
        match e {
            Value::Array(pair) => out.extend(pair.into_iter().map(|v| (i, v))),
            v => out.push((i, v)),
        }
    }
    out
}

/// A session's `events/` folder (or the session folder holding it): `<id>.json` files in id
/// order.
fn read_events_dir(dir: &Path, job: &mut Job) -> Result<Session> {
    let Shape::Directory {
        events: Some(events),
    } = Probe::of(dir).shape
    else {
        return Err(bad(
            dir,
            0,
            "not an OpenHands session folder: no `<id>.json` event files in it or in an \
             `events/` folder inside it",
            None,
        ));
    };
    let mut files: Vec<(i64, PathBuf)> = std::fs::read_dir(&events)
        .map_err(|e| bad(&events, 0, super::input::io_reason(&e), None))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let id = p.file_stem()?.to_str()?.parse::<i64>().ok()?;
            (p.extension()? == "json" && p.is_file()).then_some((id, p))
        })
        .collect();
    files.sort();
    let total = files.len() as u64;
    let mut raw = Vec::with_capacity(files.len());
    for (k, (_, file)) in files.iter().enumerate() {
        (job.progress)(Progress::Reading {
            done: k as u64,
            total,
        });
        let parsed =
            read_document(file, &Counter::default()).and_then(|text| parse_document(file, &text));
        match parsed {
            Ok(v) => raw.push((
                v,
                Pos {
                    file: file.clone(),
                    line: 1,
                    path: String::new(),
                },
            )),
            Err(e) => match e.downcast::<super::error::InputError>() {
                Ok(ie) => ie.diagnostics.into_iter().for_each(|d| job.log.problem(d)),
                Err(e) => return Err(e),
            },
        }
    }
    let events = typed_events(raw, job);
    job.log.check()?;
    // The session is named by its folder (`sessions/<id>/events`).
    let session_dir = match dir.file_name() {
        Some(n) if n == "events" => dir
            .parent()
            .filter(|p| p.file_name().is_some())
            .unwrap_or(dir),
        _ => dir,
    };
    let id = session_dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    let mut s = build(dir, 0, id, events, job)?;
    s.meta.insert("event_files".into(), json!(total));
    Ok(s)
}

/// An evaluation `output.jsonl`: one execution per instance line, streamed.
fn read_output_jsonl(
    path: &Path,
    job: &mut Job,
    emit: &mut dyn FnMut(&mut Job, Session) -> Result<()>,
) -> Result<()> {
    let total = std::fs::metadata(path).map_or(0, |m| m.len());
    let counter = Counter::default();
    let mut lines = Lines::open(path, &counter)?;
    let mut seen: HashMap<String, u64> = HashMap::new();
    while let Some(next) = lines.next_line() {
        (job.progress)(Progress::Reading {
            done: counter.get(),
            total,
        });
        let (n, text) = match next {
            Ok(l) => l,
            Err(d) => {
                job.log.problem(d);
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let (values, err) = line_values(text);
        if let Some(e) = err {
            job.log.problem(diag(path, n, e, None));
            continue;
        }
        for v in values {
            let inst: Instance = match typed(&v) {
                Ok(i) => i,
                Err((msg, field)) => {
                    job.log.problem(diag(path, n, msg, Some(&field)));
                    continue;
                }
            };
            let id = match &inst.instance_id {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if let Some(first) = seen.insert(id.clone(), n) {
                job.log.problem(diag(
                    path,
                    n,
                    format!("instance {id:?} is already on line {first}"),
                    Some("instance_id"),
                ));
                continue;
            }
            let raw = flatten_pairs(inst.history.clone().unwrap_or_default())
                .into_iter()
                .map(|(i, v)| {
                    (
                        v,
                        Pos {
                            file: path.to_path_buf(),
                            line: n,
                            path: format!("history[{i}]"),
                        },
                    )
                })
                .collect();
            let events = typed_events(raw, job);
            if job.log.has_problems() {
                continue;
            }
            let session = instance_session(path, n, id, inst, events, job)?;
            emit(job, session)?;
        }
    }
    Ok(())
}

/// An instance's session: its events, with the instance's outcome in the closure.
fn instance_session(
    path: &Path,
    n: u64,
    id: String,
    inst: Instance,
    events: Vec<(Event, Pos)>,
    job: &mut Job,
) -> Result<Session> {
    let mut s = build(path, n, id.clone(), events, job)?;
    if s.task.is_none() {
        s.task = inst
            .instruction
            .as_ref()
            .map(|t| t.chars().take(500).collect());
    }
    s.meta.insert("instance_id".into(), json!(id));
    s.meta.insert(
        "source_line".into(),
        json!(format!("{}:{n}", file_name(path))),
    );
    if let Some(m) = &inst.metadata {
        for (k, v) in [
            ("agent_class", m.get("agent_class")),
            ("model", m.get("llm_config").and_then(|c| c.get("model"))),
            ("max_iterations", m.get("max_iterations")),
            ("dataset", m.get("dataset")),
        ] {
            if let Some(v) = v.filter(|v| !v.is_null()) {
                s.meta.insert(k.into(), v.clone());
            }
        }
    }
    if let Some(e) = inst.error.as_deref().filter(|e| !e.trim().is_empty()) {
        s.closure.status = status_of_error(e);
        s.closure.meta.insert("error".into(), json!(e));
    }
    // A SWE-bench instance is assessed on its patch; without one there is no assessable work.
    if let Some(tr) = inst.test_result.as_ref().and_then(Value::as_object) {
        if let Some(patch) = tr.get("git_patch") {
            let empty = patch.as_str().is_none_or(|p| p.trim().is_empty());
            if empty {
                s.closure.artifact = Value::Null;
                s.closure.version = None;
            } else {
                s.closure.artifact = json!("git_patch");
                s.closure.version = Some(json!(1));
            }
        }
    }
    Ok(s)
}

/// Closure status of a run that ended with `error`: a limit (iterations, budget) is
/// `timeout`, anything else `error`.
fn status_of_error(error: &str) -> ClosureStatus {
    let e = error.to_ascii_lowercase();
    if e.contains("maximum iteration")
        || e.contains("max iteration")
        || e.contains("maximum budget")
        || e.contains("timeout")
        || e.contains("timed out")
    {
        ClosureStatus::Timeout
    } else {
        ClosureStatus::Error
    }
}

/// What an event contributes to the model's conversation.
enum Item {
    /// The system prompt and the tool definitions sent with every call.
    System {
        content: String,
        tools: Vec<Value>,
        meta: Map<String, Value>,
    },
    /// A message turn (user, tool result, recalled runtime information).
    Turn(Turn),
    /// A model response (its first event).
    Response(Box<Response>),
    /// A response already counted (another action of the same model response).
    Same,
    /// The agent finished (`finish` action).
    Finish,
    /// The agent's state changed.
    State(StateExtras),
    /// Bookkeeping the model never sees (`null` observations, the `recall` request, state
    /// changes asked for).
    Bookkeeping,
    /// An event the model may have seen in some form that is not reconstructed (a command the
    /// user ran, a condensation): named for the warning.
    Skip(String),
}

/// What an event is. The `system` action is checked before anything depends on the event's
/// source: OpenHands writes it with `source: "agent"`.
fn classify(
    e: &Event,
    i: usize,
    pos: &Pos,
    call_of_event: &mut HashMap<EventId, String>,
    responses_seen: &mut HashMap<String, usize>,
) -> Result<Item, (String, String)> {
    let identity = format!("event {i}");
    let source = e.source.as_deref().unwrap_or("");
    let t = e.timestamp.as_deref().and_then(parse_timestamp);
    let meta = |extra: &[(&str, Value)]| {
        let mut m = Map::new();
        m.insert("event_id".into(), json!(e.id.map(|i| i.0)));
        m.insert(
            "source_line".into(),
            json!(format!("{}:{}", file_name(&pos.file), pos.line)),
        );
        for (k, v) in extra {
            m.insert((*k).into(), v.clone());
        }
        m
    };
    let args = |path: &str| -> Result<TextArgs, (String, String)> {
        match &e.args {
            Some(a) => typed::<TextArgs>(a).map_err(|(m, p)| (m, sub_path(path, &p))),
            None => Ok(TextArgs::default()),
        }
    };
    if let Some(action) = e.action.as_deref() {
        if action == "system" {
            let a: SystemArgs = match &e.args {
                Some(a) => typed(a).map_err(|(m, p)| (m, sub_path("args", &p)))?,
                None => return Err(("missing field `args`".into(), "args".into())),
            };
            let mut m = Map::new();
            if let Some(v) = a.openhands_version {
                m.insert("openhands_version".into(), json!(v));
            }
            if let Some(c) = a.agent_class {
                m.insert("agent_class".into(), json!(c));
            }
            return Ok(Item::System {
                content: a.content,
                tools: a.tools.unwrap_or_default(),
                meta: m,
            });
        }
        if source == "agent" {
            if let Some(tcm) = &e.tool_call_metadata {
                if let (Some(id), Some(c)) = (e.id, &tcm.tool_call_id) {
                    call_of_event.insert(id, c.clone());
                }
                let Some(mr) = &tcm.model_response else {
                    return Err((
                        "tool_call_metadata without model_response".into(),
                        "tool_call_metadata.model_response".into(),
                    ));
                };
                let rid = mr.id.clone().unwrap_or_else(|| format!("event-{i}"));
                if responses_seen.contains_key(&rid) {
                    return Ok(if action == "finish" {
                        Item::Finish
                    } else {
                        Item::Same
                    });
                }
                let Some(choice) = mr.choices.first() else {
                    return Err((
                        "model_response has no choices[0].message".into(),
                        "tool_call_metadata.model_response.choices".into(),
                    ));
                };
                responses_seen.insert(rid.clone(), i);
                let mut m = meta(&[("response_id", json!(rid))]);
                if let Some(u) = &mr.usage {
                    m.insert("usage".into(), u.clone());
                }
                let usage_input = mr
                    .usage
                    .as_ref()
                    .and_then(|u| u.get("prompt_tokens"))
                    .and_then(Value::as_u64);
                if action == "finish" {
                    m.insert("finish_action".into(), Value::Bool(true));
                }
                return Ok(Item::Response(Box::new(Response {
                    context: Vec::new(),
                    message: choice.message.assistant(),
                    agent: "main".into(),
                    summary: false,
                    t,
                    model: mr.model.clone(),
                    finish: choice.finish_reason.clone(),
                    meta: m,
                    usage_input,
                    line: pos.line,
                })));
            }
            if action == "message" || action == "finish" {
                // A plain-text model response (OpenHands keeps no metadata for it).
                let a = args("args")?;
                let content = [a.content, a.thought, a.final_thought]
                    .into_iter()
                    .flatten()
                    .find(|s| !s.is_empty())
                    .or_else(|| e.message.clone())
                    .unwrap_or_default();
                let mut m = meta(&[("response_id", Value::Null)]);
                if action == "finish" {
                    m.insert("finish_action".into(), Value::Bool(true));
                }
                return Ok(Item::Response(Box::new(Response {
                    context: Vec::new(),
                    message: Message {
                        reasoning_content: Some(String::new()),
                        ..Message::new("assistant", content)
                    },
                    agent: "main".into(),
                    summary: false,
                    t,
                    model: None,
                    finish: None,
                    meta: m,
                    usage_input: None,
                    line: pos.line,
                })));
            }
            return Ok(Item::Skip(format!("{source} action {action:?}")));
        }
        if action == "message" && source == "user" {
            let a = args("args")?;
            let content = a.content.or_else(|| e.message.clone()).unwrap_or_default();
            return Ok(Item::Turn(Turn::new(
                &identity,
                Message::new("user", content),
                Source::User,
            )));
        }
        if matches!(action, "recall" | "change_agent_state") {
            return Ok(Item::Bookkeeping);
        }
        return Ok(Item::Skip(format!("{source} action {action:?}")));
    }
    let Some(obs) = e.observation.as_deref() else {
        return Err((
            "neither an action nor an observation".into(),
            "action".into(),
        ));
    };
    let extras = e.extras.clone().unwrap_or(Value::Null);
    match obs {
        "agent_state_changed" => {
            let s: StateExtras = typed(&extras).unwrap_or_default();
            return Ok(Item::State(s));
        }
        "recall" => {
            let r: RecallExtras = typed(&extras).map_err(|(m, p)| (m, sub_path("extras", &p)))?;
            return Ok(match recall_text(&r) {
                Some(text) => Item::Turn(Turn::new(
                    &identity,
                    Message::new("user", text),
                    Source::User,
                )),
                None => Item::Bookkeeping,
            });
        }
        "null" => return Ok(Item::Bookkeeping),
        _ => {}
    }
    let call = e
        .tool_call_metadata
        .as_ref()
        .and_then(|m| m.tool_call_id.clone())
        .or_else(|| e.cause.and_then(|c| call_of_event.get(&c).cloned()));
    let mut content = e
        .content
        .clone()
        .or_else(|| e.message.clone())
        .unwrap_or_default();
    if obs == "error" {
        // What OpenHands appends when it shows an error to the model.
        content.push_str("\n[Error occurred in processing last action]");
    }
    if obs == "run" {
        // A command's output reaches the model between the shell metadata's prefix and suffix
        // (`[The command completed with exit code 0.]`).
        let meta = extras.get("metadata");
        let part = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        content = format!("{}{content}{}", part("prefix"), part("suffix"));
    }
    Ok(match call {
        Some(call) => Item::Turn(Turn::new(
            &identity,
            Message::tool(&call, content),
            Source::Tool,
        )),
        None if obs == "error" || obs == "condense" => Item::Turn(Turn::new(
            &identity,
            Message::new("user", content),
            if obs == "condense" {
                Source::Summary
            } else {
                Source::User
            },
        )),
        None => Item::Skip(format!("observation {obs:?} without a call")),
    })
}

/// The runtime information a `recall` observation gave the model, rendered from its fields as
/// OpenHands' prompt extensions lay them out (tagged sections; their exact wording is not in
/// the log). `None` when it carries nothing.
fn recall_text(r: &RecallExtras) -> Option<String> {
    let nonempty = |s: &Option<String>| {
        s.as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    let mut parts = Vec::new();
    if r.recall_type.as_deref() != Some("knowledge") {
        let (name, dir) = (nonempty(&r.repo_name), nonempty(&r.repo_directory));
        if name.is_some() || dir.is_some() {
            let branch = nonempty(&r.repo_branch)
                .map(|b| format!(" (branch {b})"))
                .unwrap_or_default();
            parts.push(format!(
                "<REPOSITORY_INFO>\nRepository {}{branch} is checked out in {}.\n</REPOSITORY_INFO>",
                name.unwrap_or_default(),
                dir.unwrap_or_default()
            ));
        }
        if let Some(i) = nonempty(&r.repo_instructions) {
            parts.push(format!(
                "<REPOSITORY_INSTRUCTIONS>\n{i}\n</REPOSITORY_INSTRUCTIONS>"
            ));
        }
        let mut runtime = Vec::new();
        if let Some(hosts) = r.runtime_hosts.as_ref().filter(|h| !h.is_empty()) {
            runtime.push("Hosts for web applications (use their ports):".to_owned());
            for (host, port) in hosts {
                runtime.push(format!("* {host} (port {port})"));
            }
        }
        if let Some(a) = nonempty(&r.additional_agent_instructions) {
            runtime.push(a);
        }
        if let Some(secrets) = r
            .custom_secrets_descriptions
            .as_ref()
            .filter(|s| !s.is_empty())
        {
            runtime.push("<CUSTOM_SECRETS>".to_owned());
            for (name, desc) in secrets {
                let desc = desc
                    .as_str()
                    .map_or_else(|| desc.to_string(), str::to_owned);
                runtime.push(format!("* ${name}: {desc}"));
            }
            runtime.push("</CUSTOM_SECRETS>".to_owned());
        }
        if let Some(d) = nonempty(&r.working_dir) {
            runtime.push(format!("Working directory: {d}"));
        }
        if let Some(d) = nonempty(&r.date) {
            runtime.push(format!("Today's date is {d} (UTC)."));
        }
        if !runtime.is_empty() {
            parts.push(format!(
                "<RUNTIME_INFORMATION>\n{}\n</RUNTIME_INFORMATION>",
                runtime.join("\n")
            ));
        }
        if let Some(c) = nonempty(&r.conversation_instructions) {
            parts.push(format!(
                "<CONVERSATION_INSTRUCTIONS>\n{c}\n</CONVERSATION_INSTRUCTIONS>"
            ));
        }
    }
    for k in &r.microagent_knowledge {
        let Some(content) = nonempty(&k.content) else {
            continue;
        };
        let why = match (nonempty(&k.trigger), nonempty(&k.name)) {
            (Some(t), _) => format!("Matched by the keyword \"{t}\":"),
            (None, Some(n)) => format!("From {n}:"),
            (None, None) => String::new(),
        };
        parts.push(format!("<EXTRA_INFO>\n{why}\n\n{content}\n</EXTRA_INFO>"));
    }
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// A stream's events → a [`Session`]: classified in order, then every response's context is
/// the conversation before it.
fn build(
    file: &Path,
    line: u64,
    execution: String,
    events: Vec<(Event, Pos)>,
    job: &mut Job,
) -> Result<Session> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut order: Vec<Entry> = Vec::new();
    let mut responses: Vec<Response> = Vec::new();
    let mut call_of_event: HashMap<EventId, String> = HashMap::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut system: Option<(u32, Vec<Value>, Map<String, Value>)> = None;
    let (mut first_t, mut last_t) = (None, None);
    let mut finished = false;
    let mut state: Option<StateExtras> = None;
    let mut task: Option<String> = None;
    let mut skipped: std::collections::BTreeMap<String, usize> = Default::default();
    let mut prev_user = false;
    let n_events = events.len();
    for (i, (e, pos)) in events.iter().enumerate() {
        if let Some(t) = e.timestamp.as_deref().and_then(parse_timestamp) {
            first_t.get_or_insert(t);
            last_t = Some(t);
        }
        let item = match classify(e, i, pos, &mut call_of_event, &mut seen) {
            Ok(item) => item,
            Err((msg, field)) => {
                job.log
                    .problem(diag(&pos.file, pos.line, msg, Some(&pos.field(&field))));
                continue;
            }
        };
        match item {
            Item::System {
                content,
                tools,
                meta,
            } => {
                if system.is_none() {
                    turns.push(Turn::new(
                        &format!("event {i}"),
                        Message::new("system", content),
                        Source::System,
                    ));
                    system = Some((turns.len() as u32 - 1, tools, meta));
                }
                prev_user = false;
            }
            Item::Turn(mut t) => {
                let user = t.msg.role == "user";
                if user && task.is_none() && t.source == Source::User {
                    task = Some(t.msg.content.chars().take(500).collect());
                }
                // OpenHands separates consecutive user messages with a blank line.
                if user && prev_user && !t.msg.content.is_empty() {
                    t.msg.content.insert_str(0, "\n\n");
                }
                prev_user = user;
                turns.push(t);
                order.push(Entry::Turn(turns.len() as u32 - 1));
            }
            Item::Response(r) => {
                finished |= r.meta.get("finish_action") == Some(&Value::Bool(true));
                responses.push(*r);
                order.push(Entry::Response(responses.len() - 1));
                prev_user = false;
            }
            Item::Finish => finished = true,
            Item::State(s) => state = Some(s),
            Item::Same | Item::Bookkeeping => {}
            Item::Skip(what) => *skipped.entry(what).or_default() += 1,
        }
    }
    job.log.check()?;
    if !skipped.is_empty() {
        let n: usize = skipped.values().sum();
        let kinds: Vec<String> = skipped.iter().map(|(k, c)| format!("{k} ×{c}")).collect();
        job.log.warn(format!(
            "{execution}: {} not reconstructed as context ({})",
            crate::report::plural(n, "event"),
            kinds.join(", ")
        ));
    }
    let has_system = system.is_some();
    let (sys, tools, sys_meta) = match system {
        Some(s) => s,
        None => {
            turns.push(Turn::new(
                "system stand-in",
                Message::new("system", SYSTEM_NOTE.replace("Claude Code", "OpenHands")),
                Source::System,
            ));
            (turns.len() as u32 - 1, Vec::new(), Map::new())
        }
    };
    // Assistant turns, then contexts: everything before each response, in stream order.
    let mut resp_turn = vec![0u32; responses.len()];
    for (r, resp) in responses.iter().enumerate() {
        let mut t = Turn::new(
            &format!("response {r}"),
            resp.message.clone(),
            Source::Assistant,
        );
        t.response = Some(r);
        turns.push(t);
        resp_turn[r] = turns.len() as u32 - 1;
    }
    let mut ctx = vec![sys];
    for entry in &order {
        match entry {
            Entry::Turn(k) => ctx.push(*k),
            Entry::Response(r) => {
                responses[*r].context = ctx.clone();
                ctx.push(resp_turn[*r]);
            }
        }
    }
    let t0 = first_t.unwrap_or(0.0);
    let mut meta = Map::new();
    meta.insert("source".into(), json!("openhands"));
    meta.insert("reconstructed".into(), Value::Bool(true));
    meta.insert("events".into(), json!(n_events));
    meta.extend(sys_meta);
    if has_system {
        if !tools.is_empty() {
            meta.insert("tools".into(), json!(tools.len()));
        }
    } else {
        meta.insert(
            "system_prompt".into(),
            json!("not in the event stream (stand-in segment)"),
        );
    }
    let mut cmeta = Map::new();
    let status = match &state {
        Some(StateExtras {
            agent_state: Some(s),
            reason,
        }) if s == "error" => {
            let reason = reason.clone().unwrap_or_default();
            cmeta.insert("agent_state".into(), json!(s));
            if !reason.is_empty() {
                cmeta.insert("error".into(), json!(reason));
            }
            status_of_error(&reason)
        }
        Some(StateExtras {
            agent_state: Some(s),
            ..
        }) => {
            cmeta.insert("agent_state".into(), json!(s));
            ClosureStatus::Completed
        }
        _ => ClosureStatus::Completed,
    };
    cmeta.insert("finish_action".into(), Value::Bool(finished));
    Ok(Session {
        execution,
        file: file.to_path_buf(),
        line,
        t: t0,
        task,
        meta,
        turns,
        tools,
        responses,
        closure: Closure {
            t: last_t.unwrap_or(t0),
            status,
            artifact: json!("session"),
            version: Some(json!(1)),
            meta: cmeta,
        },
    })
}

/// A place in the conversation: a message turn or a response.
enum Entry {
    Turn(u32),
    Response(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_timeouts() {
        assert_eq!(
            status_of_error(
                "RuntimeError: Agent reached maximum iteration. Current iteration: 30, max \
                 iteration: 30"
            ),
            ClosureStatus::Timeout
        );
        assert_eq!(
            status_of_error("Agent reached maximum iteration in headless mode"),
            ClosureStatus::Timeout
        );
        assert_eq!(
            status_of_error("AgentRuntimeDisconnectedError: runtime died"),
            ClosureStatus::Error
        );
    }

    #[test]
    fn recall_renders_its_fields() {
        let r: RecallExtras = serde_json::from_value(json!({
            "recall_type": "workspace_context", "repo_name": "o/r", "repo_directory": "/w/r",
            "runtime_hosts": {"http://localhost:51234": 51234}, "date": "2025-05-01",
            "microagent_knowledge": [{"name": "gh", "trigger": "github", "content": "Use gh."}]
        }))
        .unwrap();
        let t = recall_text(&r).unwrap();
        assert!(t.starts_with("<REPOSITORY_INFO>\nRepository o/r is checked out in /w/r."));
        assert!(t.contains("* http://localhost:51234 (port 51234)"));
        assert!(t.contains("Today's date is 2025-05-01 (UTC)."));
        assert!(t.ends_with("Matched by the keyword \"github\":\n\nUse gh.\n</EXTRA_INFO>"));
        assert!(recall_text(&RecallExtras::default()).is_none());
    }
}
