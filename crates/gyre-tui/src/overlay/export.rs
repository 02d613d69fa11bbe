//! The export prompt: the path the admitted rows go to, and the settings that wrote them.

use crate::pane::sanitize;
use crate::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use std::path::{Path, PathBuf};

use super::{Ask, Cx, Edit, Field, OverlayView, Reply, text_box};
use crate::keys::Command;

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

impl ExportPrompt {
    /// The prompt offering `free`.
    pub fn new(free: String) -> Self {
        ExportPrompt {
            field: Field::new(free.clone()),
            clash: None,
            free,
        }
    }
}

impl OverlayView for ExportPrompt {
    fn command(&mut self, cx: &Cx, c: Command) -> Reply {
        match c {
            // On a clash, Esc goes back to editing the name.
            Command::Escape if self.clash.is_some() => {
                self.clash = None;
                Reply::stay()
            }
            Command::Escape => Reply::close(),
            Command::Enter if self.clash.is_none() => {
                let name = self.field.text.trim().to_string();
                match export_path(cx.cwd, &name) {
                    Some(path) if path.exists() || cx.exporting.contains(&path) => {
                        self.free = free_name(cx.cwd, cx.exporting, &name);
                        self.clash = Some(path);
                        Reply::stay()
                    }
                    _ => Reply::close_and(Ask::Export { name, force: false }),
                }
            }
            _ => Reply::stay(),
        }
    }

    fn edit(&mut self, _cx: &Cx, e: Edit) -> Reply {
        if self.clash.is_none() {
            self.field.edit(e);
            return Reply::stay();
        }
        match e {
            Edit::Char('o') => Reply::close_and(Ask::Export {
                name: self.field.text.trim().to_string(),
                force: true,
            }),
            Edit::Char('n') => Reply::close_and(Ask::Export {
                name: self.free.clone(),
                force: false,
            }),
            _ => Reply::stay(),
        }
    }

    fn takes_text(&self) -> bool {
        true
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        export(cx.theme, self, cx.settings.clone(), cx.cwd, cx.full, buf);
    }
}

/// Where an export named `name` goes: under `cwd` unless absolute; none for no name or `-`
/// (that would be stdout: the screen itself).
pub fn export_path(cwd: &Path, name: &str) -> Option<PathBuf> {
    if name.is_empty() || name == "-" {
        return None;
    }
    Some(if Path::new(name).is_absolute() {
        PathBuf::from(name)
    } else {
        cwd.join(name)
    })
}

/// `name` when no file (or export under way) has it, else the first free `stem-N.ext`
/// beside it: `runs.jsonl.gz` → `runs-1.jsonl.gz`.
pub fn free_name(cwd: &Path, exporting: &[PathBuf], name: &str) -> String {
    let free =
        |name: &str| export_path(cwd, name).is_some_and(|p| !p.exists() && !exporting.contains(&p));
    if free(name) {
        return name.into();
    }
    let file = name.rfind('/').map_or(0, |i| i + 1);
    let dot = name[file..]
        .find('.')
        .filter(|&i| i > 0)
        .map_or(name.len(), |i| file + i);
    let (stem, ext) = name.split_at(dot);
    (1..)
        .map(|n| format!("{stem}-{n}{ext}"))
        .find(|n| free(n))
        .expect("some name is free")
}

/// Draws the export prompt.
fn export(t: &Theme, p: &ExportPrompt, settings: String, cwd: &Path, full: Rect, buf: &mut Buffer) {
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
