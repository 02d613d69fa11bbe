//! How often the exported rows repeat their shared prefixes: row tokens against the tokens of
//! the rows' prefix tree (every row a root-to-leaf token sequence, shared prefixes counted once,
//! across executions too). A plain forward pass over the rows computes each distinct token that
//! many times; a prefix-shared one (tree training) once. `gyre.trainers.packing.prefix_repeat`
//! gives the same figure over Python rows.

use std::cmp::Ordering;

use rayon::prelude::*;

use super::execution::Execution;
use super::load::Batch;
use super::rows::dummy_leaf;
use super::score::Outcome;
use super::tree::{NodeId, Tree};
use crate::process::Results;

/// Row tokens and the distinct tokens of their prefix tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowPrefix {
    /// Σ over rows of their tokens (`gyre admit`'s `tokens`).
    pub row_tokens: u64,
    /// Tokens of the rows' prefix tree.
    pub distinct_tokens: u64,
}

impl RowPrefix {
    /// `row_tokens / distinct_tokens` (1 when there are none).
    pub fn repeat(&self) -> f64 {
        if self.distinct_tokens == 0 {
            1.0
        } else {
            self.row_tokens as f64 / self.distinct_tokens as f64
        }
    }
}

/// One row's tokens as its execution's tree holds them: the nodes of its leaf's path.
struct RowPath<'a> {
    tree: &'a Tree,
    nodes: Vec<NodeId>,
}

/// Rows' prefix-tree figures of a processed batch, for the rows `gyre admit` writes.
pub fn row_prefix(batch: &Batch, results: &Results) -> RowPrefix {
    of_leaves(batch, &exported_leaves(batch, results, false))
}

/// The same figures over the rows a tree pack computes (`gyre.trainers.tree` with no budget,
/// [`super::tree_pack`]): the rows that have targets, so dummies' placeholders are left out.
/// `row_tokens` is then what flat rows of those rows compute, `distinct_tokens` what one tree
/// pack per batch computes.
pub fn tree_pack(batch: &Batch, results: &Results) -> RowPrefix {
    of_leaves(batch, &exported_leaves(batch, results, true))
}

/// `(execution, leaf request)` of every exported row; with `targets_only`, of the rows with
/// targets.
fn exported_leaves(batch: &Batch, results: &Results, targets_only: bool) -> Vec<(usize, u32)> {
    batch
        .executions
        .iter()
        .enumerate()
        .flat_map(|(i, exec)| {
            let leaves: Vec<u32> = match results.outcomes[i] {
                Outcome::Excluded(_) => Vec::new(),
                Outcome::Dummy if targets_only => Vec::new(),
                Outcome::Dummy => dummy_leaf(exec).into_iter().collect(),
                Outcome::Scored { .. } => results.admissions[i]
                    .draws
                    .iter()
                    .filter(|d| !targets_only || d.target_tokens > 0)
                    .map(|d| d.chosen)
                    .collect(),
            };
            leaves.into_iter().map(move |l| (i, l))
        })
        .collect()
}

/// Prefix-tree figures of the rows ending at `leaves` (`(execution, leaf request)`), across
/// executions.
pub fn of_leaves(batch: &Batch, leaves: &[(usize, u32)]) -> RowPrefix {
    prefix(
        leaves
            .par_iter()
            .map(|&(i, l)| row_path(&batch.executions[i], l))
            .collect(),
    )
}

/// Prefix-tree figures of the rows of one execution ending at `leaves` (request indices).
pub fn of_execution(exec: &Execution, leaves: &[u32]) -> RowPrefix {
    prefix(leaves.iter().map(|&l| row_path(exec, l)).collect())
}

fn row_path(exec: &Execution, leaf: u32) -> RowPath<'_> {
    RowPath {
        tree: &exec.tree,
        nodes: exec
            .tree
            .path_nodes(exec.requests[leaf as usize].output_node),
    }
}

fn prefix(mut rows: Vec<RowPath>) -> RowPrefix {
    let row_tokens = rows
        .iter()
        .map(|r| {
            r.nodes
                .iter()
                .map(|&n| r.tree.nodes[n as usize].len as u64)
                .sum::<u64>()
        })
        .sum::<u64>();
    // In lexicographic order a row's longest common prefix with any other row is with a
    // neighbour, so the prefix tree holds each row's tokens past its predecessor's.
    rows.par_sort_unstable_by(|a, b| compare(a, b).0);
    let shared: u64 = rows.par_windows(2).map(|w| compare(&w[0], &w[1]).1).sum();
    RowPrefix {
        row_tokens,
        distinct_tokens: row_tokens - shared,
    }
}

/// The order of two rows' token sequences and the length of their common prefix, walked node
/// piece by node piece (a shared node of one execution is skipped whole).
fn compare(a: &RowPath, b: &RowPath) -> (Ordering, u64) {
    let (mut ia, mut oa, mut ib, mut ob) = (0, 0usize, 0, 0usize);
    let mut common = 0u64;
    loop {
        let (Some(&na), Some(&nb)) = (a.nodes.get(ia), b.nodes.get(ib)) else {
            let order = (ia < a.nodes.len()).cmp(&(ib < b.nodes.len()));
            return (order, common);
        };
        let ta = &a.tree.node_tokens(na)[oa..];
        let tb = &b.tree.node_tokens(nb)[ob..];
        let n = ta.len().min(tb.len());
        if std::ptr::eq(a.tree, b.tree) && na == nb && oa == ob {
            common += ta.len() as u64;
            (ia, oa, ib, ob) = (ia + 1, 0, ib + 1, 0);
            continue;
        }
        if let Some(k) = ta[..n].iter().zip(&tb[..n]).position(|(x, y)| x != y) {
            return (ta[k].cmp(&tb[k]), common + k as u64);
        }
        common += n as u64;
        if n == ta.len() {
            (ia, oa) = (ia + 1, 0);
        } else {
            oa += n;
        }
        if n == tb.len() {
            (ib, ob) = (ib + 1, 0);
        } else {
            ob += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::admit::Settings;
    use crate::load::{Input, LoadOptions, load_inputs};
    use crate::recgen::{self, GenOptions};
    use crate::rows::execution_rows;
    use crate::score::AdvantageMode;

    /// Distinct tokens of a trie of the rows, one map per node: independent of the sort.
    fn trie_tokens(rows: &[Vec<u32>]) -> u64 {
        let mut children: Vec<HashMap<u32, usize>> = vec![HashMap::new()];
        for row in rows {
            let mut at = 0;
            for &t in row {
                at = match children[at].get(&t) {
                    Some(&next) => next,
                    None => {
                        children.push(HashMap::new());
                        let next = children.len() - 1;
                        children[at].insert(t, next);
                        next
                    }
                };
            }
        }
        children.len() as u64 - 1
    }

    #[test]
    fn the_prefix_tree_of_the_rows_is_a_trie_of_their_tokens() {
        for (seed, jmax) in [(5, 5), (6, 0), (7, 1)] {
            let execs = recgen::generate(&GenOptions {
                executions: 20,
                turns: 6,
                seed,
                ..GenOptions::default()
            });
            let mut text = Vec::new();
            recgen::write_recording(&execs, false, &mut text).expect("writes to memory");
            let input = [Input::Memory {
                name: "generated.jsonl",
                bytes: &text,
            }];
            let batch = load_inputs(&input, &LoadOptions::default(), &|_, _| {})
                .expect("the recording loads");
            let settings = Settings {
                jmax,
                ..Settings::default()
            };
            let results = crate::process::process(&batch, &settings, AdvantageMode::DrGrpo);
            let rows: Vec<Vec<u32>> = (0..batch.executions.len())
                .flat_map(|i| execution_rows(&batch, &results, i))
                .map(|r| r.tokens)
                .collect();
            let got = row_prefix(&batch, &results);
            assert_eq!(
                got.row_tokens,
                rows.iter().map(|r| r.len() as u64).sum::<u64>()
            );
            assert_eq!(got.distinct_tokens, trie_tokens(&rows), "seed {seed}");
            assert!(got.distinct_tokens < got.row_tokens, "rows share prefixes");
            // The tree-pack figure is the layout's, over the rows with targets.
            let all: Vec<_> = (0..batch.executions.len())
                .flat_map(|i| execution_rows(&batch, &results, i))
                .collect();
            let packed: Vec<crate::tree_pack::PackRow> = all
                .iter()
                .map(|r| crate::tree_pack::PackRow {
                    tokens: &r.tokens,
                    prompt_len: r.prompt_len as usize,
                    loss_mask: &r.loss_mask,
                })
                .collect();
            let layout = crate::tree_pack::layout(&packed, usize::MAX).expect("packs");
            let tree = tree_pack(&batch, &results);
            assert_eq!(
                (tree.row_tokens, tree.distinct_tokens),
                (layout.row_tokens, layout.tree_tokens)
            );
            assert_eq!(layout.packed_tokens(), layout.tree_tokens);
        }
    }

    #[test]
    fn rows_of_different_executions_share_equal_tokens() {
        // Two executions whose trees hold the same system prompt: the prefix tree holds it once,
        // although no node is shared.
        let mut text = Vec::new();
        text.extend_from_slice(b"{\"kind\":\"header\",\"format\":\"gyre/1\"}\n");
        for e in ["a", "b"] {
            for line in [
                format!(r#"{{"kind":"execution","execution":"{e}","t":0,"budget_s":9}}"#),
                format!(
                    r#"{{"kind":"request","execution":"{e}","id":"r1","agent":"main","input":[1,2,3],"output":[4,5],"logprobs":[-0.1,-0.2],"t":1}}"#
                ),
                format!(
                    r#"{{"kind":"closure","execution":"{e}","t":2,"status":"completed","artifact":"p","version":1}}"#
                ),
                format!(
                    r#"{{"kind":"assessment","execution":"{e}","artifact":"p","version":1,"status":"valid","score":1,"t":3}}"#
                ),
            ] {
                text.extend_from_slice(line.as_bytes());
                text.push(b'\n');
            }
        }
        let input = [Input::Memory {
            name: "two.jsonl",
            bytes: &text,
        }];
        let batch = load_inputs(&input, &LoadOptions::default(), &|_, _| {}).expect("loads");
        let results = crate::process::process(&batch, &Settings::default(), AdvantageMode::DrGrpo);
        let got = row_prefix(&batch, &results);
        assert_eq!((got.row_tokens, got.distinct_tokens), (10, 5));
        assert_eq!(got.repeat(), 2.0);
    }
}
