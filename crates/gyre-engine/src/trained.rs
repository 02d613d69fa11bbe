//! What a trainer trained on (docs/format.md §9), per execution: each `trained` record with its
//! request pieces resolved to the execution's requests, in dump order, and the counts
//! (`samples`, `trained_tokens`, …) that `gyre stats` and the audit report.

use std::collections::HashSet;

use gyre_format::record::LineError;
use gyre_format::trained::{Piece, TrainedRecord, Trainer};
use serde::Serialize;

use super::execution::{Execution, LineRef};

/// One training sample of an execution, its pieces checked against the execution's requests.
#[derive(Clone, Debug)]
pub struct Sample {
    /// The record as read.
    pub record: TrainedRecord,
    /// Per piece of `record.tokens`: the index of the request a `request` piece names
    /// (`None` for literal ids).
    pub requests: Vec<Option<u32>>,
    /// Where it is.
    pub at: LineRef,
}

/// The samples of one execution, in dump order, with their ids.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// In dump order.
    pub list: Vec<Sample>,
    ids: HashSet<String>,
}

impl Samples {
    /// Checks `record` against `exec`'s requests seen so far (each request piece names one,
    /// within its path `I + O`; the sample id is new) and keeps it.
    pub fn add(exec: &mut Execution, record: TrainedRecord, at: LineRef) -> Result<(), LineError> {
        if exec.trained.ids.contains(&record.sample) {
            return Err(LineError {
                message: format!(
                    "sample id \"{}\" is already used in execution \"{}\"",
                    record.sample, exec.id
                ),
                field: Some("sample".into()),
            });
        }
        let mut requests = Vec::with_capacity(record.tokens.len());
        for (i, piece) in record.tokens.iter().enumerate() {
            let Piece::Request { request, end, .. } = piece else {
                requests.push(None);
                continue;
            };
            let Some(idx) = exec.request_index(request) else {
                return Err(LineError {
                    message: format!(
                        "request \"{request}\" is not an earlier request of execution \"{}\"",
                        exec.id
                    ),
                    field: Some(format!("tokens[{i}].request")),
                });
            };
            let r = &exec.requests[idx as usize];
            let path = r.input_len as u64 + r.output_len as u64;
            if *end as u64 > path {
                return Err(LineError {
                    message: format!(
                        "piece end {end} is past request \"{request}\"'s path ({path} tokens: input + output)"
                    ),
                    field: Some(format!("tokens[{i}].end")),
                });
            }
            requests.push(Some(idx));
        }
        exec.trained.ids.insert(record.sample.clone());
        exec.trained.list.push(Sample {
            record,
            requests,
            at,
        });
        Ok(())
    }
}

impl Execution {
    /// The token ids of sample `s` of this execution (its pieces, concatenated).
    pub fn sample_tokens(&self, s: &Sample) -> Vec<u32> {
        let mut out = Vec::with_capacity(s.record.len());
        for (piece, idx) in s.record.tokens.iter().zip(&s.requests) {
            match (piece, idx) {
                (Piece::Request { start, end, .. }, Some(idx)) => {
                    let path = self.path_tokens(*idx);
                    out.extend_from_slice(&path[*start as usize..*end as usize]);
                }
                (Piece::Ids(ids), _) => out.extend_from_slice(ids),
                // `Samples::add` resolves every request piece.
                (Piece::Request { .. }, None) => {}
            }
        }
        out
    }
}

/// What the trained records of an input hold (docs/format.md §9, "Counts").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TrainedCounts {
    /// Executions with at least one sample.
    pub executions: u64,
    /// Training samples (padding rows are never written).
    pub samples: u64,
    /// Σ over samples of mask-on tokens: what the policy-gradient loss runs over.
    pub trained_tokens: u64,
    /// Σ over samples of auxiliary-loss tokens (reported beside, never inside, the above).
    pub aux_tokens: u64,
    /// Mask-on tokens with a behaviour log-prob (0.0 counts).
    pub behaviour_logprobs: u64,
    /// Mask-on tokens with a trainer log-prob (0.0 counts).
    pub trainer_logprobs: u64,
}

impl TrainedCounts {
    /// The counts over `executions`.
    pub fn of<'a>(executions: impl IntoIterator<Item = &'a Execution>) -> Self {
        let mut c = TrainedCounts::default();
        for e in executions {
            if e.trained.list.is_empty() {
                continue;
            }
            c.executions += 1;
            for s in &e.trained.list {
                let r = &s.record;
                c.samples += 1;
                c.trained_tokens += r.trained_tokens() as u64;
                c.aux_tokens += r.aux_tokens() as u64;
                c.behaviour_logprobs += r.masked_values(r.behaviour_logprobs.as_deref()) as u64;
                c.trainer_logprobs += r.masked_values(r.trainer_logprobs.as_deref()) as u64;
            }
        }
        c
    }
}

impl super::load::Batch {
    /// What wrote the batch's `trained` records: the first header naming a `trainer`.
    pub fn trainer(&self) -> Option<Trainer> {
        self.headers
            .iter()
            .flatten()
            .find_map(|(h, _)| Trainer::from_header(h).ok().flatten())
    }

    /// The counts of the batch's `trained` records.
    pub fn trained_counts(&self) -> TrainedCounts {
        TrainedCounts::of(&self.executions)
    }
}
