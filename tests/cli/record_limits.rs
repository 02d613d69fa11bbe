//! `gyre record` under one oversized or slow request (issue 18 §4): a conversation that cannot
//! fit the upstream's context is refused before it is tokenised, a body over `--max-request-mb`
//! is a 413, neither is recorded nor sent upstream; and rendering takes no shared lock, so small
//! requests are answered while a large one is still being rendered, with restoration intact.
#![cfg(feature = "record")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::proxy::standin::{Options, StandIn};
use crate::proxy::{Proxy, gyre, http, http_full};
use gyre_engine::load::{Batch, LoadOptions, load};
use serde_json::{Value, json};

fn read(path: &Path) -> Batch {
    load(&[path.to_path_buf()], &LoadOptions::default(), &|_, _| {}).unwrap()
}

/// `bytes` of varied words (not one repeated piece the tokenizer's cache would make cheap).
fn words(bytes: usize) -> String {
    let vocab = [
        "alpha ", "beta ", "gamma ", "delta ", "kernel ", "proxy ", "token ", "render ", "shell ",
        "value ", "under ", "load ",
    ];
    let mut out = String::with_capacity(bytes + 8);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    while out.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push_str(vocab[(x % vocab.len() as u64) as usize]);
    }
    out
}

fn chat_body(content: &str) -> String {
    json!({"model": "p", "messages": [{"role": "user", "content": content}]}).to_string()
}

fn error_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// A chunked request (no content-length), so the limit is met while reading; the status.
fn chunked(base: &str, path: &str, body: &[u8]) -> u16 {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    let mut sent = s.write_all(head.as_bytes());
    for chunk in body.chunks(64 << 10) {
        if sent.is_err() {
            break;
        }
        sent = write!(s, "{:x}\r\n", chunk.len())
            .and_then(|()| s.write_all(chunk))
            .and_then(|()| s.write_all(b"\r\n"));
    }
    if sent.is_ok() {
        // The proxy may answer and close before the end: a failed write is expected then.
        let _ = s.write_all(b"0\r\n\r\n");
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    text.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"))
}

#[test]
fn a_conversation_that_cannot_fit_is_refused_before_tokenising_and_a_large_body_is_413() {
    // 4096 tokens × at most 128 bytes per Qwen3 token: 1 MiB of text cannot fit.
    let standin = StandIn::start_with(Options {
        max_model_len: 4096,
        ..Options::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &["--max-request-mb", "2"]);
    let long = words(1 << 20);

    let (status, body) = http(
        &proxy.url,
        "POST",
        "/v1/chat/completions",
        &chat_body(&long),
    );
    assert_eq!(status, 400, "{body}");
    let e = error_of(&body);
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert_eq!(e["error"]["param"], "messages");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("maximum context length (max_model_len) is 4096 tokens")
            && message.contains("Refused before tokenising"),
        "{message}"
    );
    let anthropic = json!({"model": "p", "max_tokens": 100,
        "messages": [{"role": "user", "content": long}]})
    .to_string();
    let (status, body) = http(&proxy.url, "POST", "/v1/messages", &anthropic);
    assert_eq!(status, 400, "{body}");
    let e = error_of(&body);
    assert_eq!(e["type"], "error");
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Refused before tokenising")
    );
    let (status, body) = http(&proxy.url, "POST", "/v1/messages/count_tokens", &anthropic);
    assert_eq!(status, 400, "{body}");

    // Over --max-request-mb: 413, from the content-length or while reading a chunked body.
    let huge = chat_body(&words(3 << 20));
    let (status, body) = http(&proxy.url, "POST", "/v1/chat/completions", &huge);
    assert_eq!(status, 413, "{body}");
    let e = error_of(&body);
    assert_eq!(e["error"]["type"], "request_too_large");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-request-mb 2"),
        "{body}"
    );
    assert_eq!(
        chunked(&proxy.url, "/v1/messages", huge.as_bytes()),
        413,
        "a chunked body over the limit"
    );

    // A request that fits is still answered and recorded.
    let (status, body) = http(
        &proxy.url,
        "POST",
        "/v1/chat/completions",
        &chat_body("steps=0"),
    );
    assert_eq!(status, 200, "{body}");
    proxy.stop();
    // Nothing refused reached the upstream or the recording.
    assert_eq!(standin.received().len(), 1);
    let batch = read(&out);
    let requests: usize = batch.executions.iter().map(|e| e.requests.len()).sum();
    assert_eq!(requests, 1);
    let (code, out_text, err) = gyre(&["validate", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{out_text}{err}");
}

/// `render;dur=` of a Server-Timing header, in ms.
fn render_ms(head: &str) -> f64 {
    head.lines()
        .find_map(|l| l.strip_prefix("server-timing: "))
        .and_then(|t| t.split(", ").find_map(|p| p.strip_prefix("render;dur=")))
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("no render timing in {head}"))
}

#[test]
fn small_requests_are_answered_while_a_large_one_renders_and_keep_restoring() {
    let standin = StandIn::start_with(Options {
        max_model_len: 4_000_000,
        ..Options::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    let large = chat_body(&words(2 << 20));
    let large_done = AtomicBool::new(false);
    let (large_render, smalls) = std::thread::scope(|scope| {
        let big = scope.spawn(|| {
            let (status, head, body) = http_full(
                &proxy.url,
                "POST",
                "/v1/chat/completions",
                &[("x-gyre-execution", "large")],
                &large,
            );
            large_done.store(true, Ordering::SeqCst);
            assert_eq!(status, 200, "{body}");
            render_ms(&head)
        });
        // One conversation, continued call after call while the large one is in flight: each
        // call sends the previous answer back, so each is restored and extends the last.
        let mut messages = vec![json!({"role": "user", "content": "steps=100000"})];
        let mut smalls: Vec<f64> = Vec::new();
        while !large_done.load(Ordering::SeqCst) {
            let body = json!({"model": "p", "messages": messages}).to_string();
            let (status, head, answer) = http_full(
                &proxy.url,
                "POST",
                "/v1/chat/completions",
                &[("x-gyre-execution", "small")],
                &body,
            );
            assert_eq!(status, 200, "{answer}");
            // Only calls answered before the large one count as overlapping it.
            if !large_done.load(Ordering::SeqCst) {
                smalls.push(render_ms(&head));
            }
            let msg = error_of(&answer)["choices"][0]["message"].clone();
            let call = msg["tool_calls"][0].clone();
            messages.push(msg);
            messages.push(json!({"role": "tool", "tool_call_id": call["id"],
                "content": format!("ran {}", call["function"]["arguments"])}));
        }
        (big.join().unwrap(), smalls)
    });
    proxy.stop();
    // Small calls completed while the large one was rendering (ordering), and none of them
    // waited for it: each rendered in well under half the large one's render time (with one
    // shared renderer lock, the first small call after the large one started would have waited
    // for nearly all of it).
    assert!(
        smalls.len() >= 3,
        "only {} small calls completed before the large one ({large_render} ms render)",
        smalls.len()
    );
    let slowest = smalls.iter().copied().fold(0.0, f64::max);
    assert!(
        slowest < large_render / 2.0,
        "a small call took {slowest} ms to render while the large one took {large_render} ms"
    );
    let batch = read(&out);
    let small = batch.executions.iter().find(|e| e.id == "small").unwrap();
    assert!(small.requests.len() >= smalls.len());
    for (q, r) in small.requests.iter().enumerate().skip(1) {
        assert_eq!(r.extends, Some(q as u32 - 1), "small call {q}");
    }
    let (code, out_text, err) = gyre(&["validate", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{out_text}{err}");
}
