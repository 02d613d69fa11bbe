//! `gyre import`: gyre/1 records from the logs real harnesses write (docs/import.md).
//!
//! Every source is one [`Importer`] ([`IMPORTERS`] lists them):
//! - `claude_code`: a Claude Code session (`~/.claude/projects/<project>/<session>.jsonl`,
//!   its `subagents/` files, compaction and sub-agents);
//! - `swe_agent`: a SWE-agent `.traj` trajectory (1.x, and 0.x / EnIGMA);
//! - `mini_swe_agent`: a mini-swe-agent `.traj.json` trajectory;
//! - `openhands`: an OpenHands event stream, session `events/` folder or evaluation
//!   `output.jsonl`;
//! - `codex`: a Codex CLI rollout (`rollout-*.jsonl`);
//! - `inspect`: an Inspect AI log (`.json` or `.eval`), one execution per sample;
//! - `vllm`: logged OpenAI-compatible traffic with the token ids and log-probs vLLM returns:
//!   exact records, not reconstructed;
//! - `atif`: a Harbor / Terminus-Bench ATIF trajectory (`trajectory.json`) with its sub-agents:
//!   exact when its steps hold their token ids and log-probs, reconstructed when not;
//! - `verl`: a verl `rollout_data_dir` dump (decoded text only): reconstructed;
//! - `prime-rl`: a prime-rl run's rollouts (verifiers v1 Episodes) and token exports: exact
//!   requests and one `trained` record per branch prime-rl trained ([`dump`]);
//! - `slime`, `skyrl`: what those trainers dumped (torch archives, pickles, read by
//!   [`pickle`] without Python): exact requests plus one `trained` record per training
//!   sample ([`dump`]).
//! - `nemo-rl`: a NeMo-RL training dump (`train_data_step{N}.jsonl`): exact requests and the
//!   trainer's rows as `trained` records.
//!
//! The harness logs (all of the above but `vllm`, ATIF with ids and the trainers' dumps) have no
//! token ids: their records are rebuilt by rendering the
//! conversation through the tokenizer's chat template ([`convo`]), have no log-probs, and are
//! marked `meta.reconstructed: true` (header and every request). By default a later context
//! reuses the recorded output tokens of the earlier responses it contains (payload
//! restoration); `restore: false` re-renders history instead.
//!
//! An import checks what its inputs look like first (`sniff`), reads them into typed values
//! (field paths in every error), and writes through the engine's validating recorder
//! ([`write`](mod@write)), so its output always loads.

mod atif;
mod claude_code;
mod codex;
pub mod convo;
pub mod dump;
pub mod error;
pub mod input;
mod inspect;
mod mini_swe_agent;
mod nemo_rl;
mod openai;
mod openhands;
pub mod pickle;
mod prime_rl;
mod session;
mod skyrl;
mod slime;
mod sniff;
mod swe_agent;
mod timestamp;
mod verl;
mod vllm;
pub mod write;

use std::path::{Path, PathBuf};

use eyre::Result;
use serde_json::{Map, Value, json};

pub use timestamp::parse_timestamp;

use convo::Builder;
use error::{Log, bad};
use sniff::{Fit, Probe};
use write::{Out, Sink, Trainer};

use gyre_text::{ChatTemplate, ModelAssets, TokenText};

/// Options shared by the importers.
#[derive(Clone, Debug)]
pub struct Options {
    /// Tokenizer: a bundled name (`qwen3`), a model directory, or a `tokenizer.json` (or `.gz`)
    /// path; its chat template is found beside it (see [`ModelAssets::load`]).
    pub tokenizer: String,
    /// A chat template file overriding the one beside the tokenizer (`--chat-template`).
    pub chat_template: Option<PathBuf>,
    /// Payload restoration (default on).
    pub restore: bool,
    /// Adds a valid assessment of the closure's artifact with this score.
    pub score: Option<f64>,
    /// Skip lines (events, history entries) that cannot be read, with a warning, instead of
    /// failing.
    pub lenient: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            tokenizer: "qwen3".into(),
            chat_template: None,
            restore: true,
            score: None,
            lenient: false,
        }
    }
}

/// What an import wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Executions.
    pub executions: u64,
    /// Request records.
    pub requests: u64,
    /// Requests written in delta form (`extends`).
    pub delta_requests: u64,
    /// Σ full input lengths.
    pub input_tokens: u64,
    /// Σ output lengths.
    pub output_tokens: u64,
    /// Input tokens actually written (delta encoding writes only the new ones).
    pub written_input_tokens: u64,
    /// Lines written.
    pub lines: u64,
    /// Requests written with `not_trainable`, by reason (hidden thinking: the policy wrote
    /// them, but the log does not hold all of their output).
    pub not_trainable: std::collections::BTreeMap<String, u64>,
    /// Non-fatal remarks (missing sub-agent logs, skipped events…), the first few.
    pub warnings: Vec<String>,
    /// How many remarks there were.
    pub warning_count: u64,
    /// Lines or elements skipped under `--lenient`.
    pub skipped: u64,
    /// `trained` records written (docs/format.md §9).
    pub samples: u64,
    /// Σ of their mask-on tokens.
    pub trained_tokens: u64,
    /// Σ of their auxiliary-mask tokens.
    pub aux_tokens: u64,
    /// Mask-on tokens with a behaviour log-prob.
    pub behaviour_logprobs: u64,
    /// Mask-on tokens with a trainer log-prob.
    pub trainer_logprobs: u64,
}

/// Progress of an import, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Bytes of input read.
    Reading {
        /// Done.
        done: u64,
        /// Total.
        total: u64,
    },
    /// Requests written (of one session).
    Requests {
        /// Done.
        done: usize,
        /// Total.
        total: usize,
    },
}

/// How a source appears on the command line and in messages.
#[derive(Debug)]
pub struct About {
    /// Subcommand name (`claude-code`).
    pub name: &'static str,
    /// The format in words (`a Claude Code session`).
    pub what: &'static str,
    /// One-line description (`gyre import --help`).
    pub summary: &'static str,
    /// Name of the input argument (`SESSION.jsonl`).
    pub input: &'static str,
    /// Help of the input argument.
    pub input_help: &'static str,
    /// Whether several inputs are read in order.
    pub many: bool,
    /// Whether an input may be a directory.
    pub directories: bool,
    /// Whether the records are reconstructed from text (`--score`, `--no-restore` apply).
    pub reconstructed: bool,
    /// Examples and notes after the options in `--help`.
    pub help: &'static str,
}

/// Everything an importer works with: options, the renderer, the output, warnings and problems,
/// progress.
pub struct Job<'a> {
    /// The options.
    pub opts: &'a Options,
    /// Renders conversations into tokens.
    pub builder: &'a mut Builder,
    /// The validating output.
    pub out: Out,
    /// Problems and warnings.
    pub log: Log,
    /// Progress callback.
    pub progress: &'a mut dyn FnMut(Progress),
}

/// One log format. A new source is one file implementing this, listed in [`IMPORTERS`].
pub trait Importer: Sync {
    /// What one read yields and [`records`](Self::records) writes: a reconstructed session,
    /// or a line of exact traffic.
    type Item;

    /// Name, help and properties.
    fn about(&self) -> &'static About;

    /// Whether the start of an input is this format.
    fn sniff(&self, probe: &Probe) -> Fit;

    /// Every file an import of `inputs` reads (a Claude Code session has files beside it).
    fn files(&self, inputs: &[PathBuf]) -> Vec<PathBuf> {
        inputs.to_vec()
    }

    /// The header's `meta` for an import of `inputs` (a source that is exact or reconstructed
    /// depending on its input says which).
    fn header_meta(&self, opts: &Options, inputs: &[PathBuf]) -> Map<String, Value> {
        default_header_meta(self.about(), opts, &self.files(inputs))
    }

    /// Reads the inputs, handing each item to `emit` as soon as it is read (streaming sources
    /// never hold the whole input). Per-line problems go to `job.log`.
    fn read(
        &self,
        inputs: &[PathBuf],
        job: &mut Job,
        emit: &mut dyn FnMut(&mut Job, Self::Item) -> Result<()>,
    ) -> Result<()>;

    /// Writes one item's records to `job.out`.
    fn records(&self, item: Self::Item, job: &mut Job) -> Result<()>;

    /// For a trainer's dump: what the header says wrote its `trained` records (name,
    /// version, loss aggregation, what the import infers), read from `inputs` where the dump
    /// records it (docs/format.md §9). `None` for harness logs.
    fn trainer(&self, inputs: &[PathBuf]) -> Result<Option<Trainer>> {
        let _ = inputs;
        Ok(None)
    }
}

/// An [`Importer`] behind a reference: what the command line and [`import`] work with.
pub trait Source: Sync {
    /// Name, help and properties.
    fn about(&self) -> &'static About;
    /// Whether the start of an input is this format.
    fn sniff(&self, probe: &Probe) -> Fit;
    /// Every file an import of `inputs` reads.
    fn files(&self, inputs: &[PathBuf]) -> Vec<PathBuf>;
    /// The header's `meta` for an import of `inputs`.
    fn header_meta(&self, opts: &Options, inputs: &[PathBuf]) -> Map<String, Value>;
    /// Reads the inputs and writes their records.
    fn run(&self, inputs: &[PathBuf], job: &mut Job) -> Result<()>;
    /// What wrote a trainer's dump (see [`Importer::trainer`]).
    fn trainer(&self, inputs: &[PathBuf]) -> Result<Option<Trainer>>;
}

impl<T: Importer> Source for T {
    fn about(&self) -> &'static About {
        Importer::about(self)
    }

    fn sniff(&self, probe: &Probe) -> Fit {
        Importer::sniff(self, probe)
    }

    fn files(&self, inputs: &[PathBuf]) -> Vec<PathBuf> {
        Importer::files(self, inputs)
    }

    fn header_meta(&self, opts: &Options, inputs: &[PathBuf]) -> Map<String, Value> {
        Importer::header_meta(self, opts, inputs)
    }

    fn run(&self, inputs: &[PathBuf], job: &mut Job) -> Result<()> {
        self.read(inputs, job, &mut |job, item| self.records(item, job))
    }

    fn trainer(&self, inputs: &[PathBuf]) -> Result<Option<Trainer>> {
        Importer::trainer(self, inputs)
    }
}

/// Every source, in `gyre import --help` order.
pub static IMPORTERS: [&dyn Source; 13] = [
    &claude_code::ClaudeCode,
    &swe_agent::SweAgent,
    &mini_swe_agent::MiniSweAgent,
    &codex::Codex,
    &openhands::Openhands,
    &inspect::Inspect,
    &vllm::Vllm,
    &atif::Atif,
    &verl::Verl,
    &prime_rl::PrimeRl,
    &slime::Slime,
    &skyrl::Skyrl,
    &nemo_rl::NemoRl,
];

/// The source named `name` on the command line.
pub fn importer(name: &str) -> Option<&'static dyn Source> {
    IMPORTERS.iter().copied().find(|i| i.about().name == name)
}

/// The tokenizer and chat template of `opts` (see [`ModelAssets::load`]), and the header's
/// `tokenizer` value (the bundled name, or the tokenizer file's absolute path).
pub fn load_tokenizer(opts: &Options) -> Result<(TokenText, ChatTemplate, Value)> {
    let assets = ModelAssets::load(&opts.tokenizer, opts.chat_template.as_deref())?;
    let header = match &assets.tokenizer_file {
        Some(file) => json!({ "path": file.to_string_lossy() }),
        None => Value::String(opts.tokenizer.clone()),
    };
    Ok((assets.tokenizer, assets.template, header))
}

/// Checks that every input is something `source` reads, before any work: an input that is
/// missing, of the wrong kind or in another format is refused with what it looks like.
pub fn check_inputs(source: &dyn Source, inputs: &[PathBuf]) -> Result<()> {
    let about = source.about();
    for path in inputs {
        if !path.exists() {
            return Err(bad(path, 0, "no such file or directory", None));
        }
        if let Some(kind) = special_file(path) {
            return Err(bad(
                path,
                0,
                format!(
                    "is {kind}, not a file: an import reads its input more than once (to \
                     recognise it, then to read it); write it to a file first (.gz and .zst \
                     files are read as they are)"
                ),
                None,
            ));
        }
        if path.is_dir() && !about.directories {
            return Err(bad(
                path,
                0,
                format!("is a directory, not {}", about.what),
                None,
            ));
        }
        let probe = Probe::of(path);
        if source.sniff(&probe) == Fit::No {
            let others: Vec<&str> = IMPORTERS
                .iter()
                .filter(|i| i.about().name != about.name && i.sniff(&probe) == Fit::Yes)
                .map(|i| i.about().name)
                .collect();
            return Err(bad(
                path,
                0,
                format!("not {}: this is {}", about.what, probe.describe(&others)),
                None,
            ));
        }
    }
    Ok(())
}

/// What `path` is when it is neither a regular file nor a folder (a pipe such as `<(zcat …)`,
/// a FIFO, a device, a socket): reading one would consume it or block.
fn special_file(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let kind = std::fs::metadata(path).ok()?.file_type();
    Some(if kind.is_fifo() {
        "a pipe (FIFO)"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        return None;
    })
}

/// Header metadata of an import of `inputs` by `source`.
pub fn header_meta(source: &dyn Source, opts: &Options, inputs: &[PathBuf]) -> Map<String, Value> {
    source.header_meta(opts, inputs)
}

/// The header metadata of a source that is always reconstructed or always exact (as
/// [`About::reconstructed`] says), naming `files`.
pub fn default_header_meta(about: &About, opts: &Options, files: &[PathBuf]) -> Map<String, Value> {
    let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    if about.reconstructed {
        session::header_meta(about.name, opts.restore, &names)
    } else {
        exact_header_meta(about.name, &names)
    }
}

/// The header metadata of an import whose records are exact (not reconstructed).
pub fn exact_header_meta(source: &str, names: &[String]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("source".into(), json!(source));
    m.insert("reconstructed".into(), Value::Bool(false));
    m.insert(
        "importer".into(),
        json!(format!(
            "gyre {} import {source}",
            env!("CARGO_PKG_VERSION")
        )),
    );
    m.insert("inputs".into(), json!(names));
    m
}

/// Imports `inputs` with `source` into `sink`: checks the inputs, writes a header naming
/// `tokenizer`, every record (each validated), and renames the output into place only when
/// all went well. An input with nothing to import is refused.
pub fn import(
    source: &dyn Source,
    inputs: &[PathBuf],
    opts: &Options,
    builder: &mut Builder,
    tokenizer: &Value,
    sink: Sink,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary> {
    check_inputs(source, inputs)?;
    let trainer = source.trainer(inputs)?;
    let out = Out::new(
        sink,
        tokenizer,
        &header_meta(source, opts, inputs),
        trainer.as_ref(),
    )?;
    let mut job = Job {
        opts,
        builder,
        out,
        log: Log::new(opts.lenient),
        progress,
    };
    source.run(inputs, &mut job)?;
    job.log.check()?;
    if job.out.summary().requests == 0 {
        return Err(nothing_to_import(source, inputs, &job.log));
    }
    let (warnings, warning_count) = job.log.warnings();
    let skipped = job.log.skipped();
    let (sink, mut summary) = job.out.finish()?;
    sink.finish()?;
    summary.warnings = warnings;
    summary.warning_count = warning_count;
    summary.skipped = skipped;
    Ok(summary)
}

fn nothing_to_import(source: &dyn Source, inputs: &[PathBuf], log: &Log) -> eyre::Report {
    let about = source.about();
    let path: &Path = inputs.first().map_or(Path::new("-"), PathBuf::as_path);
    let skipped = match log.skipped() {
        0 => String::new(),
        n => format!(
            " (--lenient skipped {})",
            gyre_engine::report::plural(n as usize, "line")
        ),
    };
    bad(
        path,
        0,
        format!(
            "nothing to import: no model calls in {}{skipped}; this is {}",
            about.what,
            Probe::of(path).describe(&[])
        ),
        None,
    )
}
