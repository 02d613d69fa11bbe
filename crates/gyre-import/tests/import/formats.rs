//! `gyre import swe-agent`, `openhands` and `vllm` on real (and derived) fixtures.

use crate::common::*;
use gyre_text::TokenText;
use serde_json::Value;

/// The hash the reference script froze (tests/fixtures/import/vllm/make_fixture.py computes the
/// same ids with transformers): `h = (h * 1000003 + id) mod (2^61 - 1)`.
fn h(ids: &[u32]) -> u64 {
    const P: u128 = (1 << 61) - 1;
    ids.iter()
        .fold(0u128, |x, &i| (x * 1_000_003 + i as u128) % P) as u64
}

fn swe(restore: bool, score: Option<f64>) -> (tempfile::TempDir, std::path::PathBuf) {
    let path = fixture("swe-agent/function_calling_simple.traj");
    let (d, out, summary) = import("swe-agent", &path, restore, score);
    assert_eq!(summary.requests, 5);
    (d, out)
}

#[test]
fn swe_agent_rerendered_contexts_equal_transformers() {
    let (_d, out) = swe(false, Some(1.0));
    let reqs = requests(&out);
    // apply_chat_template(history[:i], add_generation_prompt=True) with transformers 5.24.
    let reference: [(usize, u64); 5] = [
        (995, 898_359_756_777_068_031),
        (1157, 564_707_106_773_073_229),
        (1338, 994_250_410_725_297_924),
        (1630, 782_268_775_037_971_604),
        (1729, 1_763_502_472_781_326_836),
    ];
    for ((_, full), (len, hash)) in reqs.iter().zip(reference) {
        assert_eq!((full.len(), h(full)), (len, hash));
    }
    let batch = load(&out);
    let s = stats(&batch);
    assert_eq!(s.candidates, 5);
    assert_eq!(s.divergences_in_outputs, 4);
    check_requests(&out, &TokenText::qwen3().unwrap());
}

#[test]
fn swe_agent_restored() {
    let (_d, out) = swe(true, Some(1.0));
    let reqs = requests(&out);
    // Each earlier response keeps its (empty) <think> block: 4 tokens more per response.
    let lens: Vec<usize> = reqs.iter().map(|(_, f)| f.len()).collect();
    assert_eq!(lens, [995, 1161, 1346, 1642, 1745]);
    assert!(reqs[1..].iter().all(|(r, _)| r["extends"].is_string()));
    let batch = load(&out);
    let s = stats(&batch);
    assert_eq!(
        (s.requests, s.requests_reconstructed, s.candidates),
        (5, 5, 1)
    );
    assert_eq!((s.raw_tokens, s.tree_tokens), (7256, 1797));
    assert_eq!(stats(&batch).divergences_in_outputs, 0);
    assert_eq!(s.scored, 1);
    let all = lines(&out);
    let closure = all.last().unwrap();
    // This trajectory has no `info`: the trajectory itself is the artifact.
    assert_eq!(closure["artifact"], "trajectory");
    assert_eq!(closure["status"], "completed");
    let first = &reqs[0].0;
    assert_eq!(
        first["tool_calls"][0]["id"],
        "call_PbWErNIge3YTrli3fiVvmIid"
    );
    assert_eq!(first["tool_calls"][0]["name"], "find_file");
    check_requests(&out, &TokenText::qwen3().unwrap());
}

#[test]
fn swe_agent_info_goes_into_closure_and_meta() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("swe-agent/function_calling_simple.traj")).unwrap(),
    )
    .unwrap();
    doc["info"] =
        serde_json::json!({"exit_status": "submitted", "submission": "diff --git a/x b/x"});
    let path = dir.path().join("with-info.traj");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let (_d, out, _) = import("swe-agent", &path, true, Some(0.0));
    let all = lines(&out);
    let closure = all.last().unwrap();
    assert_eq!(closure["artifact"], "submission");
    assert_eq!(closure["meta"]["exit_status"], "submitted");
    let exec = all.iter().find(|l| l["kind"] == "execution").unwrap();
    assert_eq!(exec["meta"]["submission"], "diff --git a/x b/x");
    // A valid 0 is a reward like any other.
    let s = stats(&load(&out));
    assert_eq!(s.scored, 1);

    doc["info"] = serde_json::json!({"exit_status": "exit_cost"});
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let (_d, out, _) = import("swe-agent", &path, true, Some(1.0));
    let closure = lines(&out).pop().unwrap();
    assert_eq!(
        (&closure["status"], &closure["artifact"]),
        (&Value::from("timeout"), &Value::Null)
    );
    // No submission: no assessable work, a dummy execution.
    assert_eq!(stats(&load(&out)).dummy, 1);
}

#[test]
fn openhands_event_streams() {
    let tok = TokenText::qwen3().unwrap();
    // (file, requests, candidates restored, candidates re-rendered, start divergences)
    for (file, n, c_restore, c_rerender, div) in [
        ("openhands/basic.json", 2, 1, 2, 1),
        ("openhands/basic_interactions.json", 3, 1, 3, 2),
    ] {
        let path = fixture(file);
        for restore in [true, false] {
            let (_d, out, summary) = import("openhands", &path, restore, Some(1.0));
            assert_eq!(summary.requests, n, "{file}");
            let batch = load(&out);
            let s = stats(&batch);
            assert_eq!(s.requests_reconstructed, n, "{file}");
            assert_eq!(s.scored, 1, "{file}");
            assert_eq!(
                (s.candidates, stats(&batch).divergences_in_outputs),
                if restore {
                    (c_restore, 0)
                } else {
                    (c_rerender, div)
                },
                "{file} restore={restore}"
            );
            check_requests(&out, &tok);
        }
    }
    // basic.json: the edit observation answers the str_replace_editor call by its id.
    let path = fixture("openhands/basic.json");
    let (_d, out, _) = import("openhands", &path, true, None);
    let reqs = requests(&out);
    assert_eq!(reqs[0].0["tool_calls"][0]["name"], "str_replace_editor");
    assert_eq!(reqs[0].0["model"], "claude-3-5-sonnet-20241022");
    assert!(
        reqs[1].0["spans"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["source"] == "tool" && s["call_id"] == "toolu_017nBp7UfiGqyrA7j77HgtFP")
    );
}

#[test]
fn vllm_records_are_exact() {
    let path = fixture("vllm/swe-agent-qwen3.jsonl");
    let (_d, out, summary) = import("vllm", &path, true, None);
    assert_eq!((summary.requests, summary.executions), (6, 2));
    let source = lines(&path);
    let reqs = requests(&out);
    let logged: Vec<&Value> = source.iter().filter(|l| l.get("kind").is_none()).collect();
    for ((r, full), line) in reqs.iter().zip(&logged) {
        let prompt: Vec<u32> = line["response"]["prompt_token_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        let choice = &line["response"]["choices"][0];
        assert_eq!(full, &prompt);
        assert_eq!(r["output"], choice["token_ids"]);
        let lp: Vec<f64> = choice["logprobs"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["logprob"].as_f64().unwrap())
            .collect();
        assert_eq!(r["logprobs"], Value::from(lp));
        assert!(r["meta"].get("reconstructed").is_none());
    }
    // swe-1: the rendered messages agree with the prompt everywhere; drift: a server-side
    // system prompt is not in the messages, so only its frame and what follows align.
    let aligned: Vec<u64> = reqs
        .iter()
        .map(|(r, _)| r["meta"]["aligned_prompt_tokens"].as_u64().unwrap())
        .collect();
    let lens: Vec<u64> = reqs.iter().map(|(_, f)| f.len() as u64).collect();
    assert_eq!(&aligned[..5], &lens[..5]);
    assert_eq!((aligned[5], lens[5]), (17, 28));
    let drift = &reqs[5].0["spans"];
    assert_eq!(
        drift,
        &serde_json::json!([
            {"end": 1, "source": "template"},
            {"end": 12, "source": "context"},
            {"end": 14, "source": "template"},
            {"end": 23, "source": "user"},
            {"end": 28, "source": "template"}
        ])
    );
    let batch = load(&out);
    let s = stats(&batch);
    assert_eq!(s.requests_reconstructed, 0);
    // swe-1 has the logged assessment and closure; drift has no closure (open).
    assert_eq!((s.scored, s.excluded), (1, 1));
    // The client re-sent its history without the <think> blocks: every turn a new leaf, as
    // the SWE-agent import without restoration shows.
    assert_eq!(s.candidates, 6);
    assert_eq!(stats(&batch).divergences_in_outputs, 4);
    check_requests(&out, &TokenText::qwen3().unwrap());
}

#[test]
fn vllm_delta_encoding_when_prompts_extend() {
    // A client that sends back the exact generated ids (token-level harness): each prompt is
    // the previous prompt + output + new tokens, written as `extends`.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.jsonl");
    let line = |id: u64, prompt: &[u32], out: &[u32]| {
        serde_json::json!({
            "execution": "e", "agent": "main",
            "request": {"messages": [{"role": "user", "content": "hi"}]},
            "response": {"id": format!("c{id}"), "prompt_token_ids": prompt, "choices": [{
                "token_ids": out,
                "logprobs": {"content": out.iter().map(|_| serde_json::json!({"logprob": -0.5})).collect::<Vec<_>>()},
                "finish_reason": "stop"}]}
        })
        .to_string()
    };
    let text = [
        line(1, &[1, 2, 3], &[4, 5]),
        line(2, &[1, 2, 3, 4, 5, 6], &[7]),
        line(3, &[1, 2, 3, 9], &[8]),
    ]
    .join("\n");
    std::fs::write(&path, text).unwrap();
    let (_d, out, _) = import("vllm", &path, true, None);
    let reqs = requests(&out);
    assert_eq!(reqs[1].0["extends"], "r1");
    assert_eq!(reqs[1].0["input"], serde_json::json!([6]));
    assert!(reqs[2].0.get("extends").is_none());
    assert_eq!(reqs[2].1, [1, 2, 3, 9]);
    load(&out);
}
