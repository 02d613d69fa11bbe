//! `gyre validate`: every problem of a recording as `file:line: what (field)`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;

use super::exit::{EXIT_INVALID, note};
use gyre_engine::load::{self, LoadOptions};
use gyre_engine::report::plural;

/// `gyre validate` arguments.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// gyre/1 files (.jsonl, .jsonl.gz, .jsonl.zst), read in order.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Runs `gyre validate`: exit 2 when there is any problem. Problems go to stdout (one per line,
/// the first thousand), warnings and the count to stderr.
pub fn run(args: ValidateArgs) -> Result<ExitCode> {
    let files = &args.files;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let (code, written) = match load::load(files, &LoadOptions::default(), &|_, _| {}) {
        Ok(batch) => {
            for w in &batch.warnings {
                note!("warning: {w}");
            }
            // The header's tokenizer file is loaded too: a file that exists but is no
            // tokenizer.json is a problem of the recording, found now rather than in `show`.
            match gyre_text::resolve::from_header(&batch) {
                Err(e) => {
                    let written = writeln!(out, "{e}");
                    note!("1 problem");
                    (ExitCode::from(EXIT_INVALID), written)
                }
                Ok(_) => {
                    let requests: usize = batch.executions.iter().map(|e| e.requests.len()).sum();
                    let written = writeln!(
                        out,
                        "ok: {}, {}, {}, {}",
                        plural(files.len(), "file"),
                        plural(batch.executions.len(), "execution"),
                        plural(requests, "request"),
                        plural(batch.warning_count as usize, "warning")
                    );
                    (ExitCode::SUCCESS, written)
                }
            }
        }
        Err(e) => {
            for w in &e.warnings {
                note!("warning: {w}");
            }
            let written = e.diagnostics.iter().try_for_each(|d| writeln!(out, "{d}"));
            note!("{}", plural(e.count() as usize, "problem"));
            (ExitCode::from(EXIT_INVALID), written)
        }
    };
    // The verdict stands when the reader stops early (`gyre validate x | head`).
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(code),
    }
}
