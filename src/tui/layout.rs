//! Where each pane goes: a pure function of the terminal size, shared by drawing and by mouse
//! hit-testing.

use ratatui::layout::{Constraint, Layout, Rect};

/// Pane rectangles (a zero rectangle when a pane is hidden).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Areas {
    /// Title and settings line.
    pub title: Rect,
    /// Executions list.
    pub execs: Rect,
    /// Request tree.
    pub tree: Rect,
    /// Replay (draw log).
    pub replay: Rect,
    /// Assessments.
    pub assess: Rect,
    /// Token path.
    pub tokens: Rect,
    /// Why line of the token under the cursor.
    pub why: Rect,
    /// Detail (tool calls, results, diff).
    pub detail: Rect,
    /// Legend or message line.
    pub status: Rect,
    /// Key hints.
    pub hints: Rect,
    /// Everything.
    pub full: Rect,
}

/// Below this width three panes side by side are too narrow to read: the replay and
/// assessments column moves under the executions and tree, beside the tokens, and the
/// detail pane is left out.
pub const NARROW: u16 = 130;

/// Rows of the why pane at `width`: a why line runs to about 220 characters (long agent
/// names, a reconstructed record), and its reason at the end must not be cut off.
fn why_height(width: u16) -> u16 {
    (220u16.div_ceil(width.saturating_sub(2).max(1)) + 2).clamp(4, 6)
}

/// The layout for a terminal of `size` (columns, rows).
pub fn areas(size: (u16, u16), detail: bool) -> Areas {
    let full = Rect::new(0, 0, size.0, size.1);
    let [title, body, status, hints] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(full);
    let top_h = (body.height * 2 / 5).max(8).min(body.height);
    let [top, bottom] =
        Layout::vertical([Constraint::Length(top_h), Constraint::Fill(1)]).areas(body);
    let narrow = size.0 < NARROW;
    if narrow {
        // The why line spans the width so the reason of the token is never cut off.
        let [execs, tree] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Fill(1)]).areas(top);
        let [middle, why] = Layout::vertical([
            Constraint::Fill(1),
            Constraint::Length(why_height(bottom.width)),
        ])
        .areas(bottom);
        let [tokens, right] =
            Layout::horizontal([Constraint::Percentage(60), Constraint::Fill(1)]).areas(middle);
        let [replay, assess] =
            Layout::vertical([Constraint::Percentage(60), Constraint::Fill(1)]).areas(right);
        return Areas {
            title,
            execs,
            tree,
            replay,
            assess,
            tokens,
            why,
            detail: Rect::default(),
            status,
            hints,
            full,
        };
    }
    let [execs, tree, right] = Layout::horizontal([
        Constraint::Percentage(30),
        Constraint::Percentage(35),
        Constraint::Fill(1),
    ])
    .areas(top);
    let [replay, assess] =
        Layout::vertical([Constraint::Percentage(60), Constraint::Fill(1)]).areas(right);
    let [left, detail_area] = if detail {
        Layout::horizontal([Constraint::Percentage(62), Constraint::Fill(1)]).areas(bottom)
    } else {
        [bottom, Rect::default()]
    };
    let [tokens, why] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(why_height(left.width)),
    ])
    .areas(left);
    Areas {
        title,
        execs,
        tree,
        replay,
        assess,
        tokens,
        why,
        detail: detail_area,
        status,
        hints,
        full,
    }
}
