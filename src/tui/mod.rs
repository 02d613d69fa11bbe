//! The interactive inspector: a client of [`crate::engine`].
//!
//! State lives in [`app::App`] and changes only through [`app::App::step`]; [`ui::render`]
//! draws it. Keys come from the one table in [`keys`]. Loading runs on a background thread
//! that reports progress, so the screen stays responsive on large recordings.

pub mod app;
pub mod detail;
pub mod keys;
pub mod layout;
pub mod model;
pub mod text;
pub mod theme;
pub mod tokens;
pub mod ui;

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use color_eyre::eyre::Result;
use crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyCode, KeyEvent, KeyEventKind,
    KeyModifiers, MouseButton, MouseEventKind,
};
use crossterm::execute;

use crate::engine::admit::Settings;
use crate::engine::load::{self, LoadOptions};

use app::{Action, App, Overlay};
use keys::Command;
use theme::Theme;

/// What the inspector opens.
#[derive(Clone, Debug)]
pub enum Input {
    /// A recording bundled in the binary.
    Demo(crate::demo::Demo),
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
    /// Skip invalid lines instead of failing.
    pub lenient: bool,
    /// `--tokenizer NAME|PATH`.
    pub tokenizer: Option<String>,
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
    if let Overlay::Search(_) | Overlay::Export(_) = app.overlay {
        return match k.code {
            KeyCode::Char('c') if ctrl => Some(Action::Cmd(Command::Quit)),
            KeyCode::Char(c) if !ctrl => Some(Action::Input(c)),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Enter => Some(Action::Cmd(Command::Enter)),
            KeyCode::Esc => Some(Action::Cmd(Command::Escape)),
            _ => None,
        };
    }
    keys::command_for(k).map(Action::Cmd)
}

/// Loads the input (on the calling thread) and sends the tokenizer, then the batch.
fn load_input(opts: &Options, tx: &mpsc::Sender<Action>) {
    let progress_tx = tx.clone();
    let progress = move |done: u64, total: u64| {
        let _ = progress_tx.send(Action::Progress(done, total));
    };
    let loaded = match &opts.input {
        Input::Demo(demo) => load::load_bytes(demo.name(), demo.bytes(), &LoadOptions::default()),
        Input::Files(files) => load::load(
            files,
            &LoadOptions {
                lenient: opts.lenient,
            },
            &progress,
        ),
    };
    match loaded {
        Ok(batch) => {
            match crate::text::resolve_tokenizer(opts.tokenizer.as_deref(), &batch) {
                Ok(t) => {
                    let _ = tx.send(Action::Text(t));
                }
                Err(e) => {
                    let _ = tx.send(Action::Message(format!(
                        "tokenizer: {e:#}; ids shown as ⟨id⟩"
                    )));
                }
            }
            let results = crate::engine::process(&batch, &opts.settings, app::ADVANTAGE);
            let _ = tx.send(Action::Processed(Box::new((batch, results))));
        }
        Err(e) => {
            let _ = tx.send(Action::Loaded(Err(e.to_string())));
        }
    }
}

/// Runs the inspector until `q`; the terminal is restored on return, error and panic.
/// Exit status 0 on `q`; 2 when the input could not be loaded (the problems are printed).
pub fn run(opts: Options) -> Result<ExitCode> {
    let label = match &opts.input {
        Input::Demo(demo) => format!("demo: {}", demo.name()),
        Input::Files(f) => f
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
    };
    let mut app = App::new(label, opts.settings.clone(), Theme::from_env());
    let (tx, rx) = mpsc::channel::<Action>();
    app.jobs = Some(tx.clone());
    if let Ok(cwd) = std::env::current_dir() {
        app.cwd = cwd;
    }
    {
        let opts = opts.clone();
        std::thread::spawn(move || load_input(&opts, &tx));
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
        loop {
            while let Ok(a) = rx.try_recv() {
                app.step(a);
            }
            terminal.draw(|f| ui::render(&app, f))?;
            // An export still being written would leave a temporary file behind.
            if app.quit && app.exporting.is_empty() {
                return Ok(());
            }
            if event::poll(Duration::from_millis(50))? {
                let ev = event::read()?;
                if let Some(a) = action_for(&app, &ev) {
                    app.step(a);
                }
                // Drain bursts (wheel, key repeat) before drawing again.
                while !app.quit && event::poll(Duration::ZERO)? {
                    let ev = event::read()?;
                    if let Some(a) = action_for(&app, &ev) {
                        app.step(a);
                    }
                }
            }
        }
    })();
    let _ = execute!(io::stdout(), DisableMouseCapture);
    ratatui::restore();
    result?;
    if let app::Load::Failed(e) = &app.load {
        crate::cli::exit::note!("{e}");
        return Ok(ExitCode::from(crate::cli::exit::EXIT_INVALID));
    }
    Ok(ExitCode::SUCCESS)
}
