//! Arguments and helpers shared by the subcommands: inputs, admission settings, loading with a
//! progress bar, finding an execution, exit codes.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use color_eyre::eyre::Result;
use indicatif::{ProgressBar, ProgressStyle};

use crate::engine::admit::{self, Class, Settings};
use crate::engine::load::{self, Batch, LoadOptions};
use crate::engine::score::AdvantageMode;
use crate::report::plural;

/// Exit code for invalid input or usage.
pub const EXIT_INVALID: u8 = 2;

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

/// Admission settings (SPEC §5).
#[derive(Args, Debug)]
pub struct AdmissionArgs {
    /// Seed of the draws (each execution's draws depend only on it and the execution).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Maximum draws per execution; 0 = uncapped.
    #[arg(long, default_value_t = 5)]
    pub jmax: u32,
    /// Class priority, highest first; classes left out are never drawn.
    #[arg(long, default_value = "main,main-summary,sub,sub-summary", value_parser = parse_priority)]
    pub priority: Priority,
}

/// A whole `--priority` list (one argument, comma-separated).
#[derive(Clone, Debug)]
pub struct Priority(pub Vec<Class>);

fn parse_priority(s: &str) -> Result<Priority, String> {
    admit::parse_priority(s).map(Priority)
}

impl AdmissionArgs {
    /// The engine's settings.
    pub fn settings(&self) -> Settings {
        Settings {
            seed: self.seed,
            jmax: self.jmax,
            priority: self.priority.0.clone(),
        }
    }
}

/// `--advantage`.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum AdvantageArg {
    /// reward − group mean (Dr. GRPO).
    Drgrpo,
    /// (reward − mean) / (std + 1e-6).
    Grpo,
    /// No advantage field.
    None,
}

impl From<AdvantageArg> for AdvantageMode {
    fn from(a: AdvantageArg) -> Self {
        match a {
            AdvantageArg::Drgrpo => AdvantageMode::DrGrpo,
            AdvantageArg::Grpo => AdvantageMode::Grpo,
            AdvantageArg::None => AdvantageMode::None,
        }
    }
}

/// Whether to write colour: stdout is a terminal and `NO_COLOR` is unset or empty.
pub fn color_wanted() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn print_warnings(batch: &Batch) {
    const SHOWN: usize = 10;
    for w in batch.warnings.iter().take(SHOWN) {
        eprintln!("warning: {w}");
    }
    if batch.warnings.len() > SHOWN {
        eprintln!("warning: … and {} more", batch.warnings.len() - SHOWN);
    }
    if batch.skipped_lines > 0 {
        eprintln!(
            "gyre: --lenient skipped {}",
            plural(batch.skipped_lines as usize, "line")
        );
    }
}

/// Loads with a progress bar on stderr when it is a terminal and the input is large.
pub fn load_with_progress(input: &InputArgs) -> Result<Batch> {
    let options = LoadOptions {
        lenient: input.lenient,
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

/// The execution called `id`, or a message naming some that exist (exit 2).
pub fn find_execution(batch: &Batch, id: &str) -> std::result::Result<usize, ExitCode> {
    batch.execution_index(id).ok_or_else(|| {
        let known: Vec<_> = batch
            .executions
            .iter()
            .take(8)
            .map(|e| e.id.as_str())
            .collect();
        eprintln!(
            "gyre: no execution {id:?} in the input (first ids: {})",
            known.join(", ")
        );
        ExitCode::from(EXIT_INVALID)
    })
}
