//! Overlays over the panes, one file each behind the [`Overlay`] enum: help (keys and a
//! glossary), the search field with its results list, the export prompt, the command palette,
//! the copy, open-outside and go-to menus, the priority editor, "why (not) drawn", the compare
//! view (`compare.rs`), the trainer's-eye row (`row.rs`) and the dashboard (`dashboard.rs`).

pub mod compare;
mod copy;
pub(crate) mod dashboard;
mod export;
mod goto;
mod help;
mod outside;
mod palette;
mod priority;
pub mod row;
mod search;
mod why;

pub use copy::copy;
pub use export::{ExportPrompt, export};
pub use goto::goto;
pub use help::{help, help_max_scroll};
pub use outside::outside;
pub use palette::palette;
pub use priority::{PriorityEditor, priority};
pub use search::search;
pub use why::{why, why_max_scroll};

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget};

use super::copy::CopyItem;
use super::keys::Command;
use super::pane::wrap;
use dashboard::Dash;

/// A line of text being typed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Field {
    /// The text.
    pub text: String,
}

impl Field {
    /// A field holding `s`.
    pub fn new(s: impl Into<String>) -> Self {
        Field { text: s.into() }
    }

    /// Applies an edit.
    pub fn edit(&mut self, e: Edit) {
        match e {
            Edit::Char(c) => self.text.push(c),
            Edit::Backspace => {
                self.text.pop();
            }
            Edit::Clear => self.text.clear(),
            Edit::DeleteWord => {
                // The word before the cursor and the separators after it, so that every press
                // deletes something: `sub/run.jsonl` → `sub/run.` → `sub/` → ``.
                let sep = |c: char| c.is_whitespace() || c == '/' || c == '.' || c == '-';
                let kept = self.text.trim_end_matches(sep).len();
                self.text.truncate(kept);
                let cut = self.text.rfind(sep).map_or(0, |i| i + 1);
                self.text.truncate(cut);
            }
        }
    }
}

/// An edit of a text field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Type a character.
    Char(char),
    /// Delete the last character.
    Backspace,
    /// Clear the field (Ctrl-U).
    Clear,
    /// Delete the last word (Ctrl-W).
    DeleteWord,
}

/// An overlay over the panes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Overlay {
    /// Nothing.
    None,
    /// Keys and glossary, scrolled.
    Help(u16),
    /// Typing a search; `at` is the result chosen in the list.
    Search {
        /// The query.
        field: Field,
        /// The chosen result.
        at: usize,
    },
    /// Confirming the export path.
    Export(ExportPrompt),
    /// The command palette: what is typed, and the command chosen in its list.
    Palette {
        /// The text.
        field: Field,
        /// The chosen command.
        at: usize,
    },
    /// The copy menu: what a letter copies.
    Copy(Vec<CopyItem>),
    /// The open-outside menu: what a letter opens in the pager (upper case: the editor).
    Outside(Vec<crate::outside::OutsideItem>),
    /// The go-to menu: each kind with how many requests of it the execution has.
    GoTo(Vec<(crate::pane::tree::Landmark, usize)>),
    /// Editing the priority.
    Priority(PriorityEditor),
    /// What changed since the pin: the execution chosen in the list.
    Compare(usize),
    /// The trainer's-eye row of the draw at the replay step, from this response token on.
    Row(u64),
    /// The batch dashboard.
    Dashboard(Dash),
    /// Why request `request` of execution `exec` was (not) drawn.
    Why {
        /// Execution index.
        exec: usize,
        /// Request index.
        request: u32,
        /// Rows scrolled.
        scroll: u16,
    },
}

impl Overlay {
    /// Whether the overlay takes typed characters.
    pub fn takes_text(&self) -> bool {
        matches!(
            self,
            Overlay::Search { .. }
                | Overlay::Export(_)
                | Overlay::Palette { .. }
                | Overlay::Priority(_)
                | Overlay::Copy(_)
                | Overlay::Outside(_)
                | Overlay::GoTo(_)
        )
    }
}

/// A box of `w`×`h` (at most the area) centred in `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

pub(crate) fn boxed<'a>(title: impl Into<Line<'a>>) -> Block<'a> {
    Block::bordered()
        .border_type(BorderType::Double)
        .title(title)
}

/// Draws a box holding `lines` (wrapped), as tall as they need, at most the area.
pub(crate) fn text_box(title: &str, lines: Vec<Line<'static>>, full: Rect, buf: &mut Buffer) {
    let width = (full.width * 7 / 10).max(full.width.min(76));
    let lines = wrap(lines, width.saturating_sub(2));
    let height = (lines.len() as u16 + 2).min(full.height);
    let area = centered(full, width, height);
    Clear.render(area, buf);
    Paragraph::new(lines)
        .block(boxed(title.to_string()))
        .render(area, buf);
}

/// Scroll of the help or why overlay after a command.
pub fn scroll(v: u16, c: Command, max: u16) -> u16 {
    match c {
        Command::Up => v.saturating_sub(1),
        Command::Down => v.saturating_add(1).min(max),
        Command::PageUp => v.saturating_sub(10),
        Command::PageDown => v.saturating_add(10).min(max),
        Command::Home => 0,
        Command::End => max,
        _ => v,
    }
}
