//! A conversation log reconstructed as requests (Claude Code, SWE-agent, OpenHands), written as
//! gyre/1 records marked `meta.reconstructed`, and checked against the log's own token counts.

use std::collections::{BTreeMap, HashMap};
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
    /// Why its output is not a target although the policy wrote it (the log does not hold
    /// all of it: hidden thinking); written as the request's `not_trainable`.
    pub not_trainable: Option<String>,
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
    /// The output length the log reports (`usage`), in the provider's tokens, when logged: with
    /// hidden thinking, what this response adds to later contexts beyond its visible output.
    pub usage_output: Option<u64>,
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

/// What a source knows beyond a [`Session`]: which responses an evaluator sampled, and the
/// assessments the log itself holds.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// By response index: sampled by an evaluator (a scorer's model), not the policy.
    pub evaluator: Vec<bool>,
    /// The log's own assessments of the closure's artifact, in the log's order (the first is
    /// the reward, docs/format.md §4).
    pub assessments: Vec<Logged>,
}

/// An assessment the log holds (an Inspect AI score).
#[derive(Clone, Debug)]
pub struct Logged {
    /// The reward.
    pub score: f64,
    /// Who assessed (`inspect scorer match`).
    pub evaluator: String,
    /// Time (seconds).
    pub t: f64,
    /// The scorer's explanation, when logged.
    pub critique: Option<String>,
}

/// Writes a session's records: execution, one request per response (each context built,
/// written and dropped), the optional assessment and the closure.
pub fn records(s: Session, job: &mut Job) -> Result<()> {
    records_with(s, &Extras::default(), job)
}

/// [`records`] with what the source knows beyond the session.
pub fn records_with(s: Session, extras: &Extras, job: &mut Job) -> Result<()> {
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
    // Hidden thinking the provider counts in later contexts: a response's own output tokens
    // beyond what the log holds of it.
    let hidden: Vec<u64> = s
        .responses
        .iter()
        .zip(&outputs)
        .map(|(r, o)| match (&r.not_trainable, r.usage_output, o) {
            (Some(_), Some(u), Some(o)) => u.saturating_sub(o.tokens.len() as u64),
            _ => 0,
        })
        .collect();
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
            let (thought, images) = turns.iter().fold((0, 0), |(h, m), t| {
                let h = h + t
                    .response
                    .map_or(0, |j| hidden.get(j).copied().unwrap_or(0));
                (h, m + u64::from(t.images) * USAGE_IMAGE_TOKENS)
            });
            usage.add(
                &r.agent,
                r.summary,
                &id,
                r.model.as_deref(),
                ctx.tokens.len() as u64,
                u,
                thought,
                images,
            );
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
                purpose: if r.summary {
                    Purpose::Summary
                } else {
                    Purpose::Task
                },
                actor: if extras.evaluator.get(i).copied().unwrap_or(false) {
                    Actor::Evaluator
                } else {
                    Actor::Policy
                },
                not_trainable: r.not_trainable.as_deref(),
                t: r.t,
                model: r.model.as_deref(),
                tool_calls: &tool_calls,
                finish: r.finish.as_deref(),
                meta: Some(&meta),
                ..RequestOut::new(
                    &s.execution,
                    &id,
                    &r.agent,
                    &ctx.tokens,
                    &spans,
                    &out.tokens,
                )
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
        job.log.warn_important(warning);
    }
    if closure.artifact.is_null() && s.scored && job.opts.score.is_some() {
        job.log.warn(format!(
            "{}: --score ignored: the session has no assessable work (its closure has no \
             artifact)",
            s.execution
        ));
    }
    let score = job.opts.score.filter(|_| s.scored);
    write_end(job, &s.execution, &closure, score, SCORE_EVALUATOR, start)?;
    write_logged(job, &s.execution, &closure, &extras.assessments, start)
}

/// The log's own assessments of the closure's artifact, after the closure.
fn write_logged(
    job: &mut Job,
    execution: &str,
    c: &Closure,
    logged: &[Logged],
    at: At,
) -> Result<()> {
    if c.artifact.is_null() {
        return Ok(());
    }
    let version = c.version.clone().unwrap_or(Value::Null);
    for a in logged {
        let evaluator = Value::from(a.evaluator.as_str());
        let critique = a.critique.as_deref().map(Value::from);
        job.out.assessment(
            &AssessmentOut {
                execution,
                artifact: &c.artifact,
                version: &version,
                status: Validity::Valid,
                score: Some(a.score),
                t: a.t.max(c.t),
                branch: None,
                attempt: None,
                evaluator: Some(&evaluator),
                error: None,
                critique: critique.as_ref(),
                meta: None,
            },
            at,
        )?;
    }
    Ok(())
}

/// The evaluator a `--score` assessment names.
pub(crate) const SCORE_EVALUATOR: &str = "gyre import --score";

/// The closure (and, with a score, a valid assessment of the closure's artifact by `evaluator`).
pub(crate) fn write_end(
    job: &mut Job,
    execution: &str,
    c: &Closure,
    score: Option<f64>,
    evaluator: &str,
    at: At,
) -> Result<()> {
    if let (Some(score), false) = (score, c.artifact.is_null()) {
        let version = c.version.clone().unwrap_or(Value::Null);
        let evaluator = Value::from(evaluator);
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
                meta: None,
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
/// (beyond the thread's first call and what the log is known not to hold, scaled by the
/// session's token ratio, see [`UsageCheck`]) is missing from the reconstruction…
pub const USAGE_SHORT_SHARE: f64 = 0.5;
/// … and the missing part is at least this many tokens.
pub const USAGE_SHORT_TOKENS: u64 = 20_000;
/// A request is *long* when its reconstruction holds more than this many times the context
/// `usage` accounts for, and at least [`USAGE_SHORT_TOKENS`] more: context the model did not see
/// (a harness that condensed or truncated its history without logging the view it sent).
pub const USAGE_LONG_FACTOR: f64 = 2.0;
/// What the provider counts for an image the log shows as `[image]` (Anthropic: about
/// width × height / 750, at most ~1,600 for the sizes Claude Code sends): the upper figure, so
/// a context with images is never called short for them.
pub const USAGE_IMAGE_TOKENS: u64 = 1_600;
/// The token ratio (reconstructed / provider tokens) a model family's requests are scaled by
/// is their median, kept within these bounds: below, the provider's tokenizer would be far
/// coarser than any seen (a session whose contexts are mostly lost must still be flagged).
pub const USAGE_RATIO_BOUNDS: (f64, f64) = (0.5, 1.0);

/// One request's figures for the usage check.
#[derive(Debug)]
struct UsageRow {
    id: String,
    family: String,
    reconstructed: u64,
    usage: u64,
    /// The thread's unlogged prefix (from its first call).
    base: u64,
    /// Tokens the provider counted that the log is known not to hold (hidden thinking of
    /// earlier responses in the context, images).
    known: u64,
    /// Of `known`: hidden thinking, and images.
    hidden: u64,
    images: u64,
}

impl UsageRow {
    /// What `usage` says the reconstruction should hold, in provider tokens.
    fn expected(&self) -> u64 {
        self.usage.saturating_sub(self.base + self.known)
    }
}

/// Reconstructed context lengths against the input lengths the log reports (`usage`).
///
/// The two never agree exactly: the provider's tokenizer is not the one gyre renders with, the
/// system prompt and tool definitions may be missing from the log (Claude Code), and hidden
/// thinking counts in `usage` but is not in the log. What is known to be missing is taken off
/// each request: the unlogged prefix of its agent thread (the difference on the thread's first
/// call), the hidden thinking of the earlier responses in its context (each response's own
/// `usage` output tokens less its reconstructed output) and its images
/// ([`USAGE_IMAGE_TOKENS`] each). The rest is scaled by the median token ratio of the
/// requests of the same model family ([`USAGE_RATIO_BOUNDS`]); what is then still missing
/// beyond [`USAGE_SHORT_SHARE`] and [`USAGE_SHORT_TOKENS`] means the reconstruction lost
/// context (a broken `parentUuid` chain, lines missing from the log); far more than `usage`
/// ([`USAGE_LONG_FACTOR`]) means it holds context the model was not sent.
#[derive(Debug, Default)]
struct UsageCheck {
    /// Unlogged tokens per (agent, summary) thread, from its first call.
    baseline: HashMap<(String, bool), u64>,
    rows: Vec<UsageRow>,
}

/// A model's family: its name without a trailing date (`claude-opus-4-5-20251101` →
/// `claude-opus-4-5`).
fn family(model: Option<&str>) -> String {
    let m = model.unwrap_or("");
    match m.rsplit_once('-') {
        Some((head, date)) if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) => {
            head.to_owned()
        }
        _ => m.to_owned(),
    }
}

impl UsageCheck {
    /// Adds request `id` of `agent`'s thread: `reconstructed` tokens against `usage`, of which
    /// `hidden` (thinking) and `images` (tokens) are known not to be in the log.
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        agent: &str,
        summary: bool,
        id: &str,
        model: Option<&str>,
        reconstructed: u64,
        usage: u64,
        hidden: u64,
        images: u64,
    ) {
        let known = hidden + images;
        let base = *self
            .baseline
            .entry((agent.to_owned(), summary))
            .or_insert_with(|| usage.saturating_sub(reconstructed + known));
        self.rows.push(UsageRow {
            id: id.to_owned(),
            family: family(model),
            reconstructed,
            usage,
            base,
            known,
            hidden,
            images,
        });
    }

    /// Records the figures in the closure's `meta.usage_check`; a warning when requests are
    /// short or long, worded by what explains them.
    fn verdict(&self, execution: &str, meta: &mut Map<String, Value>) -> Vec<String> {
        if self.rows.is_empty() {
            return Vec::new();
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied()
        };
        let ratio = |r: &UsageRow| {
            let e = r.expected();
            (e > 0).then(|| r.reconstructed as f64 / e as f64)
        };
        // Ordered: the closure's `ratio_by_family` is written in this order, and the same input
        // must give the same bytes.
        let mut by_family: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for r in &self.rows {
            if let Some(x) = ratio(r) {
                by_family.entry(&r.family).or_default().push(x);
            }
        }
        let scale: BTreeMap<&str, f64> = by_family
            .into_iter()
            .filter_map(|(f, v)| {
                let (lo, hi) = USAGE_RATIO_BOUNDS;
                median(v).map(|m| (f, m.clamp(lo, hi)))
            })
            .collect();
        let mut short: Vec<&UsageRow> = Vec::new();
        let mut long: Vec<&UsageRow> = Vec::new();
        for r in &self.rows {
            let s = scale.get(r.family.as_str()).copied().unwrap_or(1.0);
            let expected = r.expected() as f64 * s;
            let missing = expected - r.reconstructed as f64;
            if missing > USAGE_SHORT_SHARE * expected && missing >= USAGE_SHORT_TOKENS as f64 {
                short.push(r);
            }
            // Long is judged against everything `usage` counts (known-missing parts included):
            // a model that drops earlier thinking from its context must not look condensed.
            let sent = r.usage.saturating_sub(r.base);
            let extra = r.reconstructed.saturating_sub(sent);
            if r.reconstructed as f64 > USAGE_LONG_FACTOR * sent as f64
                && extra >= USAGE_SHORT_TOKENS
            {
                long.push(r);
            }
        }
        let families: Map<String, Value> = scale
            .iter()
            .map(|(f, s)| ((*f).to_owned(), json!((s * 1000.0).round() / 1000.0)))
            .collect();
        let hidden: u64 = self.rows.iter().map(|r| r.hidden).max().unwrap_or(0);
        let images: u64 = self.rows.iter().map(|r| r.images).max().unwrap_or(0);
        meta.insert(
            "usage_check".into(),
            json!({
                "requests": self.rows.len(),
                "short": short.len(),
                "long": long.len(),
                "median_ratio": median(self.rows.iter().filter_map(ratio).collect())
                    .map(|m| (m * 1000.0).round() / 1000.0),
                "ratio_by_family": families,
                "max_hidden_thinking": hidden,
                "max_image_tokens": images,
            }),
        );
        let named = |list: &[&UsageRow]| {
            let ids: Vec<&str> = list.iter().take(5).map(|s| s.id.as_str()).collect();
            let more = if list.len() > ids.len() { ", …" } else { "" };
            format!("{}{more}", ids.join(", "))
        };
        let mut said = Vec::new();
        if let Some(r) = short.first() {
            let mut allowed = vec![format!("~{} the thread's unlogged prefix", r.base)];
            if r.hidden > 0 {
                allowed.push(format!("~{} hidden thinking", r.hidden));
            }
            if r.images > 0 {
                allowed.push(format!("~{} images", r.images));
            }
            said.push(format!(
                "{execution}: {} of {} requests have far less context than the log's usage \
                 reports ({}): e.g. {} has {} tokens reconstructed, usage reports {} input tokens \
                 ({} of them; token ratio {:.2}); what is missing is none of these: the log may \
                 have lost lines (a broken parentUuid chain, a file not copied)",
                short.len(),
                self.rows.len(),
                named(&short),
                r.id,
                r.reconstructed,
                r.usage,
                allowed.join(", "),
                scale.get(r.family.as_str()).copied().unwrap_or(1.0),
            ));
        }
        if let Some(r) = long.first() {
            said.push(format!(
                "{execution}: {} of {} requests have far more context than the log's usage \
                 reports ({}): e.g. {} has {} tokens reconstructed, usage reports {} input tokens \
                 (~{} of them the thread's unlogged prefix); the harness sent a shorter context \
                 (condensed or truncated history) that the log does not hold",
                long.len(),
                self.rows.len(),
                named(&long),
                r.id,
                r.reconstructed,
                r.usage,
                r.base,
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
        c.add("main", false, "r1", None, 100, 26_100, 0, 0);
        // Tokenizer drift and hidden thinking: 40% missing, not flagged.
        c.add("main", false, "r2", None, 60_000, 126_000, 0, 0);
        // Small contexts: half missing but under 20k tokens.
        c.add("main", false, "r3", None, 3_000, 41_000, 0, 0);
        // Lost context: 100k reported, 5k reconstructed.
        c.add("main", false, "r4", None, 5_000, 131_000, 0, 0);
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
        c.add("main", false, "r1", None, 9_000, 10_000, 0, 0);
        // Tokenizer drift the other way: 60% more, not flagged.
        c.add("main", false, "r2", None, 48_000, 31_000, 0, 0);
        // Long but small: over twice, under 20k more.
        c.add("main", false, "r3", None, 30_000, 13_000, 0, 0);
        // After a condensation the harness sent 21k; the reconstruction kept 90k.
        c.add("main", false, "r4", None, 90_000, 22_000, 0, 0);
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
