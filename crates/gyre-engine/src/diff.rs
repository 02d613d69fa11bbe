//! A/B comparison of two admissions (`gyre diff`): the same recording under two settings, or two
//! recordings with the same execution ids (say, an import with payload restoration and one
//! without). Executions are matched by id, tokens by identity: output token `offset` of
//! request `id` (docs/format.md §2), so the comparison does not depend on where a token sits in a tree.

use std::collections::HashMap;

use serde::Serialize;

use super::admit::trainable_node;
use super::execution::Execution;
use super::load::Batch;
use super::loss::target_weight;
use super::tree::NodeKind;
use crate::process::Results;

/// One side of a comparison: a loaded batch and what the engine decided for it.
#[derive(Clone, Copy, Debug)]
pub struct Side<'a> {
    /// The recording.
    pub batch: &'a Batch,
    /// Its scores and admissions under this side's settings.
    pub results: &'a Results,
}

/// Output tokens `offset..offset + len` of request `request` changed between target and not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Flip {
    /// Request id.
    pub request: String,
    /// First output offset.
    pub offset: u32,
    /// Tokens.
    pub len: u32,
    /// `true`: a target under B only; `false`: a target under A only.
    pub to_target: bool,
}

/// How many flips to keep per execution for display.
pub const SHOWN_FLIPS: usize = 8;

/// One execution under A and B (`None` on a side that does not have it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExecutionDiff {
    /// Execution id.
    pub execution: String,
    /// `scored`, `dummy`, `excluded` under A.
    pub status_a: Option<&'static str>,
    /// The same under B.
    pub status_b: Option<&'static str>,
    /// Exported rows under A.
    pub rows_a: u64,
    /// Exported rows under B.
    pub rows_b: u64,
    /// `L_i` under A.
    pub targets_a: u64,
    /// `L_i` under B.
    pub targets_b: u64,
    /// `1/L_i` under A (0 when `L_i = 0`).
    pub weight_a: f64,
    /// `1/L_i` under B.
    pub weight_b: f64,
    /// Tokens that are targets under B but not A.
    pub flips_to_target: u64,
    /// Tokens that are targets under A but not B.
    pub flips_to_left_out: u64,
    /// The first flips, in request order.
    pub first_flips: Vec<Flip>,
}

impl ExecutionDiff {
    /// Tokens that flip either way.
    pub fn flips(&self) -> u64 {
        self.flips_to_target + self.flips_to_left_out
    }

    /// Whether anything differs.
    pub fn changed(&self) -> bool {
        self.status_a != self.status_b
            || self.rows_a != self.rows_b
            || self.targets_a != self.targets_b
            || self.flips() > 0
    }
}

/// The whole comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diff {
    /// Every execution of A, then those only B has.
    pub executions: Vec<ExecutionDiff>,
    /// `B` (batch executions) under A.
    pub batch_executions_a: u64,
    /// `B` under B.
    pub batch_executions_b: u64,
}

impl Diff {
    /// Sum of a figure over executions.
    pub fn total(&self, f: impl Fn(&ExecutionDiff) -> u64) -> u64 {
        self.executions.iter().map(f).sum()
    }

    /// Executions whose status differs.
    pub fn status_changes(&self) -> usize {
        self.executions
            .iter()
            .filter(|e| e.status_a != e.status_b)
            .count()
    }
}

/// Target runs per request index of an execution: `(offset, len)`, sorted, merged.
fn target_runs(exec: &Execution, claimed: &[Option<u32>]) -> Vec<Vec<(u32, u32)>> {
    let mut runs: Vec<Vec<(u32, u32)>> = vec![Vec::new(); exec.requests.len()];
    for (n, node) in exec.tree.nodes.iter().enumerate() {
        if node.kind == NodeKind::Output && claimed[n].is_some() && trainable_node(exec, n as u32) {
            runs[node.owner as usize].push((node.offset, node.len));
        }
    }
    for r in &mut runs {
        r.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(r.len());
        for &(o, l) in r.iter() {
            match merged.last_mut() {
                Some((mo, ml)) if *mo + *ml == o => *ml += l,
                _ => merged.push((o, l)),
            }
        }
        *r = merged;
    }
    runs
}

/// Pieces of `a` not covered by `b` (both sorted, merged runs).
fn minus(a: &[(u32, u32)], b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut j = 0;
    for &(start, len) in a {
        let end = start + len;
        let mut cur = start;
        while j < b.len() && b[j].0 + b[j].1 <= cur {
            j += 1;
        }
        let mut k = j;
        while cur < end {
            match b.get(k) {
                Some(&(bs, bl)) if bs < end => {
                    if bs > cur {
                        out.push((cur, bs - cur));
                    }
                    cur = cur.max(bs + bl);
                    k += 1;
                }
                _ => {
                    out.push((cur, end - cur));
                    cur = end;
                }
            }
        }
    }
    out
}

struct Facts<'a> {
    exec: &'a Execution,
    status: &'static str,
    rows: u64,
    targets: u64,
    runs: Vec<Vec<(u32, u32)>>,
}

fn facts<'a>(side: &Side<'a>, i: usize) -> Facts<'a> {
    let exec = &side.batch.executions[i];
    let outcome = &side.results.outcomes[i];
    let adm = &side.results.admissions[i];
    let rows = match outcome.label() {
        "scored" => adm.draws.len() as u64,
        "dummy" => 1,
        _ => 0,
    };
    Facts {
        exec,
        status: outcome.label(),
        rows,
        targets: adm.targets(),
        runs: target_runs(exec, &adm.claimed_by),
    }
}

/// Compares `a` and `b` execution by execution.
pub fn diff(a: Side, b: Side) -> Diff {
    let index_b: HashMap<&str, usize> = b
        .batch
        .executions
        .iter()
        .enumerate()
        .map(|(i, e)| (e.id.as_str(), i))
        .collect();
    let mut executions = Vec::new();
    let mut seen_b = vec![false; b.batch.executions.len()];
    for i in 0..a.batch.executions.len() {
        let fa = facts(&a, i);
        let fb = index_b.get(fa.exec.id.as_str()).map(|&j| {
            seen_b[j] = true;
            facts(&b, j)
        });
        executions.push(compare(Some(&fa), fb.as_ref()));
    }
    for (j, seen) in seen_b.iter().enumerate() {
        if !seen {
            executions.push(compare(None, Some(&facts(&b, j))));
        }
    }
    Diff {
        executions,
        batch_executions_a: a.results.batch_executions,
        batch_executions_b: b.results.batch_executions,
    }
}

/// A request's target runs as `(output offset, length)`, sorted.
type Runs<'a> = &'a [(u32, u32)];

fn compare(a: Option<&Facts>, b: Option<&Facts>) -> ExecutionDiff {
    let id = a.or(b).expect("one side has the execution").exec.id.clone();
    // Target runs by request id, in the request order of A, then B's own requests.
    let mut ids: Vec<&str> = Vec::new();
    let mut by_id: HashMap<&str, [Runs; 2]> = HashMap::new();
    for (side, facts) in [(0, a), (1, b)] {
        let Some(f) = facts else { continue };
        for (r, req) in f.exec.requests.iter().enumerate() {
            let entry = by_id.entry(req.id.as_str()).or_insert_with(|| {
                ids.push(req.id.as_str());
                [&[], &[]]
            });
            entry[side] = &f.runs[r];
        }
    }
    let (mut to_target, mut to_left_out) = (0u64, 0u64);
    let mut first = Vec::new();
    for id in ids {
        let [ra, rb] = by_id[id];
        let mut flips: Vec<Flip> = Vec::new();
        for (from, to, to_target_dir) in [(ra, rb, false), (rb, ra, true)] {
            for (offset, len) in minus(from, to) {
                if to_target_dir {
                    to_target += len as u64;
                } else {
                    to_left_out += len as u64;
                }
                flips.push(Flip {
                    request: id.to_owned(),
                    offset,
                    len,
                    to_target: to_target_dir,
                });
            }
        }
        flips.sort_by_key(|f| f.offset);
        for f in flips {
            if first.len() < SHOWN_FLIPS {
                first.push(f);
            }
        }
    }
    let targets = |f: Option<&Facts>| f.map_or(0, |f| f.targets);
    ExecutionDiff {
        execution: id,
        status_a: a.map(|f| f.status),
        status_b: b.map(|f| f.status),
        rows_a: a.map_or(0, |f| f.rows),
        rows_b: b.map_or(0, |f| f.rows),
        targets_a: targets(a),
        targets_b: targets(b),
        weight_a: target_weight(targets(a)),
        weight_b: target_weight(targets(b)),
        flips_to_target: to_target,
        flips_to_left_out: to_left_out,
        first_flips: first,
    }
}

#[cfg(test)]
mod tests {
    use super::minus;

    #[test]
    fn run_difference() {
        assert_eq!(
            minus(&[(0, 10)], &[(2, 3), (7, 1)]),
            [(0, 2), (5, 2), (8, 2)]
        );
        assert_eq!(minus(&[(0, 4), (6, 4)], &[(0, 10)]), []);
        assert_eq!(minus(&[(5, 5)], &[]), [(5, 5)]);
        assert_eq!(minus(&[(0, 3), (4, 3)], &[(2, 3)]), [(0, 2), (5, 2)]);
    }
}
