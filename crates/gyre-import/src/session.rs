//! A conversation log reconstructed as requests (Claude Code, SWE-agent, OpenHands), written as
//! gyre/1 records marked `meta.reconstructed`, and checked against the log's own token counts.

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

use eyre::{Result, WrapErr};
use serde_json::{Map, Value, json};

use super::convo::{Output, Turn};
use super::write::{
    AssessmentOut, At, ClosureOut, ExecutionOut, RequestOut, ToolCallOut, Validity, spans_out,
};
use super::{Job, Progress};
use gyre_engine::record::{Actor, ClosureStatus, Purpose};
use gyre_text::Message;

/// One model response, to become one request.
#[derive(Clone, Debug)]
pub struct Response {
    /// Indices into [`Session::turns`]: the conversation the model saw (system first).
    pub context: Vec<u32>,
    /// The response as an assistant message.
    pub message: Message,
    /// Agent id (`main`, `sub-…`).
    pub agent: String,
    /// A compaction (summary) call.
    pub summary: bool,
    /// Request time (seconds).
    pub t: Option<f64>,
    /// Model name.
    pub model: Option<String>,
    /// Finish reason.
    pub finish: Option<String>,
    /// Request metadata (`reconstructed` is added).
    pub meta: Map<String, Value>,
    /// The input length the log itself reports for this call (its `usage`), in the provider's
    /// tokens, when logged: checked against the reconstructed context.
    pub usage_input: Option<u64>,
    /// The input line the response comes from (errors are reported there).
    pub line: u64,
}

/// How the session ended.
#[derive(Clone, Debug)]
pub struct Closure {
    /// Time (seconds).
    pub t: f64,
    /// How the session ended.
    pub status: ClosureStatus,
    /// Artifact (`Null` = no assessable work).
    pub artifact: Value,
    /// Version.
    pub version: Option<Value>,
    /// Extra fields (kept and ignored by the engine).
    pub meta: Map<String, Value>,
}

/// A whole reconstructed execution.
#[derive(Clone, Debug)]
pub struct Session {
    /// Execution id.
    pub execution: String,
    /// The input file (errors and `source_line` name it).
    pub file: PathBuf,
    /// The line where the session starts in it (0 for a whole file).
    pub line: u64,
    /// Start time (seconds).
    pub t: f64,
    /// Task description, when known.
    pub task: Option<String>,
    /// Execution metadata.
    pub meta: Map<String, Value>,
    /// Every turn any context uses.
    pub turns: Vec<Turn>,
    /// Tool definitions the harness sent with every call (rendered where the template puts
    /// them); empty when the log does not have them.
    pub tools: Vec<Value>,
    /// Responses in request order (a turn's `response` indexes this).
    pub responses: Vec<Response>,
    /// The closure.
    pub closure: Closure,
    /// GRPO group (the attempts of one SWE-agent retry run share one).
    pub group: Option<String>,
    /// Whether `--score` is this session's: false for the attempts a retry run did not choose
    /// (the score given is the chosen submission's).
    pub scored: bool,
}

/// Header metadata of a reconstructing import.
pub fn header_meta(source: &str, restore: bool, inputs: &[String]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("reconstructed".into(), Value::Bool(true));
    m.insert("source".into(), json!(source));
    m.insert(
        "importer".into(),
        json!(format!(
            "gyre {} import {source}",
            env!("CARGO_PKG_VERSION")
        )),
    );
    m.insert("inputs".into(), json!(inputs));
    m.insert("restore".into(), Value::Bool(restore));
    m.insert(
        "note".into(),
        json!(
            "reconstructed, not recorded: token ids come from re-tokenising the log through the \
             chat template; there are no log-probs"
        ),
    );
    m
}

/// Request ids: `r1`, `r2`, … in request order.
pub fn request_id(i: usize) -> String {
    format!("r{}", i + 1)
}

/// Writes a session's records: execution, one request per response (each context built,
/// written and dropped), the optional assessment and the closure.
pub fn records(s: Session, job: &mut Job) -> Result<()> {
    job.builder.forget();
    let start = At {
        file: &s.file,
        line: s.line,
    };
    let task = s.task.as_deref().map(Value::from);
    let group = s.group.as_deref().map(Value::from);
    job.out.execution(
        &ExecutionOut {
            execution: &s.execution,
            t: s.t,
            budget_s: None,
            group: group.as_ref(),
            task: task.as_ref(),
            meta: Some(&s.meta),
        },
        start,
    )?;
    let mut outputs: Vec<Option<Rc<Output>>> = Vec::with_capacity(s.responses.len());
    for (i, r) in s.responses.iter().enumerate() {
        let out = job
            .builder
            .output(&r.message)
            .wrap_err_with(|| format!("rendering response {} ({})", i + 1, request_id(i)))?;
        outputs.push(Some(Rc::new(out)));
    }
    let mut usage = UsageCheck::default();
    for (i, r) in s.responses.iter().enumerate() {
        (job.progress)(Progress::Requests {
            done: i,
            total: s.responses.len(),
        });
        let turns: Vec<&Turn> = r.context.iter().map(|&k| &s.turns[k as usize]).collect();
        let ctx = job
            .builder
            .context(&turns, &outputs, job.opts.restore, &s.tools)
            .wrap_err_with(|| format!("building the context of {}", request_id(i)))?;
        let out = outputs[i].as_ref().expect("every output is rendered");
        let id = request_id(i);
        if let Some(u) = r.usage_input {
            usage.add(&r.agent, r.summary, &id, ctx.tokens.len() as u64, u);
        }
        let mut meta = r.meta.clone();
        meta.insert("reconstructed".into(), Value::Bool(true));
        let spans = spans_out(&ctx.spans);
        let tool_calls: Vec<ToolCallOut> = out
            .tool_calls
            .iter()
            .map(|c| ToolCallOut {
                id: &c.id,
                name: Some(&c.name),
                start: c.start as u32,
                end: c.end as u32,
            })
            .collect();
        job.out.request(
            &RequestOut {
                execution: &s.execution,
                id: &id,
                agent: &r.agent,
                purpose: if r.summary {
                    Purpose::Summary
                } else {
                    Purpose::Task
                },
                actor: Actor::Policy,
                t: r.t,
                model: r.model.as_deref(),
                extends: None,
                input: &ctx.tokens,
                spans: &spans,
                output: &out.tokens,
                logprobs: None,
                tool_calls: &tool_calls,
                finish: r.finish.as_deref(),
                meta: Some(&meta),
            },
            At {
                file: &s.file,
                line: r.line,
            },
        )?;
    }
    (job.progress)(Progress::Requests {
        done: s.responses.len(),
        total: s.responses.len(),
    });
    let mut closure = s.closure.clone();
    for warning in usage.verdict(&s.execution, &mut closure.meta) {
        job.log.warn(warning);
    }
    if closure.artifact.is_null() && s.scored && job.opts.score.is_some() {
        job.log.warn(format!(
            "{}: --score ignored: the session has no assessable work (its closure has no \
             artifact)",
            s.execution
        ));
    }
    let score = job.opts.score.filter(|_| s.scored);
    write_end(job, &s.execution, &closure, score, start)
}

/// The closure (and, with a score, a valid assessment of the closure's artifact).
fn write_end(
    job: &mut Job,
    execution: &str,
    c: &Closure,
    score: Option<f64>,
    at: At,
) -> Result<()> {
    if let (Some(score), false) = (score, c.artifact.is_null()) {
        let version = c.version.clone().unwrap_or(Value::Null);
        let evaluator = Value::from("gyre import --score");
        job.out.assessment(
            &AssessmentOut {
                execution,
                artifact: &c.artifact,
                version: &version,
                status: Validity::Valid,
                score: Some(score),
                t: c.t,
                branch: None,
                attempt: None,
                evaluator: Some(&evaluator),
                error: None,
                critique: None,
            },
            at,
        )?;
    }
    job.out.closure(
        &ClosureOut {
            execution,
            t: c.t,
            status: c.status,
            committed: None,
            artifact: (!c.artifact.is_null()).then_some(&c.artifact),
            version: c.version.as_ref(),
            meta: (!c.meta.is_empty()).then_some(&c.meta),
        },
        at,
    )
}

/// A request is *short* when more than this share of the context the log's `usage` accounts for
/// (beyond the thread's first call, see [`UsageCheck`]) is missing from the reconstruction…
pub const USAGE_SHORT_SHARE: f64 = 0.5;
/// … and the missing part is at least this many tokens.
pub const USAGE_SHORT_TOKENS: u64 = 20_000;
/// A request is *long* when its reconstruction holds more than this many times the context
/// `usage` accounts for, and at least [`USAGE_SHORT_TOKENS`] more: context the model did not see
/// (a harness that condensed or truncated its history without logging the view it sent).
pub const USAGE_LONG_FACTOR: f64 = 2.0;

/// Reconstructed context lengths against the input lengths the log reports (`usage`).
///
/// The two never agree exactly: the provider's tokenizer is not the one gyre renders with, the
/// system prompt and tool definitions may be missing from the log (Claude Code), and hidden
/// thinking counts in `usage` but is not in the log. The unlogged part is estimated per agent
/// thread as the difference on the thread's first call and taken off every later call of the
/// thread; what is still missing beyond [`USAGE_SHORT_SHARE`] and [`USAGE_SHORT_TOKENS`] means
/// the reconstruction lost context (a broken `parentUuid` chain, lines missing from the log);
/// far more than `usage` ([`USAGE_LONG_FACTOR`]) means it holds context the model was not sent.
#[derive(Debug, Default)]
struct UsageCheck {
    /// Unlogged tokens per (agent, summary) thread, from its first call.
    baseline: HashMap<(String, bool), u64>,
    checked: u64,
    ratios: Vec<f64>,
    /// (request, reconstructed, usage, unlogged) of the short requests.
    short: Vec<(String, u64, u64, u64)>,
    /// The same for the long requests.
    long: Vec<(String, u64, u64, u64)>,
}

impl UsageCheck {
    fn add(&mut self, agent: &str, summary: bool, id: &str, reconstructed: u64, usage: u64) {
        let base = *self
            .baseline
            .entry((agent.to_owned(), summary))
            .or_insert_with(|| usage.saturating_sub(reconstructed));
        self.checked += 1;
        let expected = usage.saturating_sub(base);
        if expected > 0 {
            self.ratios.push(reconstructed as f64 / expected as f64);
        }
        let missing = expected.saturating_sub(reconstructed);
        if missing as f64 > USAGE_SHORT_SHARE * expected as f64 && missing >= USAGE_SHORT_TOKENS {
            self.short.push((id.to_owned(), reconstructed, usage, base));
        }
        let extra = reconstructed.saturating_sub(expected);
        if reconstructed as f64 > USAGE_LONG_FACTOR * expected as f64 && extra >= USAGE_SHORT_TOKENS
        {
            self.long.push((id.to_owned(), reconstructed, usage, base));
        }
    }

    /// Records the figures in the closure's `meta.usage_check`; a warning when requests are
    /// short or long.
    fn verdict(&self, execution: &str, meta: &mut Map<String, Value>) -> Vec<String> {
        if self.checked == 0 {
            return Vec::new();
        }
        let mut ratios = self.ratios.clone();
        ratios.sort_by(f64::total_cmp);
        let median = ratios.get(ratios.len() / 2).copied();
        meta.insert(
            "usage_check".into(),
            json!({
                "requests": self.checked,
                "short": self.short.len(),
                "long": self.long.len(),
                "median_ratio": median.map(|m| (m * 1000.0).round() / 1000.0),
            }),
        );
        let named = |list: &[(String, u64, u64, u64)]| {
            let ids: Vec<&str> = list.iter().take(5).map(|s| s.0.as_str()).collect();
            let more = if list.len() > ids.len() { ", …" } else { "" };
            format!("{}{more}", ids.join(", "))
        };
        let mut said = Vec::new();
        if let Some((id, rec, usage, base)) = self.short.first() {
            said.push(format!(
                "{execution}: {} of {} requests have far less context than the log's usage \
                 reports ({}): e.g. {id} has {rec} tokens reconstructed, usage reports {usage} \
                 input tokens of which ~{base} are the thread's unlogged prefix; the log may have \
                 lost lines",
                self.short.len(),
                self.checked,
                named(&self.short),
            ));
        }
        if let Some((id, rec, usage, base)) = self.long.first() {
            said.push(format!(
                "{execution}: {} of {} requests have far more context than the log's usage \
                 reports ({}): e.g. {id} has {rec} tokens reconstructed, usage reports {usage} \
                 input tokens (~{base} of them the thread's unlogged prefix); the harness sent a \
                 shorter context (condensed or truncated history) that the log does not hold",
                self.long.len(),
                self.checked,
                named(&self.long),
            ));
        }
        said
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_check_flags_lost_context_only() {
        let mut c = UsageCheck::default();
        // First call: 26k unlogged (system prompt and tools).
        c.add("main", false, "r1", 100, 26_100);
        // Tokenizer drift and hidden thinking: 40% missing, not flagged.
        c.add("main", false, "r2", 60_000, 126_000);
        // Small contexts: half missing but under 20k tokens.
        c.add("main", false, "r3", 3_000, 41_000);
        // Lost context: 100k reported, 5k reconstructed.
        c.add("main", false, "r4", 5_000, 131_000);
        let mut meta = Map::new();
        let w = c.verdict("s", &mut meta).remove(0);
        assert!(w.starts_with("s: 1 of 4 requests"), "{w}");
        assert!(w.contains("r4 has 5000 tokens"), "{w}");
        assert_eq!(meta["usage_check"]["short"], 1);
        assert_eq!(meta["usage_check"]["long"], 0);
    }

    #[test]
    fn usage_check_flags_context_the_model_was_not_sent() {
        let mut c = UsageCheck::default();
        c.add("main", false, "r1", 9_000, 10_000);
        // Tokenizer drift the other way: 60% more, not flagged.
        c.add("main", false, "r2", 48_000, 31_000);
        // Long but small: over twice, under 20k more.
        c.add("main", false, "r3", 30_000, 13_000);
        // After a condensation the harness sent 21k; the reconstruction kept 90k.
        c.add("main", false, "r4", 90_000, 22_000);
        let mut meta = Map::new();
        let w = c.verdict("s", &mut meta).remove(0);
        assert!(
            w.starts_with("s: 1 of 4 requests have far more context"),
            "{w}"
        );
        assert!(w.contains("r4 has 90000 tokens reconstructed"), "{w}");
        assert_eq!(meta["usage_check"]["long"], 1);
        assert_eq!(meta["usage_check"]["short"], 0);
    }
}
