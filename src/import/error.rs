//! Import errors: bad input is reported as `file:line: what (field)` through the engine's
//! [`LoadError`], so the CLI exits 2 for it like for any other invalid input.

use std::fmt;
use std::path::Path;

use crate::engine::load::{Diagnostic, LoadError};

pub use crate::output::ExistsError;

/// A bad argument.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// One diagnostic at `file:line` (line 0 = the file as a whole).
pub fn diag(file: &Path, line: u64, message: impl Into<String>, field: Option<&str>) -> Diagnostic {
    Diagnostic {
        file: file.to_path_buf(),
        line,
        message: message.into(),
        field: field.map(str::to_owned),
    }
}

/// An invalid-input error with one diagnostic.
pub fn bad(
    file: &Path,
    line: u64,
    message: impl Into<String>,
    field: Option<&str>,
) -> color_eyre::Report {
    LoadError {
        diagnostics: vec![diag(file, line, message, field)],
    }
    .into()
}

/// Collects diagnostics; fails with all of them at the end.
#[derive(Default)]
pub struct Problems(pub Vec<Diagnostic>);

impl Problems {
    /// Records a problem.
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    /// `Err` with every problem, if any.
    pub fn check(self) -> color_eyre::Result<()> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(LoadError {
                diagnostics: self.0,
            }
            .into())
        }
    }
}
