//! How the inspector opens ([`Options`], [`Input`]) and the loading of its input on a worker:
//! the records, the engine's results, then the tokenizer, each reported as it is there.

use std::path::PathBuf;
use std::sync::Arc;

use gyre_engine::admit::{SETTINGS, Settings};
use gyre_engine::load::{self, Batch, LoadOptions};
use gyre_engine::score::AdvantageMode;

use crate::vocab::{Action, Jobs, Phase};

/// Which settings the command line gave explicitly (`--seed 3`, even `--seed 0`): they win over
/// the remembered ones. One bit per entry of [`SETTINGS`], in its order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Explicit(u64);

impl Explicit {
    /// The settings whose key `given` holds for.
    pub fn given(given: impl Fn(&str) -> bool) -> Explicit {
        Explicit(
            SETTINGS
                .iter()
                .enumerate()
                .filter(|(_, s)| given(s.key))
                .fold(0, |bits, (i, _)| bits | 1 << i),
        )
    }

    /// Whether the command line gave the setting at `i` in [`SETTINGS`].
    pub(crate) fn has(self, i: usize) -> bool {
        self.0 & 1 << i != 0
    }
}

/// Whether a run reads and writes what is remembered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remember {
    /// Neither reads nor writes (tests and benchmarks, which must not touch the user's state).
    Nothing,
    /// Starts from what was remembered, under the explicit settings, and saves at quit.
    Restore(Explicit),
    /// `--fresh`: starts from the command line and the defaults; still saves at quit, so the
    /// next run remembers this one.
    Fresh,
}

/// What the inspector opens.
#[derive(Clone, Debug)]
pub enum Input {
    /// A recording bundled in the binary.
    Demo(gyre_engine::demo::Demo),
    /// Files, read in order.
    Files(Vec<PathBuf>),
}

/// How the inspector opens.
#[derive(Clone, Debug)]
pub struct Options {
    /// The input.
    pub input: Input,
    /// Admission settings to start with.
    pub settings: Settings,
    /// Advantage mode to start with.
    pub advantage: AdvantageMode,
    /// Skip invalid lines instead of failing.
    pub lenient: bool,
    /// `--tokenizer NAME|DIR|FILE`.
    pub tokenizer: Option<String>,
    /// Read the one input file again whenever it grows (`--follow`).
    pub follow: bool,
    /// Seeds the lens looks through (`--seeds`).
    pub seeds: u32,
    /// Whether the settings are remembered between runs (the `remembered` module).
    pub remember: Remember,
}

/// Loads the input on the calling thread, reporting progress: the records, then the engine's
/// results (the first frame can show them with ids), then the tokenizer (text replaces ids).
pub fn load_input(opts: &Options, jobs: &Jobs) {
    let progress = |done: u64, total: u64| jobs.send(Action::Progress(Phase::Reading, done, total));
    let loaded = match &opts.input {
        Input::Demo(demo) => {
            load::load_bytes(demo.file_name(), demo.bytes(), &LoadOptions::default())
        }
        Input::Files(files) => load::load(
            files,
            &LoadOptions {
                lenient: opts.lenient,
                max_problems: Some(load::KEPT_DIAGNOSTICS as u64),
            },
            &progress,
        ),
    };
    let batch = match loaded {
        Ok(batch) => batch,
        Err(e) => {
            jobs.send(Action::Loaded(Err(e.to_string())));
            return;
        }
    };
    let step = (batch.executions.len() as u64 / 100).max(1);
    let results = gyre_engine::process_with_progress(
        &batch,
        &opts.settings,
        opts.advantage,
        &|done, total| {
            if done % step == 0 || done == total {
                jobs.send(Action::Progress(Phase::Admitting, done, total));
            }
        },
    );
    let batch = Arc::new(batch);
    jobs.send(Action::Processed(Arc::clone(&batch), Box::new(results)));
    load_text(opts, &batch, jobs);
}

/// Resolves the tokenizer (`--tokenizer`, else the header's) once the batch is on screen: it
/// takes seconds to parse, and ids show meanwhile.
pub(crate) fn load_text(opts: &Options, batch: &Batch, jobs: &Jobs) {
    let name = match (&opts.tokenizer, batch.tokenizer_spec()) {
        (Some(t), _) => t.clone(),
        (None, Some((spec, _, _))) => spec.as_str().unwrap_or("the tokenizer").to_string(),
        (None, None) => return,
    };
    jobs.send(Action::TextLoading(name));
    match gyre_text::resolve_tokenizer(opts.tokenizer.as_deref(), batch.tokenizer_spec()) {
        Ok(t) => {
            // Build the id → text table here, not on the first frame that shows text.
            let _ = t.decode(&[0]);
            jobs.send(Action::Text(t));
        }
        Err(e) => jobs.send(Action::TextFailed(format!(
            "tokenizer: {e:#}; ids shown as ⟨id⟩"
        ))),
    }
}
