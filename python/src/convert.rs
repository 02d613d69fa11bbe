//! Python values ↔ JSON values and token arrays, with the reason and the field on bad input.

use numpy::{PyReadonlyArray1, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PyString, PyTuple,
};
use serde_json::{Map, Number, Value};

use crate::value_error;

/// Nesting allowed in a JSON value given from Python. The loader reads a line at most 127
/// levels deep (serde_json's limit), so a deeper value could not be read back anyway; the bound
/// keeps a value that contains itself from recursing until the stack overflows.
const MAX_DEPTH: usize = 128;

/// A Python value as JSON: `None`, `bool`, `int` (64-bit), finite `float`, `str`, lists and
/// tuples, dicts with string keys (NumPy scalars count as their Python kind).
pub fn to_json(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Value> {
    to_json_at(obj, field, 0)
}

fn too_deep(field: &str) -> PyErr {
    value_error(format!(
        "{field}: nested more than {MAX_DEPTH} levels deep (or it contains itself)"
    ))
}

fn to_json_at(obj: &Bound<'_, PyAny>, field: &str, depth: usize) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if obj.is_instance_of::<PyFloat>() {
        let v: f64 = obj.extract()?;
        return Number::from_f64(v).map(Value::Number).ok_or_else(|| {
            value_error(format!(
                "{field}: {v} is not a finite number (JSON has none)"
            ))
        });
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(Value::from(v));
        }
        if let Ok(v) = obj.extract::<u64>() {
            return Ok(Value::from(v));
        }
        return Err(value_error(format!(
            "{field}: integer {obj} does not fit in 64 bits"
        )));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return Ok(Value::Object(dict_to_json_at(d, field, depth)?));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        if depth >= MAX_DEPTH {
            return Err(too_deep(field));
        }
        return obj
            .try_iter()?
            .enumerate()
            .map(|(i, item)| to_json_at(&item?, &format!("{field}[{i}]"), depth + 1))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    // NumPy scalars and arrays: as the Python values `tolist()` gives.
    if obj.cast::<PyUntypedArray>().is_ok() || obj.hasattr("dtype")? && obj.hasattr("tolist")? {
        return to_json_at(&obj.call_method0("tolist")?, field, depth + 1);
    }
    Err(value_error(format!(
        "{field}: a {} cannot be written as JSON (use None, bool, int, float, str, list or dict)",
        obj.get_type().name()?
    )))
}

/// A dict with string keys as a JSON object.
pub fn dict_to_json(d: &Bound<'_, PyDict>, field: &str) -> PyResult<Map<String, Value>> {
    dict_to_json_at(d, field, 0)
}

fn dict_to_json_at(
    d: &Bound<'_, PyDict>,
    field: &str,
    depth: usize,
) -> PyResult<Map<String, Value>> {
    if depth >= MAX_DEPTH {
        return Err(too_deep(field));
    }
    let mut m = Map::new();
    for (k, v) in d.iter() {
        let key: String = k
            .extract()
            .map_err(|_| value_error(format!("{field}: keys must be strings, not {k:?}")))?;
        let value = to_json_at(&v, &format!("{field}.{key}"), depth + 1)?;
        m.insert(key, value);
    }
    Ok(m)
}

/// An optional dict argument (`meta`) as a JSON object.
pub fn opt_map(
    obj: Option<&Bound<'_, PyAny>>,
    field: &str,
) -> PyResult<Option<Map<String, Value>>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => match o.cast::<PyDict>() {
            Ok(d) => dict_to_json(d, field).map(Some),
            Err(_) => Err(value_error(format!("{field} must be a dict"))),
        },
    }
}

/// An optional JSON-valued argument (`None` stays absent).
pub fn opt_json(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<Value>> {
    match obj {
        Some(o) if !o.is_none() => to_json(o, field).map(Some),
        _ => Ok(None),
    }
}

/// A JSON value as a Python object (objects keep their key order).
pub fn from_json<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(from_json(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, from_json(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// Strings and bytes iterate but are not token arrays; dicts and sets iterate in an order that
/// is not the caller's sequence (a dict's keys, a set's hash order).
fn not_a_sequence(obj: &Bound<'_, PyAny>, field: &str, what: &str) -> PyResult<()> {
    if obj.is_instance_of::<PyString>()
        || obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyDict>()
        || obj.is_instance_of::<PySet>()
        || obj.is_instance_of::<PyFrozenSet>()
    {
        return Err(value_error(format!(
            "{field} must be a list of {what} or a NumPy array, not {}",
            obj.get_type().name()?
        )));
    }
    Ok(())
}

/// Iterates a sequence argument; anything else is a `ValueError` naming what was expected.
fn iterate<'py>(
    obj: &Bound<'py, PyAny>,
    field: &str,
    what: &str,
) -> PyResult<Bound<'py, pyo3::types::PyIterator>> {
    let kind = || {
        obj.get_type()
            .name()
            .map_or("?".to_owned(), |n| n.to_string())
    };
    obj.try_iter().map_err(|_| {
        value_error(format!(
            "{field} must be a list of {what} or a NumPy array, not {}",
            kind()
        ))
    })
}

fn bad_token(field: &str, i: usize, got: impl std::fmt::Display) -> PyErr {
    value_error(format!(
        "token ids must be integers in 0..2^32: got {got} ({field}[{i}])"
    ))
}

fn ids_from(values: impl Iterator<Item = i128>, field: &str) -> PyResult<Vec<u32>> {
    values
        .enumerate()
        .map(|(i, v)| u32::try_from(v).map_err(|_| bad_token(field, i, v)))
        .collect()
}

fn one_dimensional<'py>(
    obj: &Bound<'py, PyAny>,
    field: &str,
) -> PyResult<Option<Bound<'py, PyUntypedArray>>> {
    let Ok(arr) = obj.cast::<PyUntypedArray>() else {
        return Ok(None);
    };
    if arr.ndim() != 1 {
        return Err(value_error(format!(
            "{field} must be one-dimensional (got shape {:?})",
            arr.shape()
        )));
    }
    Ok(Some(arr.clone()))
}

/// Token ids from a list/tuple/iterable of ints or a 1-D NumPy array of any integer dtype.
pub fn token_ids(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Vec<u32>> {
    not_a_sequence(obj, field, "token ids")?;
    if let Some(arr) = one_dimensional(obj, field)? {
        if let Ok(a) = obj.extract::<PyReadonlyArray1<u32>>() {
            return Ok(match a.as_slice() {
                Ok(s) => s.to_vec(),
                Err(_) => a.as_array().iter().copied().collect(),
            });
        }
        macro_rules! widen {
            ($($t:ty),*) => {$(
                if let Ok(a) = obj.extract::<PyReadonlyArray1<$t>>() {
                    return ids_from(a.as_array().iter().map(|&v| v as i128), field);
                }
            )*};
        }
        widen!(i64, u64, i32, u16, i16, u8, i8);
        return Err(value_error(format!(
            "token ids must be integers in 0..2^32: {field} has dtype {}",
            arr.dtype()
        )));
    }
    let mut out = Vec::with_capacity(obj.len().unwrap_or(0));
    for (i, item) in iterate(obj, field, "token ids")?.enumerate() {
        let item = item?;
        if item.is_instance_of::<PyBool>() {
            return Err(bad_token(field, i, item));
        }
        let v = item
            .extract::<i64>()
            .map_err(|_| bad_token(field, i, item.repr().map_or("?".into(), |r| r.to_string())))?;
        out.push(u32::try_from(v).map_err(|_| bad_token(field, i, v))?);
    }
    Ok(out)
}

/// Finite floats from a list/iterable of numbers or a 1-D NumPy float array.
pub fn floats(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Vec<f64>> {
    not_a_sequence(obj, field, "numbers")?;
    let values: Vec<f64> = if let Some(arr) = one_dimensional(obj, field)? {
        if let Ok(a) = obj.extract::<PyReadonlyArray1<f64>>() {
            a.as_array().to_vec()
        } else if let Ok(a) = obj.extract::<PyReadonlyArray1<f32>>() {
            a.as_array().iter().map(|&v| v as f64).collect()
        } else {
            return Err(value_error(format!(
                "{field} must hold floats: got dtype {}",
                arr.dtype()
            )));
        }
    } else {
        iterate(obj, field, "numbers")?
            .enumerate()
            .map(|(i, item)| {
                let item = item?;
                if item.is_instance_of::<PyBool>() {
                    return Err(value_error(format!(
                        "{field}[{i}] must be a number, not {item:?}"
                    )));
                }
                item.extract::<f64>().map_err(|_| {
                    value_error(format!("{field}[{i}] must be a number, not {item:?}"))
                })
            })
            .collect::<PyResult<_>>()?
    };
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(value_error(format!(
            "{field}[{i}] must be a finite number (got {})",
            values[i]
        )));
    }
    Ok(values)
}
