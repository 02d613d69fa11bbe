//! `gyre` with no subcommand and no terminal: the engine at work on the bundled example.

use std::io::{self, Write};
use std::process::ExitCode;

use color_eyre::eyre::{Result, WrapErr};

use gyre_engine::admit::Settings;
use gyre_engine::load::{self, LoadOptions};
use gyre_engine::report::{replay_text, stats_table};
use gyre_engine::score::AdvantageMode;
use gyre_engine::{self as eng, stats};

/// `gyre` with no subcommand: the engine at work on the bundled example recording.
pub fn run() -> Result<ExitCode> {
    let batch = load::load_bytes(
        gyre_engine::demo::NAME,
        gyre_engine::demo::RECORDING,
        &LoadOptions::default(),
    )
    .wrap_err("loading the bundled demo recording")?;
    let results = eng::process(&batch, &Settings::default(), AdvantageMode::DrGrpo);
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "gyre · bundled demo ({}): {}\n",
        gyre_engine::demo::NAME,
        gyre_engine::demo::DESCRIPTION
    )?;
    write!(
        out,
        "{}",
        stats_table(&stats::stats(&batch, &results), &results.settings)
    )?;
    for i in 0..batch.executions.len() {
        writeln!(out)?;
        write!(out, "{}", replay_text(&batch, &results, i))?;
    }
    writeln!(
        out,
        "\nTry: gyre admit FILE --out admitted.jsonl · gyre stats FILE · gyre replay FILE --execution ID"
    )?;
    Ok(ExitCode::SUCCESS)
}
