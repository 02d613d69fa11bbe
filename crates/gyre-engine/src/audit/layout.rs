//! Each `trained` sample of an execution laid on the execution's shared-prefix tree: per token
//! its key (a tree token, or a token of the overlay that literal samples leaving the tree
//! share), from which every audit kind and the inspector read.
//!
//! A key is one `u32`. Keys below [`Layout::tree_len`] are tree tokens: the index of the token
//! in the tree's arena (`node.start + i`), so token `i` of node `n` is key `nodes[n].start + i`
//! and per-key tables are flat vectors. Keys from `tree_len` on are overlay tokens: a literal
//! piece descends the tree while a child holds its next id, and from the first id none holds,
//! the rest of the sample goes into an overlay trie keyed by (parent key, id), so two samples
//! that left the tree the same way share keys.

use rustc_hash::FxHashMap as HashMap;

use gyre_format::trained::Piece;

use crate::execution::{Execution, TokenIdentity};
use crate::tree::{NodeId, NodeKind, ROOT};

/// A token's key (see the module's documentation).
pub type Key = u32;

/// The parent of an overlay token that left the tree at the sample's first token.
const NO_PARENT: Key = Key::MAX;

/// Where a key lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Token `index` of tree node `node`.
    Tree {
        /// The node.
        node: NodeId,
        /// Index in the node.
        index: u32,
    },
    /// Off the tree: overlay token `n` (keys `tree_len + n`).
    Off(u32),
}

/// One sample on the tree.
#[derive(Clone, Debug, Default)]
pub struct SampleLayout {
    /// Per token of the sample's full sequence (prompt + response): its key.
    pub keys: Vec<Key>,
    /// The first position whose key is off the tree (`keys.len()` when none is).
    pub leaves_tree: u32,
}

/// Every sample of one execution on its tree, in dump order.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    /// Per sample (the order of `exec.trained.list`).
    pub samples: Vec<SampleLayout>,
    /// Tree tokens: keys `0..tree_len` are arena positions.
    pub tree_len: u32,
    /// Per tree key: the node holding it.
    node_of: Vec<NodeId>,
    /// Per overlay token: its id.
    overlay_ids: Vec<u32>,
}

impl Layout {
    /// Lays every sample of `exec` on its tree.
    pub fn of(exec: &Execution) -> Layout {
        let tree = &exec.tree;
        let tree_len = tree.tokens.len() as u32;
        let mut node_of = vec![ROOT; tree.tokens.len()];
        for (n, node) in tree.nodes.iter().enumerate() {
            node_of[node.start as usize..(node.start + node.len) as usize].fill(n as NodeId);
        }
        let mut layout = Layout {
            samples: Vec::with_capacity(exec.trained.list.len()),
            tree_len,
            node_of,
            overlay_ids: Vec::new(),
        };
        let mut overlay: HashMap<(Key, u32), Key> = HashMap::default();
        for s in &exec.trained.list {
            let sample = layout.lay(exec, s, &mut overlay);
            layout.samples.push(sample);
        }
        layout
    }

    fn lay(
        &mut self,
        exec: &Execution,
        s: &crate::trained::Sample,
        overlay: &mut HashMap<(Key, u32), Key>,
    ) -> SampleLayout {
        let tree = &exec.tree;
        let mut keys: Vec<Key> = Vec::with_capacity(s.record.len());
        let mut leaves_tree: Option<u32> = None;
        // Where the walk is: `None` before the first token (at the root).
        let mut at: Option<Key> = None;
        for (piece, idx) in s.record.tokens.iter().zip(&s.requests) {
            match (piece, idx) {
                (Piece::Request { start, end, .. }, Some(r)) => {
                    // The request's path gives its tree tokens directly.
                    let path = exec.tree.path_nodes(exec.requests[*r as usize].output_node);
                    let mut pos = 0u32;
                    for n in path {
                        let node = &tree.nodes[n as usize];
                        let (a, b) = (pos.max(*start), (pos + node.len).min(*end));
                        if a < b {
                            keys.extend((a..b).map(|p| node.start + (p - pos)));
                        }
                        pos += node.len;
                        if pos >= *end {
                            break;
                        }
                    }
                    at = keys.last().copied().or(at);
                }
                (Piece::Ids(ids), _) => {
                    for (j, &id) in ids.iter().enumerate() {
                        let on_tree = at.is_none_or(|k| k < self.tree_len);
                        let next = if on_tree {
                            self.descend(exec, at, &ids[j..])
                        } else {
                            None
                        };
                        let key = match next {
                            Some(k) => k,
                            None => {
                                leaves_tree.get_or_insert(keys.len() as u32);
                                let parent = at.unwrap_or(NO_PARENT);
                                let fresh = self.tree_len + self.overlay_ids.len() as u32;
                                let k = *overlay.entry((parent, id)).or_insert(fresh);
                                if k == fresh {
                                    self.overlay_ids.push(id);
                                }
                                k
                            }
                        };
                        keys.push(key);
                        at = Some(key);
                    }
                }
                // `Samples::add` resolves every request piece.
                (Piece::Request { .. }, None) => {}
            }
        }
        let leaves_tree = leaves_tree.unwrap_or(keys.len() as u32);
        SampleLayout { keys, leaves_tree }
    }

    /// The tree key after `at` (`None`: the root) holding `ids[0]`: the next token of `at`'s
    /// node, or the first token of a child. Among children starting with the id, the one
    /// matching more of `ids` wins, then the earliest.
    fn descend(&self, exec: &Execution, at: Option<Key>, ids: &[u32]) -> Option<Key> {
        let tree = &exec.tree;
        let node = match at {
            Some(k) => {
                let n = self.node_of[k as usize];
                let node = &tree.nodes[n as usize];
                if k + 1 < node.start + node.len {
                    return (tree.tokens[k as usize + 1] == ids[0]).then_some(k + 1);
                }
                n
            }
            None => ROOT,
        };
        let mut best: Option<(usize, Key)> = None;
        for &c in &tree.nodes[node as usize].children {
            let toks = tree.node_tokens(c);
            if toks.first() != Some(&ids[0]) {
                continue;
            }
            let m = toks.iter().zip(ids).take_while(|(a, b)| a == b).count();
            if best.is_none_or(|(b, _)| m > b) {
                best = Some((m, tree.nodes[c as usize].start));
            }
        }
        best.map(|(_, k)| k)
    }

    /// Where key `key` of `exec` lies.
    pub fn place(&self, exec: &Execution, key: Key) -> Place {
        if key < self.tree_len {
            let node = self.node_of[key as usize];
            Place::Tree {
                node,
                index: key - exec.tree.nodes[node as usize].start,
            }
        } else {
            Place::Off(key - self.tree_len)
        }
    }

    /// Number of keys (tree tokens and overlay tokens).
    pub fn keys(&self) -> usize {
        self.tree_len as usize + self.overlay_ids.len()
    }

    /// The token id of key `key`.
    pub fn id(&self, exec: &Execution, key: Key) -> u32 {
        if key < self.tree_len {
            exec.tree.tokens[key as usize]
        } else {
            self.overlay_ids[(key - self.tree_len) as usize]
        }
    }

    /// The token ids of sample `s`.
    pub fn ids(&self, exec: &Execution, s: usize) -> Vec<u32> {
        self.samples[s]
            .keys
            .iter()
            .map(|&k| self.id(exec, k))
            .collect()
    }

    /// Who tree key `key` is (docs/format.md §2); `None` off the tree.
    pub fn identity(&self, exec: &Execution, key: Key) -> Option<TokenIdentity> {
        match self.place(exec, key) {
            Place::Tree { node, index } => Some(exec.identity(node, index)),
            Place::Off(_) => None,
        }
    }

    /// Whether key `key` is a policy-sampled token: an output token of a request whose output
    /// is trainable (docs/format.md §3).
    pub fn sampled(&self, exec: &Execution, key: Key) -> bool {
        if key >= self.tree_len {
            return false;
        }
        let node = &exec.tree.nodes[self.node_of[key as usize] as usize];
        node.kind == NodeKind::Output && exec.requests[node.owner as usize].trainable()
    }

    /// Output token of request `request` at output offset `offset`, when `key` is one.
    pub fn output(&self, exec: &Execution, key: Key) -> Option<(u32, u32)> {
        if key >= self.tree_len {
            return None;
        }
        let node = &exec.tree.nodes[self.node_of[key as usize] as usize];
        (node.kind == NodeKind::Output).then(|| (node.owner, node.offset + (key - node.start)))
    }

    /// Whether position `p` of sample `s` of `exec` is mask-on.
    pub fn mask_on(exec: &Execution, s: usize, p: usize) -> bool {
        let r = &exec.trained.list[s].record;
        p >= r.prompt_len as usize && r.loss_mask[p - r.prompt_len as usize] == 1
    }

    /// The behaviour log-prob of position `p` of sample `s`: the sample's value when it holds
    /// one, else the recorded request's (a policy output token on the tree).
    pub fn behaviour(&self, exec: &Execution, s: usize, p: usize) -> Option<f64> {
        let r = &exec.trained.list[s].record;
        let own = p
            .checked_sub(r.prompt_len as usize)
            .and_then(|j| r.behaviour_logprobs.as_ref()?.get(j).copied().flatten());
        own.or_else(|| {
            let (req, offset) = self.output(exec, self.samples[s].keys[p])?;
            exec.requests[req as usize].logprob(offset)
        })
    }

    /// The trainer's log-prob of position `p` of sample `s`, when the sample holds one.
    pub fn trainer(exec: &Execution, s: usize, p: usize) -> Option<f64> {
        let r = &exec.trained.list[s].record;
        let j = p.checked_sub(r.prompt_len as usize)?;
        r.trainer_logprobs.as_ref()?.get(j).copied().flatten()
    }
}
