//! Making arbitrary text safe to write to a terminal.
//!
//! Token text comes from recordings, i.e. from models and tool outputs: it can hold escape
//! sequences that recolour, move the cursor, retitle the window or worse, and invisible
//! characters (bidi overrides, zero-width spaces, tag characters) that make the screen lie about
//! what the tokens say. Everything gyre writes to a terminal goes through [`sanitize`].

use std::borrow::Cow;

/// Returns `s` with every character that a terminal would interpret, or that would be invisible,
/// replaced by a visible glyph. Text without such characters is returned borrowed (no copy).
///
/// Replacements:
/// - ESC → `␛`, `\n` → `⏎`, `\t` → `⇥`, `\r` → `␍`, DEL → `␡`, other C0 controls → their
///   Unicode control picture (`\0` → `␀`, BEL → `␇`, …);
/// - C1 controls (U+0080–U+009F, which some terminals treat like ESC sequences) → `⟨U+009B⟩`;
/// - bidi controls and invisible format characters → a short name: `⟨RLO⟩`, `⟨LRI⟩`, `⟨ZWSP⟩`,
///   `⟨BOM⟩`, `⟨SHY⟩`, `⟨LSEP⟩`…; Unicode tag characters (U+E0000–U+E007F, used to hide text) and
///   other invisible code points → `⟨U+E0041⟩`;
/// - ZERO WIDTH JOINER is kept between two pictographs (it builds emoji such as 👩‍💻) and shown
///   as `⟨ZWJ⟩` anywhere else.
///
/// Callers that want line structure split on `'\n'` first and sanitise each line.
pub fn sanitize(s: &str) -> Cow<'_, str> {
    let Some((first_byte, _)) = s.char_indices().find(|&(i, c)| needs_escape(s, i, c)) else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len() + 16);
    out.push_str(&s[..first_byte]);
    for (i, c) in s[first_byte..].char_indices() {
        let i = i + first_byte;
        if needs_escape(s, i, c) {
            push_visible(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether the character `c` at byte `i` of `s` must be replaced.
fn needs_escape(s: &str, i: usize, c: char) -> bool {
    match c {
        '\u{200D}' => !joins_pictographs(s, i),
        _ => (c as u32) < 0x20 || ('\u{7F}'..='\u{9F}').contains(&c) || name_of(c).is_some(),
    }
}

/// A ZWJ at byte `i` sits between two pictographic characters (an emoji sequence, possibly
/// with a variation selector or skin-tone modifier before the joiner).
fn joins_pictographs(s: &str, i: usize) -> bool {
    let before = s[..i]
        .chars()
        .rev()
        .find(|c| !matches!(c, '\u{FE0F}' | '\u{1F3FB}'..='\u{1F3FF}'));
    let after = s[i + '\u{200D}'.len_utf8()..].chars().next();
    before.is_some_and(is_pictograph) && after.is_some_and(is_pictograph)
}

fn is_pictograph(c: char) -> bool {
    matches!(c, '\u{2600}'..='\u{27BF}' | '\u{2B00}'..='\u{2BFF}' | '\u{1F000}'..='\u{1FAFF}')
}

/// Short names for invisible characters; `Some("")` means "show as the code point, `⟨U+E0041⟩`".
fn name_of(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{00AD}' => "SHY",
        '\u{061C}' => "ALM",
        '\u{180E}' => "MVS",
        '\u{200B}' => "ZWSP",
        '\u{200C}' => "ZWNJ",
        '\u{200D}' => "ZWJ",
        '\u{200E}' => "LRM",
        '\u{200F}' => "RLM",
        '\u{2028}' => "LSEP",
        '\u{2029}' => "PSEP",
        '\u{202A}' => "LRE",
        '\u{202B}' => "RLE",
        '\u{202C}' => "PDF",
        '\u{202D}' => "LRO",
        '\u{202E}' => "RLO",
        '\u{2060}' => "WJ",
        '\u{2066}' => "LRI",
        '\u{2067}' => "RLI",
        '\u{2068}' => "FSI",
        '\u{2069}' => "PDI",
        '\u{FEFF}' => "BOM",
        '\u{2061}'..='\u{2064}' | '\u{206A}'..='\u{206F}' | '\u{FFF9}'..='\u{FFFB}' => "",
        '\u{E0000}'..='\u{E007F}' => "",
        _ => return None,
    })
}

/// `s` as one shell word (bash, zsh, POSIX sh 2024): as it is when it holds only safe
/// characters, else single-quoted, and `$'…'` with `\xHH`/`\uHHHH` escapes when it holds a
/// control character, which a quoted word would carry raw to the terminal and which
/// [`sanitize`] would turn into a picture the shell no longer reads as the id.
pub fn shell_word(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./:,=+@%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        return s.to_string();
    }
    if !s.chars().any(char::is_control) {
        return format!("'{}'", s.replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for c in s.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '\'' => out.push_str(r"\'"),
            c if c.is_control() && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Writes `value` as pretty-printed JSON that is safe on a terminal without changing any value:
/// characters [`sanitize`] would replace are written as `\u` escapes (serde_json escapes only
/// C0 controls, leaving DEL, C1 controls and invisible characters raw).
pub fn write_json_pretty<W: std::io::Write, T: serde::Serialize + ?Sized>(
    writer: W,
    value: &T,
) -> serde_json::Result<()> {
    let formatter = TerminalSafe(serde_json::ser::PrettyFormatter::new());
    value.serialize(&mut serde_json::Serializer::with_formatter(
        writer, formatter,
    ))
}

/// Writes `value` as compact JSON (one line), terminal-safe like [`write_json_pretty`]: records
/// and exported rows go through it, so `--out -` on a terminal shows ids as `\u` escapes and
/// the values read back unchanged.
pub fn write_json_compact<W: std::io::Write, T: serde::Serialize + ?Sized>(
    writer: W,
    value: &T,
) -> serde_json::Result<()> {
    let formatter = TerminalSafe(serde_json::ser::CompactFormatter);
    value.serialize(&mut serde_json::Serializer::with_formatter(
        writer, formatter,
    ))
}

/// A JSON formatter that escapes in strings what a terminal would interpret or hide.
struct TerminalSafe<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for TerminalSafe<F> {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if needs_escape(fragment, i, c) {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{u:04x}")?;
                }
                start = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

fn push_visible(out: &mut String, c: char) {
    match c {
        '\u{1B}' => out.push('␛'),
        '\n' => out.push('⏎'),
        '\t' => out.push('⇥'),
        '\r' => out.push('␍'),
        '\u{7F}' => out.push('␡'),
        // U+2400..U+241F are the control pictures for U+0000..U+001F, in order.
        c if (c as u32) < 0x20 => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('�')),
        c => match name_of(c) {
            Some(name) if !name.is_empty() => {
                out.push('⟨');
                out.push_str(name);
                out.push('⟩');
            }
            _ => {
                use std::fmt::Write;
                let _ = write!(out, "⟨U+{:04X}⟩", c as u32);
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_word_reads_back_as_the_id_with_no_raw_control_character() {
        for id in [
            "e7",
            "my run",
            "it's",
            "\u{1b}]0;pwned\u{7}\u{1b}[31mX",
            "a\\b'c\nd\u{85}",
        ] {
            let word = shell_word(id);
            assert!(!word.chars().any(char::is_control), "{word:?}");
            let out = std::process::Command::new("bash")
                .args(["-c", &format!("printf %s {word}")])
                .output()
                .expect("bash runs");
            assert_eq!(String::from_utf8(out.stdout).unwrap(), id, "{word}");
        }
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("\u{1b}[2J"), r"$'\x1b[2J'");
    }

    #[test]
    fn plain_text_is_borrowed() {
        let s = "fn main() { println!(\"héllo 你好 👩‍💻\"); }";
        assert!(matches!(sanitize(s), Cow::Borrowed(_)));
    }

    #[test]
    fn controls_become_glyphs() {
        assert_eq!(sanitize("a\nb\tc\rd"), "a⏎b⇥c␍d");
        assert_eq!(sanitize("\u{1b}[31mred\u{1b}[0m"), "␛[31mred␛[0m");
        assert_eq!(sanitize("\0\u{7}\u{7f}"), "␀␇␡");
        assert_eq!(sanitize("x\u{9b}31m"), "x⟨U+009B⟩31m");
        assert_eq!(sanitize("\u{1b}]0;title\u{7}"), "␛]0;title␇");
    }

    #[test]
    fn nothing_raw_survives() {
        let all: String = (0u32..0x110000).filter_map(char::from_u32).collect();
        let out = sanitize(&all);
        for c in out.chars() {
            assert!(
                !(c as u32 <= 0x1f || (0x7f..=0x9f).contains(&(c as u32))),
                "raw control {c:?} survived"
            );
            assert!(
                !('\u{202A}'..='\u{202E}').contains(&c),
                "bidi {c:?} survived"
            );
            assert!(
                !('\u{E0000}'..='\u{E007F}').contains(&c),
                "tag {c:?} survived"
            );
        }
    }

    #[test]
    fn invisible_characters_are_named() {
        assert_eq!(sanitize("abc\u{202E}fed"), "abc⟨RLO⟩fed");
        assert_eq!(sanitize("a\u{200B}b\u{FEFF}"), "a⟨ZWSP⟩b⟨BOM⟩");
        assert_eq!(sanitize("\u{2066}x\u{2069}"), "⟨LRI⟩x⟨PDI⟩");
        assert_eq!(sanitize("hi\u{E0041}"), "hi⟨U+E0041⟩");
    }

    #[test]
    fn json_is_terminal_safe_and_keeps_every_value() {
        let value = serde_json::json!({
            "id": "e\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202E}x\u{E0041}\u{7f}",
            "plain": "héllo 👩‍💻",
        });
        let mut out = Vec::new();
        write_json_pretty(&mut out, &value).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().all(|l| sanitize(l) == l), "{text}");
        assert!(
            text.contains("\\u009b") && text.contains("\\udb40\\udc41"),
            "{text}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
        let mut line = Vec::new();
        write_json_compact(&mut line, &value).unwrap();
        let line = String::from_utf8(line).unwrap();
        assert!(!line.contains('\n') && sanitize(&line) == line, "{line}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&line).unwrap(),
            value
        );
        // Text without such characters is written as serde_json writes it.
        let plain = serde_json::json!({"a": [1, 2.5, -0.0, "héllo 👩‍💻", null, true]});
        let mut ours = Vec::new();
        write_json_compact(&mut ours, &plain).unwrap();
        assert_eq!(ours, serde_json::to_vec(&plain).unwrap());
    }

    #[test]
    fn zwj_kept_only_inside_emoji_sequences() {
        assert_eq!(sanitize("👩‍💻"), "👩‍💻");
        assert_eq!(sanitize("👍🏽\u{200D}🔥"), "👍🏽\u{200D}🔥");
        assert_eq!(sanitize("a\u{200D}b"), "a⟨ZWJ⟩b");
        assert_eq!(sanitize("\u{200D}"), "⟨ZWJ⟩");
    }
}
