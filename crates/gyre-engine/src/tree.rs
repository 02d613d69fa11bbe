//! The shared-prefix tree of one execution (docs/format.md §2).
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

/// "No node": the sentinel of [`Tree`]'s per-node links.
const NONE: NodeId = NodeId::MAX;

/// The tree of one execution.
#[derive(Clone, Debug)]
pub struct Tree {
    /// Token arena: each stored token once.
    pub tokens: Vec<u32>,
    /// Nodes; `nodes[0]` is the root.
    pub nodes: Vec<Node>,
    /// Per node: tokens on the path from the root to its end.
    end_pos: Vec<u32>,
    /// Per node: whether two of its children (with tokens) start with the same token, so a
    /// prefix match may go down either.
    forks: Vec<bool>,
    /// Per node: the nearest strict ancestor that forks, and its child on the way here
    /// (`(NONE, NONE)` when no ancestor forks). Lets an extending request skip the unambiguous
    /// stretch of its path instead of matching it again from the root.
    fork_above: Vec<(NodeId, NodeId)>,
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
            end_pos: vec![0],
            forks: vec![false],
            fork_above: vec![(NONE, NONE)],
        }
    }
}

/// Where a prefix match ended: after `len_in_node` tokens of `node`, `matched` input tokens in.
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

/// A full input seen as the tokens above the node matching starts from (`prefix`, possibly
/// not materialised when nothing needs it) followed by the rest.
struct FullInput<'a> {
    prefix: &'a [u32],
    base: usize,
    rest: &'a [u32],
}

impl FullInput<'_> {
    fn len(&self) -> usize {
        self.base + self.rest.len()
    }

    fn get(&self, p: usize) -> u32 {
        if p < self.base {
            self.prefix[p]
        } else {
            self.rest[p - self.base]
        }
    }

    /// How many of `toks` equal the input from position `p` on.
    fn common_prefix(&self, toks: &[u32], p: usize) -> usize {
        if p >= self.base {
            return common_prefix(toks, &self.rest[p - self.base..]);
        }
        let head = common_prefix(toks, &self.prefix[p..]);
        if head < self.base - p {
            return head;
        }
        head + common_prefix(&toks[head..], self.rest)
    }
}

impl Tree {
    /// Gives back the spare room of every per-node vector (loading is over).
    pub fn shrink_to_fit(&mut self) {
        self.nodes.shrink_to_fit();
        for n in &mut self.nodes {
            n.children.shrink_to_fit();
        }
        self.end_pos.shrink_to_fit();
        self.forks.shrink_to_fit();
        self.fork_above.shrink_to_fit();
    }

    /// The tokens of a node.
    pub fn node_tokens(&self, n: NodeId) -> &[u32] {
        let node = &self.nodes[n as usize];
        &self.tokens[node.start as usize..(node.start + node.len) as usize]
    }

    /// Number of tokens from the root to the end of `n`.
    pub fn depth_tokens(&self, n: NodeId) -> u64 {
        self.end_pos[n as usize] as u64
    }

    /// Inserts request `owner` (docs/format.md §2). Its full input is the path from the root to the end
    /// of `from` followed by `input` (`from` = [`ROOT`]: `input` is the whole full input); its
    /// output is `output`.
    ///
    /// The result is the one matching the whole input from the root gives: that match walks
    /// down the path to `from` and can only leave it where an ancestor forks, so only those
    /// side branches are searched. They need the path's own tokens, `prefix`, which the caller
    /// supplies when [`Tree::needs_prefix`] says so (else `&[]`).
    ///
    /// `emitters` gives the output nodes of the requests that emitted a call id the request's
    /// tool spans name; asked only when paths tie, they break the tie where the paths part
    /// (`Tree::break_tie`).
    pub fn insert(
        &mut self,
        owner: u32,
        from: NodeId,
        prefix: &[u32],
        input: &[u32],
        output: &[u32],
        emitters: impl FnOnce() -> Vec<NodeId>,
    ) -> Inserted {
        let base = self.end_pos[from as usize] as usize;
        debug_assert!(prefix.is_empty() || prefix.len() == base);
        let full = FullInput {
            prefix,
            base,
            rest: input,
        };
        let end = self.longest_match(from, &full, emitters);
        let mut attach = if end.len_in_node < self.nodes[end.node as usize].len {
            self.split(end.node, end.len_in_node)
        } else {
            end.node
        };
        if end.matched < full.len() {
            attach = self.push_node(
                attach,
                NodeKind::Context,
                owner,
                end.matched as u32,
                &input[end.matched - base..],
            );
        }
        let output = self.push_node(attach, NodeKind::Output, owner, 0, output);
        Inserted {
            output,
            matched: end.matched,
        }
    }

    /// Whether inserting below `from` needs the tokens of the path to it: some ancestor forks
    /// with a side branch that starts like the path.
    pub fn needs_prefix(&self, from: NodeId) -> bool {
        self.side_branches(from).next().is_some()
    }

    /// Side branches of the path to `from`: `(fork, child)` where `child` starts with the same
    /// token as the path's own child of `fork`, deepest fork first.
    fn side_branches(&self, from: NodeId) -> impl Iterator<Item = (NodeId, NodeId)> + '_ {
        let mut link = self.fork_above[from as usize];
        std::iter::from_fn(move || {
            let (fork, on_path) = link;
            (fork != NONE).then(|| {
                link = self.fork_above[fork as usize];
                (fork, on_path)
            })
        })
        .flat_map(move |(fork, on_path)| {
            let first = self.tokens[self.nodes[on_path as usize].start as usize];
            self.nodes[fork as usize]
                .children
                .iter()
                .copied()
                .filter(move |&c| {
                    let node = &self.nodes[c as usize];
                    c != on_path && node.len > 0 && self.tokens[node.start as usize] == first
                })
                .map(move |c| (fork, c))
        })
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
        let starts_like_a_sibling = tokens.first().is_some_and(|&first| {
            self.nodes[parent as usize].children.iter().any(|&c| {
                let node = &self.nodes[c as usize];
                node.len > 0 && self.tokens[node.start as usize] == first
            })
        });
        if starts_like_a_sibling && !self.forks[parent as usize] {
            // The parent starts to fork: every node below it now has a fork above it.
            self.forks[parent as usize] = true;
            let old = self.fork_above[parent as usize];
            for c in self.nodes[parent as usize].children.clone() {
                self.repoint(c, old, (parent, c));
            }
        }
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
        self.end_pos
            .push(self.end_pos[parent as usize] + tokens.len() as u32);
        self.forks.push(false);
        self.fork_above.push(if self.forks[parent as usize] {
            (parent, id)
        } else {
            self.fork_above[parent as usize]
        });
        self.nodes[parent as usize].children.push(id);
        id
    }

    /// Sets `fork_above` to `new` for `top` and the nodes below it that had `old` (those below
    /// a deeper fork keep theirs).
    fn repoint(&mut self, top: NodeId, old: (NodeId, NodeId), new: (NodeId, NodeId)) {
        let mut stack = vec![top];
        while let Some(n) = stack.pop() {
            if self.fork_above[n as usize] != old {
                continue;
            }
            self.fork_above[n as usize] = new;
            stack.extend_from_slice(&self.nodes[n as usize].children);
        }
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
        self.end_pos.push(self.end_pos[parent as usize] + k);
        // The head has one child, so it does not fork; it takes over n's place below the parent.
        self.forks.push(false);
        let above = self.fork_above[n as usize];
        if above == (parent, n) {
            self.fork_above.push((parent, head));
            self.repoint(n, above, (parent, head));
        } else {
            self.fork_above.push(above);
        }
        let siblings = &mut self.nodes[parent as usize].children;
        if let Some(slot) = siblings.iter_mut().find(|c| **c == n) {
            *slot = head;
        }
        head
    }

    /// Longest path matching a prefix of `input`. Ties (several paths matching equally far) are
    /// compared where they part (docs/format.md §2): a branch whose subtree holds an emitter's output
    /// wins, else the earliest created branch.
    fn longest_match(
        &self,
        from: NodeId,
        input: &FullInput,
        emitters: impl FnOnce() -> Vec<NodeId>,
    ) -> MatchEnd {
        let mut best: Vec<MatchEnd> = Vec::new();
        self.match_below(from, input.base, input, &mut best);
        let sides: Vec<(NodeId, NodeId)> = self.side_branches(from).collect();
        for (fork, side) in sides {
            self.match_from(side, self.end_pos[fork as usize] as usize, input, &mut best);
        }
        if best.len() == 1 {
            return best[0];
        }
        self.break_tie(&best, &emitters())
    }

    /// Matches `input` from position `pos` below the end of `n` (fully matched).
    fn match_below(&self, n: NodeId, pos: usize, input: &FullInput, best: &mut Vec<MatchEnd>) {
        let mut stack = vec![(n, pos)];
        // An explicit stack: chains get thousands of nodes deep.
        while let Some((n, pos)) = stack.pop() {
            let mut descended = false;
            if pos < input.len() {
                let next = input.get(pos);
                for &c in &self.nodes[n as usize].children {
                    let child = &self.nodes[c as usize];
                    if child.len == 0 || self.tokens[child.start as usize] != next {
                        continue;
                    }
                    descended = true;
                    let m = input.common_prefix(self.node_tokens(c), pos);
                    if m as u32 == child.len {
                        stack.push((c, pos + m));
                    } else {
                        record_end(
                            best,
                            MatchEnd {
                                node: c,
                                len_in_node: m as u32,
                                matched: pos + m,
                            },
                        );
                    }
                }
            }
            if !descended {
                record_end(
                    best,
                    MatchEnd {
                        node: n,
                        len_in_node: self.nodes[n as usize].len,
                        matched: pos,
                    },
                );
            }
        }
    }

    /// Matches `input` from position `pos` into node `c` (whose first token matches) and below.
    fn match_from(&self, c: NodeId, pos: usize, input: &FullInput, best: &mut Vec<MatchEnd>) {
        let len = self.nodes[c as usize].len;
        let m = input.common_prefix(self.node_tokens(c), pos);
        if m as u32 == len {
            self.match_below(c, pos + m, input, best);
        } else {
            record_end(
                best,
                MatchEnd {
                    node: c,
                    len_in_node: m as u32,
                    matched: pos + m,
                },
            );
        }
    }

    /// Chooses among tied match ends by comparing them where they part, parting point after
    /// parting point: a branch whose subtree holds an emitter's output, else the earliest
    /// created (children keep creation order; a split head takes its tail's place).
    fn break_tie(&self, ends: &[MatchEnd], emitters: &[NodeId]) -> MatchEnd {
        // Tied ends match equally far, so none lies on another's path: their paths part
        // somewhere below the deepest node all of them share.
        let top = ends[1..]
            .iter()
            .fold(ends[0].node, |acc, e| self.meet(acc, e.node));
        let paths: Vec<Vec<NodeId>> = ends.iter().map(|e| self.path_below(top, e.node)).collect();
        let mut alive: Vec<usize> = (0..ends.len()).collect();
        let mut depth = 0;
        while alive.len() > 1 {
            let parting = self.nodes[paths[alive[0]][depth] as usize].parent;
            let mut branches: Vec<NodeId> = alive.iter().map(|&i| paths[i][depth]).collect();
            branches.sort_unstable();
            branches.dedup();
            if branches.len() > 1 {
                let holding = self.branches_holding(parting, emitters);
                let order = &self.nodes[parting as usize].children;
                let rank = |b: &NodeId| order.iter().position(|c| c == b);
                let chosen = branches
                    .iter()
                    .filter(|b| holding.contains(b))
                    .min_by_key(|b| rank(b))
                    .or_else(|| branches.iter().min_by_key(|b| rank(b)))
                    .copied()
                    .expect("at least two branches");
                alive.retain(|&i| paths[i][depth] == chosen);
            }
            depth += 1;
        }
        ends[alive[0]]
    }

    /// The deepest node that is `a` or an ancestor of it and `b` or an ancestor of it.
    fn meet(&self, mut a: NodeId, mut b: NodeId) -> NodeId {
        while a != b {
            if self.end_pos[a as usize] >= self.end_pos[b as usize] && a != ROOT {
                a = self.nodes[a as usize].parent;
            } else {
                b = self.nodes[b as usize].parent;
            }
        }
        a
    }

    /// The children of `parting` whose subtrees hold one of `emitters`.
    fn branches_holding(&self, parting: NodeId, emitters: &[NodeId]) -> Vec<NodeId> {
        let mut out = Vec::new();
        for &e in emitters {
            let mut cur = e;
            while cur != ROOT {
                let parent = self.nodes[cur as usize].parent;
                if parent == parting {
                    out.push(cur);
                    break;
                }
                cur = parent;
            }
        }
        out
    }

    /// The nodes strictly below `top` down to `n` (a descendant of `top`), in path order.
    fn path_below(&self, top: NodeId, n: NodeId) -> Vec<NodeId> {
        let mut path = Vec::new();
        let mut cur = n;
        while cur != top {
            path.push(cur);
            cur = self.nodes[cur as usize].parent;
        }
        path.reverse();
        path
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
