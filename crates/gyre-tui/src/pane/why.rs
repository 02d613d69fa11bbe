//! The why line: who the token under the cursor is and the engine's reason it is (not) a
//! target (docs/format.md §3), in words.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};

use gyre_engine::branches;
use gyre_engine::execution::TokenIdentity;
use gyre_engine::lens;
use gyre_engine::paint::{ColorMode, Tone};
use gyre_engine::provenance::Reason;
use gyre_engine::record::{Actor, Source};
use gyre_engine::tree::NodeId;
use gyre_format::named::Named;

use super::tokens::PathView;
use super::{Ctx, sanitize};

/// A log-prob with its probability, e.g. `−0.4100 (p 0.664)`.
fn logprob_text(l: f64) -> String {
    let v = if l != 0.0 && l.abs() < 1e-3 {
        format!("{l:.2e}")
    } else {
        format!("{l:.4}")
    };
    format!(
        "{} (p {})",
        v.replace('-', "−"),
        gyre_engine::why::prob_text(l.exp())
    )
}

/// The why line of the token at `pos` of `view`.
pub fn spans(ctx: &Ctx, view: &PathView, pos: u64) -> Vec<Span<'static>> {
    let exec = ctx.exec();
    let t = ctx.theme;
    let path = &view.index;
    if pos >= path.len {
        return vec![Span::styled("no token", t.dim())];
    }
    let id = path.token(exec, pos);
    let (n, i) = path.node_at(pos);
    let adm = ctx.admission();
    let step = ctx.sel.step;
    let reason = ctx.exec_view().reason(n, i, Some(step));
    let text = sanitize(&path.piece(exec, ctx.text, pos));
    let mut spans = vec![
        Span::styled(format!("\"{text}\""), t.strong()),
        Span::styled(format!(" id {id}"), t.dim()),
        Span::raw(" · "),
    ];
    let identity = exec.identity(n, i);
    let (TokenIdentity::Output { request: owner, .. }
    | TokenIdentity::Context { request: owner, .. }) = identity;
    match identity {
        TokenIdentity::Output { request, offset } => {
            let r = &exec.requests[request as usize];
            let who = if r.actor == Actor::Evaluator {
                "evaluator"
            } else {
                "policy"
            };
            spans.push(Span::raw(format!(
                "output token {offset} of {}",
                sanitize(&r.id)
            )));
            spans.push(Span::styled(
                format!(
                    " ({}, {who}{})",
                    sanitize(&r.agent),
                    r.logprob(offset)
                        .map_or(String::new(), |l| format!(", logprob {}", logprob_text(l)))
                ),
                t.dim(),
            ));
        }
        TokenIdentity::Context {
            request,
            offset,
            source,
        } => {
            let r = &exec.requests[request as usize];
            spans.push(Span::raw(format!(
                "input token {offset} of {}",
                sanitize(&r.id)
            )));
            spans.push(Span::styled(
                format!(" (first seen there, span {source})"),
                t.dim(),
            ));
            if source == Source::Assistant {
                if let Some(re) = branches::reserialised(exec, n, i) {
                    spans.push(Span::raw(" · "));
                    spans.push(Span::styled(
                        format!(
                            "harness re-serialised {}'s output here; diverges at its token {}; \
                             not sampled in this context",
                            ctx.id(re.of),
                            re.diverges_at
                        ),
                        t.marker(),
                    ));
                }
            }
        }
    }
    if exec.requests[owner as usize].reconstructed() {
        spans.push(Span::styled(" · reconstructed, not recorded", t.warn()));
    }
    // Under the audit's colourings its verdict comes first: it is what the colour says.
    let audit = audit_spans(ctx, n, i);
    let audit_first = matches!(ctx.colour, ColorMode::Audit | ColorMode::Gap);
    if audit_first {
        spans.extend(audit.iter().cloned());
    }
    spans.push(Span::raw(" · "));
    let rs = t.tone(Tone::of_reason(&reason, Some(step)));
    let mut rtext = reason.to_string();
    if let Reason::Claimed { draw, .. } = &reason {
        if let Some(dr) = adm.draws.get(*draw as usize - 1) {
            rtext = format!("{rtext} · class {}", dr.class);
        }
        if *draw == step {
            rtext.push_str(" · target of this draw");
        }
    }
    spans.push(Span::styled(sanitize(&rtext), rs));
    if matches!(identity, TokenIdentity::Output { .. }) {
        spans.extend(lens_spans(ctx, n, &reason));
        spans.extend(pin_spans(ctx, n));
    }
    if !audit_first {
        spans.extend(audit);
    }
    spans.push(Span::styled(
        format!(" · position {}/{}", pos + 1, path.len),
        t.dim(),
    ));
    if matches!(identity, TokenIdentity::Output { .. }) {
        spans.push(Span::styled(
            format!(" · y: why {} (not) drawn", ctx.id(owner)),
            t.dim(),
        ));
    }
    spans
}

/// What the audit says of token `i` of node `n`: its verdict, the trainer − behaviour gap, how
/// the highlighted sample holds it, and last (it is long) the finding said of it (kind,
/// evidence, the engine's sentence). Nothing until the audit is there (or without trained samples).
fn audit_spans(ctx: &Ctx, n: NodeId, i: u32) -> Vec<Span<'static>> {
    let (Some(a), Some(all)) = (ctx.exec_audit, ctx.audit) else {
        return Vec::new();
    };
    let t = ctx.theme;
    let key = ctx.exec().tree.nodes[n as usize].start + i;
    let v = a.tokens.verdict(key);
    let mut text = format!(" · audit: {}", v.said());
    let k = a.tokens.trained(key);
    if k > 1 {
        text.push_str(&format!(" (in {k} samples)"));
    }
    if let Some(d) = a.tokens.gap(key) {
        text.push_str(&format!(
            " · Δ trainer − behaviour {} (ratio {:.2})",
            format!("{d:+.3}").replace('-', "−"),
            d.exp()
        ));
    }
    if let Some(s) = ctx.sel.sample {
        let id = ctx
            .exec()
            .trained
            .list
            .get(s as usize)
            .map_or(String::new(), |s| sanitize(&s.record.sample));
        text.push_str(&match a.in_sample(key) {
            Some(crate::audit::TRAINED_BY_SAMPLE) => format!(" · sample {id} trains it"),
            Some(crate::audit::IN_SAMPLE) => format!(" · sample {id} holds it, mask off"),
            _ => format!(" · not in sample {id}"),
        });
    }
    if let Some(f) = a.tokens.finding(key).and_then(|f| all.findings.get(f)) {
        text.push_str(&format!(" · {}", f.kind.name()));
        if let Some(e) = f.evidence {
            text.push_str(&format!(" ({} evidence)", e.name()));
        }
        text.push_str(&format!(": {}", sanitize(&f.detail)));
    }
    vec![Span::styled(text, t.tone(v.tone()))]
}

/// What the lens says of output node `n` whose reason is `reason`: its odds over the seeds,
/// and for a left-out token the J_max and priority that would make it a target.
fn lens_spans(ctx: &Ctx, n: NodeId, reason: &Reason) -> Vec<Span<'static>> {
    let t = ctx.theme;
    let view = ctx.exec_view();
    let left_out = matches!(reason, Reason::LeftOutJmax | Reason::LeftOutClass);
    // Until the lens is worked out (the legend shows its progress) the line says nothing of it.
    let Some(odds) = view.lens.and_then(|(lens, jmax)| lens.node(n, jmax)) else {
        return Vec::new();
    };
    let (lens, _) = view.lens.expect("odds come from the lens");
    let mut text = format!(" · {}", odds.brief());
    if left_out {
        let (_, seed) = lens.seeds();
        text.push_str(&match odds.from_jmax {
            Some(k) => format!(" · seed {seed}: from J_max {k}"),
            None => format!(" · seed {seed}: no J_max"),
        });
        let settings = &ctx.results.settings;
        if let Some((p, k)) = lens::node_priority_what_if(ctx.exec(), ctx.outcome(), settings, n) {
            text.push_str(&format!(
                " · priority {}: draw {k}",
                gyre_engine::report::priority_text(&p)
            ));
        }
    }
    vec![Span::styled(text, t.marker())]
}

/// Under the pinned settings, when there is a pin: was output node `n` a target?
fn pin_spans(ctx: &Ctx, n: NodeId) -> Vec<Span<'static>> {
    let (Some(pinned), view) = (ctx.pinned, ctx.exec_view()) else {
        return Vec::new();
    };
    let i = ctx.sel.exec;
    let then = gyre_engine::provenance::node_reason(
        ctx.exec(),
        &pinned.outcomes[i],
        &pinned.admissions[i],
        n,
        None,
    );
    let Some(then) = then else { return Vec::new() };
    let now = view.reason(n, 0, None);
    let changed = then.is_target() != now.is_target();
    vec![Span::styled(
        format!(
            " · under the pin: {}{}",
            sanitize(&then.to_string()),
            if changed { " (flips)" } else { "" }
        ),
        if changed {
            ctx.theme.warn()
        } else {
            ctx.theme.dim()
        },
    )]
}

/// Draws the why line of the cursor's token.
pub fn render(ctx: &Ctx, view: Option<&PathView>, area: Rect, buf: &mut Buffer) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(ctx.theme.border(false))
        .title(" why ");
    let line = match view {
        Some(v) => Line::from(spans(ctx, v, v.cursor)),
        None => Line::styled("no token", ctx.theme.dim()),
    };
    Paragraph::new(line)
        .wrap(Wrap { trim: false })
        .block(block)
        .render(area, buf);
}
