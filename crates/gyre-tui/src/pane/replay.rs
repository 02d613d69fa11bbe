//! The replay pane: the draw log of the selected execution, one draw at a time (the replay step)
//! or whole, as `gyre replay` prints it. Every number a draw can be checked by hand with is here:
//! the random value, the point it gives in `[0, total)`, each candidate's slice. Candidates and
//! the target spans a draw claimed are links: Enter (or a click) goes there.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Paragraph, Widget};

use crate::keys::Command;
use gyre_engine::admit::{Class, Draw, Stop, jmax_text};
use gyre_engine::report::plural;
use gyre_engine::rows::draw_targets;
use gyre_engine::score::Outcome;
use gyre_engine::why::prob_text;

use super::{Ctx, Effect, Links, Pane, PaneView, Piece, fit, inner_height, inner_width, pack};

/// What the pane shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// The draw at the replay step.
    #[default]
    Step,
    /// Every draw, the one at the replay step marked.
    Log,
}

/// The replay pane's state.
#[derive(Clone, Debug, Default)]
pub struct ReplayPane {
    /// Step or whole log.
    pub mode: Mode,
    /// First row shown.
    pub scroll: usize,
    /// The selected link (row, piece).
    pub selected: Option<(usize, usize)>,
    /// (execution, generation, step, mode, width, height) the scroll and selection were set
    /// for.
    key: Option<(usize, u64, u32, Mode, u16, usize)>,
}

impl ReplayPane {
    fn clamp(&mut self, links: &Links, h: usize) {
        self.scroll = self.scroll.min(links.rows.len().saturating_sub(h));
        if self.selected.is_some_and(|(r, k)| {
            links
                .rows
                .get(r)
                .and_then(|row| row.get(k))
                .is_none_or(|p| p.jump.is_none())
        }) {
            self.selected = None;
        }
    }

    /// Switches between the draw at the step and the whole log.
    pub fn toggle_mode(&mut self) -> &'static str {
        self.mode = match self.mode {
            Mode::Step => Mode::Log,
            Mode::Log => Mode::Step,
        };
        match self.mode {
            Mode::Step => "replay: the draw at the replay step",
            Mode::Log => "replay: the whole draw log (as gyre replay prints it)",
        }
    }

    /// The request of the highlighted link: a candidate, or the drawn request of a target span.
    pub fn selected_request(&self, ctx: &Ctx) -> Option<u32> {
        let (links, _) = content(ctx, self.mode, inner_width(ctx.areas.replay));
        let (r, k) = self.selected?;
        match links.rows.get(r)?.get(k)?.jump.as_ref()? {
            Effect::SelectRequest(r) | Effect::ShowPos { request: r, .. } => Some(*r),
            _ => None,
        }
    }

    fn scroll_by(&mut self, c: Command, links: &Links, h: usize) {
        if let Some(s) = super::scroll(self.scroll, c, links.rows.len(), h) {
            self.scroll = s;
        }
    }
}

impl PaneView for ReplayPane {
    /// Brings scroll and selection in line with the selection: on a new draw, the drawn
    /// candidate is selected and scrolled into view; when the pane changes size, the selected
    /// link stays in view.
    fn sync(&mut self, ctx: &Ctx) {
        let width = inner_width(ctx.areas.replay);
        let h = inner_height(ctx.areas.replay).max(1);
        let key = (
            ctx.sel.exec,
            ctx.sel.generation,
            ctx.sel.step,
            self.mode,
            width,
            h,
        );
        if self.key == Some(key) {
            return;
        }
        let same_draw = self
            .key
            .is_some_and(|k| (k.0, k.1, k.2, k.3) == (key.0, key.1, key.2, key.3));
        self.key = Some(key);
        let (links, drawn) = content(ctx, self.mode, width);
        if !same_draw {
            self.selected = drawn;
            self.scroll = 0;
        }
        if let Some((r, _)) = self.selected {
            if r < self.scroll || r >= self.scroll + h {
                self.scroll = if r >= h { r.saturating_sub(h / 3) } else { 0 };
            }
        }
        self.clamp(&links, h);
    }

    /// Keys while focused: Up/Down go from link to link, pages scroll, Enter follows.
    fn command(&mut self, ctx: &Ctx, c: Command) -> Vec<Effect> {
        let (links, _) = content(ctx, self.mode, inner_width(ctx.areas.replay));
        let h = inner_height(ctx.areas.replay).max(1);
        let targets = links.targets();
        let at = self
            .selected
            .and_then(|s| targets.iter().position(|&t| t == s));
        match c {
            Command::Enter => {
                return self
                    .selected
                    .and_then(|(r, k)| links.rows.get(r)?.get(k)?.jump.clone())
                    .into_iter()
                    .collect();
            }
            Command::Up | Command::Down if !targets.is_empty() => {
                let next = match (at, c) {
                    (None, _) => 0,
                    (Some(i), Command::Up) => i.saturating_sub(1),
                    (Some(i), _) => (i + 1).min(targets.len() - 1),
                };
                let (r, k) = targets[next];
                self.selected = Some((r, k));
                if r < self.scroll {
                    self.scroll = r;
                } else if r >= self.scroll + h {
                    self.scroll = r + 1 - h;
                }
                // At the first or last link, the keys still reach the text's ends.
                if next == at.unwrap_or(usize::MAX) {
                    self.scroll_by(c, &links, h);
                }
            }
            _ => {
                self.scroll_by(c, &links, h);
                match c {
                    Command::Home => self.selected = targets.first().copied(),
                    Command::End => self.selected = targets.last().copied(),
                    _ => {}
                }
            }
        }
        self.clamp(&links, h);
        Vec::new()
    }

    /// A click selects and follows the link there.
    fn click(&mut self, ctx: &Ctx, x: u16, y: u16) -> Vec<Effect> {
        let a = ctx.areas.replay;
        let (Some(cx), Some(cy)) = (x.checked_sub(a.x + 1), y.checked_sub(a.y + 1)) else {
            return Vec::new();
        };
        let (links, _) = content(ctx, self.mode, inner_width(a));
        let r = self.scroll + cy as usize;
        match links.at(r, cx) {
            Some(k) if links.rows[r][k].jump.is_some() => {
                self.selected = Some((r, k));
                links.rows[r][k].jump.clone().into_iter().collect()
            }
            _ => Vec::new(),
        }
    }

    /// The wheel scrolls three rows.
    fn wheel(&mut self, ctx: &Ctx, down: bool) -> Vec<Effect> {
        let (links, _) = content(ctx, self.mode, inner_width(ctx.areas.replay));
        let h = inner_height(ctx.areas.replay).max(1);
        let c = if down { Command::Down } else { Command::Up };
        for _ in 0..3 {
            self.scroll_by(c, &links, h);
        }
        Vec::new()
    }

    /// Draws the pane.
    fn render(&self, ctx: &Ctx, area: Rect, buf: &mut Buffer) {
        let (k, n) = (ctx.sel.step, ctx.draws());
        let (links, _) = content(ctx, self.mode, inner_width(area));
        let title = match self.mode {
            Mode::Step => format!(
                " Replay · draw {k}/{n} · J_max {} ",
                jmax_text(ctx.results.settings.jmax)
            ),
            Mode::Log => format!(" Replay · whole log · draw {k}/{n} marked "),
        };
        let highlight = ctx.theme.selected(ctx.focused(Pane::Replay));
        Paragraph::new(links.lines(self.selected, highlight))
            .scroll((self.scroll.min(u16::MAX as usize) as u16, 0))
            .block(ctx.block(Pane::Replay, title))
            .render(area, buf);
    }
}

/// The pane's rows at `width` columns, and the drawn candidate's link (the one to show first).
pub fn content(ctx: &Ctx, mode: Mode, width: u16) -> (Links, Option<(usize, usize)>) {
    let adm = ctx.admission();
    let outcome = ctx.outcome();
    let t = ctx.theme;
    let n = adm.draws.len();
    let k = ctx.sel.step as usize;
    let s = &ctx.results.settings;
    let w = width as usize;
    let mut rows: Vec<Vec<Piece>> = Vec::new();
    let mut drawn = None;
    let line = |text: String, style: Style| vec![Piece::text(fit(&text, w), style)];
    match mode {
        Mode::Step => rows.push(vec![
            Piece::text(format!("draw {k}/{n}"), t.strong()),
            Piece::text(
                fit(
                    &format!(
                        " · {} · seed {} · J_max {}",
                        plural(adm.candidates.len(), "candidate"),
                        s.seed,
                        jmax_text(s.jmax)
                    ),
                    w.saturating_sub(format!("draw {k}/{n}").len()),
                ),
                t.dim(),
            ),
        ]),
        Mode::Log => rows.push(line(
            format!(
                "execution {} · {} · {} · {s}",
                ctx.exec().id,
                outcome_text(outcome),
                plural(adm.candidates.len(), "candidate"),
            ),
            t.strong(),
        )),
    }
    match outcome {
        Outcome::Excluded(e) => rows.push(line(
            format!("excluded ({e}): no candidates drawn, nothing exported"),
            t.bad(),
        )),
        Outcome::Dummy => rows.push(line(
            "dummy: one zero-reward placeholder, no targets, no draws".into(),
            t.warn(),
        )),
        Outcome::Scored { .. } => {}
    }
    let show = |rows: &mut Vec<Vec<Piece>>, j: usize, preview: bool| -> Option<(usize, usize)> {
        let d = &adm.draws[j];
        let mut at = None;
        draw_rows(ctx, d, j as u32 + 1, preview, mode, width, rows, &mut at);
        at
    };
    match mode {
        Mode::Step => {
            if k == 0 {
                rows.push(line("nothing claimed yet".into(), t.dim()));
                if !adm.draws.is_empty() {
                    drawn = show(&mut rows, 0, true);
                }
            } else if k <= n {
                drawn = show(&mut rows, k - 1, false);
            }
            let so_far: u64 = adm.draws.iter().take(k).map(|d| d.target_tokens).sum();
            if matches!(outcome, Outcome::Scored { .. }) {
                rows.push(line(
                    format!("claimed so far {so_far} of L_i = {}", adm.targets()),
                    t.dim(),
                ));
            }
        }
        Mode::Log => {
            for j in 0..n {
                let first = rows.len();
                let at = show(&mut rows, j, false);
                if j + 1 == k {
                    drawn = at;
                    // The draw at the replay step is marked in the margin.
                    for row in &mut rows[first..] {
                        if let Some(p) = row.first_mut() {
                            p.span = p
                                .span
                                .clone()
                                .patch_style(Style::new().add_modifier(Modifier::BOLD));
                        }
                    }
                    rows[first].insert(0, Piece::text("▶ ", t.good()));
                }
            }
        }
    }
    if k == n || mode == Mode::Log {
        let stop = match adm.stop {
            Stop::JmaxReached => "stopped: J_max reached (unclaimed tokens left out)",
            Stop::Exhausted => "stopped: no candidate has unclaimed tokens left",
            Stop::NotDrawn => "",
        };
        if !stop.is_empty() {
            let l = adm.targets();
            rows.push(line(
                format!(
                    "{stop} · L_i = {l} · weight {} · B = {}",
                    gyre_engine::report::weight_text(gyre_engine::loss::target_weight(l)),
                    ctx.results.batch_executions
                ),
                if adm.stop == Stop::JmaxReached {
                    t.warn()
                } else {
                    t.dim()
                },
            ));
        }
    }
    (Links { rows }, drawn)
}

fn outcome_text(o: &Outcome) -> String {
    match o {
        Outcome::Scored { reward, .. } => format!("scored, reward {reward}"),
        Outcome::Dummy => "dummy (no assessable work), reward 0".into(),
        Outcome::Excluded(e) => format!("excluded: {e}"),
    }
}

/// The rows of draw `k` (1-based); `preview` shows draw 1 before it is made (no choice yet).
#[allow(clippy::too_many_arguments)]
fn draw_rows(
    ctx: &Ctx,
    d: &Draw,
    k: u32,
    preview: bool,
    mode: Mode,
    width: u16,
    rows: &mut Vec<Vec<Piece>>,
    drawn: &mut Option<(usize, usize)>,
) {
    let t = ctx.theme;
    let exec = ctx.exec();
    let adm = ctx.admission();
    let w = width as usize;
    let n = adm.draws.len();
    let higher: Vec<&str> = adm
        .priority
        .iter()
        .take_while(|c| **c != d.class)
        .map(|c| c.name())
        .collect();
    let head = match (preview, mode) {
        (true, _) => format!("next: draw 1/{n}, class {}", d.class),
        (false, Mode::Step) => format!("class {}", d.class),
        (false, Mode::Log) => format!("draw {k}/{n}  class {}", d.class),
    };
    let mut more = String::new();
    if !higher.is_empty() {
        more.push_str(&format!(" ({} exhausted)", higher.join(", ")));
    }
    more.push_str(&format!(
        " · {} with weight left, total {}",
        plural(d.candidates.len(), "candidate"),
        d.total
    ));
    rows.push(vec![
        Piece::text(fit(&head, w), t.strong()),
        Piece::text(fit(&more, w.saturating_sub(head.chars().count())), t.dim()),
    ]);
    if !preview {
        rows.push(vec![Piece::text(
            fit(
                &format!(
                    "random {} mod {} = {}{}",
                    d.random,
                    d.total,
                    d.point,
                    if d.rejected > 0 {
                        format!(" ({} values rejected before it)", d.rejected)
                    } else {
                        String::new()
                    },
                ),
                w,
            ),
            t.dim(),
        )]);
    }
    let id_w = d
        .candidates
        .iter()
        .map(|c| ctx.id(c.request).chars().count())
        .max()
        .unwrap_or(0)
        .min(w / 3);
    let class_w = d
        .candidates
        .iter()
        .map(|c| {
            let r = &exec.requests[c.request as usize];
            Class::of(&r.agent, r.purpose).name().len()
        })
        .max()
        .unwrap_or(0);
    let weight_w = d
        .candidates
        .iter()
        .map(|c| c.weight.to_string().len())
        .max()
        .unwrap_or(0);
    let slice_w = d
        .candidates
        .iter()
        .map(|c| format!("[{}, {})", c.from, c.to()).len())
        .max()
        .unwrap_or(0);
    for c in &d.candidates {
        let chosen = c.request == d.chosen && !preview;
        let r = &exec.requests[c.request as usize];
        let id = fit(&ctx.id(c.request), id_w);
        let mut pieces = vec![
            Piece::text(
                if chosen { " ● " } else { " ○ " },
                if chosen { t.good() } else { t.dim() },
            ),
            Piece::link(
                format!("{id:<id_w$}"),
                if chosen {
                    t.good().add_modifier(Modifier::BOLD)
                } else {
                    Style::new()
                },
                Effect::SelectRequest(c.request),
            ),
            Piece::text(
                format!(" {:<class_w$}", Class::of(&r.agent, r.purpose).name()),
                t.dim(),
            ),
            Piece::text(
                format!(
                    " w={:>weight_w$} p={:<7} {:<slice_w$}",
                    c.weight,
                    prob_text(d.probability(c)),
                    format!("[{}, {})", c.from, c.to()),
                ),
                Style::new(),
            ),
        ];
        if chosen {
            pieces.push(Piece::text(
                format!(" ◀ drawn: {} ∈ slice", d.point),
                t.good(),
            ));
        }
        // Never wider than the pane: the tail gives way, ending in `…`.
        let mut used = 0usize;
        for p in &mut pieces {
            let room = w.saturating_sub(used);
            if p.span.width() > room {
                p.span.content = fit(&p.span.content, room).into();
            }
            used += p.span.width();
        }
        if chosen || (preview && drawn.is_none()) {
            *drawn = Some((rows.len(), 1));
        }
        rows.push(pieces);
    }
    if preview {
        return;
    }
    rows.push(vec![Piece::text(
        fit(
            &format!(
                "fixed {} targets on a {}-token path:",
                d.target_tokens, d.path_tokens
            ),
            w,
        ),
        Style::new(),
    )]);
    let spans: Vec<Piece> = draw_targets(exec, adm, k)
        .into_iter()
        .map(|r| {
            Piece::link(
                fit(
                    &format!(
                        "{}[{}..{}]@{}",
                        super::sanitize(&r.request),
                        r.offset,
                        r.offset + r.len,
                        r.pos
                    ),
                    w.saturating_sub(3),
                ),
                t.good(),
                Effect::ShowPos {
                    request: d.chosen,
                    pos: r.pos,
                },
            )
        })
        .collect();
    rows.extend(pack(spans, width, "  "));
}
