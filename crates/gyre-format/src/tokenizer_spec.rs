//! A header's `tokenizer` value (docs/format.md §7), checked without loading a tokenizer: the
//! reader validates its shape and the loader checks the file it names, so a bad header is a
//! `file:line` problem before any vocabulary is read. Loading lives in the text layer.

use std::path::{Path, PathBuf};

/// Names of the tokenizers bundled in the `gyre` binary (the text layer loads them).
pub const BUNDLED: &[&str] = &["qwen3"];

/// Largest `tokenizer.json` read (256 MiB; real ones are 2–35 MB): a header cannot make gyre
/// read `/dev/zero` or a multi-gigabyte file into memory.
pub const MAX_TOKENIZER_BYTES: u64 = 256 << 20;

/// What a header's `tokenizer` value must look like (docs/format.md §7).
pub const SPEC_SHAPE: &str =
    "tokenizer must be a bundled name, {\"path\": \"tokenizer.json\"} or {\"vocab\": [...]}";

/// Checks the shape of a header's `tokenizer` value without loading anything: a bundled name,
/// `{"path": string}` or `{"vocab": [string, ...]}`.
pub fn check_spec(value: &serde_json::Value) -> std::result::Result<(), String> {
    use serde_json::Value;
    match value {
        Value::String(name) if BUNDLED.contains(&name.as_str()) => Ok(()),
        Value::String(name) => Err(format!(
            "unknown bundled tokenizer \"{name}\" (bundled: {}); name a file with {{\"path\": ...}}",
            BUNDLED.join(", ")
        )),
        Value::Object(map) => match (map.get("path"), map.get("vocab")) {
            (Some(Value::String(_)), None) => Ok(()),
            (None, Some(Value::Array(items))) => match items.iter().position(|v| !v.is_string()) {
                Some(i) => Err(format!("tokenizer.vocab[{i}] is not a string")),
                None => Ok(()),
            },
            _ => Err(SPEC_SHAPE.into()),
        },
        _ => Err(SPEC_SHAPE.into()),
    }
}

/// The file a header's `tokenizer` value names, when it names one (`{"path": ...}`).
pub fn header_path(value: &serde_json::Value) -> Option<&str> {
    value.get("path")?.as_str()
}

/// Checks that `path` is a regular file no larger than [`MAX_TOKENIZER_BYTES`], without
/// opening it (opening a FIFO would block); returns its size.
pub fn check_file(path: &Path) -> std::result::Result<u64, String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{} does not exist", path.display()),
        _ => format!("{}: {e}", path.display()),
    })?;
    if !meta.is_file() {
        return Err(format!(
            "{} is not a regular file (a tokenizer.json is expected)",
            path.display()
        ));
    }
    if meta.len() > MAX_TOKENIZER_BYTES {
        return Err(format!(
            "{} is {} MiB, over the {} MiB limit for a tokenizer.json",
            path.display(),
            meta.len() >> 20,
            MAX_TOKENIZER_BYTES >> 20
        ));
    }
    Ok(meta.len())
}

/// `path` against `base_dir` unless it is absolute.
pub fn resolve_path(base_dir: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base_dir.join(p)
    }
}
