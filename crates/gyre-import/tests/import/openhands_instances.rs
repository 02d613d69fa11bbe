//! OpenHands instances outside an evaluation `output.jsonl`: one saved as its own `.json`, and
//! the issue resolver's `output.jsonl` (issue 19 §2), made here from the instances of
//! `openhands/output.jsonl` (written for the tests in the public format); and the resolver's
//! output from before function calling (`openhands/resolver-codeact.jsonl`: flat events,
//! CodeAct text actions).

use crate::common::*;
use gyre_text::TokenText;
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

/// The resolver's `output.jsonl` as it was written before function calling: flat events
/// without `source`, `args` or `tool_call_metadata`; the model answered in text, and the log
/// keeps the parsed actions. Each action is one request whose context shows the earlier ones
/// as CodeAct did; none is a target, with a reason; observations are user messages.
#[test]
fn resolver_output_before_function_calling_rebuilds_codeact_prompts() {
    let (_d, out, summary) = import(
        "openhands",
        &fixture("openhands/resolver-codeact.jsonl"),
        true,
        None,
    );
    // Issue 7: run, run_ipython, finish; issue 9: run, run_ipython, the question asked.
    assert_eq!((summary.executions, summary.requests), (2, 6));
    let reqs = requests(&out);
    assert_eq!(reqs.len(), 6);
    for (r, _) in &reqs {
        let why = r["not_trainable"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", r["id"]));
        assert!(
            why.starts_with("OpenHands kept CodeAct's parsed action"),
            "{why}"
        );
    }
    assert_eq!(summary.not_trainable.values().sum::<u64>(), 6);
    let tok = TokenText::qwen3().unwrap();
    let text = |k: usize| tok.decode(&reqs[k].1);
    // The first request is the task alone; the second shows the first action as CodeAct
    // rendered it and its output as an observation, in the user's turn.
    assert!(text(0).contains("The CLI prints the version twice."));
    assert!(!text(0).contains("execute_bash>\ngrep"));
    let second = text(1);
    assert!(second.contains(
        "<|im_start|>assistant\n<think>\n\n</think>\n\nLet me find where the version is printed.\n<execute_bash>\n\
         grep -n version cli.py\n</execute_bash><|im_end|>"
    ));
    assert!(second.contains(
        "<|im_start|>user\nOBSERVATION:\n12:    print(VERSION)\r\n13:    print(VERSION)\r\n\
         root@7a1e:/workspace # \n[Command -1 finished with exit code 0]<|im_end|>"
    ));
    // Later requests extend the earlier ones (one shared prefix per issue).
    assert!(text(2).starts_with(&second));
    // An error observation says so, as CodeAct's prompt did.
    assert!(
        text(5).contains("OBSERVATION:\nKernel died\n[Error occurred in processing last action]")
    );
    // Issue 9's question is the agent's (it waits for an answer), not a user turn.
    let last_out = tok.decode(&token_ids(&reqs[5].0["output"]));
    assert!(
        last_out.ends_with(
            "\n\nI cannot run the tests here. Which Python version should I use?<|im_end|>"
        ),
        "{last_out}"
    );
    // Issue 9's costs list four priced calls, its history three responses: said once.
    let costs: Vec<&String> = summary
        .warnings
        .iter()
        .filter(|w| w.contains("metrics.costs"))
        .collect();
    assert_eq!(costs.len(), 1, "{:?}", summary.warnings);
    assert!(costs[0].starts_with("issue-9: metrics.costs lists 4 priced model calls"));
    // Nothing is trained on: the log does not hold what the model wrote.
    assert_eq!(stats(&load(&out)).policy_tokens, 0);
    let c = closure(&out);
    assert_eq!(
        (c[0]["status"].as_str(), c[0]["artifact"].as_str()),
        (Some("completed"), Some("git_patch"))
    );
}
