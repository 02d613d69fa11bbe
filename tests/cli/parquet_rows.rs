//! `gyre admit --out rows.parquet` through the real binary: the Parquet file holds the values of
//! the JSONL rows `gyre admit` writes for the same input, field for field (read back with the
//! parquet crate's own Arrow reader), and is written like every other output (atomically,
//! never over an existing file without `--force`).

#![cfg(feature = "parquet")]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, UInt8Type, UInt32Type, UInt64Type};
use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Map, Value, json};

fn gyre(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(args)
        .output()
        .expect("gyre runs")
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/example.jsonl")
}

/// Row `i` of a record batch as the JSON object the JSONL export writes (a string `group`
/// column is the JSON string; the demo's groups are strings).
fn row_json(rb: &RecordBatch, i: usize) -> Value {
    let mut m = Map::new();
    for (f, col) in rb.schema().fields().iter().zip(rb.columns()) {
        m.insert(f.name().clone(), cell(col.as_ref(), i));
    }
    Value::Object(m)
}

fn cell(col: &dyn Array, i: usize) -> Value {
    use arrow_schema::DataType as D;
    if col.is_null(i) {
        return Value::Null;
    }
    match col.data_type() {
        D::Utf8 => json!(col.as_string::<i32>().value(i)),
        D::UInt8 => json!(col.as_primitive::<UInt8Type>().value(i)),
        D::UInt32 => json!(col.as_primitive::<UInt32Type>().value(i)),
        D::UInt64 => json!(col.as_primitive::<UInt64Type>().value(i)),
        D::Float64 => json!(col.as_primitive::<Float64Type>().value(i)),
        D::Boolean => json!(col.as_boolean().value(i)),
        D::List(_) => {
            let items = col.as_list::<i32>().value(i);
            Value::Array((0..items.len()).map(|j| cell(items.as_ref(), j)).collect())
        }
        D::Struct(fields) => {
            let s = col.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), cell(c.as_ref(), i)))
                    .collect(),
            )
        }
        other => panic!("unexpected column type {other}"),
    }
}

fn read_parquet(path: &Path) -> (Vec<Value>, Option<String>) {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    let format = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == "gyre"))
        .and_then(|k| k.value.clone());
    let mut rows = Vec::new();
    for rb in builder.build().unwrap() {
        let rb = rb.unwrap();
        rows.extend((0..rb.num_rows()).map(|i| row_json(&rb, i)));
    }
    (rows, format)
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn parquet_rows_hold_the_jsonl_rows_values() {
    let dir = tempfile::tempdir().unwrap();
    // The demo, and a recording whose requests carry sampling temperatures (the `temperature`
    // column and the targets' `temperature` field, null and not).
    let temperatures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/temperatures.jsonl");
    for (input, seed, advantage) in [
        (demo(), "0", "drgrpo"),
        (demo(), "3", "grpo"),
        (demo(), "1", "none"),
        (temperatures, "0", "drgrpo"),
    ] {
        let name = input.file_stem().unwrap().to_str().unwrap();
        let jsonl = dir.path().join(format!("rows-{name}-{seed}.jsonl"));
        let pq = dir.path().join(format!("rows-{name}-{seed}.parquet"));
        for out in [&jsonl, &pq] {
            let o = gyre(&[
                "admit",
                input.to_str().unwrap(),
                "--seed",
                seed,
                "--jmax",
                "2",
                "--advantage",
                advantage,
                "--out",
                out.to_str().unwrap(),
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let (rows, format) = read_parquet(&pq);
        let expected = read_jsonl(&jsonl);
        assert!(!expected.is_empty());
        assert_eq!(rows, expected, "{name}, seed {seed}, advantage {advantage}");
        assert_eq!(format.as_deref(), Some("gyre/admitted-1"));
        // `advantage` is a column exactly when it is a JSONL field.
        assert_eq!(
            rows[0].get("advantage").is_some(),
            advantage != "none",
            "{advantage}"
        );
    }
}

#[test]
fn parquet_output_is_refused_over_an_existing_file_and_left_out_on_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("rows.PARQUET");
    std::fs::write(&pq, b"keep me").unwrap();
    let o = gyre(&[
        "admit",
        demo().to_str().unwrap(),
        "--out",
        pq.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read(&pq).unwrap(), b"keep me");
    let o = gyre(&[
        "admit",
        demo().to_str().unwrap(),
        "--out",
        pq.to_str().unwrap(),
        "--force",
    ]);
    assert!(o.status.success());
    assert!(
        std::fs::read(&pq).unwrap().starts_with(b"PAR1"),
        "extension matched case-blind"
    );

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"kind\":\"request\"}\n").unwrap();
    let out = dir.path().join("never.parquet");
    let o = gyre(&[
        "admit",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!out.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".gyre-out-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
