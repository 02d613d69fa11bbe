//! The detail pane: the selected request's metadata, its tool calls and the tool results in its
//! input (pretty-printed, syntax-highlighted), and how its path differs from the nearest
//! sibling branch from the point they diverge.

use std::sync::OnceLock;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Paragraph, Widget, Wrap};
use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme as SynTheme, ThemeSet};
use syntect::parsing::SyntaxSet;

use crate::engine::execution::Execution;
use crate::engine::record::{Actor, Purpose, Source};
use crate::engine::tree::{NodeKind, ROOT};

use super::app::{App, Pane};
use super::model::Link;
use super::text::sanitize;
use super::theme::Theme;
use super::tokens::PathIndex;

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

/// Decoded text of path positions `a..b` (capped).
fn text_of(app: &App, exec: &Execution, path: &PathIndex, a: u64, b: u64) -> String {
    let b = b.min(path.len).min(a + MAX_PAYLOAD_TOKENS);
    app.text.decode(&path.tokens(exec, a..b))
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

/// The lines of the detail pane for the selected request.
pub fn lines(app: &App) -> Vec<Line<'static>> {
    let t = &app.theme;
    let Some(d) = &app.data else {
        return Vec::new();
    };
    let exec = &d.batch.executions[app.cur];
    let path = &app.path;
    let Some(r) = exec.requests.get(path.request as usize) else {
        return vec![Line::styled("no request selected", t.dim())];
    };
    let mut out: Vec<Line<'static>> = Vec::new();
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
                r.t.map(|x| format!(" · t {x}s")).unwrap_or_default()
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
    let id = |i: u32| sanitize(&exec.requests[i as usize].id);
    if let Some(place) = app.rtree.places.get(path.request as usize) {
        let why = match &place.link {
            Link::Root => "first request of the main agent's context".to_string(),
            Link::SubAgent => "sub-agent: its own context, branching at the root".to_string(),
            Link::Compaction => {
                "compaction: a new context with the summary put back (branch at the root)"
                    .to_string()
            }
            Link::NewContext => "a new main-agent context (branch at the root)".to_string(),
            Link::Evaluator => "evaluator request: its context branches at the root".to_string(),
            Link::Continue => "continues the request above".to_string(),
            Link::Retry { of } => format!("independent sample: same context as {}", id(*of)),
            Link::Diverge { of, offset } => format!(
                "branches inside {}'s output after {offset} tokens: the context re-sent differs from what was sampled (re-serialised content)",
                id(*of)
            ),
            Link::ContextBranch { of, other } => format!(
                "continues {} with a different context than {}",
                id(*of),
                id(*other)
            ),
        };
        out.push(Line::styled(why, t.marker()));
    }
    if r.after_closure {
        out.push(Line::styled(
            "recorded after the closure: shown, never scored or admitted",
            t.bad(),
        ));
    }
    // Tool calls made by the output.
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
            ]));
            let text = text_of(
                app,
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
            let text = text_of(app, exec, path, a as u64, b as u64);
            out.extend(payload(&text, t).into_iter().map(indent));
        }
    }
    out.push(Line::default());
    out.extend(sibling_diff(app, exec));
    if let Some(m) = &r.meta {
        out.push(Line::default());
        out.push(Line::styled("meta", t.strong()));
        let pretty = serde_json::to_string_pretty(m).unwrap_or_default();
        out.extend(highlight(&pretty, "json", t).into_iter().map(indent));
    }
    out
}

fn indent(l: Line<'static>) -> Line<'static> {
    let mut spans = vec![Span::raw("  ")];
    spans.extend(l.spans);
    Line::from(spans)
}

/// Where the selected path leaves its nearest sibling branch, and both sides from there.
pub fn sibling_diff(app: &App, exec: &Execution) -> Vec<Line<'static>> {
    let t = &app.theme;
    let path = &app.path;
    let tree = &exec.tree;
    let mut out = vec![Line::styled("Sibling branch", t.strong())];
    // Deepest node on the path (before its end) with another child.
    let mut found = None;
    for (k, &n) in path.nodes.iter().enumerate().rev() {
        let parent = tree.nodes[n as usize].parent;
        let siblings = &tree.nodes[parent as usize].children;
        if siblings.len() > 1 {
            if let Some(&other) = siblings.iter().find(|&&c| c != n) {
                found = Some((k, parent, other));
                break;
            }
        }
    }
    let Some((k, parent, other)) = found else {
        out.push(Line::styled(
            "none: no other branch shares a prefix with this path",
            t.dim(),
        ));
        return out;
    };
    // The first request whose path goes through the other child.
    let mut ends: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    for (i, r) in exec.requests.iter().enumerate() {
        ends.entry(r.output_node).or_insert(i as u32);
    }
    let mut stack = vec![other];
    let mut sib: Option<u32> = None;
    let mut guard = 0;
    while let Some(m) = stack.pop() {
        guard += 1;
        if guard > 200_000 {
            break;
        }
        if let Some(&i) = ends.get(&m) {
            sib = Some(sib.map_or(i, |s: u32| s.min(i)));
        }
        stack.extend_from_slice(&tree.nodes[m as usize].children);
    }
    let Some(sib) = sib else {
        out.push(Line::styled("the other branch holds no request", t.dim()));
        return out;
    };
    let common = path.starts[k];
    let where_ = if parent == ROOT {
        "at the root (no shared prefix)".to_string()
    } else {
        let pn = &tree.nodes[parent as usize];
        let owner = sanitize(&exec.requests[pn.owner as usize].id);
        match pn.kind {
            NodeKind::Output => format!(
                "inside {owner}'s output, after its token {}",
                pn.offset + pn.len
            ),
            _ => format!("in context first sent by {owner}"),
        }
    };
    out.push(Line::from(vec![
        Span::raw(format!(
            "diverges from {} after {common} shared tokens, ",
            sanitize(&exec.requests[sib as usize].id)
        )),
        Span::styled(where_, t.marker()),
    ]));
    let other_path = PathIndex::new(exec, sib);
    const SHOWN: u64 = 24;
    let side = |p: &PathIndex, label: String| -> Line<'static> {
        let text = text_of(app, exec, p, common, common + SHOWN);
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
    let this_id = sanitize(&exec.requests[path.request as usize].id);
    out.push(side(path, format!("this {this_id}")));
    out.push(side(
        &other_path,
        format!("sibling {}", sanitize(&exec.requests[sib as usize].id)),
    ));
    out
}

/// Draws the detail pane.
pub fn render(app: &App, area: Rect, buf: &mut Buffer) {
    let focused = app.focus == Pane::Detail;
    let block = Block::bordered()
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(app.theme.border(focused))
        .title(" Detail · tool calls · results · sibling diff ");
    Paragraph::new(lines(app))
        .wrap(Wrap { trim: false })
        .scroll((app.detail_scroll, 0))
        .block(block)
        .render(area, buf);
}
