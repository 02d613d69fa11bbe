//! Work that [`App::step`](crate::app::App::step) asks for and does not do itself: a re-run of
//! the engine, the lens and sweep, the audit, a search, an export. `step` returns them as [`Task`]s; the
//! run loop hands each to a worker thread ([`Task::spawn`]), and a test (or an inspector without
//! workers) runs them in place ([`Task::run`]). Either way what a task finds comes back as
//! [`Action`]s, so the state changes only in `step`.

use std::path::PathBuf;
use std::sync::Arc;

use gyre_engine::Results;
use gyre_engine::admit::Settings;
use gyre_engine::export;
use gyre_engine::lens::LensOptions;
use gyre_engine::load::Batch;
use gyre_engine::score::AdvantageMode;
use gyre_engine::stats;

use crate::audit::Audited;
use crate::search::Query;
use crate::vocab::{Action, Jobs, Rerun};
use crate::whatif::WhatIf;

/// One piece of work `step` asks for.
#[derive(Debug)]
pub enum Task {
    /// Run the engine on `batch` under `settings` and `advantage`.
    Rerun {
        /// The batch on screen.
        batch: Arc<Batch>,
        /// The settings asked for.
        settings: Settings,
        /// The advantage mode asked for.
        advantage: AdvantageMode,
    },
    /// Work out the lens and sweep of `batch` under `options`, reporting progress.
    WhatIf {
        /// The batch on screen.
        batch: Arc<Batch>,
        /// The settings and seeds it looks through.
        options: LensOptions,
        /// Report progress (a worker's only: run in place nobody sees it).
        progress: bool,
    },
    /// Audit the trained samples of `batch` (with `text`'s turn structure when it has one).
    Audit {
        /// The batch on screen.
        batch: Arc<Batch>,
        /// The token text on screen.
        text: gyre_text::TokenText,
    },
    /// Search every execution, reporting hits as they are found.
    Search(Query),
    /// Write the admitted rows of `results` to `path`.
    Export {
        /// The file.
        path: PathBuf,
        /// The batch on screen.
        batch: Arc<Batch>,
        /// The results on screen.
        results: Arc<Results>,
        /// Replace a file that is there.
        force: bool,
        /// Their settings line, for the status line.
        settings: String,
    },
}

impl Task {
    /// Does the work on this thread, reporting through `report` (the lens reports its progress
    /// from the threads it fans out to).
    pub fn run(self, report: &(dyn Fn(Action) + Sync)) {
        match self {
            Task::Rerun {
                batch,
                settings,
                advantage,
            } => {
                let results = gyre_engine::process(&batch, &settings, advantage);
                let totals = stats::totals(&batch, &results);
                report(Action::Rerun(Box::new(Rerun {
                    batch,
                    settings,
                    advantage,
                    results,
                    totals,
                })));
            }
            Task::WhatIf {
                batch,
                options,
                progress,
            } => {
                let n = (2 * batch.executions.len()).max(1);
                let every = (n / 20).max(1);
                let w = WhatIf::compute(batch, options, &|done, total| {
                    if progress && done % every == 0 {
                        report(Action::WhatIfProgress(done, total));
                    }
                });
                report(Action::WhatIf(Arc::new(w)));
            }
            Task::Audit { batch, text } => {
                report(Action::Audited(Arc::new(Audited::compute(batch, &text))));
            }
            Task::Search(q) => q.run(&mut |f| report(Action::Found(f))),
            Task::Export {
                path,
                batch,
                results,
                force,
                settings,
            } => {
                let m = match export::write_file(&batch, &results, &path, force) {
                    Ok(rows) => format!(
                        "exported {rows} rows ({} executions, B = {}) to {} · {settings}",
                        batch.executions.len(),
                        results.batch_executions,
                        path.display(),
                    ),
                    Err(e) => format!("export failed: {e}"),
                };
                report(Action::Exported(path, m));
            }
        }
    }

    /// Does the work on a worker thread, reporting through `jobs`.
    pub fn spawn(self, jobs: &Jobs) {
        let jobs = jobs.clone();
        std::thread::spawn(move || self.run(&|a| jobs.send(a)));
    }
}
