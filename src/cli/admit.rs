//! `gyre admit`: the admitted set as `gyre/admitted-1` JSONL (docs/format.md §8), or as gyre/1
//! `trained` records (§9, `--format trained`).

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::{Result, WrapErr};

use super::args::{AdmissionArgs, InputArgs, load_with_progress, named};
use gyre_engine::report::plural;
use gyre_engine::score::AdvantageMode;
use gyre_engine::trained::{self, RowFormat};
use gyre_engine::{self as eng, export};
use gyre_format::output::Sink;

/// `gyre admit` arguments.
#[derive(Args, Debug)]
pub struct AdmitArgs {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    admission: AdmissionArgs,
    /// Advantage within GRPO groups: drgrpo (reward − mean), grpo (÷ std + 1e-6), none.
    #[arg(long, value_parser = named::<AdvantageMode>(), default_value = "drgrpo")]
    advantage: AdvantageMode,
    /// Write here instead of stdout; a name ending in .parquet writes Parquet (list columns),
    /// .zst or .gz compressed JSONL.
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// Overwrite --out if it exists.
    #[arg(long)]
    force: bool,
    /// admitted: gyre/admitted-1 rows (§8); trained: the same rows as gyre/1 trained records
    /// (§9), to read beside the recording (`gyre stats REC OUT`).
    #[arg(long, value_parser = named::<RowFormat>(), default_value = "admitted")]
    format: RowFormat,
}

/// Runs `gyre admit`.
pub fn run(args: AdmitArgs) -> Result<ExitCode> {
    if args.format == RowFormat::Trained && args.out.as_deref().is_some_and(export::is_parquet) {
        return Err(gyre_format::note::Invalid(
            "--format trained writes gyre/1 JSONL, not Parquet: name the output .jsonl".into(),
        )
        .into());
    }
    // Opened first: an existing file is refused before the work, not after it.
    let sink = args
        .out
        .as_deref()
        .map(|path| Sink::open(path, args.force))
        .transpose()?;
    let batch = load_with_progress(&args.input)?;
    let results = eng::process(&batch, &args.admission.settings(), args.advantage);
    match (sink, args.out) {
        (Some(mut sink), Some(path)) => {
            let rows = match args.format {
                RowFormat::Admitted => export::write_as(&batch, &results, &path, &mut sink)?,
                RowFormat::Trained => trained::write_trained(&batch, &results, &mut sink)
                    .wrap_err_with(|| format!("writing {}", path.display()))?,
            };
            sink.finish()?;
            super::exit::note!(
                "gyre: wrote {} ({}, B = {}) to {}",
                plural(rows as usize, "row"),
                plural(batch.executions.len(), "execution"),
                results.batch_executions,
                path.display()
            );
        }
        _ => {
            let stdout = io::stdout().lock();
            let mut w = io::BufWriter::with_capacity(1 << 20, stdout);
            match args.format {
                RowFormat::Admitted => export::jsonl::write_rows(&batch, &results, &mut w),
                RowFormat::Trained => trained::write_trained(&batch, &results, &mut w),
            }
            .wrap_err("writing rows to stdout")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
