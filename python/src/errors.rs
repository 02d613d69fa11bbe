//! The engine's and the system's errors as Python exceptions: `gyre.LoadError` with its
//! diagnostics, and `OSError` with the errno's subclass. Below every module that raises them.

use std::io;

use gyre_engine::load::LoadError as EngineLoadError;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::LoadError;

/// The engine's load error as `gyre.LoadError` (a `ValueError`), `file:line` per problem.
pub fn load_error(e: &EngineLoadError) -> PyErr {
    let err = LoadError::new_err(e.to_string());
    Python::attach(|py| {
        let diagnostics = PyList::empty(py);
        for d in &e.diagnostics {
            let item = PyDict::new(py);
            item.set_item("file", d.file.display().to_string())?;
            item.set_item("line", d.line)?;
            item.set_item("message", &d.message)?;
            item.set_item("field", d.field.as_deref())?;
            diagnostics.append(item)?;
        }
        err.value(py).setattr("diagnostics", diagnostics)
    })
    .map_or_else(|e| e, |()| err)
}

/// An `OSError` (the subclass Python picks for the errno, with the system's message) naming
/// `path`.
pub fn os_error(e: &io::Error, path: &std::path::Path, hint: &str) -> PyErr {
    let Some(errno) = e.raw_os_error() else {
        return PyOSError::new_err(format!("{}: {e}{hint}", path.display()));
    };
    let strerror = Python::attach(|py| -> PyResult<String> {
        py.import("os")?
            .call_method1("strerror", (errno,))?
            .extract()
    })
    .unwrap_or_else(|_| e.kind().to_string());
    PyOSError::new_err((
        errno,
        format!("{strerror}{hint}"),
        path.display().to_string(),
    ))
}
