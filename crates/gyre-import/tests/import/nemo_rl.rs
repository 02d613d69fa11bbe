//! `gyre import nemo-rl` on a dump written exactly in NeMo-RL's layout
//! (tests/fixtures/import/nemo-rl/): one execution per row, exact requests per sampled segment,
//! the rows as `trained` records with NeMo-RL's effective mask.

use crate::common::*;

use gyre_engine::trained::TrainedCounts;

#[test]
fn rows_become_executions_with_exact_segments_and_trained_records() {
    let dump = fixture("nemo-rl/train_data_step3.jsonl");
    let (_d, out, summary) = import("nemo-rl", &dump, true, None);
    // Rows 0, 2, 3 sample once; row 1 twice (a tool call, then the answer).
    assert_eq!((summary.executions, summary.requests), (4, 5));
    assert_eq!(summary.samples, 4);
    // Σ token_loss_mask × sample_loss_mask: 7 + 28 + 0 (loss_multiplier 0) + 2.
    assert_eq!(summary.trained_tokens, 37);
    assert_eq!(
        (summary.behaviour_logprobs, summary.trainer_logprobs),
        (37, 37)
    );
    assert!(
        summary.warnings[0].starts_with("4 rows: NeMo-RL's dump holds no execution ids"),
        "{:?}",
        summary.warnings
    );
    let all = lines(&out);
    assert_eq!(all[0]["trainer"]["name"], "nemo-rl");
    assert_eq!(all[0]["trainer"]["loss_agg"], "token-mean");
    assert!(
        all[0]["trainer"]["inferred"][0]
            .as_str()
            .unwrap()
            .starts_with("executions: one per row")
    );
    let execs: Vec<&serde_json::Value> = all.iter().filter(|l| l["kind"] == "execution").collect();
    assert_eq!(execs[0]["execution"], "train_data_step3.jsonl:0");
    assert_eq!(execs[0]["group"], execs[1]["group"]);
    assert_eq!(execs[2]["group"], execs[3]["group"]);
    assert_ne!(execs[1]["group"], execs[2]["group"]);

    let trained: Vec<&serde_json::Value> = all.iter().filter(|l| l["kind"] == "trained").collect();
    // Padding past input_lengths (23 of 59) is dropped and said.
    assert_eq!(trained[0]["meta"]["padding"], 36);
    assert_eq!(trained[0]["prompt_len"], 16);
    assert_eq!(trained[0]["step"], 3);
    assert_eq!(trained[0]["source"]["index"], 0);
    assert_eq!(trained[0]["tokens"][0]["request"], "r1");
    // A sampled log-prob of exactly 0.0 is a value; the mask-off tool tokens have none.
    let b1 = trained[1]["behaviour_logprobs"].as_array().unwrap();
    assert!(b1.iter().any(|v| v.as_f64() == Some(0.0)));
    assert!(b1.iter().any(serde_json::Value::is_null));
    assert_eq!(trained[1]["tokens"][0]["request"], "r2");
    // The dropped sample keeps its row, with a zero mask.
    assert_eq!(trained[2]["meta"]["sample_loss_mask"], 0.0);
    assert!(
        trained[2]["loss_mask"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m == 0)
    );
    let adv: Vec<f64> = trained
        .iter()
        .map(|t| t["advantage"].as_f64().unwrap())
        .collect();
    assert_eq!(adv[0], 0.0);
    assert!(adv[2] < 0.0 && adv[3] > 0.0);
    // Every trained record precedes its execution's closure.
    for t in &trained {
        let pos = |kind: &str| {
            all.iter()
                .position(|l| l["kind"] == kind && l["execution"] == t["execution"])
                .unwrap()
        };
        assert!(all.iter().position(|l| std::ptr::eq(l, *t)).unwrap() < pos("closure"));
    }

    // The requests are the dump's ids exactly, and the batch counts what the rows hold.
    let tok = gyre_text::TokenText::qwen3().unwrap();
    let reqs = requests(&out);
    assert_eq!(
        tok.decode(&token_ids(&reqs[0].0["output"])),
        "<think>\n\n</think>\n\n42<|im_end|>"
    );
    assert_eq!(
        tok.decode(&token_ids(&reqs[2].0["output"])),
        "It is 42.<|im_end|>"
    );
    let batch = load(&out);
    assert_eq!(
        batch.trained_counts(),
        TrainedCounts {
            executions: 4,
            samples: 4,
            trained_tokens: 37,
            aux_tokens: 0,
            behaviour_logprobs: 37,
            trainer_logprobs: 37,
        }
    );
    // The folder gives the same records.
    let (_d2, out2, _) = import("nemo-rl", dump.parent().unwrap(), true, None);
    assert_eq!(lines(&out2)[1..], all[1..]);
}
