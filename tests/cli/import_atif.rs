//! `gyre import atif` and `gyre import verl` end to end: `gyre stats --json` counts every model
//! call of Harbor's main agent and its sub-agents, hostile trajectories exit 2 with nothing
//! written, and verl's dump says it cannot be audited.

use std::path::Path;
use std::process::Command;

use crate::import_common::fixture;

fn gyre(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stats(out: &Path) -> serde_json::Value {
    let (code, stdout, err) = gyre(&["stats", "--json", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn stats_count_every_model_call_of_the_main_agent_and_its_sub_agents() {
    let dir = tempfile::tempdir().unwrap();
    for (variant, reconstructed) in [("exact", 0), ("text", 6)] {
        let out = dir.path().join(format!("{variant}.jsonl"));
        let src = fixture(&format!("atif/{variant}/trajectory.json"));
        let (code, _, err) = gyre(&[
            "import",
            "atif",
            src.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("1 execution, 6 requests"), "{err}");
        let s = stats(&out);
        // 3 calls of main, 2 of the embedded sub-agent, 1 of the summarization sub-agent file.
        assert_eq!(s["requests"], 6, "{variant}");
        assert_eq!(s["requests_reconstructed"], reconstructed, "{variant}");
        if variant == "exact" {
            // Σ len(metrics.completion_token_ids) over the 6 calls.
            assert_eq!(s["policy_tokens"], 246);
        } else {
            let all = std::fs::read_to_string(&out).unwrap();
            let outputs: usize = all
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .filter(|v| v["kind"] == "request")
                .map(|v| v["output"].as_array().unwrap().len())
                .sum();
            assert_eq!(s["policy_tokens"], outputs as u64);
        }
    }
}

#[test]
fn hostile_trajectories_exit_2_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let trial = dir.path().join("trial");
    std::fs::create_dir(&trial).unwrap();
    let src = fixture("atif/exact/trajectory.json");
    let text = std::fs::read_to_string(&src).unwrap();
    let out = dir.path().join("out.jsonl");
    let run = |name: &str, body: &str| {
        let p = trial.join(name);
        std::fs::write(&p, body).unwrap();
        let r = gyre(&[
            "import",
            "atif",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(!out.exists(), "{name}: nothing is written");
        r
    };
    // Cut short.
    let (code, _, err) = run("cut.json", &text[..text.len() / 3]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cut.json:") && err.contains("malformed JSON"),
        "{err}"
    );
    // A trajectory_path with escape codes that leaves the folder: named, sanitised.
    let escaped = text.replace(
        "\"trajectory.summarization-1-summary.json\"",
        "\"../\\u001b[31mowned\\u0007.json\"",
    );
    let (code, _, err) = run("escape.json", &escaped);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not a file beside the trajectory"), "{err}");
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // A file that names itself as its sub-agent.
    let looped = text.replace("trajectory.summarization-1-summary.json", "loop.json");
    let (code, _, err) = run("loop.json", &looped);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with(&format!("{}:", trial.join("loop.json").display())),
        "{err}"
    );
    assert!(err.contains("a loop"), "{err}");
}

#[test]
fn verl_dump_imports_and_says_it_cannot_be_audited() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("verl.jsonl");
    let src = fixture("verl/rollout_data");
    let (code, _, err) = gyre(&[
        "import",
        "verl",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("cannot be audited token by token"), "{err}");
    assert!(err.contains("4 executions, 4 requests"), "{err}");
    let s = stats(&out);
    assert_eq!(s["requests"], 4);
    assert_eq!(s["requests_reconstructed"], 4);
    assert_eq!(s["scored"], 4);
    // A truncated line is a file:line error, exit 2, nothing written.
    let bad = dir.path().join("5.jsonl");
    std::fs::write(
        &bad,
        "{\"input\": \"a\", \"output\": \"b\", \"score\": 1}\n{\"input\": \"a",
    )
    .unwrap();
    let out2 = dir.path().join("bad.jsonl");
    let (code, _, err) = gyre(&[
        "import",
        "verl",
        bad.to_str().unwrap(),
        "--out",
        out2.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("5.jsonl:2: malformed JSON"), "{err}");
    assert!(!out2.exists());
}
