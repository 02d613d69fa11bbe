//! SWE-agent trajectories (`.traj`) → one reconstructed execution (docs/import.md#swe-agent).
//!
//! `history[]` holds OpenAI-style messages (`role`, `content`, `tool_calls`, `tool_call_ids`,
//! `agent`); every assistant message is one request whose context is the messages of its agent
//! before it. SWE-agent 1.x names its agent `main`; 0.x and EnIGMA name it `primary`: both are the
//! main thread. `info.exit_status` and `info.submission` go into the closure and `meta`.

use std::path::{Path, PathBuf};

use eyre::Result;
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
use gyre_engine::record::ClosureStatus;

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
    #[serde(default)]
    history: Option<Vec<Value>>,
    #[serde(default)]
    trajectory: Option<Vec<Step>>,
    #[serde(default)]
    info: Option<Info>,
    /// A retry run (1.x `RetryAgent`): every attempt, each an agent run of its own on a reset
    /// environment; the top-level `history`/`info` are then a copy of the chosen attempt.
    #[serde(default)]
    attempts: Option<Vec<Attempt>>,
}

/// One attempt of a retry run.
#[derive(Deserialize)]
struct Attempt {
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
    /// The attempt a retry run chose (top-level `info` only).
    #[serde(default)]
    best_attempt_idx: Option<usize>,
}

/// One `history[]` entry: the chat message, and SWE-agent's own fields beside it (read apart:
/// `#[serde(flatten)]` would lose the field path of an error inside the message).
struct Entry {
    msg: ChatMessage,
    extra: Extra,
}

/// SWE-agent's fields of a history entry.
#[derive(Deserialize)]
struct Extra {
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
        if keys.contains(&"attempts") && !keys.contains(&"history") {
            return match probe.element_keys(Some("attempts")) {
                Some(e) if e.contains(&"history") => Fit::Yes,
                Some(e) if e.is_empty() => Fit::Unknown,
                Some(_) => Fit::No,
                None => Fit::Unknown,
            };
        }
        if keys.contains(&"history") {
            return match probe.element_keys(Some("history")) {
                Some(e) if e.contains(&"role") => Fit::Yes,
                Some(e) if e.is_empty() => Fit::Unknown,
                Some(_) => Fit::No,
                None => Fit::Unknown,
            };
        }
        // A large document may show only its first keys.
        match &probe.shape {
            Shape::Document(head) if !head.complete => Fit::Unknown,
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
            for session in read_sessions(path, job)? {
                emit(job, session)?;
            }
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

/// Where the elements of one history are in the file, for messages: `history[i]` at its own
/// line, or, inside an attempt of a retry run, `attempts[a].history[i]` at the attempt's line.
struct Places<'a> {
    prefix: String,
    lines: &'a [u64],
    fixed: Option<u64>,
}

impl Places<'_> {
    fn line(&self, i: usize) -> u64 {
        self.fixed.unwrap_or_else(|| line_of(self.lines, i))
    }

    fn field(&self, i: usize, rest: &str) -> String {
        super::input::sub_path(&format!("{}[{i}]", self.prefix), rest)
    }
}

/// Reads a `.traj` into its [`Session`]s: one, or one per attempt of a retry run (ids
/// `<stem>/attempt-<i>`, one GRPO group; `--score` is the chosen attempt's).
pub fn read_sessions(path: &Path, job: &mut Job) -> Result<Vec<Session>> {
    let text = read_document(path, &Counter::default())?;
    let doc = parse_document(path, &text)?;
    let traj: Trajectory =
        typed(&doc).map_err(|(msg, field)| super::error::bad(path, 1, msg, Some(&field)))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "trajectory".into());
    let Some(attempts) = traj.attempts.filter(|a| !a.is_empty()) else {
        let Some(history) = traj.history else {
            return Err(super::error::bad(
                path,
                1,
                "not a SWE-agent trajectory: no `history` array",
                Some("history"),
            ));
        };
        let lines = json_element_lines(&text, Some("history"));
        let places = Places {
            prefix: "history".into(),
            lines: &lines,
            fixed: None,
        };
        let run = Run {
            history,
            trajectory: traj.trajectory,
            info: traj.info,
        };
        return Ok(vec![read_session(path, stem, run, &places, job)?]);
    };
    let chosen = traj.info.as_ref().and_then(|i| i.best_attempt_idx);
    if chosen.is_none() && job.opts.score.is_some() {
        job.log.warn(format!(
            "{stem}: --score ignored: a retry run of {} names no chosen attempt \
             (info.best_attempt_idx), so the score belongs to none of them",
            gyre_engine::report::plural(attempts.len(), "attempt")
        ));
    }
    // The top-level history of a finished retry run is a copy of the chosen attempt's; one that
    // is no attempt's is a run of its own and is read too (nothing is dropped).
    let extra = traj
        .history
        .filter(|h| !attempts.iter().any(|a| &a.history == h))
        .map(|history| Run {
            history,
            trajectory: traj.trajectory,
            info: traj.info,
        });
    let starts = json_element_lines(&text, Some("attempts"));
    let n = attempts.len();
    let mut sessions = Vec::with_capacity(n);
    for (a, attempt) in attempts.into_iter().enumerate() {
        let places = Places {
            prefix: format!("attempts[{a}].history"),
            lines: &[],
            fixed: Some(line_of(&starts, a)),
        };
        let run = Run {
            history: attempt.history,
            trajectory: attempt.trajectory,
            info: attempt.info,
        };
        let mut session = read_session(path, format!("{stem}/attempt-{a}"), run, &places, job)?;
        session.group = Some(stem.clone());
        session.scored = chosen == Some(a);
        for (k, v) in [
            ("attempt", json!(a)),
            ("attempts", json!(n)),
            ("chosen", json!(chosen == Some(a))),
        ] {
            session.meta.insert(k.into(), v.clone());
            session.closure.meta.insert(k.into(), v);
        }
        sessions.push(session);
    }
    if let Some(run) = extra {
        let lines = json_element_lines(&text, Some("history"));
        let places = Places {
            prefix: "history".into(),
            lines: &lines,
            fixed: None,
        };
        let mut session = read_session(path, stem.clone(), run, &places, job)?;
        session.group = Some(stem);
        session.scored = false;
        sessions.push(session);
    }
    Ok(sessions)
}

/// One agent run: its history, steps and info.
struct Run {
    history: Vec<Value>,
    trajectory: Option<Vec<Step>>,
    info: Option<Info>,
}

/// One agent run as a [`Session`]: its messages, the agents, the responses, the closure.
fn read_session(
    path: &Path,
    execution: String,
    run: Run,
    places: &Places,
    job: &mut Job,
) -> Result<Session> {
    let (turns, messages) = read_messages(path, &run.history, places, job);
    job.log.check()?;
    let responses = responses(path, &messages, &turns, places);
    let task = messages.iter().find_map(|m| {
        let t = &turns[m.turn as usize];
        (t.msg.role == "user" && !m.demo).then(|| t.msg.content.chars().take(500).collect())
    });
    let mut session = assemble(path, execution, run, turns, responses);
    session.task = task;
    Ok(session)
}

/// The history's messages as turns, with their agents resolved.
fn read_messages(
    path: &Path,
    history: &[Value],
    places: &Places,
    job: &mut Job,
) -> (Vec<Turn>, Vec<Message>) {
    let mut turns = Vec::new();
    let mut messages = Vec::new();
    let mut entries: Vec<(usize, Entry)> = Vec::new();
    for (i, v) in history.iter().enumerate() {
        let entry = typed::<ChatMessage>(v)
            .and_then(|msg| typed::<Extra>(v).map(|extra| Entry { msg, extra }));
        match entry {
            Ok(e) => entries.push((i, e)),
            Err((msg, field)) => job.log.problem(diag(
                path,
                places.line(i),
                msg,
                Some(&places.field(i, &field)),
            )),
        }
    }
    // One agent name throughout is the main thread whatever it is called.
    let names: std::collections::BTreeSet<&str> = entries
        .iter()
        .filter_map(|(_, e)| e.extra.agent.as_deref())
        .collect();
    let single = names.len() <= 1;
    for (i, e) in &entries {
        let Some(turn) = e.msg.turn(&format!("history {i}")) else {
            job.log.problem(diag(
                path,
                places.line(*i),
                format!("unknown role {:?}", e.msg.role),
                Some(&places.field(*i, "role")),
            ));
            continue;
        };
        let agent = match e.extra.agent.as_deref() {
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
            demo: e.extra.is_demo,
            action: e.extra.action.clone(),
        });
    }
    (turns, messages)
}

/// One request per assistant message: its context is the earlier messages of its agent.
fn responses(path: &Path, messages: &[Message], turns: &[Turn], places: &Places) -> Vec<Response> {
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
            json!(format!("{}:{}", file_name(path), places.line(m.index))),
        );
        if let Some(a) = &m.action {
            meta.insert("action".into(), a.clone());
        }
        out.push(Response {
            not_trainable: None,
            context,
            message: turns[m.turn as usize].msg.clone(),
            agent: m.agent.clone(),
            summary: false,
            t: None,
            model: None,
            finish: None,
            meta,
            usage_input: None,
            usage_output: None,
            line: places.line(m.index),
        });
    }
    out
}

/// The execution and its closure around the responses.
fn assemble(
    path: &Path,
    execution: String,
    traj: Run,
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
        execution,
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
        group: None,
        scored: true,
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
