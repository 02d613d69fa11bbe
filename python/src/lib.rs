//! The `gyre` Python package's native module (`gyre._gyre`): the gyre engine crate, wrapped.
//!
//! Nothing here decides anything: recording goes through `engine::recorder`, loading through
//! `engine::load`, following a growing recording through `engine::follow`, admission through
//! `engine::process` (or `engine::shard`), rows through `engine::rows` and `engine::export` (JSONL and Parquet). This crate converts between Python and Rust values,
//! turns every error into a Python exception with the engine's message, and never lets a Rust
//! panic reach Python as anything but a `RuntimeError`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

mod arrow;
mod batch;
mod convert;
mod errors;
mod follow;
mod recorder;
mod runs;
mod settings;
mod shard;
mod tree;

// Named `gyre.LoadError` (where the package exports it) so that pickle finds the class again:
// a Ray worker's error reaches the driver intact, message and `.diagnostics` included.
pyo3::create_exception!(
    gyre,
    LoadError,
    PyValueError,
    "Invalid input: every problem as `file:line: message (field)`, as `gyre validate` prints it. \
     `.diagnostics` holds them as dicts (`file`, `line`, `message`, `field`). Picklable."
);

/// Runs `f`, turning a panic (a bug in gyre, never bad input) into a `RuntimeError`.
pub(crate) fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(PyRuntimeError::new_err(format!(
            "gyre internal error (a bug: please report it with the input): {what}"
        )))
    })
}

/// A `ValueError` carrying `message`.
pub(crate) fn value_error(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// The native module.
#[pymodule]
fn _gyre(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("LoadError", m.py().get_type::<LoadError>())?;
    m.add("SETTINGS", settings::table(m.py())?)?;
    m.add_class::<recorder::Recorder>()?;
    m.add_class::<batch::Batch>()?;
    m.add_class::<batch::Rows>()?;
    m.add_class::<batch::RowIter>()?;
    m.add_class::<follow::Follower>()?;
    m.add_class::<shard::ShardSummary>()?;
    m.add_class::<shard::BatchStats>()?;
    m.add_function(wrap_pyfunction!(batch::load, m)?)?;
    m.add_function(wrap_pyfunction!(follow::follow, m)?)?;
    m.add_function(wrap_pyfunction!(batch::merge_load_errors, m)?)?;
    m.add_function(wrap_pyfunction!(shard::split, m)?)?;
    m.add_function(wrap_pyfunction!(batch::load_parts, m)?)?;
    m.add_function(wrap_pyfunction!(shard::combine, m)?)?;
    m.add_function(wrap_pyfunction!(shard::shard_of, m)?)?;
    m.add_class::<runs::Runs>()?;
    m.add_function(wrap_pyfunction!(runs::index, m)?)?;
    m.add_function(wrap_pyfunction!(runs::load_runs, m)?)?;
    m.add_function(wrap_pyfunction!(runs::files_read, m)?)?;
    m.add_function(wrap_pyfunction!(tree::tree_pack, m)?)?;
    Ok(())
}
