//! Reading input files, shared by every reader of logs and recordings (the engine's loader,
//! `follow`, the importers): decompression by content, the longest line read, I/O errors in
//! short words, and [`Diagnostic`], a problem at a place in the input.

use std::fmt;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;

use crate::sanitize;

/// Problems (and, separately, warnings) kept in full: the first ones by file and line. The rest
/// are only counted, so a file of a million bad lines costs no more memory than a good one.
pub const KEPT_DIAGNOSTICS: usize = 1000;

/// Longest line read by default (128 MiB): far above any real record (a 1M-token context is
/// about 8 MB of JSON), far below what would exhaust memory. `GYRE_MAX_LINE_MB` overrides it.
pub const DEFAULT_MAX_LINE: usize = 128 << 20;

/// Environment variable that sets the longest line read, in MiB.
pub const MAX_LINE_ENV: &str = "GYRE_MAX_LINE_MB";

/// The longest line read: [`MAX_LINE_ENV`] when it holds a positive whole number of MiB, else
/// [`DEFAULT_MAX_LINE`].
pub fn max_line_bytes() -> usize {
    std::env::var(MAX_LINE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&mb| mb > 0)
        .map_or(DEFAULT_MAX_LINE, |mb| mb.saturating_mul(1 << 20))
}

/// A problem (or warning) at a place in the input.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// File as given.
    pub file: PathBuf,
    /// 1-based line; 0 for problems with the file as a whole.
    pub line: u64,
    /// What is wrong.
    pub message: String,
    /// The field at fault, when known.
    pub field: Option<String>,
}

impl Diagnostic {
    /// The entry that stands for `n` further diagnostics that were counted but not kept (see
    /// [`KEPT_DIAGNOSTICS`]); it comes last.
    pub fn omitted(n: u64) -> Diagnostic {
        Diagnostic {
            file: PathBuf::new(),
            line: n,
            message: String::new(),
            field: None,
        }
    }

    /// For the entry made by [`Diagnostic::omitted`]: how many were left out.
    pub fn omitted_count(&self) -> Option<u64> {
        (self.file.as_os_str().is_empty() && self.message.is_empty()).then_some(self.line)
    }
}

/// Everything in a diagnostic can come from the input (ids, keys, file names), so all of it
/// is written through the terminal sanitiser.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(n) = self.omitted_count() {
            return write!(
                f,
                "… and {n} more (only the first {KEPT_DIAGNOSTICS} are kept)"
            );
        }
        let file = self.file.display().to_string();
        let (file, message) = (sanitize(&file), sanitize(&self.message));
        if self.line > 0 {
            write!(f, "{file}:{}: {message}", self.line)?;
        } else {
            write!(f, "{file}: {message}")?;
        }
        if let Some(field) = &self.field {
            write!(f, " ({})", sanitize(field))?;
        }
        Ok(())
    }
}

/// Wraps `raw` in a gzip or zstd decoder when its first bytes are their magic numbers (the
/// content decides, not the file name).
pub fn decompress<'a, R: BufRead + Send + 'a>(
    mut raw: R,
) -> io::Result<Box<dyn BufRead + Send + 'a>> {
    let magic = raw.fill_buf()?;
    Ok(if magic.starts_with(&[0x1f, 0x8b]) {
        Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::bufread::MultiGzDecoder::new(raw),
        ))
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(BufReader::with_capacity(
            1 << 16,
            zstd::stream::read::Decoder::with_buffer(raw)?,
        ))
    } else {
        Box::new(raw)
    })
}

/// A short reason for an I/O error (no OS error numbers).
pub fn io_reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "no such file".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        io::ErrorKind::IsADirectory => "is a directory".into(),
        io::ErrorKind::UnexpectedEof => {
            "the file ends inside a compressed block (cut short?)".into()
        }
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_owned(),
                None => s,
            }
        }
    }
}
