//! The trainer's-eye view (`R`): the exported row of the draw at the replay step, as the
//! trainer reads it — tokens, `loss_mask`, `logprobs` and each response token's loss weight
//! (advantage × mask ÷ `L_i`) as a heat map. The row is the one `gyre admit` writes
//! ([`rows::draw_row`]); nothing here recomputes it.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget};
use unicode_width::UnicodeWidthStr;

use gyre_engine::rows::{self, Row};
use gyre_engine::score::Outcome;

use super::{Ask, Cx, OverlayView, Reply, centered};
use crate::keys::Command;
use crate::pane::{Ctx, fit, sanitize};
use crate::theme::Theme;

/// The row view, its table starting at this response token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowView(pub u64);

impl OverlayView for RowView {
    fn command(&mut self, cx: &Cx, c: Command) -> Reply {
        match c {
            Command::Row | Command::Escape => Reply::close(),
            // The replay keys step through the draws, each row from its start.
            Command::DrawNext | Command::DrawPrev | Command::DrawFirst | Command::DrawLast => {
                let (n, step) = cx
                    .ctx
                    .as_ref()
                    .map_or((0, 0), |ctx| (ctx.draws(), ctx.sel.step));
                let k = match c {
                    Command::DrawNext => (step + 1).min(n),
                    Command::DrawPrev => step.saturating_sub(1).max(1),
                    Command::DrawFirst => 1,
                    _ => n,
                };
                self.0 = 0;
                if n > 0 && k != step {
                    Reply::stay_and(Ask::Apply(crate::vocab::Effect::Step(k)))
                } else {
                    Reply::stay()
                }
            }
            _ => {
                self.0 = cx
                    .ctx
                    .as_ref()
                    .map_or(0, |ctx| scroll(ctx, cx.full, self.0, c));
                Reply::stay()
            }
        }
    }

    fn new_results(&mut self) {
        // Another (shorter) row may be on screen now.
        self.0 = 0;
    }

    fn render(&self, cx: &Cx, buf: &mut Buffer) {
        if let Some(ctx) = &cx.ctx {
            render(ctx, self.0, cx.full, buf);
        }
    }
}

/// The draw whose row is shown: the replay step, else draw 1.
pub fn draw_shown(ctx: &Ctx) -> u32 {
    ctx.sel.step.max(1)
}

/// The row shown, when the selected execution exports one at that draw.
pub fn row(ctx: &Ctx) -> Option<Row> {
    rows::draw_row(ctx.batch, ctx.results, ctx.sel.exec, draw_shown(ctx))
}

/// A response token's loss weight: advantage × mask ÷ `L_i` (the advantage taken as 1 when the
/// row has none, so the mask and `1/L_i` still show).
fn loss_weight(r: &Row, mask: u8) -> f64 {
    let adv = r.advantage.flatten().unwrap_or(1.0);
    adv * mask as f64 * r.weight
}

/// The largest |loss weight| of any target in the batch: the heat map's scale, so rows of
/// different executions compare.
fn batch_scale(ctx: &Ctx) -> f64 {
    let r = ctx.results;
    (0..ctx.batch.executions.len())
        .filter(|&i| matches!(r.outcomes[i], Outcome::Scored { .. }))
        .map(|i| {
            let adv = match r.advantage_mode {
                gyre_engine::score::AdvantageMode::None => 1.0,
                _ => r.advantages[i].unwrap_or(1.0),
            };
            (adv * gyre_engine::loss::target_weight(r.admissions[i].targets())).abs()
        })
        .fold(0.0, f64::max)
}

/// The heat style of a loss weight on the batch's scale: green for positive, red for negative,
/// brighter for larger; dim for 0.
fn heat(t: &Theme, w: f64, scale: f64) -> Style {
    if w == 0.0 {
        return t.dim();
    }
    let level = if scale > 0.0 {
        ((w.abs() / scale) * 4.0).ceil().clamp(1.0, 4.0) as usize - 1
    } else {
        3
    };
    if !t.color {
        let s = Style::new().add_modifier(Modifier::BOLD);
        return if w > 0.0 {
            s
        } else {
            s.add_modifier(Modifier::UNDERLINED)
        };
    }
    const POS: [u8; 4] = [22, 28, 34, 46];
    const NEG: [u8; 4] = [52, 88, 124, 196];
    let bg = if w > 0.0 { POS[level] } else { NEG[level] };
    Style::new()
        .fg(Color::White)
        .bg(Color::Indexed(bg))
        .add_modifier(Modifier::BOLD)
}

/// Number format of a weight: four significant digits.
fn num(w: f64) -> String {
    if w == 0.0 {
        "0".into()
    } else if w.abs() >= 1e-3 {
        format!("{w:+.4}")
    } else {
        format!("{w:+.3e}")
    }
}

fn boxed(ctx: &Ctx, full: Rect) -> (Rect, Block<'static>) {
    let area = centered(full, full.width * 9 / 10, full.height * 9 / 10);
    let title = format!(
        " trainer's-eye row · {} draw {} · [ ] other draws · j/k PgUp/PgDn scroll · t/T next target · Esc or R closes ",
        sanitize(&ctx.exec().id),
        draw_shown(ctx)
    );
    (
        area,
        Block::bordered()
            .border_type(BorderType::Double)
            .title(title),
    )
}

/// A page of the table, for scrolling: the table has at least half the box.
fn page(ctx: &Ctx, full: Rect) -> usize {
    let (area, block) = boxed(ctx, full);
    (block.inner(area).height as usize / 2).max(1)
}

/// Lines on top of the table: the summary, then at most this share of the box for the strip.
const SUMMARY_LINES: usize = 4;

/// The scroll position after `c` (the first response token of the table, `0..len`).
fn scroll(ctx: &Ctx, full: Rect, at: u64, c: Command) -> u64 {
    let Some(r) = row(ctx) else { return 0 };
    let len = r.loss_mask.len() as u64;
    if len == 0 {
        return 0;
    }
    let page = page(ctx, full) as u64;
    let last = len - 1;
    let target = |p: usize| r.loss_mask.get(p).is_some_and(|&m| m == 1);
    match c {
        Command::Up => at.saturating_sub(1),
        Command::Down => (at + 1).min(last),
        Command::PageUp => at.saturating_sub(page),
        Command::PageDown => (at + page).min(last),
        Command::Home => 0,
        Command::End => last,
        Command::NextTarget => {
            // Past the run the position is in, the next token with mask 1.
            let mut p = at as usize;
            while p < len as usize && target(p) {
                p += 1;
            }
            (p..len as usize)
                .find(|&p| target(p))
                .unwrap_or(at as usize) as u64
        }
        Command::PrevTarget => {
            let mut p = at as usize;
            while p > 0 && target(p - 1) && target(p) {
                p -= 1;
            }
            let prev = (0..p).rev().find(|&q| target(q));
            match prev {
                Some(mut q) => {
                    while q > 0 && target(q - 1) {
                        q -= 1;
                    }
                    q as u64
                }
                None => at,
            }
        }
        _ => at.min(last),
    }
}

/// Draws the view with the table starting at response token `at`.
fn render(ctx: &Ctx, at: u64, full: Rect, buf: &mut Buffer) {
    let t = ctx.theme;
    let (area, block) = boxed(ctx, full);
    Clear.render(area, buf);
    let inner = block.inner(area);
    block.render(area, buf);
    let w = inner.width as usize;
    let Some(r) = row(ctx) else {
        let why = match ctx.outcome() {
            Outcome::Excluded(e) => format!("execution excluded ({e}): it exports no row"),
            _ => "this execution exports no row (no candidate was drawn)".to_string(),
        };
        Paragraph::new(Line::styled(why, t.warn())).render(inner, buf);
        return;
    };
    let response = &r.tokens[r.prompt_len as usize..];
    let at = at.min(response.len().saturating_sub(1) as u64) as usize;
    let scale = batch_scale(ctx);
    let targets: usize = r.loss_mask.iter().filter(|&&m| m == 1).count();
    let adv = match r.advantage {
        None => "advantage omitted (--advantage none): weights shown as mask ÷ L_i".to_string(),
        Some(None) => "advantage null (no group): weights shown as mask ÷ L_i".to_string(),
        Some(Some(a)) => format!("advantage {}", num(a)),
    };
    let mut lines = vec![
        Line::from(vec![
            Span::styled(
                format!(
                    "{} · draw {}/{} · leaf {} ({}){}",
                    sanitize(&r.execution),
                    r.draw,
                    ctx.draws().max(1),
                    r.leaf
                        .as_deref()
                        .map(sanitize)
                        .unwrap_or_else(|| "–".into()),
                    r.class.map_or("–", |c| c.name()),
                    if r.dummy { " · dummy placeholder" } else { "" }
                ),
                t.strong(),
            ),
            Span::raw(format!(" · reward {} · {adv}", r.reward)),
        ]),
        Line::raw(fit(
            &format!(
                "tokens {} · prompt_len {} · response {} · loss_mask ones {targets} · L_i {} · weight 1/L_i {} · B {}",
                r.tokens.len(),
                r.prompt_len,
                response.len(),
                r.exec_targets,
                num(r.weight).trim_start_matches('+'),
                r.batch_executions
            ),
            w,
        )),
        Line::styled(
            fit(
                &format!(
                    "loss weight = advantage × mask ÷ L_i = {} on each target, 0 elsewhere; heat on the batch's scale (largest |weight| {}){}",
                    num(loss_weight(&r, 1)),
                    num(scale).trim_start_matches('+'),
                    if r.logprobs.is_none() {
                        " · logprobs null: a target has no recorded log-prob"
                    } else {
                        ""
                    }
                ),
                w,
            ),
            t.dim(),
        ),
        Line::default(),
    ];
    // The strip: the response from `at` on as text, each token in its heat.
    let pieces = ctx.text.display_pieces(&response[at..]);
    let strip_rows = (inner.height as usize / 2).saturating_sub(SUMMARY_LINES);
    let mut row_spans: Vec<Span> = Vec::new();
    let mut used = 0usize;
    let mut strip: Vec<Line> = Vec::new();
    for (k, piece) in pieces.iter().enumerate() {
        if strip.len() >= strip_rows {
            break;
        }
        let text = sanitize(&piece.replace('\n', "⏎"));
        let tw = text.width().max(1);
        if used + tw > w && used > 0 {
            strip.push(Line::from(std::mem::take(&mut row_spans)));
            used = 0;
            if strip.len() >= strip_rows {
                break;
            }
        }
        let mask = r.loss_mask[at + k];
        let text = fit(&text, w);
        used += text.width();
        row_spans.push(Span::styled(text, heat(t, loss_weight(&r, mask), scale)));
    }
    if !row_spans.is_empty() && strip.len() < strip_rows {
        strip.push(Line::from(row_spans));
    }
    lines.extend(strip);
    lines.push(Line::default());
    let top = Rect {
        height: (lines.len() as u16).min(inner.height),
        ..inner
    };
    let table = Rect {
        y: top.bottom(),
        height: inner.height - top.height,
        ..inner
    };
    Paragraph::new(lines).render(top, buf);
    // The table: one response token a row. The numbers keep their columns (as wide as the
    // row's positions and ids need); the token's text gets what is left, up to 20 columns.
    let shown = (table.height as usize).saturating_sub(1);
    let ids = &response[at..(at + shown).min(response.len())];
    let digits = |n: u64| n.max(1).ilog10() as usize + 1;
    // Columns beside the token's: position, id, log-prob, plus the separators, mask and weight.
    let numbers = |pos_w: usize, id_w: usize, lp_w: usize| pos_w + id_w + lp_w + 24;
    let (pos_w, id_w, lp_w, tok_w) = if w >= numbers(8, 8, 10) + 20 {
        (8, 8, 10, 20)
    } else {
        let pos_w = digits(r.tokens.len() as u64).max(3);
        let id_w = digits(ids.iter().copied().max().unwrap_or(0) as u64).max(2);
        let rest = numbers(pos_w, id_w, 8);
        (pos_w, id_w, 8, w.saturating_sub(rest).clamp(4, 20))
    };
    let mut rows = vec![Line::styled(
        fit(
            &format!(
                "{:>pos_w$}  {:<tok_w$} {:>id_w$}  {:>4}  {:>lp_w$}  {:>11}",
                "pos", "token", "id", "mask", "logprob", "loss weight"
            ),
            w,
        ),
        t.strong(),
    )];
    let texts = ctx.text.display_pieces(ids);
    for (k, piece) in texts.iter().enumerate() {
        let p = at + k;
        let mask = r.loss_mask[p];
        let lw = loss_weight(&r, mask);
        let lp = r
            .logprobs
            .as_ref()
            .map_or("null".to_string(), |l| format!("{:.4}", l[p]));
        let tok = fit(&sanitize(&piece.replace('\n', "⏎")), tok_w);
        let pad = tok_w.saturating_sub(tok.width());
        let style = if mask == 1 { Style::new() } else { t.dim() };
        rows.push(Line::from(vec![
            Span::styled(
                format!("{:>pos_w$}  ", r.prompt_len as usize + p + 1),
                t.dim(),
            ),
            Span::styled(tok, heat(t, lw, scale)),
            Span::raw(" ".repeat(pad)),
            Span::styled(
                format!(" {:>id_w$}  {:>4}  {:>lp_w$}  ", response[p], mask, lp),
                style,
            ),
            Span::styled(format!("{:>11}", num(lw)), heat(t, lw, scale)),
        ]));
    }
    Paragraph::new(rows).render(table, buf);
}
