//! `gyre import` on the command line: exit codes, file:line errors, no partial output.

mod import_common;

use std::process::Command;

use import_common::fixture;

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
        err.contains("session.jsonl:5: assistant message without an id (message.id)"),
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
    let line = gyre::import::json_element_lines(&text, Some("history"))[2];
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
            "bad.traj:{line}: message without a role (history[2].role)"
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
    let a = import_common::lines(&by_path);
    let b = import_common::lines(&by_name);
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
