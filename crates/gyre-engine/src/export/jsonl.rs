//! The JSONL form of `gyre/admitted-1` (docs/format.md §8): one JSON line per admitted trajectory.

use std::io::{self, Write};

use rayon::prelude::*;

use crate::load::Batch;
use crate::process::Results;
use crate::rows::execution_rows;

/// Writes every row of the batch, in execution order then draw order.
pub fn write_rows(batch: &Batch, results: &Results, out: &mut dyn Write) -> io::Result<u64> {
    // Executions are serialised in parallel a few at a time so memory stays bounded.
    let step = rayon::current_num_threads().max(1) * 2;
    let mut rows = 0u64;
    let n = batch.executions.len();
    for lo in (0..n).step_by(step) {
        let hi = (lo + step).min(n);
        let bufs: Vec<(u64, Vec<u8>)> = (lo..hi)
            .into_par_iter()
            .map(|i| {
                let mut buf = Vec::new();
                let rows = execution_rows(batch, results, i);
                for row in &rows {
                    gyre_format::sanitize::write_json_compact(&mut buf, row)
                        .expect("rows serialise to memory");
                    buf.push(b'\n');
                }
                (rows.len() as u64, buf)
            })
            .collect();
        for (count, buf) in bufs {
            out.write_all(&buf)?;
            rows += count;
        }
    }
    out.flush()?;
    Ok(rows)
}
