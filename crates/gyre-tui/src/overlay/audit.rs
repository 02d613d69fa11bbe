//! The audit view (`A`): the engine's findings on the trained samples, grouped by kind, each
//! leading to its first token on the tree; and the selected execution's samples, each
//! highlighting the tokens it holds and trains.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget};

use gyre_engine::audit::verdict::{finding_position, sample_position};
use gyre_engine::audit::{Audit, Finding, Kind, Layout};
use gyre_engine::paint::ColorMode;
use gyre_format::named::Named;

use super::{Ask, Cx, OverlayView, Reply};
use crate::keys::Command;
use crate::pane::{Ctx, fit, sanitize, wrap};
use crate::vocab::Effect;

/// Which list has the keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuditTab {
    /// Every finding of the batch, by kind.
    #[default]
    Findings,
    /// The selected execution's samples.
    Samples,
}

/// The audit view: the list shown and the row chosen in each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuditView {
    /// The list shown.
    pub tab: AuditTab,
    /// The finding chosen (an index into the findings as listed: by kind).
    pub finding: usize,
    /// The sample chosen (an index into the execution's samples).
    pub sample: usize,
}

/// The findings in the order the view lists them: by kind, then as the audit orders them.
pub fn by_kind(a: &Audit) -> Vec<usize> {
    let mut order: Vec<usize> = (0..a.findings.len()).collect();
    order.sort_by_key(|&i| a.findings[i].kind);
    order
}

/// Where Enter on a finding goes: its execution, its first token on the tree (the cursor goes
/// there), its sample highlighted and the colouring that shows its kind.
fn go_to_finding(ctx: &Ctx, f: &Finding) -> Reply {
    let exec = f.execution as usize;
    let Some(e) = ctx.batch.executions.get(exec) else {
        return Reply::stay();
    };
    let own = ctx.exec_audit.filter(|a| a.exec == exec).map(|a| &a.layout);
    let laid;
    let layout = match own {
        Some(l) => l,
        None => {
            laid = Layout::of(e);
            &laid
        }
    };
    let colour = if f.kind == Kind::LogprobGap {
        ColorMode::Gap
    } else {
        ColorMode::Audit
    };
    let mut asks = vec![Ask::Colour(colour)];
    match finding_position(e, layout, f) {
        Some((request, pos)) => asks.push(Ask::Apply(Effect::Jump { exec, request, pos })),
        None => {
            asks.push(Ask::Apply(Effect::OpenExec(exec)));
            asks.push(Ask::Say(
                "this finding lies off the recorded tree: its sample's tokens are ids no \
                 request holds"
                    .into(),
            ));
        }
    }
    asks.push(Ask::Sample(f.sample));
    Reply { close: true, asks }
}

/// Where Enter on sample `s` of the selected execution goes: highlighted, the cursor on the
/// first token it trains (else its first token on the tree); on the highlighted one, the
/// highlight goes.
fn go_to_sample(ctx: &Ctx, s: u32) -> Reply {
    if ctx.sel.sample == Some(s) {
        return Reply::close_and(Ask::Sample(None));
    }
    let Some(a) = ctx.exec_audit else {
        return Reply::stay();
    };
    let exec = ctx.exec();
    let n = a.layout.samples.get(s as usize).map_or(0, |l| l.keys.len());
    let first = (0..n)
        .find(|&p| Layout::mask_on(exec, s as usize, p))
        .unwrap_or(0);
    let mut asks = vec![Ask::Colour(ColorMode::Audit)];
    if let Some((request, pos)) = sample_position(exec, &a.layout, s, first as u32) {
        asks.push(Ask::Apply(Effect::ShowPos { request, pos }));
    }
    asks.push(Ask::Sample(Some(s)));
    Reply { close: true, asks }
}

/// `at` moved by `c` in a list of `n` rows.
fn moved(at: usize, n: usize, c: Command) -> usize {
    let last = n.saturating_sub(1);
    match c {
        Command::Up => at.saturating_sub(1),
        Command::Down => (at + 1).min(last),
        Command::PageUp => at.saturating_sub(10),
        Command::PageDown => (at + 10).min(last),
        Command::Home => 0,
        Command::End => last,
        _ => at.min(last),
    }
}

impl OverlayView for AuditView {
    fn command(&mut self, cx: &Cx, c: Command) -> Reply {
        if matches!(c, Command::Audit | Command::Escape) {
            return Reply::close();
        }
        let Some(ctx) = &cx.ctx else {
            return Reply::stay();
        };
        match c {
            Command::FocusNext | Command::FocusPrev | Command::Left | Command::Right => {
                self.tab = match self.tab {
                    AuditTab::Findings => AuditTab::Samples,
                    AuditTab::Samples => AuditTab::Findings,
                };
                Reply::stay()
            }
            Command::Enter => match self.tab {
                AuditTab::Findings => {
                    let Some(a) = ctx.audit else {
                        return Reply::stay();
                    };
                    match by_kind(a).get(self.finding) {
                        Some(&i) => go_to_finding(ctx, &a.findings[i]),
                        None => Reply::stay(),
                    }
                }
                AuditTab::Samples if self.sample < ctx.exec().trained.list.len() => {
                    go_to_sample(ctx, self.sample as u32)
                }
                AuditTab::Samples => Reply::stay(),
            },
            _ => {
                match self.tab {
                    AuditTab::Findings => {
                        let n = ctx.audit.map_or(0, |a| a.findings.len());
                        self.finding = moved(self.finding, n, c);
                    }
                    AuditTab::Samples => {
                        self.sample = moved(self.sample, ctx.exec().trained.list.len(), c);
                    }
                }
                Reply::stay()
            }
        }
    }

    fn sync(&mut self, cx: &Cx) -> bool {
        if let Some(ctx) = &cx.ctx {
            let n = ctx.audit.map_or(0, |a| a.findings.len());
            self.finding = self.finding.min(n.saturating_sub(1));
            self.sample = self
                .sample
                .min(ctx.exec().trained.list.len().saturating_sub(1));
        }
        true
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        if let Some(ctx) = &cx.ctx {
            render(ctx, self, cx.full, buf);
        }
    }
}

/// The summary line: counts, duplication, findings.
fn summary(a: &Audit) -> String {
    let c = &a.counts;
    format!(
        "{} executions · {} samples · {} trained tokens · duplication {:.2} · {} findings",
        c.executions,
        c.samples,
        c.trained_tokens,
        a.duplication.factor,
        a.findings.len()
    )
}

/// A finding as one row: execution, sample, range, detail.
fn finding_row(ctx: &Ctx, f: &Finding) -> String {
    let e = ctx.batch.executions.get(f.execution as usize);
    let exec = e.map_or(String::new(), |e| sanitize(&e.id));
    let sample = f
        .sample
        .and_then(|s| e?.trained.list.get(s as usize))
        .map_or("no sample".to_string(), |s| {
            format!("sample {}", sanitize(&s.record.sample))
        });
    format!(
        "{exec} · {sample} · {}–{} · {}",
        f.start,
        f.end,
        sanitize(&f.detail)
    )
}

/// The rows of the findings list (kind headings between) and the row of finding `at`.
fn finding_lines(ctx: &Ctx, a: &Audit, at: usize, w: usize) -> (Vec<Line<'static>>, usize) {
    let t = ctx.theme;
    let mut lines = Vec::new();
    let mut chosen = 0;
    let mut kind = None;
    for (k, i) in by_kind(a).into_iter().enumerate() {
        let f = &a.findings[i];
        if kind != Some(f.kind) {
            kind = Some(f.kind);
            let n = a.by_kind.get(&f.kind).copied().unwrap_or(0);
            lines.push(Line::styled(
                fit(&format!("{} ({n}): {}", f.kind.name(), f.kind.help()), w),
                t.strong(),
            ));
        }
        if k == at {
            chosen = lines.len();
        }
        let style = if k == at {
            t.selected(true)
        } else {
            Style::new()
        };
        lines.push(Line::styled(
            fit(&format!("  {}", finding_row(ctx, f)), w),
            style,
        ));
    }
    (lines, chosen)
}

/// The rows of the samples list and the row of sample `at`.
fn sample_lines(ctx: &Ctx, a: Option<&Audit>, at: usize, w: usize) -> (Vec<Line<'static>>, usize) {
    let t = ctx.theme;
    let exec = ctx.exec();
    let i = ctx.sel.exec as u32;
    let findings = a.map_or(&[][..], |a| {
        let first = a.findings.partition_point(|f| f.execution < i);
        let last = a.findings.partition_point(|f| f.execution <= i);
        &a.findings[first..last]
    });
    let lines = exec
        .trained
        .list
        .iter()
        .enumerate()
        .map(|(s, sample)| {
            let r = &sample.record;
            let n = findings
                .iter()
                .filter(|f| f.sample == Some(s as u32))
                .count();
            let off = ctx
                .exec_audit
                .and_then(|e| e.layout.samples.get(s))
                .filter(|l| (l.leaves_tree as usize) < l.keys.len())
                .map_or(String::new(), |l| {
                    format!(" · off the tree from {}", l.leaves_tree)
                });
            let mark = if ctx.sel.sample == Some(s as u32) {
                "● "
            } else {
                "  "
            };
            let text = format!(
                "{mark}{} · {} tokens ({} prompt) · {} trained · {}{off}",
                sanitize(&r.sample),
                r.len(),
                r.prompt_len,
                r.trained_tokens(),
                gyre_format::note::plural(n, "finding"),
            );
            let style = if s == at {
                t.selected(true)
            } else if n > 0 {
                t.warn()
            } else {
                Style::new()
            };
            Line::styled(fit(&text, w), style)
        })
        .collect();
    (lines, at)
}

/// Draws the view over the whole screen.
fn render(ctx: &Ctx, v: &AuditView, full: Rect, buf: &mut Buffer) {
    let t = ctx.theme;
    Clear.render(full, buf);
    let title = match v.tab {
        AuditTab::Findings => {
            " audit: findings · Tab samples · Enter goes to one · Esc or A closes "
        }
        AuditTab::Samples => {
            " audit: samples · Tab findings · Enter highlights one · Esc or A closes "
        }
    };
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .title(title);
    let inner = block.inner(full);
    block.render(full, buf);
    let w = inner.width as usize;
    let Some(a) = ctx.audit else {
        Paragraph::new(Line::styled("auditing the trained samples…", t.dim())).render(inner, buf);
        return;
    };
    let head = match v.tab {
        AuditTab::Findings => Line::styled(fit(&summary(a), w), t.strong()),
        AuditTab::Samples => Line::from(vec![Span::styled(
            fit(
                &format!(
                    "{}: {} samples",
                    sanitize(&ctx.exec().id),
                    ctx.exec().trained.list.len()
                ),
                w,
            ),
            t.strong(),
        )]),
    };
    let (rows, chosen) = match v.tab {
        AuditTab::Findings => finding_lines(ctx, a, v.finding, w),
        AuditTab::Samples => sample_lines(ctx, Some(a), v.sample, w),
    };
    let empty = match v.tab {
        AuditTab::Findings => {
            "no findings: every trained token was sampled once, and every sample follows the tree"
        }
        AuditTab::Samples => {
            "this execution has no trained samples: the findings list reaches the others"
        }
    };
    // The chosen finding whole (a row cuts its sentence), over the keys on the last row.
    let whole: Vec<Line<'static>> = match v.tab {
        AuditTab::Findings => by_kind(a)
            .get(v.finding)
            .map(|&i| {
                wrap(
                    vec![Line::styled(finding_row(ctx, &a.findings[i]), t.strong())],
                    inner.width,
                )
            })
            .unwrap_or_default(),
        AuditTab::Samples => Vec::new(),
    };
    let whole: Vec<Line<'static>> = whole
        .into_iter()
        .take((inner.height as usize / 4).max(1))
        .collect();
    // The head, a blank, the list, the chosen finding and the keys on the last row.
    let room = (inner.height as usize)
        .saturating_sub(3 + whole.len())
        .max(1);
    let first = chosen.saturating_sub(room.saturating_sub(1));
    let mut lines = vec![head, Line::default()];
    if rows.is_empty() {
        lines.push(Line::styled(fit(empty, w), t.dim()));
    }
    lines.extend(rows.into_iter().skip(first).take(room));
    Paragraph::new(lines).render(inner, buf);
    let below = whole.len() as u16;
    if inner.height > 3 + below && below > 0 {
        let area = Rect {
            y: inner.bottom() - 1 - below,
            height: below,
            ..inner
        };
        Clear.render(area, buf);
        Paragraph::new(whole).render(area, buf);
    }
    if inner.height > 2 {
        let last = Rect {
            y: inner.bottom() - 1,
            height: 1,
            ..inner
        };
        let keys = match v.tab {
            AuditTab::Findings => {
                "↑↓ choose · Enter: the token cursor on its first token · c: audit / gap colours"
            }
            AuditTab::Samples => "↑↓ choose · Enter: highlight its tokens (again: none)",
        };
        Paragraph::new(Line::styled(fit(keys, w), t.dim())).render(last, buf);
    }
}
