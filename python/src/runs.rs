//! Sharded admission that reads recordings where they lie (`engine::runs`): `gyre.index` gives
//! each shard its runs of a recording (byte ranges, no bytes), `gyre.load_runs` loads a shard's
//! runs of every recording in place. `gyre.files_read` says what this process read, so a
//! scheduler (and its tests) can check that a recording was read only where it lies.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use gyre_engine::load::LoadOptions;
use gyre_engine::runs::{self, Part, Run, Source};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::batch::Batch;
use crate::errors::{load_error, os_error};
use crate::shard::shards_arg;
use crate::{guard, value_error};

/// Recording bytes read by this process through `index` and `load_runs`, per file.
static FILES_READ: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

fn count_read(path: &Path, bytes: u64) {
    if let Ok(mut read) = FILES_READ.lock() {
        *read.entry(path.display().to_string()).or_default() += bytes;
    }
}

/// A recording given as a path or as its bytes.
enum Recording<'py> {
    Path(PathBuf),
    Bytes(Bound<'py, PyBytes>),
}

fn recording<'py>(source: &Bound<'py, PyAny>) -> PyResult<Recording<'py>> {
    if let Ok(b) = source.cast::<PyBytes>() {
        return Ok(Recording::Bytes(b.clone()));
    }
    source
        .extract::<PathBuf>()
        .map(Recording::Path)
        .map_err(|_| value_error("source must be a path or bytes"))
}

/// Counts the bytes read from a file.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// One shard's runs of one recording (from `gyre.index`): where its lines are, not the lines.
/// Picklable and small: send it to the shard that loads them.
#[pyclass(module = "gyre._gyre")]
#[derive(Default)]
pub struct Runs {
    runs: Vec<Run>,
}

#[pymethods]
impl Runs {
    #[new]
    fn empty() -> Self {
        Runs::default()
    }

    /// Bytes the shard reads (of the decompressed recording).
    #[getter]
    fn bytes(&self) -> u64 {
        self.runs.iter().map(|r| r.len).sum()
    }

    /// Lines the shard reads.
    #[getter]
    fn lines(&self) -> u64 {
        self.runs.iter().map(|r| r.lines).sum()
    }

    /// Runs of consecutive lines.
    fn __len__(&self) -> usize {
        self.runs.len()
    }

    fn __getstate__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let state = serde_json::to_vec(&self.runs)
            .map_err(|e| value_error(format!("pickling Runs: {e}")))?;
        Ok(PyBytes::new(py, &state))
    }

    fn __setstate__(&mut self, state: &[u8]) -> PyResult<()> {
        self.runs = serde_json::from_slice(state)
            .map_err(|e| value_error(format!("not a pickled Runs: {e}")))?;
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "Runs({} runs, {} lines, {} bytes)",
            self.runs.len(),
            self.lines(),
            self.bytes()
        )
    }
}

/// Indexes one recording (a path, or its bytes; plain, gzip or zstd) for `shards` shards:
/// one `Runs` per shard, the lines of its executions (headers and lines naming no execution
/// go to shard 0), as `gyre.split` would route them, without copying them. Read where the
/// recording lies; give shard `k` the `k`-th `Runs` of every recording for `gyre.load_runs`.
#[pyfunction]
pub fn index(py: Python<'_>, source: &Bound<'_, PyAny>, shards: i64) -> PyResult<Vec<Runs>> {
    guard(|| {
        let shards = shards_arg(shards)?;
        let index = match recording(source)? {
            Recording::Bytes(b) => {
                let bytes = b.as_bytes();
                py.detach(|| runs::index(bytes, shards))
                    .map_err(|e| value_error(format!("indexing the recording: {e}")))?
            }
            Recording::Path(path) => {
                let file = File::open(&path).map_err(|e| os_error(&e, &path, ""))?;
                let mut counted = Counted {
                    inner: file,
                    read: 0,
                };
                let index = py
                    .detach(|| runs::index(&mut counted, shards))
                    .map_err(|e| os_error(&e, &path, ""))?;
                count_read(&path, counted.read);
                index
            }
        };
        Ok(index.runs.into_iter().map(|runs| Runs { runs }).collect())
    })
}

/// Loads one shard of a batch: `[(name, source, runs), …]`, one entry per recording in the
/// order the batch's recordings were given, `source` a path or bytes, `runs` the shard's
/// `Runs` of it (from `gyre.index`; an empty `Runs()` for a recording with none, which is then
/// not opened) or `None` to read it whole. Each recording is read in place, only its runs;
/// errors name `name:line` as one load of all recordings would.
#[pyfunction]
#[pyo3(signature = (parts, *, lenient=false))]
pub fn load_runs(
    py: Python<'_>,
    parts: Vec<(String, Bound<'_, PyAny>, Option<PyRef<'_, Runs>>)>,
    lenient: bool,
) -> PyResult<Batch> {
    guard(|| {
        if parts.is_empty() {
            return Err(value_error("no parts to load"));
        }
        let recordings: Vec<Recording> = parts
            .iter()
            .map(|(_, source, _)| recording(source))
            .collect::<PyResult<_>>()?;
        let names: Vec<PathBuf> = parts.iter().map(|(n, _, _)| PathBuf::from(n)).collect();
        let read: Vec<AtomicU64> = parts.iter().map(|_| AtomicU64::new(0)).collect();
        let engine_parts: Vec<Part> = parts
            .iter()
            .zip(&recordings)
            .zip(&names)
            .zip(&read)
            .map(|((((_, _, runs), rec), name), read)| Part {
                name,
                source: match rec {
                    Recording::Path(p) => Source::File(p),
                    Recording::Bytes(b) => Source::Memory(b.as_bytes()),
                },
                runs: runs.as_ref().map(|r| &r.runs[..]),
                read,
            })
            .collect();
        let options = LoadOptions {
            lenient,
            ..LoadOptions::default()
        };
        let loaded = py.detach(|| runs::load_parts(&engine_parts, &options));
        for (rec, read) in recordings.iter().zip(&read) {
            if let Recording::Path(p) = rec {
                count_read(p, read.load(Ordering::Relaxed));
            }
        }
        Ok(Batch::new(loaded.map_err(|e| load_error(&e))?))
    })
}

/// Bytes of recording files this process has read through `gyre.index` and
/// `gyre.load_runs`, per path: where a recording was read, and how much of it.
#[pyfunction]
pub fn files_read() -> BTreeMap<String, u64> {
    FILES_READ.lock().map(|r| r.clone()).unwrap_or_default()
}
