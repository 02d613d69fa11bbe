//! Overlays over the panes, one file each behind the [`OverlayView`] trait: help (keys and a
//! glossary), the search field with its results list, the export prompt, the command palette,
//! the copy, open-outside and go-to menus, the priority editor, "why (not) drawn", the compare
//! view (`compare.rs`), the trainer's-eye row (`row.rs`), the dashboard (`dashboard.rs`) and
//! the audit view (`audit.rs`).
//!
//! An overlay holds its own state, answers keys and typed text with a [`Reply`] (close or stay,
//! and what it asks of the app: [`Ask`]) and draws itself from a read-only [`Cx`]. The app
//! knows no overlay by name beyond the command that opens it: a new overlay is its file plus
//! one line in the `overlays!` list below (and its key in the key table).

mod audit;
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

pub use audit::{AuditTab, AuditView};
pub use compare::CompareView;
pub use copy::CopyMenu;
pub use dashboard::Dash;
pub use export::{ExportPrompt, export_path, free_name};
pub use goto::GoToMenu;
pub use help::{HelpView, help_max_scroll};
pub use outside::OutsideMenu;
pub use palette::PaletteView;
pub use priority::PriorityEditor;
pub use row::RowView;
pub use search::SearchView;
pub use why::{WhyView, why_max_scroll};

use std::path::{Path, PathBuf};

use gyre_engine::admit::Class;
use gyre_engine::paint::ColorMode;
use gyre_engine::stats::Breakdown;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget};

use super::keys::Command;
use super::palette::Parsed;
use super::pane::tree::Landmark;
use super::pane::{Ctx, wrap};
use super::search::Search;
use super::theme::Theme;
use super::whatif::{Compare, WhatIf};
use crate::outside::Outside;
use crate::vocab::Effect;

/// What an overlay reads to answer a key and to draw: the screen, the data on screen (none
/// while loading) and what the app has worked out for it.
pub struct Cx<'a> {
    /// Palette.
    pub theme: &'a Theme,
    /// The whole screen.
    pub full: Rect,
    /// The pane context, once there is an execution.
    pub ctx: Option<Ctx<'a>>,
    /// The search and its matches.
    pub search: &'a Search,
    /// The dashboard's figures of the results on screen, once counted.
    pub breakdown: Option<&'a Breakdown>,
    /// The pin compared with the results on screen, once compared.
    pub comparison: Option<&'a Compare>,
    /// The lens and sweep of the results on screen, once worked out.
    pub whatif: Option<&'a WhatIf>,
    /// Their progress.
    pub whatif_progress: Option<(usize, usize)>,
    /// The pinned settings' label, when a pin of the batch on screen is held.
    pub pinned: Option<&'a str>,
    /// The settings line of exports.
    pub settings: String,
    /// Where exports go.
    pub cwd: &'a Path,
    /// Exports still being written.
    pub exporting: &'a [PathBuf],
}

/// What the app should do for an overlay, after its key: the overlay itself has already
/// changed its own state.
#[derive(Clone, Debug, PartialEq)]
pub enum Ask {
    /// A status message.
    Say(String),
    /// Apply an effect to the selection, as a pane's key would.
    Apply(Effect),
    /// Colour tokens by this.
    Colour(ColorMode),
    /// Export the admitted rows to this file (overwriting it when `force`).
    Export {
        /// The file name as typed.
        name: String,
        /// Overwrite an existing file.
        force: bool,
    },
    /// Run what the palette parsed.
    Palette(Parsed),
    /// Re-run with this priority (when it differs).
    Priority(Vec<Class>),
    /// Re-run with this J_max (when it differs).
    Jmax(u32),
    /// Put text on the clipboard.
    Clipboard(String),
    /// Open this in the pager or the editor.
    Outside(Outside),
    /// Select the next (`true`) or previous request of a kind in the tree.
    GoTo(Landmark, bool),
    /// Search every execution for this query.
    Search(String),
    /// Clear the search.
    ClearSearch,
    /// Go to the search result chosen in the list.
    OpenHit(usize),
    /// Highlight this trained sample of the selected execution (`None`: none).
    Sample(Option<u32>),
}

/// An overlay's answer to a key: whether it closes, and what it asks of the app (in order,
/// after it has closed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    /// The overlay closes.
    pub close: bool,
    /// What the app does for it.
    pub asks: Vec<Ask>,
}

impl Reply {
    /// The overlay stays open (its own state may have changed).
    pub fn stay() -> Self {
        Reply::default()
    }

    /// The overlay closes.
    pub fn close() -> Self {
        Reply {
            close: true,
            asks: Vec::new(),
        }
    }

    /// The overlay closes, and the app does `ask`.
    pub fn close_and(ask: Ask) -> Self {
        Reply {
            close: true,
            asks: vec![ask],
        }
    }

    /// The overlay stays, and the app does `ask`.
    pub fn stay_and(ask: Ask) -> Self {
        Reply {
            close: false,
            asks: vec![ask],
        }
    }

    /// The overlay stays and the status line says `m`.
    pub fn say(m: impl Into<String>) -> Self {
        Reply::stay_and(Ask::Say(m.into()))
    }
}

/// What an overlay reads that the app works out only while something shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reads {
    /// The lens and sweep ([`Cx::whatif`]).
    pub whatif: bool,
    /// The dashboard's figures ([`Cx::breakdown`]).
    pub breakdown: bool,
    /// The comparison with the pin ([`Cx::comparison`]).
    pub comparison: bool,
}

/// One overlay: its state, its keys and its drawing.
pub trait OverlayView {
    /// A bound command while the overlay is open (Esc and the key that opened it close it,
    /// as the overlay decides). By default Esc closes it and every other command is ignored:
    /// the letter menus, which act on typed characters alone.
    fn command(&mut self, _cx: &Cx, c: Command) -> Reply {
        if c == Command::Escape {
            return Reply::close();
        }
        Reply::stay()
    }

    /// A typed character or field edit (only overlays that [`take text`](Self::takes_text)).
    fn edit(&mut self, _cx: &Cx, _e: Edit) -> Reply {
        Reply::stay()
    }

    /// The wheel anywhere on the screen.
    fn wheel(&mut self, _cx: &Cx, _down: bool) -> Reply {
        Reply::stay()
    }

    /// Whether it takes typed characters (keys then go to [`edit`](Self::edit)).
    fn takes_text(&self) -> bool {
        false
    }

    /// Brings the overlay in line with the state after each step (a resize, new results, a
    /// recording read again); false closes it (what it shows is gone).
    fn sync(&mut self, _cx: &Cx) -> bool {
        true
    }

    /// The results on screen were replaced.
    fn new_results(&mut self) {}

    /// What the app is to work out for it while it is open.
    fn reads(&self) -> Reads {
        Reads::default()
    }

    /// Draws the overlay over the screen ([`Cx::full`]).
    fn render(&self, cx: &Cx, buf: &mut Buffer);
}

/// The one registration of each overlay: its variant of [`Overlay`] and the type holding its
/// state, which implements [`OverlayView`].
macro_rules! overlays {
    ($($(#[$doc:meta])* $name:ident($ty:ty),)*) => {
        /// An overlay over the panes.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Overlay {
            /// Nothing.
            None,
            $($(#[$doc])* $name($ty),)*
        }

        impl Overlay {
            /// The open overlay.
            pub fn view(&self) -> Option<&dyn OverlayView> {
                match self {
                    Overlay::None => None,
                    $(Overlay::$name(o) => Some(o),)*
                }
            }

            /// The open overlay, to change.
            pub fn view_mut(&mut self) -> Option<&mut dyn OverlayView> {
                match self {
                    Overlay::None => None,
                    $(Overlay::$name(o) => Some(o),)*
                }
            }
        }
    };
}

overlays! {
    /// Keys and glossary, scrolled.
    Help(HelpView),
    /// Typing a search, with its results.
    Search(SearchView),
    /// Confirming the export path.
    Export(ExportPrompt),
    /// The command palette.
    Palette(PaletteView),
    /// The copy menu: what a letter copies.
    Copy(CopyMenu),
    /// The open-outside menu: what a letter opens in the pager (upper case: the editor).
    Outside(OutsideMenu),
    /// The go-to menu: each kind with how many requests of it the execution has.
    GoTo(GoToMenu),
    /// Editing the priority.
    Priority(PriorityEditor),
    /// What changed since the pin.
    Compare(CompareView),
    /// The trainer's-eye row of the draw at the replay step.
    Row(RowView),
    /// The batch dashboard.
    Dashboard(Dash),
    /// Why a request was (not) drawn.
    Why(WhyView),
    /// The audit's findings by kind, and the execution's samples.
    Audit(AuditView),
}

impl Overlay {
    /// Whether the overlay takes typed characters.
    pub fn takes_text(&self) -> bool {
        self.view().is_some_and(|o| o.takes_text())
    }

    /// What the open overlay reads.
    pub fn reads(&self) -> Reads {
        self.view().map_or(Reads::default(), |o| o.reads())
    }
}

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
