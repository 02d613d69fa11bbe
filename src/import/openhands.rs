//! OpenHands event streams → one reconstructed execution (docs/import.md#openhands).
//!
//! The stream is a JSON array of events (or an object holding one under `events` / `history`).
//! One request per distinct `tool_call_metadata.model_response.id` (the actions of one model
//! response share it); an agent `message` action without metadata is a plain-text response and
//! a request of its own. Observations become tool results, linked to their call by
//! `tool_call_metadata.tool_call_id` or by `cause` (the id of the action they answer).

use std::collections::HashMap;
use std::path::Path;

use color_eyre::eyre::Result;
use serde_json::{Map, Value, json};

use super::claude_code::SYSTEM_NOTE;
use super::convo::{Builder, Turn};
use super::error::{Problems, diag};
use super::session::{Closure, Response, Session, header_meta, write_session};
use super::swe_agent::{content_text, openai_tool_calls};
use super::write::Sink;
use super::{
    Options, Progress, Summary, json_element_lines, line_of, parse_json_document, parse_timestamp,
    read_text,
};
use crate::engine::record::ClosureStatus;
use crate::engine::record::Source;
use crate::text::Message;

/// The stand-in system segment (when the stream has no `system` action).
fn system_note() -> String {
    SYSTEM_NOTE.replace("Claude Code", "OpenHands")
}

enum Item {
    /// A message turn (user, system, tool result).
    Turn(u32),
    /// The first event of response `r` (the assistant turn).
    Response(usize),
}

/// Reads an event stream into a [`Session`].
pub fn read_session(path: &Path) -> Result<(Session, Vec<String>)> {
    let text = read_text(path)?;
    let doc = parse_json_document(path, &text)?;
    let (events, lines) = match &doc {
        Value::Array(a) => (a, json_element_lines(&text, None)),
        Value::Object(o) => match ["events", "history"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_array).map(|a| (a, *k)))
        {
            Some((a, k)) => (a, json_element_lines(&text, Some(k))),
            None => {
                return Err(super::error::bad(
                    path,
                    1,
                    "not an OpenHands event stream: expected an array of events",
                    None,
                ));
            }
        },
        _ => {
            return Err(super::error::bad(
                path,
                1,
                "not an OpenHands event stream: expected an array of events",
                None,
            ));
        }
    };
    let file = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let mut problems = Problems::default();
    let mut warnings = Vec::new();
    let mut turns: Vec<Turn> = Vec::new();
    let mut items: Vec<Item> = Vec::new();
    let mut responses: Vec<Response> = Vec::new();
    let mut response_of: HashMap<String, usize> = HashMap::new();
    // Action event id → call id (for observations linked by `cause`).
    let mut call_of_event: HashMap<i64, String> = HashMap::new();
    let mut system: Option<u32> = None;
    let mut first_t: Option<f64> = None;
    let mut last_t: Option<f64> = None;
    let mut status = ClosureStatus::Completed;
    let mut task: Option<String> = None;
    let mut skipped = 0usize;
    for (i, e) in events.iter().enumerate() {
        let line = line_of(&lines, i);
        if !e.is_object() {
            problems.push(diag(
                path,
                line,
                "an event must be an object",
                Some(&format!("[{i}]")),
            ));
            continue;
        }
        let t = e
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_timestamp);
        if let Some(t) = t {
            first_t.get_or_insert(t);
            last_t = Some(t);
        }
        let id = e.get("id").and_then(Value::as_i64);
        let source = e.get("source").and_then(Value::as_str).unwrap_or("");
        let tcm = e.get("tool_call_metadata").filter(|v| v.is_object());
        let event_meta = |r: &mut Map<String, Value>| {
            r.insert("event_id".into(), json!(id));
            r.insert("source_line".into(), json!(format!("{file}:{line}")));
        };
        if let Some(action) = e.get("action").and_then(Value::as_str) {
            let args = e.get("args");
            if source == "agent" {
                if let Some(tcm) = tcm {
                    let call_id = tcm.get("tool_call_id").and_then(Value::as_str);
                    if let (Some(id), Some(c)) = (id, call_id) {
                        call_of_event.insert(id, c.to_owned());
                    }
                    let Some(mr) = tcm.get("model_response") else {
                        problems.push(diag(
                            path,
                            line,
                            "tool_call_metadata without model_response",
                            Some(&format!("[{i}].tool_call_metadata.model_response")),
                        ));
                        continue;
                    };
                    let rid = mr
                        .get("id")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| format!("event-{i}"));
                    if response_of.contains_key(&rid) {
                        continue;
                    }
                    let choice = mr.get("choices").and_then(|c| c.get(0));
                    let m = choice.and_then(|c| c.get("message"));
                    let Some(m) = m else {
                        problems.push(diag(
                            path,
                            line,
                            "model_response has no choices[0].message",
                            Some(&format!("[{i}].tool_call_metadata.model_response.choices")),
                        ));
                        continue;
                    };
                    let msg = Message {
                        role: "assistant".into(),
                        content: content_text(m.get("content")),
                        reasoning_content: Some(
                            m.get("reasoning_content")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_owned(),
                        ),
                        tool_calls: openai_tool_calls(m.get("tool_calls")),
                        tool_call_id: None,
                    };
                    let mut meta = Map::new();
                    event_meta(&mut meta);
                    meta.insert("response_id".into(), json!(rid));
                    if let Some(u) = mr.get("usage") {
                        meta.insert("usage".into(), u.clone());
                    }
                    let r = responses.len();
                    response_of.insert(rid, r);
                    responses.push(Response {
                        context: Vec::new(),
                        message: msg,
                        agent: "main".into(),
                        summary: false,
                        t,
                        model: mr.get("model").and_then(Value::as_str).map(str::to_owned),
                        finish: choice
                            .and_then(|c| c.get("finish_reason"))
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        meta,
                    });
                    items.push(Item::Response(r));
                    if action == "finish" {
                        status = ClosureStatus::Completed;
                    }
                    continue;
                }
                if action == "message" || action == "finish" {
                    // A plain-text model response (OpenHands keeps no metadata for it).
                    let content = args
                        .and_then(|a| a.get("content").or_else(|| a.get("thought")))
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .or_else(|| e.get("message").and_then(Value::as_str))
                        .unwrap_or("")
                        .to_owned();
                    let mut meta = Map::new();
                    event_meta(&mut meta);
                    meta.insert("response_id".into(), Value::Null);
                    let r = responses.len();
                    responses.push(Response {
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
                        meta,
                    });
                    items.push(Item::Response(r));
                    continue;
                }
                skipped += 1;
                continue;
            }
            if action == "system" {
                let content = args
                    .and_then(|a| a.get("content"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let k = turns.len() as u32;
                turns.push(Turn::new(
                    &format!("event {i}"),
                    Message::new("system", content),
                    Source::System,
                ));
                system.get_or_insert(k);
                continue;
            }
            if action == "message" && source == "user" {
                let content = args
                    .and_then(|a| a.get("content"))
                    .and_then(Value::as_str)
                    .or_else(|| e.get("message").and_then(Value::as_str))
                    .unwrap_or("");
                if task.is_none() {
                    task = Some(content.chars().take(500).collect());
                }
                turns.push(Turn::new(
                    &format!("event {i}"),
                    Message::new("user", content),
                    Source::User,
                ));
                items.push(Item::Turn(turns.len() as u32 - 1));
                continue;
            }
            skipped += 1;
            continue;
        }
        if let Some(obs) = e.get("observation").and_then(Value::as_str) {
            let call = tcm
                .and_then(|m| m.get("tool_call_id"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| {
                    e.get("cause")
                        .and_then(Value::as_i64)
                        .and_then(|c| call_of_event.get(&c).cloned())
                });
            if obs == "agent_state_changed" {
                if e.get("extras")
                    .and_then(|x| x.get("agent_state"))
                    .and_then(Value::as_str)
                    == Some("error")
                {
                    status = ClosureStatus::Error;
                }
                skipped += 1;
                continue;
            }
            let content = e
                .get("content")
                .and_then(Value::as_str)
                .or_else(|| e.get("message").and_then(Value::as_str))
                .unwrap_or("");
            match call {
                Some(call) => {
                    turns.push(Turn::new(
                        &format!("event {i}"),
                        Message::tool(&call, content),
                        Source::Tool,
                    ));
                    items.push(Item::Turn(turns.len() as u32 - 1));
                }
                None if obs == "error" => {
                    turns.push(Turn::new(
                        &format!("event {i}"),
                        Message::new("user", content),
                        Source::User,
                    ));
                    items.push(Item::Turn(turns.len() as u32 - 1));
                }
                None => skipped += 1,
            }
            continue;
        }
        skipped += 1;
    }
    problems.check()?;
    if skipped > 0 {
        warnings.push(format!(
            "{skipped} event(s) with nothing for the model's context (state changes, \
             harness-only actions) were skipped"
        ));
    }
    let sys = match system {
        Some(s) => s,
        None => {
            turns.push(Turn::new(
                "system stand-in",
                Message::new("system", system_note()),
                Source::System,
            ));
            turns.len() as u32 - 1
        }
    };
    // Assistant turns, then contexts: everything before each response, in stream order.
    let mut ctx = vec![sys];
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
    for item in &items {
        match item {
            Item::Turn(k) => ctx.push(*k),
            Item::Response(r) => {
                responses[*r].context = ctx.clone();
                ctx.push(resp_turn[*r]);
            }
        }
    }
    let execution = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "events".into());
    let t0 = first_t.unwrap_or(0.0);
    let mut meta = Map::new();
    meta.insert("source".into(), json!("openhands"));
    meta.insert("reconstructed".into(), Value::Bool(true));
    meta.insert("events".into(), json!(events.len()));
    if system.is_none() {
        meta.insert(
            "system_prompt".into(),
            json!("not in the event stream (stand-in segment)"),
        );
    }
    Ok((
        Session {
            execution,
            t: t0,
            task,
            meta,
            turns,
            responses,
            closure: Closure {
                t: last_t.unwrap_or(t0),
                status,
                artifact: json!("session"),
                version: Some(json!(1)),
                meta: Map::new(),
            },
        },
        warnings,
    ))
}

/// Imports the event stream at `path` into `sink` (header first).
pub fn import(
    path: &Path,
    opts: &Options,
    builder: &mut Builder,
    tokenizer_header: &Value,
    sink: &mut Sink,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary> {
    let (session, warnings) = read_session(path)?;
    let header = header_meta("openhands", opts, &[path.display().to_string()]);
    let mut summary = write_session(
        &session,
        builder,
        opts,
        Some((tokenizer_header, &header)),
        sink,
        &mut |done, total| progress(Progress::Requests { done, total }),
    )?;
    summary.executions = 1;
    summary.warnings = warnings;
    Ok(summary)
}
