//! `gyre import` on the command line: exit codes, file:line errors, no partial output.

use std::process::Command;

use crate::import_common::fixture;

fn gyre(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn import_then_validate_then_refuse_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("short.jsonl");
    let src = fixture("claude-code/tool_heavy.jsonl");
    let (code, _, err) = gyre(&[
        "import",
        "claude-code",
        src.to_str().unwrap(),
        "--score",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("4 requests"), "{err}");
    let (code, stdout, _) = gyre(&["validate", out.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(stdout.contains("4 requests"), "{stdout}");
    let before = std::fs::read(&out).unwrap();
    let (code, _, err) = gyre(&[
        "import",
        "claude-code",
        src.to_str().unwrap(),
        "--no-restore",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--force"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), before);
    let (code, _, _) = gyre(&[
        "import",
        "claude-code",
        src.to_str().unwrap(),
        "--no-restore",
        "--out",
        out.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(code, 0);
    assert_ne!(std::fs::read(&out).unwrap(), before);
    // Compressed output, read back by the engine.
    let zst = dir.path().join("short.jsonl.zst");
    let (code, _, _) = gyre(&[
        "import",
        "claude-code",
        src.to_str().unwrap(),
        "--out",
        zst.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        &std::fs::read(&zst).unwrap()[..4],
        &[0x28, 0xb5, 0x2f, 0xfd]
    );
    let (code, stdout, _) = gyre(&["stats", zst.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let s: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(s["requests"], 4);
}

#[test]
fn stdout_output() {
    let src = fixture("openhands/basic_interactions.json");
    let (code, stdout, err) = gyre(&["import", "openhands", src.to_str().unwrap(), "--out", "-"]);
    assert_eq!(code, 0, "{err}");
    let kinds: Vec<String> = stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "header",
            "execution",
            "request",
            "request",
            "request",
            "closure"
        ]
    );
}

#[test]
fn bad_input_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    // Claude Code: a malformed line 3 and an assistant line without message.id at line 5.
    let session = dir.path().join("session.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(fixture("claude-code/short.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines[2] = "{\"type\": \"progress\", \"uuid\": ".into();
    let mut v: serde_json::Value = serde_json::from_str(&lines[4]).unwrap();
    v["message"].as_object_mut().unwrap().remove("id");
    lines[4] = v.to_string();
    std::fs::write(&session, lines.join("\n")).unwrap();
    let (code, _, err) = gyre(&[
        "import",
        "claude-code",
        session.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("session.jsonl:3: malformed JSON"), "{err}");
    assert!(
        err.contains("session.jsonl:5: missing field `id` (message.id)"),
        "{err}"
    );
    assert!(!out.exists(), "no partial output");

    // SWE-agent: the line of the offending history entry.
    let traj = dir.path().join("bad.traj");
    let mut doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("swe-agent/function_calling_simple.traj")).unwrap(),
    )
    .unwrap();
    doc["history"][2].as_object_mut().unwrap().remove("role");
    let text = serde_json::to_string_pretty(&doc).unwrap();
    std::fs::write(&traj, &text).unwrap();
    let line = gyre_import::input::json_element_lines(&text, Some("history"))[2];
    let (code, _, err) = gyre(&[
        "import",
        "swe-agent",
        traj.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "bad.traj:{line}: missing field `role` (history[2].role)"
        )),
        "{err}"
    );
    std::fs::write(&traj, "{\"history\": [\n{\"role\": \"user\",,}\n]}").unwrap();
    let (code, _, err) = gyre(&[
        "import",
        "swe-agent",
        traj.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.traj:2: malformed JSON"), "{err}");

    // vLLM: a response without log-probs.
    let log = dir.path().join("traffic.jsonl");
    let good = std::fs::read_to_string(fixture("vllm/swe-agent-qwen3.jsonl")).unwrap();
    let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
    let mut v: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    v["response"]["choices"][0]["logprobs"] = serde_json::Value::Null;
    lines[1] = v.to_string();
    std::fs::write(&log, lines.join("\n")).unwrap();
    let (code, _, err) = gyre(&[
        "import",
        "vllm",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("traffic.jsonl:2: no log-probs (request them with \"logprobs\": true) (response.choices[0].logprobs.content)"),
        "{err}"
    );
    assert!(!out.exists(), "no partial output");

    // vLLM: one log-prob for a longer output.
    let mut v: serde_json::Value = serde_json::from_str(good.lines().nth(1).unwrap()).unwrap();
    let first = v["response"]["choices"][0]["logprobs"]["content"][0].clone();
    v["response"]["choices"][0]["logprobs"]["content"] = serde_json::json!([first]);
    lines[1] = v.to_string();
    std::fs::write(&log, lines.join("\n")).unwrap();
    let (code, _, err) = gyre(&[
        "import",
        "vllm",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("traffic.jsonl:2: 1 log-prob for ")
            && err.contains(" output tokens (response.choices[0].logprobs.content)"),
        "{err}"
    );

    // Missing input, bad score.
    let (code, _, err) = gyre(&[
        "import",
        "openhands",
        "/nonexistent.json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent.json: no such file"), "{err}");
    let src = fixture("openhands/basic.json");
    let (code, _, err) = gyre(&[
        "import",
        "openhands",
        src.to_str().unwrap(),
        "--score",
        "NaN",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--score must be a finite number"), "{err}");
}

#[test]
fn help_has_examples() {
    for sub in ["claude-code", "swe-agent", "openhands", "vllm"] {
        let (code, stdout, _) = gyre(&["import", sub, "--help"]);
        assert_eq!(code, 0);
        assert!(
            stdout.contains("Examples:") && stdout.contains("gyre import"),
            "{sub}: {stdout}"
        );
    }
}

#[test]
fn tokenizer_by_path() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let assets = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/tokenizers/qwen3");
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(assets.join("tokenizer.json.gz")).unwrap())
        .read_to_end(&mut json)
        .unwrap();
    std::fs::write(dir.path().join("tokenizer.json"), json).unwrap();
    std::fs::copy(
        assets.join("tokenizer_config.json"),
        dir.path().join("tokenizer_config.json"),
    )
    .unwrap();
    let src = fixture("claude-code/tool_heavy.jsonl");
    let by_path = dir.path().join("by-path.jsonl");
    let by_name = dir.path().join("by-name.jsonl");
    let tok = dir.path().join("tokenizer.json");
    for (out, t) in [(&by_path, tok.to_str().unwrap()), (&by_name, "qwen3")] {
        let (code, _, err) = gyre(&[
            "import",
            "claude-code",
            src.to_str().unwrap(),
            "--tokenizer",
            t,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
    }
    let a = crate::import_common::lines(&by_path);
    let b = crate::import_common::lines(&by_name);
    assert_eq!(
        a[0]["tokenizer"]["path"],
        tok.canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(a[1..], b[1..]);
    // Without a tokenizer_config.json beside it there is no chat template.
    std::fs::remove_file(dir.path().join("tokenizer_config.json")).unwrap();
    let (code, _, err) = gyre(&[
        "import",
        "claude-code",
        src.to_str().unwrap(),
        "--tokenizer",
        tok.to_str().unwrap(),
        "--out",
        dir.path().join("x.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("tokenizer_config.json"), "{err}");
}

/// One plain line (no colour, no source location), exit 2, no output file.
fn refused(args: &[&str], out: &std::path::Path, needle: &str) -> String {
    let (code, _, err) = gyre(args);
    assert_eq!(code, 2, "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert!(
        !err.contains('\u{1b}') && !err.contains("Location:"),
        "{err}"
    );
    assert!(!err.contains("gyre validate"), "{err}");
    assert!(!out.exists(), "{args:?} left {}", out.display());
    err
}

#[test]
fn the_wrong_importer_refuses_with_what_the_file_is() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let o = out.to_str().unwrap();
    let example =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/example.jsonl");
    let err = refused(
        &[
            "import",
            "claude-code",
            example.to_str().unwrap(),
            "--out",
            o,
        ],
        &out,
        "not a Claude Code session: this is a gyre/1 recording",
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    refused(
        &["import", "vllm", example.to_str().unwrap(), "--out", o],
        &out,
        "no logged calls",
    );
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    refused(
        &["import", "vllm", empty.to_str().unwrap(), "--out", o],
        &out,
        "empty.jsonl: not a vLLM/SGLang traffic log: this is an empty file",
    );
    let traj = fixture("swe-agent/function_calling_simple.traj");
    refused(
        &["import", "openhands", traj.to_str().unwrap(), "--out", o],
        &out,
        "it looks like `gyre import swe-agent` input",
    );
    let events = fixture("openhands/basic.json");
    refused(
        &["import", "swe-agent", events.to_str().unwrap(), "--out", o],
        &out,
        "it looks like `gyre import openhands` input",
    );
    refused(
        &[
            "import",
            "claude-code",
            events.to_str().unwrap(),
            "--out",
            o,
        ],
        &out,
        "not a Claude Code session",
    );
}

#[test]
fn bad_paths_are_one_line_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let o = out.to_str().unwrap();
    let d = dir.path().to_str().unwrap();
    let session = fixture("claude-code/short.jsonl");
    let s = session.to_str().unwrap();
    refused(
        &["import", "claude-code", d, "--out", o],
        &out,
        "is a directory, not a Claude Code session",
    );
    refused(
        &["import", "openhands", d, "--out", o],
        &out,
        "not an OpenHands event stream: this is a folder that is not an OpenHands session",
    );
    let nodir = dir.path().join("nodir/x.jsonl");
    refused(
        &["import", "claude-code", s, "--out", nodir.to_str().unwrap()],
        &nodir,
        "no such directory",
    );
    let (code, _, err) = gyre(&["import", "claude-code", s, "--out", d, "--force"]);
    assert_eq!(code, 2);
    assert!(err.contains("is a directory; name a file in it"), "{err}");
    refused(
        &[
            "import",
            "claude-code",
            s,
            "--out",
            o,
            "--tokenizer",
            "nonexistent",
        ],
        &out,
        "--tokenizer nonexistent",
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".gyre-out"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn hostile_bytes_are_file_line_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let o = out.to_str().unwrap();
    let good = std::fs::read_to_string(fixture("claude-code/stop-hook-2.1.jsonl")).unwrap();
    // Invalid UTF-8 on line 4.
    let bad = dir.path().join("bad-utf8.jsonl");
    let mut bytes = Vec::new();
    for (i, l) in good.lines().enumerate() {
        if i == 3 {
            bytes.extend_from_slice(&l.as_bytes()[..40]);
            bytes.push(0xff);
            bytes.extend_from_slice(&l.as_bytes()[40..]);
        } else {
            bytes.extend_from_slice(l.as_bytes());
        }
        bytes.push(b'\n');
    }
    std::fs::write(&bad, &bytes).unwrap();
    refused(
        &["import", "claude-code", bad.to_str().unwrap(), "--out", o],
        &out,
        "bad-utf8.jsonl:4: invalid UTF-8",
    );
    // A .gz cut in the middle.
    let gz = dir.path().join("cut.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for _ in 0..40 {
        std::io::Write::write_all(&mut enc, good.as_bytes()).unwrap();
    }
    let full = enc.finish().unwrap();
    std::fs::write(&gz, &full[..full.len() * 2 / 3]).unwrap();
    let err = refused(
        &["import", "claude-code", gz.to_str().unwrap(), "--out", o],
        &out,
        "cut.jsonl.gz:",
    );
    assert!(
        err.contains("cut short") || err.contains("cannot read on"),
        "{err}"
    );
    // A timestamp with a multibyte character where the zone offset goes: read, not a panic.
    let odd = dir.path().join("odd-time.jsonl");
    std::fs::write(
        &odd,
        good.replacen("2026-03-02T10:04:14.220Z", "2026-02-10T21:11:56+0é00", 1),
    )
    .unwrap();
    let (code, _, err) = gyre(&["import", "claude-code", odd.to_str().unwrap(), "--out", o]);
    assert_eq!(code, 0, "{err}");
    let events = dir.path().join("odd-time.json");
    std::fs::write(
        &events,
        std::fs::read_to_string(fixture("openhands/basic.json"))
            .unwrap()
            .replacen("2025-01-27T22:44:56.900854", "2026-02-10T21:11:56+0é00", 1),
    )
    .unwrap();
    let o2 = dir.path().join("out2.jsonl");
    let (code, _, err) = gyre(&[
        "import",
        "openhands",
        events.to_str().unwrap(),
        "--out",
        o2.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    // A JSON array given as JSONL traffic says what it is.
    let array = dir.path().join("array.jsonl");
    std::fs::write(&array, "[{\"kind\": \"header\"}]\n").unwrap();
    let o3 = dir.path().join("out3.jsonl");
    refused(
        &[
            "import",
            "vllm",
            array.to_str().unwrap(),
            "--out",
            o3.to_str().unwrap(),
        ],
        &o3,
        "this is a JSON array",
    );
}

/// Logged traffic whose lines would make records the loader refuses: refused at their line,
/// nothing written.
#[test]
fn vllm_never_writes_records_that_do_not_validate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let o = out.to_str().unwrap();
    let good = std::fs::read_to_string(fixture("vllm/swe-agent-qwen3.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = good
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let write = |name: &str, ls: &[serde_json::Value]| {
        let p = dir.path().join(name);
        let text: Vec<String> = ls.iter().map(|l| l.to_string()).collect();
        std::fs::write(&p, text.join("\n")).unwrap();
        p
    };
    // A copied record that is not valid gyre/1 (a closure without `t`).
    let mut ls = lines.clone();
    ls.last_mut().unwrap().as_object_mut().unwrap().remove("t");
    let p = write("kind.jsonl", &ls);
    refused(
        &["import", "vllm", p.to_str().unwrap(), "--out", o],
        &out,
        &format!("kind.jsonl:{}:", ls.len()),
    );
    // A request id used twice in one execution.
    let mut ls = lines.clone();
    ls[0]["id"] = "a".into();
    ls[1]["id"] = "a".into();
    let p = write("dup.jsonl", &ls);
    refused(
        &["import", "vllm", p.to_str().unwrap(), "--out", o],
        &out,
        "dup.jsonl:2: would write an invalid record: request id \"a\" is already used",
    );
    // A numeric actor.
    let mut ls = lines.clone();
    ls[2]["actor"] = 3.into();
    let p = write("actor.jsonl", &ls);
    refused(
        &["import", "vllm", p.to_str().unwrap(), "--out", o],
        &out,
        "actor.jsonl:3: invalid type: integer `3`, expected a string (actor)",
    );
    // Valid traffic re-rendered by the client: no request is delta-encoded, so none is said to be.
    let (code, _, err) = gyre(&[
        "import",
        "vllm",
        fixture("vllm/swe-agent-qwen3.jsonl").to_str().unwrap(),
        "--out",
        o,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("delta"), "{err}");
    assert!(err.contains("2 executions, 6 requests"), "{err}");
}

#[test]
fn help_lists_every_importer_and_lenient() {
    let (code, stdout, _) = gyre(&["import", "--help"]);
    assert_eq!(code, 0);
    for line in [
        "claude-code     A Claude Code session",
        "swe-agent       A SWE-agent trajectory",
        "mini-swe-agent  A mini-swe-agent trajectory",
        "codex           A Codex CLI rollout",
        "openhands       OpenHands: an event stream",
        "inspect         An Inspect AI log",
        "vllm            Logged vLLM/SGLang chat traffic",
    ] {
        assert!(stdout.contains(line), "{stdout}");
    }
    let (code, stdout, _) = gyre(&["import", "claude-code", "--help"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("--lenient"), "{stdout}");
    for (source, example) in [
        ("mini-swe-agent", "gyre import mini-swe-agent trajs/"),
        ("codex", "gyre import codex ~/.codex/sessions/"),
        ("inspect", "gyre import inspect logs/run.eval"),
    ] {
        let (code, stdout, _) = gyre(&["import", source, "--help"]);
        assert_eq!(code, 0);
        assert!(
            stdout.contains(example) && stdout.contains("--score"),
            "{stdout}"
        );
    }
    let (code, stdout, _) = gyre(&["import", "vllm", "--help"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("--lenient") && !stdout.contains("--no-restore"),
        "{stdout}"
    );
}

/// A pipe (`<(zcat …)`, `/dev/stdin` on a pipe), a FIFO or a device is refused for what it is,
/// before it is opened: probing it would consume it (the import then read an "empty file") or
/// block until a writer comes.
#[test]
fn pipes_fifos_and_devices_are_refused_without_reading_them() {
    use std::io::Write;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let o = out.to_str().unwrap();
    let fifo = dir.path().join("traffic.jsonl");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    refused(
        &["import", "vllm", fifo.to_str().unwrap(), "--out", o],
        &out,
        "traffic.jsonl: is a pipe (FIFO), not a file: an import reads its input more than once",
    );
    refused(
        &["import", "claude-code", "/dev/null", "--out", o],
        &out,
        "/dev/null: is a device, not a file",
    );
    let log = std::fs::read(fixture("vllm/swe-agent-qwen3.jsonl")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(["import", "vllm", "/dev/stdin", "--out", o])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The log may or may not be read before gyre refuses: a closed pipe is fine here.
    let _ = child.stdin.take().unwrap().write_all(&log);
    let done = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(err.contains("is a pipe (FIFO), not a file"), "{err}");
    assert!(!out.exists());
}

/// `--tokenizer` naming a device or a folder without a tokenizer says so (it said "no such
/// file").
#[test]
fn a_tokenizer_that_is_not_a_regular_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let o = out.to_str().unwrap();
    let s = fixture("claude-code/short.jsonl");
    let s = s.to_str().unwrap();
    for (tok, needle) in [
        (
            "/dev/zero",
            "is not a regular file (a tokenizer.json is expected)",
        ),
        (
            dir.path().to_str().unwrap(),
            "holds no tokenizer.json or tokenizer.json.gz",
        ),
    ] {
        refused(
            &["import", "claude-code", s, "--out", o, "--tokenizer", tok],
            &out,
            needle,
        );
    }
}

/// A model directory as Hugging Face ships it (gzipped tokenizer, the template in
/// chat_template.jinja, a config without one) imports exactly as the bundled name does, and
/// `--chat-template` picks another template; a directory without any template is one line.
#[test]
fn a_hugging_face_model_directory_and_chat_template() {
    let dir = tempfile::tempdir().unwrap();
    let assets = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/tokenizers/qwen3");
    let model = dir.path().join("Qwen3-8B");
    std::fs::create_dir(&model).unwrap();
    std::fs::copy(
        assets.join("tokenizer.json.gz"),
        model.join("tokenizer.json.gz"),
    )
    .unwrap();
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(assets.join("tokenizer_config.json")).unwrap())
            .unwrap();
    let mut bare = config.clone();
    bare.as_object_mut().unwrap().remove("chat_template");
    std::fs::write(model.join("tokenizer_config.json"), bare.to_string()).unwrap();
    let template = model.join("chat_template.jinja");
    std::fs::write(&template, config["chat_template"].as_str().unwrap()).unwrap();
    let src = fixture("claude-code/tool_heavy.jsonl");
    let argv = |out: &std::path::Path, extra: &[&str]| -> Vec<String> {
        let head = ["import", "claude-code", src.to_str().unwrap(), "--out"];
        let out = out.to_str().unwrap();
        head.iter()
            .chain(&[out])
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let import = |out: &std::path::Path, extra: &[&str]| {
        gyre(
            &argv(out, extra)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
    };
    let refused_by = |out: &std::path::Path, extra: &[&str], needle: &str| {
        refused(
            &argv(out, extra)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            out,
            needle,
        )
    };
    let (by_dir, by_name) = (dir.path().join("dir.jsonl"), dir.path().join("name.jsonl"));
    let (code, _, err) = import(&by_dir, &["--tokenizer", model.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = import(&by_name, &[]);
    assert_eq!(code, 0, "{err}");
    let (a, b) = (
        crate::import_common::lines(&by_dir),
        crate::import_common::lines(&by_name),
    );
    assert_eq!(
        a[0]["tokenizer"]["path"],
        model
            .join("tokenizer.json.gz")
            .canonicalize()
            .unwrap()
            .to_str()
            .unwrap()
    );
    assert_eq!(a[1..], b[1..]);
    // The header's .gz path shows the recording's tokens as text.
    let execution = a[1]["execution"].as_str().unwrap();
    let (code, text, err) = gyre(&["show", by_dir.to_str().unwrap(), "--execution", execution]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("<|im_start|>"), "{text}");

    // --chat-template moved out of the directory: the directory alone has none.
    let elsewhere = dir.path().join("coder.jinja");
    std::fs::rename(&template, &elsewhere).unwrap();
    let out = dir.path().join("none.jsonl");
    let err = refused_by(
        &out,
        &["--tokenizer", model.to_str().unwrap()],
        "no chat template",
    );
    assert!(err.contains("--chat-template FILE"), "{err}");
    let (code, _, err) = import(
        &out,
        &[
            "--tokenizer",
            model.to_str().unwrap(),
            "--chat-template",
            elsewhere.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(crate::import_common::lines(&out)[1..], b[1..]);

    // A template that refuses the conversation (as gpt-oss's and Llama 3's do some tool
    // histories) is one plain line naming the request, not an internal error.
    let strict = dir.path().join("strict.jinja");
    std::fs::write(
        &strict,
        "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tool turns \
         here') }}{% endif %}{{ m.content }}{% endfor %}",
    )
    .unwrap();
    let out = dir.path().join("strict.jsonl");
    let err = refused_by(
        &out,
        &["--chat-template", strict.to_str().unwrap()],
        "no tool turns here",
    );
    assert!(
        err.contains("tool_heavy.jsonl: ") && err.contains("of r2") && err.contains("refuses"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// The longest log line is bounded and `GYRE_MAX_LINE_MB` raises or lowers it, as for
/// recordings; the message names the line, the limit and the variable.
#[test]
fn the_line_limit_is_named_and_overridable() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let log = dir.path().join("traffic.jsonl");
    let good = std::fs::read_to_string(fixture("vllm/swe-agent-qwen3.jsonl")).unwrap();
    let long = format!("{{\"pad\": \"{}\"}}\n", "x".repeat(3 << 20));
    std::fs::write(
        &log,
        format!("{}{long}", good.lines().next().unwrap().to_owned() + "\n"),
    )
    .unwrap();
    let run = |mb: &str| {
        Command::new(env!("CARGO_BIN_EXE_gyre"))
            .args(["import", "vllm", log.to_str().unwrap(), "--force", "--out"])
            .arg(&out)
            .env("GYRE_MAX_LINE_MB", mb)
            .output()
            .unwrap()
    };
    let small = run("2");
    let err = String::from_utf8_lossy(&small.stderr);
    assert_eq!(small.status.code(), Some(2), "{err}");
    assert!(
        err.contains("traffic.jsonl:2: line longer than 2 MiB")
            && err.contains("set GYRE_MAX_LINE_MB to a larger number of MiB"),
        "{err}"
    );
    // With room for it, the line is read (and refused for what it is, a line with no call).
    let big = run("8");
    let err = String::from_utf8_lossy(&big.stderr);
    assert!(!err.contains("line longer"), "{err}");
}

/// The real gpt-oss files as Hugging Face ships them (config without a template,
/// chat_template.jinja beside it; any tokenizer.json renders text) import a conversation in
/// Harmony form, and Qwen3-Coder's template runs on the bundled tokenizer with
/// `--chat-template`, its tool calls in XML.
#[test]
fn gpt_oss_files_and_qwen3_coder_s_template() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let model = dir.path().join("gpt-oss-20b");
    std::fs::create_dir(&model).unwrap();
    for f in ["tokenizer_config.json", "chat_template.jinja"] {
        std::fs::copy(
            root.join("tests/fixtures/models/gpt-oss").join(f),
            model.join(f),
        )
        .unwrap();
    }
    std::fs::copy(
        root.join("assets/tokenizers/qwen3/tokenizer.json.gz"),
        model.join("tokenizer.json.gz"),
    )
    .unwrap();
    let out = dir.path().join("gpt-oss.jsonl");
    let src = fixture("claude-code/short.jsonl");
    let (code, _, err) = gyre(&[
        "import",
        "claude-code",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--tokenizer",
        model.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let lines = crate::import_common::lines(&out);
    let execution = lines[1]["execution"].as_str().unwrap();
    let (code, text, err) = gyre(&["show", out.to_str().unwrap(), "--execution", execution]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("<|start|>system<|message|>You are ChatGPT"),
        "{text}"
    );

    let coder = root.join("tests/fixtures/models/qwen3-coder/chat_template.jinja");
    let out = dir.path().join("coder.jsonl");
    let src = fixture("claude-code/tool_heavy.jsonl");
    let (code, _, err) = gyre(&[
        "import",
        "claude-code",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--chat-template",
        coder.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let execution = crate::import_common::lines(&out)[1]["execution"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, text, err) = gyre(&["show", out.to_str().unwrap(), "--execution", &execution]);
    assert_eq!(code, 0, "{err}");
    // Claude Code logs carry no tool definitions, so the calls show the template: XML, and a
    // boolean argument as Python's `str()` writes it.
    assert!(
        text.contains("<function=Bash>\n<parameter=command>\nmix phx.server\n</parameter>"),
        "{text}"
    );
    assert!(
        text.contains("<parameter=run_in_background>\nTrue\n</parameter>"),
        "{text}"
    );
}

/// Llama 3's template puts the tools in the first user message and raises when asked to
/// render a system message alone with them: the import still runs (the tool text stays
/// labelled as the user turn it sits in), and every later request extends the one before.
#[test]
fn llama3_s_template_imports_a_tool_trajectory() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.path().join("llama3.jsonl");
    let src = fixture("mini-swe-agent/v2-toolcall.traj.json");
    let (code, _, err) = gyre(&[
        "import",
        "mini-swe-agent",
        src.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--tokenizer",
        root.join("tests/fixtures/models/llama3").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let lines = crate::import_common::lines(&out);
    let requests: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["kind"] == "request").collect();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[1..].iter().all(|r| r["extends"].is_string()),
        "{requests:?}"
    );
    let (code, stats, err) = gyre(&["stats", "--json", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["divergences_in_outputs"], 0);
}
