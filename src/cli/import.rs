//! The `gyre import` subcommands, one per [`IMPORTERS`] entry.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{ArgMatches, Args, Command, FromArgMatches, Subcommand};
use color_eyre::eyre::Result;
use indicatif::{ProgressBar, ProgressStyle};

use gyre_engine::load::LoadError;
use gyre_engine::report::plural;
use gyre_import::convo::Builder;
use gyre_import::error::{ExistsError, InputError, UsageError};
use gyre_import::write::Sink;
use gyre_import::{IMPORTERS, Options, Progress, Source, Summary, importer, load_tokenizer};
use gyre_text::{TemplateError, sanitize};

/// Options every importer takes.
#[derive(Args, Debug)]
pub struct CommonArgs {
    /// The log(s) to import.
    #[arg(required = true, value_name = "LOG")]
    inputs: Vec<PathBuf>,
    /// Output file (`-` = stdout); `.zst` / `.gz` names are compressed. Written atomically.
    #[arg(long, short)]
    out: PathBuf,
    /// Overwrite --out if it exists.
    #[arg(long)]
    force: bool,
    /// Tokenizer and chat template: `qwen3` (bundled), a model directory (tokenizer.json or
    /// tokenizer.json.gz, with tokenizer_config.json and/or chat_template.jinja), or a
    /// tokenizer.json / .gz file (the rest is read from its directory). The template is the
    /// config's chat_template, else chat_template.jinja, else chat_template.json.
    #[arg(long, default_value = "qwen3", value_name = "NAME|DIR|FILE")]
    tokenizer: String,
    /// Chat template to render with instead of the tokenizer's: a .jinja file, or a JSON file
    /// holding chat_template (tokenizer_config.json, chat_template.json), e.g. Qwen3-Coder's
    /// template on the bundled qwen3 tokenizer.
    #[arg(long, value_name = "FILE")]
    chat_template: Option<PathBuf>,
    /// Skip lines (events, messages) that cannot be read, with a warning, instead of failing.
    #[arg(long)]
    lenient: bool,
}

/// Options of the importers that reconstruct records from text.
#[derive(Args, Debug)]
pub struct ReconstructArgs {
    /// Add a valid assessment of the closure's artifact with this score (without one, the
    /// execution has no reward and is excluded from admission).
    #[arg(long, allow_negative_numbers = true)]
    score: Option<f64>,
    /// Re-render history through the template instead of restoring recorded outputs.
    #[arg(long)]
    no_restore: bool,
}

/// A parsed `gyre import <source> …`.
#[derive(Debug)]
pub struct ImportCommand {
    source: &'static str,
    common: CommonArgs,
    reconstruct: Option<ReconstructArgs>,
}

fn subcommand(source: &dyn Source) -> Command {
    let a = source.about();
    let cmd = CommonArgs::augment_args(Command::new(a.name)).mut_arg("inputs", |arg| {
        let arg = arg.value_name(a.input).help(a.input_help);
        if a.many {
            arg
        } else {
            arg.num_args(1).action(clap::ArgAction::Set)
        }
    });
    let cmd = if a.reconstructed {
        ReconstructArgs::augment_args(cmd)
    } else {
        cmd
    };
    // Last: augmenting with an argument struct sets that struct's doc as the about text.
    cmd.about(a.summary).after_help(a.help)
}

impl FromArgMatches for ImportCommand {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let (name, sub) = matches.subcommand().ok_or_else(|| {
            let names: Vec<&str> = IMPORTERS.iter().map(|i| i.about().name).collect();
            clap::Error::raw(
                clap::error::ErrorKind::MissingSubcommand,
                format!("gyre import needs a source: {}", names.join(", ")),
            )
        })?;
        let source = importer(name).ok_or_else(|| {
            clap::Error::raw(
                clap::error::ErrorKind::InvalidSubcommand,
                format!("no importer named {name}"),
            )
        })?;
        let about = source.about();
        Ok(Self {
            source: about.name,
            common: CommonArgs::from_arg_matches(sub)?,
            reconstruct: if about.reconstructed {
                Some(ReconstructArgs::from_arg_matches(sub)?)
            } else {
                None
            },
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Subcommand for ImportCommand {
    fn augment_subcommands(cmd: Command) -> Command {
        IMPORTERS
            .iter()
            .fold(cmd, |cmd, s| cmd.subcommand(subcommand(*s)))
            .subcommand_required(true)
    }

    fn augment_subcommands_for_update(cmd: Command) -> Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        importer(name).is_some()
    }
}

/// The inputs, for a message: the file, or how many.
fn inputs_named(cmd: &ImportCommand) -> String {
    match cmd.common.inputs.as_slice() {
        [one] => one.display().to_string(),
        many => format!("{} inputs", many.len()),
    }
}

/// Runs an import: invalid input, bad arguments and an existing `--out` print one plain line
/// (or the list of problems) and exit 2.
pub fn run(cmd: ImportCommand) -> Result<ExitCode> {
    match run_inner(&cmd) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            let plain = if let Some(x) = e.downcast_ref::<InputError>() {
                Some(x.to_string())
            } else if let Some(x) = e.downcast_ref::<LoadError>() {
                Some(x.to_string())
            } else if let Some(x) = e.downcast_ref::<UsageError>() {
                Some(format!("gyre: {x}"))
            } else if e.chain().any(|c| c.is::<TemplateError>()) {
                let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
                Some(format!(
                    "gyre: {}: {} (the model's chat template refuses this conversation; \
                     --chat-template renders with another)",
                    inputs_named(&cmd),
                    chain.join(": ")
                ))
            } else {
                e.downcast_ref::<ExistsError>()
                    .map(|x| format!("gyre: {x}"))
            };
            match plain {
                Some(text) => {
                    for line in text.lines() {
                        say(&sanitize(line));
                    }
                    Ok(ExitCode::from(2))
                }
                None => Err(e),
            }
        }
    }
}

/// Checks `--out` before any work: its folder exists, it is not a folder, it does not exist
/// unless `--force`.
fn check_out(out: &Path, force: bool) -> Result<()> {
    if out == Path::new("-") {
        return Ok(());
    }
    if out.is_dir() {
        return Err(UsageError(format!(
            "--out {}: is a directory; name a file in it",
            out.display()
        ))
        .into());
    }
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(UsageError(format!(
            "--out {}: no such directory {}",
            out.display(),
            dir.display()
        ))
        .into());
    }
    if out.exists() && !force {
        return Err(ExistsError(out.to_path_buf()).into());
    }
    Ok(())
}

fn run_inner(cmd: &ImportCommand) -> Result<()> {
    let source = importer(cmd.source).expect("parsed from the registry");
    let c = &cmd.common;
    let opts = Options {
        tokenizer: c.tokenizer.clone(),
        chat_template: c.chat_template.clone(),
        restore: !cmd.reconstruct.as_ref().is_some_and(|r| r.no_restore),
        score: cmd.reconstruct.as_ref().and_then(|r| r.score),
        lenient: c.lenient,
    };
    if opts.score.is_some_and(|s| !s.is_finite()) {
        return Err(UsageError("--score must be a finite number".into()).into());
    }
    check_out(&c.out, c.force)?;
    // Opened before the inputs are sniffed, which may block (a FIFO): a signal meanwhile still
    // finds the temporary file to remove.
    let sink = Sink::open(&c.out, c.force)?;
    gyre_import::check_inputs(source, &c.inputs)?;
    let (tok, tmpl, tokenizer) = load_tokenizer(&opts).map_err(|e| {
        UsageError(format!(
            "--tokenizer {}: {}",
            sanitize(&opts.tokenizer),
            sanitize(&format!("{e:#}"))
        ))
    })?;
    let mut builder = Builder::new(tok, tmpl)?;
    let total: u64 = c
        .inputs
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let bar = (io::stderr().is_terminal() && total > (1 << 20)).then(|| {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} {bar:40} {pos}/{len} eta {eta}")
                .expect("static template"),
        );
        pb
    });
    let mut progress = |p: Progress| {
        if let Some(pb) = &bar {
            match p {
                Progress::Reading { done, total } => {
                    pb.set_message("reading (bytes)");
                    pb.set_length(total);
                    pb.set_position(done);
                }
                Progress::Requests { done, total } => {
                    pb.set_message("requests");
                    pb.set_length(total as u64);
                    pb.set_position(done as u64);
                }
            }
        }
    };
    let result = gyre_import::import(
        source,
        &c.inputs,
        &opts,
        &mut builder,
        &tokenizer,
        sink,
        &mut progress,
    );
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    let summary = result?;
    // What a trainer dump's import inferred (the header's `trainer.inferred`).
    let inferred = source
        .trainer(&c.inputs)
        .ok()
        .flatten()
        .map(|t| t.inferred)
        .unwrap_or_default();
    report(source, &summary, &inferred, &c.out);
    Ok(())
}

/// One line on stderr; a closed stderr (`2>&1 | head -1`) is not an error.
fn say(line: &str) {
    let _ = writeln!(io::stderr(), "{line}");
}

fn report(source: &dyn Source, s: &Summary, inferred: &[String], out: &Path) {
    for w in &s.warnings {
        say(&format!("warning: {}", sanitize(w)));
    }
    let more = s.warning_count.saturating_sub(s.warnings.len() as u64);
    if more > 0 {
        say(&format!("warning: … and {more} more"));
    }
    for i in inferred {
        say(&format!("gyre: inferred: {}", sanitize(i)));
    }
    if s.skipped > 0 {
        say(&format!(
            "gyre: --lenient skipped {}",
            plural(s.skipped as usize, "line")
        ));
    }
    let delta = if s.delta_requests > 0 {
        format!(
            " ({} in delta form: {} input tokens written)",
            plural(s.delta_requests as usize, "request"),
            s.written_input_tokens
        )
    } else {
        String::new()
    };
    let untrained: String = s
        .not_trainable
        .iter()
        .map(|(why, n)| {
            format!(
                ", {} of {} outputs not trainable ({})",
                n,
                s.requests,
                sanitize(why)
            )
        })
        .collect();
    let trained = if s.samples > 0 {
        format!(
            ", {} ({} mask-on tokens: {} with a behaviour log-prob, {} with the trainer's)",
            plural(s.samples as usize, "trained sample"),
            s.trained_tokens,
            s.behaviour_logprobs,
            s.trainer_logprobs
        )
    } else {
        String::new()
    };
    say(&format!(
        "gyre: imported {}: {}, {}, {} input + {} output tokens{delta}{untrained}{trained}, {}{}",
        source.about().name,
        plural(s.executions as usize, "execution"),
        plural(s.requests as usize, "request"),
        s.input_tokens,
        s.output_tokens,
        plural(s.lines as usize, "line"),
        if out == Path::new("-") {
            String::new()
        } else {
            format!(" → {}", sanitize(&out.display().to_string()))
        }
    ));
}
