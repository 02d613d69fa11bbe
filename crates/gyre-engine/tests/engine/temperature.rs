//! The rows' `temperature` (docs/format.md §8): the temperature the targets' requests recorded
//! in `meta.sampling.temperature`, per target run and, when they agree, per row; unknown is
//! `None`, never a made-up value.

use gyre_engine::admit::Settings;
use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_engine::process;
use gyre_engine::rows::{self, Row};
use gyre_engine::score::AdvantageMode;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/temperatures.jsonl"
);

fn rows() -> Vec<Row> {
    let bytes = std::fs::read(FIXTURE).unwrap();
    let batch = load_bytes("temperatures.jsonl", &bytes, &LoadOptions::default()).unwrap();
    assert!(batch.warnings.is_empty(), "{:?}", batch.warnings);
    let results = process(&batch, &Settings::default(), AdvantageMode::DrGrpo);
    (0..batch.executions.len())
        .flat_map(|i| rows::execution_rows(&batch, &results, i))
        .collect()
}

fn row<'a>(rows: &'a [Row], execution: &str) -> &'a Row {
    rows.iter().find(|r| r.execution == execution).unwrap()
}

fn run_temperatures(row: &Row) -> Vec<(String, Option<f64>)> {
    row.targets
        .iter()
        .map(|t| (t.request.clone(), t.temperature))
        .collect()
}

#[test]
fn a_row_carries_the_temperature_its_targets_were_sampled_at() {
    let rows = rows();
    let same = row(&rows, "same");
    assert_eq!(same.temperature, Some(0.7));
    assert_eq!(
        run_temperatures(same),
        [("r1".into(), Some(0.7)), ("r2".into(), Some(0.7))]
    );
    // Greedy sampling is a temperature like any other, not an absent one.
    assert_eq!(row(&rows, "greedy").temperature, Some(0.0));
}

#[test]
fn targets_sampled_at_different_temperatures_keep_theirs_per_run() {
    let rows = rows();
    let mixed = row(&rows, "mixed");
    assert_eq!(mixed.temperature, None);
    assert_eq!(
        run_temperatures(mixed),
        [("r1".into(), Some(0.7)), ("r2".into(), Some(1.0))]
    );
}

#[test]
fn an_unrecorded_or_invalid_temperature_is_unknown_never_invented() {
    let rows = rows();
    for execution in ["unrecorded", "garbled"] {
        let r = row(&rows, execution);
        assert_eq!(r.temperature, None, "{execution}");
        assert!(
            r.targets.iter().all(|t| t.temperature.is_none()),
            "{execution}"
        );
    }
    // A dummy's placeholder has no targets, so no temperature, whatever its leaf recorded.
    let dummy = row(&rows, "dummy");
    assert!(dummy.dummy && dummy.targets.is_empty());
    assert_eq!(dummy.temperature, None);
}

#[test]
fn the_jsonl_row_writes_temperature_after_logprobs_and_in_each_target() {
    let line = serde_json::to_value(row(&rows(), "mixed")).unwrap();
    let keys: Vec<&str> = line
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let at = keys.iter().position(|k| *k == "temperature").unwrap();
    assert_eq!(keys[at - 1], "logprobs");
    assert_eq!(line["temperature"], serde_json::Value::Null);
    assert_eq!(line["targets"][1]["temperature"], 1.0);
}

#[cfg(feature = "parquet")]
#[test]
fn the_arrow_columns_hold_the_same_temperatures() {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Float64Type;
    let rows = rows();
    let rb = gyre_engine::export::parquet::record_batch(&rows, AdvantageMode::DrGrpo);
    let col = rb
        .column_by_name("temperature")
        .unwrap()
        .as_primitive::<Float64Type>();
    for (i, r) in rows.iter().enumerate() {
        assert_eq!((!col.is_null(i)).then(|| col.value(i)), r.temperature);
    }
    let targets = rb.column_by_name("targets").unwrap().as_list::<i32>();
    for (i, r) in rows.iter().enumerate() {
        let runs = targets.value(i);
        let t = runs
            .as_struct()
            .column_by_name("temperature")
            .unwrap()
            .as_primitive::<Float64Type>()
            .clone();
        let got: Vec<Option<f64>> = (0..t.len())
            .map(|j| (!t.is_null(j)).then(|| t.value(j)))
            .collect();
        let want: Vec<Option<f64>> = r.targets.iter().map(|x| x.temperature).collect();
        assert_eq!(got, want, "{}", r.execution);
    }
}
