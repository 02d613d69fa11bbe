//! `gyre.trainers.tree`'s native half: one step's rows laid out by the engine's
//! `tree_pack::layout`, returned as NumPy arrays with each target's coefficient, advantage and
//! behaviour log-prob (`python/gyre/trainers/tree.py` shapes the rest).

use gyre_engine::rows::Row;
use gyre_engine::tree_pack::{PackRow, TreePackError, layout as lay_out};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::batch::Rows;
use crate::{guard, value_error};

/// The tree packs of `views` (one step, or shards of one step), at most `max_tokens` tokens
/// each (`None`: one tree): a dict with `packs` (dicts of arrays), `row_tokens`, `tree_tokens`
/// and `left_out` (rows without targets).
#[pyfunction]
#[pyo3(signature = (views, *, max_tokens))]
pub fn tree_pack<'py>(
    py: Python<'py>,
    views: Vec<Bound<'py, Rows>>,
    max_tokens: Option<i64>,
) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let Some(first) = views.first() else {
            return Err(value_error("an empty step: no rows to pack"));
        };
        let mut seen = std::collections::HashSet::new();
        for v in &views {
            if !first.get().same_step(v.get()) {
                return Err(value_error(
                    "rows of two steps: a tree pack holds one optimizer step's rows (each step has \
                     its own B); pack each of rows.steps(executions=N) on its own",
                ));
            }
            for &e in v.get().execution_indices() {
                if !seen.insert(e) {
                    return Err(value_error(
                        "an execution's rows given twice: give each rank's shard of the step once",
                    ));
                }
            }
        }
        let budget = match max_tokens {
            None => usize::MAX,
            Some(n) if n > 0 => n as usize,
            Some(n) => return Err(value_error(format!("max_tokens must be positive, not {n}"))),
        };
        // Each row carries its view's `B` (`batch_executions`), the step's for every view here.
        let rows: Vec<Row> = views.iter().flat_map(|v| v.get().all_rows()).collect();
        let packed: Vec<PackRow> = rows
            .iter()
            .map(|r| PackRow {
                tokens: &r.tokens,
                prompt_len: r.prompt_len as usize,
                loss_mask: &r.loss_mask,
            })
            .collect();
        let layout = py
            .detach(|| lay_out(&packed, budget))
            .map_err(|e| value_error(describe(&e, &rows)))?;
        let with_logprobs = rows
            .iter()
            .all(|r| r.logprobs.is_some() || r.loss_mask.iter().all(|&m| m == 0));
        let packs = PyList::empty(py);
        for p in &layout.packs {
            let d = PyDict::new(py);
            d.set_item(
                "input_ids",
                array_i64(py, p.tokens.iter().map(|&t| t as i64)),
            )?;
            d.set_item(
                "position_ids",
                array_i64(py, p.positions.iter().map(|&t| t as i64)),
            )?;
            d.set_item("parent", PyArray1::from_slice(py, &p.parent))?;
            d.set_item(
                "subtree_end",
                array_i64(py, p.subtree_end.iter().map(|&t| t as i64)),
            )?;
            d.set_item("rows", array_i64(py, p.rows.iter().map(|&k| k as i64)))?;
            d.set_item(
                "target_row",
                array_i64(py, p.targets.iter().map(|t| t.row as i64)),
            )?;
            d.set_item(
                "target_offset",
                array_i64(py, p.targets.iter().map(|t| t.offset as i64)),
            )?;
            d.set_item(
                "target_pos",
                array_i64(py, p.targets.iter().map(|t| t.pos as i64)),
            )?;
            d.set_item(
                "target_ids",
                array_i64(
                    py,
                    p.targets
                        .iter()
                        .map(|t| rows[t.row as usize].tokens[t.offset as usize] as i64),
                ),
            )?;
            let per_target = |f: &dyn Fn(&Row, usize) -> f64| {
                let v: Vec<f64> = p
                    .targets
                    .iter()
                    .map(|t| {
                        let r = &rows[t.row as usize];
                        f(r, t.offset as usize - r.prompt_len as usize)
                    })
                    .collect();
                PyArray1::from_vec(py, v)
            };
            d.set_item(
                "coefficients",
                per_target(&|r, _| {
                    let b = r.batch_executions;
                    if b == 0 { 0.0 } else { r.weight / b as f64 }
                }),
            )?;
            d.set_item(
                "advantages",
                per_target(&|r, _| r.advantage.flatten().unwrap_or(0.0)),
            )?;
            if with_logprobs {
                d.set_item(
                    "old_log_probs",
                    per_target(&|r, j| r.logprobs.as_ref().map_or(0.0, |l| l[j])),
                )?;
            } else {
                d.set_item("old_log_probs", py.None())?;
            }
            d.set_item("recomputed", p.recomputed)?;
            packs.append(d)?;
        }
        let out = PyDict::new(py);
        out.set_item("packs", packs)?;
        out.set_item("row_tokens", layout.row_tokens)?;
        out.set_item("tree_tokens", layout.tree_tokens)?;
        out.set_item(
            "left_out",
            array_i64(py, layout.left_out.iter().map(|&k| k as i64)),
        )?;
        Ok(out)
    })
}

fn array_i64<'py>(py: Python<'py>, v: impl Iterator<Item = i64>) -> Bound<'py, PyArray1<i64>> {
    PyArray1::from_vec(py, v.collect())
}

/// The engine's error, its row named by execution and draw.
fn describe(e: &TreePackError, rows: &[Row]) -> String {
    let row = match e {
        TreePackError::RowTooLong { row, .. }
        | TreePackError::TargetAtStart { row }
        | TreePackError::Shape { row } => Some(*row as usize),
        TreePackError::Empty | TreePackError::Budget(_) => None,
    };
    match row.and_then(|k| rows.get(k)) {
        Some(r) => format!("{e} (execution {:?}, draw {})", r.execution, r.draw),
        None => e.to_string(),
    }
}
