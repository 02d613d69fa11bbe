//! A Claude Code session's responses (the lines sharing a `message.id`), their tool calls and
//! results, sub-agents and compaction calls, and each response's context: the conversation on
//! the `parentUuid` chain above it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde_json::{Map, Value, json};

use super::SYSTEM_NOTE;
use super::attachments::Attach;
use super::lines::{ABlock, Agent, Kind, Log, UBlock};
use crate::Job;
use crate::convo::{Turn, hash_str};
use crate::input::file_name;
use crate::session::{Closure, Response, Session};
use gyre_engine::record::{ClosureStatus, Source};
use gyre_text::{Message, ToolCall};

/// One API response: the lines sharing a `message.id` within one agent.
struct Group {
    agent: Agent,
    msg_id: String,
    lines: Vec<usize>,
}

/// The responses, in request order.
pub(super) struct Groups {
    groups: Vec<Group>,
    of: HashMap<(Agent, String), usize>,
    /// Group indices in request order (first line's timestamp, then file and line).
    order: Vec<usize>,
    /// Request index of each group.
    request: Vec<usize>,
}

pub(super) fn group_responses(log: &Log) -> Groups {
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

/// What links a sub-agent to the `Task` call that started it.
#[derive(Clone, Debug, Default)]
struct Link {
    call_id: String,
    /// The tool's name (`Task`; `Agent` since Claude Code 2.1.6x).
    tool: String,
    subagent_type: Option<String>,
    description: Option<String>,
}

/// Tool results by call id, and sub-agents by id.
pub(super) struct Calls {
    /// Call id → (line index, result text).
    results: HashMap<String, (usize, String)>,
    /// Sub-agent id → its `Task` call.
    links: BTreeMap<String, Link>,
    /// Sub-agents that answered (have responses), sorted.
    sub_ids: Vec<String>,
}

pub(super) fn link_calls(main: &Path, log: &Log, groups: &Groups, job: &mut Job) -> Calls {
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
    let link_of = |id: &str, tool: &str, input: &Value| Link {
        call_id: id.to_owned(),
        tool: if tool.is_empty() { "Task" } else { tool }.to_owned(),
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
                        let (tool, input) = calls
                            .get(id.as_str())
                            .copied()
                            .unwrap_or(("", &Value::Null));
                        links.insert(agent.clone(), link_of(id, tool, input));
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
                .then(|| link_of(cid, name, input))
            })
        });
        match found {
            Some(link) => {
                links.insert(id.clone(), link);
            }
            None => job.log.warn(format!(
                "sub-agent {id}: no Task or Agent call links to it (its requests carry no \
                 subagent_type)"
            )),
        }
    }
    let beside = main.with_extension("");
    for (agent, link) in &links {
        if !sub_ids.contains(agent) {
            // Claude Code 2.1 copies a sub-agent's messages into `agent_progress` lines, but
            // not all of them (streamed parts and the final answer are left out): not a log to
            // rebuild its calls from.
            let copy = match log.mirrored.get(agent) {
                Some(&n) => format!(
                    "; the session's {} copy part of it and are not imported (the copy leaves \
                     lines out)",
                    gyre_engine::report::plural(n as usize, "agent_progress line")
                ),
                None => String::new(),
            };
            job.log.warn_grouped(
                "missing sub-agent log",
                format!(
                    "{} call {} ran sub-agent {agent}, whose log is not beside the session \
                 (expected {}/subagents/agent-{agent}.jsonl): its result is a tool span only{copy}",
                    link.tool,
                    link.call_id,
                    beside.display()
                ),
            );
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
                        with_images(Turn::new(
                            "",
                            Message::tool(id, text.as_str()),
                            Source::Tool,
                        ))
                    }));
                }
            }
        }
    }
}

/// `turn` with its images counted: the importer writes each image as `[image]`.
fn with_images(mut turn: Turn) -> Turn {
    turn.images = turn.msg.content.matches(IMAGE).count() as u32;
    turn
}

/// How an image stands in a context.
pub(super) const IMAGE: &str = "[image]";

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
pub(super) fn build_contexts(
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
                                        with_images(Turn::new(
                                            "",
                                            Message::tool(id, content.as_str()),
                                            Source::Tool,
                                        ))
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
                            with_images(Turn::new("", Message::new("user", content), source))
                        }));
                    }
                }
                Kind::Attachment { what, .. } => match what {
                    Attach::Text { text, source } => {
                        ctx.flush(&mut turns);
                        let source = *source;
                        ctx.turns
                            .push(turns.get(format!("attachment:{}", l.uuid), || {
                                Turn::new("", Message::new("user", text.as_str()), source)
                            }));
                    }
                    Attach::Call {
                        name,
                        input,
                        result,
                    } => {
                        // Claude Code shows an @-mentioned file as a Read call it made itself.
                        ctx.flush(&mut turns);
                        let id = format!("attachment-{}", l.uuid);
                        let call = Message {
                            tool_calls: vec![ToolCall {
                                id: id.clone(),
                                name: name.clone(),
                                arguments: input.clone(),
                            }],
                            ..Message::new("assistant", "")
                        };
                        ctx.turns
                            .push(turns.get(format!("attachment-call:{}", l.uuid), || {
                                Turn::new("", call, Source::Assistant)
                            }));
                        ctx.turns
                            .push(turns.get(format!("attachment:{}", l.uuid), || {
                                Turn::new("", Message::tool(&id, result.as_str()), Source::Tool)
                            }));
                    }
                    Attach::Silent | Attach::Unplaced => {}
                },
                Kind::Boundary(_) | Kind::Other => {}
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
    let mut usage_output = None;
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
                usage_output = u
                    .get("output_tokens")
                    .and_then(Value::as_u64)
                    .or(usage_output);
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
    let hidden = blocks
        .iter()
        .filter(|b| matches!(b, ABlock::HiddenThinking))
        .count();
    let not_trainable = (hidden > 0).then(|| HIDDEN_THINKING.to_owned());
    if hidden > 0 {
        meta.insert("hidden_thinking".into(), json!(hidden));
    }
    Response {
        context,
        message: response_message(&blocks),
        not_trainable,
        agent,
        summary,
        t: first.ts,
        model,
        finish,
        meta,
        usage_input,
        usage_output,
        line: first.line,
    }
}

/// Why a response whose thinking the log does not hold is not a target.
pub const HIDDEN_THINKING: &str = "hidden thinking: the log holds a signature, not the reasoning";

/// The input the model read, per Anthropic's `usage`: uncached + cache reads + cache writes.
fn input_tokens(usage: &Value) -> Option<u64> {
    let get = |k: &str| usage.get(k).and_then(Value::as_u64);
    let base = get("input_tokens")?;
    Some(
        base + get("cache_read_input_tokens").unwrap_or(0)
            + get("cache_creation_input_tokens").unwrap_or(0),
    )
}

pub(super) fn assemble(
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
        group: None,
        scored: true,
    }
}
