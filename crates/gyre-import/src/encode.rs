//! Labelled tokenisation: rendered chat text → token ids plus docs/format.md §1 spans (on top of
//! [`CachedEncoder`]).

use eyre::Result;

use gyre_engine::record::Source;
use gyre_text::CachedEncoder;

/// A labelled run of tokens ending (exclusive) at `end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// Exclusive end, in tokens.
    pub end: usize,
    /// What the tokens are.
    pub source: Source,
    /// For `tool` spans: the call id the result answers.
    pub call_id: Option<String>,
}

/// A labelled byte range of rendered text; bytes outside every part are `template`.
#[derive(Clone, Debug)]
pub struct Part {
    /// First byte.
    pub start: usize,
    /// Exclusive end byte.
    pub end: usize,
    /// Label of the tokens whose first byte is in the range.
    pub source: Source,
    /// Call id, for `tool` parts.
    pub call_id: Option<String>,
}

/// Tokenises `text` with `enc`, labelling each token by the part holding its first byte
/// (`template` outside every part). `parts` must be sorted and disjoint. Spans end relative to
/// the returned ids.
pub fn encode_labelled(
    enc: &mut CachedEncoder,
    text: &str,
    parts: &[Part],
) -> Result<(Vec<u32>, Vec<Span>)> {
    let (ids, starts) = enc.encode_with_starts(text)?;
    Ok((ids, label(&starts, parts)))
}

/// Spans for tokens starting at `starts`, labelled by `parts` (sorted, disjoint byte ranges).
pub fn label(starts: &[usize], parts: &[Part]) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut r = 0;
    for (i, &byte) in starts.iter().enumerate() {
        while r < parts.len() && parts[r].end <= byte {
            r += 1;
        }
        let (source, call_id) = match parts.get(r) {
            Some(p) if p.start <= byte => (p.source, p.call_id.as_deref()),
            _ => (Source::Template, None),
        };
        match spans.last_mut() {
            Some(last) if last.source == source && last.call_id.as_deref() == call_id => {
                last.end = i + 1
            }
            _ => spans.push(Span {
                end: i + 1,
                source,
                call_id: call_id.map(str::to_owned),
            }),
        }
    }
    spans
}

/// Appends `more` (relative to its own tokens) after `base_len` tokens already labelled by
/// `spans`, merging equal neighbours.
pub fn extend_spans(spans: &mut Vec<Span>, base_len: usize, more: &[Span]) {
    for s in more {
        let end = base_len + s.end;
        match spans.last_mut() {
            Some(last) if last.source == s.source && last.call_id == s.call_id => last.end = end,
            _ => spans.push(Span {
                end,
                source: s.source,
                call_id: s.call_id.clone(),
            }),
        }
    }
}
