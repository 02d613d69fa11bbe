//! The `gyre/admitted-1` rows as Arrow columns and as a Parquet file (docs/format.md §8, columnar form).
//!
//! One column per export field, same names, same values: `tokens`, `loss_mask` and `logprobs`
//! are list columns, `targets` a list of `{request, offset, len, pos, temperature}` structs. The only change
//! of form is `group`: any JSON value in the JSONL rows, a string column here, holding a string
//! group as itself and any other value (a number, an object) as its JSON text. `advantage` is
//! left out with [`AdvantageMode::None`], as the JSONL rows leave the field out.
//!
//! Rows are built per execution (in parallel) and gathered into record batches of bounded size,
//! so writing never holds more than one batch of rows in memory.

use std::io::Write;
use std::ops::Range;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, ListArray, RecordBatch, StringArray, StructArray,
    UInt8Array, UInt32Array, UInt64Array,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use eyre::{Result, WrapErr};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use rayon::prelude::*;
use serde_json::Value;

use crate::load::Batch;
use crate::process::Results;
use crate::rows::{self, Row};
use crate::score::AdvantageMode;

/// Most rows in one record batch.
const BATCH_ROWS: usize = 4096;
/// Most tokens in one record batch (bounds memory and keeps list offsets far from `i32::MAX`).
const BATCH_TOKENS: u64 = 1 << 20;

fn list_of(item: DataType, nullable_list: bool, name: &str) -> Field {
    Field::new(
        name,
        DataType::List(Arc::new(Field::new_list_field(item, false))),
        nullable_list,
    )
}

fn target_fields() -> Fields {
    Fields::from(vec![
        Field::new("request", DataType::Utf8, false),
        Field::new("offset", DataType::UInt32, false),
        Field::new("len", DataType::UInt32, false),
        Field::new("pos", DataType::UInt64, false),
        Field::new("temperature", DataType::Float64, true),
    ])
}

/// The Arrow schema of the rows (`advantage` only when advantages are computed).
pub fn schema(mode: AdvantageMode) -> SchemaRef {
    let mut fields = vec![
        Field::new("execution", DataType::Utf8, false),
        Field::new("group", DataType::Utf8, true),
        Field::new("draw", DataType::UInt32, false),
        Field::new("leaf", DataType::Utf8, true),
        Field::new("class", DataType::Utf8, true),
        Field::new("reward", DataType::Float64, false),
    ];
    if mode != AdvantageMode::None {
        fields.push(Field::new("advantage", DataType::Float64, true));
    }
    fields.extend([
        Field::new("dummy", DataType::Boolean, false),
        list_of(DataType::UInt32, false, "tokens"),
        Field::new("prompt_len", DataType::UInt64, false),
        list_of(DataType::UInt8, false, "loss_mask"),
        list_of(DataType::Float64, true, "logprobs"),
        Field::new("temperature", DataType::Float64, true),
        Field::new(
            "targets",
            DataType::List(Arc::new(Field::new_list_field(
                DataType::Struct(target_fields()),
                false,
            ))),
            false,
        ),
        Field::new("exec_targets", DataType::UInt64, false),
        Field::new("weight", DataType::Float64, false),
        Field::new("batch_executions", DataType::UInt64, false),
    ]);
    Arc::new(Schema::new(fields))
}

/// A group as the `group` column holds it: a string as itself, any other value as JSON text.
pub fn group_text(group: &Value) -> String {
    match group {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Offsets of a list column from the lengths of its rows.
fn offsets(lengths: impl Iterator<Item = usize>) -> OffsetBuffer<i32> {
    OffsetBuffer::from_lengths(lengths)
}

fn list(
    item: DataType,
    offsets: OffsetBuffer<i32>,
    values: ArrayRef,
    nulls: Option<NullBuffer>,
) -> ArrayRef {
    Arc::new(ListArray::new(
        Arc::new(Field::new_list_field(item, false)),
        offsets,
        values,
        nulls,
    ))
}

/// One record batch holding `rows` (in order) under `schema(mode)`.
pub fn record_batch(rows: &[Row], mode: AdvantageMode) -> RecordBatch {
    let strings = |f: &dyn Fn(&Row) -> Option<String>| -> ArrayRef {
        Arc::new(rows.iter().map(f).collect::<StringArray>())
    };
    let mut columns: Vec<ArrayRef> = vec![
        strings(&|r| Some(r.execution.clone())),
        strings(&|r| r.group.as_ref().map(group_text)),
        Arc::new(rows.iter().map(|r| r.draw).collect::<UInt32Array>()),
        strings(&|r| r.leaf.clone()),
        strings(&|r| r.class.map(|c| c.name().to_owned())),
        Arc::new(rows.iter().map(|r| r.reward).collect::<Float64Array>()),
    ];
    if mode != AdvantageMode::None {
        columns.push(Arc::new(
            rows.iter()
                .map(|r| r.advantage.flatten())
                .collect::<Float64Array>(),
        ));
    }
    let tokens: Vec<u32> = rows.iter().flat_map(|r| r.tokens.iter().copied()).collect();
    let mask: Vec<u8> = rows
        .iter()
        .flat_map(|r| r.loss_mask.iter().copied())
        .collect();
    let logprobs: Vec<f64> = rows
        .iter()
        .flat_map(|r| r.logprobs.iter().flatten().copied())
        .collect();
    let logprob_nulls = rows
        .iter()
        .any(|r| r.logprobs.is_none())
        .then(|| NullBuffer::from_iter(rows.iter().map(|r| r.logprobs.is_some())));
    let runs = rows.iter().flat_map(|r| &r.targets);
    let targets = StructArray::new(
        target_fields(),
        vec![
            Arc::new(
                runs.clone()
                    .map(|t| Some(t.request.as_str()))
                    .collect::<StringArray>(),
            ),
            Arc::new(runs.clone().map(|t| t.offset).collect::<UInt32Array>()),
            Arc::new(runs.clone().map(|t| t.len).collect::<UInt32Array>()),
            Arc::new(runs.clone().map(|t| t.pos).collect::<UInt64Array>()),
            Arc::new(runs.map(|t| t.temperature).collect::<Float64Array>()),
        ],
        None,
    );
    columns.extend([
        Arc::new(rows.iter().map(|r| Some(r.dummy)).collect::<BooleanArray>()) as ArrayRef,
        list(
            DataType::UInt32,
            offsets(rows.iter().map(|r| r.tokens.len())),
            Arc::new(UInt32Array::from(tokens)),
            None,
        ),
        Arc::new(rows.iter().map(|r| r.prompt_len).collect::<UInt64Array>()),
        list(
            DataType::UInt8,
            offsets(rows.iter().map(|r| r.loss_mask.len())),
            Arc::new(UInt8Array::from(mask)),
            None,
        ),
        list(
            DataType::Float64,
            offsets(rows.iter().map(|r| r.logprobs.as_ref().map_or(0, Vec::len))),
            Arc::new(Float64Array::from(logprobs)),
            logprob_nulls,
        ),
        Arc::new(rows.iter().map(|r| r.temperature).collect::<Float64Array>()),
        list(
            DataType::Struct(target_fields()),
            offsets(rows.iter().map(|r| r.targets.len())),
            Arc::new(targets),
            None,
        ),
        Arc::new(rows.iter().map(|r| r.exec_targets).collect::<UInt64Array>()),
        Arc::new(rows.iter().map(|r| r.weight).collect::<Float64Array>()),
        Arc::new(
            rows.iter()
                .map(|r| r.batch_executions)
                .collect::<UInt64Array>(),
        ),
    ]);
    RecordBatch::try_new(schema(mode), columns).expect("columns follow the schema")
}

/// Executions split into consecutive ranges whose rows make record batches of bounded size
/// (at least one execution per range, however large).
pub fn batch_ranges(batch: &Batch, results: &Results) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let (mut start, mut rows, mut tokens) = (0, 0usize, 0u64);
    for i in 0..batch.executions.len() {
        let (r, t) = rows::row_size(batch, results, i);
        if i > start && (rows + r > BATCH_ROWS || tokens + t > BATCH_TOKENS) {
            ranges.push(start..i);
            (start, rows, tokens) = (i, 0, 0);
        }
        rows += r;
        tokens += t;
    }
    if start < batch.executions.len() {
        ranges.push(start..batch.executions.len());
    }
    ranges
}

/// The rows of executions `range` (built in parallel) as one record batch.
pub fn range_batch(batch: &Batch, results: &Results, range: Range<usize>) -> RecordBatch {
    let rows: Vec<Row> = range
        .into_par_iter()
        .flat_map_iter(|i| rows::execution_rows(batch, results, i))
        .collect();
    record_batch(&rows, results.advantage_mode)
}

/// Positions in `executions` (a subset of the batch's executions, as [`crate::steps`]
/// makes) split into consecutive ranges of bounded record batches, as [`batch_ranges`] does for
/// the whole batch.
pub fn view_ranges(batch: &Batch, results: &Results, executions: &[usize]) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let (mut start, mut rows, mut tokens) = (0, 0usize, 0u64);
    for (k, &i) in executions.iter().enumerate() {
        let (r, t) = rows::row_size(batch, results, i);
        if k > start && (rows + r > BATCH_ROWS || tokens + t > BATCH_TOKENS) {
            ranges.push(start..k);
            (start, rows, tokens) = (k, 0, 0);
        }
        rows += r;
        tokens += t;
    }
    if start < executions.len() {
        ranges.push(start..executions.len());
    }
    ranges
}

/// The rows of `executions` (built in parallel) as one record batch, with `batch_executions`
/// set to `b` (a step's `B`).
pub fn view_batch(batch: &Batch, results: &Results, executions: &[usize], b: u64) -> RecordBatch {
    let rows: Vec<Row> = executions
        .par_iter()
        .flat_map_iter(|&i| {
            rows::execution_rows(batch, results, i)
                .into_iter()
                .map(|mut r| {
                    r.batch_executions = b;
                    r
                })
        })
        .collect();
    record_batch(&rows, results.advantage_mode)
}

/// Writes every row of the batch as Parquet to `out` (execution order, then draw order);
/// returns the number of rows. Columns are zstd-compressed; the file's key-value metadata
/// names the format (`gyre` = `gyre/admitted-1`).
pub fn write_rows<W: Write + Send>(batch: &Batch, results: &Results, out: W) -> Result<u64> {
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(1).expect("level 1 is valid"),
        ))
        .set_max_row_group_row_count(Some(BATCH_ROWS * 4))
        .set_max_row_group_bytes(Some(32 << 20))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "gyre".to_owned(),
            "gyre/admitted-1".to_owned(),
        )]))
        .build();
    let mut writer = ArrowWriter::try_new(out, schema(results.advantage_mode), Some(props))
        .wrap_err("starting the Parquet file")?;
    // The next record batch is built (in parallel) while the current one is encoded.
    let ranges = batch_ranges(batch, results);
    let rows = std::thread::scope(|scope| -> Result<u64> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(1);
        scope.spawn(move || {
            for range in ranges {
                if tx.send(range_batch(batch, results, range)).is_err() {
                    return;
                }
            }
        });
        let mut rows = 0u64;
        for rb in rx {
            rows += rb.num_rows() as u64;
            writer.write(&rb).wrap_err("writing Parquet rows")?;
        }
        Ok(rows)
    })?;
    writer.close().wrap_err("finishing the Parquet file")?;
    Ok(rows)
}
