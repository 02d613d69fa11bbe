//! An OpenHands event stream → a reconstructed [`Session`]: events classified in order, the
//! system prompt (or a stand-in) first, every response's context the conversation before it, the
//! closure from how the run ended.

use std::collections::BTreeMap;
use std::path::Path;

use eyre::Result;
use serde_json::{Map, Value, json};

use crate::Job;
use crate::claude_code::SYSTEM_NOTE;
use crate::convo::Turn;
use crate::error::diag;
use crate::session::{Closure, Response, Session};
use crate::timestamp::parse_timestamp;
use gyre_engine::record::{ClosureStatus, Source};
use gyre_text::Message;

use super::events::{Item, StateExtras};
use super::streams::{Pos, status_of_error};

/// One event, classified: what it contributes to the conversation (or why it cannot be read),
/// when it happened and where it was read.
pub(super) struct Classified {
    /// The event's time (seconds), when it has one.
    pub(super) t: Option<f64>,
    /// What it contributes, or a problem (message, field path).
    pub(super) item: Result<Item, (String, String)>,
    /// Where it was read.
    pub(super) pos: Pos,
    /// Its `timestamp` when that is no time (RFC 3339): warned about, the event read without one.
    pub(super) bad_time: Option<String>,
}

impl Classified {
    /// An event read at `pos` with its `timestamp` field.
    pub(super) fn new(
        timestamp: Option<&str>,
        item: Result<Item, (String, String)>,
        pos: Pos,
    ) -> Classified {
        let t = timestamp.and_then(parse_timestamp);
        Classified {
            t,
            item,
            pos,
            bad_time: timestamp.filter(|_| t.is_none()).map(str::to_owned),
        }
    }
}

/// A stream's classified events → a [`Session`]: every response's context is the conversation
/// before it.
pub(super) fn build(
    file: &Path,
    line: u64,
    execution: String,
    events: Vec<Classified>,
    job: &mut Job,
) -> Result<Session> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut order: Vec<Entry> = Vec::new();
    let mut responses: Vec<Response> = Vec::new();
    let mut system: Option<(u32, Vec<Value>, Map<String, Value>)> = None;
    let (mut first_t, mut last_t) = (None, None);
    let mut finished = false;
    let mut state: Option<StateExtras> = None;
    let mut task: Option<String> = None;
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    let mut prev_user = false;
    let n_events = events.len();
    for (i, c) in events.into_iter().enumerate() {
        let Classified {
            t,
            item,
            pos,
            bad_time,
        } = c;
        if let Some(text) = bad_time {
            job.log.warn_grouped(
                "openhands-timestamp",
                format!(
                    "{}:{}: timestamp \"{text}\" is not an RFC 3339 time; the event is read \
                     without one ({})",
                    pos.file.display(),
                    pos.line,
                    pos.field("timestamp")
                ),
            );
        }
        if let Some(t) = t {
            first_t.get_or_insert(t);
            last_t = Some(t);
        }
        let item = match item {
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
            gyre_engine::report::plural(n, "event"),
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
        group: None,
        scored: true,
    })
}

/// A place in the conversation: a message turn or a response.
enum Entry {
    Turn(u32),
    Response(usize),
}
