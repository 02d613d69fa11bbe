//! The command line: a thin client of [`gyre_engine`]. One file per subcommand; [`args`]
//! holds what they share.

mod admit;
mod args;
mod audit;
mod demo;
mod diff;
pub mod exit;
mod import;
#[cfg(feature = "tui")]
mod inspect;
#[cfg(feature = "record")]
mod record;
mod replay;
mod show;
mod stats;
mod sweep;
mod synth;
mod validate;
mod why;

use std::process::ExitCode;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use color_eyre::eyre::Result;

const AFTER_HELP: &str = "\
Examples:
  gyre                                   # the bundled demo: stats and every draw
  gyre stats runs/*.jsonl.zst            # what is in a recording
  gyre admit runs.jsonl --out admitted.jsonl
  gyre replay runs.jsonl --execution e7  # why these leaves were drawn
  gyre why runs.jsonl -e e7 -r r12       # why this path was (not) drawn
  gyre validate runs.jsonl               # every problem, with file:line
  gyre show runs.jsonl --execution e7 --color claims
  gyre audit run.jsonl                   # what a trainer trained on, checked
  gyre synth --out demo.jsonl            # a simulated harness recording

Format: gyre/1 records (docs/format.md). Exit codes: 0 ok, 2 invalid input or usage, 1 other.";

const AUDIT_HELP: &str = "\
Examples:
  gyre import slime DUMP/ --out run.jsonl && gyre audit run.jsonl   # a trainer's own dump
  gyre admit runs.jsonl --format trained -o trained.jsonl
  gyre audit runs.jsonl trained.jsonl                 # gyre's own rows: clean, exit 0
  gyre audit run.jsonl --json | jq '.findings[] | select(.kind == \"trained_twice\")'
  gyre audit run.jsonl --tokenizer qwen3              # turn structure and text of findings
  gyre audit run.jsonl --bound gap=0.5 --bound ratio=0.8,1.25

Kinds: trained_not_sampled (a mask-on token the policy did not sample: tool output, a user
turn, template scaffolding; the evidence is the recording's spans, the tokenizer's turns or a
missing or 0.0 behaviour log-prob), sampled_not_trained (a policy token no sample trains, with
the reason), trained_twice (a token trained in two samples), false_fork (samples parting inside
an earlier output or at a re-rendered turn), retokenized (a context rewriting what the previous
call saw or sampled), logprob_gap (trainer − behaviour log-prob beyond the bound, mask-on tokens
only), weight_spread (executions weighing unequally under the trainer's loss aggregation) and,
with --against, behaviour_mismatch (a dump's behaviour log-prob differing from the server's).
Each finding names the execution, the sample, the token range and a `gyre show` command that
displays it. docs/audit.md says what each kind means.

Exit codes: 0 clean, 1 findings (a CI gate on a trainer's dump), 2 invalid input or usage.";

/// gyre: which tokens your policy is trained on, and why.
#[derive(Parser, Debug)]
#[command(name = "gyre", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Admit trajectories and export them as gyre/admitted-1 JSONL (or Parquet).
    #[command(after_help = "\
Examples:
  gyre admit runs.jsonl > admitted.jsonl
  gyre admit a.jsonl b.jsonl.gz --seed 7 --jmax 0 --out admitted.jsonl
  gyre admit runs.jsonl --priority main,sub --advantage grpo --out admitted.jsonl --force
  gyre admit runs.jsonl --out admitted.parquet            # same rows, list columns

One line per admitted trajectory, in execution order then draw order (docs/format.md).
The file is written atomically: on any error no file (or the old one) is left.")]
    Admit(admit::AdmitArgs),
    /// Check what a trainer trained on against what the policy sampled: the loss mask,
    /// duplicates, false forks and rewritten contexts, sample by sample.
    #[command(after_help = AUDIT_HELP)]
    Audit(audit::AuditArgs),
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
  gyre validate part-*.jsonl.gz && gyre admit part-*.jsonl.gz --out admitted.jsonl
  gyre validate flood.jsonl.zst --max-problems 20     # stop at the 20th problem
  gyre validate flood.jsonl.zst --max-problems 0      # read to the end, count them all

Reading stops at the 1000th problem by default and says where: a file of bad lines is
refused in seconds, however large it expands.")]
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
  gyre why runs.jsonl --execution e7 --request r12 --seeds 64   # what would it take?

Fates: drawn (at draw k), j_max (lost every draw until J_max), exhausted (its weight reached 0
at draw k: other leaves claimed its tokens), class_not_listed, excluded, dummy, not_candidate
(a policy output lies below it, or it is an evaluator or after-closure request).")]
    Why(why::WhyArgs),
    /// Print a path as text, every token coloured by provenance, claim state, log-prob or lens.
    #[command(after_help = "\
Examples:
  gyre show runs.jsonl --execution e7                      # the first drawn leaf, by provenance
  gyre show runs.jsonl --execution e7 --color claims --draw 2
  gyre show runs.jsonl --execution e7 --request r19 --color logprob --boundaries
  gyre show runs.jsonl --execution e7 --runs | grep context:tool   # is tool output trained on?
  gyre show runs.jsonl --execution e7 --color lens --seeds 64  # how often each token is a target

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
    /// What J_max, the seed and the priority do to cost and coverage: admission under many
    /// settings, the recording parsed once.
    #[command(after_help = "\
Examples:
  gyre sweep runs.jsonl                          # J_max 1, 2, 5 and uncapped over 16 seeds
  gyre sweep runs.jsonl --jmax 1,3,5,8 --seeds 64
  gyre sweep runs.jsonl --priority main,sub --json | jq '.settings[] | {jmax, cost_vs_uncapped}'

Cost is the forward-backward tokens of the exported rows (the sum of their lengths); coverage is
targets / trainable tokens of the executions that count in B. Each J_max is compared with the
uncapped run under the same seed.")]
    Sweep(sweep::SweepArgs),
    /// Two admissions compared: the same recording under two settings, or two recordings with
    /// the same execution ids; per execution Δ rows, Δ L_i, Δ weight, tokens that flip.
    #[command(after_help = "\
Examples:
  gyre diff runs.jsonl --a jmax=5 --b jmax=0              # what the cap leaves out
  gyre diff runs.jsonl --a seed=0 --b seed=1 --json
  gyre diff runs.jsonl --b priority=main>sub              # A: the defaults
  gyre diff restored.jsonl rerendered.jsonl               # two imports of one session

Tokens are matched by identity (output token k of request r), so two recordings compare even
when their trees differ. A flip `+r7[0..12]` became a target under B; `−r7[0..12]` was one under A.")]
    Diff(diff::DiffArgs),
    /// Open the interactive inspector on recordings (`gyre` alone opens it on the bundled demo).
    #[command(after_help = "\
Examples:
  gyre inspect runs.jsonl
  gyre inspect a.jsonl b.jsonl.zst --seed 3 --jmax 0 --tokenizer qwen3
  gyre inspect --demo claude-code        # a real Claude Code session, imported
  gyre inspect runs.jsonl --fresh        # without the settings remembered from the last run

Keys: ? help, q quit (docs/keys.md lists them all). Each recording's seed, J_max, priority,
advantage, colouring and sort are remembered at quit (in $XDG_STATE_HOME/gyre/inspector/, else
~/.local/state/gyre/inspector/, never beside the data) and restored on the next run; flags
given win, --fresh starts from the flags and the defaults.")]
    #[cfg(feature = "tui")]
    Inspect(inspect::InspectArgs),
    /// Turn harness logs (Claude Code, SWE-agent, mini-swe-agent, Codex, OpenHands, Inspect AI,
    /// vLLM) into gyre/1 records.
    #[command(after_help = "\
Examples:
  gyre import claude-code SESSION.jsonl --score 1 --out session.jsonl
  gyre import swe-agent run.traj --out run.jsonl
  gyre import openhands events.json --out events.jsonl
  gyre import vllm traffic.jsonl --out runs.jsonl

docs/import.md describes every mapping.")]
    Import {
        #[command(subcommand)]
        source: import::ImportCommand,
    },
    /// Record a harness's model calls exactly: a proxy in front of a vLLM or SGLang server.
    #[command(after_help = "\
Examples:
  gyre record --upstream http://127.0.0.1:8000 --tokenizer qwen3 --out run.jsonl
  ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude          # one local harness, plain routes
  # per task: issue an execution on the control listener (token in run.jsonl.control-token)
  curl -H \"Authorization: Bearer $(cat run.jsonl.control-token)\" -d '{\"execution\": \"task-17\"}' \\
       http://127.0.0.1:8788/gyre/executions         # -> {\"base_url\": \"http://…/x/task-17/…\"}
  OPENAI_BASE_URL=<openai_base_url> python agent.py      # the harness uses that URL only
  curl -H \"Authorization: Bearer …\" -d '{\"execution\": \"task-17\", \"status\": \"completed\"}' \\
       http://127.0.0.1:8788/gyre/closure

The control routes (/gyre/executions, /gyre/closure, /gyre/assessment) are on --control-listen
behind the bearer token, never on the model URL; a request under a capability URL belongs to
its execution whatever its headers say. Headers x-gyre-execution, x-gyre-agent,
x-gyre-purpose, x-gyre-group and x-gyre-budget attribute plain-route requests; docs/record.md
(Security) describes the rest. SIGINT/SIGTERM finish in-flight
requests and close the recording; rerunning with the same --out appends.")]
    #[cfg(feature = "record")]
    Record(record::RecordArgs),
}

/// Entry point of the `gyre` binary.
pub fn main() -> ExitCode {
    exit::install_hooks();
    // The matches too: `inspect` tells flags given from defaults (`value_source`).
    let parsed = Cli::command().try_get_matches().and_then(|m| {
        Cli::from_arg_matches(&m)
            .map(|cli| (cli, m))
            .map_err(|e| e.format(&mut Cli::command()))
    });
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            // clap's own text (usage errors, --help, --version); a closed pipe is ignored.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(exit::EXIT_INVALID)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    exit::finish(run(cli, &matches))
}

// Without the inspector no subcommand reads the matches.
#[cfg_attr(not(feature = "tui"), allow(unused_variables))]
fn run(cli: Cli, matches: &ArgMatches) -> Result<ExitCode> {
    match cli.command {
        // The inspector when a person is watching; the text demo for scripts and CI.
        #[cfg(feature = "tui")]
        None if {
            use std::io::{IsTerminal, stdin, stdout};
            stdout().is_terminal() && stdin().is_terminal()
        } =>
        {
            inspect::demo()
        }
        None => demo::run(),
        #[cfg(feature = "tui")]
        Some(Command::Inspect(args)) => inspect::run(args, matches.subcommand_matches("inspect")),
        Some(Command::Import { source }) => import::run(source),
        Some(Command::Validate(args)) => validate::run(args),
        Some(Command::Admit(args)) => admit::run(args),
        Some(Command::Stats(args)) => stats::run(args),
        Some(Command::Audit(args)) => audit::run(args),
        Some(Command::Show(args)) => show::run(args),
        Some(Command::Synth(args)) => synth::run(args),
        Some(Command::Replay(args)) => replay::run(args),
        Some(Command::Sweep(args)) => sweep::run(args),
        Some(Command::Diff(args)) => diff::run(args),
        #[cfg(feature = "record")]
        Some(Command::Record(args)) => record::run(args),
        Some(Command::Why(args)) => why::run(args),
    }
}
