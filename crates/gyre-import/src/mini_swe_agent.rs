//! mini-swe-agent trajectories (`.traj.json`) → one reconstructed execution
//! (docs/import.md#mini-swe-agent).
//!
//! `messages[]` is the agent's whole conversation (`role`, `content`, and on assistant messages
//! `extra.response`, the raw chat-completions response); each assistant message is one request
//! whose context is every message before it. `info.exit_status` and `info.submission` make the
//! closure; `info.model_stats.api_calls` is checked against the requests found.

use std::path::{Path, PathBuf};

use eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::convo::Turn;
use super::error::{bad, diag};
use super::input::{
    Counter, file_name, json_element_lines, line_of, parse_document, read_document, sub_path, typed,
};
use super::openai::ChatMessage;
use super::session::{Closure, Response, Session};
use super::sniff::{Fit, Probe, Shape};
use super::{About, Importer, Job};
use gyre_engine::record::ClosureStatus;

/// The mini-swe-agent importer.
pub struct MiniSweAgent;

static ABOUT: About = About {
    name: "mini-swe-agent",
    what: "a mini-swe-agent trajectory",
    summary: "A mini-swe-agent trajectory (`.traj.json`): one request per assistant message",
    input: "TRAJ",
    input_help: "The `.traj.json` file (JSON with `messages[]` and `info`)",
    many: false,
    directories: false,
    reconstructed: true,
    help: "\
Examples:
  gyre import mini-swe-agent trajs/django__django-11999/django__django-11999.traj.json --out run.jsonl
  gyre import mini-swe-agent run.traj.json --score 1 --out run.jsonl --force

The execution is the instance (`instance_id`, else the file name); its closure says how the run
ended (`info.exit_status`) and its artifact is the submission. A response whose reasoning the
log holds only encrypted is not a target (hidden thinking). docs/import.md has the mapping.",
};

/// Why a response is not a target when its reasoning was not logged in full.
pub const HIDDEN_REASONING: &str = "hidden reasoning: the provider returned it encrypted or as a summary, not as the tokens \
     the model wrote";

/// The top level of a `.traj.json`.
#[derive(Deserialize)]
struct Trajectory {
    messages: Vec<Value>,
    #[serde(default)]
    info: Option<Info>,
    #[serde(default)]
    trajectory_format: Option<String>,
    #[serde(default)]
    instance_id: Option<String>,
}

/// `info`: how the run ended.
#[derive(Deserialize)]
struct Info {
    #[serde(default)]
    exit_status: Option<String>,
    #[serde(default)]
    submission: Option<String>,
    #[serde(default)]
    model_stats: Option<ModelStats>,
    #[serde(default)]
    mini_version: Option<String>,
    #[serde(default)]
    config: Option<Value>,
}

/// `info.model_stats`.
#[derive(Deserialize)]
struct ModelStats {
    #[serde(default)]
    instance_cost: Option<f64>,
    #[serde(default)]
    api_calls: Option<u64>,
}

/// A message's `extra` (only the response is used).
#[derive(Deserialize, Default)]
struct Extra {
    #[serde(default)]
    response: Option<RawResponse>,
}

#[derive(Deserialize, Default)]
struct ExtraField {
    #[serde(default)]
    extra: Option<Extra>,
}

/// The raw chat-completions response logged with an assistant message.
#[derive(Deserialize)]
struct RawResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    created: Option<f64>,
    #[serde(default)]
    choices: Vec<RawChoice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct RawChoice {
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    message: Option<RawMessage>,
}

/// The response's message: only the reasoning fields are read from it (the content the agent
/// kept is the trajectory message's).
#[derive(Deserialize)]
struct RawMessage {
    /// Reasoning text (OpenRouter, litellm): raw or a summary, see `reasoning_details`.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    /// OpenRouter's reasoning parts: `reasoning.text`, `reasoning.summary`,
    /// `reasoning.encrypted`.
    #[serde(default)]
    reasoning_details: Option<Vec<ReasoningDetail>>,
}

#[derive(Deserialize)]
struct ReasoningDetail {
    #[serde(rename = "type", default)]
    kind: String,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// Closure status from mini-swe-agent's `exit_status` (`Submitted`, `LimitsExceeded`, or the
/// name of the exception that ended the run).
fn closure_status(exit: Option<&str>) -> ClosureStatus {
    match exit {
        None | Some("Submitted") => ClosureStatus::Completed,
        Some(s) if s.contains("Limit") || s.contains("Timeout") || s.contains("TimeExceeded") => {
            ClosureStatus::Timeout
        }
        Some(_) => ClosureStatus::Error,
    }
}

impl Importer for MiniSweAgent {
    type Item = Session;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        let Some(keys) = probe.object_keys() else {
            return Fit::No;
        };
        if keys.contains(&"history") || keys.contains(&"kind") {
            return Fit::No;
        }
        if keys.contains(&"messages") {
            let mini = keys.contains(&"trajectory_format") || keys.contains(&"info");
            return match probe.element_keys(Some("messages")) {
                Some(e) if e.contains(&"role") && mini => Fit::Yes,
                Some(e) if e.is_empty() => Fit::Unknown,
                Some(_) => Fit::No,
                None => Fit::Unknown,
            };
        }
        // A document whose head shows only `info` (a long submission) may still be one.
        match &probe.shape {
            Shape::Document(head) if !head.complete && keys.iter().all(|k| *k == "info") => {
                Fit::Unknown
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
            let session = read_session(path, job)?;
            emit(job, session)?;
        }
        Ok(())
    }

    fn records(&self, item: Session, job: &mut Job) -> Result<()> {
        super::session::records(item, job)
    }
}

/// The execution id: `instance_id`, else the file name without `.traj.json`.
fn execution_id(path: &Path, instance: Option<&str>) -> String {
    if let Some(id) = instance.filter(|s| !s.is_empty()) {
        return id.to_owned();
    }
    let name = file_name(path);
    let stem = name.strip_suffix(".json").unwrap_or(&name);
    stem.strip_suffix(".traj").unwrap_or(stem).to_owned()
}

/// Reads a `.traj.json` into its [`Session`].
fn read_session(path: &Path, job: &mut Job) -> Result<Session> {
    let text = read_document(path, &Counter::default())?;
    let doc = parse_document(path, &text)?;
    if !doc.get("messages").is_some_and(Value::is_array) {
        return Err(bad(
            path,
            1,
            "not a mini-swe-agent trajectory: no `messages` array",
            Some("messages"),
        ));
    }
    let traj: Trajectory = typed(&doc).map_err(|(msg, field)| bad(path, 1, msg, Some(&field)))?;
    let lines = json_element_lines(&text, Some("messages"));
    let mut turns: Vec<Turn> = Vec::new();
    let mut responses: Vec<Response> = Vec::new();
    let mut hidden = 0u64;
    for (i, v) in traj.messages.iter().enumerate() {
        let line = line_of(&lines, i);
        let field = |rest: &str| sub_path(&format!("messages[{i}]"), rest);
        let msg = match typed::<ChatMessage>(v) {
            Ok(m) => m,
            Err((msg, f)) => {
                job.log.problem(diag(path, line, msg, Some(&field(&f))));
                continue;
            }
        };
        let extra = match typed::<ExtraField>(v) {
            Ok(e) => e.extra.unwrap_or_default(),
            Err((msg, f)) => {
                job.log.problem(diag(path, line, msg, Some(&field(&f))));
                continue;
            }
        };
        let Some(mut turn) = msg.turn(&format!("messages {i}")) else {
            job.log.problem(diag(
                path,
                line,
                format!("unknown role {:?}", msg.role),
                Some(&field("role")),
            ));
            continue;
        };
        if msg.role != "assistant" {
            turns.push(turn);
            continue;
        }
        let raw = extra.response;
        let choice = raw.as_ref().and_then(|r| r.choices.first());
        let raw_msg = choice.and_then(|c| c.message.as_ref());
        let usage = raw.as_ref().and_then(|r| r.usage.as_ref());
        let reasoning = raw_msg
            .and_then(|m| m.reasoning_content.clone().or_else(|| m.reasoning.clone()))
            .filter(|r| !r.trim().is_empty());
        let encrypted = raw_msg
            .and_then(|m| m.reasoning_details.as_ref())
            .is_some_and(|d| {
                d.iter()
                    .any(|p| matches!(p.kind.as_str(), "reasoning.encrypted" | "reasoning.summary"))
            });
        let reasoning_tokens = usage
            .and_then(|u| u.completion_tokens_details.as_ref())
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or(0);
        // The model reasoned (the provider counted it) but the log holds it only encrypted, as a
        // summary, or not at all: the output's tokens are not all known.
        let not_trainable = (encrypted || (reasoning_tokens > 0 && reasoning.is_none()))
            .then(|| HIDDEN_REASONING.to_owned());
        if not_trainable.is_some() {
            hidden += 1;
        }
        if reasoning.is_some() {
            turn.msg.reasoning_content = reasoning;
        }
        let mut meta = Map::new();
        meta.insert("message_index".into(), json!(i));
        meta.insert(
            "source_line".into(),
            json!(format!("{}:{line}", file_name(path))),
        );
        if let Some(id) = raw.as_ref().and_then(|r| r.id.as_ref()) {
            meta.insert("response_id".into(), json!(id));
        }
        if reasoning_tokens > 0 {
            meta.insert("reasoning_tokens".into(), json!(reasoning_tokens));
        }
        let context: Vec<u32> = (0..turns.len() as u32).collect();
        turn.response = Some(responses.len());
        responses.push(Response {
            context,
            message: turn.msg.clone(),
            not_trainable,
            agent: "main".into(),
            summary: false,
            t: raw
                .as_ref()
                .and_then(|r| r.created)
                .filter(|t| t.is_finite()),
            model: raw.as_ref().and_then(|r| r.model.clone()),
            finish: choice.and_then(|c| c.finish_reason.clone()),
            meta,
            usage_input: usage.and_then(|u| u.prompt_tokens),
            usage_output: usage.and_then(|u| u.completion_tokens),
            line,
        });
        turns.push(turn);
    }
    job.log.check()?;
    let execution = execution_id(path, traj.instance_id.as_deref());
    let info = traj.info.as_ref();
    if let Some(calls) = info
        .and_then(|i| i.model_stats.as_ref())
        .and_then(|s| s.api_calls)
    {
        if calls != responses.len() as u64 {
            job.log.warn_important(format!(
                "{execution}: info.model_stats.api_calls says {calls} model calls, the messages \
                 hold {} assistant messages: {} calls are not in the trajectory",
                responses.len(),
                calls.abs_diff(responses.len() as u64)
            ));
        }
    }
    if hidden > 0 {
        job.log.warn(format!(
            "{execution}: {} of {} responses are not targets: their reasoning is in the log \
             only encrypted or summarised (hidden reasoning)",
            hidden,
            responses.len()
        ));
    }
    let task = turns
        .iter()
        .find(|t| t.msg.role == "user")
        .map(|t| t.msg.content.chars().take(500).collect());
    let exit = info.and_then(|i| i.exit_status.as_deref());
    let submission = info
        .and_then(|i| i.submission.as_deref())
        .filter(|s| !s.trim().is_empty());
    let mut meta = Map::new();
    meta.insert("source".into(), json!("mini-swe-agent"));
    meta.insert("reconstructed".into(), Value::Bool(true));
    let mut cmeta = Map::new();
    if let Some(f) = &traj.trajectory_format {
        meta.insert("trajectory_format".into(), json!(f));
    }
    if let Some(v) = info.and_then(|i| i.mini_version.as_ref()) {
        meta.insert("mini_version".into(), json!(v));
    }
    if let Some(m) = info
        .and_then(|i| i.config.as_ref())
        .and_then(|c| c.pointer("/model/model_name"))
    {
        meta.insert("model".into(), m.clone());
    }
    if let Some(stats) = info.and_then(|i| i.model_stats.as_ref()) {
        meta.insert(
            "model_stats".into(),
            json!({"instance_cost": stats.instance_cost, "api_calls": stats.api_calls}),
        );
    }
    if let Some(e) = exit {
        meta.insert("exit_status".into(), json!(e));
        cmeta.insert("exit_status".into(), json!(e));
    }
    if let Some(s) = submission {
        cmeta.insert("submission".into(), json!(s));
    }
    // Trajectories have no wall-clock times of their own; the responses' `created` do.
    let times: Vec<f64> = responses.iter().filter_map(|r| r.t).collect();
    let start = times.iter().copied().fold(f64::INFINITY, f64::min);
    let end = times.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (t0, t1) = if times.is_empty() {
        (0.0, 0.0)
    } else {
        (start, end)
    };
    Ok(Session {
        execution,
        file: path.to_path_buf(),
        line: 0,
        t: t0,
        task,
        meta,
        turns,
        tools: Vec::new(),
        responses,
        closure: Closure {
            t: t1,
            status: closure_status(exit),
            artifact: if submission.is_some() {
                json!("submission")
            } else {
                Value::Null
            },
            version: submission.map(|_| json!(1)),
            meta: cmeta,
        },
        group: None,
        scored: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_and_ids() {
        assert_eq!(closure_status(Some("Submitted")), ClosureStatus::Completed);
        assert_eq!(
            closure_status(Some("LimitsExceeded")),
            ClosureStatus::Timeout
        );
        assert_eq!(
            closure_status(Some("ExecutionTimeoutError")),
            ClosureStatus::Timeout
        );
        assert_eq!(closure_status(Some("RuntimeError")), ClosureStatus::Error);
        assert_eq!(
            execution_id(Path::new("a/x__y-1.traj.json"), None),
            "x__y-1"
        );
        assert_eq!(execution_id(Path::new("run.json"), None), "run");
        assert_eq!(execution_id(Path::new("run.json"), Some("i-1")), "i-1");
    }
}
