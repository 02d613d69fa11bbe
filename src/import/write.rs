//! Writing gyre/1 records: typed lines, and the output file (atomic, optionally compressed).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use color_eyre::eyre::{Result, WrapErr};
use serde::Serialize;
use serde_json::{Map, Value};

use super::encode::Span;
use super::error::ExistsError;

/// Where records go: stdout (`-`) or a file written atomically (temp file + rename); a name
/// ending in `.zst` or `.gz` is compressed.
pub struct Sink {
    inner: Inner,
    lines: u64,
}

enum Inner {
    Stdout(BufWriter<io::Stdout>),
    File {
        tmp: tempfile::NamedTempFile,
        path: PathBuf,
        force: bool,
        enc: Enc,
    },
}

enum Enc {
    Plain(BufWriter<File>),
    Zstd(zstd::Encoder<'static, BufWriter<File>>),
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
}

impl Sink {
    /// Opens `path` (`-` = stdout). Without `force` an existing file is refused now, before any
    /// work is done.
    pub fn open(path: &Path, force: bool) -> Result<Self> {
        if path == Path::new("-") {
            return Ok(Self {
                inner: Inner::Stdout(BufWriter::with_capacity(1 << 20, io::stdout())),
                lines: 0,
            });
        }
        if !force && path.exists() {
            return Err(ExistsError(path.to_path_buf()).into());
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".gyre-import-")
            .tempfile_in(&dir)
            .wrap_err_with(|| format!("creating a temporary file in {}", dir.display()))?;
        let file = BufWriter::with_capacity(1 << 20, tmp.as_file().try_clone()?);
        let name = path.to_string_lossy();
        let enc = if name.ends_with(".zst") {
            Enc::Zstd(zstd::Encoder::new(file, 12)?)
        } else if name.ends_with(".gz") {
            Enc::Gzip(flate2::write::GzEncoder::new(
                file,
                flate2::Compression::default(),
            ))
        } else {
            Enc::Plain(file)
        };
        Ok(Self {
            inner: Inner::File {
                tmp,
                path: path.to_path_buf(),
                force,
                enc,
            },
            lines: 0,
        })
    }

    fn writer(&mut self) -> &mut dyn Write {
        match &mut self.inner {
            Inner::Stdout(w) => w,
            Inner::File { enc, .. } => match enc {
                Enc::Plain(w) => w,
                Enc::Zstd(w) => w,
                Enc::Gzip(w) => w,
            },
        }
    }

    /// Writes one record as a JSON line.
    pub fn line<T: Serialize + ?Sized>(&mut self, record: &T) -> Result<()> {
        let w = self.writer();
        serde_json::to_writer(&mut *w, record).wrap_err("writing a record")?;
        w.write_all(b"\n")?;
        self.lines += 1;
        Ok(())
    }

    /// Lines written so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Flushes, syncs and renames the file into place (nothing is left on error).
    pub fn finish(self) -> Result<()> {
        match self.inner {
            Inner::Stdout(mut w) => {
                w.flush()?;
                Ok(())
            }
            Inner::File {
                tmp,
                path,
                force,
                enc,
            } => {
                let mut file = match enc {
                    Enc::Plain(w) => w,
                    Enc::Zstd(w) => w.finish()?,
                    Enc::Gzip(w) => w.finish()?,
                };
                file.flush()?;
                drop(file);
                tmp.as_file().sync_all()?;
                // Temporary files are private (0600); give the output the usual mode, or the
                // mode of the file it replaces.
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let perms = std::fs::metadata(&path)
                        .map(|m| m.permissions())
                        .unwrap_or_else(|_| std::fs::Permissions::from_mode(0o644));
                    tmp.as_file().set_permissions(perms)?;
                }
                if force {
                    tmp.persist(&path)
                        .map_err(|e| e.error)
                        .wrap_err_with(|| format!("writing {}", path.display()))?;
                } else {
                    tmp.persist_noclobber(&path).map_err(|e| {
                        if e.error.kind() == io::ErrorKind::AlreadyExists {
                            color_eyre::Report::from(ExistsError(path.clone()))
                        } else {
                            color_eyre::Report::from(e.error)
                                .wrap_err(format!("writing {}", path.display()))
                        }
                    })?;
                }
                Ok(())
            }
        }
    }
}

/// A `header` line.
#[derive(Serialize)]
pub struct HeaderLine<'a> {
    /// Always `header`.
    pub kind: &'static str,
    /// Always `gyre/1`.
    pub format: &'static str,
    /// Tokenizer (SPEC §7).
    pub tokenizer: &'a Value,
    /// Import metadata.
    pub meta: &'a Map<String, Value>,
}

/// An `execution` line.
#[derive(Serialize)]
pub struct ExecutionLine<'a> {
    /// Always `execution`.
    pub kind: &'static str,
    /// Execution id.
    pub execution: &'a str,
    /// Start time (seconds).
    pub t: f64,
    /// Task description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<&'a str>,
    /// Metadata.
    pub meta: &'a Map<String, Value>,
}

/// A span as written.
#[derive(Serialize)]
pub struct SpanOut<'a> {
    /// Exclusive end.
    pub end: usize,
    /// Source name.
    pub source: &'static str,
    /// Call id of a `tool` span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<&'a str>,
}

/// Spans as written.
pub fn spans_out(spans: &[Span]) -> Vec<SpanOut<'_>> {
    spans
        .iter()
        .map(|s| SpanOut {
            end: s.end,
            source: s.source.name(),
            call_id: s.call_id.as_deref(),
        })
        .collect()
}

/// A tool call as written.
#[derive(Serialize)]
pub struct ToolCallOut<'a> {
    /// Call id.
    pub id: &'a str,
    /// Tool name.
    pub name: &'a str,
    /// First output token.
    pub start: usize,
    /// Exclusive end.
    pub end: usize,
}

/// A `request` line.
#[derive(Serialize)]
pub struct RequestLine<'a> {
    /// Always `request`.
    pub kind: &'static str,
    /// Execution id.
    pub execution: &'a str,
    /// Request id.
    pub id: &'a str,
    /// Agent (`main` or a sub-agent id).
    pub agent: &'a str,
    /// `summary` for compaction calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purpose: Option<&'static str>,
    /// Request time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t: Option<f64>,
    /// Model name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<&'a str>,
    /// Delta encoding: the request whose input + output precede `input`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extends: Option<&'a str>,
    /// Input tokens (new ones only with `extends`).
    pub input: &'a [u32],
    /// Output tokens.
    pub output: &'a [u32],
    /// Log-probs (absent on reconstructed records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<&'a [f64]>,
    /// Spans over `input`.
    pub spans: Vec<SpanOut<'a>>,
    /// Tool calls in `output`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallOut<'a>>,
    /// Finish reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<&'a str>,
    /// Metadata.
    pub meta: &'a Map<String, Value>,
}

/// An `assessment` line.
#[derive(Serialize)]
pub struct AssessmentLine<'a> {
    /// Always `assessment`.
    pub kind: &'static str,
    /// Execution id.
    pub execution: &'a str,
    /// Artifact.
    pub artifact: &'a Value,
    /// Version.
    pub version: &'a Value,
    /// `valid`.
    pub status: &'static str,
    /// The score.
    pub score: f64,
    /// Time.
    pub t: f64,
    /// Who scored.
    pub evaluator: &'static str,
}

/// A `closure` line.
#[derive(Serialize)]
pub struct ClosureLine<'a> {
    /// Always `closure`.
    pub kind: &'static str,
    /// Execution id.
    pub execution: &'a str,
    /// Time.
    pub t: f64,
    /// `completed`, `timeout` or `error`.
    pub status: &'static str,
    /// Artifact (`null` = no assessable work).
    pub artifact: &'a Value,
    /// Version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<&'a Value>,
    /// Importer metadata (kept and ignored by the engine).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub meta: &'a Map<String, Value>,
}
