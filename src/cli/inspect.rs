//! `gyre inspect`: the interactive inspector on recordings or a bundled demo.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args};
use color_eyre::eyre::Result;

use super::args::AdmissionArgs;
use super::exit::Invalid;
use gyre_engine::admit::Settings;
use gyre_engine::demo::Demo;
use gyre_engine::score::AdvantageMode;
use gyre_tui::remembered::{Explicit, Remember};
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
    /// Start from these flags and the defaults, not from the settings remembered of this
    /// recording; this run is still remembered at quit.
    ///
    /// Without --fresh the inspector starts where the last run on the same files quit: seed,
    /// J_max, priority, advantage, colouring and sort, kept in $XDG_STATE_HOME/gyre/inspector/
    /// (else ~/.local/state/gyre/inspector/), never beside the data; flags given win over them.
    #[arg(long)]
    fresh: bool,
}

/// Which admission settings `matches` (the `inspect` subcommand's) took from the command line
/// rather than from their defaults: those win over the remembered ones.
fn explicit(matches: Option<&ArgMatches>) -> Explicit {
    let given =
        |id: &str| matches.is_some_and(|m| m.value_source(id) == Some(ValueSource::CommandLine));
    Explicit::given(given)
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

/// Runs `gyre inspect`; `matches` are the subcommand's, to tell flags given from defaults.
pub fn run(args: InspectArgs, matches: Option<&ArgMatches>) -> Result<ExitCode> {
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
        advantage: AdvantageMode::DrGrpo,
        lenient: args.lenient,
        tokenizer: args.tokenizer,
        follow: args.follow,
        seeds: args.seeds,
        remember: if args.fresh {
            Remember::Fresh
        } else {
            Remember::Restore(explicit(matches))
        },
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

/// `gyre` alone on a terminal: the inspector on the bundled `gyre synth` demo, remembered as
/// `gyre inspect --demo synth` is.
pub fn demo() -> Result<ExitCode> {
    tui::run(Options {
        input: Input::Demo(Demo::default()),
        settings: Settings::default(),
        advantage: AdvantageMode::DrGrpo,
        lenient: false,
        tokenizer: None,
        follow: false,
        seeds: gyre_tui::whatif::DEFAULT_SEEDS,
        remember: Remember::Restore(Explicit::default()),
    })
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use super::*;
    use crate::cli::Cli;

    fn explicit_of(args: &[&str]) -> Explicit {
        let m = Cli::command().try_get_matches_from(args).unwrap();
        assert!(Cli::from_arg_matches(&m).is_ok());
        explicit(m.subcommand_matches("inspect"))
    }

    #[test]
    fn flags_given_are_told_from_defaults() {
        assert_eq!(
            explicit_of(&["gyre", "inspect", "a.jsonl"]),
            Explicit::default()
        );
        // A flag given with the default value is still given: it wins over what was remembered.
        assert_eq!(
            explicit_of(&["gyre", "inspect", "a.jsonl", "--seed", "0", "--fresh"]),
            Explicit::given(|k| k == "seed")
        );
        assert_eq!(
            explicit_of(&[
                "gyre",
                "inspect",
                "a.jsonl",
                "--jmax=7",
                "--priority",
                "main"
            ]),
            Explicit::given(|k| k == "jmax" || k == "priority")
        );
    }
}
