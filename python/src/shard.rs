//! Sharded admission (`engine::shard`) for schedulers such as Ray: split recordings by
//! execution, combine the shards' summaries into batch statistics, admit each shard with them
//! (each shard's parts load with `load_parts`, beside `load` in `batch.rs`). `gyre.ray` drives
//! these; any other scheduler can too.

use std::fs::File;
use std::path::PathBuf;

use gyre_engine::shard;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::errors::os_error;
use crate::{guard, value_error};

/// Most shards a batch is split into. `split` returns one part per shard, each at least one
/// byte per line of the input, so the count is bounded well above any cluster's CPU count but
/// below what would exhaust memory (2^31 shards are 48 GiB of empty parts).
const MAX_SHARDS: i64 = 1 << 16;

pub(crate) fn shards_arg(shards: i64) -> PyResult<u32> {
    if !(1..=MAX_SHARDS).contains(&shards) {
        return Err(value_error(format!(
            "shards must be an integer in 1..={MAX_SHARDS}, not {shards}"
        )));
    }
    Ok(shards as u32)
}

/// The shard (in `0..shards`) that execution `execution` belongs to: FNV-1a of the id, stable
/// across machines and runs.
#[pyfunction]
pub fn shard_of(execution: &str, shards: i64) -> PyResult<u32> {
    Ok(shard::shard_of(execution, shards_arg(shards)?))
}

/// Splits one recording (a path, or its bytes; plain, gzip or zstd) into `shards` parts of
/// plain JSONL, one per shard: each line goes to its execution's shard and is left blank in
/// the others, so every part keeps the file's line numbers. Load a shard's parts, in the
/// order the files were given, with `gyre.load_parts`.
#[pyfunction]
pub fn split<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    shards: i64,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    guard(|| {
        let shards = shards_arg(shards)?;
        let parts = if let Ok(b) = source.cast::<PyBytes>() {
            let bytes = b.as_bytes();
            py.detach(|| shard::split(bytes, shards))
                .map_err(|e| value_error(format!("splitting the recording: {e}")))?
        } else {
            let path: PathBuf = source
                .extract()
                .map_err(|_| value_error("source must be a path or bytes"))?;
            let file = File::open(&path).map_err(|e| os_error(&e, &path, ""))?;
            py.detach(|| shard::split(file, shards))
                .map_err(|e| os_error(&e, &path, ""))?
        };
        Ok(parts.iter().map(|p| PyBytes::new(py, p)).collect())
    })
}

fn to_state(v: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(v).expect("summaries serialise to memory")
}

fn from_state<T: serde::de::DeserializeOwned>(state: &[u8], what: &str) -> PyResult<T> {
    serde_json::from_slice(state).map_err(|e| value_error(format!("not a pickled {what}: {e}")))
}

/// What one shard contributes to the batch-wide `B` and group statistics (from
/// `Batch.summary()`): per execution, where it first appears, its group and its reward.
/// Picklable, small: send it to the driver.
#[pyclass(module = "gyre._gyre")]
pub struct ShardSummary {
    pub(crate) inner: shard::ShardSummary,
}

#[pymethods]
impl ShardSummary {
    #[new]
    fn empty() -> Self {
        ShardSummary {
            inner: shard::ShardSummary::default(),
        }
    }

    /// Per execution: `execution`, `file` (index), `line`, `group` (the group's JSON text) and
    /// `reward` (`None` when excluded).
    #[getter]
    fn executions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for e in &self.inner.executions {
            let d = PyDict::new(py);
            d.set_item("execution", &e.execution)?;
            d.set_item("file", e.file)?;
            d.set_item("line", e.line)?;
            d.set_item("group", e.group.as_deref())?;
            d.set_item("reward", e.reward)?;
            out.append(d)?;
        }
        Ok(out)
    }

    fn __len__(&self) -> usize {
        self.inner.executions.len()
    }

    fn __getstate__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &to_state(&self.inner))
    }

    fn __setstate__(&mut self, state: &[u8]) -> PyResult<()> {
        self.inner = from_state(state, "ShardSummary")?;
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("ShardSummary({} executions)", self.inner.executions.len())
    }
}

/// `B` and group statistics of a whole batch (from `gyre.combine`), to admit each shard with:
/// `Batch.admit(..., stats=stats)`. Picklable: send it to the shards.
#[pyclass(module = "gyre._gyre")]
pub struct BatchStats {
    pub(crate) inner: shard::BatchStats,
}

#[pymethods]
impl BatchStats {
    #[new]
    fn empty() -> Self {
        BatchStats {
            inner: shard::BatchStats {
                batch_executions: 0,
                groups: Default::default(),
                order: Vec::new(),
            },
        }
    }

    /// `B`: scored and dummy executions over every shard.
    #[getter]
    fn batch_executions(&self) -> u64 {
        self.inner.batch_executions
    }

    /// Per group (keyed by its JSON text, `'"g1"'` for the string `g1`): `(mean, std)` of its
    /// counted executions' rewards.
    #[getter]
    fn groups(&self) -> std::collections::BTreeMap<String, (f64, f64)> {
        self.inner.groups.clone()
    }

    /// Every execution id in the order one load of all inputs holds them: the order of the
    /// rows `gyre admit` writes.
    #[getter]
    fn order(&self) -> Vec<String> {
        self.inner.order.clone()
    }

    fn __getstate__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &to_state(&self.inner))
    }

    fn __setstate__(&mut self, state: &[u8]) -> PyResult<()> {
        self.inner = from_state(state, "BatchStats")?;
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "BatchStats(B = {}, {} groups, {} executions)",
            self.inner.batch_executions,
            self.inner.groups.len(),
            self.inner.order.len()
        )
    }
}

/// Combines the summaries of every shard of a batch (any order) into its `BatchStats`:
/// exactly the `B` and group statistics one load of all inputs gives.
#[pyfunction]
pub fn combine(summaries: Vec<PyRef<'_, ShardSummary>>) -> PyResult<BatchStats> {
    guard(|| {
        let all: Vec<shard::ShardSummary> = summaries.iter().map(|s| s.inner.clone()).collect();
        shard::combine(&all)
            .map(|inner| BatchStats { inner })
            .map_err(|e| value_error(e.to_string()))
    })
}
