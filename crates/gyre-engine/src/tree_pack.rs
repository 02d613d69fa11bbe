//! Tree packs: one optimizer step's rows merged into their prefix tree, so that a trainer's
//! forward and backward compute each shared prefix once (`gyre.trainers.tree`, docs/trainers.md).
//!
//! The rows that have targets are sorted by their tokens; in that order a row's longest common
//! prefix with any earlier row is with its predecessor, so each row adds only its tokens past
//! that prefix. Laid out in that order the tokens are the prefix tree in depth-first preorder:
//! every token comes after its parent, and the subtree of token `i` is the contiguous range
//! `i..subtree_end[i]`, so "`q` may attend to `k`" is `k <= q < subtree_end[k]`.
//!
//! A tree larger than the budget is cut between rows of that order (a node boundary of the
//! tree): the first row of a new pack recomputes the prefix it shares with the row before it,
//! and [`TreePack::recomputed`] counts those tokens. Rows without a target (dummies) are left
//! out: nothing they compute reaches the loss.

use std::fmt;

/// One row of a step, as the layout needs it.
#[derive(Clone, Copy, Debug)]
pub struct PackRow<'a> {
    /// The row's tokens (`I + O` of its leaf).
    pub tokens: &'a [u32],
    /// Offset of the row's first response token.
    pub prompt_len: usize,
    /// 0/1 per response token (`tokens[prompt_len..]`); 1 at the row's targets.
    pub loss_mask: &'a [u8],
}

/// A target of a row and the packed token whose logits predict it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// Index of the row (into the rows given to [`layout`]).
    pub row: u32,
    /// The target's offset in that row's tokens.
    pub offset: u32,
    /// The packed token (its predecessor in the row) whose logits predict it.
    pub pos: u32,
}

/// One packed prefix tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreePack {
    /// Token ids in layout order.
    pub tokens: Vec<u32>,
    /// Per token, its depth in its rows (its offset in every row through it).
    pub positions: Vec<u32>,
    /// Per token, the index of its parent; -1 for a root.
    pub parent: Vec<i64>,
    /// Per token, one past the last token of its subtree.
    pub subtree_end: Vec<u32>,
    /// The rows laid out in this pack (indices into the given rows), in layout order.
    pub rows: Vec<u32>,
    /// The targets of those rows, ordered by (row, offset).
    pub targets: Vec<Target>,
    /// Tokens of this pack that an earlier pack of the step computes too: the prefix its first
    /// row shares with the last row of the pack before it.
    pub recomputed: u64,
}

/// Every pack of a step and what they cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeLayout {
    /// The packs, in layout order.
    pub packs: Vec<TreePack>,
    /// Σ tokens of the rows that have targets (what flat rows compute, dummies left out).
    pub row_tokens: u64,
    /// Tokens of those rows' whole prefix tree (no budget).
    pub tree_tokens: u64,
    /// Rows left out because they have no target.
    pub left_out: Vec<u32>,
}

impl TreeLayout {
    /// Σ tokens of the packs: `tree_tokens` plus the prefixes the budget made them recompute.
    pub fn packed_tokens(&self) -> u64 {
        self.packs.iter().map(|p| p.tokens.len() as u64).sum()
    }

    /// Tokens recomputed because the budget cut the tree.
    pub fn recomputed(&self) -> u64 {
        self.packs.iter().map(|p| p.recomputed).sum()
    }
}

/// Why rows cannot be tree-packed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreePackError {
    /// No rows at all.
    Empty,
    /// A budget of no tokens.
    Budget(usize),
    /// A row with targets is longer than the budget.
    RowTooLong {
        /// The row.
        row: u32,
        /// Its tokens.
        tokens: usize,
        /// The budget.
        max_tokens: usize,
    },
    /// A target at offset 0: nothing in the row predicts it.
    TargetAtStart {
        /// The row.
        row: u32,
    },
    /// `loss_mask` does not cover `tokens[prompt_len..]`.
    Shape {
        /// The row.
        row: u32,
    },
}

impl fmt::Display for TreePackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreePackError::Empty => write!(f, "an empty step: no rows to pack"),
            TreePackError::Budget(n) => write!(f, "max_tokens must be positive, not {n}"),
            TreePackError::RowTooLong {
                row,
                tokens,
                max_tokens,
            } => write!(
                f,
                "row {row} has {tokens} tokens, more than max_tokens={max_tokens}: raise the budget \
                 (a tree is cut between rows, never inside one: truncating a row would change its L_i)"
            ),
            TreePackError::TargetAtStart { row } => write!(
                f,
                "row {row} has a target at position 0: nothing in the row predicts it"
            ),
            TreePackError::Shape { row } => write!(
                f,
                "row {row}: loss_mask does not cover tokens[prompt_len:] one entry per token"
            ),
        }
    }
}

impl std::error::Error for TreePackError {}

/// `rows` (one optimizer step, or one rank's shard of it) merged into prefix trees of at most
/// `max_tokens` tokens each (`usize::MAX`: one tree).
pub fn layout(rows: &[PackRow], max_tokens: usize) -> Result<TreeLayout, TreePackError> {
    if rows.is_empty() {
        return Err(TreePackError::Empty);
    }
    if max_tokens == 0 {
        return Err(TreePackError::Budget(0));
    }
    let mut out = TreeLayout::default();
    let mut order = Vec::new();
    for (k, r) in rows.iter().enumerate() {
        let k = k as u32;
        if r.prompt_len > r.tokens.len() || r.tokens.len() - r.prompt_len != r.loss_mask.len() {
            return Err(TreePackError::Shape { row: k });
        }
        if !r.loss_mask.iter().any(|&m| m != 0) {
            out.left_out.push(k);
            continue;
        }
        if r.prompt_len == 0 && r.loss_mask[0] != 0 {
            return Err(TreePackError::TargetAtStart { row: k });
        }
        if r.tokens.len() > max_tokens {
            return Err(TreePackError::RowTooLong {
                row: k,
                tokens: r.tokens.len(),
                max_tokens,
            });
        }
        out.row_tokens += r.tokens.len() as u64;
        order.push(k);
    }
    // Equal rows keep their order, so the layout depends only on the rows.
    order.sort_by(|&a, &b| {
        rows[a as usize]
            .tokens
            .cmp(rows[b as usize].tokens)
            .then(a.cmp(&b))
    });
    let mut pack = TreePack::default();
    // The packed index of every token of the previous row of this pack.
    let mut prev_slots: Vec<u32> = Vec::new();
    let mut prev: Option<&[u32]> = None;
    for &k in &order {
        let row = &rows[k as usize];
        let shared = prev.map_or(0, |p| common_prefix(p, row.tokens));
        out.tree_tokens += (row.tokens.len() - shared) as u64;
        let (shared, recomputed) = if pack.tokens.len() + row.tokens.len() - shared > max_tokens {
            out.packs.push(finish(std::mem::take(&mut pack)));
            (0, shared as u64)
        } else {
            (shared, 0)
        };
        pack.recomputed += recomputed;
        prev_slots.truncate(shared);
        for (d, &t) in row.tokens.iter().enumerate().skip(shared) {
            let at = pack.tokens.len() as u32;
            pack.tokens.push(t);
            pack.positions.push(d as u32);
            pack.parent
                .push(if d == 0 { -1 } else { prev_slots[d - 1] as i64 });
            prev_slots.push(at);
        }
        pack.rows.push(k);
        for (j, &m) in row.loss_mask.iter().enumerate() {
            if m != 0 {
                let offset = row.prompt_len + j;
                pack.targets.push(Target {
                    row: k,
                    offset: offset as u32,
                    pos: prev_slots[offset - 1],
                });
            }
        }
        prev = Some(row.tokens);
    }
    if !pack.tokens.is_empty() {
        out.packs.push(finish(pack));
    }
    Ok(out)
}

/// Only the cost of [`layout`] with no budget: `(row tokens, tree tokens)` of the rows with a
/// target, given as token sequences.
pub fn tree_tokens(rows: &[&[u32]]) -> (u64, u64) {
    let mut sorted: Vec<&[u32]> = rows.to_vec();
    sorted.sort_unstable();
    let total: u64 = sorted.iter().map(|r| r.len() as u64).sum();
    let shared: u64 = sorted
        .windows(2)
        .map(|w| common_prefix(w[0], w[1]) as u64)
        .sum();
    (total, total - shared)
}

fn finish(mut pack: TreePack) -> TreePack {
    let n = pack.tokens.len();
    let mut end: Vec<u32> = (1..=n as u32).collect();
    // Preorder: every token after its parent, so a reverse pass sees children first.
    for i in (0..n).rev() {
        if let Ok(p) = usize::try_from(pack.parent[i]) {
            end[p] = end[p].max(end[i]);
        }
    }
    pack.subtree_end = end;
    pack.targets
        .sort_by(|a, b| a.row.cmp(&b.row).then(a.offset.cmp(&b.offset)));
    pack
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(tokens: &'a [u32], prompt_len: usize, mask: &'a [u8]) -> PackRow<'a> {
        PackRow {
            tokens,
            prompt_len,
            loss_mask: mask,
        }
    }

    /// The tokens of the path ending at packed token `i`, root first.
    fn path(p: &TreePack, mut i: i64) -> Vec<u32> {
        let mut out = Vec::new();
        while i >= 0 {
            out.push(p.tokens[i as usize]);
            i = p.parent[i as usize];
        }
        out.reverse();
        out
    }

    #[test]
    fn rows_merge_into_their_prefix_tree_and_targets_follow_their_rows() {
        let a = [1, 2, 3, 4, 5];
        let b = [1, 2, 3, 9];
        let c = [1, 2, 3, 4, 7, 8];
        let rows = [row(&a, 3, &[1, 1]), row(&b, 3, &[1]), row(&c, 4, &[0, 1])];
        let l = layout(&rows, usize::MAX).expect("packs");
        assert_eq!(l.packs.len(), 1);
        let p = &l.packs[0];
        // 1 2 3 shared by all, 4 by a and c: 3 + 2 (a) + 2 (c) + 1 (b).
        assert_eq!(p.tokens.len(), 8);
        assert_eq!((l.row_tokens, l.tree_tokens), (15, 8));
        assert_eq!(tree_tokens(&[&a, &b, &c]), (15, 8));
        for t in &p.targets {
            let r = rows[t.row as usize].tokens;
            assert_eq!(path(p, t.pos as i64), r[..t.offset as usize].to_vec());
            assert_eq!(p.positions[t.pos as usize], t.offset - 1);
        }
        assert_eq!(p.targets.len(), 4);
        for (i, &parent) in p.parent.iter().enumerate() {
            assert!(parent < i as i64, "ancestors come first");
            let end = p.subtree_end[i] as usize;
            for j in i + 1..p.tokens.len() {
                let mut k = j as i64;
                while k > i as i64 {
                    k = p.parent[k as usize];
                }
                assert_eq!(k == i as i64, j < end, "subtree of {i} is {i}..{end}");
            }
        }
    }

    #[test]
    fn a_budget_cuts_between_rows_and_counts_the_recomputed_prefix() {
        let a = [1, 2, 3, 4];
        let b = [1, 2, 3, 5];
        let c = [1, 2, 6, 7];
        let rows = [row(&a, 3, &[1]), row(&b, 3, &[1]), row(&c, 2, &[1, 1])];
        let l = layout(&rows, 5).expect("packs");
        // a, b: 5 tokens; c alone recomputes the 2-token prefix it shares with b.
        assert_eq!(l.packs.len(), 2);
        assert_eq!(l.packs[0].tokens.len(), 5);
        assert_eq!(l.packs[1].tokens, vec![1, 2, 6, 7]);
        assert_eq!(l.packs[1].recomputed, 2);
        assert_eq!(l.recomputed(), 2);
        assert_eq!(l.packed_tokens(), l.tree_tokens + l.recomputed());
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        assert_eq!(layout(&[], 10), Err(TreePackError::Empty));
        let a = [1, 2, 3];
        assert_eq!(
            layout(&[row(&a, 1, &[1, 1])], 0),
            Err(TreePackError::Budget(0))
        );
        let e = layout(&[row(&a, 1, &[1, 1])], 2).expect_err("too long");
        assert!(e.to_string().contains("more than max_tokens=2"), "{e}");
        assert_eq!(
            layout(&[row(&a, 0, &[1, 1, 1])], 9),
            Err(TreePackError::TargetAtStart { row: 0 })
        );
        assert_eq!(
            layout(&[row(&a, 1, &[1])], 9),
            Err(TreePackError::Shape { row: 0 })
        );
    }

    #[test]
    fn rows_without_targets_are_left_out() {
        let a = [1, 2, 3];
        let dummy = [5, 6, 7, 8, 9];
        let l = layout(&[row(&dummy, 1, &[0, 0, 0, 0]), row(&a, 1, &[0, 1])], 3).expect("packs");
        assert_eq!(l.left_out, vec![0]);
        assert_eq!(l.packs.len(), 1);
        assert_eq!(l.packs[0].rows, vec![1]);
    }
}
