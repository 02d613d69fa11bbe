//! `gyre stats`: what is in a recording, and what admission makes of it.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;

use super::args::{AdmissionArgs, InputArgs, load_with_progress};
use gyre_engine::report::stats_table;
use gyre_engine::score::AdvantageMode;
use gyre_engine::{self as eng, stats};

/// `gyre stats` arguments.
#[derive(Args, Debug)]
pub struct StatsArgs {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    admission: AdmissionArgs,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `gyre stats`.
pub fn run(args: StatsArgs) -> Result<ExitCode> {
    let batch = load_with_progress(&args.input)?;
    let results = eng::process(&batch, &args.admission.settings(), AdvantageMode::None);
    let s = stats::stats(&batch, &results);
    let mut out = io::stdout().lock();
    if args.json {
        gyre_text::sanitize::write_json_pretty(&mut out, &s)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", stats_table(&s, &results.settings))?;
    }
    Ok(ExitCode::SUCCESS)
}
