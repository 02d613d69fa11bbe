//! `gyre record` end to end: the real `openai` and `anthropic` Python clients drive the proxy
//! binary in front of a deterministic stand-in for vLLM (or SGLang); the recording is read back
//! with the engine and the CLI.
#![cfg(feature = "record")]

use std::path::Path;

use crate::proxy::standin::{Options, StandIn};
use crate::proxy::{Proxy, clients, gyre};
use gyre_engine::execution::Execution;
use gyre_engine::load::{Batch, LoadOptions, load};
use gyre_engine::record::{Purpose, Source};
use serde_json::Value;

pub(crate) fn read(path: &Path) -> Batch {
    load(&[path.to_path_buf()], &LoadOptions::default(), &|_, _| {}).unwrap()
}

pub(crate) fn exec<'a>(batch: &'a Batch, id: &str) -> &'a Execution {
    batch
        .executions
        .iter()
        .find(|e| e.id == id)
        .unwrap_or_else(|| panic!("no execution {id}"))
}

/// Full input and output of request `q`.
pub(crate) fn io(e: &Execution, q: usize) -> (Vec<u32>, Vec<u32>) {
    let mut path = e.path_tokens(q as u32);
    let output = path.split_off(e.requests[q].input_len as usize);
    (path, output)
}

pub(crate) fn meta<'a>(e: &'a Execution, q: usize, key: &str) -> Option<&'a Value> {
    e.requests[q].meta.as_ref()?.get(key)
}

pub(crate) fn stats(path: &Path) -> Value {
    let (code, out, err) = gyre(&["stats", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

pub(crate) fn validate(path: &Path) {
    let (code, out, err) = gyre(&["validate", path.to_str().unwrap()]);
    assert_eq!(code, 0, "gyre validate: {out}{err}");
}

/// Every recorded request, in file order, has the input the upstream received for it (the
/// answered prompts, in order) and one log-prob per output token.
pub(crate) fn assert_inputs_are_what_the_upstream_received(batch: &Batch, standin: &StandIn) {
    let mut recorded: Vec<(u64, Vec<u32>)> = Vec::new();
    for e in &batch.executions {
        for (q, r) in e.requests.iter().enumerate() {
            let (input, output) = io(e, q);
            let lps = r.logprobs.as_ref().expect("log-probs recorded");
            assert_eq!(lps.len(), output.len());
            recorded.push((r.at.line, input));
        }
    }
    recorded.sort_by_key(|(line, _)| *line);
    let received: Vec<Vec<u32>> = standin
        .received()
        .into_iter()
        .filter(|r| r.ok)
        .map(|r| r.prompt)
        .collect();
    assert_eq!(recorded.len(), received.len());
    for (i, ((_, rec), got)) in recorded.iter().zip(&received).enumerate() {
        assert!(
            rec == got,
            "request {i}: recorded input differs from the prompt sent"
        );
    }
}

/// What must be equal between two recordings of the same conversation.
pub(crate) fn shape(e: &Execution) -> Vec<Value> {
    (0..e.requests.len())
        .map(|q| {
            let r = &e.requests[q];
            let (input, output) = io(e, q);
            let spans: Vec<Value> = r
                .spans
                .iter()
                .map(|s| serde_json::json!([s.end, s.source.name(), s.call_id.is_some()]))
                .collect();
            let calls: Vec<Value> = r
                .tool_calls
                .iter()
                .map(|c| serde_json::json!([c.name, c.start, c.end]))
                .collect();
            let lp = r.logprobs.as_ref().unwrap();
            let lps: Vec<f64> = (0..output.len()).map(|j| lp.get(j)).collect();
            serde_json::json!({
                "input": input, "output": output, "logprobs": lps, "spans": spans,
                "calls": calls, "extends": r.extends, "agent": r.agent, "finish": r.finish,
                "restored": meta(e, q, "restored_turns"),
            })
        })
        .collect()
}

#[test]
fn openai_and_anthropic_loops_are_recorded_exactly_streaming_or_not() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "loops", &[]);
    let batch = read(&out);
    assert_inputs_are_what_the_upstream_received(&batch, &standin);

    let reference = exec(&batch, "oa-plain");
    assert_eq!(
        reference.requests.len(),
        4,
        "three tool rounds and an answer"
    );
    for q in 1..4 {
        // Each call continues the previous one exactly: delta form, every earlier turn restored
        // although the harness re-serialised the calls compactly and dropped the thinking.
        assert_eq!(reference.requests[q].extends, Some(q as u32 - 1));
        assert_eq!(meta(reference, q, "restored_turns"), Some(&Value::from(q)));
        assert_eq!(meta(reference, q, "rerendered_turns"), None);
        // Tool results name the calls the previous output made.
        let called: Vec<&str> = reference.requests[q - 1]
            .tool_calls
            .iter()
            .map(|c| &*c.id)
            .collect();
        let answered: Vec<&str> = reference.requests[q]
            .spans
            .iter()
            .filter(|s| s.source == Source::Tool)
            .filter_map(|s| s.call_id.as_deref())
            .collect();
        assert_eq!(called, answered);
    }
    for other in ["oa-stream", "an-plain", "an-stream"] {
        assert_eq!(
            shape(reference),
            shape(exec(&batch, other)),
            "{other} differs from oa-plain"
        );
    }
    let s = stats(&out);
    assert_eq!(s["divergences_in_outputs"], 0);
    assert_eq!(s["requests"], 16);
    for e in &batch.executions {
        // An execution starts when its first request arrives, not after it.
        let start = e.info.as_ref().expect("an execution line").t;
        assert!(
            e.requests.iter().all(|r| r.t.unwrap() >= start),
            "{} starts after its first request",
            e.id
        );
    }

    proxy.clients("close", &["oa-plain", "oa-stream", "an-plain", "an-stream"]);
    proxy.stop();
    validate(&out);
    let admitted = dir.path().join("admitted.jsonl");
    let (code, _, err) = gyre(&[
        "admit",
        out.to_str().unwrap(),
        "--out",
        admitted.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Value> = std::fs::read_to_string(&admitted)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        rows.len(),
        4,
        "one trajectory per execution: the last call's path"
    );
    let outputs: usize = (0..4).map(|q| io(reference, q).1.len()).sum();
    for row in &rows {
        assert_eq!(row["reward"], 1.0);
        let mask: Vec<u64> = serde_json::from_value(row["loss_mask"].clone()).unwrap();
        assert_eq!(mask.iter().sum::<u64>() as usize, outputs);
        let lps = row["logprobs"]
            .as_array()
            .expect("recorded log-probs exported");
        assert!(
            lps.iter()
                .zip(&mask)
                .all(|(lp, m)| (*m == 1) == (lp.as_f64().unwrap() < 0.0))
        );
    }
}

#[test]
fn bad_upstream_answers_are_api_errors_and_nothing_is_recorded() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &["--timeout", "1"]);
    clients(&proxy.url, "errors", &[]);
    proxy.stop();
    validate(&out);
    let batch = read(&out);
    let ids: Vec<&str> = batch.executions.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["good"], "only the good call is recorded");
    assert_eq!(batch.executions[0].requests.len(), 1);
    assert!(standin.received().iter().filter(|r| !r.ok).count() >= 15);
    assert_inputs_are_what_the_upstream_received(&batch, &standin);
}

#[test]
fn a_restarted_proxy_appends_and_keeps_restoring() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let state = dir.path().join("conversation.json");
    let state = state.to_str().unwrap();
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "resume-a", &[state]);
    proxy.stop();
    validate(&out);
    assert_eq!(exec(&read(&out), "resume").requests.len(), 2);

    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "resume-b", &[state]);
    proxy.stop();
    validate(&out);
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.matches(r#""kind":"header""#).count(), 1);
    let batch = read(&out);
    let e = exec(&batch, "resume");
    assert_eq!(e.requests.len(), 4);
    let ids: Vec<&str> = e.requests.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["r1", "r2", "r3", "r4"]);
    // The first call after the restart continues the second exactly.
    assert_eq!(e.requests[2].extends, Some(1));
    assert_eq!(meta(e, 2, "restored_turns"), Some(&Value::from(2)));
    assert_eq!(stats(&out)["divergences_in_outputs"], 0);
    assert_inputs_are_what_the_upstream_received(&batch, &standin);
}

#[test]
fn sub_agents_and_compaction_are_found_without_headers() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "claude-code-like", &[]);
    proxy.stop();
    validate(&out);
    let batch = read(&out);
    assert_eq!(
        batch.executions.len(),
        1,
        "one execution per conversation root"
    );
    let e = &batch.executions[0];
    let who: Vec<(&str, Purpose)> = e
        .requests
        .iter()
        .map(|r| (r.agent.as_str(), r.purpose))
        .collect();
    use Purpose::{Summary, Task};
    assert_eq!(
        who,
        [
            ("main", Task),
            ("sub-1", Task),
            ("sub-1", Task),
            ("main", Task),
            ("main", Summary),
            ("main", Task),
            ("main", Task),
        ]
    );
    let task_call = &*e.requests[0].tool_calls[0].id;
    assert_eq!(
        meta(e, 1, "delegated_by").and_then(Value::as_str),
        Some(task_call)
    );
    assert!(
        e.requests[5]
            .spans
            .iter()
            .any(|s| s.source == Source::Summary),
        "the summary put back is labelled summary"
    );
    assert_eq!(stats(&out)["divergences_in_outputs"], 0);
    assert_inputs_are_what_the_upstream_received(&batch, &standin);
}

#[test]
fn an_edited_tool_call_is_rerendered_and_shows_as_a_divergence() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "edited", &[]);
    proxy.stop();
    let batch = read(&out);
    let e = exec(&batch, "edited");
    assert_eq!(meta(e, 1, "edited_turns"), Some(&serde_json::json!([1])));
    assert_eq!(meta(e, 1, "restored_turns"), Some(&Value::from(0)));
    assert_eq!(stats(&out)["divergences_in_outputs"], 1);
    assert_inputs_are_what_the_upstream_received(&batch, &standin);
}

#[test]
fn an_sglang_upstream_gives_the_same_records() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let (vllm, sglang) = (
        dir.path().join("vllm.jsonl"),
        dir.path().join("sglang.jsonl"),
    );
    let proxy = Proxy::start(&standin.url(), &vllm, &[]);
    clients(&proxy.url, "loops", &[]);
    proxy.stop();
    let proxy = Proxy::start(&standin.url(), &sglang, &["--upstream-api", "sglang"]);
    clients(&proxy.url, "loops", &[]);
    proxy.stop();
    validate(&sglang);
    let (a, b) = (read(&vllm), read(&sglang));
    for id in ["oa-plain", "oa-stream", "an-plain", "an-stream"] {
        assert_eq!(shape(exec(&a, id)), shape(exec(&b, id)), "{id}");
    }
}

#[test]
fn claude_code_billing_header_json_user_id_and_a_screenshot_keep_one_growing_context() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "claude-code-today", &[]);
    proxy.stop();
    validate(&out);
    let batch = read(&out);
    // The session_id of the JSON user_id names the execution.
    let e = exec(&batch, "cc-today");
    assert_eq!(e.requests.len(), 2);
    // Not said by the operator: recorded as unknown.
    assert_eq!(meta(e, 0, "logprobs_mode"), Some(&Value::from("unknown")));
    // The per-request billing hash is dropped, so the second call continues the first.
    assert_eq!(e.requests[1].extends, Some(0));
    for q in 0..2 {
        assert_eq!(
            meta(e, q, "dropped_system_blocks"),
            Some(&serde_json::json!(["x-anthropic-billing-header"]))
        );
    }
    assert_eq!(
        meta(e, 1, "placeholders"),
        Some(
            &serde_json::json!([{"at": "messages[2].content[0].content[1]",
            "type": "image", "media_type": "image/png"}])
        )
    );
    assert_inputs_are_what_the_upstream_received(&batch, &standin);
}

#[test]
fn an_assistant_prefill_is_continued_and_the_client_gets_the_continuation() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "prefill", &[]);
    proxy.stop();
    validate(&out);
    let batch = read(&out);
    let tok = gyre_text::TokenText::qwen3().unwrap();
    let title = exec(&batch, "title");
    // Streamed and not, then a text-block prefill; the one with trailing whitespace is refused.
    assert_eq!(title.requests.len(), 3);
    for q in 0..2 {
        let (input, output) = io(title, q);
        let input = tok.decode(&input);
        // The prompt ends inside the assistant turn, with the prefill: no end-of-turn token
        // after it and no second generation prompt.
        assert!(
            input.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n{"),
            "{input:?}"
        );
        assert_eq!(input.matches("<|im_start|>assistant").count(), 1);
        // The recorded output is the continuation sampled, not the prefill again.
        assert_eq!(tok.decode(&output), "\"title\": \"Shell steps\"}<|im_end|>");
        assert_eq!(meta(title, q, "prefill"), Some(&Value::from(true)));
    }
    // The prefill is input the harness wrote in the assistant's turn (an assistant span of the
    // input, so never a target).
    let last = title.requests[0].spans.last().unwrap();
    assert_eq!(
        (last.end, last.source),
        (title.requests[0].input_len, Source::Assistant)
    );
    assert!(tok.decode(&io(title, 2).0).ends_with("</think>\n\nWell"));
    let chat = exec(&batch, "title-chat");
    assert!(tok.decode(&io(chat, 0).0).ends_with("</think>\n\n{"));
    assert_eq!(meta(chat, 0, "prefill"), Some(&Value::from(true)));
    assert_inputs_are_what_the_upstream_received(&batch, &standin);
}

#[test]
fn max_tokens_fit_the_context_and_the_sampling_sent_is_recorded() {
    let standin = StandIn::start_with(Options {
        max_model_len: 2048,
        ..Options::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(
        &standin.url(),
        &out,
        &["--upstream-logprobs-mode", "processed-logprobs"],
    );
    clients(&proxy.url, "context", &[]);
    proxy.stop();
    validate(&out);
    let batch = read(&out);
    for id in ["ctx-claude", "ctx-none"] {
        let e = exec(&batch, id);
        let r = &e.requests[0];
        let sent = meta(e, 0, "sampling").expect("meta.sampling");
        // All the room the context leaves, not 32000 (refused) nor vLLM's default 16 (cut).
        assert_eq!(
            sent["max_tokens"].as_u64(),
            Some(2048 - u64::from(r.input_len)),
            "{id}"
        );
        assert_eq!(meta(e, 0, "server"), Some(&Value::from("vllm")));
        assert_eq!(
            meta(e, 0, "logprobs_mode"),
            Some(&Value::from("processed_logprobs"))
        );
        assert_eq!(r.finish.as_deref(), Some("tool_calls"));
    }
    assert_eq!(
        meta(exec(&batch, "ctx-none"), 0, "sampling").unwrap()["temperature"],
        1.0
    );
    assert!(batch.executions.iter().all(|e| e.id != "ctx-long"));
}

#[test]
fn the_model_name_is_asked_again_after_a_failure_and_several_models_need_model() {
    let standin = StandIn::start_with(Options {
        models_fail_first: 1,
        ..Options::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    // The first call finds the upstream still loading (502); the next ones work.
    clients(&proxy.url, "expect-upstream-error", &["asked again"]);
    clients(&proxy.url, "loops", &[]);
    proxy.stop();
    assert_eq!(read(&out).executions.len(), 4);

    let lora = StandIn::start_with(Options {
        models: vec!["base".into(), "adapter-7".into()],
        ..Options::default()
    });
    let out = dir.path().join("lora.jsonl");
    let proxy = Proxy::start(&lora.url(), &out, &[]);
    clients(&proxy.url, "expect-upstream-error", &["--model"]);
    proxy.stop();
    let out = dir.path().join("adapter.jsonl");
    let proxy = Proxy::start(&lora.url(), &out, &["--model", "adapter-7"]);
    clients(&proxy.url, "loops", &[]);
    proxy.stop();
    let batch = read(&out);
    assert!(
        batch
            .executions
            .iter()
            .flat_map(|e| &e.requests)
            .all(|r| r.model.as_deref() == Some("adapter-7"))
    );
}

#[test]
fn min_p_and_the_penalties_are_sent_upstream_and_recorded() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "sampling", &[]);
    proxy.stop();
    validate(&out);
    let batch = read(&out);
    let recorded = meta(exec(&batch, "samp-chat"), 0, "sampling").expect("meta.sampling");
    let sent = &standin.received()[0].sent;
    for (key, value) in [
        ("temperature", 0.7),
        ("top_p", 0.9),
        ("top_k", 20.0),
        ("seed", 7.0),
        ("min_p", 0.05),
        ("repetition_penalty", 1.1),
        ("presence_penalty", 0.5),
        ("frequency_penalty", 0.25),
    ] {
        assert_eq!(recorded[key].as_f64(), Some(value), "meta.sampling.{key}");
        assert_eq!(sent[key].as_f64(), Some(value), "sent {key}");
    }
}

/// The recorded output of request `q` as text.
fn output_text(e: &Execution, q: usize) -> String {
    gyre_text::TokenText::qwen3().unwrap().decode(&io(e, q).1)
}

#[test]
fn a_stop_string_is_cut_from_the_text_and_kept_in_the_sampled_ids() {
    for api in ["vllm", "sglang"] {
        let standin = StandIn::start();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run.jsonl");
        let proxy = Proxy::start(&standin.url(), &out, &["--upstream-api", api]);
        // The clients check what they are answered: the text before the stop string.
        clients(&proxy.url, "stops", &[]);
        proxy.stop();
        validate(&out);
        let batch = read(&out);
        for id in ["stop-chat", "stop-messages"] {
            let e = exec(&batch, id);
            for q in 0..e.requests.len() {
                // The ids the upstream sampled, up to the token that completed the stop string.
                assert!(
                    output_text(e, q).ends_with("Finished after"),
                    "{api} {id} {q}: {:?}",
                    output_text(e, q)
                );
                assert_eq!(e.requests[q].finish.as_deref(), Some("stop"));
                assert_eq!(
                    meta(e, q, "sampling").unwrap()["stop"],
                    serde_json::json!(["after"])
                );
            }
        }
        // The cut text sent back is recognised: the next call continues the sample.
        let e = exec(&batch, "stop-chat");
        assert_eq!(e.requests.len(), 3);
        assert!(
            matches!(e.requests[2].extends, Some(0 | 1)),
            "{api}: {:?}",
            e.requests[2].extends
        );
        assert_inputs_are_what_the_upstream_received(&batch, &standin);
    }
}

#[test]
fn the_responses_api_is_recorded_as_the_chat_api_is_streaming_or_not() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "responses", &[]);
    let batch = read(&out);
    assert_inputs_are_what_the_upstream_received(&batch, &standin);
    let reference = exec(&batch, "oa-plain");
    assert_eq!(reference.requests.len(), 4);
    for other in ["rs-plain", "rs-events", "rs-stream"] {
        let e = exec(&batch, other);
        // The same tokens, spans, calls and restorations as through Chat Completions.
        assert_eq!(shape(reference), shape(e), "{other} differs from oa-plain");
        for q in 0..4 {
            assert_eq!(meta(e, q, "api"), Some(&Value::from("responses")));
            assert_eq!(
                meta(e, q, "dropped_tools"),
                Some(&serde_json::json!(["web_search"]))
            );
        }
    }
    let s = stats(&out);
    assert_eq!(s["divergences_in_outputs"], 0);
    assert_eq!(s["requests"], 16, "the refused request is not recorded");
    proxy.clients("close", &["oa-plain", "rs-plain", "rs-events", "rs-stream"]);
    proxy.stop();
    validate(&out);
}

/// The OpenAI Agents SDK (its default Responses model, a function tool) through the proxy: its
/// runner sends the whole input each turn, so every call extends the one before.
#[test]
fn the_agents_sdk_is_recorded_through_the_responses_api() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "agents-sdk", &[]);
    let batch = read(&out);
    assert_inputs_are_what_the_upstream_received(&batch, &standin);
    let e = exec(&batch, "agents-sdk");
    assert_eq!(e.requests.len(), 4, "three tool rounds and an answer");
    for q in 0..4 {
        assert_eq!(meta(e, q, "api"), Some(&Value::from("responses")));
        if q > 0 {
            assert_eq!(e.requests[q].extends, Some(q as u32 - 1), "request {q}");
            assert_eq!(meta(e, q, "restored_turns"), Some(&Value::from(q)));
        }
    }
    assert_eq!(stats(&out)["divergences_in_outputs"], 0);
    proxy.stop();
    validate(&out);
}
