//! Harbor ATIF trajectories (`trajectory.json`, ATIF-v1.0 … v1.8, the trajectory format of
//! Harbor and Terminal-Bench) → one execution per session, with its sub-agents
//! (docs/import.md#harbor-atif).
//!
//! Every `agent` step that is a model call (not `is_copied_context`, `llm_call_count` not 0) is
//! one request. When every such step holds `metrics.prompt_token_ids`, `completion_token_ids`
//! and `logprobs`, the requests are those ids and log-probs as recorded (spans from rendering
//! the steps and aligning, as `gyre import vllm` does); otherwise the session is reconstructed
//! through the chat template like the harness logs. Sub-agents are read from the
//! `subagent_trajectory_ref`s of observation results ([`walk`]).

mod walk;

use std::collections::HashMap;
use std::path::PathBuf;

use eyre::Result;
use serde_json::{Map, Value, json};

use super::convo::Turn;
use super::session::{self, Session};
use super::sniff::{Fit, Probe, Shape};
use super::vllm::{align, call_runs};
use super::write::{
    At, ExecutionOut, LossAgg, PieceOut, RequestOut, SourceOut, ToolCallOut, TrainedOut, Trainer,
    spans_out,
};
use super::{About, Importer, Job, Options, Progress};
use gyre_engine::record::{Purpose, Source};
use gyre_engine::report::plural;
use gyre_text::label::Span;

pub use walk::Imported;

/// The ATIF importer.
pub struct Atif;

static ABOUT: About = About {
    name: "atif",
    what: "an ATIF trajectory",
    summary: "A Harbor / Terminal-Bench ATIF trajectory (`trajectory.json`, v1.0–v1.8) with its sub-agents",
    input: "TRAJECTORY",
    input_help: "`trajectory.json` files (each its own execution); sub-agent and continuation files are found beside them",
    many: true,
    directories: false,
    reconstructed: true,
    help: "\
Examples:
  gyre import atif jobs/run/task__abc/agent/trajectory.json --out run.jsonl
  gyre import atif jobs/run/*/agent/trajectory.json --out runs.jsonl.zst

Each trajectory is one execution: its agent is `main`, every sub-agent it delegates to
(`subagent_trajectory_ref`: embedded by `trajectory_id`, or a file beside it by
`trajectory_path`) is `sub-<id>`, and continuation files (`continued_trajectory_ref`) continue
`main`. Every agent step that is a model call is one request: exact when the steps hold
`metrics.prompt_token_ids`, `completion_token_ids` and `logprobs` (then each step is also a
`trained` sample), reconstructed through the chat template when they do not. Copied-context
steps are context, never requests. docs/import.md has the mapping.",
};

/// The canonical paths of the inputs (a sub-agent file among them is refused).
fn canonical(inputs: &[PathBuf]) -> Vec<PathBuf> {
    inputs
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect()
}

impl Importer for Atif {
    type Item = Imported;

    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        match &probe.shape {
            Shape::Document(head) if !head.array => {
                let atif = head.has("schema_version") || head.has("agent");
                if head.has("steps") && atif {
                    Fit::Yes
                } else if !head.complete && atif {
                    Fit::Unknown
                } else {
                    Fit::No
                }
            }
            Shape::Jsonl(values) => match values.first().and_then(Value::as_object) {
                Some(o) if o.contains_key("steps") && o.contains_key("agent") => Fit::Yes,
                _ => Fit::No,
            },
            _ => Fit::No,
        }
    }

    fn files(&self, inputs: &[PathBuf]) -> Vec<PathBuf> {
        let canon = canonical(inputs);
        inputs
            .iter()
            .flat_map(|p| match walk::read(p, &canon) {
                Ok(i) => i.files,
                Err(_) => vec![p.clone()],
            })
            .collect()
    }

    fn header_meta(&self, opts: &Options, inputs: &[PathBuf]) -> Map<String, Value> {
        let canon = canonical(inputs);
        let read: Vec<Imported> = inputs
            .iter()
            .filter_map(|p| walk::read(p, &canon).ok())
            .collect();
        let names: Vec<String> = read
            .iter()
            .flat_map(|i| i.files.iter().map(|p| p.display().to_string()))
            .collect();
        if !read.is_empty() && read.iter().all(Imported::all_exact) {
            super::exact_header_meta(ABOUT.name, &names)
        } else {
            session::header_meta(ABOUT.name, opts.restore, &names)
        }
    }

    /// An import with an exact session names Harbor as what its `trained` records come from
    /// (a reconstructed session writes none).
    fn trainer(&self, inputs: &[PathBuf]) -> Result<Option<Trainer>> {
        let canon = canonical(inputs);
        let exact = inputs
            .iter()
            .all(|p| walk::read(p, &canon).ok().is_some_and(|i| i.all_exact()));
        Ok(exact.then(|| Trainer {
            name: "harbor".into(),
            version: None,
            loss_agg: LossAgg::Unknown,
            inferred: vec![
                "samples: one per model call, the steps ATIF marks as training data (token ids \
                 recorded, not copied context)"
                    .into(),
                "loss mask: every completion token (ATIF holds no mask)".into(),
                "loss aggregation and trainer version: unknown (ATIF names no trainer)".into(),
            ],
            meta: None,
        }))
    }

    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Imported) -> Result<()>,
    ) -> Result<()> {
        let canon = canonical(inputs);
        let mut seen: HashMap<String, u32> = HashMap::new();
        for (k, path) in inputs.iter().enumerate() {
            (job.progress)(Progress::Reading {
                done: k as u64,
                total: inputs.len() as u64,
            });
            let mut imported = walk::read(path, &canon)?;
            for w in std::mem::take(&mut imported.warnings) {
                job.log.warn(w);
            }
            // Execution ids are per recording: a session id met twice gets a suffix.
            let n = seen.entry(imported.session.execution.clone()).or_default();
            *n += 1;
            if *n > 1 {
                let id = format!("{}-{n}", imported.session.execution);
                job.log.warn(format!(
                    "{}: session {:?} was read already: this execution is {id:?}",
                    path.display(),
                    imported.session.execution
                ));
                imported.session.execution = id;
            }
            emit(job, imported)?;
        }
        Ok(())
    }

    fn records(&self, item: Imported, job: &mut Job) -> Result<()> {
        if item.all_exact() {
            write_exact(item, job)
        } else {
            session::records(item.session, job)
        }
    }
}

/// Writes a session whose every model call holds its ids and log-probs: the requests as
/// recorded.
fn write_exact(imp: Imported, job: &mut Job) -> Result<()> {
    job.builder.forget();
    let s: &Session = &imp.session;
    let start = At {
        file: &s.file,
        line: 0,
    };
    let task = s.task.as_deref().map(Value::from);
    job.out.execution(
        &ExecutionOut {
            execution: &s.execution,
            t: s.t,
            budget_s: None,
            group: None,
            task: task.as_ref(),
            meta: Some(&s.meta),
        },
        start,
    )?;
    let tok = job.builder.tokenizer();
    let (open, close) = (tok.token_id("<tool_call>"), tok.token_id("</tool_call>"));
    // The last full path (prompt + completion) of each agent: a prompt that does not extend it
    // is kept as recorded, and counted.
    let mut last: HashMap<&str, Vec<u32>> = HashMap::new();
    let mut breaks = 0u64;
    let total = s.responses.len();
    for (i, (r, exact)) in s.responses.iter().zip(&imp.exact).enumerate() {
        (job.progress)(Progress::Requests { done: i, total });
        let Some(x) = exact else {
            continue;
        };
        let at = &imp.at[i];
        let name = super::input::file_name(&at.file);
        let turns: Vec<&Turn> = r.context.iter().map(|&k| &s.turns[k as usize]).collect();
        let (spans, aligned) = match job.builder.render_labelled(&turns, &s.tools) {
            Ok((rendered, rspans)) => align(&x.prompt, &rendered, &rspans),
            Err(e) => {
                job.log.warn(format!(
                    "{name}:{}: the steps do not render through the chat template ({e}); the \
                     prompt is labelled `context`",
                    at.line
                ));
                (
                    vec![Span {
                        end: x.prompt.len(),
                        source: Source::Context,
                        call_id: None,
                    }],
                    0,
                )
            }
        };
        let runs = call_runs(&x.completion, open, close);
        let calls = &r.message.tool_calls;
        let tool_calls: Vec<ToolCallOut> = if runs.len() == calls.len() {
            calls
                .iter()
                .zip(&runs)
                .map(|(c, &(a, b))| ToolCallOut {
                    id: &c.id,
                    name: Some(&c.name),
                    start: a as u32,
                    end: b as u32,
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut meta = r.meta.clone();
        meta.insert("aligned_prompt_tokens".into(), json!(aligned));
        let prev = last.entry(r.agent.as_str()).or_default();
        if !prev.is_empty() && !x.prompt.starts_with(prev) {
            breaks += 1;
            meta.insert("extends_previous".into(), Value::Bool(false));
        }
        prev.clear();
        prev.extend_from_slice(&x.prompt);
        prev.extend_from_slice(&x.completion);
        let id = session::request_id(i);
        let spans = spans_out(&spans);
        job.out.request(
            &RequestOut {
                purpose: if r.summary {
                    Purpose::Summary
                } else {
                    Purpose::Task
                },
                t: r.t,
                model: r.model.as_deref(),
                logprobs: Some(&x.logprobs),
                tool_calls: &tool_calls,
                meta: Some(&meta),
                ..RequestOut::new(
                    &s.execution,
                    &id,
                    &r.agent,
                    &x.prompt,
                    &spans,
                    &x.completion,
                )
            },
            At {
                file: &at.file,
                line: at.line,
            },
        )?;
        // The sample ATIF offers for training: the call's whole path, loss on the completion.
        let pieces = [PieceOut::Request {
            request: &id,
            start: 0,
            end: (x.prompt.len() + x.completion.len()) as u32,
        }];
        let mask = vec![1u8; x.completion.len()];
        let behaviour: Vec<Option<f64>> = x.logprobs.iter().copied().map(Some).collect();
        let file = at.file.display().to_string();
        job.out.trained(
            &TrainedOut {
                source: Some(SourceOut {
                    file: &file,
                    index: at.index as u64,
                }),
                behaviour_logprobs: Some(&behaviour),
                ..TrainedOut::new(&s.execution, &id, &pieces, x.prompt.len() as u32, &mask)
            },
            At {
                file: &at.file,
                line: at.line,
            },
        )?;
    }
    (job.progress)(Progress::Requests { done: total, total });
    if breaks > 0 {
        job.log.warn(format!(
            "{}: {} of {} start with something other than their agent's previous prompt + \
             completion (a re-rendered or rewritten context): kept as recorded \
             (meta.extends_previous: false)",
            s.execution,
            plural(breaks as usize, "prompt"),
            total
        ));
    }
    let score = job.opts.score.filter(|_| s.scored);
    session::write_end(
        job,
        &s.execution,
        &s.closure,
        score,
        session::SCORE_EVALUATOR,
        start,
    )
}
