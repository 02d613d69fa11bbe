//! "Why was this path (not) drawn?" — the fate of one request under admission (docs/format.md §5).
//!
//! [`why`] answers for any request of an execution: whether it is a candidate leaf (and if not,
//! which policy output lies below it), how it stood at every draw (class drawn from, its
//! weight, its probability, the winner), and its fate: drawn at draw k, lost every draw until
//! J_max, weight reached 0 at draw k (its tokens claimed by other leaves), class not in the
//! priority, execution excluded or dummy, or not a candidate at all.
//!
//! The answer is read off the engine's own admission log; nothing is re-drawn. [`Why`] is a
//! stable, serialisable value shared by `gyre why --json`, the inspector and the Python binding;
//! later additions only add fields.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::admit::{Admission, Class, Stop, trainable_node};
use super::execution::Execution;
use super::lens::RequestLens;
use super::score::Outcome;
use super::tree::{NodeId, NodeKind};
use gyre_format::record::Actor;

/// What became of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    /// Drawn at draw [`Why::draw`].
    Drawn,
    /// A candidate with weight left that lost every draw until J_max stopped the draws.
    #[serde(rename = "j_max")]
    JMax,
    /// Its weight reached 0 at draw [`Why::draw`]: every trainable token on its path was
    /// claimed by other leaves (see [`Why::claims`]); `draw` is null when it never had any.
    Exhausted,
    /// A candidate of a class the priority does not list: never drawn.
    ClassNotListed,
    /// The execution is excluded (see [`Why::reason`]): nothing is drawn.
    Excluded,
    /// The execution is a dummy: one zero-reward placeholder, no draws.
    Dummy,
    /// Not a candidate leaf (see [`Why::reason`] and [`Why::below`]).
    NotCandidate,
}

impl Fate {
    /// The JSON name (`drawn`, `j_max`, …).
    pub fn name(self) -> &'static str {
        match self {
            Fate::Drawn => "drawn",
            Fate::JMax => "j_max",
            Fate::Exhausted => "exhausted",
            Fate::ClassNotListed => "class_not_listed",
            Fate::Excluded => "excluded",
            Fate::Dummy => "dummy",
            Fate::NotCandidate => "not_candidate",
        }
    }
}

impl fmt::Display for Fate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the request stood at one draw.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Standing {
    /// The draw (1-based).
    pub draw: u32,
    /// The class this draw drew from.
    pub class: Class,
    /// The request's weight before the draw: unclaimed trainable tokens on its path (its own
    /// output's unclaimed tokens when it is not a candidate).
    pub weight: u64,
    /// Its probability in this draw (0 when it was not in the draw's pool).
    pub p: f64,
    /// The leaf drawn.
    pub winner: String,
    /// It was among the draw's candidates.
    pub in_pool: bool,
    /// Its slice of `[0, total)` when in the pool, as `[from, to)`.
    pub slice: Option<[u64; 2]>,
}

/// Tokens of the request's path (its own output, when it is not a candidate) claimed by one
/// draw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Claim {
    /// The draw (1-based).
    pub draw: u32,
    /// That draw's leaf.
    pub leaf: String,
    /// Tokens it claimed.
    pub tokens: u64,
}

/// Why a request was (not) drawn. Serialised as `gyre why --json` writes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Why {
    /// Execution id.
    pub execution: String,
    /// Request id.
    pub request: String,
    /// Its class, for a policy request of the execution.
    pub class: Option<Class>,
    /// It is a candidate leaf (docs/format.md §5: a policy request with no policy output below it).
    pub candidate: bool,
    /// What became of it.
    pub fate: Fate,
    /// The draw that drew it (`drawn`) or that took its last weight (`exhausted`).
    pub draw: Option<u32>,
    /// Its standing at every draw of the execution, in order.
    pub draws: Vec<Standing>,
    /// Not a candidate: the first policy request whose output lies below its output.
    pub below: Option<String>,
    /// The reason in words where the fate alone does not say it (exclusion reason, evaluator,
    /// after closure, the output below).
    pub reason: Option<String>,
    /// Trainable tokens on its path (its own output when it is not a candidate).
    pub weight: u64,
    /// Of those, the ones no draw claimed.
    pub unclaimed: u64,
    /// Who claimed the rest, by draw.
    pub claims: Vec<Claim>,
    /// Draws made in the execution.
    pub draws_made: u32,
    /// The priority the draws used, highest first.
    pub priority: Vec<Class>,
    /// Its odds over many seeds and what a priority change would do, when asked for
    /// (`gyre why --seeds N`; see [`super::lens`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lens: Option<RequestLens>,
    /// A policy request of the execution whose output the record marks `not_trainable` (it
    /// has no class; `reason` says why). Not serialised: `reason` carries it in the JSON.
    #[serde(skip)]
    not_trainable: bool,
}

/// The fate of request `request` (index) of `exec`, whose outcome and admission are given.
pub fn why(exec: &Execution, outcome: &Outcome, admission: &Admission, request: u32) -> Why {
    let tree = &exec.tree;
    let r = &exec.requests[request as usize];
    let id = |i: u32| exec.requests[i as usize].id.clone();
    let candidate = admission.candidates.iter().find(|c| c.request == request);
    let class = r.trainable().then(|| Class::of(&r.agent, r.purpose));
    // The tokens that decide its weight: its path's trainable nodes for a candidate, its own
    // output's otherwise.
    let nodes: Vec<NodeId> = tree
        .path_nodes(r.output_node)
        .into_iter()
        .filter(|&n| trainable_node(exec, n))
        .filter(|&n| candidate.is_some() || tree.nodes[n as usize].owner == request)
        .collect();
    let len = |n: NodeId| tree.nodes[n as usize].len as u64;
    let weight: u64 = nodes.iter().map(|&n| len(n)).sum();
    let mut per_draw: BTreeMap<u32, u64> = BTreeMap::new();
    for &n in &nodes {
        if let Some(k) = admission.claimed_by[n as usize] {
            *per_draw.entry(k).or_default() += len(n);
        }
    }
    let claims: Vec<Claim> = per_draw
        .iter()
        .map(|(&k, &tokens)| Claim {
            draw: k,
            leaf: id(admission.draws[k as usize - 1].chosen),
            tokens,
        })
        .collect();
    let claimed: u64 = per_draw.values().sum();
    let mut left = weight;
    let mut exhausted_at = None;
    let draws: Vec<Standing> = admission
        .draws
        .iter()
        .enumerate()
        .map(|(k, d)| {
            let k = k as u32 + 1;
            let pooled = d.candidates.iter().find(|w| w.request == request);
            let standing = Standing {
                draw: k,
                class: d.class,
                weight: left,
                p: pooled.map_or(0.0, |w| d.probability(w)),
                winner: id(d.chosen),
                in_pool: pooled.is_some(),
                slice: pooled.map(|w| [w.from, w.to()]),
            };
            let before = left;
            left -= per_draw.get(&k).copied().unwrap_or(0);
            if before > 0 && left == 0 && exhausted_at.is_none() {
                exhausted_at = Some(k);
            }
            standing
        })
        .collect();
    let drawn_at = admission
        .draws
        .iter()
        .position(|d| d.chosen == request)
        .map(|k| k as u32 + 1);
    let below = (r.trainable() && candidate.is_none())
        .then(|| first_policy_output_below(exec, request))
        .flatten();
    let (fate, draw, reason) = if r.actor == Actor::Evaluator {
        (
            Fate::NotCandidate,
            None,
            Some("an evaluator request: its output is never trainable".to_string()),
        )
    } else if r.after_closure {
        (
            Fate::NotCandidate,
            None,
            Some("recorded after the closure: not part of the execution".to_string()),
        )
    } else if let Some(why) = &r.not_trainable {
        (
            Fate::NotCandidate,
            None,
            Some(format!("not trainable: {why}")),
        )
    } else if let Outcome::Excluded(e) = outcome {
        (Fate::Excluded, None, Some(e.to_string()))
    } else if let Outcome::Dummy = outcome {
        (Fate::Dummy, None, None)
    } else if candidate.is_none() {
        let reason = below.map(|b| format!("{}'s output lies below its output", id(b)));
        (Fate::NotCandidate, None, reason)
    } else if !admission
        .priority
        .contains(&class.expect("candidates are policy requests"))
    {
        (Fate::ClassNotListed, None, None)
    } else if let Some(k) = drawn_at {
        (Fate::Drawn, Some(k), None)
    } else if left == 0 {
        (Fate::Exhausted, exhausted_at, None)
    } else {
        debug_assert_eq!(admission.stop, Stop::JmaxReached);
        (Fate::JMax, None, None)
    };
    Why {
        execution: exec.id.clone(),
        request: r.id.clone(),
        class,
        candidate: candidate.is_some(),
        fate,
        draw,
        draws,
        below: below.map(id),
        reason,
        weight,
        unclaimed: weight - claimed,
        claims,
        draws_made: admission.draws.len() as u32,
        priority: admission.priority.clone(),
        lens: None,
        not_trainable: r.actor == Actor::Policy && !r.after_closure && r.not_trainable.is_some(),
    }
}

/// The first policy request (lowest index) whose output lies strictly below request `r`'s.
fn first_policy_output_below(exec: &Execution, r: u32) -> Option<u32> {
    let tree = &exec.tree;
    let mut best: Option<u32> = None;
    let mut stack = tree.nodes[exec.requests[r as usize].output_node as usize]
        .children
        .clone();
    while let Some(n) = stack.pop() {
        let node = &tree.nodes[n as usize];
        if node.kind == NodeKind::Output && node.owner != r && trainable_node(exec, n) {
            best = Some(best.map_or(node.owner, |b| b.min(node.owner)));
        }
        stack.extend_from_slice(&node.children);
    }
    best
}

impl Why {
    /// What the request is, in a word: its class, or why it has none (a policy output marked
    /// not trainable, or not a policy request of the execution at all).
    pub fn role(&self) -> &'static str {
        match (self.class, self.not_trainable) {
            (Some(c), _) => c.name(),
            (None, true) => "policy output, not trainable",
            (None, false) => "not a policy request",
        }
    }

    /// The fate in one line: `drawn at draw 2 of 4`, `weight reached 0 at draw 3 (its tokens
    /// claimed by r3, r5)`, …
    pub fn summary(&self) -> String {
        let leaves = || {
            self.claims
                .iter()
                .map(|c| format!("{} (draw {}, {} tok)", c.leaf, c.draw, c.tokens))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self.fate {
            Fate::Drawn => format!(
                "drawn at draw {} of {}",
                self.draw.unwrap_or(0),
                self.draws_made
            ),
            Fate::JMax => format!(
                "lost every draw until J_max stopped after {} draw{}; {} of its {} trainable \
                 path tokens left out",
                self.draws_made,
                if self.draws_made == 1 { "" } else { "s" },
                self.unclaimed,
                self.weight
            ),
            Fate::Exhausted => match self.draw {
                Some(k) => format!(
                    "weight reached 0 at draw {k}: its tokens were claimed by {}",
                    leaves()
                ),
                None => "no trainable token on its path: weight 0 from the start".into(),
            },
            Fate::ClassNotListed => format!(
                "class {} is not in the priority {}: never drawn",
                self.class.map_or("?", Class::name),
                self.priority
                    .iter()
                    .map(|c| c.name())
                    .collect::<Vec<_>>()
                    .join(">")
            ),
            Fate::Excluded => format!(
                "execution excluded ({}): nothing is drawn",
                self.reason.as_deref().unwrap_or("?")
            ),
            Fate::Dummy => "dummy execution: one zero-reward placeholder, no draws".into(),
            Fate::NotCandidate => match (&self.reason, self.claims.is_empty()) {
                (Some(r), true) => format!("not a candidate: {r}"),
                (Some(r), false) => format!(
                    "not a candidate: {r}; its output was claimed by {}",
                    leaves()
                ),
                (None, _) => "not a candidate".into(),
            },
        }
    }

    /// The readable report `gyre why` prints (one line per entry, no trailing newlines).
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "{} · {} · {}{} · {}",
            self.execution,
            self.request,
            self.role(),
            if self.candidate { " · candidate" } else { "" },
            self.fate
        )];
        out.push(self.summary());
        let what = if self.candidate { "path" } else { "own output" };
        out.push(format!(
            "{} trainable tokens on its {what}, {} left unclaimed",
            self.weight, self.unclaimed
        ));
        for s in &self.draws {
            let standing = if s.in_pool {
                let [a, b] = s.slice.unwrap_or_default();
                format!("w={} p={} slice [{a}, {b})", s.weight, prob_text(s.p))
            } else {
                format!("w={} not in this draw's pool", s.weight)
            };
            let mark = if s.winner == self.request {
                "  ◀ this request"
            } else {
                ""
            };
            out.push(format!(
                "  draw {}  class {:<12} {standing}  winner {}{mark}",
                s.draw, s.class, s.winner
            ));
        }
        if let Some(l) = &self.lens {
            out.extend(l.lines());
        }
        out
    }
}

/// A probability with enough digits to compare candidates: `0.1963`, `<0.0001` for a live but
/// tiny one, `>0.9999` for a near-certain one that is not certain; `0` and `1.0000` only for
/// exactly zero and one (four rounded digits would show `1.0000` beside a live rival).
pub fn prob_text(p: f64) -> String {
    if p == 0.0 {
        "0".into()
    } else if p < 0.0001 {
        "<0.0001".into()
    } else if (0.99995..1.0).contains(&p) {
        ">0.9999".into()
    } else {
        format!("{p:.4}")
    }
}
