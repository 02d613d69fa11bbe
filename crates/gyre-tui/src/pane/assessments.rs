//! The assessments pane: the closure record, then the assessments grouped per artifact
//! version under a header that sums up the whole group, each with every reason it did not
//! count (from [`gyre_engine::assess`]). Times are relative to the execution start.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::widgets::{Paragraph, Widget};

use crate::keys::Command;
use gyre_engine::assess::{self, Miss, Scoring, Verdict, rel, value_text};
use gyre_engine::score::Outcome;

use super::{Ctx, Effect, Links, Pane, PaneView, Piece, fit, inner_height, inner_width, sanitize};

/// The assessments pane's state.
#[derive(Clone, Debug, Default)]
pub struct AssessmentsPane {
    /// The selected assessment (index into the execution's assessments).
    pub selected: Option<usize>,
    /// First row shown.
    pub scroll: usize,
    /// (execution, generation) the selection was made for.
    key: Option<(usize, u64)>,
}

impl AssessmentsPane {
    /// Scrolls the selected assessment into view.
    fn follow(&mut self, ctx: &Ctx) {
        let (links, order) = content(ctx, inner_width(ctx.areas.assess));
        let h = inner_height(ctx.areas.assess).max(1);
        if let Some(r) = self
            .selected
            .and_then(|s| order.iter().position(|&(_, i)| i == s))
        {
            let row = order[r].0;
            if row < self.scroll {
                self.scroll = row;
            } else if row >= self.scroll + h {
                self.scroll = row + 1 - h;
            }
        }
        self.scroll = self.scroll.min(links.rows.len().saturating_sub(h));
    }
}

impl PaneView for AssessmentsPane {
    /// A new execution starts at the reward (else the first assessment).
    fn sync(&mut self, ctx: &Ctx) {
        let key = (ctx.sel.exec, ctx.sel.generation);
        if self.key == Some(key) {
            return;
        }
        let new_exec = self.key.is_none_or(|k| k.0 != key.0);
        self.key = Some(key);
        let exec = ctx.exec();
        if new_exec || self.selected.is_some_and(|i| i >= exec.assessments.len()) {
            self.selected = match ctx.outcome() {
                Outcome::Scored { assessment, .. } => Some(*assessment),
                _ => (!exec.assessments.is_empty()).then_some(0),
            };
            self.scroll = 0;
        }
        self.follow(ctx);
    }

    /// Keys while focused: Up/Down between assessments, Enter goes to the branch assessed.
    fn command(&mut self, ctx: &Ctx, c: Command) -> Vec<Effect> {
        let (links, order) = content(ctx, inner_width(ctx.areas.assess));
        let h = inner_height(ctx.areas.assess).max(1);
        let at = self
            .selected
            .and_then(|s| order.iter().position(|&(_, i)| i == s));
        let pick = |k: usize| order.get(k).map(|&(_, i)| i);
        match c {
            Command::Enter => {
                return at
                    .and_then(|k| links.rows[order[k].0].first()?.jump.clone())
                    .into_iter()
                    .collect();
            }
            Command::Up => self.selected = at.and_then(|k| pick(k.saturating_sub(1))),
            Command::Down => {
                self.selected = at.map_or(pick(0), |k| pick((k + 1).min(order.len() - 1)))
            }
            Command::Home => {
                self.selected = pick(0);
                self.scroll = 0;
            }
            Command::End => {
                self.selected = order.last().map(|&(_, i)| i);
                self.scroll = links.rows.len().saturating_sub(h);
            }
            Command::PageUp | Command::PageDown => {
                if let Some(s) = super::scroll(self.scroll, c, links.rows.len(), h) {
                    self.scroll = s;
                }
                return Vec::new();
            }
            _ => return Vec::new(),
        }
        self.follow(ctx);
        Vec::new()
    }

    /// A click selects the assessment there and goes to its branch.
    fn click(&mut self, ctx: &Ctx, _x: u16, y: u16) -> Vec<Effect> {
        let a = ctx.areas.assess;
        let Some(cy) = y.checked_sub(a.y + 1) else {
            return Vec::new();
        };
        let (links, order) = content(ctx, inner_width(a));
        let row = self.scroll + cy as usize;
        match order.iter().find(|&&(r, _)| r == row) {
            Some(&(r, i)) => {
                self.selected = Some(i);
                links.rows[r]
                    .first()
                    .and_then(|p| p.jump.clone())
                    .into_iter()
                    .collect()
            }
            None => Vec::new(),
        }
    }

    /// The wheel moves the selection.
    fn wheel(&mut self, ctx: &Ctx, down: bool) -> Vec<Effect> {
        self.command(ctx, if down { Command::Down } else { Command::Up });
        Vec::new()
    }

    /// Draws the pane.
    fn render(&self, ctx: &Ctx, area: Rect, buf: &mut Buffer) {
        let (links, order) = content(ctx, inner_width(area));
        let sel = self
            .selected
            .and_then(|s| order.iter().find(|&&(_, i)| i == s))
            .map(|&(r, _)| (r, 0));
        let title = match ctx.outcome() {
            Outcome::Scored { reward, .. } => format!(" Assessments · reward {reward:.2} "),
            Outcome::Dummy => " Assessments · dummy (no artifact) ".into(),
            Outcome::Excluded(e) => format!(" Assessments · excluded: {e} "),
        };
        Paragraph::new(links.lines(sel, ctx.theme.selected(ctx.focused(Pane::Assessments))))
            .scroll((self.scroll.min(u16::MAX as usize) as u16, 0))
            .block(ctx.block(Pane::Assessments, title))
            .render(area, buf);
    }
}

/// The pane's rows at `width` columns, and (row, assessment index) of each assessment row.
pub fn content(ctx: &Ctx, width: u16) -> (Links, Vec<(usize, usize)>) {
    let exec = ctx.exec();
    let t = ctx.theme;
    let s: Scoring = assess::scoring(exec, ctx.outcome());
    let w = width as usize;
    let mut rows: Vec<Vec<Piece>> = Vec::new();
    let mut order = Vec::new();
    match &s.closure {
        Some(c) => {
            let what = match (&c.artifact, &c.version) {
                (Some(a), Some(v)) => format!("{} v{}", value_text(a), value_text(v)),
                (Some(a), None) => format!("{} (no version)", value_text(a)),
                _ => "no artifact".into(),
            };
            let committed = c
                .committed
                .as_deref()
                .map(|r| format!(" · committed {r}"))
                .unwrap_or_default();
            rows.push(vec![
                Piece::text("closure ", t.strong()),
                Piece::text(
                    fit(
                        &sanitize(&format!("{} · {}{committed} · {what}", rel(c.t), c.status)),
                        w.saturating_sub(8),
                    ),
                    if c.status == "completed" {
                        t.dim()
                    } else {
                        t.warn()
                    },
                ),
            ]);
        }
        None => rows.push(vec![Piece::text(
            fit("no closure: the execution is open (excluded)", w),
            t.bad(),
        )]),
    }
    rows.push(vec![Piece::text(
        fit(
            &match s.deadline {
                Some(d) => format!("budget end {}", rel(d)),
                None => "no budget".to_string(),
            },
            w,
        ),
        t.dim(),
    )]);
    if exec.assessments.is_empty() {
        rows.push(vec![Piece::text("no assessments", t.dim())]);
    }
    for g in &s.groups {
        let style = match g.verdict {
            Verdict::Reward { .. } => t.good().add_modifier(Modifier::BOLD),
            Verdict::NotClosureVersion => t.dim().add_modifier(Modifier::BOLD),
            _ => t.strong(),
        };
        rows.push(vec![Piece::text(fit(&sanitize(&g.header()), w), style)]);
        for &i in &g.members {
            let a = &exec.assessments[i].record;
            let st = &s.standings[i];
            let mark = if a.valid {
                format!("  ✓ {:.2}", a.score.unwrap_or(0.0))
            } else {
                "  ✗ failed".into()
            };
            let jump = match a.branch.as_deref().map(|b| (b, exec.request_index(b))) {
                Some((_, Some(r))) => Effect::SelectRequest(r),
                Some((b, None)) => Effect::Message(format!(
                    "branch {:?} is not a request of this execution",
                    sanitize(b)
                )),
                None => Effect::Message("this assessment names no branch".into()),
            };
            let mut rest = String::new();
            if let Some(e) = a.error.as_ref().filter(|_| !a.valid) {
                rest.push_str(&format!(" ({})", value_text(e)));
            }
            if let Some(at) = &a.attempt {
                rest.push_str(&format!(" #{}", value_text(at)));
            }
            rest.push_str(&format!("  {}", rel(st.t)));
            if let Some(b) = &a.branch {
                rest.push_str(&format!(" → {b}"));
            }
            let mark_w = mark.chars().count();
            let mut pieces = vec![
                Piece::link(mark, if a.valid { t.good() } else { t.bad() }, jump),
                Piece::text(fit(&sanitize(&rest), w.saturating_sub(mark_w)), t.dim()),
            ];
            let used: usize = pieces.iter().map(|p| p.span.width()).sum();
            if st.reward {
                pieces.push(Piece::text(
                    fit(" ◀ reward", w.saturating_sub(used)),
                    t.good().add_modifier(Modifier::BOLD),
                ));
            } else if !st.misses.is_empty() {
                let why: Vec<String> = st.misses.iter().map(miss_text).collect();
                pieces.push(Piece::text(
                    fit(&format!(" · {}", why.join("; ")), w.saturating_sub(used)),
                    t.warn(),
                ));
            }
            order.push((rows.len(), i));
            rows.push(pieces);
        }
    }
    (Links { rows }, order)
}

fn miss_text(m: &Miss) -> String {
    sanitize(&m.text())
}
