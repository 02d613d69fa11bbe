//! Drawing: a pure function of [`App`] (the tree widget's scroll offset aside).

use std::collections::HashMap;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout as RLayout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{
    Block, BorderType, Borders, Cell as TCell, Clear, Gauge, Paragraph, Row as TRow, Table,
    TableState, Wrap,
};
use tui_tree_widget::{Tree, TreeItem};

use crate::engine::admit::{Class, Stop};
use crate::engine::execution::{Execution, TokenIdentity};
use crate::engine::provenance::Reason;
use crate::engine::record::{Actor, Purpose};
use crate::engine::score::{self, Outcome};
use crate::engine::tree::NodeKind;

use super::app::{App, Hit, Load, Overlay, Pane, jmax_text, priority_text};
use super::keys::{self, BINDINGS};
use super::model::{DNode, HEADER_BASE, Link, RequestTree};
use super::text::sanitize;
use super::tokens::Layout;
use crate::paint::{ColorMode, ExecView, Tone};

/// Draws the whole screen.
pub fn render(app: &App, f: &mut Frame<'_>) {
    let a = app.areas();
    let buf = f.buffer_mut();
    match &app.load {
        Load::Loading { done, total } => {
            title(app, a.title, buf);
            loading(app, *done, *total, a.full, buf);
            hints(app, a.hints, buf);
            if let Overlay::Help(scroll) = app.overlay {
                help(app, scroll, a.full, buf);
            }
            return;
        }
        Load::Failed(e) => {
            title(app, a.title, buf);
            let area = centered(a.full, 80, 60);
            Clear.render_ref(area, buf);
            Paragraph::new(Text::from(
                std::iter::once(Line::styled("could not load the input", app.theme.bad()))
                    .chain(e.lines().map(|l| Line::raw(sanitize(l))))
                    .chain([
                        Line::default(),
                        Line::styled(
                            "q quits (exit status 2) · --lenient skips invalid lines",
                            app.theme.dim(),
                        ),
                    ])
                    .collect::<Vec<_>>(),
            ))
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" gyre "))
            .render_ref(area, buf);
            hints(app, a.hints, buf);
            if let Overlay::Help(scroll) = app.overlay {
                help(app, scroll, a.full, buf);
            }
            return;
        }
        Load::Ready => {}
    }
    title(app, a.title, buf);
    executions(app, a.execs, buf);
    tree(app, a.tree, buf);
    replay(app, a.replay, buf);
    assessments(app, a.assess, buf);
    tokens(app, a.tokens, buf);
    why(app, a.why, buf);
    if a.detail.width > 0 {
        super::detail::render(app, a.detail, buf);
    }
    status(app, a.status, buf);
    hints(app, a.hints, buf);
    match &app.overlay {
        Overlay::None => {}
        Overlay::Help(scroll) => help(app, *scroll, a.full, buf),
        Overlay::Search(q) => {
            let line = Line::from(vec![
                Span::styled("/", app.theme.key()),
                Span::raw(sanitize(q)),
                Span::styled("█", app.theme.dim()),
                Span::styled(
                    "   Enter search token text and request ids · Esc cancel",
                    app.theme.dim(),
                ),
            ]);
            Clear.render_ref(a.status, buf);
            Paragraph::new(line).render_ref(a.status, buf);
        }
        Overlay::Export(p) => export_prompt(app, p, a.full, buf),
    }
}

/// Renders widgets by reference into a buffer.
trait RenderRef {
    fn render_ref(self, area: Rect, buf: &mut Buffer);
}

impl<W: ratatui::widgets::Widget> RenderRef for W {
    fn render_ref(self, area: Rect, buf: &mut Buffer) {
        self.render(area, buf);
    }
}

fn pane_block<'a>(app: &App, pane: Pane, title: impl Into<Line<'a>>) -> Block<'a> {
    let focused = app.focus == pane && app.overlay == Overlay::None;
    Block::bordered()
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(app.theme.border(focused))
        .title(title)
}

fn title(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let mut spans = vec![
        Span::styled(" gyre ", t.strong().add_modifier(Modifier::REVERSED)),
        Span::raw(" "),
    ];
    let sep = || Span::styled(" · ", t.dim());
    // What must always be visible comes first: the draw shown and J_max.
    if let Some(d) = &app.data {
        let s = &app.settings;
        let exec = &d.batch.executions[app.cur];
        spans.push(Span::raw(format!("{} ", sanitize(&exec.id))));
        spans.push(Span::styled(
            format!("draw {}/{}", app.step, app.draws()),
            t.strong(),
        ));
        spans.push(sep());
        spans.push(Span::styled(
            format!("J_max {}", jmax_text(s.jmax)),
            t.strong(),
        ));
        spans.push(sep());
        spans.push(Span::raw(format!("seed {}", s.seed)));
        spans.push(sep());
        spans.push(Span::raw(format!(
            "priority {}",
            priority_text(&s.priority)
        )));
        spans.push(sep());
        spans.push(Span::raw(sanitize(&app.label)));
        spans.push(Span::styled(
            format!(
                " · {} executions · tokens: {}",
                d.batch.executions.len(),
                sanitize(&app.tokenizer)
            ),
            t.dim(),
        ));
    } else {
        spans.push(Span::raw(sanitize(&app.label)));
    }
    Paragraph::new(Line::from(spans)).render_ref(area, buf);
}

fn loading(app: &App, done: u64, total: u64, full: Rect, buf: &mut Buffer) {
    let area = centered(full, 60, 20);
    let area = Rect {
        height: area.height.clamp(3, 5),
        ..area
    };
    let ratio = if total == 0 {
        0.0
    } else {
        (done as f64 / total as f64).clamp(0.0, 1.0)
    };
    Clear.render_ref(area, buf);
    Gauge::default()
        .block(Block::bordered().title(format!(" loading {} ", sanitize(&app.label))))
        .gauge_style(if app.theme.color {
            Style::new().fg(ratatui::style::Color::Cyan)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        })
        .ratio(ratio)
        .label(if total > 0 && done >= total {
            format!(
                "{:.1} MB read · building trees, scoring, admitting…",
                total as f64 / 1e6
            )
        } else {
            format!("{:.1} / {:.1} MB", done as f64 / 1e6, total as f64 / 1e6)
        })
        .render_ref(area, buf);
    let hint = Rect {
        y: area.bottom(),
        height: 1,
        ..area
    };
    if hint.bottom() <= full.bottom() {
        Paragraph::new(Line::styled(
            " the screen stays live: q quits",
            app.theme.dim(),
        ))
        .render_ref(hint, buf);
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

fn executions(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(d) = &app.data else { return };
    let t = &app.theme;
    let focused = app.focus == Pane::Executions;
    let id_w = app
        .rows
        .iter()
        .map(|&i| d.batch.executions[i].id.chars().count())
        .max()
        .unwrap_or(2)
        .clamp(2, 14) as u16;
    let group_w = app
        .rows
        .iter()
        .map(|&i| {
            d.batch.executions[i]
                .group()
                .map_or(0, |g| g.to_string().trim_matches('"').chars().count())
        })
        .max()
        .unwrap_or(0)
        .clamp(5, 8) as u16;
    // Numbers take what their widest value needs, so the status keeps the rest.
    let num_w = |f: &dyn Fn(usize) -> String, head: &str| {
        app.rows
            .iter()
            .map(|&i| f(i).chars().count())
            .max()
            .unwrap_or(0)
            .max(head.len()) as u16
    };
    let li_w = num_w(&|i| d.results.admissions[i].targets().to_string(), "L_i");
    let dc_w = num_w(
        &|i| {
            let a = &d.results.admissions[i];
            format!("{}/{}", a.draws.len(), a.candidates.len())
        },
        "d/c",
    );
    // What is left for the status: a narrow pane drops the group column first; a status
    // still too long ends in `…` (the replay and assessments panes give it in full). Long
    // ids give way so that the status keeps at least "excluded…".
    let numbers = 6 + 5 + li_w + dc_w + 5;
    let inner = area.width.saturating_sub(2);
    let id_w = id_w.min(inner.saturating_sub(numbers + 9)).max(2);
    let room = inner.saturating_sub(id_w + numbers);
    let show_group = room >= group_w + 1 + 16;
    let status_w = if show_group { room - group_w - 1 } else { room } as usize;
    let rows: Vec<TRow> = app
        .rows
        .iter()
        .map(|&i| {
            let e = &d.batch.executions[i];
            let o = &d.results.outcomes[i];
            let adm = &d.results.admissions[i];
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
            let status = if status.chars().count() > status_w {
                let cut: String = status.chars().take(status_w.saturating_sub(1)).collect();
                format!("{cut}…")
            } else {
                status
            };
            let mut cells = vec![TCell::from(sanitize(&e.id))];
            if show_group {
                cells.push(TCell::from(
                    e.group()
                        .map(|g| sanitize(g.to_string().trim_matches('"')))
                        .unwrap_or_default(),
                ));
            }
            cells.extend([
                TCell::from(Span::styled(status, st)),
                TCell::from(o.reward().map_or("—".into(), |r| format!("{r:.2}"))),
                TCell::from(d.results.advantages[i].map_or("—".into(), |a| format!("{a:+.2}"))),
                TCell::from(format!("{}", adm.targets())),
                TCell::from(format!("{}/{}", adm.draws.len(), adm.candidates.len())),
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
    // The filter comes first in the title: it explains the count, and a narrow pane cuts
    // the end.
    let block = pane_block(
        app,
        Pane::Executions,
        format!(
            " Executions {}/{} · {} · by {} ",
            app.rows.len(),
            d.batch.executions.len(),
            app.filter.name(),
            app.sort.name()
        ),
    );
    if app.rows.is_empty() {
        Paragraph::new(vec![
            Line::styled(
                format!("no execution matches filter {}", app.filter.name()),
                t.dim(),
            ),
            Line::styled(
                format!(
                    "the panes show {} · f: next filter",
                    sanitize(&d.batch.executions[app.cur].id)
                ),
                t.dim(),
            ),
        ])
        .wrap(Wrap { trim: false })
        .block(block)
        .render_ref(area, buf);
        return;
    }
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(t.selected(focused))
        .block(block);
    let mut state = TableState::default()
        .with_offset(app.row_offset)
        .with_selected(Some(app.row));
    ratatui::widgets::StatefulWidget::render(table, area, buf, &mut state);
}

fn tree(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(d) = &app.data else { return };
    let exec = &d.batch.executions[app.cur];
    let adm = &d.results.admissions[app.cur];
    let t = &app.theme;
    let mut chosen: HashMap<u32, Vec<u32>> = HashMap::new();
    for (k, dr) in adm.draws.iter().enumerate() {
        if (k as u32) < app.step {
            chosen.entry(dr.chosen).or_default().push(k as u32 + 1);
        }
    }
    let candidates: std::collections::HashSet<u32> =
        adm.candidates.iter().map(|c| c.request).collect();
    let label = |r: u32| -> Line<'static> {
        let req = &exec.requests[r as usize];
        let mut spans = vec![Span::styled(sanitize(&req.id), t.strong())];
        if let Some(ks) = chosen.get(&r) {
            let ks: Vec<String> = ks.iter().map(|k| k.to_string()).collect();
            spans.push(Span::styled(format!(" ● draw {}", ks.join(",")), t.good()));
        } else if candidates.contains(&r) {
            spans.push(Span::styled(" ○ candidate", t.dim()));
        }
        let place = &app.rtree.places[r as usize];
        let id = |i: u32| sanitize(&exec.requests[i as usize].id);
        match &place.link {
            Link::Retry { of } => spans.push(Span::styled(
                format!(" ↳ retry of {} (same context)", id(*of)),
                t.marker(),
            )),
            Link::Diverge { of, offset } => spans.push(Span::styled(
                format!(" ↳ diverges inside {}'s output at token {offset}", id(*of)),
                t.marker(),
            )),
            Link::ContextBranch { other, .. } => spans.push(Span::styled(
                format!(" ↳ other context than {}", id(*other)),
                t.marker(),
            )),
            _ => {}
        }
        if req.purpose == Purpose::Summary {
            spans.push(Span::styled(" ⇢ compaction summary", t.marker()));
        }
        if req.after_closure {
            spans.push(Span::styled(" ✗ after closure", t.bad()));
        }
        if req.actor == Actor::Evaluator {
            spans.push(Span::styled(" evaluator", t.bad()));
        }
        let purpose = match req.purpose {
            Purpose::Task => "task",
            Purpose::Summary => "summary",
        };
        spans.push(Span::styled(
            format!(
                " {}/{} in {} out {}{}",
                sanitize(&req.agent),
                purpose,
                req.input_len,
                req.output_len,
                req.finish
                    .as_deref()
                    .map(|f| format!(" {}", sanitize(f)))
                    .unwrap_or_default()
            ),
            t.dim(),
        ));
        if req.reconstructed() {
            spans.push(Span::styled(" (reconstructed)", t.dim()));
        }
        Line::from(spans)
    };
    fn item(
        d: &DNode,
        label: &dyn Fn(u32) -> Line<'static>,
        header: &dyn Fn(&DNode) -> Line<'static>,
    ) -> TreeItem<'static, u32> {
        let children: Vec<TreeItem<'static, u32>> =
            d.children.iter().map(|c| item(c, label, header)).collect();
        let text = if d.id >= HEADER_BASE {
            header(d)
        } else {
            label(d.id)
        };
        TreeItem::new(d.id, text, children).expect("unique ids")
    }
    let header = |d: &DNode| -> Line<'static> {
        let k = (d.id - HEADER_BASE) as usize;
        let root = app.rtree.roots[k];
        let req = &exec.requests[root as usize];
        let what = match app.rtree.places[root as usize].link {
            Link::SubAgent => format!("⟨sub-agent {} at the root⟩", sanitize(&req.agent)),
            Link::Compaction => "⟨compacted context⟩ ⇢ compaction".to_string(),
            Link::NewContext => "⟨new main context⟩".to_string(),
            Link::Evaluator => "⟨evaluator context⟩".to_string(),
            Link::Retry { of } => format!(
                "⟨{} context⟩ ↳ retry of {}",
                sanitize(&req.agent),
                sanitize(&exec.requests[of as usize].id)
            ),
            _ => format!("⟨{} context⟩", sanitize(&req.agent)),
        };
        let n = RequestTree::count(d);
        Line::from(vec![
            Span::styled(what, t.marker()),
            Span::styled(
                format!(
                    " {} tok in · {n} request{}",
                    req.input_len,
                    if n == 1 { "" } else { "s" }
                ),
                t.dim(),
            ),
        ])
    };
    let items: Vec<TreeItem<'static, u32>> = app
        .rtree
        .display
        .iter()
        .map(|d| item(d, &label, &header))
        .collect();
    let focused = app.focus == Pane::Tree;
    let block = pane_block(
        app,
        Pane::Tree,
        format!(
            " Tree · {} · {} requests ",
            sanitize(&exec.id),
            exec.requests.len()
        ),
    );
    let Ok(widget) = Tree::new(&items) else {
        return;
    };
    let widget = widget
        .block(block)
        .highlight_style(t.selected(focused))
        .node_closed_symbol("▸ ")
        .node_open_symbol("▾ ")
        .node_no_children_symbol("  ");
    let mut state = app.tree_state.borrow_mut();
    for p in &app.opened {
        state.open(p.clone());
    }
    let stale: Vec<Vec<u32>> = state
        .opened()
        .iter()
        .filter(|p| !app.opened.contains(*p))
        .cloned()
        .collect();
    for p in stale {
        state.close(&p);
    }
    if state.selected() != app.tree_sel.as_slice() {
        state.select(app.tree_sel.clone());
    }
    ratatui::widgets::StatefulWidget::render(widget, area, buf, &mut *state);
}

/// How far a wrapped pane of `lines` scrolls at `width` columns: until its last line is at
/// the top (wrapping estimated by width, so the end is always reachable).
pub fn scroll_limit(lines: &[Line<'_>], width: u16) -> u16 {
    let w = width.max(1) as usize;
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(w).max(1)).sum();
    rows.saturating_sub(1).min(u16::MAX as usize) as u16
}

fn replay(app: &App, area: Rect, buf: &mut Buffer) {
    let (k, n) = (app.step, app.draws());
    Paragraph::new(replay_lines(app))
        .wrap(Wrap { trim: false })
        .scroll((app.replay_scroll, 0))
        .block(pane_block(
            app,
            Pane::Replay,
            format!(
                " Replay · draw {k}/{n} · J_max {} ",
                jmax_text(app.settings.jmax)
            ),
        ))
        .render_ref(area, buf);
}

/// The replay pane's lines at the current step.
pub fn replay_lines(app: &App) -> Vec<Line<'static>> {
    let Some(d) = &app.data else {
        return Vec::new();
    };
    let exec = &d.batch.executions[app.cur];
    let adm = &d.results.admissions[app.cur];
    let outcome = &d.results.outcomes[app.cur];
    let t = &app.theme;
    let n = adm.draws.len();
    let k = app.step as usize;
    let id = |r: u32| sanitize(&exec.requests[r as usize].id);
    let mut lines: Vec<Line> = Vec::new();
    lines.push(Line::from(vec![
        Span::styled(format!("draw {k}/{n}"), t.strong()),
        Span::styled(
            format!(" · J_max {} · ", jmax_text(app.settings.jmax)),
            t.dim(),
        ),
        Span::raw(format!("{} candidates", adm.candidates.len())),
    ]));
    match outcome {
        Outcome::Excluded(e) => {
            lines.push(Line::styled(
                format!("excluded ({e}): no candidates drawn, nothing exported"),
                t.bad(),
            ));
        }
        Outcome::Dummy => {
            lines.push(Line::styled(
                "dummy: one zero-reward placeholder, no targets, no draws",
                t.warn(),
            ));
        }
        Outcome::Scored { .. } => {}
    }
    let show = |dr: &crate::engine::admit::Draw, lines: &mut Vec<Line>, preview: bool| {
        let higher: Vec<&str> = adm
            .priority
            .iter()
            .take_while(|c| **c != dr.class)
            .map(|c| c.name())
            .collect();
        let mut head = vec![
            Span::raw(if preview { "next: class " } else { "class " }),
            Span::styled(dr.class.name(), t.strong()),
        ];
        if !higher.is_empty() {
            head.push(Span::styled(
                format!(" ({} exhausted)", higher.join(", ")),
                t.dim(),
            ));
        }
        head.push(Span::styled(
            format!(" · total weight {}", dr.total),
            t.dim(),
        ));
        lines.push(Line::from(head));
        let id_w = dr
            .candidates
            .iter()
            .map(|w| id(w.request).chars().count())
            .max()
            .unwrap_or(0);
        let class_w = dr
            .candidates
            .iter()
            .map(|w| {
                let req = &exec.requests[w.request as usize];
                Class::of(&req.agent, req.purpose).name().len()
            })
            .max()
            .unwrap_or(0);
        let weight_w = dr
            .candidates
            .iter()
            .map(|w| w.weight.to_string().len())
            .max()
            .unwrap_or(0);
        for w in &dr.candidates {
            let chosen = w.request == dr.chosen && !preview;
            let req = &exec.requests[w.request as usize];
            let mut spans = vec![
                Span::styled(
                    if chosen { " ● " } else { " ○ " },
                    if chosen { t.good() } else { t.dim() },
                ),
                Span::styled(
                    format!("{:<id_w$}", id(w.request)),
                    if chosen {
                        t.good().add_modifier(Modifier::BOLD)
                    } else {
                        Style::new()
                    },
                ),
                Span::styled(
                    format!(" {:<class_w$}", Class::of(&req.agent, req.purpose).name()),
                    t.dim(),
                ),
                Span::raw(format!(
                    " w={:>weight_w$} p={:.2}",
                    w.weight,
                    dr.probability(w)
                )),
            ];
            if chosen {
                spans.push(Span::styled(" ◀ drawn", t.good()));
            }
            lines.push(Line::from(spans));
        }
        if !preview {
            lines.push(Line::from(vec![
                Span::raw("fixed "),
                Span::styled(format!("{}", dr.target_tokens), t.good()),
                Span::raw(format!(" targets on a {}-token path", dr.path_tokens)),
            ]));
        }
    };
    if k == 0 {
        lines.push(Line::styled("nothing claimed yet", t.dim()));
        if let Some(dr) = adm.draws.first() {
            show(dr, &mut lines, true);
        }
    } else if let Some(dr) = adm.draws.get(k - 1) {
        show(dr, &mut lines, false);
    }
    let so_far: u64 = adm.draws.iter().take(k).map(|d| d.target_tokens).sum();
    if matches!(outcome, Outcome::Scored { .. }) {
        lines.push(Line::styled(
            format!("claimed so far {so_far} of L_i = {}", adm.targets()),
            t.dim(),
        ));
    }
    if k == n && matches!(outcome, Outcome::Scored { .. }) {
        let stop = match adm.stop {
            Stop::JmaxReached => "stopped: J_max reached (unclaimed tokens left out)",
            Stop::Exhausted => "stopped: no candidate has unclaimed tokens left",
            Stop::NotDrawn => "not drawn",
        };
        lines.push(Line::styled(
            stop,
            if adm.stop == Stop::JmaxReached {
                t.warn()
            } else {
                t.dim()
            },
        ));
    }
    lines
}

/// Assessment indices grouped by artifact version (first appearance order), file order within.
pub fn assessment_order(exec: &Execution) -> Vec<usize> {
    let mut keys: Vec<String> = Vec::new();
    let key = |i: usize| {
        let a = &exec.assessments[i].record;
        format!("{}\u{0}{}", a.artifact, a.version)
    };
    for i in 0..exec.assessments.len() {
        let k = key(i);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut order: Vec<usize> = (0..exec.assessments.len()).collect();
    order.sort_by_key(|&i| keys.iter().position(|k| *k == key(i)));
    order
}

/// Rows of the assessments pane: `None` for a version header, `Some(k)` for the k-th
/// assessment of [`assessment_order`].
pub fn assessment_rows(exec: &Execution) -> Vec<Option<usize>> {
    let order = assessment_order(exec);
    let mut rows = Vec::new();
    let mut last: Option<String> = None;
    for (k, &i) in order.iter().enumerate() {
        let a = &exec.assessments[i].record;
        let key = format!("{}\u{0}{}", a.artifact, a.version);
        if last.as_ref() != Some(&key) {
            rows.push(None);
            last = Some(key);
        }
        rows.push(Some(k));
    }
    rows
}

/// First line shown in the assessments pane so the selected line (`sel_line`) is visible.
pub fn assessment_scroll(sel_line: usize, height: u16) -> u16 {
    let inner_h = height.saturating_sub(2) as usize;
    sel_line.saturating_sub(inner_h.saturating_sub(1)) as u16
}

fn json_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => sanitize(s),
        other => sanitize(&other.to_string()),
    }
}

fn assessments(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(d) = &app.data else { return };
    let exec = &d.batch.executions[app.cur];
    let outcome = &d.results.outcomes[app.cur];
    let t = &app.theme;
    let views = score::assessment_views(exec, outcome);
    let order = assessment_order(exec);
    let focused = app.focus == Pane::Assessments;
    let mut lines: Vec<Line> = Vec::new();
    let budget = exec.budget().map(|b| exec.start() + b);
    if exec.assessments.is_empty() {
        lines.push(Line::styled("no assessments", t.dim()));
    }
    let mut sel_line = 0usize;
    for row in assessment_rows(exec) {
        match row {
            None => {
                // Header of the next group: look at the next assessment.
                let k = lines.len();
                let _ = k;
                lines.push(Line::default());
            }
            Some(k) => {
                let i = order[k];
                let a = &exec.assessments[i].record;
                let v = &views[i];
                if lines.last().is_some_and(|l| l.spans.is_empty()) {
                    let closure = if v.matches_closure {
                        " · closure's version"
                    } else {
                        " · not the closure's version"
                    };
                    let n = lines.len() - 1;
                    lines[n] = Line::from(vec![
                        Span::styled(
                            format!("{} v{}", json_text(&a.artifact), json_text(&a.version)),
                            t.strong(),
                        ),
                        Span::styled(closure, t.dim()),
                    ]);
                }
                let mut spans = vec![Span::raw("  ")];
                if a.valid {
                    spans.push(Span::styled("✓ ", t.good()));
                    spans.push(Span::raw(format!("{:.2}", a.score.unwrap_or(0.0))));
                } else {
                    spans.push(Span::styled("✗ failed", t.bad()));
                    if let Some(e) = &a.error {
                        spans.push(Span::styled(format!(" ({})", json_text(e)), t.dim()));
                    }
                }
                if let Some(at) = &a.attempt {
                    spans.push(Span::styled(format!(" #{}", json_text(at)), t.dim()));
                }
                spans.push(Span::raw(format!("  t={}s", a.t)));
                spans.push(if v.in_budget {
                    Span::styled(
                        match budget {
                            Some(b) => format!(" ≤ {b}s"),
                            None => " (no budget)".into(),
                        },
                        t.dim(),
                    )
                } else {
                    Span::styled(format!(" > budget {}s", budget.unwrap_or(0.0)), t.warn())
                });
                if v.is_reward {
                    spans.push(Span::styled(
                        " ◀ reward",
                        t.good().add_modifier(Modifier::BOLD),
                    ));
                } else if a.valid && v.matches_closure && v.in_budget {
                    spans.push(Span::styled(" (later than the reward)", t.dim()));
                }
                if let Some(b) = &a.branch {
                    spans.push(Span::styled(format!(" → {}", sanitize(b)), t.marker()));
                }
                if k == app.assess {
                    sel_line = lines.len();
                }
                let mut line = Line::from(spans);
                if k == app.assess && focused {
                    line = line.style(t.selected(true));
                } else if k == app.assess {
                    line = line.style(t.selected(false));
                }
                lines.push(line);
            }
        }
    }
    let scroll = assessment_scroll(sel_line, area.height);
    let title = match outcome {
        Outcome::Scored { reward, .. } => format!(" Assessments · reward {reward:.2} "),
        Outcome::Dummy => " Assessments · dummy (no artifact) ".into(),
        Outcome::Excluded(e) => format!(" Assessments · excluded: {e} "),
    };
    Paragraph::new(lines)
        .scroll((scroll, 0))
        .block(pane_block(app, Pane::Assessments, title))
        .render_ref(area, buf);
}

/// Tones of the visible tokens: claim tones are per node (claims are per node), so they are
/// asked of the engine once per visible node; other tones are cheap per token.
struct Looks<'a> {
    view: ExecView<'a>,
    mode: ColorMode,
    step: Option<u32>,
    nodes: HashMap<u32, Tone>,
}

impl Looks<'_> {
    fn tone(&mut self, n: u32, i: u32) -> Tone {
        let exec = self.view.exec;
        let output = exec.tree.nodes[n as usize].kind == NodeKind::Output;
        if self.mode == ColorMode::Claims && output {
            let (view, mode, step) = (self.view, self.mode, self.step);
            *self
                .nodes
                .entry(n)
                .or_insert_with(|| view.tone(n, i, mode, step))
        } else {
            self.view.tone(n, i, self.mode, self.step)
        }
    }
}

fn tokens(app: &App, area: Rect, buf: &mut Buffer) {
    let Some(d) = &app.data else { return };
    let exec = &d.batch.executions[app.cur];
    let t = &app.theme;
    let req_id = exec
        .requests
        .get(app.path.request as usize)
        .map(|r| sanitize(&r.id))
        .unwrap_or_default();
    let block = pane_block(
        app,
        Pane::Tokens,
        format!(
            " Tokens · path of {req_id} · {} tokens · colour: {} · cursor {}/{} ",
            app.path.len,
            app.colour.name(),
            app.cursor,
            app.path.len
        ),
    );
    let inner = block.inner(area);
    block.render_ref(area, buf);
    if app.path.len == 0 || inner.width == 0 || inner.height == 0 {
        Paragraph::new(Line::styled("no request selected", t.dim())).render_ref(inner, buf);
        return;
    }
    let mut layout = Layout::new(exec, &app.path, &app.text, inner.width);
    let rows = layout.rows(app.top, inner.height as usize, true);
    let mut looks = Looks {
        view: ExecView::new(exec, &d.results, app.cur),
        mode: app.colour,
        step: Some(app.step),
        nodes: HashMap::new(),
    };
    let hits: Vec<(u64, u64)> = app
        .search
        .as_ref()
        .filter(|s| s.request == app.path.request)
        .map(|s| {
            s.hits
                .iter()
                .filter_map(|h| match h {
                    Hit::Tokens(a, b) => Some((*a, *b)),
                    Hit::Request(_) => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let is_hit = |pos: u64| {
        let i = hits.partition_point(|(_, e)| *e <= pos);
        hits.get(i).is_some_and(|(s, _)| *s <= pos)
    };
    let mut last: Option<(u64, Style)> = None;
    for (y, row) in rows.iter().enumerate() {
        let y = inner.y + y as u16;
        for c in &row.cells {
            let style = match last {
                Some((p, s)) if p == c.pos => s,
                _ => {
                    let (n, i) = app.path.node_at(c.pos);
                    let mut s = t.tone(looks.tone(n, i));
                    if app.boundaries {
                        s = t.boundary(s, c.pos % 2 == 1);
                    }
                    if is_hit(c.pos) {
                        s = t.found(s);
                    }
                    if c.pos == app.cursor {
                        s = t.cursor(s);
                    }
                    last = Some((c.pos, s));
                    s
                }
            };
            let x = inner.x + c.x;
            if c.glyph.width == 1 {
                if let Some(cell) = buf.cell_mut((x, y)) {
                    cell.set_char(c.glyph.ch).set_style(style);
                }
            } else {
                let mut tmp = [0u8; 4];
                buf.set_string(x, y, c.glyph.ch.encode_utf8(&mut tmp), style);
            }
        }
    }
}

/// A log-prob with its probability, e.g. `−0.4100 (p 0.66)`.
fn logprob_text(l: f64) -> String {
    let v = if l != 0.0 && l.abs() < 1e-3 {
        format!("{l:.2e}")
    } else {
        format!("{l:.4}")
    };
    format!("{} (p {:.3})", v.replace('-', "−"), l.exp())
}

/// The why line of the token at `pos` of the current path.
pub fn why_spans(app: &App, pos: u64) -> Vec<Span<'static>> {
    let Some(d) = &app.data else {
        return Vec::new();
    };
    let exec = &d.batch.executions[app.cur];
    let t = &app.theme;
    if pos >= app.path.len {
        return vec![Span::styled("no token", t.dim())];
    }
    let id = app.path.token(exec, pos);
    let (n, i) = app.path.node_at(pos);
    let adm = &d.results.admissions[app.cur];
    let view = ExecView::new(exec, &d.results, app.cur);
    let reason = view.reason(n, i, Some(app.step));
    let text = sanitize(&app.path.piece(exec, &app.text, pos));
    let mut spans = vec![
        Span::styled(format!("\"{text}\""), t.strong()),
        Span::styled(format!(" id {id}"), t.dim()),
        Span::raw(" · "),
    ];
    let identity = exec.identity(n, i);
    let (TokenIdentity::Output { request: owner, .. }
    | TokenIdentity::Context { request: owner, .. }) = identity;
    match identity {
        TokenIdentity::Output { request, offset } => {
            let r = &exec.requests[request as usize];
            let who = if r.actor == Actor::Evaluator {
                "evaluator"
            } else {
                "policy"
            };
            spans.push(Span::raw(format!(
                "output token {offset} of {}",
                sanitize(&r.id)
            )));
            spans.push(Span::styled(
                format!(
                    " ({}, {who}{})",
                    sanitize(&r.agent),
                    r.logprob(offset)
                        .map_or(String::new(), |l| format!(", logprob {}", logprob_text(l)))
                ),
                t.dim(),
            ));
        }
        TokenIdentity::Context {
            request,
            offset,
            source,
        } => {
            let r = &exec.requests[request as usize];
            spans.push(Span::raw(format!(
                "input token {offset} of {}",
                sanitize(&r.id)
            )));
            spans.push(Span::styled(
                format!(" (first seen there, span {source})"),
                t.dim(),
            ));
        }
    }
    if exec.requests[owner as usize].reconstructed() {
        spans.push(Span::styled(" · reconstructed, not recorded", t.warn()));
    }
    spans.push(Span::raw(" · "));
    let rs = t.tone(Tone::of_reason(&reason, Some(app.step)));
    let mut rtext = reason.to_string();
    if let Reason::Claimed { draw, .. } = &reason {
        if let Some(dr) = adm.draws.get(*draw as usize - 1) {
            rtext = format!("{rtext} · class {}", dr.class);
        }
        if *draw == app.step {
            rtext.push_str(" · target of this draw");
        }
    }
    spans.push(Span::styled(sanitize(&rtext), rs));
    spans.push(Span::styled(format!(" · path pos {pos}"), t.dim()));
    spans
}

fn why(app: &App, area: Rect, buf: &mut Buffer) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(app.theme.border(false))
        .title(" why ");
    Paragraph::new(Line::from(why_spans(app, app.cursor)))
        .wrap(Wrap { trim: false })
        .block(block)
        .render_ref(area, buf);
}

fn legend(app: &App) -> Line<'static> {
    let t = &app.theme;
    let mut spans = vec![Span::styled(format!("{}: ", app.colour.name()), t.dim())];
    for tone in Tone::legend(app.colour) {
        spans.push(Span::styled(format!(" {} ", tone.label()), t.tone(tone)));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::styled("  (c: next colouring)", t.dim()));
    Line::from(spans)
}

fn status(app: &App, area: Rect, buf: &mut Buffer) {
    let line = match &app.message {
        Some(m) => Line::from(vec![Span::styled(
            format!(" {}", sanitize(m)),
            app.theme.strong(),
        )]),
        None => legend(app),
    };
    Paragraph::new(line).render_ref(area, buf);
}

fn hints(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let mut spans = Vec::new();
    let mut width = 0usize;
    // Before the data is there only help and quit do anything.
    let all = keys::hints();
    let shown = if app.data.is_some() {
        &all[..]
    } else {
        &all[..2]
    };
    for (k, label) in shown {
        let w = k.chars().count() + label.chars().count() + 3;
        if width + w > area.width as usize && width > 0 {
            break;
        }
        width += w;
        spans.push(Span::styled(format!(" {k}"), t.key()));
        spans.push(Span::raw(format!(" {label} ")));
    }
    Paragraph::new(Line::from(spans)).render_ref(area, buf);
}

fn centered(area: Rect, pct_x: u16, pct_y: u16) -> Rect {
    let [_, v, _] = RLayout::vertical([
        Constraint::Percentage((100 - pct_y) / 2),
        Constraint::Percentage(pct_y),
        Constraint::Fill(1),
    ])
    .areas(area);
    let [_, h, _] = RLayout::horizontal([
        Constraint::Percentage((100 - pct_x) / 2),
        Constraint::Percentage(pct_x),
        Constraint::Fill(1),
    ])
    .areas(v);
    h
}

/// The help overlay's box, its two columns (the right one empty when narrow) and whether
/// it is split.
fn help_columns(app: &App, full: Rect) -> (Rect, Vec<Line<'static>>, Vec<Line<'static>>, bool) {
    let t = &app.theme;
    let area = centered(full, 90, 90);
    // One block of lines per group, then the groups split over two columns.
    let mut groups: Vec<Vec<Line>> = Vec::new();
    let mut group = "";
    for b in BINDINGS {
        if b.group != group {
            group = b.group;
            groups.push(vec![Line::styled(
                group,
                t.strong().add_modifier(Modifier::UNDERLINED),
            )]);
        }
        let last = groups.last_mut().expect("a group");
        last.push(Line::from(vec![
            Span::styled(format!("  {:<14}", keys::keys_label(b)), t.key()),
            Span::raw(b.help),
        ]));
    }
    let total: usize = groups.iter().map(|g| g.len() + 1).sum();
    let mut left: Vec<Line> = vec![
        Line::styled(
            "gyre inspector: which tokens your policy is trained on, and why",
            t.strong(),
        ),
        Line::default(),
    ];
    let mut right: Vec<Line> = vec![
        Line::styled(
            "Keys come from one table (docs/keys.md is generated from it)",
            t.dim(),
        ),
        Line::default(),
    ];
    let two = area.width >= 100;
    let mut n = 0;
    for g in groups {
        let col = if two && n >= total / 2 {
            &mut right
        } else {
            &mut left
        };
        n += g.len() + 1;
        col.extend(g);
        col.push(Line::default());
    }
    let tail = if two { &mut right } else { &mut left };
    tail.push(Line::styled(
        "Mouse: click a pane, a row or a token;",
        t.dim(),
    ));
    tail.push(Line::styled(
        "the wheel scrolls the pane under the pointer.",
        t.dim(),
    ));
    tail.push(Line::styled("Esc or ? closes this overlay.", t.dim()));
    (area, left, right, two)
}

/// How far the help overlay scrolls: until its last line is at the bottom.
pub fn help_max_scroll(app: &App) -> u16 {
    let (area, left, right, _) = help_columns(app, app.areas().full);
    let lines = left.len().max(right.len()) as u16;
    lines.saturating_sub(area.height.saturating_sub(2))
}

fn help(app: &App, scroll: u16, full: Rect, buf: &mut Buffer) {
    let (area, left, right, two) = help_columns(app, full);
    Clear.render_ref(area, buf);
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .title(" help · Esc closes · j/k scroll ");
    let inner = block.inner(area);
    block.render_ref(area, buf);
    if two {
        let [l, r] =
            RLayout::horizontal([Constraint::Percentage(50), Constraint::Fill(1)]).areas(inner);
        Paragraph::new(left).scroll((scroll, 0)).render_ref(l, buf);
        Paragraph::new(right).scroll((scroll, 0)).render_ref(r, buf);
    } else {
        Paragraph::new(left)
            .scroll((scroll, 0))
            .render_ref(inner, buf);
    }
}

fn export_prompt(app: &App, path: &str, full: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let s = &app.settings;
    let lines = vec![
        Line::raw(
            "Export the admitted set (format gyre/admitted-1): the bytes `gyre admit` writes",
        ),
        Line::styled(
            format!(
                "for these inputs with seed {} · J_max {} · priority {} · advantage drgrpo",
                s.seed,
                jmax_text(s.jmax),
                priority_text(&s.priority)
            ),
            t.dim(),
        ),
        Line::default(),
        Line::from(vec![
            Span::raw("file: "),
            Span::styled(sanitize(path), t.strong()),
            Span::styled("█", t.dim()),
        ]),
        Line::styled(
            format!("in {}", sanitize(&app.cwd.display().to_string())),
            t.dim(),
        ),
        Line::styled("Enter writes (never overwrites) · Esc cancels", t.dim()),
    ];
    // Tall enough for every wrapped line: the file name and the keys must never be cut.
    let width = (full.width * 7 / 10).max(full.width.min(76));
    let height = (scroll_limit(&lines, width.saturating_sub(2)) + 3).min(full.height);
    let area = Rect {
        x: full.x + (full.width - width) / 2,
        y: full.y + (full.height - height) / 2,
        width,
        height,
    };
    Clear.render_ref(area, buf);
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(
            Block::bordered()
                .border_type(BorderType::Double)
                .title(" export "),
        )
        .render_ref(area, buf);
}
