//! The token pane: the selected request's path as wrapped text, every token coloured by claim
//! state, provenance or log-prob heat, with a token cursor.
//!
//! The path shown is keyed by (batch, execution, request, results generation): a view made for
//! another selection is never drawn or moved, whatever order actions come in.

use std::collections::HashMap;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};

use crate::keys::Command;
use crate::path::{Layout, PathIndex, RowStart};
use crate::vocab::Selection;
use gyre_engine::paint::{ColorMode, Tone};
use gyre_engine::provenance::{Reason, node_reason};
use gyre_engine::tree::{NodeId, NodeKind};

use super::{Ctx, Effect, Pane, PaneView, sanitize};

/// What a path view was made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathKey {
    /// Batch generation (the path's node ids hold only within its batch).
    pub batch: u64,
    /// Execution index.
    pub exec: usize,
    /// Request index.
    pub request: u32,
    /// Results generation.
    pub generation: u64,
}

impl PathKey {
    /// The key the selection asks for.
    pub fn of(sel: &Selection) -> Option<PathKey> {
        Some(PathKey {
            batch: sel.batch,
            exec: sel.exec,
            request: sel.request?,
            generation: sel.generation,
        })
    }
}

/// A request's path with the cursor and scroll position on it.
#[derive(Clone, Debug)]
pub struct PathView {
    /// What it was made for.
    pub key: PathKey,
    /// The path.
    pub index: PathIndex,
    /// Token cursor (path position, `< index.len` unless the path is empty).
    pub cursor: u64,
    /// First row shown.
    pub top: RowStart,
}

/// Kinds of runs the run keys move between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    /// Targets at the replay step.
    Target,
    /// Trainable tokens the admission left out.
    LeftOut,
    /// Context tokens.
    Context,
    /// A point where another branch leaves the path.
    Divergence,
}

impl Run {
    fn name(self) -> &'static str {
        match self {
            Run::Target => "target",
            Run::LeftOut => "left-out run",
            Run::Context => "context run",
            Run::Divergence => "divergence",
        }
    }
}

/// The token pane's state.
#[derive(Clone, Debug, Default)]
pub struct TokensPane {
    view: Option<PathView>,
    /// The cursor moved or the pane changed size: scroll it into view at the next sync.
    follow: bool,
}

impl TokensPane {
    /// The path view, when it is the one the selection asks for.
    pub fn view(&self, sel: &Selection) -> Option<&PathView> {
        let want = PathKey::of(sel)?;
        self.view.as_ref().filter(|v| v.key == want)
    }

    fn view_mut(&mut self, sel: &Selection) -> Option<&mut PathView> {
        let want = PathKey::of(sel)?;
        self.view.as_mut().filter(|v| v.key == want)
    }

    /// The pane changed size: keep the cursor on screen.
    pub fn resized(&mut self) {
        self.follow = true;
    }

    /// Puts the cursor at `pos` (clamped to the path) and scrolls it into view.
    pub fn set_cursor(&mut self, ctx: &Ctx, pos: u64) {
        if let Some(v) = self.view_mut(ctx.sel) {
            v.cursor = pos.min(v.index.len.saturating_sub(1));
            self.follow = true;
        }
    }

    fn layout<'a>(ctx: &Ctx<'a>, v: &'a PathView) -> Layout<'a> {
        Layout::new(ctx.exec(), &v.index, ctx.text, inner(ctx).0)
    }

    /// Scrolls so the cursor is on screen: just enough within a page or two, else recentred.
    fn keep_visible(&mut self, ctx: &Ctx) {
        let h = inner(ctx).1;
        let Some(v) = self.view.as_ref().filter(|v| v.index.len > 0) else {
            return;
        };
        let mut l = Self::layout(ctx, v);
        let cur_row = l.row_of(v.cursor);
        let top = if cur_row < v.top {
            cur_row
        } else {
            let rows = l.rows(v.top, h * 2, false);
            match rows.iter().position(|r| r.start == cur_row) {
                Some(i) if i >= h => rows[i + 1 - h].start,
                Some(_) => v.top,
                None => l.move_rows(cur_row, -((h / 3) as i64)),
            }
        };
        // Never past the page that ends on the path's last row (G filled a third of it).
        let last_page = {
            let last = l.row_of(v.index.len - 1);
            l.move_rows(last, -(h.saturating_sub(1) as i64))
        };
        let top = top.min(last_page);
        if let Some(v) = self.view.as_mut() {
            v.top = top;
        }
    }

    fn center(&mut self, ctx: &Ctx) {
        let h = inner(ctx).1 as i64;
        let Some(v) = self.view.as_ref().filter(|v| v.index.len > 0) else {
            return;
        };
        let mut l = Self::layout(ctx, v);
        let cur_row = l.row_of(v.cursor);
        let top = l.move_rows(cur_row, -(h / 3));
        if let Some(v) = self.view.as_mut() {
            v.top = top;
        }
        self.follow = false;
    }

    /// Moves the cursor to the start of the next (previous) run of `kind`.
    fn run(&mut self, ctx: &Ctx, kind: Run, forward: bool) -> Vec<Effect> {
        let Some(v) = self.view(ctx.sel).filter(|v| v.index.len > 0) else {
            return Vec::new();
        };
        let exec = ctx.exec();
        let view = ctx.exec_view();
        let step = ctx.sel.step;
        let is = |seg: usize| -> bool {
            let n = v.index.nodes[seg];
            let node = &exec.tree.nodes[n as usize];
            if node.len == 0 {
                return false;
            }
            match kind {
                Run::Context => node.kind != NodeKind::Output,
                Run::Target => node_reason(exec, view.outcome, view.admission, n, Some(step))
                    .is_some_and(|r| r.is_target()),
                Run::LeftOut => matches!(
                    node_reason(exec, view.outcome, view.admission, n, None),
                    Some(Reason::LeftOutJmax | Reason::LeftOutClass)
                ),
                Run::Divergence => {
                    seg > 0 && exec.tree.nodes[node.parent as usize].children.len() > 1
                }
            }
        };
        let segs = v.index.nodes.len();
        let (cur, _) = v.index.locate(v.cursor);
        let found = if kind == Run::Divergence {
            // A divergence is a point: the next segment start past the cursor that is one.
            if forward {
                (cur + 1..segs).find(|&s| is(s))
            } else {
                let (seg, off) = v.index.locate(v.cursor);
                let before = if off > 0 { seg + 1 } else { seg };
                (0..before).rev().find(|&s| is(s))
            }
        } else if forward {
            // Past the end of the run the cursor is in, the first segment of the kind.
            let mut s = cur;
            while s < segs && is(s) {
                s += 1;
            }
            (s..segs).find(|&s| is(s))
        } else {
            // The start of the run before the cursor's (or of the cursor's, when inside it).
            let (seg, off) = v.index.locate(v.cursor);
            let mut s = seg;
            if is(s) && off > 0 {
                while s > 0 && is(s - 1) {
                    s -= 1;
                }
                Some(s)
            } else {
                let mut end = (0..seg).rev().find(|&x| is(x));
                if let Some(e) = end.as_mut() {
                    while *e > 0 && is(*e - 1) {
                        *e -= 1;
                    }
                }
                end
            }
        };
        match found {
            Some(seg) => {
                let pos = v.index.seg_start(seg);
                self.set_cursor(ctx, pos);
                vec![Effect::Message(format!(
                    "{} {} at position {}",
                    if forward { "next" } else { "previous" },
                    kind.name(),
                    pos + 1
                ))]
            }
            None => vec![Effect::Message(format!(
                "no {} {} on this path",
                if forward { "later" } else { "earlier" },
                kind.name()
            ))],
        }
    }

    /// The token `delta` rows below (above) the cursor, at about the same column.
    fn cursor_by_rows(&self, ctx: &Ctx, delta: i64) -> u64 {
        let Some(v) = self.view(ctx.sel) else {
            return 0;
        };
        let mut l = Self::layout(ctx, v);
        let row = l.row_of(v.cursor);
        let x = l
            .rows(row, 1, true)
            .first()
            .and_then(|r| r.cells.iter().find(|c| c.pos == v.cursor).map(|c| c.x))
            .unwrap_or(0);
        let target = l.move_rows(row, delta);
        if target == row {
            // At the top or bottom: to the row's first or last token.
            let cells = l.rows(row, 1, true);
            let cells = cells.first().map(|r| r.cells.as_slice()).unwrap_or(&[]);
            return if delta > 0 {
                cells.last().map_or(v.cursor, |c| c.pos.max(v.cursor))
            } else {
                v.cursor
            };
        }
        let rows = l.rows(target, 1, true);
        let Some(r) = rows.first() else {
            return v.cursor;
        };
        r.cells
            .iter()
            .rev()
            .find(|c| c.x <= x)
            .or(r.cells.first())
            .map_or(target.pos, |c| c.pos)
            .min(v.index.len - 1)
    }

    /// Path position of the token drawn at a cell.
    pub fn token_at(&self, ctx: &Ctx, x: u16, y: u16) -> Option<u64> {
        let v = self.view(ctx.sel)?;
        let a = ctx.areas.tokens;
        let inner_x = x.checked_sub(a.x + 1)?;
        let inner_y = y.checked_sub(a.y + 1)? as usize;
        let mut l = Self::layout(ctx, v);
        let rows = l.rows(v.top, inner_y + 1, true);
        let row = rows.get(inner_y)?;
        row.cells
            .iter()
            .rev()
            .find(|c| c.x <= inner_x)
            .map(|c| c.pos)
    }
}

impl PaneView for TokensPane {
    /// Brings the view in line with the selection: a new path for a new (batch, execution,
    /// request), the same path and cursor for new results of the same one.
    fn sync(&mut self, ctx: &Ctx) {
        let Some(want) = PathKey::of(ctx.sel) else {
            self.view = None;
            return;
        };
        let exec = ctx.exec();
        match &mut self.view {
            Some(v) if v.key == want => {}
            Some(v)
                if PathKey {
                    generation: want.generation,
                    ..v.key
                } == want =>
            {
                v.key = want
            }
            _ => {
                let index = PathIndex::new(exec, want.request);
                let input = exec.requests[want.request as usize].input_len as u64;
                self.view = Some(PathView {
                    key: want,
                    cursor: input.min(index.len.saturating_sub(1)),
                    index,
                    top: RowStart::default(),
                });
                self.follow = true;
                self.center(ctx);
            }
        }
        if self.follow {
            self.follow = false;
            self.keep_visible(ctx);
        }
    }

    /// Keys while focused.
    fn command(&mut self, ctx: &Ctx, c: Command) -> Vec<Effect> {
        let h = inner(ctx).1 as i64;
        let Some(v) = self.view(ctx.sel).filter(|v| v.index.len > 0) else {
            return Vec::new();
        };
        let len = v.index.len;
        let cursor = v.cursor;
        let new = match c {
            Command::Left => cursor.saturating_sub(1),
            Command::Right => (cursor + 1).min(len - 1),
            Command::Home => 0,
            Command::End => len - 1,
            Command::Up => self.cursor_by_rows(ctx, -1),
            Command::Down => self.cursor_by_rows(ctx, 1),
            Command::PageUp | Command::PageDown => {
                let delta = if c == Command::PageUp { -h } else { h };
                let new = self.cursor_by_rows(ctx, delta);
                let top = {
                    let mut l = Self::layout(ctx, v);
                    l.move_rows(v.top, delta)
                };
                if let Some(v) = self.view_mut(ctx.sel) {
                    v.top = top;
                }
                new
            }
            Command::NextSegment => {
                let (seg, _) = v.index.locate(cursor);
                if seg + 1 < v.index.nodes.len() {
                    v.index.seg_start(seg + 1).min(len - 1)
                } else {
                    return vec![Effect::Message(format!(
                        "already in the last segment of the path ({} of {}; b goes back)",
                        seg + 1,
                        v.index.nodes.len()
                    ))];
                }
            }
            Command::PrevSegment => {
                let (seg, off) = v.index.locate(cursor);
                if off > 0 || seg == 0 {
                    v.index.seg_start(seg)
                } else {
                    v.index.seg_start(seg - 1)
                }
            }
            Command::NextTarget => return self.run(ctx, Run::Target, true),
            Command::PrevTarget => return self.run(ctx, Run::Target, false),
            Command::NextLeftOut => return self.run(ctx, Run::LeftOut, true),
            Command::PrevLeftOut => return self.run(ctx, Run::LeftOut, false),
            Command::NextContext => return self.run(ctx, Run::Context, true),
            Command::PrevContext => return self.run(ctx, Run::Context, false),
            Command::NextDivergence => return self.run(ctx, Run::Divergence, true),
            Command::PrevDivergence => return self.run(ctx, Run::Divergence, false),
            _ => return Vec::new(),
        };
        self.set_cursor(ctx, new);
        Vec::new()
    }

    /// A click: the cursor goes to the token there.
    fn click(&mut self, ctx: &Ctx, x: u16, y: u16) -> Vec<Effect> {
        if let Some(pos) = self.token_at(ctx, x, y) {
            if let Some(v) = self.view_mut(ctx.sel) {
                v.cursor = pos;
            }
        }
        Vec::new()
    }

    /// The wheel scrolls three rows, leaving the cursor where it is.
    fn wheel(&mut self, ctx: &Ctx, down: bool) -> Vec<Effect> {
        if let Some(v) = self.view(ctx.sel) {
            let top = Self::layout(ctx, v).move_rows(v.top, if down { 3 } else { -3 });
            if let Some(v) = self.view_mut(ctx.sel) {
                v.top = top;
            }
        }
        Vec::new()
    }

    /// Draws the path, search matches marked.
    fn render(&self, ctx: &Ctx, area: Rect, buf: &mut Buffer) {
        let hits = ctx.search.node_hits(ctx.sel.exec);
        let t = ctx.theme;
        let v = self.view(ctx.sel);
        let title = match v {
            Some(v) => format!(
                " Tokens · path of {} · {} tokens · colour: {}{} · cursor {}/{} ",
                ctx.id(v.key.request),
                v.index.len,
                ctx.colour.name(),
                sample_said(ctx),
                (v.cursor + 1).min(v.index.len),
                v.index.len
            ),
            None => " Tokens ".to_string(),
        };
        let block = ctx.block(Pane::Tokens, title);
        let inner = block.inner(area);
        block.render(area, buf);
        let Some(v) = v.filter(|v| v.index.len > 0 && inner.width > 0 && inner.height > 0) else {
            let what = if ctx.exec().requests.is_empty() {
                "this execution has no requests"
            } else {
                "no request selected"
            };
            Paragraph::new(Line::styled(what, t.dim())).render(inner, buf);
            return;
        };
        let exec = ctx.exec();
        let mut layout = Layout::new(exec, &v.index, ctx.text, inner.width);
        let rows = layout.rows(v.top, inner.height as usize, true);
        let view = ctx.exec_view();
        // Claim, lens and flip tones are per node (claims are), so asked once per visible node.
        let mut node_tones: HashMap<NodeId, Tone> = HashMap::new();
        let mut tone = |n: NodeId, i: u32| -> Tone {
            let output = exec.tree.nodes[n as usize].kind == NodeKind::Output;
            let per_node = matches!(
                ctx.colour,
                ColorMode::Claims | ColorMode::Lens | ColorMode::Flips
            );
            if per_node && output {
                *node_tones
                    .entry(n)
                    .or_insert_with(|| view.tone(n, i, ctx.colour, Some(ctx.sel.step)))
            } else {
                view.tone(n, i, ctx.colour, Some(ctx.sel.step))
            }
        };
        let is_hit = |n: NodeId, i: u32| {
            hits.get(&n)
                .is_some_and(|rs| rs.iter().any(|&(a, b)| a <= i && i < b))
        };
        let mut last: Option<(u64, Style)> = None;
        for (y, row) in rows.iter().enumerate() {
            let y = inner.y + y as u16;
            for c in &row.cells {
                let style = match last {
                    Some((p, s)) if p == c.pos => s,
                    _ => {
                        let (n, i) = v.index.node_at(c.pos);
                        let mut s = t.tone(tone(n, i));
                        if ctx.boundaries {
                            s = t.boundary(s, c.pos % 2 == 1);
                        }
                        if is_hit(n, i) {
                            s = t.found(s);
                        }
                        if let Some(held) = ctx
                            .exec_audit
                            .and_then(|a| a.in_sample(exec.tree.nodes[n as usize].start + i))
                        {
                            s = t.in_sample(s, held);
                        }
                        if c.pos == v.cursor {
                            s = t.cursor(s);
                        }
                        last = Some((c.pos, s));
                        s
                    }
                };
                let x = inner.x + c.x;
                if x >= inner.right() || y >= buf.area.bottom() {
                    continue;
                }
                if c.glyph.width == 1 {
                    if let Some(cell) = buf.cell_mut((x, y)) {
                        cell.set_char(c.glyph.ch).set_style(style);
                    }
                } else if x + 1 < inner.right() {
                    let mut tmp = [0u8; 4];
                    buf.set_string(x, y, c.glyph.ch.encode_utf8(&mut tmp), style);
                }
            }
        }
    }
}

/// ` · sample ID` while a trained sample is highlighted.
fn sample_said(ctx: &Ctx) -> String {
    ctx.sel
        .sample
        .and_then(|s| ctx.exec().trained.list.get(s as usize))
        .map_or(String::new(), |s| {
            format!(" · sample {}", sanitize(&s.record.sample))
        })
}

/// Inner width and height of the token pane.
fn inner(ctx: &Ctx) -> (u16, usize) {
    let a = ctx.areas.tokens;
    (
        a.width.saturating_sub(2),
        a.height.saturating_sub(2).max(1) as usize,
    )
}
