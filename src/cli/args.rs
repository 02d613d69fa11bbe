//! Arguments and helpers shared by the subcommands: inputs, admission settings, loading with a
//! progress bar, finding an execution, exit codes.

use std::io::{self, IsTerminal};
use std::path::PathBuf;

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use color_eyre::eyre::Result;
use indicatif::{ProgressBar, ProgressStyle};

use super::exit::{Invalid, note};
use gyre_engine::admit::{self, Class, Settings};
use gyre_engine::load::{self, Batch, LoadOptions};
use gyre_engine::report::plural;
use gyre_format::named::Named;
use gyre_text::sanitize;

/// Input recordings.
#[derive(Args, Debug)]
pub struct InputArgs {
    /// gyre/1 files (.jsonl, .jsonl.gz, .jsonl.zst), read in order.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Skip invalid lines (counted, reported as warnings) instead of failing.
    #[arg(long)]
    pub lenient: bool,
}

/// Admission settings (docs/format.md §5): one flag per entry of the engine's table of settings
/// ([`admit::SETTINGS`]: name, help, default and parser come from there).
#[derive(Clone, Debug)]
pub struct AdmissionArgs {
    settings: Settings,
}

/// A whole `--priority` list (one argument, comma-separated).
#[derive(Clone, Debug)]
pub struct Priority(pub Vec<Class>);

/// Parses a `--priority` list.
pub fn parse_priority(s: &str) -> Result<Priority, String> {
    admit::parse_priority(s).map(Priority)
}

impl AdmissionArgs {
    /// The engine's settings.
    pub fn settings(&self) -> Settings {
        self.settings.clone()
    }
}

impl Args for AdmissionArgs {
    fn augment_args(cmd: Command) -> Command {
        admit::SETTINGS.iter().fold(cmd, |cmd, s| {
            let parse = s.parse;
            cmd.arg(
                Arg::new(s.key)
                    .long(s.key)
                    .help(s.help)
                    .value_name(s.value_name)
                    .default_value(s.default)
                    .allow_negative_numbers(true)
                    // Checked as the flag is read, so clap names the flag in its error.
                    .value_parser(move |v: &str| {
                        parse(&mut Settings::default(), v).map(|()| v.to_owned())
                    }),
            )
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for AdmissionArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut settings = Settings::default();
        for s in &admit::SETTINGS {
            if let Some(v) = matches.get_one::<String>(s.key) {
                (s.parse)(&mut settings, v)
                    .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, e))?;
            }
        }
        Ok(AdmissionArgs { settings })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// Whether to write colour: stdout is a terminal and `NO_COLOR` is unset or empty.
pub fn color_wanted() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn print_warnings(batch: &Batch) {
    const SHOWN: usize = 10;
    for w in batch.warnings.iter().take(SHOWN) {
        note!("warning: {w}");
    }
    let more = batch.warning_count.saturating_sub(SHOWN as u64);
    if more > 0 {
        note!(
            "warning: … and {} more (`gyre validate` lists them)",
            plural(more as usize, "warning")
        );
    }
    if batch.skipped_lines > 0 {
        note!(
            "gyre: --lenient skipped {}",
            plural(batch.skipped_lines as usize, "line")
        );
    }
}

/// Loads with a progress bar on stderr when it is a terminal and the input is large.
pub fn load_with_progress(input: &InputArgs) -> Result<Batch> {
    let options = LoadOptions {
        lenient: input.lenient,
        max_problems: Some(load::KEPT_DIAGNOSTICS as u64),
    };
    let total: u64 = input
        .files
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let bar = (io::stderr().is_terminal() && total > 16 << 20).then(|| {
        let pb = ProgressBar::new(total);
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} loading {bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .expect("static template"),
        );
        pb
    });
    let result = load::load(&input.files, &options, &|done, _| {
        if let Some(pb) = &bar {
            pb.set_position(done);
        }
    });
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    let batch = result?;
    print_warnings(&batch);
    Ok(batch)
}

/// The execution called `id`, or an [`Invalid`] error naming some that exist (exit 2).
pub fn find_execution(batch: &Batch, id: &str) -> Result<usize> {
    batch.execution_index(id).ok_or_else(|| {
        let known: Vec<_> = batch
            .executions
            .iter()
            .take(8)
            .map(|e| sanitize(&e.id).into_owned())
            .collect();
        let known = if known.is_empty() {
            "the input has no executions".to_owned()
        } else {
            format!("first ids: {}", known.join(", "))
        };
        Invalid(format!(
            "no execution \"{}\" in the input ({known})",
            sanitize(id)
        ))
        .into()
    })
}

/// A clap value parser for a [`Named`] set: `--help` lists the names with their help lines, and
/// a wrong value is answered with the accepted ones (clap's own wording).
pub fn named<T: Named + Send + Sync>() -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let values = T::ALL.iter().map(|v| {
        let value = PossibleValue::new(v.name());
        match v.help() {
            "" => value,
            help => value.help(help),
        }
    });
    // Every accepted string is a name of `T`, so the lookup cannot miss.
    PossibleValuesParser::new(values).map(|s| T::parse(&s).unwrap_or(T::ALL[0]))
}
