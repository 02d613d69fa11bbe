//! Scoring at closure (SPEC §4) and group advantages.

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

/// Scores one execution (SPEC §4).
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
    let mut groups: HashMap<String, Vec<f64>> = HashMap::new();
    for (e, o) in execs.iter().zip(outcomes) {
        if let (Some(g), Some(r)) = (e.group(), o.reward()) {
            groups.entry(group_key(g)).or_default().push(r);
        }
    }
    let stats: HashMap<String, (f64, f64)> = groups
        .into_iter()
        .map(|(k, rs)| {
            let n = rs.len() as f64;
            let mean = rs.iter().sum::<f64>() / n;
            let std = if rs.len() > 1 {
                (rs.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
            } else {
                0.0
            };
            (k, (mean, std))
        })
        .collect();
    execs
        .iter()
        .zip(outcomes)
        .map(|(e, o)| {
            let r = o.reward()?;
            let (mean, std) = stats[&group_key(e.group()?)];
            Some(match mode {
                AdvantageMode::Grpo => (r - mean) / (std + 1e-6),
                _ => r - mean,
            })
        })
        .collect()
}

/// Groups compare by their JSON text, so `"g1"` and `1` are different groups.
fn group_key(g: &serde_json::Value) -> String {
    g.to_string()
}
