//! Why the tree branches where it does (docs/format.md §2, read for people): for each request, the
//! reason its path leaves the others (a retry, a divergence inside an earlier output, a
//! sub-agent or compaction at the root…), where a path parts from its nearest sibling branch,
//! and which context tokens are a harness's re-serialisation of an earlier output.
//!
//! Nothing here decides anything the tree decides; it names the tree's shape. `gyre stats`,
//! `gyre why` and the inspector all read it from here.

use std::collections::HashMap;

use serde::Serialize;

use super::execution::Execution;
use super::tree::{NodeId, NodeKind, ROOT};
use gyre_format::record::{Actor, Purpose, Source};

/// Why a request sits where it does among the execution's requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Link {
    /// First request of the main agent's context.
    Root,
    /// A sub-agent's own context, at the root.
    SubAgent,
    /// A main-agent context started again after compaction (summary put back).
    Compaction,
    /// A new main-agent context that is not a compaction.
    NewContext,
    /// An evaluator's context at the root.
    Evaluator,
    /// Continues the previous request (its output is on this path).
    Continue,
    /// An independent sample on exactly the same context as request `of`.
    Retry {
        /// The earlier sample.
        of: u32,
    },
    /// Branches inside request `of`'s output after `offset` output tokens: the context re-sent
    /// differs from what was sampled (re-serialised or truncated content).
    Diverge {
        /// Whose output.
        of: u32,
        /// Output tokens kept before the branch.
        offset: u32,
    },
    /// Continues request `of` with a different context than an earlier continuation `other`
    /// (another tool result, say).
    ContextBranch {
        /// The request continued.
        of: u32,
        /// The earlier continuation it differs from.
        other: u32,
    },
}

impl Link {
    /// Short machine name (`retry`, `diverge`, …), as `gyre stats --json` counts them.
    pub fn name(&self) -> &'static str {
        match self {
            Link::Root => "root",
            Link::SubAgent => "sub-agent",
            Link::Compaction => "compaction",
            Link::NewContext => "new-context",
            Link::Evaluator => "evaluator",
            Link::Continue => "continue",
            Link::Retry { .. } => "retry",
            Link::Diverge { .. } => "diverge",
            Link::ContextBranch { .. } => "context-branch",
        }
    }

    /// The reason in words, naming requests through `id`.
    pub fn describe(&self, id: &dyn Fn(u32) -> String) -> String {
        match self {
            Link::Root => "first request of the main agent's context".into(),
            Link::SubAgent => "sub-agent: its own context, branching at the root".into(),
            Link::Compaction => {
                "compaction: a new context with the summary put back (branch at the root)".into()
            }
            Link::NewContext => "a new main-agent context (branch at the root)".into(),
            Link::Evaluator => "evaluator request: its context branches at the root".into(),
            Link::Continue => "continues the request above".into(),
            Link::Retry { of } => format!("independent sample: same context as {}", id(*of)),
            Link::Diverge { of, offset } => format!(
                "branches inside {}'s output after {offset} tokens: the context re-sent differs \
                 from what was sampled (re-serialised content)",
                id(*of)
            ),
            Link::ContextBranch { of, other } => format!(
                "continues {} with a different context than {}",
                id(*of),
                id(*other)
            ),
        }
    }
}

/// One request's place: why it is there and the request it hangs under (`None` at the root).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// Why it is here.
    pub link: Link,
    /// The request it continues or branches from.
    pub parent: Option<u32>,
}

/// The place of every request of `exec`, in request order.
pub fn places(exec: &Execution) -> Vec<Place> {
    let tree = &exec.tree;
    // Which requests' outputs end at each node (the node holding its last piece).
    let mut ends_at: HashMap<NodeId, Vec<u32>> = HashMap::new();
    for (i, r) in exec.requests.iter().enumerate() {
        ends_at.entry(r.output_node).or_default().push(i as u32);
    }
    let mut places: Vec<Place> = Vec::with_capacity(exec.requests.len());
    for i in 0..exec.requests.len() as u32 {
        let out = output_head(exec, i);
        let attach = tree.nodes[out as usize].parent;
        // An earlier output on exactly the same context: an independent sample.
        let retry_of = tree.nodes[attach as usize]
            .children
            .iter()
            .filter(|&&c| c != out && tree.nodes[c as usize].kind == NodeKind::Output)
            .map(|&c| tree.nodes[c as usize].owner)
            .filter(|&o| o < i)
            .min();
        // The nearest output above this request's own output; on the way, harness-written
        // assistant context standing beside a recorded output means that output was re-rendered
        // from its first token.
        let mut above = attach;
        let mut first_below = out;
        let mut rerendered: Option<u32> = None;
        while above != ROOT && tree.nodes[above as usize].kind != NodeKind::Output {
            let node = &tree.nodes[above as usize];
            if rerendered.is_none() {
                rerendered = rerendered_beside(exec, above).filter(|&o| o < i);
            }
            first_below = above;
            above = node.parent;
        }
        let (link, parent) = if let Some(of) = retry_of {
            // Beside the earlier sample, under the request both continue.
            (Link::Retry { of }, places[of as usize].parent)
        } else if let Some(of) = rerendered {
            (Link::Diverge { of, offset: 0 }, Some(of))
        } else if above == ROOT {
            (root_link(exec, i, &places), None)
        } else {
            let node = &tree.nodes[above as usize];
            let of = node.owner;
            if exec.requests[of as usize].output_node != above {
                (
                    Link::Diverge {
                        of,
                        offset: node.offset + node.len,
                    },
                    Some(of),
                )
            } else {
                // Another, earlier continuation through a different first context node.
                let other = tree.nodes[above as usize]
                    .children
                    .iter()
                    .filter(|&&c| c != first_below)
                    .filter_map(|&c| first_request_under(exec, c, &ends_at))
                    .filter(|&o| o < i)
                    .min();
                match other {
                    Some(other) => (Link::ContextBranch { of, other }, Some(of)),
                    None => (Link::Continue, Some(of)),
                }
            }
        };
        places.push(Place { link, parent });
    }
    places
}

/// The node holding the first piece of request `r`'s output (later splits may have cut it).
pub fn output_head(exec: &Execution, r: u32) -> NodeId {
    let tree = &exec.tree;
    let mut out = exec.requests[r as usize].output_node;
    loop {
        let parent = tree.nodes[out as usize].parent;
        let pn = &tree.nodes[parent as usize];
        if parent != ROOT && pn.kind == NodeKind::Output && pn.owner == r {
            out = parent;
        } else {
            return out;
        }
    }
}

/// For a context node `n` whose first token is harness-written assistant content: the earliest
/// request whose recorded output starts beside it (the harness re-rendered that output from its
/// first token instead of restoring it). Beside a piece of a split output the branch is inside
/// that output instead, and this answers `None`.
fn rerendered_beside(exec: &Execution, n: NodeId) -> Option<u32> {
    let tree = &exec.tree;
    let node = &tree.nodes[n as usize];
    if node.kind != NodeKind::Context
        || tree.nodes[node.parent as usize].kind == NodeKind::Output
        || exec.requests[node.owner as usize].source_at(node.offset) != Source::Assistant
    {
        return None;
    }
    tree.nodes[node.parent as usize]
        .children
        .iter()
        .filter(|&&c| c != n && tree.nodes[c as usize].kind == NodeKind::Output)
        .map(|&c| tree.nodes[c as usize].owner)
        .min()
}

/// The first request (lowest index) whose output lies at or below node `n`.
fn first_request_under(
    exec: &Execution,
    n: NodeId,
    ends_at: &HashMap<NodeId, Vec<u32>>,
) -> Option<u32> {
    let tree = &exec.tree;
    let mut best: Option<u32> = None;
    let mut stack = vec![n];
    while let Some(m) = stack.pop() {
        if let Some(rs) = ends_at.get(&m) {
            for &r in rs {
                best = Some(best.map_or(r, |b| b.min(r)));
            }
        }
        stack.extend_from_slice(&tree.nodes[m as usize].children);
    }
    best
}

fn root_link(exec: &Execution, i: u32, earlier: &[Place]) -> Link {
    let r = &exec.requests[i as usize];
    if r.actor == Actor::Evaluator {
        return Link::Evaluator;
    }
    if r.agent != "main" {
        return Link::SubAgent;
    }
    let main_root_before = earlier.iter().enumerate().any(|(j, p)| {
        p.parent.is_none()
            && exec.requests[j].agent == "main"
            && exec.requests[j].actor == Actor::Policy
    });
    if !main_root_before {
        return Link::Root;
    }
    let has_summary = r.spans.iter().any(|s| s.source == Source::Summary);
    let after_summary = exec.requests[..i as usize]
        .iter()
        .rev()
        .find(|q| q.agent == "main" && q.actor == Actor::Policy)
        .is_some_and(|q| q.purpose == Purpose::Summary);
    if has_summary || after_summary {
        Link::Compaction
    } else {
        Link::NewContext
    }
}

/// Where a path parts from another branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Parting {
    /// At the root: the two share no prefix.
    Root,
    /// Inside request `owner`'s output, after `offset` of its tokens.
    InsideOutput {
        /// Request index whose output holds the parting point.
        owner: u32,
        /// Output tokens before the parting point.
        offset: u32,
    },
    /// After an output (or inside context) first sent by request `owner`.
    AfterNode {
        /// Request index that owns the node above the parting point.
        owner: u32,
        /// Whether that node is an output.
        output: bool,
    },
}

/// The nearest sibling branch of a request's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sibling {
    /// The first request (lowest index) whose path goes down the other branch.
    pub request: u32,
    /// Tokens both paths share.
    pub common: u64,
    /// Where they part.
    pub parting: Parting,
}

/// The nearest sibling branch of request `r`'s path: the deepest point (before the path's end)
/// where another branch leaves it, and the first request down that branch.
pub fn sibling(exec: &Execution, r: u32) -> Option<Sibling> {
    let tree = &exec.tree;
    let nodes = tree.path_nodes(exec.requests[r as usize].output_node);
    let mut found = None;
    for (k, &n) in nodes.iter().enumerate().rev() {
        let parent = tree.nodes[n as usize].parent;
        if let Some(&other) = tree.nodes[parent as usize]
            .children
            .iter()
            .find(|&&c| c != n)
        {
            found = Some((k, parent, other));
            break;
        }
    }
    let (k, parent, other) = found?;
    let mut ends: HashMap<NodeId, u32> = HashMap::new();
    for (i, q) in exec.requests.iter().enumerate() {
        ends.entry(q.output_node).or_insert(i as u32);
    }
    let mut stack = vec![other];
    let mut sib: Option<u32> = None;
    while let Some(m) = stack.pop() {
        if let Some(&i) = ends.get(&m) {
            sib = Some(sib.map_or(i, |s| s.min(i)));
        }
        stack.extend_from_slice(&tree.nodes[m as usize].children);
    }
    let common = nodes[..k]
        .iter()
        .map(|&n| tree.nodes[n as usize].len as u64)
        .sum();
    let parting = if parent == ROOT {
        Parting::Root
    } else {
        let pn = &tree.nodes[parent as usize];
        let split_output =
            pn.kind == NodeKind::Output && exec.requests[pn.owner as usize].output_node != parent;
        if split_output {
            Parting::InsideOutput {
                owner: pn.owner,
                offset: pn.offset + pn.len,
            }
        } else {
            Parting::AfterNode {
                owner: pn.owner,
                output: pn.kind == NodeKind::Output,
            }
        }
    };
    Some(Sibling {
        request: sib?,
        common,
        parting,
    })
}

/// A context token that re-serialises an earlier output: the harness sent `of`'s output back
/// in a form that departs from the recorded tokens at output token `diverges_at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Reserialised {
    /// The request whose output was re-serialised (index).
    pub of: u32,
    /// Its output tokens kept before the re-serialised text departs.
    pub diverges_at: u32,
}

/// Whether context token `i` of node `n` is re-serialised assistant text: its span is
/// `assistant`, the span runs from the start of the node, and the node branches off a recorded
/// output (inside it, or beside its first token).
pub fn reserialised(exec: &Execution, n: NodeId, i: u32) -> Option<Reserialised> {
    let tree = &exec.tree;
    let node = &tree.nodes[n as usize];
    if node.kind != NodeKind::Context {
        return None;
    }
    let owner = &exec.requests[node.owner as usize];
    let offset = node.offset + i;
    if owner.span_at(offset)?.source != Source::Assistant {
        return None;
    }
    // The span's start is the previous span's end; the first kept span starts at or before
    // any context this request brought in.
    let k = owner.spans.partition_point(|s| s.end <= offset);
    if k > 0 && owner.spans[k - 1].end > node.offset {
        return None;
    }
    let parent = &tree.nodes[node.parent as usize];
    if parent.kind == NodeKind::Output {
        return Some(Reserialised {
            of: parent.owner,
            diverges_at: parent.offset + parent.len,
        });
    }
    rerendered_beside(exec, n).map(|of| Reserialised { of, diverges_at: 0 })
}

/// Requests by branch reason (`retry`, `diverge`, `sub-agent`…), for `gyre stats`.
pub fn counts(exec: &Execution) -> Vec<(&'static str, u64)> {
    let mut out: Vec<(&'static str, u64)> = Vec::new();
    for p in places(exec) {
        match out.iter_mut().find(|(k, _)| *k == p.link.name()) {
            Some((_, n)) => *n += 1,
            None => out.push((p.link.name(), 1)),
        }
    }
    out
}
