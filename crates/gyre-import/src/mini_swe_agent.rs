//! mini-swe-agent trajectories (`.traj.json`) → one reconstructed execution
//! (docs/import.md#mini-swe-agent).
//!
//! `messages[]` is the agent's whole conversation (`role`, `content`, and on assistant messages
//! `extra.response`, the raw chat-completions response); each assistant message is one request
//! whose context is every message before it. `info.exit_status` and `info.submission` make the
//! closure; `info.model_stats.api_calls` is checked against the requests found.
//!
//! mini-swe-agent 2.x (`trajectory_format` `mini-swe-agent-1.1`) adds three things: the run
//! ends with an `exit` message (the closure, not a model message); a response rejected for its
//! format is kept in the `extra.response` of the user message that answers it (a call whose
//! output never enters a later context: a leaf); and its tool-calling models send one `bash`
//! tool with every call.

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
use gyre_engine::report::plural;

/// The mini-swe-agent importer.
pub struct MiniSweAgent;

static ABOUT: About = About {
    name: "mini-swe-agent",
    what: "a mini-swe-agent trajectory",
    summary: "A mini-swe-agent trajectory (`.traj.json`, 1.x and 2.x): one request per model response",
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
log holds only encrypted is not a target (hidden thinking). In 2.x trajectories, a response
rejected for its format is a request no later context extends, and the tool-calling models' bash
tool is in every context. docs/import.md has the mapping.",
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

/// A message's `extra` (only the response is used): the raw response, or its `repr` when
/// mini-swe-agent could not serialise it.
#[derive(Deserialize, Default)]
struct Extra {
    #[serde(default)]
    response: Option<Value>,
}

/// The tool mini-swe-agent 2.x's tool-calling models send with every call
/// (`minisweagent.models.utils.actions_toolcall.BASH_TOOL`); the trajectory does not repeat it.
fn bash_tool() -> Value {
    json!({"type": "function", "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
            "required": ["command"],
        },
    }})
}

#[derive(Deserialize, Default)]
struct ExtraField {
    #[serde(default)]
    extra: Option<Extra>,
}

/// The raw chat-completions response logged with an assistant message.
#[derive(Deserialize, Default)]
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

/// The request made of the model message `turn` (an assistant message, or a rejected 2.x
/// response) whose raw response is `raw`, with every turn so far as its context. The
/// reasoning the response returned goes into the output; `hidden` counts outputs whose
/// reasoning the log lacks.
fn response(
    raw: &RawResponse,
    mut turn: Turn,
    i: usize,
    line: u64,
    path: &Path,
    turns: &[Turn],
    hidden: &mut u64,
) -> Response {
    let choice = raw.choices.first();
    let raw_msg = choice.and_then(|c| c.message.as_ref());
    let usage = raw.usage.as_ref();
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
        *hidden += 1;
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
    if let Some(id) = &raw.id {
        meta.insert("response_id".into(), json!(id));
    }
    if reasoning_tokens > 0 {
        meta.insert("reasoning_tokens".into(), json!(reasoning_tokens));
    }
    Response {
        context: (0..turns.len() as u32).collect(),
        message: turn.msg,
        not_trainable,
        agent: "main".into(),
        summary: false,
        t: raw.created.filter(|t| t.is_finite()),
        model: raw.model.clone(),
        finish: choice.and_then(|c| c.finish_reason.clone()),
        meta,
        usage_input: usage.and_then(|u| u.prompt_tokens),
        usage_output: usage.and_then(|u| u.completion_tokens),
        line,
    }
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
    let mut rejected = 0u64;
    let mut unreadable = 0u64;
    let mut tool_calling = false;
    let mut exit_extra: Option<Value> = None;
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
        if msg.role == "exit" {
            // 2.x: how the run ended (`info` repeats it); never shown to the model.
            exit_extra = v.get("extra").cloned();
            continue;
        }
        let raw = match extra.response {
            None => None,
            Some(Value::Object(o)) => match typed::<RawResponse>(&Value::Object(o.clone())) {
                Ok(r) => Some((r, Value::Object(o))),
                Err((msg, f)) => {
                    job.log.problem(diag(
                        path,
                        line,
                        msg,
                        Some(&field(&format!("extra.response.{f}"))),
                    ));
                    continue;
                }
            },
            // `repr(response)`: mini-swe-agent could not serialise it; its text is not JSON.
            Some(_) => {
                unreadable += 1;
                None
            }
        };
        if msg.role != "assistant" {
            // A 2.x format error: the rejected response is kept with the message answering it.
            if let Some((raw, value)) = &raw {
                let out = value
                    .pointer("/choices/0/message")
                    .map(typed::<ChatMessage>)
                    .transpose()
                    .map_err(|(m, f)| (m, format!("extra.response.choices[0].message.{f}")));
                match out {
                    Ok(Some(out)) => {
                        if let Some(turn) = out.turn(&format!("messages {i} response")) {
                            tool_calling |= out.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
                            let mut r = response(raw, turn, i, line, path, &turns, &mut hidden);
                            r.meta.insert("rejected_format".into(), Value::Bool(true));
                            rejected += 1;
                            responses.push(r);
                        }
                    }
                    Ok(None) => {}
                    Err((m, f)) => {
                        job.log.problem(diag(path, line, m, Some(&field(&f))));
                        continue;
                    }
                }
            }
            let Some(turn) = msg.turn(&format!("messages {i}")) else {
                job.log.problem(diag(
                    path,
                    line,
                    format!("unknown role {:?}", msg.role),
                    Some(&field("role")),
                ));
                continue;
            };
            turns.push(turn);
            continue;
        }
        let Some(mut turn) = msg.turn(&format!("messages {i}")) else {
            continue;
        };
        tool_calling |= msg.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
        let r = match &raw {
            Some((raw, _)) => response(raw, turn.clone(), i, line, path, &turns, &mut hidden),
            None => response(
                &RawResponse::default(),
                turn.clone(),
                i,
                line,
                path,
                &turns,
                &mut hidden,
            ),
        };
        turn.msg = r.message.clone();
        turn.response = Some(responses.len());
        responses.push(r);
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
                 hold {}: {} not in the trajectory",
                plural(responses.len() as u64, "response"),
                plural(calls.abs_diff(responses.len() as u64), "call")
            ));
        }
    }
    if unreadable > 0 {
        job.log.warn(format!(
            "{execution}: {} logged as Python text (mini-swe-agent could not serialise it): an \
             assistant message keeps its text, not its id, usage or reasoning; a response \
             rejected for its format is not in the recording",
            plural(unreadable, "response")
        ));
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
    // `info` says how the run ended; a 2.x trajectory saved before `info` was written still
    // has its `exit` message.
    let from_exit = |k: &str| {
        exit_extra
            .as_ref()
            .and_then(|e| e.get(k))
            .and_then(Value::as_str)
    };
    let exit = info
        .and_then(|i| i.exit_status.as_deref())
        .filter(|s| !s.is_empty())
        .or_else(|| from_exit("exit_status"));
    let submission = info
        .and_then(|i| i.submission.as_deref())
        .filter(|s| !s.trim().is_empty())
        .or_else(|| from_exit("submission").filter(|s| !s.trim().is_empty()));
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
    if rejected > 0 {
        meta.insert("rejected_format_responses".into(), json!(rejected));
    }
    if tool_calling {
        meta.insert(
            "tools".into(),
            json!("mini-swe-agent's bash tool (actions_toolcall.BASH_TOOL): not in the trajectory"),
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
        tools: if tool_calling {
            vec![bash_tool()]
        } else {
            Vec::new()
        },
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
