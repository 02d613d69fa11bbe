//! The copy menu (`Y`): one letter per thing to copy, each shown with its start.

use crate::copy::CopyItem;
use crate::pane::sanitize;
use crate::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Ask, Cx, Edit, OverlayView, Reply, text_box};

/// The copy menu: what each letter copies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopyMenu(pub Vec<CopyItem>);

impl OverlayView for CopyMenu {
    fn edit(&mut self, _cx: &Cx, e: Edit) -> Reply {
        let Edit::Char(c) = e else {
            return Reply::stay();
        };
        match self.0.iter().find(|it| it.key == c) {
            Some(it) => Reply {
                close: true,
                asks: vec![
                    Ask::Clipboard(it.text.clone()),
                    Ask::Say(crate::copy::said(it)),
                ],
            },
            None => {
                let keys: String = self.0.iter().map(|it| it.key).collect();
                Reply::say(format!("{c:?} copies nothing: one of {keys}, or Esc"))
            }
        }
    }

    fn takes_text(&self) -> bool {
        true
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        copy(cx.theme, &self.0, cx.full, buf);
    }
}

/// Draws the copy menu.
fn copy(t: &Theme, items: &[CopyItem], full: Rect, buf: &mut Buffer) {
    // One row per entry, cut to the box (text_box's width less its borders and the letter and
    // name columns): a long command shows its start, the status line names what was copied.
    let inner = (full.width * 7 / 10)
        .max(full.width.min(76))
        .saturating_sub(2) as usize;
    let room = inner.saturating_sub(26);
    let mut lines: Vec<Line<'static>> = items
        .iter()
        .map(|it| {
            let first = sanitize(it.text.lines().next().unwrap_or(""));
            let mut shown: String = first.chars().take(room).collect();
            if shown.chars().count() < it.text.chars().count() {
                shown.pop();
                shown.push('…');
            }
            Line::from(vec![
                Span::styled(format!(" {} ", it.key), t.key()),
                Span::raw(format!(" {:<20} ", it.what)),
                Span::styled(shown, t.dim()),
            ])
        })
        .collect();
    lines.push(Line::default());
    lines.push(Line::styled(
        "a letter copies to the clipboard (OSC 52) · Esc cancels",
        t.dim(),
    ));
    text_box(" copy ", lines, full, buf);
}
