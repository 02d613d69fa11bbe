//! Output files: written atomically (temporary file + rename, nothing left on error or on
//! SIGINT/SIGTERM/SIGHUP), compressed when the name ends in `.zst` or `.gz`, never overwritten
//! without `force`. Shared by `gyre admit`, `gyre synth`, `gyre import` and the inspector's export.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use eyre::{Result, WrapErr};
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

/// The output cannot be written where it is named (a directory, a missing directory, not a
/// regular file, no permission): found before any work is done.
#[derive(Debug)]
pub struct OutputError {
    /// The output as named.
    pub path: PathBuf,
    /// Why it cannot be written.
    pub why: String,
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write {}: {}", self.path.display(), self.why)
    }
}

impl std::error::Error for OutputError {}

/// Temporary files being written, removed by the signal thread before the process dies.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A temporary file listed in [`PENDING`] while it lives.
struct Pending(PathBuf);

impl Pending {
    fn new(path: &Path) -> Self {
        lock_pending().push(path.to_path_buf());
        Pending(path.to_path_buf())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut list = lock_pending();
        if let Some(i) = list.iter().position(|p| *p == self.0) {
            list.swap_remove(i);
        }
    }
}

fn lock_pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic while the list was held leaves it usable: it is only ever pushed to or shrunk.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes every pending temporary file (a signal or a fatal error ends the process without
/// running destructors).
pub fn remove_pending() {
    for p in lock_pending().drain(..) {
        let _ = std::fs::remove_file(p);
    }
}

/// Starts, once, a thread that on SIGINT, SIGTERM or SIGHUP removes the pending temporary files
/// and then dies of the signal as if no handler were installed (so a shell still sees 130 for
/// Ctrl-C).
#[cfg(unix)]
fn remove_on_signal() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            return;
        };
        std::thread::spawn(move || {
            if let Some(sig) = signals.forever().next() {
                remove_pending();
                let _ = signal_hook::low_level::emulate_default_handler(sig);
                std::process::exit(128 + sig);
            }
        });
    });
}

#[cfg(not(unix))]
fn remove_on_signal() {}

/// Checks that `path` can be written as an output file before any work is done: not a
/// directory, not a device or FIFO, in a directory that exists.
fn check_writable(path: &Path, force: bool) -> Result<PathBuf> {
    let fail = |why: String| {
        eyre::Report::from(OutputError {
            path: path.to_path_buf(),
            why,
        })
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Err(fail("it is a directory; name a file".into())),
        Ok(m) if !m.is_file() => {
            return Err(fail(
                "it is not a regular file (write to stdout with `-` and redirect instead)".into(),
            ));
        }
        Ok(_) if !force => return Err(ExistsError(path.to_path_buf()).into()),
        _ => {}
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(_) => Err(fail(format!("{} is not a directory", dir.display()))),
        Err(_) => Err(fail(format!("directory {} does not exist", dir.display()))),
    }
}

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
        _pending: Pending,
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
        let dir = check_writable(path, force)?;
        // Listed before it exists, with the signal thread already running: no moment where a
        // signal could leave the file behind.
        remove_on_signal();
        let mut pending = None;
        let tmp = tempfile::Builder::new()
            .prefix(".gyre-out-")
            .make_in(&dir, |p| {
                pending = Some(Pending::new(p));
                File::options().write(true).create_new(true).open(p)
            })
            .map_err(|e| OutputError {
                path: path.to_path_buf(),
                why: format!(
                    "cannot create a file in {}: {}",
                    dir.display(),
                    io_reason(&e)
                ),
            })?;
        let pending = pending.expect("make_in names the file before creating it");
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
                _pending: pending,
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

    /// Writes one record as a JSON line (terminal-safe, values unchanged).
    pub fn line<T: Serialize + ?Sized>(&mut self, record: &T) -> Result<()> {
        let w = self.writer();
        crate::sanitize::write_json_compact(&mut *w, record).wrap_err("writing a record")?;
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
                _pending,
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
                            eyre::Report::from(ExistsError(path.clone()))
                        } else {
                            eyre::Report::from(e.error)
                                .wrap_err(format!("writing {}", path.display()))
                        }
                    })?;
                }
                Ok(())
            }
        }
    }
}

/// An I/O error's reason without the path tempfile appends (`… at path "/x/.gyre-out-Ab3"`).
fn io_reason(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" at path ") {
        Some(i) => text[..i].to_owned(),
        None => text,
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
