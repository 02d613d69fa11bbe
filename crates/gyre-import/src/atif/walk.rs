//! Reading one ATIF session: the root `trajectory.json`, its continuation files and every
//! sub-agent trajectory it delegates to (embedded or in files beside it), walked in delegation
//! order into one conversation per agent and one response per model call.
//!
//! A `trajectory_path` is followed only when it is a relative path inside the root trajectory's
//! folder (no `..`, no absolute path or URL, no symbolic link out of it); a reference back to a
//! trajectory on its own chain is an error, a trajectory referenced twice is read once.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::super::convo::Turn;
use super::super::error::bad;
use super::super::input::{
    Counter, file_name, json_element_lines, line_of, parse_document, read_document, sub_path, typed,
};
use super::super::openai::Content;
use super::super::session::{Closure, Response, Session};
use super::super::timestamp::parse_timestamp;
use gyre_engine::record::{ClosureStatus, Source};
use gyre_engine::report::plural;
use gyre_text::{Message, ToolCall};

/// An ATIF trajectory (RFC 0001, ATIF-v1.0 … v1.8); unknown fields are ignored so later
/// versions still read.
#[derive(Deserialize)]
struct Trajectory {
    #[serde(default)]
    schema_version: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    trajectory_id: Option<String>,
    #[serde(default)]
    agent: Option<AgentInfo>,
    steps: Vec<Step>,
    #[serde(default)]
    continued_trajectory_ref: Option<String>,
    /// Embedded sub-agents (v1.7): read when a reference names them.
    #[serde(default)]
    subagent_trajectories: Option<Vec<Value>>,
}

#[derive(Deserialize, Default)]
struct AgentInfo {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    model_name: Option<String>,
    #[serde(default)]
    tool_definitions: Option<Vec<Value>>,
}

#[derive(Deserialize)]
struct Step {
    source: String,
    #[serde(default)]
    step_id: Option<u64>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    model_name: Option<String>,
    #[serde(default)]
    message: Content,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<Call>>,
    #[serde(default)]
    observation: Option<Observation>,
    #[serde(default)]
    metrics: Option<Metrics>,
    #[serde(default)]
    is_copied_context: Option<bool>,
    #[serde(default)]
    llm_call_count: Option<u64>,
    #[serde(default)]
    extra: Option<Value>,
}

#[derive(Deserialize)]
struct Call {
    tool_call_id: String,
    function_name: String,
    #[serde(default)]
    arguments: Value,
}

#[derive(Deserialize)]
struct Observation {
    #[serde(default)]
    results: Vec<ObsResult>,
}

#[derive(Deserialize)]
struct ObsResult {
    #[serde(default)]
    source_call_id: Option<String>,
    #[serde(default)]
    content: Content,
    #[serde(default)]
    subagent_trajectory_ref: Option<Vec<Ref>>,
}

#[derive(Deserialize)]
struct Ref {
    #[serde(default)]
    trajectory_id: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    trajectory_path: Option<String>,
}

#[derive(Deserialize)]
struct Metrics {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    cost_usd: Option<f64>,
    #[serde(default)]
    prompt_token_ids: Option<Vec<u32>>,
    #[serde(default)]
    completion_token_ids: Option<Vec<u32>>,
    #[serde(default)]
    logprobs: Option<Vec<f64>>,
}

/// A model call's token ids and behaviour log-probs, as the trajectory holds them.
#[derive(Clone, Debug)]
pub struct Exact {
    /// `metrics.prompt_token_ids`.
    pub prompt: Vec<u32>,
    /// `metrics.completion_token_ids`.
    pub completion: Vec<u32>,
    /// `metrics.logprobs`, one per completion token.
    pub logprobs: Vec<f64>,
}

/// Where a model call is in the input.
#[derive(Clone, Debug)]
pub struct StepAt {
    /// The trajectory file (as reached from the command line).
    pub file: PathBuf,
    /// The step's position in its trajectory's `steps[]`, from 0.
    pub index: usize,
    /// Its line in the file (an embedded sub-agent's: where it starts).
    pub line: u64,
}

/// One ATIF session, read: the reconstructed form of every model call, and for each the token
/// ids the trajectory holds (when it holds them all).
pub struct Imported {
    /// Turns and responses, as the reconstructing importers write them.
    pub session: Session,
    /// Per response: its ids and log-probs, when the step holds all three.
    pub exact: Vec<Option<Exact>>,
    /// Per response: where it is.
    pub at: Vec<StepAt>,
    /// Every file read.
    pub files: Vec<PathBuf>,
    /// Remarks for the import summary.
    pub warnings: Vec<String>,
}

impl Imported {
    /// Whether every model call holds its token ids and log-probs.
    pub fn all_exact(&self) -> bool {
        !self.exact.is_empty() && self.exact.iter().all(Option::is_some)
    }
}

/// An embedded sub-agent trajectory a reference can name: its `trajectory_id`, value and line.
struct Embedded {
    id: String,
    value: Value,
    line: u64,
    identity: String,
}

/// The trajectory being walked: where it is, and the lines of its steps.
struct Src {
    /// As reached from the command line (messages name it).
    file: PathBuf,
    /// Canonical, for identities.
    canon: PathBuf,
    /// Line of each step (an embedded trajectory: all at its own line).
    step_lines: Vec<u64>,
    /// Line of the trajectory itself (0 for a whole file).
    line: u64,
    /// JSON path of the trajectory in its file (`` for the root, `subagent_trajectories[2]`).
    path: String,
}

impl Src {
    fn line(&self, i: usize) -> u64 {
        match line_of(&self.step_lines, i) {
            0 => self.line,
            n => n,
        }
    }

    fn field(&self, rest: &str) -> String {
        if self.path.is_empty() {
            rest.to_owned()
        } else {
            sub_path(&self.path, rest)
        }
    }
}

/// How a trajectory is linked to the one that delegated to it.
#[derive(Clone, Default)]
struct Link {
    /// Started from a compaction step (`extra.context_management.type: "compaction"`): its
    /// calls are `summary` requests.
    summary: bool,
    /// The parent's tool call that started it (`source_call_id` of the result holding the
    /// reference).
    task_call: Option<String>,
    /// The reference's `session_id` (informational in ATIF).
    session: Option<String>,
}

/// Walks one root trajectory and everything it reaches.
struct Walker<'a> {
    root_dir: PathBuf,
    /// Other command-line inputs (canonical): a sub-agent file among them is refused.
    inputs: &'a [PathBuf],
    root_session: Option<String>,
    turns: Vec<Turn>,
    responses: Vec<Response>,
    exact: Vec<Option<Exact>>,
    at: Vec<StepAt>,
    files: Vec<PathBuf>,
    warnings: Vec<String>,
    done: HashSet<String>,
    agents: HashSet<String>,
    times: Vec<f64>,
    scopes: Vec<Rc<Vec<Embedded>>>,
    /// Model calls whose steps hold some but not all of the ids and log-probs.
    partial: u64,
    /// Steps counting more than one model call (`llm_call_count` > 1).
    merged: u64,
    copied: u64,
}

/// The identity of a file: its canonical path.
fn file_identity(canon: &Path) -> String {
    format!("file:{}", canon.display())
}

/// Reads the root trajectory `path` and everything it reaches. `inputs` are the canonical
/// paths of every command-line input (a sub-agent file must not be one of them).
pub fn read(path: &Path, inputs: &[PathBuf]) -> Result<Imported> {
    let canon = path
        .canonicalize()
        .map_err(|e| bad(path, 0, super::super::input::io_reason(&e), None))?;
    let root_dir = canon.parent().map(Path::to_path_buf).unwrap_or_default();
    let (tr, step_lines, embedded_lines) = load_file(path)?;
    let mut w = Walker {
        root_dir,
        inputs,
        root_session: tr.session_id.clone(),
        turns: Vec::new(),
        responses: Vec::new(),
        exact: Vec::new(),
        at: Vec::new(),
        files: vec![path.to_path_buf()],
        warnings: Vec::new(),
        done: HashSet::new(),
        agents: HashSet::from(["main".to_owned()]),
        times: Vec::new(),
        scopes: Vec::new(),
        partial: 0,
        merged: 0,
        copied: 0,
    };
    let identity = file_identity(&canon);
    w.done.insert(identity.clone());
    let src = Src {
        file: path.to_path_buf(),
        canon: canon.clone(),
        step_lines,
        line: 0,
        path: String::new(),
    };
    let info = tr.agent.as_ref();
    let agent = (
        info.and_then(|a| a.name.clone()),
        info.and_then(|a| a.version.clone()),
    );
    let model = info.and_then(|a| a.model_name.clone());
    let tools = info
        .and_then(|a| a.tool_definitions.clone())
        .unwrap_or_default();
    let mut chain = vec![identity];
    w.walk(
        &tr,
        &src,
        "main",
        &Link::default(),
        &embedded_lines,
        &mut chain,
    )?;
    let execution = tr
        .session_id
        .clone()
        .or_else(|| tr.trajectory_id.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            let name = file_name(path);
            name.strip_suffix(".json").unwrap_or(&name).to_owned()
        });
    let task = w
        .turns
        .iter()
        .find(|t| t.msg.role == "user")
        .map(|t| t.msg.content.chars().take(500).collect::<String>());
    let t0 = w.times.iter().copied().fold(f64::INFINITY, f64::min);
    let t1 = w.times.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (t0, t1) = if w.times.is_empty() {
        (0.0, 0.0)
    } else {
        (t0, t1)
    };
    if w.partial > 0 {
        w.warnings.push(format!(
            "{execution}: {} hold only some of metrics.prompt_token_ids, completion_token_ids \
             and logprobs: reconstructed",
            plural(w.partial as usize, "model call")
        ));
    }
    if w.merged > 0 {
        w.warnings.push(format!(
            "{execution}: {} stand for more than one model call (llm_call_count > 1): each is \
             one request, its calls cannot be told apart",
            plural(w.merged as usize, "step")
        ));
    }
    let exact_calls = w.exact.iter().filter(|e| e.is_some()).count();
    if exact_calls > 0 && exact_calls < w.exact.len() {
        w.warnings.push(format!(
            "{execution}: {exact_calls} of {} model calls hold their token ids and log-probs, \
             the others do not: all are reconstructed (one session is read one way)",
            w.exact.len()
        ));
    }
    let mut meta = Map::new();
    meta.insert("source".into(), json!("atif"));
    if let Some(v) = &tr.schema_version {
        meta.insert("schema_version".into(), json!(v));
    }
    if let Some(n) = &agent.0 {
        meta.insert("agent_name".into(), json!(n));
    }
    if let Some(v) = &agent.1 {
        meta.insert("agent_version".into(), json!(v));
    }
    if let Some(m) = &model {
        meta.insert("model".into(), json!(m));
    }
    if w.copied > 0 {
        meta.insert("copied_context_steps".into(), json!(w.copied));
    }
    let mut subagents: Vec<&String> = w.agents.iter().filter(|a| *a != "main").collect();
    subagents.sort();
    if !subagents.is_empty() {
        meta.insert("subagents".into(), json!(subagents));
    }
    let session = Session {
        execution,
        file: path.to_path_buf(),
        line: 0,
        t: t0,
        task,
        meta,
        turns: w.turns,
        tools,
        responses: w.responses,
        closure: Closure {
            t: t1,
            status: ClosureStatus::Completed,
            artifact: json!("trajectory"),
            version: Some(json!(1)),
            meta: Map::new(),
        },
        group: None,
        scored: true,
    };
    Ok(Imported {
        session,
        exact: w.exact,
        at: w.at,
        files: w.files,
        warnings: w.warnings,
    })
}

/// Reads and types a trajectory file; the lines of its steps and of its embedded sub-agents.
fn load_file(path: &Path) -> Result<(Trajectory, Vec<u64>, Vec<u64>)> {
    let text = read_document(path, &Counter::default())?;
    let doc = parse_document(path, &text)?;
    let tr = typed_trajectory(path, 1, &doc, "")?;
    let steps = json_element_lines(&text, Some("steps"));
    let embedded = json_element_lines(&text, Some("subagent_trajectories"));
    Ok((tr, steps, embedded))
}

/// `value` as a trajectory; errors name `file:line` and the field (under `prefix`).
fn typed_trajectory(path: &Path, line: u64, value: &Value, prefix: &str) -> Result<Trajectory> {
    let full = |f: &str| {
        if prefix.is_empty() {
            f.to_owned()
        } else {
            sub_path(prefix, f)
        }
    };
    if !value.get("steps").is_some_and(Value::is_array) {
        return Err(bad(
            path,
            line,
            "not an ATIF trajectory: no `steps` array",
            Some(&full("steps")),
        ));
    }
    typed::<Trajectory>(value).map_err(|(msg, field)| {
        // The error's line: the step it is in, when the path names one.
        bad(path, line, msg, Some(&full(&field)))
    })
}

/// The text of an ATIF message or result: text parts joined by newlines, media as `[image]`
/// or `[audio]`.
fn text_of(c: &Content) -> String {
    c.text()
}

impl Walker<'_> {
    /// Walks the steps of `tr` as agent `agent`, following its references.
    fn walk(
        &mut self,
        tr: &Trajectory,
        src: &Src,
        agent: &str,
        link: &Link,
        embedded_lines: &[u64],
        chain: &mut Vec<String>,
    ) -> Result<()> {
        let info = tr.agent.as_ref();
        let default_model = info.and_then(|a| a.model_name.clone());
        // Its embedded sub-agents are in scope for its steps and those of its descendants.
        let scope: Vec<Embedded> = tr
            .subagent_trajectories
            .iter()
            .flatten()
            .enumerate()
            .map(|(k, v)| {
                let path = src.field(&format!("subagent_trajectories[{k}]"));
                Embedded {
                    id: v
                        .get("trajectory_id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    value: v.clone(),
                    line: match line_of(embedded_lines, k) {
                        0 => src.line,
                        n if src.path.is_empty() => n,
                        _ => src.line,
                    },
                    identity: format!("{}#{path}", file_identity(&src.canon)),
                }
            })
            .collect();
        let scope = Rc::new(scope);
        self.scopes.push(Rc::clone(&scope));
        let mut conv: Vec<u32> = Vec::new();
        for (i, step) in tr.steps.iter().enumerate() {
            self.step(
                step,
                i,
                src,
                agent,
                link,
                default_model.as_deref(),
                &mut conv,
                chain,
            )?;
        }
        // Embedded sub-agents no step names are still model calls of the session.
        for e in scope.iter() {
            if self.done.contains(&e.identity) {
                continue;
            }
            self.warnings.push(format!(
                "{}:{}: embedded sub-agent {:?} is named by no step's subagent_trajectory_ref: \
                 imported after its parent's steps",
                file_name(&src.file),
                e.line,
                e.id
            ));
            self.embedded(e, src, &Link::default(), chain)?;
        }
        self.scopes.pop();
        if let Some(next) = &tr.continued_trajectory_ref {
            let field = src.field("continued_trajectory_ref");
            if let Some((file, canon)) = self.resolve(next, src, src.line, &field)? {
                let identity = file_identity(&canon);
                if self.enter(&identity, chain, &src.file, src.line, &field)? {
                    let (next_tr, lines, emb) = load_file(&file)?;
                    self.files.push(file.clone());
                    let next_src = Src {
                        file,
                        canon,
                        step_lines: lines,
                        line: 0,
                        path: String::new(),
                    };
                    self.walk(&next_tr, &next_src, agent, link, &emb, chain)?;
                    chain.pop();
                }
            }
        }
        Ok(())
    }

    /// One step: its message into the agent's conversation (a model call becomes a response),
    /// its observation after it, its references followed.
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        step: &Step,
        i: usize,
        src: &Src,
        agent: &str,
        link: &Link,
        default_model: Option<&str>,
        conv: &mut Vec<u32>,
        chain: &mut Vec<String>,
    ) -> Result<()> {
        let line = src.line(i);
        let field = |rest: &str| src.field(&format!("steps[{i}].{rest}"));
        let t = step.timestamp.as_deref().and_then(parse_timestamp);
        if let Some(t) = t {
            self.times.push(t);
        }
        let management = step
            .extra
            .as_ref()
            .and_then(|e| e.get("context_management"));
        let compaction = management
            .and_then(|m| m.get("type"))
            .and_then(Value::as_str)
            == Some("compaction");
        // The harness replaced the context (a compaction handoff): the next call starts anew.
        if management
            .and_then(|m| m.get("boundary"))
            .and_then(Value::as_str)
            == Some("replace")
        {
            conv.clear();
        }
        let identity = format!("{}#{}", src.canon.display(), field("message"));
        let text = text_of(&step.message);
        let copied = step.is_copied_context == Some(true);
        self.copied += u64::from(copied);
        match step.source.as_str() {
            // A step recording a harness operation (a compaction) was not sent to the model.
            "system" if management.is_none() => {
                if !text.is_empty() {
                    self.push_turn(
                        conv,
                        Turn::new(&identity, Message::new("system", text), Source::System),
                    );
                }
            }
            "system" => {}
            "user" => {
                self.push_turn(
                    conv,
                    Turn::new(&identity, Message::new("user", text), Source::User),
                );
            }
            "agent" => {
                let msg = Message {
                    role: "assistant".into(),
                    content: text,
                    reasoning_content: Some(step.reasoning_content.clone().unwrap_or_default()),
                    tool_calls: step
                        .tool_calls
                        .iter()
                        .flatten()
                        .map(|c| ToolCall {
                            id: c.tool_call_id.clone(),
                            name: c.function_name.clone(),
                            arguments: c.arguments.clone(),
                        })
                        .collect(),
                    tool_call_id: None,
                };
                let mut turn = Turn::new(&identity, msg.clone(), Source::Assistant);
                // Copied context was trained where it was first written; a deterministic
                // dispatch (llm_call_count 0) is no model call.
                if !copied && step.llm_call_count != Some(0) {
                    let exact = self.exact_of(step, src, line, &field)?;
                    self.merged += u64::from(step.llm_call_count.is_some_and(|n| n > 1));
                    let mut meta = Map::new();
                    meta.insert(
                        "source_line".into(),
                        json!(format!("{}:{line}", file_name(&src.file))),
                    );
                    meta.insert("step_index".into(), json!(i));
                    if let Some(id) = step.step_id {
                        meta.insert("step_id".into(), json!(id));
                    }
                    if let Some(n) = step.llm_call_count.filter(|&n| n > 1) {
                        meta.insert("llm_call_count".into(), json!(n));
                    }
                    if let Some(c) = &link.task_call {
                        meta.insert("task_call_id".into(), json!(c));
                    }
                    if let Some(s) = &link.session {
                        meta.insert("subagent_session_id".into(), json!(s));
                    }
                    let m = step.metrics.as_ref();
                    if let Some(m) = m {
                        let usage = json!({
                            "prompt_tokens": m.prompt_tokens,
                            "completion_tokens": m.completion_tokens,
                            "cached_tokens": m.cached_tokens,
                            "cost_usd": m.cost_usd,
                        });
                        meta.insert("usage".into(), usage);
                    }
                    turn.response = Some(self.responses.len());
                    self.responses.push(Response {
                        context: conv.clone(),
                        message: msg,
                        not_trainable: None,
                        agent: agent.to_owned(),
                        summary: link.summary,
                        t,
                        model: step
                            .model_name
                            .clone()
                            .or_else(|| default_model.map(str::to_owned)),
                        finish: None,
                        meta,
                        usage_input: m.and_then(|m| m.prompt_tokens),
                        usage_output: m.and_then(|m| m.completion_tokens),
                        line: if src.file == self.files[0] { line } else { 0 },
                    });
                    self.exact.push(exact);
                    self.at.push(StepAt {
                        file: src.file.clone(),
                        index: i,
                        line,
                    });
                }
                self.push_turn(conv, turn);
            }
            other => {
                return Err(bad(
                    &src.file,
                    line,
                    format!(
                        "unknown step source {other:?} (ATIF has \"system\", \"user\" and \"agent\")"
                    ),
                    Some(&field("source")),
                ));
            }
        }
        let calls: HashSet<&str> = step
            .tool_calls
            .iter()
            .flatten()
            .map(|c| c.tool_call_id.as_str())
            .collect();
        for (k, r) in step.observation.iter().flat_map(|o| &o.results).enumerate() {
            let rfield = |rest: &str| field(&format!("observation.results[{k}].{rest}"));
            // A copied step's sub-agents were read where the step was first written.
            let refs = r
                .subagent_trajectory_ref
                .iter()
                .flatten()
                .filter(|_| !copied);
            for (j, rf) in refs.enumerate() {
                let sub = Link {
                    summary: link.summary || compaction,
                    task_call: r.source_call_id.clone(),
                    session: rf.session_id.clone(),
                };
                self.follow(
                    rf,
                    src,
                    line,
                    &rfield(&format!("subagent_trajectory_ref[{j}]")),
                    &sub,
                    chain,
                )?;
            }
            let text = text_of(&r.content);
            let rid = format!("{identity}/result{k}");
            match r.source_call_id.as_deref() {
                Some(call) if calls.contains(call) => {
                    self.push_turn(
                        conv,
                        Turn::new(&rid, Message::tool(call, text), Source::Tool),
                    );
                }
                _ if !text.is_empty() => {
                    // Results not tied to a tool call are what the harness sent next (Terminus
                    // sends the terminal's screen as the next user message).
                    self.push_turn(
                        conv,
                        Turn::new(&rid, Message::new("user", text), Source::User),
                    );
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn push_turn(&mut self, conv: &mut Vec<u32>, turn: Turn) {
        conv.push(self.turns.len() as u32);
        self.turns.push(turn);
    }

    /// The step's ids and log-probs when it holds all three (checked: one log-prob per
    /// completion token).
    fn exact_of(
        &mut self,
        step: &Step,
        src: &Src,
        line: u64,
        field: &dyn Fn(&str) -> String,
    ) -> Result<Option<Exact>> {
        let Some(m) = &step.metrics else {
            return Ok(None);
        };
        match (&m.prompt_token_ids, &m.completion_token_ids, &m.logprobs) {
            (Some(p), Some(c), Some(l)) => {
                if l.len() != c.len() {
                    return Err(bad(
                        &src.file,
                        line,
                        format!(
                            "{} for {}",
                            plural(l.len(), "log-prob"),
                            plural(c.len(), "completion token")
                        ),
                        Some(&field("metrics.logprobs")),
                    ));
                }
                if let Some(k) = l.iter().position(|x| !x.is_finite() || *x > 0.0) {
                    return Err(bad(
                        &src.file,
                        line,
                        format!("log-prob {} is not a log-probability (finite, ≤ 0)", l[k]),
                        Some(&field(&format!("metrics.logprobs[{k}]"))),
                    ));
                }
                Ok(Some(Exact {
                    prompt: p.clone(),
                    completion: c.clone(),
                    logprobs: l.clone(),
                }))
            }
            (None, None, None) => Ok(None),
            _ => {
                self.partial += 1;
                Ok(None)
            }
        }
    }

    /// Follows a sub-agent reference: the embedded trajectory its `trajectory_id` names (in
    /// this trajectory or an ancestor), else the file its `trajectory_path` names.
    fn follow(
        &mut self,
        rf: &Ref,
        src: &Src,
        line: u64,
        field: &str,
        link: &Link,
        chain: &mut Vec<String>,
    ) -> Result<()> {
        if let Some(id) = rf.trajectory_id.as_deref() {
            let found = self
                .scopes
                .iter()
                .rev()
                .find_map(|s| s.iter().position(|e| e.id == id).map(|k| (Rc::clone(s), k)));
            if let Some((scope, k)) = found {
                return self.embedded(&scope[k], src, link, chain);
            }
        }
        let Some(path) = rf.trajectory_path.as_deref() else {
            self.warnings.push(format!(
                "{}:{line}: sub-agent {:?} is not embedded and has no trajectory_path: its calls \
                 are not in the recording ({field})",
                file_name(&src.file),
                rf.trajectory_id.as_deref().unwrap_or("")
            ));
            return Ok(());
        };
        let field = format!("{field}.trajectory_path");
        let Some((file, canon)) = self.resolve(path, src, line, &field)? else {
            return Ok(());
        };
        let identity = file_identity(&canon);
        if !self.enter(&identity, chain, &src.file, line, &field)? {
            return Ok(());
        }
        let (tr, lines, emb) = load_file(&file)?;
        self.files.push(file.clone());
        let agent = self.agent_name(rf.trajectory_id.as_deref(), &tr, &file);
        let sub = Src {
            file,
            canon,
            step_lines: lines,
            line: 0,
            path: String::new(),
        };
        self.walk(&tr, &sub, &agent, link, &emb, chain)?;
        chain.pop();
        Ok(())
    }

    /// Walks an embedded sub-agent trajectory.
    fn embedded(
        &mut self,
        e: &Embedded,
        src: &Src,
        link: &Link,
        chain: &mut Vec<String>,
    ) -> Result<()> {
        let path = e
            .identity
            .rsplit_once('#')
            .map(|(_, p)| p.to_owned())
            .unwrap_or_default();
        if !self.enter(&e.identity, chain, &src.file, e.line, &path)? {
            return Ok(());
        }
        let tr = typed_trajectory(&src.file, e.line, &e.value, &path)?;
        let agent = self.agent_name(Some(&e.id), &tr, &src.file);
        let sub = Src {
            file: src.file.clone(),
            canon: src.canon.clone(),
            step_lines: Vec::new(),
            line: e.line,
            path,
        };
        self.walk(&tr, &sub, &agent, link, &[], chain)?;
        chain.pop();
        Ok(())
    }

    /// Enters a trajectory: an error when it is on its own chain (a loop), `false` (with a
    /// warning) when it was read already.
    fn enter(
        &mut self,
        identity: &str,
        chain: &mut Vec<String>,
        file: &Path,
        line: u64,
        field: &str,
    ) -> Result<bool> {
        if chain.iter().any(|c| c == identity) {
            return Err(bad(
                file,
                line,
                "the reference leads back to a trajectory that delegated to it (a loop)",
                Some(field),
            ));
        }
        if !self.done.insert(identity.to_owned()) {
            self.warnings.push(format!(
                "{}:{line}: a sub-agent trajectory referenced a second time is read once ({field})",
                file_name(file)
            ));
            return Ok(false);
        }
        chain.push(identity.to_owned());
        Ok(true)
    }

    /// The file a `trajectory_path` names, beside the referencing file: a relative path that
    /// stays inside the root trajectory's folder. `None` (with a warning) when it does not
    /// exist.
    fn resolve(
        &mut self,
        path: &str,
        src: &Src,
        line: u64,
        field: &str,
    ) -> Result<Option<(PathBuf, PathBuf)>> {
        let rel = Path::new(path);
        let leaves = path.contains("://")
            || rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
        if leaves || path.is_empty() {
            return Err(bad(
                &src.file,
                line,
                format!(
                    "trajectory_path {path:?} is not a file beside the trajectory (gyre follows \
                     relative paths inside the trajectory's folder only)"
                ),
                Some(field),
            ));
        }
        let dir = src.file.parent().unwrap_or(Path::new(""));
        let file = dir.join(rel);
        let canon = match file.canonicalize() {
            Ok(c) => c,
            Err(_) => {
                self.warnings.push(format!(
                    "{}:{line}: sub-agent trajectory {} is missing: its calls are not in the \
                     recording (copy it beside the trajectory)",
                    file_name(&src.file),
                    file.display()
                ));
                return Ok(None);
            }
        };
        if !canon.starts_with(&self.root_dir) {
            return Err(bad(
                &src.file,
                line,
                format!(
                    "trajectory_path {path:?} leads out of the trajectory's folder (a symbolic \
                     link); gyre does not follow it"
                ),
                Some(field),
            ));
        }
        if !canon.is_file() {
            return Err(bad(
                &src.file,
                line,
                format!("trajectory_path {path:?} is not a file"),
                Some(field),
            ));
        }
        // (One read already is a loop or a repeat, said by `enter`.)
        if self.inputs.contains(&canon) && !self.done.contains(&file_identity(&canon)) {
            return Err(bad(
                &src.file,
                line,
                format!(
                    "trajectory_path {path:?} is a sub-agent of this trajectory and also given on \
                     the command line: give only the main trajectory"
                ),
                Some(field),
            ));
        }
        Ok(Some((file, canon)))
    }

    /// A sub-agent's agent id: `sub-` + its reference's or its own `trajectory_id`, else its
    /// `session_id` (without the root session's prefix), else its file name; unique.
    fn agent_name(&mut self, ref_id: Option<&str>, tr: &Trajectory, file: &Path) -> String {
        let name = file_name(file);
        let stem = name.strip_suffix(".json").unwrap_or(&name);
        let base = ref_id
            .filter(|s| !s.is_empty())
            .or(tr.trajectory_id.as_deref().filter(|s| !s.is_empty()))
            .or(tr.session_id.as_deref().filter(|s| !s.is_empty()))
            .unwrap_or(stem);
        let base = self
            .root_session
            .as_deref()
            .and_then(|root| base.strip_prefix(root)?.strip_prefix('-'))
            .filter(|s| !s.is_empty())
            .unwrap_or(base);
        let mut agent = format!("sub-{base}");
        let mut n = 2;
        while self.agents.contains(&agent) {
            agent = format!("sub-{base}-{n}");
            n += 1;
        }
        self.agents.insert(agent.clone());
        agent
    }
}
