//! Tokenising rendered chat text into ids plus SPEC §1 `spans`, with a cache.
//!
//! Exactness: HuggingFace splits text on added tokens (leftmost-longest) before the
//! pre-tokenizer runs, so the pieces between added tokens tokenise independently. Caching the ids
//! of those pieces therefore gives exactly `encode(text, add_special_tokens=False)` while most
//! pieces of a synthetic conversation (tool definitions, file contents, test output) are
//! tokenised only once.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, MatchKind};
use color_eyre::eyre::{Result, bail, eyre};

use crate::text::TokenText;

/// A span source (SPEC §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    System,
    User,
    Tool,
    Assistant,
    Critique,
    Summary,
    Template,
}

impl Source {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::System => "system",
            Source::User => "user",
            Source::Tool => "tool",
            Source::Assistant => "assistant",
            Source::Critique => "critique",
            Source::Summary => "summary",
            Source::Template => "template",
        }
    }
}

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

/// Cached, labelled tokenisation with one tokenizer.
pub(crate) struct Encoder {
    tok: TokenText,
    added: AhoCorasick,
    added_ids: Vec<u32>,
    cache: HashMap<String, Box<[u32]>>,
}

/// Past this many cached pieces the cache is cleared (bounds memory on huge runs).
const CACHE_LIMIT: usize = 200_000;

impl Encoder {
    pub(crate) fn new(tok: TokenText) -> Result<Self> {
        if tok.hf().is_none() {
            bail!("synth needs a tokenizer.json tokenizer");
        }
        let (texts, ids): (Vec<String>, Vec<u32>) = tok.added_tokens().into_iter().unzip();
        let added = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&texts)
            .map_err(|e| eyre!("{e}"))?;
        Ok(Self {
            tok,
            added,
            added_ids: ids,
            cache: HashMap::new(),
        })
    }

    /// Ids of `text` (as HuggingFace `encode(text, add_special_tokens=False)`).
    pub(crate) fn encode(&mut self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        self.encode_into(text, &mut ids, |_| {})?;
        Ok(ids)
    }

    /// Appends the ids of `text` to `ids`, calling `on_token(byte_start)` for each token.
    fn encode_into(
        &mut self,
        text: &str,
        ids: &mut Vec<u32>,
        mut on_token: impl FnMut(usize),
    ) -> Result<()> {
        let mut at = 0;
        let matches: Vec<_> = self.added.find_iter(text).collect();
        for m in matches {
            self.encode_plain(&text[at..m.start()], at, ids, &mut on_token)?;
            on_token(m.start());
            ids.push(self.added_ids[m.pattern().as_usize()]);
            at = m.end();
        }
        self.encode_plain(&text[at..], at, ids, &mut on_token)
    }

    /// Text without added tokens, starting at byte `start` of the whole text.
    fn encode_plain(
        &mut self,
        seg: &str,
        start: usize,
        ids: &mut Vec<u32>,
        on_token: &mut impl FnMut(usize),
    ) -> Result<()> {
        if seg.is_empty() {
            return Ok(());
        }
        if !self.cache.contains_key(seg) {
            if self.cache.len() >= CACHE_LIMIT {
                self.cache.clear();
            }
            let hf = self.tok.hf().ok_or_else(|| eyre!("no tokenizer"))?;
            let enc = hf.encode_fast(seg, false).map_err(|e| eyre!("{e}"))?;
            self.cache.insert(seg.to_owned(), enc.get_ids().into());
        }
        let mut pos = start;
        for &id in &self.cache[seg][..] {
            on_token(pos);
            ids.push(id);
            pos += self.tok.piece_bytes(id).map_or(0, <[u8]>::len);
        }
        Ok(())
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
        let mut ids = Vec::new();
        let mut labels = Vec::new();
        let mut r = 0;
        self.encode_into(rendered, &mut ids, |byte| {
            labels.push(label_at(byte, &mut r))
        })?;
        let mut spans: Vec<Span> = Vec::new();
        for (i, (source, call)) in labels.into_iter().enumerate() {
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
