//! SWE-agent trajectories (`.traj`) → one reconstructed execution (docs/import.md#swe-agent).
//!
//! `history[]` holds OpenAI-style messages (`role`, `content`, `tool_calls`, `tool_call_ids`,
//! `agent`); every assistant message is one request whose context is the messages of its agent
//! before it. `info.exit_status` and `info.submission` go into the closure and `meta`.

use std::path::Path;

use color_eyre::eyre::Result;
use serde_json::{Map, Value, json};

use super::convo::{Builder, Turn};
use super::error::{Problems, diag};
use super::session::{Closure, Response, Session, header_meta, write_session};
use super::write::Sink;
use super::{
    Options, Progress, Summary, json_element_lines, line_of, parse_json_document, read_text,
};
use crate::engine::record::ClosureStatus;
use crate::engine::record::Source;
use crate::text::{Message, ToolCall};

/// Text of an OpenAI-style `content`: a string, or a list of `{type: text, text}` parts.
pub fn content_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match p {
                Value::String(s) => s.clone(),
                _ => match p.get("type").and_then(Value::as_str) {
                    Some("text") => p.get("text").and_then(Value::as_str).unwrap_or("").into(),
                    Some("image_url") | Some("image") => "[image]".into(),
                    Some(other) => format!("[{other}]"),
                    None => String::new(),
                },
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}

/// Tool calls of an OpenAI-style assistant message; string arguments holding a JSON object are
/// parsed (chat templates render objects with `tojson`).
pub fn openai_tool_calls(v: Option<&Value>) -> Vec<ToolCall> {
    let Some(Value::Array(calls)) = v else {
        return Vec::new();
    };
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let f = c.get("function").unwrap_or(c);
            let args = f.get("arguments").cloned().unwrap_or(json!({}));
            let arguments = match &args {
                Value::String(s) => match serde_json::from_str::<Value>(s) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => args,
                },
                _ => args,
            };
            ToolCall {
                id: c
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("call_{i}")),
                name: f.get("name").and_then(Value::as_str).unwrap_or("").into(),
                arguments,
            }
        })
        .collect()
}

/// Closure status from SWE-agent's `exit_status`.
fn closure_status(exit: Option<&str>) -> ClosureStatus {
    match exit {
        None => ClosureStatus::Completed,
        Some(s) if s.starts_with("submitted") => ClosureStatus::Completed,
        Some(s)
            if s.contains("timeout")
                || s.contains("time")
                || s == "exit_cost"
                || s == "exit_context" =>
        {
            ClosureStatus::Timeout
        }
        Some(_) => ClosureStatus::Error,
    }
}

/// Reads a `.traj` into a [`Session`].
pub fn read_session(path: &Path) -> Result<Session> {
    let text = read_text(path)?;
    let doc = parse_json_document(path, &text)?;
    let Some(history) = doc.get("history").and_then(Value::as_array) else {
        return Err(super::error::bad(
            path,
            1,
            "not a SWE-agent trajectory: no `history` array",
            Some("history"),
        ));
    };
    let lines = json_element_lines(&text, Some("history"));
    let mut problems = Problems::default();
    let mut turns: Vec<Turn> = Vec::new();
    // Per message: its turn and agent.
    let mut msgs: Vec<(u32, String)> = Vec::new();
    let mut assistant_at: Vec<usize> = Vec::new();
    for (i, m) in history.iter().enumerate() {
        let line = line_of(&lines, i);
        let Some(role) = m.get("role").and_then(Value::as_str) else {
            problems.push(diag(
                path,
                line,
                "message without a role",
                Some(&format!("history[{i}].role")),
            ));
            continue;
        };
        let agent = m
            .get("agent")
            .and_then(Value::as_str)
            .unwrap_or("main")
            .to_owned();
        let content = content_text(m.get("content"));
        let (msg, source) = match role {
            "system" => (Message::new("system", content), Source::System),
            "user" => (Message::new("user", content), Source::User),
            "assistant" => {
                assistant_at.push(msgs.len());
                (
                    Message {
                        role: "assistant".into(),
                        content,
                        reasoning_content: Some(String::new()),
                        tool_calls: openai_tool_calls(m.get("tool_calls")),
                        tool_call_id: None,
                    },
                    Source::Assistant,
                )
            }
            "tool" => {
                let id = m
                    .get("tool_call_ids")
                    .and_then(Value::as_array)
                    .and_then(|ids| ids.first())
                    .or_else(|| m.get("tool_call_id"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                (Message::tool(&id, content), Source::Tool)
            }
            other => {
                problems.push(diag(
                    path,
                    line,
                    format!("unknown role {other:?}"),
                    Some(&format!("history[{i}].role")),
                ));
                continue;
            }
        };
        turns.push(Turn::new(&format!("history {i}"), msg, source));
        msgs.push((turns.len() as u32 - 1, agent));
    }
    problems.check()?;
    let mut responses = Vec::new();
    for (r, &k) in assistant_at.iter().enumerate() {
        let (turn, agent) = &msgs[k];
        turns[*turn as usize].response = Some(r);
        let context: Vec<u32> = msgs[..k]
            .iter()
            .filter(|(_, a)| a == agent)
            .map(|(t, _)| *t)
            .collect();
        let mut meta = Map::new();
        meta.insert("history_index".into(), json!(k));
        meta.insert(
            "source_line".into(),
            json!(format!(
                "{}:{}",
                path.file_name().unwrap_or_default().to_string_lossy(),
                line_of(&lines, k)
            )),
        );
        if let Some(a) = history.get(k).and_then(|m| m.get("action")) {
            meta.insert("action".into(), a.clone());
        }
        responses.push(Response {
            context,
            message: turns[*turn as usize].msg.clone(),
            agent: agent.clone(),
            summary: false,
            t: None,
            model: None,
            finish: None,
            meta,
        });
    }
    let info = doc.get("info");
    let exit = info
        .and_then(|i| i.get("exit_status"))
        .and_then(Value::as_str);
    let submission = info
        .and_then(|i| i.get("submission"))
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty());
    let (artifact, version) = match (info, submission) {
        (_, Some(_)) => (json!("submission"), Some(json!(1))),
        (None, None) => (json!("trajectory"), Some(json!(1))),
        (Some(_), None) => (Value::Null, None),
    };
    let duration: f64 = doc
        .get("trajectory")
        .and_then(Value::as_array)
        .map(|steps| {
            steps
                .iter()
                .filter_map(|s| s.get("execution_time").and_then(Value::as_f64))
                .sum()
        })
        .unwrap_or(0.0);
    let mut meta = Map::new();
    meta.insert("source".into(), json!("swe-agent"));
    meta.insert("reconstructed".into(), Value::Bool(true));
    if let Some(e) = exit {
        meta.insert("exit_status".into(), json!(e));
    }
    if let Some(s) = submission {
        meta.insert("submission".into(), json!(s));
    }
    if let Some(stats) = info.and_then(|i| i.get("model_stats")) {
        meta.insert("model_stats".into(), stats.clone());
    }
    let mut cmeta = Map::new();
    if let Some(e) = exit {
        cmeta.insert("exit_status".into(), json!(e));
    }
    if let Some(s) = submission {
        cmeta.insert("submission".into(), json!(s));
    }
    let task = history.iter().find_map(|m| {
        (m.get("role").and_then(Value::as_str) == Some("user")
            && m.get("is_demo").and_then(Value::as_bool) != Some(true))
        .then(|| content_text(m.get("content")).chars().take(500).collect())
    });
    Ok(Session {
        execution: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trajectory".into()),
        t: 0.0,
        task,
        meta,
        turns,
        responses,
        closure: Closure {
            t: duration,
            status: closure_status(exit),
            artifact,
            version,
            meta: cmeta,
        },
    })
}

/// Imports the trajectory at `path` into `sink` (header first).
pub fn import(
    path: &Path,
    opts: &Options,
    builder: &mut Builder,
    tokenizer_header: &Value,
    sink: &mut Sink,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary> {
    let session = read_session(path)?;
    let header = header_meta("swe-agent", opts, &[path.display().to_string()]);
    let mut summary = write_session(
        &session,
        builder,
        opts,
        Some((tokenizer_header, &header)),
        sink,
        &mut |done, total| progress(Progress::Requests { done, total }),
    )?;
    summary.executions = 1;
    if session.closure.artifact.is_null() && opts.score.is_some() {
        summary.warnings.push(
            "--score ignored: the trajectory has no submission (its closure has no artifact)"
                .into(),
        );
    }
    Ok(summary)
}
