//! Writing a dump's rows: per row, the requests its sampled runs stand for (once per execution),
//! then its `trained` record, whose tokens point at the last of them and hold the rest
//! literally.

use std::collections::HashMap;
use std::path::Path;

use eyre::Result;
use serde_json::{Map, Value};

use super::{Advantage, Row};
use crate::Job;
use crate::write::{AdvantageOut, At, ExecutionOut, PieceOut, RequestOut, SourceOut, TrainedOut};

/// A request written for an execution: its id and where its output ends in the full path.
struct Written {
    id: String,
    input_len: usize,
    path: Vec<u32>,
}

/// Writes rows (see the module doc).
pub struct Rows;

impl Rows {
    /// Writes `rows` in order: an `execution` line the first time an execution is met, the
    /// requests of each row not yet written, and its `trained` record.
    pub fn write(rows: Vec<Row>, job: &mut Job) -> Result<()> {
        let mut executions: HashMap<String, Vec<Written>> = HashMap::new();
        let no_logprobs: Map<String, Value> = [("reconstructed".to_owned(), Value::Bool(true))]
            .into_iter()
            .collect();
        for row in &rows {
            let at = At {
                file: Path::new(&row.file),
                line: 0,
            };
            if !executions.contains_key(&row.execution) {
                job.out.execution(
                    &ExecutionOut {
                        execution: &row.execution,
                        t: 0.0,
                        budget_s: None,
                        group: row.group.as_ref(),
                        task: None,
                        meta: None,
                    },
                    at,
                )?;
                executions.insert(row.execution.clone(), Vec::new());
            }
            let written = executions.entry(row.execution.clone()).or_default();
            let mut last: Option<(usize, usize)> = None;
            for seg in row.segments() {
                let path = &row.tokens[..seg.end];
                let known = written
                    .iter()
                    .position(|w| w.input_len == seg.start && w.path == path);
                let k = match known {
                    Some(k) => k,
                    None => {
                        let id = format!("r{}", written.len() + 1);
                        let rel = seg.start - row.prompt_len..seg.end - row.prompt_len;
                        // Inside a sampled run every token has its behaviour log-prob (the
                        // readers give `None` only to tokens the policy did not sample).
                        let logprobs: Option<Vec<f64>> = row
                            .behaviour
                            .as_ref()
                            .map(|b| b[rel].iter().map(|v| v.unwrap_or(0.0)).collect());
                        let rec = RequestOut {
                            logprobs: logprobs.as_deref(),
                            meta: logprobs.is_none().then_some(&no_logprobs),
                            ..RequestOut::new(
                                &row.execution,
                                &id,
                                "main",
                                &row.tokens[..seg.start],
                                &[],
                                &row.tokens[seg.clone()],
                            )
                        };
                        job.out.request(&rec, at)?;
                        written.push(Written {
                            id,
                            input_len: seg.start,
                            path: path.to_vec(),
                        });
                        written.len() - 1
                    }
                };
                last = Some((k, seg.end));
            }
            let mut pieces = Vec::with_capacity(2);
            let literal_from = match last {
                Some((k, end)) => {
                    pieces.push(PieceOut::Request {
                        request: &written[k].id,
                        start: 0,
                        end: end as u32,
                    });
                    end
                }
                None => 0,
            };
            if literal_from < row.tokens.len() {
                pieces.push(PieceOut::Ids {
                    ids: &row.tokens[literal_from..],
                });
            }
            let advantage = match &row.advantage {
                Some(Advantage::Sample(a)) => Some(AdvantageOut::Sample(*a)),
                Some(Advantage::PerToken(v)) => Some(AdvantageOut::PerToken(v)),
                None => None,
            };
            let rec = TrainedOut {
                group: row.group.as_ref(),
                step: row.step,
                source: Some(SourceOut {
                    file: &row.file,
                    index: row.index,
                }),
                reward: row.reward,
                advantage,
                behaviour_logprobs: row.behaviour.as_deref(),
                trainer_logprobs: row.trainer.as_deref(),
                ref_logprobs: row.reference.as_deref(),
                meta: (!row.meta.is_empty()).then_some(&row.meta),
                ..TrainedOut::new(
                    &row.execution,
                    &row.sample,
                    &pieces,
                    row.prompt_len as u32,
                    &row.loss_mask,
                )
            };
            job.out.trained(&rec, at)?;
        }
        Ok(())
    }
}
