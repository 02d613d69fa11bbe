//! Display structure derived from the engine's tree: one node per request, and why each branch
//! exists. Nothing here decides anything the engine decides; it only names the shape of
//! [`Tree`](crate::engine::tree::Tree) for people.

use std::collections::HashMap;

use crate::engine::execution::Execution;
use crate::engine::record::{Actor, Purpose, Source};
use crate::engine::tree::{NodeId, NodeKind, ROOT};

/// Why a request sits where it does in the request tree.
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
    /// Branches inside request `of`'s output after `offset` output tokens (re-serialised or
    /// truncated content).
    Diverge {
        /// Whose output.
        of: u32,
        /// Output tokens kept before the branch.
        offset: u32,
    },
    /// Continues request `of` but with a different context than an earlier continuation
    /// (`other`), e.g. another tool result.
    ContextBranch {
        /// The request continued.
        of: u32,
        /// The earlier continuation it differs from.
        other: u32,
    },
}

impl Link {
    /// Whether the request starts a new root-level chain.
    pub fn is_root(&self) -> bool {
        matches!(
            self,
            Link::Root | Link::SubAgent | Link::Compaction | Link::NewContext | Link::Evaluator
        )
    }
}

/// One request as placed in the request tree.
#[derive(Clone, Debug)]
pub struct ReqPlace {
    /// Why it is here.
    pub link: Link,
    /// Display parent (`None` at the root).
    pub parent: Option<u32>,
    /// The continuation shown at the same level (first plain continuation).
    pub primary: Option<u32>,
    /// Other children, nested under this request.
    pub branches: Vec<u32>,
}

/// The request tree of one execution.
#[derive(Clone, Debug, Default)]
pub struct RequestTree {
    /// Placement per request index.
    pub places: Vec<ReqPlace>,
    /// Heads of root-level chains, in request order.
    pub roots: Vec<u32>,
    /// Display path (identifiers from the top) per request.
    pub paths: Vec<Vec<u32>>,
    /// The display tree: one item per chain header at the top.
    pub display: Vec<DNode>,
}

/// An item of the display tree (a chain header or a request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DNode {
    /// Request index, or `HEADER_BASE + k` for the k-th root chain.
    pub id: u32,
    /// Items nested under it.
    pub children: Vec<DNode>,
}

/// Identifiers at or above this are chain headers, not requests.
pub const HEADER_BASE: u32 = u32::MAX - (1 << 20);

impl RequestTree {
    /// Derives the request tree of `exec` from its token tree.
    pub fn new(exec: &Execution) -> Self {
        let tree = &exec.tree;
        let n = exec.requests.len();
        // Which request's output ends at each node (the node holding its last piece).
        let mut ends_at: HashMap<NodeId, Vec<u32>> = HashMap::new();
        for (i, r) in exec.requests.iter().enumerate() {
            ends_at.entry(r.output_node).or_default().push(i as u32);
        }
        let mut places: Vec<ReqPlace> = Vec::with_capacity(n);
        for (i, r) in exec.requests.iter().enumerate() {
            let i = i as u32;
            // The first piece of this request's output (later splits may have cut it).
            let mut out = r.output_node;
            loop {
                let parent = tree.nodes[out as usize].parent;
                let pn = &tree.nodes[parent as usize];
                if parent != ROOT && pn.kind == NodeKind::Output && pn.owner == i {
                    out = parent;
                } else {
                    break;
                }
            }
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
            // assistant context standing beside a recorded output means that output was
            // re-rendered from its first token (one of the cases `gyre stats` counts among
            // divergences, which also counts any other context beside an output's start).
            let mut above = attach;
            let mut first_below = out;
            let mut rerendered: Option<u32> = None;
            while above != ROOT && tree.nodes[above as usize].kind != NodeKind::Output {
                let node = &tree.nodes[above as usize];
                // (Beside a piece of a split output, the branch is inside that output instead.)
                if rerendered.is_none()
                    && tree.nodes[node.parent as usize].kind != NodeKind::Output
                    && exec.requests[node.owner as usize].source_at(node.offset)
                        == Source::Assistant
                {
                    rerendered = tree.nodes[node.parent as usize]
                        .children
                        .iter()
                        .filter(|&&c| c != above && tree.nodes[c as usize].kind == NodeKind::Output)
                        .map(|&c| tree.nodes[c as usize].owner)
                        .filter(|&o| o < i)
                        .min();
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
            places.push(ReqPlace {
                link,
                parent,
                primary: None,
                branches: Vec::new(),
            });
        }
        // Children per request; the one with the largest subtree is the line shown flat.
        let mut roots = Vec::new();
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, place) in places.iter().enumerate() {
            match place.parent {
                None => roots.push(i as u32),
                Some(p) => children[p as usize].push(i as u32),
            }
        }
        let mut size = vec![1usize; n];
        for i in (0..n).rev() {
            if let Some(p) = places[i].parent {
                size[p as usize] += size[i];
            }
        }
        for (i, kids) in children.into_iter().enumerate() {
            let primary = kids
                .iter()
                .copied()
                .max_by_key(|&c| (size[c as usize], std::cmp::Reverse(c)));
            places[i].primary = primary;
            places[i].branches = kids.into_iter().filter(|&c| Some(c) != primary).collect();
        }
        let mut t = RequestTree {
            places,
            roots,
            paths: vec![Vec::new(); n],
            display: Vec::new(),
        };
        let display: Vec<DNode> = t
            .roots
            .iter()
            .enumerate()
            .map(|(k, &root)| DNode {
                id: HEADER_BASE + k as u32,
                children: t.chain_items(root),
            })
            .collect();
        let mut stack: Vec<(&DNode, Vec<u32>)> = display.iter().map(|d| (d, vec![d.id])).collect();
        while let Some((d, p)) = stack.pop() {
            if d.id < HEADER_BASE {
                t.paths[d.id as usize] = p.clone();
            }
            for c in &d.children {
                let mut q = p.clone();
                q.push(c.id);
                stack.push((c, q));
            }
        }
        t.display = display;
        t
    }

    /// The chain starting at `head`: it, its primary continuation, and so on.
    pub fn chain(&self, head: u32) -> Vec<u32> {
        let mut out = vec![head];
        let mut cur = head;
        while let Some(next) = self.places[cur as usize].primary {
            out.push(next);
            cur = next;
        }
        out
    }

    /// A chain shown flat: each request with its branches nested under it.
    fn chain_items(&self, head: u32) -> Vec<DNode> {
        self.chain(head)
            .into_iter()
            .map(|r| DNode {
                id: r,
                children: self.places[r as usize]
                    .branches
                    .iter()
                    .map(|&b| self.branch_item(b))
                    .collect(),
            })
            .collect()
    }

    /// A branch: its head, with the head's own branches and then the rest of its chain below.
    fn branch_item(&self, b: u32) -> DNode {
        let mut children: Vec<DNode> = self.places[b as usize]
            .branches
            .iter()
            .map(|&bb| self.branch_item(bb))
            .collect();
        if let Some(next) = self.places[b as usize].primary {
            children.extend(self.chain_items(next));
        }
        DNode { id: b, children }
    }

    /// Requests in the subtree of a display item (itself included).
    pub fn count(d: &DNode) -> usize {
        let own = usize::from(d.id < HEADER_BASE);
        own + d.children.iter().map(RequestTree::count).sum::<usize>()
    }
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
    let mut seen = 0usize;
    while let Some(m) = stack.pop() {
        seen += 1;
        if seen > 100_000 {
            break;
        }
        if let Some(rs) = ends_at.get(&m) {
            for &r in rs {
                best = Some(best.map_or(r, |b| b.min(r)));
            }
        }
        stack.extend_from_slice(&tree.nodes[m as usize].children);
    }
    best
}

fn root_link(exec: &Execution, i: u32, earlier: &[ReqPlace]) -> Link {
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
