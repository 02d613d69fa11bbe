//! Which tokenizer shows a recording's ids as text (SPEC §7): `--tokenizer`, else the header's.

use std::path::Path;

use color_eyre::eyre::{Result, WrapErr};

use super::TokenText;
use crate::engine::load::Batch;

/// The tokenizer for display: `arg` (a bundled name or a `tokenizer.json` path), else the one
/// the recording's header names (relative to that file), else ids shown as `⟨id⟩`.
pub fn resolve(arg: Option<&str>, batch: &Batch) -> Result<TokenText> {
    if let Some(arg) = arg {
        return TokenText::from_arg(arg, Path::new("."))
            .wrap_err_with(|| format!("loading tokenizer {arg:?}"));
    }
    match batch.tokenizer_spec() {
        Some((spec, file)) => {
            let dir = file.parent().unwrap_or(Path::new("."));
            TokenText::from_header(spec, dir)
                .wrap_err_with(|| format!("loading the tokenizer named in {}", file.display()))
        }
        None => Ok(TokenText::none()),
    }
}
