//! `gyre show`: a path as text, every token coloured by provenance, claim state or log-prob.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use color_eyre::eyre::Result;

use super::args::{AdmissionArgs, InputArgs, color_wanted, find_execution, load_with_progress};
use super::exit::Invalid;
use crate::show::{self, ShowOptions};
use gyre_engine::lens::{self, LensOptions};
use gyre_engine::load::Batch;
use gyre_engine::paint::{ColorMode, ExecView, PathView};
use gyre_engine::report::outcome_text;
use gyre_engine::score::AdvantageMode;
use gyre_engine::{self as eng, Results, rows};
use gyre_format::note::plural;
use gyre_text::{TokenText, sanitize};

/// `gyre show` arguments.
#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    admission: AdmissionArgs,
    /// Execution id.
    #[arg(long, short)]
    execution: String,
    /// Request whose path to print (default: the leaf of the first draw, else the dummy's
    /// placeholder, else the last request).
    #[arg(long, short, conflicts_with = "sample")]
    request: Option<String>,
    /// A trainer's sample (a `trained` record's `sample` id) instead of a path: its tokens as
    /// runs sharing the loss mask, what the recording says they are and the audit's findings.
    #[arg(long, value_name = "ID", conflicts_with_all = ["draw", "seeds"])]
    sample: Option<String>,
    /// With --sample: only the runs meeting token positions A..B (what `gyre audit` names).
    #[arg(long, value_name = "A..B", requires = "sample", value_parser = parse_range)]
    tokens: Option<std::ops::Range<usize>>,
    /// What colours the tokens.
    #[arg(long, value_enum, default_value_t = ColorArg::Provenance)]
    color: ColorArg,
    /// Show claim state as of draw K (its targets highlighted) instead of after all draws.
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    draw: Option<u32>,
    /// Mark token boundaries with │.
    #[arg(long)]
    boundaries: bool,
    /// One line per run of tokens sharing a reason: position, length, reason, text.
    #[arg(long)]
    runs: bool,
    /// Tokenizer: a bundled name (qwen3), a tokenizer.json or tokenizer.json.gz, or the model
    /// directory holding one (default: the header's).
    #[arg(long, value_name = "NAME|DIR|FILE")]
    tokenizer: Option<String>,
    /// With `--color lens` (or `--runs`, adding a lens column): seeds to look through, from
    /// --seed on.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    seeds: Option<u32>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ColorArg {
    Provenance,
    Claims,
    Logprob,
    /// The share of N seeds (--seeds, default 64) under which each token is a target.
    Lens,
}

impl From<ColorArg> for ColorMode {
    fn from(c: ColorArg) -> Self {
        match c {
            ColorArg::Provenance => ColorMode::Provenance,
            ColorArg::Claims => ColorMode::Claims,
            ColorArg::Logprob => ColorMode::Logprob,
            ColorArg::Lens => ColorMode::Lens,
        }
    }
}

/// `A..B`, a token range.
fn parse_range(s: &str) -> Result<std::ops::Range<usize>, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?} is not a range A..B such as 12..40"))?;
    let n = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|_| format!("{v:?} is not a token position"))
    };
    let (a, b) = (n(a)?, n(b)?);
    if a < b {
        Ok(a..b)
    } else {
        Err(format!("{s}: A must be below B"))
    }
}

/// Seeds the lens looks through when `--seeds` is not given.
const DEFAULT_LENS_SEEDS: u32 = 64;

/// The path `gyre show` prints by default for execution `i`.
fn default_path_request(batch: &Batch, results: &Results, i: usize) -> Option<u32> {
    let exec = &batch.executions[i];
    results.admissions[i]
        .draws
        .first()
        .map(|d| d.chosen)
        .or_else(|| rows::dummy_leaf(exec))
        .or_else(|| exec.requests.len().checked_sub(1).map(|r| r as u32))
}

/// Runs `gyre show`.
pub fn run(args: ShowArgs) -> Result<ExitCode> {
    let ShowArgs {
        input,
        admission,
        execution,
        request,
        sample,
        tokens,
        color,
        draw,
        boundaries,
        runs,
        tokenizer,
        seeds,
    } = args;
    let (execution, mode) = (execution.as_str(), ColorMode::from(color));
    // A bad --tokenizer is refused before the input is read.
    let arg_text = tokenizer
        .as_deref()
        .map(gyre_text::resolve::from_arg)
        .transpose()
        .map_err(|e| Invalid::from_report(&e))?;
    // The lens when it colours the tokens, or as a column of the runs when --seeds asks.
    let seeds = match (mode, seeds) {
        (ColorMode::Lens, n) => Some(n.unwrap_or(DEFAULT_LENS_SEEDS)),
        (_, n) if runs => n,
        (_, Some(_)) => {
            return Err(Invalid(
                "--seeds goes with --color lens or --runs (it sets how many seeds the lens \
                 looks through)"
                    .into(),
            )
            .into());
        }
        _ => None,
    };
    let batch = load_with_progress(&input)?;
    let i = find_execution(&batch, execution)?;
    if let Some(sample) = sample {
        let text: TokenText = match arg_text {
            Some(t) => t,
            None => gyre_text::resolve::from_header(batch.tokenizer_spec())
                .map_err(|e| Invalid::from_report(&e))?,
        };
        return show_sample(&batch, i, &sample, tokens, &text);
    }
    let settings = admission.settings();
    let results = eng::process(&batch, &settings, AdvantageMode::DrGrpo);
    let exec = &batch.executions[i];
    let name = sanitize(execution);
    let req = match request.as_deref() {
        Some(id) => exec.request_index(id).ok_or_else(|| {
            Invalid(format!(
                "execution \"{name}\" has no request \"{}\"",
                sanitize(id)
            ))
        })?,
        None => default_path_request(&batch, &results, i)
            .ok_or_else(|| Invalid(format!("execution \"{name}\" has no requests")))?,
    };
    let draws = results.admissions[i].draws.len() as u32;
    if let Some(k) = draw {
        if k == 0 || k > draws {
            let why = match draws {
                0 => format!("--draw {k}: execution \"{name}\" has no draws"),
                n => format!("--draw {k} is outside 1..={n} for execution \"{name}\""),
            };
            return Err(Invalid(why).into());
        }
    }
    let text: TokenText = match arg_text {
        Some(t) => t,
        None => gyre_text::resolve::from_header(batch.tokenizer_spec())
            .map_err(|e| Invalid::from_report(&e))?,
    };
    let exec_lens = seeds.map(|n| {
        let options = LensOptions {
            seed: settings.seed,
            seeds: n,
            priority: settings.priority.clone(),
        };
        lens::execution_lens(exec, &results.outcomes[i], &options)
    });
    let view = ExecView::new(exec, &results, i).with_lens(exec_lens.as_ref(), settings.jmax);
    let path = PathView::new(exec, req);
    let r = &exec.requests[req as usize];
    let color = color_wanted();
    let mut out = io::stdout().lock();
    let lens_note = seeds.map_or(String::new(), |n| {
        format!(" · lens {n} seeds from {}", settings.seed)
    });
    let role = results.admissions[i]
        .draws
        .iter()
        .position(|d| d.chosen == req)
        .map_or(String::new(), |k| {
            format!(" (leaf of draw {}/{draws})", k + 1)
        });
    writeln!(
        out,
        "{} · path of {}{role} · {} tokens (input {}, output {}) · {} · tokenizer {}{lens_note}",
        sanitize(&exec.id),
        sanitize(&r.id),
        path.len,
        r.input_len,
        r.output_len,
        outcome_text(&results.outcomes[i]),
        sanitize(text.label())
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

/// `gyre show --sample`: a trainer's sample as runs, with the audit's findings on it.
fn show_sample(
    batch: &Batch,
    i: usize,
    sample: &str,
    range: Option<std::ops::Range<usize>>,
    text: &TokenText,
) -> Result<ExitCode> {
    use gyre_engine::audit::{self, Layout, Options};
    let exec = &batch.executions[i];
    let s = exec
        .trained
        .list
        .iter()
        .position(|x| x.record.sample == sample)
        .ok_or_else(|| {
            Invalid(format!(
                "execution \"{}\" has no trained sample \"{}\" ({})",
                sanitize(&exec.id),
                sanitize(sample),
                plural(exec.trained.list.len(), "sample")
            ))
        })?;
    let layout = Layout::of(exec);
    let audit = audit::audit(batch, &Options::default(), None);
    let findings: Vec<_> = audit
        .findings
        .iter()
        .filter(|f| f.execution as usize == i && f.sample == Some(s as u32))
        .collect();
    let record = &exec.trained.list[s].record;
    let len = layout.samples[s].keys.len();
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "{} · sample {} · {} tokens (prompt {}, response {}, trained {}) · {} · tokenizer {}",
        sanitize(&exec.id),
        sanitize(sample),
        len,
        record.prompt_len,
        record.response_len(),
        record.trained_tokens(),
        plural(findings.len(), "finding"),
        sanitize(text.label())
    )?;
    let range = range.unwrap_or(0..len);
    write!(
        out,
        "{}",
        show::render_sample(exec, &layout, s, &findings, text, range)
    )?;
    Ok(ExitCode::SUCCESS)
}
