//! `gyre import mini-swe-agent` on a real trajectory (mini-swe-agent 1.15.0, gemini-3-pro) and
//! on one in 2.x's shape (tool calls, a response rejected for its format, the `exit` message).

use crate::common::*;
use gyre_text::TokenText;

const TRAJ: &str = "mini-swe-agent/gemini3pro-django__django-11999.traj.json";

#[test]
fn one_request_per_assistant_message_with_the_conversation_before_it() {
    let path = fixture(TRAJ);
    let (_d, out, summary) = import("mini-swe-agent", &path, true, None);
    // 33 assistant messages = info.model_stats.api_calls.
    assert_eq!((summary.executions, summary.requests), (1, 33));
    assert!(summary.warnings.iter().all(|w| !w.contains("api_calls")));
    let all = lines(&out);
    let exec = &all[1];
    assert_eq!(exec["execution"], "django__django-11999");
    assert_eq!(exec["meta"]["mini_version"], "1.15.0");
    assert_eq!(exec["meta"]["model_stats"]["api_calls"], 33);
    assert!(
        exec["task"]
            .as_str()
            .unwrap()
            .contains("Cannot override get_FOO_display() in Django 2.2+")
    );
    let tok = TokenText::qwen3().unwrap();
    let reqs = requests(&out);
    let first = tok.decode(&reqs[0].1);
    assert!(
        first.starts_with("<|im_start|>system\nYou are a helpful assistant that can interact"),
        "{first}"
    );
    assert!(first.ends_with("<|im_start|>assistant\n"), "{first}");
    // The second call sees the first response and the shell's answer to it.
    let second = tok.decode(&reqs[1].1);
    assert!(second.contains("```bash\nls -F\n```"), "{second}");
    assert!(
        second.contains("<returncode>0</returncode>\n<output>\nAUTHORS"),
        "{second}"
    );
    // Restoration: every later context extends the one before it.
    assert_eq!(summary.delta_requests, 32);
    assert_eq!(
        reqs[0].0["meta"]["response_id"],
        "gen-1763508908-w0wu9ZbXOFjT0Ns0r3Yb"
    );
    assert_eq!(reqs[0].0["model"], "google/gemini-3-pro-preview");
    check_requests(&out, &tok);
}

#[test]
fn hidden_reasoning_usage_check_and_closure() {
    let path = fixture(TRAJ);
    let (_d, out, summary) = import("mini-swe-agent", &path, true, Some(1.0));
    // Two responses carry Gemini's encrypted reasoning (`reasoning.encrypted`) beside a summary:
    // their outputs are not targets.
    let hidden: u64 = summary.not_trainable.values().sum();
    assert_eq!(hidden, 2, "{:?}", summary.not_trainable);
    let reqs = requests(&out);
    let marked: Vec<&str> = reqs
        .iter()
        .filter(|(r, _)| r.get("not_trainable").is_some())
        .map(|(r, _)| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(marked, ["r1", "r2"]);
    assert!(
        reqs[0].0["not_trainable"]
            .as_str()
            .unwrap()
            .starts_with("hidden reasoning")
    );
    assert!(reqs[2].0.get("not_trainable").is_none());
    let all = lines(&out);
    let closure = all.last().unwrap();
    assert_eq!(closure["status"], "completed");
    assert_eq!(closure["artifact"], "submission");
    assert_eq!(closure["meta"]["exit_status"], "Submitted");
    assert!(
        closure["meta"]["submission"]
            .as_str()
            .unwrap()
            .starts_with("diff --git a/django/db/models/fields/__init__.py")
    );
    // The usage check reads `extra.response.usage.prompt_tokens`.
    let check = &closure["meta"]["usage_check"];
    assert_eq!(check["requests"], 33);
    assert_eq!(
        (check["short"].as_u64(), check["long"].as_u64()),
        (Some(0), Some(0))
    );
    let ratio = check["median_ratio"].as_f64().unwrap();
    assert!((0.8..=1.1).contains(&ratio), "{check}");
    let s = stats(&load(&out));
    assert_eq!(s.scored, 1);
}

#[test]
fn other_importers_refuse_it_with_its_keys() {
    let path = fixture(TRAJ);
    for source in [
        "swe-agent",
        "openhands",
        "claude-code",
        "vllm",
        "codex",
        "inspect",
    ] {
        let e = try_import(source, std::slice::from_ref(&path), &opts(true, None))
            .err()
            .unwrap_or_else(|| panic!("{source} imported a mini-swe-agent trajectory"))
            .to_string();
        assert!(
            e.contains("`info`, `messages`, `trajectory_format`, `instance_id`")
                && e.contains("`gyre import mini-swe-agent`"),
            "{source}: {e}"
        );
    }
}

const V2: &str = "mini-swe-agent/v2-toolcall.traj.json";

/// mini-swe-agent 2.x: the `exit` message closes the run (it was "unknown role"), the bash tool
/// its tool-calling models always send is in every context, and a response rejected for its
/// format (kept in the next user message's `extra.response`) is a request of its own that no
/// later context extends.
#[test]
fn v2_tool_calls_format_errors_and_the_exit_message() {
    let (_d, out, summary) = import("mini-swe-agent", &fixture(V2), true, Some(1.0));
    // Three calls = info.model_stats.api_calls: two kept, one rejected.
    assert_eq!((summary.executions, summary.requests), (1, 3));
    assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
    let tok = TokenText::qwen3().unwrap();
    let reqs = requests(&out);
    let first = tok.decode(&reqs[0].1);
    assert!(first.contains("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"bash\""));
    // The rejected response: its own output, the context of the call before it extended.
    assert_eq!(reqs[1].0["meta"]["rejected_format"], true);
    assert_eq!(reqs[1].0["extends"], reqs[0].0["id"]);
    assert_eq!(
        tok.decode(&token_ids(&reqs[1].0["output"])),
        "<think>\n\n</think>\n\nI will edit it now.<|im_end|>"
    );
    // The next call sees the format error, not the rejected text.
    let third = tok.decode(&reqs[2].1);
    assert!(third.contains("<|im_start|>user\nTool call error:"));
    assert!(!third.contains("I will edit it now."));
    assert_eq!(reqs[2].0["extends"], reqs[0].0["id"]);
    let out3 = tok.decode(&token_ids(&reqs[2].0["output"]));
    assert!(
        out3.contains("<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"sed -i")
    );
    // The closure is the run's end, from info or, without it, from the exit message.
    let all = lines(&out);
    let closure = all.iter().find(|l| l["kind"] == "closure").unwrap();
    assert_eq!(
        (closure["status"].as_str(), closure["artifact"].as_str()),
        (Some("completed"), Some("submission"))
    );
    let exec = &all[1];
    assert_eq!(exec["meta"]["rejected_format_responses"], 1);
    assert_eq!(exec["meta"]["mini_version"], "2.4.6");
    check_requests(&out, &tok);

    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(V2)).unwrap()).unwrap();
    let info = doc["info"].as_object_mut().unwrap();
    info.remove("exit_status");
    info.remove("submission");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("no-info.traj.json");
    std::fs::write(&p, doc.to_string()).unwrap();
    let (_e, out, _) = import("mini-swe-agent", &p, true, None);
    let all = lines(&out);
    let closure = all.iter().find(|l| l["kind"] == "closure").unwrap();
    assert_eq!(closure["status"], "completed");
    assert_eq!(
        closure["meta"]["submission"],
        "diff --git a/range_sum.py b/range_sum.py\n"
    );
}
