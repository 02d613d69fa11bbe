//! `gyre audit`: a trainer's `trained` samples checked against the faithful tree (docs/audit.md):
//! a summary, then the findings grouped by kind, each with the `gyre show` command that shows
//! it; `--json` for scripts; exit 1 when there are findings (a CI gate).

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
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
use gyre_format::sanitize::shell_word;
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
    /// A gyre recording of the same run: every trained token is matched, by its ids, to the
    /// recorded request it came from; ids that differ, behaviour log-probs that differ from
    /// the server's and recorded outputs no sample holds are findings.
    #[arg(long, value_name = "RECORDING")]
    against: Option<PathBuf>,
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
    let (batch, recording, files) = match &args.against {
        None => (
            load_with_progress(&args.input)?,
            None,
            args.input.files.clone(),
        ),
        Some(rec) => load_against(&args.input, rec)?,
    };
    let text: TokenText = match arg_text {
        Some(t) => t,
        None => gyre_text::resolve::from_header(batch.tokenizer_spec())
            .map_err(|e| Invalid::from_report(&e))?,
    };
    let turns = ChatMl::new(&text).map(TemplateTurns);
    let mut audit = audit_with_bar(&files, &batch, &options, turns.as_ref());
    if args.against.is_some() {
        let (rec, recorded) = match &recording {
            Some(r) => (r, vec![true; r.executions.len()]),
            // One batch: the recording's executions are the ones with its requests (file 0).
            None => (
                &batch,
                batch
                    .executions
                    .iter()
                    .map(|e| e.requests.iter().any(|r| r.at.file == 0))
                    .collect(),
            ),
        };
        audit.with_against(audit::against::against(&batch, rec, &recorded));
    }
    let sources = audit::sources(&batch);
    let mut out = io::stdout().lock();
    if args.json {
        let mut json = serde_json::to_value(&audit)?;
        let findings: Vec<Value> = audit
            .findings
            .iter()
            .map(|f| finding_json(&batch, &sources, &files, f))
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
            report(&batch, &audit, &sources, &files, &text, &note)
        )?;
    }
    Ok(if audit.clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `--against RECORDING`: the dump alone when it holds the requests its samples name (an
/// importer's output), with the recording loaded beside it; else (gyre's own rows, which name
/// the recording's requests) the recording and the dump read as one batch, as
/// `gyre audit REC TRAINED` reads them. Returns the batch, the recording when apart, and the
/// files the batch was read from.
fn load_against(
    input: &InputArgs,
    rec: &std::path::Path,
) -> Result<(Batch, Option<Batch>, Vec<PathBuf>)> {
    let recording = InputArgs {
        files: vec![rec.to_path_buf()],
        lenient: input.lenient,
    };
    if let Ok(batch) = load_with_progress(input) {
        return Ok((
            batch,
            Some(load_with_progress(&recording)?),
            input.files.clone(),
        ));
    }
    let mut files = recording.files;
    files.extend(input.files.iter().cloned());
    let both = InputArgs {
        files: files.clone(),
        lenient: input.lenient,
    };
    Ok((load_with_progress(&both)?, None, files))
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

/// The report's lines on the log-prob gap, the executions' weights and the comparison with a
/// recording (each when there is one).
fn gap_weights_against(out: &mut String, audit: &Audit) {
    use std::fmt::Write as _;
    if let Some(g) = &audit.gap {
        let a = &g.all;
        let _ = writeln!(
            out,
            "log-prob gap on {} ({}): mean |Δ| {:.4} · k3 {:.5} · beyond the bound {:.2}% \
             (|Δ| > {} or ratio outside [{}, {}]) · max |Δ| {:.3}",
            plural(a.tokens, "token"),
            audit::gap::SCOPE,
            a.mean_abs,
            a.k3,
            100.0 * a.share_beyond,
            g.bound.nats,
            g.bound.ratio.0,
            g.bound.ratio.1,
            a.max_abs,
        );
        for (name, buckets) in [
            ("role", &g.by_role),
            ("turn", &g.by_turn),
            ("position", &g.by_position),
        ] {
            let cells: Vec<String> = buckets
                .iter()
                .map(|b| {
                    format!(
                        "{} {:.4} ({}, {:.1}% beyond)",
                        b.label,
                        b.mean_abs,
                        b.tokens,
                        100.0 * b.share_beyond
                    )
                })
                .collect();
            let _ = writeln!(out, "  mean |Δ| by {name}: {}", cells.join(" · "));
        }
    }
    if let Some(w) = &audit.weights {
        let worst = w.worst_step.map(|s| &w.steps[s as usize]);
        let named = |i: Option<u32>| {
            i.map_or(String::new(), |i| {
                let e = &w.executions[i as usize];
                format!("{} {:.2}×", sanitize(&e.id), e.relative)
            })
        };
        let _ = writeln!(
            out,
            "weights under {}: spread {:.2} (bound {}){}{}",
            w.loss_agg,
            w.spread,
            w.bound,
            worst.map_or(String::new(), |s| format!(
                "{}: heaviest {}, lightest {} of the mean",
                s.step.map_or(String::new(), |n| format!(" in step {n}")),
                named(s.heaviest),
                named(s.lightest)
            )),
            if w.unweighted > 0 {
                format!(
                    " · {} with no trained token (weight 0)",
                    plural(w.unweighted, "execution")
                )
            } else {
                String::new()
            }
        );
    }
    if let Some(a) = &audit.against {
        let _ = writeln!(
            out,
            "against the recording: {} of {} samples matched to {} of {} recorded executions · \
             {} in step, {} drifted · {} behaviour log-probs compared, {} differ · recorded \
             output tokens in no sample: {} of {} (and {} in executions no sample matched)",
            a.matched_samples,
            a.samples,
            a.matched_executions,
            a.recorded_executions,
            plural(a.aligned_tokens, "token"),
            a.drifted_tokens,
            a.behaviour_compared,
            a.behaviour_mismatched,
            a.unseen_output_tokens,
            a.recorded_output_tokens,
            a.unmatched_output_tokens,
        );
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
    gap_weights_against(&mut out, audit);
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
