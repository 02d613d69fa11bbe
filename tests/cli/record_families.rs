//! `gyre record` with each model family whose tokenizer and chat template are bundled in
//! tests/fixtures/models: the real `openai` and `anthropic` clients run the same tool loop as
//! record_proxy.rs, the stand-in samples the family's own syntax with its own tokenizer, and
//! every call must be parsed and every later request extend the one before token for token.
#![cfg(feature = "record")]

use std::path::{Path, PathBuf};

use crate::proxy::standin::{Family, Options, StandIn};
use crate::proxy::{Proxy, clients, gyre};
use crate::record_proxy::{
    assert_inputs_are_what_the_upstream_received, exec, io, meta, read, shape, stats, validate,
};
use gyre_text::TokenText;

const ARGS: &str =
    r#"{"command": "echo STEP", "step": STEP, "options": {"timeout": 10, "shell": "sh"}}"#;

fn args(done: usize) -> String {
    ARGS.replace("STEP", &done.to_string())
}

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/models")
}

/// One family's run: how the proxy is started, what the stand-in samples, what to look for.
struct Case {
    /// `--tokenizer` and any other arguments.
    proxy_args: Vec<String>,
    family: Family,
    /// The parser the proxy must pick from the template.
    parser: &'static str,
    /// How the family's call text starts (the recorded call span must start with it).
    call_opens: &'static str,
    /// Written once per rendering, at its start: a continuation must not write it again.
    once: &'static str,
}

fn gpt_oss() -> Family {
    Family {
        tokenizer: models().join("gpt-oss/tokenizer.json.gz"),
        result_marker: "<|start|>functions.bash",
        call: |d, n| {
            format!(
                "<|channel|>analysis<|message|>Step {d} of {n}.<|end|><|start|>assistant\
                 <|channel|>commentary to=functions.bash <|constrain|>json<|message|>{}<|call|>",
                args(d)
            )
        },
        answer: |d| {
            format!(
                "<|channel|>analysis<|message|>All {d} done.<|end|><|start|>assistant\
                 <|channel|>final<|message|>Finished after {d} steps.<|return|>"
            )
        },
    }
}

fn run(case: Case) {
    let standin = StandIn::start_with(Options {
        family: Some(case.family),
        ..Options::default()
    });
    let tok = TokenText::from_file(&standin_tokenizer(&case.proxy_args)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let extra: Vec<&str> = case.proxy_args[1..].iter().map(String::as_str).collect();
    let proxy = Proxy::start_model(&standin.url(), &case.proxy_args[0], &out, &extra);
    clients(&proxy.url, "loops", &[]);
    let header: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["meta"]["tool_parser"], case.parser, "{header}");
    let batch = read(&out);
    assert_inputs_are_what_the_upstream_received(&batch, &standin);
    let reference = exec(&batch, "oa-plain");
    assert_eq!(
        reference.requests.len(),
        4,
        "three tool rounds and an answer"
    );
    for q in 0..3 {
        let calls = &reference.requests[q].tool_calls;
        assert_eq!(calls.len(), 1, "request {q}: one call parsed");
        assert_eq!(calls[0].name.as_deref(), Some("bash"));
        let (_, output) = io(reference, q);
        let call_text = tok.decode(&output[calls[0].start as usize..calls[0].end as usize]);
        assert!(
            call_text.starts_with(case.call_opens),
            "request {q}: the call span holds {call_text:?}"
        );
    }
    for q in 1..4 {
        assert_eq!(
            reference.requests[q].extends,
            Some(q as u32 - 1),
            "request {q}"
        );
        assert_eq!(meta(reference, q, "restored_turns"), Some(&q.into()));
        assert_eq!(meta(reference, q, "rerendered_turns"), None);
        let (input, _) = io(reference, q);
        let text = tok.decode(&input);
        assert_eq!(text.matches(case.once).count(), 1, "request {q}: {text}");
        // The arguments reached the client typed (`step` an integer), and its tool result is in
        // the next prompt.
        let done = q - 1;
        let result = format!("\"step\": {done}}}");
        assert!(
            text.contains(&result) || text.contains(&result.replace('"', "\\\"")),
            "request {q}: no tool result with {result} in {text}"
        );
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
    proxy.clients("close", &["oa-plain", "oa-stream", "an-plain", "an-stream"]);
    proxy.stop();
    validate(&out);
}

/// The tokenizer file the proxy reads for `--tokenizer ARG` (the stand-in samples with it).
fn standin_tokenizer(proxy_args: &[String]) -> PathBuf {
    match proxy_args[0].as_str() {
        "qwen3" => {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/tokenizers/qwen3/tokenizer.json.gz")
        }
        dir => Path::new(dir).join("tokenizer.json.gz"),
    }
}

fn model_dir(name: &str) -> String {
    models().join(name).to_string_lossy().into_owned()
}

#[test]
fn qwen3_coder_xml_calls_typed_by_the_schema() {
    run(Case {
        proxy_args: vec![
            "qwen3".into(),
            "--chat-template".into(),
            format!("{}/chat_template.jinja", model_dir("qwen3-coder")),
        ],
        family: Family {
            tokenizer: standin_tokenizer(&["qwen3".into()]),
            result_marker: "<tool_response>",
            call: |d, _| {
                format!(
                    "Running step {d}.\n<tool_call>\n<function=bash>\n<parameter=command>\n\
                     echo {d}\n</parameter>\n<parameter=step>\n{d}\n</parameter>\n\
                     <parameter=options>\n{{\"timeout\": 10, \"shell\": \"sh\"}}\n</parameter>\n\
                     </function>\n</tool_call><|im_end|>"
                )
            },
            answer: |d| format!("Finished after {d} steps.<|im_end|>"),
        },
        parser: "qwen3_coder",
        call_opens: "<tool_call>\n<function=bash>",
        once: "<|im_start|>system",
    });
}

#[test]
fn deepseek_v31_calls_after_the_end_of_sentence_token() {
    run(Case {
        proxy_args: vec![model_dir("deepseek-v3.1")],
        family: Family {
            tokenizer: models().join("deepseek-v3.1/tokenizer.json.gz"),
            result_marker: "<｜tool▁output▁begin｜>",
            call: |d, _| {
                format!(
                    "Running step {d}.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>bash<｜tool▁sep｜>{}\
                     <｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
                    args(d)
                )
            },
            answer: |d| format!("Finished after {d} steps.<｜end▁of▁sentence｜>"),
        },
        parser: "deepseek_v31",
        call_opens: "<｜tool▁call▁begin｜>bash",
        once: "<｜begin▁of▁sentence｜>",
    });
}

#[test]
fn gpt_oss_harmony_channels() {
    run(Case {
        proxy_args: vec![model_dir("gpt-oss")],
        family: gpt_oss(),
        parser: "openai",
        call_opens: "<|start|>assistant<|channel|>commentary to=functions.bash",
        once: "<|start|>system<|message|>",
    });
}

/// gpt-oss through the Responses API (what Codex CLI speaks): the same tokens as through
/// Chat Completions, plain and streamed.
#[test]
fn gpt_oss_through_the_responses_api() {
    let standin = StandIn::start_with(Options {
        family: Some(gpt_oss()),
        ..Options::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start_model(&standin.url(), &model_dir("gpt-oss"), &out, &[]);
    clients(&proxy.url, "responses", &[]);
    let batch = read(&out);
    assert_inputs_are_what_the_upstream_received(&batch, &standin);
    let reference = exec(&batch, "oa-plain");
    assert_eq!(reference.requests.len(), 4);
    for other in ["rs-plain", "rs-events", "rs-stream"] {
        assert_eq!(shape(reference), shape(exec(&batch, other)), "{other}");
    }
    assert_eq!(stats(&out)["divergences_in_outputs"], 0);
    proxy.stop();
    validate(&out);
}

#[test]
fn an_unknown_tool_parser_is_one_line_naming_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let (code, _, err) = gyre(&[
        "record",
        "--upstream",
        "http://127.0.0.1:9",
        "--tokenizer",
        "qwen3",
        "--tool-parser",
        "qwen25",
        "--out",
        out.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--control-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--tool-parser qwen25") && err.contains("qwen3_coder"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written");
}

#[test]
fn llama3_json_calls() {
    run(Case {
        proxy_args: vec![model_dir("llama3")],
        family: Family {
            tokenizer: models().join("llama3/tokenizer.json.gz"),
            result_marker: "<|start_header_id|>ipython<|end_header_id|>",
            call: |d, _| {
                format!(
                    "{{\"name\": \"bash\", \"parameters\": {}}}<|eot_id|>",
                    args(d)
                )
            },
            answer: |d| format!("Finished after {d} steps.<|eot_id|>"),
        },
        parser: "llama3_json",
        call_opens: "{\"name\": \"bash\"",
        once: "<|start_header_id|>system<|end_header_id|>",
    });
}
