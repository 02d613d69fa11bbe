//! Throughput of `gyre audit TRAINED --against RECORDING --json` against a serde_json parse of
//! the same bytes (issue 35: the audit must run at no less than that speed).
//!
//! Run: `cargo bench --bench audit` (GYRE_BENCH_MB sets the size of recording + dump, default
//! 1000; GYRE_BENCH_DIR where they are written, default the system's temporary folder; GYRE_BENCH_RUNS
//! the timed pairs, default 5). The files are written once and kept for the next run (delete
//! them when done):
//! - the recording: `gyre synth` (full form, Qwen3 tokens: 80 turns per execution, contexts
//!   growing to 32k tokens, compaction, sub-agents, retries, critiques);
//! - the dump: its own `gyre admit --format trained` rows, each given trainer log-probs (the
//!   behaviour's with a small deterministic jitter, and one token in 500 shifted by 2 nats, so
//!   that the gap has findings to write), as a trainer's dump holds them.
//!
//! Then, in alternation (A B A B …), the audit as a child process and, in this process, every
//! line of both files through `serde_json::from_slice::<serde_json::Value>` (one thread). Prints
//! each side's median wall time and MB/s (bytes of both files over the time), the median of the
//! pairs' ratios, and the load average before and after (the machine may be shared).

// A measurement harness may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

/// The recording and the dump, written once.
fn data_files(bin: &Path, dir: &Path, target_mb: u64) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let rec = dir.join(format!("gyre-audit-bench-{target_mb}mb.jsonl"));
    let dump = dir.join(format!("gyre-audit-bench-{target_mb}mb-trained.jsonl"));
    if !rec.exists() {
        let t = Instant::now();
        // About 6.3 MB of recording per execution with these settings, and ~7% more of
        // trained rows.
        let executions = (target_mb * 10).div_ceil(67).to_string();
        let status = Command::new(bin)
            .args(["synth", "--executions", &executions, "--turns", "80"])
            .args(["--context", "32000", "--seed", "1", "--out"])
            .arg(&rec)
            .status()
            .unwrap();
        assert!(status.success(), "gyre synth failed");
        eprintln!(
            "generated {} in {:.1}s",
            rec.display(),
            t.elapsed().as_secs_f64()
        );
    }
    if !dump.exists() {
        let rows = dir.join("gyre-audit-bench-rows.jsonl");
        let status = Command::new(bin)
            .arg("admit")
            .arg(&rec)
            .args(["--format", "trained", "--force", "--out"])
            .arg(&rows)
            .status()
            .unwrap();
        assert!(status.success(), "gyre admit failed");
        with_trainer_logprobs(&rows, &dump);
        std::fs::remove_file(&rows).unwrap();
    }
    (rec, dump)
}

/// Copies `rows` to `out` with each trained record given `trainer_logprobs`: the behaviour's
/// plus a jitter within ±0.05 nat, and −2 nats on every 500th token.
fn with_trainer_logprobs(rows: &Path, out: &Path) {
    let mut w = BufWriter::new(File::create(out).unwrap());
    let mut n = 0u64;
    for line in BufReader::new(File::open(rows).unwrap()).lines() {
        let mut v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(b) = v.get("behaviour_logprobs").and_then(Value::as_array) {
            let t: Vec<Value> = b
                .iter()
                .map(|x| {
                    n += 1;
                    let shift = if n % 500 == 0 { -2.0 } else { 0.0 };
                    let jitter = ((n * 2_654_435_761) % 1001) as f64 / 10_000.0 - 0.05;
                    x.as_f64()
                        .map_or(Value::Null, |x| (x + jitter + shift).into())
                })
                .collect();
            v["trainer_logprobs"] = Value::Array(t);
        }
        serde_json::to_writer(&mut w, &v).unwrap();
        w.write_all(b"\n").unwrap();
    }
    w.flush().unwrap();
}

/// Wall seconds of reading every line of `paths` into `serde_json::Value` (one thread).
fn parse(paths: &[&Path]) -> f64 {
    let t = Instant::now();
    let mut line = Vec::new();
    for p in paths {
        let mut r = BufReader::with_capacity(1 << 20, File::open(p).unwrap());
        while r.read_until(b'\n', &mut line).unwrap() > 0 {
            let v: Value = serde_json::from_slice(&line).unwrap();
            std::hint::black_box(&v);
            line.clear();
        }
    }
    t.elapsed().as_secs_f64()
}

/// Wall seconds of `gyre audit DUMP --against REC --json`, its output thrown away.
fn audit(bin: &Path, rec: &Path, dump: &Path) -> f64 {
    let t = Instant::now();
    let status = Command::new(bin)
        .arg("audit")
        .arg(dump)
        .arg("--against")
        .arg(rec)
        .arg("--json")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    // 1: findings (the planted gaps), which is what is measured.
    assert!(
        matches!(status.code(), Some(0 | 1)),
        "gyre audit failed: {status}"
    );
    t.elapsed().as_secs_f64()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn main() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(d)
    };
    let target_mb = env("GYRE_BENCH_MB", 1000);
    let runs = env("GYRE_BENCH_RUNS", 5).max(1) as usize;
    let dir = std::env::var_os("GYRE_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/gyre");
    let status = Command::new("cargo")
        .args(["build", "--release", "--quiet", "--bin", "gyre"])
        .status()
        .unwrap();
    assert!(status.success(), "cargo build --release failed");
    let (rec, dump) = data_files(&bin, &dir, target_mb);
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as f64 / 1e6;
    let (rec_mb, dump_mb) = (size(&rec), size(&dump));
    let mb = rec_mb + dump_mb;
    let before = loadavg();
    // One untimed run of each: the page cache holds both files from here on.
    audit(&bin, &rec, &dump);
    parse(&[&rec, &dump]);
    let (mut a, mut p, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let ta = audit(&bin, &rec, &dump);
        let tp = parse(&[&rec, &dump]);
        eprintln!("pair: audit {ta:.2} s, parse {tp:.2} s");
        a.push(ta);
        p.push(tp);
        ratio.push(ta / tp);
    }
    let after = loadavg();
    let (ma, mp, mr) = (median(&mut a), median(&mut p), median(&mut ratio));
    println!(
        "recording {rec_mb:.1} MB + dump {dump_mb:.1} MB = {mb:.1} MB ({})",
        dir.display()
    );
    println!(
        "gyre audit --against --json  {ma:.2} s  {:.0} MB/s  (median of {runs})",
        mb / ma
    );
    println!(
        "serde_json Value parse       {mp:.2} s  {:.0} MB/s  (median of {runs}, one thread)",
        mb / mp
    );
    println!("audit / parse                {mr:.2}×  (median of the pairs; goal ≤ 1)");
    println!("load average                 before {before} · after {after}");
}
