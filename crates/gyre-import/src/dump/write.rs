//! Writing a dump's rows: per row, the requests its sampled runs stand for (once per execution),
//! then its `trained` record, whose tokens point at the last of them and hold the rest
//! literally.

use std::collections::HashMap;
use std::path::Path;

use eyre::Result;
use serde_json::{Map, Value};

use super::{Advantage, Label, Row};
use crate::Job;
use crate::write::{
    AdvantageOut, At, ExecutionOut, PieceOut, RequestOut, SourceOut, SpanOut, TrainedOut,
};

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
                        let spans = spans(&row.labels, seg.start);
                        let rec = RequestOut {
                            logprobs: logprobs.as_deref(),
                            meta: logprobs.is_none().then_some(&no_logprobs),
                            ..RequestOut::new(
                                &row.execution,
                                &id,
                                row.agent.as_deref().unwrap_or("main"),
                                &row.tokens[..seg.start],
                                &spans,
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
            if row.requests_only {
                continue;
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
                aux_loss: row.aux.as_ref().map(|a| a.loss.as_str()),
                aux_mask: row.aux.as_ref().map(|a| a.mask.as_slice()),
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

/// The spans of the first `len` tokens of a row from its labels (none when it has none).
fn spans(labels: &[Label], len: usize) -> Vec<SpanOut<'_>> {
    let mut out: Vec<SpanOut> = Vec::new();
    for l in labels {
        let end = l.end.min(len);
        if out.last().is_some_and(|s| s.end as usize >= end) {
            continue;
        }
        out.push(SpanOut {
            end: end as u32,
            source: l.source,
            call_id: l.call_id.as_deref(),
        });
        if end == len {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyre_engine::record::Source;

    #[test]
    fn spans_are_the_labels_cut_at_the_input() {
        let label = |end, source| Label {
            end,
            source,
            call_id: None,
        };
        let labels = [
            label(3, Source::System),
            label(5, Source::Template),
            label(9, Source::Tool),
        ];
        let ends: Vec<(u32, Source)> = spans(&labels, 7)
            .iter()
            .map(|s| (s.end, s.source))
            .collect();
        assert_eq!(
            ends,
            [
                (3, Source::System),
                (5, Source::Template),
                (7, Source::Tool)
            ]
        );
        assert_eq!(spans(&labels, 5).len(), 2);
        assert!(spans(&[], 5).is_empty());
    }
}
