//! Tokenising rendered chat text into ids plus docs/format.md §1 `spans`, labelled by the message texts
//! the simulator wrote (on top of the shared [`CachedEncoder`]).

use eyre::{Result, bail};

pub(crate) use gyre_engine::record::Source;
use gyre_text::{CachedEncoder, TokenText, label};

/// A labelled run of tokens; the call is an index into the execution's call-id names.
pub(crate) type Span = label::Span<u32>;

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
    /// `rendered` after the previous one, then the shared labelled encoder labels each token by
    /// the part holding its first byte. Returns the ids and spans (ends relative to the ids).
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
            ranges.push(label::Part {
                start: cursor + i,
                end: cursor + i + p.text.len(),
                source: p.source,
                call_id: p.call,
            });
            cursor += i + p.text.len();
        }
        self.0.encode_labelled(rendered, &ranges)
    }
}
