//! `gyre import atif` on sessions written by Harbor's own code (harbor 0.26.0's ATIF models and
//! writer, tests/fixtures/import/atif/): exact and reconstructed, an embedded sub-agent and one
//! in a file beside the trajectory; and on hostile trajectories.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::*;

const EXACT: &str = "atif/exact/trajectory.json";
const TEXT: &str = "atif/text/trajectory.json";
const SUMMARY: &str = "trajectory.summarization-1-summary.json";

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The model-call steps of a trajectory and its embedded sub-agents (not copied context).
fn model_calls(t: &Value) -> Vec<Value> {
    let mut calls: Vec<Value> = t["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["source"] == "agent" && s.get("is_copied_context") != Some(&json!(true)))
        .cloned()
        .collect();
    for sub in t["subagent_trajectories"].as_array().into_iter().flatten() {
        calls.extend(model_calls(sub));
    }
    calls
}

fn ids(v: &Value) -> Vec<u32> {
    token_ids(v)
}

#[test]
fn exact_session_with_an_embedded_and_a_file_sub_agent() {
    let path = fixture(EXACT);
    let main = read_json(&path);
    let sub = read_json(&fixture("atif/exact").join(SUMMARY));
    let mut calls = model_calls(&main);
    calls.extend(model_calls(&sub));
    // What Harbor wrote: 6 model calls, 246 completion tokens (make_fixture.py says so too).
    let completions: usize = calls
        .iter()
        .map(|c| {
            c["metrics"]["completion_token_ids"]
                .as_array()
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!((calls.len(), completions), (6, 246));

    let (_d, out, summary) = import("atif", &path, true, None);
    assert_eq!((summary.executions, summary.requests), (1, 6));
    assert_eq!(summary.output_tokens, 246);
    let all = lines(&out);
    assert_eq!(all[0]["meta"]["reconstructed"], false);
    assert_eq!(
        all[0]["meta"]["inputs"],
        json!([
            path.display().to_string(),
            fixture("atif/exact").join(SUMMARY).display().to_string()
        ])
    );
    let batch = load(&out);
    let s = stats(&batch);
    assert_eq!(s.requests, 6);
    assert_eq!(s.policy_tokens, 246);
    assert_eq!(s.requests_reconstructed, 0);
    // One trained sample per model call: loss on every completion token, each with its
    // behaviour log-prob.
    assert_eq!(
        (
            summary.samples,
            summary.trained_tokens,
            summary.behaviour_logprobs
        ),
        (6, 246, 246)
    );
    assert_eq!(summary.trainer_logprobs, 0);
    assert_eq!(all[0]["trainer"]["name"], "harbor");
    assert_eq!(all[0]["trainer"]["version"], Value::Null);
    assert_eq!(all[0]["trainer"]["loss_agg"], "unknown");
    let trained: Vec<&Value> = all.iter().filter(|l| l["kind"] == "trained").collect();
    assert_eq!(trained.len(), 6);
    // The summarization call: step 5 of the file beside the trajectory (index 4).
    let t = trained.iter().find(|t| t["sample"] == "r5").unwrap();
    assert_eq!(
        t["source"],
        json!({"file": fixture("atif/exact").join(SUMMARY).display().to_string(), "index": 4})
    );
    assert_eq!(t["tokens"][0]["request"], "r5");
    let r5 = &calls[5]["metrics"];
    let (p, c) = (
        ids(&r5["prompt_token_ids"]).len(),
        ids(&r5["completion_token_ids"]).len(),
    );
    assert_eq!(
        (t["prompt_len"].as_u64(), t["tokens"][0]["end"].as_u64()),
        (Some(p as u64), Some((p + c) as u64))
    );
    assert_eq!(t["behaviour_logprobs"], r5["logprobs"]);
    assert_eq!(batch.executions[0].trained.list.len(), 6);

    let reqs = requests(&out);
    let agents: Vec<&str> = reqs
        .iter()
        .map(|(r, _)| r["agent"].as_str().unwrap())
        .collect();
    // Delegation order: the embedded sub-agent's calls follow the call that started it.
    assert_eq!(
        agents,
        [
            "main",
            "main",
            "sub-research-1",
            "sub-research-1",
            "sub-summarization-1-summary",
            "main"
        ]
    );
    // Exact: the prompt and completion ids and log-probs as Harbor recorded them (`calls` is
    // main's 3, the embedded sub-agent's 2, the summarization's 1).
    for (k, &c) in [0, 1, 3, 4, 5, 2].iter().enumerate() {
        let m = &calls[c]["metrics"];
        assert_eq!(reqs[k].1, ids(&m["prompt_token_ids"]), "request {k}");
        assert_eq!(ids(&reqs[k].0["output"]), ids(&m["completion_token_ids"]));
        assert_eq!(reqs[k].0["logprobs"], m["logprobs"]);
    }
    // The sub-agent answers the `delegate` call; the summarization is a summary request.
    assert_eq!(reqs[2].0["meta"]["task_call_id"], "call_2");
    assert_eq!(reqs[4].0["purpose"], "summary");
    assert_eq!(reqs[4].0["meta"]["step_index"], 4);
    // Native tool calls located in the exact output.
    assert_eq!(reqs[0].0["tool_calls"][0]["id"], "call_1");
    // Spans: the rendered steps agree with Harbor's ids token for token.
    for (r, full) in &reqs {
        assert_eq!(
            r["meta"]["aligned_prompt_tokens"],
            full.len(),
            "{}",
            r["id"]
        );
    }
    // After the compaction the context was replaced: kept as recorded, flagged.
    assert_eq!(reqs[5].0["meta"]["extends_previous"], false);
    assert!(reqs[1].0["meta"].get("extends_previous").is_none());
    assert!(
        summary
            .warnings
            .iter()
            .any(|w| w.contains("1 prompt of 6 start with something other")),
        "{:?}",
        summary.warnings
    );
}

#[test]
fn text_session_is_reconstructed_with_the_same_calls() {
    let path = fixture(TEXT);
    let (_d, out, summary) = import("atif", &path, true, Some(1.0));
    assert_eq!((summary.executions, summary.requests), (1, 6));
    let all = lines(&out);
    assert_eq!(all[0]["meta"]["reconstructed"], true);
    // Re-tokenised text is not what a trainer trained on: no samples, no trainer.
    assert_eq!(summary.samples, 0);
    assert!(all[0].get("trainer").is_none());
    let batch = load(&out);
    let s = stats(&batch);
    assert_eq!(s.requests, 6);
    assert_eq!(s.requests_reconstructed, 6);
    assert_eq!(s.policy_tokens, summary.output_tokens);
    assert_eq!(s.scored, 1);
    let reqs = requests(&out);
    assert_eq!(reqs[2].0["agent"], "sub-research-1");
    assert_eq!(reqs[2].0["meta"]["task_call_id"], "call_2");
    assert_eq!(reqs[4].0["purpose"], "summary");
    // The text renders to what the exact session recorded: the same prompts, call for call.
    let exact = requests(&import("atif", &fixture(EXACT), true, None).1);
    for (k, ((r, full), (_, want))) in reqs.iter().zip(&exact).enumerate() {
        assert_eq!(full, want, "request {k} ({})", r["id"]);
    }
}

/// A copy of the exact session in a fresh folder, with `edit` applied to the main trajectory.
fn copy_with(edit: impl FnOnce(&mut Value)) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("trial");
    std::fs::create_dir(&d).unwrap();
    let mut main = read_json(&fixture(EXACT));
    edit(&mut main);
    let p = d.join("trajectory.json");
    std::fs::write(&p, serde_json::to_string_pretty(&main).unwrap()).unwrap();
    std::fs::copy(fixture("atif/exact").join(SUMMARY), d.join(SUMMARY)).unwrap();
    (dir, p)
}

fn refused(p: &Path) -> String {
    let e = try_import("atif", &[p.to_path_buf()], &opts(true, None)).unwrap_err();
    e.to_string()
}

/// The summarization reference of the main trajectory (step 4's only result).
fn summary_ref(t: &mut Value) -> &mut Value {
    &mut t["steps"][3]["observation"]["results"][0]["subagent_trajectory_ref"][0]
}

#[test]
fn hostile_trajectories_are_file_line_errors() {
    // Truncated JSON.
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("trajectory.json");
    let text = std::fs::read_to_string(fixture(EXACT)).unwrap();
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let e = refused(&cut);
    assert!(
        e.contains("trajectory.json:") && e.contains("malformed JSON"),
        "{e}"
    );

    // A path out of the folder, an absolute path, a URL.
    for bad in ["../escape.json", "/etc/passwd", "s3://bucket/t.json"] {
        let (_d, p) = copy_with(|t| summary_ref(t)["trajectory_path"] = json!(bad));
        let e = refused(&p);
        assert!(e.contains("is not a file beside the trajectory"), "{e}");
        assert!(
            e.contains(
                "(steps[3].observation.results[0].subagent_trajectory_ref[0].trajectory_path)"
            ),
            "{e}"
        );
    }

    // A reference back to itself.
    let (_d, p) = copy_with(|t| summary_ref(t)["trajectory_path"] = json!("trajectory.json"));
    let e = refused(&p);
    assert!(
        e.contains("leads back to a trajectory that delegated to it"),
        "{e}"
    );

    // A symbolic link out of the folder.
    let (d, p) = copy_with(|t| summary_ref(t)["trajectory_path"] = json!("link.json"));
    let outside = d.path().join("outside.json");
    std::fs::copy(fixture("atif/exact").join(SUMMARY), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, d.path().join("trial/link.json")).unwrap();
    let e = refused(&p);
    assert!(e.contains("leads out of the trajectory's folder"), "{e}");

    // One log-prob short.
    let (_d, p) = copy_with(|t| {
        t["steps"][1]["metrics"]["logprobs"]
            .as_array_mut()
            .unwrap()
            .pop();
    });
    let e = refused(&p);
    assert!(e.contains("log-probs for"), "{e}");
    assert!(e.contains("(steps[1].metrics.logprobs)"), "{e}");

    // A step source ATIF does not have.
    let (_d, p) = copy_with(|t| t["steps"][0]["source"] = json!("robot"));
    let e = refused(&p);
    assert!(e.contains("unknown step source \"robot\""), "{e}");
}

#[test]
fn a_missing_sub_agent_file_is_a_warning() {
    let (d, p) = copy_with(|_| {});
    std::fs::remove_file(d.path().join("trial").join(SUMMARY)).unwrap();
    let (_o, out, summary) = try_import("atif", &[p], &opts(true, None)).unwrap();
    assert_eq!(summary.requests, 5);
    assert!(
        summary.warnings.iter().any(|w| w.contains("is missing")),
        "{:?}",
        summary.warnings
    );
    let sub = read_json(&fixture("atif/exact").join(SUMMARY));
    let lost = model_calls(&sub)[0]["metrics"]["completion_token_ids"]
        .as_array()
        .unwrap()
        .len() as u64;
    assert_eq!(stats(&load(&out)).policy_tokens, 246 - lost);
}
