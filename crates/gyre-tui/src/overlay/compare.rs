//! The compare view (`C`): what changed between the pinned settings (A) and those on screen
//! (B) — the lines `gyre diff` prints, one row per execution that changed, each leading to that
//! execution with its flips coloured.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget};

use gyre_engine::diff::Diff;
use gyre_engine::report::diff_lines;

use super::{Ask, Cx, OverlayView, Reads, Reply, centered};
use crate::keys::Command;
use crate::pane::{Ctx, fit, wrap};
use crate::vocab::Effect;
use gyre_engine::paint::ColorMode;

/// The compare view with the execution chosen in its list (an index into [`listed`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompareView(pub usize);

impl OverlayView for CompareView {
    fn command(&mut self, cx: &Cx, c: Command) -> Reply {
        let listed = cx.comparison.map(|c| listed(&c.diff)).unwrap_or_default();
        match c {
            Command::Compare | Command::Escape => Reply::close(),
            // The chosen execution opens, its flips coloured, the cursor on its first flip.
            Command::Enter => {
                let (Some(cmp), Some(&exec)) = (cx.comparison, listed.get(self.0)) else {
                    return Reply::stay();
                };
                let flip = cx
                    .ctx
                    .as_ref()
                    .and_then(|ctx| first_flip(ctx, &cmp.diff, exec));
                let go = match flip {
                    Some((request, pos)) => Effect::Jump { exec, request, pos },
                    None => Effect::OpenExec(exec),
                };
                Reply {
                    close: true,
                    asks: vec![Ask::Colour(ColorMode::Flips), Ask::Apply(go)],
                }
            }
            _ => {
                let last = listed.len().saturating_sub(1);
                let at = self.0;
                self.0 = match c {
                    Command::Up => at.saturating_sub(1),
                    Command::Down => (at + 1).min(last),
                    Command::PageUp => at.saturating_sub(10),
                    Command::PageDown => (at + 10).min(last),
                    Command::Home => 0,
                    Command::End => last,
                    _ => at,
                };
                Reply::stay()
            }
        }
    }

    fn sync(&mut self, cx: &Cx) -> bool {
        // It compares with the pin: a recording read again drops the pin, and the view goes.
        cx.pinned.is_some()
    }

    fn reads(&self) -> Reads {
        Reads {
            comparison: true,
            ..Reads::default()
        }
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        if let Some(ctx) = &cx.ctx {
            render(
                ctx,
                cx.comparison.map(|c| &c.diff),
                (cx.pinned.unwrap_or(""), &cx.settings),
                self.0,
                cx.full,
                buf,
            );
        }
    }
}

/// Executions (indices into the batch) the compare view lists, in order.
pub fn listed(diff: &Diff) -> Vec<usize> {
    diff.executions
        .iter()
        .enumerate()
        .filter(|(_, e)| e.changed())
        .map(|(i, _)| i)
        .collect()
}

/// Where an execution's first flip is: the request whose output holds it and the path position
/// of the flipped token on that request's own path.
pub fn first_flip(ctx: &Ctx, diff: &Diff, exec: usize) -> Option<(u32, u64)> {
    let f = diff.executions.get(exec)?.first_flips.first()?;
    let e = ctx.batch.executions.get(exec)?;
    let r = e.request_index(&f.request)?;
    Some((r, e.requests[r as usize].input_len as u64 + f.offset as u64))
}

/// Draws the compare view with execution `at` of [`listed`] selected.
fn render(
    ctx: &Ctx,
    diff: Option<&Diff>,
    labels: (&str, &str),
    at: usize,
    full: Rect,
    buf: &mut Buffer,
) {
    let t = ctx.theme;
    let area = centered(full, full.width * 9 / 10, full.height * 8 / 10);
    Clear.render(area, buf);
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .title(" compare with the pin · ↑↓ choose · Enter opens · Esc or C closes ");
    let inner = block.inner(area);
    block.render(area, buf);
    let w = inner.width as usize;
    let Some(diff) = diff else {
        Paragraph::new(Line::styled("comparing…", t.dim())).render(inner, buf);
        return;
    };
    let l = diff_lines(diff, labels.0, labels.1);
    // The head lines wrap (the batch line runs past 140 columns); the rows are cut.
    let mut lines: Vec<Line> = wrap(
        l.head
            .iter()
            .map(|h| Line::styled(h.clone(), t.strong()))
            .collect(),
        inner.width,
    );
    lines.push(Line::default());
    let head_rows = lines.len();
    let room = (inner.height as usize).saturating_sub(head_rows + 2);
    let first = at.saturating_sub(room.saturating_sub(1));
    let mut k = 0usize;
    for (exec, row) in &l.table {
        match exec {
            None => lines.push(Line::styled(fit(row, w), t.dim())),
            Some(_) => {
                if k >= first && k < first + room {
                    let style = if k == at {
                        t.selected(true)
                    } else {
                        ratatui::style::Style::new()
                    };
                    lines.push(Line::styled(fit(row, w), style));
                }
                k += 1;
            }
        }
    }
    if let Some(tail) = &l.tail {
        lines.push(Line::styled(fit(tail, w), t.dim()));
    }
    Paragraph::new(lines).render(inner, buf);
}
