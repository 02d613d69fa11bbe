//! The samples a trainer trained on, as an execution keeps them (`trained` records,
//! docs/format.md §9): each record with its request pieces resolved to the execution's requests,
//! in dump order, and the ids that keep them unique.

use std::collections::HashSet;

use gyre_format::record::LineError;
use gyre_format::trained::{Piece, TrainedRecord};

use super::line_ref::LineRef;

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
    /// Checks `record` against the requests of execution `execution` seen so far and keeps it:
    /// each request piece names one (`request` gives its index and path length `I + O`) and
    /// ends within its path; the sample id is new.
    pub fn add(
        &mut self,
        execution: &str,
        record: TrainedRecord,
        at: LineRef,
        request: impl Fn(&str) -> Option<(u32, u64)>,
    ) -> Result<(), LineError> {
        if self.ids.contains(&record.sample) {
            return Err(LineError {
                message: format!(
                    "sample id \"{}\" is already used in execution \"{execution}\"",
                    record.sample
                ),
                field: Some("sample".into()),
            });
        }
        let mut requests = Vec::with_capacity(record.tokens.len());
        for (i, piece) in record.tokens.iter().enumerate() {
            let Piece::Request {
                request: id, end, ..
            } = piece
            else {
                requests.push(None);
                continue;
            };
            let Some((idx, path)) = request(id) else {
                return Err(LineError {
                    message: format!(
                        "request \"{id}\" is not an earlier request of execution \"{execution}\""
                    ),
                    field: Some(format!("tokens[{i}].request")),
                });
            };
            if *end as u64 > path {
                return Err(LineError {
                    message: format!(
                        "piece end {end} is past request \"{id}\"'s path ({path} tokens: input + output)"
                    ),
                    field: Some(format!("tokens[{i}].end")),
                });
            }
            requests.push(Some(idx));
        }
        self.ids.insert(record.sample.clone());
        self.list.push(Sample {
            record,
            requests,
            at,
        });
        Ok(())
    }
}
