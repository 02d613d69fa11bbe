//! The shapes OpenHands keeps events in: a JSON document (an array, or an object with `events` /
//! `history`), a session's `events/` folder (one `<id>.json` per event), and an evaluation
//! `output.jsonl` (one instance per line, each an execution with its outcome).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use eyre::Result;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{bad, diag};
use crate::input::{
    Counter, file_name, json_element_lines, line_of, line_values, parse_document, read_document,
    sub_path, typed, typed_values,
};
use crate::session::Session;
use crate::sniff::{Probe, Shape, is_v1_event, v1_event_index, v1_events_dir};
use crate::{Job, Progress};
use gyre_engine::record::ClosureStatus;

use super::conversation::build;
use super::events::{Event, classify_all};
use super::legacy;
use super::v1;

/// One evaluation instance (a line of `output.jsonl`), or one issue of the resolver's
/// `output.jsonl` (`issue`, `git_patch`, `success`, no `instance_id`).
#[derive(Deserialize)]
struct Instance {
    #[serde(default)]
    instance_id: Option<Value>,
    /// The resolver's issue number, when written beside the issue.
    #[serde(default)]
    number: Option<Value>,
    /// The issue the resolver worked on (`owner`, `repo`, `number`, `title`, `body`).
    #[serde(default)]
    issue: Option<Value>,
    /// The resolver's patch (an evaluation keeps it in `test_result.git_patch`).
    #[serde(default)]
    git_patch: Option<Value>,
    /// The resolver's verdict on its own run.
    #[serde(default)]
    success: Option<bool>,
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
    /// The run's cost accounting: `costs` has one entry per priced model call.
    #[serde(default)]
    metrics: Option<Value>,
}

/// Whether the file is an evaluation or resolver `output.jsonl` (its first line is an
/// instance).
pub(super) fn is_output_jsonl(probe: &Probe) -> bool {
    probe.first_object().is_some_and(is_instance)
}

/// Whether a JSON object is one instance: an evaluation's (`instance_id`) or the resolver's (a
/// `history` with the `issue` it resolved).
fn is_instance(o: &serde_json::Map<String, Value>) -> bool {
    o.contains_key("instance_id")
        || (o.contains_key("history") && (o.contains_key("issue") || o.contains_key("number")))
}

/// An instance's execution id: `instance_id`, else the resolver's `issue-<number>`, else the
/// line it is on.
fn instance_id(inst: &Instance, n: u64) -> String {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match (&inst.instance_id, issue_number(inst)) {
        (Some(id), _) if !id.is_null() => text(id),
        (_, Some(num)) if !num.is_null() => format!("issue-{}", text(num)),
        _ => format!("line-{n}"),
    }
}

/// The resolver's issue number: beside the issue, or in it (`issue.number`, as the resolver
/// writes it).
fn issue_number(inst: &Instance) -> Option<&Value> {
    inst.number
        .as_ref()
        .or_else(|| inst.issue.as_ref().and_then(|i| i.get("number")))
}

/// Where an event was read.
#[derive(Clone)]
pub(super) struct Pos {
    pub(super) file: PathBuf,
    pub(super) line: u64,
    /// JSON path of the event in its line or document (`[3]`, `history[3]`); empty for a
    /// file holding one event.
    pub(super) path: String,
}

impl Pos {
    pub(super) fn field(&self, inner: &str) -> String {
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
    for (mut v, pos) in raw {
        legacy::lift(&mut v);
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
pub(super) fn read_document_stream(path: &Path, job: &mut Job) -> Result<Session> {
    let text = read_document(path, &Counter::default())?;
    let doc = parse_document(path, &text)?;
    let (events, key) = match doc {
        Value::Array(a) => (a, None),
        // One evaluation instance saved on its own: read as it is inside output.jsonl (the
        // same closure, from its `error` and patch).
        Value::Object(o) if is_instance(&o) && o.get("history").is_some_and(Value::is_array) => {
            return read_instance_document(path, &text, Value::Object(o), job);
        }
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
    let mut s = build(path, 0, id, classify_all(&events), job)?;
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

/// One JSON event per file, in the order given (`total` of them, for progress); a file that is
/// not JSON is a problem at its line, and reading goes on.
fn read_event_files<'a>(
    files: impl Iterator<Item = &'a Path>,
    total: u64,
    job: &mut Job,
) -> Result<Vec<(Value, Pos)>> {
    let mut raw = Vec::with_capacity(total as usize);
    for (k, file) in files.enumerate() {
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
                    file: file.to_path_buf(),
                    line: 1,
                    path: String::new(),
                },
            )),
            Err(e) => match e.downcast::<crate::error::InputError>() {
                Ok(ie) => ie.diagnostics.into_iter().for_each(|d| job.log.problem(d)),
                Err(e) => return Err(e),
            },
        }
    }
    Ok(raw)
}

/// A session's `events/` folder (or the session folder holding it): `<id>.json` files in id
/// order.
pub(super) fn read_events_dir(dir: &Path, job: &mut Job) -> Result<Session> {
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
        .map_err(|e| bad(&events, 0, crate::input::io_reason(&e), None))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let id = p.file_stem()?.to_str()?.parse::<i64>().ok()?;
            (p.extension()? == "json" && p.is_file()).then_some((id, p))
        })
        .collect();
    files.sort();
    let total = files.len() as u64;
    let raw = read_event_files(files.iter().map(|(_, f)| f.as_path()), total, job)?;
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
    let mut s = build(dir, 0, id, classify_all(&events), job)?;
    s.meta.insert("event_files".into(), json!(total));
    Ok(s)
}

/// An evaluation `output.jsonl`: one execution per instance line, streamed.
pub(super) fn read_output_jsonl(
    path: &Path,
    job: &mut Job,
    emit: &mut dyn FnMut(&mut Job, Session) -> Result<()>,
) -> Result<()> {
    let total = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut seen: HashMap<String, u64> = HashMap::new();
    typed_values(
        path,
        &Counter::default(),
        total,
        job,
        &mut |job, n, inst: Instance| {
            let id = instance_id(&inst, n);
            if let Some(first) = seen.insert(id.clone(), n) {
                job.log.problem(diag(
                    path,
                    n,
                    format!("instance {id:?} is already on line {first}"),
                    Some("instance_id"),
                ));
                return Ok(());
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
                return Ok(());
            }
            let session = instance_session(path, n, id, inst, events, job)?;
            emit(job, session)
        },
    )
}

/// One instance saved as its own JSON document.
fn read_instance_document(path: &Path, text: &str, doc: Value, job: &mut Job) -> Result<Session> {
    let inst: Instance = typed(&doc).map_err(|(msg, field)| bad(path, 1, msg, Some(&field)))?;
    let lines = json_element_lines(text, Some("history"));
    let raw = flatten_pairs(inst.history.clone().unwrap_or_default())
        .into_iter()
        .map(|(i, v)| {
            (
                v,
                Pos {
                    file: path.to_path_buf(),
                    line: line_of(&lines, i),
                    path: format!("history[{i}]"),
                },
            )
        })
        .collect();
    let events = typed_events(raw, job);
    job.log.check()?;
    let id = instance_id(&inst, 1);
    let mut s = instance_session(path, 1, id, inst, events, job)?;
    s.meta.insert("events_file".into(), json!(file_name(path)));
    Ok(s)
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
    let mut s = build(path, n, id.clone(), classify_all(&events), job)?;
    // Only priced calls are in `costs` (a local model costs nothing and adds none): an empty
    // list says nothing.
    let costs = inst
        .metrics
        .as_ref()
        .and_then(|m| m.get("costs"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if costs > 0 && costs != s.responses.len() {
        job.log.warn_grouped(
            "openhands-costs",
            format!(
                "{id}: metrics.costs lists {costs} priced model calls, the history shows {} \
                 (a call whose events were lost, or one the history never shows, such as a \
                 condenser's summary)",
                gyre_engine::report::plural(s.responses.len(), "response")
            ),
        );
    }
    if s.task.is_none() {
        s.task = inst
            .instruction
            .as_ref()
            .map(|t| t.chars().take(500).collect());
    }
    if let Some(num) = issue_number(&inst).filter(|_| inst.instance_id.is_none()) {
        s.meta.insert("issue_number".into(), num.clone());
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
    if let Some(ok) = inst.success {
        s.closure.meta.insert("success".into(), json!(ok));
    }
    // A SWE-bench instance (or a resolved issue) is assessed on its patch; without one there is
    // no assessable work.
    let patch = inst
        .test_result
        .as_ref()
        .and_then(|tr| tr.get("git_patch"))
        .or(inst.git_patch.as_ref());
    if let Some(patch) = patch {
        let empty = patch.as_str().is_none_or(|p| p.trim().is_empty());
        if empty {
            s.closure.artifact = Value::Null;
            s.closure.version = None;
        } else {
            s.closure.artifact = json!("git_patch");
            s.closure.version = Some(json!(1));
        }
    }
    Ok(s)
}

/// Closure status of a run that ended with `error`: a limit (iterations, budget) is
/// `timeout`, anything else `error`.
pub(super) fn status_of_error(error: &str) -> ClosureStatus {
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

/// An OpenHands V1 conversation: its `events/` folder of `event-<n>-<uuid>.json` files (or the
/// conversation folder holding it, with `base_state.json`), in index order.
pub(super) fn read_v1_dir(dir: &Path, job: &mut Job) -> Result<Session> {
    let Some(events) = v1_events_dir(dir) else {
        return Err(bad(
            dir,
            0,
            "not an OpenHands V1 conversation: no `event-<n>-<id>.json` files in it or in an \
             `events/` folder inside it",
            None,
        ));
    };
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(&events)
        .map_err(|e| bad(&events, 0, crate::input::io_reason(&e), None))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let n = v1_event_index(&p.file_name()?.to_string_lossy())?;
            p.is_file().then_some((n, p))
        })
        .collect();
    files.sort();
    let total = files.len() as u64;
    let raw = read_event_files(files.iter().map(|(_, f)| f.as_path()), total, job)?;
    job.log.check()?;
    // The conversation folder holds `events/` and `base_state.json` (the agent's settings).
    let conversation = match events.file_name() {
        Some(n) if n == "events" => events.parent().unwrap_or(&events).to_path_buf(),
        _ => events.clone(),
    };
    let base_state = std::fs::read_to_string(conversation.join("base_state.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok());
    let model = base_state
        .as_ref()
        .and_then(|b| b.pointer("/agent/llm/model"))
        .and_then(Value::as_str);
    let id = conversation
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "conversation".into());
    let mut s = build(dir, 0, id, v1::classify_all(raw, model), job)?;
    s.meta.insert("event_files".into(), json!(total));
    if let Some(m) = model {
        s.meta.insert("model".into(), json!(m));
    }
    Ok(s)
}

/// Whether a file holds OpenHands V1 events: JSON Lines or an array whose first value is one.
pub(super) fn is_v1_stream(probe: &Probe) -> bool {
    match &probe.shape {
        Shape::Jsonl(_) => probe.first_object().is_some_and(is_v1_event),
        Shape::Document(head) if head.array => probe
            .element_keys(None)
            .is_some_and(|k| k.contains(&"kind") && k.contains(&"source")),
        _ => false,
    }
}

/// OpenHands V1 events in one file: JSON Lines (one event per line) or a JSON array.
pub(super) fn read_v1_file(path: &Path, job: &mut Job) -> Result<Session> {
    let text = read_document(path, &Counter::default())?;
    let mut raw = Vec::new();
    match parse_document(path, &text) {
        Ok(Value::Array(events)) => {
            let lines = json_element_lines(&text, None);
            for (i, v) in events.into_iter().enumerate() {
                let pos = Pos {
                    file: path.to_path_buf(),
                    line: line_of(&lines, i),
                    path: format!("[{i}]"),
                };
                raw.push((v, pos));
            }
        }
        _ => {
            for (k, line) in text.lines().enumerate() {
                let n = k as u64 + 1;
                if line.trim().is_empty() {
                    continue;
                }
                let (values, err) = line_values(line);
                if let Some(e) = err {
                    job.log.problem(diag(path, n, e, None));
                    continue;
                }
                for v in values {
                    let pos = Pos {
                        file: path.to_path_buf(),
                        line: n,
                        path: String::new(),
                    };
                    raw.push((v, pos));
                }
            }
        }
    }
    job.log.check()?;
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "events".into());
    let mut s = build(path, 0, id, v1::classify_all(raw, None), job)?;
    s.meta.insert("events_file".into(), json!(file_name(path)));
    Ok(s)
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
}
