//! The go-to menu (`'`): one letter per kind of request the tree jumps to.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::text_box;
use crate::pane::tree::Landmark;
use crate::theme::Theme;

/// What each kind is, as the tree marks it.
fn what(l: Landmark) -> &'static str {
    match l {
        Landmark::Compaction => "compaction (⇢): the summary call, the context it starts",
        Landmark::SubAgent => "sub-agent root: the first request of each sub-agent",
        Landmark::Retry => "retry (↳): another sample on the same context",
        Landmark::Divergence => "divergence (↳): a branch inside an output, or another context",
        Landmark::Candidate => "candidate (○ or ●): a leaf a draw may pick",
        Landmark::Drawn => "drawn leaf (●): picked by a draw up to the replay step",
    }
}

/// Draws the go-to menu with the count of each kind in the execution.
pub fn goto(t: &Theme, counts: &[(Landmark, usize)], full: Rect, buf: &mut Buffer) {
    let mut lines: Vec<Line<'static>> = counts
        .iter()
        .map(|&(l, n)| {
            let style = if n == 0 { t.dim() } else { t.key() };
            Line::from(vec![
                Span::styled(
                    format!(" {} {} ", l.key(), l.key().to_ascii_uppercase()),
                    style,
                ),
                Span::raw(format!(" {:<4} ", n)),
                Span::styled(what(l), if n == 0 { t.dim() } else { t.strong() }),
            ])
        })
        .collect();
    lines.push(Line::default());
    lines.push(Line::styled(
        "a letter selects the next one in tree order, upper case the previous; then > and < \
         step through that kind · Esc cancels",
        t.dim(),
    ));
    text_box(" go to ", lines, full, buf);
}
