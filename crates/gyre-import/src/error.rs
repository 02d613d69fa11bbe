//! Import errors and warnings: bad input is reported as `file:line: what (field)` and makes the
//! command exit 2, like any other invalid input; `--lenient` turns per-line problems into counted
//! warnings. Both lists keep a count and only the first few entries, so a hostile input cannot
//! grow them without bound.

use std::fmt;
use std::path::Path;

use gyre_engine::report::plural;
use gyre_format::input::Diagnostic;

pub use gyre_format::output::ExistsError;

/// Problems (and warnings) shown in full; the rest are counted.
pub const SHOWN: usize = 20;

/// A bad argument or input path: one plain line, exit 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The input is not what the importer reads: every problem found (the first [`SHOWN`]) and how
/// many there were.
#[derive(Debug)]
pub struct InputError {
    /// The problems kept, in input order.
    pub diagnostics: Vec<Diagnostic>,
    /// How many there were in all.
    pub total: u64,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        let more = self.total.saturating_sub(self.diagnostics.len() as u64);
        if more > 0 {
            let word = if more == 1 { "problem" } else { "problems" };
            write!(f, "\n… and {more} more {word}")?;
        }
        if self.total > 1 {
            write!(
                f,
                "\n{} in the input (--lenient skips the lines at fault)",
                plural(self.total as usize, "problem")
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for InputError {}

/// One diagnostic at `file:line` (line 0 = the file as a whole).
pub fn diag(file: &Path, line: u64, message: impl Into<String>, field: Option<&str>) -> Diagnostic {
    Diagnostic {
        file: file.to_path_buf(),
        line,
        message: message.into(),
        field: field
            .filter(|f| !f.is_empty() && *f != ".")
            .map(str::to_owned),
    }
}

/// An invalid-input error with one diagnostic.
pub fn bad(
    file: &Path,
    line: u64,
    message: impl Into<String>,
    field: Option<&str>,
) -> eyre::Report {
    InputError {
        diagnostics: vec![diag(file, line, message, field)],
        total: 1,
    }
    .into()
}

/// Problems and warnings of one import.
#[derive(Debug, Default)]
pub struct Log {
    lenient: bool,
    problems: Vec<Diagnostic>,
    problem_count: u64,
    /// Warnings that say a figure is off (the usage check): shown first.
    important: Vec<String>,
    warnings: Vec<String>,
    /// Repeated warnings of one kind: the first one's text and how many there were, in the
    /// order the kinds first came.
    groups: Vec<(&'static str, String, u64)>,
    warning_count: u64,
    skipped: u64,
}

impl Log {
    /// A log; with `lenient`, problems are skipped (counted, shown as warnings).
    pub fn new(lenient: bool) -> Self {
        Self {
            lenient,
            ..Self::default()
        }
    }

    /// A problem with one line (or element) of the input: an error, or under `--lenient` a
    /// warning and the line is skipped.
    pub fn problem(&mut self, d: Diagnostic) {
        if self.lenient {
            self.skipped += 1;
            self.warn(format!("skipped: {d}"));
        } else {
            self.problem_count += 1;
            if self.problems.len() < SHOWN {
                self.problems.push(d);
            }
        }
    }

    /// A problem that no flag can skip (the input as a whole is not what was asked for).
    pub fn fatal(&mut self, d: Diagnostic) {
        self.problem_count += 1;
        if self.problems.len() < SHOWN {
            self.problems.push(d);
        }
    }

    /// Whether any (unskipped) problem was recorded.
    pub fn has_problems(&self) -> bool {
        self.problem_count > 0
    }

    /// A non-fatal remark. The same remark made again (a missing parent met by every request
    /// whose chain runs through it) is one remark.
    pub fn warn(&mut self, message: impl Into<String>) {
        let message = message.into();
        if self.warnings.contains(&message) {
            return;
        }
        self.warning_count += 1;
        if self.warnings.len() < SHOWN {
            self.warnings.push(message);
        }
    }

    /// A remark that a figure of the import is off: listed before every other warning.
    pub fn warn_important(&mut self, message: impl Into<String>) {
        self.warning_count += 1;
        if self.important.len() < SHOWN {
            self.important.push(message.into());
        }
    }

    /// A remark of a kind that repeats (one per missing sub-agent log…): one line for the kind,
    /// the first one's text with how many more there were.
    pub fn warn_grouped(&mut self, kind: &'static str, message: impl Into<String>) {
        self.warning_count += 1;
        match self.groups.iter_mut().find(|g| g.0 == kind) {
            Some(g) => g.2 += 1,
            None => self.groups.push((kind, message.into(), 1)),
        }
    }

    /// `Err` with every problem recorded so far, if any (they are taken out of the log).
    pub fn check(&mut self) -> eyre::Result<()> {
        if self.problem_count == 0 {
            return Ok(());
        }
        let e = InputError {
            diagnostics: std::mem::take(&mut self.problems),
            total: self.problem_count,
        };
        self.problem_count = 0;
        Err(e.into())
    }

    /// The warnings kept, most important first, repeated kinds one line each; and how many
    /// lines there would be with every warning shown.
    pub fn warnings(&self) -> (Vec<String>, u64) {
        let grouped = self.groups.iter().map(|(_, first, n)| match n {
            1 => first.clone(),
            n => format!("{first} (and {} more like it)", n - 1),
        });
        let all: Vec<String> = self
            .important
            .iter()
            .cloned()
            .chain(grouped)
            .chain(self.warnings.iter().cloned())
            .collect();
        let repeats: u64 = self.groups.iter().map(|g| g.2 - 1).sum();
        let lines = self.warning_count - repeats;
        (all.into_iter().take(SHOWN).collect(), lines)
    }

    /// Lines or elements skipped under `--lenient`.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_bounded_and_counted() {
        let mut log = Log::new(false);
        for i in 0..100 {
            log.problem(diag(Path::new("a.jsonl"), i + 1, "bad", Some("x")));
            log.warn(format!("w{i}"));
        }
        assert_eq!(log.warnings().0.len(), SHOWN);
        assert_eq!(log.warnings().1, 100);
        let e = log.check().unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("a.jsonl:1: bad (x)\n"), "{text}");
        assert!(text.contains("… and 80 more problems"), "{text}");
        assert!(text.ends_with("100 problems in the input (--lenient skips the lines at fault)"));
        assert!(log.check().is_ok());
    }

    #[test]
    fn one_problem_is_one_line() {
        let e = bad(Path::new("x.json"), 0, "not a session", None);
        assert_eq!(e.to_string(), "x.json: not a session");
    }

    #[test]
    fn lenient_skips() {
        let mut log = Log::new(true);
        log.problem(diag(Path::new("a"), 3, "bad", None));
        assert!(log.check().is_ok());
        assert_eq!(log.skipped(), 1);
        assert_eq!(log.warnings().0, ["skipped: a:3: bad"]);
    }
}
