//! SWE-agent trajectories (`.traj`) → one reconstructed execution (docs/import.md#swe-agent).
//!
//! `history[]` holds OpenAI-style messages (`role`, `content`, `tool_calls`, `tool_call_ids`,
//! `agent`); every assistant message is one request whose context is the messages of its agent
//! before it. SWE-agent 1.x names its agent `main`; 0.x and EnIGMA name it `primary`: both are the
//! main thread. `info.exit_status` and `info.submission` go into the closure and `meta`.

use std::path::{Path, PathBuf};

use color_eyre::eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::convo::Turn;
use super::error::diag;
use super::input::{
    Counter, file_name, json_element_lines, line_of, parse_document, read_document, typed,
};
use super::openai::ChatMessage;
use super::session::{Closure, Response, Session};
use super::sniff::{Fit, Probe, Shape};
use super::{About, Importer, Job};
use crate::engine::record::ClosureStatus;

/// The SWE-agent importer.
pub struct SweAgent;

static ABOUT: About = About {
    name: "swe-agent",
    what: "a SWE-agent trajectory",
    summary: "A SWE-agent trajectory (`.traj`, 1.x or 0.x/EnIGMA): one request per assistant message",
    input: "TRAJ",
    input_help: "The `.traj` file (JSON with `history[]`, optionally `info` and `trajectory`)",
    many: false,
    directories: false,
    reconstructed: true,
    help: "\
Examples:
  gyre import swe-agent trajectories/run/instance.traj --out instance.jsonl
  gyre import swe-agent instance.traj --score 1 --out instance.jsonl --force

The agent `main` (1.x) or `primary` (0.x, EnIGMA) is the main thread. docs/import.md has the
mapping.",
};

/// The top level of a `.traj`.
#[derive(Deserialize)]
struct Trajectory {
    history: Vec<Value>,
    #[serde(default)]
    trajectory: Option<Vec<Step>>,
    #[serde(default)]
    info: Option<Info>,
}

/// One step of `trajectory[]` (only its duration is used).
#[derive(Deserialize)]
struct Step {
    #[serde(default)]
    execution_time: Option<f64>,
}

/// `info`: how the run ended.
#[derive(Deserialize)]
struct Info {
    #[serde(default)]
    exit_status: Option<String>,
    #[serde(default)]
    submission: Option<String>,
    #[serde(default)]
    model_stats: Option<Value>,
}

/// One `history[]` entry.
#[derive(Deserialize)]
struct Entry {
    #[serde(flatten)]
    msg: ChatMessage,
    #[serde(default)]
    agent: Option<String>,
    #[serde(default)]
    is_demo: bool,
    #[serde(default)]
    action: Option<Value>,
}

/// Agent names that mean the main thread: SWE-agent 1.x says `main`, 0.x and EnIGMA `primary`.
const MAIN_NAMES: [&str; 2] = ["main", "primary"];

/// Closure status from SWE-agent's `exit_status`.
fn closure_status(exit: Option<&str>) -> ClosureStatus {
    match exit {
        None => ClosureStatus::Completed,
        Some(s) if s.starts_with("submitted") => ClosureStatus::Completed,
        Some(s) if s.contains("time") || s == "exit_cost" || s == "exit_context" => {
            ClosureStatus::Timeout
        }
        Some(_) => ClosureStatus::Error,
    }
}

impl Importer for SweAgent {
    type Item = Session;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        let Some(keys) = probe.object_keys() else {
            return Fit::No;
        };
        if keys.contains(&"history") {
            return match probe.element_keys(Some("history")) {
                Some(e) if e.contains(&"role") => Fit::Yes,
                Some(e) if e.is_empty() => Fit::Unknown,
                Some(_) => Fit::No,
                None => Fit::Unknown,
            };
        }
        // A large document shows only its first keys.
        match probe.shape {
            Shape::Document(_) => Fit::Unknown,
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
            let session = read_session(path, job)?;
            emit(job, session)?;
        }
        Ok(())
    }

    fn records(&self, item: Session, job: &mut Job) -> Result<()> {
        super::session::records(item, job)
    }
}

/// A history message, read.
struct Message {
    turn: u32,
    /// The agent, `main` for the main thread.
    agent: String,
    /// Its index in `history`.
    index: usize,
    assistant: bool,
    /// A demonstration shown to the model (0.x `is_demo`), not the task.
    demo: bool,
    action: Option<Value>,
}

/// Reads a `.traj` into a [`Session`]: the document, its messages, the agents, the responses,
/// the closure.
pub fn read_session(path: &Path, job: &mut Job) -> Result<Session> {
    let text = read_document(path, &Counter::default())?;
    let doc = parse_document(path, &text)?;
    let lines = json_element_lines(&text, Some("history"));
    let traj: Trajectory = typed(&doc).map_err(|(msg, field)| {
        let msg = if field == "history" && msg.starts_with("missing field") {
            "not a SWE-agent trajectory: no `history` array".to_owned()
        } else {
            msg
        };
        super::error::bad(path, 1, msg, Some(&field))
    })?;
    let (turns, messages) = read_messages(path, &traj.history, &lines, job);
    job.log.check()?;
    let responses = responses(path, &messages, &turns, &lines);
    let task = messages.iter().find_map(|m| {
        let t = &turns[m.turn as usize];
        (t.msg.role == "user" && !m.demo).then(|| t.msg.content.chars().take(500).collect())
    });
    let mut session = assemble(path, traj, turns, responses);
    session.task = task;
    Ok(session)
}

/// The history's messages as turns, with their agents resolved.
fn read_messages(
    path: &Path,
    history: &[Value],
    lines: &[u64],
    job: &mut Job,
) -> (Vec<Turn>, Vec<Message>) {
    let mut turns = Vec::new();
    let mut messages = Vec::new();
    let mut entries: Vec<(usize, Entry)> = Vec::new();
    for (i, v) in history.iter().enumerate() {
        match typed::<Entry>(v) {
            Ok(e) => entries.push((i, e)),
            Err((msg, field)) => job.log.problem(diag(
                path,
                line_of(lines, i),
                msg,
                Some(&super::input::sub_path(&format!("history[{i}]"), &field)),
            )),
        }
    }
    // One agent name throughout is the main thread whatever it is called.
    let names: std::collections::BTreeSet<&str> = entries
        .iter()
        .filter_map(|(_, e)| e.agent.as_deref())
        .collect();
    let single = names.len() <= 1;
    for (i, e) in &entries {
        let Some(turn) = e.msg.turn(&format!("history {i}")) else {
            job.log.problem(diag(
                path,
                line_of(lines, *i),
                format!("unknown role {:?}", e.msg.role),
                Some(&format!("history[{i}].role")),
            ));
            continue;
        };
        let agent = match e.agent.as_deref() {
            None => "main".to_owned(),
            Some(_) if single => "main".to_owned(),
            Some(a) if MAIN_NAMES.contains(&a) => "main".to_owned(),
            Some(a) => a.to_owned(),
        };
        let assistant = turn.msg.role == "assistant";
        turns.push(turn);
        messages.push(Message {
            turn: turns.len() as u32 - 1,
            agent,
            index: *i,
            assistant,
            demo: e.is_demo,
            action: e.action.clone(),
        });
    }
    (turns, messages)
}

/// One request per assistant message: its context is the earlier messages of its agent.
fn responses(path: &Path, messages: &[Message], turns: &[Turn], lines: &[u64]) -> Vec<Response> {
    let mut out = Vec::new();
    for (k, m) in messages.iter().enumerate().filter(|(_, m)| m.assistant) {
        let context: Vec<u32> = messages[..k]
            .iter()
            .filter(|p| p.agent == m.agent)
            .map(|p| p.turn)
            .collect();
        let mut meta = Map::new();
        meta.insert("history_index".into(), json!(m.index));
        meta.insert(
            "source_line".into(),
            json!(format!("{}:{}", file_name(path), line_of(lines, m.index))),
        );
        if let Some(a) = &m.action {
            meta.insert("action".into(), a.clone());
        }
        out.push(Response {
            context,
            message: turns[m.turn as usize].msg.clone(),
            agent: m.agent.clone(),
            summary: false,
            t: None,
            model: None,
            finish: None,
            meta,
            usage_input: None,
            line: line_of(lines, m.index),
        });
    }
    out
}

/// The execution and its closure around the responses.
fn assemble(
    path: &Path,
    traj: Trajectory,
    mut turns: Vec<Turn>,
    responses: Vec<Response>,
) -> Session {
    // Each assistant turn is the recorded output of its request.
    let mut r = 0;
    for t in turns.iter_mut() {
        if t.msg.role == "assistant" {
            t.response = Some(r);
            r += 1;
        }
    }
    let info = traj.info.as_ref();
    let exit = info.and_then(|i| i.exit_status.as_deref());
    let submission = info
        .and_then(|i| i.submission.as_deref())
        .filter(|s| !s.trim().is_empty());
    let (artifact, version) = match (info, submission) {
        (_, Some(_)) => (json!("submission"), Some(json!(1))),
        (None, None) => (json!("trajectory"), Some(json!(1))),
        (Some(_), None) => (Value::Null, None),
    };
    // Trajectories have no wall-clock times: the execution starts at 0 and closes after the
    // steps' durations (a plain 0 when there are none).
    let duration = traj
        .trajectory
        .iter()
        .flatten()
        .filter_map(|s| s.execution_time)
        .filter(|t| t.is_finite() && *t >= 0.0)
        .fold(0.0, |a, b| a + b);
    let mut meta = Map::new();
    meta.insert("source".into(), json!("swe-agent"));
    meta.insert("reconstructed".into(), Value::Bool(true));
    let mut cmeta = Map::new();
    if let Some(e) = exit {
        meta.insert("exit_status".into(), json!(e));
        cmeta.insert("exit_status".into(), json!(e));
    }
    if let Some(s) = submission {
        meta.insert("submission".into(), json!(s));
        cmeta.insert("submission".into(), json!(s));
    }
    if let Some(stats) = info.and_then(|i| i.model_stats.clone()) {
        meta.insert("model_stats".into(), stats);
    }
    Session {
        execution: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trajectory".into()),
        file: path.to_path_buf(),
        line: 0,
        t: 0.0,
        task: None,
        meta,
        turns,
        tools: Vec::new(),
        responses,
        closure: Closure {
            t: duration,
            status: closure_status(exit),
            artifact,
            version,
            meta: cmeta,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses() {
        assert_eq!(
            closure_status(Some("submitted (exit_cost)")),
            ClosureStatus::Completed
        );
        assert_eq!(closure_status(Some("exit_cost")), ClosureStatus::Timeout);
        assert_eq!(closure_status(Some("exit_context")), ClosureStatus::Timeout);
        assert_eq!(closure_status(Some("early_exit")), ClosureStatus::Error);
        assert_eq!(closure_status(None), ClosureStatus::Completed);
    }
}
