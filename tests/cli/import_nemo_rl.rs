//! `gyre import nemo-rl` end to end: `gyre stats --json` counts what NeMo-RL's rows trained on,
//! and the import says what it inferred.

use std::process::Command;

use crate::import_common::fixture;

#[test]
fn stats_count_the_rows_effective_masks_and_log_probs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("step3.jsonl");
    let src = fixture("nemo-rl/train_data_step3.jsonl");
    let run = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(["import", "nemo-rl"])
        .arg(&src)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    assert!(err.contains("4 executions, 5 requests"), "{err}");
    assert!(
        err.contains("NeMo-RL's dump holds no execution ids"),
        "{err}"
    );
    let stats = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(["stats", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(stats.status.success());
    let s: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let t = &s["trained"];
    // 4 rows (none padding); Σ token_loss_mask × sample_loss_mask = 7 + 28 + 0 + 2, every one
    // with a generation and a trainer log-prob.
    assert_eq!(
        [
            &t["executions"],
            &t["samples"],
            &t["trained_tokens"],
            &t["behaviour_logprobs"],
            &t["trainer_logprobs"]
        ],
        [4, 4, 37, 37, 37]
    );
    assert_eq!(s["requests"], 5);
}
