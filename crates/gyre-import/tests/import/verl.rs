//! `gyre import verl` on a dump written by verl's own `_write_generations`
//! (tests/fixtures/import/verl/): one reconstructed execution per row, groups by prompt.

use crate::common::*;

#[test]
fn one_execution_per_row_grouped_by_prompt_and_not_auditable() {
    let dir = fixture("verl/rollout_data");
    let (_d, out, summary) = import("verl", &dir, true, None);
    assert_eq!((summary.executions, summary.requests), (4, 4));
    assert!(
        summary.warnings[0].starts_with("4 rows: verl's rollout_data_dir holds decoded text only")
            && summary.warnings[0].contains("cannot be audited token by token"),
        "{:?}",
        summary.warnings
    );
    let all = lines(&out);
    assert_eq!(all[0]["meta"]["reconstructed"], true);
    assert_eq!(all[0]["meta"]["auditable"], false);
    let execs: Vec<&serde_json::Value> = all.iter().filter(|l| l["kind"] == "execution").collect();
    assert_eq!(execs[0]["execution"], "3.jsonl:1");
    assert_eq!(execs[0]["group"], execs[1]["group"]);
    assert_ne!(execs[1]["group"], execs[2]["group"]);
    assert_eq!(execs[0]["meta"]["gts"], "72");
    assert_eq!(execs[0]["meta"]["uid"], "0_0_0");
    let scores: Vec<f64> = all
        .iter()
        .filter(|l| l["kind"] == "assessment")
        .map(|l| l["score"].as_f64().unwrap())
        .collect();
    assert_eq!(scores, [1.0, 0.0, 1.0, 0.0]);
    // The text re-encoded: the response ends where verl's decode stopped (no <|im_end|>).
    let tok = gyre_text::TokenText::qwen3().unwrap();
    let reqs = requests(&out);
    assert_eq!(
        tok.decode(&token_ids(&reqs[0].0["output"])),
        "In May she sold 48 / 2 = 24 clips. Altogether 48 + 24 = 72.\n#### 72"
    );
    assert!(
        tok.decode(&reqs[0].1)
            .starts_with("user\nNatalia sold clips")
    );
    let s = stats(&load(&out));
    assert_eq!((s.requests, s.requests_reconstructed, s.scored), (4, 4, 4));
    // The same file named directly gives the same records.
    let (_d2, out2, _) = import("verl", &dir.join("3.jsonl"), true, None);
    assert_eq!(lines(&out2)[1..], all[1..]);
}
