//! `gyre.load` → `Batch`, `Batch.admit` → `Rows`: the engine's batch and its admitted rows, as
//! dicts, NumPy arrays, Arrow (C stream) and files, plus what a notebook asks about an execution.

use std::path::PathBuf;
use std::sync::Arc;

use gyre_engine::export;
use gyre_engine::load::{self as engine_load, Input, LoadError as EngineLoadError, LoadOptions};
use gyre_engine::report;
use gyre_engine::rows::{self, Row};
use gyre_engine::score::{AdvantageMode, Outcome};
use gyre_engine::{self as eng, Results, lens, shard, steps, why};
use gyre_format::named::Named;
use gyre_format::output::ExistsError;
use numpy::PyArray1;
use pyo3::exceptions::{PyFileNotFoundError, PyIndexError, PyKeyError, PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use serde_json::json;

use crate::arrow::stream_capsule;
use crate::convert::from_json;
use crate::errors::load_error;
use crate::settings;
use crate::shard::{BatchStats, ShardSummary};
use crate::{guard, value_error};

/// POSIX `ENOENT` (2 on every platform Python runs on), the errno of a missing input.
const ENOENT: i32 = 2;

/// One `LoadError` holding the diagnostics of several (one per shard), in the order of
/// `files` then line: what one load of all inputs would have raised.
#[pyfunction]
pub fn merge_load_errors(
    py: Python<'_>,
    files: Vec<String>,
    errors: Vec<Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    guard(|| {
        let mut diagnostics = Vec::new();
        for e in &errors {
            let list: Vec<Bound<'_, PyDict>> =
                e.getattr("diagnostics")
                    .and_then(|d| d.extract())
                    .map_err(|_| value_error("errors must be gyre.LoadError instances"))?;
            for d in list {
                let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
                    d.get_item(k)?
                        .ok_or_else(|| value_error(format!("a diagnostic without `{k}`")))
                };
                diagnostics.push(engine_load::Diagnostic {
                    file: PathBuf::from(get("file")?.extract::<String>()?),
                    line: get("line")?.extract()?,
                    message: get("message")?.extract()?,
                    field: get("field")?.extract()?,
                });
            }
        }
        let rank = |f: &std::path::Path| {
            files
                .iter()
                .position(|g| std::path::Path::new(g) == f)
                .unwrap_or(usize::MAX)
        };
        diagnostics.sort_by_key(|a| (rank(&a.file), a.line));
        Ok(load_error(&EngineLoadError {
            diagnostics,
            warnings: Vec::new(),
            stopped: false,
        })
        .into_value(py)
        .into_any())
    })
}

/// Paths from one path or a sequence of them.
fn paths_arg(paths: &Bound<'_, PyAny>) -> PyResult<Vec<PathBuf>> {
    let list: Vec<PathBuf> = if paths.is_instance_of::<PyString>() || paths.hasattr("__fspath__")? {
        vec![paths.extract()?]
    } else {
        paths
            .extract()
            .map_err(|_| value_error("paths must be a path or a list of paths"))?
    };
    if list.is_empty() {
        return Err(value_error("no input files"));
    }
    Ok(list)
}

/// Loads gyre/1 recordings (`.jsonl`, `.jsonl.gz`, `.jsonl.zst`), read in the order given.
///
/// Raises `FileNotFoundError` (an `OSError`, `.filename` the path) for an input that does not
/// exist, as `open` would, and `gyre.LoadError` (a `ValueError`) naming `file:line` and the field
/// of every problem in the inputs that do.
/// `lenient=True` skips bad lines (and executions whose tree can no longer be built) instead,
/// listing them in `Batch.warnings`.
#[pyfunction]
#[pyo3(signature = (paths, *, lenient=false))]
pub fn load(py: Python<'_>, paths: &Bound<'_, PyAny>, lenient: bool) -> PyResult<Batch> {
    guard(|| {
        let paths = paths_arg(paths)?;
        if let Some(missing) = paths.iter().find(
            |p| matches!(std::fs::metadata(p), Err(e) if e.kind() == std::io::ErrorKind::NotFound),
        ) {
            return Err(PyFileNotFoundError::new_err((
                ENOENT,
                "No such file or directory",
                missing.display().to_string(),
            )));
        }
        let options = LoadOptions {
            lenient,
            ..LoadOptions::default()
        };
        let batch = py
            .detach(|| engine_load::load(&paths, &options, &|_, _| {}))
            .map_err(|e| load_error(&e))?;
        Ok(Batch::new(batch))
    })
}

/// Loaded recordings: executions with their shared-prefix trees, ready to admit.
#[pyclass(module = "gyre._gyre", frozen)]
pub struct Batch {
    pub(crate) inner: Arc<engine_load::Batch>,
}

impl Batch {
    /// Wraps a loaded batch.
    pub fn new(batch: engine_load::Batch) -> Self {
        Batch {
            inner: Arc::new(batch),
        }
    }
}

pub(crate) fn advantage_mode(s: &str) -> PyResult<AdvantageMode> {
    AdvantageMode::parse(s).ok_or_else(|| {
        value_error(format!(
            "advantage must be one of {}, not {s:?}",
            AdvantageMode::names()
        ))
    })
}

#[pymethods]
impl Batch {
    /// Scores and admits every execution (docs/format.md §4–§6) and returns the admitted rows.
    ///
    /// Each admission setting is a keyword (`gyre.SETTINGS`, the engine's table): `seed` keys
    /// each execution's draws; `jmax` caps draws per execution (0 = uncapped); `priority` lists
    /// classes highest first (`["main", "sub"]` or `"main,sub"`; classes left out are never
    /// drawn). `advantage` is `"drgrpo"` (reward − group mean), `"grpo"` (÷ std +
    /// 1e-6) or `"none"` (no advantage field). `stats` (from `gyre.combine`) admits this batch
    /// as one shard of a larger one: `B` and group advantages are then the whole batch's.
    #[pyo3(signature = (*, advantage="drgrpo", stats=None, **settings))]
    fn admit(
        &self,
        py: Python<'_>,
        advantage: &str,
        stats: Option<PyRef<'_, BatchStats>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Rows> {
        guard(|| {
            let settings = settings::from_kwargs("admit()", settings)?;
            let mode = advantage_mode(advantage)?;
            let batch = Arc::clone(&self.inner);
            let results = match stats {
                None => py.detach(|| eng::process(&batch, &settings, mode)),
                Some(stats) => {
                    let stats = &stats.inner;
                    py.detach(|| shard::process_shard(&batch, &settings, mode, stats))
                        .map_err(|e| value_error(e.to_string()))?
                }
            };
            Ok(Rows::new(batch, results))
        })
    }

    /// What this batch contributes to `B` and group statistics when it is one shard of a
    /// larger batch (see `gyre.combine`).
    fn summary(&self, py: Python<'_>) -> PyResult<ShardSummary> {
        guard(|| {
            let batch = Arc::clone(&self.inner);
            Ok(ShardSummary {
                inner: py.detach(|| shard::summarize(&batch)),
            })
        })
    }

    /// Execution ids, in order of first appearance.
    #[getter]
    fn executions(&self) -> Vec<String> {
        self.inner.executions.iter().map(|e| e.id.clone()).collect()
    }

    /// The input files, in the order read.
    #[getter]
    fn files(&self) -> Vec<String> {
        self.inner
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect()
    }

    /// Warnings (and lines skipped under `lenient`) as `file:line: message`.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings.iter().map(|w| w.to_string()).collect()
    }

    /// Lines skipped under `lenient`.
    #[getter]
    fn skipped_lines(&self) -> u64 {
        self.inner.skipped_lines
    }

    /// Executions dropped under `lenient` (their tree could not be built).
    #[getter]
    fn dropped_executions(&self) -> Vec<String> {
        self.inner.dropped_executions.clone()
    }

    fn __len__(&self) -> usize {
        self.inner.executions.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Batch({} executions from {})",
            self.inner.executions.len(),
            report::plural(self.inner.files.len(), "file")
        )
    }
}

/// The admitted rows of a batch (`gyre/admitted-1`, docs/format.md §8), in execution order then draw
/// order: the rows `gyre admit` writes for the same input and settings.
///
/// Iterate for dicts (the export's fields, lists for arrays); `row(i, numpy=True)` or
/// `iter(numpy=True)` give `tokens`, `loss_mask` and `logprobs` as NumPy arrays; `to_arrow()`
/// a `pyarrow.Table` (list columns, through the Arrow C stream interface); `write(path)` JSONL
/// or Parquet, like `gyre admit --out`. Per execution: `executions()`, `execution(id)`,
/// `draw_log(id)`.
#[pyclass(module = "gyre._gyre", frozen)]
pub struct Rows {
    batch: Arc<engine_load::Batch>,
    results: Arc<Results>,
    /// The executions these rows come from, ascending: every execution of the batch, or those of
    /// one step or one rank's shard of it.
    execs: Arc<Vec<usize>>,
    /// Whether this is the whole batch (not a step or shard).
    whole: bool,
    /// `B` of these rows' loss: the batch's, or the step's.
    b: u64,
    /// `starts[k]`: index of the first row of `execs[k]`; `starts[n]` = number of rows.
    starts: Vec<usize>,
    /// Rows and targets of the step these rows belong to (their own for a batch or a step; the
    /// whole step's for one rank's shard): the global counts a trainer normalises by.
    step_rows: usize,
    step_targets: u64,
    /// The executions of the step these rows belong to (`execs` but for one rank's shard):
    /// what tells rows of two steps apart (`gyre.trainers.tree`).
    step_of: Arc<Vec<usize>>,
}

impl Rows {
    /// The rows of a whole batch under `results`.
    pub(crate) fn new(batch: Arc<engine_load::Batch>, results: Results) -> Self {
        let execs = Arc::new((0..batch.executions.len()).collect());
        let b = results.batch_executions;
        Rows::view(batch, Arc::new(results), execs, b, true, None)
    }

    fn view(
        batch: Arc<engine_load::Batch>,
        results: Arc<Results>,
        execs: Arc<Vec<usize>>,
        b: u64,
        whole: bool,
        step: Option<(usize, u64)>,
    ) -> Self {
        let mut starts = Vec::with_capacity(execs.len() + 1);
        let mut n = 0;
        starts.push(0);
        for &i in execs.iter() {
            n += rows::row_size(&batch, &results, i).0;
            starts.push(n);
        }
        let (step_rows, step_targets) = step.unwrap_or_else(|| {
            let targets = execs
                .iter()
                .map(|&i| steps::execution_targets(&results, i))
                .sum();
            (n, targets)
        });
        Rows {
            batch,
            results,
            step_of: Arc::clone(&execs),
            execs,
            whole,
            b,
            starts,
            step_rows,
            step_targets,
        }
    }

    /// A step (`shard` false) or one rank's shard of these rows: the executions
    /// `step.executions` with `step`'s `B`; a shard keeps these rows' step counts.
    fn sub(&self, step: steps::Step, shard: bool) -> Rows {
        let mut rows = Rows::view(
            Arc::clone(&self.batch),
            Arc::clone(&self.results),
            Arc::new(step.executions),
            step.batch_executions,
            false,
            shard.then_some((self.step_rows, self.step_targets)),
        );
        if shard {
            rows.step_of = Arc::clone(&self.step_of);
        }
        rows
    }

    /// Every row of this view, in row order, with this view's `B`.
    pub(crate) fn all_rows(&self) -> Vec<Row> {
        (0..self.execs.len())
            .flat_map(|k| self.exec_rows(k))
            .collect()
    }

    /// Whether `other` holds rows of the same optimizer step (the same admission, the same
    /// step's executions and `B`).
    pub(crate) fn same_step(&self, other: &Rows) -> bool {
        Arc::ptr_eq(&self.results, &other.results)
            && self.b == other.b
            && self.step_of == other.step_of
    }

    /// The batch's execution indices these rows come from.
    pub(crate) fn execution_indices(&self) -> &[usize] {
        &self.execs
    }

    fn len(&self) -> usize {
        *self.starts.last().unwrap_or(&0)
    }

    /// The rows of `execs[k]`, with this view's `B`.
    fn exec_rows(&self, k: usize) -> Vec<Row> {
        let mut rows = rows::execution_rows(&self.batch, &self.results, self.execs[k]);
        for r in &mut rows {
            r.batch_executions = self.b;
        }
        rows
    }

    /// The position (in `execs`) of the execution holding row `i`, and the row's index among
    /// its rows.
    fn locate(&self, i: usize) -> (usize, usize) {
        let k = self.starts.partition_point(|&s| s <= i) - 1;
        (k, i - self.starts[k])
    }

    /// This view's counted executions, as a step of its own `B`.
    fn as_step(&self) -> steps::Step {
        let executions: Vec<usize> = self
            .execs
            .iter()
            .copied()
            .filter(|&i| self.results.outcomes[i].counts())
            .collect();
        steps::Step {
            executions,
            batch_executions: self.b,
        }
    }

    fn index(&self, key: &str) -> PyResult<usize> {
        self.batch.execution_index(key).ok_or_else(|| {
            let known: Vec<&str> = self
                .batch
                .executions
                .iter()
                .take(8)
                .map(|e| e.id.as_str())
                .collect();
            PyKeyError::new_err(format!(
                "no execution {key:?} in the batch (first ids: {})",
                known.join(", ")
            ))
        })
    }
}

/// A row as a dict, fields in export order; arrays as lists or NumPy arrays.
fn row_dict<'py>(py: Python<'py>, row: Row, numpy: bool) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("execution", &row.execution)?;
    d.set_item(
        "group",
        match &row.group {
            Some(g) => from_json(py, g)?,
            None => py.None().into_bound(py),
        },
    )?;
    d.set_item("draw", row.draw)?;
    d.set_item("leaf", row.leaf.as_deref())?;
    d.set_item("class", row.class.map(|c| c.name()))?;
    d.set_item("reward", row.reward)?;
    if let Some(adv) = row.advantage {
        d.set_item("advantage", adv)?;
    }
    d.set_item("dummy", row.dummy)?;
    if numpy {
        d.set_item("tokens", PyArray1::from_vec(py, row.tokens))?;
    } else {
        d.set_item("tokens", PyList::new(py, &row.tokens)?)?;
    }
    d.set_item("prompt_len", row.prompt_len)?;
    if numpy {
        d.set_item("loss_mask", PyArray1::from_vec(py, row.loss_mask))?;
    } else {
        d.set_item("loss_mask", PyList::new(py, &row.loss_mask)?)?;
    }
    match row.logprobs {
        Some(lp) if numpy => d.set_item("logprobs", PyArray1::from_vec(py, lp))?,
        Some(lp) => d.set_item("logprobs", PyList::new(py, &lp)?)?,
        None => d.set_item("logprobs", py.None())?,
    }
    d.set_item("temperature", row.temperature)?;
    let targets = PyList::empty(py);
    for t in &row.targets {
        let td = PyDict::new(py);
        td.set_item("request", &t.request)?;
        td.set_item("offset", t.offset)?;
        td.set_item("len", t.len)?;
        td.set_item("pos", t.pos)?;
        td.set_item("temperature", t.temperature)?;
        targets.append(td)?;
    }
    d.set_item("targets", targets)?;
    d.set_item("exec_targets", row.exec_targets)?;
    d.set_item("weight", row.weight)?;
    d.set_item("batch_executions", row.batch_executions)?;
    Ok(d)
}

/// A file error from writing rows: `FileExistsError` for an existing file (without `force`).
fn write_error(e: eyre::Report, path: &std::path::Path) -> PyErr {
    if e.downcast_ref::<ExistsError>().is_some() {
        return PyOSError::new_err((
            17,
            "File exists (pass force=True to overwrite it)",
            path.display().to_string(),
        ));
    }
    let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
    PyOSError::new_err(chain.join(": "))
}

#[pymethods]
impl Rows {
    fn __len__(&self) -> usize {
        self.len()
    }

    /// Row `i` as a dict (negative indexes count from the end).
    fn __getitem__(&self, py: Python<'_>, i: isize) -> PyResult<Py<PyDict>> {
        self.row(py, i, false)
    }

    /// Row `i` as a dict; with `numpy=True` its `tokens` (uint32), `loss_mask` (uint8) and
    /// `logprobs` (float64, or `None`) are NumPy arrays.
    #[pyo3(signature = (i, *, numpy=false))]
    fn row(&self, py: Python<'_>, i: isize, numpy: bool) -> PyResult<Py<PyDict>> {
        guard(|| {
            let n = self.len() as isize;
            let j = if i < 0 { i + n } else { i };
            if !(0..n).contains(&j) {
                return Err(PyIndexError::new_err(format!(
                    "row {i} out of range ({n} rows)"
                )));
            }
            let (k, r) = self.locate(j as usize);
            let row = self.exec_rows(k).swap_remove(r);
            Ok(row_dict(py, row, numpy)?.unbind())
        })
    }

    fn __iter__(slf: Py<Self>) -> RowIter {
        RowIter::new(slf, false)
    }

    /// Iterates over the rows as dicts (`numpy=True`: arrays as NumPy arrays).
    #[pyo3(signature = (*, numpy=false))]
    fn iter(slf: Py<Self>, numpy: bool) -> RowIter {
        RowIter::new(slf, numpy)
    }

    /// The rows as a `pyarrow.Table` (one column per export field; `group` as text).
    ///
    /// The columns are built once in Rust and handed to pyarrow through the Arrow C stream
    /// interface without another copy.
    fn to_arrow<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let pa = slf.py().import("pyarrow")?;
        pa.getattr("RecordBatchReader")?
            .call_method1("from_stream", (slf,))?
            .call_method0("read_all")
    }

    /// The rows as a `pandas.DataFrame` (through `to_arrow()`).
    fn to_pandas<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        Rows::to_arrow(slf)?.call_method0("to_pandas")
    }

    /// The Arrow PyCapsule stream protocol: record batches of bounded size, built as read.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // The schema is fixed; a requested one is a hint the protocol lets producers ignore.
        let _ = requested_schema;
        guard(|| {
            stream_capsule(
                py,
                Arc::clone(&self.batch),
                Arc::clone(&self.results),
                (!self.whole).then(|| (Arc::clone(&self.execs), self.b)),
            )
        })
    }

    /// Writes the rows to `path` as `gyre admit --out path` does: Parquet for `.parquet`, JSONL
    /// otherwise (compressed for `.zst`/`.gz`); atomically, and never over an existing file
    /// unless `force`. Returns the number of rows.
    #[pyo3(signature = (path, *, force=false))]
    fn write(&self, py: Python<'_>, path: PathBuf, force: bool) -> PyResult<u64> {
        guard(|| {
            if !self.whole {
                return Err(value_error(
                    "a step or shard is a view of the batch's rows: write the batch (its rows, \
                     with the batch's B), or pyarrow.parquet.write_table(step.to_arrow(), path)",
                ));
            }
            let (batch, results) = (&self.batch, &self.results);
            py.detach(|| export::write_file(batch, results, &path, force))
                .map_err(|e| write_error(e, &path))
        })
    }

    /// `B` of these rows' loss (docs/format.md §6): scored and dummy executions in the batch, or in the
    /// step for a step (and its shards).
    #[getter]
    fn batch_executions(&self) -> u64 {
        self.b
    }

    /// Whether these are the whole batch's rows (not a step's or a shard's).
    #[getter]
    fn is_batch(&self) -> bool {
        self.whole
    }

    /// Ids of the executions these rows come from (counted or not), in row order.
    #[getter]
    fn execution_ids(&self) -> Vec<String> {
        self.execs
            .iter()
            .map(|&i| self.batch.executions[i].id.clone())
            .collect()
    }

    /// Tokens of these rows (prompt and response: what a forward pass reads).
    #[getter]
    fn tokens(&self) -> u64 {
        self.execs
            .iter()
            .map(|&i| steps::row_tokens(&self.batch, &self.results, i))
            .sum()
    }

    /// Trained tokens of these rows: `Σ loss_mask` = `Σ_i L_i`.
    #[getter]
    fn targets(&self) -> u64 {
        self.execs
            .iter()
            .map(|&i| steps::execution_targets(&self.results, i))
            .sum()
    }

    /// Rows of the step these rows belong to: `len(self)`, except for one rank's shard, where
    /// it is the whole step's (the global batch size a data-parallel trainer divides by).
    #[getter]
    fn step_rows(&self) -> usize {
        self.step_rows
    }

    /// Trained tokens of the step these rows belong to: `self.targets`, except for one rank's
    /// shard, where it is the whole step's (the global token count a trainer divides by).
    #[getter]
    fn step_targets(&self) -> u64 {
        self.step_targets
    }

    /// The loss coefficient of every response token, one float64 array per row over
    /// `tokens[prompt_len:]`: `loss_mask * weight / B` (docs/format.md §6), `B` these rows'. The loss is
    /// `Σ_rows Σ_t coefficient · ℓ_t` (`gyre.torch.loss`), whatever the per-token loss.
    fn coefficients<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyArray1<f64>>>> {
        guard(|| {
            let b = self.b;
            let (batch, results, execs) = (&self.batch, &self.results, &self.execs);
            let per_row: Vec<Vec<f64>> = py.detach(|| {
                use rayon::prelude::*;
                execs
                    .par_iter()
                    .flat_map_iter(|&i| {
                        rows::execution_rows(batch, results, i)
                            .into_iter()
                            .map(|r| steps::coefficients(&r.loss_mask, r.weight, b))
                    })
                    .collect()
            });
            Ok(per_row
                .into_iter()
                .map(|c| PyArray1::from_vec(py, c))
                .collect())
        })
    }

    /// The rows in optimizer steps of `executions` counted executions each (the last step holds
    /// the rest): whole executions, in order, each step with its own `B` (the executions it
    /// holds). Excluded executions have no rows and belong to no step.
    #[pyo3(signature = (*, executions))]
    fn steps(&self, executions: i64) -> PyResult<Vec<Rows>> {
        guard(|| {
            if executions < 1 {
                return Err(value_error(format!(
                    "executions must be a positive integer, not {executions}"
                )));
            }
            let step = self.as_step();
            Ok(steps::steps(&step.executions, executions as usize)
                .into_iter()
                .map(|s| self.sub(s, false))
                .collect())
        })
    }

    /// These rows dealt to `world_size` data-parallel ranks: whole executions per rank, balanced
    /// by row tokens, every rank with these rows' `B` (so the ranks' summed losses are this
    /// step's loss). A rank may get no execution when there are fewer executions than ranks.
    #[pyo3(signature = (*, world_size))]
    fn shard(&self, world_size: i64) -> PyResult<Vec<Rows>> {
        guard(|| {
            if !(1..=1 << 20).contains(&world_size) {
                return Err(value_error(format!(
                    "world_size must be an integer in 1..=1048576, not {world_size}"
                )));
            }
            let step = self.as_step();
            let (batch, results) = (&self.batch, &self.results);
            Ok(steps::shard(
                &step,
                |e| steps::row_tokens(batch, results, e),
                world_size as usize,
            )
            .into_iter()
            .map(|s| self.sub(s, true))
            .collect())
        })
    }

    /// The admission settings: `seed`, `jmax`, `priority`, `advantage`.
    #[getter]
    fn settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (key, value) in self
            .results
            .settings
            .to_json()
            .as_object()
            .into_iter()
            .flatten()
        {
            d.set_item(key, from_json(py, value)?)?;
        }
        d.set_item("advantage", self.results.advantage_mode.name())?;
        Ok(d)
    }

    /// One dict per execution: `execution`, `group`, `status` (`scored`, `dummy`, `excluded`),
    /// `reason` (why excluded), `reward`, `advantage`, `requests`, `candidates`, `draws`,
    /// `rows`, `exec_targets` (`L_i`) and `weight` (`1/L_i`). Feeds `pandas.DataFrame`.
    fn executions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        guard(|| {
            let out = PyList::empty(py);
            for (k, &i) in self.execs.iter().enumerate() {
                let e = &self.batch.executions[i];
                let outcome = &self.results.outcomes[i];
                let adm = &self.results.admissions[i];
                let targets = adm.targets();
                let v = json!({
                    "execution": e.id,
                    "group": e.group(),
                    "status": outcome.label(),
                    "reason": match outcome { Outcome::Excluded(x) => Some(x.to_string()), _ => None },
                    "reward": outcome.reward(),
                    "advantage": self.results.advantages[i],
                    "requests": e.requests.len(),
                    "candidates": adm.candidates.len(),
                    "draws": adm.draws.len(),
                    "rows": self.starts[k + 1] - self.starts[k],
                    "exec_targets": targets,
                    "weight": eng::loss::target_weight(targets),
                });
                out.append(from_json(py, &v)?)?;
            }
            Ok(out)
        })
    }

    /// Everything decided about execution `execution`: status, reason, reward, group,
    /// advantage, candidates (request and class), the draws (per draw the class, each
    /// candidate's weight and probability, the chosen leaf, the targets it fixed), why drawing
    /// stopped, `exec_targets`, and every assessment with its relation to the closure. The
    /// same values as `gyre replay --json`. Raises `KeyError` for an unknown id.
    fn execution<'py>(&self, py: Python<'py>, execution: &str) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let i = self.index(execution)?;
            let mut v = report::replay_json(&self.batch, &self.results, i);
            if let Some(obj) = v.as_object_mut() {
                obj.insert("group".into(), json!(self.batch.executions[i].group()));
                obj.insert("advantage".into(), json!(self.results.advantages[i]));
                obj.insert("batch_executions".into(), json!(self.b));
            }
            from_json(py, &v)
        })
    }

    /// Why request `request` of `execution` was (not) drawn under these rows' settings: the
    /// same object as `gyre why --json` (`fate` is one of `drawn`, `j_max`, `exhausted`,
    /// `class_not_listed`, `excluded`, `dummy`, `not_candidate`; `draws` its standing at every
    /// draw). With `seeds=N`, also its `lens` over N seeds from these rows' seed on (as `gyre
    /// why --seeds N`): how often it is drawn, the smallest J_max that draws it, what a
    /// priority with its class first would do. Raises `KeyError` for an unknown execution or
    /// request id, `ValueError` for `seeds` outside 1..=4096.
    #[pyo3(signature = (execution, request, *, seeds=None))]
    fn why<'py>(
        &self,
        py: Python<'py>,
        execution: &str,
        request: &str,
        seeds: Option<i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let i = self.index(execution)?;
            let exec = &self.batch.executions[i];
            let r = exec.request_index(request).ok_or_else(|| {
                PyKeyError::new_err(format!(
                    "execution {execution:?} has no request {request:?}"
                ))
            })?;
            let seeds = match seeds {
                Some(n @ 1..=4096) => Some(n as u32),
                Some(n) => return Err(value_error(format!("seeds must be 1..=4096, got {n}"))),
                None => None,
            };
            let outcome = &self.results.outcomes[i];
            let mut w = why::why(exec, outcome, &self.results.admissions[i], r);
            w.lens = seeds.map(|seeds| {
                let settings = &self.results.settings;
                let options = lens::LensOptions {
                    seed: settings.seed,
                    seeds,
                    priority: settings.priority.clone(),
                };
                let l = py.detach(|| lens::execution_lens(exec, outcome, &options));
                lens::request_lens(exec, outcome, settings, &l, r)
            });
            let v = serde_json::to_value(&w)
                .map_err(|e| PyRuntimeError::new_err(format!("why {request:?}: {e}")))?;
            from_json(py, &v)
        })
    }

    /// The draw log of `execution` as `gyre replay` prints it.
    fn draw_log(&self, execution: &str) -> PyResult<String> {
        guard(|| {
            let i = self.index(execution)?;
            Ok(report::replay_text(&self.batch, &self.results, i))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "Rows({}{} rows from {} executions, B = {}, {})",
            if self.whole { "" } else { "step or shard: " },
            self.len(),
            self.execs.len(),
            self.b,
            self.results.settings.said(", ")
        )
    }
}

/// Iterator over `Rows`: builds one execution's rows at a time.
#[pyclass(module = "gyre._gyre")]
pub struct RowIter {
    rows: Py<Rows>,
    numpy: bool,
    next_exec: usize,
    pending: std::vec::IntoIter<Row>,
}

impl RowIter {
    fn new(rows: Py<Rows>, numpy: bool) -> Self {
        RowIter {
            rows,
            numpy,
            next_exec: 0,
            pending: Vec::new().into_iter(),
        }
    }
}

#[pymethods]
impl RowIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
        guard(|| {
            let rows = self.rows.get();
            loop {
                if let Some(row) = self.pending.next() {
                    return Ok(Some(row_dict(py, row, self.numpy)?.unbind()));
                }
                if self.next_exec >= rows.execs.len() {
                    return Ok(None);
                }
                self.pending = rows.exec_rows(self.next_exec).into_iter();
                self.next_exec += 1;
            }
        })
    }
}

/// Loads recordings held in memory, `[(name, bytes), …]` in order, each read as if it were
/// the file `name` (errors name it with its line numbers): one shard's parts from
/// `gyre.split`.
#[pyfunction]
#[pyo3(signature = (parts, *, lenient=false))]
pub fn load_parts(
    py: Python<'_>,
    parts: Vec<(String, Bound<'_, PyBytes>)>,
    lenient: bool,
) -> PyResult<Batch> {
    guard(|| {
        if parts.is_empty() {
            return Err(value_error("no parts to load"));
        }
        let inputs: Vec<Input> = parts
            .iter()
            .map(|(name, bytes)| Input::Memory {
                name,
                bytes: bytes.as_bytes(),
            })
            .collect();
        let options = LoadOptions {
            lenient,
            ..LoadOptions::default()
        };
        let batch = py
            .detach(|| engine_load::load_inputs(&inputs, &options, &|_, _| {}))
            .map_err(|e| load_error(&e))?;
        Ok(Batch::new(batch))
    })
}
