//! How a command ends: exit codes, one plain line for bad input or usage, a report only for
//! internal errors, and a closed pipe taken as a normal end.

use std::io::{self, IsTerminal};
use std::process::ExitCode;

use color_eyre::config::{HookBuilder, Theme};

use gyre_engine::load::LoadError;
pub use gyre_format::note;
pub use gyre_format::note::{EXIT_INVALID, Invalid};
use gyre_format::output::{ExistsError, OutputError};

/// Colour for reports: stderr is a terminal and `NO_COLOR` is unset or empty.
fn stderr_color() -> bool {
    io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the error-report and panic hooks: colour only on a terminal without `NO_COLOR`; a
/// panic from writing to a closed stdout or stderr ends the process quietly (exit 0), after the
/// temporary output files are removed.
pub fn install_hooks() {
    let theme = if stderr_color() {
        Theme::dark()
    } else {
        Theme::new()
    };
    let (panic_hook, eyre_hook) = HookBuilder::default()
        .theme(theme)
        .display_env_section(false)
        .into_hooks();
    if eyre_hook.install().is_err() {
        return;
    }
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            gyre_format::output::remove_pending();
            std::process::exit(0);
        }
        note!("{}", panic_hook.panic_report(info));
    }));
}

/// The exit code of a command's result, after saying what went wrong: bad input, bad usage or an
/// unwritable output is one plain line and exit 2; a closed pipe is a normal end (exit 0); an
/// I/O failure (disk full, permission) is one line and exit 1; anything else is an internal
/// error, reported with its location (exit 1).
pub fn finish(result: color_eyre::Result<ExitCode>) -> ExitCode {
    let e = match result {
        Ok(code) => return code,
        Err(e) => e,
    };
    if let Some(le) = e.chain().find_map(|c| c.downcast_ref::<LoadError>()) {
        note!("{le}");
        return ExitCode::from(EXIT_INVALID);
    }
    if e.chain()
        .any(|c| c.is::<Invalid>() || c.is::<ExistsError>() || c.is::<OutputError>())
    {
        note!("gyre: {}", one_line(&e));
        return ExitCode::from(EXIT_INVALID);
    }
    // JSON written straight to stdout fails with a serde_json error holding the I/O one (its
    // `source()` skips it).
    let io = e.chain().find_map(|c| {
        c.downcast_ref::<io::Error>()
            .map(io::Error::kind)
            .or_else(|| c.downcast_ref::<serde_json::Error>()?.io_error_kind())
    });
    match io {
        Some(io::ErrorKind::BrokenPipe) => ExitCode::SUCCESS,
        Some(_) => {
            note!("gyre: {}", one_line(&e));
            ExitCode::FAILURE
        }
        None => {
            note!("gyre: internal error (please report it): {e:?}");
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line: `loading tokenizer "x": No such file or directory`.
pub fn one_line(e: &eyre::Report) -> String {
    e.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}
