//! `gyre synth`: a simulated Claude-Code-style harness that writes gyre/1 records (docs/format.md §1) the
//! way a recorder inside a real harness would.
//!
//! Every execution works on a coding task of its GRPO group. The main agent thinks, writes and
//! calls tools; the harness runs the tools and appends their results to the recorded context
//! (restoring the model's own output tokens, except where it deliberately re-serialises a tool
//! call); it delegates to sub-agents, compacts the context with a summary call when it grows
//! past `context` tokens, samples parallel retries, asks an evaluator for a critique, and ends
//! the execution with one of the scoring fates of docs/format.md §4. Messages go through the Qwen3 chat
//! template and tokenizer, so every token decodes to readable text.
//!
//! Same options ⇒ same bytes: all randomness comes from ChaCha8 seeded with `seed`, one stream
//! per execution.

mod content;
mod encode;

use std::collections::BTreeMap;
use std::io::Write;

use eyre::{Result, WrapErr, eyre};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde_json::{Map, Value, json};

use content::{TASKS, Task};
use encode::{Encoder, Part, Source, Span};
use gyre_engine::record::{Actor, ClosureStatus, Purpose};
use gyre_engine::write::{
    AssessmentOut, ClosureOut, ExecutionOut, Gyre1, HeaderOut, Line, LineWriter, RequestOut,
    SpanOut, ToolCallOut, Validity,
};
use gyre_text::{ChatTemplate, Message, RenderOptions, TokenText, ToolCall};

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthOptions {
    /// Number of executions (GRPO groups of 4 share a task).
    pub executions: usize,
    /// Main-agent steps per execution (at least 3; critiques and retries add requests).
    pub turns: usize,
    /// Compaction threshold: a context longer than this many tokens is summarised.
    pub context: usize,
    /// Seed of all randomness.
    pub seed: u64,
    /// Write `extends` delta encodings (only the new input tokens) instead of full inputs.
    pub delta: bool,
}

impl Default for SynthOptions {
    fn default() -> Self {
        Self {
            executions: 24,
            turns: 12,
            context: 6000,
            seed: 0,
            delta: false,
        }
    }
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SynthSummary {
    /// Executions written.
    pub executions: usize,
    /// `request` records written (all actors and agents).
    pub requests: u64,
    /// Lines written (all kinds, header included).
    pub lines: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Token ids written in `input` arrays (delta encoding writes fewer).
    pub input_tokens: u64,
    /// Token ids written in `output` arrays.
    pub output_tokens: u64,
    /// Executions per intended scoring fate (`scored`, `timeout`, `dummy`, …).
    pub fates: BTreeMap<&'static str, usize>,
}

/// Progress, reported after each execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynthProgress {
    /// Executions finished so far.
    pub executions_done: usize,
    /// Executions asked for.
    pub executions_total: usize,
    /// Bytes written so far.
    pub bytes: u64,
}

/// Writes a synthetic recording (header line first) to `out`.
pub fn write_synth(opts: &SynthOptions, out: &mut impl Write) -> Result<SynthSummary> {
    write_synth_with_progress(opts, out, &mut |_| {})
}

/// [`write_synth`], calling `progress` after every execution (for a progress bar).
pub fn write_synth_with_progress(
    opts: &SynthOptions,
    out: &mut impl Write,
    progress: &mut dyn FnMut(SynthProgress),
) -> Result<SynthSummary> {
    let mut g = Gen::new(opts, out)?;
    g.header()?;
    for idx in 0..opts.executions {
        g.execution(idx)?;
        progress(SynthProgress {
            executions_done: idx + 1,
            executions_total: opts.executions,
            bytes: g.w.bytes(),
        });
    }
    g.w.flush().wrap_err("writing synth output")?;
    g.summary.executions = opts.executions;
    g.summary.lines = g.w.lines();
    g.summary.bytes = g.w.bytes();
    Ok(g.summary)
}

/// How an execution ends (docs/format.md §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Scored,
    FailedThenRetried,
    ValidZero,
    Timeout,
    ValidAfterBudget,
    Dummy,
    AllFailed,
    Open,
}

impl Fate {
    /// The first executions take every fate once, so even small runs show them all.
    const FIRST: [Fate; 8] = [
        Fate::Scored,
        Fate::FailedThenRetried,
        Fate::ValidZero,
        Fate::Timeout,
        Fate::ValidAfterBudget,
        Fate::Dummy,
        Fate::AllFailed,
        Fate::Open,
    ];

    fn name(self) -> &'static str {
        match self {
            Fate::Scored => "scored",
            Fate::FailedThenRetried => "failed_then_retried",
            Fate::ValidZero => "valid_zero",
            Fate::Timeout => "timeout",
            Fate::ValidAfterBudget => "valid_after_budget",
            Fate::Dummy => "dummy",
            Fate::AllFailed => "all_failed",
            Fate::Open => "open",
        }
    }
}

const BUDGET_S: u64 = 3600;

/// One step of the main agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    List,
    Log,
    Test,
    Read(usize),
    ReadTwo(usize, usize),
    Grep,
    Edit(usize),
    Delegate,
    Final,
}

struct Rng(ChaCha8Rng);

impl Rng {
    fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    /// Milliseconds in `lo..hi` seconds.
    fn secs(&mut self, lo: u64, hi: u64) -> u64 {
        lo * 1000 + self.below(((hi - lo) * 1000) as usize) as u64
    }
}

/// A recorded context: the tokens sent so far, their spans, and the latest request whose
/// input + output is a prefix of them (what a delta record `extends`).
#[derive(Clone)]
struct Ctx {
    agent: String,
    ids: Vec<u32>,
    spans: Vec<Span>,
    anchor: Option<(u32, usize)>,
    steps: usize,
}

impl Ctx {
    fn new(agent: String, (ids, spans): (Vec<u32>, Vec<Span>)) -> Self {
        Self {
            agent,
            ids,
            spans,
            anchor: None,
            steps: 0,
        }
    }

    fn push(&mut self, ids: &[u32], spans: &[Span]) {
        let base = self.ids.len();
        self.ids.extend_from_slice(ids);
        gyre_text::label::extend_spans(&mut self.spans, base, spans);
    }

    /// Restores a request's recorded output (payload restoration) and makes it the anchor.
    fn push_output(&mut self, req: u32, output: &[u32]) {
        let span = Span {
            end: output.len(),
            source: Source::Assistant,
            call_id: None,
        };
        self.push(output, &[span]);
        self.anchor = Some((req, self.ids.len()));
    }
}

/// A generated model turn.
struct Output {
    msg: Message,
    ids: Vec<u32>,
    /// Negated log-probs in units of 1e-4.
    logprobs: Vec<u64>,
    /// `(call number, start, end)` offsets of each `<tool_call>` block.
    calls: Vec<(u32, usize, usize)>,
}

/// Per-request extras.
#[derive(Default)]
struct Kind {
    summary: bool,
    evaluator: bool,
    /// The `Task` call that started this sub-agent (written as `meta.task_call_id`, the link
    /// `gyre import claude-code` writes too).
    task_call: Option<u32>,
}

struct Exec {
    id: String,
    group: usize,
    /// The last main-agent request (what the closure commits).
    last_main: u32,
    task: &'static Task,
    rng: Rng,
    /// Milliseconds since the recording's epoch.
    t: u64,
    t0: u64,
    next_req: u32,
    next_call: u32,
    subs: u32,
    files: Vec<String>,
    applied: Vec<usize>,
    version: u64,
}

struct Gen<'w> {
    opts: SynthOptions,
    enc: Encoder,
    tmpl: ChatTemplate,
    gen_prompt: (Vec<u32>, Vec<Span>),
    main_tools: Vec<Value>,
    sub_tools: Vec<Value>,
    special: Specials,
    w: LineWriter<&'w mut dyn Write>,
    summary: SynthSummary,
}

/// Ids that steer the log-prob model.
struct Specials {
    first_added: u32,
    think: u32,
    think_end: u32,
    call: u32,
    call_end: u32,
}

impl<'w> Gen<'w> {
    fn new(opts: &SynthOptions, out: &'w mut dyn Write) -> Result<Self> {
        let tok = TokenText::qwen3()?;
        let tmpl = ChatTemplate::qwen3()?;
        let mut enc = Encoder::new(tok.clone())?;
        let gp = tmpl.generation_prompt(RenderOptions::default())?;
        let gen_prompt = enc.encode_labelled(&gp, &[])?;
        let id = |s: &str| tok.token_id(s).ok_or_else(|| eyre!("qwen3 has no {s}"));
        let special = Specials {
            first_added: tok.added_tokens().first().map_or(u32::MAX, |&(_, id)| id),
            think: id("<think>")?,
            think_end: id("</think>")?,
            call: id("<tool_call>")?,
            call_end: id("</tool_call>")?,
        };
        Ok(Self {
            opts: SynthOptions {
                turns: opts.turns.max(3),
                ..opts.clone()
            },
            enc,
            tmpl,
            gen_prompt,
            main_tools: content::main_tools(),
            sub_tools: content::sub_tools(),
            special,
            w: LineWriter::new(out),
            summary: SynthSummary::default(),
        })
    }

    fn header(&mut self) -> Result<()> {
        let o = &self.opts;
        let mut meta = Map::new();
        meta.insert("generator".into(), json!("gyre synth"));
        for (k, v) in [
            ("executions", o.executions as u64),
            ("turns", o.turns as u64),
            ("context", o.context as u64),
            ("seed", o.seed),
        ] {
            meta.insert(k.into(), json!(v));
        }
        meta.insert("delta".into(), json!(o.delta));
        let tokenizer = json!("qwen3");
        self.line(&Line::Header(HeaderOut {
            format: Gyre1,
            tokenizer: Some(&tokenizer),
            trainer: None,
            meta: Some(&meta),
        }))
    }

    fn line(&mut self, line: &Line) -> Result<()> {
        self.w.write(line).wrap_err("writing synth output")
    }

    fn execution(&mut self, idx: usize) -> Result<()> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.opts.seed);
        rng.set_stream(idx as u64);
        let mut rng = Rng(rng);
        let group = idx / 4;
        let task = &TASKS[group % TASKS.len()];
        let fate = match Fate::FIRST.get(idx) {
            Some(&f) => f,
            None if rng.chance(0.65) => Fate::Scored,
            None => Fate::FIRST[1 + rng.below(7)],
        };
        *self.summary.fates.entry(fate.name()).or_default() += 1;
        let t0 = idx as u64 * 45_000;
        let mut ex = Exec {
            id: format!("e{idx:04}"),
            group,
            last_main: 0,
            task,
            rng,
            t: t0,
            t0,
            next_req: 1,
            next_call: 1,
            subs: 0,
            files: task.files.iter().map(|(_, c)| (*c).to_owned()).collect(),
            applied: Vec::new(),
            version: 0,
        };
        // Which features this execution shows; the first ones are forced so that a small run
        // (`--executions 8`) already has everything.
        let preamble = idx == 0 || ex.rng.chance(0.5);
        let delegate = idx % 4 == 0 || ex.rng.chance(0.4);
        let critique = idx == 0 || idx == 3 || ex.rng.chance(0.35);
        let late_request = idx == 0 || (fate != Fate::Open && ex.rng.chance(0.08));

        let group = json!(format!("g{group:03}"));
        let task_prompt = json!(task.prompt);
        let mut meta = Map::new();
        meta.insert("synth_fate".into(), json!(fate.name()));
        self.line(&Line::Execution(ExecutionOut {
            execution: &ex.id,
            t: millis(t0),
            budget_s: Some(BUDGET_S as f64),
            group: Some(&group),
            task: Some(&task_prompt),
            meta: Some(&meta),
        }))?;

        let mut ctx = Ctx::new("main".into(), self.initial_context(task, preamble)?);
        if preamble {
            ex.next_call = 1; // call_0 is the harness's own git status
        }
        let mut plan = plan(task, self.opts.turns, delegate, fate, &mut ex.rng);
        let mut critiqued = !critique;
        let mut last_main: Option<(usize, Option<(u32, usize)>)> = None;
        let mut step = 0usize;
        while !plan.is_empty() {
            let action = plan.remove(0);
            if ctx.ids.len() > self.opts.context && ctx.steps >= 3 {
                ctx = self.compact(&mut ex, ctx)?;
            }
            step += 1;
            let (gp_ids, gp_spans) = self.gen_prompt.clone();
            ctx.push(&gp_ids, &gp_spans);
            last_main = Some((ctx.ids.len(), ctx.anchor));
            let retries = action != Action::Final
                && action != Action::Delegate
                && ((idx == 0 && step == 2) || ex.rng.chance(0.12));
            let reserialise = !retries
                && action != Action::Final
                && ((idx <= 1 && step == 3) || ex.rng.chance(0.08));
            let n = if retries { 2 + ex.rng.below(2) } else { 1 };
            let mut outs = Vec::with_capacity(n);
            for k in 0..n {
                let out = if k > 0 && ex.rng.chance(0.5) {
                    // A token-identical sample; its calls get fresh ids.
                    let first: &Output = &outs[0];
                    let calls: Vec<(u32, usize, usize)> = first
                        .calls
                        .iter()
                        .map(|&(_, s, e)| {
                            ex.next_call += 1;
                            (ex.next_call - 1, s, e)
                        })
                        .collect();
                    Output {
                        msg: renumber(&first.msg, &calls),
                        ids: first.ids.clone(),
                        logprobs: first.logprobs.clone(),
                        calls,
                    }
                } else {
                    let msg = self.main_message(&mut ex, action);
                    self.model_output(&mut ex, msg, reserialise)?
                };
                outs.push(out);
            }
            let mut reqs = Vec::with_capacity(n);
            for out in &outs {
                reqs.push(self.request(&mut ex, &ctx, out, &Kind::default())?);
            }
            let chosen = ex.rng.below(n);
            let (out, req) = (&outs[chosen], reqs[chosen]);
            ex.last_main = req;
            if action == Action::Final {
                if critiqued {
                    break;
                }
                critiqued = true;
                let text = self.critique(&mut ex)?;
                ctx.push_output(req, &out.ids);
                let full = format!("{}{text}", content::CRITIQUE_PREFIX);
                let cont = self.tmpl.render_continuation(
                    &out.msg,
                    &[Message::new("user", full.clone())],
                    RenderOptions::default(),
                )?;
                let parts = [
                    Part::new(content::CRITIQUE_PREFIX, Source::User),
                    Part::new(&text, Source::Critique),
                ];
                let (ids, spans) = self.enc.encode_labelled(&cont, &parts)?;
                ctx.push(&ids, &spans);
                ctx.steps += 1;
                plan = vec![Action::Test, Action::Final];
                continue;
            }
            let results = self.run_tools(&mut ex, action, out, req)?;
            if reserialise {
                // The harness rebuilds the assistant turn from the parsed message: the JSON
                // arguments come back with different spacing, so this context diverges inside
                // the recorded output, and the anchor stays where it was.
                let msg = reparse(&out.msg);
                let text = self
                    .tmpl
                    .render_assistant_output(&msg, RenderOptions::default())?;
                let (ids, spans) = self
                    .enc
                    .encode_labelled(&text, &[Part::new(&text, Source::Assistant)])?;
                ctx.push(&ids, &spans);
            } else {
                ctx.push_output(req, &out.ids);
            }
            let msgs: Vec<Message> = results
                .iter()
                .map(|(call, text)| Message::tool(&call_name(*call), text.clone()))
                .collect();
            let cont = self
                .tmpl
                .render_continuation(&out.msg, &msgs, RenderOptions::default())?;
            let parts: Vec<Part> = results
                .iter()
                .map(|(call, text)| Part {
                    text,
                    source: Source::Tool,
                    call: Some(*call),
                })
                .collect();
            let (ids, spans) = self.enc.encode_labelled(&cont, &parts)?;
            ctx.push(&ids, &spans);
            ctx.steps += 1;
        }
        self.finish(&mut ex, fate, &ctx, last_main, late_request)
    }

    /// System prompt with tools and the task, optionally followed by the harness's own
    /// assistant message (a `git status` call) and its result.
    fn initial_context(&mut self, task: &Task, preamble: bool) -> Result<(Vec<u32>, Vec<Span>)> {
        let mut msgs = vec![
            Message::new("system", content::MAIN_SYSTEM),
            Message::new("user", task.prompt),
        ];
        if preamble {
            let mut m = Message::new("assistant", content::HARNESS_PREAMBLE);
            m.tool_calls.push(ToolCall {
                id: call_name(0),
                name: "Bash".into(),
                arguments: json!({"command": "git status"}),
            });
            msgs.push(m);
            msgs.push(Message::tool(&call_name(0), content::GIT_STATUS));
        }
        let text = self
            .tmpl
            .render(&msgs, &self.main_tools, RenderOptions::default())?;
        let system = block_body(&text, "<|im_start|>system\n")?;
        let mut parts = vec![
            Part::new(system, Source::System),
            Part::new(task.prompt, Source::User),
        ];
        if preamble {
            parts.push(Part::new(
                block_body(&text, "<|im_start|>assistant\n")?,
                Source::Assistant,
            ));
            parts.push(Part {
                text: content::GIT_STATUS,
                source: Source::Tool,
                call: Some(0),
            });
        }
        self.enc.encode_labelled(&text, &parts)
    }

    /// The main agent's message for `action` (tool results are produced later).
    fn main_message(&self, ex: &mut Exec, action: Action) -> Message {
        let task = ex.task;
        let mut calls: Vec<(&str, Value)> = Vec::new();
        let path = |i: usize| task.files[i % task.files.len()].0;
        match action {
            Action::List => calls.push(if ex.rng.chance(0.5) {
                ("Bash", json!({"command": "git ls-files"}))
            } else {
                ("Glob", json!({"pattern": "**/*"}))
            }),
            Action::Log => calls.push(("Bash", json!({"command": "git log --stat -n 32"}))),
            Action::Test => calls.push(("Bash", json!({"command": task.test_cmd, "timeout": 300}))),
            Action::Read(i) => calls.push(("Read", json!({"file_path": path(i)}))),
            Action::ReadTwo(i, j) => {
                calls.push(("Read", json!({"file_path": path(i)})));
                calls.push(("Read", json!({"file_path": path(j)})));
            }
            Action::Grep => calls.push(("Grep", json!({"pattern": task.grep.0, "path": "."}))),
            Action::Edit(k) => {
                let (file, old, new) = task.edits[k];
                calls.push((
                    "Edit",
                    json!({"file_path": file, "old_string": old, "new_string": new}),
                ));
            }
            Action::Delegate => calls.push((
                "Task",
                json!({"description": "Check related code", "prompt": task.sub_question}),
            )),
            Action::Final => {}
        }
        let mut thoughts = vec![*ex.rng.pick(task.thoughts)];
        for _ in 0..ex.rng.below(3) {
            thoughts.push(*ex.rng.pick(content::GENERIC_THOUGHTS));
        }
        let text = match action {
            Action::Final => task.final_answer,
            Action::List => ex.rng.pick(content::PREFACE_LIST),
            Action::Log => ex.rng.pick(content::PREFACE_LOG),
            Action::Test => ex.rng.pick(content::PREFACE_TEST),
            Action::Read(_) | Action::ReadTwo(..) => ex.rng.pick(content::PREFACE_READ),
            Action::Grep => ex.rng.pick(content::PREFACE_GREP),
            Action::Edit(_) => ex.rng.pick(content::PREFACE_EDIT),
            Action::Delegate => ex.rng.pick(content::PREFACE_TASK),
        };
        let mut msg = Message::new("assistant", text);
        msg.reasoning_content = Some(thoughts.join(" "));
        for (name, args) in calls {
            msg.tool_calls.push(ToolCall {
                id: call_name(ex.next_call),
                name: name.into(),
                arguments: args,
            });
            ex.next_call += 1;
        }
        msg
    }

    /// Renders and tokenises a model turn and draws its behaviour log-probs. With `compact`,
    /// the model wrote its tool-call arguments as compact JSON (`{"a":1}`), which a harness
    /// that re-serialises the call will not reproduce.
    fn model_output(&mut self, ex: &mut Exec, msg: Message, compact: bool) -> Result<Output> {
        let mut shown = msg.clone();
        if compact {
            for c in &mut shown.tool_calls {
                c.arguments = Value::String(c.arguments.to_string());
            }
        }
        let text = self
            .tmpl
            .render_assistant_output(&shown, RenderOptions::default())?;
        let ids = self.enc.encode(&text)?;
        let s = &self.special;
        let mut logprobs = Vec::with_capacity(ids.len());
        let mut calls = Vec::new();
        let mut region = 0u8; // 0 text, 1 thinking, 2 tool call
        let mut call_start = 0;
        for (i, &id) in ids.iter().enumerate() {
            let r = &mut ex.rng;
            let lp = if id >= s.first_added {
                1.0 + r.below(20) as f64
            } else {
                // Mostly confident, with an exponential tail of uncertain tokens; thinking is
                // the least certain, JSON arguments the most.
                let (p_sure, sure_max, tail) = match region {
                    1 => (0.55, 0.12, 1.4),
                    2 => (0.85, 0.01, 0.6),
                    _ => (0.7, 0.05, 0.9),
                };
                let nats = if r.chance(p_sure) {
                    r.unit() * sure_max
                } else {
                    -(1.0 - r.unit()).ln() * tail
                };
                (nats.clamp(0.0001, 20.0) * 10_000.0).round()
            };
            logprobs.push(lp as u64);
            if id == s.think {
                region = 1;
            } else if id == s.think_end {
                region = 0;
            } else if id == s.call {
                region = 2;
                call_start = i;
            } else if id == s.call_end {
                region = 0;
                calls.push((call_start, i + 1));
            }
        }
        let calls = calls
            .into_iter()
            .zip(&msg.tool_calls)
            .map(|((start, end), c)| Ok((call_number(&c.id)?, start, end)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Output {
            msg,
            ids,
            logprobs,
            calls,
        })
    }

    /// Writes a request record for `out` on context `ctx`; returns its number.
    fn request(&mut self, ex: &mut Exec, ctx: &Ctx, out: &Output, kind: &Kind) -> Result<u32> {
        let rid = ex.next_req;
        ex.next_req += 1;
        ex.t += ex.rng.secs(2, 20);
        let base = match (self.opts.delta, ctx.anchor) {
            (true, Some((_, len))) => len,
            _ => 0,
        };
        let id = format!("r{rid}");
        let extends = match ctx.anchor {
            Some((anchor, _)) if base > 0 => Some(format!("r{anchor}")),
            _ => None,
        };
        let call_names: Vec<(Option<String>, u32)> = ctx
            .spans
            .iter()
            .filter(|s| s.end > base)
            .map(|s| (s.call_id.map(call_name), (s.end - base) as u32))
            .collect();
        let spans: Vec<SpanOut> = ctx
            .spans
            .iter()
            .filter(|s| s.end > base)
            .zip(&call_names)
            .map(|(s, (call, end))| SpanOut {
                end: *end,
                source: s.source,
                call_id: call.as_deref(),
            })
            .collect();
        let logprobs: Vec<f64> = out.logprobs.iter().map(|&u| -(u as f64) / 1e4).collect();
        let ids: Vec<String> = out
            .calls
            .iter()
            .map(|&(call, _, _)| call_name(call))
            .collect();
        let meta = kind.task_call.map(|c| {
            let mut m = Map::new();
            m.insert("task_call_id".into(), json!(call_name(c)));
            m
        });
        let tool_calls: Vec<ToolCallOut> = out
            .calls
            .iter()
            .zip(&out.msg.tool_calls)
            .zip(&ids)
            .map(|((&(_, start, end), c), id)| ToolCallOut {
                id,
                name: Some(&c.name),
                start: start as u32,
                end: end as u32,
            })
            .collect();
        self.line(&Line::Request(RequestOut {
            purpose: if kind.summary {
                Purpose::Summary
            } else {
                Purpose::Task
            },
            actor: if kind.evaluator {
                Actor::Evaluator
            } else {
                Actor::Policy
            },
            t: Some(millis(ex.t)),
            extends: extends.as_deref(),
            logprobs: Some(&logprobs),
            tool_calls: &tool_calls,
            finish: Some(if out.calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }),
            meta: meta.as_ref(),
            ..RequestOut::new(&ex.id, &id, &ctx.agent, &ctx.ids[base..], &spans, &out.ids)
        }))?;
        self.summary.requests += 1;
        self.summary.input_tokens += (ctx.ids.len() - base) as u64;
        self.summary.output_tokens += out.ids.len() as u64;
        Ok(rid)
    }

    /// Runs the tools of the chosen output: `(call number, result text)` per call.
    fn run_tools(
        &mut self,
        ex: &mut Exec,
        action: Action,
        out: &Output,
        req: u32,
    ) -> Result<Vec<(u32, String)>> {
        let task = ex.task;
        let mut results = Vec::new();
        for (&(call, _, _), c) in out.calls.iter().zip(&out.msg.tool_calls) {
            let arg = |k: &str| c.arguments.get(k).and_then(Value::as_str).unwrap_or("");
            let text = match c.name.as_str() {
                "Bash" if arg("command") == task.test_cmd => {
                    if ex.applied.len() == task.edits.len() {
                        task.test_pass.to_owned()
                    } else {
                        task.test_fail.to_owned()
                    }
                }
                "Bash" if arg("command").starts_with("git log") => {
                    content::git_log(task.files, ex.group % TASKS.len())
                }
                "Bash" | "Glob" => task.listing.to_owned(),
                "Read" => {
                    let i = task
                        .files
                        .iter()
                        .position(|(p, _)| *p == arg("file_path"))
                        .unwrap_or(0);
                    content::numbered(&ex.files[i])
                }
                "Grep" => task.grep.1.to_owned(),
                "Edit" => {
                    if let Action::Edit(k) = action {
                        let (file, old, new) = task.edits[k];
                        if let Some(i) = task.files.iter().position(|(p, _)| *p == file) {
                            ex.files[i] = ex.files[i].replacen(old, new, 1);
                        }
                        ex.applied.push(k);
                        ex.version += 1;
                        self.maybe_intermediate_assessment(ex, req)?;
                    }
                    format!("The file {} has been updated.", arg("file_path"))
                }
                "Task" => self.sub_agent(ex, call, task.sub_question, task.sub_report)?,
                other => return Err(eyre!("synth: no simulated tool {other}")),
            };
            results.push((call, text));
        }
        Ok(results)
    }

    /// An assessment of an intermediate artifact version, on the branch that produced it.
    fn maybe_intermediate_assessment(&mut self, ex: &mut Exec, req: u32) -> Result<()> {
        if !ex.rng.chance(0.4) {
            return Ok(());
        }
        ex.t += ex.rng.secs(1, 5);
        let score = 10 + ex.rng.below(40) as u64;
        let (t, v) = (ex.t, ex.version);
        self.assessment(ex, t, v, Some(score), 1, None, Some(req))
    }

    /// Delegation: a sub-agent with its own context searches and reports; the report is the
    /// Task tool's result.
    fn sub_agent(
        &mut self,
        ex: &mut Exec,
        task_call: u32,
        question: &str,
        report: &str,
    ) -> Result<String> {
        ex.subs += 1;
        let kind = Kind {
            task_call: Some(task_call),
            ..Kind::default()
        };
        let msgs = [
            Message::new("system", content::SUB_SYSTEM),
            Message::new("user", question),
        ];
        let text = self
            .tmpl
            .render(&msgs, &self.sub_tools, RenderOptions::default())?;
        let system = block_body(&text, "<|im_start|>system\n")?;
        let labelled = self.enc.encode_labelled(
            &text,
            &[
                Part::new(system, Source::System),
                Part::new(question, Source::User),
            ],
        )?;
        let mut ctx = Ctx::new(format!("sub-{}", ex.subs), labelled);
        let task = ex.task;
        let steps: [(&str, Value, String); 2] = [
            (
                "Grep",
                json!({"pattern": task.grep.0}),
                task.grep.1.to_owned(),
            ),
            (
                "Read",
                json!({"file_path": task.files[0].0}),
                content::numbered(&ex.files[0]),
            ),
        ];
        for (name, args, result) in steps {
            let (gp_ids, gp_spans) = self.gen_prompt.clone();
            ctx.push(&gp_ids, &gp_spans);
            let mut msg = Message::new("assistant", "");
            msg.reasoning_content = Some((*ex.rng.pick(task.thoughts)).to_owned());
            msg.tool_calls.push(ToolCall {
                id: call_name(ex.next_call),
                name: name.into(),
                arguments: args,
            });
            let call = ex.next_call;
            ex.next_call += 1;
            let out = self.model_output(ex, msg, false)?;
            let req = self.request(ex, &ctx, &out, &kind)?;
            ctx.push_output(req, &out.ids);
            let cont = self.tmpl.render_continuation(
                &out.msg,
                &[Message::tool(&call_name(call), result.clone())],
                RenderOptions::default(),
            )?;
            let part = Part {
                text: &result,
                source: Source::Tool,
                call: Some(call),
            };
            let (ids, spans) = self.enc.encode_labelled(&cont, &[part])?;
            ctx.push(&ids, &spans);
        }
        let (gp_ids, gp_spans) = self.gen_prompt.clone();
        ctx.push(&gp_ids, &gp_spans);
        let mut msg = Message::new("assistant", report);
        msg.reasoning_content = Some("I have what I need for the report.".into());
        let out = self.model_output(ex, msg, false)?;
        self.request(ex, &ctx, &out, &kind)?;
        Ok(report.to_owned())
    }

    /// Compaction: a summary call on the full context, then a fresh context that starts from
    /// the system prompt and the summary.
    fn compact(&mut self, ex: &mut Exec, mut ctx: Ctx) -> Result<Ctx> {
        let task = ex.task;
        let text = self.tmpl.render(
            &[Message::new("user", content::COMPACT_INSTRUCTION)],
            &[],
            RenderOptions::generation(true),
        )?;
        let (ids, spans) = self.enc.encode_labelled(
            &text,
            &[Part::new(content::COMPACT_INSTRUCTION, Source::User)],
        )?;
        ctx.push(&ids, &spans);
        let mut msg = Message::new("assistant", task.summary);
        msg.reasoning_content =
            Some("I should keep the task, the files involved and the test command.".into());
        let out = self.model_output(ex, msg, false)?;
        self.request(
            ex,
            &ctx,
            &out,
            &Kind {
                summary: true,
                ..Kind::default()
            },
        )?;
        let user = format!("{}{}", content::CONTINUED_PREFIX, task.summary);
        let msgs = [
            Message::new("system", content::MAIN_SYSTEM),
            Message::new("user", user),
        ];
        let text = self
            .tmpl
            .render(&msgs, &self.main_tools, RenderOptions::default())?;
        let system = block_body(&text, "<|im_start|>system\n")?;
        let labelled = self.enc.encode_labelled(
            &text,
            &[
                Part::new(system, Source::System),
                Part::new(content::CONTINUED_PREFIX, Source::User),
                Part::new(task.summary, Source::Summary),
            ],
        )?;
        Ok(Ctx::new(ctx.agent, labelled))
    }

    /// An evaluator reviews the patch; returns its critique text.
    fn critique(&mut self, ex: &mut Exec) -> Result<String> {
        let task = ex.task;
        let mut diff = String::new();
        for &k in &ex.applied {
            let (file, old, new) = task.edits[k];
            diff.push_str(&format!("--- a/{file}\n+++ b/{file}\n"));
            old.lines().for_each(|l| diff.push_str(&format!("-{l}\n")));
            new.lines().for_each(|l| diff.push_str(&format!("+{l}\n")));
        }
        let review = format!("Task: {}\n\nPatch:\n```diff\n{diff}```", task.prompt);
        let msgs = [
            Message::new("system", content::EVALUATOR_SYSTEM),
            Message::new("user", review.clone()),
        ];
        let text = self
            .tmpl
            .render(&msgs, &[], RenderOptions::generation(true))?;
        let labelled = self.enc.encode_labelled(
            &text,
            &[
                Part::new(content::EVALUATOR_SYSTEM, Source::System),
                Part::new(&review, Source::User),
            ],
        )?;
        let ctx = Ctx::new("evaluator".into(), labelled);
        let critique = (*ex.rng.pick(task.critiques)).to_owned();
        let mut msg = Message::new("assistant", critique.clone());
        msg.reasoning_content = Some("Check the edge cases the patch might miss.".into());
        let out = self.model_output(ex, msg, false)?;
        self.request(
            ex,
            &ctx,
            &out,
            &Kind {
                evaluator: true,
                ..Kind::default()
            },
        )?;
        Ok(critique)
    }

    /// Closure, final assessments and the request that arrives after closure.
    fn finish(
        &mut self,
        ex: &mut Exec,
        fate: Fate,
        ctx: &Ctx,
        last_main: Option<(usize, Option<(u32, usize)>)>,
        late_request: bool,
    ) -> Result<()> {
        if fate == Fate::Open {
            return Ok(());
        }
        ex.t += ex.rng.secs(1, 10);
        let status = match fate {
            Fate::Timeout => ClosureStatus::Timeout,
            Fate::Dummy => ClosureStatus::Error,
            _ => ClosureStatus::Completed,
        };
        let t_close = ex.t;
        let committed = (ex.last_main > 0).then(|| format!("r{}", ex.last_main));
        let assessable = !(fate == Fate::Dummy || ex.version == 0);
        let patch = json!("patch");
        let version = json!(ex.version);
        self.line(&Line::Closure(ClosureOut {
            execution: &ex.id,
            t: millis(t_close),
            status,
            committed: committed.as_deref(),
            artifact: assessable.then_some(&patch),
            version: assessable.then_some(&version),
            meta: None,
        }))?;

        if late_request && let Some((len, anchor)) = last_main {
            // A straggling sample of the last main request, recorded after closure.
            let mut late = ctx.clone();
            late.ids.truncate(len);
            late.spans.retain(|s| s.end <= len);
            late.anchor = anchor;
            let msg = self.main_message(ex, Action::Test);
            let out = self.model_output(ex, msg, false)?;
            self.request(ex, &late, &out, &Kind::default())?;
        }

        if fate == Fate::Dummy || ex.version == 0 {
            return Ok(());
        }
        let passed = ex.applied.len() == ex.task.edits.len();
        let score = if passed {
            60 + ex.rng.below(41) as u64
        } else {
            10 + ex.rng.below(41) as u64
        };
        let v = ex.version;
        let after = |ex: &mut Exec| {
            ex.t += ex.rng.secs(10, 60);
            ex.t
        };
        let late = ex.t0 + BUDGET_S * 1000 + 60_000;
        match fate {
            Fate::Scored | Fate::Timeout => {
                let t = after(ex);
                self.assessment(ex, t, v, Some(score), 1, None, None)?;
            }
            Fate::ValidZero => {
                let t = after(ex);
                self.assessment(ex, t, v, Some(0), 1, None, None)?;
            }
            Fate::FailedThenRetried => {
                let t = after(ex);
                self.assessment(
                    ex,
                    t,
                    v,
                    None,
                    1,
                    Some("evaluator container exited with code 137 (out of memory)"),
                    None,
                )?;
                let t = after(ex);
                self.assessment(ex, t, v, Some(score), 2, None, None)?;
            }
            Fate::ValidAfterBudget => {
                let t = after(ex);
                self.assessment(
                    ex,
                    t,
                    v,
                    None,
                    1,
                    Some("sandbox did not start: image pull timed out"),
                    None,
                )?;
                self.assessment(ex, late, v, Some(score), 2, None, None)?;
            }
            Fate::AllFailed => {
                for attempt in 1..=3 {
                    let t = after(ex);
                    self.assessment(
                        ex,
                        t,
                        v,
                        None,
                        attempt,
                        Some("test harness crashed: Broken pipe (os error 32)"),
                        None,
                    )?;
                }
            }
            Fate::Dummy | Fate::Open => {}
        }
        Ok(())
    }

    /// An assessment of artifact `patch` version `v`; `score` in hundredths, `None` = failed.
    #[allow(clippy::too_many_arguments)]
    fn assessment(
        &mut self,
        ex: &Exec,
        t: u64,
        v: u64,
        score: Option<u64>,
        attempt: u64,
        error: Option<&str>,
        branch: Option<u32>,
    ) -> Result<()> {
        let patch = json!("patch");
        let version = json!(v);
        let attempt = json!(attempt);
        let evaluator = json!(if branch.is_some() {
            "unit-tests"
        } else {
            "hidden-tests"
        });
        let error = error.map(|e| json!(e));
        let branch = branch.map(|b| format!("r{b}"));
        self.line(&Line::Assessment(AssessmentOut {
            execution: &ex.id,
            artifact: &patch,
            version: &version,
            status: if score.is_some() {
                Validity::Valid
            } else {
                Validity::Failed
            },
            score: score.map(|s| s as f64 / 100.0),
            t: millis(t),
            branch: branch.as_deref(),
            attempt: Some(&attempt),
            evaluator: Some(&evaluator),
            error: error.as_ref(),
            critique: None,
        }))
    }
}

/// Seconds from the simulator's millisecond clock.
fn millis(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// The main agent's steps: explore, test, read, maybe delegate, edit and re-test, answer.
/// Dummy executions never edit (the harness fails before any work); timeouts never answer.
fn plan(task: &Task, turns: usize, delegate: bool, fate: Fate, rng: &mut Rng) -> Vec<Action> {
    let budget = turns - 1;
    let mut seq = vec![Action::List, Action::Log, Action::Test, Action::Read(0)];
    if delegate {
        seq.push(Action::Delegate);
    }
    seq.push(Action::Grep);
    let nfiles = task.files.len();
    while seq.len() + 2 * task.edits.len() < budget {
        seq.push(match rng.below(5) {
            0 => Action::Read(rng.below(nfiles)),
            4 => Action::Log,
            1 => Action::ReadTwo(rng.below(nfiles), rng.below(nfiles)),
            2 => Action::Grep,
            _ => Action::Test,
        });
    }
    if fate != Fate::Dummy {
        for k in 0..task.edits.len() {
            seq.push(Action::Edit(k));
            seq.push(Action::Test);
        }
    }
    while seq.len() > budget {
        match seq.iter().rposition(|a| *a != Action::Edit(0)) {
            Some(pos) => {
                seq.remove(pos);
            }
            None => break,
        }
    }
    if fate != Fate::Timeout && fate != Fate::Dummy {
        seq.push(Action::Final);
    }
    seq
}

fn call_name(n: u32) -> String {
    format!("call_{n}")
}

fn call_number(name: &str) -> Result<u32> {
    name.strip_prefix("call_")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| eyre!("synth: bad call id {name}"))
}

/// `msg` with its tool calls renamed to the given call numbers.
fn renumber(msg: &Message, calls: &[(u32, usize, usize)]) -> Message {
    let mut m = msg.clone();
    for (c, &(n, _, _)) in m.tool_calls.iter_mut().zip(calls) {
        c.id = call_name(n);
    }
    m
}

/// The message as a harness holds it after parsing the model's output (arguments as objects).
fn reparse(msg: &Message) -> Message {
    let mut m = msg.clone();
    for c in &mut m.tool_calls {
        if let Value::String(s) = &c.arguments
            && let Ok(v) = serde_json::from_str(s)
        {
            c.arguments = v;
        }
    }
    m
}

/// The body of the first chat block opened by `header` (up to its `<|im_end|>`).
fn block_body<'a>(text: &'a str, header: &str) -> Result<&'a str> {
    let start = text
        .find(header)
        .map(|i| i + header.len())
        .ok_or_else(|| eyre!("synth: no {header:?} block"))?;
    let len = text[start..]
        .find("<|im_end|>")
        .ok_or_else(|| eyre!("synth: unterminated {header:?} block"))?;
    Ok(&text[start..start + len])
}
