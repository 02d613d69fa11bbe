//! `gyre.follow`: a growing recording admitted step by step as its executions settle (online
//! RL). When an execution settles, which executions make a step and what is read are all
//! `engine::follow`; each step is admitted by `engine::process` like `Batch.admit`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gyre_engine::follow::{self as engine_follow, FollowError, FollowOptions, FollowStep};
use gyre_engine::load::LoadError as EngineLoadError;
use gyre_engine::score::AdvantageMode;
use gyre_engine::{self as eng, admit::Settings};
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyRuntimeError, PyUserWarning};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::batch::{Rows, advantage_mode};
use crate::errors::load_error;
use crate::settings;
use crate::{guard, value_error};

/// A problem at a line is `gyre.LoadError` (as `gyre.load` raises it); one with the file as a
/// whole (truncated, rewritten, unreadable) an `OSError` naming it.
fn follow_error(e: FollowError) -> PyErr {
    if e.0.line > 0 {
        return load_error(&EngineLoadError {
            diagnostics: vec![e.0],
            warnings: Vec::new(),
            stopped: false,
        });
    }
    PyOSError::new_err(e.to_string())
}

/// Follows a recording that is still being written and yields its admitted rows in steps of
/// whole groups (see `gyre.follow`).
#[pyclass(module = "gyre._gyre", frozen)]
pub struct Follower {
    inner: Mutex<engine_follow::Follower>,
    settings: Settings,
    mode: AdvantageMode,
    poll: Duration,
    timeout: Option<Duration>,
    stop: AtomicBool,
    timed_out: AtomicBool,
    /// Groups of the steps handed out with fewer than `group_size` executions.
    incomplete: Mutex<Vec<String>>,
    /// Late lines already warned about.
    warned: Mutex<usize>,
}

impl Follower {
    fn lock(&self) -> PyResult<MutexGuard<'_, engine_follow::Follower>> {
        self.inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a thread failed while following; start again"))
    }

    /// Admits a step as `Batch.admit` admits a batch.
    fn rows(&self, py: Python<'_>, step: FollowStep) -> PyResult<Rows> {
        if let Ok(mut list) = self.incomplete.lock() {
            list.extend(step.incomplete_groups);
        }
        let batch = Arc::new(step.batch);
        let (settings, mode) = (&self.settings, self.mode);
        let results = py.detach(|| eng::process(&batch, settings, mode));
        Ok(Rows::new(batch, results))
    }

    /// Warns (`UserWarning`) once for each late line that contradicts a step handed out.
    fn warn_late(&self, py: Python<'_>) -> PyResult<()> {
        let late: Vec<String> = {
            let inner = self.lock()?;
            let mut warned = self
                .warned
                .lock()
                .map_err(|_| PyRuntimeError::new_err("a thread failed while following"))?;
            let new = inner.late()[*warned..]
                .iter()
                .map(|d| d.to_string())
                .collect();
            *warned = inner.late().len();
            new
        };
        for message in late {
            let category = py.get_type::<PyUserWarning>();
            PyErr::warn(
                py,
                &category,
                &std::ffi::CString::new(message.replace('\0', " "))?,
                1,
            )?;
        }
        Ok(())
    }

    /// One read of what was appended; a step when one is ready.
    fn poll_once(&self, py: Python<'_>) -> PyResult<Option<Rows>> {
        let step = py
            .detach(|| self.inner.lock().ok().map(|mut f| f.poll()))
            .ok_or_else(|| PyRuntimeError::new_err("a thread failed while following"))?
            .map_err(follow_error)?;
        self.warn_late(py)?;
        step.map(|s| self.rows(py, s)).transpose()
    }
}

/// Follows the gyre/1 recording at `path` while it is written (a `gyre.Recorder`'s or `gyre
/// record`'s) and yields its admitted rows one optimizer step at a time.
///
/// A step holds `executions` executions: `executions // group_size` whole GRPO groups, each
/// complete (`group_size` executions, every one *settled*: its rows can no longer change), in the
/// order they completed. Its rows are a `Rows` like `Batch.admit`'s and equal to `gyre admit`
/// over a file holding exactly those executions' lines (same `seed`, `jmax`, `priority`,
/// `advantage`): `B` is the step's scored and dummy executions, advantages are over each group.
/// An execution settles when its `execution` record is read and it is closed and either a dummy,
/// or its reward is read, or the recording's clock (the largest `t` read) passed its budget end
/// plus `grace_s` without one (excluded).
///
/// Iterating waits (polling every `poll_s` seconds, reading only what was appended, a partial
/// last line when it is complete) and stops after `timeout_s` seconds without a step (`None`:
/// never) or after `stop()`; then call `finish()` for the rest. Raises `FileNotFoundError` for a
/// missing file, `ValueError` for bad arguments; a bad line raises `gyre.LoadError`, a file
/// truncated or rewritten under the follower `OSError`.
#[pyfunction]
#[pyo3(
    signature = (path, *, executions, group_size, advantage="drgrpo", grace_s=0.0, poll_s=0.5, timeout_s=Some(600.0), **settings),
    text_signature = "(path, *, executions, group_size, advantage='drgrpo', grace_s=0.0, poll_s=0.5, timeout_s=600.0, **settings)"
)]
#[allow(clippy::too_many_arguments)]
pub fn follow(
    path: PathBuf,
    executions: i64,
    group_size: i64,
    advantage: &str,
    grace_s: f64,
    poll_s: f64,
    timeout_s: Option<f64>,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<Follower> {
    guard(|| {
        let settings = settings::from_kwargs("follow()", settings)?;
        let mode = advantage_mode(advantage)?;
        let positive = |v: i64, name: &str| {
            usize::try_from(v)
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| value_error(format!("{name} must be a positive integer, not {v}")))
        };
        let options = FollowOptions {
            group_size: positive(group_size, "group_size")?,
            executions: positive(executions, "executions")?,
            grace_s,
        };
        options.check().map_err(value_error)?;
        if !(poll_s.is_finite() && poll_s > 0.0) {
            return Err(value_error(format!(
                "poll_s must be a positive number of seconds, not {poll_s}"
            )));
        }
        let timeout = match timeout_s {
            None => None,
            Some(t) if t.is_finite() && t >= 0.0 => Some(Duration::from_secs_f64(t)),
            Some(t) => {
                return Err(value_error(format!(
                    "timeout_s must be a number of seconds ≥ 0 or None (wait for ever), not {t}"
                )));
            }
        };
        if matches!(std::fs::metadata(&path), Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
            return Err(PyFileNotFoundError::new_err((
                2,
                "No such file or directory (create the recording before following it)",
                path.display().to_string(),
            )));
        }
        let inner = engine_follow::Follower::open(&path, options).map_err(follow_error)?;
        Ok(Follower {
            inner: Mutex::new(inner),
            settings,
            mode,
            poll: Duration::from_secs_f64(poll_s),
            timeout,
            stop: AtomicBool::new(false),
            timed_out: AtomicBool::new(false),
            incomplete: Mutex::new(Vec::new()),
            warned: Mutex::new(0),
        })
    })
}

#[pymethods]
impl Follower {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next step's rows, waiting for it (see `gyre.follow`); `StopIteration` after
    /// `timeout_s` without one, after `stop()` or `finish()`.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Rows>> {
        guard(|| {
            let start = Instant::now();
            self.timed_out.store(false, Ordering::Relaxed);
            loop {
                if self.stop.load(Ordering::Relaxed) || self.lock()?.finished() {
                    return Ok(None);
                }
                if let Some(rows) = self.poll_once(py)? {
                    return Ok(Some(rows));
                }
                if self.timeout.is_some_and(|t| start.elapsed() >= t) {
                    self.timed_out.store(true, Ordering::Relaxed);
                    return Ok(None);
                }
                let wait = match self.timeout {
                    Some(t) => self.poll.min(t.saturating_sub(start.elapsed())),
                    None => self.poll,
                };
                py.detach(|| std::thread::sleep(wait));
                py.check_signals()?;
            }
        })
    }

    /// Reads what was appended and returns the next step's rows if one is ready, else `None`
    /// (never waits). Call it again for further steps.
    fn poll(&self, py: Python<'_>) -> PyResult<Option<Rows>> {
        guard(|| self.poll_once(py))
    }

    /// Reads the rest of the file (a last line without a newline included) and returns every
    /// execution not yet handed out, settled as the whole file settles them: steps of whole
    /// groups, the complete ones first; groups with fewer than `group_size` executions are
    /// listed in `incomplete_groups`, executions that never closed in `open` (they yield no
    /// rows). Use it when the recording is complete; nothing is read after it.
    fn finish(&self, py: Python<'_>) -> PyResult<Vec<Rows>> {
        guard(|| {
            let steps = py
                .detach(|| self.inner.lock().ok().map(|mut f| f.finish()))
                .ok_or_else(|| PyRuntimeError::new_err("a thread failed while following"))?
                .map_err(follow_error)?;
            self.warn_late(py)?;
            steps.into_iter().map(|s| self.rows(py, s)).collect()
        })
    }

    /// Ends the iteration at its next poll (callable from another thread).
    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The recording followed.
    #[getter]
    fn path(&self) -> PyResult<String> {
        Ok(self.lock()?.path().display().to_string())
    }

    /// Lines read so far.
    #[getter]
    fn lines(&self) -> PyResult<u64> {
        Ok(self.lock()?.lines())
    }

    /// Executions read and not yet in a step.
    #[getter]
    fn pending(&self) -> PyResult<usize> {
        Ok(self.lock()?.pending())
    }

    /// The recording's clock: the largest `t` read (`None` before any).
    #[getter]
    fn clock(&self) -> PyResult<Option<f64>> {
        Ok(self.lock()?.clock())
    }

    /// Lines for executions already handed out that `gyre admit` over the whole file would
    /// score differently (a valid assessment within budget read after the clock had excluded
    /// its execution), as `file:line: message`; each is also warned about (`UserWarning`).
    #[getter]
    fn late(&self) -> PyResult<Vec<String>> {
        Ok(self.lock()?.late().iter().map(|d| d.to_string()).collect())
    }

    /// Lines read for executions already handed out (requests after closure, assessments after
    /// the reward: they change nothing), `late` included.
    #[getter]
    fn late_lines(&self) -> PyResult<u64> {
        Ok(self.lock()?.late_lines())
    }

    /// Warnings (unknown kinds or sources, a header not on line 1) as `file:line: message`.
    #[getter]
    fn warnings(&self) -> PyResult<Vec<String>> {
        Ok(self
            .lock()?
            .warnings()
            .iter()
            .map(|d| d.to_string())
            .collect())
    }

    /// After `finish()`: executions that never closed (excluded as `open`; in the last steps,
    /// without rows).
    #[getter]
    fn open(&self) -> PyResult<Vec<String>> {
        Ok(self.lock()?.open_executions().to_vec())
    }

    /// Groups (JSON text) handed out with fewer than `group_size` executions (by `finish()`).
    #[getter]
    fn incomplete_groups(&self) -> PyResult<Vec<String>> {
        self.incomplete
            .lock()
            .map(|l| l.clone())
            .map_err(|_| PyRuntimeError::new_err("a thread failed while following"))
    }

    /// Whether the last iteration ended because `timeout_s` passed without a step.
    #[getter]
    fn timed_out(&self) -> bool {
        self.timed_out.load(Ordering::Relaxed)
    }

    /// Whether `finish()` was called.
    #[getter]
    fn finished(&self) -> PyResult<bool> {
        Ok(self.lock()?.finished())
    }

    fn __repr__(&self) -> PyResult<String> {
        let f = self.lock()?;
        Ok(format!(
            "Follower({}: {} lines read, {} executions pending{})",
            f.path().display(),
            f.lines(),
            f.pending(),
            if f.finished() { ", finished" } else { "" }
        ))
    }
}
