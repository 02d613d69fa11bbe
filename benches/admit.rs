//! Throughput and memory of `gyre admit` against a serde_json parse-only pass over the same file.
//!
//! Run: `cargo bench --bench admit` (GYRE_BENCH_MB sets the target size, default 120). The
//! recording is written once into `target/bench-data/` by `gyre synth` (full form, Qwen3 tokens:
//! many executions, contexts growing to 16k tokens, compaction, sub-agents, retries, critiques),
//! then:
//! - parse-only: every line through `serde_json::from_slice::<serde_json::Value>` (one thread),
//!   and through `serde::de::IgnoredAny` (validation only, the cheapest serde_json pass);
//! - `gyre admit FILE --out …` as a child process: wall time and peak RSS (getrusage), writing
//!   JSONL and then Parquet (`--out rows.parquet`): time and size of each;
//! - `gyre sweep FILE --seeds 64 --jmax 1,2,5,0` (256 admissions of every execution, parsed
//!   once), in the same run, as a ratio to one admit.

// A measurement harness may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Writes the recording with the `gyre synth` binary (in its own process, so the tokenizer it
/// loads never inflates this process, whose image a spawned child briefly shares).
fn data_file(bin: &Path, target_mb: u64) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("synth-{target_mb}mb.jsonl"));
    if !path.exists() {
        let t = Instant::now();
        // About 0.95 MB per execution with these settings; scale executions to the target.
        let executions = (target_mb * 21).div_ceil(20).to_string();
        let status = Command::new(bin)
            .args(["synth", "--executions", &executions, "--turns", "24"])
            .args(["--context", "16000", "--seed", "1", "--out"])
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success(), "gyre synth failed");
        eprintln!(
            "generated {} in {:.1}s",
            path.display(),
            t.elapsed().as_secs_f64()
        );
    }
    path
}

fn parse_only<T: serde::de::DeserializeOwned>(path: &Path) -> f64 {
    let t = Instant::now();
    let mut r = BufReader::with_capacity(1 << 20, File::open(path).unwrap());
    let mut line = Vec::new();
    let mut n = 0u64;
    while r.read_until(b'\n', &mut line).unwrap() > 0 {
        let v: T = serde_json::from_slice(&line).unwrap();
        std::hint::black_box(&v);
        n += 1;
        line.clear();
    }
    std::hint::black_box(n);
    t.elapsed().as_secs_f64()
}

/// Runs `cmd` to completion; returns (wall seconds, peak RSS in KiB) of that child alone.
fn run_measured(cmd: &mut Command) -> (f64, i64) {
    let t = Instant::now();
    // Reaped by wait4 below, which also gives the rusage of this child alone.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().unwrap();
    let mut status = 0;
    #[allow(unsafe_code)]
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 reaps our own child and writes only into `status` and `ru`.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    assert_eq!(pid, child.id() as i32);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "gyre failed"
    );
    (t.elapsed().as_secs_f64(), ru.ru_maxrss)
}

fn main() {
    let target_mb: u64 = std::env::var("GYRE_BENCH_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/gyre");
    let status = Command::new("cargo")
        .args(["build", "--release", "--quiet", "--bin", "gyre"])
        .status()
        .unwrap();
    assert!(status.success(), "cargo build --release failed");
    let path = data_file(&bin, target_mb);
    let size = std::fs::metadata(&path).unwrap().len() as f64;
    let mb = size / 1e6;
    let out = std::env::temp_dir().join("gyre-bench-admitted.jsonl");

    // Children first: this process must stay small while they run (see `data_file`).
    let best_of_3 = |out: &Path| {
        let mut best = f64::INFINITY;
        let mut rss_kb = 0;
        for _ in 0..3 {
            let (secs, rss) = run_measured(
                Command::new(&bin)
                    .arg("admit")
                    .arg(&path)
                    .arg("--out")
                    .arg(out)
                    .arg("--force"),
            );
            best = best.min(secs);
            rss_kb = rss_kb.max(rss);
        }
        (best, rss_kb)
    };
    let (admit, rss_kb) = best_of_3(&out);
    let mut sweep = f64::INFINITY;
    let mut sweep_rss = 0;
    for _ in 0..3 {
        let (secs, rss) = run_measured(
            Command::new(&bin)
                .args(["sweep", "--seeds", "64", "--jmax", "1,2,5,0", "--json"])
                .arg(&path)
                .stdout(std::process::Stdio::null()),
        );
        sweep = sweep.min(secs);
        sweep_rss = sweep_rss.max(rss);
    }
    let rss_mb = rss_kb as f64 / 1024.0;
    let out_pq = std::env::temp_dir().join("gyre-bench-admitted.parquet");
    let (admit_pq, rss_pq_kb) = best_of_3(&out_pq);
    let pq_mb = std::fs::metadata(&out_pq).map_or(0.0, |m| m.len() as f64 / 1e6);
    std::fs::remove_file(&out_pq).ok();
    let value = parse_only::<serde_json::Value>(&path);
    let ignored = parse_only::<serde::de::IgnoredAny>(&path);
    let out_mb = std::fs::metadata(&out).map_or(0.0, |m| m.len() as f64 / 1e6);
    std::fs::remove_file(&out).ok();
    println!("recording           {mb:.1} MB  ({})", path.display());
    println!("parse-only Value    {value:.2} s  {:.0} MB/s", mb / value);
    println!(
        "parse-only Ignored  {ignored:.2} s  {:.0} MB/s",
        mb / ignored
    );
    println!(
        "gyre admit          {admit:.2} s  {:.0} MB/s  (best of 3; wrote {out_mb:.1} MB)",
        mb / admit
    );
    println!(
        "gyre admit parquet  {admit_pq:.2} s  {:.0} MB/s  (best of 3; wrote {pq_mb:.1} MB, peak RSS {:.1} MiB)",
        mb / admit_pq,
        rss_pq_kb as f64 / 1024.0
    );
    println!(
        "ratio admit/parse   {:.2}× (Value)  {:.2}× (IgnoredAny)   goal ≤ 1.5×",
        admit / value,
        admit / ignored
    );
    println!(
        "gyre sweep          {sweep:.2} s  = {:.2}× one admit (64 seeds × 4 J_max; goal ≤ 20×)  peak RSS {:.1} MiB",
        sweep / admit,
        sweep_rss as f64 / 1024.0
    );
    println!(
        "peak RSS            {rss_mb:.1} MiB = {:.3}× file size   goal ≤ 0.25×",
        rss_mb * 1048576.0 / size
    );
}
