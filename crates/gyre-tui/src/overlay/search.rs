//! The search field and its results from every execution.

use crate::pane::{Ctx, sanitize};
use crate::search::Search;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Widget};

use super::{Ask, Cx, Edit, Field, OverlayView, Reply, boxed, centered};
use crate::keys::Command;

/// The search field and the result chosen in its list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchView {
    /// The query.
    pub field: Field,
    /// The chosen result.
    pub at: usize,
}

impl OverlayView for SearchView {
    fn command(&mut self, cx: &Cx, c: Command) -> Reply {
        match c {
            // One Esc closes the field and clears the search.
            Command::Escape => Reply::close_and(Ask::ClearSearch),
            Command::Up => {
                self.at = self.at.saturating_sub(1);
                Reply::stay()
            }
            Command::Down => {
                self.at = (self.at + 1).min(cx.search.hits.len().saturating_sub(1));
                Reply::stay()
            }
            Command::Enter => Reply::close_and(Ask::OpenHit(self.at)),
            _ => Reply::stay(),
        }
    }

    fn edit(&mut self, _cx: &Cx, e: Edit) -> Reply {
        self.field.edit(e);
        self.at = 0;
        Reply::stay_and(Ask::Search(self.field.text.clone()))
    }

    fn takes_text(&self) -> bool {
        true
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        if let Some(ctx) = &cx.ctx {
            search(ctx, cx.search, &self.field, self.at, cx.full, buf);
        }
    }
}

/// Draws the search field with the results so far.
fn search(ctx: &Ctx, s: &Search, field: &Field, at: usize, full: Rect, buf: &mut Buffer) {
    let t = ctx.theme;
    let width = (full.width * 8 / 10).max(full.width.min(76));
    let height = (full.height * 7 / 10).max(full.height.min(10));
    let area = centered(full, width, height);
    Clear.render(area, buf);
    let block = boxed(" search every execution ");
    let inner = block.inner(area);
    block.render(area, buf);
    let mut lines = vec![
        Line::from(vec![
            Span::styled("/", t.key()),
            Span::raw(sanitize(&field.text)),
            Span::styled("█", t.dim()),
        ]),
        Line::styled(s.status(), t.dim()),
    ];
    let room = (inner.height as usize).saturating_sub(3);
    let first = at.saturating_sub(room.saturating_sub(1));
    for (i, h) in s.hits.iter().enumerate().skip(first).take(room) {
        let style = if i == at {
            t.selected(true)
        } else {
            ratatui::style::Style::new()
        };
        lines.push(Line::styled(
            crate::pane::fit(&s.describe(ctx.batch, ctx.text, h), inner.width as usize),
            style,
        ));
    }
    let hint = Line::styled(
        "↑↓ choose · Enter goes there (n/N: next/previous) · Esc clears the search",
        t.dim(),
    );
    Paragraph::new(lines).render(inner, buf);
    if inner.height > 0 {
        let last = Rect {
            y: inner.bottom() - 1,
            height: 1,
            ..inner
        };
        Paragraph::new(hint).render(last, buf);
    }
}
