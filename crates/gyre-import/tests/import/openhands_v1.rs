//! OpenHands V1 (agent-sdk) conversations (issue 19 §2): one request per distinct
//! `llm_response_id`, the system prompt and tools from `SystemPromptEvent`, in the folder and in
//! one file. The fixture is written in the agent-sdk's event format (its PROVENANCE.md).

use crate::common::*;
use gyre_text::TokenText;
use serde_json::{Value, json};

const FOLDER: &str = "openhands/v1-conversation";

fn events() -> Vec<Value> {
    let dir = fixture(FOLDER).join("events");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}

#[test]
fn a_v1_conversation_folder_is_one_request_per_model_response() {
    let (_d, out, summary) = import("openhands", &fixture(FOLDER), true, None);
    let reqs = requests(&out);
    // Four model responses: chatcmpl-r1 (two parallel actions), -r2, -r3 (a message), -r4.
    assert_eq!(summary.requests, 4);
    let ids: Vec<&str> = reqs
        .iter()
        .map(|(r, _)| r["meta"]["response_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["chatcmpl-r1", "chatcmpl-r2", "chatcmpl-r3", "chatcmpl-r4"]
    );
    let tok = TokenText::qwen3().unwrap();
    check_requests(&out, &tok);
    let text = |k: usize| {
        let (r, input) = &reqs[k];
        (tok.decode(input), tok.decode(&token_ids(&r["output"])))
    };
    let (input, output) = text(0);
    // The system message holds the prompt, its dynamic context and the three tools by name.
    assert!(input.starts_with("<|im_start|>system\nYou are OpenHands agent"));
    assert!(input.contains("Working directory: /workspace/calc"));
    for tool in ["\"terminal\"", "\"file_editor\"", "\"finish\""] {
        assert!(input.contains(tool), "{tool} missing from the tools");
    }
    // The user message with its extended content.
    assert!(input.contains("Fix calc.py.\n<EXTRA_INFO>\nRun tests with pytest -q."));
    // Both parallel calls are in the one output, after its thinking.
    assert!(output.contains("First read calc.py, then run pytest."));
    assert!(output.contains("cat calc.py") && output.contains("pytest -q"));
    // The second request sees both observations, each as a tool result.
    let (input, _) = text(1);
    assert!(input.contains("return a - b"));
    assert!(input.contains("1 failed in 0.01s"));
    // The agent error is the tool result of the edit.
    let (input, output) = text(2);
    assert!(input.contains("is read-only."));
    assert!(output.contains("The editor refused; report it."));
    assert!(output.contains("I cannot apply the fix."));
    let (input, _) = text(3);
    assert!(input.contains("It is writable now. Finish."));
    // A context that grows: every request after the first extends the previous one.
    for (r, _) in &reqs[1..] {
        assert!(r.get("extends").is_some(), "{} does not extend", r["id"]);
    }
}

#[test]
fn hidden_thinking_in_v1_is_not_a_target_and_the_closure_says_how_it_ended() {
    let (_d, out, summary) = import("openhands", &fixture(FOLDER), true, None);
    let reqs = requests(&out);
    let hidden: Vec<&Value> = reqs
        .iter()
        .filter(|(r, _)| r.get("not_trainable").is_some())
        .map(|(r, _)| &r["meta"]["response_id"])
        .collect();
    // Only chatcmpl-r2's thinking block is a bare signature.
    assert_eq!(hidden, [&json!("chatcmpl-r2")]);
    assert_eq!(summary.not_trainable.values().sum::<u64>(), 1);
    let all = lines(&out);
    let closure = all.iter().find(|l| l["kind"] == "closure").unwrap();
    assert_eq!(closure["status"], "completed");
    assert_eq!(closure["meta"]["finish_action"], true);
    assert_eq!(closure["meta"]["agent_state"], "finished");
    let execution = all.iter().find(|l| l["kind"] == "execution").unwrap();
    assert_eq!(execution["execution"], "v1-conversation");
    assert_eq!(execution["meta"]["model"], "litellm_proxy/Qwen/Qwen3-8B");
    assert!(
        execution["meta"]["tool_parameters"]
            .as_str()
            .unwrap()
            .contains("not in V1 events")
    );
    // The model is the one the conversation ran with.
    assert_eq!(reqs[0].0["model"], "litellm_proxy/Qwen/Qwen3-8B");
    // The loader and the engine accept it: three trainable outputs.
    load(&out);
}

/// The same events as JSON Lines, as a JSON array, and as the `events/` folder alone give the
/// same requests.
#[test]
fn v1_events_in_one_file_are_read_like_the_folder() {
    let (_a, folder, _) = import("openhands", &fixture(FOLDER).join("events"), true, None);
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("events.jsonl");
    let body: String = events().iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(&jsonl, body).unwrap();
    let array = dir.path().join("events.json");
    std::fs::write(&array, serde_json::to_string_pretty(&events()).unwrap()).unwrap();
    let inputs = |p: &std::path::Path| -> Vec<Vec<u32>> {
        requests(p).into_iter().map(|(_, i)| i).collect()
    };
    let want = inputs(&folder);
    assert_eq!(want.len(), 4);
    for p in [&jsonl, &array] {
        let (_b, out, summary) = import("openhands", p, true, None);
        assert_eq!(summary.requests, 4, "{}", p.display());
        assert_eq!(inputs(&out), want, "{}", p.display());
    }
}

/// A V1 event another importer is given is named, with the importer that reads it; an event of
/// a kind gyre does not know is named in the import's warning, not dropped without a word.
#[test]
fn v1_events_are_named_for_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("events.jsonl");
    let mut body: String = events().iter().map(|e| format!("{e}\n")).collect();
    body.push_str(
        &json!({"id": "x", "timestamp": "2026-02-24T16:50:18", "source": "environment",
                "kind": "BrowserSnapshotEvent"})
        .to_string(),
    );
    std::fs::write(&p, body).unwrap();
    let e = try_import("vllm", std::slice::from_ref(&p), &opts(true, None))
        .map(|_| ())
        .expect_err("vllm imported V1 events")
        .to_string();
    assert!(
        e.contains("OpenHands V1 (agent-sdk) events (`kind`: `SystemPromptEvent`)")
            && e.contains("`gyre import openhands`")
            && !e.contains("gyre/1 recording"),
        "{e}"
    );
    let (_d, _out, summary) = import("openhands", &p, true, None);
    assert!(
        summary
            .warnings
            .iter()
            .any(|w| w.contains("BrowserSnapshotEvent ×1")),
        "{:?}",
        summary.warnings
    );
}
