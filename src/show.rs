//! `gyre show`: a path as text in the terminal, each token coloured as the inspector colours it
//! (ANSI; plain text when colour is off), or as runs of tokens with their reasons.

use std::fmt::Write as _;

use gyre_engine::lens::Odds;
use gyre_engine::paint::{ColorMode, ExecView, PathView, Tone};
use gyre_engine::provenance::Reason;
use gyre_engine::tree::NodeKind;
use gyre_text::{TokenText, sanitize};

/// How to print.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShowOptions {
    /// What colours tokens.
    pub mode: ColorMode,
    /// Replay step (`None` = the admitted state).
    pub step: Option<u32>,
    /// Mark token boundaries with `│`.
    pub boundaries: bool,
    /// Write ANSI colours.
    pub color: bool,
}

/// ANSI SGR sequence of a tone (the inspector uses the same hues).
pub fn ansi(tone: Tone) -> &'static str {
    use gyre_engine::record::Source::*;
    match tone {
        Tone::Context(System) => "\x1b[34m",
        Tone::Context(User) => "\x1b[36m",
        Tone::Context(Tool) => "\x1b[33m",
        Tone::Context(Assistant) => "\x1b[35m",
        Tone::Context(Critique) => "\x1b[38;5;174m",
        Tone::Context(Summary) => "\x1b[38;5;141m",
        Tone::Context(Template) => "\x1b[90m",
        Tone::Context(Context) => "\x1b[2m",
        Tone::Policy => "\x1b[1;92m",
        Tone::Evaluator => "\x1b[91m",
        Tone::AfterClosure => "\x1b[9;90m",
        Tone::NotTrainable => "\x1b[2;32m",
        Tone::ThisDraw => "\x1b[1;30;102m",
        Tone::Claimed => "\x1b[32m",
        Tone::Unclaimed => "\x1b[97m",
        Tone::LeftOut => "\x1b[38;5;208m",
        Tone::Excluded => "\x1b[9;31m",
        Tone::Heat(0) => "\x1b[38;5;46m",
        Tone::Heat(1) => "\x1b[38;5;154m",
        Tone::Heat(2) => "\x1b[38;5;220m",
        Tone::Heat(3) => "\x1b[38;5;208m",
        Tone::Heat(_) => "\x1b[38;5;196m",
        Tone::NoLogprob => "\x1b[4;37m",
        Tone::Lens(0) => "\x1b[38;5;196m",
        Tone::Lens(1) => "\x1b[38;5;208m",
        Tone::Lens(2) => "\x1b[38;5;220m",
        Tone::Lens(3) => "\x1b[38;5;154m",
        Tone::Lens(_) => "\x1b[1;38;5;46m",
        Tone::LensPending => "\x1b[2;37m",
        Tone::Gained => "\x1b[1;30;102m",
        Tone::Lost => "\x1b[1;30;101m",
        Tone::Kept => "\x1b[32m",
        Tone::Agreeing => "\x1b[32m",
        Tone::TrainedNotSampled => "\x1b[1;30;101m",
        Tone::SampledNotTrained => "\x1b[4;38;5;220m",
        Tone::TrainedTwice => "\x1b[1;30;105m",
        Tone::Forked => "\x1b[30;106m",
        Tone::Untrained => "\x1b[3;90m",
        Tone::InNoSample => "\x1b[2;90m",
        Tone::Gap(0) => "\x1b[1;38;5;33m",
        Tone::Gap(1) => "\x1b[38;5;75m",
        Tone::Gap(2) => "\x1b[38;5;117m",
        Tone::Gap(3) => "\x1b[38;5;250m",
        Tone::Gap(4) => "\x1b[38;5;217m",
        Tone::Gap(5) => "\x1b[38;5;209m",
        Tone::Gap(_) => "\x1b[1;38;5;196m",
        Tone::NoGap => "\x1b[2;90m",
        Tone::AuditPending => "\x1b[3;37m",
    }
}

const RESET: &str = "\x1b[0m";

/// The legend line of a mode.
pub fn legend(mode: ColorMode, color: bool) -> String {
    let mut s = format!("colour: {} ·", mode.name());
    for tone in Tone::legend(mode) {
        if color {
            let _ = write!(s, " {}{}{RESET}", ansi(tone), tone.label());
        } else {
            let _ = write!(s, " {}", tone.label());
        }
    }
    s
}

/// The path as text, coloured token by token. Newlines in tokens stay line breaks (shown as a
/// dim `⏎` when colouring); everything else a terminal could interpret is sanitised.
pub fn render_text(
    view: &ExecView,
    path: &PathView,
    text: &TokenText,
    opts: ShowOptions,
) -> String {
    let ids = path.tokens(view.exec, 0..path.len);
    let pieces = text.display_pieces(&ids);
    let mut out = String::with_capacity(ids.len() * 8);
    let mut current: Option<Tone> = None;
    for (pos, piece) in pieces.iter().enumerate() {
        let (n, i) = path.locate(pos as u64).expect("position inside the path");
        if opts.boundaries && pos > 0 {
            if opts.color {
                out.push_str(RESET);
                out.push_str("\x1b[90m│");
                current = None;
            } else {
                out.push('│');
            }
        }
        let tone = opts.color.then(|| view.tone(n, i, opts.mode, opts.step));
        if let Some(tone) = tone {
            if current != Some(tone) {
                out.push_str(RESET);
                out.push_str(ansi(tone));
                current = Some(tone);
            }
        }
        for (k, line) in piece.split('\n').enumerate() {
            if k > 0 {
                if opts.color {
                    out.push_str("\x1b[2m⏎");
                    out.push_str(RESET);
                    current = None;
                }
                out.push('\n');
                if let Some(tone) = tone {
                    out.push_str(ansi(tone));
                    current = Some(tone);
                }
            }
            out.push_str(&sanitize(line));
        }
    }
    if opts.color {
        out.push_str(RESET);
    }
    out.push('\n');
    out
}

/// The path as runs of consecutive tokens sharing a reason: `pos len reason text` (with a lens,
/// `pos len reason lens text`). One line per run, text sanitised and cut to fit — the
/// scriptable audit.
pub fn render_runs(
    view: &ExecView,
    path: &PathView,
    text: &TokenText,
    step: Option<u32>,
) -> String {
    let lens_col = view.lens.is_some();
    let mut out = if lens_col {
        format!(
            "{:>8} {:>7}  {:<40} {:<26} text\n",
            "pos", "len", "reason", "lens"
        )
    } else {
        format!("{:>8} {:>7}  {:<40} text\n", "pos", "len", "reason")
    };
    type Run = (u64, Reason, Option<Odds>, Vec<u32>);
    let mut run: Option<Run> = None;
    let flush = |run: Run, out: &mut String| {
        let (start, reason, odds, ids) = run;
        let shown: String = sanitize(&text.decode(&ids)).chars().take(80).collect();
        let reason = sanitize(&reason.to_string()).into_owned();
        let _ = if lens_col {
            let odds = odds.map_or(String::new(), |o| o.short_text());
            writeln!(
                out,
                "{start:>8} {:>7}  {reason:<40} {odds:<26} {shown}",
                ids.len()
            )
        } else {
            writeln!(out, "{start:>8} {:>7}  {reason:<40} {shown}", ids.len())
        };
    };
    for &(n, start) in &path.segments {
        // Output tokens share their node's reason (and odds); context tokens may change source
        // per token.
        let output = view.exec.tree.nodes[n as usize].kind == NodeKind::Output;
        let node_reason = output.then(|| view.reason(n, 0, step));
        let odds = view.lens.and_then(|(l, jmax)| l.node(n, jmax));
        for (i, &id) in view.exec.tree.node_tokens(n).iter().enumerate() {
            let reason = match &node_reason {
                Some(r) => r.clone(),
                None => view.reason(n, i as u32, step),
            };
            match &mut run {
                Some((_, r, o, ids)) if *r == reason && *o == odds => ids.push(id),
                _ => {
                    if let Some(done) = run.take() {
                        flush(done, &mut out);
                    }
                    run = Some((start + i as u64, reason, odds, vec![id]));
                }
            }
        }
    }
    if let Some(done) = run {
        flush(done, &mut out);
    }
    out
}

/// A `trained` sample as runs of tokens sharing the loss mask, what the recording says they
/// are and the audit's findings on them: one line each with position, length, mask, tree,
/// findings and text. Only runs meeting `range` are printed.
pub fn render_sample(
    exec: &gyre_engine::execution::Execution,
    layout: &gyre_engine::audit::Layout,
    sample: usize,
    findings: &[&gyre_engine::audit::Finding],
    text: &TokenText,
    range: std::ops::Range<usize>,
) -> String {
    use gyre_engine::audit::Layout;
    use gyre_engine::execution::TokenIdentity;
    use gyre_format::named::Named;
    let record = &exec.trained.list[sample].record;
    let keys = &layout.samples[sample].keys;
    let ids = layout.ids(exec, sample);
    let label = |p: usize| -> (String, String, String) {
        let mask = if p < record.prompt_len as usize {
            "prompt"
        } else if Layout::mask_on(exec, sample, p) {
            "on"
        } else {
            "off"
        };
        let tree = match layout.identity(exec, keys[p]) {
            Some(TokenIdentity::Output { request, .. }) => {
                let r = &exec.requests[request as usize];
                let what = if r.trainable() {
                    "output"
                } else {
                    "output, not trainable"
                };
                format!("{} {what}", sanitize(&r.id))
            }
            Some(TokenIdentity::Context { source, .. }) => match source {
                gyre_format::record::Source::Context => "context".to_owned(),
                s => format!("context:{}", s.name()),
            },
            None => "off the recorded tree".into(),
        };
        let kinds: Vec<&str> = findings
            .iter()
            .filter(|f| (f.start as usize..f.end as usize).contains(&p))
            .map(|f| f.kind.name())
            .collect();
        (mask.into(), tree, kinds.join(","))
    };
    let mut out = format!(
        "{:>8} {:>7}  {:<6} {:<32} {:<24} text\n",
        "pos", "len", "mask", "tree", "findings"
    );
    let mut p = 0;
    while p < keys.len() {
        let here = label(p);
        let mut q = p + 1;
        while q < keys.len() && label(q) == here {
            q += 1;
        }
        if q > range.start && p < range.end {
            let shown: String = sanitize(&text.decode(&ids[p..q]))
                .chars()
                .take(80)
                .collect();
            let (mask, tree, kinds) = here;
            let _ = writeln!(
                out,
                "{p:>8} {:>7}  {mask:<6} {tree:<32} {:<24} {shown}",
                q - p,
                if kinds.is_empty() { "·" } else { &kinds }
            );
        }
        p = q;
    }
    out
}
