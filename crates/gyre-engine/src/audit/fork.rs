//! `false_fork`: two samples of one execution that part inside an earlier policy output, or
//! where one holds a policy output and the other a re-rendered version of it (an earlier turn
//! the template rewrote, e.g. past `<think>` stripped). Each sample is compared with the
//! earlier sample sharing its longest prefix, which a trie over the samples' keys gives.

use rustc_hash::FxHashMap as HashMap;

use super::finding::{Finding, Kind, Scope, ids_text, stretch};
use super::layout::Key;

/// What false forks cost: the extra samples, and the prefix tokens each recomputes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForkCost {
    /// Samples that would not exist without the fork.
    pub samples: u64,
    /// Prefix tokens those samples recompute.
    pub tokens: u64,
}

/// One trie node over the samples' keys.
struct TrieNode {
    /// The first sample that went on below this node (`NONE`: none yet).
    first_child_owner: u32,
}

const NONE: u32 = u32::MAX;

/// Each sample against the earlier sample sharing its longest prefix: a finding on the later
/// one from the parting point when they part falsely. Returns the findings, their cost, and
/// the cost of the same partings where a recording apart from the samples holds them on both
/// sides (the rollout parted there: samples that follow it are faithful, and not findings).
pub fn false_fork(scope: &Scope) -> (Vec<Finding>, ForkCost, ForkCost) {
    let apart = scope.recorded_apart();
    let mut recorded = ForkCost::default();
    let (exec, layout) = (scope.exec, scope.layout);
    let mut children: HashMap<(u32, Key), u32> = HashMap::default();
    let mut nodes = vec![TrieNode {
        first_child_owner: NONE,
    }];
    let mut ids: Vec<Option<Vec<u32>>> = vec![None; layout.samples.len()];
    let mut findings = Vec::new();
    let mut cost = ForkCost::default();
    for (s, sample) in layout.samples.iter().enumerate() {
        let keys = &sample.keys;
        let mut cur = 0u32;
        let mut l = 0usize;
        while l < keys.len() {
            match children.get(&(cur, keys[l])) {
                Some(&next) => {
                    cur = next;
                    l += 1;
                }
                None => break,
            }
        }
        let other = nodes[cur as usize].first_child_owner;
        // The rest of the sample goes into the trie.
        let mut at = cur;
        for &k in &keys[l..] {
            let id = nodes.len() as u32;
            nodes.push(TrieNode {
                first_child_owner: NONE,
            });
            if nodes[at as usize].first_child_owner == NONE {
                nodes[at as usize].first_child_owner = s as u32;
            }
            children.insert((at, k), id);
            at = id;
        }
        if l == 0 || l >= keys.len() || other == NONE {
            continue;
        }
        let o = other as usize;
        let (ks, ko) = (keys[l], layout.samples[o].keys[l]);
        let policy = |k: Key| layout.output(exec, k).filter(|_| layout.sampled(exec, k));
        let (ps, po) = (policy(ks), policy(ko));
        let inside = po.filter(|&(_, j)| j > 0).or(ps.filter(|&(_, j)| j > 0));
        let one_sided = ps.is_some() != po.is_some();
        if inside.is_none() && !one_sided {
            continue;
        }
        for i in [s, o] {
            if ids[i].is_none() {
                ids[i] = Some(layout.ids(exec, i));
            }
        }
        let (Some(s_ids), Some(o_ids)) = (&ids[s], &ids[o]) else {
            continue;
        };
        let (k_s, resync) = stretch(&s_ids[l..], &o_ids[l..]);
        let (k_o, _) = stretch(&o_ids[l..], &s_ids[l..]);
        // One side sampled where the other holds context: a re-rendered turn only when the two
        // sides meet again; otherwise the contexts differ (a real fork).
        if inside.is_none() && !resync {
            continue;
        }
        if apart && ks < layout.tree_len && ko < layout.tree_len {
            recorded.samples += 1;
            recorded.tokens += l as u64;
            continue;
        }
        let end = (l + k_s).min(keys.len());
        let mut f = Finding::new(
            Kind::FalseFork,
            scope.index,
            Some(s as u32),
            l as u32,
            end as u32,
        );
        f.other = Some(other);
        f.value = Some(l as f64);
        let (r, j) = inside.or(po).or(ps).unwrap_or((0, 0));
        f.request = Some(r);
        let where_ = match inside {
            Some(_) => format!(
                "inside request {}'s output (at output token {j})",
                exec.requests[r as usize].id
            ),
            None => format!(
                "where request {}'s output starts, re-rendered on one side",
                exec.requests[r as usize].id
            ),
        };
        f.detail = format!(
            "parts from sample {} at position {l}, {where_}: this sample has {} where it has {}; 1 extra sample, {l} prefix tokens recomputed",
            exec.trained.list[o].record.sample,
            ids_text(&s_ids[l..end]),
            ids_text(&o_ids[l..(l + k_o).min(o_ids.len())]),
        );
        cost.samples += 1;
        cost.tokens += l as u64;
        findings.push(f);
    }
    (findings, cost, recorded)
}
