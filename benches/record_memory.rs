//! Peak memory of `gyre record` for the body shapes that cost the most per byte (issue 39 §5):
//! 46 MiB of 1.3 M small messages, 80 MiB of tool-call arguments, and four concurrent 29 MiB
//! bodies. For each, a fresh proxy in front of the stand-in upstream; prints its resident memory
//! idle, at its peak (`VmHWM`) and 2 s after the burst, and the statuses answered.
//!
//! `cargo bench --profile release --bench record_memory` (add `-- --max-memory-mb N` to pass a
//! budget; `GYRE_BIN=path` measures another build of gyre, e.g. one before the budget).

// A measurement harness may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

// The stand-in's test-only accessors are not used here.
#[allow(dead_code)]
#[path = "../tests/cli/proxy/standin.rs"]
mod standin;

#[path = "../tests/cli/proxy/bodies.rs"]
mod bodies;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let extra: Vec<String> = args
        .iter()
        .position(|a| a == "--max-memory-mb")
        .map(|i| vec![args[i].clone(), args[i + 1].clone()])
        .unwrap_or_default();
    let bin = std::env::var("GYRE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_gyre").to_owned());
    let standin = standin::StandIn::start();
    let small = bodies::small_messages(46 << 20);
    let tools = bodies::tool_arguments(80 << 20);
    let four = bodies::small_messages(29 << 20);
    let shapes: [(&str, Vec<&str>); 3] = [
        ("46 MiB of small messages", vec![&small]),
        ("80 MiB of tool-call arguments", vec![&tools]),
        ("4 × 29 MiB at once", vec![&four; 4]),
    ];
    println!("gyre: {bin} {}", extra.join(" "));
    println!(
        "{:<32} {:>10} {:>10} {:>10}  statuses",
        "shape", "idle MB", "peak MB", "after MB"
    );
    for (name, sent) in shapes {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run.jsonl");
        let mut child = Command::new(&bin)
            .args([
                "record",
                "--upstream",
                &standin.url(),
                "--tokenizer",
                "qwen3",
                "--out",
            ])
            .arg(&out)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--control-listen",
                "127.0.0.1:0",
                "--quiet",
            ])
            .args(["--max-request-mb", "96"])
            .args(&extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap()
            .to_owned();
        let pid = child.id();
        // The tokenizer's tables and the upstream's context length are loaded by a first call.
        bodies::post(&url, &bodies::small_messages(1 << 10));
        let idle = bodies::status_kib(pid, "VmRSS");
        let statuses: Vec<u16> = std::thread::scope(|s| {
            let handles: Vec<_> = sent
                .iter()
                .map(|body| s.spawn(|| bodies::post(&url, body)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let peak = bodies::status_kib(pid, "VmHWM");
        std::thread::sleep(Duration::from_secs(2));
        let after = bodies::status_kib(pid, "VmRSS");
        println!(
            "{name:<32} {:>10} {:>10} {:>10}  {statuses:?}",
            idle / 1024,
            peak / 1024,
            after / 1024
        );
        let _ = child.kill();
        let _ = child.wait();
    }
}
