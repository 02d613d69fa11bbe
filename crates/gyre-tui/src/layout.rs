//! Where each pane goes: a pure function of the terminal size (and the zoom), shared by drawing,
//! scrolling and mouse hit-testing.

use ratatui::layout::{Constraint, Layout, Rect};

use crate::vocab::Pane;

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
    /// Detail (fate, tool calls, results, diff).
    pub detail: Rect,
    /// Legend or message line.
    pub status: Rect,
    /// Key hints.
    pub hints: Rect,
    /// Everything.
    pub full: Rect,
}

impl Areas {
    /// The rectangle of pane `p` (zero when hidden).
    pub fn of(&self, p: Pane) -> Rect {
        match p {
            Pane::Executions => self.execs,
            Pane::Tree => self.tree,
            Pane::Replay => self.replay,
            Pane::Assessments => self.assess,
            Pane::Tokens => self.tokens,
            Pane::Detail => self.detail,
        }
    }

    /// Panes shown, in screen order (top to bottom, left to right): the Tab order.
    pub fn order(&self) -> Vec<Pane> {
        let mut shown: Vec<(Rect, Pane)> = Pane::ALL
            .into_iter()
            .map(|p| (self.of(p), p))
            .filter(|(r, _)| r.width > 0 && r.height > 0)
            .collect();
        shown.sort_by_key(|(r, _)| (r.y, r.x));
        shown.into_iter().map(|(_, p)| p).collect()
    }

    /// The pane under a cell.
    pub fn pane_at(&self, x: u16, y: u16) -> Option<Pane> {
        let p = ratatui::layout::Position { x, y };
        Pane::ALL
            .into_iter()
            .find(|&pane| self.of(pane).contains(p))
    }
}

/// Below this width three panes side by side are too narrow to read: the replay and
/// assessments column moves beside the tokens, and the detail pane is left out.
pub const NARROW: u16 = 130;

/// The smallest terminal the panes are drawn in; below it a "terminal too small" screen.
pub const MIN_SIZE: (u16, u16) = (60, 16);

/// Rows of the why pane at `width`: a why line runs to about 220 characters (long agent
/// names, a reconstructed record), and its reason at the end must not be cut off.
fn why_height(width: u16) -> u16 {
    (240u16.div_ceil(width.saturating_sub(2).max(1)) + 2).clamp(4, 7)
}

/// Whether a terminal of `size` is big enough for the panes.
pub fn big_enough(size: (u16, u16)) -> bool {
    size.0 >= MIN_SIZE.0 && size.1 >= MIN_SIZE.1
}

/// The layout for a terminal of `size` (columns, rows), the detail pane on or off, `zoom` the
/// pane that fills the body when zoomed.
pub fn areas(size: (u16, u16), detail: bool, zoom: Option<Pane>) -> Areas {
    let full = Rect::new(0, 0, size.0, size.1);
    let [title, body, status, hints] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(full);
    let mut a = Areas {
        title,
        status,
        hints,
        full,
        ..Areas::default()
    };
    if !big_enough(size) {
        return a;
    }
    let narrow = size.0 < NARROW;
    if let Some(z) = zoom {
        match z {
            // The tokens keep their why line.
            Pane::Tokens => {
                let [tokens, why] = Layout::vertical([
                    Constraint::Fill(1),
                    Constraint::Length(why_height(body.width)),
                ])
                .areas(body);
                a.tokens = tokens;
                a.why = why;
            }
            Pane::Executions => a.execs = body,
            Pane::Tree => a.tree = body,
            Pane::Replay => a.replay = body,
            Pane::Assessments => a.assess = body,
            Pane::Detail => a.detail = body,
        }
        return a;
    }
    if narrow {
        // Executions and tree on top; the tokens with their why line below, the replay and
        // assessments beside them (the replay tall enough for a draw).
        let top_h = (body.height / 3).max(6).min(body.height);
        let [top, bottom] =
            Layout::vertical([Constraint::Length(top_h), Constraint::Fill(1)]).areas(body);
        let [execs, tree] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Fill(1)]).areas(top);
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(55), Constraint::Fill(1)]).areas(bottom);
        let [tokens, why] = Layout::vertical([
            Constraint::Fill(1),
            Constraint::Length(why_height(left.width).min(left.height / 2)),
        ])
        .areas(left);
        let replay_h = (right.height * 3 / 5).max(7).min(right.height);
        let [replay, assess] =
            Layout::vertical([Constraint::Length(replay_h), Constraint::Fill(1)]).areas(right);
        a.execs = execs;
        a.tree = tree;
        a.tokens = tokens;
        a.why = why;
        a.replay = replay;
        a.assess = assess;
        return a;
    }
    // The tokens keep a few rows on a short terminal: they are what the inspector is for.
    let top_h = (body.height * 2 / 5)
        .max(10)
        .min(body.height.saturating_sub(8))
        .max(body.height.min(3));
    let [top, bottom] =
        Layout::vertical([Constraint::Length(top_h), Constraint::Fill(1)]).areas(body);
    let [execs, tree, right] = Layout::horizontal([
        Constraint::Percentage(30),
        Constraint::Percentage(35),
        Constraint::Fill(1),
    ])
    .areas(top);
    let replay_h = (right.height * 3 / 5).max(7).min(right.height);
    let [replay, assess] =
        Layout::vertical([Constraint::Length(replay_h), Constraint::Fill(1)]).areas(right);
    let [left, detail_area] = if detail {
        Layout::horizontal([Constraint::Percentage(62), Constraint::Fill(1)]).areas(bottom)
    } else {
        [bottom, Rect::default()]
    };
    let [tokens, why] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(why_height(left.width).min(left.height / 2)),
    ])
    .areas(left);
    a.execs = execs;
    a.tree = tree;
    a.replay = replay;
    a.assess = assess;
    a.tokens = tokens;
    a.why = why;
    a.detail = detail_area;
    a
}
