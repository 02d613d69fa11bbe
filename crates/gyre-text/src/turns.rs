//! The turn structure of a ChatML-style chat template (Qwen's `<|im_start|>role\n … <|im_end|>`)
//! read from token ids: which tokens lie inside an assistant turn, for the audit's
//! `trained_not_sampled` evidence when the recording says nothing about them.

use super::TokenText;

/// A tokenizer whose template writes turns as `<|im_start|>role\n content <|im_end|>`.
#[derive(Clone, Debug)]
pub struct ChatMl {
    text: TokenText,
    start: u32,
    end: u32,
}

/// Where a walk over the ids is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before the first `<|im_start|>`: nothing is known.
    Unknown,
    /// Reading the role after `<|im_start|>` (the header is the template's).
    Header,
    /// Inside a turn's content; `true` for the assistant's.
    Content(bool),
    /// After an `<|im_end|>`, before the next `<|im_start|>`: the template's.
    Between,
}

impl ChatMl {
    /// The ChatML turn structure of `text`, when its vocabulary has both `<|im_start|>` and
    /// `<|im_end|>`.
    pub fn new(text: &TokenText) -> Option<ChatMl> {
        Some(ChatMl {
            start: text.token_id("<|im_start|>")?,
            end: text.token_id("<|im_end|>")?,
            text: text.clone(),
        })
    }

    /// Per token of `ids`: `Some(true)` inside an assistant turn (its content and the
    /// `<|im_end|>` the model writes to close it), `Some(false)` inside another role's turn or
    /// the template's scaffolding (`<|im_start|>`, the role line, what lies between turns),
    /// `None` before the first `<|im_start|>` (a sample may start inside a turn).
    pub fn assistant(&self, ids: &[u32]) -> Vec<Option<bool>> {
        let mut out = Vec::with_capacity(ids.len());
        let mut at = At::Unknown;
        let mut role: Vec<u8> = Vec::new();
        for &id in ids {
            if id == self.start {
                at = At::Header;
                role.clear();
                out.push(Some(false));
                continue;
            }
            match at {
                At::Unknown => out.push(None),
                At::Header => {
                    out.push(Some(false));
                    let piece = self.text.piece_bytes(id).unwrap_or_default();
                    match piece.iter().position(|&b| b == b'\n') {
                        Some(i) => {
                            role.extend_from_slice(&piece[..i]);
                            at = At::Content(role.trim_ascii() == b"assistant");
                        }
                        None => role.extend_from_slice(piece),
                    }
                }
                At::Content(assistant) => {
                    out.push(Some(assistant));
                    if id == self.end {
                        at = At::Between;
                    }
                }
                At::Between => out.push(Some(false)),
            }
        }
        out
    }
}
