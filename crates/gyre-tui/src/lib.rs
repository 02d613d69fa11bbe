//! The interactive inspector: a client of [`gyre_engine`].
//!
//! State lives in [`app::App`] and changes only through [`app::App::step`]; [`ui::render`]
//! draws it, one file per pane under [`pane`]. Keys come from the one table in [`keys`].
//! `step` starts no thread: engine re-runs, the lens, search and exports are [`work::Task`]s it
//! returns, which the run loop hands to worker threads (as it does the loading); their reports
//! come back through the loop, so the screen stays live. The loop sleeps until a key, a report
//! or a fading message needs it, and draws only then. The parts speak the words of [`vocab`].

pub mod app;
pub mod audit;
pub mod copy;
pub mod follow;
pub mod history;
mod input;
pub mod keys;
mod layout;
pub mod outside;
pub mod overlay;
pub mod palette;
pub mod pane;
pub mod path;
pub mod remembered;
mod search;
mod text;
pub mod theme;
pub mod ui;
pub mod vocab;
pub mod whatif;
pub mod work;

use std::io;
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

pub use input::{Input, Options, load_input};

use app::App;
use keys::Command;
use outside::Outside;
use overlay::Overlay;
use remembered::Memory;
use theme::Theme;
use vocab::{Action, Jobs, Msg};

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
    app.workers = true;
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
        // The one place work `step` asks for is carried out: on worker threads.
        let step = |app: &mut App, a: Action| {
            for task in app.step(a) {
                task.spawn(&jobs);
            }
        };
        step(&mut app, Action::Resize(size.width, size.height));
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
                    step(app, a);
                }
            }
            Msg::Done(a) => step(app, a),
        };
        loop {
            // A resize the event thread has not reported yet.
            let size = terminal.size()?;
            if (size.width, size.height) != app.size {
                step(&mut app, Action::Resize(size.width, size.height));
            }
            if let Some(text) = app.clipboard.take() {
                execute!(io::stdout(), CopyToClipboard::to_clipboard_from(text))
                    .wrap_err("sending the copied text to the terminal (OSC 52)")?;
            }
            if let Some(o) = app.outside.take() {
                let said = hand_over(&mut terminal, &gate, &o)?;
                step(&mut app, Action::Message(said));
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
                None => step(&mut app, Action::Tick(Instant::now())),
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
