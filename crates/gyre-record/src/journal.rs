//! The recording and what the proxy knows about its executions: which execution and agent a
//! request belongs to, its purpose, request ids, and the outputs kept for restoration.
//!
//! Attribution (docs/record.md): the execution is the `x-gyre-execution` header, else the
//! harness's session id (Claude Code's `x-claude-code-session-id` header or the `session_…` part
//! of Anthropic `metadata.user_id`), else the execution of the restored turns the conversation
//! continues, else that of the delegation or compaction it starts from, else a new one (one
//! execution per conversation root). The agent is the `x-gyre-agent` header, else that of the
//! restored turns, else `sub-N` for a conversation whose first user message is the prompt of a
//! `Task`/`Agent` tool call the proxy issued, else that of the compaction whose summary it
//! starts with, else `main`. The purpose is the `x-gyre-purpose` header, else `summary` when the
//! last user message asks for Claude Code's compaction summary, else `task`.
//!
//! An execution issued by the control side ([`Journal::issue`]) is reachable through its
//! capability URL only: a request under that URL belongs to it whatever its headers say, and no
//! request on the plain routes can name it, continue its outputs or start from its delegations
//! (docs/record.md, "Security").

use std::collections::{HashMap, HashSet};
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

use eyre::{Result, WrapErr, eyre};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use serde_json::{Map, Value};

use super::chat::{ApiError, ErrorKind, ReplyCall, Turn, now, random_id};
use super::payload::{Found, Payloads, Produced, collapse};
use super::recording::{Locked, Recording, drop_partial_line};
use super::render::{Context, RenderTurn, hash_tokens};
use super::sampled::OutputReader;
use gyre_engine::load::{self, LoadOptions};
use gyre_engine::record::{Actor, Purpose, Record, Source, parse_line};
use gyre_engine::recorder::{AppendError, RecordError, Recorder};
use gyre_engine::write::{
    AssessmentOut, ClosureOut, ExecutionOut, RequestOut, SpanOut, ToolCallOut,
};
use gyre_format::note;
use gyre_format::note::plural;

/// Attribution given by the client (headers) or found in the body.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hints {
    /// The execution the request's capability URL gives (nothing else can change it).
    pub pinned: Option<String>,
    /// `x-gyre-execution`.
    pub execution: Option<String>,
    /// A harness session id (Claude Code).
    pub session: Option<String>,
    /// `x-gyre-agent`.
    pub agent: Option<String>,
    /// `x-gyre-purpose`.
    pub purpose: Option<Purpose>,
    /// `x-gyre-group`: the GRPO group written on a new execution.
    pub group: Option<String>,
    /// `x-gyre-budget`: seconds, written on a new execution.
    pub budget_s: Option<f64>,
    /// When the request arrived (seconds since the epoch, its record's `t`): an execution the
    /// request starts starts then.
    pub arrived: f64,
}

/// `meta.attribution` of an execution issued by the control side (its capability URL is the
/// only way to it).
const ISSUED: &str = "capability";

/// Longest id accepted (execution, session, agent, group), in bytes.
pub const MAX_ID: usize = 128;

/// Whether `id` is an id gyre record accepts from a client (an execution, a harness session, an
/// agent, a group, from a header or a body): 1 to [`MAX_ID`] of `A-Z a-z 0-9 . _ : -`. An
/// execution id goes into a capability URL's path, and every id into the operator's log: no
/// byte of one can be a control code or a path separator.
pub fn check_id(what: &str, id: &str) -> Result<(), ApiError> {
    let ok = (1..=MAX_ID).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            what,
            format!("{what} must be 1 to {MAX_ID} of A-Z a-z 0-9 . _ : - (docs/record.md)"),
        ))
    }
}

/// Tool names whose `prompt` argument starts a delegated sub-agent (Claude Code).
const DELEGATION_TOOLS: &[&str] = &["Task", "Agent"];

/// The instruction Claude Code appends to ask for a compaction summary.
const COMPACTION_ASK: &str = "create a detailed summary of the conversation so far";

/// A sampled answer, checked and read, to be recorded.
#[derive(Debug)]
pub struct Outcome<'a> {
    /// Sampled ids.
    pub output: &'a [u32],
    /// Their log-probs.
    pub logprobs: &'a [f64],
    /// The tool calls with the ids issued and their token offsets.
    pub calls: &'a [(ReplyCall, u32, u32)],
    /// Visible text answered.
    pub content: &'a str,
    /// The output ends with an end-of-turn token.
    pub eos: bool,
    /// Finish reason for the record.
    pub finish: &'a str,
    /// Model name for the record.
    pub model: &'a str,
    /// Record `meta.api`.
    pub api: &'a str,
    /// More `meta` from parsing the request (what was dropped or replaced before rendering).
    pub request_meta: &'a Map<String, Value>,
}

struct ExecState {
    /// The `execution` line is in the file.
    written: bool,
    t: f64,
    group: Option<String>,
    budget_s: Option<f64>,
    next_request: u64,
    /// Delegating call id → sub-agent id.
    subagents: HashMap<String, String>,
    /// Collapsed `Task` prompt → delegating call id.
    delegations: Vec<(String, String)>,
    /// Compaction summaries written: agent, and the summary's longest lines.
    summaries: Vec<(String, Vec<String>)>,
}

impl ExecState {
    fn new(t: f64, written: bool) -> Self {
        ExecState {
            written,
            t,
            group: None,
            budget_s: None,
            next_request: 1,
            subagents: HashMap::new(),
            delegations: Vec::new(),
            summaries: Vec::new(),
        }
    }
}

/// The recording, and what the proxy remembers of the executions in it.
pub struct Journal {
    rec: Recording,
    payloads: Payloads,
    execs: HashMap<String, ExecState>,
    /// Executions issued by the control side: reachable through their capability URL only.
    issued: HashSet<String>,
    rng: ChaCha20Rng,
}

/// How the recording was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// Lines already in the file (0 for a new recording).
    pub lines: u64,
    /// Outputs of open executions read back for restoration.
    pub restorable: usize,
}

impl Journal {
    /// Opens the recording `locked` at `path`: a new (or empty) one gets a header naming
    /// `tokenizer`; an existing one is appended to, and its open executions' outputs are read
    /// back (with `reader`) for restoration. A last line cut short (a writer killed mid-line) is
    /// dropped, and said on stderr.
    pub fn open(
        path: &Path,
        locked: &mut Locked,
        tokenizer: &Value,
        header_meta: &Map<String, Value>,
        reader: &OutputReader,
        payload_limit: usize,
    ) -> Result<(Self, Opened)> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| eyre!("no OS random source for call ids: {e}"))?;
        let dropped = drop_partial_line(&mut locked.file)
            .wrap_err_with(|| format!("reading the end of {}", path.display()))?;
        if let Some((bytes, from)) = dropped {
            note!(
                "gyre record: {}: dropped {} at the end, from byte {from} (line {}): a line cut \
                 short, as a writer killed mid-line leaves one; it was never answered for",
                path.display(),
                plural(bytes, "byte"),
                count_lines(path)? + 1
            );
        }
        let exists = locked
            .file
            .metadata()
            .wrap_err_with(|| format!("reading {}", path.display()))?
            .len()
            > 0;
        let own = || {
            locked
                .file
                .try_clone()
                .wrap_err_with(|| format!("opening {}", path.display()))
        };
        let (rec, lines) = if exists {
            let rec = match Recorder::append(path) {
                Ok(rec) => rec,
                // Reported as file:line with exit code 2, like every invalid input.
                Err(AppendError::Invalid(e)) => return Err(e.into()),
                Err(e) => return Err(eyre!(e).wrap_err(format!("appending to {}", path.display()))),
            };
            (rec, count_lines(path)?)
        } else {
            // The locked file itself (append mode), so an existing empty file keeps its mode.
            let mut rec = Recorder::new(BufWriter::with_capacity(1 << 20, own()?));
            rec.header(Some(tokenizer), Some(header_meta))
                .map_err(|e| eyre!("{e}"))?;
            rec.flush()
                .wrap_err_with(|| format!("writing {}", path.display()))?;
            (rec, 0)
        };
        let mut journal = Journal {
            rec: Recording::new(path, own()?, rec)?,
            payloads: Payloads::new(payload_limit),
            execs: HashMap::new(),
            issued: HashSet::new(),
            rng: ChaCha20Rng::from_seed(seed),
        };
        let restorable = if exists {
            journal.read_back(path, reader)?
        } else {
            0
        };
        Ok((journal, Opened { lines, restorable }))
    }

    /// Reads the open executions of an existing recording back: their outputs become
    /// restorable again and their request ids continue.
    fn read_back(&mut self, path: &Path, reader: &OutputReader) -> Result<usize> {
        let batch = load::load(&[path.to_path_buf()], &LoadOptions::default(), &|_, _| {})
            .wrap_err_with(|| format!("reading {}", path.display()))?;
        let mut n = 0;
        for exec in &batch.executions {
            let attribution = exec
                .info
                .as_ref()
                .and_then(|i| i.meta.as_ref())
                .and_then(|m| m.get("attribution"))
                .and_then(Value::as_str);
            if attribution == Some(ISSUED) {
                self.issued.insert(exec.id.clone());
            }
            let mut st = ExecState::new(exec.info.as_ref().map_or(0.0, |i| i.t), true);
            st.next_request = exec.requests.len() as u64 + 1;
            let closed = exec.closure.is_some();
            let mut produced = Vec::new();
            if !closed {
                for (q, r) in exec.requests.iter().enumerate() {
                    if r.actor != Actor::Policy {
                        continue;
                    }
                    let path = exec.path_tokens(q as u32);
                    let (input, output) = path.split_at(r.input_len as usize);
                    // The stop strings it was sampled with cut its text as they did then.
                    let stops: Vec<String> = r
                        .meta
                        .as_ref()
                        .and_then(|m| m.get("sampling"))
                        .and_then(|s| s.get("stop"))
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|s| s.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default();
                    let Ok(read) = reader.read(output, &stops, &[]) else {
                        continue;
                    };
                    if read.calls.len() != r.tool_calls.len() {
                        continue;
                    }
                    let calls = r
                        .tool_calls
                        .iter()
                        .zip(read.calls)
                        .map(|(tc, c)| ReplyCall {
                            id: tc.id.to_string(),
                            name: c.name,
                            arguments: c.arguments,
                        })
                        .collect();
                    produced.push(Arc::new(Produced {
                        execution: exec.id.clone(),
                        agent: r.agent.clone(),
                        purpose: r.purpose,
                        output: Arc::from(output),
                        eos: read.eos,
                        input_len: input.len(),
                        input_hash: hash_tokens(input),
                        content: read.content,
                        calls,
                    }));
                }
            }
            // A closed execution is not open again (a request that still names it is recorded
            // after closure; its ids continue past those in the file).
            if closed {
                continue;
            }
            self.execs.insert(exec.id.clone(), st);
            for p in produced {
                self.remember(p);
                n += 1;
            }
        }
        Ok(n)
    }

    /// Decides a request's execution, agent and purpose, and what each assistant turn restores
    /// (a user message carrying a compaction summary is relabelled `summary`).
    pub fn attribute<'a>(
        &mut self,
        turns: &'a mut [Turn],
        hints: &Hints,
    ) -> Result<(Vec<RenderTurn<'a>>, Attribution), ApiError> {
        // What the file holds is known (after a failed write that is not undone yet, it is
        // read again first, or the request refused before it costs a completion).
        self.rec.ready().map_err(write_failed)?;
        let named = match &hints.pinned {
            Some(pinned) => {
                if hints.execution.as_ref().is_some_and(|e| e != pinned) {
                    return Err(ApiError::new(
                        ErrorKind::Forbidden,
                        format!(
                            "this URL belongs to execution {pinned:?}; x-gyre-execution cannot \
                             move its requests to another execution"
                        ),
                    ));
                }
                if !self.issued.contains(pinned) {
                    return Err(ApiError::new(
                        ErrorKind::NotFound,
                        format!("execution {pinned:?} is closed or was never issued"),
                    ));
                }
                Some(pinned.clone())
            }
            None => {
                let named = hints.execution.clone().or_else(|| hints.session.clone());
                if let Some(n) = named.as_ref().filter(|n| self.issued.contains(*n)) {
                    return Err(ApiError::new(
                        ErrorKind::Forbidden,
                        format!(
                            "execution {n:?} was issued by the control side and is reachable \
                             through its own URL only"
                        ),
                    ));
                }
                named
            }
        };
        // Outputs of other executions are never restored into this one: a request sees only
        // its own execution's (pinned), or only those of executions without a capability.
        let visible = |p: &Produced| match &hints.pinned {
            Some(pinned) => p.execution == *pinned,
            None => !self.issued.contains(&p.execution),
        };
        let mut found = Vec::with_capacity(turns.len());
        let mut rerendered = Vec::new();
        let mut edited = Vec::new();
        let mut last: Option<Arc<Produced>> = None;
        for (i, turn) in turns.iter().enumerate() {
            let found_here = match self.payloads.find(&turn.msg) {
                Found::Restore(c) => {
                    let c: Vec<Arc<Produced>> = c.into_iter().filter(|p| visible(p)).collect();
                    if c.is_empty() {
                        Found::Unknown
                    } else {
                        Found::Restore(c)
                    }
                }
                Found::Edited(p) if !visible(&p) => Found::Unknown,
                f => f,
            };
            let candidates = match found_here {
                Found::Restore(c) => {
                    last = Some(Arc::clone(&c[0]));
                    c
                }
                Found::Edited(_) => {
                    edited.push(i);
                    rerendered.push(i);
                    Vec::new()
                }
                Found::Unknown => {
                    if turn.msg.role == "assistant" {
                        rerendered.push(i);
                    }
                    Vec::new()
                }
            };
            found.push(candidates);
        }
        let fresh = last.is_none();
        // A sub-agent's first request.
        let delegation = match (fresh, turns.iter().find(|t| t.msg.role == "user")) {
            (true, Some(u)) => self.delegation_of(&u.msg.content, named.as_deref()),
            _ => None,
        };
        let scope = named
            .clone()
            .or_else(|| last.as_ref().map(|p| p.execution.clone()))
            .or_else(|| delegation.as_ref().map(|d| d.0.clone()));
        let summary = turns
            .iter()
            .enumerate()
            .filter(|(_, t)| t.msg.role == "user")
            .find_map(|(i, t)| {
                self.summary_in(&t.msg.content, scope.as_deref())
                    .map(|s| (i, s))
            });
        if let Some((i, _)) = &summary {
            turns[*i].source = Source::Summary;
        }
        let execution = scope
            .or_else(|| summary.as_ref().map(|(_, s)| s.0.clone()))
            .unwrap_or_else(|| self.new_execution_id());
        let (agent, delegated_by) = match (&hints.agent, &last, &delegation) {
            (Some(a), _, _) => (a.clone(), None),
            (None, Some(p), _) => (p.agent.clone(), None),
            (None, None, Some((exec, call))) if *exec == execution => {
                (self.subagent(exec, call), Some(call.clone()))
            }
            _ => match (&summary, fresh) {
                (Some((_, s)), true) => (s.1.clone(), None),
                _ => ("main".to_owned(), None),
            },
        };
        let purpose = hints.purpose.unwrap_or_else(|| {
            let asks = turns
                .iter()
                .rev()
                .find(|t| t.msg.role == "user")
                .is_some_and(|t| t.msg.content.contains(COMPACTION_ASK));
            if asks {
                Purpose::Summary
            } else {
                Purpose::Task
            }
        });
        let st = self
            .execs
            .entry(execution.clone())
            .or_insert_with(|| ExecState::new(hints.arrived, self.rec.knows_execution(&execution)));
        if !st.written {
            st.group = st.group.take().or_else(|| hints.group.clone());
            st.budget_s = st.budget_s.or(hints.budget_s);
        }
        let rturns = turns
            .iter()
            .zip(found)
            .map(|(turn, candidates)| RenderTurn { turn, candidates })
            .collect();
        Ok((
            rturns,
            Attribution {
                execution,
                agent,
                purpose,
                rerendered,
                edited,
                delegated_by,
            },
        ))
    }

    /// The execution and call of a `Task` whose prompt `text` contains, among open executions
    /// (only `within` when named).
    fn delegation_of(&self, text: &str, within: Option<&str>) -> Option<(String, String)> {
        let text = collapse(text);
        self.execs
            .iter()
            .filter(|(id, _)| self.reachable(id, within))
            .find_map(|(id, st)| {
                st.delegations
                    .iter()
                    .rev()
                    .find(|(prompt, _)| text.contains(prompt.as_str()))
                    .map(|(_, call)| (id.clone(), call.clone()))
            })
    }

    /// The execution and agent of a compaction whose summary `text` carries (its longest lines
    /// all appear in it), among open executions (only `within` when known).
    fn summary_in(&self, text: &str, within: Option<&str>) -> Option<(String, String)> {
        self.execs
            .iter()
            .filter(|(id, _)| self.reachable(id, within))
            .find_map(|(id, st)| {
                st.summaries
                    .iter()
                    .rev()
                    .find(|(_, lines)| {
                        !lines.is_empty() && lines.iter().all(|l| text.contains(l.as_str()))
                    })
                    .map(|(agent, _)| (id.clone(), agent.clone()))
            })
    }

    /// Whether execution `id` may be searched for a request scoped to `within` (an execution
    /// named or pinned): that one only, else any not issued by the control side.
    fn reachable(&self, id: &str, within: Option<&str>) -> bool {
        match within {
            Some(w) => w == id,
            None => !self.issued.contains(id),
        }
    }

    fn subagent(&mut self, exec: &str, call: &str) -> String {
        let st = self
            .execs
            .entry(exec.to_owned())
            .or_insert_with(|| ExecState::new(now(), true));
        let n = st.subagents.len() + 1;
        st.subagents
            .entry(call.to_owned())
            .or_insert_with(|| format!("sub-{n}"))
            .clone()
    }

    /// A fresh execution id: `e` + 32 hex digits (128 random bits), so no one can name an
    /// execution before it exists.
    fn new_execution_id(&mut self) -> String {
        loop {
            let id = format!(
                "e{:032x}",
                rand_core::RngCore::next_u64(&mut self.rng) as u128
                    | (rand_core::RngCore::next_u64(&mut self.rng) as u128) << 64
            );
            if !self.execs.contains_key(&id) && !self.rec.knows_execution(&id) {
                return id;
            }
        }
    }

    /// Issues an execution to a harness (`POST /gyre/executions` on the control listener):
    /// `execution` (else a fresh random id) is written with `group`, `budget_s` and `task`,
    /// started now, and becomes reachable through its capability URL only. Issuing an open
    /// issued execution again returns it unchanged; an execution started on the plain routes,
    /// or closed, is a conflict.
    pub fn issue(
        &mut self,
        execution: Option<&str>,
        group: Option<&Value>,
        budget_s: Option<f64>,
        task: Option<&Value>,
    ) -> Result<String, ApiError> {
        self.rec.ready().map_err(write_failed)?;
        let id = match execution {
            Some(id) => {
                check_id("execution", id)?;
                id.to_owned()
            }
            None => self.new_execution_id(),
        };
        let open = self.execs.contains_key(&id);
        if self.issued.contains(&id) && open {
            return Ok(id);
        }
        if self.rec.knows_execution(&id) || open {
            return Err(ApiError::new(
                ErrorKind::Conflict,
                format!(
                    "execution {id:?} already exists (closed, or started on the model routes \
                     without a capability); issue another id"
                ),
            ));
        }
        let t = now();
        let mut meta = Map::new();
        meta.insert("recorded_by".into(), "gyre record".into());
        meta.insert("attribution".into(), ISSUED.into());
        self.rec
            .write(|rec| {
                rec.execution(&ExecutionOut {
                    execution: &id,
                    t,
                    budget_s,
                    group,
                    task,
                    meta: Some(&meta),
                })
            })
            .map_err(record_error)?;
        let mut st = ExecState::new(t, true);
        st.budget_s = budget_s;
        self.execs.insert(id.clone(), st);
        self.issued.insert(id.clone());
        Ok(id)
    }

    /// A fresh tool-call id: `prefix` + 24 random characters.
    pub fn call_id(&mut self, prefix: &str) -> String {
        format!("{prefix}{}", random_id(&mut self.rng, 24))
    }

    /// A fresh call id in Kimi K2's form, `functions.NAME:IDX`, with a random index (the
    /// model's own indices restart at 0 every turn, and the proxy's ids must be unique).
    pub fn indexed_call_id(&mut self, name: &str) -> String {
        format!(
            "functions.{name}:{}",
            rand_core::RngCore::next_u32(&mut self.rng) % 1_000_000_000
        )
    }

    /// A fresh response id: `prefix` + 24 random characters.
    pub fn response_id(&mut self, prefix: &str) -> String {
        self.call_id(prefix)
    }

    /// Writes the request's record (and its execution's, the first time), flushed; the output
    /// becomes restorable. Returns the request id and the request it extends (delta form).
    pub fn commit(
        &mut self,
        p: &Attribution,
        ctx: &Context,
        t: f64,
        out: &Outcome,
    ) -> Result<(String, Option<String>), ApiError> {
        self.rec.ready().map_err(write_failed)?;
        // Closed meanwhile: the request is still recorded (the engine flags it after closure).
        let known = self.rec.knows_execution(&p.execution);
        let st = self
            .execs
            .entry(p.execution.clone())
            .or_insert_with(|| ExecState::new(t, known));
        let (was_written, next_request) = (st.written, st.next_request);
        let id = loop {
            let id = format!("r{}", st.next_request);
            st.next_request += 1;
            if !self.rec.knows_request(&p.execution, &id) {
                break id;
            }
        };
        let group = st.group.clone().map(Value::from);
        let mut exec_meta = Map::new();
        exec_meta.insert("recorded_by".into(), "gyre record".into());
        let execution = (!st.written).then(|| ExecutionOut {
            execution: &p.execution,
            // Never after its first request (of several arriving together).
            t: st.t.min(t),
            budget_s: st.budget_s,
            group: group.as_ref(),
            task: None,
            meta: Some(&exec_meta),
        });
        let spans: Vec<SpanOut> = ctx.spans.iter().map(SpanOut::from).collect();
        let calls: Vec<ToolCallOut> = out
            .calls
            .iter()
            .map(|(c, start, end)| ToolCallOut {
                id: &c.id,
                name: Some(&c.name),
                start: *start,
                end: *end,
            })
            .collect();
        let mut meta = Map::new();
        meta.insert("api".into(), out.api.into());
        meta.insert("restored_turns".into(), ctx.restored.len().into());
        for (k, v) in out.request_meta {
            meta.insert(k.clone(), v.clone());
        }
        if !p.rerendered.is_empty() {
            meta.insert("rerendered_turns".into(), p.rerendered.clone().into());
        }
        if !p.edited.is_empty() {
            meta.insert("edited_turns".into(), p.edited.clone().into());
        }
        if let Some(call) = &p.delegated_by {
            meta.insert("delegated_by".into(), call.as_str().into());
        }
        let request = RequestOut {
            purpose: p.purpose,
            t: Some(t),
            model: Some(out.model),
            logprobs: Some(out.logprobs),
            tool_calls: &calls,
            finish: Some(out.finish),
            meta: Some(&meta),
            ..RequestOut::new(&p.execution, &id, &p.agent, &ctx.tokens, &spans, out.output)
        };
        // The execution's line (the first time) and the request's are written together, or
        // neither is; then the execution is as unwritten and the id as free as before.
        let written = self.rec.write(|rec| {
            if let Some(e) = &execution {
                rec.execution(e)?;
            }
            rec.request(&request)
        });
        let st = self.execs.get_mut(&p.execution);
        let written = match (written, st) {
            (Ok(w), Some(st)) => {
                st.written = true;
                w
            }
            (Ok(w), None) => w,
            (Err(e), st) => {
                if let Some(st) = st {
                    st.written = was_written;
                    st.next_request = next_request;
                }
                return Err(record_error(e));
            }
        };
        self.remember(Arc::new(Produced {
            execution: p.execution.clone(),
            agent: p.agent.clone(),
            purpose: p.purpose,
            output: Arc::from(out.output),
            eos: out.eos,
            input_len: ctx.tokens.len(),
            input_hash: hash_tokens(&ctx.tokens),
            content: out.content.to_owned(),
            calls: out.calls.iter().map(|(c, _, _)| c.clone()).collect(),
        }));
        Ok((id, written.extends))
    }

    /// Makes `p` restorable, and notes the delegations and summary it carries.
    fn remember(&mut self, p: Arc<Produced>) {
        if let Some(st) = self.execs.get_mut(&p.execution) {
            for c in &p.calls {
                let prompt = c.arguments.get("prompt").and_then(Value::as_str);
                if let (true, Some(prompt)) = (DELEGATION_TOOLS.contains(&c.name.as_str()), prompt)
                {
                    let prompt = collapse(prompt);
                    if !prompt.is_empty() {
                        st.delegations.push((prompt, c.id.clone()));
                    }
                }
            }
            if p.purpose == Purpose::Summary {
                st.summaries
                    .push((p.agent.clone(), longest_lines(&p.content, 3)));
            }
        }
        self.payloads.insert(p);
    }

    /// Writes a `closure` from a docs/format.md §1 body (`t` defaults to now); the execution's outputs
    /// are forgotten.
    pub fn closure(&mut self, body: &Value) -> Result<(), ApiError> {
        let line = record_line(body, "closure")?;
        check_body_id(body)?;
        let Record::Closure(c) = parse_line(&line).map_err(line_error)?.record else {
            return Err(ApiError::invalid("kind", "not a closure"));
        };
        let meta = body.get("meta").and_then(Value::as_object);
        self.rec
            .write(|rec| {
                rec.closure(&ClosureOut {
                    meta,
                    ..c.as_ref().into()
                })
            })
            .map_err(record_error)?;
        self.payloads.forget_execution(&c.execution);
        self.execs.remove(&c.execution);
        Ok(())
    }

    /// Writes an `assessment` from a docs/format.md §1 body (`t` defaults to now).
    pub fn assessment(&mut self, body: &Value) -> Result<(), ApiError> {
        let line = record_line(body, "assessment")?;
        check_body_id(body)?;
        let Record::Assessment(a) = parse_line(&line).map_err(line_error)?.record else {
            return Err(ApiError::invalid("kind", "not an assessment"));
        };
        // The reader keeps no `meta`; the evaluator's is written as sent (as a closure's).
        let meta = body.get("meta").and_then(Value::as_object);
        self.rec
            .write(|rec| {
                rec.assessment(&AssessmentOut {
                    meta,
                    ..a.as_ref().into()
                })
            })
            .map_err(record_error)
    }

    /// Flushes the recording.
    pub fn flush(&mut self) -> Result<(), ApiError> {
        self.rec.flush().map_err(write_failed)
    }
}

/// Who a request is: execution, agent, purpose, and what restoration found.
#[derive(Clone, Debug, PartialEq)]
pub struct Attribution {
    /// Execution id.
    pub execution: String,
    /// Agent id.
    pub agent: String,
    /// Purpose.
    pub purpose: Purpose,
    /// Assistant turns rendered from text.
    pub rerendered: Vec<usize>,
    /// Those of them that were edited.
    pub edited: Vec<usize>,
    /// The delegating call, for a sub-agent's first request.
    pub delegated_by: Option<String>,
}

/// A control body's `execution`, when it is a string, has the ids' alphabet and length (the
/// loader checks that it is one).
fn check_body_id(body: &Value) -> Result<(), ApiError> {
    match body.get("execution").and_then(Value::as_str) {
        Some(id) => check_id("execution", id),
        None => Ok(()),
    }
}

/// The body as a gyre/1 line of `kind` (`kind` may be given and must match; `t` defaults to
/// now), for the loader's own checks.
fn record_line(body: &Value, kind: &str) -> Result<Vec<u8>, ApiError> {
    let Value::Object(map) = body else {
        return Err(ApiError::new(
            ErrorKind::InvalidRequest,
            format!("the body must be a JSON object (a docs/format.md §1 {kind} record)"),
        ));
    };
    let mut map = map.clone();
    match map.get("kind") {
        None => {
            map.insert("kind".into(), kind.into());
        }
        Some(Value::String(k)) if k == kind => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "kind",
                format!("this endpoint takes {kind} records"),
            ));
        }
    }
    if !map.contains_key("t") {
        map.insert("t".into(), now().into());
    }
    serde_json::to_vec(&Value::Object(map))
        .map_err(|e| ApiError::new(ErrorKind::InvalidRequest, e.to_string()))
}

fn line_error(e: gyre_engine::record::LineError) -> ApiError {
    ApiError {
        kind: ErrorKind::InvalidRequest,
        message: e.message,
        param: e.field,
    }
}

fn record_error(e: RecordError) -> ApiError {
    match e {
        RecordError::Invalid(le) if le.message.contains("already") => ApiError {
            kind: ErrorKind::Conflict,
            message: le.message,
            param: None,
        },
        RecordError::Invalid(le) => line_error(le),
        RecordError::Io(e) => write_failed(e),
    }
}

/// 500: the record was not written (the file is as it was before it).
fn write_failed(e: std::io::Error) -> ApiError {
    ApiError::new(
        ErrorKind::Internal,
        format!("writing the recording failed, so nothing was recorded: {e}"),
    )
}

/// The `n` longest non-blank lines of `text`, trimmed (what a compaction summary is recognised
/// by when a harness puts it back with its own wording around it).
fn longest_lines(text: &str, n: usize) -> Vec<String> {
    // Claude Code keeps only the `<summary>` part of its compaction answer.
    let text = match (text.find("<summary>"), text.rfind("</summary>")) {
        (Some(s), Some(e)) if s < e => &text[s + "<summary>".len()..e],
        _ => text,
    };
    let mut lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.len() >= 20)
        .collect();
    lines.sort_by_key(|l| std::cmp::Reverse(l.len()));
    lines.truncate(n);
    lines.into_iter().map(str::to_owned).collect()
}

fn count_lines(path: &Path) -> Result<u64> {
    use std::io::Read;
    let mut file =
        std::fs::File::open(path).wrap_err_with(|| format!("reading {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 16];
    let mut lines = 0u64;
    loop {
        let n = file
            .read(&mut buf)
            .wrap_err_with(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok(lines);
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
    }
}
