//! Admission swept over settings (`gyre sweep`): what J_max, the seed and the priority do to a
//! batch's cost (forward-backward tokens: the sum of exported row lengths) and coverage
//! (targets / trainable tokens of the executions that count in `B`).
//!
//! The batch is parsed once; each execution is scored and prepared once ([`Prepared`]). Under
//! a given seed and priority, the draws with a cap `J_max = j` are the first `j` draws of the
//! uncapped loop (the cap only stops the loop), so one uncapped run per (execution, seed)
//! gives the figures of every J_max. Executions run in parallel.

use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde::Serialize;

use super::admit::{Class, Drawn, Prepared, Settings, drawable_nodes, trainable_node};
use super::execution::Execution;
use super::load::Batch;
use super::row_prefix;
use super::score::{self, Exclusion, Outcome};
use crate::rows::dummy_leaf;

/// What to sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepOptions {
    /// Caps to compare; 0 = uncapped.
    pub jmax: Vec<u32>,
    /// First seed.
    pub seed: u64,
    /// Number of seeds: `seed..seed + seeds`.
    pub seeds: u64,
    /// Class priority, highest first.
    pub priority: Vec<Class>,
}

/// The figures of one admission (one execution or a whole batch, one setting).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Figures {
    /// Exported rows (draws, plus one placeholder per dummy).
    pub rows: u64,
    /// Forward-backward tokens: the sum of the rows' lengths.
    pub tokens: u64,
    /// Forward-backward tokens as a tree pack (`gyre.trainers.tree`): the prefix tree of the
    /// rows with targets. For a batch, shared prefixes across executions count once too.
    pub tree_tokens: u64,
    /// Targets (Σ L_i).
    pub targets: u64,
    /// Trainable tokens of scored executions left out because J_max stopped the draws.
    pub left_out_jmax: u64,
    /// Trainable tokens of scored executions only candidates of unlisted classes reach.
    pub left_out_class: u64,
}

impl Figures {
    fn add(&mut self, o: &Figures) {
        self.rows += o.rows;
        self.tokens += o.tokens;
        self.tree_tokens += o.tree_tokens;
        self.targets += o.targets;
        self.left_out_jmax += o.left_out_jmax;
        self.left_out_class += o.left_out_class;
    }
}

/// What does not depend on the settings: per execution, its trainable tokens by fate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Trainable {
    /// Trainable tokens of executions that count in `B` (scored and dummy): the coverage
    /// denominator.
    pub counted: u64,
    /// Of those, in dummy executions (never targets: a dummy has one placeholder row).
    pub dummy: u64,
    /// Trainable tokens of excluded executions, by reason.
    pub excluded_open: u64,
    /// Excluded for want of a valid reward by the budget end.
    pub excluded_no_reward: u64,
}

impl Trainable {
    fn add(&mut self, o: &Trainable) {
        self.counted += o.counted;
        self.dummy += o.dummy;
        self.excluded_open += o.excluded_open;
        self.excluded_no_reward += o.excluded_no_reward;
    }
}

/// One execution swept: its figures per J_max (in [`SweepOptions::jmax`] order), per seed.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecutionSweep {
    /// Execution id.
    pub execution: String,
    /// `scored`, `dummy` or `excluded`.
    pub status: &'static str,
    /// Its trainable tokens.
    pub trainable: Trainable,
    /// `figures[j][s]`: J_max `jmax[j]`, seed `seed + s`.
    pub figures: Vec<Vec<Figures>>,
    /// The same under no cap, per seed (the cost baseline).
    pub uncapped: Vec<Figures>,
    /// Per seed, the uncapped run's chosen leaves in draw order (`None`: a draw without
    /// targets), for the batch's tree-pack tokens under each cap.
    pub leaves: Leaves,
}

/// Per seed, an uncapped run's chosen leaves in draw order (`None`: a draw without targets).
pub type Leaves = Vec<Vec<Option<u32>>>;

/// A whole sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// What was swept.
    pub options: SweepOptions,
    /// Per execution, in batch order.
    pub executions: Vec<ExecutionSweep>,
    /// The batch's trainable tokens.
    pub trainable: Trainable,
    /// `B`: executions that count (scored + dummy); the same under every setting.
    pub batch_executions: u64,
    /// The batch's tree-pack tokens, `tree[j][s]` at J_max index `j`, seed index `s`, shared
    /// prefixes across executions counted once (the per-execution sum counts them per execution).
    pub tree: Vec<Vec<u64>>,
    /// The same under no cap, per seed.
    pub tree_uncapped: Vec<u64>,
}

impl Sweep {
    /// Batch figures at J_max index `j` (`None`: uncapped), seed index `s`.
    pub fn batch(&self, j: Option<usize>, s: usize) -> Figures {
        let mut total = Figures::default();
        for e in &self.executions {
            total.add(match j {
                Some(j) => &e.figures[j][s],
                None => &e.uncapped[s],
            });
        }
        total.tree_tokens = match j {
            Some(j) => self.tree[j][s],
            None => self.tree_uncapped[s],
        };
        total
    }

    /// Mean over the seeds of the forward-backward tokens at J_max index `j` as a share of the
    /// uncapped run's (seeds whose uncapped run has none left out; `None` if all are).
    pub fn cost_vs_uncapped(&self, j: usize) -> Option<f64> {
        self.cost_vs_uncapped_of(j, |f| f.tokens)
    }

    /// [`Sweep::cost_vs_uncapped`] in tree-pack tokens: capped tree packs against uncapped ones.
    pub fn tree_cost_vs_uncapped(&self, j: usize) -> Option<f64> {
        self.cost_vs_uncapped_of(j, |f| f.tree_tokens)
    }

    /// Mean over the seeds of the tree-pack tokens at J_max index `j` as a share of the uncapped
    /// run's flat-row tokens: tree packs on the scale of [`Sweep::cost_vs_uncapped`].
    pub fn tree_cost_vs_uncapped_rows(&self, j: usize) -> Option<f64> {
        self.share(j, |f| f.tree_tokens, |f| f.tokens)
    }

    fn cost_vs_uncapped_of(&self, j: usize, cost: impl Fn(&Figures) -> u64) -> Option<f64> {
        self.share(j, &cost, &cost)
    }

    fn share(
        &self,
        j: usize,
        capped: impl Fn(&Figures) -> u64,
        uncapped: impl Fn(&Figures) -> u64,
    ) -> Option<f64> {
        mean((0..self.options.seeds as usize).filter_map(|s| {
            let (part, all) = (
                capped(&self.batch(Some(j), s)),
                uncapped(&self.batch(None, s)),
            );
            (all > 0).then(|| part as f64 / all as f64)
        }))
    }

    /// Mean over the seeds of the coverage at J_max index `j` (`None`: uncapped): targets over
    /// the trainable tokens of counted executions (`None` when there are none).
    pub fn coverage(&self, j: Option<usize>) -> Option<f64> {
        let den = self.trainable.counted;
        if den == 0 {
            return None;
        }
        mean((0..self.options.seeds as usize).map(|s| self.batch(j, s).targets as f64 / den as f64))
    }
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = v.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| sum / n as f64)
}

/// Sweeps `batch` under `options`.
pub fn sweep(batch: &Batch, options: &SweepOptions) -> Sweep {
    sweep_with_progress(batch, options, &|_, _| {})
}

/// [`sweep`], calling `progress(done, total)` as executions finish (from any thread).
pub fn sweep_with_progress(
    batch: &Batch,
    options: &SweepOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Sweep {
    sweep_observing(batch, options, progress, &|_: &mut (), _, _, _, _| {}).0
}

/// What [`sweep_observing`] shows each uncapped run: the state of its execution (one a
/// worker), the execution, its prepared candidates, the seed's index and the run.
pub type Observer<'a, T> = dyn Fn(&mut T, &Execution, &Prepared, usize, &Drawn) + Sync + 'a;

/// [`sweep_with_progress`], also handing every uncapped run (one per scored execution and
/// seed) to `observe`, so that what else is read off those runs (the lens) does not draw
/// them again. Returns, beside the sweep, each execution's `T` in batch order.
pub fn sweep_observing<T: Default + Send>(
    batch: &Batch,
    options: &SweepOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
    observe: &Observer<'_, T>,
) -> (Sweep, Vec<T>) {
    let done = AtomicUsize::new(0);
    let total = batch.executions.len();
    let (executions, observed): (Vec<ExecutionSweep>, Vec<T>) = batch
        .executions
        .par_iter()
        .map(|exec| {
            let mut state = T::default();
            let e = sweep_execution(exec, options, &mut |prepared, s, drawn| {
                observe(&mut state, exec, prepared, s, drawn)
            });
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            (e, state)
        })
        .unzip();
    let mut trainable = Trainable::default();
    let mut batch_executions = 0;
    for e in &executions {
        trainable.add(&e.trainable);
        batch_executions += (e.status != "excluded") as u64;
    }
    // A cap `j` keeps each execution's first `j` draws of the uncapped run (usize::MAX: all).
    let tree_at = |j: usize, s: usize| {
        let leaves: Vec<(usize, u32)> = executions
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.leaves.is_empty())
            .flat_map(|(i, e)| {
                let drawn = &e.leaves[s];
                drawn[..j.min(drawn.len())]
                    .iter()
                    .flatten()
                    .map(move |&l| (i, l))
            })
            .collect();
        row_prefix::of_leaves(batch, &leaves).distinct_tokens
    };
    let seeds = options.seeds as usize;
    let cap = |j: u32| if j == 0 { usize::MAX } else { j as usize };
    let tree: Vec<Vec<u64>> = options
        .jmax
        .iter()
        .map(|&j| (0..seeds).map(|s| tree_at(cap(j), s)).collect())
        .collect();
    let tree_uncapped: Vec<u64> = (0..seeds).map(|s| tree_at(usize::MAX, s)).collect();
    let sweep = Sweep {
        options: options.clone(),
        executions,
        trainable,
        batch_executions,
        tree,
        tree_uncapped,
    };
    (sweep, observed)
}

fn sweep_execution(
    exec: &Execution,
    options: &SweepOptions,
    observe: &mut dyn FnMut(&Prepared, usize, &Drawn),
) -> ExecutionSweep {
    let outcome = score::score(exec);
    let trainable_tokens: u64 = (0..exec.tree.nodes.len() as u32)
        .filter(|&n| trainable_node(exec, n))
        .map(|n| exec.tree.nodes[n as usize].len as u64)
        .sum();
    let mut trainable = Trainable::default();
    let seeds = options.seeds as usize;
    let fixed = |f: Figures| (vec![vec![f; seeds]; options.jmax.len()], vec![f; seeds]);
    let (figures, uncapped, leaves) = match outcome {
        Outcome::Excluded(reason) => {
            match reason {
                Exclusion::Open => trainable.excluded_open = trainable_tokens,
                Exclusion::NoValidReward => trainable.excluded_no_reward = trainable_tokens,
            }
            let (f, u) = fixed(Figures::default());
            (f, u, Vec::new())
        }
        Outcome::Dummy => {
            trainable.counted = trainable_tokens;
            trainable.dummy = trainable_tokens;
            let tokens = dummy_leaf(exec).map_or(0, |l| {
                let r = &exec.requests[l as usize];
                (r.input_len + r.output_len) as u64
            });
            let (f, u) = fixed(Figures {
                rows: 1,
                tokens,
                ..Figures::default()
            });
            (f, u, Vec::new())
        }
        Outcome::Scored { .. } => {
            trainable.counted = trainable_tokens;
            scored_figures(exec, options, trainable_tokens, observe)
        }
    };
    ExecutionSweep {
        execution: exec.id.clone(),
        status: outcome.label(),
        trainable,
        figures,
        uncapped,
        leaves,
    }
}

/// Figures of a scored execution: one uncapped run per seed, cut at every J_max.
fn scored_figures(
    exec: &Execution,
    options: &SweepOptions,
    trainable_tokens: u64,
    observe: &mut dyn FnMut(&Prepared, usize, &Drawn),
) -> (Vec<Vec<Figures>>, Vec<Figures>, Leaves) {
    let prepared = Prepared::new(exec);
    let drawable = drawable_nodes(exec, &prepared.candidates, &options.priority);
    // Trainable tokens some listed class can reach; the rest is left out by the priority.
    let reachable: u64 = (0..exec.tree.nodes.len())
        .filter(|&n| drawable[n] && trainable_node(exec, n as u32))
        .map(|n| exec.tree.nodes[n].len as u64)
        .sum();
    let by_class = trainable_tokens - reachable;
    let mut figures = vec![Vec::with_capacity(options.seeds as usize); options.jmax.len()];
    let mut uncapped = Vec::with_capacity(options.seeds as usize);
    let mut leaves = Vec::with_capacity(options.seeds as usize);
    // Seeds wrap past u64::MAX, as `s` on a seed of 18446744073709551615 does.
    // Every other setting at its default, so a new one needs no change here.
    let uncapped_at = Settings {
        jmax: 0,
        priority: options.priority.clone(),
        ..Settings::default()
    };
    for k in 0..options.seeds {
        let settings = Settings {
            seed: options.seed.wrapping_add(k),
            ..uncapped_at.clone()
        };
        let drawn = prepared.run(exec, &settings);
        observe(&prepared, k as usize, &drawn);
        // Tree-pack tokens of the first `j` draws: the prefix tree of those with targets.
        let tree_tokens = |j: usize| {
            let leaves: Vec<u32> = drawn.draws[..j]
                .iter()
                .filter(|d| d.target_tokens > 0)
                .map(|d| d.chosen)
                .collect();
            row_prefix::of_execution(exec, &leaves).distinct_tokens
        };
        let cut = |j: usize| {
            let taken = &drawn.draws[..j.min(drawn.draws.len())];
            let targets: u64 = taken.iter().map(|d| d.target_tokens).sum();
            // A cap reached leaves the reachable rest to J_max (docs/format.md §3 reasons), as the
            // draw loop checks the cap before looking for weight.
            let capped = j <= drawn.draws.len();
            Figures {
                rows: taken.len() as u64,
                tokens: taken.iter().map(|d| d.path_tokens).sum(),
                tree_tokens: tree_tokens(taken.len()),
                targets,
                left_out_jmax: if capped { reachable - targets } else { 0 },
                left_out_class: by_class + if capped { 0 } else { reachable - targets },
            }
        };
        for (jx, &j) in options.jmax.iter().enumerate() {
            figures[jx].push(if j == 0 {
                cut(usize::MAX)
            } else {
                cut(j as usize)
            });
        }
        uncapped.push(cut(usize::MAX));
        leaves.push(
            drawn
                .draws
                .iter()
                .map(|d| (d.target_tokens > 0).then_some(d.chosen))
                .collect(),
        );
    }
    (figures, uncapped, leaves)
}
