//! The `gyre import` subcommands (wired into [`crate::cli`]).

use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use color_eyre::eyre::Result;
use indicatif::{ProgressBar, ProgressStyle};

use super::convo::Builder;
use super::error::{ExistsError, UsageError};
use super::write::Sink;
use super::{Options, Progress, Summary, load_tokenizer};
use crate::engine::load::LoadError;

/// Which log to import.
#[derive(Subcommand, Debug)]
pub enum ImportCommand {
    /// A Claude Code session (with its subagents/ files): one request per API response.
    #[command(
        name = "claude-code",
        after_help = "\
Examples:
  gyre import claude-code ~/.claude/projects/-home-me-app/8463c716-….jsonl --out session.jsonl
  gyre import claude-code SESSION.jsonl --score 1 --out session.jsonl.zst
  gyre import claude-code SESSION.jsonl --no-restore --out rerendered.jsonl   # the false branches
  gyre stats session.jsonl

Reads SESSION.jsonl and SESSION/subagents/agent-*.jsonl (sub-agents, compaction). Records are
reconstructed (re-tokenised, no log-probs) and marked so. docs/import.md has the mapping."
    )]
    ClaudeCode {
        /// The session's main `.jsonl` file.
        session: PathBuf,
        #[command(flatten)]
        common: Reconstructed,
    },
    /// A SWE-agent trajectory (`.traj`): one request per assistant message.
    #[command(
        name = "swe-agent",
        after_help = "\
Examples:
  gyre import swe-agent trajectories/run/instance.traj --out instance.jsonl
  gyre import swe-agent instance.traj --score 1 --out instance.jsonl --force"
    )]
    SweAgent {
        /// The `.traj` file (JSON with `history[]`, optionally `info`).
        traj: PathBuf,
        #[command(flatten)]
        common: Reconstructed,
    },
    /// An OpenHands event stream: one request per model response.
    #[command(
        name = "openhands",
        after_help = "\
Examples:
  gyre import openhands trajectory.json --out trajectory.jsonl
  gyre import openhands events.json --score 0 --out events.jsonl"
    )]
    Openhands {
        /// The event stream (a JSON array of events).
        events: PathBuf,
        #[command(flatten)]
        common: Reconstructed,
    },
    /// Logged vLLM/SGLang chat traffic with token ids and log-probs: exact records.
    #[command(
        name = "vllm",
        after_help = "\
Examples:
  gyre import vllm traffic.jsonl --out runs.jsonl
  gyre import vllm day1.jsonl.zst day2.jsonl.zst --out runs.jsonl.zst

Each line: {\"execution\", \"agent\", \"purpose\", \"request\": <chat request>, \"response\": <chat
response with prompt_token_ids, choices[0].token_ids and choices[0].logprobs>}; lines with a
`kind` are gyre/1 records copied through (closures, assessments). docs/import.md has an example."
    )]
    Vllm {
        /// JSONL files (plain, .gz or .zst), read in order.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        out: OutArgs,
        /// Tokenizer for span alignment: `qwen3` (bundled) or a tokenizer.json path.
        #[arg(long, default_value = "qwen3")]
        tokenizer: String,
    },
}

/// Output options.
#[derive(Args, Debug)]
pub struct OutArgs {
    /// Output file (`-` = stdout); `.zst` / `.gz` names are compressed. Written atomically.
    #[arg(long, short)]
    out: PathBuf,
    /// Overwrite --out if it exists.
    #[arg(long)]
    force: bool,
}

/// Options of the reconstructing importers.
#[derive(Args, Debug)]
pub struct Reconstructed {
    #[command(flatten)]
    out: OutArgs,
    /// Tokenizer and chat template: `qwen3` (bundled) or a tokenizer.json path (with
    /// tokenizer_config.json beside it).
    #[arg(long, default_value = "qwen3")]
    tokenizer: String,
    /// Add a valid assessment of the closure's artifact with this score (without one, the
    /// execution has no reward and is excluded from admission).
    #[arg(long)]
    score: Option<f64>,
    /// Re-render history through the template instead of restoring recorded outputs.
    #[arg(long)]
    no_restore: bool,
}

impl Reconstructed {
    fn options(&self) -> Options {
        Options {
            tokenizer: self.tokenizer.clone(),
            restore: !self.no_restore,
            score: self.score,
        }
    }
}

/// Runs an import; invalid input and an existing `--out` exit 2.
pub fn run(cmd: ImportCommand) -> Result<ExitCode> {
    match run_inner(cmd) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            if let Some(le) = e.downcast_ref::<LoadError>() {
                eprintln!("{le}");
                return Ok(ExitCode::from(2));
            }
            if let Some(x) = e.downcast_ref::<UsageError>() {
                eprintln!("gyre: {x}");
                return Ok(ExitCode::from(2));
            }
            if let Some(x) = e.downcast_ref::<ExistsError>() {
                eprintln!("gyre: {x}");
                return Ok(ExitCode::from(2));
            }
            Err(e)
        }
    }
}

/// The `--tokenizer` argument loaded; a bad one is a usage error (exit 2).
fn tokenizer_arg(
    arg: &str,
) -> Result<(
    crate::text::TokenText,
    crate::text::ChatTemplate,
    serde_json::Value,
)> {
    load_tokenizer(arg).map_err(|e| UsageError(format!("--tokenizer {arg}: {e:#}")).into())
}

fn input_size(paths: &[&Path]) -> u64 {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum()
}

fn run_inner(cmd: ImportCommand) -> Result<()> {
    let (source, inputs, out): (&str, Vec<&Path>, &OutArgs) = match &cmd {
        ImportCommand::ClaudeCode { session, common } => {
            ("claude-code", vec![session.as_path()], &common.out)
        }
        ImportCommand::SweAgent { traj, common } => {
            ("swe-agent", vec![traj.as_path()], &common.out)
        }
        ImportCommand::Openhands { events, common } => {
            ("openhands", vec![events.as_path()], &common.out)
        }
        ImportCommand::Vllm { files, out, .. } => {
            ("vllm", files.iter().map(PathBuf::as_path).collect(), out)
        }
    };
    for p in &inputs {
        if !p.exists() {
            return Err(super::error::bad(p, 0, "no such file", None));
        }
    }
    if let ImportCommand::ClaudeCode { common, .. }
    | ImportCommand::SweAgent { common, .. }
    | ImportCommand::Openhands { common, .. } = &cmd
    {
        if let Some(s) = common.score {
            if !s.is_finite() {
                return Err(UsageError("--score must be a finite number".into()).into());
            }
        }
    }
    // Refuse an existing --out before any work.
    let mut sink = Sink::open(&out.out, out.force)?;
    let big = io::stderr().is_terminal() && input_size(&inputs) > (1 << 20);
    let bar = big.then(|| {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} {bar:40} {pos}/{len} eta {eta}")
                .expect("static template"),
        );
        pb
    });
    let mut progress = |p: Progress| {
        if let Some(pb) = &bar {
            match p {
                Progress::Reading { done, total } => {
                    pb.set_message("reading (bytes)");
                    pb.set_length(total);
                    pb.set_position(done);
                }
                Progress::Requests { done, total } => {
                    pb.set_message("requests");
                    pb.set_length(total as u64);
                    pb.set_position(done as u64);
                }
            }
        }
    };
    let summary: Summary = match &cmd {
        ImportCommand::Vllm {
            files, tokenizer, ..
        } => {
            let (tok, tmpl, header) = tokenizer_arg(tokenizer)?;
            let mut builder = Builder::new(tok, tmpl)?;
            super::vllm::import(files, &mut builder, &header, &mut sink, &mut progress)?
        }
        ImportCommand::ClaudeCode { session, common } => {
            let opts = common.options();
            let (tok, tmpl, header) = tokenizer_arg(&opts.tokenizer)?;
            let mut builder = Builder::new(tok, tmpl)?;
            super::claude_code::import(
                session,
                &opts,
                &mut builder,
                &header,
                &mut sink,
                &mut progress,
            )?
        }
        ImportCommand::SweAgent { traj, common } => {
            let opts = common.options();
            let (tok, tmpl, header) = tokenizer_arg(&opts.tokenizer)?;
            let mut builder = Builder::new(tok, tmpl)?;
            super::swe_agent::import(traj, &opts, &mut builder, &header, &mut sink, &mut progress)?
        }
        ImportCommand::Openhands { events, common } => {
            let opts = common.options();
            let (tok, tmpl, header) = tokenizer_arg(&opts.tokenizer)?;
            let mut builder = Builder::new(tok, tmpl)?;
            super::openhands::import(
                events,
                &opts,
                &mut builder,
                &header,
                &mut sink,
                &mut progress,
            )?
        }
    };
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    let lines = sink.lines();
    sink.finish()?;
    for w in summary.warnings.iter().take(20) {
        eprintln!("warning: {w}");
    }
    if summary.warnings.len() > 20 {
        eprintln!("warning: … and {} more", summary.warnings.len() - 20);
    }
    eprintln!(
        "gyre: imported {source}: {} execution(s), {} requests, {} input + {} output tokens \
         ({} input tokens written with delta encoding), {lines} lines{}",
        summary.executions,
        summary.requests,
        summary.input_tokens,
        summary.output_tokens,
        summary.written_input_tokens,
        if out.out == Path::new("-") {
            String::new()
        } else {
            format!(" → {}", out.out.display())
        }
    );
    Ok(())
}
