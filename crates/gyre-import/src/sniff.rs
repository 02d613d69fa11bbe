//! What an input looks like, from its first bytes: every importer checks it before any work, so
//! the wrong importer on a file refuses with what the file is ("a gyre/1 recording", "a
//! SWE-agent trajectory: try `gyre import swe-agent`") instead of importing nothing.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::input::{Counter, open};

/// Bytes of (decompressed) input looked at.
const HEAD_BYTES: u64 = 256 << 10;
/// Bytes looked at when a JSON document's root does not close within [`HEAD_BYTES`] (a long
/// first value, such as a trajectory's `info.submission`, would hide every later key).
const DOC_HEAD_BYTES: u64 = 32 << 20;

/// How the start of an input fits a format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// It is this format.
    Yes,
    /// It is not.
    No,
    /// The start does not tell (the reader decides).
    Unknown,
}

/// The start of an input, as seen before reading it.
#[derive(Debug)]
pub struct Probe {
    /// What was seen.
    pub shape: Shape,
    /// The input looked at.
    path: Option<PathBuf>,
}

/// The shapes an input can have.
#[derive(Debug)]
pub enum Shape {
    /// A directory; `events` when it holds OpenHands event files (`<id>.json`), directly or in
    /// an `events/` folder.
    Directory {
        /// The folder holding the event files, when there is one.
        events: Option<PathBuf>,
    },
    /// No bytes.
    Empty,
    /// Bytes that are not UTF-8 text.
    Binary,
    /// JSON Lines: the values on the first non-empty line.
    Jsonl(Vec<Value>),
    /// One JSON document (pretty-printed or too long for one line): its root, partly.
    Document(DocHead),
    /// Text that is not JSON; its first characters.
    Text(String),
    /// A zip archive (an Inspect AI `.eval` log): the names of its entries, the first few.
    Zip(Vec<String>),
    /// The input could not be opened or read.
    Unreadable(String),
}

/// The start of a JSON document: the keys of its root object (or of the first element of its
/// root array) seen in the first bytes.
#[derive(Debug, Default)]
pub struct DocHead {
    /// The root is an array.
    pub array: bool,
    /// Keys of the root object (for an array: of its first element).
    pub keys: Vec<String>,
    /// For a root object: the keys of the first element of each of its arrays, by array key.
    pub element_keys: Vec<(String, Vec<String>)>,
    /// The root closed within the bytes looked at: `keys` are all of them.
    pub complete: bool,
}

impl DocHead {
    /// Whether the root (or first element) has `key`.
    ///
    /// A head that is not [`complete`](Self::complete) may lack keys that come later.
    pub fn has(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k == key)
    }

    /// Keys of the first element of the root object's array `key`.
    pub fn element(&self, key: &str) -> Option<&[String]> {
        self.element_keys
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }
}

/// Whether a directory holds OpenHands event files: `<id>.json` names.
fn events_dir(dir: &Path) -> Option<PathBuf> {
    let holds_events = |d: &Path| {
        std::fs::read_dir(d).ok().is_some_and(|rd| {
            rd.filter_map(|e| e.ok()).any(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.strip_suffix(".json").is_some_and(|stem| {
                    !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit())
                })
            })
        })
    };
    if holds_events(dir) {
        return Some(dir.to_path_buf());
    }
    let sub = dir.join("events");
    holds_events(&sub).then_some(sub)
}

impl Probe {
    /// The input looked at, when it is a path.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Looks at the start of `path`.
    pub fn of(path: &Path) -> Self {
        let shape = if path.is_dir() {
            Shape::Directory {
                events: events_dir(path),
            }
        } else {
            head_shape(path)
        };
        Probe {
            shape,
            path: Some(path.to_path_buf()),
        }
    }

    /// The first JSONL object, when the input is JSON Lines.
    pub fn first_object(&self) -> Option<&serde_json::Map<String, Value>> {
        match &self.shape {
            Shape::Jsonl(values) => values.first().and_then(Value::as_object),
            _ => None,
        }
    }

    /// Keys of the root object (of a JSON Lines input: of its first object).
    pub fn object_keys(&self) -> Option<Vec<&str>> {
        match &self.shape {
            Shape::Jsonl(values) => values
                .first()?
                .as_object()
                .map(|o| o.keys().map(String::as_str).collect()),
            Shape::Document(head) if !head.array => {
                Some(head.keys.iter().map(String::as_str).collect())
            }
            _ => None,
        }
    }

    /// Keys of the first element of the root array (`key = None`) or of the root object's array
    /// `key`, when seen.
    pub fn element_keys(&self, key: Option<&str>) -> Option<Vec<&str>> {
        match (&self.shape, key) {
            (Shape::Jsonl(values), Some(k)) => values
                .first()?
                .get(k)?
                .as_array()?
                .first()?
                .as_object()
                .map(|o| o.keys().map(String::as_str).collect()),
            (Shape::Document(head), None) if head.array => {
                Some(head.keys.iter().map(String::as_str).collect())
            }
            (Shape::Document(head), Some(k)) if !head.array => head
                .element(k)
                .map(|keys| keys.iter().map(String::as_str).collect()),
            _ => None,
        }
    }

    /// What the input looks like, in words, for a refusal; `matches` names the importers whose
    /// format it is.
    pub fn describe(&self, matches: &[&str]) -> String {
        let generic = match &self.shape {
            Shape::Directory { events: None }
                if self.path.as_deref().and_then(v1_events_dir).is_some() =>
            {
                "an OpenHands V1 (agent-sdk) conversation folder (`event-<n>-<id>.json` files)"
                    .to_owned()
            }
            Shape::Directory { events: None } => {
                "a folder that is not an OpenHands session (no `<id>.json` event files in it or \
                 in an `events/` folder inside it)"
                    .to_owned()
            }
            Shape::Directory { events: Some(_) } => "an OpenHands session folder".to_owned(),
            Shape::Empty => "an empty file".to_owned(),
            Shape::Binary => "not text (not UTF-8)".to_owned(),
            Shape::Unreadable(why) => format!("unreadable ({why})"),
            Shape::Text(start) => format!("not JSON (it starts with {start:?})"),
            Shape::Zip(names) => format!(
                "a zip archive holding {}",
                key_list(names.iter().map(String::as_str))
            ),
            Shape::Jsonl(values) => match values.first() {
                Some(Value::Object(o)) if is_v1_event(o) => format!(
                    "OpenHands V1 (agent-sdk) events (`kind`: `{}`)",
                    gyre_text::sanitize(o.get("kind").and_then(Value::as_str).unwrap_or(""))
                ),
                Some(Value::Object(o)) if is_gyre_record(o) => {
                    "a gyre/1 recording (lines with `kind`): it needs no import; read it with \
                     `gyre stats` or `gyre inspect`"
                        .to_owned()
                }
                Some(Value::Object(o)) => format!(
                    "JSON Lines whose first object has the keys {}",
                    key_list(o.keys().map(String::as_str))
                ),
                Some(other) => format!("JSON Lines whose first value is {}", kind_of(other)),
                None => "JSON Lines".to_owned(),
            },
            Shape::Document(head) if head.array => format!(
                "a JSON array{}",
                if head.keys.is_empty() {
                    String::new()
                } else {
                    format!(
                        " whose first element has the keys {}",
                        key_list(head.keys.iter().map(String::as_str))
                    )
                }
            ),
            Shape::Document(head) => format!(
                "a JSON object with the keys {}",
                key_list(head.keys.iter().map(String::as_str))
            ),
        };
        match matches {
            [] => generic,
            names => format!(
                "{generic}; it looks like {}",
                names
                    .iter()
                    .map(|n| format!("`gyre import {n}` input"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        }
    }
}

/// Whether a JSON object is an OpenHands V1 (agent-sdk) event: a `kind` naming an event class
/// (`ActionEvent`, `ObservationEvent`, `SystemPromptEvent`, …).
pub fn is_v1_event(o: &serde_json::Map<String, Value>) -> bool {
    o.get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("Event"))
}

/// The folder of OpenHands V1 event files (`event-00000-<uuid>.json`, or a download's
/// `event_000000_<uuid>.json`): `dir` itself or an `events/` folder inside it.
pub fn v1_events_dir(dir: &Path) -> Option<PathBuf> {
    let holds = |d: &Path| {
        std::fs::read_dir(d).ok().is_some_and(|rd| {
            rd.filter_map(|e| e.ok())
                .any(|e| v1_event_index(&e.file_name().to_string_lossy()).is_some())
        })
    };
    if holds(dir) {
        return Some(dir.to_path_buf());
    }
    let sub = dir.join("events");
    holds(&sub).then_some(sub)
}

/// The index of a V1 event file (`event-00042-<uuid>.json` → 42), `None` for another name.
pub fn v1_event_index(name: &str) -> Option<u64> {
    let rest = name
        .strip_suffix(".json")?
        .strip_prefix("event")?
        .strip_prefix(['-', '_'])?;
    let digits = rest.split(['-', '_']).next()?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Whether a JSON Lines object is a gyre/1 record: its `kind` is one of gyre/1's (OpenHands V1
/// events have a `kind` too: `ActionEvent`, …).
pub fn is_gyre_record(o: &serde_json::Map<String, Value>) -> bool {
    matches!(
        o.get("kind").and_then(Value::as_str),
        Some("header" | "execution" | "request" | "assessment" | "closure")
    )
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `a, b, c` (at most 8, then `…`), each sanitised and quoted with backticks.
fn key_list<'a>(keys: impl Iterator<Item = &'a str>) -> String {
    let keys: Vec<&str> = keys.collect();
    let mut s: Vec<String> = keys
        .iter()
        .take(8)
        .map(|k| format!("`{}`", gyre_text::sanitize(k)))
        .collect();
    if keys.len() > 8 {
        s.push("…".into());
    }
    if s.is_empty() {
        "(none)".into()
    } else {
        s.join(", ")
    }
}

fn head_shape(path: &Path) -> Shape {
    let mut head = Vec::new();
    let read = open(path, &Counter::default())
        .map_err(|e| e.to_string())
        .and_then(|r| {
            r.take(HEAD_BYTES)
                .read_to_end(&mut head)
                .map_err(|e| super::input::io_reason(&e))
        });
    if let Err(why) = read {
        if head.is_empty() {
            return Shape::Unreadable(why);
        }
    }
    if head.starts_with(b"PK\x03\x04") {
        return zip_shape(path);
    }
    let bytes = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head);
    // What comes before the first invalid byte (a multibyte character cut at the end of the
    // head, or a bad byte further on, which the reader reports at its line).
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) if e.valid_up_to() == 0 => return Shape::Binary,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    };
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Shape::Empty;
    }
    let first_line = trimmed.lines().next().unwrap_or("");
    let (values, err) = super::input::line_values(first_line);
    if err.is_none() && !values.is_empty() && !matches!(values[0], Value::Array(_)) {
        return Shape::Jsonl(values);
    }
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let doc = scan_head(trimmed);
        if doc.complete || doc.array || (head.len() as u64) < HEAD_BYTES {
            return Shape::Document(doc);
        }
        return Shape::Document(longer_head(path).unwrap_or(doc));
    }
    Shape::Text(trimmed.chars().take(24).collect())
}

/// [`scan_head`] over the first [`DOC_HEAD_BYTES`] of `path`.
fn longer_head(path: &Path) -> Option<DocHead> {
    let mut head = Vec::new();
    open(path, &Counter::default())
        .ok()?
        .take(DOC_HEAD_BYTES)
        .read_to_end(&mut head)
        .ok()?;
    let bytes = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&head);
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok()?,
    };
    Some(scan_head(text.trim_start()))
}

/// The entries of a zip archive (the first 64 names), or why it cannot be read.
fn zip_shape(path: &Path) -> Shape {
    let archive = std::fs::File::open(path)
        .map_err(|e| super::input::io_reason(&e))
        .and_then(|f| zip::ZipArchive::new(f).map_err(|e| e.to_string()));
    match archive {
        Ok(a) => Shape::Zip(a.file_names().take(64).map(str::to_owned).collect()),
        Err(why) => Shape::Unreadable(format!("a zip archive that cannot be read: {why}")),
    }
}

/// The keys of a JSON document's root (or of its first array element) and of the first element
/// of each array in the root object, from a prefix of the text (tolerates the cut).
fn scan_head(text: &str) -> DocHead {
    let b = text.as_bytes();
    let mut head = DocHead {
        array: b.first() == Some(&b'['),
        ..DocHead::default()
    };
    // The depth at which keys are the root's (or first element's).
    let key_depth = if head.array { 2 } else { 1 };
    let mut depth = 0usize;
    let mut i = 0;
    let mut elements_seen_at_root = 0usize;
    let mut last_key: Option<String> = None;
    // The root array whose first element's keys are being collected, and their depth.
    let mut inner: Option<(String, usize)> = None;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                let is_key = b
                    .get(i + 1..)
                    .and_then(|rest| rest.iter().find(|c| !c.is_ascii_whitespace()))
                    == Some(&b':');
                if is_key {
                    let s = text.get(start..i).unwrap_or("").to_owned();
                    if depth == key_depth && (!head.array || elements_seen_at_root == 1) {
                        head.keys.push(s.clone());
                    }
                    if let Some((k, d)) = &inner {
                        if depth == *d {
                            if let Some((_, keys)) =
                                head.element_keys.iter_mut().find(|(key, _)| key == k)
                            {
                                keys.push(s.clone());
                            }
                        }
                    }
                    last_key = Some(s);
                }
            }
            b'{' => {
                depth += 1;
                if head.array && depth == 2 {
                    elements_seen_at_root += 1;
                }
            }
            b'[' => {
                depth += 1;
                if !head.array && depth == 2 {
                    if let Some(k) = last_key.take() {
                        if !head.element_keys.iter().any(|(key, _)| *key == k) {
                            head.element_keys.push((k.clone(), Vec::new()));
                            inner = Some((k, 3));
                        }
                    }
                }
            }
            b'}' | b']' => {
                if let Some((_, d)) = &inner {
                    if (depth == *d && b[i] == b'}') || (depth == 2 && b[i] == b']') {
                        inner = None;
                    }
                }
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    head.complete = true;
                    break;
                }
            }
            _ => {}
        }
        i += 1;
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_heads() {
        let h = scan_head(
            "{\n \"environment\": \"x\",\n \"history\": [\n  {\"role\": \"system\", \"content\": \"a, \\\"b\\\": c\", \"agent\": \"primary\"},\n  {\"role\": \"user\"",
        );
        assert!(!h.array);
        assert_eq!(h.keys, ["environment", "history"]);
        assert_eq!(h.element("history").unwrap(), ["role", "content", "agent"]);
        let h = scan_head(
            "[\n {\"id\": 0, \"args\": {\"content\": \"x\"}, \"action\": \"system\"},\n {\"id\": 1",
        );
        assert!(h.array);
        assert_eq!(h.keys, ["id", "args", "action"]);
    }

    #[test]
    fn shapes_in_words() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        std::fs::write(&p, "{\"kind\": \"header\", \"format\": \"gyre/1\"}\n").unwrap();
        assert!(
            Probe::of(&p)
                .describe(&[])
                .starts_with("a gyre/1 recording")
        );
        std::fs::write(&p, "").unwrap();
        assert_eq!(Probe::of(&p).describe(&[]), "an empty file");
        std::fs::write(&p, "hello\n").unwrap();
        assert_eq!(
            Probe::of(&p).describe(&[]),
            "not JSON (it starts with \"hello\\n\")"
        );
        std::fs::write(&p, "[1, 2]").unwrap();
        assert_eq!(
            Probe::of(&p).describe(&["x"]),
            "a JSON array; it looks like `gyre import x` input"
        );
        assert!(
            Probe::of(dir.path())
                .describe(&[])
                .starts_with("a folder that is not an OpenHands session")
        );
    }
}
