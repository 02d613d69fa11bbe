//! Throughput and memory of `gyre admit` against a serde_json parse-only pass over the same file.
//!
//! Run: `cargo bench --bench admit` (GYRE_BENCH_MB sets the target size, default 200). The
//! recording is written once into `target/bench-data/` by `gyre synth` (full form, Qwen3 tokens:
//! 80 turns per execution, contexts growing to 32k tokens, compaction, sub-agents, retries,
//! critiques; 32 executions at the default size), then:
//! - parse-only: every line through `serde_json::from_slice::<serde_json::Value>` (one thread),
//!   and through `serde::de::IgnoredAny` (validation only, the cheapest serde_json pass);
//! - `gyre admit FILE --out …` as a child process: wall time, CPU time (user + system, all
//!   threads) and peak RSS (wait4's rusage), writing JSONL and then Parquet
//!   (`--out rows.parquet`): time and size of each;
//! - the same admit on the recording's delta-form twin (`gyre synth --delta`, same seed);
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
fn data_file(bin: &Path, target_mb: u64, delta: bool) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    std::fs::create_dir_all(&dir).unwrap();
    let form = if delta { "-delta" } else { "" };
    let path = dir.join(format!("synth-{target_mb}mb{form}.jsonl"));
    if !path.exists() {
        let t = Instant::now();
        // About 6.3 MB per execution with these settings (long agentic runs, the shape of
        // issue 23); scale executions to the target.
        let executions = (target_mb * 10).div_ceil(63).to_string();
        let status = Command::new(bin)
            .args(["synth", "--executions", &executions, "--turns", "80"])
            .args(["--context", "32000", "--seed", "1"])
            .args(delta.then_some("--delta"))
            .arg("--out")
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

/// CPU seconds (user + system) this process has used so far.
fn own_cpu() -> f64 {
    #[allow(unsafe_code)]
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes only into `ru`.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    assert_eq!(rc, 0);
    cpu_seconds(&ru)
}

fn cpu_seconds(ru: &libc::rusage) -> f64 {
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// Wall and CPU seconds of reading every line of `path` into `T` (one thread).
fn parse_only<T: serde::de::DeserializeOwned>(path: &Path) -> (f64, f64) {
    let cpu = own_cpu();
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
    (t.elapsed().as_secs_f64(), own_cpu() - cpu)
}

/// Runs `cmd` to completion; returns (wall seconds, peak RSS in KiB, CPU seconds) of that
/// child alone.
fn run_measured(cmd: &mut Command) -> (f64, i64, f64) {
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
    (t.elapsed().as_secs_f64(), ru.ru_maxrss, cpu_seconds(&ru))
}

fn main() {
    let target_mb: u64 = std::env::var("GYRE_BENCH_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/gyre");
    let status = Command::new("cargo")
        .args(["build", "--release", "--quiet", "--bin", "gyre"])
        .status()
        .unwrap();
    assert!(status.success(), "cargo build --release failed");
    let path = data_file(&bin, target_mb, false);
    let delta_path = data_file(&bin, target_mb, true);
    let delta_mb = std::fs::metadata(&delta_path).unwrap().len() as f64 / 1e6;
    let size = std::fs::metadata(&path).unwrap().len() as f64;
    let mb = size / 1e6;
    let out = std::env::temp_dir().join("gyre-bench-admitted.jsonl");

    // Children first: this process must stay small while they run (see `data_file`).
    // Best wall and best CPU time of three, and the largest peak RSS.
    let best_of_3 = |input: &Path, out: &Path| {
        let mut best = f64::INFINITY;
        let mut best_cpu = f64::INFINITY;
        let mut rss_kb = 0;
        for _ in 0..3 {
            let (secs, rss, cpu) = run_measured(
                Command::new(&bin)
                    .arg("admit")
                    .arg(input)
                    .arg("--out")
                    .arg(out)
                    .arg("--force"),
            );
            best = best.min(secs);
            best_cpu = best_cpu.min(cpu);
            rss_kb = rss_kb.max(rss);
        }
        (best, rss_kb, best_cpu)
    };
    let (admit, rss_kb, admit_cpu) = best_of_3(&path, &out);
    let (admit_delta, delta_rss_kb, delta_cpu) = best_of_3(&delta_path, &out);
    let mut sweep = f64::INFINITY;
    let mut sweep_rss = 0;
    for _ in 0..3 {
        let (secs, rss, _) = run_measured(
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
    let (admit_pq, rss_pq_kb, _) = best_of_3(&path, &out_pq);
    let pq_mb = std::fs::metadata(&out_pq).map_or(0.0, |m| m.len() as f64 / 1e6);
    std::fs::remove_file(&out_pq).ok();
    let (value, value_cpu) = parse_only::<serde_json::Value>(&path);
    let (ignored, ignored_cpu) = parse_only::<serde::de::IgnoredAny>(&path);
    let out_mb = std::fs::metadata(&out).map_or(0.0, |m| m.len() as f64 / 1e6);
    std::fs::remove_file(&out).ok();
    println!("recording           {mb:.1} MB  ({})", path.display());
    println!(
        "parse-only Value    {value:.2} s  {:.0} MB/s  CPU {value_cpu:.2} s",
        mb / value
    );
    println!(
        "parse-only Ignored  {ignored:.2} s  {:.0} MB/s  CPU {ignored_cpu:.2} s",
        mb / ignored
    );
    println!(
        "gyre admit          {admit:.2} s  {:.0} MB/s  CPU {admit_cpu:.2} s  (best of 3; wrote {out_mb:.1} MB)",
        mb / admit
    );
    println!(
        "gyre admit (delta)  {admit_delta:.2} s  {:.0} MB/s of its {delta_mb:.1} MB  CPU {delta_cpu:.2} s  peak RSS {:.1} MiB",
        delta_mb / admit_delta,
        delta_rss_kb as f64 / 1024.0
    );
    println!(
        "gyre admit parquet  {admit_pq:.2} s  {:.0} MB/s  (best of 3; wrote {pq_mb:.1} MB, peak RSS {:.1} MiB)",
        mb / admit_pq,
        rss_pq_kb as f64 / 1024.0
    );
    println!(
        "ratio admit/parse   wall {:.2}× (Value)  {:.2}× (IgnoredAny)   goal ≤ 0.35× (Value)",
        admit / value,
        admit / ignored
    );
    println!(
        "                    CPU  {:.2}× (Value)  {:.2}× (IgnoredAny)   goal ≤ 0.5× (Value)",
        admit_cpu / value_cpu,
        admit_cpu / ignored_cpu
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
