//! The detail pane: the selected request's metadata, why its path was (not) drawn, its tool
//! calls and the tool results in its input (pretty-printed, syntax-highlighted), and how its
//! path differs from the nearest sibling branch. With the assessments pane focused, the
//! selected assessment's whole record instead (absolute times included).

use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;
use std::sync::OnceLock;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};
use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme as SynTheme, ThemeSet};
use syntect::parsing::SyntaxSet;

use crate::keys::Command;
use crate::path::PathIndex;
use crate::theme::Theme;
use gyre_engine::assess::{self, rel, value_text};
use gyre_engine::branches::{self, Parting};
use gyre_engine::delegation::{self, Delegation};
use gyre_engine::execution::Execution;
use gyre_engine::lens;
use gyre_engine::record::{Actor, Purpose, Source};
use gyre_engine::score::Outcome;
use gyre_engine::why::{self, Fate, prob_text};
use gyre_text::TokenText;

use super::{Ctx, Effect, Pane, PaneView, inner_height, inner_width, sanitize, wrap};

/// Most tokens decoded for one payload.
const MAX_PAYLOAD_TOKENS: u64 = 4000;
/// Most lines shown for one payload.
const MAX_PAYLOAD_LINES: usize = 80;

fn syntaxes() -> &'static (SyntaxSet, SynTheme) {
    static S: OnceLock<(SyntaxSet, SynTheme)> = OnceLock::new();
    S.get_or_init(|| {
        let ss = SyntaxSet::load_defaults_newlines();
        let mut themes = ThemeSet::load_defaults();
        let theme = themes
            .themes
            .remove("base16-ocean.dark")
            .unwrap_or_else(|| {
                themes
                    .themes
                    .into_values()
                    .next()
                    .expect("syntect ships themes")
            });
        (ss, theme)
    })
}

/// Highlights `code` as `ext` (e.g. `json`) into lines; plain when colours are off.
pub fn highlight(code: &str, ext: &str, theme: &Theme) -> Vec<Line<'static>> {
    let lines = code.lines().take(MAX_PAYLOAD_LINES);
    if !theme.color {
        return lines.map(|l| Line::raw(sanitize(l))).collect();
    }
    let (ss, st) = syntaxes();
    let syntax = ss
        .find_syntax_by_extension(ext)
        .unwrap_or_else(|| ss.find_syntax_plain_text());
    let mut h = HighlightLines::new(syntax, st);
    lines
        .map(|l| {
            let line = format!("{l}\n");
            match h.highlight_line(&line, ss) {
                Ok(parts) => Line::from(
                    parts
                        .into_iter()
                        .map(|(s, text)| {
                            Span::styled(
                                sanitize(text.trim_end_matches('\n')),
                                Style::new().fg(Color::Rgb(
                                    s.foreground.r,
                                    s.foreground.g,
                                    s.foreground.b,
                                )),
                            )
                        })
                        .collect::<Vec<_>>(),
                ),
                Err(_) => Line::raw(sanitize(l)),
            }
        })
        .collect()
}

/// Decoded text of path positions `a..b` of `path` (capped).
fn text_of(text: &TokenText, exec: &Execution, path: &PathIndex, a: u64, b: u64) -> String {
    let b = b.min(path.len).min(a + MAX_PAYLOAD_TOKENS);
    text.decode(&path.tokens(exec, a..b))
}

/// Pretty JSON when the text parses as JSON (or a JSON object follows a `<tool_call>` tag),
/// highlighted; otherwise the text as it is.
fn payload(text: &str, theme: &Theme) -> Vec<Line<'static>> {
    let trimmed = text.trim();
    let inner = trimmed
        .trim_start_matches("<tool_call>")
        .trim_end_matches("</tool_call>")
        .trim_start_matches("<tool_response>")
        .trim_end_matches("</tool_response>")
        .trim();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(inner) {
        if v.is_object() || v.is_array() {
            let pretty = serde_json::to_string_pretty(&v).unwrap_or_else(|_| inner.to_string());
            return highlight(&pretty, "json", theme);
        }
    }
    text.lines()
        .take(MAX_PAYLOAD_LINES)
        .map(|l| Line::raw(sanitize(l)))
        .collect()
}

fn indent(l: Line<'static>) -> Line<'static> {
    let mut spans = vec![Span::raw("  ")];
    spans.extend(l.spans);
    Line::from(spans)
}

/// What the detail pane is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    /// A request of the selected execution (with its path).
    Request(u32),
    /// An assessment of the selected execution (index).
    Assessment(usize),
    /// Nothing selected.
    Nothing,
}

/// What the pane's lines were made for: execution, subject, results generation, tokenizer,
/// whether the path was there.
type LinesKey = (usize, Subject, u64, String, bool);

/// The pane's text: its lines, and the lines that lead somewhere (Enter or a click).
#[derive(Debug, Default)]
pub struct Content {
    /// The lines, before wrapping.
    pub lines: Vec<Line<'static>>,
    /// (line, where it leads, what following it says), in line order.
    pub links: Vec<(usize, Effect, String)>,
}

impl Content {
    /// The lines wrapped to `width`, and the wrapped rows of each link (`first..end`).
    fn wrapped(&self, width: u16) -> (Vec<Line<'static>>, Vec<Range<usize>>) {
        let mut rows = Vec::new();
        let mut spans = Vec::new();
        let mut links = self.links.iter().peekable();
        for (i, l) in self.lines.iter().enumerate() {
            let first = rows.len();
            rows.extend(wrap(vec![l.clone()], width));
            while links.next_if(|(at, _, _)| *at == i).is_some() {
                spans.push(first..rows.len());
            }
        }
        (rows, spans)
    }
}

/// The detail pane's state.
#[derive(Debug, Default)]
pub struct DetailPane {
    /// First row shown.
    pub scroll: usize,
    /// (execution, subject) the scroll is for.
    key: Option<(usize, Subject)>,
    /// The last lines made (payloads are decoded and highlighted once, not every frame).
    cache: RefCell<Option<(LinesKey, Rc<Content>)>>,
}

impl DetailPane {
    /// The pane's lines for the context's subject, made once per subject.
    fn cached(&self, ctx: &Ctx) -> Rc<Content> {
        let key: LinesKey = (
            ctx.sel.exec,
            ctx.subject,
            ctx.sel.generation,
            ctx.text.label().to_string(),
            ctx.path.is_some(),
        );
        let mut cache = self.cache.borrow_mut();
        if let Some((k, lines)) = cache.as_ref() {
            if *k == key {
                return Rc::clone(lines);
            }
        }
        let lines = Rc::new(lines(ctx, ctx.subject, ctx.path));
        *cache = Some((key, Rc::clone(&lines)));
        lines
    }

    /// The link Enter follows: the first one whose first row is in view (scrolling brings the
    /// next one up), as (index into the links, its rows).
    fn current_link(
        &self,
        ctx: &Ctx,
        spans: &[Range<usize>],
        rows: usize,
    ) -> Option<(usize, Range<usize>)> {
        let height = inner_height(ctx.areas.detail);
        let top = self.scroll.min(rows.saturating_sub(height));
        spans
            .iter()
            .enumerate()
            .find(|(_, r)| r.start >= top && r.start < top + height)
            .map(|(k, r)| (k, r.clone()))
    }

    fn follow(content: &Content, k: usize) -> Vec<Effect> {
        let (_, effect, said) = &content.links[k];
        vec![effect.clone(), Effect::Message(said.clone())]
    }
}

impl PaneView for DetailPane {
    /// A new subject starts at the top.
    fn sync(&mut self, ctx: &Ctx) {
        let key = (ctx.sel.exec, ctx.subject);
        if self.key != Some(key) {
            self.key = Some(key);
            self.scroll = 0;
        }
    }

    /// Keys while focused: scrolling, to the last line and no further; Enter follows the first
    /// link in view (a sub-agent and the call that started it).
    fn command(&mut self, ctx: &Ctx, c: Command) -> Vec<Effect> {
        let a = ctx.areas.detail;
        let content = self.cached(ctx);
        let (rows, starts) = content.wrapped(inner_width(a));
        if c == Command::Enter {
            return match self.current_link(ctx, &starts, rows.len()) {
                Some((k, _)) => Self::follow(&content, k),
                None => vec![Effect::Message(
                    "nothing to follow here: no sub-agent link in view".into(),
                )],
            };
        }
        if let Some(s) = super::scroll(self.scroll, c, rows.len(), inner_height(a)) {
            self.scroll = s;
        }
        Vec::new()
    }

    /// A click on a link follows it.
    fn click(&mut self, ctx: &Ctx, _x: u16, y: u16) -> Vec<Effect> {
        let a = ctx.areas.detail;
        let content = self.cached(ctx);
        let (rows, starts) = content.wrapped(inner_width(a));
        let top = self.scroll.min(rows.len().saturating_sub(inner_height(a)));
        let Some(row) = (y as usize).checked_sub(a.y as usize + 1).map(|r| r + top) else {
            return Vec::new();
        };
        match starts.iter().position(|s| s.contains(&row)) {
            Some(k) => Self::follow(&content, k),
            None => Vec::new(),
        }
    }

    /// Three lines a notch.
    fn wheel(&mut self, ctx: &Ctx, down: bool) -> Vec<Effect> {
        let c = if down { Command::Down } else { Command::Up };
        for _ in 0..3 {
            self.command(ctx, c);
        }
        Vec::new()
    }

    /// Draws the pane.
    fn render(&self, ctx: &Ctx, area: Rect, buf: &mut Buffer) {
        let title = match ctx.subject {
            Subject::Assessment(_) => " Detail · assessment ",
            _ => " Detail · fate · tool calls · results · sibling diff ",
        };
        let content = self.cached(ctx);
        let (mut rows, starts) = content.wrapped(inner_width(area));
        let scroll = self
            .scroll
            .min(rows.len().saturating_sub(inner_height(area)));
        if let Some((_, span)) = self.current_link(ctx, &starts, rows.len()) {
            let style = ctx.theme.selected(ctx.focused(Pane::Detail));
            for r in span {
                rows[r] = std::mem::take(&mut rows[r]).patch_style(style);
            }
        }
        Paragraph::new(rows)
            .scroll((scroll.min(u16::MAX as usize) as u16, 0))
            .block(ctx.block(Pane::Detail, title))
            .render(area, buf);
    }
}

/// The pane's text for `subject` (`path`: the request's path, when it is on screen).
pub fn lines(ctx: &Ctx, subject: Subject, path: Option<&PathIndex>) -> Content {
    match subject {
        Subject::Request(r) => request_lines(ctx, r, path),
        Subject::Assessment(i) => Content {
            lines: assessment_lines(ctx, i),
            links: Vec::new(),
        },
        Subject::Nothing => Content {
            lines: vec![Line::styled("no request selected", ctx.theme.dim())],
            links: Vec::new(),
        },
    }
}

fn assessment_lines(ctx: &Ctx, i: usize) -> Vec<Line<'static>> {
    let t = ctx.theme;
    let exec = ctx.exec();
    let Some(a) = exec.assessments.get(i) else {
        return vec![Line::styled("no assessment selected", t.dim())];
    };
    let s = assess::scoring(exec, ctx.outcome());
    let st = &s.standings[i];
    let r = &a.record;
    let mut out = vec![Line::from(vec![
        Span::styled(
            sanitize(&format!(
                "{} v{}",
                value_text(&r.artifact),
                value_text(&r.version)
            )),
            t.strong(),
        ),
        Span::raw(if r.valid { " · valid" } else { " · failed" }),
        Span::styled(format!(" · line {}", a.at.line), t.dim()),
    ])];
    let field = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("{k:<10} "), t.key()),
            Span::raw(sanitize(&v)),
        ])
    };
    if let Some(score) = r.score {
        out.push(field("score", score.to_string()));
    }
    out.push(field(
        "t",
        format!("{} s (epoch) · {} after the start", r.t, rel(st.t)),
    ));
    out.push(field("start", format!("{} s (epoch)", s.start)));
    if let Some(d) = s.deadline {
        out.push(field(
            "budget end",
            format!("{} s (epoch) · {}", s.start + d, rel(d)),
        ));
    }
    if let Some(c) = &s.closure {
        out.push(field(
            "closure",
            format!("{} s (epoch) · {}", s.start + c.t, rel(c.t)),
        ));
    }
    for (k, v) in [
        ("branch", r.branch.clone().map(serde_json::Value::String)),
        ("attempt", r.attempt.clone()),
        ("evaluator", r.evaluator.clone()),
        ("error", r.error.clone()),
    ] {
        if let Some(v) = v {
            out.push(field(k, value_text(&v)));
        }
    }
    out.push(Line::default());
    if st.reward {
        out.push(Line::styled("gave the execution's reward", t.good()));
    } else {
        out.push(Line::styled("does not count:", t.warn()));
        for m in &st.misses {
            out.push(Line::raw(format!("  · {}", sanitize(&m.text()))));
        }
    }
    if let Some(c) = &r.critique {
        out.push(Line::default());
        out.push(Line::styled("critique", t.strong()));
        out.extend(
            value_text(c)
                .lines()
                .take(MAX_PAYLOAD_LINES)
                .map(|l| Line::raw(format!("  {}", sanitize(l)))),
        );
    }
    out
}

fn request_lines(ctx: &Ctx, req: u32, path: Option<&PathIndex>) -> Content {
    let t = ctx.theme;
    let exec = ctx.exec();
    let Some(r) = exec.requests.get(req as usize) else {
        return Content {
            lines: vec![Line::styled("no request selected", t.dim())],
            links: Vec::new(),
        };
    };
    let mut out: Vec<Line<'static>> = Vec::new();
    let mut links = Vec::new();
    let purpose = match r.purpose {
        Purpose::Task => "task",
        Purpose::Summary => "summary",
    };
    let actor = match r.actor {
        Actor::Policy => "policy",
        Actor::Evaluator => "evaluator",
    };
    out.push(Line::from(vec![
        Span::styled(sanitize(&r.id), t.strong()),
        Span::raw(format!(" · {}/{purpose} · {actor}", sanitize(&r.agent))),
        Span::styled(
            format!(
                " · line {} · in {} ({} matched) out {}{}{}",
                r.at.line,
                r.input_len,
                r.matched,
                r.output_len,
                r.finish
                    .as_deref()
                    .map(|f| format!(" · finish {}", sanitize(f)))
                    .unwrap_or_default(),
                r.t.map(|x| format!(" · t {} ({x} s epoch)", rel(x - exec.start())))
                    .unwrap_or_default()
            ),
            t.dim(),
        ),
    ]));
    if r.reconstructed() {
        out.push(Line::styled(
            "reconstructed, not recorded: rebuilt from logs (meta.reconstructed), no behaviour log-probs",
            t.warn(),
        ));
    }
    if let Some(m) = &r.model {
        out.push(Line::styled(format!("model {}", sanitize(m)), t.dim()));
    }
    let places = branches::places(exec);
    let id = |i: u32| ctx.id(i);
    out.push(Line::styled(
        places[req as usize].link.describe(&id),
        t.marker(),
    ));
    let dels = delegation::delegations(exec);
    for d in dels.iter().filter(|d| d.request == req) {
        let said = format!(
            "sub-agent {}: {} request{} from {}, started by {} call {} in {}",
            sanitize(&d.agent),
            d.requests,
            if d.requests == 1 { "" } else { "s" },
            id(d.first),
            tool_name(d),
            sanitize(&d.call_id),
            id(d.request)
        );
        links.push((out.len(), Effect::SelectRequest(d.first), said));
        out.push(Line::styled(
            format!(
                "⇒ {} call {} started sub-agent {} ({} request{} from {}) · Enter follows",
                tool_name(d),
                sanitize(&d.call_id),
                sanitize(&d.agent),
                d.requests,
                if d.requests == 1 { "" } else { "s" },
                id(d.first)
            ),
            t.key(),
        ));
    }
    if let Some(d) = dels.iter().find(|d| d.agent == r.agent) {
        let said = format!(
            "{} of {}: its {} call {} started sub-agent {}",
            id(d.request),
            sanitize(&exec.requests[d.request as usize].agent),
            tool_name(d),
            sanitize(&d.call_id),
            sanitize(&d.agent)
        );
        links.push((out.len(), Effect::SelectRequest(d.request), said));
        out.push(Line::styled(
            format!(
                "⇐ sub-agent {} was started by {} call {} in {} · Enter follows",
                sanitize(&d.agent),
                tool_name(d),
                sanitize(&d.call_id),
                id(d.request)
            ),
            t.key(),
        ));
    }
    if r.after_closure {
        out.push(Line::styled(
            "recorded after the closure: shown, never scored or admitted",
            t.bad(),
        ));
    }
    out.push(Line::default());
    out.extend(fate_lines(ctx, req, false));
    if let Some(path) = path.filter(|p| p.request == req) {
        out.extend(payload_lines(ctx, r, path, &dels));
        out.push(Line::default());
        out.extend(sibling_diff(ctx, path));
    }
    if let Some(m) = &r.meta {
        out.push(Line::default());
        out.push(Line::styled("meta", t.strong()));
        let pretty = serde_json::to_string_pretty(m).unwrap_or_default();
        out.extend(highlight(&pretty, "json", t).into_iter().map(indent));
    }
    Content { lines: out, links }
}

/// The tool a delegation's call named (`tool` when the record names none).
fn tool_name(d: &Delegation) -> String {
    d.tool.as_deref().map_or_else(|| "tool".into(), sanitize)
}

/// "Why was this path (not) drawn?" for request `req`, in lines (the detail pane and the `y`
/// overlay).
pub fn fate_lines(ctx: &Ctx, req: u32, with_lens: bool) -> Vec<Line<'static>> {
    let t = ctx.theme;
    let w = why::why(ctx.exec(), ctx.outcome(), ctx.admission(), req);
    let style = match w.fate {
        Fate::Drawn => t.good(),
        Fate::JMax | Fate::Exhausted | Fate::ClassNotListed => t.warn(),
        Fate::Excluded | Fate::Dummy => t.bad(),
        Fate::NotCandidate => t.dim(),
    };
    let mut out = vec![
        Line::from(vec![
            Span::styled(format!("Fate of {}: ", sanitize(&w.request)), t.strong()),
            Span::styled(w.fate.name(), style),
            Span::styled(
                format!(
                    " · {}{}",
                    w.role(),
                    if w.candidate {
                        " · candidate"
                    } else {
                        " · not a candidate"
                    }
                ),
                t.dim(),
            ),
        ]),
        Line::styled(sanitize(&w.summary()), style),
        Line::styled(
            format!(
                "{} trainable tokens on its {}, {} unclaimed",
                w.weight,
                if w.candidate { "path" } else { "own output" },
                w.unclaimed
            ),
            t.dim(),
        ),
    ];
    for s in &w.draws {
        let mut spans = vec![
            Span::styled(format!("  draw {:<3}", s.draw), t.dim()),
            Span::raw(format!("{:<13}", s.class.name())),
        ];
        if s.in_pool {
            let [a, b] = s.slice.unwrap_or_default();
            spans.push(Span::raw(format!(
                "w={} p={} [{a}, {b})",
                s.weight,
                prob_text(s.p)
            )));
        } else {
            spans.push(Span::styled(
                format!("w={} not in the pool", s.weight),
                t.dim(),
            ));
        }
        let me = s.winner == w.request;
        spans.push(Span::styled(
            format!("  winner {}", sanitize(&s.winner)),
            if me { t.good() } else { t.dim() },
        ));
        out.push(Line::from(spans));
    }
    if with_lens {
        out.extend(lens_lines(ctx, req));
    }
    out
}

/// The lens of request `req` (odds over the seeds, the J_max and priority that would draw it),
/// when it is worked out and the execution is scored.
fn lens_lines(ctx: &Ctx, req: u32) -> Vec<Line<'static>> {
    let t = ctx.theme;
    if !matches!(ctx.outcome(), Outcome::Scored { .. })
        || !ctx.exec().requests[req as usize].trainable()
    {
        return Vec::new();
    }
    let Some(l) = ctx.lens.and_then(|l| l.executions.get(ctx.sel.exec)) else {
        return vec![
            Line::default(),
            Line::styled(
                "lens: looking through the seeds in the background…",
                t.dim(),
            ),
        ];
    };
    let rl = lens::request_lens(ctx.exec(), ctx.outcome(), &ctx.results.settings, l, req);
    let mut out = vec![Line::default()];
    for (k, line) in rl.lines().into_iter().enumerate() {
        out.push(Line::styled(
            sanitize(&line),
            if k == 0 { t.strong() } else { t.marker() },
        ));
    }
    out
}

fn payload_lines(
    ctx: &Ctx,
    r: &gyre_engine::execution::Request,
    path: &PathIndex,
    dels: &[Delegation],
) -> Vec<Line<'static>> {
    let t = ctx.theme;
    let exec = ctx.exec();
    let mut out = Vec::new();
    let input_len = r.input_len as u64;
    if !r.tool_calls.is_empty() {
        out.push(Line::default());
        out.push(Line::styled("Tool calls (in this output)", t.strong()));
        for c in &r.tool_calls {
            out.push(Line::from(vec![
                Span::styled(format!("▸ {}", sanitize(&c.id)), t.key()),
                Span::raw(format!(
                    " {}",
                    c.name.as_deref().map(sanitize).unwrap_or_default()
                )),
                Span::styled(format!("  output[{}..{}]", c.start, c.end), t.dim()),
                Span::styled(
                    dels.iter()
                        .find(|d| d.request == path.request && d.call_id == c.id)
                        .map(|d| format!("  ⇒ sub-agent {}", sanitize(&d.agent)))
                        .unwrap_or_default(),
                    t.key(),
                ),
            ]));
            let text = text_of(
                ctx.text,
                exec,
                path,
                input_len + c.start as u64,
                input_len + c.end as u64,
            );
            out.extend(payload(&text, t).into_iter().map(indent));
        }
    }
    // Tool results in the context this request brought into the tree.
    let mut results = Vec::new();
    let mut pos = r.matched;
    while pos < r.input_len {
        let Some(span) = r.span_at(pos) else { break };
        let end = span.end.min(r.input_len);
        if span.source == Source::Tool {
            results.push((pos, end, span.call_id.clone()));
        }
        if end <= pos {
            break;
        }
        pos = end;
    }
    if !results.is_empty() {
        out.push(Line::default());
        out.push(Line::styled("Tool results (in this input)", t.strong()));
        for (a, b, call) in results {
            out.push(Line::from(vec![
                Span::styled(
                    format!(
                        "◂ result{}",
                        call.map(|c| format!(" for {}", sanitize(&c)))
                            .unwrap_or_default()
                    ),
                    t.key(),
                ),
                Span::styled(format!("  input[{a}..{b}]"), t.dim()),
            ]));
            let text = text_of(ctx.text, exec, path, a as u64, b as u64);
            out.extend(payload(&text, t).into_iter().map(indent));
        }
    }
    out
}

/// Where the path leaves its nearest sibling branch, and both sides from there.
fn sibling_diff(ctx: &Ctx, path: &PathIndex) -> Vec<Line<'static>> {
    let t = ctx.theme;
    let exec = ctx.exec();
    let mut out = vec![Line::styled("Sibling branch", t.strong())];
    let Some(sib) = branches::sibling(exec, path.request) else {
        out.push(Line::styled(
            "none: no other branch shares a prefix with this path",
            t.dim(),
        ));
        return out;
    };
    let where_ = match sib.parting {
        Parting::Root => "at the root (no shared prefix)".to_string(),
        Parting::InsideOutput { owner, offset } => {
            format!(
                "inside {}'s output, after its token {offset}",
                ctx.id(owner)
            )
        }
        Parting::AfterNode {
            owner,
            output: true,
        } => format!("after {}'s output", ctx.id(owner)),
        Parting::AfterNode { owner, .. } => {
            format!("after context first sent by {}", ctx.id(owner))
        }
    };
    out.push(Line::from(vec![
        Span::raw(format!(
            "diverges from {} after {} shared tokens, ",
            ctx.id(sib.request),
            sib.common
        )),
        Span::styled(where_, t.marker()),
    ]));
    let other = PathIndex::new(exec, sib.request);
    const SHOWN: u64 = 24;
    let common = sib.common;
    let side = |p: &PathIndex, label: String| -> Line<'static> {
        let text = text_of(ctx.text, exec, p, common, common + SHOWN);
        let more = if p.len > common + SHOWN { "…" } else { "" };
        Line::from(vec![
            Span::styled(format!("{label:<10} "), t.key()),
            Span::styled(format!("{}{more}", sanitize(&text)), t.strong()),
            Span::styled(
                format!(
                    "  ({} tokens after the split)",
                    p.len.saturating_sub(common)
                ),
                t.dim(),
            ),
        ])
    };
    out.push(side(path, format!("this {}", ctx.id(path.request))));
    out.push(side(&other, format!("sibling {}", ctx.id(sib.request))));
    out
}
