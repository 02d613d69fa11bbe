//! Go to a position on the token path.

use crate::pane::sanitize;
use crate::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Field, text_box};

/// Draws the go-to-position field.
pub fn goto(t: &Theme, f: &Field, len: u64, full: Rect, buf: &mut Buffer) {
    let lines = vec![
        Line::from(vec![
            Span::raw("position: "),
            Span::styled(sanitize(&f.text), t.strong()),
            Span::styled("█", t.dim()),
        ]),
        Line::styled(
            format!("1 to {len} on this path · Enter goes there · Esc cancels"),
            t.dim(),
        ),
    ];
    text_box(" go to position ", lines, full, buf);
}
