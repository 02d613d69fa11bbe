//! The command line: a thin client of [`crate::engine`].

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use color_eyre::eyre::{Result, WrapErr};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::engine::admit::{self, Class, Settings, Stop};
use crate::engine::export;
use crate::engine::load::{self, Batch, LoadError, LoadOptions};
use crate::engine::score::{self, AdvantageMode, Outcome};
use crate::engine::stats;
use crate::engine::{self as eng, Results};
use crate::paint::{ColorMode, ExecView, PathView};
use crate::show::{self, ShowOptions};
use crate::synth::{self, SynthOptions};
use crate::text::TokenText;

const AFTER_HELP: &str = "\
Examples:
  gyre                                   # the bundled demo: stats and every draw
  gyre stats runs/*.jsonl.zst            # what is in a recording
  gyre admit runs.jsonl --out admitted.jsonl
  gyre replay runs.jsonl --execution e7  # why these leaves were drawn
  gyre validate runs.jsonl               # every problem, with file:line
  gyre show runs.jsonl --execution e7 --color claims
  gyre synth --out demo.jsonl            # a simulated harness recording

Format: gyre/1 records (docs/format.md). Exit codes: 0 ok, 2 invalid input or usage, 1 other.";

/// gyre: which tokens your policy is trained on, and why.
#[derive(Parser, Debug)]
#[command(name = "gyre", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Admit trajectories and export them as gyre/admitted-1 JSONL.
    #[command(after_help = "\
Examples:
  gyre admit runs.jsonl > admitted.jsonl
  gyre admit a.jsonl b.jsonl.gz --seed 7 --jmax 0 --out admitted.jsonl
  gyre admit runs.jsonl --priority main,sub --advantage grpo --out admitted.jsonl --force

One line per admitted trajectory, in execution order then draw order (docs/format.md).
The file is written atomically: on any error no file (or the old one) is left.")]
    Admit {
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        admission: AdmissionArgs,
        /// Advantage within GRPO groups: drgrpo (reward − mean), grpo (÷ std + 1e-6), none.
        #[arg(long, value_enum, default_value_t = AdvantageArg::Drgrpo)]
        advantage: AdvantageArg,
        /// Write here instead of stdout.
        #[arg(long, short)]
        out: Option<PathBuf>,
        /// Overwrite --out if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Counts: executions, requests, tokens (raw vs tree), candidates, targets.
    #[command(after_help = "\
Examples:
  gyre stats runs.jsonl
  gyre stats runs.jsonl --json | jq .dedup_ratio
  gyre stats runs.jsonl --jmax 0 --json   # targets when every candidate may be drawn")]
    Stats {
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        admission: AdmissionArgs,
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Check recordings; print every problem as file:line and exit 2 if there is any.
    #[command(after_help = "\
Examples:
  gyre validate runs.jsonl
  gyre validate part-*.jsonl.gz && gyre admit part-*.jsonl.gz --out admitted.jsonl")]
    Validate {
        /// gyre/1 files (.jsonl, .jsonl.gz, .jsonl.zst), read in order.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// The draw log of one execution: every draw's class, candidates, weights, choice, targets.
    #[command(after_help = "\
Examples:
  gyre replay runs.jsonl --execution e7
  gyre replay runs.jsonl --execution e7 --seed 3 --jmax 0
  gyre replay runs.jsonl --execution e7 --json | jq '.draws[].chosen'")]
    Replay {
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        admission: AdmissionArgs,
        /// Execution id.
        #[arg(long, short)]
        execution: String,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a path as text, every token coloured by provenance, claim state or log-prob.
    #[command(after_help = "\
Examples:
  gyre show runs.jsonl --execution e7                      # the first drawn leaf, by provenance
  gyre show runs.jsonl --execution e7 --color claims --draw 2
  gyre show runs.jsonl --execution e7 --request r19 --color logprob --boundaries
  gyre show runs.jsonl --execution e7 --runs | grep context:tool   # is tool output trained on?

Colour is on when stdout is a terminal and NO_COLOR is unset; otherwise plain text.")]
    Show {
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        admission: AdmissionArgs,
        /// Execution id.
        #[arg(long, short)]
        execution: String,
        /// Request whose path to print (default: the leaf of the first draw, else the dummy's
        /// placeholder, else the last request).
        #[arg(long, short)]
        request: Option<String>,
        /// What colours the tokens.
        #[arg(long, value_enum, default_value_t = ColorArg::Provenance)]
        color: ColorArg,
        /// Show claim state as of draw K (its targets highlighted) instead of after all draws.
        #[arg(long, value_name = "K")]
        draw: Option<u32>,
        /// Mark token boundaries with │.
        #[arg(long)]
        boundaries: bool,
        /// One line per run of tokens sharing a reason: position, length, reason, text.
        #[arg(long)]
        runs: bool,
        /// Tokenizer: a bundled name (qwen3) or a tokenizer.json path (default: the header's).
        #[arg(long, value_name = "NAME|PATH")]
        tokenizer: Option<String>,
    },
    /// Write a simulated Claude-Code-style recording (gyre/1, Qwen3 tokens).
    #[command(after_help = "\
Examples:
  gyre synth --out demo.jsonl                              # 24 executions, ~12 turns each
  gyre synth --out big.jsonl.zst --executions 2000 --turns 40 --context 16000
  gyre synth --out delta.jsonl --delta --seed 7            # `extends` delta encoding

Same options and seed give the same bytes. .gz and .zst outputs are compressed.")]
    Synth {
        /// Output file (.jsonl, .jsonl.gz or .jsonl.zst).
        #[arg(long, short)]
        out: PathBuf,
        /// Executions (GRPO groups of 4 share a task).
        #[arg(long, default_value_t = 24)]
        executions: usize,
        /// Main-agent steps per execution.
        #[arg(long, default_value_t = 12)]
        turns: usize,
        /// Compaction threshold in tokens.
        #[arg(long, default_value_t = 6000)]
        context: usize,
        /// Seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write delta (`extends`) encodings.
        #[arg(long)]
        delta: bool,
        /// Overwrite --out if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Open the interactive inspector on recordings (`gyre` alone opens it on the bundled demo).
    #[command(after_help = "\
Examples:
  gyre inspect runs.jsonl
  gyre inspect a.jsonl b.jsonl.zst --seed 3 --jmax 0 --tokenizer qwen3
  gyre inspect --demo claude-code        # a real Claude Code session, imported

Keys: ? help, q quit (docs/keys.md lists them all).")]
    Inspect {
        /// gyre/1 files (.jsonl, .jsonl.gz, .jsonl.zst), read in order.
        #[arg(required_unless_present = "demo")]
        files: Vec<PathBuf>,
        /// Open a bundled recording instead of files.
        #[arg(long, value_enum, conflicts_with = "files")]
        demo: Option<crate::demo::Demo>,
        /// Skip invalid lines (counted, reported as warnings) instead of failing.
        #[arg(long)]
        lenient: bool,
        #[command(flatten)]
        admission: AdmissionArgs,
        /// Tokenizer: a bundled name (qwen3) or a tokenizer.json path (default: the header's).
        #[arg(long, value_name = "NAME|PATH")]
        tokenizer: Option<String>,
    },
    /// Turn harness logs (Claude Code, SWE-agent, OpenHands, vLLM) into gyre/1 records.
    #[command(after_help = "\
Examples:
  gyre import claude-code SESSION.jsonl --score 1 --out session.jsonl
  gyre import swe-agent run.traj --out run.jsonl
  gyre import openhands events.json --out events.jsonl
  gyre import vllm traffic.jsonl --out runs.jsonl

docs/import.md describes every mapping.")]
    Import {
        #[command(subcommand)]
        source: crate::import::cli::ImportCommand,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ColorArg {
    Provenance,
    Claims,
    Logprob,
}

impl From<ColorArg> for ColorMode {
    fn from(c: ColorArg) -> Self {
        match c {
            ColorArg::Provenance => ColorMode::Provenance,
            ColorArg::Claims => ColorMode::Claims,
            ColorArg::Logprob => ColorMode::Logprob,
        }
    }
}

#[derive(Args, Debug)]
struct InputArgs {
    /// gyre/1 files (.jsonl, .jsonl.gz, .jsonl.zst), read in order.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Skip invalid lines (counted, reported as warnings) instead of failing.
    #[arg(long)]
    lenient: bool,
}

#[derive(Args, Debug)]
struct AdmissionArgs {
    /// Seed of the draws (each execution's draws depend only on it and the execution).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Maximum draws per execution; 0 = uncapped.
    #[arg(long, default_value_t = 5)]
    jmax: u32,
    /// Class priority, highest first; classes left out are never drawn.
    #[arg(long, default_value = "main,main-summary,sub,sub-summary", value_parser = parse_priority)]
    priority: Priority,
}

/// A whole `--priority` list (one argument, comma-separated).
#[derive(Clone, Debug)]
struct Priority(Vec<Class>);

fn parse_priority(s: &str) -> Result<Priority, String> {
    admit::parse_priority(s).map(Priority)
}

impl AdmissionArgs {
    fn settings(&self) -> Settings {
        Settings {
            seed: self.seed,
            jmax: self.jmax,
            priority: self.priority.0.clone(),
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum AdvantageArg {
    Drgrpo,
    Grpo,
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

/// Exit code for invalid input or usage.
const EXIT_INVALID: u8 = 2;

/// Entry point of the `gyre` binary.
pub fn main() -> ExitCode {
    if let Err(e) = color_eyre::install() {
        eprintln!("gyre: {e}");
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if let Some(le) = e.downcast_ref::<LoadError>() {
                eprintln!("{le}");
                return ExitCode::from(EXIT_INVALID);
            }
            if let Some(ex) = e.downcast_ref::<crate::output::ExistsError>() {
                eprintln!("gyre: {ex}");
                return ExitCode::from(EXIT_INVALID);
            }
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("gyre: {e:?}");
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(e: &color_eyre::Report) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        // The inspector when a person is watching; the text demo for scripts and CI.
        None if io::stdout().is_terminal() && io::stdin().is_terminal() => {
            crate::tui::run(crate::tui::Options {
                input: crate::tui::Input::Demo(crate::demo::Demo::default()),
                settings: Settings::default(),
                lenient: false,
                tokenizer: None,
            })
        }
        None => demo(),
        Some(Command::Inspect {
            files,
            demo,
            lenient,
            admission,
            tokenizer,
        }) => crate::tui::run(crate::tui::Options {
            input: match demo {
                Some(d) => crate::tui::Input::Demo(d),
                None => crate::tui::Input::Files(files),
            },
            settings: admission.settings(),
            lenient,
            tokenizer,
        }),
        Some(Command::Import { source }) => import(source),
        Some(Command::Validate { files }) => validate(&files),
        Some(Command::Admit {
            input,
            admission,
            advantage,
            out,
            force,
        }) => {
            // Opened first: an existing file is refused before the work, not after it.
            let sink = out
                .as_deref()
                .map(|path| crate::output::Sink::open(path, force))
                .transpose()?;
            let batch = load_with_progress(&input)?;
            let results = eng::process(&batch, &admission.settings(), advantage.into());
            match (sink, out) {
                (Some(mut sink), Some(path)) => {
                    let rows = export::write_rows(&batch, &results, &mut sink)
                        .wrap_err_with(|| format!("writing {}", path.display()))?;
                    sink.finish()?;
                    eprintln!(
                        "gyre: wrote {rows} rows ({} executions, B = {}) to {}",
                        batch.executions.len(),
                        results.batch_executions,
                        path.display()
                    );
                }
                _ => {
                    let stdout = io::stdout().lock();
                    let mut w = io::BufWriter::with_capacity(1 << 20, stdout);
                    export::write_rows(&batch, &results, &mut w)
                        .wrap_err("writing rows to stdout")?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Stats {
            input,
            admission,
            json,
        }) => {
            let batch = load_with_progress(&input)?;
            let results = eng::process(&batch, &admission.settings(), AdvantageMode::None);
            let s = stats::stats(&batch, &results);
            let mut out = io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &s)?;
                writeln!(out)?;
            } else {
                write!(out, "{}", stats_table(&s, &results.settings))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Show {
            input,
            admission,
            execution,
            request,
            color,
            draw,
            boundaries,
            runs,
            tokenizer,
        }) => show(
            &input,
            &admission,
            &execution,
            request.as_deref(),
            color.into(),
            draw,
            boundaries,
            runs,
            tokenizer.as_deref(),
        ),
        Some(Command::Synth {
            out,
            executions,
            turns,
            context,
            seed,
            delta,
            force,
        }) => synth(
            &SynthOptions {
                executions,
                turns,
                context,
                seed,
                delta,
            },
            &out,
            force,
        ),
        Some(Command::Replay {
            input,
            admission,
            execution,
            json,
        }) => {
            let batch = load_with_progress(&input)?;
            let i = match find_execution(&batch, &execution) {
                Ok(i) => i,
                Err(code) => return Ok(code),
            };
            let results = eng::process(&batch, &admission.settings(), AdvantageMode::DrGrpo);
            let mut out = io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &replay_json(&batch, &results, i))?;
                writeln!(out)?;
            } else {
                write!(out, "{}", replay_text(&batch, &results, i))?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The tokenizer for display: `--tokenizer`, else the recording header's, else ids as `⟨id⟩`.
pub fn token_text(arg: Option<&str>, batch: &Batch) -> Result<TokenText> {
    if let Some(arg) = arg {
        return TokenText::from_arg(arg, Path::new("."))
            .wrap_err_with(|| format!("loading tokenizer {arg:?}"));
    }
    match batch.tokenizer_spec() {
        Some((spec, file)) => {
            let dir = file.parent().unwrap_or(Path::new("."));
            TokenText::from_header(spec, dir)
                .wrap_err_with(|| format!("loading the tokenizer named in {}", file.display()))
        }
        None => Ok(TokenText::none()),
    }
}

/// Whether to write colour: stdout is a terminal and `NO_COLOR` is unset or empty.
pub fn color_wanted() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The path `gyre show` prints by default for execution `i`.
fn default_path_request(batch: &Batch, results: &Results, i: usize) -> Option<u32> {
    let exec = &batch.executions[i];
    results.admissions[i]
        .draws
        .first()
        .map(|d| d.chosen)
        .or_else(|| export::dummy_leaf(exec))
        .or_else(|| exec.requests.len().checked_sub(1).map(|r| r as u32))
}

#[allow(clippy::too_many_arguments)]
fn show(
    input: &InputArgs,
    admission: &AdmissionArgs,
    execution: &str,
    request: Option<&str>,
    mode: ColorMode,
    draw: Option<u32>,
    boundaries: bool,
    runs: bool,
    tokenizer: Option<&str>,
) -> Result<ExitCode> {
    let batch = load_with_progress(input)?;
    let i = match find_execution(&batch, execution) {
        Ok(i) => i,
        Err(code) => return Ok(code),
    };
    let results = eng::process(&batch, &admission.settings(), AdvantageMode::DrGrpo);
    let exec = &batch.executions[i];
    let req = match request {
        Some(id) => match exec.request_index(id) {
            Some(r) => r,
            None => {
                eprintln!("gyre: execution {execution:?} has no request {id:?}");
                return Ok(ExitCode::from(EXIT_INVALID));
            }
        },
        None => match default_path_request(&batch, &results, i) {
            Some(r) => r,
            None => {
                eprintln!("gyre: execution {execution:?} has no requests");
                return Ok(ExitCode::from(EXIT_INVALID));
            }
        },
    };
    let draws = results.admissions[i].draws.len() as u32;
    if let Some(k) = draw {
        if k == 0 || k > draws {
            eprintln!("gyre: --draw {k} is outside 1..={draws} for execution {execution:?}");
            return Ok(ExitCode::from(EXIT_INVALID));
        }
    }
    let text = token_text(tokenizer, &batch)?;
    let view = ExecView::new(exec, &results, i);
    let path = PathView::new(exec, req);
    let r = &exec.requests[req as usize];
    let color = color_wanted();
    let mut out = io::stdout().lock();
    let role = results.admissions[i]
        .draws
        .iter()
        .position(|d| d.chosen == req)
        .map_or(String::new(), |k| {
            format!(" (leaf of draw {}/{draws})", k + 1)
        });
    writeln!(
        out,
        "{} · path of {}{role} · {} tokens (input {}, output {}) · {} · tokenizer {}",
        exec.id,
        r.id,
        path.len,
        r.input_len,
        r.output_len,
        outcome_text(&results.outcomes[i]),
        text.label()
    )?;
    if runs {
        write!(out, "{}", show::render_runs(&view, &path, &text, draw))?;
    } else {
        writeln!(out, "{}", show::legend(mode, color))?;
        let opts = ShowOptions {
            mode,
            step: draw,
            boundaries,
            color,
        };
        write!(out, "{}", show::render_text(&view, &path, &text, opts))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn synth(options: &SynthOptions, out: &Path, force: bool) -> Result<ExitCode> {
    let mut sink = crate::output::Sink::open(out, force)?;
    let bar = io::stderr().is_terminal().then(|| {
        let pb = ProgressBar::new(options.executions as u64);
        pb.set_style(
            ProgressStyle::with_template("{spinner} synth {bar:40} {pos}/{len} executions {msg}")
                .expect("static template"),
        );
        pb
    });
    let summary = synth::write_synth_with_progress(options, &mut sink, &mut |p| {
        if let Some(pb) = &bar {
            pb.set_position(p.executions_done as u64);
            pb.set_message(format!("{:.1} MB", p.bytes as f64 / 1e6));
        }
    })?;
    sink.finish()?;
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    let fates: Vec<String> = summary
        .fates
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    eprintln!(
        "gyre: wrote {} ({} executions, {} requests, {} lines, {:.1} MB uncompressed; fates: {})",
        out.display(),
        summary.executions,
        summary.requests,
        summary.lines,
        summary.bytes as f64 / 1e6,
        fates.join(", ")
    );
    Ok(ExitCode::SUCCESS)
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
fn load_with_progress(input: &InputArgs) -> Result<Batch> {
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

fn validate(files: &[PathBuf]) -> Result<ExitCode> {
    let result = load::load(files, &LoadOptions::default(), &|_, _| {});
    match result {
        Ok(batch) => {
            for w in &batch.warnings {
                eprintln!("warning: {w}");
            }
            let requests: usize = batch.executions.iter().map(|e| e.requests.len()).sum();
            println!(
                "ok: {}, {}, {}, {}",
                plural(files.len(), "file"),
                plural(batch.executions.len(), "execution"),
                plural(requests, "request"),
                plural(batch.warnings.len(), "warning")
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            for d in &e.diagnostics {
                println!("{d}");
            }
            eprintln!("{}", plural(e.diagnostics.len(), "problem"));
            Ok(ExitCode::from(EXIT_INVALID))
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

fn priority_text(p: &[Class]) -> String {
    p.iter().map(|c| c.name()).collect::<Vec<_>>().join(">")
}

fn jmax_text(jmax: u32) -> String {
    if jmax == 0 {
        "uncapped".into()
    } else {
        jmax.to_string()
    }
}

/// The readable `gyre stats` table.
pub fn stats_table(s: &stats::Stats, settings: &Settings) -> String {
    let mut t = String::new();
    let mut line = |k: &str, v: String| t.push_str(&format!("{k:<24} {v}\n"));
    line("executions", s.executions.to_string());
    let reasons: Vec<String> = s
        .excluded_by_reason
        .iter()
        .map(|(r, n)| format!("{r}: {n}"))
        .collect();
    line(
        "  scored/dummy/excluded",
        format!(
            "{} / {} / {}{}",
            s.scored,
            s.dummy,
            s.excluded,
            if reasons.is_empty() {
                String::new()
            } else {
                format!("  ({})", reasons.join(", "))
            }
        ),
    );
    line(
        "requests",
        format!(
            "{}  (after closure {}, reconstructed {})",
            s.requests, s.requests_after_closure, s.requests_reconstructed
        ),
    );
    line("raw tokens", s.raw_tokens.to_string());
    line(
        "tree tokens",
        format!("{}  (dedup {:.2}×)", s.tree_tokens, s.dedup_ratio),
    );
    let sources: Vec<String> = s
        .tokens_by_source
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    line("  by provenance", sources.join(", "));
    line("policy tokens", s.policy_tokens.to_string());
    let classes: Vec<String> = s
        .candidates_by_class
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    line(
        "candidates",
        format!("{}  ({})", s.candidates, classes.join(", ")),
    );
    line(
        "admission",
        format!(
            "seed {}, J_max {}, priority {}",
            settings.seed,
            jmax_text(settings.jmax),
            priority_text(&settings.priority)
        ),
    );
    line(
        "  draws / rows",
        format!(
            "{} / {}  (J_max reached in {} executions)",
            s.draws, s.rows, s.jmax_reached
        ),
    );
    line(
        "  targets",
        format!("{}  (left out {})", s.targets, s.left_out_tokens),
    );
    line(
        "divergences in outputs",
        s.divergences_in_outputs.to_string(),
    );
    if s.warnings > 0 || s.skipped_lines > 0 {
        line(
            "warnings / skipped",
            format!("{} / {}", s.warnings, s.skipped_lines),
        );
    }
    t
}

fn outcome_text(o: &Outcome) -> String {
    match o {
        Outcome::Scored { reward, .. } => format!("scored, reward {reward}"),
        Outcome::Dummy => "dummy (no assessable work), reward 0".into(),
        Outcome::Excluded(e) => format!("excluded: {e}"),
    }
}

/// Target runs of every draw of execution `i`, merged like the export's `targets`.
fn draw_runs(batch: &Batch, results: &Results, i: usize) -> Vec<Vec<export::TargetRun>> {
    match results.outcomes[i] {
        Outcome::Scored { .. } => export::execution_rows(batch, results, i)
            .into_iter()
            .map(|r| r.targets)
            .collect(),
        _ => Vec::new(),
    }
}

/// The execution called `id`, or a message naming some that exist.
fn find_execution(batch: &Batch, id: &str) -> std::result::Result<usize, ExitCode> {
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

/// The readable draw log of execution `i`.
pub fn replay_text(batch: &Batch, results: &Results, i: usize) -> String {
    let exec = &batch.executions[i];
    let adm = &results.admissions[i];
    let outcome = &results.outcomes[i];
    let s = &results.settings;
    let mut t = format!(
        "execution {} · {} · {} · seed {} · J_max {} · priority {}\n",
        exec.id,
        outcome_text(outcome),
        plural(adm.candidates.len(), "candidate"),
        s.seed,
        jmax_text(s.jmax),
        priority_text(&s.priority)
    );
    let n = adm.draws.len();
    let runs_of = draw_runs(batch, results, i);
    for (k, d) in adm.draws.iter().enumerate() {
        t.push_str(&format!(
            "draw {}/{n}  class {}  ({} with weight left, total {})\n",
            k + 1,
            d.class,
            plural(d.candidates.len(), "candidate"),
            d.total
        ));
        for w in &d.candidates {
            let r = &exec.requests[w.request as usize];
            t.push_str(&format!(
                "  {} {:<12} w={:>8}  p={:.4}{}\n",
                if w.request == d.chosen { "●" } else { "○" },
                r.id,
                w.weight,
                d.probability(w),
                if w.request == d.chosen {
                    "  ◀ chosen"
                } else {
                    ""
                }
            ));
        }
        let runs: Vec<String> = runs_of[k]
            .iter()
            .map(|r| {
                format!(
                    "{}[{}..{}]@{}",
                    r.request,
                    r.offset,
                    r.offset + r.len,
                    r.pos
                )
            })
            .collect();
        t.push_str(&format!(
            "  fixed {} targets on a {}-token path: {}\n",
            d.target_tokens,
            d.path_tokens,
            runs.join(" ")
        ));
    }
    let stop = match adm.stop {
        Stop::JmaxReached => "J_max reached".to_string(),
        Stop::Exhausted => "no candidate has unclaimed tokens left".to_string(),
        Stop::NotDrawn => match outcome {
            Outcome::Dummy => "dummy: one zero-reward placeholder, no draws".to_string(),
            _ => "excluded: nothing admitted".to_string(),
        },
    };
    let l = adm.targets();
    t.push_str(&format!(
        "stopped: {stop} · L_i = {l} · weight {} · B = {}\n",
        crate::engine::loss::target_weight(l),
        results.batch_executions
    ));
    t
}

/// The draw log of execution `i` as JSON.
pub fn replay_json(batch: &Batch, results: &Results, i: usize) -> serde_json::Value {
    let exec = &batch.executions[i];
    let adm = &results.admissions[i];
    let outcome = &results.outcomes[i];
    let id = |r: u32| exec.requests[r as usize].id.as_str();
    let views = score::assessment_views(exec, outcome);
    let runs_of = draw_runs(batch, results, i);
    json!({
        "execution": exec.id,
        "status": outcome.label(),
        "reason": match outcome { Outcome::Excluded(e) => Some(e.to_string()), _ => None },
        "reward": outcome.reward(),
        "seed": results.settings.seed,
        "jmax": results.settings.jmax,
        "priority": results.settings.priority.iter().map(|c| c.name()).collect::<Vec<_>>(),
        "candidates": adm.candidates.iter().map(|c| json!({"request": id(c.request), "class": c.class.name()})).collect::<Vec<_>>(),
        "draws": adm.draws.iter().enumerate().map(|(k, d)| json!({
            "draw": k + 1,
            "class": d.class.name(),
            "total": d.total,
            "candidates": d.candidates.iter().map(|w| json!({
                "request": id(w.request), "weight": w.weight, "p": d.probability(w),
            })).collect::<Vec<_>>(),
            "chosen": id(d.chosen),
            "target_tokens": d.target_tokens,
            "path_tokens": d.path_tokens,
            "targets": runs_of[k],
        })).collect::<Vec<_>>(),
        "stop": match adm.stop { Stop::JmaxReached => "jmax", Stop::Exhausted => "exhausted", Stop::NotDrawn => "not-drawn" },
        "exec_targets": adm.targets(),
        "assessments": exec.assessments.iter().zip(&views).map(|(a, v)| json!({
            "line": a.at.line, "artifact": a.record.artifact, "version": a.record.version,
            "status": if a.record.valid { "valid" } else { "failed" }, "score": a.record.score,
            "t": a.record.t, "in_budget": v.in_budget, "matches_closure": v.matches_closure,
            "is_reward": v.is_reward,
        })).collect::<Vec<_>>(),
    })
}

/// `gyre import …`: harness logs → gyre/1 records (exit 2 on invalid input or an existing --out).
fn import(source: crate::import::cli::ImportCommand) -> Result<ExitCode> {
    crate::import::cli::run(source)
}

/// `gyre` with no subcommand: the engine at work on the bundled example recording.
fn demo() -> Result<ExitCode> {
    let batch = load::load_bytes(
        crate::demo::NAME,
        crate::demo::RECORDING,
        &LoadOptions::default(),
    )
    .wrap_err("loading the bundled demo recording")?;
    let results = eng::process(&batch, &Settings::default(), AdvantageMode::DrGrpo);
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "gyre · bundled demo ({}): {}\n",
        crate::demo::NAME,
        crate::demo::DESCRIPTION
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
