//! `gyre synth`: a simulated Claude-Code-style harness writing gyre/1 records.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;
use indicatif::{ProgressBar, ProgressStyle};

use crate::output::Sink;
use crate::synth::{self, SynthOptions};

/// `gyre synth` arguments.
#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Output file (.jsonl, .jsonl.gz or .jsonl.zst).
    #[arg(long, short)]
    out: PathBuf,
    /// Executions (GRPO groups of 4 share a task).
    #[arg(long, default_value_t = 24)]
    executions: usize,
    /// Main-agent steps per execution.
    #[arg(long, default_value_t = 12)]
    turns: usize,
    /// Compaction threshold in tokens.
    #[arg(long, default_value_t = 6000)]
    context: usize,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write delta (`extends`) encodings.
    #[arg(long)]
    delta: bool,
    /// Overwrite --out if it exists.
    #[arg(long)]
    force: bool,
}

/// Runs `gyre synth`.
pub fn run(args: SynthArgs) -> Result<ExitCode> {
    let options = SynthOptions {
        executions: args.executions,
        turns: args.turns,
        context: args.context,
        seed: args.seed,
        delta: args.delta,
    };
    let out = &args.out;
    let mut sink = Sink::open(out, args.force)?;
    let bar = io::stderr().is_terminal().then(|| {
        let pb = ProgressBar::new(options.executions as u64);
        pb.set_style(
            ProgressStyle::with_template("{spinner} synth {bar:40} {pos}/{len} executions {msg}")
                .expect("static template"),
        );
        pb
    });
    let summary = synth::write_synth_with_progress(&options, &mut sink, &mut |p| {
        if let Some(pb) = &bar {
            pb.set_position(p.executions_done as u64);
            pb.set_message(format!("{:.1} MB", p.bytes as f64 / 1e6));
        }
    })?;
    sink.finish()?;
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    let fates: Vec<String> = summary
        .fates
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    eprintln!(
        "gyre: wrote {} ({} executions, {} requests, {} lines, {:.1} MB uncompressed; fates: {})",
        out.display(),
        summary.executions,
        summary.requests,
        summary.lines,
        summary.bytes as f64 / 1e6,
        fates.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}
