//! What the inspector works out beyond the results on screen, in the background: the lens of
//! those results (every token's odds over many seeds) and a sweep over J_max (the dashboard's
//! cost and coverage curve); and settings pinned to compare the screen with.

use std::sync::Arc;

use gyre_engine::Results;
use gyre_engine::admit::Settings;
use gyre_engine::diff::{self, Diff, Side};
use gyre_engine::lens::{self, Lens, LensOptions};
use gyre_engine::load::Batch;
use gyre_engine::sweep::Sweep;

/// Seeds the lens looks through unless `--seeds` says otherwise.
pub const DEFAULT_SEEDS: u32 = 64;

/// The caps the dashboard's cost and coverage curve is drawn at (0 = uncapped, last).
pub const SWEEP_JMAX: [u32; 9] = [1, 2, 3, 4, 5, 6, 8, 10, 0];

/// The lens and the sweep of one batch under one seed range and priority.
#[derive(Debug)]
pub struct WhatIf {
    /// The batch they were made on.
    pub batch: Arc<Batch>,
    /// Seeds and priority.
    pub options: LensOptions,
    /// Every token's and candidate's odds.
    pub lens: Lens,
    /// Cost and coverage per J_max of [`SWEEP_JMAX`], over the same seeds.
    pub sweep: Sweep,
}

impl WhatIf {
    /// The options a what-if for results under `settings` is made with.
    pub fn options_for(settings: &Settings, seeds: u32) -> LensOptions {
        LensOptions {
            seed: settings.seed,
            seeds,
            priority: settings.priority.clone(),
        }
    }

    /// Whether it was made for `batch` under `options`.
    pub fn is_for(&self, batch: &Arc<Batch>, options: &LensOptions) -> bool {
        Arc::ptr_eq(&self.batch, batch) && self.options == *options
    }

    /// Works it out, calling `progress(done, total)` as executions finish (the lens and the
    /// sweep are read off the same runs).
    pub fn compute(
        batch: Arc<Batch>,
        options: LensOptions,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> WhatIf {
        let (lens, sweep) = lens::lens_and_sweep(&batch, &options, SWEEP_JMAX.to_vec(), progress);
        WhatIf {
            batch,
            options,
            lens,
            sweep,
        }
    }
}

/// Results pinned to compare later settings with.
#[derive(Clone, Debug)]
pub struct Pinned {
    /// The batch they are of (a grown recording drops the pin).
    pub batch: Arc<Batch>,
    /// The results.
    pub results: Arc<Results>,
    /// Their settings in words.
    pub label: String,
}

/// The comparison of the pin with the results on screen, made once per results generation.
#[derive(Debug)]
pub struct Compare {
    /// The results generation it was made for.
    pub generation: u64,
    /// Pinned (A) against on screen (B).
    pub diff: Diff,
}

impl Compare {
    /// Compares `pinned` (A) with `results` (B) of the same batch.
    pub fn new(pinned: &Pinned, results: &Results, generation: u64) -> Compare {
        let side = |results| Side {
            batch: &pinned.batch,
            results,
        };
        Compare {
            generation,
            diff: diff::diff(side(&pinned.results), side(results)),
        }
    }
}
