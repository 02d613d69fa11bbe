//! What the audit says and what it is told: the kinds of finding, a finding, the options and
//! the tokenizer's turn structure, shared by every kind's module.

use gyre_format::named::Named;
use serde::Serialize;

use super::layout::Layout;
use crate::execution::Execution;

/// A kind of finding (docs/audit.md), spelled in `--json` as its [`Named::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A mask-on token the policy did not sample.
    TrainedNotSampled,
    /// A policy-sampled token with the mask off in every sample holding it.
    SampledNotTrained,
    /// A token with the mask on in more than one sample of its execution.
    TrainedTwice,
    /// Two samples that part inside an earlier policy output or at a re-rendered turn.
    FalseFork,
    /// A context that rewrites what the previous call saw or sampled, and goes on as its
    /// continuation.
    Retokenized,
    /// Trainer and behaviour log-probs of a mask-on token too far apart.
    LogprobGap,
    /// Executions weighing far from equally under the trainer's loss aggregation.
    WeightSpread,
    /// `--against`: a behaviour log-prob in the dump that differs from what the server returned.
    BehaviourMismatch,
}

impl Named for Kind {
    const ALL: &'static [Self] = &[
        Kind::TrainedNotSampled,
        Kind::SampledNotTrained,
        Kind::TrainedTwice,
        Kind::FalseFork,
        Kind::Retokenized,
        Kind::LogprobGap,
        Kind::WeightSpread,
        Kind::BehaviourMismatch,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::TrainedNotSampled => "trained_not_sampled",
            Kind::SampledNotTrained => "sampled_not_trained",
            Kind::TrainedTwice => "trained_twice",
            Kind::FalseFork => "false_fork",
            Kind::Retokenized => "retokenized",
            Kind::LogprobGap => "logprob_gap",
            Kind::WeightSpread => "weight_spread",
            Kind::BehaviourMismatch => "behaviour_mismatch",
        }
    }

    fn help(self) -> &'static str {
        match self {
            Kind::TrainedNotSampled => "a mask-on token the policy did not sample",
            Kind::SampledNotTrained => "a policy-sampled token no sample trains",
            Kind::TrainedTwice => "a token trained in more than one sample",
            Kind::FalseFork => "samples that part inside an earlier output or re-rendered turn",
            Kind::Retokenized => "a context that rewrites the previous call's tokens",
            Kind::LogprobGap => "trainer − behaviour log-prob beyond the bound",
            Kind::WeightSpread => "executions weighing unequally under the loss",
            Kind::BehaviourMismatch => "a dump's behaviour log-prob differs from the server's",
        }
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Why a mask-on token is said not to be sampled (`trained_not_sampled`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Evidence {
    /// The recording says so: a context token (with its span source), or the output of a
    /// request that is not a trainable policy output.
    Spans,
    /// The tokenizer's turn structure: the token lies outside an assistant turn.
    Turns,
    /// The behaviour log-prob: missing, or 0.0 throughout a run too long or too whole to be
    /// a confident sample.
    Logprob,
}

impl Named for Evidence {
    const ALL: &'static [Self] = &[Evidence::Spans, Evidence::Turns, Evidence::Logprob];

    fn name(self) -> &'static str {
        match self {
            Evidence::Spans => "spans",
            Evidence::Turns => "turns",
            Evidence::Logprob => "logprob",
        }
    }
}

impl Serialize for Evidence {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Where a sample was in its dump: the record's `source`, else the gyre/1 file it is in (as
/// given) and its 0-based position among that file's `trained` records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The file.
    pub file: String,
    /// The position in it.
    pub index: u64,
}

/// One finding: a kind, where (execution, sample, token range) and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// The kind.
    pub kind: Kind,
    /// Index into `batch.executions`.
    pub execution: u32,
    /// Index into the execution's `trained.list` (`None`: no sample holds the range).
    pub sample: Option<u32>,
    /// First position of the range: in the sample's full token sequence (prompt + response,
    /// no padding), or in `request`'s path when `sample` is `None`.
    pub start: u32,
    /// Exclusive end of the range.
    pub end: u32,
    /// The request (index) the range lies in, when one does.
    pub request: Option<u32>,
    /// `trained_not_sampled`: what says the tokens were not sampled.
    pub evidence: Option<Evidence>,
    /// One sentence in plain words; ids as numbers (callers sanitise it).
    pub detail: String,
    /// The earlier sample of a pair (`trained_twice`, `false_fork`).
    pub other: Option<u32>,
    /// The kind's figure (duplication, prefix tokens recomputed, …).
    pub value: Option<f64>,
}

impl Finding {
    /// A finding of `kind` on positions `start..end` of sample `sample` of execution
    /// `execution`, with the rest unset.
    pub fn new(kind: Kind, execution: u32, sample: Option<u32>, start: u32, end: u32) -> Self {
        Finding {
            kind,
            execution,
            sample,
            start,
            end,
            request: None,
            evidence: None,
            detail: String::new(),
            other: None,
            value: None,
        }
    }

    /// The order findings are listed in: execution, sample, start, kind.
    pub fn order_key(&self) -> (u32, Option<u32>, u32, Kind) {
        (self.execution, self.sample, self.start, self.kind)
    }
}

/// The bounds the audit judges by.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// `logprob_gap`: |trainer − behaviour| beyond this many nats is a finding.
    pub gap_bound: f64,
    /// `logprob_gap`: an importance ratio outside `[lo, hi]` is a finding.
    pub ratio_bounds: (f64, f64),
    /// `weight_spread`: a heaviest/lightest execution weight ratio beyond this is a finding.
    pub weight_bound: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            gap_bound: 1.0,
            ratio_bounds: (0.5, 2.0),
            weight_bound: 2.0,
        }
    }
}

/// The turn structure of a tokenizer's chat template. The engine never names a tokenizer:
/// `gyre-text` implements this for one, and the caller hands it in.
pub trait Turns: Sync {
    /// Per token of `tokens`: `Some(true)` inside an assistant turn (the model's to write),
    /// `Some(false)` inside another role's turn or the template's scaffolding, `None` unknown.
    fn assistant(&self, tokens: &[u32]) -> Vec<Option<bool>>;
}

/// One execution as every kind sees it.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    /// The execution.
    pub exec: &'a Execution,
    /// Its index in the batch.
    pub index: u32,
    /// Its samples on its tree.
    pub layout: &'a Layout,
    /// The bounds.
    pub options: &'a Options,
    /// The tokenizer's turn structure, when a tokenizer is known.
    pub turns: Option<&'a dyn Turns>,
}

/// Maximal runs of consecutive positions `0..n` for which `f` gives a value, as
/// `(start, end, value)`; a run ends where the value changes.
pub fn runs<T: PartialEq>(n: usize, mut f: impl FnMut(usize) -> Option<T>) -> Vec<(u32, u32, T)> {
    let mut out: Vec<(u32, u32, T)> = Vec::new();
    for p in 0..n {
        let Some(v) = f(p) else { continue };
        match out.last_mut() {
            Some((_, end, last)) if *end == p as u32 && *last == v => *end += 1,
            _ => out.push((p as u32, p as u32 + 1, v)),
        }
    }
    out
}

/// Up to 16 ids, then `…`: `[151644, 872, …]`.
pub fn ids_text(ids: &[u32]) -> String {
    const SHOWN: usize = 16;
    let mut s: Vec<String> = ids.iter().take(SHOWN).map(u32::to_string).collect();
    if ids.len() > SHOWN {
        s.push("…".into());
    }
    format!("[{}]", s.join(", "))
}

/// The stretch of `a` that differs from `b` (both starting where two token sequences part):
/// up to where `a` re-syncs with `b` (the first 4 tokens of `a` found together in `b`), e.g.
/// the ids a retokenisation changed. When `a` re-syncs at once (`b` holds tokens `a` left
/// out, e.g. a `<think>` block a template dropped), the stretch is the rewritten copy: as
/// long as the two then go on in step. Returns its length (at least 1, at most `a.len()`
/// unless `a` is empty) and whether `a` re-synced. Linear: one pass over each, through a map
/// of `b`'s 4-grams (of its first 64k tokens).
pub fn stretch(a: &[u32], b: &[u32]) -> (usize, bool) {
    const GRAM: usize = 4;
    const WINDOW: usize = 1 << 16;
    let b = &b[..b.len().min(WINDOW)];
    let mut grams: rustc_hash::FxHashMap<&[u32], usize> = Default::default();
    for (j, w) in b.windows(GRAM).enumerate() {
        grams.entry(w).or_insert(j);
    }
    let found = a
        .windows(GRAM)
        .enumerate()
        .find_map(|(q, w)| grams.get(w).map(|&j| (q, j)));
    match found {
        Some((q, j)) => {
            let step = a[q..]
                .iter()
                .zip(&b[j..])
                .take_while(|(x, y)| x == y)
                .count();
            let len = if q == 0 { step } else { q };
            (len.max(1), true)
        }
        None => (a.len().max(1), false),
    }
}

impl Scope<'_> {
    /// Whether the execution's requests come from a recording apart from its samples (no
    /// request is in a file that holds one of its samples): `gyre record`, `gyre synth` or a
    /// harness's log beside a trainer's rows. The requests then say what the policy was
    /// called with, and samples that part where they part follow the rollout. In a trainer's
    /// import the requests are rebuilt from the trainer's own rows, in the same file, and
    /// carry its rendering.
    pub fn recorded_apart(&self) -> bool {
        let samples: std::collections::HashSet<u32> =
            self.exec.trained.list.iter().map(|s| s.at.file).collect();
        self.exec
            .requests
            .iter()
            .all(|r| !samples.contains(&r.at.file))
    }
}
