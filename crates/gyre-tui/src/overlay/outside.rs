//! The open-outside menu (`O`): one letter per thing to open in the pager or the editor.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Ask, Cx, Edit, OverlayView, Reply, text_box};
use crate::outside::Outside;

/// The open-outside menu: what each letter opens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutsideMenu(pub Vec<OutsideItem>);

impl OverlayView for OutsideMenu {
    fn edit(&mut self, _cx: &Cx, e: Edit) -> Reply {
        let Edit::Char(c) = e else {
            return Reply::stay();
        };
        match self.0.iter().find(|it| it.key == c.to_ascii_lowercase()) {
            Some(it) => Reply::close_and(Ask::Outside(Outside {
                item: it.clone(),
                editor: c.is_ascii_uppercase(),
            })),
            None => {
                let keys: String = self.0.iter().map(|it| it.key).collect();
                Reply::say(format!(
                    "{c:?} opens nothing: one of {keys} (upper case: the editor), or Esc"
                ))
            }
        }
    }

    fn takes_text(&self) -> bool {
        true
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        outside(cx.theme, &self.0, cx.full, buf);
    }
}
use crate::outside::{OutsideItem, program};
use crate::pane::sanitize;
use crate::theme::Theme;

/// Draws the open-outside menu, naming the programs the letters run.
fn outside(t: &Theme, items: &[OutsideItem], full: Rect, buf: &mut Buffer) {
    let env = |k: &str| std::env::var(k).ok();
    let (pager, pvar) = program(false, &env);
    let (editor, evar) = program(true, &env);
    let mut lines: Vec<Line<'static>> = items
        .iter()
        .map(|it| {
            Line::from(vec![
                Span::styled(
                    format!(" {} {} ", it.key, it.key.to_ascii_uppercase()),
                    t.key(),
                ),
                Span::raw(format!(" {} ", it.what)),
                Span::styled(
                    format!(
                        "· {}",
                        gyre_format::note::plural(it.text.lines().count(), "line")
                    ),
                    t.dim(),
                ),
            ])
        })
        .collect();
    if items.is_empty() {
        lines.push(Line::styled("nothing to open: no path on screen", t.dim()));
    }
    lines.push(Line::default());
    lines.push(Line::styled(
        format!(
            "a letter opens it in ${pvar} ({}), an upper-case one in ${evar} ({}), on a \
             temporary copy · Esc cancels",
            sanitize(&pager),
            sanitize(&editor)
        ),
        t.dim(),
    ));
    text_box(" open outside ", lines, full, buf);
}
