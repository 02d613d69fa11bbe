//! `gyre import claude-code` on real sessions (tests/fixtures/import/claude-code, MIT).

use std::collections::BTreeSet;
use std::io::Read;

use crate::common::*;
use gyre_text::TokenText;
use serde_json::Value;

/// Distinct `message.id`s of the assistant lines of a file (one API response each).
fn responses_in(path: &str) -> usize {
    let text = std::fs::read_to_string(fixture(path)).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "assistant")
        .map(|v| v["message"]["id"].as_str().unwrap().to_owned())
        .collect::<BTreeSet<_>>()
        .len()
}

#[test]
fn big_session_with_restoration() {
    let (_dir, out, summary) = claude_code(&fixture(BIG), true, Some(1.0));
    // One request per API response: main thread, the Explore sub-agent, the compaction call.
    let main = responses_in(BIG);
    let sub = responses_in(
        "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-a7be2f0.jsonl",
    );
    let compact = responses_in(
        "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-acompact-f46190.jsonl",
    );
    assert_eq!((main, sub, compact), (143, 13, 1));
    assert_eq!(summary.requests, 157);

    let batch = load(&out);
    let s = stats(&batch);
    assert_eq!(s.requests, 157);
    assert_eq!(s.requests_reconstructed, 157);
    assert_eq!(
        (
            class(&s, "main"),
            class(&s, "main-summary"),
            class(&s, "sub"),
            class(&s, "sub-summary")
        ),
        (1, 1, 1, 0)
    );
    // Restoration: every later context continues through the recorded outputs.
    assert_eq!(s.divergences_in_outputs, 0);
    assert_eq!(s.raw_tokens, 9_126_432);
    assert_eq!(s.tree_tokens, 202_574);
    assert_eq!(s.policy_tokens, 49_686);
    assert_eq!(s.scored, 1);
    assert_eq!(s.targets, 49_686);

    // Records: header and requests marked reconstructed, no log-probs; closure last.
    let all = lines(&out);
    assert_eq!(all[0]["kind"], "header");
    assert_eq!(all[0]["meta"]["reconstructed"], true);
    assert_eq!(all[0]["tokenizer"], "qwen3");
    let last = all.last().unwrap();
    assert_eq!(last["kind"], "closure");
    assert_eq!(
        (&last["artifact"], &last["version"]),
        (&Value::from("session"), &Value::from(1))
    );
    assert!(
        all.iter()
            .any(|l| l["kind"] == "assessment" && l["score"] == 1.0)
    );
    let reqs = requests(&out);
    assert!(
        reqs.iter()
            .all(|(r, _)| r["meta"]["reconstructed"] == true && r.get("logprobs").is_none())
    );

    // The compaction call: agent main, purpose summary, its context continues the main chain.
    let summaries: Vec<_> = reqs
        .iter()
        .filter(|(r, _)| r["purpose"] == "summary")
        .collect();
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0].0["agent"], "main");
    assert!(summaries[0].0["extends"].is_string());
    // After the boundary the chain starts again from the summary message.
    let tok = TokenText::qwen3().unwrap();
    let after = reqs
        .iter()
        .find(|(r, _)| {
            r["meta"]["source_line"] == format!("{}:719", BIG.rsplit('/').next().unwrap())
        })
        .expect("first request after compaction");
    assert!(after.0.get("extends").is_none());
    assert!(
        after.0["spans"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["source"] == "summary")
    );
    assert!(
        tok.decode(&after.1)
            .contains("This session is being continued")
    );
    // The sub-agent: its own agent id and the Task call's subagent_type.
    let subs: Vec<_> = reqs
        .iter()
        .filter(|(r, _)| r["agent"] == "sub-a7be2f0")
        .collect();
    assert_eq!(subs.len(), 13);
    assert!(
        subs.iter()
            .all(|(r, _)| r["meta"]["subagent_type"] == "Explore"
                && r["meta"]["task_call_id"] == "toolu_017SvvKc8KLbhGMG3tXkf21Z")
    );
    // Its result is a tool span of the main thread carrying the Task call's id.
    assert!(reqs.iter().any(|(r, _)| {
        r["agent"] == "main"
            && r["spans"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["source"] == "tool" && s["call_id"] == "toolu_017SvvKc8KLbhGMG3tXkf21Z")
    }));
    // A later context holds the earlier response's recorded output tokens verbatim.
    let (r1, i1) = &reqs[0];
    let (r2, i2) = &reqs[1];
    assert_eq!(r2["extends"], "r1");
    let o1: Vec<u32> = r1["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(&i2[..i1.len()], &i1[..]);
    assert_eq!(&i2[i1.len()..i1.len() + o1.len()], &o1[..]);
    // The stand-in system segment says the real system prompt is not in the log.
    assert!(tok.decode(i1).contains("are not in the session log"));
    check_requests(&out, &tok);
}

#[test]
fn big_session_without_restoration() {
    let (_dir, out, summary) = claude_code(&fixture(BIG), false, Some(1.0));
    assert_eq!(summary.requests, 157);
    let batch = load(&out);
    let s = stats(&batch);
    assert_eq!(s.requests, 157);
    // Re-rendered history drops the <think> blocks (empty ones too) of earlier turns: every
    // later context leaves the recorded output at its first token, so nearly every output
    // becomes a leaf of its own.
    assert_eq!(
        (
            class(&s, "main"),
            class(&s, "main-summary"),
            class(&s, "sub"),
            class(&s, "sub-summary")
        ),
        (124, 1, 13, 0)
    );
    assert_eq!(s.divergences_in_outputs, 135);
    assert_eq!(s.raw_tokens, 9_100_546);
    assert_eq!(s.tree_tokens, 407_817);
    check_requests(&out, &TokenText::qwen3().unwrap());
}

#[test]
fn smaller_sessions() {
    let tok = TokenText::qwen3().unwrap();
    // (file, requests, candidates restored, candidates re-rendered, start divergences re-rendered)
    for (file, n, c_restore, c_rerender, div) in [
        ("claude-code/short.jsonl", 1, 1, 1, 0),
        ("claude-code/subagent.jsonl", 12, 1, 8, 7),
        ("claude-code/tool_heavy.jsonl", 4, 1, 3, 2),
    ] {
        assert_eq!(responses_in(file), n as usize, "{file}");
        let (_d, out, summary) = claude_code(&fixture(file), true, None);
        assert_eq!(summary.requests, n, "{file}");
        let batch = load(&out);
        let s = stats(&batch);
        assert_eq!(s.candidates, c_restore, "{file}");
        assert_eq!(s.divergences_in_outputs, 0, "{file}");
        // No --score: docs/format.md §4 excludes the execution for lack of a reward.
        assert_eq!(s.excluded, 1, "{file}");
        check_requests(&out, &tok);
        let (_d, out, _) = claude_code(&fixture(file), false, None);
        let batch = load(&out);
        let s = stats(&batch);
        assert_eq!(s.candidates, c_rerender, "{file}");
        assert_eq!(stats(&batch).divergences_in_outputs, div, "{file}");
    }
    // subagent.jsonl delegates to a sub-agent whose log is not there: a warning, not an error.
    let (_d, _out, summary) = claude_code(&fixture("claude-code/subagent.jsonl"), true, None);
    assert!(
        summary.warnings.iter().any(|w| w.contains("afb92ff")),
        "{:?}",
        summary.warnings
    );
}

/// The older layout keeps sub-agent (and compaction) lines inline with `isSidechain: true`;
/// importing it must give the same records as the `subagents/` layout.
#[test]
fn inline_sidechain_layout_matches_subagents_dir() {
    let dir = tempfile::tempdir().unwrap();
    let inline = dir.path().join("session.jsonl");
    let mut text = std::fs::read_to_string(fixture(BIG)).unwrap();
    for sub in ["agent-a7be2f0.jsonl", "agent-acompact-f46190.jsonl"] {
        let part = std::fs::read_to_string(fixture(&format!(
            "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/{sub}"
        )))
        .unwrap();
        for l in part.lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["isSidechain"], true);
            text.push_str(l);
            text.push('\n');
        }
    }
    std::fs::write(&inline, text).unwrap();
    let (_a, out_inline, _) = claude_code(&inline, true, Some(1.0));
    let (_b, out_dir, _) = claude_code(&fixture(BIG), true, Some(1.0));
    let strip = |p: &std::path::Path| -> Vec<Value> {
        requests(p)
            .into_iter()
            .map(|(mut r, full)| {
                r["meta"].as_object_mut().unwrap().remove("source_line");
                r["input"] = Value::from(full);
                r.as_object_mut().unwrap().remove("extends");
                r
            })
            .collect()
    };
    assert_eq!(strip(&out_inline), strip(&out_dir));
    // Without agentId fields, the chain root names the sub-agent and the Task prompt links it.
    let stripped = dir.path().join("noid.jsonl");
    let text = std::fs::read_to_string(&inline).unwrap();
    let mut out = String::new();
    for l in text.lines() {
        let mut v: Value = serde_json::from_str(l).unwrap();
        if v["isSidechain"] == true && v["agentId"] == "a7be2f0" {
            v.as_object_mut().unwrap().remove("agentId");
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    std::fs::write(&stripped, out).unwrap();
    let (_c, out_noid, _) = claude_code(&stripped, true, Some(1.0));
    let reqs = requests(&out_noid);
    let subs: Vec<_> = reqs
        .iter()
        .filter(|(r, _)| r["agent"].as_str().unwrap().starts_with("sub-"))
        .collect();
    assert_eq!(subs.len(), 13);
    assert!(
        subs.iter()
            .all(|(r, _)| r["meta"]["subagent_type"] == "Explore")
    );
    let s = stats(&load(&out_noid));
    assert_eq!(
        (
            class(&s, "main"),
            class(&s, "main-summary"),
            class(&s, "sub")
        ),
        (1, 1, 1)
    );
}

/// The bundled demo is a fresh import of the big session (regenerate it as crates/gyre-engine/src/demo.rs
/// says when the importer changes).
#[test]
fn bundled_demo_is_current() {
    let (_d, out, _) = claude_code(&fixture(BIG), true, Some(1.0));
    let mut demo = String::new();
    zstd::stream::read::Decoder::new(gyre_engine::demo::CLAUDE_CODE_RECORDING)
        .unwrap()
        .read_to_string(&mut demo)
        .unwrap();
    let fresh = std::fs::read_to_string(&out).unwrap();
    // Lines after the header (which names the input paths) must be identical.
    let body = |t: &str| t.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
    let (demo, fresh) = (body(&demo), body(&fresh));
    // Name the first line and byte that differ: the lines are long.
    if let Some(i) = (0..demo.len().max(fresh.len())).find(|&i| demo.get(i) != fresh.get(i)) {
        let (a, b) = (
            demo.get(i).map_or("", String::as_str),
            fresh.get(i).map_or("", String::as_str),
        );
        let at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        let near = |t: &str| {
            t.get(at.saturating_sub(80)..(at + 80).min(t.len()))
                .unwrap_or(t)
                .to_owned()
        };
        panic!(
            "assets/demo/claude-code.jsonl.zst is stale: line {} differs at byte {at}:\n bundled: …{}…\n fresh:   …{}…",
            i + 2,
            near(a),
            near(b)
        );
    }
    let batch = gyre_engine::load::load_bytes(
        gyre_engine::demo::CLAUDE_CODE_NAME,
        gyre_engine::demo::CLAUDE_CODE_RECORDING,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(stats(&batch).requests, 157);
}

#[test]
fn encoder_matches_the_tokenizer() {
    let tok = TokenText::qwen3().unwrap();
    let enc = gyre_text::CachedEncoder::new(tok.clone()).unwrap();
    let text = std::fs::read_to_string(fixture("claude-code/tool_heavy.jsonl")).unwrap();
    let text = format!("<|im_start|>user\n{text}<|im_end|>\n<think>\nx</think>\u{e9}\u{301}");
    assert_eq!(enc.encode(&text).unwrap(), tok.encode(&text).unwrap());
    let (ids, starts) = enc.encode_with_starts(&text).unwrap();
    assert_eq!(ids.len(), starts.len());
    assert!(starts.windows(2).all(|w| w[0] <= w[1]));
}

/// A sub-agent that compacts its own context: the compaction call belongs to that sub-agent
/// (class `sub-summary`), found through the chain it continues.
#[test]
fn subagent_compaction_is_sub_summary() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20");
    let dst = dir.path().join("8463c716-a2ea-4c14-9efa-87158ebd9f20");
    std::fs::create_dir_all(dst.join("subagents")).unwrap();
    std::fs::copy(
        fixture(BIG),
        dir.path()
            .join("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"),
    )
    .unwrap();
    for f in ["agent-a7be2f0.jsonl", "agent-acompact-f46190.jsonl"] {
        std::fs::copy(src.join("subagents").join(f), dst.join("subagents").join(f)).unwrap();
    }
    let sub = std::fs::read_to_string(src.join("subagents/agent-a7be2f0.jsonl")).unwrap();
    let last: Value = serde_json::from_str(sub.lines().last().unwrap()).unwrap();
    let base = |ty: &str, uuid: &str, parent: &str, ts: &str| {
        serde_json::json!({"type": ty, "uuid": uuid, "parentUuid": parent, "isSidechain": true,
            "agentId": "acompact-sub1", "sessionId": "8463c716-a2ea-4c14-9efa-87158ebd9f20",
            "timestamp": ts})
    };
    let mut prompt = base(
        "user",
        "c-1",
        last["uuid"].as_str().unwrap(),
        "2026-02-11T23:59:00.000Z",
    );
    prompt["message"] =
        serde_json::json!({"role": "user", "content": "Summarise the conversation."});
    let mut answer = base("assistant", "c-2", "c-1", "2026-02-11T23:59:30.000Z");
    answer["message"] = serde_json::json!({"id": "msg_sub_compact", "model": "claude-haiku-4-5",
        "role": "assistant", "content": [{"type": "text", "text": "Summary: tmux is handled."}]});
    std::fs::write(
        dst.join("subagents/agent-acompact-sub1.jsonl"),
        format!("{prompt}\n{answer}\n"),
    )
    .unwrap();
    let (_d, out, summary) = claude_code(
        &dir.path()
            .join("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"),
        true,
        Some(1.0),
    );
    assert_eq!(summary.requests, 158);
    let reqs = requests(&out);
    let (r, _) = reqs
        .iter()
        .find(|(r, _)| r["meta"]["message_id"] == "msg_sub_compact")
        .unwrap();
    assert_eq!(
        (&r["agent"], &r["purpose"]),
        (&Value::from("sub-a7be2f0"), &Value::from("summary"))
    );
    let s = stats(&load(&out));
    assert_eq!(
        (
            class(&s, "main"),
            class(&s, "main-summary"),
            class(&s, "sub"),
            class(&s, "sub-summary")
        ),
        (1, 1, 0, 1)
    );
}
