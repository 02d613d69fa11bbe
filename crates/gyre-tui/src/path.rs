//! A request's root-to-output path (`I + O`), indexed by position and laid out as wrapped text.
//!
//! Only the visible window is ever materialised. The path is indexed by node (segment start
//! positions), a token is found by binary search, and rows are laid out forward from a row
//! start. Going up uses "safe starts" — right after a newline, or at an anchor every
//! [`ANCHOR`] tokens where a row always breaks — so no operation looks further back than one
//! anchor, whatever the path length.
//!
//! Rows break between tokens, never inside one (a token wider than the row aside): with a
//! vocabulary, before a word that would not fit (a word being tokens between whitespace); with
//! ids, before an `⟨id⟩` that would not fit. Every decision looks only forward from the row
//! start, which is what keeps the windowed layout equal to laying out from the top.

use std::collections::HashMap;

use gyre_engine::execution::Execution;
use gyre_engine::paint::PathView;
use gyre_engine::tree::NodeId;

use gyre_text::TokenText;

use super::text::{Glyph, glyphs};

/// Tokens decoded together (plus three on each side, so characters split over tokens show).
const BLOCK: u64 = 128;

/// Most tokens a word may span when deciding whether it fits on the row.
const WORD_TOKENS: u64 = 24;

/// Rows always break at multiples of this many tokens.
pub const ANCHOR: u64 = 4096;

/// The path of one request, indexed by position.
#[derive(Clone, Debug, Default)]
pub struct PathIndex {
    /// The request whose path this is.
    pub request: u32,
    /// Nodes from the root's child down to the request's output.
    pub nodes: Vec<NodeId>,
    /// Path position of each node's first token.
    pub starts: Vec<u64>,
    /// Total tokens.
    pub len: u64,
}

impl PathIndex {
    /// Indexes request `request`'s path.
    pub fn new(exec: &Execution, request: u32) -> Self {
        let view = PathView::new(exec, request);
        let (nodes, starts) = view.segments.into_iter().unzip();
        PathIndex {
            request,
            nodes,
            starts,
            len: view.len,
        }
    }

    /// Segment holding `pos` and the offset inside its node.
    pub fn locate(&self, pos: u64) -> (usize, u32) {
        // The last segment starting at or before `pos`: empty nodes sharing a start are skipped.
        let seg = self.starts.partition_point(|&s| s <= pos).saturating_sub(1);
        (seg, pos.saturating_sub(self.starts[seg]) as u32)
    }

    /// Token id at `pos`.
    pub fn token(&self, exec: &Execution, pos: u64) -> u32 {
        let (seg, off) = self.locate(pos);
        let node = &exec.tree.nodes[self.nodes[seg] as usize];
        exec.tree.tokens[(node.start + off) as usize]
    }

    /// Token ids of positions `range` (clamped to the path).
    pub fn tokens(&self, exec: &Execution, range: std::ops::Range<u64>) -> Vec<u32> {
        let end = range.end.min(self.len);
        let mut out = Vec::with_capacity(end.saturating_sub(range.start) as usize);
        let mut pos = range.start;
        while pos < end {
            let (seg, off) = self.locate(pos);
            let toks = exec.tree.node_tokens(self.nodes[seg]);
            let take = ((toks.len() as u64 - off as u64).min(end - pos)) as usize;
            if take == 0 {
                break;
            }
            out.extend_from_slice(&toks[off as usize..off as usize + take]);
            pos += take as u64;
        }
        out
    }

    /// Display text (unsanitised) of the token at `pos`, decoded with its neighbours.
    pub fn piece(&self, exec: &Execution, text: &TokenText, pos: u64) -> String {
        let lo = pos.saturating_sub(3);
        let ids = self.tokens(exec, lo..pos + 4);
        let k = (pos - lo) as usize;
        text.display_window(&ids, k..k + 1)
            .into_iter()
            .next()
            .map(|c| c.into_owned())
            .unwrap_or_default()
    }

    /// Node and in-node index of `pos`.
    pub fn node_at(&self, pos: u64) -> (NodeId, u32) {
        let (seg, off) = self.locate(pos);
        (self.nodes[seg], off)
    }

    /// First position of segment `seg`.
    pub fn seg_start(&self, seg: usize) -> u64 {
        self.starts[seg]
    }
}

/// Where a row starts: a token and the first of its glyphs on the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct RowStart {
    /// Path position.
    pub pos: u64,
    /// Glyph index inside the token.
    pub chr: u32,
}

/// One laid-out cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    /// Column inside the pane.
    pub x: u16,
    /// Path position of the token.
    pub pos: u64,
    /// What to draw.
    pub glyph: Glyph,
}

/// One laid-out row.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Row {
    /// Where it starts.
    pub start: RowStart,
    /// Its cells (empty when only starts were asked for).
    pub cells: Vec<Cell>,
}

/// Lays out a path for a given width, with a small per-call cache of token glyphs.
pub struct Layout<'a> {
    exec: &'a Execution,
    path: &'a PathIndex,
    text: &'a TokenText,
    width: u16,
    words: bool,
    cache: HashMap<u64, Vec<Vec<Glyph>>>,
}

impl<'a> Layout<'a> {
    /// A layout of `path` at `width` columns.
    pub fn new(exec: &'a Execution, path: &'a PathIndex, text: &'a TokenText, width: u16) -> Self {
        Layout {
            exec,
            path,
            text,
            width: width.max(4),
            words: text.has_vocabulary(),
            cache: HashMap::new(),
        }
    }

    /// Glyphs of the token at `pos` (decoded a block at a time).
    pub fn glyphs(&mut self, pos: u64) -> &[Glyph] {
        let (exec, path, text) = (self.exec, self.path, self.text);
        let b = pos / BLOCK;
        let lo = b * BLOCK;
        let block = self.cache.entry(b).or_insert_with(|| {
            let hi = (lo + BLOCK).min(path.len);
            let from = lo.saturating_sub(3);
            let ids = path.tokens(exec, from..hi + 3);
            let pieces = text.display_window(&ids, (lo - from) as usize..(hi - from) as usize);
            pieces
                .iter()
                .map(|p| {
                    let mut g = Vec::new();
                    glyphs(p, &mut g);
                    g
                })
                .collect()
        });
        &block[(pos - lo) as usize]
    }

    fn normalize(&mut self, s: RowStart) -> RowStart {
        if s.pos < self.path.len && s.chr as usize >= self.glyphs(s.pos).len() {
            RowStart {
                pos: s.pos + 1,
                chr: 0,
            }
        } else {
            s
        }
    }

    /// Lays out up to `max_rows` rows from `start`; with `cells`, keeps the cells.
    pub fn rows(&mut self, start: RowStart, max_rows: usize, cells: bool) -> Vec<Row> {
        let width = self.width;
        let mut rows = Vec::new();
        let mut cur = Row {
            start,
            cells: Vec::new(),
        };
        let mut x: u16 = 0;
        let mut pos = start.pos;
        let mut chr = start.chr as usize;
        let len = self.path.len;
        'outer: while pos < len {
            if pos % ANCHOR == 0 && x > 0 && chr == 0 {
                rows.push(std::mem::replace(
                    &mut cur,
                    Row {
                        start: RowStart { pos, chr: 0 },
                        cells: Vec::new(),
                    },
                ));
                x = 0;
                if rows.len() >= max_rows {
                    break 'outer;
                }
            }
            if chr == 0 && x > 0 && self.breaks_before(pos, x) {
                rows.push(std::mem::replace(
                    &mut cur,
                    Row {
                        start: RowStart { pos, chr: 0 },
                        cells: Vec::new(),
                    },
                ));
                x = 0;
                if rows.len() >= max_rows {
                    break 'outer;
                }
            }
            let g: Vec<Glyph> = self.glyphs(pos)[chr..].to_vec();
            let n = chr + g.len();
            for (k, gl) in g.iter().enumerate() {
                let ci = (chr + k) as u32;
                if x > 0 && x + gl.width as u16 > width {
                    rows.push(std::mem::replace(
                        &mut cur,
                        Row {
                            start: RowStart { pos, chr: ci },
                            cells: Vec::new(),
                        },
                    ));
                    x = 0;
                    if rows.len() >= max_rows {
                        break 'outer;
                    }
                }
                if cells {
                    cur.cells.push(Cell { x, pos, glyph: *gl });
                }
                x += gl.width as u16;
                if gl.brk {
                    let next = if ci as usize + 1 >= n {
                        RowStart {
                            pos: pos + 1,
                            chr: 0,
                        }
                    } else {
                        RowStart { pos, chr: ci + 1 }
                    };
                    rows.push(std::mem::replace(
                        &mut cur,
                        Row {
                            start: next,
                            cells: Vec::new(),
                        },
                    ));
                    x = 0;
                    if rows.len() >= max_rows {
                        break 'outer;
                    }
                }
            }
            chr = 0;
            pos += 1;
        }
        if rows.len() < max_rows && (!cur.cells.is_empty() || x > 0 || rows.is_empty()) {
            rows.push(cur);
        }
        rows
    }

    /// Whether the row, `x` columns full, breaks before the token at `pos`: the token's first
    /// line does not fit, or (with a vocabulary) a word starts here that fits on a row of its
    /// own but not on this one.
    fn breaks_before(&mut self, pos: u64, x: u16) -> bool {
        let width = self.width as u32;
        let x = x as u32;
        let lead = self.lead_width(pos);
        if x + lead > width {
            return true;
        }
        if self.words && self.word_starts(pos) {
            let w = self.word_width(pos);
            return w <= width && x + w > width;
        }
        false
    }

    /// Width of the token at `pos` up to and including its first line break.
    fn lead_width(&mut self, pos: u64) -> u32 {
        let mut w = 0u32;
        for g in self.glyphs(pos) {
            w += g.width as u32;
            if g.brk {
                break;
            }
        }
        w
    }

    /// A word starts at `pos`: the token begins with a space, or the one before ends with one.
    fn word_starts(&mut self, pos: u64) -> bool {
        let space = |g: Option<&Glyph>| g.is_some_and(|g| g.ch == ' ' || g.brk);
        pos % ANCHOR == 0
            || space(self.glyphs(pos).first())
            || (pos > 0 && space(self.glyphs(pos - 1).last()))
    }

    /// Width of the word starting at `pos` (up to [`WORD_TOKENS`] tokens, a line break or an
    /// anchor).
    fn word_width(&mut self, pos: u64) -> u32 {
        let mut w = 0u32;
        let mut p = pos;
        loop {
            for g in self.glyphs(p) {
                w += g.width as u32;
                if g.brk {
                    return w;
                }
            }
            p += 1;
            if p >= self.path.len || p - pos >= WORD_TOKENS || self.word_starts(p) {
                return w;
            }
        }
    }

    /// The latest safe row start strictly before `t`.
    fn safe_before(&mut self, t: RowStart) -> RowStart {
        let mut q = t.pos.min(self.path.len.saturating_sub(1));
        if self.path.len == 0 {
            return RowStart::default();
        }
        loop {
            let mut found: Option<RowStart> = None;
            let n = self.glyphs(q).len();
            let brks: Vec<usize> = self
                .glyphs(q)
                .iter()
                .enumerate()
                .filter(|(_, g)| g.brk)
                .map(|(i, _)| i)
                .collect();
            for ci in brks.into_iter().rev() {
                let s = if ci + 1 >= n {
                    RowStart { pos: q + 1, chr: 0 }
                } else {
                    RowStart {
                        pos: q,
                        chr: ci as u32 + 1,
                    }
                };
                if s < t {
                    found = Some(s);
                    break;
                }
            }
            if let Some(s) = found {
                return s;
            }
            if q % ANCHOR == 0 {
                let s = RowStart { pos: q, chr: 0 };
                if s < t {
                    return s;
                }
            }
            if q == 0 {
                return RowStart::default();
            }
            q -= 1;
        }
    }

    /// Row starts from `from` (included) up to, not including, `until`.
    fn starts_between(&mut self, from: RowStart, until: RowStart) -> Vec<RowStart> {
        let mut out = Vec::new();
        let mut cur = from;
        loop {
            let rows = self.rows(cur, 256, false);
            let full = rows.len() == 256;
            let mut last = cur;
            for r in rows {
                let st = self.normalize(r.start);
                if st >= until || (st.pos >= self.path.len && st != from) {
                    return out;
                }
                if out.last() != Some(&st) {
                    out.push(st);
                }
                last = st;
            }
            if !full || last == cur {
                return out;
            }
            cur = last;
            out.pop();
        }
    }

    /// Start of the row holding the first glyph of the token at `pos`.
    pub fn row_of(&mut self, pos: u64) -> RowStart {
        let target = RowStart { pos, chr: 1 };
        let s = self.safe_before(target);
        self.starts_between(s, target).last().copied().unwrap_or(s)
    }

    /// The start of the row `n` rows above the row starting at `t` (the top row at most).
    pub fn rows_up(&mut self, mut t: RowStart, mut n: u64) -> RowStart {
        while n > 0 && t != RowStart::default() {
            let s = self.safe_before(t);
            let starts = self.starts_between(s, t);
            if starts.is_empty() {
                return t;
            }
            if starts.len() as u64 >= n {
                return starts[starts.len() - n as usize];
            }
            n -= starts.len() as u64;
            t = starts[0];
        }
        t
    }

    /// The start of the row before the row starting at `t` (or `t` at the top).
    pub fn prev_row(&mut self, t: RowStart) -> RowStart {
        self.rows_up(t, 1)
    }

    /// Moves `t` by `delta` rows.
    pub fn move_rows(&mut self, t: RowStart, delta: i64) -> RowStart {
        if delta >= 0 {
            let rows = self.rows(t, delta as usize + 1, false);
            let mut last = t;
            for r in rows.iter().skip(1) {
                let st = self.normalize(r.start);
                if st.pos >= self.path.len {
                    break;
                }
                last = st;
            }
            last
        } else {
            self.rows_up(t, delta.unsigned_abs())
        }
    }
}
