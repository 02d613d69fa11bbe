//! The recording file under the proxy: the lock that makes the proxy its only writer, its
//! [`Recorder`], and the undoing of records whose write failed (a full disk), so that the file and
//! the recorder's state hold exactly what was answered (docs/record.md, "Durability").
//!
//! The lock is an advisory `flock(2)` on the open recording itself, not on a file beside it: every
//! name of the file (a symlink, a hard link) reaches the same inode and so the same lock, and
//! there is no lock file to delete. The file is opened in append mode, so every write lands at
//! its end whatever another process did to it.
//!
//! Every write is a small transaction: records are written and flushed; when that fails, the
//! recorder (its buffer and its state, which already count the records) is dropped, the file is
//! cut back to its length before the transaction, and a recorder is opened on it again, which
//! reads the file back (ids, closures, the shared-prefix trees for delta form). Cutting a file
//! shorter needs no free space; when it or the reading back fails, the next write tries again
//! before writing anything.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use eyre::{Result, WrapErr, eyre};
use gyre_engine::recorder::{AppendError, RecordError, Recorder};
use gyre_format::note;
use gyre_format::note::Invalid;

/// The recording opened (in append mode) and locked for writing by this process alone.
#[derive(Debug)]
pub struct Locked {
    /// The open file; the lock is held while it (or a clone of it) is open.
    pub file: File,
    /// This process created the file (a refused start removes it again).
    pub created: bool,
}

/// Opens the recording at `path` (created with mode 0600 when missing; an existing one keeps its
/// mode) and takes its exclusive lock. A recording another process holds is refused (exit 2)
/// naming that process's pid, and is left untouched.
pub fn lock(path: &Path) -> Result<Locked> {
    let open = |create_new: bool| {
        let mut options = OpenOptions::new();
        options.read(true).append(true);
        if create_new {
            options.create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        }
        options.open(path)
    };
    let (file, created) = match open(true) {
        Ok(f) => (f, true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => (
            open(false).wrap_err_with(|| format!("opening {}", path.display()))?,
            false,
        ),
        Err(e) => return Err(eyre!(e).wrap_err(format!("creating {}", path.display()))),
    };
    #[cfg(unix)]
    {
        use rustix::fs::{FlockOperation, flock};
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let holder = holder_of(&file)
                    .map_or_else(|| "another process".to_owned(), |pid| format!("pid {pid}"));
                return Err(Invalid(format!(
                    "{} is being recorded by another writer ({holder}), perhaps under another \
                     name (a link to the same file); stop it or choose another --out",
                    path.display()
                ))
                .into());
            }
            Err(e) => {
                if created {
                    let _ = std::fs::remove_file(path);
                }
                return Err(
                    eyre!(io::Error::from(e)).wrap_err(format!("locking {}", path.display()))
                );
            }
        }
    }
    Ok(Locked { file, created })
}

/// The pid holding a `flock` on `file`, from `/proc/locks` (Linux: `N: FLOCK ADVISORY WRITE
/// PID MAJ:MIN:INODE …`, device numbers in hex).
#[cfg(unix)]
fn holder_of(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let m = file.metadata().ok()?;
    let dev = m.dev();
    let want = format!(
        "{:02x}:{:02x}:{}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev),
        m.ino()
    );
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&want.as_str()))
            .then(|| f.get(4)?.parse().ok())
            .flatten()
    })
}

/// Cuts a last line without its newline (a writer killed mid-line) off `file`: how many bytes
/// were dropped and the offset they started at, `None` when the file ends with a whole line.
pub fn drop_partial_line(file: &mut File) -> io::Result<Option<(u64, u64)>> {
    const BLOCK: u64 = 1 << 16;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(None);
    }
    let mut end = len;
    let mut buf = vec![0u8; BLOCK as usize];
    let mut keep = 0;
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        file.seek(SeekFrom::Start(start))?;
        let n = (end - start) as usize;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            keep = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    file.set_len(keep)?;
    Ok(Some((len - keep, keep)))
}

/// The recorder over the file at `path`, and the length of its whole records.
pub struct Recording {
    path: PathBuf,
    /// `None` after a failed write that could not be undone yet.
    rec: Option<Recorder<BufWriter<File>>>,
    /// The same file, for its length and for cutting it back.
    file: File,
    /// Bytes of the file that are records answered for: its length after the last write that
    /// succeeded.
    len: u64,
}

impl Recording {
    /// Takes over `rec`, which writes `file` (the locked recording at `path`) and has flushed
    /// everything so far.
    pub fn new(path: &Path, file: File, rec: Recorder<BufWriter<File>>) -> Result<Self> {
        let len = file
            .metadata()
            .wrap_err_with(|| format!("reading the length of {}", path.display()))?
            .len();
        Ok(Recording {
            path: path.to_path_buf(),
            rec: Some(rec),
            file,
            len,
        })
    }

    /// Whether `execution` has a record in the file (as far as the recorder knows: always
    /// after a successful [`ready`](Self::ready)).
    pub fn knows_execution(&self, execution: &str) -> bool {
        self.rec
            .as_ref()
            .is_some_and(|r| r.knows_execution(execution))
    }

    /// Whether request `id` is used in `execution`.
    pub fn knows_request(&self, execution: &str, id: &str) -> bool {
        self.rec
            .as_ref()
            .is_some_and(|r| r.knows_request(execution, id))
    }

    /// Makes sure a recorder is open on the file as it is: after a failed write that could not
    /// be undone then, the file is cut back and read again now.
    pub fn ready(&mut self) -> io::Result<()> {
        if self.rec.is_none() {
            self.file.set_len(self.len)?;
            self.rec = Some(Recorder::append(&self.path).map_err(|e| match e {
                AppendError::Io(e) => e,
                AppendError::Invalid(e) => io::Error::other(format!(
                    "reading {} back after a failed write: {e}",
                    self.path.display()
                )),
            })?);
        }
        Ok(())
    }

    /// Writes records with `write` and flushes them: afterwards either all of them are in the
    /// file, or none is (the file and the recorder are as before) and the error says why. A
    /// record refused as invalid before anything was written leaves everything as it was.
    pub fn write<T>(
        &mut self,
        write: impl FnOnce(&mut Recorder<BufWriter<File>>) -> Result<T, RecordError>,
    ) -> Result<T, RecordError> {
        self.ready()?;
        let Some(rec) = self.rec.as_mut() else {
            return Err(RecordError::Io(io::Error::other("no recorder is open")));
        };
        let lines = rec.lines();
        let written = write(rec).and_then(|t| {
            rec.flush()?;
            Ok(t)
        });
        let grew = rec.lines() != lines;
        match written {
            Ok(t) => match self.file.metadata() {
                Ok(m) => {
                    self.len = m.len();
                    Ok(t)
                }
                Err(e) => {
                    // The records are in the file, but its length is not known: the next
                    // write cannot be undone safely, so this one is undone now.
                    self.undo();
                    Err(RecordError::Io(e))
                }
            },
            Err(RecordError::Invalid(e)) if !grew => Err(RecordError::Invalid(e)),
            Err(e) => {
                self.undo();
                Err(e)
            }
        }
    }

    /// Flushes the recorder (everything was flushed by [`write`](Self::write) already; this
    /// is the last word at shutdown).
    pub fn flush(&mut self) -> io::Result<()> {
        match self.rec.as_mut() {
            Some(rec) => rec.flush(),
            None => Ok(()),
        }
    }

    /// Drops the recorder with the records that failed (its buffer may still hold them, and
    /// dropping it tries to write them once more), cuts the file back to `len` and opens a
    /// recorder on it again; what cannot be done now is done by the next [`ready`](Self::ready).
    fn undo(&mut self) {
        drop(self.rec.take());
        if let Err(e) = self.ready() {
            note!(
                "gyre record: {} could not be cut back to its last whole record yet ({e}); \
                 the next write tries again first",
                self.path.display()
            );
        }
    }
}
