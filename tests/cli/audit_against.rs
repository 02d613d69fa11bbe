//! `gyre audit TRAINED --against RECORDING` through the binary (docs/audit.md, "Against a
//! recording"): gyre's own rows read with their recording as one batch, and a trainer's dump
//! holding its own requests, read apart, with a retokenised turn and a changed log-prob.

use std::process::Command;

use serde_json::Value;

fn example() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo/example.jsonl")
}

/// `gyre audit ARGS --json`: its exit code and its JSON.
fn audit(args: &[&std::ffi::OsStr]) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .arg("audit")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let code = out.status.code().unwrap();
    assert!(
        code == 0 || code == 1,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn own_rows_match_their_recording_and_a_dump_apart_shows_drift_and_changed_log_probs() {
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.jsonl");
    let status = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args([
            "admit",
            example(),
            "--jmax",
            "0",
            "--format",
            "trained",
            "-o",
        ])
        .arg(&rows)
        .status()
        .unwrap();
    assert!(status.success());
    let (_, j) = audit(&[rows.as_os_str(), "--against".as_ref(), example().as_ref()]);
    let a = &j["against"];
    assert_eq!(a["matched_samples"], a["samples"]);
    assert_eq!(
        (
            a["drifted_tokens"].as_u64(),
            a["behaviour_mismatched"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert_eq!(j["by_kind"]["behaviour_mismatch"], 0);
    assert_eq!(j["by_kind"]["retokenized"], 0);
    // A trainer's dump of execution e1's first two turns, its own ids: turn 1's output [10 11 12
    // 13] re-rendered as [10 11 99 13], and turn 2's first log-prob not the server's -0.38.
    let dump = dir.path().join("dump.jsonl");
    std::fs::write(
        &dump,
        concat!(
            r#"{"kind":"header","format":"gyre/1","trainer":{"name":"test","loss_agg":"token-mean"}}"#,
            "\n",
            r#"{"kind":"request","execution":"x","id":"q","input":[1,2,3,4,5,6,7],"output":[10,11,99,13],"logprobs":[-0.11,-0.52,-0.03,-0.2]}"#,
            "\n",
            r#"{"kind":"trained","execution":"x","sample":"0","prompt_len":7,"tokens":[{"ids":[1,2,3,4,5,6,7,10,11,99,13,20,21,22,14,15,16,17]}],"loss_mask":[1,1,1,1,0,0,0,1,1,1,1],"behaviour_logprobs":[-0.11,-0.52,-0.03,-0.2,null,null,null,-0.9,-0.07,-0.85,-0.1]}"#,
            "\n"
        ),
    )
    .unwrap();
    let (code, j) = audit(&[dump.as_os_str(), "--against".as_ref(), example().as_ref()]);
    assert_eq!(code, 1);
    let found: Vec<(&str, u64, u64)> = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "retokenized" || f["kind"] == "behaviour_mismatch")
        .map(|f| {
            (
                f["kind"].as_str().unwrap(),
                f["start"].as_u64().unwrap(),
                f["end"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [("retokenized", 9, 10), ("behaviour_mismatch", 14, 15)]
    );
    let drift = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "retokenized")
        .unwrap();
    assert!(
        drift["detail"]
            .as_str()
            .unwrap()
            .starts_with("against the recording")
    );
    assert_eq!(j["against"]["matched_samples"], 1);
}
