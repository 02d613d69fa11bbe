//! Token ids → display text (docs/format.md §7).
//!
//! A [`TokenText`] is chosen by name (`qwen3`, bundled), by a HuggingFace `tokenizer.json` path,
//! by an inline vocabulary from the recording's header, or is the `⟨id⟩` fallback. Display
//! decoding reads a per-id byte table built once (lazily), so rendering thousands of tokens per
//! frame never calls the HuggingFace decoder.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use eyre::{Result, WrapErr, bail, eyre};
pub use gyre_format::tokenizer_spec::{
    BUNDLED, MAX_TOKENIZER_BYTES, SPEC_SHAPE, check_file, check_spec, header_path, resolve_path,
};
use tokenizers::{DecoderWrapper, Tokenizer};

/// The Qwen3 `tokenizer.json`, gzipped (see `assets/tokenizers/qwen3/PROVENANCE.md`).
const QWEN3_TOKENIZER_GZ: &[u8] =
    include_bytes!("../../../assets/tokenizers/qwen3/tokenizer.json.gz");

/// Turns token ids into text. Cheap to clone (shared).
#[derive(Clone)]
pub struct TokenText {
    inner: Arc<Inner>,
}

struct Inner {
    label: String,
    source: Source,
    pieces: OnceLock<Pieces>,
}

enum Source {
    Hf(Box<Tokenizer>),
    Vocab(Vec<String>),
    Ids,
}

/// The bytes each id stands for, in one flat buffer.
struct Pieces {
    bytes: Vec<u8>,
    /// `offsets[id]..offsets[id + 1]` indexes `bytes`; `len = ids + 1`.
    offsets: Vec<u32>,
    kind: Vec<PieceKind>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PieceKind {
    /// No token has this id.
    Missing,
    /// The bytes are valid UTF-8 on their own.
    Text,
    /// A fragment of a multi-byte character (byte-level BPE).
    Bytes,
}

impl std::fmt::Debug for TokenText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TokenText").field(&self.inner.label).finish()
    }
}

impl TokenText {
    /// No tokenizer: every id displays as `⟨id⟩`.
    pub fn none() -> Self {
        Self::new("none".into(), Source::Ids)
    }

    /// The bundled Qwen3 tokenizer. Decompressed and parsed once per process, then shared.
    pub fn qwen3() -> Result<Self> {
        static QWEN3: OnceLock<std::result::Result<TokenText, String>> = OnceLock::new();
        QWEN3
            .get_or_init(|| {
                let mut json = Vec::with_capacity(12 << 20);
                std::io::Read::read_to_end(
                    &mut flate2::read::GzDecoder::new(QWEN3_TOKENIZER_GZ),
                    &mut json,
                )
                .map_err(|e| format!("bundled qwen3 tokenizer: {e}"))?;
                let tok = Tokenizer::from_bytes(&json)
                    .map_err(|e| format!("bundled qwen3 tokenizer: {e}"))?;
                Ok(Self::new("qwen3".into(), Source::Hf(Box::new(tok))))
            })
            .clone()
            .map_err(|e| eyre!(e))
    }

    /// A bundled tokenizer by name (see [`BUNDLED`]).
    pub fn bundled(name: &str) -> Result<Self> {
        match name {
            "qwen3" => Self::qwen3(),
            _ => bail!(
                "unknown bundled tokenizer \"{name}\" (bundled: {})",
                BUNDLED.join(", ")
            ),
        }
    }

    /// A HuggingFace `tokenizer.json` file, plain or gzipped (`tokenizer.json.gz`, recognised by
    /// its bytes, not its name), or a model directory holding one (see [`tokenizer_file`]): a
    /// regular file (never a device or FIFO) of at most [`MAX_TOKENIZER_BYTES`], decompressed too.
    pub fn from_file(path: &Path) -> Result<Self> {
        let file = tokenizer_file(path).map_err(|e| eyre!(e))?;
        let bytes = read_tokenizer_bytes(&file)?;
        Self::from_tokenizer_json(&bytes, &file.display().to_string())
            .wrap_err_with(|| format!("{} is not a usable tokenizer.json", file.display()))
    }

    /// A HuggingFace `tokenizer.json` already in memory; `label` names it in the UI.
    pub fn from_tokenizer_json(json: &[u8], label: &str) -> Result<Self> {
        let tok = Tokenizer::from_bytes(json).map_err(|e| eyre!("{e}"))?;
        Ok(Self::new(label.into(), Source::Hf(Box::new(tok))))
    }

    /// An inline vocabulary: `vocab[id]` is the literal text of token `id`.
    pub fn from_vocab(vocab: Vec<String>) -> Self {
        Self::new(
            format!("inline vocabulary ({} ids)", vocab.len()),
            Source::Vocab(vocab),
        )
    }

    /// From the header's `tokenizer` value (docs/format.md §7): `"qwen3"`, `{"path": "tok.json"}` (relative
    /// paths are resolved against `base_dir`, the recording's directory) or `{"vocab": [...]}`.
    pub fn from_header(value: &serde_json::Value, base_dir: &Path) -> Result<Self> {
        use serde_json::Value;
        check_spec(value).map_err(|e| eyre!(e))?;
        match value {
            Value::String(name) => Self::bundled(name),
            _ => match (
                header_path(value),
                value.get("vocab").and_then(Value::as_array),
            ) {
                (Some(path), _) => Self::from_file(&resolve_path(base_dir, path)),
                (None, Some(items)) => Ok(Self::from_vocab(
                    items
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect(),
                )),
                (None, None) => bail!(SPEC_SHAPE),
            },
        }
    }

    /// From a command-line value `NAME|PATH`: a bundled name, else a `tokenizer.json` (or
    /// `.gz`) path or a model directory holding one (relative paths are resolved against
    /// `base_dir`).
    pub fn from_arg(arg: &str, base_dir: &Path) -> Result<Self> {
        if BUNDLED.contains(&arg) {
            return Self::bundled(arg);
        }
        let path = resolve_path(base_dir, arg);
        if !path.exists() {
            bail!(
                "no bundled tokenizer and no file is called {} (bundled: {})",
                path.display(),
                BUNDLED.join(", ")
            );
        }
        Self::from_file(&path)
    }

    fn new(label: String, source: Source) -> Self {
        Self {
            inner: Arc::new(Inner {
                label,
                source,
                pieces: OnceLock::new(),
            }),
        }
    }

    /// What this is, for the UI: `qwen3`, a path, `inline vocabulary (n ids)` or `none`.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// False for the `⟨id⟩` fallback.
    pub fn has_vocabulary(&self) -> bool {
        !matches!(self.inner.source, Source::Ids)
    }

    /// The HuggingFace tokenizer behind this, if any (for encoding).
    pub fn hf(&self) -> Option<&Tokenizer> {
        match &self.inner.source {
            Source::Hf(tok) => Some(tok),
            _ => None,
        }
    }

    /// Number of ids the table covers (`0` for the fallback).
    pub fn vocab_size(&self) -> usize {
        self.pieces().kind.len()
    }

    /// The raw bytes token `id` stands for, or `None` when no token has that id.
    pub fn piece_bytes(&self, id: u32) -> Option<&[u8]> {
        let p = self.pieces();
        let i = id as usize;
        match p.kind.get(i) {
            Some(PieceKind::Text | PieceKind::Bytes) => {
                Some(&p.bytes[p.offsets[i] as usize..p.offsets[i + 1] as usize])
            }
            _ => None,
        }
    }

    /// The id of the token whose text is exactly `text` (special tokens included), if any.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        match &self.inner.source {
            Source::Hf(tok) => tok.token_to_id(text),
            Source::Vocab(v) => v.iter().position(|t| t == text).map(|i| i as u32),
            Source::Ids => None,
        }
    }

    /// Per-token display text, one entry per id, not yet sanitised (see
    /// [`sanitize`](fn@crate::sanitize)).
    ///
    /// Byte-level BPE can split one character over several tokens. The rule: the bytes of all
    /// tokens are read as one stream; each complete character is shown by the token holding its
    /// first byte, so a token made only of continuation bytes shows `""`. Bytes that never form
    /// a valid character show as hex, `⟨e4 bd⟩`: stray bytes on the token holding them, an
    /// unfinished character (cut off by the end of `ids`, an unknown id or a non-continuation
    /// byte) on the token where it began. An id without a token shows `⟨id⟩`. Concatenating the
    /// entries gives [`decode`](Self::decode).
    pub fn display_pieces<'a>(&'a self, ids: &[u32]) -> Vec<Cow<'a, str>> {
        let p = self.pieces();
        let mut out: Vec<Cow<'a, str>> = Vec::with_capacity(ids.len());
        // An unfinished character: its bytes so far and the index of the token that started it.
        let mut pending: Vec<u8> = Vec::new();
        let mut owner = 0usize;
        for (pos, &id) in ids.iter().enumerate() {
            let i = id as usize;
            let kind = p.kind.get(i).copied().unwrap_or(PieceKind::Missing);
            if kind == PieceKind::Missing {
                flush_hex(&mut out, &mut pending, owner);
                out.push(Cow::Owned(format!("⟨{id}⟩")));
                continue;
            }
            let bytes = &p.bytes[p.offsets[i] as usize..p.offsets[i + 1] as usize];
            if kind == PieceKind::Text && pending.is_empty() {
                // Fast path: the piece is valid UTF-8 by construction of the table.
                out.push(Cow::Borrowed(
                    std::str::from_utf8(bytes).unwrap_or_default(),
                ));
                continue;
            }
            out.push(Cow::Borrowed(""));
            let mut rest = bytes;
            // Finish a character begun by an earlier token.
            while !pending.is_empty() && !rest.is_empty() {
                if rest[0] & 0xC0 != 0x80 {
                    flush_hex(&mut out, &mut pending, owner);
                    break;
                }
                pending.push(rest[0]);
                rest = &rest[1..];
                if pending.len() == utf8_len(pending[0]) {
                    match std::str::from_utf8(&pending) {
                        Ok(s) => out[owner].to_mut().push_str(s),
                        Err(_) => push_hex(out[owner].to_mut(), &pending),
                    }
                    pending.clear();
                }
            }
            // The rest: valid runs as text, invalid bytes as hex, an unfinished tail as pending.
            while !rest.is_empty() {
                match std::str::from_utf8(rest) {
                    Ok(s) => {
                        out[pos].to_mut().push_str(s);
                        rest = &[];
                    }
                    Err(e) => {
                        let (ok, tail) = rest.split_at(e.valid_up_to());
                        out[pos]
                            .to_mut()
                            .push_str(std::str::from_utf8(ok).unwrap_or_default());
                        match e.error_len() {
                            Some(n) => {
                                push_hex(out[pos].to_mut(), &tail[..n]);
                                rest = &tail[n..];
                            }
                            None => {
                                pending.extend_from_slice(tail);
                                owner = pos;
                                rest = &[];
                            }
                        }
                    }
                }
            }
        }
        flush_hex(&mut out, &mut pending, owner);
        out
    }

    /// `display_pieces(ids)[range]`, computed from `ids[range]` and three tokens on either side
    /// (a character spans at most four tokens), so a TUI can render a window of a long path.
    pub fn display_window<'a>(&'a self, ids: &[u32], range: Range<usize>) -> Vec<Cow<'a, str>> {
        let end = range.end.min(ids.len());
        let start = range.start.min(end);
        let lo = start.saturating_sub(3);
        let hi = (end + 3).min(ids.len());
        let mut all = self.display_pieces(&ids[lo..hi]);
        all.truncate(end - lo);
        all.drain(..start - lo);
        all
    }

    /// The whole sequence as text (export previews): the concatenation of
    /// [`display_pieces`](Self::display_pieces), so invalid bytes show as `⟨e4 bd⟩` and unknown
    /// ids as `⟨id⟩`. Not sanitised.
    pub fn decode(&self, ids: &[u32]) -> String {
        self.display_pieces(ids).concat()
    }

    /// Token ids of `text`, with special tokens recognised and none added (HuggingFace
    /// `encode(text, add_special_tokens=False)`). Needs a HuggingFace tokenizer.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let tok = self.hf().ok_or_else(|| {
            eyre!(
                "encoding text needs a tokenizer.json ({} has none)",
                self.label()
            )
        })?;
        let enc = tok.encode_fast(text, false).map_err(|e| eyre!("{e}"))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Every added token (special tokens, `<think>`, `<tool_call>` …) with its id, in id order.
    pub fn added_tokens(&self) -> Vec<(String, u32)> {
        match &self.inner.source {
            Source::Hf(tok) => {
                let mut v: Vec<(String, u32)> = tok
                    .get_added_tokens_decoder()
                    .into_iter()
                    .map(|(id, t)| (t.content, id))
                    .collect();
                v.sort_by_key(|&(_, id)| id);
                v
            }
            _ => Vec::new(),
        }
    }

    fn pieces(&self) -> &Pieces {
        self.inner
            .pieces
            .get_or_init(|| build_pieces(&self.inner.source))
    }
}

/// The tokenizer file `path` names: `path` itself, or for a directory (a model as Hugging Face
/// ships it) its `tokenizer.json`, else its `tokenizer.json.gz`. An error says what the
/// directory holds instead when it has neither.
pub fn tokenizer_file(path: &Path) -> std::result::Result<std::path::PathBuf, String> {
    if !path.is_dir() {
        check_file(path)?;
        return Ok(path.to_path_buf());
    }
    for name in ["tokenizer.json", "tokenizer.json.gz"] {
        let file = path.join(name);
        if file.exists() {
            check_file(&file)?;
            return Ok(file);
        }
    }
    let other = ["tokenizer.model", "tiktoken.model", "vocab.json"]
        .into_iter()
        .find(|n| path.join(n).exists());
    Err(match other {
        Some(n) => format!(
            "{} holds {n} but no tokenizer.json or tokenizer.json.gz (gyre reads Hugging Face \
             tokenizers in the tokenizer.json format; `transformers` writes one with \
             AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR))",
            path.display()
        ),
        None => format!(
            "{} holds no tokenizer.json or tokenizer.json.gz",
            path.display()
        ),
    })
}

/// The JSON text of a tokenizer file, gunzipped when it starts with the gzip magic bytes; at
/// most [`MAX_TOKENIZER_BYTES`] either way (a small `.gz` cannot expand without bound).
fn read_tokenizer_bytes(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut raw = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_TOKENIZER_BYTES).read_to_end(&mut raw))
        .wrap_err_with(|| format!("reading {}", path.display()))?;
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return Ok(raw);
    }
    let mut json = Vec::with_capacity(raw.len() * 4);
    flate2::read::GzDecoder::new(raw.as_slice())
        .take(MAX_TOKENIZER_BYTES + 1)
        .read_to_end(&mut json)
        .wrap_err_with(|| format!("{} is not a readable gzip file", path.display()))?;
    if json.len() as u64 > MAX_TOKENIZER_BYTES {
        bail!(
            "{} expands to more than the {} MiB limit for a tokenizer.json",
            path.display(),
            MAX_TOKENIZER_BYTES >> 20
        );
    }
    Ok(json)
}

/// Expected length of a UTF-8 sequence from its lead byte (1 for bytes that cannot lead, so an
/// invalid lead is flushed as hex right away).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 1,
    }
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    out.push('⟨');
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{b:02x}");
    }
    out.push('⟩');
}

fn flush_hex(out: &mut [Cow<'_, str>], pending: &mut Vec<u8>, owner: usize) {
    if !pending.is_empty() {
        push_hex(out[owner].to_mut(), pending);
        pending.clear();
    }
}

fn build_pieces(source: &Source) -> Pieces {
    let mut p = Pieces {
        bytes: Vec::new(),
        offsets: vec![0],
        kind: Vec::new(),
    };
    let mut push = |piece: Option<&[u8]>| {
        let kind = match piece {
            None => PieceKind::Missing,
            Some(b) if std::str::from_utf8(b).is_ok() => PieceKind::Text,
            Some(_) => PieceKind::Bytes,
        };
        p.bytes.extend_from_slice(piece.unwrap_or_default());
        p.offsets.push(p.bytes.len() as u32);
        p.kind.push(kind);
    };
    match source {
        Source::Ids => {}
        Source::Vocab(v) => v.iter().for_each(|t| push(Some(t.as_bytes()))),
        Source::Hf(tok) => {
            let added = tok.get_added_tokens_decoder();
            let n = tok
                .get_vocab_size(true)
                .max(added.keys().map(|&k| k as usize + 1).max().unwrap_or(0));
            let style = DecodeStyle::of(tok.get_decoder());
            let unbyte = byte_level_inverse();
            for id in 0..n as u32 {
                if let Some(t) = added.get(&id) {
                    push(Some(t.content.as_bytes()));
                    continue;
                }
                let Some(token) = tok.id_to_token(id) else {
                    push(None);
                    continue;
                };
                let piece: Vec<u8> = match style {
                    DecodeStyle::ByteLevel => token
                        .chars()
                        .flat_map(|c| match unbyte.get(c as usize).copied().flatten() {
                            Some(b) => vec![b],
                            None => c.to_string().into_bytes(),
                        })
                        .collect(),
                    DecodeStyle::Other => match byte_fallback(&token) {
                        Some(b) => vec![b],
                        None => tok
                            .decode(&[id], false)
                            .map(String::into_bytes)
                            .unwrap_or_else(|_| token.replace('▁', " ").into_bytes()),
                    },
                };
                push(Some(&piece));
            }
        }
    }
    p
}

#[derive(Clone, Copy)]
enum DecodeStyle {
    /// GPT-2 byte-level BPE: each vocabulary character stands for one byte.
    ByteLevel,
    /// Anything else: decode ids one at a time once, when building the table.
    Other,
}

impl DecodeStyle {
    fn of(decoder: Option<&DecoderWrapper>) -> Self {
        match decoder {
            Some(DecoderWrapper::ByteLevel(_)) => Self::ByteLevel,
            Some(DecoderWrapper::Sequence(s))
                if s.get_decoders()
                    .iter()
                    .any(|d| matches!(d, DecoderWrapper::ByteLevel(_))) =>
            {
                Self::ByteLevel
            }
            _ => Self::Other,
        }
    }
}

/// `<0xE4>` (SentencePiece byte fallback) → the byte.
fn byte_fallback(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok().filter(|_| hex.len() == 2)
}

/// Inverse of GPT-2's `bytes_to_unicode`: printable Latin-1 bytes map to themselves, the other
/// 68 bytes to U+0100.. in byte order. Indexed by char code.
fn byte_level_inverse() -> Vec<Option<u8>> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = vec![None; 0x100 + 68];
    let mut next = 0x100;
    for b in 0..=255u8 {
        if printable(b) {
            table[b as usize] = Some(b);
        } else {
            table[next] = Some(b);
            next += 1;
        }
    }
    table
}
