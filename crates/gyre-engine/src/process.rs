//! The pipeline: every execution of a batch scored and admitted under given settings ([`Results`]).

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::admit::{self, Admission, Settings};
use crate::load::Batch;
use crate::loss;
use crate::score::{self, AdvantageMode, Outcome};

/// Everything the engine decides for a batch under given settings.
#[derive(Clone, Debug)]
pub struct Results {
    /// Settings the admission ran with.
    pub settings: Settings,
    /// How advantages were computed.
    pub advantage_mode: AdvantageMode,
    /// Scoring outcome per execution (same order as [`Batch::executions`]).
    pub outcomes: Vec<Outcome>,
    /// Admission (candidates, draw log, claims) per execution.
    pub admissions: Vec<Admission>,
    /// Group advantage per execution.
    pub advantages: Vec<Option<f64>>,
    /// `B`: scored + dummy executions.
    pub batch_executions: u64,
}

/// Scores and admits every execution of `batch` (in parallel; each execution on its own).
pub fn process(batch: &Batch, settings: &Settings, advantage_mode: AdvantageMode) -> Results {
    process_with_progress(batch, settings, advantage_mode, &|_, _| {})
}

/// [`process`], reporting `(executions done, executions in all)` as it goes.
pub fn process_with_progress(
    batch: &Batch,
    settings: &Settings,
    advantage_mode: AdvantageMode,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Results {
    let total = batch.executions.len() as u64;
    let done = AtomicU64::new(0);
    let (outcomes, admissions): (Vec<Outcome>, Vec<Admission>) = batch
        .executions
        .par_iter()
        .map(|e| {
            let outcome = score::score(e);
            let admission = admit::admit(e, &outcome, settings);
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            (outcome, admission)
        })
        .unzip();
    let advantages = score::advantages(&batch.executions, &outcomes, advantage_mode);
    Results {
        settings: settings.clone(),
        advantage_mode,
        batch_executions: loss::batch_executions(&outcomes),
        outcomes,
        admissions,
        advantages,
    }
}
