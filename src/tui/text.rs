//! Token ids as display text, and the one place terminal-bound text is made safe.
//!
//! The token pane only needs `id → raw text`; [`TextFn`] is that, so the tokenizer behind it is
//! swapped in one line. Without a tokenizer, ids are shown as `⟨id⟩` (SPEC §7): that is the real
//! behaviour for recordings that name none.

use std::sync::Arc;

/// Turns a token id into its raw (unsanitised) text.
pub type TextFn = Arc<dyn Fn(u32) -> String + Send + Sync>;

/// `⟨id⟩` for every token: the display when no tokenizer is known.
pub fn fallback() -> TextFn {
    Arc::new(|id| format!("⟨{id}⟩"))
}

/// One terminal cell of a token's display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Glyph {
    /// What is drawn (never a control character).
    pub ch: char,
    /// Display width (1 or 2).
    pub width: u8,
    /// A line break follows this glyph (the token held a newline).
    pub brk: bool,
}

/// A safe stand-in for one character, or `None` for characters that draw nothing.
pub fn safe_char(c: char) -> Option<(char, u8)> {
    use unicode_width::UnicodeWidthChar;
    let u = c as u32;
    let ch = match c {
        '\t' => '→',
        '\r' => '␍',
        '\x1b' => '␛',
        '\x7f' => '␡',
        _ if u < 0x20 => char::from_u32(0x2400 + u).unwrap_or('�'),
        // C1 controls, bidi overrides and isolates, and other format characters that can
        // reorder or hide what is drawn.
        '\u{80}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{061c}' => '�',
        _ => c,
    };
    match ch.width() {
        Some(0) | None => None,
        Some(w) => Some((ch, w.min(2) as u8)),
    }
}

/// The glyphs of a token's raw text: newlines become `⏎` followed by a break; control and
/// escape characters become visible symbols; an empty token shows as `∅`.
pub fn glyphs(raw: &str, out: &mut Vec<Glyph>) {
    out.clear();
    for c in raw.chars() {
        if c == '\n' {
            out.push(Glyph {
                ch: '⏎',
                width: 1,
                brk: true,
            });
        } else if let Some((ch, width)) = safe_char(c) {
            out.push(Glyph {
                ch,
                width,
                brk: false,
            });
        }
    }
    if out.is_empty() {
        out.push(Glyph {
            ch: '∅',
            width: 1,
            brk: false,
        });
    }
}

/// Any text bound for the terminal, made safe: newlines shown as `⏎`, controls as symbols.
pub fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '\n' {
            out.push('⏎');
        } else if let Some((ch, _)) = safe_char(c) {
            out.push(ch);
        }
    }
    out
}

/// Like [`sanitize`] but keeps newlines (for multi-line panes).
pub fn sanitize_multiline(s: &str) -> String {
    s.split('\n').map(sanitize).collect::<Vec<_>>().join("\n")
}
