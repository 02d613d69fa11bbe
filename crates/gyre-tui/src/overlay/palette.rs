//! The command palette (`:`): the field and the commands its first word starts.

use crate::palette::matches;
use crate::pane::sanitize;
use crate::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Ask, Cx, Edit, Field, OverlayView, Reply, text_box};
use crate::keys::Command;

/// The palette's field and the command chosen in its list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PaletteView {
    /// The text.
    pub field: Field,
    /// The chosen command.
    pub at: usize,
}

impl PaletteView {
    /// The palette holding `text`.
    pub fn new(text: impl Into<String>) -> Self {
        PaletteView {
            field: Field::new(text),
            at: 0,
        }
    }
}

impl OverlayView for PaletteView {
    fn command(&mut self, _cx: &Cx, c: Command) -> Reply {
        match c {
            Command::Escape => Reply::close(),
            Command::Enter => Reply::close_and(Ask::Palette(crate::palette::parse(
                &self.field.text,
                self.at,
            ))),
            Command::FocusNext => {
                if let Some(t) = crate::palette::complete(&self.field.text, self.at) {
                    self.field.text = t;
                    self.at = 0;
                }
                Reply::stay()
            }
            Command::Up | Command::Down => {
                let last = matches(&self.field.text).len().saturating_sub(1);
                self.at = if c == Command::Up {
                    self.at.saturating_sub(1)
                } else {
                    (self.at + 1).min(last)
                };
                Reply::stay()
            }
            _ => Reply::stay(),
        }
    }

    fn edit(&mut self, _cx: &Cx, e: Edit) -> Reply {
        self.field.edit(e);
        self.at = 0;
        Reply::stay()
    }

    fn takes_text(&self) -> bool {
        true
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        let len = cx.ctx.as_ref().and_then(|c| c.path).map_or(0, |p| p.len);
        palette(cx.theme, &self.field, self.at, len, cx.full, buf);
    }
}

/// Draws the palette: `len` is the length of the path on screen (0: none).
fn palette(t: &Theme, f: &Field, at: usize, len: u64, full: Rect, buf: &mut Buffer) {
    let found = matches(&f.text);
    // Borders, the field, a blank and two lines of keys take 6 rows; the list gets the rest.
    let room = (full.height as usize).saturating_sub(8).max(1);
    let at = at.min(found.len().saturating_sub(1));
    // One row per command: its help is cut to the box (text_box's width, less its borders).
    let inner = (full.width * 7 / 10)
        .max(full.width.min(76))
        .saturating_sub(2) as usize;
    let room_help = inner.saturating_sub(34);
    let first = (at + 1).saturating_sub(room);
    let mut lines = vec![Line::from(vec![
        Span::raw(": "),
        Span::styled(sanitize(&f.text), t.strong()),
        Span::styled("█", t.dim()),
    ])];
    if found.is_empty() && !f.text.trim().chars().all(|c| c.is_ascii_digit()) {
        lines.push(Line::styled("  no command starts so", t.warn()));
    }
    for (i, e) in found.iter().enumerate().skip(first).take(room) {
        let name = match e.arg {
            Some(a) => format!("{} {a}", e.name),
            None => e.name.clone(),
        };
        let style = if i == at { t.strong() } else { t.dim() };
        let mut help: String = e.help.chars().take(room_help).collect();
        if help.chars().count() < e.help.chars().count() {
            help.pop();
            help.push('…');
        }
        lines.push(Line::from(vec![
            Span::styled(if i == at { "▶ " } else { "  " }, t.key()),
            Span::styled(format!("{name:<22}"), style),
            Span::styled(format!("{:<10}", e.keys), t.key()),
            Span::styled(help, style),
        ]));
    }
    lines.push(Line::default());
    let position = if len > 0 {
        format!("a number goes to that position (1 to {len})")
    } else {
        "no path on screen for a position".into()
    };
    lines.push(Line::styled(
        format!("Tab completes · ↑ ↓ choose · Enter runs · {position} · Esc cancels"),
        t.dim(),
    ));
    text_box(" command ", lines, full, buf);
}
