//! `gyre audit`: a trainer's `trained` samples checked against the faithful tree (docs/audit.md):
//! a summary, then the findings grouped by kind, each with the `gyre show` command that shows
//! it; `--json` for scripts; exit 1 when there are findings (a CI gate).

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use clap::Args;
use color_eyre::eyre::Result;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use super::args::{InputArgs, load_with_progress};
use super::exit::Invalid;
use gyre_engine::audit::{self, Audit, Finding, Kind, Options, Source, Turns};
use gyre_engine::load::Batch;
use gyre_engine::paint::PathView;
use gyre_format::named::Named;
use gyre_format::note::plural;
use gyre_text::turns::ChatMl;
use gyre_text::{TokenText, sanitize};

/// `gyre audit` arguments.
#[derive(Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    input: InputArgs,
    /// One JSON object (counts, by_kind, findings …) instead of the report.
    #[arg(long)]
    json: bool,
    /// A bound, KEY=VALUE: gap=NATS (|trainer − behaviour| log-prob, default 1),
    /// ratio=LO,HI (importance ratio, default 0.5,2), weight=X (heaviest/lightest execution
    /// weight, default 2). Repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_bound)]
    bound: Vec<Bound>,
    /// Tokenizer for the turn structure and the text of findings: a bundled name (qwen3), a
    /// tokenizer.json or tokenizer.json.gz, or the model directory holding one (default: the
    /// header's).
    #[arg(long, value_name = "NAME|DIR|FILE")]
    tokenizer: Option<String>,
}

/// One `--bound`.
#[derive(Clone, Debug)]
enum Bound {
    Gap(f64),
    Ratio(f64, f64),
    Weight(f64),
}

fn parse_bound(s: &str) -> Result<Bound, String> {
    let number = |v: &str| {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| format!("{v:?} is not a positive number"))
    };
    match s.split_once('=') {
        Some(("gap", v)) => number(v).map(Bound::Gap),
        Some(("weight", v)) => number(v).map(Bound::Weight),
        Some(("ratio", v)) => {
            let (lo, hi) = v
                .split_once(',')
                .ok_or_else(|| format!("ratio={v}: give LO,HI, e.g. ratio=0.5,2"))?;
            let (lo, hi) = (number(lo)?, number(hi)?);
            if lo < hi {
                Ok(Bound::Ratio(lo, hi))
            } else {
                Err(format!("ratio={v}: LO must be below HI"))
            }
        }
        _ => Err(format!("{s:?} is not gap=NATS, ratio=LO,HI or weight=X")),
    }
}

/// The ChatML turn structure as the engine asks for it.
struct TemplateTurns(ChatMl);

impl Turns for TemplateTurns {
    fn assistant(&self, tokens: &[u32]) -> Vec<Option<bool>> {
        self.0.assistant(tokens)
    }
}

/// Runs `gyre audit`.
pub fn run(args: AuditArgs) -> Result<ExitCode> {
    let mut options = Options::default();
    for b in &args.bound {
        match *b {
            Bound::Gap(v) => options.gap_bound = v,
            Bound::Ratio(lo, hi) => options.ratio_bounds = (lo, hi),
            Bound::Weight(v) => options.weight_bound = v,
        }
    }
    // A bad --tokenizer is refused before the input is read.
    let arg_text = args
        .tokenizer
        .as_deref()
        .map(gyre_text::resolve::from_arg)
        .transpose()
        .map_err(|e| Invalid::from_report(&e))?;
    let batch = load_with_progress(&args.input)?;
    let text: TokenText = match arg_text {
        Some(t) => t,
        None => gyre_text::resolve::from_header(batch.tokenizer_spec())
            .map_err(|e| Invalid::from_report(&e))?,
    };
    let turns = ChatMl::new(&text).map(TemplateTurns);
    let audit = audit_with_bar(&args.input.files, &batch, &options, turns.as_ref());
    let sources = audit::sources(&batch);
    let mut out = io::stdout().lock();
    if args.json {
        let mut json = serde_json::to_value(&audit)?;
        let findings: Vec<Value> = audit
            .findings
            .iter()
            .map(|f| finding_json(&batch, &sources, &args.input.files, f))
            .collect();
        if let Value::Object(map) = &mut json {
            map.insert("findings".into(), Value::Array(findings));
        }
        gyre_text::sanitize::write_json_pretty(&mut out, &json)?;
        writeln!(out)?;
    } else {
        let note = match &turns {
            Some(_) => format!("turns from {}", text.label()),
            None if text.has_vocabulary() => format!(
                "{} has no ChatML turn markers: turn structure not checked",
                text.label()
            ),
            None => "no tokenizer (--tokenizer): turn structure not checked".to_owned(),
        };
        write!(
            out,
            "{}",
            report(&batch, &audit, &sources, &args.input.files, &text, &note)
        )?;
    }
    Ok(if audit.clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The audit, with a progress bar on stderr when it is a terminal and the input is large.
fn audit_with_bar(
    files: &[std::path::PathBuf],
    batch: &Batch,
    options: &Options,
    turns: Option<&TemplateTurns>,
) -> Audit {
    let total: u64 = files
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    let bar = (io::stderr().is_terminal() && total > 16 << 20).then(|| {
        let pb = ProgressBar::new(batch.executions.len() as u64);
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} auditing {bar:40} {pos}/{len} executions eta {eta}",
            )
            .expect("static template"),
        );
        pb
    });
    let turns = turns.map(|t| t as &dyn Turns);
    let audit = audit::audit_with_progress(batch, options, turns, &|done, _| {
        if let Some(pb) = &bar {
            pb.set_position(done);
        }
    });
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    audit
}

/// One finding as `--json` writes it: ids rather than indices, its source and the command
/// that shows it.
fn finding_json(
    batch: &Batch,
    sources: &[Vec<Source>],
    files: &[std::path::PathBuf],
    f: &Finding,
) -> Value {
    let exec = &batch.executions[f.execution as usize];
    let sample_id = |s: u32| exec.trained.list[s as usize].record.sample.clone();
    let mut v = json!({
        "kind": f.kind.name(),
        "execution": exec.id,
        "sample": f.sample.map(sample_id),
        "source": f.sample.map(|s| {
            let src = &sources[f.execution as usize][s as usize];
            json!({"file": src.file, "index": src.index})
        }),
        "start": f.start,
        "end": f.end,
        "detail": f.detail,
    });
    let extra = [
        ("evidence", f.evidence.map(|e| json!(e.name()))),
        ("other", f.other.map(|o| json!(sample_id(o)))),
        (
            "request",
            f.request.map(|r| json!(exec.requests[r as usize].id)),
        ),
        ("value", f.value.map(|x| json!(x))),
        ("show", Some(json!(show_command(batch, files, f)))),
    ];
    if let Value::Object(map) = &mut v {
        for (k, x) in extra {
            if let Some(x) = x {
                map.insert(k.into(), x);
            }
        }
    }
    v
}

/// A word as a POSIX shell reads it back: bare when it is plain, else single-quoted.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The `gyre show` command that displays finding `f`: the sample's tokens around the range,
/// or the request's path when no sample holds it.
fn show_command(batch: &Batch, files: &[std::path::PathBuf], f: &Finding) -> String {
    let exec = &batch.executions[f.execution as usize];
    let mut words: Vec<String> = vec!["gyre".into(), "show".into()];
    words.extend(files.iter().map(|p| shell_word(&p.display().to_string())));
    words.extend(["-e".into(), shell_word(&exec.id)]);
    match (f.sample, f.request) {
        (Some(s), _) => {
            let id = &exec.trained.list[s as usize].record.sample;
            words.extend([
                "--sample".into(),
                shell_word(id),
                "--tokens".into(),
                format!("{}..{}", f.start, f.end),
            ]);
        }
        (None, Some(r)) => {
            words.extend([
                "-r".into(),
                shell_word(&exec.requests[r as usize].id),
                "--runs".into(),
            ]);
        }
        (None, None) => {}
    }
    words.join(" ")
}

/// The tokens of finding `f`'s range (the sample's, or the request's path).
fn finding_ids(batch: &Batch, f: &Finding) -> Vec<u32> {
    let exec = &batch.executions[f.execution as usize];
    let (a, b) = (f.start as usize, f.end as usize);
    match (f.sample, f.request) {
        (Some(s), _) => {
            let ids = exec.sample_tokens(&exec.trained.list[s as usize]);
            ids.get(a..b.min(ids.len())).unwrap_or_default().to_vec()
        }
        (None, Some(r)) => PathView::new(exec, r).tokens(exec, a as u64..b as u64),
        (None, None) => Vec::new(),
    }
}

/// The report: the summary, then findings by kind.
fn report(
    batch: &Batch,
    audit: &Audit,
    sources: &[Vec<Source>],
    files: &[std::path::PathBuf],
    text: &TokenText,
    turns_note: &str,
) -> String {
    use std::fmt::Write as _;
    let c = &audit.counts;
    let mut out = String::new();
    let trainer = batch.trainer().map_or_else(
        || "trainer not named in the header".to_owned(),
        |t| {
            format!(
                "trainer {}{} · loss {}",
                sanitize(&t.name),
                t.version
                    .as_deref()
                    .map_or(String::new(), |v| format!(" {}", sanitize(v))),
                t.loss_agg
            )
        },
    );
    let _ = writeln!(
        out,
        "audit · {} · {} · {} ({} with a behaviour log-prob, {} with a trainer log-prob) · {trainer}",
        plural(c.executions, "execution"),
        plural(c.samples, "sample"),
        plural(c.trained_tokens, "trained token"),
        c.behaviour_logprobs,
        c.trainer_logprobs,
    );
    if c.aux_tokens > 0 {
        let _ = writeln!(
            out,
            "auxiliary loss tokens: {} (beside the policy-gradient mask, not in it)",
            c.aux_tokens
        );
    }
    let d = &audit.duplication;
    let _ = writeln!(
        out,
        "duplication {:.2} (mask-on tokens / distinct mask-on tokens; max {:.2}{})",
        d.factor,
        d.max,
        d.max_execution
            .as_deref()
            .map_or(String::new(), |e| format!(" in execution {}", sanitize(e)))
    );
    if audit.forks.samples > 0 {
        let _ = writeln!(
            out,
            "false forks cost {} and {} recomputed",
            plural(audit.forks.samples, "extra sample"),
            plural(audit.forks.tokens, "prefix token")
        );
    }
    let r = &audit.recorded;
    if r.forks.samples > 0 || r.rewrites > 0 {
        let _ = writeln!(
            out,
            "the recording's own rewrites: {} (the harness rewrote a context the policy was then \
             called with); samples parting there: {}, {} recomputed",
            plural(r.rewrites, "request"),
            r.forks.samples,
            plural(r.forks.tokens, "prefix token")
        );
    }
    let u = &audit.untrained;
    let _ = writeln!(
        out,
        "policy tokens in no sample: {} · in placeholder samples: {} · not_trainable held: {} · sample tokens off the recorded tree: {}",
        u.in_no_sample, u.placeholder, u.not_trainable, audit.off_tree_tokens
    );
    let _ = writeln!(out, "{turns_note}");
    for n in &audit.notes {
        let _ = writeln!(out, "note: {}", sanitize(n));
    }
    let counts: Vec<String> = audit
        .by_kind
        .iter()
        .map(|(k, n)| format!("{} {n}", k.name()))
        .collect();
    let _ = writeln!(
        out,
        "{} · {}",
        plural(audit.findings.len(), "finding"),
        counts.join(" · ")
    );
    for kind in Kind::ALL {
        let of_kind: Vec<&Finding> = audit.findings.iter().filter(|f| f.kind == *kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "\n{} ({}): {}",
            kind.name(),
            of_kind.len(),
            kind.help()
        );
        for f in of_kind {
            let exec = &batch.executions[f.execution as usize];
            let at = match f.sample {
                Some(s) => {
                    let src = &sources[f.execution as usize][s as usize];
                    format!(
                        "sample {} ({} #{}) tokens {}..{}",
                        sanitize(&exec.trained.list[s as usize].record.sample),
                        sanitize(&src.file),
                        src.index,
                        f.start,
                        f.end
                    )
                }
                None => format!(
                    "no sample; request {} path tokens {}..{}",
                    f.request
                        .map_or(String::new(), |r| sanitize(&exec.requests[r as usize].id)
                            .into_owned()),
                    f.start,
                    f.end
                ),
            };
            let _ = writeln!(out, "  execution {} · {at}", sanitize(&exec.id));
            let _ = writeln!(out, "    {}", sanitize(&f.detail));
            if text.has_vocabulary() {
                let shown: String = sanitize(&text.decode(&finding_ids(batch, f)))
                    .chars()
                    .take(100)
                    .collect();
                let _ = writeln!(out, "    text: {shown}");
            }
            let _ = writeln!(out, "    {}", sanitize(&show_command(batch, files, f)));
        }
    }
    out
}
