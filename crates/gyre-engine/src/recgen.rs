//! Random gyre/1 recordings in token-id space, for property tests.
//!
//! Each execution is simulated as a harness would record it: a growing main conversation with
//! tool calls and results, retries on the same context (some token-identical, continued by call
//! id), harness-written assistant text, re-serialised tool calls that diverge inside an earlier
//! output, evaluator critiques fed back as context, sub-agents with their own context,
//! compaction with a summary call, requests after closure, and every scoring fate of docs/format.md §4.
//! Token ids are random (no text): `gyre synth` writes realistic text recordings.

use std::io::{self, Write};

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde_json::{Map, Value};

use gyre_format::record::{Actor, ClosureStatus, Purpose, Source};
use gyre_format::write::{
    AssessmentOut, ClosureOut, ExecutionOut, Line, RequestOut, SpanOut, ToolCallOut, Validity,
};

/// Generator settings.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// Number of executions.
    pub executions: usize,
    /// Main-agent turns per execution (upper bound; each execution draws 1..=turns).
    pub turns: usize,
    /// Token ids are drawn from `0..vocab`; a small vocabulary makes accidental matches likely.
    pub vocab: u32,
    /// Compaction when the main context grows past this many tokens.
    pub context: usize,
    /// Longest output, in tokens.
    pub max_output: usize,
    /// Longest tool result, in tokens.
    pub max_tool: usize,
    /// Executions per GRPO group.
    pub group_size: usize,
    /// Seed.
    pub seed: u64,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            executions: 8,
            turns: 8,
            vocab: 32,
            context: 400,
            max_output: 12,
            max_tool: 16,
            group_size: 4,
            seed: 0,
        }
    }
}

/// A labelled run of a generated input (exclusive end).
#[derive(Clone, Debug, PartialEq)]
pub struct GenSpan {
    /// Exclusive end offset into the full input.
    pub end: usize,
    /// Source name.
    pub source: &'static str,
    /// Call id of a tool result.
    pub call_id: Option<String>,
}

/// A generated request, always in full form (the writer derives delta form).
#[derive(Clone, Debug, PartialEq)]
pub struct GenRequest {
    /// Request id.
    pub id: String,
    /// Agent id.
    pub agent: String,
    /// `task` or `summary`.
    pub purpose: &'static str,
    /// `policy` or `evaluator`.
    pub actor: &'static str,
    /// Full input.
    pub input: Vec<u32>,
    /// Spans over the full input.
    pub spans: Vec<GenSpan>,
    /// Output.
    pub output: Vec<u32>,
    /// Log-probs (`None` writes a reconstructed record).
    pub logprobs: Option<Vec<f64>>,
    /// Tool calls `(id, start, end)`.
    pub tool_calls: Vec<(String, usize, usize)>,
}

/// A generated line.
#[derive(Clone, Debug, PartialEq)]
pub enum GenRecord {
    /// `execution` line.
    Execution {
        /// Budget in seconds.
        budget_s: f64,
        /// Group id.
        group: String,
    },
    /// `request` line.
    Request(GenRequest),
    /// `assessment` line.
    Assessment {
        /// Valid or failed.
        valid: bool,
        /// Score of a valid assessment.
        score: f64,
        /// Time.
        t: f64,
        /// Version assessed.
        version: u32,
    },
    /// `closure` line (`version: None` = no assessable work).
    Closure {
        /// Status.
        status: &'static str,
        /// Version available at closure.
        version: Option<u32>,
    },
}

/// One generated execution: its id and records in order.
#[derive(Clone, Debug, PartialEq)]
pub struct GenExecution {
    /// Execution id.
    pub id: String,
    /// Records in the execution's own order.
    pub records: Vec<GenRecord>,
}

/// A conversation being built: tokens with their spans.
#[derive(Clone, Default)]
struct Ctx {
    tokens: Vec<u32>,
    spans: Vec<GenSpan>,
}

impl Ctx {
    fn push(&mut self, tokens: &[u32], source: &'static str, call_id: Option<String>) {
        if tokens.is_empty() {
            return;
        }
        self.tokens.extend_from_slice(tokens);
        self.spans.push(GenSpan {
            end: self.tokens.len(),
            source,
            call_id,
        });
    }
}

struct Gen {
    rng: ChaCha8Rng,
    opts: GenOptions,
    requests: Vec<GenRecord>,
    next_req: usize,
    next_call: usize,
}

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.rng.next_u64() % 100 < percent
    }

    fn tokens(&mut self, max: usize) -> Vec<u32> {
        let n = 1 + self.below(max);
        (0..n)
            .map(|_| (self.rng.next_u64() % self.opts.vocab as u64) as u32)
            .collect()
    }

    fn logprobs(&mut self, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| {
                // Samplers compute log-probs in float32; record them as such.
                let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                -(u * u * u * 6.0) as f32 as f64
            })
            .collect()
    }

    /// Records a request on context `ctx` and returns it.
    fn request(
        &mut self,
        ctx: &Ctx,
        agent: &str,
        purpose: &'static str,
        actor: &'static str,
        output: Option<Vec<u32>>,
    ) -> GenRequest {
        let output = output.unwrap_or_else(|| self.tokens(self.opts.max_output));
        let mut tool_calls = Vec::new();
        if actor == "policy" && purpose == "task" && self.chance(70) {
            let start = self.below(output.len());
            let end = start + 1 + self.below(output.len() - start);
            tool_calls.push((format!("call_{}", self.next_call), start, end));
            self.next_call += 1;
        }
        self.next_req += 1;
        let req = GenRequest {
            id: format!("r{}", self.next_req),
            agent: agent.to_owned(),
            purpose,
            actor,
            input: ctx.tokens.clone(),
            spans: ctx.spans.clone(),
            logprobs: Some(self.logprobs(output.len())),
            output,
            tool_calls,
        };
        self.requests.push(GenRecord::Request(req.clone()));
        req
    }

    /// Appends a request's output to `ctx` as a harness restoring it would, or re-serialised
    /// (one token changed) as a harness without payload restoration would.
    fn continue_with(&mut self, ctx: &mut Ctx, req: &GenRequest) {
        let mut out = req.output.clone();
        if out.len() > 1 && self.chance(10) {
            let i = 1 + self.below(out.len() - 1);
            out[i] = (out[i] + 1) % self.opts.vocab;
        }
        ctx.push(&out, "assistant", None);
        for (id, _, _) in &req.tool_calls {
            let result = self.tokens(self.opts.max_tool);
            ctx.push(&result, "tool", Some(id.clone()));
        }
    }

    fn sub_agent(&mut self, main: &mut Ctx, k: usize) {
        let agent = format!("sub-{k}");
        let mut ctx = Ctx::default();
        let sys = self.tokens(self.opts.max_tool);
        ctx.push(&sys, "system", None);
        let task = self.tokens(self.opts.max_tool);
        ctx.push(&task, "user", None);
        let turns = 1 + self.below(3);
        let mut last = None;
        for _ in 0..turns {
            let r = self.request(&ctx, &agent, "task", "policy", None);
            self.continue_with(&mut ctx, &r);
            last = Some(r);
        }
        if self.chance(20) {
            self.request(&ctx, &agent, "summary", "policy", None);
        }
        if let Some(r) = last {
            main.push(&r.output, "tool", Some(format!("task_{k}")));
        }
    }

    fn execution(&mut self, e: usize) -> GenExecution {
        self.requests.clear();
        self.next_req = 0;
        let mut records = vec![GenRecord::Execution {
            budget_s: 600.0,
            group: format!("g{}", e / self.opts.group_size.max(1)),
        }];
        let mut ctx = Ctx::default();
        let sys = self.tokens(self.opts.max_tool * 2);
        ctx.push(&sys, "system", None);
        ctx.push(&[self.opts.vocab.saturating_sub(1)], "template", None);
        let task = self.tokens(self.opts.max_tool);
        ctx.push(&task, "user", None);
        let head_len = ctx.tokens.len();
        let head = ctx.clone();
        let turns = 1 + self.below(self.opts.turns);
        let mut subs = 0;
        for _ in 0..turns {
            let r = self.request(&ctx, "main", "task", "policy", None);
            let mut chosen = r.clone();
            if self.chance(25) {
                // Retry on the same context: token-identical half the time.
                let same = self.chance(50).then(|| r.output.clone());
                let retry = self.request(&ctx, "main", "task", "policy", same);
                if self.chance(50) {
                    chosen = retry;
                }
            }
            self.continue_with(&mut ctx, &chosen);
            if self.chance(15) {
                let text = self.tokens(self.opts.max_output);
                ctx.push(&text, "assistant", None);
            }
            if self.chance(15) {
                let mut ectx = Ctx::default();
                let prompt = self.tokens(self.opts.max_tool);
                ectx.push(&prompt, "system", None);
                let work = chosen.output.clone();
                ectx.push(&work, "assistant", None);
                let critique = self.request(&ectx, "main", "task", "evaluator", None);
                ctx.push(&critique.output, "critique", None);
            }
            if self.chance(15) {
                subs += 1;
                self.sub_agent(&mut ctx, subs);
            }
            if ctx.tokens.len() > self.opts.context {
                let mut sctx = ctx.clone();
                let ask = self.tokens(4);
                sctx.push(&ask, "user", None);
                let summary = self.request(&sctx, "main", "summary", "policy", None);
                ctx = head.clone();
                debug_assert_eq!(ctx.tokens.len(), head_len);
                ctx.push(&summary.output, "summary", None);
            }
        }
        let fate = self.below(8);
        let mut tail = Vec::new();
        let closure = |status, version| GenRecord::Closure { status, version };
        let valid = |score, t| GenRecord::Assessment {
            valid: true,
            score,
            t,
            version: 1,
        };
        let failed = |t| GenRecord::Assessment {
            valid: false,
            score: 0.0,
            t,
            version: 1,
        };
        match fate {
            0 => tail.extend([closure("completed", Some(1)), valid(1.0, 100.0)]),
            1 => tail.extend([closure("timeout", Some(1)), valid(0.5, 590.0)]),
            2 => tail.extend([
                closure("completed", Some(1)),
                failed(100.0),
                valid(0.25, 200.0),
            ]),
            3 => tail.extend([closure("completed", Some(1)), valid(1.0, 601.0)]),
            4 => tail.extend([closure("error", Some(1)), failed(100.0), failed(200.0)]),
            5 => tail.extend([closure("completed", Some(1)), valid(0.0, 100.0)]),
            6 => tail.push(closure("error", None)),
            _ => {}
        }
        records.append(&mut self.requests);
        if fate < 7 && self.chance(30) {
            // A request after closure: recorded, never trained.
            let closed = tail.remove(0);
            records.push(closed);
            let r = self.request(&ctx, "main", "task", "policy", None);
            records.push(GenRecord::Request(r));
            self.requests.clear();
        }
        records.extend(tail);
        GenExecution {
            id: format!("e{e}"),
            records,
        }
    }
}

/// Generates a recording.
pub fn generate(opts: &GenOptions) -> Vec<GenExecution> {
    let mut g = Gen {
        rng: ChaCha8Rng::seed_from_u64(opts.seed),
        opts: opts.clone(),
        requests: Vec::new(),
        next_req: 0,
        next_call: 0,
    };
    (0..opts.executions).map(|e| g.execution(e)).collect()
}

/// Writes one execution's lines; with `delta`, each request extends the latest earlier request
/// whose path is a prefix of its input.
pub fn write_execution(exec: &GenExecution, delta: bool, out: &mut impl Write) -> io::Result<u64> {
    let mut lines = 0;
    for i in 0..exec.records.len() {
        write_record(exec, i, delta, out)?;
        lines += 1;
    }
    Ok(lines)
}

/// Writes line `i` of `exec`.
pub fn write_record(
    exec: &GenExecution,
    i: usize,
    delta: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    let id = exec.id.as_str();
    let patch = Value::from("patch");
    let mut emit = |line: &Line| {
        let mut buf = line.to_bytes();
        buf.push(b'\n');
        out.write_all(&buf)
    };
    match &exec.records[i] {
        GenRecord::Execution { budget_s, group } => {
            let group = Value::from(group.as_str());
            emit(&Line::Execution(ExecutionOut {
                execution: id,
                t: 0.0,
                budget_s: Some(*budget_s),
                group: Some(&group),
                task: None,
                meta: None,
            }))
        }
        GenRecord::Assessment {
            valid,
            score,
            t,
            version,
        } => {
            let version = Value::from(*version);
            let error = Value::from("evaluator failed");
            emit(&Line::Assessment(AssessmentOut {
                execution: id,
                artifact: &patch,
                version: &version,
                status: if *valid {
                    Validity::Valid
                } else {
                    Validity::Failed
                },
                score: valid.then_some(*score),
                t: *t,
                branch: None,
                attempt: None,
                evaluator: None,
                error: (!valid).then_some(&error),
                critique: None,
                meta: None,
            }))
        }
        GenRecord::Closure { status, version } => {
            let version = version.map(Value::from);
            let status = match *status {
                "timeout" => ClosureStatus::Timeout,
                "error" => ClosureStatus::Error,
                _ => ClosureStatus::Completed,
            };
            emit(&Line::Closure(ClosureOut {
                execution: id,
                t: 300.0,
                status,
                committed: None,
                artifact: version.is_some().then_some(&patch),
                version: version.as_ref(),
                meta: None,
            }))
        }
        GenRecord::Request(r) => {
            let base = if delta {
                extends_candidate(exec, i)
            } else {
                None
            };
            let skip = base.as_ref().map_or(0, |(_, len)| *len);
            let spans: Vec<SpanOut> = r
                .spans
                .iter()
                .filter(|s| s.end > skip)
                .map(|s| SpanOut {
                    end: (s.end - skip) as u32,
                    source: Source::parse(s.source).unwrap_or(Source::Context),
                    call_id: s.call_id.as_deref(),
                })
                .collect();
            let calls: Vec<ToolCallOut> = r
                .tool_calls
                .iter()
                .map(|(cid, s, e)| ToolCallOut {
                    id: cid,
                    name: Some("bash"),
                    start: *s as u32,
                    end: *e as u32,
                })
                .collect();
            let mut reconstructed = Map::new();
            reconstructed.insert("reconstructed".into(), Value::Bool(true));
            emit(&Line::Request(RequestOut {
                purpose: if r.purpose == "summary" {
                    Purpose::Summary
                } else {
                    Purpose::Task
                },
                actor: if r.actor == "evaluator" {
                    Actor::Evaluator
                } else {
                    Actor::Policy
                },
                extends: base.as_ref().map(|(eid, _)| eid.as_str()),
                logprobs: r.logprobs.as_deref(),
                tool_calls: &calls,
                meta: r.logprobs.is_none().then_some(&reconstructed),
                ..RequestOut::new(id, &r.id, &r.agent, &r.input[skip..], &spans, &r.output)
            }))
        }
    }
}

/// The latest earlier request whose input + output is a prefix of request `i`'s input.
fn extends_candidate(exec: &GenExecution, i: usize) -> Option<(String, usize)> {
    let GenRecord::Request(r) = &exec.records[i] else {
        return None;
    };
    exec.records[..i].iter().rev().find_map(|rec| match rec {
        GenRecord::Request(e) => {
            let n = e.input.len() + e.output.len();
            (n <= r.input.len()
                && r.input[..e.input.len()] == e.input[..]
                && r.input[e.input.len()..n] == e.output[..])
                .then(|| (e.id.clone(), n))
        }
        _ => None,
    })
}

/// Writes a whole recording, executions in order.
pub fn write_recording(
    execs: &[GenExecution],
    delta: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    for e in execs {
        write_execution(e, delta, out)?;
    }
    Ok(())
}
