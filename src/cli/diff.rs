//! `gyre diff`: two admissions compared, execution by execution, token by token.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;
use serde_json::json;

use super::args::{AdmissionArgs, InputArgs, load_with_progress};
use super::exit::Invalid;
use gyre_engine::admit::Settings;
use gyre_engine::diff::{Side, diff};
use gyre_engine::report::{diff_json, diff_text};
use gyre_engine::score::AdvantageMode;
use gyre_engine::{Results, process};

/// `gyre diff` arguments.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// Either one recording (its files, in order) compared under --a and --b, or exactly two
    /// recordings compared under the same settings (when neither --a nor --b is given).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Skip invalid lines (counted, reported as warnings) instead of failing.
    #[arg(long)]
    lenient: bool,
    /// Settings both sides start from.
    #[command(flatten)]
    admission: AdmissionArgs,
    /// Side A's settings over the common ones: `seed=0,jmax=5,priority=main>sub`.
    #[arg(long, value_name = "SETTINGS", value_parser = parse_overrides)]
    a: Option<Overrides>,
    /// Side B's settings over the common ones.
    #[arg(long, value_name = "SETTINGS", value_parser = parse_overrides)]
    b: Option<Overrides>,
    /// One JSON object: totals, and per execution rows, targets (L_i), weight, flips.
    #[arg(long)]
    json: bool,
}

/// `key=value` settings of one side (checked when parsed, applied over the common ones).
#[derive(Clone, Debug, Default)]
struct Overrides(String);

fn parse_overrides(s: &str) -> Result<Overrides, String> {
    Settings::default().with_overrides(s)?;
    Ok(Overrides(s.to_owned()))
}

fn settings_of(base: &Settings, o: &Option<Overrides>) -> Settings {
    o.as_ref().map_or_else(
        || base.clone(),
        |o| base.with_overrides(&o.0).expect("checked when parsed"),
    )
}

fn describe(s: &Settings, what: &str) -> String {
    format!("{what} · {s}")
}

fn settings_json(s: &Settings, files: &[PathBuf]) -> serde_json::Value {
    let mut v = json!({
        "files": files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
    });
    if let (Some(out), serde_json::Value::Object(settings)) = (v.as_object_mut(), s.to_json()) {
        out.extend(settings);
    }
    v
}

/// Runs `gyre diff`.
pub fn run(args: DiffArgs) -> Result<ExitCode> {
    let base = args.admission.settings();
    let (sa, sb) = (settings_of(&base, &args.a), settings_of(&base, &args.b));
    let by_settings = args.a.is_some() || args.b.is_some();
    if !by_settings && args.files.len() != 2 {
        return Err(Invalid(
            "diff compares two recordings (give exactly two files) or one recording under --a \
             and --b settings (e.g. --a jmax=5 --b jmax=0)"
                .into(),
        )
        .into());
    }
    let load = |files: Vec<PathBuf>| {
        load_with_progress(&InputArgs {
            files,
            lenient: args.lenient,
        })
    };
    let run_side = |batch, s: &Settings| -> Results { process(batch, s, AdvantageMode::DrGrpo) };
    let mut out = io::stdout().lock();
    let names = |files: &[PathBuf]| {
        files
            .iter()
            .map(|f| gyre_text::sanitize(&f.display().to_string()).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (text, value) = if by_settings {
        let batch = load(args.files.clone())?;
        let (ra, rb) = (run_side(&batch, &sa), run_side(&batch, &sb));
        let d = diff(
            Side {
                batch: &batch,
                results: &ra,
            },
            Side {
                batch: &batch,
                results: &rb,
            },
        );
        let what = names(&args.files);
        (
            diff_text(&d, &describe(&sa, &what), &describe(&sb, &what)),
            diff_json(
                &d,
                settings_json(&sa, &args.files),
                settings_json(&sb, &args.files),
            ),
        )
    } else {
        let (fa, fb) = (args.files[..1].to_vec(), args.files[1..].to_vec());
        let (ba, bb) = (load(fa.clone())?, load(fb.clone())?);
        let (ra, rb) = (run_side(&ba, &sa), run_side(&bb, &sb));
        let d = diff(
            Side {
                batch: &ba,
                results: &ra,
            },
            Side {
                batch: &bb,
                results: &rb,
            },
        );
        (
            diff_text(&d, &describe(&sa, &names(&fa)), &describe(&sb, &names(&fb))),
            diff_json(&d, settings_json(&sa, &fa), settings_json(&sb, &fb)),
        )
    };
    if args.json {
        gyre_text::sanitize::write_json_pretty(&mut out, &value)?;
        writeln!(out)?;
    } else {
        write!(out, "{text}")?;
    }
    Ok(ExitCode::SUCCESS)
}
