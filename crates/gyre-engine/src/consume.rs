//! The one record consumer: where a parsed record goes, what a header is checked for, and a
//! record applied to its execution. The loader, `follow` and the `Recorder` keep their
//! executions each in their own way (slots built in parallel, groups held until complete, the
//! executions still open) and route every record through here.

use std::path::Path;

use serde_json::Value;

use super::execution::{Execution, LineRef};
use gyre_format::record::{LineError, Record};

/// Where a parsed record goes.
#[derive(Debug)]
pub enum Route<'r> {
    /// A header line: the reader checks it ([`check_header`]) and keeps the first.
    Header(&'r Value),
    /// A record for no execution (a kind the format does not define): read past.
    Ignored,
    /// A record of the execution with this id.
    Execution(&'r str),
}

/// Where `record` goes.
pub fn route(record: &Record) -> Route<'_> {
    match record {
        Record::Header(h) => Route::Header(h),
        r => r.execution().map_or(Route::Ignored, Route::Execution),
    }
}

/// What a header line says about itself.
#[derive(Debug, Default)]
pub struct HeaderCheck {
    /// A warning: the header is not on the first line (it is read anyway).
    pub warning: Option<String>,
    /// A problem: the tokenizer path it names is not a readable file (docs/format.md §7).
    pub problem: Option<LineError>,
}

/// Checks the header on line `line` of a file in `dir` (relative tokenizer paths are resolved
/// against it; `None` for a recording held in memory, whose paths are not checked). The
/// tokenizer is only checked here, and loaded by whoever shows text.
pub fn check_header(header: &Value, line: u64, dir: Option<&Path>) -> HeaderCheck {
    let warning = (line != 1).then(|| "header is not on the first line; read anyway".to_owned());
    let problem = header.get("tokenizer").zip(dir).and_then(|(spec, dir)| {
        let path = gyre_format::tokenizer_spec::header_path(spec)?;
        let resolved = gyre_format::tokenizer_spec::resolve_path(dir, path);
        let why = gyre_format::tokenizer_spec::check_file(&resolved).err()?;
        Some(LineError {
            message: format!("tokenizer path \"{path}\": {why}"),
            field: Some("tokenizer.path".into()),
        })
    });
    HeaderCheck { warning, problem }
}

/// Applies `record` (read at `at`) to `exec`, handing a request's spent input array back in
/// `spent`. When the record clashes with an earlier one (a request id or a closure given
/// twice), the error names where that one is: `place` spells the earlier line as
/// `file:line`, or gives `None` to leave it unnamed.
pub fn apply(
    exec: &mut Execution,
    record: Record,
    at: LineRef,
    spent: &mut Vec<Vec<u32>>,
    place: impl FnOnce(LineRef) -> Option<String>,
) -> Result<(), LineError> {
    let earlier = exec.clash(&record);
    exec.apply_reusing(record, at, spent).map_err(|mut e| {
        if let Some(place) = earlier.and_then(place) {
            e.message = format!("{} (first at {place})", e.message);
        }
        e
    })
}
