//! NeMo-RL training dumps (`train_data_step{N}.jsonl`) → one execution per row, its sampled
//! segments as exact requests and the row as a `trained` record (docs/import.md#nemo-rl).
//!
//! NeMo-RL's GRPO loop writes each step's training batch with `log_batched_dict_as_jsonl`: one
//! line per row, every field wrapped in a batch of one (`"token_ids": [[…]]`, `"rewards":
//! [0.5]`), per-token fields right-padded to the batch's longest row (`input_lengths` gives the
//! real length), and `idx` the row's position. The rows carry no execution id: each row is its
//! own execution, and rows with the same prompt tokens form a group.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::error::{bad, diag};
use super::input::{Counter, file_name, typed_values};
use super::session::{self, Closure};
use super::sniff::{Fit, Probe, Shape};
use super::write::{
    AdvantageOut, At, ExecutionOut, LossAgg, PieceOut, RequestOut, SourceOut, SpanOut, TrainedOut,
    Trainer,
};
use super::{About, Importer, Job, Progress};
use gyre_engine::record::{ClosureStatus, Source};
use gyre_engine::report::plural;

/// The NeMo-RL importer.
pub struct NemoRl;

static ABOUT: About = About {
    name: "nemo-rl",
    what: "a NeMo-RL training dump",
    summary: "A NeMo-RL training dump (`train_data_step{N}.jsonl`): exact requests and the trainer's rows",
    input: "DUMP",
    input_help: "`train_data_step{N}.jsonl` files, or the log folder holding them (read in step order)",
    many: true,
    directories: true,
    reconstructed: false,
    help: "\
Examples:
  gyre import nemo-rl logs/exp_001/train_data_step12.jsonl --out step12.jsonl
  gyre import nemo-rl logs/exp_001 --out run.jsonl

Each row is one execution (the dump holds no execution ids); rows of one step with the same
prompt tokens form a group. Every run of loss-masked tokens is one request with its exact ids and
generation log-probs, the tokens between them context; the row is a `trained` record with the
effective mask token_loss_mask × sample_loss_mask, advantages, generation_logprobs (behaviour)
and prev_logprobs (trainer). Padding past input_lengths is dropped. docs/import.md has the
mapping.",
};

/// What the import infers because the dump is silent (the header's `trainer.inferred`, and
/// the import summary).
const INFERRED: [&str; 4] = [
    "executions: one per row (the dump holds no execution ids); rows of one step with the same prompt tokens form a group",
    "requests: one per run of token_loss_mask = 1 tokens, which NeMo-RL marks as the assistant's sampled tokens",
    "behaviour log-probs: generation_logprobs on the mask-on tokens only (NeMo-RL writes 0.0 as filler on every other token)",
    "loss aggregation: token-mean, NeMo-RL's default (token_level_loss: true); the dump does not record the setting nor NeMo-RL's version",
];

/// One dumped row: every field a batch of one.
#[derive(Deserialize)]
struct Row {
    token_ids: [Vec<u32>; 1],
    input_lengths: [usize; 1],
    token_loss_mask: [Vec<f64>; 1],
    #[serde(default)]
    sample_loss_mask: Option<[f64; 1]>,
    #[serde(default)]
    advantages: Option<[Vec<f64>; 1]>,
    generation_logprobs: [Vec<f64>; 1],
    #[serde(default)]
    prev_logprobs: Option<[Vec<f64>; 1]>,
    #[serde(default)]
    rewards: Option<[f64; 1]>,
    #[serde(default)]
    content: Option<[Value; 1]>,
    #[serde(default)]
    idx: Option<u64>,
}

/// A row, read and checked.
pub struct Checked {
    file: PathBuf,
    line: u64,
    /// Position among the file's rows, from 0.
    index: u64,
    step: Option<u64>,
    execution: String,
    group: String,
    row: Row,
}

/// `N` of `train_data_step{N}.jsonl`.
fn step_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("train_data_step")?
        .strip_suffix(".jsonl")?
        .parse()
        .ok()
}

/// The dump files of `input`: itself, or the `train_data_step{N}.jsonl` files of a folder by
/// step.
fn dump_files(input: &Path) -> Vec<PathBuf> {
    if !input.is_dir() {
        return vec![input.to_path_buf()];
    }
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(input)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((step_of(&e.path())?, e.path())))
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// The row's length, checked against every per-token field (each padded to at least it).
fn check(row: &Row) -> Result<usize, (String, &'static str)> {
    let len = row.input_lengths[0];
    let fields: [(&'static str, usize); 3] = [
        ("token_ids", row.token_ids[0].len()),
        ("token_loss_mask", row.token_loss_mask[0].len()),
        ("generation_logprobs", row.generation_logprobs[0].len()),
    ];
    let optional = [
        ("advantages", row.advantages.as_ref().map(|a| a[0].len())),
        (
            "prev_logprobs",
            row.prev_logprobs.as_ref().map(|a| a[0].len()),
        ),
    ];
    let all = fields
        .into_iter()
        .chain(optional.into_iter().filter_map(|(f, n)| Some((f, n?))));
    for (field, n) in all {
        if n < len {
            return Err((
                format!("holds {n} tokens, fewer than input_lengths ({len})"),
                field,
            ));
        }
    }
    if let Some(v) = row.token_loss_mask[0][..len]
        .iter()
        .find(|&&v| v != 0.0 && v != 1.0)
    {
        return Err((format!("holds {v}, not 0 or 1"), "token_loss_mask"));
    }
    Ok(len)
}

/// `[start, end)` of each run of mask-on tokens.
fn runs(mask: &[f64]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, &m) in mask.iter().enumerate() {
        match (m == 1.0, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, mask.len()));
    }
    out
}

impl Importer for NemoRl {
    type Item = Checked;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        match (&probe.shape, probe.first_object()) {
            (Shape::Jsonl(_), Some(o)) => {
                if o.contains_key("token_loss_mask") && o.contains_key("generation_logprobs") {
                    Fit::Yes
                } else {
                    Fit::No
                }
            }
            (Shape::Directory { .. }, _) => match probe.path() {
                Some(dir) if !dump_files(dir).is_empty() => Fit::Yes,
                _ => Fit::No,
            },
            _ => Fit::No,
        }
    }

    fn files(&self, inputs: &[PathBuf]) -> Vec<PathBuf> {
        inputs.iter().flat_map(|p| dump_files(p)).collect()
    }

    fn trainer(&self, _inputs: &[PathBuf]) -> Result<Option<Trainer>> {
        Ok(Some(Trainer {
            name: "nemo-rl".into(),
            version: None,
            loss_agg: LossAgg::TokenMean,
            inferred: INFERRED.iter().map(|s| (*s).to_owned()).collect(),
            meta: None,
        }))
    }

    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Checked) -> Result<()>,
    ) -> Result<()> {
        let files = Importer::files(self, inputs);
        if files.is_empty() {
            return Err(bad(
                &inputs[0],
                0,
                "nothing to import: no `train_data_step{N}.jsonl` files in the folder",
                None,
            ));
        }
        let total: u64 = files
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum();
        let counter = Counter::default();
        let (mut rows, mut padded) = (0u64, 0u64);
        for path in &files {
            let name = file_name(path);
            let step = step_of(path);
            // Groups are per file (one step's batch): prompt tokens → group number.
            let mut groups: HashMap<Vec<u32>, usize> = HashMap::new();
            let mut index = 0u64;
            typed_values(path, &counter, total, job, &mut |job, n, row: Row| {
                let len = match check(&row) {
                    Ok(len) => len,
                    Err((msg, field)) => {
                        job.log.problem(diag(path, n, msg, Some(field)));
                        return Ok(());
                    }
                };
                let mask = &row.token_loss_mask[0][..len];
                let prompt_len = mask.iter().position(|&m| m == 1.0).unwrap_or(len);
                let next = groups.len();
                let g = *groups
                    .entry(row.token_ids[0][..prompt_len].to_vec())
                    .or_insert(next);
                let id = row.idx.unwrap_or(index);
                rows += 1;
                padded += u64::from(row.token_ids[0].len() > len);
                if !job.log.has_problems() {
                    emit(
                        job,
                        Checked {
                            file: path.clone(),
                            line: n,
                            index,
                            step,
                            execution: format!("{name}:{id}"),
                            group: format!("{name}:prompt{}", g + 1),
                            row,
                        },
                    )?;
                }
                index += 1;
                Ok(())
            })?;
        }
        (job.progress)(Progress::Reading { done: total, total });
        if rows > 0 {
            job.log.warn_important(format!(
                "{}: NeMo-RL's dump holds no execution ids: each row is its own execution, and \
                 rows of one step with the same prompt tokens form a group",
                plural(rows as usize, "row")
            ));
        }
        if padded > 0 {
            job.log.warn(format!(
                "{} right-padded past input_lengths: the padding is dropped (meta.padding)",
                plural(padded as usize, "row")
            ));
        }
        Ok(())
    }

    fn records(&self, c: Checked, job: &mut Job) -> Result<()> {
        let at = At {
            file: &c.file,
            line: c.line,
        };
        let row = &c.row;
        let len = row.input_lengths[0];
        let tokens = &row.token_ids[0][..len];
        let mask = &row.token_loss_mask[0][..len];
        let generation = &row.generation_logprobs[0][..len];
        let segments = runs(mask);
        let prompt_len = segments.first().map_or(len, |s| s.0);

        let mut emeta = Map::new();
        emeta.insert("source".into(), json!("nemo-rl"));
        if let Some(step) = c.step {
            emeta.insert("step".into(), json!(step));
        }
        if let Some(content) = &row.content {
            emeta.insert("content".into(), content[0].clone());
        }
        let group = Value::from(c.group.as_str());
        job.out.execution(
            &ExecutionOut {
                execution: &c.execution,
                t: 0.0,
                budget_s: None,
                group: Some(&group),
                task: None,
                meta: Some(&emeta),
            },
            at,
        )?;
        // One request per sampled segment: its input is everything before it (earlier
        // segments included, so the recorder writes each later one as a delta).
        let ids: Vec<String> = (1..=segments.len()).map(|k| format!("r{k}")).collect();
        for (id, &(start, end)) in ids.iter().zip(&segments) {
            let spans = [SpanOut {
                end: start as u32,
                source: Source::Context,
                call_id: None,
            }];
            let spans: &[SpanOut] = if start == 0 { &[] } else { &spans };
            job.out.request(
                &RequestOut {
                    logprobs: Some(&generation[start..end]),
                    ..RequestOut::new(
                        &c.execution,
                        id,
                        "main",
                        &tokens[..start],
                        spans,
                        &tokens[start..end],
                    )
                },
                at,
            )?;
        }
        // The row: the last request's path, then what follows it literally.
        let covered = segments.last().map_or(0, |s| s.1);
        let mut pieces = Vec::with_capacity(2);
        if let Some(last) = ids.last() {
            pieces.push(PieceOut::Request {
                request: last,
                start: 0,
                end: covered as u32,
            });
        }
        if covered < len {
            pieces.push(PieceOut::Ids {
                ids: &tokens[covered..],
            });
        }
        let sample_mask = row.sample_loss_mask.map_or(1.0, |m| m[0]);
        let response = prompt_len..len;
        let loss_mask: Vec<u8> = mask[response.clone()]
            .iter()
            .map(|&m| u8::from(m == 1.0 && sample_mask != 0.0))
            .collect();
        let behaviour: Vec<Option<f64>> = mask[response.clone()]
            .iter()
            .zip(&generation[response.clone()])
            .map(|(&m, &lp)| (m == 1.0).then_some(lp))
            .collect();
        let trainer: Option<Vec<Option<f64>>> = row
            .prev_logprobs
            .as_ref()
            .map(|p| p[0][response.clone()].iter().copied().map(Some).collect());
        let per_token: Option<Vec<Option<f64>>> = row
            .advantages
            .as_ref()
            .map(|a| a[0][response.clone()].iter().copied().map(Some).collect());
        // NeMo-RL spreads the sample's advantage over its tokens: one value is written as one.
        let advantage = per_token.as_deref().map(|a| match a.first() {
            Some(&Some(first)) if a.iter().all(|&v| v == Some(first)) => {
                AdvantageOut::Sample(first)
            }
            _ => AdvantageOut::PerToken(a),
        });
        let mut tmeta = Map::new();
        let padding = row.token_ids[0].len() - len;
        if padding > 0 {
            tmeta.insert("padding".into(), json!(padding));
        }
        if sample_mask != 1.0 {
            tmeta.insert("sample_loss_mask".into(), json!(sample_mask));
        }
        let file = c.file.display().to_string();
        let sample = row.idx.unwrap_or(c.index).to_string();
        job.out.trained(
            &TrainedOut {
                group: Some(&group),
                step: c.step,
                source: Some(SourceOut {
                    file: &file,
                    index: c.index,
                }),
                reward: row.rewards.map(|r| r[0]),
                advantage,
                behaviour_logprobs: Some(&behaviour),
                trainer_logprobs: trainer.as_deref(),
                meta: (!tmeta.is_empty()).then_some(&tmeta),
                ..TrainedOut::new(
                    &c.execution,
                    &sample,
                    &pieces,
                    prompt_len as u32,
                    &loss_mask,
                )
            },
            at,
        )?;
        let closure = Closure {
            t: 0.0,
            status: ClosureStatus::Completed,
            artifact: json!("output"),
            version: Some(json!(1)),
            meta: Map::new(),
        };
        let score = row.rewards.map(|r| r[0]);
        session::write_end(job, &c.execution, &closure, score, "nemo-rl reward", at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_runs_and_steps() {
        assert_eq!(runs(&[0.0, 1.0, 1.0, 0.0, 1.0]), [(1, 3), (4, 5)].to_vec());
        assert!(runs(&[0.0, 0.0]).is_empty());
        assert_eq!(step_of(Path::new("a/train_data_step12.jsonl")), Some(12));
        assert_eq!(step_of(Path::new("val_data_step1.jsonl")), None);
    }
}
