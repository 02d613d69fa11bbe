//! `gyre.Recorder`: gyre/1 records written by a rollout loop, checked as the loader checks them,
//! in delta form where a request continues an earlier one (all of it is `engine::recorder`).

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::PathBuf;

use gyre_engine::record::{Actor, ClosureStatus, Purpose, Source};
use gyre_engine::recorder::{self as rec, AppendError, RecordError};
use gyre_engine::write::{
    AssessmentOut, ClosureOut, ExecutionOut, RequestOut, SpanOut, ToolCallOut, Validity,
};
use pyo3::exceptions::PyIsADirectoryError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use serde_json::Value;

use crate::convert::{floats, opt_json, opt_map, to_json, token_ids};
use crate::errors::{load_error, os_error};
use crate::{guard, value_error};

/// A time or duration argument: finite (JSON has no NaN or infinity).
fn finite(v: f64, field: &str) -> PyResult<f64> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(value_error(format!(
            "{field} must be a finite number, not {v}"
        )))
    }
}

fn finite_opt(v: Option<f64>, field: &str) -> PyResult<Option<f64>> {
    v.map(|v| finite(v, field)).transpose()
}

fn record_error(e: RecordError, path: &std::path::Path) -> PyErr {
    match e {
        RecordError::Invalid(_) => value_error(e.to_string()),
        RecordError::Io(io) => os_error(&io, path, ""),
    }
}

/// An id argument: a string, or an int written as its decimal text (ids are strings in gyre/1).
fn id_arg(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<String> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_str()?.to_owned());
    }
    obj.extract::<i64>()
        .map(|i| i.to_string())
        .map_err(|_| value_error(format!("{field} must be a string id")))
}

fn parse_purpose(s: &str) -> PyResult<Purpose> {
    match s {
        "task" => Ok(Purpose::Task),
        "summary" => Ok(Purpose::Summary),
        _ => Err(value_error(format!(
            "purpose must be \"task\" or \"summary\", not {s:?}"
        ))),
    }
}

fn parse_actor(s: &str) -> PyResult<Actor> {
    match s {
        "policy" => Ok(Actor::Policy),
        "evaluator" => Ok(Actor::Evaluator),
        _ => Err(value_error(format!(
            "actor must be \"policy\" or \"evaluator\", not {s:?}"
        ))),
    }
}

/// One span argument: `{"end": 12, "source": "tool", "call_id": "c1"}` or `(12, "tool", "c1")`.
fn span_arg(obj: &Bound<'_, PyAny>, i: usize) -> PyResult<(u32, Source, Option<String>)> {
    let field = format!("spans[{i}]");
    let (end, source, call_id) = if let Ok(d) = obj.cast::<PyDict>() {
        let get = |k: &str| d.get_item(k);
        let end = get("end")?.ok_or_else(|| value_error(format!("{field} needs `end`")))?;
        let source =
            get("source")?.ok_or_else(|| value_error(format!("{field} needs `source`")))?;
        (end, source, get("call_id")?)
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        if !(2..=3).contains(&t.len()) {
            return Err(value_error(format!(
                "{field} must be (end, source) or (end, source, call_id)"
            )));
        }
        (t.get_item(0)?, t.get_item(1)?, t.get_item(2).ok())
    } else {
        return Err(value_error(format!(
            "{field} must be a dict {{\"end\", \"source\", \"call_id\"}} or a tuple (end, source[, call_id])"
        )));
    };
    let end: u32 = end
        .extract()
        .map_err(|_| value_error(format!("{field}.end must be an offset in 0..2^32")))?;
    let name: String = source
        .extract()
        .map_err(|_| value_error(format!("{field}.source must be a string")))?;
    let source = Source::parse(&name).ok_or_else(|| {
        value_error(format!(
            "{field}.source {name:?} is not a gyre/1 source (system, user, tool, assistant, \
             critique, summary, template, context)"
        ))
    })?;
    let call_id = match call_id {
        Some(c) if !c.is_none() => Some(id_arg(&c, &format!("{field}.call_id"))?),
        _ => None,
    };
    Ok((end, source, call_id))
}

/// One tool call argument: `{"id": "c1", "name": "bash", "start": 0, "end": 9}`.
fn tool_call_arg(obj: &Bound<'_, PyAny>, i: usize) -> PyResult<(String, Option<String>, u32, u32)> {
    let field = format!("tool_calls[{i}]");
    let d = obj.cast::<PyDict>().map_err(|_| {
        value_error(format!(
            "{field} must be a dict {{\"id\", \"name\", \"start\", \"end\"}}"
        ))
    })?;
    let need = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(k)?
            .ok_or_else(|| value_error(format!("{field} needs `{k}`")))
    };
    let offset = |k: &str| -> PyResult<u32> {
        need(k)?
            .extract()
            .map_err(|_| value_error(format!("{field}.{k} must be an offset in 0..2^32")))
    };
    let name = match d.get_item("name")? {
        Some(n) if !n.is_none() => Some(
            n.extract()
                .map_err(|_| value_error(format!("{field}.name must be a string")))?,
        ),
        _ => None,
    };
    Ok((
        id_arg(&need("id")?, &format!("{field}.id"))?,
        name,
        offset("start")?,
        offset("end")?,
    ))
}

fn list_arg<'py, T>(
    obj: Option<&Bound<'py, PyAny>>,
    field: &str,
    each: impl Fn(&Bound<'py, PyAny>, usize) -> PyResult<T>,
) -> PyResult<Vec<T>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(Vec::new());
    };
    if obj.is_instance_of::<PyString>() || obj.cast::<PyDict>().is_ok() {
        return Err(value_error(format!("{field} must be a list")));
    }
    obj.try_iter()
        .map_err(|_| value_error(format!("{field} must be a list")))?
        .enumerate()
        .map(|(i, item)| each(&item?, i))
        .collect()
}

/// Writes a gyre/1 recording as a run happens: one method per record kind (docs/format.md §1).
///
/// Every record is checked as `gyre validate` would check it before it is written (a bad one
/// raises `ValueError` with the reason and nothing is written). A request whose input continues
/// an earlier request of its execution (that request's input and output are a prefix of it) is
/// written in delta form (`extends`) without being asked: give every request its full input.
///
/// A new file starts with a header line (with `tokenizer` and `meta` when given). Use it as a
/// context manager, or call `close()`: records are buffered until then (or `flush()`).
#[pyclass(module = "gyre._gyre")]
pub struct Recorder {
    inner: Option<rec::Recorder<BufWriter<File>>>,
    path: PathBuf,
}

impl Recorder {
    fn open(&mut self) -> PyResult<&mut rec::Recorder<BufWriter<File>>> {
        self.inner.as_mut().ok_or_else(|| {
            value_error(format!("the recorder of {} is closed", self.path.display()))
        })
    }
}

#[pymethods]
impl Recorder {
    /// Opens `path` for recording.
    ///
    /// A new file is created; an existing one is refused (`FileExistsError`) unless
    /// `append=True` (its records are read back so ids, closures and delta encoding continue,
    /// and a last line cut short by a killed writer is dropped) or `overwrite=True`.
    /// `delta=False` writes every request in full form.
    #[new]
    #[pyo3(signature = (path, *, append=false, overwrite=false, delta=true, tokenizer=None, meta=None))]
    fn new(
        path: PathBuf,
        append: bool,
        overwrite: bool,
        delta: bool,
        tokenizer: Option<&Bound<'_, PyAny>>,
        meta: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        guard(|| {
            if append && overwrite {
                return Err(value_error("append and overwrite exclude each other"));
            }
            let tokenizer = opt_json(tokenizer, "tokenizer")?;
            let meta = opt_map(meta, "meta")?;
            // A new file gets a header; so does an empty (or missing) one appended to.
            let empty = !append || std::fs::metadata(&path).map_or(true, |m| m.len() == 0);
            let inner = if append {
                rec::Recorder::append(&path).map_err(|e| match e {
                    AppendError::Io(io) => os_error(&io, &path, ""),
                    AppendError::Invalid(e) => load_error(&e),
                })?
            } else {
                if overwrite && path.exists() {
                    std::fs::remove_file(&path).map_err(|e| os_error(&e, &path, ""))?;
                }
                if path.is_dir() {
                    return Err(PyIsADirectoryError::new_err((
                        21,
                        "Is a directory (name a file to record to)",
                        path.display().to_string(),
                    )));
                }
                rec::Recorder::create(&path).map_err(|e| {
                    let hint = if e.kind() == io::ErrorKind::AlreadyExists {
                        " (pass append=True to continue this recording, or overwrite=True)"
                    } else {
                        ""
                    };
                    os_error(&e, &path, hint)
                })?
            };
            let mut inner = inner.with_delta(delta);
            if empty {
                inner
                    .header(tokenizer.as_ref(), meta.as_ref())
                    .map_err(|e| record_error(e, &path))?;
            } else if tokenizer.is_some() || meta.is_some() {
                return Err(value_error(
                    "tokenizer and meta go in the header, which only a new recording gets",
                ));
            }
            Ok(Recorder {
                inner: Some(inner),
                path,
            })
        })
    }

    /// The recording's path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Lines written by this recorder so far.
    #[getter]
    fn lines(&self) -> u64 {
        self.inner.as_ref().map_or(0, |r| r.lines())
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_none()
    }

    /// Records the start of execution `execution` at time `t` (seconds), with its time budget
    /// (`None` = unlimited), GRPO group, task and metadata.
    #[pyo3(signature = (execution, *, t, budget_s=None, group=None, task=None, meta=None))]
    fn execution(
        &mut self,
        execution: &Bound<'_, PyAny>,
        t: f64,
        budget_s: Option<f64>,
        group: Option<&Bound<'_, PyAny>>,
        task: Option<&Bound<'_, PyAny>>,
        meta: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        guard(|| {
            let execution = id_arg(execution, "execution")?;
            let t = finite(t, "t")?;
            let budget_s = finite_opt(budget_s, "budget_s")?;
            let group = opt_json(group, "group")?;
            let task = opt_json(task, "task")?;
            let meta = opt_map(meta, "meta")?;
            let path = self.path.clone();
            self.open()?
                .execution(&ExecutionOut {
                    execution: &execution,
                    t,
                    budget_s,
                    group: group.as_ref(),
                    task: task.as_ref(),
                    meta: meta.as_ref(),
                })
                .map_err(|e| record_error(e, &path))
        })
    }

    /// Records one model call of `execution`: the full token sequence the policy was
    /// conditioned on (`input`), what it sampled (`output`) and the behaviour log-prob of each
    /// sampled token (`logprobs`; leave it out only with `meta={"reconstructed": True}`).
    ///
    /// Token ids and log-probs may be lists or 1-D NumPy arrays. `spans` label `input` by
    /// exclusive end offset (`{"end": 12, "source": "system"}` or `(12, "system")`);
    /// `tool_calls` are `{"id", "name", "start", "end"}` offsets into `output`. Returns the id of
    /// the request this one was written as a delta of, or `None` (full form).
    /// `not_trainable="reason"` marks a policy output the log does not hold in full (hidden
    /// thinking): kept as context, never a target.
    #[pyo3(signature = (
        execution, id, *, input, output, logprobs=None, t=None, agent="main", purpose="task",
        actor="policy", spans=None, tool_calls=None, extends=None, finish=None, model=None,
        meta=None, not_trainable=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn request(
        &mut self,
        py: Python<'_>,
        execution: &Bound<'_, PyAny>,
        id: &Bound<'_, PyAny>,
        input: &Bound<'_, PyAny>,
        output: &Bound<'_, PyAny>,
        logprobs: Option<&Bound<'_, PyAny>>,
        t: Option<f64>,
        agent: &str,
        purpose: &str,
        actor: &str,
        spans: Option<&Bound<'_, PyAny>>,
        tool_calls: Option<&Bound<'_, PyAny>>,
        extends: Option<&Bound<'_, PyAny>>,
        finish: Option<String>,
        model: Option<String>,
        meta: Option<&Bound<'_, PyAny>>,
        not_trainable: Option<String>,
    ) -> PyResult<Option<String>> {
        guard(|| {
            let execution = id_arg(execution, "execution")?;
            let id = id_arg(id, "id")?;
            let t = finite_opt(t, "t")?;
            let input = token_ids(input, "input")?;
            let output = token_ids(output, "output")?;
            let logprobs = match logprobs.filter(|l| !l.is_none()) {
                Some(l) => Some(floats(l, "logprobs")?),
                None => None,
            };
            let purpose = parse_purpose(purpose)?;
            let actor = parse_actor(actor)?;
            let spans = list_arg(spans, "spans", span_arg)?;
            let calls = list_arg(tool_calls, "tool_calls", tool_call_arg)?;
            let extends = match extends.filter(|e| !e.is_none()) {
                Some(e) => Some(id_arg(e, "extends")?),
                None => None,
            };
            let meta = opt_map(meta, "meta")?;
            let span_out: Vec<SpanOut> = spans
                .iter()
                .map(|(end, source, call_id)| SpanOut {
                    end: *end,
                    source: *source,
                    call_id: call_id.as_deref(),
                })
                .collect();
            let call_out: Vec<ToolCallOut> = calls
                .iter()
                .map(|(id, name, start, end)| ToolCallOut {
                    id,
                    name: name.as_deref(),
                    start: *start,
                    end: *end,
                })
                .collect();
            let line = RequestOut {
                purpose,
                actor,
                not_trainable: not_trainable.as_deref(),
                t,
                model: model.as_deref(),
                extends: extends.as_deref(),
                logprobs: logprobs.as_deref(),
                tool_calls: &call_out,
                finish: finish.as_deref(),
                meta: meta.as_ref(),
                ..RequestOut::new(&execution, &id, agent, &input, &span_out, &output)
            };
            let path = self.path.clone();
            let recorder = self.open()?;
            // Long contexts: checking and inserting them runs without the interpreter lock.
            let written = py
                .detach(|| recorder.request(&line))
                .map_err(|e| record_error(e, &path))?;
            Ok(written.extends)
        })
    }

    /// Records the end of `execution` at time `t`: `status` is `completed`, `timeout` or
    /// `error`; `artifact` and `version` name the assessable work available at closure (`None`:
    /// no assessable work, a dummy); `committed` is the request whose branch was kept.
    #[pyo3(signature = (execution, *, t, status="completed", artifact=None, version=None, committed=None, meta=None))]
    #[allow(clippy::too_many_arguments)]
    fn closure(
        &mut self,
        execution: &Bound<'_, PyAny>,
        t: f64,
        status: &str,
        artifact: Option<&Bound<'_, PyAny>>,
        version: Option<&Bound<'_, PyAny>>,
        committed: Option<&Bound<'_, PyAny>>,
        meta: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        guard(|| {
            let execution = id_arg(execution, "execution")?;
            let t = finite(t, "t")?;
            let status = match status {
                "completed" => ClosureStatus::Completed,
                "timeout" => ClosureStatus::Timeout,
                "error" => ClosureStatus::Error,
                other => {
                    return Err(value_error(format!(
                        "status must be \"completed\", \"timeout\" or \"error\", not {other:?}"
                    )));
                }
            };
            let artifact = opt_json(artifact, "artifact")?;
            let version = opt_json(version, "version")?;
            let committed = match committed.filter(|c| !c.is_none()) {
                Some(c) => Some(id_arg(c, "committed")?),
                None => None,
            };
            let meta = opt_map(meta, "meta")?;
            let path = self.path.clone();
            self.open()?
                .closure(&ClosureOut {
                    execution: &execution,
                    t,
                    status,
                    committed: committed.as_deref(),
                    artifact: artifact.as_ref(),
                    version: version.as_ref(),
                    meta: meta.as_ref(),
                })
                .map_err(|e| record_error(e, &path))
        })
    }

    /// Records one assessment of `artifact` at `version`: `status` `valid` (with a finite
    /// `score`; a valid 0 is a real score) or `failed`; `branch` is the request id assessed.
    #[pyo3(signature = (
        execution, *, artifact, version, status, t, score=None, branch=None, attempt=None,
        evaluator=None, error=None, critique=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn assessment(
        &mut self,
        execution: &Bound<'_, PyAny>,
        artifact: &Bound<'_, PyAny>,
        version: &Bound<'_, PyAny>,
        status: &str,
        t: f64,
        score: Option<&Bound<'_, PyAny>>,
        branch: Option<&Bound<'_, PyAny>>,
        attempt: Option<&Bound<'_, PyAny>>,
        evaluator: Option<&Bound<'_, PyAny>>,
        error: Option<&Bound<'_, PyAny>>,
        critique: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        guard(|| {
            let execution = id_arg(execution, "execution")?;
            let t = finite(t, "t")?;
            let status = match status {
                "valid" => Validity::Valid,
                "failed" => Validity::Failed,
                other => {
                    return Err(value_error(format!(
                        "status must be \"valid\" or \"failed\", not {other:?}"
                    )));
                }
            };
            let score = match score.filter(|s| !s.is_none()) {
                Some(s) => match to_json(s, "score")? {
                    Value::Number(n) => n.as_f64(),
                    _ => return Err(value_error("score must be a number")),
                },
                None => None,
            };
            let artifact = to_json(artifact, "artifact")?;
            let version = to_json(version, "version")?;
            let branch = match branch.filter(|b| !b.is_none()) {
                Some(b) => Some(id_arg(b, "branch")?),
                None => None,
            };
            let attempt = opt_json(attempt, "attempt")?;
            let evaluator = opt_json(evaluator, "evaluator")?;
            let error = opt_json(error, "error")?;
            let critique = opt_json(critique, "critique")?;
            let path = self.path.clone();
            self.open()?
                .assessment(&AssessmentOut {
                    execution: &execution,
                    artifact: &artifact,
                    version: &version,
                    status,
                    score,
                    t,
                    branch: branch.as_deref(),
                    attempt: attempt.as_ref(),
                    evaluator: evaluator.as_ref(),
                    error: error.as_ref(),
                    critique: critique.as_ref(),
                    meta: None,
                })
                .map_err(|e| record_error(e, &path))
        })
    }

    /// Writes buffered records to the file.
    fn flush(&mut self) -> PyResult<()> {
        guard(|| {
            let path = self.path.clone();
            self.open()?.flush().map_err(|e| os_error(&e, &path, ""))
        })
    }

    /// Flushes and closes the file; later calls do nothing.
    fn close(&mut self) -> PyResult<()> {
        guard(|| match self.inner.take() {
            Some(r) => r
                .finish()
                .map(drop)
                .map_err(|e| os_error(&e, &self.path, "")),
            None => Ok(()),
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the recorder (also when the block raised: every record written is whole).
    #[pyo3(signature = (*_args))]
    fn __exit__(&mut self, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close()?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "Recorder({:?}, {})",
            self.path.display().to_string(),
            if self.inner.is_some() {
                "open"
            } else {
                "closed"
            }
        )
    }
}
