//! The lens: what admission does to every token and candidate over many seeds, and what it
//! would take for an undrawn path or a left-out token to be trained on.
//!
//! Under one priority, the draws capped at `J_max = j` are the first `j` draws of the uncapped
//! loop (the cap only stops it; see [`super::sweep`]). One uncapped run per (execution, seed)
//! therefore tells, for every trainable node, the draw that claims it — a target under
//! `J_max = j` exactly when that draw is `≤ j` — and for every candidate, the draw that picks
//! it. The lens keeps those draw numbers for the seeds `seed..seed + seeds`, so every J_max is
//! answered without drawing again; a priority change needs a new lens.
//!
//! The first seed of the range is the one the caller admits with, so "at the current seed"
//! questions read the first column.

use serde::Serialize;

use super::admit::{Class, Drawn, Prepared, Settings, trainable_node};
use super::execution::Execution;
use super::load::Batch;
use super::score::Outcome;
use super::sweep::{self, Sweep, SweepOptions};
use super::tree::NodeId;

/// Which seeds and priority a lens looks through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LensOptions {
    /// First seed (the current one).
    pub seed: u64,
    /// Number of seeds: `seed..seed + seeds`.
    pub seeds: u32,
    /// Class priority, highest first.
    pub priority: Vec<Class>,
}

/// The lens of a batch: one [`ExecutionLens`] per execution, in batch order.
#[derive(Clone, Debug)]
pub struct Lens {
    /// What it was made with.
    pub options: LensOptions,
    /// Per execution.
    pub executions: Vec<ExecutionLens>,
}

/// The lens of one execution. Only scored executions are drawn; the others hold no odds.
#[derive(Clone, Debug, Default)]
pub struct ExecutionLens {
    /// First seed.
    seed: u64,
    seeds: u32,
    /// Trainable nodes, ascending: row `i` of `claims` is node `trainable[i]`.
    trainable: Vec<NodeId>,
    /// `claims[i * seeds + s]`: the draw (1-based) claiming `trainable[i]` in the uncapped run
    /// at seed `s`; 0 = never.
    claims: Vec<u32>,
    /// Candidate request indices, ascending.
    candidates: Vec<u32>,
    /// `picks[c * seeds + s]`: the draw picking `candidates[c]` at seed `s`; 0 = never.
    picks: Vec<u32>,
}

/// How one node or candidate fares over the seeds, at one J_max.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Odds {
    /// Seeds looked through.
    pub seeds: u32,
    /// Of those, the seeds under which it is a target (a node) or drawn (a candidate).
    pub hits: u32,
    /// At the first (current) seed: the smallest J_max under which it is; `None` = never,
    /// not even uncapped.
    pub from_jmax: Option<u32>,
    /// The smallest J_max under which it is at every seed; `None` = some seed never.
    pub always_from_jmax: Option<u32>,
    /// Seeds under which it is at all, uncapped.
    pub ever: u32,
}

impl Odds {
    /// From the draw numbers of each seed (0 = never) at cap `jmax` (0 = uncapped).
    fn of(draws: &[u32], jmax: u32) -> Odds {
        let within = |k: u32| k > 0 && (jmax == 0 || k <= jmax);
        Odds {
            seeds: draws.len() as u32,
            hits: draws.iter().filter(|&&k| within(k)).count() as u32,
            from_jmax: draws.first().copied().filter(|&k| k > 0),
            always_from_jmax: if draws.iter().all(|&k| k > 0) {
                draws.iter().copied().max()
            } else {
                None
            },
            ever: draws.iter().filter(|&&k| k > 0).count() as u32,
        }
    }

    /// The share of seeds, `0.0..=1.0`.
    pub fn fraction(&self) -> f64 {
        if self.seeds == 0 {
            0.0
        } else {
            self.hits as f64 / self.seeds as f64
        }
    }

    /// In words, for a token: "target under 24 of 64 seeds (38%); always at J_max ≥ 6".
    pub fn token_text(&self) -> String {
        self.text("target")
    }

    /// In words, for a candidate: "drawn under 24 of 64 seeds (38%); always at J_max ≥ 6".
    pub fn candidate_text(&self) -> String {
        self.text("drawn")
    }

    /// Short, for a column: `38% (24/64) · all ≥ J6`, `100% (64/64)`, `0% (0/64) · not all`.
    pub fn short_text(&self) -> String {
        let share = format!(
            "{} ({}/{})",
            percent(self.fraction()),
            self.hits,
            self.seeds
        );
        match self.always_from_jmax {
            Some(j) if j > 1 && self.hits < self.seeds => format!("{share} · all ≥ J{j}"),
            Some(_) => share,
            None if self.ever == 0 => format!("{share} · never"),
            None => format!("{share} · not all"),
        }
    }

    /// Brief, for the inspector's why line: `target under 38% of 64 seeds; always at J_max ≥ 6`.
    pub fn brief(&self) -> String {
        let share = if self.hits == self.seeds {
            format!("target under all {} seeds", self.seeds)
        } else {
            format!(
                "target under {} of {} seeds",
                percent(self.fraction()),
                self.seeds
            )
        };
        match self.always_from_jmax {
            Some(1) => share,
            Some(j) => format!("{share}; always at J_max ≥ {j}"),
            None if self.ever == 0 => format!("{share}, not even uncapped"),
            None => format!("{share}; {} never, even uncapped", self.seeds - self.ever),
        }
    }

    fn text(&self, what: &str) -> String {
        let share = if self.hits == self.seeds {
            format!("{what} under all {} seeds", self.seeds)
        } else if self.hits == 0 {
            format!("{what} under none of {} seeds", self.seeds)
        } else {
            format!(
                "{what} under {} of {} seeds ({})",
                self.hits,
                self.seeds,
                percent(self.fraction())
            )
        };
        match self.always_from_jmax {
            Some(1) => share,
            Some(j) => format!("{share}; always at J_max ≥ {j}"),
            None if self.ever == 0 => format!("{share}, not even uncapped"),
            None => format!(
                "{share}; under {} of them never, not even uncapped",
                self.seeds - self.ever
            ),
        }
    }
}

/// `38%`, `<1%` for a small live share, `>99%` short of all.
pub fn percent(f: f64) -> String {
    if f > 0.0 && f < 0.01 {
        "<1%".into()
    } else if f < 1.0 && f > 0.99 {
        ">99%".into()
    } else {
        format!("{:.0}%", f * 100.0)
    }
}

impl ExecutionLens {
    /// Node `n` at cap `jmax`; `None` when it is not a trainable node of a scored execution.
    pub fn node(&self, n: NodeId, jmax: u32) -> Option<Odds> {
        let i = self.trainable.binary_search(&n).ok()?;
        Some(Odds::of(self.row(&self.claims, i), jmax))
    }

    /// Candidate request `r` at cap `jmax`; `None` when it is not a candidate of a scored
    /// execution.
    pub fn candidate(&self, r: u32, jmax: u32) -> Option<Odds> {
        let c = self.candidates.binary_search(&r).ok()?;
        Some(Odds::of(self.row(&self.picks, c), jmax))
    }

    /// Seeds looked through and the first of them.
    pub fn seeds(&self) -> (u32, u64) {
        (self.seeds, self.seed)
    }

    fn row<'a>(&self, v: &'a [u32], i: usize) -> &'a [u32] {
        let s = self.seeds as usize;
        &v[i * s..(i + 1) * s]
    }
}

/// The lens of every execution of `batch`, calling `progress(done, total)` as executions finish.
pub fn lens(
    batch: &Batch,
    options: &LensOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Lens {
    lens_and_sweep(batch, options, Vec::new(), progress).0
}

/// The lens and the sweep over `jmax` under the same seeds and priority, read off the same
/// uncapped runs (one per scored execution and seed), so that each is drawn once.
pub fn lens_and_sweep(
    batch: &Batch,
    options: &LensOptions,
    jmax: Vec<u32>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> (Lens, Sweep) {
    let sweep_options = SweepOptions {
        jmax,
        seed: options.seed,
        seeds: options.seeds as u64,
        priority: options.priority.clone(),
    };
    let (sweep, collected) = sweep::sweep_observing(
        batch,
        &sweep_options,
        progress,
        &|c: &mut Option<Collect>, exec, prepared, s, drawn| {
            c.get_or_insert_with(|| Collect::new(exec, prepared, options.seeds))
                .add(s, drawn)
        },
    );
    let lens = Lens {
        options: options.clone(),
        executions: collected
            .into_iter()
            .map(|c| match c {
                Some(c) => c.finish(options.seed),
                // Not scored (or no seeds): nothing was drawn, no node or candidate has odds.
                None => ExecutionLens {
                    seed: options.seed,
                    seeds: options.seeds,
                    ..ExecutionLens::default()
                },
            })
            .collect(),
    };
    (lens, sweep)
}

/// The lens of one execution whose scoring outcome is `outcome`.
pub fn execution_lens(exec: &Execution, outcome: &Outcome, options: &LensOptions) -> ExecutionLens {
    if !matches!(outcome, Outcome::Scored { .. }) || options.seeds == 0 {
        // Nothing is drawn: no node or candidate has odds.
        return ExecutionLens {
            seed: options.seed,
            seeds: options.seeds,
            ..ExecutionLens::default()
        };
    }
    let prepared = Prepared::new(exec);
    let mut c = Collect::new(exec, &prepared, options.seeds);
    // Every other setting at its default, so a new one needs no change here.
    let uncapped_at = Settings {
        jmax: 0,
        priority: options.priority.clone(),
        ..Settings::default()
    };
    for s in 0..options.seeds as usize {
        let settings = Settings {
            seed: options.seed.wrapping_add(s as u64),
            ..uncapped_at.clone()
        };
        c.add(s, &prepared.run(exec, &settings));
    }
    c.finish(options.seed)
}

/// An execution's lens being filled in, one uncapped run (seed) at a time.
struct Collect {
    seeds: u32,
    trainable: Vec<NodeId>,
    claims: Vec<u32>,
    candidates: Vec<u32>,
    picks: Vec<u32>,
}

impl Collect {
    fn new(exec: &Execution, prepared: &Prepared, seeds: u32) -> Collect {
        let trainable: Vec<NodeId> = (0..exec.tree.nodes.len() as NodeId)
            .filter(|&n| trainable_node(exec, n))
            .collect();
        let candidates: Vec<u32> = prepared.candidates.iter().map(|c| c.request).collect();
        Collect {
            seeds,
            claims: vec![0; trainable.len() * seeds as usize],
            picks: vec![0; candidates.len() * seeds as usize],
            trainable,
            candidates,
        }
    }

    /// The uncapped run of seed index `s`.
    fn add(&mut self, s: usize, drawn: &Drawn) {
        let seeds = self.seeds as usize;
        for (i, &n) in self.trainable.iter().enumerate() {
            self.claims[i * seeds + s] = drawn.claimed_by[n as usize].unwrap_or(0);
        }
        for (k, d) in drawn.draws.iter().enumerate() {
            let c = self
                .candidates
                .binary_search(&d.chosen)
                .expect("draws pick candidates");
            self.picks[c * seeds + s] = k as u32 + 1;
        }
    }

    fn finish(self, seed: u64) -> ExecutionLens {
        ExecutionLens {
            seed,
            seeds: self.seeds,
            trainable: self.trainable,
            claims: self.claims,
            candidates: self.candidates,
            picks: self.picks,
        }
    }
}

/// What a priority change would do for a request: the nearest priority under which its class
/// is drawn from first, at the same seed and J_max.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PriorityWhatIf {
    /// The priority tried: the request's class first, the others in their order.
    pub priority: Vec<Class>,
    /// The draw that picks the request under it (a candidate), if any.
    pub drawn: Option<u32>,
    /// Of the request's own trainable output tokens, the targets under it.
    pub output_targets: u64,
    /// The same under the current priority.
    pub output_targets_now: u64,
}

impl PriorityWhatIf {
    /// In words: "with priority sub>main>…: drawn at draw 1; 40 of its output tokens become
    /// targets (0 now)".
    pub fn text(&self) -> String {
        let drawn = match self.drawn {
            Some(k) => format!("drawn at draw {k}"),
            None => "not drawn".into(),
        };
        format!(
            "with priority {}: {drawn}; {} of its output tokens are targets ({} now)",
            self.priority
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(">"),
            self.output_targets,
            self.output_targets_now
        )
    }
}

/// What a priority with request `r`'s class first would do for it (same seed and J_max as
/// `settings`); `None` when the execution is not scored, `r` is not a policy request, or its
/// class already comes first.
pub fn priority_what_if(
    exec: &Execution,
    outcome: &Outcome,
    settings: &Settings,
    r: u32,
) -> Option<PriorityWhatIf> {
    let req = &exec.requests[r as usize];
    if !matches!(outcome, Outcome::Scored { .. }) || !req.trainable() {
        return None;
    }
    let class = Class::of(&req.agent, req.purpose);
    if settings.priority.first() == Some(&class) {
        return None;
    }
    let priority = class_first(&settings.priority, class);
    let prepared = Prepared::new(exec);
    let own_targets = |claimed: &[Option<u32>]| -> u64 {
        exec.tree
            .nodes
            .iter()
            .enumerate()
            .filter(|(n, node)| {
                node.owner == r && claimed[*n].is_some() && trainable_node(exec, *n as NodeId)
            })
            .map(|(_, node)| node.len as u64)
            .sum()
    };
    let now = prepared.run(exec, settings);
    let alt = prepared.run(
        exec,
        &Settings {
            priority: priority.clone(),
            ..settings.clone()
        },
    );
    Some(PriorityWhatIf {
        drawn: alt
            .draws
            .iter()
            .position(|d| d.chosen == r)
            .map(|k| k as u32 + 1),
        output_targets: own_targets(&alt.claimed_by),
        output_targets_now: own_targets(&now.claimed_by),
        priority,
    })
}

/// The lens of one request, as `gyre why --seeds N --json` writes it under `lens`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestLens {
    /// Seeds looked through, from `first_seed` (the current seed) on.
    pub seeds: u32,
    /// The first seed.
    pub first_seed: u64,
    /// The J_max the figures are for (0 = uncapped).
    pub jmax: u32,
    /// A candidate: seeds under which it is drawn at this J_max (else null).
    pub drawn_seeds: Option<u32>,
    /// `drawn_seeds / seeds`.
    pub drawn_fraction: Option<f64>,
    /// A candidate: the smallest J_max that draws it at the current seed (null: never, not
    /// even uncapped, or not a candidate).
    pub min_jmax: Option<u32>,
    /// A candidate: the smallest J_max that draws it under every seed (null: some seed never).
    pub always_at_jmax: Option<u32>,
    /// A candidate: seeds under which it is drawn uncapped.
    pub drawn_uncapped_seeds: Option<u32>,
    /// Its class is in the priority (else it is never drawn).
    #[serde(skip)]
    pub class_listed: bool,
    /// Its own trainable output tokens.
    pub output_tokens: u64,
    /// Mean over the seeds of the share of them that are targets at this J_max.
    pub output_target_fraction: f64,
    /// The smallest J_max under which all of them are targets at the current seed (null:
    /// never, or it has none).
    pub output_min_jmax: Option<u32>,
    /// What a priority with its class first would do (null: its class is first already, or
    /// nothing is drawn in the execution).
    pub priority: Option<PriorityWhatIf>,
}

/// The lens of request `r` of `exec` read off its execution's lens `l` at `settings.jmax`, with
/// what a priority change would do under `settings`. `l` must have been made with
/// `settings.seed` first and `settings.priority`.
pub fn request_lens(
    exec: &Execution,
    outcome: &Outcome,
    settings: &Settings,
    l: &ExecutionLens,
    r: u32,
) -> RequestLens {
    let jmax = settings.jmax;
    let cand = l.candidate(r, jmax);
    let own: Vec<(NodeId, u64)> = exec
        .tree
        .nodes
        .iter()
        .enumerate()
        .filter(|(n, node)| node.owner == r && trainable_node(exec, *n as NodeId))
        .map(|(n, node)| (n as NodeId, node.len as u64))
        .collect();
    let output_tokens: u64 = own.iter().map(|&(_, len)| len).sum();
    let odds: Vec<(Odds, u64)> = own
        .iter()
        .filter_map(|&(n, len)| l.node(n, jmax).map(|o| (o, len)))
        .collect();
    let output_target_fraction = if output_tokens == 0 || odds.is_empty() {
        0.0
    } else {
        odds.iter()
            .map(|(o, len)| o.fraction() * *len as f64)
            .sum::<f64>()
            / output_tokens as f64
    };
    let output_min_jmax = if odds.is_empty() || odds.iter().any(|(o, _)| o.from_jmax.is_none()) {
        None
    } else {
        odds.iter().filter_map(|(o, _)| o.from_jmax).max()
    };
    RequestLens {
        seeds: l.seeds,
        first_seed: l.seed,
        jmax,
        drawn_seeds: cand.map(|o| o.hits),
        drawn_fraction: cand.map(|o| o.fraction()),
        min_jmax: cand.and_then(|o| o.from_jmax),
        always_at_jmax: cand.and_then(|o| o.always_from_jmax),
        drawn_uncapped_seeds: cand.map(|o| o.ever),
        class_listed: {
            let req = &exec.requests[r as usize];
            settings
                .priority
                .contains(&Class::of(&req.agent, req.purpose))
        },
        output_tokens,
        output_target_fraction,
        output_min_jmax,
        priority: priority_what_if(exec, outcome, settings, r),
    }
}

impl RequestLens {
    /// The readable lines `gyre why --seeds N` adds.
    pub fn lines(&self) -> Vec<String> {
        let cap = if self.jmax == 0 {
            "uncapped".to_string()
        } else {
            format!("J_max {}", self.jmax)
        };
        let mut out = vec![format!(
            "lens: {} seeds from {} at {cap}",
            self.seeds, self.first_seed
        )];
        if let (Some(hits), Some(ever)) = (self.drawn_seeds, self.drawn_uncapped_seeds) {
            let odds = Odds {
                seeds: self.seeds,
                hits,
                from_jmax: self.min_jmax,
                always_from_jmax: self.always_at_jmax,
                ever,
            };
            out.push(format!("  {}", odds.candidate_text()));
            let seed = self.first_seed;
            out.push(match self.min_jmax {
                Some(j) => format!("  at seed {seed}: drawn from J_max ≥ {j}"),
                None if !self.class_listed => {
                    format!("  at seed {seed}: never drawn: its class is not in the priority")
                }
                None => format!(
                    "  at seed {seed}: never drawn, not even uncapped: other leaves claim all of \
                     its path's tokens first"
                ),
            });
        }
        if self.output_tokens > 0 {
            out.push(format!(
                "  its {} output tokens are targets under {} of the seeds on average; at seed {} \
                 {}",
                self.output_tokens,
                percent(self.output_target_fraction),
                self.first_seed,
                match self.output_min_jmax {
                    Some(j) => format!("all of them from J_max ≥ {j}"),
                    None => "no J_max makes all of them targets".into(),
                }
            ));
        }
        if let Some(p) = &self.priority {
            out.push(format!("  {}", p.text()));
        }
        out
    }
}

/// What a priority change would do for trainable node `n` left out under `settings`: the first
/// priority, among those putting the class of a candidate whose path holds `n` first, under
/// which `n` is a target at the same seed and J_max, with the draw that claims it. `None` when
/// none does (or the execution is not scored).
pub fn node_priority_what_if(
    exec: &Execution,
    outcome: &Outcome,
    settings: &Settings,
    n: NodeId,
) -> Option<(Vec<Class>, u32)> {
    if !matches!(outcome, Outcome::Scored { .. }) || !trainable_node(exec, n) {
        return None;
    }
    let prepared = Prepared::new(exec);
    let mut classes: Vec<Class> = Vec::new();
    for c in &prepared.candidates {
        if !classes.contains(&c.class) && on_path(exec, c.request, n) {
            classes.push(c.class);
        }
    }
    classes.sort_by_key(|c| Class::DEFAULT_PRIORITY.iter().position(|d| d == c));
    classes
        .into_iter()
        .map(|c| class_first(&settings.priority, c))
        .filter(|p| *p != settings.priority)
        .find_map(|priority| {
            let s = Settings {
                priority,
                ..settings.clone()
            };
            let k = prepared.run(exec, &s).claimed_by[n as usize]?;
            Some((s.priority, k))
        })
}

/// `priority` with `class` moved (or added) to the front.
fn class_first(priority: &[Class], class: Class) -> Vec<Class> {
    let mut out = vec![class];
    out.extend(priority.iter().copied().filter(|&c| c != class));
    out
}

/// Whether node `n` lies on request `r`'s root-to-output path.
fn on_path(exec: &Execution, r: u32, n: NodeId) -> bool {
    let mut m = exec.requests[r as usize].output_node;
    loop {
        if m == n {
            return true;
        }
        if m == super::tree::ROOT {
            return false;
        }
        m = exec.tree.nodes[m as usize].parent;
    }
}

#[cfg(test)]
mod tests {
    use super::{Odds, percent};

    #[test]
    fn odds_read_off_draw_numbers() {
        let o = Odds::of(&[2, 6, 1, 3], 3);
        assert_eq!(
            (o.hits, o.from_jmax, o.always_from_jmax),
            (3, Some(2), Some(6))
        );
        assert_eq!(
            o.token_text(),
            "target under 3 of 4 seeds (75%); always at J_max ≥ 6"
        );
        let uncapped = Odds::of(&[2, 6, 1, 3], 0);
        assert_eq!(uncapped.hits, 4);
        let never = Odds::of(&[0, 4], 2);
        assert_eq!(
            (never.hits, never.from_jmax, never.always_from_jmax),
            (0, None, None)
        );
        assert_eq!(
            never.candidate_text(),
            "drawn under none of 2 seeds; under 1 of them never, not even uncapped"
        );
        assert_eq!(
            Odds::of(&[0, 0], 0).token_text(),
            "target under none of 2 seeds, not even uncapped"
        );
        assert_eq!(
            Odds::of(&[1, 1], 1).token_text(),
            "target under all 2 seeds"
        );
        assert_eq!(
            Odds::of(&[2, 6, 1, 3], 3).brief(),
            "target under 75% of 4 seeds; always at J_max ≥ 6"
        );
    }

    #[test]
    fn percents_never_round_to_the_ends() {
        assert_eq!(percent(0.375), "38%");
        assert_eq!(percent(0.004), "<1%");
        assert_eq!(percent(0.996), ">99%");
        assert_eq!(percent(1.0), "100%");
        assert_eq!(percent(0.0), "0%");
    }
}
