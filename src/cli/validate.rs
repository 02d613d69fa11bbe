//! `gyre validate`: every problem of a recording as `file:line: what (field)`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;

use super::args::EXIT_INVALID;
use crate::engine::load::{self, LoadOptions};
use crate::report::plural;

/// `gyre validate` arguments.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// gyre/1 files (.jsonl, .jsonl.gz, .jsonl.zst), read in order.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Runs `gyre validate`: exit 2 when there is any problem.
pub fn run(args: ValidateArgs) -> Result<ExitCode> {
    let files = &args.files;
    match load::load(files, &LoadOptions::default(), &|_, _| {}) {
        Ok(batch) => {
            for w in &batch.warnings {
                eprintln!("warning: {w}");
            }
            let requests: usize = batch.executions.iter().map(|e| e.requests.len()).sum();
            println!(
                "ok: {}, {}, {}, {}",
                plural(files.len(), "file"),
                plural(batch.executions.len(), "execution"),
                plural(requests, "request"),
                plural(batch.warnings.len(), "warning")
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            for d in &e.diagnostics {
                println!("{d}");
            }
            eprintln!("{}", plural(e.diagnostics.len(), "problem"));
            Ok(ExitCode::from(EXIT_INVALID))
        }
    }
}
