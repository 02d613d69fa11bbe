//! `gyre import prime-rl` end to end, on a run folder written with verifiers' own models and
//! prime-rl's layout (`tests/fixtures/import/prime-rl/`): `gyre stats --json` counts what
//! prime-rl trained (the figures `make_fixture.py` derives without gyre), a node shared by two
//! branches is trained once, and hostile files are one line, exit 2, nothing written.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::import_common::fixture;

fn gyre(args: &[&str]) -> (i32, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn import(input: &Path, out: &Path) -> String {
    let (code, _, err) = gyre(&[
        "import",
        "prime-rl",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    err
}

fn records(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn stats_count_what_prime_rl_trained() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let err = import(&fixture("prime-rl/run"), &out);
    assert!(
        err.contains("1 row of the token exports match no branch"),
        "{err}"
    );
    assert!(err.contains("left out: evaluation rollouts"), "{err}");
    let (code, stdout, err) = gyre(&["stats", "--json", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let s: Value = serde_json::from_slice(&stdout).unwrap();
    let t = &s["trained"];
    // make_fixture.py's counts: 4 episodes + 1 export row no episode holds; 6 trained branches
    // + that row; every trained token with the sampler's and the trainer's log-prob; ECHO's
    // weight on the 3 tokens of a tool answer's body.
    assert_eq!(
        [
            &t["executions"],
            &t["samples"],
            &t["trained_tokens"],
            &t["behaviour_logprobs"],
            &t["trainer_logprobs"],
            &t["aux_tokens"]
        ],
        [5, 7, 138, 138, 138, 3]
    );
    assert_eq!(s["requests"], 10);
    let (code, _, err) = gyre(&["validate", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let header = &records(&out)[0];
    assert_eq!(header["trainer"]["name"], "prime-rl");
    assert_eq!(header["trainer"]["version"], Value::Null);
    assert_eq!(header["trainer"]["loss_agg"], "token-mean");
    assert_eq!(header["trainer"]["meta"]["verifiers"], "0.4.0");
}

#[test]
fn a_node_shared_by_two_branches_is_trained_in_the_first_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    import(&fixture("prime-rl/run"), &out);
    let recs = records(&out);
    let branch = |sample: &str| {
        recs.iter()
            .find(|r| r["kind"] == "trained" && r["execution"] == "ep-c" && r["sample"] == sample)
            .unwrap()
    };
    let (first, second) = (branch("0"), branch("1"));
    let mask = |r: &Value| -> Vec<u64> {
        r["loss_mask"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    // Both responses start at the shared answer (node 2, 16 sampled tokens): the first branch
    // trains it, the second holds it as context.
    assert_eq!(first["prompt_len"], second["prompt_len"]);
    assert!(mask(first)[..16].iter().all(|&m| m == 1));
    assert!(mask(second)[..16].iter().all(|&m| m == 0));
    // The policy sampled it once: one request, on both samples' paths.
    let requests = recs
        .iter()
        .filter(|r| r["kind"] == "request" && r["execution"] == "ep-c")
        .count();
    assert_eq!(requests, 3);
    // The trainer's log-probs come from the joined token export.
    assert!(
        first["meta"]["token_export"]
            .as_str()
            .unwrap()
            .ends_with("rank_1.jsonl:1")
    );
}

#[test]
fn hostile_files_are_one_line_exit_2_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    for (input, said) in [
        ("prime-rl/hostile/cut", "traces.jsonl:2: malformed JSON"),
        (
            "prime-rl/hostile/wrong-type.jsonl",
            "wrong-type.jsonl:1: invalid type: string \"151644\", expected u32 (traces[0].nodes[2].token_ids[0])",
        ),
        (
            "prime-rl/hostile/short-logprobs.jsonl",
            "short-logprobs.jsonl:2: 12 values for 13 sampled (mask-on) tokens (traces[0].nodes[2].logprobs)",
        ),
        (
            "prime-rl/hostile/parent-loop.jsonl",
            "parent-loop.jsonl:1: the parent chain loops (traces[0].nodes[0].parent)",
        ),
        (
            "prime-rl/hostile/token_exports",
            "rank_0.jsonl:1: 47 values for 48 tokens (trainer_logprobs)",
        ),
    ] {
        let input = fixture(input);
        let (code, _, err) = gyre(&[
            "import",
            "prime-rl",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(said), "{err}");
        assert!(!out.exists());
    }
}

#[test]
fn an_all_file_is_rollouts_and_an_eval_file_is_not_training_data() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("all.jsonl");
    let steps = fixture("prime-rl/run/rollouts/step_1");
    let effective = steps.join("train/effective/traces.jsonl");
    let all = steps.join("train/all/traces.jsonl");
    // `all` after `effective`: the episodes it repeats are read once, and what only `all`
    // holds (an errored rollout) is requests, never a trained record.
    let (code, _, err) = gyre(&[
        "import",
        "prime-rl",
        effective.to_str().unwrap(),
        all.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("already read"), "{err}");
    let recs = records(&out);
    let of = |kind: &str, execution: &str| {
        recs.iter()
            .filter(|r| r["kind"] == kind && r["execution"] == execution)
            .count()
    };
    assert_eq!((of("request", "ep-e"), of("trained", "ep-e")), (1, 0));
    assert_eq!(of("trained", "ep-c"), 2);
    let (code, _, err) = gyre(&[
        "import",
        "prime-rl",
        steps.join("eval/all/traces.jsonl").to_str().unwrap(),
        "--out",
        dir.path().join("eval.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("evaluation rollouts (not training data)"),
        "{err}"
    );
}
