//! Labelled tokenisation, the one used by every producer that renders text (`gyre import`,
//! `gyre record`, `gyre synth`): rendered chat text → token ids plus docs/format.md §1 spans,
//! each token labelled by the part of the text holding its first byte (`template` outside
//! every part).
//!
//! The call id a `tool` span carries is generic: the importer and the proxy keep the call id
//! itself (`String`); the simulator an index into its call names, to stay allocation-free.

use eyre::Result;

use crate::CachedEncoder;
use gyre_format::record::Source;
use gyre_format::write::SpanOut;

/// A labelled run of tokens ending (exclusive) at `end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span<C = String> {
    /// Exclusive end, in tokens.
    pub end: usize,
    /// What the tokens are.
    pub source: Source,
    /// For `tool` spans: the call the result answers.
    pub call_id: Option<C>,
}

/// A labelled byte range of rendered text; bytes outside every part are `template`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part<C = String> {
    /// First byte.
    pub start: usize,
    /// Exclusive end byte.
    pub end: usize,
    /// Label of the tokens whose first byte is in the range.
    pub source: Source,
    /// The call, for `tool` parts.
    pub call_id: Option<C>,
}

/// Spans for tokens starting at byte offsets `starts`, labelled by `parts` (sorted, disjoint
/// byte ranges); equal neighbours merge.
pub fn label<C: Clone + PartialEq>(starts: &[usize], parts: &[Part<C>]) -> Vec<Span<C>> {
    let mut spans: Vec<Span<C>> = Vec::new();
    let mut r = 0;
    for (i, &byte) in starts.iter().enumerate() {
        while r < parts.len() && parts[r].end <= byte {
            r += 1;
        }
        let (source, call_id) = match parts.get(r) {
            Some(p) if p.start <= byte => (p.source, p.call_id.as_ref()),
            _ => (Source::Template, None),
        };
        match spans.last_mut() {
            Some(last) if last.source == source && last.call_id.as_ref() == call_id => {
                last.end = i + 1
            }
            _ => spans.push(Span {
                end: i + 1,
                source,
                call_id: call_id.cloned(),
            }),
        }
    }
    spans
}

/// Appends `more` (ends relative to its own tokens) after `base_len` tokens already labelled by
/// `spans`, merging equal neighbours.
pub fn extend_spans<C: Clone + PartialEq>(
    spans: &mut Vec<Span<C>>,
    base_len: usize,
    more: &[Span<C>],
) {
    for s in more {
        let end = base_len + s.end;
        match spans.last_mut() {
            Some(last) if last.source == s.source && last.call_id == s.call_id => last.end = end,
            _ => spans.push(Span { end, ..s.clone() }),
        }
    }
}

/// The span as written in a request (`end` fits: token counts are `u32` in gyre/1).
impl<'a> From<&'a Span> for SpanOut<'a> {
    fn from(s: &'a Span) -> Self {
        SpanOut {
            end: s.end as u32,
            source: s.source,
            call_id: s.call_id.as_deref(),
        }
    }
}

impl CachedEncoder {
    /// Tokenises `text`, labelling each token by the part holding its first byte (`template`
    /// outside every part). `parts` must be sorted and disjoint. Span ends are relative to the
    /// returned ids.
    pub fn encode_labelled<C: Clone + PartialEq>(
        &self,
        text: &str,
        parts: &[Part<C>],
    ) -> Result<(Vec<u32>, Vec<Span<C>>)> {
        let (ids, starts) = self.encode_with_starts(text)?;
        Ok((ids, label(&starts, parts)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(start: usize, end: usize, source: Source, call: Option<&str>) -> Part {
        Part {
            start,
            end,
            source,
            call_id: call.map(str::to_owned),
        }
    }

    /// A token takes its first byte's label; gaps are `template`; equal neighbours merge.
    #[test]
    fn tokens_take_the_label_of_their_first_byte() {
        // Tokens start at bytes 0, 3, 5, 9, 12 of a 14-byte text.
        let starts = [0, 3, 5, 9, 12];
        let parts = [
            part(2, 8, Source::User, None),
            part(8, 10, Source::Tool, Some("c1")),
            part(11, 14, Source::Tool, Some("c1")),
        ];
        let spans = label(&starts, &parts);
        let got: Vec<_> = spans
            .iter()
            .map(|s| (s.end, s.source, s.call_id.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (1, Source::Template, None),
                (3, Source::User, None),
                (5, Source::Tool, Some("c1")),
            ]
        );
        let mut all = spans.clone();
        extend_spans(&mut all, 5, &spans);
        assert_eq!(all.len(), 6, "template after tool does not merge");
        assert_eq!(all.last().map(|s| s.end), Some(10));
    }
}
