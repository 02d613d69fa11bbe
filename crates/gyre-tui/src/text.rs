//! Token text for the screen: display pieces from [`gyre_text::TokenText`] (which handles
//! byte-level BPE characters split over tokens, unknown ids and the `⟨id⟩` fallback), made
//! safe by the one [`gyre_text::sanitize`], and cut into terminal cells.

use unicode_width::UnicodeWidthChar;

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

/// The glyphs of a token's display text: each newline becomes `⏎` followed by a break, the rest
/// goes through [`gyre_text::sanitize`]; an empty piece (a token whose bytes are shown by the
/// token before it) shows as a dim `·` so the cursor can still land on it.
pub fn glyphs(raw: &str, out: &mut Vec<Glyph>) {
    out.clear();
    for (k, part) in raw.split('\n').enumerate() {
        if k > 0 {
            out.push(Glyph {
                ch: '⏎',
                width: 1,
                brk: true,
            });
        }
        for ch in gyre_text::sanitize(part).chars() {
            if let Some(w) = ch.width().filter(|&w| w > 0) {
                out.push(Glyph {
                    ch,
                    width: w.min(2) as u8,
                    brk: false,
                });
            }
        }
    }
    if out.is_empty() {
        out.push(Glyph {
            ch: '·',
            width: 1,
            brk: false,
        });
    }
}
