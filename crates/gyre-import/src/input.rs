//! Reading harness logs: plain, gzip or zstd files (recognised by their magic numbers), as lines
//! or as one JSON document. Nothing here panics or fails with a bare I/O error on bad bytes:
//! invalid UTF-8, a cut or corrupt compressed stream and over-long lines are diagnostics at
//! `file:line`.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::{bad, diag};
use super::{Job, Progress};
use gyre_format::input::Diagnostic;

/// The longest line (or JSON document) read by default, in bytes: far above any real log line
/// (a Claude Code line holding a pasted image is a few MB), far below what would exhaust memory.
pub const MAX_LINE_BYTES: usize = 256 << 20;

/// The longest line (or JSON document) read: `GYRE_MAX_LINE_MB` when it holds a positive whole
/// number of MiB (as for recordings), else [`MAX_LINE_BYTES`].
pub fn max_line_bytes() -> usize {
    let set = std::env::var(gyre_format::input::MAX_LINE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&mb| mb > 0);
    set.map_or(MAX_LINE_BYTES, |mb| mb.saturating_mul(1 << 20))
}

/// Counts on-disk bytes read, for progress bars (shared with the reader).
#[derive(Clone, Debug, Default)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    /// Bytes read so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

struct Counted<R> {
    inner: R,
    count: Counter,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.0.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Opens a possibly compressed file; `count` follows the on-disk bytes read.
pub fn open(path: &Path, count: &Counter) -> eyre::Result<Box<dyn BufRead + Send>> {
    let file = File::open(path).map_err(|e| bad(path, 0, io_reason(&e), None))?;
    let counted = Counted {
        inner: file,
        count: count.clone(),
    };
    gyre_format::input::decompress(BufReader::with_capacity(1 << 16, counted))
        .map_err(|e| bad(path, 0, format!("cannot read: {}", io_reason(&e)), None))
}

pub use gyre_format::input::io_reason;

/// The lines of a (possibly compressed) text file, 1-based, without line terminators; a UTF-8
/// byte-order mark at the start is dropped.
pub struct Lines<'p> {
    path: &'p Path,
    reader: Box<dyn BufRead + Send>,
    buf: Vec<u8>,
    line: u64,
    done: bool,
}

impl<'p> Lines<'p> {
    /// Opens `path` for reading line by line.
    pub fn open(path: &'p Path, count: &Counter) -> eyre::Result<Self> {
        Ok(Self {
            path,
            reader: open(path, count)?,
            buf: Vec::with_capacity(1 << 16),
            line: 0,
            done: false,
        })
    }

    /// The next line as `(line number, text)`. A line that cannot be read (invalid UTF-8, too
    /// long) is a diagnostic and reading goes on; a broken compressed stream ends the file with
    /// a diagnostic.
    pub fn next_line(&mut self) -> Option<Result<(u64, &str), Diagnostic>> {
        if self.done {
            return None;
        }
        self.buf.clear();
        let max = max_line_bytes();
        let limit = max as u64 + 1;
        let got = match (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
        {
            Ok(n) => n,
            Err(e) => {
                self.done = true;
                return Some(Err(diag(
                    self.path,
                    self.line + 1,
                    format!("cannot read on: {}", io_reason(&e)),
                    None,
                )));
            }
        };
        if got == 0 {
            self.done = true;
            return None;
        }
        self.line += 1;
        if self.buf.len() > max {
            self.done = true;
            return Some(Err(diag(
                self.path,
                self.line,
                format!(
                    "line longer than {} MiB; not a log line (reading stops here; set {} to a \
                     larger number of MiB to raise the limit)",
                    max >> 20,
                    gyre_format::input::MAX_LINE_ENV
                ),
                None,
            )));
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        let mut bytes = &self.buf[..];
        if self.line == 1 {
            bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        }
        match std::str::from_utf8(bytes) {
            Ok(s) => Some(Ok((self.line, s))),
            Err(e) => Some(Err(diag(
                self.path,
                self.line,
                format!("invalid UTF-8 at byte {} of the line", e.valid_up_to() + 1),
                None,
            ))),
        }
    }
}

/// Reads a whole (possibly compressed) file as UTF-8 text (a leading byte-order mark dropped).
pub fn read_document(path: &Path, count: &Counter) -> eyre::Result<String> {
    let mut bytes = Vec::new();
    let max = max_line_bytes();
    let mut reader = open(path, count)?.take(max as u64 + 1);
    if let Err(e) = reader.read_to_end(&mut bytes) {
        let line = 1 + memchr::memchr_iter(b'\n', &bytes).count() as u64;
        return Err(bad(
            path,
            line,
            format!("cannot read on: {}", io_reason(&e)),
            None,
        ));
    }
    if bytes.len() > max {
        return Err(bad(
            path,
            0,
            format!(
                "larger than {} MiB; not a log document (set {} to a larger number of MiB to \
                 raise the limit)",
                max >> 20,
                gyre_format::input::MAX_LINE_ENV
            ),
            None,
        ));
    }
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = 1 + memchr::memchr_iter(b'\n', &bytes[..at]).count() as u64;
        let col = at
            - bytes[..at]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
        bad(
            path,
            line,
            format!("invalid UTF-8 at byte {} of the line", col + 1),
            None,
        )
    })
}

/// The JSON values on one line: usually one object, but a writer that lost a newline leaves two
/// (`…}{…}`), and both are read. Whitespace between values is allowed; anything else is an error
/// (reported after the values read before it).
pub fn line_values(text: &str) -> (Vec<Value>, Option<String>) {
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    for v in stream.by_ref() {
        match v {
            Ok(v) => values.push(v),
            Err(e) => return (values, Some(json_reason(&e, text))),
        }
    }
    (values, None)
}

/// A serde_json syntax error in words, without serde_json's " at line L column C" (the line is
/// named already); a JSON array or a bare key says what the text is instead.
pub fn json_reason(e: &serde_json::Error, text: &str) -> String {
    let msg = e.to_string();
    let msg = match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg,
    };
    let trimmed = text.trim_start();
    if e.line() <= 1 && trimmed.starts_with("{") && !trimmed.starts_with("{\"") {
        let after = trimmed[1..].trim_start();
        if !after.starts_with('}') && !after.starts_with('"') {
            return "malformed JSON: an object key must be a quoted string".into();
        }
    }
    format!("malformed JSON: {msg} (column {})", e.column())
}

/// Reads the JSON Lines file `path` value by value: a line that cannot be read or is not JSON is
/// a problem at its line and reading goes on; blank lines are skipped; progress is reported every
/// 16 lines as bytes of `total` are read. `each` gets the job, the line number and each value
/// (a line may hold several, `{…}{…}`).
pub fn json_values(
    path: &Path,
    counter: &Counter,
    total: u64,
    job: &mut Job,
    each: &mut dyn FnMut(&mut Job, u64, Value) -> eyre::Result<()>,
) -> eyre::Result<()> {
    let mut lines = Lines::open(path, counter)?;
    while let Some(line) = lines.next_line() {
        let (n, text) = match line {
            Ok(l) => l,
            Err(d) => {
                job.log.problem(d);
                continue;
            }
        };
        if n % 16 == 0 {
            (job.progress)(Progress::Reading {
                done: counter.get(),
                total,
            });
        }
        if text.trim().is_empty() {
            continue;
        }
        let (values, err) = line_values(text);
        if let Some(e) = err {
            job.log.problem(diag(path, n, e, None));
            continue;
        }
        for v in values {
            each(job, n, v)?;
        }
    }
    Ok(())
}

/// [`json_values`], each value read as `T`: a value of the wrong shape is a problem at its line,
/// with the field path.
pub fn typed_values<T: DeserializeOwned>(
    path: &Path,
    counter: &Counter,
    total: u64,
    job: &mut Job,
    each: &mut dyn FnMut(&mut Job, u64, T) -> eyre::Result<()>,
) -> eyre::Result<()> {
    json_values(
        path,
        counter,
        total,
        job,
        &mut |job, n, v| match typed(&v) {
            Ok(t) => each(job, n, t),
            Err((msg, field)) => {
                job.log.problem(diag(path, n, msg, Some(&field)));
                Ok(())
            }
        },
    )
}

/// Deserialises `value` into `T`; on failure the message and the JSON path of the field at fault
/// (a missing field is named in the path: `message.id`).
pub fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = plain_words(&e.into_inner().to_string());
        let path = match missing_field(&inner) {
            Some(f) if path == "." => f.to_owned(),
            Some(f) => format!("{path}.{f}"),
            None => path,
        };
        (inner, path)
    })
}

/// serde's wording without the names of gyre's own types (`expected struct Entry`).
fn plain_words(msg: &str) -> String {
    if msg.starts_with("data did not match any variant of untagged enum") {
        return "a value of an unexpected type".into();
    }
    for (internal, plain) in [
        ("expected struct ", "expected a JSON object"),
        (
            "expected internally tagged enum ",
            "expected a JSON object with a `type`",
        ),
    ] {
        if let Some(i) = msg.find(internal) {
            let rest = &msg[i + internal.len()..];
            let name_end = rest
                .find(|c: char| !c.is_alphanumeric() && c != '_')
                .unwrap_or(rest.len());
            return format!("{}{plain}{}", &msg[..i], &rest[name_end..]);
        }
    }
    msg.to_owned()
}

fn missing_field(msg: &str) -> Option<&str> {
    msg.strip_prefix("missing field `")?.strip_suffix('`')
}

/// Prefixes a JSON path with `prefix` (`message` + `content[0]` → `message.content[0]`).
pub fn sub_path(prefix: &str, path: &str) -> String {
    match path {
        "" | "." => prefix.to_owned(),
        p if p.starts_with('[') => format!("{prefix}{p}"),
        p => format!("{prefix}.{p}"),
    }
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
                last_key = Some((start, i.min(b.len())));
            }
        } else if c == b'[' || c == b'{' {
            if expect_element && Some(depth) == target {
                lines.push(line);
                expect_element = false;
            }
            depth += 1;
            if c == b'[' && target.is_none() && depth == 2 {
                if let (Some((s, e)), Some(k)) = (last_key, key) {
                    if text.get(s..e) == Some(k) {
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

/// Parses a JSON document; a syntax error is `file:line: malformed JSON`.
pub fn parse_document(path: &Path, text: &str) -> eyre::Result<Value> {
    serde_json::from_str(text).map_err(|e| bad(path, e.line() as u64, json_reason(&e, ""), None))
}

/// The file name, for `source_line` metadata (`session.jsonl:12`).
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn element_lines() {
        let doc = "{\n \"a\": [1, 2],\n \"history\": [\n  {\"x\": \"[,]\"},\n  {\"y\": [1,\n 2]},\n  3\n ]\n}";
        assert_eq!(json_element_lines(doc, Some("history")), vec![4, 5, 7]);
        assert_eq!(json_element_lines("[\n{},\n{}\n]", None), vec![2, 3]);
        assert_eq!(json_element_lines("[]", None), Vec::<u64>::new());
    }

    #[test]
    fn two_objects_on_a_line_are_both_read() {
        let (v, err) = line_values(r#"{"a":1}{"type":"summary","summary":"x"}"#);
        assert_eq!(v.len(), 2);
        assert!(err.is_none());
        assert_eq!(v[1]["type"], "summary");
        let (v, err) = line_values(r#"{"a":1} junk"#);
        assert_eq!(v.len(), 1);
        assert!(err.unwrap().starts_with("malformed JSON"));
        let (_, err) = line_values("{kind");
        assert_eq!(
            err.unwrap(),
            "malformed JSON: an object key must be a quoted string"
        );
    }

    #[test]
    fn typed_errors_name_the_field() {
        #[derive(serde::Deserialize, Debug)]
        struct M {
            #[allow(dead_code)]
            id: String,
        }
        #[derive(serde::Deserialize, Debug)]
        struct L {
            #[allow(dead_code)]
            message: M,
        }
        let (_, path) = typed::<L>(&serde_json::json!({"message": {}})).unwrap_err();
        assert_eq!(path, "message.id");
        let (msg, path) = typed::<L>(&serde_json::json!({"message": {"id": 3}})).unwrap_err();
        assert_eq!(path, "message.id");
        assert!(msg.contains("expected a string"), "{msg}");
        assert_eq!(
            sub_path("message", "content[0].id"),
            "message.content[0].id"
        );
        assert_eq!(sub_path("history", "[2].role"), "history[2].role");
    }

    #[test]
    fn bad_bytes_are_diagnostics() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, b"\xEF\xBB\xBF{}\n{\"a\":\"\xff\"}\n{}\n").unwrap();
        let mut lines = Lines::open(&p, &Counter::default()).unwrap();
        assert_eq!(lines.next_line().unwrap().unwrap(), (1, "{}"));
        let e = lines.next_line().unwrap().unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}:2: invalid UTF-8 at byte 7 of the line", p.display())
        );
        assert_eq!(lines.next_line().unwrap().unwrap(), (3, "{}"));
        assert!(lines.next_line().is_none());
        // A gzip stream cut short: the line being read is named.
        let gz = dir.path().join("x.jsonl.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        for i in 0..2000 {
            writeln!(
                enc,
                "{{\"line\": {i}, \"pad\": \"{}\"}}",
                "x".repeat(i % 97)
            )
            .unwrap();
        }
        let full = enc.finish().unwrap();
        std::fs::write(&gz, &full[..full.len() / 2]).unwrap();
        let mut lines = Lines::open(&gz, &Counter::default()).unwrap();
        let mut last = Ok((0, ""));
        let mut n = 0;
        while let Some(l) = lines.next_line() {
            n += 1;
            last = l.map(|(i, _)| (i, ""));
        }
        let e = last.unwrap_err();
        assert!(e.line > 1 && e.line as usize == n, "{e}");
        assert!(
            e.message.contains("cut short") || e.message.contains("cannot read"),
            "{e}"
        );
        assert!(read_document(&gz, &Counter::default()).is_err());
    }
}
