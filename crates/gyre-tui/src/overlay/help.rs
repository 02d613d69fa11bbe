//! Help: every key from the one key table, and a glossary.

use crate::keys::{self, BINDINGS};
use crate::pane::{fit, wrap};
use crate::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Widget};

use super::{Cx, OverlayView, Reply, boxed, centered, scroll};
use crate::keys::Command;

/// The help overlay's box, its two columns (the right one empty when narrow) and whether it is
/// split.
pub(crate) fn help_columns(
    t: &Theme,
    full: Rect,
) -> (Rect, Vec<Line<'static>>, Vec<Line<'static>>, bool) {
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

/// The help overlay, scrolled this many rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HelpView(pub u16);

impl OverlayView for HelpView {
    fn command(&mut self, cx: &Cx, c: Command) -> Reply {
        if matches!(c, Command::Help | Command::Escape) {
            return Reply::close();
        }
        self.0 = scroll(self.0, c, help_max_scroll(cx.theme, cx.full));
        Reply::stay()
    }

    fn wheel(&mut self, cx: &Cx, down: bool) -> Reply {
        let max = help_max_scroll(cx.theme, cx.full);
        self.0 = if down {
            self.0.saturating_add(3).min(max)
        } else {
            self.0.saturating_sub(3)
        };
        Reply::stay()
    }

    fn sync(&mut self, cx: &Cx) -> bool {
        // A resize can leave less to scroll.
        self.0 = self.0.min(help_max_scroll(cx.theme, cx.full));
        true
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        help(cx.theme, self.0, cx.full, buf);
    }
}

/// Draws the help overlay.
fn help(t: &Theme, scroll: u16, full: Rect, buf: &mut Buffer) {
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
