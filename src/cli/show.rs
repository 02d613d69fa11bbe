//! `gyre show`: a path as text, every token coloured by provenance, claim state or log-prob.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use color_eyre::eyre::Result;

use super::args::{
    AdmissionArgs, EXIT_INVALID, InputArgs, color_wanted, find_execution, load_with_progress,
};
use crate::engine::load::Batch;
use crate::engine::score::AdvantageMode;
use crate::engine::{self as eng, Results, export};
use crate::paint::{ColorMode, ExecView, PathView};
use crate::report::outcome_text;
use crate::show::{self, ShowOptions};

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

/// Runs `gyre show`.
pub fn run(args: ShowArgs) -> Result<ExitCode> {
    let ShowArgs {
        input,
        admission,
        execution,
        request,
        color,
        draw,
        boundaries,
        runs,
        tokenizer,
    } = args;
    let (execution, mode) = (execution.as_str(), ColorMode::from(color));
    let batch = load_with_progress(&input)?;
    let i = match find_execution(&batch, execution) {
        Ok(i) => i,
        Err(code) => return Ok(code),
    };
    let results = eng::process(&batch, &admission.settings(), AdvantageMode::DrGrpo);
    let exec = &batch.executions[i];
    let req = match request.as_deref() {
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
    let text = crate::text::resolve_tokenizer(tokenizer.as_deref(), &batch)?;
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
