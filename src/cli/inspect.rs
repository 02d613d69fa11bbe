//! `gyre inspect`: the interactive inspector on recordings or a bundled demo.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;

use super::args::AdmissionArgs;
use crate::demo::Demo;
use crate::engine::admit::Settings;
use crate::tui::{self, Input, Options};

/// `gyre inspect` arguments.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// gyre/1 files (.jsonl, .jsonl.gz, .jsonl.zst), read in order.
    #[arg(required_unless_present = "demo")]
    files: Vec<PathBuf>,
    /// Open a bundled recording instead of files.
    #[arg(long, value_enum, conflicts_with = "files")]
    demo: Option<Demo>,
    /// Skip invalid lines (counted, reported as warnings) instead of failing.
    #[arg(long)]
    lenient: bool,
    #[command(flatten)]
    admission: AdmissionArgs,
    /// Tokenizer: a bundled name (qwen3) or a tokenizer.json path (default: the header's).
    #[arg(long, value_name = "NAME|PATH")]
    tokenizer: Option<String>,
}

/// Runs `gyre inspect`.
pub fn run(args: InspectArgs) -> Result<ExitCode> {
    tui::run(Options {
        input: match args.demo {
            Some(d) => Input::Demo(d),
            None => Input::Files(args.files),
        },
        settings: args.admission.settings(),
        lenient: args.lenient,
        tokenizer: args.tokenizer,
    })
}

/// `gyre` alone on a terminal: the inspector on the bundled `gyre synth` demo.
pub fn demo() -> Result<ExitCode> {
    tui::run(Options {
        input: Input::Demo(Demo::default()),
        settings: Settings::default(),
        lenient: false,
        tokenizer: None,
    })
}
