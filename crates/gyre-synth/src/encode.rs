//! Tokenising rendered chat text into ids plus docs/format.md §1 `spans`, labelled by the message texts
//! the simulator wrote (on top of the shared [`CachedEncoder`]).

use eyre::{Result, bail};

pub(crate) use gyre_engine::record::Source;
use gyre_text::{CachedEncoder, TokenText};

/// A labelled run of tokens ending (exclusive) at `end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub end: usize,
    pub source: Source,
    /// Tool-call id, for `tool` spans; an index into the execution's call-id names.
    pub call: Option<u32>,
}

/// A piece of rendered text that carries a label; the text between parts is `template`.
pub(crate) struct Part<'a> {
    pub text: &'a str,
    pub source: Source,
    pub call: Option<u32>,
}

impl<'a> Part<'a> {
    pub(crate) fn new(text: &'a str, source: Source) -> Self {
        Self {
            text,
            source,
            call: None,
        }
    }
}

/// Cached tokenisation with labelling by message text.
pub(crate) struct Encoder(CachedEncoder);

impl Encoder {
    pub(crate) fn new(tok: TokenText) -> Result<Self> {
        Ok(Self(CachedEncoder::new(tok)?))
    }

    /// Ids of `text` (as HuggingFace `encode(text, add_special_tokens=False)`).
    pub(crate) fn encode(&mut self, text: &str) -> Result<Vec<u32>> {
        self.0.encode(text)
    }

    /// Tokenises `rendered`, labelling tokens by `parts`: each part's text is looked up in
    /// `rendered` after the previous one; a token takes the label of the part holding its first
    /// byte, `template` elsewhere. Returns the ids and spans (ends relative to the returned ids).
    pub(crate) fn encode_labelled(
        &mut self,
        rendered: &str,
        parts: &[Part<'_>],
    ) -> Result<(Vec<u32>, Vec<Span>)> {
        // Byte ranges of the labelled parts, in order.
        let mut ranges = Vec::with_capacity(parts.len());
        let mut cursor = 0;
        for p in parts.iter().filter(|p| !p.text.is_empty()) {
            let Some(i) = rendered[cursor..].find(p.text) else {
                bail!("synth: part {:?} not found in rendered text", p.text);
            };
            ranges.push((cursor + i, cursor + i + p.text.len(), p.source, p.call));
            cursor += i + p.text.len();
        }
        let label_at = |byte: usize, r: &mut usize| {
            while *r < ranges.len() && ranges[*r].1 <= byte {
                *r += 1;
            }
            match ranges.get(*r) {
                Some(&(s, _, source, call)) if s <= byte => (source, call),
                _ => (Source::Template, None),
            }
        };
        let (ids, starts) = self.0.encode_with_starts(rendered)?;
        let mut r = 0;
        let mut spans: Vec<Span> = Vec::new();
        for (i, &byte) in starts.iter().enumerate() {
            let (source, call) = label_at(byte, &mut r);
            match spans.last_mut() {
                Some(last) if last.source == source && last.call == call => last.end = i + 1,
                _ => spans.push(Span {
                    end: i + 1,
                    source,
                    call,
                }),
            }
        }
        Ok((ids, spans))
    }
}
