//! `gyre import codex` on a real Codex CLI rollout, and on compaction (written here in the
//! rollout's shape: no real rollout with a `compacted` item is at hand).

use crate::common::*;
use gyre_text::TokenText;
use serde_json::{Value, json};

const ROLLOUT: &str = "codex/agentv-codex-1f_4427577930_2.jsonl";

#[test]
fn one_request_per_token_count_with_the_conversation_before_it() {
    let (_d, out, summary) = import("codex", &fixture(ROLLOUT), true, None);
    assert_eq!((summary.executions, summary.requests), (1, 23));
    let all = lines(&out);
    assert_eq!(all[1]["execution"], "019ed99c-d00d-7613-b2e7-d2f512f78afd");
    assert_eq!(all[1]["meta"]["cli_version"], "0.140.0");
    assert!(
        all[1]["task"]
            .as_str()
            .unwrap()
            .starts_with("should we close https://github.com/EntityProcess/agentv/issues/1263")
    );
    let tok = TokenText::qwen3().unwrap();
    let reqs = requests(&out);
    let first = tok.decode(&reqs[0].1);
    // The base instructions are the system prompt; the developer message, AGENTS.md and the
    // prompt follow.
    assert!(
        first.starts_with("<|im_start|>system\nYou are Codex, a coding agent based on GPT-5."),
        "{}",
        &first[..200]
    );
    assert!(first.contains("<permissions instructions>"));
    assert!(
        first.contains("# AGENTS.md instructions for /home/entity/projects/EntityProcess/agentv")
    );
    assert!(first.ends_with("as resolved by the prepare PRs<|im_end|>\n<|im_start|>assistant\n"));
    assert_eq!(reqs[0].0["model"], "gpt-5.5");
    // r1 called exec_command; r2's context holds that call's output.
    assert_eq!(reqs[0].0["tool_calls"][0]["name"], "exec_command");
    let second = tok.decode(&reqs[1].1);
    assert!(second.contains("Chunk ID: f788d3"), "{second}");
    // Four parallel calls of one response, all answered before the next call.
    assert_eq!(reqs[3].0["tool_calls"].as_array().unwrap().len(), 3);
    assert_eq!(summary.delta_requests, 22);
    // Reasoning counted by the provider but logged with an empty summary: hidden, not a target.
    let hidden: Vec<&str> = reqs
        .iter()
        .filter(|(r, _)| r.get("not_trainable").is_some())
        .map(|(r, _)| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(hidden.len(), 22);
    assert!(!hidden.contains(&"r22"), "r22 reasoned 0 tokens");
    let closure = all.last().unwrap();
    let check = &closure["meta"]["usage_check"];
    assert_eq!(check["requests"], 23);
    assert_eq!(
        (check["short"].as_u64(), check["long"].as_u64()),
        (Some(0), Some(0))
    );
    check_requests(&out, &tok);
}

fn rollout(dir: &std::path::Path, lines: &[Value]) -> std::path::PathBuf {
    let p = dir.join("rollout-x.jsonl");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&p, text.join("\n") + "\n").unwrap();
    p
}

fn item(t: &str, payload: Value) -> Value {
    json!({"timestamp": t, "type": "response_item", "payload": payload})
}

fn count(t: &str, input: u64, output: u64) -> Value {
    json!({"timestamp": t, "type": "event_msg", "payload": {"type": "token_count", "info": {
        "total_token_usage": {"input_tokens": input, "output_tokens": output, "total_tokens": input + output},
        "last_token_usage": {"input_tokens": input, "output_tokens": output, "reasoning_output_tokens": 0}}}})
}

#[test]
fn compaction_is_a_summary_call_and_replaces_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let user = |text: &str| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]});
    let says = |text: &str| json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]});
    for replacement in [true, false] {
        let mut compacted = json!({"message": "SUMMARY: fixed the parser"});
        if replacement {
            compacted["replacement_history"] =
                json!([user("fix the parser"), user("SUMMARY: fixed the parser")]);
        }
        let p = rollout(
            dir.path(),
            &[
                json!({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
                       "payload": {"id": "s1", "base_instructions": {"text": "You are Codex."}}}),
                item("2026-01-01T00:00:01Z", user("fix the parser")),
                item(
                    "2026-01-01T00:00:02Z",
                    says("Looking at the very long parser file now."),
                ),
                count("2026-01-01T00:00:03Z", 100, 10),
                // The same totals again: a repeated event, not a response.
                count("2026-01-01T00:00:03Z", 100, 10),
                // The compaction call logs no items of its own.
                count("2026-01-01T00:00:04Z", 120, 8),
                json!({"timestamp": "2026-01-01T00:00:05Z", "type": "compacted", "payload": compacted}),
                item("2026-01-01T00:00:06Z", user("now run the tests")),
                item("2026-01-01T00:00:07Z", says("Running them.")),
                count("2026-01-01T00:00:08Z", 40, 4),
            ],
        );
        let (_d, out, summary) =
            try_import("codex", &[p], &opts(true, None)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(summary.requests, 3, "replacement {replacement}");
        let reqs = requests(&out);
        assert_eq!(reqs[1].0["purpose"], "summary");
        let tok = TokenText::qwen3().unwrap();
        assert_eq!(
            tok.decode(
                &reqs[1].0["output"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap() as u32)
                    .collect::<Vec<_>>()
            ),
            "<think>\n\n</think>\n\nSUMMARY: fixed the parser<|im_end|>"
        );
        // After the compaction the context is the new history, not the old one.
        let after = tok.decode(&reqs[2].1);
        assert!(after.contains("SUMMARY: fixed the parser"), "{after}");
        assert!(!after.contains("very long parser file"), "{after}");
        assert!(
            after.starts_with("<|im_start|>system\nYou are Codex."),
            "{after}"
        );
        let spans = reqs[2].0["spans"].as_array().unwrap();
        assert!(spans.iter().any(|s| s["source"] == "summary"), "{spans:?}");
        assert_eq!(
            summary
                .warnings
                .iter()
                .any(|w| w.contains("no replacement_history")),
            !replacement
        );
    }
}

#[test]
fn other_importers_refuse_a_rollout_with_what_it_is() {
    let path = fixture(ROLLOUT);
    for source in [
        "claude-code",
        "swe-agent",
        "mini-swe-agent",
        "openhands",
        "inspect",
        "vllm",
    ] {
        let e = try_import(source, std::slice::from_ref(&path), &opts(true, None))
            .err()
            .unwrap_or_else(|| panic!("{source} imported a Codex rollout"))
            .to_string();
        assert!(
            e.contains("the keys `timestamp`, `type`, `payload`")
                && e.contains("it looks like `gyre import codex` input"),
            "{source}: {e}"
        );
    }
}
