//! The rows as an Arrow C stream (the PyCapsule stream protocol): pyarrow, polars and the
//! Hugging Face `datasets` loaders take the record batches `engine::export::parquet` builds without
//! copying them again.

use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use gyre_engine::Results;
use gyre_engine::export::parquet;
use gyre_engine::load::Batch;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// Record batches of the rows, each built (in parallel, per execution) when the reader asks.
struct RowBatches {
    batch: Arc<Batch>,
    results: Arc<Results>,
    /// A step's or shard's executions and `B`; `None` for the whole batch.
    view: Option<(Arc<Vec<usize>>, u64)>,
    ranges: std::vec::IntoIter<Range<usize>>,
    schema: SchemaRef,
}

impl Iterator for RowBatches {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let range = self.ranges.next()?;
        // Called from the consumer through C: a panic must become an error, not unwind.
        Some(
            catch_unwind(AssertUnwindSafe(|| match &self.view {
                None => parquet::range_batch(&self.batch, &self.results, range),
                Some((execs, b)) => {
                    parquet::view_batch(&self.batch, &self.results, &execs[range], *b)
                }
            }))
            .map_err(|_| ArrowError::ComputeError("gyre internal error building rows".into())),
        )
    }
}

impl RecordBatchReader for RowBatches {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

/// A capsule named `arrow_array_stream` holding a stream over every row (of the whole batch, or
/// of the executions of `view` with its `B`).
pub fn stream_capsule(
    py: Python<'_>,
    batch: Arc<Batch>,
    results: Arc<Results>,
    view: Option<(Arc<Vec<usize>>, u64)>,
) -> PyResult<Bound<'_, PyAny>> {
    let ranges = match &view {
        None => parquet::batch_ranges(&batch, &results),
        Some((execs, _)) => parquet::view_ranges(&batch, &results, execs),
    };
    let reader = RowBatches {
        ranges: ranges.into_iter(),
        schema: parquet::schema(results.advantage_mode),
        batch,
        results,
        view,
    };
    let stream = FFI_ArrowArrayStream::new(Box::new(reader));
    Ok(PyCapsule::new_with_value(py, stream, c"arrow_array_stream")?.into_any())
}
