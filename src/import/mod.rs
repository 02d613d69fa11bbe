//! `gyre import`: gyre/1 records from the logs real harnesses write (docs/import.md).
//!
//! - [`claude_code`]: a Claude Code session (`~/.claude/projects/<project>/<session>.jsonl`,
//!   its `subagents/` files, compaction and sub-agents), re-tokenised through a chat template;
//! - [`swe_agent`]: a SWE-agent `.traj` trajectory;
//! - [`openhands`]: an OpenHands event stream;
//! - [`vllm`]: logged OpenAI-compatible traffic with the token ids and log-probs vLLM returns:
//!   exact records, not reconstructed.
//!
//! The first three have no token ids in their logs: their records are rebuilt by rendering the
//! conversation through the tokenizer's chat template ([`convo`]), have no log-probs, and are
//! marked `meta.reconstructed: true` (header and every request). By default a later context
//! reuses the recorded output tokens of the earlier responses it contains (payload
//! restoration); `restore: false` re-renders history instead.

pub mod claude_code;
pub mod cli;
pub mod convo;
pub mod demo;
pub mod encode;
pub mod error;
pub mod openhands;
pub mod session;
pub mod swe_agent;
pub mod vllm;
pub mod write;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use color_eyre::eyre::{Result, WrapErr, bail};
use serde_json::Value;

use crate::text::{ChatTemplate, TokenText};

/// Options shared by the importers.
#[derive(Clone, Debug)]
pub struct Options {
    /// Tokenizer: a bundled name (`qwen3`) or a `tokenizer.json` path (its chat template is read
    /// from `tokenizer_config.json` beside it).
    pub tokenizer: String,
    /// Payload restoration (default on).
    pub restore: bool,
    /// Adds a valid assessment of the closure's artifact with this score.
    pub score: Option<f64>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            tokenizer: "qwen3".into(),
            restore: true,
            score: None,
        }
    }
}

/// What an import wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Executions.
    pub executions: u64,
    /// Request records.
    pub requests: u64,
    /// Σ full input lengths.
    pub input_tokens: u64,
    /// Σ output lengths.
    pub output_tokens: u64,
    /// Input tokens actually written (delta encoding writes only the new ones).
    pub written_input_tokens: u64,
    /// Non-fatal remarks (missing sub-agent logs, skipped events…).
    pub warnings: Vec<String>,
}

/// Progress of an import, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Bytes of input read.
    Reading {
        /// Done.
        done: u64,
        /// Total.
        total: u64,
    },
    /// Requests written.
    Requests {
        /// Done.
        done: usize,
        /// Total.
        total: usize,
    },
}

/// The tokenizer and chat template named by `arg`, and the header's `tokenizer` value.
pub fn load_tokenizer(arg: &str) -> Result<(TokenText, ChatTemplate, Value)> {
    if arg == "qwen3" {
        return Ok((
            TokenText::bundled("qwen3")?,
            ChatTemplate::qwen3()?,
            Value::String("qwen3".into()),
        ));
    }
    let path = PathBuf::from(arg);
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    let tok = TokenText::from_file(&path)?;
    let config = path.with_file_name("tokenizer_config.json");
    if !config.exists() {
        bail!(
            "{}: no tokenizer_config.json beside it (its chat template is needed to render \
             conversations)",
            path.display()
        );
    }
    let tmpl = ChatTemplate::from_config_file(&config)?;
    let header = serde_json::json!({ "path": path.to_string_lossy() });
    Ok((tok, tmpl, header))
}

/// Opens a possibly compressed file (gzip and zstd recognised by their magic numbers).
pub fn open_input(path: &Path) -> Result<Box<dyn BufRead + Send>> {
    let file = File::open(path).wrap_err_with(|| format!("reading {}", path.display()))?;
    crate::engine::load::decompress(BufReader::with_capacity(1 << 16, file))
        .wrap_err_with(|| format!("reading {}", path.display()))
}

/// Reads a whole (possibly compressed) file as UTF-8 text.
pub fn read_text(path: &Path) -> Result<String> {
    let mut s = String::new();
    open_input(path)?
        .read_to_string(&mut s)
        .wrap_err_with(|| format!("reading {}", path.display()))?;
    Ok(s)
}

/// Seconds since the Unix epoch of an RFC 3339 / ISO 8601 timestamp
/// (`2026-02-10T21:11:56.906Z`, `2025-01-27T22:44:56.900854`, `…+02:00`); no zone = UTC.
pub fn parse_timestamp(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        frac = format!("0.{}", &r[..n]).parse().ok()?;
        rest = &r[n..];
    }
    let offset = match rest {
        "" | "Z" | "z" => 0,
        r if r.len() == 6 && (r.starts_with('+') || r.starts_with('-')) => {
            let sign = if r.starts_with('-') { -1 } else { 1 };
            let oh: i64 = r[1..3].parse().ok()?;
            let om: i64 = r[4..6].parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset;
    Some(secs as f64 + frac)
}

/// 1-based line numbers where the elements of a top-level JSON array start: the document's
/// root array (`key = None`) or the array under the root object's `key`. A scanner, not a
/// parser: it assumes the text is valid JSON (parse it first) and only tracks strings and depth.
pub fn json_element_lines(text: &str, key: Option<&str>) -> Vec<u64> {
    let b = text.as_bytes();
    let mut lines = Vec::new();
    let mut line = 1u64;
    let mut depth = 0usize;
    let mut i = 0;
    // Depth of the array whose elements we want, once found.
    let mut target: Option<usize> = if key.is_none() { Some(1) } else { None };
    let mut expect_element = false;
    let mut last_key: Option<(usize, usize)> = None;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
        } else if c == b'"' {
            let start = i + 1;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                } else if b[i] == b'\n' {
                    line += 1;
                }
                i += 1;
            }
            if expect_element && Some(depth) == target {
                lines.push(line);
                expect_element = false;
            }
            if depth == 1 && target.is_none() {
                last_key = Some((start, i));
            }
        } else if c == b'[' || c == b'{' {
            if expect_element && Some(depth) == target {
                lines.push(line);
                expect_element = false;
            }
            depth += 1;
            if c == b'[' && target.is_none() && depth == 2 {
                if let (Some((s, e)), Some(k)) = (last_key, key) {
                    if &text[s..e] == k {
                        target = Some(2);
                    }
                }
            }
            if Some(depth) == target && c == b'[' {
                expect_element = true;
            }
        } else if c == b']' || c == b'}' {
            if Some(depth) == target && c == b']' {
                return lines;
            }
            depth = depth.saturating_sub(1);
            expect_element = false;
        } else if c == b',' {
            if Some(depth) == target {
                expect_element = true;
            }
        } else if !c.is_ascii_whitespace() && c != b':' && expect_element && Some(depth) == target {
            lines.push(line);
            expect_element = false;
        }
        i += 1;
    }
    lines
}

/// The line of element `i` (0 when unknown).
pub fn line_of(lines: &[u64], i: usize) -> u64 {
    lines.get(i).copied().unwrap_or(0)
}

/// Parses a JSON document; a syntax error becomes `file:line: malformed JSON`.
pub fn parse_json_document(path: &Path, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| {
        error::bad(
            path,
            e.line() as u64,
            format!("malformed JSON: {}", strip_position(&e.to_string())),
            None,
        )
    })
}

/// serde_json appends " at line L column C"; the line is named already.
pub fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn element_lines() {
        let doc = "{\n \"a\": [1, 2],\n \"history\": [\n  {\"x\": \"[,]\"},\n  {\"y\": [1,\n 2]},\n  3\n ]\n}";
        assert_eq!(json_element_lines(doc, Some("history")), vec![4, 5, 7]);
        assert_eq!(json_element_lines("[\n{},\n{}\n]", None), vec![2, 3]);
        assert_eq!(json_element_lines("[]", None), Vec::<u64>::new());
    }

    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(
            parse_timestamp("2026-02-10T21:11:56.906Z"),
            Some(1_770_757_916.906)
        );
        assert_eq!(
            parse_timestamp("2025-01-27T22:44:56.900854"),
            Some(1_738_017_896.900854)
        );
        assert_eq!(
            parse_timestamp("2025-01-27T23:44:56+01:00"),
            Some(1_738_017_896.0)
        );
        assert_eq!(parse_timestamp("yesterday"), None);
    }
}
