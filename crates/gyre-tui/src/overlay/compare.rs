//! The compare view (`C`): what changed between the pinned settings (A) and those on screen
//! (B) — the lines `gyre diff` prints, one row per execution that changed, each leading to that
//! execution with its flips coloured.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget};

use gyre_engine::diff::Diff;
use gyre_engine::report::diff_lines;

use super::centered;
use crate::pane::{Ctx, fit, wrap};

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
pub fn render(
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
