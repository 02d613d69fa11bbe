//! The export prompt: the path the admitted rows go to, and the settings that wrote them.

use crate::pane::sanitize;
use crate::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use std::path::PathBuf;

use super::{Field, text_box};

/// The export prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportPrompt {
    /// The file name.
    pub field: Field,
    /// The file exists: overwrite it (`o`) or take the free name (`n`)?
    pub clash: Option<PathBuf>,
    /// The next free name, offered on a clash.
    pub free: String,
}

/// Draws the export prompt.
pub fn export(
    t: &Theme,
    p: &ExportPrompt,
    settings: String,
    cwd: &std::path::Path,
    full: Rect,
    buf: &mut Buffer,
) {
    let mut lines = vec![
        Line::raw(
            "Export the admitted set (format gyre/admitted-1): the bytes `gyre admit` writes",
        ),
        Line::styled(format!("for these inputs with {settings}"), t.dim()),
        Line::default(),
        Line::from(vec![
            Span::raw("file: "),
            Span::styled(sanitize(&p.field.text), t.strong()),
            Span::styled("█", t.dim()),
        ]),
        Line::styled(
            format!("in {}", sanitize(&cwd.display().to_string())),
            t.dim(),
        ),
    ];
    match &p.clash {
        Some(path) => {
            lines.push(Line::styled(
                format!("{} exists.", sanitize(&path.display().to_string())),
                t.warn(),
            ));
            lines.push(Line::from(vec![
                Span::styled("o", t.key()),
                Span::raw(" overwrite it · "),
                Span::styled("n", t.key()),
                Span::raw(format!(" write {} instead · ", sanitize(&p.free))),
                Span::styled("Esc", t.key()),
                Span::raw(" edit the name"),
            ]));
        }
        None => lines.push(Line::styled(
            "Enter writes · Ctrl-u clears · Ctrl-w deletes a word · Esc cancels",
            t.dim(),
        )),
    }
    text_box(" export ", lines, full, buf);
}
