//! Provenance masks (docs/format.md §3): why any token is, or is not, a target.

use std::fmt;

use super::admit::{Admission, Stop, trainable_node};
use super::execution::{Execution, TokenIdentity};
use super::score::{Exclusion, Outcome};
use super::tree::NodeId;
use gyre_format::record::{Actor, Source};

/// The answer to "why is this token (not) a target".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Conditioning context from a span source.
    Context(Source),
    /// Output of an evaluator request.
    EvaluatorOutput,
    /// Output of a request recorded after the execution's closure.
    AfterClosure,
    /// Policy output the record marks `not_trainable`, with its reason.
    NotTrainable(Box<str>),
    /// Trainable, but the execution is excluded.
    Excluded(Exclusion),
    /// Trainable, but the execution is a zero-reward dummy (no targets).
    Dummy,
    /// A target of draw `draw` (1-based), whose leaf is request `leaf` (id).
    Claimed {
        /// The draw.
        draw: u32,
        /// Leaf request id.
        leaf: String,
    },
    /// Trainable and unclaimed: the draw cap stopped admission first.
    LeftOutJmax,
    /// Trainable and unclaimed: only candidates of classes missing from the priority reach it.
    LeftOutClass,
    /// Trainable and not claimed yet at the replay step shown.
    NotYetClaimed,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Context(s) => write!(f, "context:{s}"),
            Reason::EvaluatorOutput => f.write_str("evaluator output"),
            Reason::AfterClosure => f.write_str("after closure"),
            Reason::NotTrainable(why) => write!(f, "not trainable: {why}"),
            Reason::Excluded(e) => write!(f, "execution excluded: {e}"),
            Reason::Dummy => f.write_str("dummy execution: no targets"),
            Reason::Claimed { draw, leaf } => write!(f, "claimed by draw {draw} (leaf {leaf})"),
            Reason::LeftOutJmax => f.write_str("left out: J_max reached"),
            Reason::LeftOutClass => f.write_str("left out: class not in priority"),
            Reason::NotYetClaimed => f.write_str("not claimed yet"),
        }
    }
}

impl Reason {
    /// Whether the token is a target (of some draw up to the step considered).
    pub fn is_target(&self) -> bool {
        matches!(self, Reason::Claimed { .. })
    }
}

/// Reason for every token of node `n`, as of draw `step` (`None` = after all draws).
///
/// All tokens of a node share one reason: claims are per node, sources may vary by token,
/// so context nodes answer per token through [`token_reason`].
pub fn node_reason(
    exec: &Execution,
    outcome: &Outcome,
    admission: &Admission,
    n: NodeId,
    step: Option<u32>,
) -> Option<Reason> {
    let node = &exec.tree.nodes[n as usize];
    if node.kind != super::tree::NodeKind::Output {
        return None;
    }
    let req = &exec.requests[node.owner as usize];
    if req.after_closure {
        return Some(Reason::AfterClosure);
    }
    if let Some(why) = &req.not_trainable {
        return Some(Reason::NotTrainable(why.clone()));
    }
    if req.actor == Actor::Evaluator {
        return Some(Reason::EvaluatorOutput);
    }
    debug_assert!(trainable_node(exec, n));
    Some(match outcome {
        Outcome::Excluded(e) => Reason::Excluded(*e),
        Outcome::Dummy => Reason::Dummy,
        Outcome::Scored { .. } => match admission.claimed_by[n as usize] {
            Some(k) if step.is_none_or(|s| k <= s) => Reason::Claimed {
                draw: k,
                leaf: exec.requests[admission.draws[k as usize - 1].chosen as usize]
                    .id
                    .clone(),
            },
            _ if step.is_some_and(|s| (s as usize) < admission.draws.len()) => {
                Reason::NotYetClaimed
            }
            _ if admission.stop == Stop::JmaxReached && admission.drawable[n as usize] => {
                Reason::LeftOutJmax
            }
            _ => Reason::LeftOutClass,
        },
    })
}

/// Reason for token `i` of node `n` (see [`node_reason`]).
pub fn token_reason(
    exec: &Execution,
    outcome: &Outcome,
    admission: &Admission,
    n: NodeId,
    i: u32,
    step: Option<u32>,
) -> Reason {
    match exec.identity(n, i) {
        TokenIdentity::Context { source, .. } => Reason::Context(source),
        TokenIdentity::Output { .. } => node_reason(exec, outcome, admission, n, step)
            .expect("output nodes always have a reason"),
    }
}
