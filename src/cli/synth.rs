//! `gyre synth`: a simulated Claude-Code-style harness writing gyre/1 records.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;
use indicatif::{ProgressBar, ProgressStyle};

use gyre_engine::report::plural;
use gyre_format::output::Sink;
use gyre_synth::{self as synth, SynthOptions};

/// `gyre synth` arguments.
#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Output file (.jsonl, .jsonl.gz or .jsonl.zst).
    #[arg(long, short)]
    out: PathBuf,
    /// Executions (GRPO groups of 4 share a task).
    #[arg(long, default_value_t = 24, allow_negative_numbers = true)]
    executions: usize,
    /// Main-agent steps per execution.
    #[arg(long, default_value_t = 12, allow_negative_numbers = true)]
    turns: usize,
    /// Compaction threshold in tokens.
    #[arg(long, default_value_t = 6000, allow_negative_numbers = true)]
    context: usize,
    /// Seed.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
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
    super::exit::note!(
        "gyre: wrote {} ({}, {}, {}, {:.1} MB uncompressed; fates: {})",
        out.display(),
        plural(summary.executions, "execution"),
        plural(summary.requests, "request"),
        plural(summary.lines as usize, "line"),
        summary.bytes as f64 / 1e6,
        fates.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}
