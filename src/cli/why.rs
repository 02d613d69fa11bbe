//! `gyre why`: why one request's path was (not) drawn.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;

use super::args::{AdmissionArgs, InputArgs, find_execution, load_with_progress};
use super::exit::Invalid;
use gyre_engine::score::AdvantageMode;
use gyre_engine::{self as eng, lens, why};
use gyre_text::sanitize::{self, sanitize};

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
    /// Also look through N seeds from --seed on: how often it is drawn, the smallest J_max
    /// that draws it, what a priority with its class first would do (`lens` in --json).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    seeds: Option<u32>,
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
    let settings = args.admission.settings();
    let results = eng::process(&batch, &settings, AdvantageMode::DrGrpo);
    let outcome = &results.outcomes[i];
    let mut w = why::why(exec, outcome, &results.admissions[i], r);
    w.lens = args.seeds.map(|seeds| {
        let options = lens::LensOptions {
            seed: settings.seed,
            seeds,
            priority: settings.priority.clone(),
        };
        let l = lens::execution_lens(exec, outcome, &options);
        lens::request_lens(exec, outcome, &settings, &l, r)
    });
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
