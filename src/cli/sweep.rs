//! `gyre sweep`: admission under many settings at once, parsed once.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;
use indicatif::{ProgressBar, ProgressStyle};

use super::args::{InputArgs, Priority, load_with_progress, parse_priority};
use gyre_engine::report::{sweep_json, sweep_text};
use gyre_engine::sweep::{SweepOptions, sweep_with_progress};

/// `gyre sweep` arguments.
#[derive(Args, Debug)]
pub struct SweepArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Caps to compare, comma-separated; 0 = uncapped (always computed: it is the cost baseline).
    #[arg(long, value_delimiter = ',', default_value = "1,2,5,0")]
    jmax: Vec<u32>,
    /// Number of seeds, from --seed on.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Class priority, highest first; classes left out are never drawn.
    #[arg(long, default_value = "main,main-summary,sub,sub-summary", value_parser = parse_priority)]
    priority: Priority,
    /// One JSON object (per setting: per-seed figures and their spread; per execution too).
    #[arg(long)]
    json: bool,
}

/// Runs `gyre sweep`.
pub fn run(args: SweepArgs) -> Result<ExitCode> {
    let batch = load_with_progress(&args.input)?;
    let options = SweepOptions {
        jmax: args.jmax,
        seed: args.seed,
        seeds: args.seeds,
        priority: args.priority.0,
    };
    let bar = (io::stderr().is_terminal() && batch.executions.len() > 64).then(|| {
        let pb = ProgressBar::new(batch.executions.len() as u64);
        pb.set_style(
            ProgressStyle::with_template("{spinner} sweeping {bar:40} {pos}/{len} executions")
                .expect("static template"),
        );
        pb
    });
    let sweep = sweep_with_progress(&batch, &options, &|done, _| {
        if let Some(pb) = &bar {
            pb.set_position(done as u64);
        }
    });
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    let mut out = io::stdout().lock();
    if args.json {
        gyre_text::sanitize::write_json_pretty(&mut out, &sweep_json(&sweep))?;
        writeln!(out)?;
    } else {
        write!(out, "{}", sweep_text(&sweep))?;
    }
    Ok(ExitCode::SUCCESS)
}
