//! Why (not) drawn: the engine's explanation of one request.

use crate::pane::{Ctx, inner_height, wrap};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph, Widget};

use super::{boxed, centered};

/// The box and wrapped lines of "why (not) drawn" for a request.
pub(crate) fn why_box(ctx: &Ctx, request: u32, full: Rect) -> (Rect, Vec<Line<'static>>) {
    let width = (full.width * 8 / 10).max(full.width.min(76));
    let mut lines = crate::pane::detail::fate_lines(ctx, request, true);
    lines.push(Line::default());
    lines.push(Line::styled(
        "j/k scroll · Esc or y closes · gyre why FILE --execution E --request R prints the same",
        ctx.theme.dim(),
    ));
    let lines = wrap(lines, width.saturating_sub(2));
    let height = (lines.len() as u16 + 2).min(full.height);
    (centered(full, width, height), lines)
}

/// How far "why (not) drawn" scrolls.
pub fn why_max_scroll(ctx: &Ctx, request: u32, full: Rect) -> u16 {
    let (area, lines) = why_box(ctx, request, full);
    lines
        .len()
        .saturating_sub(inner_height(area))
        .min(u16::MAX as usize) as u16
}

/// Draws "why (not) drawn" for a request.
pub fn why(ctx: &Ctx, request: u32, scroll: u16, full: Rect, buf: &mut Buffer) {
    let (area, lines) = why_box(ctx, request, full);
    Clear.render(area, buf);
    Paragraph::new(lines)
        .scroll((scroll, 0))
        .block(boxed(format!(" why was {} (not) drawn? ", ctx.id(request))))
        .render(area, buf);
}
