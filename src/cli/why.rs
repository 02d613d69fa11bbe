//! `gyre why`: why one request's path was (not) drawn.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;

use super::args::{AdmissionArgs, InputArgs, find_execution, load_with_progress};
use super::exit::Invalid;
use crate::engine::score::AdvantageMode;
use crate::engine::{self as eng, why};
use crate::text::sanitize::{self, sanitize};

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
    let i = find_execution(&batch, &args.execution)?;
    let exec = &batch.executions[i];
    let Some(r) = exec.request_index(&args.request) else {
        let known: Vec<String> = exec
            .requests
            .iter()
            .take(8)
            .map(|r| sanitize(&r.id).into_owned())
            .collect();
        return Err(Invalid(format!(
            "execution \"{}\" has no request \"{}\" (first ids: {})",
            sanitize(&args.execution),
            sanitize(&args.request),
            known.join(", ")
        ))
        .into());
    };
    let results = eng::process(&batch, &args.admission.settings(), AdvantageMode::DrGrpo);
    let w = why::why(exec, &results.outcomes[i], &results.admissions[i], r);
    let mut out = io::stdout().lock();
    if args.json {
        sanitize::write_json_pretty(&mut out, &w)?;
        writeln!(out)?;
    } else {
        for line in w.lines() {
            writeln!(out, "{}", sanitize(&line))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
