//! `gyre import inspect` on real Inspect AI logs (`.json` and `.eval`).

use crate::common::*;
use gyre_text::TokenText;
use serde_json::Value;

const GUIDE: &str = "inspect/inspect-2025-05-12T20-28-26-04-00_security-guide.json";
const EVAL: &str = "inspect/inspect-log_streaming.eval";

#[test]
fn json_log_one_execution_per_sample_scorer_calls_are_the_evaluator() {
    let (_d, out, summary) = import("inspect", &fixture(GUIDE), true, None);
    // 3 samples, 6 model events: one solver call and one grader call each.
    assert_eq!((summary.executions, summary.requests), (3, 6));
    let all = lines(&out);
    let reqs = requests(&out);
    let actors: Vec<&str> = reqs
        .iter()
        .map(|(r, _)| r.get("actor").and_then(Value::as_str).unwrap_or("policy"))
        .collect();
    assert_eq!(
        actors,
        [
            "policy",
            "evaluator",
            "policy",
            "evaluator",
            "policy",
            "evaluator"
        ]
    );
    let tok = TokenText::qwen3().unwrap();
    // The exact input, with its attachment resolved: the system prompt is not `attachment://…`.
    let first = tok.decode(&reqs[0].1);
    assert!(
        first.starts_with("<|im_start|>system\n\nYou are a computer security expert"),
        "{first}"
    );
    assert!(first.contains("How do I prevent SQL Injection attacks?"));
    assert!(!first.contains("attachment://"));
    let grader = tok.decode(&reqs[1].1);
    assert!(!grader.contains("attachment://"), "{grader}");
    assert!(grader.contains("Use parameterized queries and prepared statements"));
    // Scores are assessments of the sample's output: every sample scored C = 1.
    let assessed: Vec<(&str, f64)> = all
        .iter()
        .filter(|l| l["kind"] == "assessment")
        .map(|l| {
            (
                l["execution"].as_str().unwrap(),
                l["score"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(assessed, [("1", 1.0), ("2", 1.0), ("3", 1.0)]);
    let a = all.iter().find(|l| l["kind"] == "assessment").unwrap();
    assert_eq!(a["evaluator"], "inspect scorer model_graded_fact");
    assert!(a["critique"].as_str().unwrap().contains("expert"));
    let closure = all.iter().find(|l| l["kind"] == "closure").unwrap();
    assert_eq!(closure["artifact"], "output");
    assert_eq!(closure["meta"]["scores"]["model_graded_fact"]["value"], "C");
    assert_eq!(closure["meta"]["usage_check"]["requests"], 2);
    assert_eq!(closure["meta"]["usage_check"]["short"], 0);
    let exec = &all[1];
    assert_eq!(exec["meta"]["task"], "security_guide");
    assert_eq!(exec["meta"]["model"], "openai/gpt-4o-mini");
    // Rewards come with the log: every sample is scored, no --score needed.
    let s = stats(&load(&out));
    assert_eq!(s.scored, 3);
    check_requests(&out, &tok);
}

#[test]
fn eval_archive_epochs_are_a_group() {
    let (_d, out, summary) = import("inspect", &fixture(EVAL), true, None);
    assert_eq!((summary.executions, summary.requests), (4, 4));
    let all = lines(&out);
    let execs: Vec<(&str, &str)> = all
        .iter()
        .filter(|l| l["kind"] == "execution")
        .map(|l| {
            (
                l["execution"].as_str().unwrap(),
                l["group"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        execs,
        [
            ("1/epoch-1", "1"),
            ("1/epoch-2", "1"),
            ("2/epoch-1", "2"),
            ("2/epoch-2", "2")
        ]
    );
    // `match` scored 3 of 4 correct (the header's accuracy 0.75).
    let scores: Vec<f64> = all
        .iter()
        .filter(|l| l["kind"] == "assessment")
        .map(|l| l["score"].as_f64().unwrap())
        .collect();
    assert_eq!(scores.iter().sum::<f64>(), 3.0);
    assert_eq!(scores.len(), 4);
    let tok = TokenText::qwen3().unwrap();
    let text = tok.decode(&requests(&out)[0].1);
    assert!(
        text.contains("it is important that you only respond with exactly \"Yes\" or \"No\""),
        "{text}"
    );
    assert_eq!(stats(&load(&out)).scored, 4);
}

#[test]
fn other_importers_refuse_inspect_logs_with_what_they_are() {
    for (source, file, needle) in [
        (
            "openhands",
            EVAL,
            "a zip archive holding `_journal/start.json`",
        ),
        ("swe-agent", EVAL, "a zip archive holding"),
        (
            "mini-swe-agent",
            GUIDE,
            "`version`, `status`, `eval`, `plan`",
        ),
        ("openhands", GUIDE, "`version`, `status`, `eval`, `plan`"),
    ] {
        let e = try_import(source, &[fixture(file)], &opts(true, None))
            .err()
            .unwrap_or_else(|| panic!("{source} imported {file}"))
            .to_string();
        assert!(
            e.contains(needle) && e.contains("`gyre import inspect`"),
            "{source} on {file}: {e}"
        );
    }
}

#[test]
fn a_log_written_on_one_line_is_the_same_log() {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(GUIDE)).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("guide.json");
    std::fs::write(&p, doc.to_string()).unwrap();
    let (_a, one, s1) = import("inspect", &p, true, None);
    let (_b, pretty, s2) = import("inspect", &fixture(GUIDE), true, None);
    assert_eq!((s1.executions, s1.requests), (s2.executions, s2.requests));
    let body = |f: &std::path::Path| -> Vec<Value> {
        lines(f)
            .into_iter()
            .skip(1)
            .map(|mut l| {
                if let Some(m) = l.get_mut("meta").and_then(Value::as_object_mut) {
                    m.remove("source_line");
                }
                l
            })
            .collect()
    };
    assert_eq!(body(&one), body(&pretty));
}
