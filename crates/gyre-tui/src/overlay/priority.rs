//! The priority editor: classes reordered and dropped, applied on Enter.

use crate::theme::Theme;
use gyre_engine::admit::Class;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::{Ask, Cx, Edit, OverlayView, Reply, text_box};
use crate::keys::Command;

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

impl OverlayView for PriorityEditor {
    fn command(&mut self, _cx: &Cx, c: Command) -> Reply {
        match c {
            Command::Escape => Reply::close(),
            Command::Up | Command::Down => {
                self.cursor(c == Command::Down);
                Reply::stay()
            }
            Command::Enter => Reply::close_and(Ask::Priority(self.priority())),
            _ => Reply::stay(),
        }
    }

    fn edit(&mut self, _cx: &Cx, e: Edit) -> Reply {
        match e {
            Edit::Char('k') => self.cursor(false),
            Edit::Char('j') => self.cursor(true),
            Edit::Char('K') => self.shift(false),
            Edit::Char('J') => self.shift(true),
            Edit::Char(' ' | 'x') => {
                if let Err(m) = self.toggle() {
                    return Reply::say(m);
                }
            }
            _ => {}
        }
        Reply::stay()
    }

    fn takes_text(&self) -> bool {
        true
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        priority(cx.theme, self, cx.full, buf);
    }
}

/// Draws the priority editor.
fn priority(t: &Theme, e: &PriorityEditor, full: Rect, buf: &mut Buffer) {
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
