//! Batch statistics (`gyre stats`).

use std::collections::BTreeMap;

use serde::Serialize;

use rayon::prelude::*;

use super::admit::{Admission, Class, Stop, trainable_node};
use super::branches;
use super::execution::{Execution, Request};
use super::load::Batch;
use super::row_prefix::{row_prefix, tree_pack};
use super::score::Outcome;
use super::trained::TrainedCounts;
use super::tree::{NodeId, NodeKind};
use crate::process::Results;
use gyre_format::record::{Actor, Source};

/// Counts over a batch; serialised as `gyre stats --json`.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Stats {
    /// Input files.
    pub files: usize,
    /// Executions.
    pub executions: u64,
    /// All request records.
    pub requests: u64,
    /// Requests recorded after their execution's closure.
    pub requests_after_closure: u64,
    /// Requests marked `meta.reconstructed`.
    pub requests_reconstructed: u64,
    /// Σ over requests of |full input| + |output|.
    pub raw_tokens: u64,
    /// Tokens stored in the trees (each shared token once).
    pub tree_tokens: u64,
    /// `raw_tokens / tree_tokens`.
    pub dedup_ratio: f64,
    /// Trainable tokens (policy outputs of requests inside their execution), all executions.
    pub policy_tokens: u64,
    /// Tree tokens by provenance: span sources for context, `policy`, `evaluator`,
    /// `after-closure` for outputs.
    pub tokens_by_source: BTreeMap<String, u64>,
    /// Scored executions.
    pub scored: u64,
    /// Dummy executions.
    pub dummy: u64,
    /// Excluded executions.
    pub excluded: u64,
    /// Excluded executions by reason.
    pub excluded_by_reason: BTreeMap<String, u64>,
    /// Candidate leaves, all executions (structural: excluded executions' leaves included).
    pub candidates: u64,
    /// Candidates by class.
    pub candidates_by_class: BTreeMap<String, u64>,
    /// Draws made under the settings.
    pub draws: u64,
    /// Exported rows (draws plus one placeholder per dummy).
    pub rows: u64,
    /// Admitted targets under the settings (Σ L_i).
    pub targets: u64,
    /// Trainable tokens of scored executions left unclaimed (J_max or priority).
    pub left_out_tokens: u64,
    /// Σ over exported rows of their tokens.
    pub row_tokens: u64,
    /// Tokens of the rows' prefix tree: shared prefixes once, across executions too
    /// ([`super::row_prefix`]).
    pub row_prefix_tokens: u64,
    /// `row_tokens / row_prefix_tokens`: how many times a plain forward pass over the rows
    /// computes each distinct token (1 without rows).
    pub prefix_repeat: f64,
    /// Forward-backward tokens of the rows as one tree pack (`gyre.trainers.tree` with no
    /// budget): the prefix tree of the rows that have targets ([`super::row_prefix::tree_pack`]).
    /// Flat rows compute `row_tokens`.
    pub tree_pack_tokens: u64,
    /// Executions whose draws stopped at J_max.
    pub jmax_reached: u64,
    /// Points where a later input departs from a recorded output: branches strictly inside an
    /// output, and outputs whose first token has a context sibling (re-rendered from the start).
    pub divergences_in_outputs: u64,
    /// Requests by why they sit where they do in their execution's tree (`retry`, `diverge`,
    /// `sub-agent`, `compaction`, `context-branch`, `continue`…; see [`super::branches`]).
    pub requests_by_branch: BTreeMap<String, u64>,
    /// Warnings raised while loading.
    pub warnings: u64,
    /// Lines skipped under `--lenient`.
    pub skipped_lines: u64,
    /// What the input's `trained` records hold (docs/format.md §9); absent without any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trained: Option<TrainedCounts>,
}

/// Computes the statistics of a processed batch.
pub fn stats(batch: &Batch, results: &Results) -> Stats {
    let mut s = Stats {
        files: batch.files.len(),
        executions: batch.executions.len() as u64,
        warnings: batch.warning_count,
        skipped_lines: batch.skipped_lines,
        trained: Some(batch.trained_counts()).filter(|c| c.samples > 0),
        ..Stats::default()
    };
    for class in Class::DEFAULT_PRIORITY {
        s.candidates_by_class.insert(class.name().into(), 0);
    }
    for (i, exec) in batch.executions.iter().enumerate() {
        let outcome = &results.outcomes[i];
        let admission = &results.admissions[i];
        match outcome {
            Outcome::Scored { .. } => s.scored += 1,
            Outcome::Dummy => {
                s.dummy += 1;
                s.rows += 1;
            }
            Outcome::Excluded(e) => {
                s.excluded += 1;
                *s.excluded_by_reason.entry(e.to_string()).or_default() += 1;
            }
        }
        for r in &exec.requests {
            s.requests += 1;
            s.requests_after_closure += r.after_closure as u64;
            s.requests_reconstructed += r.reconstructed() as u64;
            s.raw_tokens += (r.input_len + r.output_len) as u64;
        }
        s.tree_tokens += exec.tree.tokens.len() as u64;
        for (link, n) in branches::counts(exec) {
            *s.requests_by_branch.entry(link.into()).or_default() += n;
        }
        for (n, node) in exec.tree.nodes.iter().enumerate() {
            let n = n as u32;
            match node.kind {
                NodeKind::Root => {}
                NodeKind::Output => {
                    let req = &exec.requests[node.owner as usize];
                    let key = if req.after_closure {
                        "after-closure"
                    } else if req.actor == Actor::Evaluator {
                        "evaluator"
                    } else {
                        "policy"
                    };
                    *s.tokens_by_source.entry(key.into()).or_default() += node.len as u64;
                    if trainable_node(exec, n) {
                        s.policy_tokens += node.len as u64;
                        if matches!(outcome, Outcome::Scored { .. })
                            && admission.claimed_by[n as usize].is_none()
                        {
                            s.left_out_tokens += node.len as u64;
                        }
                    }
                    let last_piece = n == req.output_node;
                    if !last_piece && node.children.len() > 1 {
                        s.divergences_in_outputs += 1;
                    }
                    // A later context beside the output's first token: the history was
                    // re-rendered from the start of this output instead of restoring it.
                    let siblings = &exec.tree.nodes[node.parent as usize].children;
                    if node.offset == 0
                        && siblings
                            .iter()
                            .any(|&c| exec.tree.nodes[c as usize].kind == NodeKind::Context)
                    {
                        s.divergences_in_outputs += 1;
                    }
                }
                NodeKind::Context => {
                    let req = &exec.requests[node.owner as usize];
                    count_sources(&mut s.tokens_by_source, req, node.offset, node.len);
                }
            }
        }
        s.candidates += admission.candidates.len() as u64;
        for c in &admission.candidates {
            *s.candidates_by_class
                .entry(c.class.name().into())
                .or_default() += 1;
        }
        s.draws += admission.draws.len() as u64;
        s.rows += admission.draws.len() as u64;
        s.targets += admission.targets();
        s.jmax_reached += (admission.stop == Stop::JmaxReached) as u64;
    }
    let prefix = row_prefix(batch, results);
    s.row_tokens = prefix.row_tokens;
    s.row_prefix_tokens = prefix.distinct_tokens;
    s.prefix_repeat = prefix.repeat();
    s.tree_pack_tokens = tree_pack(batch, results).distinct_tokens;
    s.dedup_ratio = if s.tree_tokens == 0 {
        0.0
    } else {
        s.raw_tokens as f64 / s.tree_tokens as f64
    };
    s
}

/// Adds the sources of full-input tokens `offset..offset+len` of `req`, run by run. Spans are
/// contiguous from the record's own input, so the only unlabelled run is after the last span.
fn count_sources(acc: &mut BTreeMap<String, u64>, req: &Request, offset: u32, len: u32) {
    let end = offset + len;
    let mut pos = offset;
    while pos < end {
        let (source, run_end) = match req.span_at(pos) {
            Some(span) => (span.source, span.end.min(end)),
            None => (Source::Context, end),
        };
        *acc.entry(source.name().into()).or_default() += (run_end - pos) as u64;
        pos = run_end;
    }
}

/// The figures a settings change moves: rows, targets, left-out tokens, `B`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Exported rows (draws plus one placeholder per dummy).
    pub rows: u64,
    /// Draws made.
    pub draws: u64,
    /// Admitted targets (Σ `L_i`).
    pub targets: u64,
    /// Trainable tokens of scored executions no draw claimed.
    pub left_out: u64,
    /// `B`: scored and dummy executions.
    pub batch_executions: u64,
}

impl std::ops::Add for Totals {
    type Output = Totals;
    fn add(self, o: Totals) -> Totals {
        Totals {
            rows: self.rows + o.rows,
            draws: self.draws + o.draws,
            targets: self.targets + o.targets,
            left_out: self.left_out + o.left_out,
            batch_executions: self.batch_executions + o.batch_executions,
        }
    }
}

/// The totals of one execution (its `L_i` is `targets`).
pub fn execution_totals(exec: &Execution, outcome: &Outcome, admission: &Admission) -> Totals {
    let scored = matches!(outcome, Outcome::Scored { .. });
    let left_out = if scored {
        exec.tree
            .nodes
            .iter()
            .enumerate()
            .filter(|&(n, _)| {
                admission.claimed_by[n].is_none() && trainable_node(exec, n as NodeId)
            })
            .map(|(_, node)| node.len as u64)
            .sum()
    } else {
        0
    };
    Totals {
        rows: admission.draws.len() as u64 + u64::from(matches!(outcome, Outcome::Dummy)),
        draws: admission.draws.len() as u64,
        targets: admission.targets(),
        left_out,
        batch_executions: u64::from(outcome.counts()),
    }
}

/// The totals of a processed batch.
pub fn totals(batch: &Batch, results: &Results) -> Totals {
    batch
        .executions
        .par_iter()
        .enumerate()
        .map(|(i, e)| execution_totals(e, &results.outcomes[i], &results.admissions[i]))
        .reduce(Totals::default, |a, b| a + b)
}

/// Where a figure shows: token `index` of node `node` of execution `exec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Example {
    /// Execution index.
    pub exec: usize,
    /// Tree node.
    pub node: NodeId,
    /// Token index inside the node.
    pub index: u32,
}

/// One bar of a breakdown: a label, a token count and the first token counted in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bar {
    /// What is counted.
    pub label: &'static str,
    /// Tokens.
    pub tokens: u64,
    /// The first token counted: in the first execution that has one, the one nearest the root.
    pub example: Option<Example>,
}

/// The executions of one group with their rewards and advantages.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupSpread {
    /// The group id (as `gyre admit` keys it).
    pub group: String,
    /// Members: execution index, reward (`None` when excluded), advantage.
    pub members: Vec<(usize, Option<f64>, Option<f64>)>,
}

/// What a batch's tokens and rows come to under its settings: the inspector's dashboard.
#[derive(Clone, Debug, PartialEq)]
pub struct Breakdown {
    /// Tree tokens by provenance: the span sources, then policy tokens split into `target` and
    /// `policy, not a target`, then `evaluator` and `after closure`.
    pub provenance: Vec<Bar>,
    /// Trainable tokens that are not targets, by reason.
    pub left_out: Vec<Bar>,
    /// Exported rows per execution, in batch order.
    pub rows: Vec<u64>,
    /// Groups in order of first appearance.
    pub groups: Vec<GroupSpread>,
}

/// The breakdown of a processed batch.
pub fn breakdown(batch: &Batch, results: &Results) -> Breakdown {
    let mut provenance: Vec<Bar> = Source::ALL
        .iter()
        .map(|s| s.name())
        .chain([
            "target",
            "policy, not a target",
            "evaluator",
            "after closure",
        ])
        .map(|label| Bar {
            label,
            tokens: 0,
            example: None,
        })
        .collect();
    let mut left_out: Vec<Bar> = [
        "J_max reached",
        "class not in priority",
        "excluded: open",
        "excluded: no valid reward",
        "dummy execution",
    ]
    .into_iter()
    .map(|label| Bar {
        label,
        tokens: 0,
        example: None,
    })
    .collect();
    // An example's position on the path it is shown on (that of its node's owner): the first
    // token a bar counts is the one nearest the root of the first execution that has one. (Node
    // ids are no guide: a split gives the head of a node the new id.)
    let pos = |e: &Example| {
        let tree = &batch.executions[e.exec].tree;
        tree.depth_tokens(tree.nodes[e.node as usize].parent) + e.index as u64
    };
    let count = |bars: &mut Vec<Bar>, label: &str, tokens: u64, at: Example| {
        if let Some(b) = bars.iter_mut().find(|b| b.label == label) {
            b.tokens += tokens;
            match b.example {
                Some(old) if old.exec != at.exec || pos(&old) <= pos(&at) => {}
                _ => b.example = Some(at),
            }
        }
    };
    let mut groups: Vec<GroupSpread> = Vec::new();
    for (i, exec) in batch.executions.iter().enumerate() {
        let (outcome, admission) = (&results.outcomes[i], &results.admissions[i]);
        for (n, node) in exec.tree.nodes.iter().enumerate() {
            let n = n as NodeId;
            let at = |index| Example {
                exec: i,
                node: n,
                index,
            };
            match node.kind {
                NodeKind::Root => {}
                NodeKind::Context => {
                    let req = &exec.requests[node.owner as usize];
                    let end = node.offset + node.len;
                    let mut pos = node.offset;
                    while pos < end {
                        let (source, run_end) = match req.span_at(pos) {
                            Some(span) => (span.source, span.end.min(end)),
                            None => (Source::Context, end),
                        };
                        let tokens = (run_end - pos) as u64;
                        count(
                            &mut provenance,
                            source.name(),
                            tokens,
                            at(pos - node.offset),
                        );
                        pos = run_end;
                    }
                }
                NodeKind::Output => {
                    let len = node.len as u64;
                    let reason = super::provenance::node_reason(exec, outcome, admission, n, None);
                    use super::provenance::Reason::*;
                    let (kind, left) = match reason {
                        Some(Claimed { .. }) => ("target", None),
                        Some(EvaluatorOutput) => ("evaluator", None),
                        Some(AfterClosure) => ("after closure", None),
                        Some(LeftOutJmax) => ("policy, not a target", Some("J_max reached")),
                        Some(LeftOutClass) => {
                            ("policy, not a target", Some("class not in priority"))
                        }
                        Some(Excluded(super::score::Exclusion::Open)) => {
                            ("policy, not a target", Some("excluded: open"))
                        }
                        Some(Excluded(super::score::Exclusion::NoValidReward)) => {
                            ("policy, not a target", Some("excluded: no valid reward"))
                        }
                        Some(Dummy) => ("policy, not a target", Some("dummy execution")),
                        Some(NotTrainable(_)) => ("not trainable", None),
                        Some(Context(_) | NotYetClaimed) | None => continue,
                    };
                    count(&mut provenance, kind, len, at(0));
                    if let Some(l) = left {
                        count(&mut left_out, l, len, at(0));
                    }
                }
            }
        }
        if let Some(g) = exec.group() {
            let key = super::score::group_key(g);
            let member = (i, outcome.reward(), results.advantages[i]);
            match groups.iter_mut().find(|x| x.group == key) {
                Some(x) => x.members.push(member),
                None => groups.push(GroupSpread {
                    group: key,
                    members: vec![member],
                }),
            }
        }
    }
    Breakdown {
        provenance,
        left_out,
        rows: (0..batch.executions.len())
            .map(|i| {
                execution_totals(
                    &batch.executions[i],
                    &results.outcomes[i],
                    &results.admissions[i],
                )
                .rows
            })
            .collect(),
        groups,
    }
}
