//! Helpers shared by the TUI tests.
#![allow(dead_code)]

use gyre_engine::admit::Settings;
use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_tui::app::{Action, App, Jobs};
use gyre_tui::keys::Command;
use gyre_tui::theme::Theme;
use gyre_tui::ui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;

/// The inspector on the bundled demo, at `w`×`h`.
pub fn demo_app(w: u16, h: u16, color: bool) -> App {
    let batch = load_bytes(
        gyre_engine::demo::NAME,
        gyre_engine::demo::RECORDING,
        &LoadOptions::default(),
    )
    .expect("demo loads");
    App::with_batch(
        "demo: example.jsonl",
        batch,
        Settings::default(),
        Theme { color },
        (w, h),
    )
}

/// The inspector on the bundled `gyre synth` demo (`--demo synth`), at `w`×`h`.
pub fn synth_app(w: u16, h: u16, color: bool) -> App {
    let batch = load_bytes(
        gyre_engine::demo::SYNTH_NAME,
        gyre_engine::demo::Demo::Synth.bytes(),
        &LoadOptions::default(),
    )
    .expect("synth demo loads");
    App::with_batch(
        "demo: synth",
        batch,
        Settings::default(),
        Theme { color },
        (w, h),
    )
}

/// Renders the app into a buffer of its size.
pub fn render(app: &App) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(app.size.0, app.size.1)).expect("test terminal");
    t.draw(|f| ui::render(app, f)).expect("draw");
    t.backend().buffer().clone()
}

/// The buffer as text, one line per row, trailing blanks trimmed.
pub fn text(buf: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        let mut line = String::new();
        for x in 0..buf.area.width {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The token cursor (path position), or 0 without a path.
pub fn cursor(app: &App) -> u64 {
    app.path().map_or(0, |v| v.cursor)
}

/// The request whose path the token pane shows.
pub fn path_request(app: &App) -> Option<u32> {
    app.path().map(|v| v.key.request)
}

/// Length of the path on screen.
pub fn path_len(app: &App) -> u64 {
    app.path().map_or(0, |v| v.index.len)
}

/// The text inside a rectangle of the screen, rows trimmed and joined by spaces (so a line
/// the pane wrapped reads whole).
pub fn area_text(app: &App, r: ratatui::layout::Rect) -> String {
    let buf = render(app);
    let mut rows = Vec::new();
    for y in r.y..r.bottom() {
        let mut line = String::new();
        for x in r.x..r.right() {
            line.push_str(buf[(x, y)].symbol());
        }
        rows.push(
            line.trim_matches(|c: char| c == ' ' || "│┃┌┐└┘┏┓┗┛─━".contains(c))
                .to_string(),
        );
    }
    rows.join(" ")
}

/// The why line, whole.
pub fn why_text(app: &App) -> String {
    area_text(app, app.areas().why)
}

/// Applies commands in order.
pub fn cmds(app: &mut App, cs: &[Command]) {
    for &c in cs {
        app.step_here(Action::Cmd(c));
    }
}

/// Screen text after the commands.
pub fn screen(app: &App) -> String {
    text(&render(app))
}

/// With workers, as the run loop has them: applies an action and hands the work it asks for to
/// worker threads that report through `jobs`.
pub fn step_on(app: &mut App, jobs: &Jobs, a: Action) {
    app.workers = true;
    for task in app.step(a) {
        task.spawn(jobs);
    }
}

/// Applies commands in order, with workers.
pub fn cmds_on(app: &mut App, jobs: &Jobs, cs: &[Command]) {
    for &c in cs {
        step_on(app, jobs, Action::Cmd(c));
    }
}

/// Steps the workers' reports into the app until `done` holds (other background work, such as
/// the lens, reports through the same channel meanwhile); what they ask for goes to workers too.
pub fn pump_until(
    app: &mut App,
    jobs: &Jobs,
    rx: &std::sync::mpsc::Receiver<gyre_tui::app::Msg>,
    done: impl Fn(&App) -> bool,
) {
    while !done(app) {
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(gyre_tui::app::Msg::Done(a)) => step_on(app, jobs, a),
            Ok(gyre_tui::app::Msg::Term(_)) => {}
            Err(e) => panic!("no report from the workers: {e}"),
        }
    }
}

/// A recording and a trainer's samples of it in one gyre/1 file, with planted defects: in
/// `e1`, sample `b` trains r2's tool result (trained, not sampled) and sample `c` trains r1's
/// output again (trained twice); sample `a`'s trainer is 1.4 nats less sure of r1's output
/// token 2 than the sampler was (a gap). `e2`'s one sample is clean.
pub const AUDITED: &str = concat!(
    r#"{"kind":"header","format":"gyre/1"}"#,
    "\n",
    r#"{"kind":"request","execution":"e1","id":"r1","input":[1,2,3],"output":[4,5,6,7],"logprobs":[-0.1,-0.2,-0.3,-0.4],"spans":[{"end":3,"source":"user"}]}"#,
    "\n",
    r#"{"kind":"request","execution":"e1","id":"r2","input":[1,2,3,4,5,6,7,8,9],"output":[10,11,12,13],"logprobs":[-0.5,-0.6,-0.7,-0.8],"spans":[{"end":3,"source":"user"},{"end":7,"source":"assistant"},{"end":9,"source":"tool"}]}"#,
    "\n",
    r#"{"kind":"request","execution":"e2","id":"q1","input":[1,2],"output":[20,21,22],"logprobs":[-0.3,-0.3,-0.3],"spans":[{"end":2,"source":"user"}]}"#,
    "\n",
    r#"{"kind":"trained","execution":"e1","sample":"a","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7}],"loss_mask":[1,1,1,1],"trainer_logprobs":[-0.1,-0.2,-1.7,-0.4]}"#,
    "\n",
    r#"{"kind":"trained","execution":"e1","sample":"b","prompt_len":7,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[1,1,1,1,1,1]}"#,
    "\n",
    r#"{"kind":"trained","execution":"e1","sample":"c","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7}],"loss_mask":[1,1,1,1]}"#,
    "\n",
    r#"{"kind":"trained","execution":"e2","sample":"s","prompt_len":2,"tokens":[{"request":"q1","start":0,"end":5}],"loss_mask":[1,1,1]}"#,
    "\n",
);

/// The inspector on [`AUDITED`], at `w`×`h`.
pub fn audited_app(w: u16, h: u16, color: bool) -> App {
    let batch =
        load_bytes("audited.jsonl", AUDITED.as_bytes(), &LoadOptions::default()).expect("loads");
    App::with_batch(
        "audited.jsonl",
        batch,
        Settings::default(),
        Theme { color },
        (w, h),
    )
}
