//! The whole scoring story of one execution (docs/format.md §4, read for people): the closure record, the
//! assessments grouped per artifact version with a verdict for each group, and for every
//! assessment whether it gave the reward and, if not, every reason it did not count.
//!
//! The reward itself is decided in [`super::score`]; this module explains that decision with the
//! same tests, so the two cannot disagree.

use serde::Serialize;
use serde_json::Value;

use super::execution::Execution;
use super::score::{self, Outcome};

/// The closure record, with its time relative to the execution start.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClosureFacts {
    /// Seconds after the execution start.
    pub t: f64,
    /// `completed`, `timeout` or `error`.
    pub status: &'static str,
    /// The committed request id, when given.
    pub committed: Option<String>,
    /// The artifact available at closure (`None`: no assessable work).
    pub artifact: Option<Value>,
    /// Its version.
    pub version: Option<Value>,
    /// Line of the record in its file.
    pub line: u64,
}

/// One reason an assessment does not give the reward.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Miss {
    /// The execution has no closure (it is open).
    NoClosure,
    /// The closure names no artifact (a dummy execution).
    NoArtifact,
    /// Of another artifact or version than the closure's.
    OtherVersion,
    /// Of another branch than the closure's committed request.
    OtherBranch {
        /// The branch assessed.
        branch: String,
        /// The committed request.
        committed: String,
    },
    /// The assessment failed.
    Failed,
    /// Made after the budget end (times relative to the execution start).
    AfterBudget {
        /// Its time.
        t: f64,
        /// The budget end.
        deadline: f64,
    },
    /// It would count, but an earlier assessment (index) already gave the reward.
    LaterThanReward {
        /// Index of the reward assessment in the execution's assessments.
        reward: usize,
    },
}

impl Miss {
    /// The reason in words.
    pub fn text(&self) -> String {
        match self {
            Miss::NoClosure => "no closure: the execution is open".into(),
            Miss::NoArtifact => "the closure names no artifact (dummy)".into(),
            Miss::OtherVersion => "another version than the closure's".into(),
            Miss::OtherBranch { branch, committed } => {
                format!("branch {branch}, not the committed {committed}")
            }
            Miss::Failed => "failed".into(),
            Miss::AfterBudget { t, deadline } => {
                format!("after the budget end ({} > {})", rel(*t), rel(*deadline))
            }
            Miss::LaterThanReward { .. } => "later than the reward".into(),
        }
    }
}

/// How one assessment stands.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Standing {
    /// Index in the execution's assessments (file order).
    pub index: usize,
    /// Seconds after the execution start.
    pub t: f64,
    /// It gave the reward.
    pub reward: bool,
    /// Every reason it did not (empty for the reward).
    pub misses: Vec<Miss>,
}

/// What a group of assessments of one artifact version amounts to.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// The closure's version; assessment `assessment` gave the reward.
    Reward {
        /// Index of the reward assessment.
        assessment: usize,
        /// The reward.
        score: f64,
    },
    /// The closure's version, but none of its assessments counts.
    NoneCounts,
    /// Not the version available at closure: kept and shown, never the reward.
    NotClosureVersion,
    /// The execution has no closure.
    Open,
    /// The closure names no artifact.
    Dummy,
}

/// Assessments of one artifact version, in file order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    /// The artifact.
    pub artifact: Value,
    /// Its version.
    pub version: Value,
    /// Same artifact and version as the closure's.
    pub closure_version: bool,
    /// Indices into the execution's assessments, in file order.
    pub members: Vec<usize>,
    /// What the whole group amounts to.
    pub verdict: Verdict,
}

impl Group {
    /// The header line of the group: `patch v2 · the closure's version · reward 0.50`.
    pub fn header(&self) -> String {
        let what = format!(
            "{} v{}",
            value_text(&self.artifact),
            value_text(&self.version)
        );
        let verdict = match &self.verdict {
            Verdict::Reward { score, .. } => format!("the closure's version · reward {score}"),
            Verdict::NoneCounts => "the closure's version · no assessment counts".into(),
            Verdict::NotClosureVersion => "not the closure's version".into(),
            Verdict::Open => "no closure".into(),
            Verdict::Dummy => "the closure names no artifact".into(),
        };
        format!("{what} · {verdict}")
    }
}

/// The scoring story of one execution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scoring {
    /// Execution start (absolute, seconds).
    pub start: f64,
    /// Budget end relative to the start (`None`: unlimited).
    pub deadline: Option<f64>,
    /// The closure, when recorded.
    pub closure: Option<ClosureFacts>,
    /// Groups per artifact version, in order of first appearance.
    pub groups: Vec<Group>,
    /// Every assessment, in file order.
    pub standings: Vec<Standing>,
}

/// Explains the scoring of `exec`, whose outcome is `outcome`.
pub fn scoring(exec: &Execution, outcome: &Outcome) -> Scoring {
    let start = exec.start();
    let deadline = exec.budget();
    let closure = exec.closure.as_ref().map(|c| ClosureFacts {
        t: c.record.t - start,
        status: c.record.status.name(),
        committed: c.record.committed.clone(),
        artifact: c.record.artifact.clone(),
        version: c.record.version.clone(),
        line: c.at.line,
    });
    let reward = match outcome {
        Outcome::Scored { assessment, .. } => Some(*assessment),
        _ => None,
    };
    let standings: Vec<Standing> = exec
        .assessments
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut misses = Vec::new();
            match &exec.closure {
                None => misses.push(Miss::NoClosure),
                Some(c) if c.record.artifact.is_none() => misses.push(Miss::NoArtifact),
                Some(c) => {
                    if !score::of_closure_version(exec, a) {
                        misses.push(Miss::OtherVersion);
                    }
                    if !score::of_committed_branch(exec, a) {
                        misses.push(Miss::OtherBranch {
                            branch: a.record.branch.clone().unwrap_or_default(),
                            committed: c.record.committed.clone().unwrap_or_default(),
                        });
                    }
                }
            }
            if !a.record.valid {
                misses.push(Miss::Failed);
            }
            if !score::in_budget(exec, a.record.t) {
                misses.push(Miss::AfterBudget {
                    t: a.record.t - start,
                    deadline: deadline.unwrap_or(0.0),
                });
            }
            if misses.is_empty() && reward != Some(i) {
                if let Some(r) = reward {
                    misses.push(Miss::LaterThanReward { reward: r });
                }
            }
            Standing {
                index: i,
                t: a.record.t - start,
                reward: reward == Some(i),
                misses,
            }
        })
        .collect();
    let mut groups: Vec<Group> = Vec::new();
    for (i, a) in exec.assessments.iter().enumerate() {
        let r = &a.record;
        match groups
            .iter_mut()
            .find(|g| g.artifact == r.artifact && g.version == r.version)
        {
            Some(g) => g.members.push(i),
            None => groups.push(Group {
                artifact: r.artifact.clone(),
                version: r.version.clone(),
                closure_version: score::of_closure_version(exec, a),
                members: vec![i],
                verdict: Verdict::NoneCounts,
            }),
        }
    }
    for g in &mut groups {
        g.verdict = match &exec.closure {
            None => Verdict::Open,
            Some(c) if c.record.artifact.is_none() => Verdict::Dummy,
            Some(_) if !g.closure_version => Verdict::NotClosureVersion,
            Some(_) => match (reward, outcome) {
                (Some(r), Outcome::Scored { reward: score, .. }) if g.members.contains(&r) => {
                    Verdict::Reward {
                        assessment: r,
                        score: *score,
                    }
                }
                _ => Verdict::NoneCounts,
            },
        };
    }
    Scoring {
        start,
        deadline,
        closure,
        groups,
        standings,
    }
}

/// A time relative to the execution start: `+12.3 s`.
pub fn rel(t: f64) -> String {
    if t.abs() >= 1e7 {
        format!("{t:+.3e} s")
    } else {
        format!("{t:+.1} s")
    }
}

/// A JSON value as shown: strings without quotes, anything else as JSON.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
