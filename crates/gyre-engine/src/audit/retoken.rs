//! `retokenized`: a context that shares a prefix with an earlier call's path (its context and
//! output), differs inside what that call saw or sampled, and goes on as its continuation
//! (earlier tokens rewritten by a retokenisation or a template); also a sample whose literal
//! ids leave the recorded tree where the recording goes on (drift between the recording and
//! the trainer's row). A context that starts afresh fails the continuation test.

use rustc_hash::FxHashMap as HashMap;

use super::finding::{Finding, Kind, Scope, ids_text, stretch};
use super::layout::Key;
use crate::execution::Execution;
use crate::paint::PathView;
use crate::tree::{NodeId, ROOT};

/// Whether `rest` goes on as the continuation of `remainder`: it holds at least half of
/// `remainder`'s tokens (as a multiset) and is at least half as long.
pub fn continues(rest: &[u32], remainder: &[u32]) -> bool {
    if 2 * rest.len() < remainder.len() {
        return false;
    }
    let mut left: HashMap<u32, u32> =
        HashMap::with_capacity_and_hasher(remainder.len(), Default::default());
    for &t in remainder {
        *left.entry(t).or_default() += 1;
    }
    let mut hits = 0usize;
    for t in rest {
        if let Some(n) = left.get_mut(t).filter(|n| **n > 0) {
            *n -= 1;
            hits += 1;
        }
    }
    2 * hits >= remainder.len()
}

/// Path positions `from..` of request `q`.
fn path_from(exec: &Execution, q: u32, from: u64) -> Vec<u32> {
    let view = PathView::new(exec, q);
    view.tokens(exec, from..view.len)
}

/// Requests whose context rewrites an earlier call's path, and samples that leave the tree
/// where the recording goes on. Returns the findings and the rewrites a recording apart from
/// the samples holds (the harness rewrote the context the policy was called with: the rollout's,
/// not the trainer's; see [`Scope::recorded_apart`]).
pub fn retokenized(scope: &Scope) -> (Vec<Finding>, u64) {
    let apart = scope.recorded_apart();
    let mut recorded = 0u64;
    let (exec, layout) = (scope.exec, scope.layout);
    let tree = &exec.tree;
    const NONE: u32 = u32::MAX;
    // Per node: the latest request (so far) whose path passes through it.
    let mut through = vec![NONE; tree.nodes.len()];
    // Per tree key: the first (sample, position) holding it, built when first needed.
    let mut holder: Option<Vec<(u32, u32)>> = None;
    let mut findings = Vec::new();
    for (r, req) in exec.requests.iter().enumerate() {
        let path = tree.path_nodes(req.output_node);
        let l = req.matched as u64;
        if l > 0 {
            // The node ending at the end of the match, and the node after it on r's path.
            let mut depth = 0u64;
            let mut parting: Option<(NodeId, NodeId)> = None;
            let mut prev = ROOT;
            for &n in &path {
                if depth == l {
                    parting = Some((prev, n));
                    break;
                }
                depth += tree.nodes[n as usize].len as u64;
                prev = n;
            }
            if let Some((p, next)) = parting {
                let q = through[p as usize];
                if q != NONE {
                    let qr = &exec.requests[q as usize];
                    let q_len = qr.input_len as u64 + qr.output_len as u64;
                    if l < q_len {
                        let remainder = path_from(exec, q, l);
                        let mut rest = path_from(exec, r as u32, l);
                        rest.truncate((req.input_len as u64 - l) as usize);
                        if continues(&rest, &remainder) && apart {
                            recorded += 1;
                        } else if continues(&rest, &remainder) {
                            let (k, _) = stretch(&rest, &remainder);
                            let key = tree.nodes[next as usize].start;
                            let holder = holder.get_or_insert_with(|| first_holders(scope));
                            let mut f = match holder.get(key as usize) {
                                Some(&(s, pos)) if s != NONE => {
                                    let len = layout.samples[s as usize].keys.len() as u32;
                                    Finding::new(
                                        Kind::Retokenized,
                                        scope.index,
                                        Some(s),
                                        pos,
                                        (pos + k as u32).min(len),
                                    )
                                }
                                _ => Finding::new(
                                    Kind::Retokenized,
                                    scope.index,
                                    None,
                                    l as u32,
                                    (l + k as u64).min(req.input_len as u64) as u32,
                                ),
                            };
                            f.request = Some(r as u32);
                            f.detail = format!(
                                "request {}'s context rewrites what request {} saw or sampled: from position {l} it holds {} where request {} has {}, then goes on as its continuation",
                                req.id,
                                qr.id,
                                ids_text(&rest[..k.min(rest.len())]),
                                qr.id,
                                ids_text(&remainder[..k.min(remainder.len())]),
                            );
                            findings.push(f);
                        }
                    }
                }
            }
        }
        for &n in &path {
            through[n as usize] = r as u32;
        }
    }
    findings.extend(drift(scope, &through));
    (findings, recorded)
}

/// Per tree key: the first (sample, position) holding it (`(NONE, 0)` when none does).
fn first_holders(scope: &Scope) -> Vec<(u32, u32)> {
    let layout = scope.layout;
    let mut out = vec![(u32::MAX, 0); layout.tree_len as usize];
    for (s, sample) in layout.samples.iter().enumerate() {
        for (p, &k) in sample.keys.iter().enumerate() {
            if k < layout.tree_len && out[k as usize].0 == u32::MAX {
                out[k as usize] = (s as u32, p as u32);
            }
        }
    }
    out
}

/// Samples whose literal ids leave the tree where the recording goes on, and go on as the
/// recording's continuation: the trainer's row differs from what was recorded.
fn drift(scope: &Scope, through: &[u32]) -> Vec<Finding> {
    let (exec, layout) = (scope.exec, scope.layout);
    let tree = &exec.tree;
    let mut findings = Vec::new();
    for (s, sample) in layout.samples.iter().enumerate() {
        let p = sample.leaves_tree as usize;
        if p == 0 || p >= sample.keys.len() {
            continue;
        }
        let last: Key = sample.keys[p - 1];
        if last >= layout.tree_len {
            continue;
        }
        let super::layout::Place::Tree { node, index } = layout.place(exec, last) else {
            continue;
        };
        let n = &tree.nodes[node as usize];
        let goes_on =
            index + 1 < n.len || n.children.iter().any(|&c| tree.nodes[c as usize].len > 0);
        let q = through[node as usize];
        if !goes_on || q == u32::MAX {
            continue;
        }
        let depth = tree.depth_tokens(node) - (n.len - index - 1) as u64;
        let mut remainder = path_from(exec, q, depth);
        let ids = layout.ids(exec, s);
        let rest = &ids[p..];
        // A sample may end before the recorded path does (a sample of an early turn): it is
        // compared with as much of the path as it holds.
        remainder.truncate(rest.len());
        if remainder.is_empty() {
            continue;
        }
        if !continues(rest, &remainder) {
            continue;
        }
        let (k, _) = stretch(rest, &remainder);
        let end = (p + k).min(ids.len());
        let mut f = Finding::new(
            Kind::Retokenized,
            scope.index,
            Some(s as u32),
            p as u32,
            end as u32,
        );
        f.request = Some(q);
        f.detail = format!(
            "the sample leaves the recorded tree at position {p}: it holds {} where request {} has {}, then goes on as its continuation",
            ids_text(&rest[..k.min(rest.len())]),
            exec.requests[q as usize].id,
            ids_text(&remainder[..k.min(remainder.len())]),
        );
        findings.push(f);
    }
    findings
}
