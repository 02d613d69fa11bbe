//! verl `rollout_data_dir` dumps (`{step}.jsonl`) → one reconstructed execution per row
//! (docs/import.md#verl).
//!
//! verl's trainer writes, per training step, one line per rollout: `input` and `output` are
//! the prompt and response *decoded* with `skip_special_tokens=True`, `score` the summed
//! token-level reward, `step`, `gts` (the ground truth) and any reward extras (`uid`,
//! `request_id`, `acc`, …). The dump holds no token ids, no loss mask and no log-probs, and the
//! chat template's special tokens are gone from its text: the records are the text re-encoded
//! with the tokenizer, marked `meta.reconstructed`, and cannot be audited token by token.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use eyre::Result;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::error::{bad, diag};
use super::input::{Counter, file_name, typed_values};
use super::session::{self, Closure};
use super::sniff::{Fit, Probe, Shape};
use super::write::{At, ExecutionOut, RequestOut, SpanOut};
use super::{About, Importer, Job, Options, Progress};
use gyre_engine::record::{ClosureStatus, Source};
use gyre_engine::report::plural;

/// The verl importer.
pub struct Verl;

static ABOUT: About = About {
    name: "verl",
    what: "a verl rollout dump",
    summary: "A verl `rollout_data_dir` dump (decoded text only): reconstructed, not auditable token by token",
    input: "DUMP",
    input_help: "`{step}.jsonl` files, or the rollout_data_dir folder holding them (read in step order)",
    many: true,
    directories: true,
    reconstructed: false,
    help: "\
Examples:
  gyre import verl outputs/rollout_data --out rollouts.jsonl
  gyre import verl outputs/rollout_data/12.jsonl --out step12.jsonl

verl writes `input` and `output` decoded with skip_special_tokens=True: no token ids, no chat
template tokens, no log-probs, no loss mask. Each row is one execution whose one request is the
text re-encoded with --tokenizer (meta.reconstructed); its `score` is a valid assessment. Rows of
one step with the same `uid` prompt (else the same input text) form a group. These records cannot
be audited token by token. docs/import.md has the mapping.",
};

/// Why these records cannot be audited, said in the header and the import summary.
pub const NOT_AUDITABLE: &str = "verl's rollout_data_dir holds decoded text only (special tokens dropped, no token ids, no \
     log-probs, no loss mask): the token ids are the text re-encoded, not what verl trained on; \
     they cannot be audited token by token";

/// One dumped row.
#[derive(Deserialize)]
struct Row {
    input: String,
    output: String,
    #[serde(default)]
    score: Option<Value>,
    #[serde(default)]
    step: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A row, read.
pub struct Checked {
    file: PathBuf,
    line: u64,
    execution: String,
    group: String,
    row: Row,
}

/// The dump files of `input`: itself, or the `{step}.jsonl` files of a folder by step.
fn dump_files(input: &Path) -> Vec<PathBuf> {
    if !input.is_dir() {
        return vec![input.to_path_buf()];
    }
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(input)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let step = name.strip_suffix(".jsonl")?.parse::<u64>().ok()?;
            Some((step, e.path()))
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// The uid's prompt part: verl's v1 trainer keys rows `{sample}_{rollout}_{output}`.
fn uid_prompt(uid: &str) -> Option<&str> {
    let mut parts = uid.rsplitn(3, '_');
    let (_, _, sample) = (parts.next()?, parts.next()?, parts.next()?);
    Some(sample)
}

impl Importer for Verl {
    type Item = Checked;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        match (&probe.shape, probe.first_object()) {
            (Shape::Jsonl(_), Some(o)) => {
                if o.contains_key("input") && o.contains_key("output") && !o.contains_key("kind") {
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

    fn header_meta(&self, opts: &Options, inputs: &[PathBuf]) -> Map<String, Value> {
        let names: Vec<String> = Importer::files(self, inputs)
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let mut m = super::session::header_meta(ABOUT.name, opts.restore, &names);
        m.remove("restore");
        m.insert("note".into(), json!(NOT_AUDITABLE));
        m.insert("auditable".into(), Value::Bool(false));
        m
    }

    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Checked) -> Result<()>,
    ) -> Result<()> {
        let files = Importer::files(self, inputs);
        if files.is_empty() {
            let path = &inputs[0];
            return Err(bad(
                path,
                0,
                "nothing to import: no `{step}.jsonl` files in the folder",
                None,
            ));
        }
        let total: u64 = files
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum();
        let counter = Counter::default();
        let mut ids: HashMap<String, u32> = HashMap::new();
        let mut rows = 0u64;
        for path in &files {
            typed_values(path, &counter, total, job, &mut |job, n, row: Row| {
                if let Some(s) = &row.score {
                    if !s.is_number() && !s.is_null() {
                        job.log
                            .problem(diag(path, n, "the score is not a number", Some("score")));
                        return Ok(());
                    }
                }
                let base = format!("{}:{n}", file_name(path));
                let k = ids.entry(base.clone()).or_default();
                *k += 1;
                let execution = if *k > 1 { format!("{base}-{k}") } else { base };
                let step = row.step.as_ref().map_or("?".to_owned(), Value::to_string);
                let prompt = row
                    .rest
                    .get("uid")
                    .and_then(Value::as_str)
                    .and_then(uid_prompt)
                    .map(str::to_owned)
                    .unwrap_or_else(|| {
                        let mut h = DefaultHasher::new();
                        row.input.hash(&mut h);
                        format!("{:016x}", h.finish())
                    });
                rows += 1;
                if !job.log.has_problems() {
                    emit(
                        job,
                        Checked {
                            file: path.clone(),
                            line: n,
                            execution,
                            group: format!("step {step} prompt {prompt}"),
                            row,
                        },
                    )?;
                }
                Ok(())
            })?;
        }
        (job.progress)(Progress::Reading { done: total, total });
        if rows > 0 {
            job.log
                .warn_important(format!("{}: {NOT_AUDITABLE}", plural(rows as usize, "row")));
        }
        Ok(())
    }

    fn records(&self, c: Checked, job: &mut Job) -> Result<()> {
        let at = At {
            file: &c.file,
            line: c.line,
        };
        let tok = job.builder.tokenizer();
        let encode = |text: &str, what: &str| {
            tok.encode(text)
                .map_err(|e| bad(&c.file, c.line, format!("encoding the {what}: {e}"), None))
        };
        let input = encode(&c.row.input, "input")?;
        let output = encode(&c.row.output, "output")?;
        let mut emeta = Map::new();
        emeta.insert("source".into(), json!("verl"));
        emeta.insert("reconstructed".into(), Value::Bool(true));
        for (k, v) in &c.row.rest {
            emeta.insert(k.clone(), v.clone());
        }
        if let Some(s) = &c.row.step {
            emeta.insert("step".into(), s.clone());
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
        let mut meta = Map::new();
        meta.insert("reconstructed".into(), Value::Bool(true));
        meta.insert(
            "source_line".into(),
            json!(format!("{}:{}", file_name(&c.file), c.line)),
        );
        let spans = [SpanOut {
            end: input.len() as u32,
            source: Source::Context,
            call_id: None,
        }];
        let spans: &[SpanOut] = if input.is_empty() { &[] } else { &spans };
        job.out.request(
            &RequestOut {
                meta: Some(&meta),
                ..RequestOut::new(&c.execution, "r1", "main", &input, spans, &output)
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
        let score = c.row.score.as_ref().and_then(Value::as_f64);
        session::write_end(
            job,
            &c.execution,
            &closure,
            score,
            "verl reward (score)",
            at,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_prompts() {
        assert_eq!(uid_prompt("7_0_3"), Some("7"));
        assert_eq!(uid_prompt("a_b_c_1_2"), Some("a_b_c"));
        assert_eq!(uid_prompt("abc"), None);
    }
}
