//! The audit (docs/audit.md): a trainer's `trained` samples (docs/format.md §9) checked against
//! the faithful tree of what the policy sampled. Each sample is laid on its execution's tree
//! ([`layout`]); each kind of finding is one function over an execution's layout, and the
//! executions run in parallel. Everything is linear in the tokens.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde::Serialize;
use serde::ser::SerializeMap;

use crate::load::Batch;
use crate::trained::TrainedCounts;
use gyre_format::named::Named;
use gyre_format::trained::LossAgg;

pub mod against;
mod finding;
mod fork;
pub mod gap;
pub mod layout;
mod mask;
mod retoken;
mod twice;
pub mod verdict;
pub mod weight;

pub use finding::{Evidence, Finding, Kind, Options, Scope, Source, Turns};
pub use fork::ForkCost;
pub use layout::{Key, Layout, Place, SampleLayout};
pub use mask::Untrained;

/// How many times over the samples train their distinct mask-on tokens.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Duplication {
    /// Over the batch: Σ mask-on tokens / Σ distinct mask-on tokens (1.0 = each trained once;
    /// 1.0 with no trained token).
    pub factor: f64,
    /// The largest execution factor.
    pub max: f64,
    /// The execution with the largest factor (its id), when any is above 1.
    pub max_execution: Option<String>,
}

/// What the audit found in a batch.
#[derive(Clone, Debug, Serialize)]
pub struct Audit {
    /// The counts of the batch's `trained` records (docs/format.md §9).
    #[serde(flatten)]
    pub counts: TrainedCounts,
    /// Findings per kind, every kind present.
    #[serde(serialize_with = "by_kind_json")]
    pub by_kind: BTreeMap<Kind, u64>,
    /// The duplication factor.
    pub duplication: Duplication,
    /// The log-prob gap on mask-on tokens (`None`: no mask-on token has both log-probs).
    pub gap: Option<gap::GapSummary>,
    /// Each execution's weight under the trainer's `loss_agg` (`None`: `unknown`).
    pub weights: Option<weight::WeightSummary>,
    /// `--against`: what the comparison with a recording counted (`None`: no recording given).
    pub against: Option<against::AgainstSummary>,
    /// What false forks cost.
    #[serde(serialize_with = "forks_json")]
    pub forks: ForkCost,
    /// Partings and rewrites the recording holds (not findings: see [`Recorded`]).
    pub recorded: Recorded,
    /// Policy tokens no sample trains that are not findings: the recording or the
    /// admission says why.
    #[serde(serialize_with = "untrained_json")]
    pub untrained: Untrained,
    /// Sample tokens off the recorded tree (literal ids no request holds).
    pub off_tree_tokens: u64,
    /// What was inferred or could not be checked, each said once.
    pub notes: Vec<String>,
    /// Every finding, ordered by (execution, sample, start, kind).
    #[serde(skip)]
    pub findings: Vec<Finding>,
}

fn by_kind_json<S: serde::Serializer>(m: &BTreeMap<Kind, u64>, s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(m.len()))?;
    for (k, v) in m {
        map.serialize_entry(k.name(), v)?;
    }
    map.end()
}

/// What a recording apart from the samples (see [`Scope::recorded_apart`]) holds: the harness
/// rewrote a context the policy was then called with, and the samples follow the rollout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Samples parting where the recorded requests part, and their recomputed prefixes.
    pub forks: ForkCost,
    /// Requests whose recorded context rewrites an earlier call's path.
    pub rewrites: u64,
}

impl Serialize for Recorded {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("fork_samples", &self.forks.samples)?;
        map.serialize_entry("fork_prefix_tokens", &self.forks.tokens)?;
        map.serialize_entry("rewrites", &self.rewrites)?;
        map.end()
    }
}

fn forks_json<S: serde::Serializer>(c: &ForkCost, s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(2))?;
    map.serialize_entry("extra_samples", &c.samples)?;
    map.serialize_entry("recomputed_tokens", &c.tokens)?;
    map.end()
}

fn untrained_json<S: serde::Serializer>(u: &Untrained, s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(3))?;
    map.serialize_entry("in_no_sample", &u.in_no_sample)?;
    map.serialize_entry("placeholder", &u.placeholder)?;
    map.serialize_entry("not_trainable", &u.not_trainable)?;
    map.end()
}

/// What one execution's kinds found.
#[derive(Default)]
struct ExecFindings {
    findings: Vec<Finding>,
    trained: twice::Trained,
    gap: gap::GapAccumulator,
    forks: ForkCost,
    recorded: Recorded,
    untrained: Untrained,
    off_tree: u64,
    unclassified: u64,
}

/// Every kind over one execution: one function per kind, each over the execution's layout.
fn execution(scope: &Scope) -> ExecFindings {
    let (mut findings, trained) = twice::trained_twice(scope);
    let (not_sampled, unclassified) = mask::trained_not_sampled(scope);
    let (not_trained, untrained) = mask::sampled_not_trained(scope);
    let (forks, cost, recorded_forks) = fork::false_fork(scope);
    let (rewritten, recorded_rewrites) = retoken::retokenized(scope);
    findings.extend(not_sampled);
    findings.extend(not_trained);
    findings.extend(forks);
    findings.extend(rewritten);
    let (gaps, gap) = gap::logprob_gap(scope);
    findings.extend(gaps);
    let off_tree = scope
        .layout
        .samples
        .iter()
        .map(|s| (s.keys.len() - s.leaves_tree as usize) as u64)
        .sum();
    ExecFindings {
        findings,
        trained,
        gap,
        forks: cost,
        recorded: Recorded {
            forks: recorded_forks,
            rewrites: recorded_rewrites,
        },
        untrained,
        off_tree,
        unclassified,
    }
}

/// Audits every execution of `batch` holding samples (in parallel; each on its own).
pub fn audit(batch: &Batch, options: &Options, turns: Option<&dyn Turns>) -> Audit {
    audit_with_progress(batch, options, turns, &|_, _| {})
}

/// [`audit`], reporting `(executions done, executions in all)` as it goes.
pub fn audit_with_progress(
    batch: &Batch,
    options: &Options,
    turns: Option<&dyn Turns>,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Audit {
    let total = batch.executions.len() as u64;
    let done = AtomicU64::new(0);
    let per_exec: Vec<ExecFindings> = batch
        .executions
        .par_iter()
        .enumerate()
        .map(|(i, exec)| {
            let found = if exec.trained.list.is_empty() {
                // No sample holds any of its policy tokens.
                let layout = Layout::of(exec);
                let (_, untrained) = mask::sampled_not_trained(&Scope {
                    exec,
                    index: i as u32,
                    layout: &layout,
                    options,
                    turns,
                });
                ExecFindings {
                    untrained,
                    ..ExecFindings::default()
                }
            } else {
                let layout = Layout::of(exec);
                execution(&Scope {
                    exec,
                    index: i as u32,
                    layout: &layout,
                    options,
                    turns,
                })
            };
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            found
        })
        .collect();
    let mut by_kind: BTreeMap<Kind, u64> = Kind::ALL.iter().map(|&k| (k, 0)).collect();
    let mut findings = Vec::new();
    let (mut tokens, mut distinct) = (0u64, 0u64);
    let mut max: Option<(f64, usize)> = None;
    let mut gaps = gap::GapAccumulator::default();
    let (mut forks, mut untrained) = (ForkCost::default(), Untrained::default());
    let mut recorded = Recorded::default();
    let (mut off_tree_tokens, mut unclassified) = (0u64, 0u64);
    for (i, e) in per_exec.into_iter().enumerate() {
        gaps.merge(&e.gap);
        forks.samples += e.forks.samples;
        forks.tokens += e.forks.tokens;
        recorded.forks.samples += e.recorded.forks.samples;
        recorded.forks.tokens += e.recorded.forks.tokens;
        recorded.rewrites += e.recorded.rewrites;
        untrained.in_no_sample += e.untrained.in_no_sample;
        untrained.placeholder += e.untrained.placeholder;
        untrained.not_trainable += e.untrained.not_trainable;
        off_tree_tokens += e.off_tree;
        unclassified += e.unclassified;
        tokens += e.trained.tokens;
        distinct += e.trained.distinct;
        if e.trained.distinct > 0 {
            let f = e.trained.tokens as f64 / e.trained.distinct as f64;
            if max.is_none_or(|(m, _)| f > m) {
                max = Some((f, i));
            }
        }
        findings.extend(e.findings);
    }
    let trainer = batch.trainer();
    let loss_agg = trainer.as_ref().map_or(LossAgg::Unknown, |t| t.loss_agg);
    let weights = weight::weights(&batch.executions, loss_agg, options.weight_bound);
    if let Some(w) = &weights {
        findings.extend(w.findings(&batch.executions));
    }
    findings.sort_by_key(Finding::order_key);
    for f in &findings {
        *by_kind.entry(f.kind).or_default() += 1;
    }
    let ratio = |t: u64, d: u64| if d == 0 { 1.0 } else { t as f64 / d as f64 };
    let duplication = Duplication {
        factor: ratio(tokens, distinct),
        max: max.map_or(1.0, |(m, _)| m),
        max_execution: max
            .filter(|(m, _)| *m > 1.0)
            .map(|(_, i)| batch.executions[i].id.clone()),
    };
    let mut notes = Vec::new();
    let gap = gaps.summary(gap::GapBound {
        nats: options.gap_bound,
        ratio: options.ratio_bounds,
    });
    if gap.is_some() {
        notes.push(format!("log-prob gap: computed on {} only", gap::SCOPE));
    }
    if weights.is_none() && loss_agg == LossAgg::Unknown && counts_samples(batch) {
        notes.push(
            "weights: the trainer's loss_agg is unknown, so no execution weight was computed"
                .to_owned(),
        );
    }
    if let Some(t) = trainer {
        notes.extend(t.inferred);
    }
    if unclassified > 0 {
        let how = if turns.is_some() {
            "the tokenizer's turns do not place them outside an assistant turn, and their \
             behaviour log-probs (present and non-zero, or absent from the whole sample) do not \
             tell"
        } else {
            "no tokenizer is known for their turn structure (--tokenizer), and their behaviour \
             log-probs (present and non-zero, or absent from the whole sample) do not tell"
        };
        notes.push(format!(
            "{} mask-on {} off the recorded tree could not be judged sampled or not: {how}",
            unclassified,
            if unclassified == 1 { "token" } else { "tokens" }
        ));
    }
    Audit {
        counts: batch.trained_counts(),
        by_kind,
        duplication,
        gap,
        weights,
        against: None,
        forks,
        recorded,
        untrained,
        off_tree_tokens,
        notes,
        findings,
    }
}

/// Whether any execution of `batch` holds a sample.
fn counts_samples(batch: &Batch) -> bool {
    batch.executions.iter().any(|e| !e.trained.list.is_empty())
}

impl Audit {
    /// Adds the comparison with a recording (`--against`): its findings (counted in
    /// `by_kind`, in order with the rest), its counts and its notes.
    pub fn with_against(&mut self, a: against::Against) {
        for f in &a.findings {
            *self.by_kind.entry(f.kind).or_default() += 1;
        }
        self.findings.extend(a.findings);
        self.findings.sort_by_key(Finding::order_key);
        self.notes.extend(a.notes);
        self.against = Some(a.summary);
    }

    /// Whether there is no finding.
    pub fn clean(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Where each sample of `batch` was in its dump (see [`Source`]): per execution, per sample.
pub fn sources(batch: &Batch) -> Vec<Vec<Source>> {
    // Position among its file's trained records, in line order.
    let mut lines: HashMap<u32, Vec<u64>> = HashMap::new();
    for e in &batch.executions {
        for s in &e.trained.list {
            if s.record.source.is_none() {
                lines.entry(s.at.file).or_default().push(s.at.line);
            }
        }
    }
    for l in lines.values_mut() {
        l.sort_unstable();
    }
    batch
        .executions
        .iter()
        .map(|e| {
            e.trained
                .list
                .iter()
                .map(|s| match &s.record.source {
                    Some(src) => Source {
                        file: src.file.clone(),
                        index: src.index,
                    },
                    None => Source {
                        file: batch
                            .files
                            .get(s.at.file as usize)
                            .map_or_else(String::new, |p| p.display().to_string()),
                        index: lines
                            .get(&s.at.file)
                            .map_or(0, |l| l.partition_point(|&x| x < s.at.line) as u64),
                    },
                })
                .collect()
        })
        .collect()
}
