//! The panes: one file each, holding the pane's state, its update from commands, its content
//! (a pure function of the shared selection and the engine's results) and its drawing.
//!
//! Every pane implements [`PaneView`]; [`Pane`] names them and [`Pane::ALL`] orders them, and
//! the app dispatches keys, clicks, the wheel, syncing and drawing through the trait, so a new
//! pane is one file plus its entry in [`Pane`], its rectangle in the layout and its field in
//! [`Panes`].
//!
//! Panes never reach into each other. They read the shared [`Ctx`] and answer a command with
//! [`Effect`]s — "open execution 3", "show request r7 at position 812" — which
//! [`App`](super::app::App) applies to the one shared [`Selection`] before
//! every pane brings itself in line with it ([`PaneView::sync`]).

pub mod assessments;
pub mod detail;
pub mod executions;
pub mod replay;
pub mod tokens;
pub mod tree;
pub mod why;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType};
use unicode_width::UnicodeWidthStr;

use gyre_engine::Results;
use gyre_engine::admit::Admission;
use gyre_engine::audit::Audit;
use gyre_engine::execution::Execution;
use gyre_engine::lens::Lens;
use gyre_engine::load::Batch;
use gyre_engine::paint::{AuditTones, ColorMode, ExecView};
use gyre_engine::score::Outcome;
use gyre_text::TokenText;

use super::audit::ExecAudit;
use super::keys::Command;
use super::layout::Areas;
use super::path::PathIndex;
use super::search::Search;
use super::theme::Theme;
use detail::Subject;

use crate::vocab::Selection;
pub use crate::vocab::{Effect, Pane};

/// Every pane's own state, owned by the app: the one place a [`Pane`] is mapped to its state.
#[derive(Default)]
pub struct Panes {
    /// Executions.
    pub execs: executions::ExecutionsPane,
    /// Tree.
    pub tree: tree::TreePane,
    /// Tokens.
    pub tokens: tokens::TokensPane,
    /// Replay.
    pub replay: replay::ReplayPane,
    /// Assessments.
    pub assess: assessments::AssessmentsPane,
    /// Detail.
    pub detail: detail::DetailPane,
}

impl Panes {
    /// The state of pane `p`, for drawing.
    pub fn get(&self, p: Pane) -> &dyn PaneView {
        match p {
            Pane::Executions => &self.execs,
            Pane::Tree => &self.tree,
            Pane::Replay => &self.replay,
            Pane::Assessments => &self.assess,
            Pane::Tokens => &self.tokens,
            Pane::Detail => &self.detail,
        }
    }

    /// Pane `which` to change, with the token path on screen for it to read (none for the
    /// tokens pane, which owns it).
    pub fn split(
        &mut self,
        which: Pane,
        sel: &Selection,
    ) -> (Option<&PathIndex>, &mut dyn PaneView) {
        fn path<'a>(tokens: &'a tokens::TokensPane, sel: &Selection) -> Option<&'a PathIndex> {
            tokens.view(sel).map(|v| &v.index)
        }
        match which {
            Pane::Tokens => (None, &mut self.tokens),
            Pane::Executions => (path(&self.tokens, sel), &mut self.execs),
            Pane::Tree => (path(&self.tokens, sel), &mut self.tree),
            Pane::Replay => (path(&self.tokens, sel), &mut self.replay),
            Pane::Assessments => (path(&self.tokens, sel), &mut self.assess),
            Pane::Detail => (path(&self.tokens, sel), &mut self.detail),
        }
    }
}

/// One pane: its state, its answer to keys, clicks and the wheel, and its drawing, each a
/// function of the shared [`Ctx`] and the pane's own state.
pub trait PaneView {
    /// Brings the pane in line with the shared selection (after every step).
    fn sync(&mut self, ctx: &Ctx);

    /// A key while the pane has the focus.
    fn command(&mut self, ctx: &Ctx, c: Command) -> Vec<Effect>;

    /// A click at `(x, y)` inside the pane (it has just taken the focus).
    fn click(&mut self, _ctx: &Ctx, _x: u16, _y: u16) -> Vec<Effect> {
        Vec::new()
    }

    /// The wheel over the pane.
    fn wheel(&mut self, ctx: &Ctx, down: bool) -> Vec<Effect>;

    /// Draws the pane into `area`.
    fn render(&self, ctx: &Ctx, area: Rect, buf: &mut Buffer);
}

/// What every pane may read: the data, the shared selection and the view settings.
pub struct Ctx<'a> {
    /// The records.
    pub batch: &'a Batch,
    /// The engine's results on screen.
    pub results: &'a Results,
    /// The shared selection.
    pub sel: &'a Selection,
    /// Token text.
    pub text: &'a TokenText,
    /// Palette.
    pub theme: &'a Theme,
    /// Pane rectangles.
    pub areas: Areas,
    /// The focused pane.
    pub focus: Pane,
    /// An overlay has the keys (panes draw unfocused).
    pub overlay: bool,
    /// Token colouring.
    pub colour: ColorMode,
    /// Alternate token shading.
    pub boundaries: bool,
    /// The lens of the results on screen, once computed for their seed and priority.
    pub lens: Option<&'a Lens>,
    /// The results under pinned settings, to compare with (same batch).
    pub pinned: Option<&'a Results>,
    /// What the detail pane is about.
    pub subject: Subject,
    /// The token path on screen (the tokens pane's; `None` for the tokens pane itself).
    pub path: Option<&'a PathIndex>,
    /// The search and its matches.
    pub search: &'a Search,
    /// The audit of the batch's trained samples, once worked out.
    pub audit: Option<&'a Audit>,
    /// The selected execution's samples on its tree with the audit's word on each token.
    pub exec_audit: Option<&'a ExecAudit>,
}

impl<'a> Ctx<'a> {
    /// The selected execution.
    pub fn exec(&self) -> &'a Execution {
        &self.batch.executions[self.sel.exec]
    }

    /// Its scoring outcome.
    pub fn outcome(&self) -> &'a Outcome {
        &self.results.outcomes[self.sel.exec]
    }

    /// Its admission.
    pub fn admission(&self) -> &'a Admission {
        &self.results.admissions[self.sel.exec]
    }

    /// The selected execution as the painter judges it: its outcome, admission, lens and pinned
    /// admission.
    pub fn exec_view(&self) -> ExecView<'a> {
        let i = self.sel.exec;
        ExecView::new(self.exec(), self.results, i)
            .with_lens(
                self.lens.and_then(|l| l.executions.get(i)),
                self.results.settings.jmax,
            )
            .with_pinned(self.pinned.and_then(|p| p.admissions.get(i)))
            .with_audit(self.exec_audit.map(|a| &a.tokens as &dyn AuditTones))
    }

    /// Draws made in the selected execution.
    pub fn draws(&self) -> u32 {
        self.admission().draws.len() as u32
    }

    /// A request id, made safe for the terminal.
    pub fn id(&self, r: u32) -> String {
        self.exec()
            .requests
            .get(r as usize)
            .map(|q| sanitize(&q.id))
            .unwrap_or_default()
    }

    /// Whether `pane` has the keys.
    pub fn focused(&self, pane: Pane) -> bool {
        self.focus == pane && !self.overlay
    }

    /// The bordered block of a pane, thick when focused, its number in the title; a title
    /// wider than the pane ends in `…` (never a number cut short).
    pub fn block(&self, pane: Pane, title: impl Into<Line<'static>>) -> Block<'static> {
        let focused = self.focused(pane);
        let mut title: Line = title.into();
        title.spans.insert(
            0,
            Span::styled(format!(" {}", pane.number()), self.theme.key()),
        );
        let room = self.areas.of(pane).width.saturating_sub(2) as usize;
        let title = fit_line(title.spans, room);
        Block::bordered()
            .border_type(if focused {
                BorderType::Thick
            } else {
                BorderType::Plain
            })
            .border_style(self.theme.border(focused))
            .title(title)
    }
}

/// A piece of a pane's text, optionally something to go to (Enter or a click).
#[derive(Clone, Debug)]
pub struct Piece {
    /// What is drawn.
    pub span: Span<'static>,
    /// Where it leads.
    pub jump: Option<Effect>,
}

impl Piece {
    /// Plain text.
    pub fn text(s: impl Into<String>, style: Style) -> Piece {
        Piece {
            span: Span::styled(s.into(), style),
            jump: None,
        }
    }

    /// Text that leads somewhere.
    pub fn link(s: impl Into<String>, style: Style, jump: Effect) -> Piece {
        Piece {
            span: Span::styled(s.into(), style),
            jump: Some(jump),
        }
    }
}

/// Rows of pieces with a selection among the pieces that lead somewhere: the text of the replay
/// and assessments panes. Rows are laid out to the pane's width by their builders, so the
/// number of rows is exact and scrolling stops at the last one.
#[derive(Clone, Debug, Default)]
pub struct Links {
    /// The rows.
    pub rows: Vec<Vec<Piece>>,
}

impl Links {
    /// (row, piece) of every piece that leads somewhere, in reading order.
    pub fn targets(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (r, row) in self.rows.iter().enumerate() {
            for (k, p) in row.iter().enumerate() {
                if p.jump.is_some() {
                    out.push((r, k));
                }
            }
        }
        out
    }

    /// The piece at column `x` of row `r`.
    pub fn at(&self, r: usize, x: u16) -> Option<usize> {
        let row = self.rows.get(r)?;
        let mut left = 0u16;
        for (k, p) in row.iter().enumerate() {
            let w = p.span.width() as u16;
            if x >= left && x < left + w {
                return Some(k);
            }
            left += w;
        }
        None
    }

    /// The rows as lines, piece `selected` highlighted with `highlight`.
    pub fn lines(&self, selected: Option<(usize, usize)>, highlight: Style) -> Vec<Line<'static>> {
        self.rows
            .iter()
            .enumerate()
            .map(|(r, row)| {
                Line::from(
                    row.iter()
                        .enumerate()
                        .map(|(k, p)| {
                            if selected == Some((r, k)) {
                                p.span.clone().patch_style(highlight)
                            } else {
                                p.span.clone()
                            }
                        })
                        .collect::<Vec<_>>(),
                )
            })
            .collect()
    }
}

/// Pieces laid out over rows of at most `width` columns, each row starting with `indent`.
pub fn pack(pieces: Vec<Piece>, width: u16, indent: &str) -> Vec<Vec<Piece>> {
    let width = width.max(1) as usize;
    let mut rows: Vec<Vec<Piece>> = Vec::new();
    let mut used = 0usize;
    for p in pieces {
        let w = p.span.width() + 1;
        if rows.is_empty() || (used + w > width && used > indent.len()) {
            rows.push(vec![Piece::text(indent, Style::new())]);
            used = indent.len();
        }
        let row = rows.last_mut().expect("a row");
        row.push(p);
        row.push(Piece::text(" ", Style::new()));
        used += w;
    }
    rows
}

/// Any text bound for the terminal, made safe.
pub fn sanitize(s: &str) -> String {
    gyre_text::sanitize(s).into_owned()
}

/// `s` cut to `w` columns, ending in `…` when cut.
pub fn fit(s: &str, w: usize) -> String {
    if s.width() <= w {
        return s.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for ch in s.chars() {
        let cw = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
        if used + cw + 1 > w {
            break;
        }
        used += cw;
        out.push(ch);
    }
    if w > 0 {
        out.push('…');
    }
    out
}

/// Spans cut to `w` columns, ending in `…` when cut.
pub fn fit_line(spans: Vec<Span<'static>>, w: usize) -> Line<'static> {
    let mut out = Vec::new();
    let mut used = 0;
    for s in spans {
        let sw = s.width();
        if used + sw <= w {
            used += sw;
            out.push(s);
            continue;
        }
        let room = w.saturating_sub(used);
        if room > 0 {
            out.push(Span::styled(fit(&s.content, room), s.style));
        }
        break;
    }
    Line::from(out)
}

/// Styled lines wrapped to `width` columns (at spaces where possible), so a pane knows exactly
/// how many rows its text takes and can scroll to its last line and no further.
pub fn wrap(lines: Vec<Line<'static>>, width: u16) -> Vec<Line<'static>> {
    let width = width.max(1) as usize;
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        if line.width() <= width {
            out.push(line);
            continue;
        }
        let style = line.style;
        // Characters with their styles, then rows cut at the last space that fits.
        let cells: Vec<(char, Style)> = line
            .spans
            .iter()
            .flat_map(|s| s.content.chars().map(move |c| (c, s.style)))
            .collect();
        let mut start = 0;
        while start < cells.len() {
            let mut used = 0;
            let mut end = start;
            let mut last_space = None;
            while end < cells.len() {
                let cw = unicode_width::UnicodeWidthChar::width(cells[end].0).unwrap_or(0);
                if used + cw > width && end > start {
                    break;
                }
                if cells[end].0 == ' ' {
                    last_space = Some(end);
                }
                used += cw;
                end += 1;
            }
            if end < cells.len() {
                if let Some(sp) = last_space.filter(|&sp| sp > start) {
                    end = sp + 1;
                }
            }
            let mut spans: Vec<Span<'static>> = Vec::new();
            for &(c, st) in &cells[start..end] {
                match spans.last_mut() {
                    Some(s) if s.style == st => s.content.to_mut().push(c),
                    _ => spans.push(Span::styled(c.to_string(), st)),
                }
            }
            out.push(Line::from(spans).style(style));
            start = end;
        }
    }
    out
}

/// Scroll offset after command `c` for a text of `rows` rows in a pane showing `height` of them:
/// never past the point where the last row is at the bottom.
pub fn scroll(v: usize, c: Command, rows: usize, height: usize) -> Option<usize> {
    let max = rows.saturating_sub(height.max(1));
    let page = height.max(1);
    let next = match c {
        Command::Up => v.saturating_sub(1),
        Command::Down => v + 1,
        Command::PageUp => v.saturating_sub(page),
        Command::PageDown => v + page,
        Command::Home => 0,
        Command::End => max,
        _ => return None,
    };
    Some(next.min(max))
}

/// Inner height of a bordered pane.
pub fn inner_height(r: Rect) -> usize {
    r.height.saturating_sub(2) as usize
}

/// Inner width of a bordered pane.
pub fn inner_width(r: Rect) -> u16 {
    r.width.saturating_sub(2)
}
