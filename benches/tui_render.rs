//! Cost of one 200×60 frame of the inspector, token pane included, on a 1M-token path against a
//! 1k-token path (the token pane materialises only the visible window, so the two should cost
//! the same). The recordings are generated here: one execution, a chain of delta-encoded
//! requests whose last path is `I + O` of the wanted length.
//!
//! Run: `cargo bench --bench tui_render`.

// A measurement harness may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]
// criterion_group! defines an undocumented public function.
#![allow(missing_docs)]

use std::io::Write;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use gyre_engine::admit::Settings;
use gyre_engine::load::{LoadOptions, load};
use gyre_tui::app::{Action, App};
use gyre_tui::keys::Command;
use gyre_tui::pane::Pane;
use gyre_tui::theme::Theme;
use gyre_tui::ui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// Writes one execution whose last request's path has about `tokens` tokens.
fn recording(path: &Path, tokens: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, r#"{{"kind":"header","format":"gyre/1"}}"#).unwrap();
    writeln!(f, r#"{{"kind":"execution","execution":"big","t":0}}"#).unwrap();
    let turn = 2000.min(tokens);
    let turns = (tokens / turn).max(1);
    let ids = |k: usize, n: usize, base: u32| -> String {
        (0..n)
            .map(|j| ((base as usize + k * 7919 + j * 31) % 150_000).to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    for k in 0..turns {
        let (input_n, output_n) = if k == 0 {
            (turn / 2, turn / 2)
        } else {
            (turn / 10, turn - turn / 10)
        };
        let lps = vec!["-0.25"; output_n].join(",");
        let extends = if k == 0 {
            String::new()
        } else {
            format!(r#","extends":"r{}""#, k - 1)
        };
        let source = if k == 0 { "system" } else { "tool" };
        writeln!(
            f,
            r#"{{"kind":"request","execution":"big","id":"r{k}"{extends},"input":[{}],"spans":[{{"end":{input_n},"source":"{source}"}}],"output":[{}],"logprobs":[{lps}]}}"#,
            ids(k, input_n, 1),
            ids(k, output_n, 50_000),
        )
        .unwrap();
    }
    writeln!(f, r#"{{"kind":"closure","execution":"big","t":10,"status":"completed","artifact":"a","version":1}}"#).unwrap();
    writeln!(f, r#"{{"kind":"assessment","execution":"big","artifact":"a","version":1,"status":"valid","score":1,"t":11}}"#).unwrap();
}

fn app_for(tokens: usize) -> App {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.jsonl");
    recording(&p, tokens);
    let batch = load(&[p], &LoadOptions::default(), &|_, _| {}).unwrap();
    let mut app = App::with_batch(
        "bench",
        batch,
        Settings::default(),
        Theme { color: true },
        (200, 60),
    );
    app.focus = Pane::Tokens;
    app
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("frame_200x60");
    for (name, tokens) in [("path_1k", 1_000usize), ("path_1M", 1_000_000)] {
        let mut app = app_for(tokens);
        let len = app.path().map_or(0, |v| v.index.len);
        assert!(len as usize >= tokens, "path has {len} tokens");
        let mut term = Terminal::new(TestBackend::new(200, 60)).unwrap();
        // Cursor in the middle of the path: the worst place for anything that scans.
        app.step_here(Action::Cmd(Command::Home));
        let half = len / 2;
        let cursor = |app: &App| app.path().map_or(0, |v| v.cursor);
        while cursor(&app) < half {
            app.step_here(Action::Cmd(Command::PageDown));
            if cursor(&app) + 50_000 < half {
                // Jump most of the way with segment moves (one node per turn).
                app.step_here(Action::Cmd(Command::NextSegment));
            }
        }
        g.bench_function(format!("{name}_middle"), |b| {
            b.iter(|| {
                term.draw(|f| ui::render(&app, f)).unwrap();
            })
        });
        app.step_here(Action::Cmd(Command::End));
        g.bench_function(format!("{name}_end"), |b| {
            b.iter(|| {
                term.draw(|f| ui::render(&app, f)).unwrap();
            })
        });
        g.bench_function(format!("{name}_scroll_page"), |b| {
            b.iter(|| {
                app.step_here(Action::Cmd(Command::PageUp));
                term.draw(|f| ui::render(&app, f)).unwrap();
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
