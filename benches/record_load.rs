//! Load on loopback: 64 concurrent conversations of 20 turns through `gyre record` (OpenAI
//! chat completions, tools, calls re-serialised by the harness) in front of the deterministic
//! stand-in upstream, then the same prompts sent straight to the stand-in with the same
//! concurrency. Prints latency per call (p50/p99) and throughput for both, and what the proxy
//! adds.
//!
//! `cargo bench --bench record_load` (release build; `-- --conversations N --turns T`).

// A measurement harness may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

#[path = "../tests/cli/proxy/standin.rs"]
mod standin;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gyre_engine::load::{LoadOptions, load};
use serde_json::{Value, json};

/// A system prompt of a few thousand tokens, as agent harnesses send.
fn system_prompt() -> String {
    let rules: Vec<String> = (0..120)
        .map(|i| {
            format!(
                "Rule {i}: prefer small, reviewable changes; run the tests after edit {i}; \
                 never touch files outside the workspace."
            )
        })
        .collect();
    format!("You are a careful shell agent.\n{}", rules.join("\n"))
}

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "bash", "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"},
        "step": {"type": "integer"}, "options": {"type": "object"}}, "required": ["command"]}}}])
}

/// The upstream's share of a proxied call, from the proxy's `server-timing` header.
fn upstream_share(resp: &reqwest::Response) -> Duration {
    let timing = resp.headers()["server-timing"].to_str().unwrap();
    let ms: f64 = timing
        .split(", ")
        .find_map(|m| m.strip_prefix("upstream;dur="))
        .and_then(|d| d.parse().ok())
        .expect("server-timing names the upstream's time");
    Duration::from_secs_f64(ms / 1000.0)
}

/// One conversation through the proxy; per call the latency and the upstream's share.
async fn conversation(
    http: reqwest::Client,
    url: String,
    id: usize,
    turns: usize,
    system: Arc<String>,
) -> Vec<(Duration, Duration)> {
    let mut messages = vec![
        json!({"role": "system", "content": *system}),
        json!({"role": "user", "content": format!("Conversation {id}. steps={}", turns - 1)}),
    ];
    let mut latencies = Vec::with_capacity(turns);
    for _ in 0..turns {
        let body = json!({"model": "policy", "messages": messages, "tools": tools()});
        let started = Instant::now();
        let resp = http
            .post(&url)
            .header("x-gyre-execution", format!("c{id}"))
            .json(&body)
            .send()
            .await
            .expect("the proxy answers");
        assert!(resp.status().is_success(), "HTTP {}", resp.status());
        let upstream = upstream_share(&resp);
        let answer: Value = resp.json().await.expect("JSON");
        latencies.push((started.elapsed(), upstream));
        let msg = &answer["choices"][0]["message"];
        let calls = msg["tool_calls"].as_array().cloned().unwrap_or_default();
        if calls.is_empty() {
            break;
        }
        // Compact re-serialisation with another key order, as many harnesses do.
        let resent: Vec<Value> = calls
            .iter()
            .map(|c| {
                let args: Value =
                    serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
                let mut pairs: Vec<(String, Value)> =
                    args.as_object().unwrap().clone().into_iter().collect();
                pairs.reverse();
                let args: serde_json::Map<String, Value> = pairs.into_iter().collect();
                json!({"id": c["id"], "type": "function", "function": {"name": c["function"]["name"],
                    "arguments": Value::Object(args).to_string()}})
            })
            .collect();
        messages
            .push(json!({"role": "assistant", "content": msg["content"], "tool_calls": resent}));
        for c in &calls {
            messages.push(json!({"role": "tool", "tool_call_id": c["id"],
                "content": format!("ran {}\nexit 0", c["function"]["arguments"])}));
        }
    }
    latencies
}

/// The same prompts straight to the stand-in.
async fn direct(http: reqwest::Client, url: String, prompts: Vec<Vec<u32>>) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(prompts.len());
    for p in prompts {
        // A limit above every answer, as the proxy sends (the stand-in, like vLLM, samples 16
        // tokens without one).
        let body = json!({"model": "standin", "prompt": p, "logprobs": 1,
            "return_token_ids": true, "max_tokens": 4096});
        let started = Instant::now();
        let resp = http.post(&url).json(&body).send().await.expect("answers");
        assert!(resp.status().is_success());
        let answer: Value = resp.json().await.expect("JSON");
        latencies.push(started.elapsed());
        assert!(answer["choices"][0]["token_ids"].is_array());
    }
    latencies
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// p50 and p99 in milliseconds.
fn p50_p99(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    (pct(&v, 0.5), pct(&v, 0.99))
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(default)
}

/// `conversations` concurrent conversations through the proxy: per call (latency, upstream
/// share), and the wall time.
fn through_proxy(
    runtime: &tokio::runtime::Runtime,
    http: &reqwest::Client,
    base: &str,
    first_id: usize,
    conversations: usize,
    turns: usize,
) -> (Vec<(Duration, Duration)>, Duration) {
    let system = Arc::new(system_prompt());
    runtime.block_on(async {
        let url = format!("{base}/v1/chat/completions");
        let started = Instant::now();
        let tasks: Vec<_> = (first_id..first_id + conversations)
            .map(|i| {
                tokio::spawn(conversation(
                    http.clone(),
                    url.clone(),
                    i,
                    turns,
                    Arc::clone(&system),
                ))
            })
            .collect();
        let mut calls = Vec::new();
        for t in tasks {
            calls.extend(t.await.unwrap());
        }
        (calls, started.elapsed())
    })
}

fn main() {
    let conversations = arg("--conversations", 64);
    let turns = arg("--turns", 20);
    let upstream = standin::StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args([
            "record",
            "--upstream",
            &upstream.url(),
            "--tokenizer",
            "qwen3",
            "--quiet",
        ])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--control-listen",
            "127.0.0.1:0",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .spawn()
        .expect("gyre record");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("the proxy prints its address")
        .to_owned();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(conversations)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();

    // One conversation alone first (unloaded), then all of them at once.
    let (alone, _) = through_proxy(&runtime, &http, &base, 0, 1, turns);
    let (loaded, wall) = through_proxy(&runtime, &http, &base, 1, conversations, turns);
    // SAFETY: kill(2) on our own child's pid.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM)
    };
    assert!(child.wait().unwrap().success());

    let batch = load(
        std::slice::from_ref(&out),
        &LoadOptions::default(),
        &|_, _| {},
    )
    .unwrap();
    let prompts: Vec<Vec<Vec<u32>>> = batch
        .executions
        .iter()
        .filter(|e| e.id != "c0")
        .map(|e| {
            (0..e.requests.len())
                .map(|q| {
                    let mut p = e.path_tokens(q as u32);
                    p.truncate(e.requests[q].input_len as usize);
                    p
                })
                .collect()
        })
        .collect();
    let calls: usize = prompts.iter().map(Vec::len).sum();
    assert_eq!(calls, conversations * turns, "every call recorded");
    let before = upstream.received().len();
    let (straight, straight_wall) = runtime.block_on(async {
        let url = format!("{}/v1/completions", upstream.url());
        let started = Instant::now();
        let tasks: Vec<_> = prompts
            .into_iter()
            .map(|p| tokio::spawn(direct(http.clone(), url.clone(), p)))
            .collect();
        let mut latencies = Vec::new();
        for t in tasks {
            latencies.extend(t.await.unwrap());
        }
        (latencies, started.elapsed())
    });
    // The stand-in saw the same prompts both ways.
    let received = upstream.received();
    assert!(received.iter().all(|r| r.ok));
    assert!(
        received[before - calls..before]
            .iter()
            .all(|r| r.sent["skip_special_tokens"] == false),
        "the proxy asks the upstream to keep special tokens (end of turn, tool-call tags)"
    );
    let mut proxied: Vec<&Vec<u32>> = received[before - calls..before]
        .iter()
        .map(|r| &r.prompt)
        .collect();
    let mut sent: Vec<&Vec<u32>> = received[before..].iter().map(|r| &r.prompt).collect();
    proxied.sort();
    sent.sort();
    assert!(
        proxied == sent,
        "the recorded inputs are the prompts the upstream received"
    );
    let tokens: u64 = batch
        .executions
        .iter()
        .flat_map(|e| &e.requests)
        .map(|r| (r.input_len + r.output_len) as u64)
        .sum();
    let size = std::fs::metadata(&out).map_or(0, |m| m.len());

    let added =
        |v: &[(Duration, Duration)]| p50_p99(v.iter().map(|(l, u)| l.saturating_sub(*u)).collect());
    let (a50, a99) = added(&alone);
    let (l50, l99) = added(&loaded);
    let (p50, p99) = p50_p99(loaded.iter().map(|(l, _)| *l).collect());
    let (d50, d99) = p50_p99(straight);
    println!(
        "{conversations} conversations x {turns} turns = {calls} calls ({:.1} M tokens of \
         context + output; recording {:.1} MB)",
        tokens as f64 / 1e6,
        size as f64 / 1e6,
    );
    println!("                                   p50 ms   p99 ms   calls/s");
    println!(
        "through gyre record                {p50:>6.2}   {p99:>6.2}   {:>7.0}",
        calls as f64 / wall.as_secs_f64()
    );
    println!(
        "straight to the stand-in           {d50:>6.2}   {d99:>6.2}   {:>7.0}",
        calls as f64 / straight_wall.as_secs_f64()
    );
    println!("added by the proxy, under load     {l50:>6.2}   {l99:>6.2}");
    println!("added by the proxy, one at a time  {a50:>6.2}   {a99:>6.2}");
    println!(
        "(added = the client's latency minus the upstream call's time inside the proxy, from its \
         server-timing header)"
    );
}
