//! Overlays over the panes: help (keys and a glossary), the search field with its results list,
//! the export prompt, go-to-position, the priority editor and "why (not) drawn".

use std::path::PathBuf;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget};

use gyre_engine::admit::Class;

use super::dashboard::Dash;
use super::keys::{self, BINDINGS, Command};
use super::pane::{Ctx, fit, inner_height, sanitize, wrap};
use super::search::Search;
use super::theme::Theme;

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

/// The priority editor: every class, the listed ones first in priority order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorityEditor {
    /// Classes with whether they are listed.
    pub classes: Vec<(Class, bool)>,
    /// The class the cursor is on.
    pub at: usize,
}

impl PriorityEditor {
    /// An editor on `priority`.
    pub fn new(priority: &[Class]) -> Self {
        let mut classes: Vec<(Class, bool)> = priority.iter().map(|&c| (c, true)).collect();
        for c in Class::DEFAULT_PRIORITY {
            if !priority.contains(&c) {
                classes.push((c, false));
            }
        }
        PriorityEditor { classes, at: 0 }
    }

    /// The priority it stands for (listed classes in order).
    pub fn priority(&self) -> Vec<Class> {
        self.classes
            .iter()
            .filter(|(_, on)| *on)
            .map(|(c, _)| *c)
            .collect()
    }

    /// Moves the cursor.
    pub fn cursor(&mut self, down: bool) {
        let n = self.classes.len();
        self.at = if down {
            (self.at + 1).min(n - 1)
        } else {
            self.at.saturating_sub(1)
        };
    }

    /// Moves the class under the cursor up or down.
    pub fn shift(&mut self, down: bool) {
        let j = if down {
            (self.at + 1).min(self.classes.len() - 1)
        } else {
            self.at.saturating_sub(1)
        };
        self.classes.swap(self.at, j);
        self.at = j;
    }

    /// Drops the class under the cursor or puts it back (one class always stays listed).
    pub fn toggle(&mut self) -> Result<(), &'static str> {
        let listed = self.classes.iter().filter(|(_, on)| *on).count();
        let (_, on) = &mut self.classes[self.at];
        if *on && listed == 1 {
            return Err("the priority must list at least one class");
        }
        *on = !*on;
        Ok(())
    }
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
    /// Typing a position to go to.
    Goto(Field),
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
            Overlay::Search { .. } | Overlay::Export(_) | Overlay::Goto(_) | Overlay::Priority(_)
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

fn boxed<'a>(title: impl Into<Line<'a>>) -> Block<'a> {
    Block::bordered()
        .border_type(BorderType::Double)
        .title(title)
}

/// The help overlay's box, its two columns (the right one empty when narrow) and whether it is
/// split.
fn help_columns(t: &Theme, full: Rect) -> (Rect, Vec<Line<'static>>, Vec<Line<'static>>, bool) {
    let area = centered(full, full.width * 9 / 10, full.height * 9 / 10);
    let two = area.width >= 100;
    let col_w = if two {
        area.width.saturating_sub(2) / 2
    } else {
        area.width.saturating_sub(2)
    };
    // A key and its text; the text wraps under itself, not under the key. The key column is
    // as wide as the longest key (or term) and a space, a third of the column at most.
    let longest = BINDINGS
        .iter()
        .map(|b| keys::keys_label(b).chars().count())
        .chain(keys::EDIT_KEYS.iter().map(|(k, _)| k.chars().count()))
        .chain(keys::GLOSSARY.iter().map(|(k, _)| k.chars().count()))
        .max()
        .unwrap_or(0);
    let key_w = (longest + 3).min(col_w as usize / 3).max(8);
    let entry = |key: String, text: &str| -> Vec<Line<'static>> {
        let rows = wrap(
            vec![Line::raw(text.to_string())],
            col_w.saturating_sub(key_w as u16 + 1),
        );
        rows.into_iter()
            .enumerate()
            .map(|(i, row)| {
                let head = if i == 0 {
                    Span::styled(
                        format!("  {:<w$}", fit(&key, key_w - 3), w = key_w - 2),
                        t.key(),
                    )
                } else {
                    Span::raw(" ".repeat(key_w))
                };
                let mut spans = vec![head];
                spans.extend(row.spans);
                Line::from(spans)
            })
            .collect()
    };
    let heading = |s: &'static str| Line::styled(s, t.strong().add_modifier(Modifier::UNDERLINED));
    let mut groups: Vec<Vec<Line<'static>>> = Vec::new();
    let mut group = "";
    for b in BINDINGS {
        if b.group != group {
            group = b.group;
            groups.push(vec![heading(group)]);
        }
        let last = groups.last_mut().expect("a group");
        last.extend(entry(keys::keys_label(b), b.help));
    }
    let mut fields = vec![heading("Input fields")];
    for (k, v) in keys::EDIT_KEYS {
        fields.extend(entry(k.to_string(), v));
    }
    groups.push(fields);
    let mut glossary = vec![heading("Glossary")];
    for (k, v) in keys::GLOSSARY {
        glossary.extend(entry(k.to_string(), v));
    }
    groups.push(glossary);
    let total: usize = groups.iter().map(|g| g.len() + 1).sum();
    let mut left: Vec<Line<'static>> = vec![
        Line::styled(
            "gyre inspector: which tokens your policy is trained on, and why",
            t.strong(),
        ),
        Line::default(),
    ];
    let mut right: Vec<Line<'static>> = vec![
        Line::styled("Keys come from one table (docs/keys.md)", t.dim()),
        Line::default(),
    ];
    let mut n = 0;
    for g in groups {
        let col = if two && n + g.len() / 2 >= total / 2 {
            &mut right
        } else {
            &mut left
        };
        n += g.len() + 1;
        col.extend(g);
        col.push(Line::default());
    }
    let tail = if two { &mut right } else { &mut left };
    tail.extend(wrap(
        vec![Line::styled(
            "Mouse: click a pane, a row, a token or a link; the wheel scrolls the pane under the \
             pointer. Esc or ? closes this overlay.",
            t.dim(),
        )],
        col_w,
    ));
    (area, left, right, two)
}

/// How far the help overlay scrolls: until its last line is at the bottom.
pub fn help_max_scroll(t: &Theme, full: Rect) -> u16 {
    let (area, left, right, _) = help_columns(t, full);
    let lines = left.len().max(right.len()) as u16;
    lines.saturating_sub(area.height.saturating_sub(2))
}

/// Draws the help overlay.
pub fn help(t: &Theme, scroll: u16, full: Rect, buf: &mut Buffer) {
    let (area, left, right, two) = help_columns(t, full);
    Clear.render(area, buf);
    let block = boxed(" help · Esc closes · j/k scroll ");
    let inner = block.inner(area);
    block.render(area, buf);
    if two {
        let [l, r] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Fill(1)]).areas(inner);
        Paragraph::new(left).scroll((scroll, 0)).render(l, buf);
        Paragraph::new(right).scroll((scroll, 0)).render(r, buf);
    } else {
        Paragraph::new(left).scroll((scroll, 0)).render(inner, buf);
    }
}

/// Draws a box holding `lines` (wrapped), as tall as they need, at most the area.
fn text_box(title: &str, lines: Vec<Line<'static>>, full: Rect, buf: &mut Buffer) {
    let width = (full.width * 7 / 10).max(full.width.min(76));
    let lines = wrap(lines, width.saturating_sub(2));
    let height = (lines.len() as u16 + 2).min(full.height);
    let area = centered(full, width, height);
    Clear.render(area, buf);
    Paragraph::new(lines)
        .block(boxed(title.to_string()))
        .render(area, buf);
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

/// Draws the go-to-position field.
pub fn goto(t: &Theme, f: &Field, len: u64, full: Rect, buf: &mut Buffer) {
    let lines = vec![
        Line::from(vec![
            Span::raw("position: "),
            Span::styled(sanitize(&f.text), t.strong()),
            Span::styled("█", t.dim()),
        ]),
        Line::styled(
            format!("1 to {len} on this path · Enter goes there · Esc cancels"),
            t.dim(),
        ),
    ];
    text_box(" go to position ", lines, full, buf);
}

/// Draws the priority editor.
pub fn priority(t: &Theme, e: &PriorityEditor, full: Rect, buf: &mut Buffer) {
    let mut lines = vec![
        Line::styled(
            "Classes are drawn from in this order; a dropped class is never drawn.",
            t.dim(),
        ),
        Line::default(),
    ];
    let mut rank = 0;
    for (i, (c, on)) in e.classes.iter().enumerate() {
        let label = if *on {
            rank += 1;
            format!("{rank}. {}", c.name())
        } else {
            format!("–  {} (dropped)", c.name())
        };
        let style = if i == e.at {
            t.selected(true)
        } else if *on {
            t.strong()
        } else {
            t.dim()
        };
        lines.push(Line::styled(format!("  {label:<28}"), style));
    }
    lines.push(Line::default());
    lines.push(Line::styled(
        format!(
            "new priority: {}",
            e.priority()
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(">")
        ),
        t.strong(),
    ));
    lines.push(Line::styled(
        "↑↓ choose · K/J move up/down · Space drop/put back · Enter re-runs · Esc cancels",
        t.dim(),
    ));
    text_box(" priority ", lines, full, buf);
}

/// Draws the search field with the results so far.
pub fn search(ctx: &Ctx, s: &Search, field: &Field, at: usize, full: Rect, buf: &mut Buffer) {
    let t = ctx.theme;
    let width = (full.width * 8 / 10).max(full.width.min(76));
    let height = (full.height * 7 / 10).max(full.height.min(10));
    let area = centered(full, width, height);
    Clear.render(area, buf);
    let block = boxed(" search every execution ");
    let inner = block.inner(area);
    block.render(area, buf);
    let mut lines = vec![
        Line::from(vec![
            Span::styled("/", t.key()),
            Span::raw(sanitize(&field.text)),
            Span::styled("█", t.dim()),
        ]),
        Line::styled(s.status(), t.dim()),
    ];
    let room = (inner.height as usize).saturating_sub(3);
    let first = at.saturating_sub(room.saturating_sub(1));
    for (i, h) in s.hits.iter().enumerate().skip(first).take(room) {
        let style = if i == at {
            t.selected(true)
        } else {
            ratatui::style::Style::new()
        };
        lines.push(Line::styled(
            super::pane::fit(&s.describe(ctx, h), inner.width as usize),
            style,
        ));
    }
    let hint = Line::styled(
        "↑↓ choose · Enter goes there (n/N: next/previous) · Esc clears the search",
        t.dim(),
    );
    Paragraph::new(lines).render(inner, buf);
    if inner.height > 0 {
        let last = Rect {
            y: inner.bottom() - 1,
            height: 1,
            ..inner
        };
        Paragraph::new(hint).render(last, buf);
    }
}

/// The box and wrapped lines of "why (not) drawn" for a request.
fn why_box(ctx: &Ctx, request: u32, full: Rect) -> (Rect, Vec<Line<'static>>) {
    let width = (full.width * 8 / 10).max(full.width.min(76));
    let mut lines = super::pane::detail::fate_lines(ctx, request, true);
    lines.push(Line::default());
    lines.push(Line::styled(
        "j/k scroll · Esc or y closes · gyre why FILE --execution E --request R prints the same",
        ctx.theme.dim(),
    ));
    let lines = wrap(lines, width.saturating_sub(2));
    let height = (lines.len() as u16 + 2).min(full.height);
    (centered(full, width, height), lines)
}

/// How far "why (not) drawn" scrolls.
pub fn why_max_scroll(ctx: &Ctx, request: u32, full: Rect) -> u16 {
    let (area, lines) = why_box(ctx, request, full);
    lines
        .len()
        .saturating_sub(inner_height(area))
        .min(u16::MAX as usize) as u16
}

/// Draws "why (not) drawn" for a request.
pub fn why(ctx: &Ctx, request: u32, scroll: u16, full: Rect, buf: &mut Buffer) {
    let (area, lines) = why_box(ctx, request, full);
    Clear.render(area, buf);
    Paragraph::new(lines)
        .scroll((scroll, 0))
        .block(boxed(format!(" why was {} (not) drawn? ", ctx.id(request))))
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
