//! A lower bound on how many tokens a rendered text encodes to, computed from its length alone,
//! so a conversation that cannot fit the upstream's context is refused before it is tokenised
//! (tokenising costs about 160 bytes of memory per byte of text).
//!
//! Every token stands for at most [`TokenFloor::max_token_bytes`] bytes of text (the longest
//! piece in the vocabulary, special tokens included), and the tokens of a text cover all of it,
//! so a text of `n` bytes is at least `n / max_token_bytes` tokens. That holds for the text the
//! model reads, i.e. after the tokenizer's normaliser. Normalisers that only add text (Prepend,
//! a Replace whose replacement is not shorter than a plain pattern) keep the bound; Unicode
//! normalisation (NFC, NFKC, NFD, NFKD) and Lowercase leave ASCII as it is and shrink any other
//! character at most threefold (Hangul jamo composed into a syllable: 9 bytes → 3; the Kelvin
//! sign lower-cased: 3 → 1), so non-ASCII bytes count a third there. A normaliser that can delete
//! text (StripAccents, Strip, BERT's, a precompiled SentencePiece map, a shrinking Replace) gives
//! no bound: such a tokenizer's prompts are only limited by the request size.

use gyre_text::TokenText;
use serde_json::Value;

/// What the bound needs to know about a tokenizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenFloor {
    /// Bytes of the longest token.
    pub max_token_bytes: usize,
    /// Non-ASCII bytes count a third (a Unicode or lower-casing normaliser).
    shrinks_non_ascii: bool,
}

impl TokenFloor {
    /// The bound for `tok`, or `None` when its normaliser can delete text (or it has no
    /// vocabulary).
    pub fn of(tok: &TokenText) -> Option<TokenFloor> {
        let hf = tok.hf()?;
        let shrinks_non_ascii = match hf.get_normalizer() {
            None => false,
            Some(n) => normaliser(&serde_json::to_value(n).ok()?)?,
        };
        let max_token_bytes = (0..tok.vocab_size() as u32)
            .filter_map(|id| tok.piece_bytes(id).map(<[u8]>::len))
            .max()?
            .max(1);
        Some(TokenFloor {
            max_token_bytes,
            shrinks_non_ascii,
        })
    }

    /// At least this many tokens encode `text`.
    pub fn min_tokens(&self, text: &str) -> usize {
        let bytes = if self.shrinks_non_ascii {
            let non_ascii = text.bytes().filter(|b| !b.is_ascii()).count();
            (text.len() - non_ascii) + non_ascii / 3
        } else {
            text.len()
        };
        bytes.div_ceil(self.max_token_bytes)
    }
}

/// `Some(shrinks non-ASCII)` for a normaliser (as tokenizer.json writes it) that never deletes
/// text; `None` for one that can.
fn normaliser(n: &Value) -> Option<bool> {
    match n.get("type")?.as_str()? {
        "NFC" | "NFKC" | "NFD" | "NFKD" | "Lowercase" => Some(true),
        "Prepend" => Some(false),
        "Replace" => {
            let pattern = n.pointer("/pattern/String")?.as_str()?;
            let content = n.get("content")?.as_str()?;
            (content.len() >= pattern.len()).then_some(false)
        }
        "Sequence" => n
            .get("normalizers")?
            .as_array()?
            .iter()
            .map(normaliser)
            .try_fold(false, |acc, s| Some(acc | s?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_bound_never_exceeds_the_real_count() {
        let tok = TokenText::qwen3().unwrap();
        let floor = TokenFloor::of(&tok).unwrap();
        // Qwen3: NFC; its longest token is 128 spaces.
        assert_eq!(floor.max_token_bytes, 128);
        assert!(floor.shrinks_non_ascii);
        let spaces = " ".repeat(128 * 40);
        let jamo = "\u{1100}\u{1161}\u{11a8}".repeat(300);
        for text in [
            spaces.as_str(),
            jamo.as_str(),
            "<|im_start|>user\nhello<|im_end|>\n",
            "",
        ] {
            let real = tok.encode(text).unwrap().len();
            assert!(floor.min_tokens(text) <= real, "{text:?}: {real} tokens");
        }
        assert_eq!(floor.min_tokens(&spaces), 40);
    }

    #[test]
    fn normalisers_that_can_delete_text_give_no_bound() {
        assert_eq!(normaliser(&json!({"type": "NFC"})), Some(true));
        assert_eq!(
            normaliser(&json!({"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "▁"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})),
            Some(false)
        );
        assert_eq!(normaliser(&json!({"type": "StripAccents"})), None);
        assert_eq!(
            normaliser(&json!({"type": "Replace", "pattern": {"String": "ab"}, "content": ""})),
            None
        );
        assert_eq!(
            normaliser(&json!({"type": "Sequence", "normalizers": [
                {"type": "NFC"}, {"type": "Strip", "strip_left": true, "strip_right": true}]})),
            None
        );
    }
}
