//! Cached tokenisation of rendered chat text, exact to HuggingFace
//! `encode(text, add_special_tokens=False)`.
//!
//! HuggingFace splits text on added tokens (leftmost-longest) before the pre-tokenizer runs, so
//! the pieces between added tokens tokenise independently: caching the ids of those pieces gives
//! exactly the same ids while each message of a long conversation is tokenised once, however
//! many later contexts repeat it. Used by `gyre synth`, `gyre import` and `gyre record`; the
//! cache is shared behind a lock held only to look a piece up or store it, so one encoder serves
//! concurrent requests (tokenising happens outside the lock).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

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
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    pieces: HashMap<Box<str>, Piece>,
    bytes: usize,
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
            cache: Mutex::new(Cache::default()),
        })
    }

    fn cache(&self) -> MutexGuard<'_, Cache> {
        // The cache is only ever extended or cleared whole: a panic elsewhere leaves it valid.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &TokenText {
        &self.tok
    }

    /// Ids of `text` (HuggingFace `encode(text, add_special_tokens=False)`).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        let mut starts = Vec::new();
        self.encode_into(text, &mut ids, &mut starts)?;
        Ok(ids)
    }

    /// Ids of `text` and the byte offset where each token starts.
    pub fn encode_with_starts(&self, text: &str) -> Result<(Vec<u32>, Vec<usize>)> {
        let mut ids = Vec::new();
        let mut starts = Vec::new();
        self.encode_into(text, &mut ids, &mut starts)?;
        Ok((ids, starts))
    }

    fn encode_into(&self, text: &str, ids: &mut Vec<u32>, starts: &mut Vec<usize>) -> Result<()> {
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
        &self,
        seg: &str,
        offset: usize,
        ids: &mut Vec<u32>,
        starts: &mut Vec<usize>,
    ) -> Result<()> {
        if seg.is_empty() {
            return Ok(());
        }
        let push = |piece: &Piece, ids: &mut Vec<u32>, starts: &mut Vec<usize>| {
            ids.extend_from_slice(&piece.ids);
            starts.extend(piece.starts.iter().map(|&s| offset + s as usize));
        };
        if let Some(piece) = self.cache().pieces.get(seg) {
            push(piece, ids, starts);
            return Ok(());
        }
        // Outside the lock: another request's long piece does not hold this one up.
        let piece = self.tokenise_piece(seg)?;
        push(&piece, ids, starts);
        let mut cache = self.cache();
        if cache.bytes > CACHE_LIMIT_BYTES {
            cache.pieces.clear();
            cache.bytes = 0;
        }
        cache.bytes += seg.len() + piece.ids.len() * 8;
        cache.pieces.insert(seg.into(), piece);
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
