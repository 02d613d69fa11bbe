//! `gyre record` under faults and signals: a full disk (a real one: a small tmpfs) leaves the
//! recording as it was before the record that failed, an answer of 500 means "not recorded",
//! and the proxy recovers when space comes back; SIGTERM right after start, or with an idle
//! kept-alive connection open, exits 0 (docs/record.md, "Durability").
#![cfg(feature = "record")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::proxy::standin::StandIn;
use crate::proxy::{Proxy, closed_by_peer, gyre, http_with};
use gyre_engine::load::{Batch, LoadOptions, load};
use gyre_engine::record::ClosureStatus;
use serde_json::{Value, json};

fn read(path: &Path) -> Batch {
    load(&[path.to_path_buf()], &LoadOptions::default(), &|_, _| {}).unwrap()
}

fn validate(path: &Path) {
    let (code, out, err) = gyre(&["validate", path.to_str().unwrap()]);
    assert_eq!(code, 0, "gyre validate: {out}{err}");
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped. Failing to mount
/// is a failure of the test (it needs root or CAP_SYS_ADMIN), not a skip.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .expect("running mount(8): the disk-full test needs it");
        assert!(
            out.status.success(),
            "mount -t tmpfs failed (the disk-full test needs root or CAP_SYS_ADMIN): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `filler` until the disk is full (the write fails with ENOSPC).
    fn fill(&self, filler: &Path) {
        let mut f = std::fs::File::create(filler).unwrap();
        let block = vec![0u8; 64 << 10];
        loop {
            if let Err(e) = f.write_all(&block).and_then(|()| f.flush()) {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
                break;
            }
        }
        // What the last write left of a block is used up too.
        while f.write_all(&[0]).is_ok() {}
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A chat request under execution `execution`: (status, body).
fn chat(proxy: &Proxy, execution: &str, messages: &Value) -> (u16, Value) {
    let body = json!({
        "model": "policy",
        "messages": messages,
        "tools": [{"type": "function", "function": {
            "name": "bash", "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                           "required": ["command"]}}}],
    });
    let (status, text) = http_with(
        &proxy.url,
        "POST",
        "/v1/chat/completions",
        &[("x-gyre-execution", execution)],
        &body.to_string(),
    );
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (status, v)
}

fn control(proxy: &Proxy, path: &str, body: &Value) -> (u16, String) {
    let auth = format!("Bearer {}", proxy.token);
    http_with(
        &proxy.control,
        "POST",
        path,
        &[("authorization", &auth)],
        &body.to_string(),
    )
}

/// `messages` with the assistant message of `answer` and a tool result of `result` appended.
fn continued(messages: &Value, answer: &Value, result: &str) -> Value {
    let m = &answer["choices"][0]["message"];
    let call = &m["tool_calls"][0];
    let mut messages = messages.as_array().unwrap().clone();
    messages.push(json!({"role": "assistant", "content": m["content"], "tool_calls": [call]}));
    messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": result}));
    Value::from(messages)
}

fn requests(batch: &Batch, execution: &str) -> Vec<(String, Option<String>)> {
    batch
        .executions
        .iter()
        .find(|e| e.id == execution)
        .map(|e| {
            e.requests
                .iter()
                .map(|r| {
                    let extends = r.extends.map(|q| e.requests[q as usize].id.to_string());
                    (r.id.to_string(), extends)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_full_disk_records_nothing_it_answered_500_and_the_proxy_recovers() {
    let standin = StandIn::start();
    let disk = SmallDisk::mount("1m");
    let out = disk.path().join("run.jsonl");
    let filler = disk.path().join("filler");
    let logs = tempfile::tempdir().unwrap();
    let log: PathBuf = logs.path().join("proxy.log");
    let proxy = Proxy::start_logged(&standin.url(), &out, &[], &log);

    let first = json!([
        {"role": "system", "content": "You are a careful shell agent."},
        {"role": "user", "content": "Run the steps one by one. steps=3"},
    ]);
    let (status, a1) = chat(&proxy, "full-disk", &first);
    assert_eq!(status, 200, "{a1}");
    // A tool result too long to fit in what is left of the file's last block.
    let output = "line of a long build log\n".repeat(2000);
    let second = continued(&first, &a1, &output);

    disk.fill(&filler);
    for _ in 0..2 {
        let (status, e) = chat(&proxy, "full-disk", &second);
        assert_eq!(status, 500, "{e}");
        assert_eq!(e["error"]["type"], "server_error", "{e}");
        let (status, e) = chat(&proxy, "other", &first);
        assert_eq!(status, 500, "a new execution is not recorded either: {e}");
    }
    let closure = json!({"execution": "full-disk", "status": "completed",
                         "artifact": "patch", "version": 1});
    let assessment = json!({"execution": "full-disk", "artifact": "patch", "version": 1,
                            "status": "valid", "score": 0.25, "evaluator": "tests"});
    // A closure long enough not to fit in what the failed requests left free.
    let long_closure = json!({"execution": "full-disk", "status": "completed",
                              "artifact": "patch", "version": 1,
                              "meta": {"notes": "x".repeat(20_000)}});
    let (status, e) = control(&proxy, "/gyre/closure", &long_closure);
    assert_eq!(status, 500, "{e}");
    // Meanwhile the file is a valid recording of what was answered 200, nothing more.
    validate(&out);
    let during = read(&out);
    assert_eq!(during.executions.len(), 1);
    assert_eq!(
        requests(&during, "full-disk"),
        [("r1".to_owned(), None)],
        "only the request answered 200"
    );
    assert!(during.executions[0].closure.is_none());

    // Space comes back: the evaluator's and the harness's retries succeed, in the form they
    // would have had (the retry extends r1; the closure is not a conflict).
    std::fs::remove_file(&filler).unwrap();
    let (status, a2) = chat(&proxy, "full-disk", &second);
    assert_eq!(status, 200, "{a2}");
    let (status, e) = chat(&proxy, "other", &first);
    assert_eq!(status, 200, "{e}");
    let (status, e) = control(&proxy, "/gyre/closure", &closure);
    assert_eq!(
        status, 200,
        "the closure answered 500 was not recorded: {e}"
    );
    let (status, e) = control(&proxy, "/gyre/assessment", &assessment);
    assert_eq!(status, 200, "{e}");
    proxy.stop();

    let stderr = std::fs::read_to_string(&log).unwrap();
    for bad in ["panicked", "Backtrace", "Location:", "Error:"] {
        assert!(
            !stderr.contains(bad),
            "{bad:?} in the proxy's stderr:\n{stderr}"
        );
    }
    assert!(
        stderr.contains("3 request(s) recorded this run"),
        "{stderr}"
    );
    validate(&out);
    let batch = read(&out);
    assert_eq!(
        requests(&batch, "full-disk"),
        [
            ("r1".to_owned(), None),
            ("r2".to_owned(), Some("r1".to_owned()))
        ],
        "every answered request once, in delta form"
    );
    assert_eq!(requests(&batch, "other"), [("r1".to_owned(), None)]);
    let e = batch
        .executions
        .iter()
        .find(|e| e.id == "full-disk")
        .unwrap();
    assert_eq!(
        e.closure.as_ref().map(|c| c.record.status),
        Some(ClosureStatus::Completed)
    );
    assert_eq!(e.assessments.len(), 1, "one assessment");
    assert_eq!(e.assessments[0].record.score, Some(0.25));
    // The lines are whole: the file ends with a newline and holds header, 2 executions, 3
    // requests, a closure and an assessment.
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.ends_with('\n'));
    assert_eq!(text.lines().count(), 8, "{text}");
}

#[test]
fn sigterm_right_after_listening_exits_0_every_time() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    for _ in 0..20 {
        // `start` returns once both addresses are printed; `stop` asserts exit status 0.
        Proxy::start(&standin.url(), &out, &[]).stop();
    }
    validate(&out);
}

#[test]
fn an_idle_kept_alive_connection_is_closed_at_shutdown_and_the_proxy_exits_0() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    let addr = proxy.url.trim_start_matches("http://").to_owned();
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(s, "GET /v1/models HTTP/1.1\r\nhost: {addr}\r\n\r\n").unwrap();
    // One whole answer, the connection kept alive.
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let complete = |raw: &[u8]| {
        let text = String::from_utf8_lossy(raw);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return false;
        };
        let len: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .expect("a content-length");
        body.len() >= len
    };
    while !complete(&raw) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the answer");
        raw.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        !text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    proxy.terminate();
    assert!(
        closed_by_peer(&mut s),
        "the idle connection is closed at shutdown, not left open"
    );
    proxy.stop();
    validate(&out);
}
