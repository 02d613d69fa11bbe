//! `gyre record` under an adversary, second round (issue 39): one writer per file whatever its
//! name, a control port that a flood of model connections cannot starve at a low `ulimit -n`, no
//! control byte on the operator's stderr and ids with one alphabet and length, a start after a
//! full disk, a line cut by a kill said on restart, an assessment's `meta` kept, an empty
//! recording's mode kept (docs/record.md, "Durability" and "Security").
#![cfg(feature = "record")]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::proxy::standin::StandIn;
use crate::proxy::{Proxy, gyre, http_full, http_with};
use serde_json::{Value, json};

fn chat_as(proxy: &Proxy, headers: &[(&str, &str)], content: &str) -> (u16, String) {
    let body = json!({"model": "p", "messages": [{"role": "user", "content": content}]});
    http_with(
        &proxy.url,
        "POST",
        "/v1/chat/completions",
        headers,
        &body.to_string(),
    )
}

fn validate(path: &Path) {
    let (code, out, err) = gyre(&["validate", path.to_str().unwrap()]);
    assert_eq!(code, 0, "gyre validate: {out}{err}");
}

/// `gyre record --out OUT` started beside a running one; (exit code, stderr).
fn second_start(upstream: &str, out: &Path) -> (i32, String) {
    let (code, _, err) = gyre(&[
        "record",
        "--upstream",
        upstream,
        "--tokenizer",
        "qwen3",
        "--out",
        out.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--control-listen",
        "127.0.0.1:0",
    ]);
    (code, err)
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    p.into()
}

#[test]
fn a_second_writer_is_refused_under_any_name_of_the_file_and_leaves_nothing() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec.jsonl");
    let first = Proxy::start(&standin.url(), &out, &[]);
    for i in 0..3 {
        let (status, body) = chat_as(&first, &[("x-gyre-execution", "a")], &format!("a{i}"));
        assert_eq!(status, 200, "{body}");
    }
    // No lock file: the lock is on the recording itself, so there is none to delete.
    assert_eq!(names(dir.path()), ["rec.jsonl", "rec.jsonl.control-token"]);
    let symlink = dir.path().join("other.jsonl");
    std::os::unix::fs::symlink(&out, &symlink).unwrap();
    let hard = dir.path().join("hard.jsonl");
    std::fs::hard_link(&out, &hard).unwrap();
    let before = std::fs::read(&out).unwrap();
    for name in [&out, &symlink, &hard] {
        let (code, err) = second_start(&standin.url(), name);
        assert_eq!(code, 2, "{}: {err}", name.display());
        assert!(
            err.contains(&format!("pid {}", first.pid())) && err.contains("another writer"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(&out).unwrap(),
            before,
            "the second wrote nothing"
        );
    }
    // The refused starts left no token file or lock behind.
    assert_eq!(
        names(dir.path()),
        [
            "hard.jsonl",
            "other.jsonl",
            "rec.jsonl",
            "rec.jsonl.control-token"
        ]
    );
    for i in 0..3 {
        let (status, body) = chat_as(&first, &[("x-gyre-execution", "b")], &format!("b{i}"));
        assert_eq!(status, 200, "{body}");
    }
    first.stop();
    validate(&out);
    let batch = gyre_engine::load::load(
        std::slice::from_ref(&out),
        &gyre_engine::load::LoadOptions::default(),
        &|_, _| {},
    )
    .unwrap();
    let count = |id: &str| {
        batch
            .executions
            .iter()
            .find(|e| e.id == id)
            .map_or(0, |e| e.requests.len())
    };
    assert_eq!((count("a"), count("b")), (3, 3));
    // Through the symlink, once the first has exited, the same file is appended to.
    let again = Proxy::start(&standin.url(), &symlink, &[]);
    let (status, body) = chat_as(&again, &[("x-gyre-execution", "c")], "c");
    assert_eq!(status, 200, "{body}");
    again.stop();
    validate(&out);
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .contains(r#""execution":"c""#)
    );
}

#[test]
fn the_control_port_answers_under_a_flood_of_model_connections_at_a_low_ulimit() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let log = dir.path().join("proxy.log");
    let proxy = Proxy::start_verbose(&standin.url(), &out, &["--quiet"], &log, Some(256));
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains("the open-file limit is 256") && said.contains("model connections"),
        "{said}"
    );
    // More idle connections than the cap (and than the whole limit); those over it are
    // answered 503 or closed.
    let addr = proxy.url.trim_start_matches("http://").to_owned();
    let flood: Vec<TcpStream> = (0..400)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    assert!(flood.len() > 256, "{} connections", flood.len());
    // The 503s to the flood are written (each waits up to 1 s for the client to close).
    std::thread::sleep(Duration::from_millis(1500));
    let auth = format!("Bearer {}", proxy.token);
    let (status, head, body) = http_full(
        &proxy.control,
        "POST",
        "/gyre/executions",
        &[("authorization", &auth)],
        r#"{"execution": "under-flood"}"#,
    );
    assert_eq!(status, 200, "{head}\n{body}");
    // A model request is answered at once: 503 with Retry-After while the cap is full.
    let (status, head, body) = http_full(
        &proxy.url,
        "POST",
        "/v1/chat/completions",
        &[],
        &json!({"model": "p", "messages": [{"role": "user", "content": "hi"}]}).to_string(),
    );
    assert!(
        status == 200 || (status == 503 && head.to_ascii_lowercase().contains("retry-after: 1")),
        "{status} {head}\n{body}"
    );
    drop(flood);
    std::thread::sleep(Duration::from_millis(500));
    let (status, body) = chat_as(&proxy, &[], "after the flood");
    assert_eq!(status, 200, "{body}");
    proxy.stop();
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(!said.contains("Too many open files"), "{said}");
    assert!(said.contains("refusing more with 503"), "{said}");
    validate(&out);
}

#[test]
fn no_control_byte_from_any_id_reaches_stderr_and_bad_ids_are_400() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let log = dir.path().join("proxy.log");
    let proxy = Proxy::start_verbose(&standin.url(), &out, &[], &log, None);
    let long = "s".repeat(200_000);
    let hostile = [
        "\u{1b}[31mRED\u{1b}[0m\u{1b}]0;pwned\u{7}",
        "nul\u{0}byte",
        "\u{1b}[2J",
        "bidi\u{202e}txt",
        "a b",
        long.as_str(),
    ];
    for id in hostile {
        for user_id in [
            json!({"device_id": "d", "account_uuid": "", "session_id": id}).to_string(),
            format!("user_a_account_b_session_{id}"),
        ] {
            let body = json!({"model": "p", "max_tokens": 16,
                "metadata": {"user_id": user_id},
                "messages": [{"role": "user", "content": "hi"}]});
            let (status, _, answer) =
                http_full(&proxy.url, "POST", "/v1/messages", &[], &body.to_string());
            assert_eq!(status, 400, "{answer}");
            assert!(answer.contains("A-Z a-z 0-9"), "{answer}");
        }
    }
    for header in [
        "x-gyre-execution",
        "x-gyre-agent",
        "x-gyre-group",
        "x-claude-code-session-id",
    ] {
        for value in ["a/b", "a b", long.as_str()] {
            let (status, answer) = chat_as(&proxy, &[(header, value)], "hi");
            assert_eq!(status, 400, "{header}: {answer}");
        }
    }
    let auth = format!("Bearer {}", proxy.token);
    let closure = json!({"execution": "\u{1b}]0;pwned\u{7}", "status": "completed"});
    let (status, _, answer) = http_full(
        &proxy.control,
        "POST",
        "/gyre/closure",
        &[("authorization", &auth)],
        &closure.to_string(),
    );
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = chat_as(&proxy, &[("x-gyre-execution", "fine-id_1:2.3")], "hi");
    assert_eq!(status, 200, "{answer}");
    proxy.stop();
    let said = std::fs::read(&log).unwrap();
    assert!(
        !said.iter().any(|&b| b < 0x20 && b != b'\n'),
        "a control byte on stderr: {}",
        String::from_utf8_lossy(&said)
    );
    let said = String::from_utf8(said).unwrap();
    assert!(!said.contains('\u{202e}'), "{said}");
    assert!(
        said.lines().all(|l| l.len() < 2000),
        "a line of {} bytes",
        said.len()
    );
    assert!(said.contains("fine-id_1:2.3"), "{said}");
    validate(&out);
    let recorded = std::fs::read_to_string(&out).unwrap();
    assert!(!recorded.contains("pwned") && !recorded.contains("sssss"));
}

/// A tmpfs of `size` on a fresh directory, unmounted when dropped (root needed: a failure, not
/// a skip).
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
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
            "mount -t tmpfs failed (the test needs root or CAP_SYS_ADMIN): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0.path())
            .status();
    }
}

#[test]
fn a_start_on_a_full_disk_leaves_nothing_and_the_next_start_succeeds() {
    use std::io::Write;
    let standin = StandIn::start();
    let disk = SmallDisk::mount("256k");
    let out = disk.0.path().join("run.jsonl");
    let filler = disk.0.path().join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    while f.write_all(&[0u8; 4096]).is_ok() {}
    while f.write_all(&[0]).is_ok() {}
    drop(f);
    let (code, err) = second_start(&standin.url(), &out);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("No space left"), "{err}");
    assert_eq!(names(disk.0.path()), ["filler"], "{err}");
    std::fs::remove_file(&filler).unwrap();
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    let (status, body) = chat_as(&proxy, &[], "hi");
    assert_eq!(status, 200, "{body}");
    proxy.stop();
    validate(&out);
    let token = std::fs::read_to_string(with_suffix(&out, ".control-token")).unwrap();
    assert_eq!(token.trim().len(), 64);
}

#[test]
fn a_cut_line_is_said_on_restart_an_assessment_keeps_its_meta_and_an_empty_file_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    std::fs::write(&out, "").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    let (status, body) = chat_as(&proxy, &[("x-gyre-execution", "t1")], "hi");
    assert_eq!(status, 200, "{body}");
    let auth = format!("Bearer {}", proxy.token);
    let assessment = json!({"execution": "t1", "artifact": "patch", "version": 1,
        "status": "valid", "score": 1.0, "meta": {"judge": "unit-tests", "passed": 12}});
    let (status, _, answer) = http_full(
        &proxy.control,
        "POST",
        "/gyre/assessment",
        &[("authorization", &auth)],
        &assessment.to_string(),
    );
    assert_eq!(status, 200, "{answer}");
    proxy.stop();
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "an existing empty recording keeps its mode");
    let text = std::fs::read_to_string(&out).unwrap();
    let line: Value = serde_json::from_str(
        text.lines()
            .find(|l| l.contains(r#""kind":"assessment""#))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(line["meta"], json!({"judge": "unit-tests", "passed": 12}));

    // A kill mid-line leaves half a record.
    let whole = text.len();
    let half = r#"{"kind":"request","execution":"t1","id":"r9","inp"#;
    std::fs::write(&out, format!("{text}{half}")).unwrap();
    let lines = text.lines().count();
    let log = dir.path().join("restart.log");
    let proxy = Proxy::start_logged(&standin.url(), &out, &[], &log);
    proxy.stop();
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains(&format!(
            "dropped {} bytes at the end, from byte {whole} (line {})",
            half.len(),
            lines + 1
        )),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);
    validate(&out);
}

#[test]
fn memory_stays_within_the_budget_for_every_body_shape_and_drops_after_the_burst() {
    use crate::proxy::bodies::{post, small_messages, status_kib, tool_arguments};
    // max_model_len 4096: at most 4096 × 128 × 3 bytes of text can be tokenised.
    let standin = StandIn::start_with(crate::proxy::standin::Options {
        max_model_len: 4096,
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    // 40 × 80 MiB + 128 × 1.5 MiB: the largest body fits alone, three of the 20 MiB ones at once.
    let budget_mib = 3600;
    let proxy = Proxy::start(
        &standin.url(),
        &out,
        &[
            "--max-request-mb",
            "96",
            "--max-memory-mb",
            &budget_mib.to_string(),
            "--read-timeout",
            "120",
        ],
    );
    let pid = proxy.pid();
    assert_eq!(post(&proxy.url, &small_messages(1 << 10)), 200);
    let idle = status_kib(pid, "VmRSS");
    let small = small_messages(40 << 20);
    let tools = tool_arguments(80 << 20);
    let quarter = small_messages(20 << 20);
    // Each body is read, parsed and rendered, and refused before tokenising (a 400: too long
    // for the context).
    assert_eq!(post(&proxy.url, &small), 400);
    assert_eq!(post(&proxy.url, &tools), 400);
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let h: Vec<_> = (0..4)
            .map(|_| s.spawn(|| post(&proxy.url, &quarter)))
            .collect();
        h.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(statuses, [400; 4]);
    let peak = status_kib(pid, "VmHWM");
    assert!(
        peak <= idle + (budget_mib << 10),
        "peak {} MiB over idle {} MiB + the budget {budget_mib} MiB",
        peak >> 10,
        idle >> 10
    );
    // Memory goes back to the OS after the burst (within a few seconds: the trim runs after).
    let mut after = status_kib(pid, "VmRSS");
    for _ in 0..50 {
        if after <= idle + (256 << 10) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        after = status_kib(pid, "VmRSS");
    }
    assert!(
        after <= idle + (256 << 10),
        "{} MiB resident after the burst (idle {} MiB, peak {} MiB)",
        after >> 10,
        idle >> 10,
        peak >> 10
    );
    proxy.stop();
    validate(&out);
}
