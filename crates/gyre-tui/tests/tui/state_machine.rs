//! The inspector as a state machine: random sequences of actions — every key of the binding
//! table, typed characters, mouse clicks and wheels, resizes from 20×6 to 250×70, the clock,
//! the recording growing or being rewritten shorter under `--follow` — on several recordings (the bundled demos, the example, a generated one with many executions,
//! hostile and degenerate ones). After every step the screen is rendered to a `TestBackend` and
//! the invariants are checked: nothing panics, the path shown belongs to the selected execution
//! and request, the cursor is inside it, the replay step is at most the number of draws, every
//! index a pane holds is in range, and no cell holds a control character.
//!
//! `GYRE_TUI_CASES` sets the number of sequences (default: 2000 in release builds, 70 in debug),
//! spread over the recordings.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use gyre_engine::Results;
use gyre_engine::admit::Settings;
use gyre_engine::load::{Batch, LoadOptions, load_bytes};
use gyre_engine::recgen::{self, GenOptions};
use gyre_engine::score::AdvantageMode;
use gyre_engine::stats;
use gyre_text::TokenText;
use gyre_tui::app::{Action, App, settings_change};
use gyre_tui::keys::{BINDINGS, Command};
use gyre_tui::overlay::{CompareView, Overlay, RowView, WhyView};
use gyre_tui::pane::tree::RequestTree;
use gyre_tui::path::PathIndex;
use gyre_tui::theme::Theme;
use gyre_tui::ui;
use gyre_tui::work::Task;
use proptest::prelude::*;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// One recording, loaded and processed once.
struct Fixture {
    name: &'static str,
    batch: Arc<Batch>,
    results: Results,
    text: Option<TokenText>,
    /// The recording cut after a quarter, a half, three quarters and all of its lines, as
    /// `--follow` reads it while it is written (or after it was rewritten shorter).
    versions: Vec<(Arc<Batch>, Results)>,
}

/// A recording whose every string is hostile (escape sequences, bidi overrides, newlines),
/// beside degenerate executions: one without requests, one whose only request is empty, one
/// with a single request, an assessment of an unknown version, a 300-character id.
const HOSTILE: &str = concat!(
    r#"{"kind":"header","format":"gyre/1","tokenizer":{"vocab":["\u001b[31mred","\n","\u202eevil","\u0007bell","\r\n\t","漢字","","\u001b]0;title\u0007"]}}"#,
    "\n",
    r#"{"kind":"execution","execution":"\u001b]0;pwned\u0007","t":1e9,"budget_s":1,"group":"\u001b[2J"}"#,
    "\n",
    r#"{"kind":"request","execution":"\u001b]0;pwned\u0007","id":"\u001b[31mr1\r\n","agent":"\u202esub","input":[0,1,2,3],"spans":[{"end":2,"source":"system"},{"end":4,"source":"assistant","call_id":"\u001b[1m"}],"output":[4,5,6,7],"logprobs":[-0.1,-1e-9,-30,0],"finish":"\u001b[0m","model":"\u202e","tool_calls":[{"id":"\u001b[Hc","name":"\u001b[J","start":0,"end":2}],"meta":{"reconstructed":false,"x":"\u001b[5m"}}"#,
    "\n",
    r#"{"kind":"request","execution":"\u001b]0;pwned\u0007","id":"r2\u0000","input":[0,1,2,3,4,5,0,0],"spans":[{"end":8,"source":"tool","call_id":"\u001b[Hc"}],"output":[1,1,1],"logprobs":[-1,-2,-3]}"#,
    "\n",
    r#"{"kind":"request","execution":"\u001b]0;pwned\u0007","id":"r3","input":[0,1,2,3],"output":[4,5,6,7],"logprobs":[-0.1,-0.1,-0.1,-0.1]}"#,
    "\n",
    r#"{"kind":"closure","execution":"\u001b]0;pwned\u0007","t":1000000010,"status":"timeout","committed":"r3","artifact":"\u001b[1mpatch","version":"\n"}"#,
    "\n",
    r#"{"kind":"assessment","execution":"\u001b]0;pwned\u0007","artifact":"\u001b[1mpatch","version":"\n","status":"failed","t":1000000000.5,"error":"\u001b[2Jboom\r\n","branch":"\u001b[31mr1\r\n","critique":"\u202e\u001b[31m"}"#,
    "\n",
    r#"{"kind":"assessment","execution":"\u001b]0;pwned\u0007","artifact":"\u001b[1mpatch","version":"\n","status":"valid","score":0.5,"t":1000000001,"branch":"r3"}"#,
    "\n",
    r#"{"kind":"assessment","execution":"\u001b]0;pwned\u0007","artifact":"other","version":7,"status":"valid","score":1,"t":1000000002,"branch":"nope"}"#,
    "\n",
    r#"{"kind":"execution","execution":"no requests","t":0}"#,
    "\n",
    r#"{"kind":"closure","execution":"no requests","t":1,"status":"completed","artifact":"a","version":1}"#,
    "\n",
    r#"{"kind":"request","execution":"empty","id":"only","input":[],"output":[],"logprobs":[]}"#,
    "\n",
    r#"{"kind":"closure","execution":"empty","t":1,"status":"completed","artifact":"a","version":1}"#,
    "\n",
    r#"{"kind":"assessment","execution":"empty","artifact":"a","version":1,"status":"valid","score":0,"t":1}"#,
    "\n",
    r#"{"kind":"request","execution":"one","id":"r1","input":[7,7,7],"output":[1],"logprobs":[-0.5]}"#,
    "\n",
    r#"{"kind":"closure","execution":"one","t":2,"status":"completed"}"#,
    "\n",
);

fn fixture(name: &'static str, bytes: &[u8], text: Option<TokenText>) -> Fixture {
    let load = |bytes: &[u8]| {
        let batch = load_bytes(name, bytes, &LoadOptions::default()).ok()?;
        let results = gyre_engine::process(&batch, &Settings::default(), AdvantageMode::DrGrpo);
        Some((Arc::new(batch), results))
    };
    let (batch, results) = load(bytes).expect("valid recording");
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    let versions = (1..=4)
        .filter_map(|q| load(&lines[..lines.len() * q / 4].concat()))
        .collect();
    Fixture {
        name,
        batch,
        results,
        text,
        versions,
    }
}

fn fixtures() -> &'static [Fixture] {
    static F: OnceLock<Vec<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let mut generated = Vec::new();
        let execs = recgen::generate(&GenOptions {
            executions: 48,
            turns: 10,
            seed: 11,
            ..GenOptions::default()
        });
        recgen::write_recording(&execs, true, &mut generated).unwrap();
        let long_id = format!(
            "{{\"kind\":\"request\",\"execution\":\"{}\",\"id\":\"r\",\"input\":[1],\"output\":[2],\"logprobs\":[-1]}}\n",
            "x".repeat(300)
        );
        let hostile_vocab = {
            let b = load_bytes("h", HOSTILE.as_bytes(), &LoadOptions::default()).unwrap();
            let (spec, _, _) = b.tokenizer_spec().unwrap();
            TokenText::from_header(spec, std::path::Path::new(".")).unwrap()
        };
        vec![
            fixture("example", gyre_engine::demo::RECORDING, None),
            fixture(
                "synth",
                gyre_engine::demo::Demo::Synth.bytes(),
                Some(TokenText::qwen3().unwrap()),
            ),
            fixture("claude-code", gyre_engine::demo::Demo::ClaudeCode.bytes(), None),
            fixture("generated", &generated, None),
            fixture("hostile", HOSTILE.as_bytes(), Some(hostile_vocab)),
            fixture("long id", long_id.as_bytes(), None),
            fixture("no executions", b"{\"kind\":\"header\",\"format\":\"gyre/1\"}\n", None),
            fixture("audited", crate::common::AUDITED.as_bytes(), None),
        ]
    })
}

/// Every command of the key table (each pane number for the digit keys).
fn commands() -> Vec<Command> {
    let mut out = Vec::new();
    for b in BINDINGS {
        match b.command {
            Command::Jump(_) => out.extend((1..=6).map(Command::Jump)),
            c => out.push(c),
        }
    }
    out
}

/// An action with positions as fractions of the screen (the size changes as the sequence runs).
#[derive(Clone, Debug)]
enum Act {
    Cmd(usize),
    Input(char),
    Backspace,
    Clear,
    DeleteWord,
    Click(u16, u16),
    Wheel(u16, u16, bool),
    Resize(u16, u16),
    Tick,
    Grow(usize),
    /// Settings keys sent at once (faster than the engine re-runs), their re-runs reported
    /// back in the order they finished or reversed.
    Burst(Vec<usize>, bool),
}

/// The keys that change settings (each one re-runs the engine; undo and redo with nothing to
/// step to do not).
const SETTINGS_KEYS: [Command; 8] = [
    Command::SeedUp,
    Command::SeedDown,
    Command::JmaxUp,
    Command::JmaxDown,
    Command::Priority,
    Command::Advantage,
    Command::Undo,
    Command::Redo,
];

fn act() -> impl Strategy<Value = Act> {
    let n = commands().len();
    prop_oneof![
        50 => (0..n).prop_map(Act::Cmd),
        10 => prop::sample::select(vec!['1', '7', '0', 'o', 'n', 'r', 'e', 'K', 'J', 'x', ' ', '⟨', '/'])
            .prop_map(Act::Input),
        3 => Just(Act::Backspace),
        2 => Just(Act::Clear),
        2 => Just(Act::DeleteWord),
        14 => (0u16..1000, 0u16..1000).prop_map(|(x, y)| Act::Click(x, y)),
        6 => (0u16..1000, 0u16..1000, any::<bool>()).prop_map(|(x, y, d)| Act::Wheel(x, y, d)),
        5 => (20u16..=250, 6u16..=70).prop_map(|(w, h)| Act::Resize(w, h)),
        2 => Just(Act::Tick),
        2 => (0usize..4).prop_map(Act::Grow),
        3 => (prop::collection::vec(0..SETTINGS_KEYS.len(), 2..=8), any::<bool>())
            .prop_map(|(keys, reversed)| Act::Burst(keys, reversed)),
    ]
}

fn action(f: &Fixture, a: &Act, size: (u16, u16), cmds: &[Command], clock: &mut Instant) -> Action {
    let at = |x: u16, y: u16| {
        (
            (x as u32 * size.0 as u32 / 1000) as u16,
            (y as u32 * size.1 as u32 / 1000) as u16,
        )
    };
    match *a {
        Act::Cmd(i) => Action::Cmd(cmds[i]),
        Act::Input(c) => Action::Input(c),
        Act::Backspace => Action::Backspace,
        Act::Clear => Action::ClearField,
        Act::DeleteWord => Action::DeleteWord,
        Act::Click(x, y) => {
            let (x, y) = at(x, y);
            Action::Click(x, y)
        }
        Act::Wheel(x, y, d) => {
            let (x, y) = at(x, y);
            Action::Wheel(x, y, d)
        }
        Act::Resize(w, h) => Action::Resize(w, h),
        Act::Tick => {
            *clock += Duration::from_secs(60);
            Action::Tick(*clock)
        }
        // Sent by `burst`, never as one action.
        Act::Burst(..) => Action::Tick(*clock),
        Act::Grow(i) => match f.versions.get(i % f.versions.len().max(1)) {
            Some((b, r)) => Action::Grown(Arc::clone(b), Box::new(r.clone())),
            None => Action::Tick(*clock),
        },
    }
}

/// What must hold after every step; `deep` also compares the tree shown with one made afresh
/// (after a step that changed the batch or the execution).
fn check(app: &App, deep: bool) -> Result<(), String> {
    let Some(d) = &app.data else {
        return Err("the data is loaded".into());
    };
    let n = d.batch.executions.len();
    if n == 0 {
        return Ok(());
    }
    let sel = app.sel;
    if sel.exec >= n {
        return Err(format!("execution {} of {n}", sel.exec));
    }
    let exec = &d.batch.executions[sel.exec];
    if app.panes.tree.rtree.places.len() != exec.requests.len()
        || (deep && app.panes.tree.rtree.display != RequestTree::new(exec).display)
    {
        return Err("the tree shown is not the selected execution's".into());
    }
    let draws = d.results.admissions[sel.exec].draws.len() as u32;
    if sel.step > draws {
        return Err(format!("step {} > {draws} draws", sel.step));
    }
    if let Some(r) = sel.request {
        if r as usize >= exec.requests.len() {
            return Err(format!("request {r} of {}", exec.requests.len()));
        }
        let v = app
            .path()
            .ok_or("a selected request has its path on screen")?;
        if (v.key.batch, v.key.exec, v.key.request, v.key.generation)
            != (sel.batch, sel.exec, r, sel.generation)
        {
            return Err(format!("path {:?} shown for {sel:?}", v.key));
        }
        let fresh = PathIndex::new(exec, r);
        if fresh.nodes != v.index.nodes || fresh.len != v.index.len {
            return Err("the path shown is not the selected request's path".into());
        }
        let req = &exec.requests[r as usize];
        if v.index.len != (req.input_len + req.output_len) as u64 {
            return Err("the path is not I + O".into());
        }
        if v.index.len > 0 && v.cursor >= v.index.len {
            return Err(format!("cursor {} ≥ path length {}", v.cursor, v.index.len));
        }
        if app.panes.tree.selected_request() != Some(r) {
            return Err(format!(
                "tree selects {:?}, the path is of {r}",
                app.panes.tree.selected_request()
            ));
        }
    } else if !exec.requests.is_empty() {
        return Err("an execution with requests has one selected".into());
    }
    if app.panes.execs.rows.iter().any(|&i| i >= n) {
        return Err("an executions row outside the batch".into());
    }
    if !app.panes.execs.rows.is_empty() && app.panes.execs.row >= app.panes.execs.rows.len() {
        return Err(format!(
            "executions row {} of {}",
            app.panes.execs.row,
            app.panes.execs.rows.len()
        ));
    }
    if let Some(i) = app.panes.assess.selected {
        if i >= exec.assessments.len() {
            return Err(format!("assessment {i} of {}", exec.assessments.len()));
        }
    }
    if let Overlay::Why(WhyView {
        exec: e, request, ..
    }) = app.overlay
    {
        if e != sel.exec || request as usize >= exec.requests.len() {
            return Err("why overlay of another execution".into());
        }
    }
    if let Some(s) = sel.sample {
        if s as usize >= exec.trained.list.len() {
            return Err(format!("sample {s} of {}", exec.trained.list.len()));
        }
    }
    if let Overlay::Audit(v) = &app.overlay {
        let findings = app.audit().map_or(0, |a| a.findings.len());
        if v.finding > 0 && v.finding >= findings {
            return Err(format!("audit view at finding {} of {findings}", v.finding));
        }
        if v.sample > 0 && v.sample >= exec.trained.list.len() {
            return Err(format!("audit view at sample {}", v.sample));
        }
    }
    if app.exec_audit.as_ref().is_some_and(|a| {
        a.exec == sel.exec
            && a.batch == sel.batch
            && a.layout.samples.len() != exec.trained.list.len()
    }) {
        return Err("the execution's audit is of other samples".into());
    }
    if !app.areas().order().is_empty() && !app.areas().order().contains(&app.focus) {
        return Err(format!("focus on {:?}, which is not on screen", app.focus));
    }
    if let Some(at) = app.search.at {
        if at >= app.search.hits.len() {
            return Err("search position past its hits".into());
        }
    }
    match &app.overlay {
        Overlay::Compare(CompareView(at)) => {
            let listed = app
                .comparison()
                .map_or(0, |c| gyre_tui::overlay::compare::listed(&c.diff).len());
            if *at > 0 && *at >= listed {
                return Err(format!("compare row {at} of {listed}"));
            }
            if app.pinned_results().is_none() {
                return Err("the compare view without a pin".into());
            }
        }
        Overlay::Row(RowView(at)) => {
            let len = app
                .ctx()
                .and_then(|ctx| gyre_tui::overlay::row::row(&ctx))
                .map_or(0, |r| r.loss_mask.len());
            if *at > 0 && *at as usize >= len {
                return Err(format!("row view at response token {at} of {len}"));
            }
        }
        Overlay::Dashboard(dash) => {
            if let Some(b) = app.breakdown() {
                let counts = [
                    b.provenance.len(),
                    b.left_out.len(),
                    b.rows.len(),
                    b.groups.len(),
                    gyre_tui::whatif::SWEEP_JMAX.len(),
                ];
                for (bar, n) in dash.bar.iter().zip(counts) {
                    if *bar > 0 && *bar >= n {
                        return Err(format!("dashboard bar {bar} of {n}"));
                    }
                }
            }
        }
        _ => {}
    }
    if let Some(w) = app.whatif() {
        if w.lens.executions.len() != n {
            return Err("a lens of another batch".into());
        }
    }
    Ok(())
}

/// Sends settings keys at once with workers to re-run on, then hands the app what the work
/// they asked for reports (re-runs and lenses), in the order asked or reversed: the results of
/// every key but the last arrive after newer settings were asked for.
fn burst(app: &mut App, keys: &[usize], reversed: bool) {
    app.workers = true;
    let mut tasks = Vec::new();
    for &k in keys {
        tasks.extend(app.step(Action::Cmd(SETTINGS_KEYS[k])));
    }
    app.workers = false;
    let reports = Mutex::new(Vec::new());
    for task in tasks {
        task.run(&|a| reports.lock().unwrap().push(a));
    }
    let mut reports = reports.into_inner().unwrap();
    if reversed {
        reports.reverse();
    }
    for a in reports {
        app.step_here(a);
    }
}

/// The work a step asks for is of the state it leaves: the batch on screen, and a re-run of the
/// settings asked for.
fn check_tasks(app: &App, tasks: &[Task]) -> Result<(), String> {
    let Some(d) = &app.data else {
        if tasks.is_empty() {
            return Ok(());
        }
        return Err(format!("{} tasks asked for before any data", tasks.len()));
    };
    for t in tasks {
        let batch = match t {
            Task::Rerun {
                batch,
                settings,
                advantage,
            } => {
                if (settings, *advantage) != (&app.settings, app.advantage) {
                    return Err(format!(
                        "a re-run of {settings} · {advantage:?}, the settings asked for are {} · \
                         {:?}",
                        app.settings, app.advantage
                    ));
                }
                batch
            }
            Task::WhatIf { batch, .. } | Task::Export { batch, .. } | Task::Audit { batch, .. } => {
                batch
            }
            Task::Search(_) => continue,
        };
        if !Arc::ptr_eq(batch, &d.batch) {
            return Err("work asked for on another batch than the one on screen".into());
        }
    }
    Ok(())
}

/// The Δ line's figures are those of the settings it names: the engine run afresh under the
/// settings before and after gives the totals it shows, of the batch and of the execution it
/// names, and the results on screen are those after.
fn check_change(app: &App) -> Result<(), String> {
    let (Some(c), Some(d)) = (&app.change, &app.data) else {
        return Ok(());
    };
    if (&d.results.settings, d.results.advantage_mode) != (&c.settings_after, c.advantage_after) {
        return Err(format!(
            "the Δ line names {} · advantage {:?}, the screen shows {}",
            c.settings_after,
            c.advantage_after,
            app.export_settings()
        ));
    }
    let want = settings_change(
        (&c.settings_before, c.advantage_before),
        (&c.settings_after, c.advantage_after),
    );
    if c.what != want {
        return Err(format!(
            "the Δ line says {:?}, its settings {want:?}",
            c.what
        ));
    }
    let exec = d
        .batch
        .execution_index(&c.exec)
        .ok_or("the Δ line names an execution of the batch")?;
    for (settings, advantage, batch, one, side) in [
        (
            &c.settings_before,
            c.advantage_before,
            c.before,
            c.exec_before,
            "before",
        ),
        (
            &c.settings_after,
            c.advantage_after,
            c.after,
            c.exec_after,
            "after",
        ),
    ] {
        let r = gyre_engine::process(&d.batch, settings, advantage);
        let e = &d.batch.executions[exec];
        let fresh = stats::execution_totals(e, &r.outcomes[exec], &r.admissions[exec]);
        if stats::totals(&d.batch, &r) != batch || fresh != one {
            return Err(format!(
                "the Δ line's figures {side} ({}) are not those of {settings} · advantage {advantage:?}",
                c.what
            ));
        }
    }
    Ok(())
}

/// A character a terminal would act on or not show: controls, bidi overrides, invisible marks.
fn hidden(ch: char) -> bool {
    ch.is_control()
        || matches!(ch, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

fn run(f: &Fixture, seq: &[Act], start: (u16, u16)) -> Result<(), String> {
    // Exports go through the prompt and fail at once (no directory there): writing and syncing
    // thousands of files would measure the disk, not the inspector.
    let dir = tempfile::tempdir().unwrap();
    let mut app = App::new(f.name, Settings::default(), Theme { color: true });
    app.cwd = dir.path().join("not a directory");
    // The lens is worked out in place whenever it is shown: a few seeds keep sequences quick.
    app.lens_seeds = 4;
    app.step_here(Action::Resize(start.0, start.1));
    if let Some(t) = &f.text {
        app.step_here(Action::Text(t.clone()));
    }
    app.step_here(Action::Processed(
        Arc::clone(&f.batch),
        Box::new(f.results.clone()),
    ));
    let cmds = commands();
    let mut clock = Instant::now();
    let mut term = Terminal::new(TestBackend::new(start.0, start.1)).unwrap();
    let mut checked_change = None;
    for (k, a) in seq.iter().enumerate() {
        let before = (app.sel.batch, app.sel.exec);
        let shown = if let Act::Burst(keys, reversed) = a {
            burst(&mut app, keys, *reversed);
            format!("{a:?}")
        } else {
            let action = action(f, a, app.size, &cmds, &mut clock);
            let shown = format!("{action:?}");
            // The work the step asks for is checked, then done in place as a worker would.
            let tasks = app.step(action);
            check_tasks(&app, &tasks).map_err(|e| format!("after {shown}: {e}"))?;
            for task in tasks {
                let reports = Mutex::new(Vec::new());
                task.run(&|a| reports.lock().unwrap().push(a));
                for a in reports.into_inner().unwrap() {
                    app.step_here(a);
                }
            }
            shown
        };
        let deep = before != (app.sel.batch, app.sel.exec);
        // Now and then the terminal has another size than the app has heard of yet.
        let size = if k % 7 == 3 {
            (
                app.size.0.saturating_sub(k as u16 % 30).max(1),
                app.size.1.saturating_sub(k as u16 % 9).max(1),
            )
        } else {
            app.size
        };
        let area = term.backend().buffer().area;
        if (area.width, area.height) != size {
            term.backend_mut().resize(size.0, size.1);
        }
        term.draw(|fr| ui::render(&app, fr))
            .map_err(|e| format!("draw: {e}"))?;
        if let Some(c) = term
            .backend()
            .buffer()
            .content()
            .iter()
            .find(|c| c.symbol().chars().any(hidden))
        {
            return Err(format!(
                "{}: step {k} ({shown}): a cell holds {:?}",
                f.name,
                c.symbol()
            ));
        }
        check(&app, deep).map_err(|e| format!("{}: step {k} ({shown}): {e}", f.name))?;
        // The engine runs twice to check a Δ line: once per new one.
        if app.change != checked_change {
            check_change(&app).map_err(|e| format!("{}: step {k} ({shown}): {e}", f.name))?;
            checked_change = app.change.clone();
        }
    }
    Ok(())
}

/// Sequences per recording: `GYRE_TUI_CASES` (default 2000 in release builds, 70 in debug)
/// spread over the seven recordings, which run as separate tests (in parallel).
fn cases() -> u32 {
    let total: u32 = std::env::var("GYRE_TUI_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 70 } else { 2000 });
    total.div_ceil(7).max(1)
}

macro_rules! sessions {
    ($($name:ident => $which:expr),* $(,)?) => {
        proptest! {
            #![proptest_config(ProptestConfig {
                cases: cases(),
                max_shrink_iters: 2000,
                ..ProptestConfig::default()
            })]
            $(
                #[test]
                fn $name(
                    start in (20u16..=250, 6u16..=70),
                    seq in prop::collection::vec(act(), 200..=260),
                ) {
                    if let Err(e) = run(&fixtures()[$which], &seq, start) {
                        return Err(TestCaseError::fail(e));
                    }
                }
            )*
        }
    };
}

sessions! {
    random_sessions_on_the_example => 0,
    random_sessions_on_the_synth_demo => 1,
    random_sessions_on_the_claude_code_demo => 2,
    random_sessions_on_a_generated_recording_with_many_executions => 3,
    random_sessions_on_a_hostile_recording => 4,
    random_sessions_on_a_long_id => 5,
    random_sessions_on_no_executions => 6,
}

/// The two sequences the issue reported as crashes, on the recordings they crashed on.
#[test]
fn the_reported_crashes_are_gone() {
    use crate::common::*;
    // `/r14` Enter, Shift-Tab Shift-Tab, `j` on the synth demo.
    let f = &fixtures()[1];
    let mut app = App::new(f.name, Settings::default(), Theme { color: true });
    app.step_here(Action::Resize(160, 45));
    app.step_here(Action::Processed(
        Arc::clone(&f.batch),
        Box::new(f.results.clone()),
    ));
    cmds(&mut app, &[Command::Search]);
    for c in "r14".chars() {
        app.step_here(Action::Input(c));
    }
    cmds(
        &mut app,
        &[
            Command::Enter,
            Command::FocusPrev,
            Command::FocusPrev,
            Command::Down,
        ],
    );
    let _ = screen(&app);
    check(&app, true).unwrap();
    // Executions opening on a request at the same position, then Shift-Tab ×2, j j j, G, a
    // click on another execution.
    let f = &fixtures()[3];
    let mut app = App::new(f.name, Settings::default(), Theme { color: true });
    app.step_here(Action::Resize(160, 45));
    app.step_here(Action::Processed(
        Arc::clone(&f.batch),
        Box::new(f.results.clone()),
    ));
    cmds(&mut app, &[Command::FocusPrev, Command::FocusPrev]);
    for c in [Command::Down, Command::Down, Command::Down, Command::End] {
        cmds(&mut app, &[c]);
        let _ = screen(&app);
        check(&app, true).unwrap();
    }
    let a = app.areas();
    for row in 0..8 {
        app.step_here(Action::Click(a.execs.x + 2, a.execs.y + 2 + row));
        cmds(
            &mut app,
            &[Command::FocusPrev, Command::FocusPrev, Command::Down],
        );
        let _ = screen(&app);
        check(&app, true).unwrap();
    }
}

/// A recording's text loaded and processed under the default settings, as `--follow` hands it
/// to the inspector.
fn processed(text: &str) -> (Arc<Batch>, Box<Results>) {
    let b = load_bytes("follow", text.as_bytes(), &LoadOptions::default()).unwrap();
    let r = gyre_engine::process(&b, &Settings::default(), AdvantageMode::DrGrpo);
    (Arc::new(b), Box::new(r))
}

/// `--follow`: the recording grows (and, if rewritten, shrinks) under the inspector; the
/// selection stays on its execution and request by id, and every invariant holds throughout.
#[test]
fn a_growing_recording_keeps_the_selection_by_id() {
    use crate::common::*;
    let text = std::str::from_utf8(gyre_engine::demo::RECORDING).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let load = |n: usize| processed(&lines[..n].concat());
    let mut app = App::new("growing", Settings::default(), Theme { color: true });
    app.step_here(Action::Resize(160, 45));
    let (b, r) = load(8);
    app.step_here(Action::Processed(b, r));
    cmds(&mut app, &[Command::SeedUp]);
    let ids = |app: &App| {
        let d = app.data.as_ref().unwrap();
        let e = &d.batch.executions[app.sel.exec];
        let r = app.sel.request.map(|r| e.requests[r as usize].id.clone());
        (e.id.clone(), r)
    };
    assert_eq!(app.data.as_ref().unwrap().batch.executions.len(), 1);
    for (n, executions) in [(14, 1), (20, 4), (lines.len(), 4), (17, 2)] {
        let before = ids(&app);
        let (b, r) = load(n);
        app.step_here(Action::Grown(b, r));
        let _ = screen(&app);
        check(&app, true).unwrap();
        let d = app.data.as_ref().unwrap();
        assert_eq!(d.batch.executions.len(), executions);
        assert_eq!(
            d.results.settings, app.settings,
            "results under the settings asked for"
        );
        // Rewritten shorter, the execution may be gone: the first one opens instead.
        if d.batch.execution_index(&before.0).is_some() {
            assert_eq!(
                ids(&app),
                before,
                "same execution and request after {n} lines"
            );
        } else {
            assert_eq!(app.sel.exec, 0);
        }
        assert_eq!(
            app.sel.step as usize,
            d.results.admissions[app.sel.exec].draws.len()
        );
        cmds(
            &mut app,
            &[Command::Down, Command::FocusNext, Command::Down],
        );
        check(&app, true).unwrap();
    }
}

/// `--follow` reads the recording again: a request appended in the middle of the path on screen
/// splits its nodes, and a rewrite can leave the execution shorter. The tree and the path are
/// made again for the new batch (a stale one panicked on the next frame), and an overlay open
/// on the old batch cannot reach into the new one.
#[test]
fn a_recording_read_again_never_keeps_a_stale_tree_or_path() {
    use crate::common::*;
    let r = |id: &str, input: Vec<u32>, output: Vec<u32>| {
        let lp = vec![-1.0; output.len()];
        format!(
            "{{\"kind\":\"request\",\"execution\":\"e\",\"id\":\"{id}\",\"input\":{input:?},\"output\":{output:?},\"logprobs\":{lp:?}}}\n"
        )
    };
    let head = "{\"kind\":\"header\",\"format\":\"gyre/1\"}\n{\"kind\":\"execution\",\"execution\":\"e\",\"t\":0}\n";
    let r1 = r("r1", (1..41).collect(), vec![50, 51, 52]);
    let r2 = r("r2", (1..6).collect(), vec![60]);
    let r3 = r("r3", (1..41).collect(), vec![50, 51, 70]);
    let load = |text: String| processed(&text);
    let mut app = App::new("follow", Settings::default(), Theme { color: true });
    app.step_here(Action::Resize(120, 40));
    let (b, res) = load(format!("{head}{r1}{r3}"));
    app.step_here(Action::Processed(b, res));
    // The cursor deep in r1's context, the tree opened on every request.
    cmds(&mut app, &[Command::Home, Command::Right, Command::Right]);
    let steps = [
        format!("{head}{r1}{r3}{r2}"),
        format!("{head}{r1}"),
        format!("{head}{r1}{r3}{r2}"),
        head.to_string(),
        format!("{head}{r2}{r1}"),
    ];
    for (k, text) in steps.into_iter().enumerate() {
        // Overlays that hold indices into the batch stay open across the change.
        let overlay = [Command::Why, Command::Palette, Command::EditPriority][k % 3];
        cmds(&mut app, &[overlay]);
        let (b, res) = load(text);
        app.step_here(Action::Grown(b, res));
        // In the priority editor: a change, so that Enter re-runs.
        app.step_here(Action::Input('J'));
        let _ = screen(&app);
        check(&app, true).unwrap_or_else(|e| panic!("after version {k}: {e}"));
        for c in [
            Command::Enter,
            Command::Escape,
            Command::SeedUp,
            Command::End,
        ] {
            cmds(&mut app, &[c]);
            let _ = screen(&app);
            check(&app, true).unwrap_or_else(|e| panic!("after version {k}, {c:?}: {e}"));
        }
    }
}

/// The trainer's-eye row scrolled to its end when `--follow` reads a recording whose row on
/// screen is now shorter (or when a re-run lands with another row): the view starts again at the
/// row's first response token, never past its end.
#[test]
fn the_row_view_survives_new_results_under_it() {
    use crate::common::*;
    let r = |id: &str, output: Vec<u32>| {
        let lp = vec![-1.0; output.len()];
        format!(
            "{{\"kind\":\"request\",\"execution\":\"e\",\"id\":\"{id}\",\"input\":[1,2,3],\"output\":{output:?},\"logprobs\":{lp:?}}}\n"
        )
    };
    let head = "{\"kind\":\"header\",\"format\":\"gyre/1\"}\n{\"kind\":\"execution\",\"execution\":\"e\",\"t\":0}\n";
    // Scored, so that its one path is drawn and exported.
    let end = "{\"kind\":\"closure\",\"execution\":\"e\",\"t\":5,\"status\":\"completed\",\"artifact\":\"a\",\"version\":1}\n{\"kind\":\"assessment\",\"execution\":\"e\",\"artifact\":\"a\",\"version\":1,\"status\":\"valid\",\"score\":1.0,\"t\":6}\n";
    let load = |text: String| processed(&text);
    let mut app = App::new("follow", Settings::default(), Theme { color: true });
    app.step_here(Action::Resize(120, 40));
    let (b, res) = load(format!("{head}{}{end}", r("r1", (10..200).collect())));
    app.step_here(Action::Processed(b, res));
    cmds(&mut app, &[Command::Row, Command::End]);
    assert!(matches!(app.overlay, Overlay::Row(RowView(at)) if at > 0));
    let (b, res) = load(format!("{head}{}{end}", r("r1", vec![10, 11])));
    app.step_here(Action::Grown(b, res));
    let _ = screen(&app);
    check(&app, true).unwrap();
    assert!(matches!(app.overlay, Overlay::Row(RowView(0))));
}

/// The dashboard open on the last bar of every chart when `--follow` reads a recording with
/// fewer executions: each selection moves to the last bar there is.
#[test]
fn the_dashboard_survives_a_shorter_recording() {
    use crate::common::*;
    let text = std::str::from_utf8(gyre_engine::demo::RECORDING).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let load = |n: usize| processed(&lines[..n].concat());
    let mut app = App::new("growing", Settings::default(), Theme { color: true });
    app.step_here(Action::Resize(160, 45));
    let (b, r) = load(lines.len());
    app.step_here(Action::Processed(b, r));
    cmds(&mut app, &[Command::Dashboard]);
    for _ in 0..5 {
        cmds(&mut app, &[Command::End, Command::FocusNext]);
    }
    let Overlay::Dashboard(before) = app.overlay else {
        panic!("the dashboard is open")
    };
    assert!(before.bar[2] > 1, "{before:?}");
    let (b, r) = load(14);
    app.step_here(Action::Grown(b, r));
    let _ = screen(&app);
    check(&app, true).unwrap();
    let Overlay::Dashboard(after) = app.overlay else {
        panic!("the dashboard stays open")
    };
    let rows = app.breakdown().unwrap().rows.len();
    assert_eq!(after.bar[2], rows - 1);
    // The status line says the file now holds less (it said "grew … (+0)").
    let said = &app.message.as_ref().unwrap().text;
    assert!(
        said.starts_with("recording rewritten: 1 executions (-3), 9 requests (-5)"),
        "{said}"
    );
}

/// `+ + + + +` sent at once on the bundled demo: the Δ line compares the results shown before
/// (J_max 5) with those of J_max 10 and says so, whichever order the re-runs finish in.
#[test]
fn the_change_line_under_a_key_burst_names_the_settings_it_compares() {
    let f = &fixtures()[0];
    for reversed in [false, true] {
        let mut app = App::new(f.name, Settings::default(), Theme { color: true });
        app.step_here(Action::Resize(160, 45));
        app.step_here(Action::Processed(
            Arc::clone(&f.batch),
            Box::new(f.results.clone()),
        ));
        burst(&mut app, &[2; 5], reversed);
        let c = app.change.as_ref().expect("a Δ line");
        assert!(c.what.starts_with("J_max 5 → 10"), "{}", c.what);
        assert_eq!(c.before, stats::totals(&f.batch, &f.results));
        check_change(&app).unwrap();
        let shown = ui_text(&app);
        assert!(shown.contains("Δ J_max 5 → 10: "), "{shown}");
        // Back where it started: nothing to compare, and the screen says so.
        burst(&mut app, &[3; 5], reversed);
        check_change(&app).unwrap();
        assert!(
            app.change
                .as_ref()
                .unwrap()
                .what
                .starts_with("J_max 10 → 5")
        );
        burst(&mut app, &[2, 3], reversed);
        let said = &app.message.as_ref().expect("a message").text;
        assert!(
            said.starts_with("settings back to seed 0 · J_max 5"),
            "{said}"
        );
    }
}

fn ui_text(app: &App) -> String {
    crate::common::text(&crate::common::render(app))
}
