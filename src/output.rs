//! Output files: written atomically (temporary file + rename, nothing left on error), compressed
//! when the name ends in `.zst` or `.gz`, never overwritten without `force`. Shared by
//! `gyre synth` and `gyre import`.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use color_eyre::eyre::{Result, WrapErr};
use serde::Serialize;

/// The output exists and overwriting was not asked for.
#[derive(Debug)]
pub struct ExistsError(pub PathBuf);

impl fmt::Display for ExistsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} exists; pass --force to overwrite it",
            self.0.display()
        )
    }
}

impl std::error::Error for ExistsError {}

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
            .prefix(".gyre-out-")
            .tempfile_in(&dir)
            .wrap_err_with(|| format!("creating a temporary file in {}", dir.display()))?;
        let file = BufWriter::with_capacity(1 << 20, tmp.as_file().try_clone()?);
        let name = path.to_string_lossy();
        let enc = if name.ends_with(".zst") {
            Enc::Zstd(zstd::Encoder::new(file, 3)?)
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

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush()
    }
}
