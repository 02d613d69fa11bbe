//! The admission settings as Python keyword arguments, built from the engine's table
//! (`admit::SETTINGS`): `Batch.admit` and `follow` take `**settings`, read here through the
//! table's parsers, and `gyre.SETTINGS` shows the table (the stub's keywords are generated
//! from it, `python/tests/test_stubs.py`).

use gyre_engine::admit::{SETTINGS, Settings};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString, PyTuple};

use crate::value_error;

/// The settings named by `kwargs` (each a key of `admit::SETTINGS`), the table's default for
/// the others. A value is taken as the table's parser reads text: an integer as its digits, a
/// string as it is, a list of strings joined by commas; `None` stands for the default. `what`
/// names the function in the error, as Python's own (`follow()`).
pub fn from_kwargs(what: &str, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Settings> {
    let mut out = Settings::default();
    for (key, value) in kwargs.into_iter().flatten() {
        let key: String = key.extract()?;
        let Some(setting) = Settings::setting(&key) else {
            return Err(PyTypeError::new_err(format!(
                "{what} got an unexpected keyword argument '{key}'; the admission settings are {}",
                Settings::keys()
            )));
        };
        if value.is_none() {
            continue;
        }
        let text = as_text(&key, &value)?;
        (setting.parse)(&mut out, &text).map_err(value_error)?;
    }
    Ok(out)
}

/// A keyword's value as the table's text: a bool is refused (it is an `int` in Python, and
/// `jmax=True` is a mistake, not J_max 1).
fn as_text(key: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if value.is_instance_of::<PyBool>() {
        return Err(value_error(format!(
            "{key} takes a number or text, not a bool"
        )));
    }
    if value.is_instance_of::<PyInt>() {
        return Ok(value.str()?.to_str()?.to_owned());
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(s.to_str()?.to_owned());
    }
    let items: Vec<String> = value.extract().map_err(|_| {
        value_error(format!(
            "{key} takes a number, a string or a list of strings, not {}",
            value
                .get_type()
                .name()
                .map_or_else(|_| "this value".into(), |n| n.to_string())
        ))
    })?;
    Ok(items.join(","))
}

/// `gyre.SETTINGS`: per setting `(key, python type, python default, help)`, in the table's
/// order: what the stub's keyword lines are generated from.
pub fn table(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    let rows = SETTINGS
        .iter()
        .map(|s| {
            PyTuple::new(
                py,
                [
                    s.key.to_owned(),
                    s.python.to_owned(),
                    python_literal(s.default),
                    s.help.to_owned(),
                ],
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, rows)
}

/// A table default as a Python literal: digits stay a number, anything else is a string.
fn python_literal(default: &str) -> String {
    if !default.is_empty() && default.bytes().all(|b| b.is_ascii_digit()) {
        default.to_owned()
    } else {
        serde_json::Value::from(default).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::python_literal;

    #[test]
    fn defaults_become_python_literals() {
        assert_eq!(python_literal("5"), "5");
        assert_eq!(python_literal("main,sub"), "\"main,sub\"");
        assert_eq!(python_literal(""), "\"\"");
    }
}
