//! How gyre speaks to the user outside its output: one line on stderr, the exit code for bad
//! input or usage, and the plural of a count. Shared by every layer that may end a command (the
//! binary, the inspector, the proxy), so a message reads the same wherever it comes from.

use std::fmt;
use std::io::{self, Write};

/// Exit code for invalid input or usage.
pub const EXIT_INVALID: u8 = 2;

/// Bad input or usage, said in one line (exit 2): an unknown execution, a tokenizer that cannot
/// be loaded, a value out of range.
#[derive(Debug)]
pub struct Invalid(pub String);

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

impl Invalid {
    /// An error (with its causes) said as bad input or usage.
    pub fn from_report(e: &eyre::Report) -> eyre::Report {
        let line: Vec<String> = e.chain().map(|c| c.to_string()).collect();
        Invalid(line.join(": ")).into()
    }
}

/// Writes one line to stderr. A closed or full stderr is not a reason to stop the work (unlike
/// `eprintln!`, which panics), so errors are ignored.
pub fn write_note(args: fmt::Arguments) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// `note!("…", args)`: [`write_note`] with `format!` syntax.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => { $crate::note::write_note(format_args!($($arg)*)) };
}

/// `1 file`, `2 files` (any integer count).
pub fn plural<N: TryInto<u64> + Copy + fmt::Display>(n: N, word: &str) -> String {
    let one = n.try_into().ok() == Some(1);
    format!("{n} {word}{}", if one { "" } else { "s" })
}
