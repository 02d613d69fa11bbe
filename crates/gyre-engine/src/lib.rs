//! The gyre engine: records → shared-prefix trees → scores → masks → admission → export.
//!
//! No terminal, UI, tokenizer or proxy code lives here (this crate cannot name them: it depends
//! on `gyre-format` alone); the CLI, the inspector and the Python package are clients of it and
//! never recompute what it decides. [`report`] words its decisions for people, [`paint`] is the
//! view model both `gyre show` and the inspector draw from.

pub mod admit;
pub mod assess;
pub mod branches;
pub mod delegation;
pub mod diff;
pub mod execution;
pub mod export;
pub mod follow;
pub mod lens;
pub mod load;
pub mod loss;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod provenance;
pub mod recorder;
pub mod row_prefix;
pub mod score;
pub mod shard;
pub mod stats;
pub mod steps;
pub mod sweep;
pub mod trained;
pub mod tree;
pub mod why;

pub mod demo;
pub mod paint;
pub mod recgen;
pub mod report;

/// The gyre/1 record types and the writer, from the format layer (the engine reads and writes
/// nothing else).
pub use gyre_format::{record, write};

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use admit::{Admission, Settings};
use load::Batch;
use score::{AdvantageMode, Outcome};

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
