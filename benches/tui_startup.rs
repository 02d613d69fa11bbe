//! How long the inspector takes to show its first frame, and to show the results of a settings
//! change, as the binary does it: the loader thread reads the records and runs the engine
//! (the tokenizer comes after the first frame), the UI thread takes its reports through
//! `App::step` and draws a 200×60 frame into a `TestBackend`.
//!
//! - `first_frame/demo`: the bundled `gyre synth` demo (goal ≤ 1 s);
//! - `first_frame/synth_139mb`: `gyre synth --executions 32 --turns 80 --context 20000`, a
//!   139 MB recording written once into `target/bench-data/` (goal ≤ 1.5 s);
//! - `rerun/*`: `s` (seed + 1) until the new results are drawn: the engine re-run, the batch
//!   totals, every pane brought in line, one frame.
//! - `whatif/*`: what the inspector works out on a worker after a load or a seed or priority
//!   change: the lens over 64 seeds and the J_max sweep of the dashboard (the UI stays live
//!   meanwhile).
//!
//! Run: `cargo bench --bench tui_startup`.

// A measurement harness may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]
// criterion_group! defines an undocumented public function.
#![allow(missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use gyre_engine::admit::Settings;
use gyre_engine::demo::Demo;
use gyre_engine::score::AdvantageMode;
use gyre_tui::app::{Action, App, Jobs, Load, Msg};
use gyre_tui::keys::Command as C;
use gyre_tui::remembered::Remember;
use gyre_tui::theme::Theme;
use gyre_tui::whatif::{DEFAULT_SEEDS, WhatIf};
use gyre_tui::{Input, Options, action_for, load_input, ui};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const SIZE: (u16, u16) = (200, 60);

/// The 139 MB recording, written once by the release binary (its own process: the tokenizer
/// `gyre synth` loads stays out of this one).
fn big_recording() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/bench-data");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("synth-32x80-ctx20000.jsonl");
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "--quiet", "--bin", "gyre"])
            .current_dir(root)
            .status()
            .unwrap();
        assert!(status.success(), "cargo build --release");
        let status = Command::new(root.join("target/release/gyre"))
            .args(["synth", "--executions", "32", "--turns", "80"])
            .args(["--context", "20000", "--out"])
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success(), "gyre synth");
    }
    path
}

/// Opens the inspector on `input` and returns it once its first frame with data is drawn.
fn first_frame(input: &Input, term: &mut Terminal<TestBackend>) -> App {
    let opts = Options {
        input: input.clone(),
        settings: Settings::default(),
        advantage: AdvantageMode::DrGrpo,
        lenient: false,
        tokenizer: None,
        follow: false,
        seeds: DEFAULT_SEEDS,
        remember: Remember::Nothing,
    };
    let mut app = App::new("bench", Settings::default(), Theme { color: true });
    let (jobs, rx) = Jobs::channel();
    app.step_here(Action::Resize(SIZE.0, SIZE.1));
    std::thread::spawn(move || load_input(&opts, &jobs));
    term.draw(|f| ui::render(&app, f)).unwrap();
    while app.load != Load::Ready {
        match rx.recv().expect("the loader reports") {
            Msg::Done(a) => app.step_here(a),
            Msg::Term(ev) => {
                if let Some(a) = action_for(&app, &ev) {
                    app.step_here(a)
                }
            }
        }
    }
    term.draw(|f| ui::render(&app, f)).unwrap();
    app
}

fn bench(c: &mut Criterion) {
    let mut term = Terminal::new(TestBackend::new(SIZE.0, SIZE.1)).unwrap();
    let inputs = [
        ("demo", Input::Demo(Demo::Synth)),
        ("synth_139mb", Input::Files(vec![big_recording()])),
    ];
    let mut g = c.benchmark_group("first_frame");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    for (name, input) in &inputs {
        g.bench_function(*name, |b| b.iter(|| first_frame(input, &mut term)));
    }
    g.finish();
    let mut g = c.benchmark_group("rerun");
    g.sample_size(10).measurement_time(Duration::from_secs(6));
    for (name, input) in &inputs {
        let mut app = first_frame(input, &mut term);
        g.bench_function(*name, |b| {
            b.iter(|| {
                app.step_here(Action::Cmd(C::SeedUp));
                term.draw(|f| ui::render(&app, f)).unwrap();
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("whatif");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    for (name, input) in &inputs {
        let app = first_frame(input, &mut term);
        let d = app.data.as_ref().unwrap();
        let options = WhatIf::options_for(&d.results.settings, DEFAULT_SEEDS);
        g.bench_function(*name, |b| {
            b.iter(|| WhatIf::compute(Arc::clone(&d.batch), options.clone(), &|_, _| {}))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
