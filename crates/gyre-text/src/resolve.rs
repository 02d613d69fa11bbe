//! Which tokenizer shows a recording's ids as text (docs/format.md §7): `--tokenizer`, else the header's.

use std::path::Path;

use eyre::{Result, eyre};
use serde_json::Value;

use super::{TokenText, sanitize};

/// A recording header's `tokenizer` value, with the file and line of that header (as the
/// engine's `Batch::tokenizer_spec` gives it).
pub type HeaderSpec<'a> = (&'a Value, &'a Path, u64);

/// The tokenizer for display: `arg` (a bundled name or a `tokenizer.json` path), else the one
/// the recording's header names (`header`) (relative to that file), else ids shown as `⟨id⟩`. Errors are
/// one line: `--tokenizer x: x does not exist`, or the header's `file:line: … (tokenizer)`.
pub fn resolve(arg: Option<&str>, header: Option<HeaderSpec>) -> Result<TokenText> {
    match arg {
        Some(arg) => from_arg(arg),
        None => from_header(header),
    }
}

/// The `--tokenizer NAME|PATH` argument (relative paths from the working directory).
pub fn from_arg(arg: &str) -> Result<TokenText> {
    TokenText::from_arg(arg, Path::new(""))
        .map_err(|e| eyre!("--tokenizer {}: {}", sanitize(arg), chain(&e)))
}

/// The tokenizer the recording's header names, else the `⟨id⟩` fallback.
pub fn from_header(header: Option<HeaderSpec>) -> Result<TokenText> {
    let Some((spec, file, line)) = header else {
        return Ok(TokenText::none());
    };
    let dir = file.parent().unwrap_or(Path::new("."));
    TokenText::from_header(spec, dir).map_err(|e| {
        let file = file.display().to_string();
        eyre!(
            "{}:{line}: the header's tokenizer cannot be loaded: {} (tokenizer)",
            sanitize(&file),
            chain(&e)
        )
    })
}

/// An error and its causes, sanitised, on one line.
fn chain(e: &eyre::Report) -> String {
    let text: Vec<String> = e.chain().map(|c| c.to_string()).collect();
    sanitize(&text.join(": ")).into_owned()
}
