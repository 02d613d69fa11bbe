//! gyre's own rows as `trained` records (docs/format.md §9) through the binary: `gyre admit
//! --format trained` writes them, `gyre stats` reads them beside the recording and counts
//! what the rows hold.

use std::process::Command;

use serde_json::Value;

fn gyre() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gyre"))
}

fn example() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo/example.jsonl")
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn admitted_rows_as_trained_records_are_counted_beside_the_recording() {
    let dir = tempfile::tempdir().unwrap();
    let rows_path = dir.path().join("rows.jsonl");
    let trained_path = dir.path().join("trained.jsonl");
    ok(gyre().args(["admit", example(), "-o"]).arg(&rows_path));
    ok(gyre()
        .args(["admit", example(), "--format", "trained", "-o"])
        .arg(&trained_path));
    let rows: Vec<Value> = std::fs::read_to_string(&rows_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let trained = std::fs::read_to_string(&trained_path).unwrap();
    let header: Value = serde_json::from_str(trained.lines().next().unwrap()).unwrap();
    assert_eq!(header["trainer"]["name"], "gyre");
    assert_eq!(header["trainer"]["loss_agg"], "execution-mean");
    let stats: Value = serde_json::from_str(&ok(gyre()
        .args(["stats", "--json", example()])
        .arg(&trained_path)))
    .unwrap();
    let t = &stats["trained"];
    let mask_on: u64 = rows
        .iter()
        .map(|r| {
            r["loss_mask"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m.as_u64() == Some(1))
                .count() as u64
        })
        .sum();
    let executions: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["execution"].as_str().unwrap())
        .collect();
    assert_eq!(t["samples"].as_u64(), Some(rows.len() as u64), "{t}");
    assert_eq!(t["executions"].as_u64(), Some(executions.len() as u64));
    assert_eq!(t["trained_tokens"].as_u64(), Some(mask_on));
    assert_eq!(stats["targets"].as_u64(), Some(mask_on));
    // Every target of a row with log-probs has one; rows without have none.
    let with_lp: u64 = rows
        .iter()
        .filter(|r| !r["logprobs"].is_null())
        .map(|r| {
            r["loss_mask"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m.as_u64() == Some(1))
                .count() as u64
        })
        .sum();
    assert_eq!(t["behaviour_logprobs"].as_u64(), Some(with_lp));
    assert_eq!(t["trainer_logprobs"].as_u64(), Some(0));
    // The trained file alone names what it lacks: the recording's requests.
    let out = gyre()
        .args(["stats", "--json"])
        .arg(&trained_path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("trained.jsonl:2"), "{err}");
    assert!(err.contains("is not an earlier request"), "{err}");
    // Parquet is for rows only.
    let out = gyre()
        .args(["admit", example(), "--format", "trained", "-o"])
        .arg(dir.path().join("t.parquet"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
