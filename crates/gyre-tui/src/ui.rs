//! Drawing the whole screen: a pure function of [`App`] (the tree widget's scroll offset
//! aside). Each pane draws itself; this puts them together with the title, the status line, the
//! key hints and the overlays.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Clear, Gauge, Paragraph, Widget, Wrap};

use gyre_engine::paint::{ColorMode, Tone};
use gyre_engine::stats::Totals;

use super::app::App;
use super::keys;
use super::layout::{MIN_SIZE, big_enough};
use super::overlay::centered;
use super::pane::{Pane, fit, fit_line, sanitize};
use super::vocab::{Change, Load, Phase};
use gyre_engine::admit::{jmax_text, priority_text};
use gyre_format::named::Named;

/// Draws the whole screen. A terminal resized since the app last heard of it (the event is on
/// its way) gets the app's screen cut to what fits, never a draw outside its buffer.
pub fn render(app: &App, f: &mut Frame<'_>) {
    let area = f.area();
    if (area.width, area.height) == app.size {
        draw(app, f.buffer_mut());
        return;
    }
    let mut own = Buffer::empty(Rect::new(0, 0, app.size.0, app.size.1));
    draw(app, &mut own);
    let out = f.buffer_mut();
    for y in 0..area.height.min(app.size.1) {
        for x in 0..area.width.min(app.size.0) {
            if let Some(cell) = out.cell_mut((area.x + x, area.y + y)) {
                *cell = own[(x, y)].clone();
            }
        }
    }
}

/// Draws the whole screen into a buffer of the app's size.
pub fn draw(app: &App, buf: &mut Buffer) {
    let a = app.areas();
    if !big_enough(app.size) {
        too_small(app, a.full, buf);
        return;
    }
    title(app, a.title, buf);
    hints(app, a.hints, buf);
    match &app.load {
        Load::Loading { phase, done, total } => {
            loading(app, *phase, *done, *total, a.full, buf);
            overlay(app, buf);
            return;
        }
        Load::Failed(e) => {
            failed(app, e, a.full, buf);
            overlay(app, buf);
            return;
        }
        Load::Ready => {}
    }
    let Some(ctx) = app.ctx() else {
        let area = centered(a.full, 60, 5);
        Paragraph::new(vec![
            Line::styled("the input holds no execution", app.theme.warn()),
            Line::styled("nothing to show · q quits", app.theme.dim()),
        ])
        .block(Block::bordered().title(" gyre "))
        .render(area, buf);
        return;
    };
    let path = app.path();
    for pane in Pane::ALL {
        let area = a.of(pane);
        if area.width > 0 {
            app.panes.get(pane).render(&ctx, area, buf);
        }
    }
    // The why line under the token path belongs to no pane (it never takes the focus).
    if a.tokens.width > 0 {
        super::pane::why::render(&ctx, path, a.why, buf);
    }
    status(app, a.status, a.hints, buf);
    overlay(app, buf);
}

/// Draws the open overlay over the rest (before the data is there only help opens).
fn overlay(app: &App, buf: &mut Buffer) {
    if let Some(o) = app.overlay.view() {
        o.render(&app.overlay_cx(), buf);
    }
}

fn too_small(app: &App, full: Rect, buf: &mut Buffer) {
    let lines = vec![
        Line::styled("terminal too small", app.theme.warn()),
        Line::raw(format!(
            "need {}×{}, have {}×{}",
            MIN_SIZE.0, MIN_SIZE.1, app.size.0, app.size.1
        )),
        Line::styled("q quits", app.theme.dim()),
    ];
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .render(full, buf);
}

fn failed(app: &App, e: &str, full: Rect, buf: &mut Buffer) {
    let area = centered(full, full.width * 8 / 10, full.height * 6 / 10);
    Clear.render(area, buf);
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
    .render(area, buf);
}

/// `−12`, `+3` or `±0`.
fn delta(a: u64, b: u64) -> String {
    match b.cmp(&a) {
        std::cmp::Ordering::Greater => format!("+{}", b - a),
        std::cmp::Ordering::Less => format!("−{}", a - b),
        std::cmp::Ordering::Equal => "±0".into(),
    }
}

fn moved(name: &str, a: u64, b: u64) -> Option<String> {
    (a != b).then(|| format!("{name} {a} → {b} ({})", delta(a, b)))
}

/// The line a settings change leaves: what it did to the batch and to the selected execution
/// (figures that did not move are left out).
pub fn change_text(c: &Change) -> String {
    let (b, a) = (&c.before, &c.after);
    let batch: Vec<String> = [
        moved("rows", b.rows, a.rows),
        moved("targets", b.targets, a.targets),
        moved("left out", b.left_out, a.left_out),
        moved("B", b.batch_executions, a.batch_executions),
    ]
    .into_iter()
    .flatten()
    .collect();
    let exec: Vec<String> = [
        moved("L_i", c.exec_before.targets, c.exec_after.targets),
        moved("rows", c.exec_before.rows, c.exec_after.rows),
        moved("left out", c.exec_before.left_out, c.exec_after.left_out),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut out = format!("{}: ", c.what);
    if batch.is_empty() {
        out.push_str("rows, targets and left-out tokens unchanged");
    } else {
        out.push_str(&batch.join(" · "));
    }
    out.push_str(&format!(" · {}: ", sanitize(&c.exec)));
    if exec.is_empty() {
        out.push_str(&format!("L_i {} unchanged", c.exec_after.targets));
    } else {
        out.push_str(&exec.join(" · "));
    }
    out
}

fn totals_text(t: &Totals) -> String {
    format!(
        "rows {} · targets {} · left out {} · B {}",
        t.rows, t.targets, t.left_out, t.batch_executions
    )
}

/// `s` cut to `w` columns from the left, starting with `…` when cut: a path keeps its file name.
fn fit_left(s: &str, w: usize) -> String {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    if s.width() <= w {
        return s.to_string();
    }
    let mut tail = Vec::new();
    let mut used = 0;
    for ch in s.chars().rev() {
        let cw = ch.width().unwrap_or(0);
        if used + cw + 1 > w {
            break;
        }
        used += cw;
        tail.push(ch);
    }
    if w == 0 {
        return String::new();
    }
    std::iter::once('…').chain(tail.into_iter().rev()).collect()
}

fn title(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let w = area.width as usize;
    // Which recording is open comes first, always: a long path keeps its file name.
    let label = fit_left(&sanitize(&app.label), (w / 2).max(20));
    let mut spans = vec![
        Span::styled(" gyre ", t.strong().add_modifier(Modifier::REVERSED)),
        Span::raw(" "),
        Span::styled(label, t.strong()),
    ];
    let sep = || Span::styled(" · ", t.dim());
    // Then the draw shown and the settings; what the tail cannot hold gives way.
    if let (Some(d), Some(ctx)) = (&app.data, app.ctx()) {
        let s = &d.results.settings;
        spans.push(sep());
        spans.push(Span::raw(format!(
            "{} ",
            fit(&sanitize(&ctx.exec().id), 24)
        )));
        spans.push(Span::styled(
            format!("draw {}/{}", app.sel.step, app.draws()),
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
            "adv {}",
            d.results.advantage_mode.name()
        )));
        if app.rerunning() {
            spans.push(Span::styled(" · re-running…", t.warn()));
        }
        spans.push(sep());
        spans.push(Span::raw(format!(
            "priority {}",
            priority_text(&s.priority)
        )));
        spans.push(sep());
        spans.push(Span::raw(totals_text(&d.totals)));
        spans.push(Span::styled(
            format!(
                " · {} executions · tokens: {}",
                d.batch.executions.len(),
                sanitize(&app.tokenizer)
            ),
            t.dim(),
        ));
    }
    Paragraph::new(fit_line(spans, w)).render(area, buf);
}

fn loading(app: &App, phase: Phase, done: u64, total: u64, full: Rect, buf: &mut Buffer) {
    let area = centered(full, (full.width * 6 / 10).max(40), 3);
    let ratio = if total == 0 {
        0.0
    } else {
        (done as f64 / total as f64).clamp(0.0, 1.0)
    };
    let label = match phase {
        Phase::Reading if total > 0 && done >= total => {
            format!("read {:.1} MB · building trees…", total as f64 / 1e6)
        }
        Phase::Reading => format!(
            "reading records: {:.1} / {:.1} MB",
            done as f64 / 1e6,
            total as f64 / 1e6
        ),
        Phase::Admitting => format!("scoring and admitting: {done}/{total} executions"),
    };
    Clear.render(area, buf);
    Gauge::default()
        .block(Block::bordered().title(format!(" loading {} ", sanitize(&app.label))))
        .gauge_style(if app.theme.color {
            Style::new().fg(ratatui::style::Color::Cyan)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        })
        .ratio(ratio)
        .label(label)
        .render(area, buf);
    let hint = Rect {
        y: area.bottom(),
        height: 1,
        ..area
    };
    if hint.bottom() <= full.bottom() {
        Paragraph::new(Line::styled(
            " the screen stays live: q quits, ? shows the keys",
            app.theme.dim(),
        ))
        .render(hint, buf);
    }
}

fn legend(app: &App) -> Line<'static> {
    let t = &app.theme;
    let mut spans: Vec<Span<'static>> = text_progress(app).into_iter().collect();
    spans.push(Span::styled(format!("{}: ", app.colour.name()), t.dim()));
    for tone in Tone::legend(app.colour) {
        spans.push(Span::styled(format!(" {} ", tone.label()), t.tone(tone)));
        spans.push(Span::raw(" "));
    }
    spans.extend(lens_progress(app));
    if matches!(app.colour, ColorMode::Audit | ColorMode::Gap) && app.audit().is_none() {
        spans.push(Span::styled(" auditing the trained samples…", t.warn()));
    }
    spans.push(Span::styled("  (c: next colouring)", t.dim()));
    Line::from(spans)
}

/// While the tokenizer loads: that ids are shown until it is there.
fn text_progress(app: &App) -> Option<Span<'static>> {
    let name = app.text_loading.as_ref()?;
    Some(Span::styled(
        format!(" ids shown: token text once {} loads… ", sanitize(name)),
        app.theme.warn(),
    ))
}

/// While the lens colouring waits for the lens: how far the worker is.
fn lens_progress(app: &App) -> Option<Span<'static>> {
    if app.colour != ColorMode::Lens || app.whatif().is_some() {
        return None;
    }
    let done = app
        .whatif_progress
        .map_or(String::new(), |(d, n)| format!(" {d}/{n}"));
    Some(Span::styled(
        format!(" lens: looking through {} seeds…{done}", app.lens_seeds),
        app.theme.warn(),
    ))
}

/// The status line: a message, else what the last settings change did, else the legend. A
/// change too long for one row (the selected execution's figures come last) takes the key-hint
/// row below as well.
fn status(app: &App, area: Rect, hints: Rect, buf: &mut Buffer) {
    let w = area.width as usize;
    let line = match (&app.message, &app.change) {
        (Some(m), _) => Line::styled(format!(" {}", sanitize(&m.text)), app.theme.strong()),
        (None, Some(c)) => {
            // A seed or priority change also starts a new lens: its progress leads the line.
            let mut spans: Vec<Span<'static>> = text_progress(app)
                .into_iter()
                .chain(lens_progress(app))
                .collect();
            spans.extend([
                Span::styled(" Δ ", app.theme.key()),
                Span::styled(change_text(c), app.theme.strong()),
            ]);
            let esc = Span::styled("  (Esc hides)", app.theme.dim());
            if Line::from(spans.clone()).width() + esc.width() <= 2 * w {
                spans.push(esc);
            }
            let line = Line::from(spans);
            if line.width() > w && hints.y == area.bottom() && hints.height > 0 {
                let both = Rect { height: 2, ..area };
                let mut rows = super::pane::wrap(vec![line], area.width);
                if rows.len() > 2 {
                    let rest: Vec<Span<'static>> = rows.drain(1..).flat_map(|l| l.spans).collect();
                    rows.push(fit_line(rest, w));
                }
                Clear.render(both, buf);
                Paragraph::new(rows).render(both, buf);
                return;
            }
            line
        }
        (None, None) => legend(app),
    };
    Paragraph::new(fit_line(line.spans, w)).render(area, buf);
}

fn hints(app: &App, area: Rect, buf: &mut Buffer) {
    let t = &app.theme;
    let mut spans = Vec::new();
    let mut width = 0usize;
    // Before the data is there only help and quit do anything.
    let all = keys::hints();
    let shown = if app.load == Load::Ready {
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
    Paragraph::new(Line::from(spans)).render(area, buf);
}
