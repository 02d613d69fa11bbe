//! Export of admitted sets (docs/format.md §8, `gyre/admitted-1`): the choice of form by file
//! name, over the JSONL ([`jsonl`]) and Parquet ([`parquet`]) writers of the rows [`crate::rows`]
//! builds.

use std::path::Path;

use eyre::{Result, WrapErr};

use crate::load::Batch;
use crate::process::Results;
use gyre_format::output::Sink;

pub mod jsonl;
#[cfg(feature = "parquet")]
pub mod parquet;

/// Whether `path` asks for Parquet rows (`.parquet`, see [`parquet`]) rather than JSONL.
pub fn is_parquet(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// Writes the rows to `path` atomically (see [`gyre_format::output::Sink`]): a failure never leaves
/// a partial file, and without `force` an existing file is left alone. A `.parquet` name writes
/// Parquet, any other JSONL (compressed for `.zst`/`.gz`).
pub fn write_file(batch: &Batch, results: &Results, path: &Path, force: bool) -> Result<u64> {
    let mut sink = Sink::open(path, force)?;
    let rows = write_as(batch, results, path, &mut sink)?;
    sink.finish()?;
    Ok(rows)
}

/// Writes the rows to `sink` in the form `path` names (see [`is_parquet`]).
pub fn write_as(batch: &Batch, results: &Results, path: &Path, sink: &mut Sink) -> Result<u64> {
    if is_parquet(path) {
        write_parquet(batch, results, sink)
    } else {
        jsonl::write_rows(batch, results, sink).map_err(Into::into)
    }
    .wrap_err_with(|| format!("writing {}", path.display()))
}

#[cfg(feature = "parquet")]
fn write_parquet(batch: &Batch, results: &Results, sink: &mut Sink) -> Result<u64> {
    parquet::write_rows(batch, results, sink)
}

#[cfg(not(feature = "parquet"))]
fn write_parquet(_: &Batch, _: &Results, _: &mut Sink) -> Result<u64> {
    eyre::bail!("this gyre was built without Parquet support (cargo feature `parquet`)")
}
