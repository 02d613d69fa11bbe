//! The row model of `gyre/admitted-1` (docs/format.md §8): [`Row`], its target runs, the rows of
//! an execution and their sizes. The writers in [`crate::export`] serialise these rows.

use serde::Serialize;
use serde_json::Value;

use crate::admit::{Admission, Class, trainable_node};
use crate::execution::{Execution, Request};
use crate::load::Batch;
use crate::loss::target_weight;
use crate::process::Results;
use crate::score::{AdvantageMode, Outcome};
use crate::tree::NodeId;

/// A run of targets: path positions `pos..pos+len` are output tokens `offset..offset+len` of
/// `request`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TargetRun {
    /// Request id.
    pub request: String,
    /// Offset in that request's output.
    pub offset: u32,
    /// Number of tokens.
    pub len: u32,
    /// Position in the row's `tokens`.
    pub pos: u64,
    /// The temperature `request` was sampled at (`meta.sampling.temperature`); `None` when it
    /// recorded none.
    pub temperature: Option<f64>,
}

/// One admitted trajectory, field for field as exported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Execution id.
    pub execution: String,
    /// GRPO group.
    pub group: Option<Value>,
    /// 1-based draw index.
    pub draw: u32,
    /// Leaf request id (`None` for a dummy with no policy request).
    pub leaf: Option<String>,
    /// Leaf class.
    pub class: Option<Class>,
    /// Reward.
    pub reward: f64,
    /// Advantage; the field is left out entirely with `--advantage none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advantage: Option<Option<f64>>,
    /// Placeholder trajectory of a dummy execution.
    pub dummy: bool,
    /// The full path `I + O` of the leaf.
    pub tokens: Vec<u32>,
    /// Index of the first target (`|I|` of the leaf for a dummy).
    pub prompt_len: u64,
    /// 0/1 per response token; 1 exactly at this row's targets.
    pub loss_mask: Vec<u8>,
    /// Behaviour log-prob per response token (0.0 off-policy); `None` when a target lacks one.
    pub logprobs: Option<Vec<f64>>,
    /// The temperature every target was sampled at; `None` when a target's request recorded
    /// none, when they differ (each run of `targets` has its own) or when there are no targets.
    pub temperature: Option<f64>,
    /// Provenance of the targets.
    pub targets: Vec<TargetRun>,
    /// `L_i`.
    pub exec_targets: u64,
    /// `1/L_i` (0 when `L_i = 0`).
    pub weight: f64,
    /// `B`.
    pub batch_executions: u64,
}

impl Serialize for Class {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The rows of execution `i` (none when excluded).
pub fn execution_rows(batch: &Batch, results: &Results, i: usize) -> Vec<Row> {
    rows_of(batch, results, i, None)
}

/// The row of draw `draw` (1-based; a dummy's placeholder is draw 1) of execution `i`, exactly
/// as exported.
pub fn draw_row(batch: &Batch, results: &Results, i: usize, draw: u32) -> Option<Row> {
    rows_of(batch, results, i, Some(draw)).pop()
}

/// The rows of execution `i`, or only the one of draw `only`.
fn rows_of(batch: &Batch, results: &Results, i: usize, only: Option<u32>) -> Vec<Row> {
    let wanted = |k: u32| only.is_none_or(|o| o == k);
    let exec = &batch.executions[i];
    let outcome = &results.outcomes[i];
    let admission = &results.admissions[i];
    let advantage = match results.advantage_mode {
        AdvantageMode::None => None,
        _ => Some(results.advantages[i]),
    };
    let exec_targets = admission.targets();
    let base = |draw, leaf: Option<u32>, reward, dummy| Row {
        execution: exec.id.clone(),
        group: exec.group().cloned(),
        draw,
        leaf: leaf.map(|l| exec.requests[l as usize].id.clone()),
        class: leaf.map(|l| {
            let r = &exec.requests[l as usize];
            Class::of(&r.agent, r.purpose)
        }),
        reward,
        advantage,
        dummy,
        tokens: Vec::new(),
        prompt_len: 0,
        loss_mask: Vec::new(),
        logprobs: Some(Vec::new()),
        temperature: None,
        targets: Vec::new(),
        exec_targets,
        weight: target_weight(exec_targets),
        batch_executions: results.batch_executions,
    };
    match outcome {
        Outcome::Excluded(_) => Vec::new(),
        Outcome::Dummy if !wanted(1) => Vec::new(),
        Outcome::Dummy => {
            let leaf = dummy_leaf(exec);
            let mut row = base(1, leaf, 0.0, true);
            if let Some(l) = leaf {
                fill_path(exec, &mut row, l, |_| false);
            }
            vec![row]
        }
        Outcome::Scored { reward, .. } => admission
            .draws
            .iter()
            .enumerate()
            .filter(|&(k, _)| wanted(k as u32 + 1))
            .map(|(k, d)| {
                let mut row = base(k as u32 + 1, Some(d.chosen), *reward, false);
                let k = Some(k as u32 + 1);
                fill_path(exec, &mut row, d.chosen, |n| {
                    admission.claimed_by[n as usize] == k
                });
                row
            })
            .collect(),
    }
}

/// Number of rows of execution `i` and the tokens they hold, known before the rows are built.
pub fn row_size(batch: &Batch, results: &Results, i: usize) -> (usize, u64) {
    let exec = &batch.executions[i];
    match results.outcomes[i] {
        Outcome::Excluded(_) => (0, 0),
        Outcome::Dummy => (
            1,
            dummy_leaf(exec).map_or(0, |l| {
                let r = &exec.requests[l as usize];
                (r.input_len + r.output_len) as u64
            }),
        ),
        Outcome::Scored { .. } => {
            let draws = &results.admissions[i].draws;
            (draws.len(), draws.iter().map(|d| d.path_tokens).sum())
        }
    }
}

/// The request a dummy's placeholder shows: the committed one, else the last policy request.
pub fn dummy_leaf(exec: &Execution) -> Option<u32> {
    let committed = exec
        .closure
        .as_ref()
        .and_then(|c| c.record.committed.as_deref())
        .and_then(|id| exec.request_index(id))
        .filter(|&i| exec.requests[i as usize].trainable());
    committed.or_else(|| {
        exec.requests
            .iter()
            .rposition(|r| r.trainable())
            .map(|i| i as u32)
    })
}

/// Fills tokens, prompt_len, loss_mask, logprobs and targets of a row for leaf `leaf` whose
/// targets are the nodes for which `is_target` holds.
fn fill_path(exec: &Execution, row: &mut Row, leaf: u32, is_target: impl Fn(NodeId) -> bool) {
    let tree = &exec.tree;
    let leaf_req = &exec.requests[leaf as usize];
    let path = tree.path_nodes(leaf_req.output_node);
    let mut tokens = Vec::with_capacity((leaf_req.input_len + leaf_req.output_len) as usize);
    let mut starts = Vec::with_capacity(path.len());
    for &n in &path {
        starts.push(tokens.len() as u64);
        tokens.extend_from_slice(tree.node_tokens(n));
    }
    let prompt_len = path
        .iter()
        .zip(&starts)
        .find(|(n, _)| is_target(**n))
        .map_or(leaf_req.input_len as u64, |(_, &s)| s);
    let mut loss_mask = Vec::with_capacity(tokens.len() - prompt_len as usize);
    let mut logprobs = Some(Vec::with_capacity(tokens.len() - prompt_len as usize));
    let mut runs: Vec<TargetRun> = Vec::new();
    for (&n, &start) in path.iter().zip(&starts) {
        let node = &tree.nodes[n as usize];
        let end = start + node.len as u64;
        if end <= prompt_len {
            continue;
        }
        let skip = prompt_len.saturating_sub(start) as u32;
        let target = is_target(n);
        let policy = trainable_node(exec, n);
        let owner = &exec.requests[node.owner as usize];
        for j in skip..node.len {
            loss_mask.push(target as u8);
            if let Some(lps) = logprobs.as_mut() {
                let lp = if policy {
                    owner.logprob(node.offset + j)
                } else {
                    Some(0.0)
                };
                match lp {
                    Some(v) => lps.push(v),
                    // Never invent a behaviour log-prob for a token that is trained on.
                    None if target => logprobs = None,
                    None => lps.push(0.0),
                }
            }
        }
        if target {
            push_run(&mut runs, owner, node.offset, node.len, start);
        }
    }
    row.tokens = tokens;
    row.prompt_len = prompt_len;
    row.loss_mask = loss_mask;
    row.logprobs = logprobs;
    row.temperature = common_temperature(&runs);
    row.targets = runs;
}

/// The one temperature all `runs` were sampled at, if every run recorded it and they agree.
fn common_temperature(runs: &[TargetRun]) -> Option<f64> {
    let first = runs.first()?.temperature?;
    runs.iter()
        .all(|r| r.temperature == Some(first))
        .then_some(first)
}

/// Adds target node `offset..offset+len` of request `request` at path position `pos`, merged
/// into the last run when it continues it (pieces of one output split by later divergences).
fn push_run(runs: &mut Vec<TargetRun>, request: &Request, offset: u32, len: u32, pos: u64) {
    match runs.last_mut() {
        Some(last)
            if last.request == request.id
                && last.offset + last.len == offset
                && last.pos + last.len as u64 == pos =>
        {
            last.len += len
        }
        _ => runs.push(TargetRun {
            request: request.id.clone(),
            offset,
            len,
            pos,
            temperature: request.temperature(),
        }),
    }
}

/// The target runs draw `k` (1-based) fixed on its leaf's path: the row's `targets`, without
/// building the row.
pub fn draw_targets(exec: &Execution, admission: &Admission, k: u32) -> Vec<TargetRun> {
    let Some(d) = admission.draws.get((k as usize).wrapping_sub(1)) else {
        return Vec::new();
    };
    let tree = &exec.tree;
    let mut runs = Vec::new();
    let mut pos = 0u64;
    for n in tree.path_nodes(exec.requests[d.chosen as usize].output_node) {
        let node = &tree.nodes[n as usize];
        if admission.claimed_by[n as usize] == Some(k) {
            let owner = &exec.requests[node.owner as usize];
            push_run(&mut runs, owner, node.offset, node.len, pos);
        }
        pos += node.len as u64;
    }
    runs
}
