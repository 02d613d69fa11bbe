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
    let [execs, tree, right] = Layout::horizontal([
        Constraint::Percentage(30),
        Constraint::Percentage(35),
        Constraint::Fill(1),
    ])
    .areas(top);
    let [replay, assess] =
        Layout::vertical([Constraint::Percentage(60), Constraint::Fill(1)]).areas(right);
    let show_detail = detail && size.0 >= 90;
    let [left, detail_area] = if show_detail {
        Layout::horizontal([Constraint::Percentage(62), Constraint::Fill(1)]).areas(bottom)
    } else {
        [bottom, Rect::default()]
    };
    let [tokens, why] = Layout::vertical([Constraint::Fill(1), Constraint::Length(4)]).areas(left);
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
