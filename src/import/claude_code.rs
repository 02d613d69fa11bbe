//! Claude Code sessions → one reconstructed execution (docs/import.md#claude-code).
//!
//! Claude Code writes `~/.claude/projects/<project>/<session>.jsonl` and, beside it,
//! `<session>/subagents/agent-<id>.jsonl` (delegated sub-agents) and
//! `agent-acompact-<id>.jsonl` (the call that wrote a compaction summary); older versions keep
//! sub-agent lines inline with `isSidechain: true`. Every line has `uuid` and `parentUuid`; an
//! API response is split over several `assistant` lines sharing `message.id`.
//!
//! One request per API response. Its context is the conversation on the `parentUuid` chain
//! above the response's first line: a stand-in system segment (the real system prompt is not in
//! the log), then user messages, earlier responses and tool results (all results of a response's
//! parallel calls, wherever they hang in the tree), rendered through the chat template.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use color_eyre::eyre::{Result, WrapErr};
use serde_json::{Map, Value, json};

use super::convo::{Builder, Turn};
use super::error::{Problems, diag};
use super::session::{Closure, Response, Session, header_meta, write_session};
use super::write::Sink;
use super::{Options, Summary, open_input, parse_timestamp};
use crate::engine::record::ClosureStatus;
use crate::engine::record::Source;
use crate::text::{Message, ToolCall};

/// What the stand-in system segment says.
pub const SYSTEM_NOTE: &str = "[gyre import] The system prompt and tool definitions Claude Code \
sent with this request are not in the session log; this segment stands in for them.";

/// The role a file (or an inline sidechain) plays.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Agent {
    Main,
    Sub(String),
    Compact(String),
}

impl Agent {
    fn from_id(id: &str) -> Self {
        if id.starts_with("acompact") {
            Agent::Compact(id.to_owned())
        } else {
            Agent::Sub(id.to_owned())
        }
    }

    fn key(&self) -> String {
        match self {
            Agent::Main => "main".into(),
            Agent::Sub(id) => format!("sub:{id}"),
            Agent::Compact(id) => format!("compact:{id}"),
        }
    }
}

#[derive(Clone, Debug)]
enum ABlock {
    Text(String),
    Thinking(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

#[derive(Clone, Debug)]
enum UBlock {
    Text(String),
    ToolResult { id: String, content: String },
}

#[derive(Clone, Debug)]
enum Kind {
    Assistant {
        msg_id: String,
        model: Option<String>,
        blocks: Vec<ABlock>,
        stop: Option<String>,
        usage: Option<Value>,
        request_id: Option<String>,
    },
    User {
        blocks: Vec<UBlock>,
        compact_summary: bool,
        /// `toolUseResult.agentId`: the sub-agent a `Task` result came from.
        agent_link: Option<String>,
    },
    Other,
}

#[derive(Clone, Debug)]
struct Line {
    file: usize,
    line: u64,
    uuid: String,
    parent: Option<String>,
    ts: Option<f64>,
    kind: Kind,
    agent: Agent,
}

/// The files of a session: the main file first, then `subagents/*.jsonl` in name order.
pub fn session_files(main: &Path) -> Vec<PathBuf> {
    let mut files = vec![main.to_path_buf()];
    let dir = main.with_extension("").join("subagents");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut subs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().is_some_and(|x| x == "jsonl")
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("agent-"))
            })
            .collect();
        subs.sort();
        files.extend(subs);
    }
    files
}

fn file_agent(path: &Path, index: usize) -> Agent {
    if index == 0 {
        return Agent::Main;
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Agent::from_id(stem.strip_prefix("agent-").unwrap_or(&stem))
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                Some("image") => "[image]".to_owned(),
                Some(other) => format!("[{other}]"),
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn parse_line(
    v: &Value,
    file: usize,
    line: u64,
    agent: &Agent,
    path: &Path,
    problems: &mut Problems,
) -> Option<Line> {
    let uuid = v.get("uuid").and_then(Value::as_str)?;
    let ty = match v.get("type").and_then(Value::as_str) {
        Some(t) => t,
        None => {
            problems.push(diag(
                path,
                line,
                "line has a uuid but no `type`",
                Some("type"),
            ));
            return None;
        }
    };
    let msg = v.get("message");
    let kind = match ty {
        "assistant" => {
            let Some(m) = msg else {
                problems.push(diag(
                    path,
                    line,
                    "assistant line without `message`",
                    Some("message"),
                ));
                return None;
            };
            let Some(msg_id) = m.get("id").and_then(Value::as_str) else {
                problems.push(diag(
                    path,
                    line,
                    "assistant message without an id",
                    Some("message.id"),
                ));
                return None;
            };
            let model = m.get("model").and_then(Value::as_str).map(str::to_owned);
            if model.as_deref() == Some("<synthetic>") {
                // Written by Claude Code itself (an API error, "No response requested."): not
                // an API response.
                Kind::User {
                    blocks: Vec::new(),
                    compact_summary: false,
                    agent_link: None,
                }
            } else {
                let mut blocks = Vec::new();
                let content = m.get("content").cloned().unwrap_or(Value::Null);
                match &content {
                    Value::String(s) => blocks.push(ABlock::Text(s.clone())),
                    Value::Array(items) => {
                        for (i, b) in items.iter().enumerate() {
                            match b.get("type").and_then(Value::as_str) {
                                Some("text") => blocks.push(ABlock::Text(
                                    b.get("text").and_then(Value::as_str).unwrap_or("").into(),
                                )),
                                Some("thinking") => blocks.push(ABlock::Thinking(
                                    b.get("thinking")
                                        .and_then(Value::as_str)
                                        .unwrap_or("")
                                        .into(),
                                )),
                                Some("tool_use") | Some("server_tool_use") => {
                                    let Some(id) = b.get("id").and_then(Value::as_str) else {
                                        problems.push(diag(
                                            path,
                                            line,
                                            "tool_use block without an id",
                                            Some(&format!("message.content[{i}].id")),
                                        ));
                                        return None;
                                    };
                                    blocks.push(ABlock::ToolUse {
                                        id: id.into(),
                                        name: b
                                            .get("name")
                                            .and_then(Value::as_str)
                                            .unwrap_or("")
                                            .into(),
                                        input: b.get("input").cloned().unwrap_or(json!({})),
                                    });
                                }
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
                Kind::Assistant {
                    msg_id: msg_id.into(),
                    model,
                    blocks,
                    stop: m
                        .get("stop_reason")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    usage: m.get("usage").cloned(),
                    request_id: v
                        .get("requestId")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                }
            }
        }
        "user" => {
            let content = msg
                .and_then(|m| m.get("content"))
                .cloned()
                .unwrap_or(Value::Null);
            let mut blocks = Vec::new();
            match &content {
                Value::String(s) => blocks.push(UBlock::Text(s.clone())),
                Value::Array(items) => {
                    for (i, b) in items.iter().enumerate() {
                        match b.get("type").and_then(Value::as_str) {
                            Some("tool_result") => {
                                let Some(id) = b.get("tool_use_id").and_then(Value::as_str) else {
                                    problems.push(diag(
                                        path,
                                        line,
                                        "tool_result block without a tool_use_id",
                                        Some(&format!("message.content[{i}].tool_use_id")),
                                    ));
                                    return None;
                                };
                                blocks.push(UBlock::ToolResult {
                                    id: id.into(),
                                    content: text_of(b.get("content").unwrap_or(&Value::Null)),
                                });
                            }
                            Some("text") => blocks.push(UBlock::Text(
                                b.get("text").and_then(Value::as_str).unwrap_or("").into(),
                            )),
                            Some("image") => blocks.push(UBlock::Text("[image]".into())),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
            Kind::User {
                blocks,
                compact_summary: v.get("isCompactSummary").and_then(Value::as_bool) == Some(true),
                agent_link: v
                    .get("toolUseResult")
                    .and_then(|r| r.get("agentId"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            }
        }
        _ => Kind::Other,
    };
    let agent = if file == 0 && v.get("isSidechain").and_then(Value::as_bool) == Some(true) {
        // Older layout: sub-agent lines inline. Without an agentId the chain root names it.
        match v.get("agentId").and_then(Value::as_str) {
            Some(id) => Agent::from_id(id),
            None => Agent::Sub(String::new()),
        }
    } else {
        agent.clone()
    };
    Some(Line {
        file,
        line,
        uuid: uuid.into(),
        parent: v
            .get("parentUuid")
            .and_then(Value::as_str)
            .map(str::to_owned),
        ts: v
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_timestamp),
        kind,
        agent,
    })
}

/// Everything read from a session's files.
struct Log {
    files: Vec<PathBuf>,
    lines: Vec<Line>,
    by_uuid: HashMap<String, usize>,
    session_id: Option<String>,
    first_meta: Map<String, Value>,
    last_ts: Option<f64>,
    first_ts: Option<f64>,
    compactions: u64,
    warnings: Vec<String>,
}

fn read_log(files: Vec<PathBuf>, progress: &mut dyn FnMut(u64)) -> Result<Log> {
    let mut log = Log {
        files,
        lines: Vec::new(),
        by_uuid: HashMap::new(),
        session_id: None,
        first_meta: Map::new(),
        last_ts: None,
        first_ts: None,
        compactions: 0,
        warnings: Vec::new(),
    };
    let mut problems = Problems::default();
    let mut bytes = 0u64;
    for (fi, path) in log.files.iter().enumerate() {
        let agent = file_agent(path, fi);
        let mut reader = open_input(path)?;
        let mut buf = String::new();
        let mut n = 0u64;
        loop {
            buf.clear();
            let got = std::io::BufRead::read_line(&mut reader, &mut buf)
                .wrap_err_with(|| format!("reading {}", path.display()))?;
            if got == 0 {
                break;
            }
            n += 1;
            bytes += got as u64;
            if n % 64 == 0 {
                progress(bytes);
            }
            let text = buf.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            let v: Value = match serde_json::from_str(text) {
                Ok(v) => v,
                Err(e) => {
                    problems.push(diag(path, n, format!("malformed JSON: {e}"), None));
                    continue;
                }
            };
            if !v.is_object() {
                problems.push(diag(path, n, "a line must be a JSON object", None));
                continue;
            }
            let ts = v
                .get("timestamp")
                .and_then(Value::as_str)
                .and_then(parse_timestamp);
            if fi == 0 {
                if let Some(t) = ts {
                    log.first_ts = Some(log.first_ts.map_or(t, |f: f64| f.min(t)));
                    log.last_ts = Some(log.last_ts.map_or(t, |l: f64| l.max(t)));
                }
                if log.session_id.is_none() {
                    if let Some(s) = v.get("sessionId").and_then(Value::as_str) {
                        log.session_id = Some(s.to_owned());
                        for k in ["cwd", "version", "gitBranch", "slug"] {
                            if let Some(x) = v.get(k) {
                                log.first_meta.insert(k.to_owned(), x.clone());
                            }
                        }
                    }
                }
                if v.get("subtype").and_then(Value::as_str) == Some("compact_boundary") {
                    log.compactions += 1;
                }
            }
            if let Some(l) = parse_line(&v, fi, n, &agent, path, &mut problems) {
                if log.by_uuid.contains_key(&l.uuid) {
                    log.warnings.push(format!(
                        "{}:{n}: uuid {} seen before; the first line is used",
                        path.display(),
                        l.uuid
                    ));
                    continue;
                }
                log.by_uuid.insert(l.uuid.clone(), log.lines.len());
                log.lines.push(l);
            }
        }
    }
    progress(bytes);
    problems.check()?;
    // Inline sidechains without an agentId: name them by their chain root.
    for i in 0..log.lines.len() {
        if log.lines[i].agent == Agent::Sub(String::new()) {
            let mut cur = i;
            let mut guard = 0;
            while let Some(p) = log.lines[cur]
                .parent
                .as_ref()
                .and_then(|p| log.by_uuid.get(p))
            {
                if log.lines[*p].agent == Agent::Main || guard > 1_000_000 {
                    break;
                }
                cur = *p;
                guard += 1;
            }
            let root: String = log.lines[cur]
                .uuid
                .chars()
                .filter(|c| *c != '-')
                .take(8)
                .collect();
            log.lines[i].agent = Agent::Sub(root);
        }
    }
    Ok(log)
}

/// One API response: the lines sharing a `message.id` within one agent.
struct Group {
    agent: Agent,
    msg_id: String,
    lines: Vec<usize>,
}

/// What links a sub-agent to the `Task` call that started it.
#[derive(Clone, Debug, Default)]
struct Link {
    call_id: String,
    subagent_type: Option<String>,
    description: Option<String>,
}

fn response_message(blocks: &[&ABlock]) -> Message {
    let mut reasoning = Vec::new();
    let mut text = Vec::new();
    let mut calls = Vec::new();
    for b in blocks {
        match b {
            ABlock::Thinking(t) if !t.trim().is_empty() => reasoning.push(t.trim_matches('\n')),
            ABlock::Text(t) if !t.trim().is_empty() => text.push(t.trim_matches('\n')),
            ABlock::ToolUse { id, name, input } => calls.push(ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: input.clone(),
            }),
            _ => {}
        }
    }
    Message {
        role: "assistant".into(),
        content: text.join("\n\n"),
        reasoning_content: Some(reasoning.join("\n\n")),
        tool_calls: calls,
        tool_call_id: None,
    }
}

/// Appends the results of `pending` calls that exist and were written before the request.
fn flush<'a>(
    pending: &mut Vec<&'a str>,
    done: &mut HashSet<&'a str>,
    ctx: &mut Vec<u32>,
    result_of: &HashMap<&'a str, (usize, &'a str)>,
    available: &dyn Fn(usize) -> bool,
    turn: &mut dyn FnMut(String, &dyn Fn() -> Turn) -> u32,
) {
    for id in pending.drain(..) {
        if done.contains(id) {
            continue;
        }
        if let Some(&(line, text)) = result_of.get(id) {
            if available(line) {
                done.insert(id);
                ctx.push(turn(format!("result:{id}"), &|| {
                    Turn::new("", Message::tool(id, text), Source::Tool)
                }));
            }
        }
    }
}

/// Reads the session at `main` into a [`Session`]; `files` are its logs as [`session_files`]
/// lists them (the main log, then its `subagents/` files).
pub fn read_session(
    main: &Path,
    files: Vec<PathBuf>,
    progress: &mut dyn FnMut(u64),
) -> Result<(Session, Vec<String>, Vec<String>)> {
    let log = read_log(files, progress)?;
    let mut warnings = log.warnings.clone();
    let lines = &log.lines;
    // Groups (one per API response), in order of their first line.
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of: HashMap<(Agent, String), usize> = HashMap::new();
    for (i, l) in lines.iter().enumerate() {
        if let Kind::Assistant { msg_id, .. } = &l.kind {
            let key = (l.agent.clone(), msg_id.clone());
            let g = *group_of.entry(key).or_insert_with(|| {
                groups.push(Group {
                    agent: l.agent.clone(),
                    msg_id: msg_id.clone(),
                    lines: Vec::new(),
                });
                groups.len() - 1
            });
            groups[g].lines.push(i);
        }
    }
    let first_ts = |g: &Group| lines[g.lines[0]].ts.unwrap_or(f64::NEG_INFINITY);
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by(|&a, &b| {
        let (la, lb) = (&lines[groups[a].lines[0]], &lines[groups[b].lines[0]]);
        first_ts(&groups[a])
            .total_cmp(&first_ts(&groups[b]))
            .then(la.file.cmp(&lb.file))
            .then(la.line.cmp(&lb.line))
    });
    let mut resp_of_group = vec![0usize; groups.len()];
    for (r, &g) in order.iter().enumerate() {
        resp_of_group[g] = r;
    }
    // Tool calls and their results.
    let mut call_of: HashMap<&str, (&str, &Value)> = HashMap::new(); // id → (name, input)
    for l in lines {
        if let Kind::Assistant { blocks, .. } = &l.kind {
            for b in blocks {
                if let ABlock::ToolUse { id, name, input } = b {
                    call_of.insert(id, (name, input));
                }
            }
        }
    }
    let mut result_of: HashMap<&str, (usize, &str)> = HashMap::new(); // call id → (line, text)
    let mut links: HashMap<String, Link> = HashMap::new();
    for (i, l) in lines.iter().enumerate() {
        if let Kind::User {
            blocks, agent_link, ..
        } = &l.kind
        {
            for b in blocks {
                if let UBlock::ToolResult { id, content } = b {
                    result_of.entry(id).or_insert((i, content));
                    if let Some(agent) = agent_link {
                        let (sub_type, desc) = match call_of.get(id.as_str()) {
                            Some((_, input)) => (
                                input.get("subagent_type").and_then(Value::as_str),
                                input.get("description").and_then(Value::as_str),
                            ),
                            None => (None, None),
                        };
                        links.insert(
                            agent.clone(),
                            Link {
                                call_id: id.clone(),
                                subagent_type: sub_type.map(str::to_owned),
                                description: desc.map(str::to_owned),
                            },
                        );
                    }
                }
            }
        }
    }
    // Sub-agents without a link by id (older layouts): match the Task prompt with the
    // sub-agent's first user message.
    let sub_ids: Vec<String> = {
        let mut v: Vec<String> = groups
            .iter()
            .filter_map(|g| match &g.agent {
                Agent::Sub(id) => Some(id.clone()),
                _ => None,
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    for id in &sub_ids {
        if links.contains_key(id) {
            continue;
        }
        let first_user = lines.iter().find_map(|l| match (&l.agent, &l.kind) {
            (Agent::Sub(a), Kind::User { blocks, .. }) if a == id => {
                blocks.iter().find_map(|b| match b {
                    UBlock::Text(t) => Some(t.as_str()),
                    _ => None,
                })
            }
            _ => None,
        });
        let found = first_user.and_then(|text| {
            call_of.iter().find_map(|(cid, (name, input))| {
                (matches!(*name, "Task" | "Agent")
                    && input.get("prompt").and_then(Value::as_str) == Some(text))
                .then(|| Link {
                    call_id: (*cid).to_owned(),
                    subagent_type: input
                        .get("subagent_type")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    description: input
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                })
            })
        });
        match found {
            Some(link) => {
                links.insert(id.clone(), link);
            }
            None => warnings.push(format!(
                "sub-agent {id}: no Task call links to it (its requests carry no subagent_type)"
            )),
        }
    }
    for (agent, link) in &links {
        if !sub_ids.contains(agent) {
            warnings.push(format!(
                "Task call {} ran sub-agent {agent}, whose log is not beside the session \
                 (expected {}/subagents/agent-{agent}.jsonl): its result is a tool span only",
                link.call_id,
                main.with_extension("").display()
            ));
        }
    }

    // Turns.
    let mut turns: Vec<Turn> = Vec::new();
    let mut turn_index: HashMap<String, u32> = HashMap::new();
    let mut turn = |identity: String, make: &dyn Fn() -> Turn| -> u32 {
        if let Some(&i) = turn_index.get(&identity) {
            return i;
        }
        let i = turns.len() as u32;
        let mut t = make();
        t.key = super::convo::hash_str(&identity);
        turns.push(t);
        turn_index.insert(identity, i);
        i
    };

    let file_name = |f: usize| {
        log.files[f]
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let mut responses: Vec<Response> = Vec::with_capacity(groups.len());
    let mut first_task: Option<String> = None;
    for &g in &order {
        let group = &groups[g];
        let first = &lines[group.lines[0]];
        let t_req = first.ts;
        // The chain above the response's first line, root first.
        let mut chain = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = first.parent.clone();
        while let Some(u) = cur {
            match log.by_uuid.get(&u) {
                Some(&i) if seen.insert(i) => {
                    chain.push(i);
                    cur = lines[i].parent.clone();
                }
                Some(_) => {
                    warnings.push(format!(
                        "{}:{}: parentUuid cycle; the context starts there",
                        file_name(first.file),
                        first.line
                    ));
                    break;
                }
                None => {
                    warnings.push(format!(
                        "{}:{}: parentUuid {u} is not in the session; the context of message {} \
                         starts after it",
                        file_name(lines[*chain.last().unwrap_or(&group.lines[0])].file),
                        lines[*chain.last().unwrap_or(&group.lines[0])].line,
                        group.msg_id
                    ));
                    break;
                }
            }
        }
        chain.reverse();
        // A compaction call belongs to the agent whose conversation it summarises: the agent of
        // the chain it continues (the main thread, or a sub-agent compacting its own context).
        let owner = match &group.agent {
            Agent::Compact(_) => chain
                .iter()
                .rev()
                .map(|&i| &lines[i].agent)
                .find(|a| !matches!(a, Agent::Compact(_)))
                .cloned()
                .unwrap_or(Agent::Main),
            a => a.clone(),
        };
        let (agent_name, system_text) = match &owner {
            Agent::Main | Agent::Compact(_) => ("main".to_owned(), SYSTEM_NOTE.to_owned()),
            Agent::Sub(id) => {
                let kind = links
                    .get(id)
                    .and_then(|l| l.subagent_type.clone())
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                (
                    format!("sub-{id}"),
                    format!(
                        "[gyre import] Sub-agent {id}{kind}: its system prompt and tool \
                         definitions are not in the session log; this segment stands in for them."
                    ),
                )
            }
        };
        let sys_key = format!("system:{agent_name}");
        let mut ctx: Vec<u32> = vec![turn(sys_key, &|| {
            Turn::new(
                "",
                Message::new("system", system_text.clone()),
                Source::System,
            )
        })];
        let mut done_groups: HashSet<usize> = HashSet::new();
        let mut done_results: HashSet<&str> = HashSet::new();
        let mut pending: Vec<&str> = Vec::new();
        let available = |line: usize| match (lines[line].ts, t_req) {
            (Some(a), Some(b)) => a <= b,
            _ => true,
        };
        for &i in &chain {
            let l = &lines[i];
            match &l.kind {
                Kind::Assistant { msg_id, .. } => {
                    let Some(&og) = group_of.get(&(l.agent.clone(), msg_id.clone())) else {
                        continue;
                    };
                    if !done_groups.insert(og) {
                        continue;
                    }
                    flush(
                        &mut pending,
                        &mut done_results,
                        &mut ctx,
                        &result_of,
                        &available,
                        &mut turn,
                    );
                    let blocks: Vec<&ABlock> = groups[og]
                        .lines
                        .iter()
                        .filter_map(|&k| match &lines[k].kind {
                            Kind::Assistant { blocks, .. } => Some(blocks),
                            _ => None,
                        })
                        .flatten()
                        .collect();
                    for b in &blocks {
                        if let ABlock::ToolUse { id, .. } = b {
                            pending.push(id);
                        }
                    }
                    let r = resp_of_group[og];
                    // Built only when the turn is new: earlier responses recur in every later
                    // context, and rebuilding them each time made imports quadratic.
                    ctx.push(turn(
                        format!("response:{}:{}", groups[og].agent.key(), msg_id),
                        &|| Turn {
                            response: Some(r),
                            ..Turn::new("", response_message(&blocks), Source::Assistant)
                        },
                    ));
                }
                Kind::User {
                    blocks,
                    compact_summary,
                    ..
                } => {
                    let mut text = Vec::new();
                    for b in blocks {
                        match b {
                            UBlock::ToolResult { id, content } => {
                                if done_results.contains(id.as_str()) {
                                    continue;
                                }
                                if pending.contains(&id.as_str()) {
                                    flush(
                                        &mut pending,
                                        &mut done_results,
                                        &mut ctx,
                                        &result_of,
                                        &available,
                                        &mut turn,
                                    );
                                }
                                if done_results.insert(id) {
                                    ctx.push(turn(format!("result:{id}"), &|| {
                                        Turn::new(
                                            "",
                                            Message::tool(id, content.clone()),
                                            Source::Tool,
                                        )
                                    }));
                                }
                            }
                            UBlock::Text(t) => text.push(t.as_str()),
                        }
                    }
                    if !text.is_empty() {
                        flush(
                            &mut pending,
                            &mut done_results,
                            &mut ctx,
                            &result_of,
                            &available,
                            &mut turn,
                        );
                        let content = text.join("\n");
                        if first_task.is_none() && group.agent == Agent::Main && !*compact_summary {
                            first_task = Some(content.chars().take(500).collect());
                        }
                        let source = if *compact_summary {
                            Source::Summary
                        } else {
                            Source::User
                        };
                        ctx.push(turn(format!("user:{}", l.uuid), &|| {
                            Turn::new("", Message::new("user", content.clone()), source)
                        }));
                    }
                }
                Kind::Other => {}
            }
        }
        flush(
            &mut pending,
            &mut done_results,
            &mut ctx,
            &result_of,
            &available,
            &mut turn,
        );

        // The response itself.
        let mut blocks: Vec<&ABlock> = Vec::new();
        let mut meta = Map::new();
        let mut model = None;
        let mut finish = None;
        for &k in &group.lines {
            if let Kind::Assistant {
                blocks: b,
                model: m,
                stop,
                usage,
                request_id,
                ..
            } = &lines[k].kind
            {
                blocks.extend(b.iter());
                if model.is_none() {
                    model = m.clone();
                }
                if stop.is_some() {
                    finish = stop.clone();
                }
                if let Some(u) = usage {
                    meta.insert("usage".into(), u.clone());
                }
                if let Some(r) = request_id {
                    meta.insert("request_id".into(), json!(r));
                }
            }
        }
        meta.insert("message_id".into(), json!(group.msg_id));
        meta.insert("uuid".into(), json!(first.uuid));
        meta.insert(
            "source_line".into(),
            json!(format!("{}:{}", file_name(first.file), first.line)),
        );
        meta.insert("log_lines".into(), json!(group.lines.len()));
        let summary = matches!(group.agent, Agent::Compact(_));
        if let Agent::Compact(id) = &group.agent {
            meta.insert("compaction".into(), json!(id));
        }
        match &owner {
            Agent::Sub(id) => {
                meta.insert("subagent".into(), json!(id));
                if let Some(link) = links.get(id) {
                    meta.insert("task_call_id".into(), json!(link.call_id));
                    if let Some(t) = &link.subagent_type {
                        meta.insert("subagent_type".into(), json!(t));
                    }
                    if let Some(d) = &link.description {
                        meta.insert("task_description".into(), json!(d));
                    }
                }
            }
            Agent::Main | Agent::Compact(_) => {}
        }
        responses.push(Response {
            context: ctx,
            message: response_message(&blocks),
            agent: agent_name,
            summary,
            t: t_req,
            model,
            finish,
            meta,
        });
    }

    let execution = log.session_id.clone().unwrap_or_else(|| {
        main.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "session".into())
    });
    let t0 = log.first_ts.unwrap_or(0.0);
    let mut meta = Map::new();
    meta.insert("source".into(), json!("claude-code"));
    meta.insert("reconstructed".into(), Value::Bool(true));
    for (k, v) in &log.first_meta {
        meta.insert(
            match k.as_str() {
                "version" => "claude_code_version".into(),
                "gitBranch" => "git_branch".into(),
                other => other.to_owned(),
            },
            v.clone(),
        );
    }
    meta.insert("compactions".into(), json!(log.compactions));
    let subagents: Vec<Value> = sub_ids
        .iter()
        .map(|id| {
            let l = links.get(id);
            json!({
                "agent": format!("sub-{id}"),
                "task_call_id": l.map(|l| l.call_id.clone()),
                "subagent_type": l.and_then(|l| l.subagent_type.clone()),
            })
        })
        .collect();
    meta.insert("subagents".into(), Value::Array(subagents));
    meta.insert(
        "system_prompt".into(),
        json!("not in the log (stand-in segment)"),
    );
    let inputs: Vec<String> = log.files.iter().map(|p| p.display().to_string()).collect();
    let session = Session {
        execution,
        t: t0,
        task: first_task,
        meta,
        turns,
        responses,
        closure: Closure {
            t: log.last_ts.unwrap_or(t0),
            status: ClosureStatus::Completed,
            artifact: json!("session"),
            version: Some(json!(1)),
            meta: Map::new(),
        },
    };
    Ok((session, warnings, inputs))
}

/// Imports the session at `main` into `sink` (header first).
pub fn import(
    main: &Path,
    opts: &Options,
    builder: &mut Builder,
    tokenizer_header: &Value,
    sink: &mut Sink,
    progress: &mut dyn FnMut(super::Progress),
) -> Result<Summary> {
    let files = session_files(main);
    let total_bytes: u64 = files
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let (session, warnings, inputs) = read_session(main, files, &mut |b| {
        progress(super::Progress::Reading {
            done: b,
            total: total_bytes,
        })
    })?;
    let header = header_meta("claude-code", opts, &inputs);
    let mut summary = write_session(
        &session,
        builder,
        opts,
        Some((tokenizer_header, &header)),
        sink,
        &mut |done, total| progress(super::Progress::Requests { done, total }),
    )?;
    summary.executions = 1;
    summary.warnings = warnings;
    Ok(summary)
}
