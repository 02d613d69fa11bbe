//! `gyre validate`: every problem of a recording as `file:line: what (field)`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;

use super::exit::{EXIT_INVALID, note};
use gyre_engine::load::{self, KEPT_DIAGNOSTICS, LoadOptions};
use gyre_engine::report::plural;

/// `gyre validate` arguments.
#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// gyre/1 files (.jsonl, .jsonl.gz, .jsonl.zst), read in order.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Stop reading after N problems, all of them listed (a flood of bad lines then takes
    /// seconds); 0 reads to the end, counts every problem and lists the first 1000.
    #[arg(long, value_name = "N", default_value_t = KEPT_DIAGNOSTICS as u64)]
    max_problems: u64,
}

/// Runs `gyre validate`: exit 2 when there is any problem. Problems go to stdout (one per line,
/// up to `--max-problems`), warnings, the count and where reading stopped to stderr.
pub fn run(args: ValidateArgs) -> Result<ExitCode> {
    let files = &args.files;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let options = LoadOptions {
        lenient: false,
        max_problems: (args.max_problems > 0).then_some(args.max_problems),
    };
    let (code, written) = match load::load(files, &options, &|_, _| {}) {
        Ok(batch) => {
            for w in &batch.warnings {
                note!("warning: {w}");
            }
            // The header's tokenizer file is loaded too: a file that exists but is no
            // tokenizer.json is a problem of the recording, found now rather than in `show`.
            match gyre_text::resolve::from_header(batch.tokenizer_spec()) {
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
            match e.stopped_note() {
                Some(stopped) => note!("{stopped}"),
                None => note!("{}", plural(e.count() as usize, "problem")),
            }
            (ExitCode::from(EXIT_INVALID), written)
        }
    };
    // The verdict stands when the reader stops early (`gyre validate x | head`).
    match written.and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(code),
    }
}
