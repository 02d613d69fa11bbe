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
//!
//! The import runs in phases: [`read_log`] (typed lines, every file), [`repair_chains`]
//! (parents never written), [`group_responses`], [`link_calls`] (tool results, sub-agents,
//! compaction calls), [`build_contexts`] and [`assemble`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use color_eyre::eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::convo::{Turn, hash_str};
use super::error::diag;
use super::input::{Counter, Lines, file_name, line_values, sub_path, typed};
use super::session::{Closure, Response, Session};
use super::sniff::{Fit, Probe, Shape};
use super::timestamp::parse_timestamp;
use super::{About, Importer, Job, Progress};
use crate::engine::record::{ClosureStatus, Source};
use crate::text::{Message, ToolCall};

/// The Claude Code importer.
pub struct ClaudeCode;

static ABOUT: About = About {
    name: "claude-code",
    what: "a Claude Code session",
    summary: "A Claude Code session (with its subagents/ files): one request per API response",
    input: "SESSION.jsonl",
    input_help: "The session's main `.jsonl` file",
    many: false,
    directories: false,
    reconstructed: true,
    help: "\
Examples:
  gyre import claude-code ~/.claude/projects/-home-me-app/8463c716-….jsonl --out session.jsonl
  gyre import claude-code SESSION.jsonl --score 1 --out session.jsonl.zst
  gyre import claude-code SESSION.jsonl --no-restore --out rerendered.jsonl   # the false branches
  gyre stats session.jsonl

Reads SESSION.jsonl and SESSION/subagents/agent-*.jsonl (sub-agents, compaction). Records are
reconstructed (re-tokenised, no log-probs) and marked so. docs/import.md has the mapping.",
};

/// What the stand-in system segment says.
pub const SYSTEM_NOTE: &str = "[gyre import] The system prompt and tool definitions Claude Code \
sent with this request are not in the session log; this segment stands in for them.";

/// Line types Claude Code writes; a file whose lines have none of these is not a session.
const LINE_TYPES: [&str; 8] = [
    "user",
    "assistant",
    "system",
    "summary",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "attachment",
];

impl Importer for ClaudeCode {
    type Item = Session;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        match (&probe.shape, probe.first_object()) {
            (Shape::Jsonl(_), Some(o)) => {
                let typed = o
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| LINE_TYPES.contains(&t));
                if typed || o.contains_key("parentUuid") || o.contains_key("sessionId") {
                    Fit::Yes
                } else {
                    Fit::No
                }
            }
            // A first line longer than the bytes looked at (a pasted image).
            (Shape::Document(head), _) if !head.array => {
                if head.has("type") || head.has("parentUuid") || head.has("uuid") {
                    Fit::Unknown
                } else {
                    Fit::No
                }
            }
            _ => Fit::No,
        }
    }

    fn files(&self, inputs: &[PathBuf]) -> Vec<PathBuf> {
        inputs.iter().flat_map(|p| session_files(p)).collect()
    }

    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Session) -> Result<()>,
    ) -> Result<()> {
        for main in inputs {
            let session = read_session(main, job)?;
            emit(job, session)?;
        }
        Ok(())
    }

    fn records(&self, item: Session, job: &mut Job) -> Result<()> {
        super::session::records(item, job)
    }
}

/// Reads the session at `main` (and the files beside it) into a [`Session`].
pub fn read_session(main: &Path, job: &mut Job) -> Result<Session> {
    let files = session_files(main);
    let mut log = read_log(files, job)?;
    if log.lines.is_empty() {
        return Err(super::error::bad(
            main,
            0,
            format!(
                "not a Claude Code session: no line has a `uuid`; this is {}",
                Probe::of(main).describe(&[])
            ),
            None,
        ));
    }
    repair_chains(&mut log, job);
    name_inline_sidechains(&mut log);
    let groups = group_responses(&log);
    let links = link_calls(main, &log, &groups, job);
    let (turns, responses, task) = build_contexts(&log, &groups, &links, job);
    Ok(assemble(main, &log, &links, turns, responses, task))
}

/// The files of a session: the main file first, then `subagents/*.jsonl` in name order.
pub fn session_files(main: &Path) -> Vec<PathBuf> {
    let mut files = vec![main.to_path_buf()];
    let dir = main.with_extension("").join("subagents");
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut subs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && p.extension().is_some_and(|x| x == "jsonl")
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("agent-"))
            })
            .collect();
        subs.sort();
        files.extend(subs);
    }
    files
}

// ---------------------------------------------------------------------------------------------
// Phase 1: typed lines.

/// One line as Claude Code writes it (the fields used; the rest is ignored).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    parent_uuid: Option<String>,
    #[serde(default)]
    is_sidechain: Option<bool>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    is_compact_summary: Option<bool>,
    #[serde(default)]
    tool_use_result: Option<ToolUseResult>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    cwd: Option<Value>,
    #[serde(default)]
    version: Option<Value>,
    #[serde(default)]
    git_branch: Option<Value>,
    #[serde(default)]
    slug: Option<Value>,
}

/// `toolUseResult`: an object (a `Task` result names its sub-agent) or a plain string.
#[derive(Deserialize)]
#[serde(untagged)]
enum ToolUseResult {
    Object {
        #[serde(rename = "agentId", default)]
        agent_id: Option<String>,
    },
    Other(serde::de::IgnoredAny),
}

/// An API response's `message`.
#[derive(Deserialize)]
struct AssistantMessage {
    id: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Value,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

/// A user line's `message`.
#[derive(Deserialize)]
struct UserMessage {
    #[serde(default)]
    content: Value,
}

/// One content block.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    ToolUse {
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Value,
    },
    ServerToolUse {
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Value,
    },
    Image,
    #[serde(other)]
    Other,
}

/// The role a file (or an inline sidechain) plays.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    /// A compaction boundary (the summary follows it).
    Boundary,
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

/// Everything read from a session's files.
struct Log {
    files: Vec<PathBuf>,
    lines: Vec<Line>,
    by_uuid: HashMap<String, usize>,
    session_id: Option<String>,
    first_meta: Map<String, Value>,
    last_ts: Option<f64>,
    first_ts: Option<f64>,
    /// `file:line` of each compaction boundary.
    boundaries: Vec<String>,
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

/// Text of a `tool_result`'s content: a string, or blocks (text, `[image]`, `[type]`).
fn result_text(v: &Value) -> String {
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

/// The blocks of a message's `content` (a string is one text block); a bad block is reported
/// at `message.content[i]`.
fn blocks(content: &Value) -> Result<Vec<Block>, (String, String)> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(vec![Block::Text { text: s.clone() }]),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, b)| {
                typed::<Block>(b)
                    .map_err(|(m, p)| (m, sub_path(&format!("message.content[{i}]"), &p)))
            })
            .collect(),
        _ => Err((
            "content must be a string or a list of blocks".into(),
            "message.content".into(),
        )),
    }
}

/// A typed line → its parsed form (`None` for lines outside the conversation tree: no uuid).
fn parse_entry(
    e: Entry,
    file: usize,
    line: u64,
    agent: &Agent,
) -> Result<Option<Line>, (String, String)> {
    let Some(uuid) = e.uuid else {
        return Ok(None);
    };
    let Some(ty) = e.kind.as_deref() else {
        return Err(("line has a uuid but no `type`".into(), "type".into()));
    };
    let kind = match ty {
        "assistant" => {
            let m = e.message.as_ref().ok_or_else(|| {
                (
                    "assistant line without `message`".to_owned(),
                    "message".to_owned(),
                )
            })?;
            let m: AssistantMessage =
                typed(m).map_err(|(msg, p)| (msg, sub_path("message", &p)))?;
            if m.model.as_deref() == Some("<synthetic>") {
                // Written by Claude Code itself (an API error, "No response requested."): not
                // an API response.
                Kind::Other
            } else {
                let blocks = blocks(&m.content)?
                    .into_iter()
                    .filter_map(|b| match b {
                        Block::Text { text } => Some(ABlock::Text(text)),
                        Block::Thinking { thinking } => Some(ABlock::Thinking(thinking)),
                        Block::ToolUse { id, name, input }
                        | Block::ServerToolUse { id, name, input } => {
                            Some(ABlock::ToolUse { id, name, input })
                        }
                        _ => None,
                    })
                    .collect();
                Kind::Assistant {
                    msg_id: m.id,
                    model: m.model,
                    blocks,
                    stop: m.stop_reason,
                    usage: m.usage,
                    request_id: e.request_id,
                }
            }
        }
        "user" => {
            let content = match &e.message {
                Some(m) => {
                    typed::<UserMessage>(m)
                        .map_err(|(msg, p)| (msg, sub_path("message", &p)))?
                        .content
                }
                None => Value::Null,
            };
            let blocks = blocks(&content)?
                .into_iter()
                .filter_map(|b| match b {
                    Block::ToolResult {
                        tool_use_id,
                        content,
                    } => Some(UBlock::ToolResult {
                        id: tool_use_id,
                        content: result_text(&content),
                    }),
                    Block::Text { text } => Some(UBlock::Text(text)),
                    Block::Image => Some(UBlock::Text("[image]".into())),
                    _ => None,
                })
                .collect();
            Kind::User {
                blocks,
                compact_summary: e.is_compact_summary == Some(true),
                agent_link: match e.tool_use_result {
                    Some(ToolUseResult::Object { agent_id }) => agent_id,
                    _ => None,
                },
            }
        }
        "system" if e.subtype.as_deref() == Some("compact_boundary") => Kind::Boundary,
        _ => Kind::Other,
    };
    let agent = if file == 0 && e.is_sidechain == Some(true) {
        // Older layout: sub-agent lines inline. Without an agentId the chain root names it.
        match e.agent_id.as_deref() {
            Some(id) => Agent::from_id(id),
            None => Agent::Sub(String::new()),
        }
    } else {
        agent.clone()
    };
    Ok(Some(Line {
        file,
        line,
        uuid,
        parent: e.parent_uuid,
        ts: e.timestamp.as_deref().and_then(parse_timestamp),
        kind,
        agent,
    }))
}

/// Reads every file of the session as typed lines; a line holding two JSON objects (Claude Code
/// sometimes loses a newline before a `summary`) gives both.
fn read_log(files: Vec<PathBuf>, job: &mut Job) -> Result<Log> {
    let mut log = Log {
        files,
        lines: Vec::new(),
        by_uuid: HashMap::new(),
        session_id: None,
        first_meta: Map::new(),
        last_ts: None,
        first_ts: None,
        boundaries: Vec::new(),
    };
    let total: u64 = log
        .files
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let counter = Counter::default();
    let files = log.files.clone();
    for (fi, path) in files.iter().enumerate() {
        let agent = file_agent(path, fi);
        let mut lines = Lines::open(path, &counter)?;
        while let Some(next) = lines.next_line() {
            let (n, text) = match next {
                Ok(l) => l,
                Err(d) => {
                    job.log.problem(d);
                    continue;
                }
            };
            if n % 64 == 0 {
                (job.progress)(Progress::Reading {
                    done: counter.get(),
                    total,
                });
            }
            if text.trim().is_empty() {
                continue;
            }
            let (values, err) = line_values(text);
            if let Some(e) = err {
                job.log.problem(diag(path, n, e, None));
            }
            for v in values {
                read_value(&mut log, fi, path, n, &agent, v, job);
            }
        }
    }
    (job.progress)(Progress::Reading { done: total, total });
    job.log.check()?;
    Ok(log)
}

fn read_value(
    log: &mut Log,
    fi: usize,
    path: &Path,
    n: u64,
    agent: &Agent,
    v: Value,
    job: &mut Job,
) {
    if !v.is_object() {
        job.log
            .problem(diag(path, n, "a line must be a JSON object", None));
        return;
    }
    let entry: Entry = match typed(&v) {
        Ok(e) => e,
        Err((msg, field)) => {
            job.log.problem(diag(path, n, msg, Some(&field)));
            return;
        }
    };
    if fi == 0 {
        if let Some(t) = entry.timestamp.as_deref().and_then(parse_timestamp) {
            log.first_ts = Some(log.first_ts.map_or(t, |f: f64| f.min(t)));
            log.last_ts = Some(log.last_ts.map_or(t, |l: f64| l.max(t)));
        }
        if log.session_id.is_none() {
            if let Some(s) = &entry.session_id {
                log.session_id = Some(s.clone());
                for (k, x) in [
                    ("cwd", &entry.cwd),
                    ("claude_code_version", &entry.version),
                    ("git_branch", &entry.git_branch),
                    ("slug", &entry.slug),
                ] {
                    if let Some(x) = x {
                        log.first_meta.insert(k.to_owned(), x.clone());
                    }
                }
            }
        }
    }
    match parse_entry(entry, fi, n, agent) {
        Ok(Some(l)) => {
            if matches!(l.kind, Kind::Boundary) && fi == 0 {
                log.boundaries.push(format!("{}:{n}", file_name(path)));
            }
            if log.by_uuid.contains_key(&l.uuid) {
                job.log.warn(format!(
                    "{}:{n}: uuid {} seen before; the first line is used",
                    file_name(path),
                    l.uuid
                ));
                return;
            }
            log.by_uuid.insert(l.uuid.clone(), log.lines.len());
            log.lines.push(l);
        }
        Ok(None) => {}
        Err((msg, field)) => job.log.problem(diag(path, n, msg, Some(&field))),
    }
}

// ---------------------------------------------------------------------------------------------
// Phase 2: chains.

/// A line whose `parentUuid` was never written (Claude Code 2.1 Stop-hook `progress` lines name
/// one) would cut every later context short: its parent becomes the line before it in the same
/// file, which is where Claude Code appended it.
fn repair_chains(log: &mut Log, job: &mut Job) {
    let mut repaired = Vec::new();
    let mut prev: Option<(usize, usize)> = None; // (file, index of the previous line)
    for i in 0..log.lines.len() {
        let l = &log.lines[i];
        let same_file_prev = prev.filter(|&(f, _)| f == l.file).map(|(_, p)| p);
        if let Some(p) = &l.parent {
            if !log.by_uuid.contains_key(p) {
                if let Some(before) = same_file_prev {
                    repaired.push((i, log.lines[before].uuid.clone()));
                }
            }
        }
        prev = Some((l.file, i));
    }
    if let Some(&(first, _)) = repaired.first() {
        let l = &log.lines[first];
        job.log.warn(format!(
            "{}:{}: {} naming a parentUuid that is not in the session: each is linked to the \
             line before it in its file",
            file_name(&log.files[l.file]),
            l.line,
            crate::report::plural(repaired.len(), "line")
        ));
    }
    for (i, parent) in repaired {
        log.lines[i].parent = Some(parent);
    }
}

/// Inline sidechains without an agentId are named by the root of their chain.
fn name_inline_sidechains(log: &mut Log) {
    for i in 0..log.lines.len() {
        if log.lines[i].agent != Agent::Sub(String::new()) {
            continue;
        }
        let mut cur = i;
        let mut seen = HashSet::new();
        while let Some(&p) = log.lines[cur]
            .parent
            .as_ref()
            .and_then(|p| log.by_uuid.get(p))
        {
            if log.lines[p].agent == Agent::Main || !seen.insert(p) {
                break;
            }
            cur = p;
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

// ---------------------------------------------------------------------------------------------
// Phase 3: responses.

/// One API response: the lines sharing a `message.id` within one agent.
struct Group {
    agent: Agent,
    msg_id: String,
    lines: Vec<usize>,
}

/// The responses, in request order.
struct Groups {
    groups: Vec<Group>,
    of: HashMap<(Agent, String), usize>,
    /// Group indices in request order (first line's timestamp, then file and line).
    order: Vec<usize>,
    /// Request index of each group.
    request: Vec<usize>,
}

fn group_responses(log: &Log) -> Groups {
    let lines = &log.lines;
    let mut groups: Vec<Group> = Vec::new();
    let mut of: HashMap<(Agent, String), usize> = HashMap::new();
    for (i, l) in lines.iter().enumerate() {
        if let Kind::Assistant { msg_id, .. } = &l.kind {
            let key = (l.agent.clone(), msg_id.clone());
            let g = *of.entry(key).or_insert_with(|| {
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
    let mut request = vec![0usize; groups.len()];
    for (r, &g) in order.iter().enumerate() {
        request[g] = r;
    }
    Groups {
        groups,
        of,
        order,
        request,
    }
}

// ---------------------------------------------------------------------------------------------
// Phase 4: tool calls, results, sub-agents, compaction calls.

/// What links a sub-agent to the `Task` call that started it.
#[derive(Clone, Debug, Default)]
struct Link {
    call_id: String,
    subagent_type: Option<String>,
    description: Option<String>,
}

/// Tool results by call id, and sub-agents by id.
struct Calls {
    /// Call id → (line index, result text).
    results: HashMap<String, (usize, String)>,
    /// Sub-agent id → its `Task` call.
    links: BTreeMap<String, Link>,
    /// Sub-agents that answered (have responses), sorted.
    sub_ids: Vec<String>,
}

fn link_calls(main: &Path, log: &Log, groups: &Groups, job: &mut Job) -> Calls {
    let lines = &log.lines;
    // Call id → (name, input), in file order.
    let mut calls: BTreeMap<&str, (&str, &Value)> = BTreeMap::new();
    for l in lines {
        if let Kind::Assistant { blocks, .. } = &l.kind {
            for b in blocks {
                if let ABlock::ToolUse { id, name, input } = b {
                    calls.entry(id).or_insert((name, input));
                }
            }
        }
    }
    let link_of = |id: &str, input: &Value| Link {
        call_id: id.to_owned(),
        subagent_type: input
            .get("subagent_type")
            .and_then(Value::as_str)
            .map(str::to_owned),
        description: input
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
    };
    let mut results: HashMap<String, (usize, String)> = HashMap::new();
    let mut links: BTreeMap<String, Link> = BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        if let Kind::User {
            blocks, agent_link, ..
        } = &l.kind
        {
            for b in blocks {
                if let UBlock::ToolResult { id, content } = b {
                    results.entry(id.clone()).or_insert((i, content.clone()));
                    if let Some(agent) = agent_link {
                        let input = calls.get(id.as_str()).map_or(&Value::Null, |c| c.1);
                        links.insert(agent.clone(), link_of(id, input));
                    }
                }
            }
        }
    }
    let mut sub_ids: Vec<String> = groups
        .groups
        .iter()
        .filter_map(|g| match &g.agent {
            Agent::Sub(id) => Some(id.clone()),
            _ => None,
        })
        .collect();
    sub_ids.sort();
    sub_ids.dedup();
    // Sub-agents without a link by id (older layouts): the Task prompt is the sub-agent's first
    // user message.
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
            calls.iter().find_map(|(cid, (name, input))| {
                (matches!(*name, "Task" | "Agent")
                    && input.get("prompt").and_then(Value::as_str) == Some(text))
                .then(|| link_of(cid, input))
            })
        });
        match found {
            Some(link) => {
                links.insert(id.clone(), link);
            }
            None => job.log.warn(format!(
                "sub-agent {id}: no Task call links to it (its requests carry no subagent_type)"
            )),
        }
    }
    let beside = main.with_extension("");
    for (agent, link) in &links {
        if !sub_ids.contains(agent) {
            job.log.warn(format!(
                "Task call {} ran sub-agent {agent}, whose log is not beside the session \
                 (expected {}/subagents/agent-{agent}.jsonl): its result is a tool span only",
                link.call_id,
                beside.display()
            ));
        }
    }
    // Compaction: each boundary of the main thread had a call that wrote its summary.
    let calls_found = groups
        .groups
        .iter()
        .filter(|g| matches!(g.agent, Agent::Compact(_)))
        .map(|g| &g.agent)
        .collect::<HashSet<_>>()
        .len();
    if log.boundaries.len() > calls_found {
        job.log.warn(format!(
            "compaction at {}: the call that wrote its summary is not beside the session \
             (expected {}/subagents/agent-acompact-*.jsonl; {} of {} found): the summary is a \
             summary span only",
            log.boundaries[calls_found..].join(", "),
            beside.display(),
            calls_found,
            log.boundaries.len()
        ));
    }
    Calls {
        results,
        links,
        sub_ids,
    }
}

// ---------------------------------------------------------------------------------------------
// Phase 5: contexts.

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

/// Turns, deduplicated by identity: earlier responses recur in every later context, and
/// rebuilding them each time made imports quadratic.
#[derive(Default)]
struct Turns {
    turns: Vec<Turn>,
    index: HashMap<String, u32>,
}

impl Turns {
    fn get(&mut self, identity: String, make: impl FnOnce() -> Turn) -> u32 {
        if let Some(&i) = self.index.get(&identity) {
            return i;
        }
        let i = self.turns.len() as u32;
        let mut t = make();
        t.key = hash_str(&identity);
        self.turns.push(t);
        self.index.insert(identity, i);
        i
    }
}

/// The context of one response being built.
struct Ctx<'a> {
    log: &'a Log,
    calls: &'a Calls,
    /// Request time: results logged after it were not seen.
    t_req: Option<f64>,
    turns: Vec<u32>,
    done_groups: HashSet<usize>,
    done_results: HashSet<&'a str>,
    /// Calls of the previous response whose results are still to come.
    pending: Vec<&'a str>,
}

impl<'a> Ctx<'a> {
    fn available(&self, line: usize) -> bool {
        match (self.log.lines[line].ts, self.t_req) {
            (Some(a), Some(b)) => a <= b,
            _ => true,
        }
    }

    /// Appends the results of pending calls that exist and were written before the request.
    fn flush(&mut self, turns: &mut Turns) {
        for id in std::mem::take(&mut self.pending) {
            if self.done_results.contains(id) {
                continue;
            }
            if let Some((line, text)) = self.calls.results.get(id) {
                if self.available(*line) {
                    self.done_results.insert(id);
                    self.turns.push(turns.get(format!("result:{id}"), || {
                        Turn::new("", Message::tool(id, text.as_str()), Source::Tool)
                    }));
                }
            }
        }
    }
}

/// The chain above line `start` (its parent first … root last), reversed to root first.
fn chain_above(log: &Log, start: usize, job: &mut Job) -> Vec<usize> {
    let mut chain = Vec::new();
    let mut seen = HashSet::new();
    let mut cur = log.lines[start].parent.clone();
    while let Some(u) = cur {
        match log.by_uuid.get(&u) {
            Some(&i) if seen.insert(i) => {
                chain.push(i);
                cur = log.lines[i].parent.clone();
            }
            Some(_) => {
                let l = &log.lines[start];
                job.log.warn(format!(
                    "{}:{}: parentUuid cycle; the context starts there",
                    file_name(&log.files[l.file]),
                    l.line
                ));
                break;
            }
            None => {
                let l = &log.lines[*chain.last().unwrap_or(&start)];
                job.log.warn(format!(
                    "{}:{}: parentUuid {u} is not in the session; the context starts after it",
                    file_name(&log.files[l.file]),
                    l.line,
                ));
                break;
            }
        }
    }
    chain.reverse();
    chain
}

/// Per response: its context (as turns) and the response itself.
fn build_contexts(
    log: &Log,
    groups: &Groups,
    calls: &Calls,
    job: &mut Job,
) -> (Vec<Turn>, Vec<Response>, Option<String>) {
    let lines = &log.lines;
    let mut turns = Turns::default();
    let mut responses: Vec<Response> = Vec::with_capacity(groups.groups.len());
    let mut first_task: Option<String> = None;
    for &g in &groups.order {
        let group = &groups.groups[g];
        let first = &lines[group.lines[0]];
        let chain = chain_above(log, group.lines[0], job);
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
                let kind = calls
                    .links
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
        let mut ctx = Ctx {
            log,
            calls,
            t_req: first.ts,
            turns: vec![turns.get(format!("system:{agent_name}"), || {
                Turn::new("", Message::new("system", system_text), Source::System)
            })],
            done_groups: HashSet::new(),
            done_results: HashSet::new(),
            pending: Vec::new(),
        };
        for &i in &chain {
            let l = &lines[i];
            match &l.kind {
                Kind::Assistant { msg_id, .. } => {
                    let Some(&og) = groups.of.get(&(l.agent.clone(), msg_id.clone())) else {
                        continue;
                    };
                    if !ctx.done_groups.insert(og) {
                        continue;
                    }
                    ctx.flush(&mut turns);
                    let blocks: Vec<&ABlock> = groups.groups[og]
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
                            ctx.pending.push(id);
                        }
                    }
                    let r = groups.request[og];
                    ctx.turns.push(turns.get(
                        format!("response:{}:{}", groups.groups[og].agent.key(), msg_id),
                        || Turn {
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
                                if ctx.done_results.contains(id.as_str()) {
                                    continue;
                                }
                                if ctx.pending.contains(&id.as_str()) {
                                    ctx.flush(&mut turns);
                                }
                                if ctx.done_results.insert(id) {
                                    ctx.turns.push(turns.get(format!("result:{id}"), || {
                                        Turn::new(
                                            "",
                                            Message::tool(id, content.as_str()),
                                            Source::Tool,
                                        )
                                    }));
                                }
                            }
                            UBlock::Text(t) => text.push(t.as_str()),
                        }
                    }
                    if !text.is_empty() {
                        ctx.flush(&mut turns);
                        let content = text.join("\n");
                        if first_task.is_none() && group.agent == Agent::Main && !*compact_summary {
                            first_task = Some(content.chars().take(500).collect());
                        }
                        let source = if *compact_summary {
                            Source::Summary
                        } else {
                            Source::User
                        };
                        ctx.turns.push(turns.get(format!("user:{}", l.uuid), || {
                            Turn::new("", Message::new("user", content), source)
                        }));
                    }
                }
                Kind::Boundary | Kind::Other => {}
            }
        }
        ctx.flush(&mut turns);
        responses.push(response(log, group, &owner, calls, ctx.turns, agent_name));
    }
    (turns.turns, responses, first_task)
}

/// The response of `group` with its context.
fn response(
    log: &Log,
    group: &Group,
    owner: &Agent,
    calls: &Calls,
    context: Vec<u32>,
    agent: String,
) -> Response {
    let lines = &log.lines;
    let first = &lines[group.lines[0]];
    let mut blocks: Vec<&ABlock> = Vec::new();
    let mut meta = Map::new();
    let mut model = None;
    let mut finish = None;
    let mut usage_input = None;
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
                usage_input = input_tokens(u).or(usage_input);
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
        json!(format!(
            "{}:{}",
            file_name(&log.files[first.file]),
            first.line
        )),
    );
    meta.insert("log_lines".into(), json!(group.lines.len()));
    let summary = matches!(group.agent, Agent::Compact(_));
    if let Agent::Compact(id) = &group.agent {
        meta.insert("compaction".into(), json!(id));
    }
    if let Agent::Sub(id) = owner {
        meta.insert("subagent".into(), json!(id));
        if let Some(link) = calls.links.get(id) {
            meta.insert("task_call_id".into(), json!(link.call_id));
            if let Some(t) = &link.subagent_type {
                meta.insert("subagent_type".into(), json!(t));
            }
            if let Some(d) = &link.description {
                meta.insert("task_description".into(), json!(d));
            }
        }
    }
    Response {
        context,
        message: response_message(&blocks),
        agent,
        summary,
        t: first.ts,
        model,
        finish,
        meta,
        usage_input,
        line: first.line,
    }
}

/// The input the model read, per Anthropic's `usage`: uncached + cache reads + cache writes.
fn input_tokens(usage: &Value) -> Option<u64> {
    let get = |k: &str| usage.get(k).and_then(Value::as_u64);
    let base = get("input_tokens")?;
    Some(
        base + get("cache_read_input_tokens").unwrap_or(0)
            + get("cache_creation_input_tokens").unwrap_or(0),
    )
}

// ---------------------------------------------------------------------------------------------
// Phase 6: the execution.

fn assemble(
    main: &Path,
    log: &Log,
    calls: &Calls,
    turns: Vec<Turn>,
    responses: Vec<Response>,
    task: Option<String>,
) -> Session {
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
        meta.insert(k.clone(), v.clone());
    }
    meta.insert("compactions".into(), json!(log.boundaries.len()));
    let subagents: Vec<Value> = calls
        .sub_ids
        .iter()
        .map(|id| {
            let l = calls.links.get(id);
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
    Session {
        execution,
        file: main.to_path_buf(),
        line: 0,
        t: t0,
        task,
        meta,
        turns,
        tools: Vec::new(),
        responses,
        closure: Closure {
            t: log.last_ts.unwrap_or(t0),
            status: ClosureStatus::Completed,
            artifact: json!("session"),
            version: Some(json!(1)),
            meta: Map::new(),
        },
    }
}
