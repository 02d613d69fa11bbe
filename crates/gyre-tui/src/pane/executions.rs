//! The executions list: every execution with its status, reward, advantage, `L_i` and draws,
//! sorted and filtered.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Cell as TCell, Paragraph, Row as TRow, StatefulWidget, Table, TableState, Widget, Wrap,
};

use gyre_engine::admit::Stop;
use gyre_engine::score::Outcome;

use super::{Ctx, Effect, Pane, PaneView, fit, sanitize};
use crate::keys::Command;

/// Sort orders of the executions list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortKey {
    /// Input order.
    #[default]
    File,
    /// Status, then input order.
    Status,
    /// Reward, highest first.
    Reward,
    /// `L_i`, largest first.
    Targets,
    /// Draws made, most first.
    Draws,
}

impl SortKey {
    /// Every order, in the order `o` steps through them.
    pub const ALL: [SortKey; 5] = [
        SortKey::File,
        SortKey::Status,
        SortKey::Reward,
        SortKey::Targets,
        SortKey::Draws,
    ];

    fn next(self) -> Self {
        match self {
            SortKey::File => SortKey::Status,
            SortKey::Status => SortKey::Reward,
            SortKey::Reward => SortKey::Targets,
            SortKey::Targets => SortKey::Draws,
            SortKey::Draws => SortKey::File,
        }
    }

    /// Name shown in the pane title, and how the inspector remembers it between runs
    /// (`remembered.rs`): a renamed order is forgotten once.
    pub fn name(self) -> &'static str {
        match self {
            SortKey::File => "input order",
            SortKey::Status => "status",
            SortKey::Reward => "reward",
            SortKey::Targets => "L_i",
            SortKey::Draws => "draws",
        }
    }
}

/// Filters of the executions list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Filter {
    /// Everything.
    #[default]
    All,
    /// Scored only.
    Scored,
    /// Dummy only.
    Dummy,
    /// Excluded only.
    Excluded,
    /// Those whose draws stopped at J_max.
    JmaxReached,
}

impl Filter {
    fn next(self) -> Self {
        match self {
            Filter::All => Filter::Scored,
            Filter::Scored => Filter::Dummy,
            Filter::Dummy => Filter::Excluded,
            Filter::Excluded => Filter::JmaxReached,
            Filter::JmaxReached => Filter::All,
        }
    }

    /// Name shown in the pane title.
    pub fn name(self) -> &'static str {
        match self {
            Filter::All => "all",
            Filter::Scored => "scored",
            Filter::Dummy => "dummy",
            Filter::Excluded => "excluded",
            Filter::JmaxReached => "J_max reached",
        }
    }

    fn keeps(self, o: &Outcome, stop: Stop) -> bool {
        match self {
            Filter::All => true,
            Filter::Scored => matches!(o, Outcome::Scored { .. }),
            Filter::Dummy => matches!(o, Outcome::Dummy),
            Filter::Excluded => matches!(o, Outcome::Excluded(_)),
            Filter::JmaxReached => stop == Stop::JmaxReached,
        }
    }
}

/// Status word and reason of an execution.
pub fn status_text(o: &Outcome) -> String {
    match o {
        Outcome::Scored { .. } => "scored".into(),
        Outcome::Dummy => "dummy".into(),
        Outcome::Excluded(e) => format!("excluded: {e}"),
    }
}

/// The executions list's state.
#[derive(Clone, Debug, Default)]
pub struct ExecutionsPane {
    /// Sort order.
    pub sort: SortKey,
    /// Filter.
    pub filter: Filter,
    /// Executions shown, as indices into the batch.
    pub rows: Vec<usize>,
    /// Selected row of `rows` (meaningless when `rows` is empty).
    pub row: usize,
    /// First visible row.
    pub offset: usize,
    /// The (results generation, sort, filter) `rows` were made for.
    key: Option<(u64, SortKey, Filter)>,
}

impl ExecutionsPane {
    /// Next sort order; the selection stays on its execution.
    pub fn next_sort(&mut self) {
        self.sort = self.sort.next();
    }

    /// Next filter; when it hides the open execution, the first one it keeps opens.
    pub fn next_filter(&mut self, ctx: &Ctx) -> Vec<Effect> {
        self.filter = self.filter.next();
        let rows = rows(ctx, self.sort, self.filter);
        match rows.first() {
            Some(&first) if !rows.contains(&ctx.sel.exec) => vec![Effect::OpenExec(first)],
            _ => Vec::new(),
        }
    }

    fn open_row(&mut self, ctx: &Ctx, row: usize) -> Vec<Effect> {
        match self.rows.get(row) {
            Some(&i) if i != ctx.sel.exec || ctx.sel.request.is_none() => {
                self.row = row;
                vec![Effect::OpenExec(i)]
            }
            _ => Vec::new(),
        }
    }
}

impl PaneView for ExecutionsPane {
    /// Brings the list in line with the results and the selected execution.
    fn sync(&mut self, ctx: &Ctx) {
        let key = (ctx.sel.generation, self.sort, self.filter);
        if self.key != Some(key) {
            self.key = Some(key);
            self.rows = rows(ctx, self.sort, self.filter);
        }
        if let Some(r) = self.rows.iter().position(|&i| i == ctx.sel.exec) {
            self.row = r;
        }
        self.row = self.row.min(self.rows.len().saturating_sub(1));
        let h = page(ctx);
        if self.row < self.offset {
            self.offset = self.row;
        } else if self.row >= self.offset + h {
            self.offset = self.row + 1 - h;
        }
        self.offset = self.offset.min(self.rows.len().saturating_sub(h));
    }

    /// Keys while focused.
    fn command(&mut self, ctx: &Ctx, c: Command) -> Vec<Effect> {
        if self.rows.is_empty() {
            return Vec::new();
        }
        let page = page(ctx);
        let last = self.rows.len() - 1;
        let row = match c {
            Command::Up => self.row.saturating_sub(1),
            Command::Down => (self.row + 1).min(last),
            Command::PageUp => self.row.saturating_sub(page),
            Command::PageDown => (self.row + page).min(last),
            Command::Home => 0,
            Command::End => last,
            Command::Enter | Command::Right => return vec![Effect::Focus(Pane::Tree)],
            _ => return Vec::new(),
        };
        self.open_row(ctx, row)
    }

    /// A click at a cell of the pane.
    fn click(&mut self, ctx: &Ctx, _x: u16, y: u16) -> Vec<Effect> {
        let a = ctx.areas.execs;
        // Border and header row above the first execution.
        if y < a.y + 2 {
            return Vec::new();
        }
        self.open_row(ctx, self.offset + (y - a.y - 2) as usize)
    }

    /// The wheel over the pane: three rows at a time.
    fn wheel(&mut self, ctx: &Ctx, down: bool) -> Vec<Effect> {
        if self.rows.is_empty() {
            return Vec::new();
        }
        let row = if down {
            (self.row + 3).min(self.rows.len() - 1)
        } else {
            self.row.saturating_sub(3)
        };
        self.open_row(ctx, row)
    }

    /// Draws the list.
    fn render(&self, ctx: &Ctx, area: Rect, buf: &mut Buffer) {
        let t = ctx.theme;
        let d = ctx.batch;
        let r = ctx.results;
        let focused = ctx.focused(Pane::Executions);
        let block = ctx.block(
            Pane::Executions,
            format!(
                " Executions {}/{} · {} · by {} ",
                self.rows.len(),
                d.executions.len(),
                self.filter.name(),
                self.sort.name()
            ),
        );
        if self.rows.is_empty() {
            Paragraph::new(vec![
                Line::styled(
                    format!("no execution matches filter {}", self.filter.name()),
                    t.dim(),
                ),
                Line::styled(
                    format!(
                        "the panes show {} · f: next filter",
                        sanitize(&ctx.exec().id)
                    ),
                    t.dim(),
                ),
            ])
            .wrap(Wrap { trim: false })
            .block(block)
            .render(area, buf);
            return;
        }
        let id_w = self
            .rows
            .iter()
            .map(|&i| sanitize(&d.executions[i].id).chars().count())
            .max()
            .unwrap_or(2)
            .clamp(2, 14) as u16;
        let group = |i: usize| {
            d.executions[i]
                .group()
                .map(|g| sanitize(g.to_string().trim_matches('"')))
                .unwrap_or_default()
        };
        let group_w = self
            .rows
            .iter()
            .map(|&i| group(i).chars().count())
            .max()
            .unwrap_or(0)
            .clamp(5, 8) as u16;
        let num_w = |f: &dyn Fn(usize) -> String, head: &str| {
            self.rows
                .iter()
                .map(|&i| f(i).chars().count())
                .max()
                .unwrap_or(0)
                .max(head.len())
                .min(9) as u16
        };
        let li = |i: usize| r.admissions[i].targets().to_string();
        let dc = |i: usize| {
            let a = &r.admissions[i];
            format!("{}/{}", a.draws.len(), a.candidates.len())
        };
        let li_w = num_w(&li, "L_i");
        let dc_w = num_w(&dc, "d/c");
        // What is left for the status: a narrow pane drops the group column first; a status
        // still too long ends in `…`. Long ids give way so that the status keeps "excluded…".
        let numbers = 6 + 5 + li_w + dc_w + 5;
        let inner = area.width.saturating_sub(2);
        let id_w = id_w.min(inner.saturating_sub(numbers + 9)).max(2);
        let room = inner.saturating_sub(id_w + numbers);
        let show_group = room >= group_w + 1 + 16;
        let status_w = if show_group { room - group_w - 1 } else { room } as usize;
        let rows: Vec<TRow> = self
            .rows
            .iter()
            .map(|&i| {
                let e = &d.executions[i];
                let o = &r.outcomes[i];
                let st = match o {
                    Outcome::Scored { .. } => t.good(),
                    Outcome::Dummy => t.warn(),
                    Outcome::Excluded(_) => t.bad(),
                };
                let closure = e.closure.as_ref().map(|c| c.record.status.name());
                let status = match (o, closure) {
                    (Outcome::Excluded(_), _) | (_, None | Some("completed")) => status_text(o),
                    (_, Some(c)) => format!("{} ({c})", status_text(o)),
                };
                let mut cells = vec![TCell::from(fit(&sanitize(&e.id), id_w as usize))];
                if show_group {
                    cells.push(TCell::from(fit(&group(i), group_w as usize)));
                }
                cells.extend([
                    TCell::from(Span::styled(fit(&status, status_w), st)),
                    TCell::from(fit(
                        &o.reward().map_or("—".into(), |r| format!("{r:.2}")),
                        6,
                    )),
                    TCell::from(fit(
                        &r.advantages[i].map_or("—".into(), |a| format!("{a:+.2}")),
                        5,
                    )),
                    TCell::from(fit(&li(i), li_w as usize)),
                    TCell::from(fit(&dc(i), dc_w as usize)),
                ]);
                TRow::new(cells)
            })
            .collect();
        let mut header = vec!["id"];
        let mut widths = vec![Constraint::Length(id_w)];
        if show_group {
            header.push("group");
            widths.push(Constraint::Length(group_w));
        }
        header.extend(["status", "reward", "adv", "L_i", "d/c"]);
        widths.extend([
            Constraint::Fill(1),
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Length(li_w),
            Constraint::Length(dc_w),
        ]);
        let header = TRow::new(header).style(t.dim().add_modifier(Modifier::BOLD));
        let table = Table::new(rows, widths)
            .header(header)
            .column_spacing(1)
            .row_highlight_style(t.selected(focused))
            .block(block);
        let mut state = TableState::default()
            .with_offset(self.offset)
            .with_selected(Some(self.row));
        StatefulWidget::render(table, area, buf, &mut state);
    }
}

/// Rows of the list a page holds.
fn page(ctx: &Ctx) -> usize {
    ctx.areas.execs.height.saturating_sub(3).max(1) as usize
}

fn rows(ctx: &Ctx, sort: SortKey, filter: Filter) -> Vec<usize> {
    let r = ctx.results;
    let mut rows: Vec<usize> = (0..ctx.batch.executions.len())
        .filter(|&i| filter.keeps(&r.outcomes[i], r.admissions[i].stop))
        .collect();
    let status_rank = |o: &Outcome| match o {
        Outcome::Scored { .. } => 0,
        Outcome::Dummy => 1,
        Outcome::Excluded(_) => 2,
    };
    match sort {
        SortKey::File => {}
        SortKey::Status => rows.sort_by_key(|&i| status_rank(&r.outcomes[i])),
        SortKey::Reward => rows.sort_by(|&a, &b| {
            let ra = r.outcomes[a].reward().unwrap_or(f64::NEG_INFINITY);
            let rb = r.outcomes[b].reward().unwrap_or(f64::NEG_INFINITY);
            rb.total_cmp(&ra)
        }),
        SortKey::Targets => rows.sort_by_key(|&i| std::cmp::Reverse(r.admissions[i].targets())),
        SortKey::Draws => rows.sort_by_key(|&i| std::cmp::Reverse(r.admissions[i].draws.len())),
    }
    rows
}
