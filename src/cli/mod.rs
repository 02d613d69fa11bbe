//! The command line: a thin client of [`crate::engine`]. One file per subcommand; [`args`]
//! holds what they share.

mod admit;
mod args;
mod demo;
#[cfg(feature = "tui")]
mod inspect;
mod replay;
mod show;
mod stats;
mod synth;
mod validate;
mod why;

use std::io;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use color_eyre::eyre::Result;

use crate::engine::load::LoadError;
use args::EXIT_INVALID;

const AFTER_HELP: &str = "\
Examples:
  gyre                                   # the bundled demo: stats and every draw
  gyre stats runs/*.jsonl.zst            # what is in a recording
  gyre admit runs.jsonl --out admitted.jsonl
  gyre replay runs.jsonl --execution e7  # why these leaves were drawn
  gyre why runs.jsonl -e e7 -r r12       # why this path was (not) drawn
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
    Admit(admit::AdmitArgs),
    /// Counts: executions, requests, tokens (raw vs tree), candidates, targets.
    #[command(after_help = "\
Examples:
  gyre stats runs.jsonl
  gyre stats runs.jsonl --json | jq .dedup_ratio
  gyre stats runs.jsonl --jmax 0 --json   # targets when every candidate may be drawn")]
    Stats(stats::StatsArgs),
    /// Check recordings; print every problem as file:line and exit 2 if there is any.
    #[command(after_help = "\
Examples:
  gyre validate runs.jsonl
  gyre validate part-*.jsonl.gz && gyre admit part-*.jsonl.gz --out admitted.jsonl")]
    Validate(validate::ValidateArgs),
    /// The draw log of one execution: every draw's class, candidates, weights, choice, targets.
    #[command(after_help = "\
Examples:
  gyre replay runs.jsonl --execution e7
  gyre replay runs.jsonl --execution e7 --seed 3 --jmax 0
  gyre replay runs.jsonl --execution e7 --json | jq '.draws[].chosen'")]
    Replay(replay::ReplayArgs),
    /// Why one request's path was (not) drawn: candidate or not, its standing at every draw, its
    /// fate.
    #[command(after_help = "\
Examples:
  gyre why runs.jsonl --execution e7 --request r12
  gyre why runs.jsonl --execution e7 --request r12 --jmax 0 --json | jq .fate

Fates: drawn (at draw k), j_max (lost every draw until J_max), exhausted (its weight reached 0
at draw k: other leaves claimed its tokens), class_not_listed, excluded, dummy, not_candidate
(a policy output lies below it, or it is an evaluator or after-closure request).")]
    Why(why::WhyArgs),
    /// Print a path as text, every token coloured by provenance, claim state or log-prob.
    #[command(after_help = "\
Examples:
  gyre show runs.jsonl --execution e7                      # the first drawn leaf, by provenance
  gyre show runs.jsonl --execution e7 --color claims --draw 2
  gyre show runs.jsonl --execution e7 --request r19 --color logprob --boundaries
  gyre show runs.jsonl --execution e7 --runs | grep context:tool   # is tool output trained on?

Colour is on when stdout is a terminal and NO_COLOR is unset; otherwise plain text.")]
    Show(show::ShowArgs),
    /// Write a simulated Claude-Code-style recording (gyre/1, Qwen3 tokens).
    #[command(after_help = "\
Examples:
  gyre synth --out demo.jsonl                              # 24 executions, ~12 turns each
  gyre synth --out big.jsonl.zst --executions 2000 --turns 40 --context 16000
  gyre synth --out delta.jsonl --delta --seed 7            # `extends` delta encoding

Same options and seed give the same bytes. .gz and .zst outputs are compressed.")]
    Synth(synth::SynthArgs),
    /// Open the interactive inspector on recordings (`gyre` alone opens it on the bundled demo).
    #[command(after_help = "\
Examples:
  gyre inspect runs.jsonl
  gyre inspect a.jsonl b.jsonl.zst --seed 3 --jmax 0 --tokenizer qwen3
  gyre inspect --demo claude-code        # a real Claude Code session, imported

Keys: ? help, q quit (docs/keys.md lists them all).")]
    #[cfg(feature = "tui")]
    Inspect(inspect::InspectArgs),
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
        #[cfg(feature = "tui")]
        None if {
            use std::io::IsTerminal;
            io::stdout().is_terminal() && io::stdin().is_terminal()
        } =>
        {
            inspect::demo()
        }
        None => demo::run(),
        #[cfg(feature = "tui")]
        Some(Command::Inspect(args)) => inspect::run(args),
        Some(Command::Import { source }) => crate::import::cli::run(source),
        Some(Command::Validate(args)) => validate::run(args),
        Some(Command::Admit(args)) => admit::run(args),
        Some(Command::Stats(args)) => stats::run(args),
        Some(Command::Show(args)) => show::run(args),
        Some(Command::Synth(args)) => synth::run(args),
        Some(Command::Replay(args)) => replay::run(args),
        Some(Command::Why(args)) => why::run(args),
    }
}
