//! The batch dashboard (`D`): tokens by provenance, left-out tokens by reason, rows per
//! execution, rewards and advantages per group, and cost and coverage per J_max from the
//! background sweep. Every chart has a selected bar; Enter goes to an example of it (a token,
//! an execution) or, on the J_max curve, re-runs with that J_max.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Bar, BarChart, BarGroup, Block, BorderType, Chart, Clear, Dataset, GraphType,
    LegendPosition, Paragraph, Widget,
};

use gyre_engine::stats::{Breakdown, Example};

use super::{Ask, Cx, OverlayView, Reads, Reply};
use crate::keys::Command;
use crate::pane::{Ctx, Effect, fit, sanitize};
use crate::theme::Theme;
use crate::whatif::{SWEEP_JMAX, WhatIf};

/// The charts, in Tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plot {
    /// Tree tokens by provenance.
    Provenance,
    /// Trainable tokens that are not targets, by reason.
    LeftOut,
    /// Rows per execution.
    Rows,
    /// Rewards and advantages per group.
    Groups,
    /// Cost and coverage per J_max.
    Cost,
}

impl Plot {
    /// Every chart, in Tab order.
    pub const ALL: [Plot; 5] = [
        Plot::Provenance,
        Plot::LeftOut,
        Plot::Rows,
        Plot::Groups,
        Plot::Cost,
    ];

    fn title(self) -> &'static str {
        match self {
            Plot::Provenance => "tokens by provenance",
            Plot::LeftOut => "trainable, not a target: why",
            Plot::Rows => "rows per execution",
            Plot::Groups => "rewards • and advantages ▪ per group",
            Plot::Cost => "cost and coverage per J_max (% of uncapped cost, % of trainable)",
        }
    }
}

/// Which chart has the keys and which bar each has selected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dash {
    /// Index into the charts (`Plot::ALL`, in Tab order).
    pub chart: usize,
    /// Selected bar per chart.
    pub bar: [usize; 5],
}

/// What Enter on a bar asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Go {
    /// Show this (a token, an execution).
    To(Effect),
    /// Re-run with this J_max.
    Jmax(u32),
    /// Nothing to go to; say why.
    Say(String),
}

/// Bars of each chart.
fn counts(b: &Breakdown) -> [usize; 5] {
    [
        b.provenance.len(),
        b.left_out.len(),
        b.rows.len(),
        b.groups.len(),
        SWEEP_JMAX.len(),
    ]
}

impl Dash {
    /// The chart with the keys.
    pub fn focused(&self) -> Plot {
        Plot::ALL[self.chart % Plot::ALL.len()]
    }

    /// Keys inside the dashboard: Tab/Shift-Tab choose a chart, ←→ (↑↓) a bar.
    pub fn choose(&mut self, b: &Breakdown, c: Command) {
        let n = counts(b)[self.chart];
        let bar = &mut self.bar[self.chart];
        match c {
            Command::FocusNext => self.chart = (self.chart + 1) % Plot::ALL.len(),
            Command::FocusPrev => self.chart = (self.chart + Plot::ALL.len() - 1) % Plot::ALL.len(),
            Command::Left | Command::Up => *bar = bar.saturating_sub(1),
            Command::Right | Command::Down => *bar = (*bar + 1).min(n.saturating_sub(1)),
            Command::Home => *bar = 0,
            Command::End => *bar = n.saturating_sub(1),
            _ => {}
        }
    }

    /// New figures (a re-run, a recording read again) can have fewer bars: each selection stays
    /// where it was when it can, else on the last bar.
    pub fn fit(&mut self, b: &Breakdown) {
        for (bar, n) in self.bar.iter_mut().zip(counts(b)) {
            *bar = (*bar).min(n.saturating_sub(1));
        }
    }

    /// Where Enter on the selected bar goes.
    pub fn go(&self, ctx: &Ctx, b: &Breakdown) -> Go {
        let at = self.bar[self.chart];
        let example = |bars: &[gyre_engine::stats::Bar]| match bars.get(at) {
            Some(bar) => match bar.example {
                Some(e) => Go::To(token_effect(ctx, e)),
                None => Go::Say(format!("no token is counted as {}", bar.label)),
            },
            None => Go::Say("nothing here".into()),
        };
        match self.focused() {
            Plot::Provenance => example(&b.provenance),
            Plot::LeftOut => example(&b.left_out),
            Plot::Rows if at < b.rows.len() => Go::To(Effect::OpenExec(at)),
            Plot::Groups => match b.groups.get(at).and_then(|g| g.members.first()) {
                Some(&(i, _, _)) => Go::To(Effect::OpenExec(i)),
                None => Go::Say("the batch has no groups".into()),
            },
            Plot::Cost => Go::Jmax(SWEEP_JMAX[at.min(SWEEP_JMAX.len() - 1)]),
            Plot::Rows => Go::Say("nothing here".into()),
        }
    }
}

impl OverlayView for Dash {
    fn command(&mut self, cx: &Cx, c: Command) -> Reply {
        match c {
            Command::Dashboard | Command::Escape => Reply::close(),
            Command::Enter => {
                let (Some(ctx), Some(b)) = (&cx.ctx, cx.breakdown) else {
                    return Reply::stay();
                };
                match self.go(ctx, b) {
                    Go::To(e) => Reply::close_and(Ask::Apply(e)),
                    Go::Jmax(j) => Reply::close_and(Ask::Jmax(j)),
                    Go::Say(m) => Reply::say(m),
                }
            }
            _ => {
                if let Some(b) = cx.breakdown {
                    self.choose(b, c);
                }
                Reply::stay()
            }
        }
    }

    fn sync(&mut self, cx: &Cx) -> bool {
        if let Some(b) = cx.breakdown {
            self.fit(b);
        }
        true
    }

    fn reads(&self) -> Reads {
        Reads {
            whatif: true,
            breakdown: true,
            comparison: false,
        }
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        if let Some(ctx) = &cx.ctx {
            render(
                ctx,
                cx.breakdown,
                cx.whatif,
                cx.whatif_progress,
                self,
                cx.full,
                buf,
            );
        }
    }
}

/// Shows example token `e`: the path of the request that owns its node (it is on that path),
/// cursor on the token.
fn token_effect(ctx: &Ctx, e: Example) -> Effect {
    let exec = &ctx.batch.executions[e.exec];
    let node = &exec.tree.nodes[e.node as usize];
    Effect::Jump {
        exec: e.exec,
        request: node.owner,
        pos: exec.tree.depth_tokens(node.parent) + e.index as u64,
    }
}

fn boxed<'a>(t: &Theme, title: String, focused: bool) -> Block<'a> {
    Block::bordered()
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(t.border(focused))
        .title(title)
}

fn selected(t: &Theme) -> Style {
    if t.color {
        Style::new().fg(Color::Black).bg(Color::LightYellow)
    } else {
        Style::new().add_modifier(Modifier::REVERSED)
    }
}

/// A selected point or vertical bar: drawn in the highlight colour itself.
fn selected_mark(t: &Theme) -> Style {
    if t.color {
        Style::new()
            .fg(Color::LightYellow)
            .add_modifier(Modifier::BOLD)
    } else {
        Style::new().add_modifier(Modifier::REVERSED)
    }
}

/// Points of a chart drawn as `marker`, in `colour` when colour is on (`None`: the highlight).
fn series<'a>(
    t: &Theme,
    name: &'static str,
    marker: Marker,
    kind: GraphType,
    colour: Option<Color>,
    data: &'a [(f64, f64)],
) -> Dataset<'a> {
    let style = match colour {
        None => selected_mark(t),
        Some(c) if t.color => Style::new().fg(c),
        Some(_) => Style::new(),
    };
    Dataset::default()
        .name(name)
        .marker(marker)
        .graph_type(kind)
        .style(style)
        .data(data)
}

fn bar_colour(t: &Theme) -> Style {
    if t.color {
        Style::new().fg(Color::Cyan)
    } else {
        Style::new()
    }
}

/// Token counts as horizontal bars with their labels, the selected one highlighted.
fn token_bars(
    t: &Theme,
    bars: &[gyre_engine::stats::Bar],
    sel: usize,
    block: Block<'_>,
    area: Rect,
    buf: &mut Buffer,
) {
    let total: u64 = bars.iter().map(|b| b.tokens).sum::<u64>().max(1);
    // One bar a line: when they do not all fit, a window of them that holds the selected one.
    let fits = (block.inner(area).height as usize).max(1);
    let first = window_start(sel, fits, bars.len());
    let block = match more_bars(first, fits, bars.len()) {
        Some(note) => block.title_bottom(note),
        None => block,
    };
    let data: Vec<Bar> = bars
        .iter()
        .enumerate()
        .skip(first)
        .take(fits)
        .map(|(i, b)| {
            let share = b.tokens as f64 / total as f64;
            Bar::default()
                .value(b.tokens)
                .label(Line::from(format!("{:<22}", b.label)))
                .text_value(format!("{} ({:.1}%)", b.tokens, share * 100.0))
                .style(if i == sel { selected(t) } else { bar_colour(t) })
        })
        .collect();
    BarChart::default()
        .block(block)
        .direction(Direction::Horizontal)
        .bar_width(1)
        .bar_gap(0)
        .data(BarGroup::default().bars(&data))
        .render(area, buf);
}

/// When a chart shows only some of its bars: which, and on which side the others are.
fn more_bars(first: usize, fits: usize, len: usize) -> Option<Line<'static>> {
    (len > fits).then(|| {
        let last = (first + fits).min(len);
        Line::from(format!(
            " bars {}–{last} of {len}: more {} ",
            first + 1,
            match (first > 0, last < len) {
                (true, true) => "before and after",
                (true, false) => "before",
                _ => "after",
            }
        ))
        .right_aligned()
    })
}

/// The first of `fits` bars shown out of `len` so that bar `sel` is among them (it stays in
/// the middle while it can).
fn window_start(sel: usize, fits: usize, len: usize) -> usize {
    sel.saturating_sub(fits / 2).min(len.saturating_sub(fits))
}

/// Draws the dashboard over the whole screen.
fn render(
    ctx: &Ctx,
    b: Option<&Breakdown>,
    whatif: Option<&WhatIf>,
    progress: Option<(usize, usize)>,
    d: &Dash,
    full: Rect,
    buf: &mut Buffer,
) {
    let t = ctx.theme;
    Clear.render(full, buf);
    let outer = Block::bordered()
        .border_type(BorderType::Double)
        .title(" dashboard · Tab chart · ←→ bar · Enter go to an example · Esc or D closes ");
    let inner = outer.inner(full);
    outer.render(full, buf);
    let Some(b) = b else {
        Paragraph::new(Line::styled("counting…", t.dim())).render(inner, buf);
        return;
    };
    let [mut top, mut middle, mut bottom, foot] = Layout::vertical([
        Constraint::Length((b.provenance.len() as u16 + 2).min(inner.height / 3 + 2)),
        Constraint::Length((inner.height / 4).max(5)),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(inner);
    let focus = d.focused();
    if bottom.height < MIN_CHART_HEIGHT {
        // Too low for three rows of charts: the row of the focused one fills the screen (Tab
        // still goes round all five; the footer names the selection).
        let all = Rect {
            height: inner.height.saturating_sub(1),
            ..inner
        };
        let none = Rect { height: 0, ..all };
        (top, middle, bottom) = match focus {
            Plot::Provenance | Plot::LeftOut => (all, none, none),
            Plot::Rows => (none, all, none),
            Plot::Groups | Plot::Cost => (none, none, all),
        };
    }
    let [prov, left] = halves(top);
    let [groups, cost] = halves(bottom);
    let title = |c: Plot| format!(" {} ", c.title());
    if top.height > 0 {
        token_bars(
            t,
            &b.provenance,
            d.bar[0],
            boxed(t, title(Plot::Provenance), focus == Plot::Provenance),
            prov,
            buf,
        );
        token_bars(
            t,
            &b.left_out,
            d.bar[1],
            boxed(t, title(Plot::LeftOut), focus == Plot::LeftOut),
            left,
            buf,
        );
    }
    if middle.height > 0 {
        rows_chart(ctx, b, d.bar[2], focus == Plot::Rows, middle, buf);
    }
    if bottom.height > 0 {
        groups_chart(t, b, d.bar[3], focus == Plot::Groups, groups, buf);
        cost_chart(
            t,
            whatif,
            progress,
            d.bar[4],
            focus == Plot::Cost,
            cost,
            buf,
        );
    }
    let line = footer(ctx, b, whatif, d);
    Paragraph::new(Line::styled(fit(&line, foot.width as usize), t.strong())).render(foot, buf);
}

/// The least height of a chart's box (borders, axis and a few lines of plot).
const MIN_CHART_HEIGHT: u16 = 6;

fn halves(r: Rect) -> [Rect; 2] {
    Layout::horizontal([Constraint::Percentage(50), Constraint::Fill(1)]).areas(r)
}

/// Rows per execution as vertical bars, a window of them around the selected one.
fn rows_chart(ctx: &Ctx, b: &Breakdown, sel: usize, focused: bool, area: Rect, buf: &mut Buffer) {
    let t = ctx.theme;
    let block = boxed(t, format!(" {} ", Plot::Rows.title()), focused);
    let inner = block.inner(area);
    let per = 3u16;
    let fits = (inner.width / per).max(1) as usize;
    let first = window_start(sel, fits, b.rows.len());
    let block = match more_bars(first, fits, b.rows.len()) {
        Some(note) => block.title_bottom(note),
        None => block,
    };
    let data: Vec<Bar> = b
        .rows
        .iter()
        .enumerate()
        .skip(first)
        .take(fits)
        .map(|(i, &r)| {
            Bar::default()
                .value(r)
                .text_value(r.to_string())
                .label(Line::from(format!("{}", i % 100)))
                .style(if i == sel {
                    selected_mark(t)
                } else {
                    bar_colour(t)
                })
        })
        .collect();
    BarChart::default()
        .block(block)
        .bar_width(per - 1)
        .bar_gap(1)
        .data(BarGroup::default().bars(&data))
        .render(area, buf);
}

/// Each group's rewards (●) and advantages (×) over the group index.
fn groups_chart(t: &Theme, b: &Breakdown, sel: usize, focused: bool, area: Rect, buf: &mut Buffer) {
    let block = boxed(t, format!(" {} ", Plot::Groups.title()), focused);
    if b.groups.is_empty() {
        let inner = block.inner(area);
        block.render(area, buf);
        Paragraph::new(Line::styled(
            "no execution names a group: no advantages",
            t.dim(),
        ))
        .render(inner, buf);
        return;
    }
    let mut rewards = Vec::new();
    let mut advs = Vec::new();
    let mut chosen = Vec::new();
    for (g, group) in b.groups.iter().enumerate() {
        for &(_, r, a) in &group.members {
            let x = g as f64 + 1.0;
            if let Some(r) = r {
                rewards.push((x, r));
                if g == sel {
                    chosen.push((x, r));
                }
            }
            if let Some(a) = a {
                advs.push((x, a));
            }
        }
    }
    let ys = rewards.iter().chain(&advs).map(|p| p.1);
    let (lo, hi) = ys.fold((0.0f64, 1.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let xmax = b.groups.len() as f64 + 1.0;
    let datasets = vec![
        series(
            t,
            "reward",
            Marker::Dot,
            GraphType::Scatter,
            Some(Color::Green),
            &rewards,
        ),
        series(
            t,
            "advantage",
            Marker::HalfBlock,
            GraphType::Scatter,
            Some(Color::Magenta),
            &advs,
        ),
        series(
            t,
            "selected",
            Marker::Block,
            GraphType::Scatter,
            None,
            &chosen,
        ),
    ];
    Chart::new(datasets)
        .block(block)
        .legend_position(Some(LegendPosition::BottomRight))
        .x_axis(Axis::default().bounds([0.0, xmax]).labels([
            "".to_string(),
            gyre_engine::report::plural(b.groups.len(), "group"),
        ]))
        .y_axis(
            Axis::default()
                .bounds([lo, hi])
                .labels([format!("{lo:.2}"), format!("{hi:.2}")]),
        )
        .render(area, buf);
}

/// Cost (forward-backward tokens vs uncapped) and coverage per J_max, from the sweep.
fn cost_chart(
    t: &Theme,
    whatif: Option<&WhatIf>,
    progress: Option<(usize, usize)>,
    sel: usize,
    focused: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    let block = boxed(t, format!(" {} ", Plot::Cost.title()), focused);
    let Some(w) = whatif else {
        let inner = block.inner(area);
        block.render(area, buf);
        let text = match progress {
            Some((done, total)) => format!("sweeping in the background… {done}/{total}"),
            None => "sweeping in the background…".into(),
        };
        Paragraph::new(Line::styled(text, t.dim())).render(inner, buf);
        return;
    };
    let x = |j: usize| j as f64 + 1.0;
    let cost: Vec<(f64, f64)> = (0..SWEEP_JMAX.len())
        .filter_map(|j| w.sweep.cost_vs_uncapped(j).map(|c| (x(j), c * 100.0)))
        .collect();
    let tree: Vec<(f64, f64)> = (0..SWEEP_JMAX.len())
        .filter_map(|j| {
            w.sweep
                .tree_cost_vs_uncapped_rows(j)
                .map(|c| (x(j), c * 100.0))
        })
        .collect();
    let cover: Vec<(f64, f64)> = (0..SWEEP_JMAX.len())
        .filter_map(|j| w.sweep.coverage(Some(j)).map(|c| (x(j), c * 100.0)))
        .collect();
    let chosen: Vec<(f64, f64)> = cost
        .iter()
        .chain(&tree)
        .chain(&cover)
        .filter(|p| p.0 == x(sel))
        .copied()
        .collect();
    let datasets = vec![
        series(
            t,
            "cost %",
            Marker::Braille,
            GraphType::Line,
            Some(Color::Yellow),
            &cost,
        ),
        series(
            t,
            "tree packs %",
            Marker::Braille,
            GraphType::Line,
            Some(Color::Cyan),
            &tree,
        ),
        series(
            t,
            "coverage %",
            Marker::Braille,
            GraphType::Line,
            Some(Color::Green),
            &cover,
        ),
        series(
            t,
            "selected",
            Marker::Block,
            GraphType::Scatter,
            None,
            &chosen,
        ),
    ];
    let labels: Vec<Span> = SWEEP_JMAX
        .iter()
        .map(|&j| {
            Span::raw(if j == 0 {
                "∞".to_string()
            } else {
                j.to_string()
            })
        })
        .collect();
    Chart::new(datasets)
        .block(block)
        .legend_position(Some(LegendPosition::BottomRight))
        .x_axis(
            Axis::default()
                .title("J_max")
                .bounds([1.0, SWEEP_JMAX.len() as f64])
                .labels(labels),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, 100.0])
                .labels(["0%", "50%", "100%"]),
        )
        .render(area, buf);
}

/// The selected bar in words.
fn footer(ctx: &Ctx, b: &Breakdown, whatif: Option<&WhatIf>, d: &Dash) -> String {
    let at = d.bar[d.chart];
    let tokens = |bars: &[gyre_engine::stats::Bar]| {
        bars.get(at).map_or(String::new(), |bar| {
            format!(
                "{}: {} tokens · Enter shows {}",
                bar.label,
                bar.tokens,
                if bar.example.is_some() {
                    "the first of them"
                } else {
                    "nothing (none counted)"
                }
            )
        })
    };
    match d.focused() {
        Plot::Provenance => tokens(&b.provenance),
        Plot::LeftOut => tokens(&b.left_out),
        Plot::Rows => b.rows.get(at).map_or(String::new(), |r| {
            let e = &ctx.batch.executions[at];
            format!(
                "execution {} ({}): {r} rows · L_i {} · Enter opens it",
                sanitize(&e.id),
                ctx.results.outcomes[at].label(),
                ctx.results.admissions[at].targets()
            )
        }),
        Plot::Groups => b.groups.get(at).map_or(String::new(), |g| {
            let rewards: Vec<String> = g
                .members
                .iter()
                .map(|(_, r, _)| r.map_or("excluded".into(), |r| format!("{r}")))
                .collect();
            format!(
                "group {}: {} executions · rewards {} · Enter opens the first",
                sanitize(&g.group),
                g.members.len(),
                rewards.join(", ")
            )
        }),
        Plot::Cost => {
            let j = SWEEP_JMAX[at.min(SWEEP_JMAX.len() - 1)];
            let name = if j == 0 {
                "uncapped".to_string()
            } else {
                format!("J_max {j}")
            };
            match whatif {
                Some(w) => format!(
                    "{name}: cost {} of the uncapped forward-backward tokens as flat rows, {} as tree packs, coverage {} (mean of {} seeds from {}) · Enter re-runs with it",
                    w.sweep
                        .cost_vs_uncapped(at)
                        .map_or("–".into(), |c| format!("{:.1}%", c * 100.0)),
                    w.sweep
                        .tree_cost_vs_uncapped_rows(at)
                        .map_or("–".into(), |c| format!("{:.1}%", c * 100.0)),
                    w.sweep
                        .coverage(Some(at))
                        .map_or("–".into(), |c| format!("{:.1}%", c * 100.0)),
                    w.options.seeds,
                    w.options.seed
                ),
                None => format!("{name}: still sweeping · Enter re-runs with it"),
            }
        }
    }
}
