//! OpenHands instances outside an evaluation `output.jsonl`: one saved as its own `.json`, and
//! the issue resolver's `output.jsonl` (issue 19 §2). Both are made here from the instances of
//! `openhands/output.jsonl` (written for the tests in the public format).

use crate::common::*;
use serde_json::{Value, json};

fn instances() -> Vec<Value> {
    std::fs::read_to_string(fixture("openhands/output.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn closure(out: &std::path::Path) -> Vec<Value> {
    lines(out)
        .into_iter()
        .filter(|l| l["kind"] == "closure")
        .collect()
}

#[test]
fn one_instance_as_its_own_json_has_the_verdict_it_has_in_output_jsonl() {
    let (_a, whole, _) = import("openhands", &fixture("openhands/output.jsonl"), true, None);
    let in_jsonl = closure(&whole);
    let dir = tempfile::tempdir().unwrap();
    for (i, inst) in instances().iter().enumerate() {
        let p = dir.path().join(format!("instance-{i}.json"));
        std::fs::write(&p, serde_json::to_string_pretty(inst).unwrap()).unwrap();
        let (_b, out, summary) = import("openhands", &p, true, None);
        let alone = closure(&out);
        assert_eq!(alone.len(), 1);
        for k in ["status", "artifact", "version"] {
            assert_eq!(alone[0][k], in_jsonl[i][k], "instance {i}: {k}");
        }
        assert_eq!(alone[0]["meta"]["error"], in_jsonl[i]["meta"]["error"]);
        let exec = &lines(&out)[1];
        assert_eq!(exec["execution"], inst["instance_id"]);
        assert!(summary.requests > 0);
    }
    // The second stopped at the iteration limit: `timeout` either way, never `completed`.
    assert_eq!(in_jsonl[1]["status"], "timeout");
}

#[test]
fn resolver_output_jsonl_is_one_execution_per_issue() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("output.jsonl");
    let lines_out: Vec<String> = instances()
        .into_iter()
        .enumerate()
        .map(|(i, mut v)| {
            let o = v.as_object_mut().unwrap();
            o.remove("instance_id");
            let patch = o.remove("test_result").unwrap()["git_patch"].clone();
            o.insert("number".into(), json!(100 + i));
            o.insert("issue".into(), json!({"number": 100 + i, "title": "t"}));
            o.insert("issue_type".into(), json!("issue"));
            o.insert("git_patch".into(), patch);
            o.insert("success".into(), json!(i == 0));
            v.to_string()
        })
        .collect();
    std::fs::write(&p, lines_out.join("\n") + "\n").unwrap();
    let (_d, out, summary) = import("openhands", &p, true, None);
    assert_eq!((summary.executions, summary.requests), (2, 6));
    let all = lines(&out);
    let ids: Vec<&str> = all
        .iter()
        .filter(|l| l["kind"] == "execution")
        .map(|l| l["execution"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["issue-100", "issue-101"]);
    let c = closure(&out);
    assert_eq!(
        (c[0]["status"].as_str(), c[0]["artifact"].as_str()),
        (Some("completed"), Some("git_patch"))
    );
    assert_eq!(c[0]["meta"]["success"], true);
    assert_eq!(c[1]["status"], "timeout");
    assert_eq!(c[1]["artifact"], Value::Null);
}
