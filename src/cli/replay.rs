//! `gyre replay`: the draw log of one execution.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;

use super::args::{AdmissionArgs, InputArgs, find_execution, load_with_progress};
use gyre_engine::report::{replay_json, replay_text};
use gyre_engine::score::AdvantageMode;
use gyre_engine::{self as eng};

/// `gyre replay` arguments.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    admission: AdmissionArgs,
    /// Execution id.
    #[arg(long, short)]
    execution: String,
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `gyre replay`.
pub fn run(args: ReplayArgs) -> Result<ExitCode> {
    let batch = load_with_progress(&args.input)?;
    let i = find_execution(&batch, &args.execution)?;
    let results = eng::process(&batch, &args.admission.settings(), AdvantageMode::DrGrpo);
    let mut out = io::stdout().lock();
    if args.json {
        gyre_text::sanitize::write_json_pretty(&mut out, &replay_json(&batch, &results, i))?;
        writeln!(out)?;
    } else {
        write!(out, "{}", replay_text(&batch, &results, i))?;
    }
    Ok(ExitCode::SUCCESS)
}
