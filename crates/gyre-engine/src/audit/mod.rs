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
pub mod gap;
pub mod layout;
mod twice;
pub mod weight;

pub use finding::{Evidence, Finding, Kind, Options, Scope, Source, Turns};
pub use layout::{Key, Layout, Place, SampleLayout};

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

/// What one execution's kinds found.
#[derive(Default)]
struct ExecFindings {
    findings: Vec<Finding>,
    trained: twice::Trained,
    gap: gap::GapAccumulator,
}

/// Every kind over one execution.
fn execution(scope: &Scope) -> ExecFindings {
    let (mut findings, trained) = twice::trained_twice(scope);
    let (gaps, gap) = gap::logprob_gap(scope);
    findings.extend(gaps);
    ExecFindings {
        findings,
        trained,
        gap,
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
                ExecFindings::default()
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
    for (i, e) in per_exec.into_iter().enumerate() {
        gaps.merge(&e.gap);
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
    Audit {
        counts: batch.trained_counts(),
        by_kind,
        duplication,
        gap,
        weights,
        notes,
        findings,
    }
}

/// Whether any execution of `batch` holds a sample.
fn counts_samples(batch: &Batch) -> bool {
    batch.executions.iter().any(|e| !e.trained.list.is_empty())
}

impl Audit {
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
