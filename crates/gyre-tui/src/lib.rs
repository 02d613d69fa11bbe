//! The interactive inspector: a client of [`gyre_engine`].
//!
//! State lives in [`app::App`] and changes only through [`app::App::step`]; [`ui::render`]
//! draws it, one file per pane under [`pane`]. Keys come from the one table in [`keys`].
//! Loading, engine re-runs, search and exports run on worker threads that report back through
//! the run loop, so the screen stays live; the loop sleeps until a key, a report or a fading
//! message needs it, and draws only then.

pub mod app;
pub mod compare;
pub mod copy;
mod dashboard;
pub mod follow;
pub mod history;
pub mod keys;
mod layout;
pub mod outside;
pub mod overlay;
pub mod palette;
pub mod pane;
pub mod path;
pub mod remembered;
pub mod row;
mod search;
mod text;
pub mod theme;
pub mod ui;
pub mod whatif;

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossterm::clipboard::CopyToClipboard;
use crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyCode, KeyEvent, KeyEventKind,
    KeyModifiers, MouseButton, MouseEventKind,
};
use crossterm::execute;
use crossterm::terminal::EnterAlternateScreen;
use eyre::{Result, WrapErr};

use gyre_engine::admit::Settings;
use gyre_engine::load::{self, Batch, LoadOptions};
use gyre_engine::score::AdvantageMode;

use app::{Action, App, Jobs, Msg, Phase};
use keys::Command;
use outside::Outside;
use overlay::Overlay;
use remembered::{Memory, Remember};
use theme::Theme;

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
    /// Whether the settings are remembered between runs ([`remembered`]).
    pub remember: Remember,
}

/// Turns a terminal event into an action (or nothing).
pub fn action_for(app: &App, ev: &Event) -> Option<Action> {
    match ev {
        Event::Key(k) => key_action(app, k),
        Event::Mouse(m) => match m.kind {
            MouseEventKind::Down(MouseButton::Left) => Some(Action::Click(m.column, m.row)),
            MouseEventKind::ScrollDown => Some(Action::Wheel(m.column, m.row, true)),
            MouseEventKind::ScrollUp => Some(Action::Wheel(m.column, m.row, false)),
            _ => None,
        },
        Event::Resize(w, h) => Some(Action::Resize(*w, *h)),
        _ => None,
    }
}

fn key_action(app: &App, k: &KeyEvent) -> Option<Action> {
    if k.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    let shift = k.modifiers.contains(KeyModifiers::SHIFT);
    if app.overlay.takes_text() {
        let priority = matches!(app.overlay, Overlay::Priority(_));
        return match k.code {
            KeyCode::Char('c') if ctrl => Some(Action::Cmd(Command::Quit)),
            KeyCode::Char('u') if ctrl => Some(Action::ClearField),
            KeyCode::Char('w') if ctrl => Some(Action::DeleteWord),
            KeyCode::Char(c) if !ctrl => Some(Action::Input(c)),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Enter => Some(Action::Cmd(Command::Enter)),
            KeyCode::Esc => Some(Action::Cmd(Command::Escape)),
            // Tab completes in the palette (elsewhere in a field it does nothing).
            KeyCode::Tab => Some(Action::Cmd(Command::FocusNext)),
            KeyCode::Up if priority && shift => Some(Action::Input('K')),
            KeyCode::Down if priority && shift => Some(Action::Input('J')),
            KeyCode::Up => Some(Action::Cmd(Command::Up)),
            KeyCode::Down => Some(Action::Cmd(Command::Down)),
            _ => None,
        };
    }
    keys::command_for(k).map(Action::Cmd)
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
fn load_text(opts: &Options, batch: &Batch, jobs: &Jobs) {
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

/// Stops the key thread reading while another program has the terminal.
#[derive(Clone, Default)]
struct KeyGate(Arc<(Mutex<GateState>, Condvar)>);

#[derive(Default)]
struct GateState {
    /// Reading is to stop.
    closed: bool,
    /// The key thread is waiting (not inside a poll or read).
    idle: bool,
}

impl KeyGate {
    /// The key thread: waits here while the gate is closed.
    fn wait_open(&self) {
        let (m, cv) = &*self.0;
        let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
        while st.closed {
            st.idle = true;
            cv.notify_all();
            st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.idle = false;
    }

    /// Closes the gate and waits until the key thread has stopped reading.
    fn close(&self) {
        let (m, cv) = &*self.0;
        let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
        st.closed = true;
        while !st.idle {
            st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Lets the key thread read again.
    fn open(&self) {
        let (m, cv) = &*self.0;
        let mut st = m.lock().unwrap_or_else(|e| e.into_inner());
        st.closed = false;
        cv.notify_all();
    }
}

/// Gives the terminal to `$PAGER` / `$EDITOR` for `o` and takes it back: keys stop being read,
/// the screen and modes are restored, and after the program exits the inspector's screen is
/// set up again and drawn whole. Returns the status line.
fn hand_over(
    terminal: &mut ratatui::DefaultTerminal,
    gate: &KeyGate,
    o: &Outside,
) -> Result<String> {
    gate.close();
    let _ = execute!(io::stdout(), DisableMouseCapture);
    ratatui::restore();
    let said = outside::run(o);
    crossterm::terminal::enable_raw_mode().wrap_err("taking the terminal back (raw mode)")?;
    execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture)
        .wrap_err("taking the terminal back (alternate screen)")?;
    terminal.clear().wrap_err("redrawing after the pager")?;
    gate.open();
    Ok(said)
}

/// Runs the inspector until `q`; the terminal is restored on return, error and panic.
/// Exit status 0 on `q`; 2 when the input could not be loaded (the problems are printed).
pub fn run(mut opts: Options) -> Result<ExitCode> {
    // Before the engine first runs, so the first frame shows the remembered settings.
    let memory = Memory::start(&mut opts);
    let label = match &opts.input {
        Input::Demo(demo) => format!("demo: {}", demo.file_name()),
        Input::Files(f) => f
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
    };
    let mut app = App::new(label, opts.settings.clone(), Theme::from_env());
    memory.apply(&mut app);
    app.inputs = match &opts.input {
        Input::Demo(demo) => vec![format!("assets/demo/{}", demo.file_name())],
        Input::Files(f) => f.iter().map(|p| p.display().to_string()).collect(),
    };
    app.lens_seeds = opts.seeds;
    let (jobs, rx) = Jobs::channel();
    app.jobs = Some(jobs.clone());
    if let Ok(cwd) = std::env::current_dir() {
        app.cwd = cwd;
    }
    {
        let (opts, jobs) = (opts.clone(), jobs.clone());
        std::thread::spawn(move || match &opts.input {
            Input::Files(files) if opts.follow => follow::follow(&opts, &files[0], &jobs),
            _ => load_input(&opts, &jobs),
        });
    }
    let mut terminal = ratatui::init();
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(io::stdout(), DisableMouseCapture);
        prev(info);
    }));
    let result = (|| -> Result<()> {
        execute!(io::stdout(), EnableMouseCapture)?;
        let size = terminal.size()?;
        app.step(Action::Resize(size.width, size.height));
        // Terminal events come through the same channel as the workers' reports.
        let gate = KeyGate::default();
        {
            let (jobs, gate) = (jobs.clone(), gate.clone());
            std::thread::spawn(move || {
                loop {
                    gate.wait_open();
                    // A short poll, so that a program given the terminal gets every key.
                    match event::poll(Duration::from_millis(50)) {
                        Ok(false) => continue,
                        Ok(true) => {}
                        Err(_) => break,
                    }
                    let Ok(ev) = event::read() else { break };
                    if !jobs.term(ev) {
                        break;
                    }
                }
            });
        }
        let handle = |app: &mut App, msg: Msg| match msg {
            Msg::Term(ev) => {
                if let Some(a) = action_for(app, &ev) {
                    app.step(a);
                }
            }
            Msg::Done(a) => app.step(a),
        };
        loop {
            // A resize the event thread has not reported yet.
            let size = terminal.size()?;
            if (size.width, size.height) != app.size {
                app.step(Action::Resize(size.width, size.height));
            }
            if let Some(text) = app.clipboard.take() {
                execute!(io::stdout(), CopyToClipboard::to_clipboard_from(text))
                    .wrap_err("sending the copied text to the terminal (OSC 52)")?;
            }
            if let Some(o) = app.outside.take() {
                let said = hand_over(&mut terminal, &gate, &o)?;
                app.step(Action::Message(said));
            }
            terminal.draw(|f| ui::render(&app, f))?;
            // An export still being written would leave a temporary file behind.
            if app.quit && app.exporting.is_empty() {
                return Ok(());
            }
            // Sleep until something happens, or a message is due to fade.
            let msg = match app.next_deadline() {
                Some(due) => match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return Ok(()),
                },
                None => match rx.recv() {
                    Ok(m) => Some(m),
                    Err(_) => return Ok(()),
                },
            };
            match msg {
                Some(m) => handle(&mut app, m),
                None => app.step(Action::Tick(Instant::now())),
            }
            // Drain bursts (wheel, key repeat, progress) before drawing again.
            while let Ok(m) = rx.try_recv() {
                handle(&mut app, m);
                if app.quit {
                    break;
                }
            }
        }
    })();
    let _ = execute!(io::stdout(), DisableMouseCapture);
    ratatui::restore();
    memory.finish(&app);
    result?;
    if let app::Load::Failed(e) = &app.load {
        gyre_format::note!("{e}");
        return Ok(ExitCode::from(gyre_format::note::EXIT_INVALID));
    }
    Ok(ExitCode::SUCCESS)
}
