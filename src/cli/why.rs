//! `gyre why`: why one request's path was (not) drawn.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;

use super::args::{AdmissionArgs, EXIT_INVALID, InputArgs, find_execution, load_with_progress};
use crate::engine::score::AdvantageMode;
use crate::engine::{self as eng, why};

/// `gyre why` arguments.
#[derive(Args, Debug)]
pub struct WhyArgs {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    admission: AdmissionArgs,
    /// Execution id.
    #[arg(long, short)]
    execution: String,
    /// Request id.
    #[arg(long, short)]
    request: String,
    /// JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `gyre why`.
pub fn run(args: WhyArgs) -> Result<ExitCode> {
    let batch = load_with_progress(&args.input)?;
    let i = match find_execution(&batch, &args.execution) {
        Ok(i) => i,
        Err(code) => return Ok(code),
    };
    let exec = &batch.executions[i];
    let Some(r) = exec.request_index(&args.request) else {
        let known: Vec<&str> = exec
            .requests
            .iter()
            .take(8)
            .map(|r| r.id.as_str())
            .collect();
        eprintln!(
            "gyre: execution {:?} has no request {:?} (first ids: {})",
            args.execution,
            args.request,
            known.join(", ")
        );
        return Ok(ExitCode::from(EXIT_INVALID));
    };
    let results = eng::process(&batch, &args.admission.settings(), AdvantageMode::DrGrpo);
    let w = why::why(exec, &results.outcomes[i], &results.admissions[i], r);
    let mut out = io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &w)?;
        writeln!(out)?;
    } else {
        for line in w.lines() {
            writeln!(out, "{}", crate::text::sanitize(&line))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
