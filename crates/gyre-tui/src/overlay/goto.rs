//! The go-to menu (`'`): one letter per kind of request the tree jumps to.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Ask, Cx, Edit, OverlayView, Reply, text_box};

/// The go-to menu: each kind with how many requests of it the execution has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoToMenu(pub Vec<(Landmark, usize)>);

impl OverlayView for GoToMenu {
    fn edit(&mut self, _cx: &Cx, e: Edit) -> Reply {
        let Edit::Char(c) = e else {
            return Reply::stay();
        };
        match Landmark::ALL
            .into_iter()
            .find(|l| l.key() == c.to_ascii_lowercase())
        {
            Some(kind) => Reply::close_and(Ask::GoTo(kind, !c.is_ascii_uppercase())),
            None => {
                let keys: String = Landmark::ALL.iter().map(|l| l.key()).collect();
                Reply::say(format!(
                    "{c:?} goes nowhere: one of {keys} (upper case: the previous), or Esc"
                ))
            }
        }
    }

    fn takes_text(&self) -> bool {
        true
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        goto(cx.theme, &self.0, cx.full, buf);
    }
}
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
fn goto(t: &Theme, counts: &[(Landmark, usize)], full: Rect, buf: &mut Buffer) {
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
