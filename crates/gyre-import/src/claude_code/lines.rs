//! A Claude Code session's lines, typed: every file read (a line holding two JSON objects gives
//! both), each line's agent, and chains repaired where a parent was never written.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::diag;
use crate::input::{Counter, Lines, file_name, line_values, sub_path, typed};
use crate::timestamp::parse_timestamp;
use crate::{Job, Progress};

use super::attachments::{Attach, attachment};

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
    /// A `progress` line's payload.
    #[serde(default)]
    data: Option<ProgressData>,
    /// An `attachment` line's payload (Claude Code 2.1.205+).
    #[serde(default)]
    attachment: Option<Value>,
    /// A `compact_boundary`'s metadata: the messages a compaction kept verbatim.
    #[serde(default)]
    compact_metadata: Option<CompactMetadata>,
}

/// `compactMetadata` of a `compact_boundary`: when a compaction keeps recent messages verbatim,
/// the log leaves their chain as it was and names how Claude Code relinks it on load.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactMetadata {
    #[serde(default)]
    preserved_segment: Option<PreservedSegment>,
    #[serde(default)]
    preserved_messages: Option<PreservedMessages>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PreservedSegment {
    head_uuid: String,
    anchor_uuid: String,
    tail_uuid: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PreservedMessages {
    anchor_uuid: String,
    #[serde(default)]
    uuids: Vec<String>,
}

/// How a compaction relinks the messages it kept.
#[derive(Clone, Debug)]
pub(super) enum Preserved {
    Segment(PreservedSegment),
    Messages(PreservedMessages),
}

/// A `progress` line's `data`: an `agent_progress` one copies a sub-agent's message into the
/// session (Claude Code 2.1); any other shape is not looked at.
#[derive(Deserialize)]
#[serde(untagged)]
enum ProgressData {
    Agent {
        #[serde(rename = "type")]
        kind: String,
        #[serde(rename = "agentId")]
        agent_id: String,
    },
    Other(serde::de::IgnoredAny),
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
        #[serde(default)]
        signature: Option<String>,
    },
    RedactedThinking,
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
pub(super) enum Agent {
    Main,
    Sub(String),
    Compact(String),
}

impl Agent {
    pub(super) fn from_id(id: &str) -> Self {
        if id.starts_with("acompact") {
            Agent::Compact(id.to_owned())
        } else {
            Agent::Sub(id.to_owned())
        }
    }

    pub(super) fn key(&self) -> String {
        match self {
            Agent::Main => "main".into(),
            Agent::Sub(id) => format!("sub:{id}"),
            Agent::Compact(id) => format!("compact:{id}"),
        }
    }
}

#[derive(Clone, Debug)]
pub(super) enum ABlock {
    Text(String),
    Thinking(String),
    /// The model thought, but the log holds only a signature (`"thinking": ""`) or an
    /// encrypted `redacted_thinking` block: the reasoning is unknown.
    HiddenThinking,
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

#[derive(Clone, Debug)]
pub(super) enum UBlock {
    Text(String),
    ToolResult { id: String, content: String },
}

#[derive(Clone, Debug)]
pub(super) enum Kind {
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
    /// A compaction boundary (the summary follows it), with the messages it kept verbatim.
    Boundary(Option<Preserved>),
    /// An `attachment` line: content Claude Code adds on the user side.
    Attachment {
        /// Its `type`.
        kind: String,
        /// What it becomes in the context.
        what: Attach,
    },
    Other,
}

#[derive(Clone, Debug)]
pub(super) struct Line {
    pub(super) file: usize,
    pub(super) line: u64,
    pub(super) uuid: String,
    pub(super) parent: Option<String>,
    pub(super) ts: Option<f64>,
    pub(super) kind: Kind,
    pub(super) agent: Agent,
}

/// Everything read from a session's files.
pub(super) struct Log {
    pub(super) files: Vec<PathBuf>,
    pub(super) lines: Vec<Line>,
    pub(super) by_uuid: HashMap<String, usize>,
    pub(super) session_id: Option<String>,
    pub(super) first_meta: Map<String, Value>,
    pub(super) last_ts: Option<f64>,
    pub(super) first_ts: Option<f64>,
    /// `file:line` of each compaction boundary.
    pub(super) boundaries: Vec<String>,
    /// Content blocks not reconstructed, by `type`: how many, and where the first is.
    pub(super) unread_blocks: std::collections::BTreeMap<String, (u64, String)>,
    /// `agent_progress` lines of the main file, by sub-agent id: a partial copy of its log.
    pub(super) mirrored: HashMap<String, u64>,
    /// Attachments not placed in any context, by `type`: how many, and where the first is.
    pub(super) unplaced: std::collections::BTreeMap<String, (u64, String)>,
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

/// Text of a `tool_result`'s content: a string, or blocks (text, `[image]`, `[type]`; the
/// types shown as `[type]` go to `unread`).
fn result_text(v: &Value, unread: &mut Vec<String>) -> String {
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
                Some(other) => {
                    unread.push(other.to_owned());
                    format!("[{other}]")
                }
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The blocks of a message's `content` (a string is one text block), each with its `type`; a
/// bad block is reported at `message.content[i]`.
fn blocks(content: &Value) -> Result<Vec<(String, Block)>, (String, String)> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(vec![("text".into(), Block::Text { text: s.clone() })]),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let kind = b
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned();
                typed::<Block>(b)
                    .map(|block| (kind, block))
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
/// The `type` of every content block that is not reconstructed goes to `unread`: on the
/// assistant side it is left out of the output (`redacted_thinking`, server-tool results), on
/// the user side it stands as `[type]` in the context, as in tool results.
fn parse_entry(
    e: Entry,
    file: usize,
    line: u64,
    agent: &Agent,
    unread: &mut Vec<String>,
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
                    .filter_map(|(kind, b)| match b {
                        Block::Text { text } => Some(ABlock::Text(text)),
                        Block::Thinking {
                            thinking,
                            signature,
                        } => {
                            if thinking.is_empty() && signature.is_some_and(|s| !s.is_empty()) {
                                Some(ABlock::HiddenThinking)
                            } else {
                                Some(ABlock::Thinking(thinking))
                            }
                        }
                        Block::RedactedThinking => Some(ABlock::HiddenThinking),
                        Block::ToolUse { id, name, input }
                        | Block::ServerToolUse { id, name, input } => {
                            Some(ABlock::ToolUse { id, name, input })
                        }
                        _ => {
                            unread.push(kind);
                            None
                        }
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
                .map(|(kind, b)| match b {
                    Block::ToolResult {
                        tool_use_id,
                        content,
                    } => UBlock::ToolResult {
                        id: tool_use_id,
                        content: result_text(&content, unread),
                    },
                    Block::Text { text } => UBlock::Text(text),
                    Block::Image => UBlock::Text("[image]".into()),
                    _ => {
                        let shown = format!("[{kind}]");
                        unread.push(kind);
                        UBlock::Text(shown)
                    }
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
        "system" if e.subtype.as_deref() == Some("compact_boundary") => {
            Kind::Boundary(e.compact_metadata.and_then(|m| {
                m.preserved_messages
                    .map(Preserved::Messages)
                    .or(m.preserved_segment.map(Preserved::Segment))
            }))
        }
        "attachment" => {
            let a = e.attachment.unwrap_or(Value::Null);
            Kind::Attachment {
                kind: a
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned(),
                what: attachment(&a),
            }
        }
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
pub(super) fn read_log(files: Vec<PathBuf>, job: &mut Job) -> Result<Log> {
    let mut log = Log {
        files,
        lines: Vec::new(),
        by_uuid: HashMap::new(),
        session_id: None,
        first_meta: Map::new(),
        last_ts: None,
        first_ts: None,
        boundaries: Vec::new(),
        unread_blocks: Default::default(),
        mirrored: HashMap::new(),
        unplaced: Default::default(),
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
    if !log.unread_blocks.is_empty() {
        let kinds: Vec<String> = log
            .unread_blocks
            .iter()
            .map(|(kind, (n, at))| format!("{n}× {kind} (first at {at})"))
            .collect();
        job.log.warn(format!(
            "content blocks not reconstructed: {}; an assistant's is left out of its output, a \
             user's stands as `[type]` in the context",
            kinds.join(", ")
        ));
    }
    if !log.unplaced.is_empty() {
        let kinds: Vec<String> = log
            .unplaced
            .iter()
            .map(|(kind, (n, at))| format!("{n}× {kind} (first at {at})"))
            .collect();
        job.log.warn(format!(
            "attachments not placed in the context (the log does not hold what Claude Code \
             sent for them, or the type is unknown): {}",
            kinds.join(", ")
        ));
    }
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
    if let (0, Some(ProgressData::Agent { kind, agent_id })) = (fi, &entry.data) {
        if kind == "agent_progress" {
            *log.mirrored.entry(agent_id.clone()).or_default() += 1;
        }
    }
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
    let mut unread = Vec::new();
    let parsed = parse_entry(entry, fi, n, agent, &mut unread);
    for kind in unread {
        let (count, _) = log
            .unread_blocks
            .entry(kind)
            .or_insert_with(|| (0, format!("{}:{n}", file_name(path))));
        *count += 1;
    }
    match parsed {
        Ok(Some(l)) => {
            if let Kind::Attachment {
                kind,
                what: Attach::Unplaced,
            } = &l.kind
            {
                let (count, _) = log
                    .unplaced
                    .entry(kind.clone())
                    .or_insert_with(|| (0, format!("{}:{n}", file_name(path))));
                *count += 1;
            }
            if matches!(l.kind, Kind::Boundary(_)) && fi == 0 {
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

/// A compaction that kept recent messages verbatim (a manual `/compact`, Claude Code 2.1.217)
/// leaves their `parentUuid`s as they were, so the chain after it runs back through the whole
/// pre-compaction conversation, past the summary. Claude Code relinks them when it loads the
/// session (`compactMetadata.preservedSegment` / `preservedMessages`); so does this, the same
/// way: the kept messages hang below the anchor (the summary), and whatever hung below the
/// anchor continues after the last kept message. Returns how many boundaries were applied.
pub(super) fn relink_preserved(log: &mut Log) -> usize {
    let plans: Vec<Preserved> = log
        .lines
        .iter()
        .filter_map(|l| match &l.kind {
            Kind::Boundary(Some(p)) => Some(p.clone()),
            _ => None,
        })
        .collect();
    let mut applied = 0;
    for plan in plans {
        let (anchor, first, last) = match plan {
            Preserved::Messages(m) => {
                let idx: Option<Vec<usize>> = m
                    .uuids
                    .iter()
                    .map(|u| log.by_uuid.get(u).copied())
                    .collect();
                let Some(idx) = idx.filter(|v| !v.is_empty()) else {
                    continue;
                };
                let mut prev = m.anchor_uuid.clone();
                for i in idx {
                    log.lines[i].parent = Some(prev);
                    prev = log.lines[i].uuid.clone();
                }
                (m.anchor_uuid, m.uuids[0].clone(), prev)
            }
            Preserved::Segment(g) => {
                if let Some(&h) = log.by_uuid.get(&g.head_uuid) {
                    log.lines[h].parent = Some(g.anchor_uuid.clone());
                }
                (g.anchor_uuid, g.head_uuid, g.tail_uuid)
            }
        };
        for l in &mut log.lines {
            if l.parent.as_deref() == Some(anchor.as_str()) && l.uuid != first {
                l.parent = Some(last.clone());
            }
        }
        applied += 1;
    }
    applied
}

/// After a compaction that kept nothing verbatim, Claude Code sends the summary and what
/// follows it, nothing from before the boundary; a line written after the boundary whose
/// `parentUuid` names a line before it (Claude Code 2.1.217's manual `/compact`) would put the
/// whole pre-compaction conversation back and leave the summary out. Such a line is linked to
/// the line before it in its file, the way [`repair_chains`] links a line to a parent that was
/// never written.
pub(super) fn cut_at_boundaries(log: &mut Log, job: &mut Job) {
    let mut fixes: Vec<(usize, String)> = Vec::new();
    // Per file: the index of the last boundary without a kept segment, and its agent.
    let mut open: HashMap<usize, (usize, Agent)> = HashMap::new();
    for i in 0..log.lines.len() {
        let l = &log.lines[i];
        if let Kind::Boundary(plan) = &l.kind {
            match plan {
                None => open.insert(l.file, (i, l.agent.clone())),
                Some(_) => open.remove(&l.file),
            };
            continue;
        }
        let Some((b, agent)) = open.get(&l.file) else {
            continue;
        };
        let parent = l.parent.as_ref().and_then(|p| log.by_uuid.get(p)).copied();
        if let Some(p) = parent {
            let before = &log.lines[i - 1];
            if p < *b && log.lines[p].file == l.file && l.agent == *agent && before.file == l.file {
                fixes.push((i, before.uuid.clone()));
            }
        }
    }
    if let Some(&(first, _)) = fixes.first() {
        let l = &log.lines[first];
        job.log.warn(format!(
            "{}:{}: {} after a compaction named a parent from before it (past the summary): \
             each is linked to the line before it in its file, so the context after the \
             compaction starts from the summary",
            file_name(&log.files[l.file]),
            l.line,
            gyre_engine::report::plural(fixes.len(), "line")
        ));
    }
    for (i, parent) in fixes {
        log.lines[i].parent = Some(parent);
    }
}

/// A line whose `parentUuid` was never written (Claude Code 2.1 Stop-hook `progress` lines name
/// one) would cut every later context short: its parent becomes the line before it in the same
/// file, which is where Claude Code appended it.
pub(super) fn repair_chains(log: &mut Log, job: &mut Job) {
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
            gyre_engine::report::plural(repaired.len(), "line")
        ));
    }
    for (i, parent) in repaired {
        log.lines[i].parent = Some(parent);
    }
}

/// Inline sidechains without an agentId are named by the root of their chain.
pub(super) fn name_inline_sidechains(log: &mut Log) {
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
