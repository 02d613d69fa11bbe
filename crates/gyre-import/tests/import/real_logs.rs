//! The defects real logs showed (issue 9 §2), each pinned on a small excerpt in the shape of the
//! public format (tests/fixtures/import/*/PROVENANCE.md says which are written for these tests).

use crate::common::*;
use gyre_engine::admit::{Class, Settings};
use gyre_engine::score::AdvantageMode;
use gyre_text::TokenText;
use serde_json::Value;

fn warned(summary: &gyre_import::Summary, needle: &str) -> bool {
    summary.warnings.iter().any(|w| w.contains(needle))
}

#[test]
fn openhands_system_action_and_recall_are_the_context() {
    let path = fixture("openhands/system-recall.json");
    let (_d, out, summary) = import("openhands", &path, true, Some(1.0));
    assert_eq!(summary.requests, 4);
    let tok = TokenText::qwen3().unwrap();
    let all = lines(&out);
    let exec = &all[1];
    // The real system prompt, not the stand-in: OpenHands writes it with "source": "agent".
    assert!(exec["meta"].get("system_prompt").is_none(), "{exec}");
    assert_eq!(exec["meta"]["agent_class"], "CodeActAgent");
    assert_eq!(exec["meta"]["tools"], 3);
    let reqs = requests(&out);
    let first = tok.decode(&reqs[0].1);
    assert!(
        first.starts_with("<|im_start|>system\nYou are OpenHands agent"),
        "{first}"
    );
    assert!(!first.contains("[gyre import]"), "{first}");
    // The tool definitions, where the template puts them, labelled `system`.
    assert!(
        first.contains("\"name\": \"str_replace_editor\""),
        "{first}"
    );
    let spans = reqs[0].0["spans"].as_array().unwrap();
    let system_end = spans
        .iter()
        .find(|s| s["source"] == "system")
        .map(|s| s["end"].as_u64().unwrap() as usize)
        .unwrap();
    assert!(tok.decode(&reqs[0].1[..system_end]).contains("</tools>"));
    // The recall observation: the runtime information the model was given.
    assert!(
        first.contains("* http://localhost:51734 (port 51734)"),
        "{first}"
    );
    assert!(
        first.contains("Today's date is 2025-05-14 (UTC)."),
        "{first}"
    );
    // The `run` output as the model saw it, with the shell's suffix.
    let second = tok.decode(&reqs[1].1);
    assert!(
        second.contains("1 failed, 5 passed in 0.03s\n[The command completed with exit code 1.]")
    );
    // finish action: completed; usage (prompt_tokens) checked.
    let closure = all.last().unwrap();
    assert_eq!(closure["status"], "completed");
    assert_eq!(closure["meta"]["finish_action"], true);
    assert_eq!(closure["meta"]["usage_check"]["requests"], 4);
    assert_eq!(closure["meta"]["usage_check"]["short"], 0);
    check_requests(&out, &tok);
}

#[test]
fn openhands_output_jsonl_is_one_execution_per_instance() {
    let path = fixture("openhands/output.jsonl");
    let (_d, out, summary) = import("openhands", &path, true, Some(1.0));
    assert_eq!((summary.executions, summary.requests), (2, 6));
    let all = lines(&out);
    let execs: Vec<&Value> = all.iter().filter(|l| l["kind"] == "execution").collect();
    assert_eq!(execs[0]["execution"], "astropy__astropy-12907");
    assert_eq!(execs[1]["execution"], "django__django-14016");
    assert_eq!(execs[0]["meta"]["max_iterations"], 3);
    assert!(execs[1]["task"].as_str().unwrap().contains("cannot pickle"));
    let closures: Vec<&Value> = all.iter().filter(|l| l["kind"] == "closure").collect();
    // Finished with a patch: completed, the patch is the artifact.
    assert_eq!(closures[0]["status"], "completed");
    assert_eq!(closures[0]["artifact"], "git_patch");
    // Stopped by the iteration limit, no finish action, no patch: not `completed`.
    assert_eq!(closures[1]["status"], "timeout");
    assert_eq!(closures[1]["artifact"], Value::Null);
    assert_eq!(closures[1]["meta"]["finish_action"], false);
    assert!(
        closures[1]["meta"]["error"]
            .as_str()
            .unwrap()
            .contains("maximum iteration")
    );
    let s = stats(&load(&out));
    assert_eq!((s.scored, s.dummy), (1, 1));
    assert!(
        warned(&summary, "--score ignored"),
        "{:?}",
        summary.warnings
    );
}

#[test]
fn openhands_events_folder_and_session_folder() {
    let events = fixture("openhands/sessions/8f3c2b1a9e7d4c5b/events");
    let (_a, by_events, summary) = import("openhands", &events, true, None);
    let (_b, by_session, _) = import("openhands", events.parent().unwrap(), true, None);
    assert_eq!(summary.requests, 2);
    let a = lines(&by_events);
    let b = lines(&by_session);
    assert_eq!(a[1..], b[1..], "the same session either way");
    assert_eq!(a[1]["execution"], "8f3c2b1a9e7d4c5b");
    assert_eq!(a[1]["meta"]["event_files"], 9);
    // The plain-text answer (no tool_call_metadata) is a request; the agent then waits for the
    // user: a normal end.
    let closure = a.last().unwrap();
    assert_eq!(closure["status"], "completed");
    assert_eq!(closure["meta"]["agent_state"], "awaiting_user_input");
    let reqs = requests(&by_events);
    let text = TokenText::qwen3().unwrap().decode(&reqs[0].1);
    assert!(text.contains("Matched by the keyword \"git\""), "{text}");
}

#[test]
fn swe_agent_primary_is_the_main_thread() {
    let path = fixture("swe-agent/primary-0.x.traj");
    let (_d, out, summary) = import("swe-agent", &path, true, Some(1.0));
    assert_eq!(summary.requests, 3);
    let reqs = requests(&out);
    assert!(reqs.iter().all(|(r, _)| r["agent"] == "main"));
    let all = lines(&out);
    // The task is the issue, not the demonstration.
    assert!(
        all[1]["task"]
            .as_str()
            .unwrap()
            .starts_with("We're currently solving")
    );
    let closure = all.last().unwrap();
    assert_eq!(closure["artifact"], "submission");
    assert!((closure["t"].as_f64().unwrap() - 0.48).abs() < 1e-9);
    let batch = load(&out);
    let s = stats(&batch);
    assert_eq!((class(&s, "main"), class(&s, "sub")), (1, 0));
    // `--priority main` trains on it.
    let settings = Settings {
        priority: vec![Class::Main],
        ..Settings::default()
    };
    let results = gyre_engine::process(&batch, &settings, AdvantageMode::DrGrpo);
    let s = gyre_engine::stats::stats(&batch, &results);
    assert!(s.targets > 0, "{s:?}");
}

#[test]
fn a_trajectory_without_times_closes_at_zero_not_minus_zero() {
    let path = fixture("swe-agent/function_calling_simple.traj");
    let (_d, out, _) = import("swe-agent", &path, true, None);
    let text = std::fs::read_to_string(&out).unwrap();
    let closure = text.lines().last().unwrap();
    assert!(closure.contains("\"t\":0.0,"), "{closure}");
    assert!(!text.contains("-0.0"));
}

#[test]
fn claude_code_doubled_line_stop_hook_and_missing_compaction_call() {
    let path = fixture("claude-code/stop-hook-2.1.jsonl");
    let (_d, out, summary) = import("claude-code", &path, true, Some(1.0));
    // Seven API responses, including the one on the line that also holds a summary.
    assert_eq!(summary.requests, 7);
    let reqs = requests(&out);
    assert!(
        reqs.iter()
            .any(|(r, _)| r["meta"]["message_id"] == "msg_01Gm2Ks8Vf4Rt7Hq1Yn5XcWb")
    );
    assert!(
        warned(&summary, "naming a parentUuid that is not in the session"),
        "{:?}",
        summary.warnings
    );
    assert!(
        warned(&summary, "agent-acompact-*.jsonl"),
        "{:?}",
        summary.warnings
    );
    // The response after the Stop hook sees the whole conversation: it continues the previous
    // response instead of starting over after the hook line.
    let (after, input) = reqs
        .iter()
        .find(|(r, _)| r["meta"]["message_id"] == "msg_01Rw6Tz1Pb9Ls3Kx8Md2QfHn")
        .unwrap();
    assert!(after["extends"].is_string(), "{after}");
    let text = TokenText::qwen3().unwrap().decode(input);
    assert!(text.contains("rejects trailing commas in arrays"), "{text}");
    assert!(text.contains("Objects too, please"), "{text}");
    // After the compaction the chain starts from the summary.
    let (post, _) = reqs
        .iter()
        .find(|(r, _)| r["meta"]["message_id"] == "msg_01Kp8Xw4Zr1Nc6Vm3Ht9QsLa")
        .unwrap();
    assert!(post.get("extends").is_none());
    assert!(
        post["spans"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["source"] == "summary")
    );
    check_requests(&out, &TokenText::qwen3().unwrap());
}

#[test]
fn claude_code_lenient_skips_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session.jsonl");
    let mut text = std::fs::read_to_string(fixture("claude-code/stop-hook-2.1.jsonl")).unwrap();
    text.push_str("{\"type\": \"user\", \"uuid\": \n");
    std::fs::write(&session, &text).unwrap();
    let strict = try_import(
        "claude-code",
        std::slice::from_ref(&session),
        &opts(true, None),
    );
    let e = strict.err().unwrap().to_string();
    assert!(e.contains("session.jsonl:22: malformed JSON"), "{e}");
    let lenient = gyre_import::Options {
        lenient: true,
        ..opts(true, None)
    };
    let (_d, out, summary) = try_import("claude-code", &[session], &lenient).unwrap();
    assert_eq!((summary.requests, summary.skipped), (7, 1));
    assert!(warned(&summary, "skipped: "), "{:?}", summary.warnings);
    load(&out);
}

/// A chain that restarts mid-session (lines the log lost): later contexts are far shorter than
/// the log's own `usage`, and the import says so with figures.
#[test]
fn claude_code_usage_check_on_the_real_session() {
    // Unmodified, the reconstruction agrees with usage (beyond the unlogged system prompt).
    let (_d, out, _) = claude_code(&fixture(BIG), true, None);
    let closure = lines(&out).pop().unwrap();
    let check = &closure["meta"]["usage_check"];
    assert_eq!(
        (check["requests"].as_u64(), check["short"].as_u64()),
        (Some(157), Some(0))
    );
    // Cut the chain above a tool result well into the session, before the compaction.
    let dir = tempfile::tempdir().unwrap();
    let session = dir
        .path()
        .join("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl");
    let text = std::fs::read_to_string(fixture(BIG)).unwrap();
    let mut cut = false;
    let lines_out: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            if !cut && i > 400 && v["type"] == "user" {
                v["parentUuid"] = Value::Null;
                cut = true;
            }
            v.to_string()
        })
        .collect();
    assert!(cut);
    std::fs::write(&session, lines_out.join("\n")).unwrap();
    let (_d, out, summary) = claude_code(&session, true, None);
    let w = summary
        .warnings
        .iter()
        .find(|w| w.contains("far less context than the log's usage reports"))
        .unwrap_or_else(|| panic!("{:?}", summary.warnings));
    assert!(w.contains("tokens reconstructed, usage reports"), "{w}");
    let closure = lines(&out).pop().unwrap();
    assert!(closure["meta"]["usage_check"]["short"].as_u64().unwrap() > 10);
}

/// Content blocks gyre does not reconstruct are never dropped silently: on the real
/// `tool_heavy.jsonl` with a `document` block added to a user prompt and a `tool_reference`
/// inside a tool result, the import says how many of each and where the first is; they stand
/// as `[type]` in the context. A `redacted_thinking` block added to a response is hidden
/// thinking: not named as unreconstructed, but that one output is marked not trainable.
#[test]
fn claude_code_content_blocks_it_cannot_reconstruct_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(fixture("claude-code/tool_heavy.jsonl")).unwrap();
    let mut out_lines = Vec::new();
    for (i, line) in src.lines().enumerate() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        match i + 1 {
            28 => v["message"]["content"]
                .as_array_mut()
                .unwrap()
                .push(serde_json::json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"})),
            18 => v["message"]["content"].as_array_mut().unwrap().push(serde_json::json!({
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}
            })),
            32 => {
                let result = &mut v["message"]["content"][0];
                let text = result["content"].clone();
                result["content"] = serde_json::json!([
                    {"type": "text", "text": text.as_str().unwrap_or("")},
                    {"type": "tool_reference", "tool_name": "Grep"}
                ]);
            }
            _ => {}
        }
        out_lines.push(v.to_string());
    }
    let session = dir.path().join("tool_heavy.jsonl");
    std::fs::write(&session, out_lines.join("\n") + "\n").unwrap();
    let (_d, out, summary) = import("claude-code", &session, true, None);
    assert_eq!(summary.requests, 4);
    let warning = summary
        .warnings
        .iter()
        .find(|w| w.starts_with("content blocks not reconstructed"))
        .unwrap_or_else(|| panic!("no warning: {:?}", summary.warnings));
    for part in [
        "1× document (first at tool_heavy.jsonl:18)",
        "1× tool_reference (first at tool_heavy.jsonl:32)",
    ] {
        assert!(warning.contains(part), "{part}: {warning}");
    }
    assert!(!warning.contains("redacted_thinking"), "{warning}");
    let hidden: Vec<_> = requests(&out)
        .into_iter()
        .filter(|(r, _)| r.get("not_trainable").is_some())
        .collect();
    assert_eq!(hidden.len(), 1, "one output had hidden thinking");
    assert!(
        hidden[0].0["not_trainable"]
            .as_str()
            .unwrap()
            .starts_with("hidden thinking"),
        "{}",
        hidden[0].0
    );
    assert_eq!(summary.not_trainable.values().sum::<u64>(), 1);
    let tok = TokenText::qwen3().unwrap();
    let last = tok.decode(&requests(&out).last().unwrap().1);
    assert!(
        last.contains("[document]") && last.contains("[tool_reference]"),
        "{last}"
    );
    check_requests(&out, &tok);
    // The unmodified session has no such warning.
    let (_d, _, plain) = import(
        "claude-code",
        &fixture("claude-code/tool_heavy.jsonl"),
        true,
        None,
    );
    assert!(!warned(&plain, "content blocks"), "{:?}", plain.warnings);
}

/// A SWE-agent 1.x retry run (`RetryAgent`) keeps every attempt under `attempts` and copies the
/// chosen one to the top level. Made from the real demonstration: attempt 0 (the first six
/// messages, stopped by the cost limit) and attempt 1 (the whole history, submitted and
/// chosen). Each attempt is an execution of one group; the top-level copy is not imported
/// twice; `--score` is the chosen submission's. Before, the attempts were ignored.
#[test]
fn swe_agent_retry_run_gives_every_attempt() {
    let src: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("swe-agent/function_calling_simple.traj")).unwrap(),
    )
    .unwrap();
    let history = src["history"].as_array().unwrap();
    let first: Vec<Value> = history[..6].to_vec();
    let attempt0 = serde_json::json!({"history": first, "trajectory": [{"execution_time": 1.5}],
                                      "info": {"exit_status": "exit_cost"}});
    let attempt1 = serde_json::json!({"history": history, "trajectory": [{"execution_time": 2.0}],
                                      "info": {"exit_status": "submitted", "submission": "diff"}});
    let mut top = attempt1.clone();
    top["info"]["best_attempt_idx"] = serde_json::json!(1);
    top["attempts"] = serde_json::json!([attempt0, attempt1]);
    let dir = tempfile::tempdir().unwrap();
    let traj = dir.path().join("retry.traj");
    std::fs::write(&traj, serde_json::to_string_pretty(&top).unwrap()).unwrap();
    let (_d, out, summary) = import("swe-agent", &traj, true, Some(1.0));
    assert_eq!((summary.executions, summary.requests), (2, 2 + 5));
    let all = lines(&out);
    let execs: Vec<&Value> = all.iter().filter(|l| l["kind"] == "execution").collect();
    assert_eq!(execs[0]["execution"], "retry/attempt-0");
    assert_eq!(execs[1]["execution"], "retry/attempt-1");
    assert!(execs.iter().all(|e| e["group"] == "retry"));
    assert_eq!(execs[1]["meta"]["chosen"], true);
    let assessed: Vec<&Value> = all.iter().filter(|l| l["kind"] == "assessment").collect();
    assert_eq!(assessed.len(), 1);
    assert_eq!(assessed[0]["execution"], "retry/attempt-1");
    let closures: Vec<&Value> = all.iter().filter(|l| l["kind"] == "closure").collect();
    assert_eq!(closures[0]["status"], "timeout");
    assert_eq!(closures[1]["status"], "completed");
    check_requests(&out, &TokenText::qwen3().unwrap());

    // Saved mid-run (no top-level copy, no choice yet): every attempt, and --score is refused
    // with a warning rather than given to one of them.
    let partial = dir.path().join("partial.traj");
    let attempts = top["attempts"].clone();
    std::fs::write(
        &partial,
        serde_json::json!({"attempts": attempts}).to_string(),
    )
    .unwrap();
    let (_d, out, summary) = import("swe-agent", &partial, true, Some(1.0));
    assert_eq!(summary.executions, 2);
    assert!(
        warned(&summary, "names no chosen attempt"),
        "{:?}",
        summary.warnings
    );
    assert!(!lines(&out).iter().any(|l| l["kind"] == "assessment"));

    // An error inside an attempt names the attempt's line and the exact field.
    let mut bad = top.clone();
    bad["attempts"][0]["history"][2]["role"] = serde_json::json!(7);
    let broken = dir.path().join("broken.traj");
    std::fs::write(&broken, serde_json::to_string_pretty(&bad).unwrap()).unwrap();
    let err = try_import("swe-agent", &[broken], &opts(true, None)).unwrap_err();
    assert!(
        err.to_string().contains("(attempts[0].history[2].role)"),
        "{err}"
    );
}

/// A reconstruction far longer than what the log's `usage` says the model was sent (a harness
/// that condensed its history without logging the view it sent) is named, as a short one is.
/// Made from the real `basic.json`: the edit's observation grown to ~30k tokens while the next
/// response's `usage.prompt_tokens` stays what OpenHands logged (4646).
#[test]
fn a_context_far_longer_than_usage_is_named() {
    let mut events: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(fixture("openhands/basic.json")).unwrap())
            .unwrap();
    let grown: String = (0..6000)
        .map(|i| format!("+    cell_{i} = grid[{i}]\n"))
        .collect();
    let obs = events
        .iter_mut()
        .find(|e| e["observation"] == "edit")
        .unwrap();
    obs["content"] = Value::String(grown);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("condensed.json");
    std::fs::write(&path, serde_json::to_string(&events).unwrap()).unwrap();
    let (_d, out, summary) = import("openhands", &path, true, None);
    let warning = summary
        .warnings
        .iter()
        .find(|w| w.contains("far more context than the log's usage reports"))
        .unwrap_or_else(|| panic!("no warning: {:?}", summary.warnings));
    assert!(
        warning.starts_with("condensed: 1 of 2 requests"),
        "{warning}"
    );
    assert!(
        warning.contains("r2 has") && warning.contains("usage reports 4646"),
        "{warning}"
    );
    let closure = lines(&out).pop().unwrap();
    assert_eq!(closure["meta"]["usage_check"]["long"], 1);
    // The real stream is within tolerance.
    let (_d, out, summary) = import("openhands", &fixture("openhands/basic.json"), true, None);
    assert!(
        !warned(&summary, "far more context"),
        "{:?}",
        summary.warnings
    );
    assert_eq!(lines(&out).pop().unwrap()["meta"]["usage_check"]["long"], 0);
}

/// A session copied without its `subagents/` folder: Claude Code 2.1 left part of the
/// sub-agent's messages in `agent_progress` lines; the warning counts them and says they are
/// not imported (the copy leaves the streamed parts and the final answer out).
#[test]
fn claude_code_sub_agent_copied_in_progress_lines_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir
        .path()
        .join("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl");
    std::fs::copy(fixture(BIG), &session).unwrap();
    let (_d, _out, summary) = claude_code(&session, true, None);
    let w = summary
        .warnings
        .iter()
        .find(|w| w.contains("ran sub-agent a7be2f0, whose log is not beside the session"))
        .unwrap_or_else(|| panic!("{:?}", summary.warnings));
    assert!(
        w.contains("the session's 39 agent_progress lines copy part of it and are not imported"),
        "{w}"
    );
    // With the sub-agent's log beside it, nothing to say.
    let (_d, _out, full) = claude_code(&fixture(BIG), true, None);
    assert!(!warned(&full, "agent_progress"), "{:?}", full.warnings);
}
