//! Cached tokenisation of rendered chat text, exact to HuggingFace
//! `encode(text, add_special_tokens=False)`.
//!
//! HuggingFace splits text on added tokens (leftmost-longest) before the pre-tokenizer runs, so
//! the pieces between added tokens tokenise independently: caching the ids of those pieces gives
//! exactly the same ids while each message of a long conversation is tokenised once, however
//! many later contexts repeat it. Used by `gyre synth` and `gyre import`.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, MatchKind};
use eyre::{Result, bail, eyre};

use crate::TokenText;

struct Piece {
    ids: Box<[u32]>,
    /// Byte offset of each token in the piece.
    starts: Box<[u32]>,
}

/// Cached tokenisation with one tokenizer, exact to HuggingFace `encode`.
pub struct CachedEncoder {
    tok: TokenText,
    added: AhoCorasick,
    added_ids: Vec<u32>,
    cache: HashMap<Box<str>, Piece>,
    cached_bytes: usize,
}

/// Past this many cached bytes the cache is cleared (bounds memory on huge inputs).
const CACHE_LIMIT_BYTES: usize = 256 << 20;

impl CachedEncoder {
    /// An encoder for `tok`, which must be a HuggingFace tokenizer.
    pub fn new(tok: TokenText) -> Result<Self> {
        if tok.hf().is_none() {
            bail!(
                "encoding needs a tokenizer.json tokenizer ({} has none)",
                tok.label()
            );
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
            cached_bytes: 0,
        })
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &TokenText {
        &self.tok
    }

    /// Ids of `text` (HuggingFace `encode(text, add_special_tokens=False)`).
    pub fn encode(&mut self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        let mut starts = Vec::new();
        self.encode_into(text, &mut ids, &mut starts)?;
        Ok(ids)
    }

    /// Ids of `text` and the byte offset where each token starts.
    pub fn encode_with_starts(&mut self, text: &str) -> Result<(Vec<u32>, Vec<usize>)> {
        let mut ids = Vec::new();
        let mut starts = Vec::new();
        self.encode_into(text, &mut ids, &mut starts)?;
        Ok((ids, starts))
    }

    fn encode_into(
        &mut self,
        text: &str,
        ids: &mut Vec<u32>,
        starts: &mut Vec<usize>,
    ) -> Result<()> {
        let mut at = 0;
        let matches: Vec<_> = self.added.find_iter(text).collect();
        for m in matches {
            self.encode_plain(&text[at..m.start()], at, ids, starts)?;
            starts.push(m.start());
            ids.push(self.added_ids[m.pattern().as_usize()]);
            at = m.end();
        }
        self.encode_plain(&text[at..], at, ids, starts)
    }

    fn encode_plain(
        &mut self,
        seg: &str,
        offset: usize,
        ids: &mut Vec<u32>,
        starts: &mut Vec<usize>,
    ) -> Result<()> {
        if seg.is_empty() {
            return Ok(());
        }
        if !self.cache.contains_key(seg) {
            if self.cached_bytes > CACHE_LIMIT_BYTES {
                self.cache.clear();
                self.cached_bytes = 0;
            }
            let piece = self.tokenise_piece(seg)?;
            self.cached_bytes += seg.len() + piece.ids.len() * 8;
            self.cache.insert(seg.into(), piece);
        }
        let piece = &self.cache[seg];
        ids.extend_from_slice(&piece.ids);
        starts.extend(piece.starts.iter().map(|&s| offset + s as usize));
        Ok(())
    }

    fn tokenise_piece(&self, seg: &str) -> Result<Piece> {
        let hf = self.tok.hf().ok_or_else(|| eyre!("no tokenizer"))?;
        let enc = hf.encode_fast(seg, false).map_err(|e| eyre!("{e}"))?;
        let ids: Box<[u32]> = enc.get_ids().into();
        // Byte-level BPE: the tokens' bytes concatenate to the text, so offsets are running
        // sums. When a normaliser changed the bytes, ask the tokenizer for offsets instead.
        let mut starts = Vec::with_capacity(ids.len());
        let mut pos = 0usize;
        for &id in ids.iter() {
            starts.push(pos as u32);
            pos += self.tok.piece_bytes(id).map_or(0, <[u8]>::len);
        }
        if pos != seg.len() {
            let enc = hf.encode(seg, false).map_err(|e| eyre!("{e}"))?;
            starts = enc.get_offsets().iter().map(|&(s, _)| s as u32).collect();
        }
        Ok(Piece {
            ids,
            starts: starts.into(),
        })
    }
}
