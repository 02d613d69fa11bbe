//! Why (not) drawn: the engine's explanation of one request.

use crate::pane::{Ctx, inner_height, wrap};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph, Widget};

use super::{Cx, OverlayView, Reads, Reply, boxed, centered, scroll};
use crate::keys::Command;

/// "Why (not) drawn" open on one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WhyView {
    /// Execution index.
    pub exec: usize,
    /// Request index.
    pub request: u32,
    /// Rows scrolled.
    pub scroll: u16,
    /// The generation of the batch it was opened on (`Selection::batch`).
    pub batch: u64,
}

impl OverlayView for WhyView {
    fn command(&mut self, cx: &Cx, c: Command) -> Reply {
        if matches!(c, Command::Why | Command::Escape) {
            return Reply::close();
        }
        let max = cx
            .ctx
            .as_ref()
            .map_or(0, |ctx| why_max_scroll(ctx, self.request, cx.full));
        self.scroll = scroll(self.scroll, c, max);
        Reply::stay()
    }

    fn sync(&mut self, cx: &Cx) -> bool {
        // It names a request by its index in one execution of one batch.
        cx.ctx
            .as_ref()
            .is_some_and(|ctx| ctx.sel.exec == self.exec && ctx.sel.batch == self.batch)
    }

    fn reads(&self) -> Reads {
        Reads {
            whatif: true,
            ..Reads::default()
        }
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        if let Some(ctx) = &cx.ctx {
            why(ctx, self.request, self.scroll, cx.full, buf);
        }
    }
}

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
fn why(ctx: &Ctx, request: u32, scroll: u16, full: Rect, buf: &mut Buffer) {
    let (area, lines) = why_box(ctx, request, full);
    Clear.render(area, buf);
    Paragraph::new(lines)
        .scroll((scroll, 0))
        .block(boxed(format!(" why was {} (not) drawn? ", ctx.id(request))))
        .render(area, buf);
}
