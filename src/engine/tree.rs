//! The shared-prefix tree of one execution (SPEC §2).
//!
//! Tokens live once in an arena; nodes are runs of it. Every token keeps its identity through the
//! node that holds it: a node is either part of one request's output or context first brought in
//! by one request, with an offset, so splitting a node never loses who a token belongs to.

/// Index of a node in [`Tree::nodes`]; the root is [`ROOT`].
pub type NodeId = u32;

/// The root node: empty, the parent of everything.
pub const ROOT: NodeId = 0;

/// What a node's tokens are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// The empty root.
    Root,
    /// Input tokens no earlier output produced, first seen in request `owner` at full-input
    /// offset `offset`.
    Context,
    /// Output tokens `offset..offset+len` of request `owner`.
    Output,
}

/// A run of tokens in the tree.
#[derive(Clone, Debug)]
pub struct Node {
    /// Parent node ([`ROOT`] for top-level nodes; the root is its own parent).
    pub parent: NodeId,
    /// First token in [`Tree::tokens`].
    pub start: u32,
    /// Number of tokens.
    pub len: u32,
    /// Context or output.
    pub kind: NodeKind,
    /// Request index (within the execution) that owns or first brought these tokens.
    pub owner: u32,
    /// Offset of the first token in the owner's output (output nodes) or full input (context).
    pub offset: u32,
    /// Children, oldest branch first.
    pub children: Vec<NodeId>,
}

/// The tree of one execution.
#[derive(Clone, Debug)]
pub struct Tree {
    /// Token arena: each stored token once.
    pub tokens: Vec<u32>,
    /// Nodes; `nodes[0]` is the root.
    pub nodes: Vec<Node>,
}

impl Default for Tree {
    fn default() -> Self {
        Tree {
            tokens: Vec::new(),
            nodes: vec![Node {
                parent: ROOT,
                start: 0,
                len: 0,
                kind: NodeKind::Root,
                owner: u32::MAX,
                offset: 0,
                children: Vec::new(),
            }],
        }
    }
}

/// Where a prefix match ended: after `len_in_node` tokens of `node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MatchEnd {
    node: NodeId,
    len_in_node: u32,
    matched: usize,
}

/// Where a request landed in the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inserted {
    /// The node holding the request's output (its last piece, after later splits too).
    pub output: NodeId,
    /// How many input tokens matched an existing path.
    pub matched: usize,
}

impl Tree {
    /// The tokens of a node.
    pub fn node_tokens(&self, n: NodeId) -> &[u32] {
        let node = &self.nodes[n as usize];
        &self.tokens[node.start as usize..(node.start + node.len) as usize]
    }

    /// Inserts request `owner` with full input `input` and output `output` (SPEC §2).
    ///
    /// `preferred(end)` tells whether a tied match end leads to the output of a request that
    /// emitted one of the request's call ids; it is asked only when several paths tie.
    pub fn insert(
        &mut self,
        owner: u32,
        input: &[u32],
        output: &[u32],
        preferred: impl Fn(&Tree, NodeId) -> bool,
    ) -> Inserted {
        let end = self.longest_match(input, preferred);
        let mut attach = if end.len_in_node < self.nodes[end.node as usize].len {
            self.split(end.node, end.len_in_node)
        } else {
            end.node
        };
        if end.matched < input.len() {
            attach = self.push_node(
                attach,
                NodeKind::Context,
                owner,
                end.matched as u32,
                &input[end.matched..],
            );
        }
        let output = self.push_node(attach, NodeKind::Output, owner, 0, output);
        Inserted {
            output,
            matched: end.matched,
        }
    }

    fn push_node(
        &mut self,
        parent: NodeId,
        kind: NodeKind,
        owner: u32,
        offset: u32,
        tokens: &[u32],
    ) -> NodeId {
        let id = self.nodes.len() as NodeId;
        let start = self.tokens.len() as u32;
        reserve_gently(&mut self.tokens, tokens.len());
        self.tokens.extend_from_slice(tokens);
        self.nodes.push(Node {
            parent,
            start,
            len: tokens.len() as u32,
            kind,
            owner,
            offset,
            children: Vec::new(),
        });
        self.nodes[parent as usize].children.push(id);
        id
    }

    /// Splits `n` after `k` tokens. `n` keeps its id as the tail (so "the node holding a
    /// request's last output token" stays valid); the new head takes `n`'s place among its
    /// siblings, keeping the branch order. Returns the head.
    fn split(&mut self, n: NodeId, k: u32) -> NodeId {
        let head = self.nodes.len() as NodeId;
        let old = &self.nodes[n as usize];
        let parent = old.parent;
        let head_node = Node {
            parent,
            start: old.start,
            len: k,
            kind: old.kind,
            owner: old.owner,
            offset: old.offset,
            children: vec![n],
        };
        let tail = &mut self.nodes[n as usize];
        tail.start += k;
        tail.len -= k;
        tail.offset += k;
        tail.parent = head;
        self.nodes.push(head_node);
        let siblings = &mut self.nodes[parent as usize].children;
        if let Some(slot) = siblings.iter_mut().find(|c| **c == n) {
            *slot = head;
        }
        head
    }

    /// Longest path matching a prefix of `input`; ties go to a preferred end, then to the
    /// earliest branch (depth-first in creation order).
    fn longest_match(&self, input: &[u32], preferred: impl Fn(&Tree, NodeId) -> bool) -> MatchEnd {
        enum Step {
            Visit(NodeId, usize),
            End(MatchEnd),
        }
        let mut best: Vec<MatchEnd> = Vec::new();
        // Explicit stack (chains get thousands of nodes deep); children are pushed newest first
        // so ends are recorded in depth-first creation order and `best[0]` is the earliest.
        let mut stack = vec![Step::Visit(ROOT, 0)];
        while let Some(step) = stack.pop() {
            let (n, pos) = match step {
                Step::End(end) => {
                    record_end(&mut best, end);
                    continue;
                }
                Step::Visit(n, pos) => (n, pos),
            };
            let mut descended = false;
            if pos < input.len() {
                let next = input[pos];
                for &c in self.nodes[n as usize].children.iter().rev() {
                    let child = &self.nodes[c as usize];
                    if child.len == 0 || self.tokens[child.start as usize] != next {
                        continue;
                    }
                    descended = true;
                    let m = common_prefix(self.node_tokens(c), &input[pos..]);
                    stack.push(if m as u32 == child.len {
                        Step::Visit(c, pos + m)
                    } else {
                        Step::End(MatchEnd {
                            node: c,
                            len_in_node: m as u32,
                            matched: pos + m,
                        })
                    });
                }
            }
            if !descended {
                record_end(
                    &mut best,
                    MatchEnd {
                        node: n,
                        len_in_node: self.nodes[n as usize].len,
                        matched: pos,
                    },
                );
            }
        }
        if best.len() > 1 {
            if let Some(end) = best.iter().find(|e| preferred(self, e.node)) {
                return *end;
            }
        }
        best[0]
    }

    /// The nodes from the root's child down to `n`, in path order.
    pub fn path_nodes(&self, n: NodeId) -> Vec<NodeId> {
        let mut path = Vec::new();
        let mut cur = n;
        while cur != ROOT {
            path.push(cur);
            cur = self.nodes[cur as usize].parent;
        }
        path.reverse();
        path
    }

    /// Whether `a` is `b` or one of its ancestors.
    pub fn is_ancestor_or_self(&self, a: NodeId, b: NodeId) -> bool {
        let mut cur = b;
        loop {
            if cur == a {
                return true;
            }
            if cur == ROOT {
                return false;
            }
            cur = self.nodes[cur as usize].parent;
        }
    }

    /// Number of tokens from the root to the end of `n`.
    pub fn depth_tokens(&self, n: NodeId) -> u64 {
        let mut total = 0u64;
        let mut cur = n;
        while cur != ROOT {
            total += self.nodes[cur as usize].len as u64;
            cur = self.nodes[cur as usize].parent;
        }
        total
    }
}

/// Grows the arena by a quarter rather than doubling: the arenas are most of gyre's memory, and
/// large reallocations are remapped in place rather than copied.
fn reserve_gently(v: &mut Vec<u32>, extra: usize) {
    let needed = v.len() + extra;
    if needed > v.capacity() {
        let target = needed.max(v.capacity() + v.capacity() / 4).max(1024);
        v.reserve_exact(target - v.len());
    }
}

fn record_end(best: &mut Vec<MatchEnd>, end: MatchEnd) {
    match best.first().map(|b| b.matched) {
        Some(len) if end.matched < len => {}
        Some(len) if end.matched == len => best.push(end),
        _ => {
            best.clear();
            best.push(end);
        }
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
