//! `gyre inspect`: the interactive inspector on recordings or a bundled demo.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;

use super::args::AdmissionArgs;
use super::exit::Invalid;
use gyre_engine::admit::Settings;
use gyre_engine::demo::Demo;
use gyre_tui::{self as tui, Input, Options};

/// `gyre inspect` arguments.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// gyre/1 files (.jsonl, .jsonl.gz, .jsonl.zst), read in order.
    #[arg(required_unless_present = "demo")]
    files: Vec<PathBuf>,
    /// Open a bundled recording instead of files.
    #[arg(long, value_parser = super::args::named::<Demo>(), conflicts_with = "files")]
    demo: Option<Demo>,
    /// Skip invalid lines (counted, reported as warnings) instead of failing.
    #[arg(long)]
    lenient: bool,
    #[command(flatten)]
    admission: AdmissionArgs,
    /// Tokenizer: a bundled name (qwen3), a tokenizer.json or tokenizer.json.gz, or the model
    /// directory holding one (default: the header's).
    #[arg(long, value_name = "NAME|DIR|FILE")]
    tokenizer: Option<String>,
    /// Keep reading FILE as it grows (a recording `gyre record` or a `Recorder` is still
    /// writing): new executions and requests appear and the engine re-runs; read up to the last
    /// complete line, checked twice a second. One uncompressed file.
    #[arg(long, conflicts_with = "demo")]
    follow: bool,
    /// Seeds the lens looks through, from --seed on (lens colouring, why, dashboard).
    #[arg(long, value_name = "N", default_value_t = gyre_tui::whatif::DEFAULT_SEEDS,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    seeds: u32,
}

/// The inspector draws on stdout and reads keys from stdin: both must be a terminal. Checked
/// before the terminal is touched, so a script or a redirect gets one line and exit 2.
fn require_terminal() -> Result<()> {
    let (stdin, stdout) = (io::stdin().is_terminal(), io::stdout().is_terminal());
    if stdin && stdout {
        return Ok(());
    }
    let which = match (stdin, stdout) {
        (false, false) => "stdin and stdout are not",
        (false, true) => "stdin is not",
        _ => "stdout is not",
    };
    Err(Invalid(format!(
        "inspect needs a terminal ({which} one); without one, use gyre stats, replay or show"
    ))
    .into())
}

/// Runs `gyre inspect`.
pub fn run(args: InspectArgs) -> Result<ExitCode> {
    if args.follow {
        check_follow(&args.files)?;
    }
    require_terminal()?;
    tui::run(Options {
        input: match args.demo {
            Some(d) => Input::Demo(d),
            None => Input::Files(args.files),
        },
        settings: args.admission.settings(),
        lenient: args.lenient,
        tokenizer: args.tokenizer,
        follow: args.follow,
        seeds: args.seeds,
    })
}

/// `--follow` reads one plain file up to its last complete line.
fn check_follow(files: &[PathBuf]) -> Result<()> {
    let [file] = files else {
        return Err(Invalid(format!(
            "--follow reads one file as it grows; {} were given",
            files.len()
        ))
        .into());
    };
    match tui::follow::is_compressed(file) {
        Ok(false) => Ok(()),
        Ok(true) => Err(Invalid(format!(
            "--follow needs an uncompressed recording; {} is compressed",
            file.display()
        ))
        .into()),
        Err(e) => Err(Invalid(format!("{}: {e}", file.display())).into()),
    }
}

/// `gyre` alone on a terminal: the inspector on the bundled `gyre synth` demo.
pub fn demo() -> Result<ExitCode> {
    tui::run(Options {
        input: Input::Demo(Demo::default()),
        settings: Settings::default(),
        lenient: false,
        tokenizer: None,
        follow: false,
        seeds: gyre_tui::whatif::DEFAULT_SEEDS,
    })
}
