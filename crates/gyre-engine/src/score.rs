//! Scoring at closure (docs/format.md §4) and group advantages.

use std::collections::HashMap;
use std::fmt;

use super::execution::{Assessment, Execution};

/// Why an execution yields no trajectories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exclusion {
    /// No `closure` record.
    Open,
    /// Closed with an artifact, but no valid assessment of it by the end of the budget.
    NoValidReward,
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Exclusion::Open => "open",
            Exclusion::NoValidReward => "no valid reward by budget end",
        })
    }
}

/// The scoring fate of an execution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// Rewarded by assessment `assessment` (index into [`Execution::assessments`]).
    Scored {
        /// The reward.
        reward: f64,
        /// The assessment that gave it.
        assessment: usize,
    },
    /// Closed with no assessable work: one zero-reward placeholder.
    Dummy,
    /// Not trained on.
    Excluded(Exclusion),
}

impl Outcome {
    /// The reward of a non-excluded execution.
    pub fn reward(&self) -> Option<f64> {
        match self {
            Outcome::Scored { reward, .. } => Some(*reward),
            Outcome::Dummy => Some(0.0),
            Outcome::Excluded(_) => None,
        }
    }

    /// Scored or dummy: counts in the batch denominator `B`.
    pub fn counts(&self) -> bool {
        !matches!(self, Outcome::Excluded(_))
    }

    /// Short label: `scored`, `dummy` or `excluded`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Scored { .. } => "scored",
            Outcome::Dummy => "dummy",
            Outcome::Excluded(_) => "excluded",
        }
    }
}

/// How one assessment relates to the closure, for display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssessmentView {
    /// Of the state at closure: same artifact and version, not another branch.
    pub matches_closure: bool,
    /// `t ≤ execution.t + budget_s`.
    pub in_budget: bool,
    /// This assessment gave the reward.
    pub is_reward: bool,
}

/// Scores one execution (docs/format.md §4).
pub fn score(exec: &Execution) -> Outcome {
    let Some(closure) = &exec.closure else {
        return Outcome::Excluded(Exclusion::Open);
    };
    if closure.record.artifact.is_none() {
        return Outcome::Dummy;
    }
    exec.assessments
        .iter()
        .enumerate()
        .find(|(_, a)| a.record.valid && of_closure_state(exec, a) && in_budget(exec, a.record.t))
        .map_or(Outcome::Excluded(Exclusion::NoValidReward), |(i, a)| {
            Outcome::Scored {
                reward: a.record.score.unwrap_or(0.0),
                assessment: i,
            }
        })
}

/// Whether an assessment is of the artifact state available at closure: same artifact and
/// version, and not of another branch (when both the assessment names its `branch` and the
/// closure its `committed` request, they must agree).
fn of_closure_state(exec: &Execution, a: &Assessment) -> bool {
    of_closure_version(exec, a) && of_committed_branch(exec, a)
}

/// Same artifact and version as the closure's.
pub(crate) fn of_closure_version(exec: &Execution, a: &Assessment) -> bool {
    exec.closure.as_ref().is_some_and(|c| {
        c.record.artifact.as_ref() == Some(&a.record.artifact)
            && c.record.version.as_ref() == Some(&a.record.version)
    })
}

/// Not of another branch than the committed request (true when either side names none).
pub(crate) fn of_committed_branch(exec: &Execution, a: &Assessment) -> bool {
    let committed = exec
        .closure
        .as_ref()
        .and_then(|c| c.record.committed.as_ref());
    match (&a.record.branch, committed) {
        (Some(b), Some(committed)) => b == committed,
        _ => true,
    }
}

/// `t ≤ execution.t + budget_s` (always, without a budget).
pub(crate) fn in_budget(exec: &Execution, t: f64) -> bool {
    exec.budget().is_none_or(|b| t <= exec.start() + b)
}

/// Every assessment of `exec` with its relation to the closure and reward.
pub fn assessment_views(exec: &Execution, outcome: &Outcome) -> Vec<AssessmentView> {
    exec.assessments
        .iter()
        .enumerate()
        .map(|(i, a)| AssessmentView {
            matches_closure: of_closure_state(exec, a),
            in_budget: in_budget(exec, a.record.t),
            is_reward: matches!(outcome, Outcome::Scored { assessment, .. } if *assessment == i),
        })
        .collect()
}

/// How advantages are computed from rewards within a GRPO group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AdvantageMode {
    /// `reward − group mean` (Dr. GRPO).
    #[default]
    DrGrpo,
    /// `(reward − mean) / (std + 1e-6)`, std with Bessel's correction (as `torch.std`).
    Grpo,
    /// No advantage field.
    None,
}

impl gyre_format::named::Named for AdvantageMode {
    const ALL: &'static [Self] = &[
        AdvantageMode::DrGrpo,
        AdvantageMode::Grpo,
        AdvantageMode::None,
    ];

    fn name(self) -> &'static str {
        match self {
            AdvantageMode::DrGrpo => "drgrpo",
            AdvantageMode::Grpo => "grpo",
            AdvantageMode::None => "none",
        }
    }

    fn help(self) -> &'static str {
        match self {
            AdvantageMode::DrGrpo => "reward − group mean (Dr. GRPO)",
            AdvantageMode::Grpo => "(reward − mean) / (std + 1e-6)",
            AdvantageMode::None => "No advantage field",
        }
    }
}

/// Advantage of every execution (`None` when excluded, without a group, or mode `none`).
///
/// `outcomes[i]` belongs to `execs[i]`.
pub fn advantages(
    execs: &[Execution],
    outcomes: &[Outcome],
    mode: AdvantageMode,
) -> Vec<Option<f64>> {
    if mode == AdvantageMode::None {
        return vec![None; execs.len()];
    }
    let stats = group_stats(
        execs
            .iter()
            .zip(outcomes)
            .filter_map(|(e, o)| Some((group_key(e.group()?), o.reward()?))),
    );
    execs
        .iter()
        .zip(outcomes)
        .map(|(e, o)| {
            let r = o.reward()?;
            Some(advantage(r, stats[&group_key(e.group()?)], mode))
        })
        .collect()
}

/// Mean and standard deviation (Bessel's correction; 0 for a group of one) of each group's
/// rewards, given `(group key, reward)` of the counted executions in batch order (the order
/// fixes the floating-point sums).
pub fn group_stats(
    members: impl IntoIterator<Item = (String, f64)>,
) -> HashMap<String, (f64, f64)> {
    let mut groups: HashMap<String, Vec<f64>> = HashMap::new();
    for (k, r) in members {
        groups.entry(k).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(k, rs)| (k, mean_std(&rs)))
        .collect()
}

/// Mean and sample standard deviation of `rs` (not empty). Computed directly; when that
/// overflows (squares of rewards near 1e300), again on the rewards divided by a power of two, which
/// is exact, so every result that is representable comes out finite and the usual cases are
/// bit for bit the textbook formula.
fn mean_std(rs: &[f64]) -> (f64, f64) {
    let direct = |rs: &mut dyn Iterator<Item = f64>| {
        let rs: Vec<f64> = rs.collect();
        let n = rs.len() as f64;
        let mean = rs.iter().sum::<f64>() / n;
        let std = if rs.len() > 1 {
            (rs.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        (mean, std)
    };
    let (mean, std) = direct(&mut rs.iter().copied());
    if mean.is_finite() && std.is_finite() {
        return (mean, std);
    }
    let largest = rs.iter().fold(0.0f64, |m, r| m.max(r.abs()));
    let scale = 2f64.powi(largest.log2().ceil() as i32);
    let (mean, std) = direct(&mut rs.iter().map(|r| r / scale));
    (mean * scale, std * scale)
}

/// The advantage of `reward` in a group with `(mean, std)` (mode `drgrpo` or `grpo`).
pub fn advantage(reward: f64, (mean, std): (f64, f64), mode: AdvantageMode) -> f64 {
    match mode {
        AdvantageMode::Grpo => (reward - mean) / (std + 1e-6),
        _ => reward - mean,
    }
}

/// Groups compare by their JSON text, so `"g1"` and `1` are different groups.
pub fn group_key(g: &serde_json::Value) -> String {
    g.to_string()
}

#[cfg(test)]
mod tests {
    use super::mean_std;

    #[test]
    fn group_statistics_stay_finite_for_the_largest_scores() {
        let (mean, std) = mean_std(&[1e300, -1e300, 1e300, 1e300]);
        assert_eq!(mean, 5e299);
        assert!((std / 1e300 - 1.0).abs() < 1e-12, "{std}");
        for r in [1e300, -1e300] {
            assert!((r - mean).is_finite() && ((r - mean) / (std + 1e-6)).is_finite());
        }
    }

    #[test]
    fn ordinary_scores_give_the_textbook_figures_bit_for_bit() {
        let rs = [0.5, 0.0, 1.0, 0.1];
        let mean = rs.iter().sum::<f64>() / 4.0;
        let std = (rs.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
        assert_eq!(mean_std(&rs), (mean, std));
        assert_eq!(mean_std(&[0.7]), (0.7, 0.0));
    }
}
