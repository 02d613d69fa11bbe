//! `logprob_gap`: per mask-on token holding both a trainer and a behaviour log-prob,
//! Δ = trainer − behaviour and the importance ratio exp(Δ); runs beyond the bound are findings,
//! and the summary (mean |Δ|, the k3 KL estimate, the share beyond the bound) is given over all
//! such tokens and by role, turn and position bucket.
//!
//! Mask-off tokens never enter: a trainer's log-probs on tokens it does not train (tool output,
//! prompt) say nothing about its policy loss, and are where the largest spurious gaps are.

use gyre_format::record::Actor;
use serde::Serialize;
use serde_json::{Value, json};

use super::finding::{Finding, Kind, Scope};
use super::layout::Place;
use crate::execution::Execution;

/// The bound a token's gap is judged against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GapBound {
    /// |Δ| above this (nats) is beyond.
    pub nats: f64,
    /// A ratio exp(Δ) outside `[lo, hi]` is beyond.
    pub ratio: (f64, f64),
}

impl Default for GapBound {
    fn default() -> Self {
        GapBound {
            nats: 1.0,
            ratio: (0.5, 2.0),
        }
    }
}

impl GapBound {
    /// Whether a token with gap `delta` is beyond the bound.
    pub fn beyond(&self, delta: f64) -> bool {
        let ratio = delta.exp();
        delta.abs() > self.nats || ratio < self.ratio.0 || ratio > self.ratio.1
    }
}

/// Sums over tokens: merged across executions.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GapTotals {
    /// Tokens counted.
    pub tokens: u64,
    /// Σ |Δ|.
    pub sum_abs: f64,
    /// Σ (exp(Δ) − 1 − Δ).
    pub sum_k3: f64,
    /// Tokens beyond the bound.
    pub beyond: u64,
    /// The largest |Δ|.
    pub max_abs: f64,
}

impl GapTotals {
    /// Counts one token.
    pub fn add(&mut self, delta: f64, beyond: bool) {
        self.tokens += 1;
        self.sum_abs += delta.abs();
        self.sum_k3 += delta.exp_m1() - delta;
        self.beyond += beyond as u64;
        self.max_abs = self.max_abs.max(delta.abs());
    }

    /// Adds `other`'s tokens.
    pub fn merge(&mut self, other: &GapTotals) {
        self.tokens += other.tokens;
        self.sum_abs += other.sum_abs;
        self.sum_k3 += other.sum_k3;
        self.beyond += other.beyond;
        self.max_abs = self.max_abs.max(other.max_abs);
    }

    /// The figures of these tokens under `label`.
    pub fn figures(&self, label: &str) -> GapFigures {
        let n = self.tokens.max(1) as f64;
        GapFigures {
            label: label.to_owned(),
            tokens: self.tokens,
            mean_abs: self.sum_abs / n,
            k3: self.sum_k3 / n,
            beyond: self.beyond,
            share_beyond: self.beyond as f64 / n,
            max_abs: self.max_abs,
        }
    }
}

/// The gap figures of a set of tokens.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GapFigures {
    /// What the tokens are (`all`, `main`, `turn 2`, `<1k`, …).
    pub label: String,
    /// Mask-on tokens with both log-probs.
    pub tokens: u64,
    /// Mean |Δ| (nats).
    pub mean_abs: f64,
    /// The k3 estimate of KL(behaviour ‖ trainer): mean of exp(Δ) − 1 − Δ.
    pub k3: f64,
    /// Tokens beyond the bound.
    pub beyond: u64,
    /// Their share.
    pub share_beyond: f64,
    /// The largest |Δ|.
    pub max_abs: f64,
}

/// Which agent's request a token belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The main agent (`agent` = `main`).
    Main,
    /// A sub-agent.
    Sub,
    /// Off the tree: no request holds the token.
    Unknown,
}

/// Turn buckets: the request's 1-based index among its execution's policy requests.
pub const TURNS: [&str; 6] = ["1", "2", "3", "4-7", "8+", "unknown"];
/// Position buckets: the token's offset in its sample's full sequence.
pub const POSITIONS: [&str; 4] = ["<1k", "1k-4k", "4k-16k", ">=16k"];
/// Role buckets.
pub const ROLES: [&str; 3] = ["main", "sub", "unknown"];

/// The turn bucket of a 1-based policy turn (`None`: unknown).
pub fn turn_bucket(turn: Option<u32>) -> usize {
    match turn {
        Some(1) => 0,
        Some(2) => 1,
        Some(3) => 2,
        Some(4..=7) => 3,
        Some(_) => 4,
        None => 5,
    }
}

/// The position bucket of a token at `pos` in its sample.
pub fn position_bucket(pos: u32) -> usize {
    match pos {
        0..1024 => 0,
        1024..4096 => 1,
        4096..16384 => 2,
        _ => 3,
    }
}

/// The totals of a set of tokens, overall and per bucket.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GapAccumulator {
    /// Every token.
    pub all: GapTotals,
    /// Per [`ROLES`].
    pub by_role: [GapTotals; 3],
    /// Per [`TURNS`].
    pub by_turn: [GapTotals; 6],
    /// Per [`POSITIONS`].
    pub by_position: [GapTotals; 4],
}

impl GapAccumulator {
    /// Counts one token at `pos` of its sample.
    pub fn add(&mut self, delta: f64, beyond: bool, role: Role, turn: Option<u32>, pos: u32) {
        self.all.add(delta, beyond);
        let r = match role {
            Role::Main => 0,
            Role::Sub => 1,
            Role::Unknown => 2,
        };
        self.by_role[r].add(delta, beyond);
        self.by_turn[turn_bucket(turn)].add(delta, beyond);
        self.by_position[position_bucket(pos)].add(delta, beyond);
    }

    /// Adds `other`'s tokens.
    pub fn merge(&mut self, other: &GapAccumulator) {
        self.all.merge(&other.all);
        for (a, b) in self.by_role.iter_mut().zip(&other.by_role) {
            a.merge(b);
        }
        for (a, b) in self.by_turn.iter_mut().zip(&other.by_turn) {
            a.merge(b);
        }
        for (a, b) in self.by_position.iter_mut().zip(&other.by_position) {
            a.merge(b);
        }
    }

    /// The summary under `bound`; `None` when no token had both log-probs.
    pub fn summary(&self, bound: GapBound) -> Option<GapSummary> {
        if self.all.tokens == 0 {
            return None;
        }
        let buckets = |totals: &[GapTotals], labels: &[&str]| {
            totals
                .iter()
                .zip(labels)
                .filter(|(t, _)| t.tokens > 0)
                .map(|(t, l)| t.figures(l))
                .collect()
        };
        Some(GapSummary {
            all: self.all.figures("all"),
            bound,
            by_role: buckets(&self.by_role, &ROLES),
            by_turn: buckets(&self.by_turn, &TURNS),
            by_position: buckets(&self.by_position, &POSITIONS),
        })
    }
}

/// The log-prob gap of a batch, on mask-on tokens only.
#[derive(Clone, Debug, PartialEq)]
pub struct GapSummary {
    /// Every mask-on token with both log-probs.
    pub all: GapFigures,
    /// The bound used.
    pub bound: GapBound,
    /// By agent (`main`, `sub`, `unknown`: off the tree); empty buckets left out.
    pub by_role: Vec<GapFigures>,
    /// By the request's policy turn ([`TURNS`]).
    pub by_turn: Vec<GapFigures>,
    /// By the token's offset in its sample ([`POSITIONS`]).
    pub by_position: Vec<GapFigures>,
}

/// What the gap figures are computed on, said in the JSON and the summary.
pub const SCOPE: &str = "mask-on tokens with both a trainer and a behaviour log-prob";

impl GapSummary {
    /// The `gap` object of `gyre audit --json` (docs/audit.md).
    pub fn to_json(&self) -> Value {
        let a = &self.all;
        json!({
            "scope": SCOPE,
            "bound": {"nats": self.bound.nats, "ratio": [self.bound.ratio.0, self.bound.ratio.1]},
            "tokens": a.tokens, "mean_abs": a.mean_abs, "k3": a.k3, "beyond": a.beyond,
            "share_beyond": a.share_beyond, "max_abs": a.max_abs,
            "by_role": self.by_role, "by_turn": self.by_turn, "by_position": self.by_position,
        })
    }
}

impl Serialize for GapSummary {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

/// A maximal run of consecutive sample positions, each a mask-on token beyond the bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GapRun {
    /// First position (in the sample's full sequence).
    pub start: u32,
    /// Exclusive end.
    pub end: u32,
    /// The Δ of largest magnitude in the run.
    pub worst: f64,
}

/// Scans one sample's response: `mask`, and per response token its trainer and behaviour
/// log-probs; counts each mask-on token with both into `acc` (`at(pos)` gives its role and
/// turn) and returns the runs beyond `bound`. `prompt_len` places the response in the sample.
pub fn scan(
    prompt_len: u32,
    mask: &[u8],
    trainer: &[Option<f64>],
    behaviour: impl Fn(usize) -> Option<f64>,
    at: impl Fn(u32) -> (Role, Option<u32>),
    bound: GapBound,
    acc: &mut GapAccumulator,
) -> Vec<GapRun> {
    let mut runs = Vec::new();
    let mut open: Option<GapRun> = None;
    for (j, (&m, t)) in mask.iter().zip(trainer).enumerate() {
        let pos = prompt_len + j as u32;
        let delta = match (m, t, behaviour(j)) {
            (1, Some(t), Some(b)) => Some(t - b),
            _ => None,
        };
        let beyond = delta.filter(|&d| bound.beyond(d));
        if let Some(d) = delta {
            let (role, turn) = at(pos);
            acc.add(d, beyond.is_some(), role, turn, pos);
        }
        match (beyond, open.as_mut()) {
            (Some(d), Some(run)) => {
                run.end = pos + 1;
                if d.abs() > run.worst.abs() {
                    run.worst = d;
                }
            }
            (Some(d), None) => {
                open = Some(GapRun {
                    start: pos,
                    end: pos + 1,
                    worst: d,
                })
            }
            (None, _) => runs.extend(open.take()),
        }
    }
    runs.extend(open);
    runs
}

/// The sentence of a run's finding.
pub fn run_detail(run: &GapRun, bound: GapBound) -> String {
    let n = run.end - run.start;
    format!(
        "trainer − behaviour log-prob beyond the bound on {n} mask-on token{}: worst Δ {:+.3} nat \
         (ratio {:.3}); bound |Δ| > {} or ratio outside [{}, {}]",
        if n == 1 { "" } else { "s" },
        run.worst,
        run.worst.exp(),
        bound.nats,
        bound.ratio.0,
        bound.ratio.1
    )
}

/// Per request of `exec`: its 1-based index among the execution's policy requests (file
/// order), `None` for an evaluator's.
pub fn policy_turns(exec: &Execution) -> Vec<Option<u32>> {
    let mut n = 0;
    exec.requests
        .iter()
        .map(|r| {
            (r.actor == Actor::Policy).then(|| {
                n += 1;
                n
            })
        })
        .collect()
}

/// `logprob_gap` over one execution: the findings (one per run beyond the bound, value = the
/// run's largest |Δ|) and the execution's totals.
pub fn logprob_gap(scope: &Scope) -> (Vec<Finding>, GapAccumulator) {
    let (exec, layout) = (scope.exec, scope.layout);
    let bound = GapBound {
        nats: scope.options.gap_bound,
        ratio: scope.options.ratio_bounds,
    };
    let turns = policy_turns(exec);
    let mut acc = GapAccumulator::default();
    let mut findings = Vec::new();
    for (s, sample) in exec.trained.list.iter().enumerate() {
        let r = &sample.record;
        let Some(trainer) = r.trainer_logprobs.as_deref() else {
            continue;
        };
        let keys = &layout.samples[s].keys;
        let p0 = r.prompt_len as usize;
        let at = |pos: u32| match layout.place(exec, keys[pos as usize]) {
            Place::Tree { node, .. } => {
                let owner = exec.tree.nodes[node as usize].owner as usize;
                let role = if exec.requests[owner].agent == "main" {
                    Role::Main
                } else {
                    Role::Sub
                };
                (role, turns[owner])
            }
            Place::Off(_) => (Role::Unknown, None),
        };
        let runs = scan(
            r.prompt_len,
            &r.loss_mask,
            trainer,
            |j| layout.behaviour(exec, s, p0 + j),
            at,
            bound,
            &mut acc,
        );
        for run in runs {
            let mut f = Finding::new(
                Kind::LogprobGap,
                scope.index,
                Some(s as u32),
                run.start,
                run.end,
            );
            f.value = Some(run.worst.abs());
            f.request = match layout.place(exec, keys[run.start as usize]) {
                Place::Tree { node, .. } => Some(exec.tree.nodes[node as usize].owner),
                Place::Off(_) => None,
            };
            f.detail = run_detail(&run, bound);
            findings.push(f);
        }
    }
    (findings, acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn main_turn(_: u32) -> (Role, Option<u32>) {
        (Role::Main, Some(2))
    }

    #[test]
    fn runs_cover_consecutive_tokens_beyond_the_bound_and_only_mask_on_ones_count() {
        let mut acc = GapAccumulator::default();
        // Positions 10..16: a mask-off token with a huge gap, two beyond, one within, one
        // beyond, one without a trainer value.
        let mask = [0, 1, 1, 1, 1, 1];
        let trainer = [
            Some(-9.0),
            Some(-3.0),
            Some(-0.1),
            Some(-0.2),
            Some(-0.2),
            None,
        ];
        let behaviour = [-0.1, -0.1, -1.5, -0.1, -1.9, -0.1];
        let runs = scan(
            10,
            &mask,
            &trainer,
            |j| Some(behaviour[j]),
            main_turn,
            GapBound::default(),
            &mut acc,
        );
        let spans: Vec<(u32, u32)> = runs.iter().map(|r| (r.start, r.end)).collect();
        assert_eq!(spans, vec![(11, 13), (14, 15)]);
        assert!((runs[0].worst - -2.9).abs() < 1e-12);
        assert!((runs[1].worst - 1.7).abs() < 1e-12);
        assert_eq!(acc.all.tokens, 4);
        assert_eq!(acc.all.beyond, 3);
        let s = acc
            .summary(GapBound::default())
            .expect("tokens were counted");
        let deltas: [f64; 4] = [-2.9, 1.4, -0.1, 1.7];
        let mean_abs = deltas.iter().map(|d| d.abs()).sum::<f64>() / 4.0;
        let k3 = deltas.iter().map(|d| d.exp() - 1.0 - d).sum::<f64>() / 4.0;
        assert!((s.all.mean_abs - mean_abs).abs() < 1e-12);
        assert!((s.all.k3 - k3).abs() < 1e-12);
        assert_eq!(s.all.share_beyond, 0.75);
        assert_eq!(s.by_role.len(), 1);
        assert_eq!(s.by_role[0].label, "main");
        assert_eq!(s.by_turn[0].label, "2");
        assert_eq!(s.by_position[0].label, "<1k");
    }

    #[test]
    fn the_ratio_bound_alone_can_put_a_token_beyond() {
        let bound = GapBound::default();
        // |Δ| 0.8 < 1 nat, but exp(-0.8) = 0.45 < 0.5.
        assert!(bound.beyond(-0.8));
        assert!(bound.beyond(0.8));
        assert!(!bound.beyond(0.6));
        assert!(!bound.beyond(-0.6));
        let loose = GapBound {
            nats: 1.0,
            ratio: (0.1, 10.0),
        };
        assert!(!loose.beyond(-0.8));
        assert!(loose.beyond(-1.2));
    }

    #[test]
    fn buckets_follow_the_spec() {
        assert_eq!(turn_bucket(Some(1)), 0);
        assert_eq!(turn_bucket(Some(4)), 3);
        assert_eq!(turn_bucket(Some(7)), 3);
        assert_eq!(turn_bucket(Some(8)), 4);
        assert_eq!(turn_bucket(None), 5);
        assert_eq!(position_bucket(1023), 0);
        assert_eq!(position_bucket(1024), 1);
        assert_eq!(position_bucket(4096), 2);
        assert_eq!(position_bucket(16384), 3);
    }

    #[test]
    fn accumulators_merge_to_the_same_figures_as_one_pass() {
        let mut one = GapAccumulator::default();
        let mut a = GapAccumulator::default();
        let mut b = GapAccumulator::default();
        for (k, d) in [0.1, -2.0, 0.3, 1.5].iter().enumerate() {
            let beyond = GapBound::default().beyond(*d);
            one.add(*d, beyond, Role::Sub, Some(9), 5000);
            if k % 2 == 0 { &mut a } else { &mut b }.add(*d, beyond, Role::Sub, Some(9), 5000);
        }
        a.merge(&b);
        assert_eq!(a.all.tokens, one.all.tokens);
        assert_eq!(a.all.beyond, one.all.beyond);
        assert!((a.all.sum_k3 - one.all.sum_k3).abs() < 1e-12);
        assert_eq!(a.by_turn[4].tokens, 4);
        assert_eq!(a.by_position[2].tokens, 4);
        assert_eq!(a.by_role[1].tokens, 4);
    }
}
