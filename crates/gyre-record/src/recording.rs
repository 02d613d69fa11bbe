//! The recording file under the proxy: its [`Recorder`], and the undoing of records whose
//! write failed (a full disk), so that the file and the recorder's state hold exactly what was
//! answered (docs/record.md, "Durability").
//!
//! Every write is a small transaction: records are written and flushed; when that fails, the
//! recorder (its buffer and its state, which already count the records) is dropped, the file is
//! cut back to its length before the transaction, and a recorder is opened on it again, which
//! reads the file back (ids, closures, the shared-prefix trees for delta form). Cutting a file
//! shorter needs no free space; when it or the reading back fails, the next write tries again
//! before writing anything.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use eyre::{Result, WrapErr};
use gyre_engine::recorder::{AppendError, RecordError, Recorder};
use gyre_format::note;

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
    /// Takes over `rec`, which writes the file at `path` and has flushed everything so far.
    pub fn new(path: &Path, rec: Recorder<BufWriter<File>>) -> Result<Self> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .wrap_err_with(|| format!("opening {}", path.display()))?;
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
