//! What a new user hits in the first hour, through the real binary: bad usage and unwritable
//! outputs are one plain line and exit 2 before any work, non-JSONL input is named for what it
//! is, ids from a recording never reach the terminal raw, memory stays bounded on hostile
//! input, a closed pipe is a normal end, and a signal never leaves a temporary file behind.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn gyre() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gyre"));
    c.env_remove("NO_COLOR").env_remove("GYRE_MAX_LINE_MB");
    c
}

/// Runs `cmd` with no stdin; fails the test instead of hanging past 60 s.
fn run(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gyre runs");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("gyre hung: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn both(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Exit 2 and exactly one plain line on stderr (no colour, no report, no source location).
fn assert_one_plain_line(out: &Output, expect: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", both(out));
    assert_eq!(err.lines().count(), 1, "one line expected:\n{err}");
    assert!(!err.contains('\u{1b}'), "colour in: {err}");
    assert!(
        !err.contains("Location") && !err.contains(".rs:"),
        "report: {err}"
    );
    assert!(err.contains(expect), "expected {expect:?} in: {err}");
}

fn lp(output: &[u32]) -> Vec<f64> {
    output.iter().map(|_| -0.25).collect()
}

fn write(dir: &Path, name: &str, lines: &[Value]) -> PathBuf {
    let p = dir.join(name);
    let mut text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    if text.is_empty() {
        text.push('\n');
    }
    std::fs::write(&p, text).unwrap();
    p
}

/// One scored execution `id` with requests `r1` (and `r2` extending it).
fn execution(id: &str, r1: &str) -> Vec<Value> {
    vec![
        json!({"kind": "execution", "execution": id, "t": 0, "group": "g"}),
        json!({"kind": "request", "execution": id, "id": r1, "input": [1, 2], "output": [3, 4],
               "logprobs": lp(&[3, 4]),
               "tool_calls": [{"id": "call\u{1b}[31m", "name": "bash", "start": 0, "end": 1}]}),
        json!({"kind": "request", "execution": id, "id": "r2", "input": [5], "output": [6],
               "logprobs": lp(&[6]), "extends": r1,
               "spans": [{"end": 1, "source": "tool", "call_id": "call\u{1b}[31m"}]}),
        json!({"kind": "closure", "execution": id, "t": 5, "status": "completed",
               "artifact": "a", "version": 1}),
        json!({"kind": "assessment", "execution": id, "artifact": "a", "version": 1,
               "status": "valid", "score": 1.0, "t": 5}),
    ]
}

fn example() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo/example.jsonl")
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".gyre-out-"))
        .collect()
}

#[test]
fn unwritable_outputs_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("adir")).unwrap();
    // The input does not exist: the --out problem must be found first.
    let missing_input = d.join("missing.jsonl");
    let missing = missing_input.to_str().unwrap();
    for (out, force, expect) in [
        (d.join("nodir/x.jsonl"), false, "does not exist"),
        (d.join("adir"), false, "is a directory"),
        (d.join("adir"), true, "is a directory"),
        (PathBuf::from("/dev/null"), true, "not a regular file"),
    ] {
        let mut cmd = gyre();
        cmd.args(["admit", missing, "--out", out.to_str().unwrap()]);
        if force {
            cmd.arg("--force");
        }
        assert_one_plain_line(&run(&mut cmd), expect);
        let out = run(gyre().args(["synth", "--out", out.to_str().unwrap(), "--force"]));
        assert_one_plain_line(&out, expect);
    }
    assert!(std::fs::read_dir(d.join("adir")).unwrap().next().is_none());
}

#[test]
fn a_bad_tokenizer_is_one_line_before_the_input_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let missing_input = dir.path().join("missing.jsonl");
    let not_json = dir.path().join("tok.json");
    std::fs::write(&not_json, "not a tokenizer").unwrap();
    for (arg, expect) in [
        ("nonexistent", "no bundled tokenizer and no file"),
        ("/dev/zero", "not a regular file"),
        (not_json.to_str().unwrap(), "not a usable tokenizer.json"),
    ] {
        let out = run(gyre().args([
            "show",
            missing_input.to_str().unwrap(),
            "--execution",
            "e1",
            "--tokenizer",
            arg,
        ]));
        assert_one_plain_line(&out, expect);
    }
}

#[test]
fn the_header_tokenizer_is_checked_by_validate_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fifo = d.join("fifo.json");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success(),
        "mkfifo"
    );
    std::fs::write(d.join("junk.json"), "[1, 2]").unwrap();
    let records: Vec<Value> = execution("e1", "r1");
    for (spec, expect) in [
        (json!({"path": "/dev/zero"}), "not a regular file"),
        (json!({"path": "/dev/stdin"}), "not a regular file"),
        (json!({"path": "fifo.json"}), "not a regular file"),
        (json!({"path": "nowhere.json"}), "does not exist"),
        (json!({"path": "junk.json"}), "not a usable tokenizer.json"),
        (json!("qwen9"), "unknown bundled tokenizer"),
        (json!({"vocab": [1]}), "vocab[0]"),
    ] {
        let mut lines = vec![json!({"kind": "header", "format": "gyre/1", "tokenizer": spec})];
        lines.extend(records.iter().cloned());
        let file = write(d, "rec.jsonl", &lines);
        let out = run(gyre().args(["validate", file.to_str().unwrap()]));
        let text = both(&out);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains(&format!("{}:1:", file.display())), "{text}");
        assert!(
            text.contains(expect) && text.contains("(tokenizer"),
            "{text}"
        );
        let out = run(gyre().args(["show", file.to_str().unwrap(), "-e", "e1"]));
        assert_eq!(out.status.code(), Some(2), "{}", both(&out));
    }
}

#[test]
fn inspect_without_a_terminal_says_so() {
    let out = run(gyre().args(["inspect", example()]));
    assert_one_plain_line(&out, "needs a terminal");
    assert!(out.stdout.is_empty(), "nothing drawn into the redirect");
}

#[test]
fn non_jsonl_input_is_named_for_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines: Vec<Value> = std::fs::read_to_string(example())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let array = d.join("array.json");
    std::fs::write(&array, serde_json::to_string_pretty(&lines).unwrap()).unwrap();
    let out = run(gyre().args(["validate", array.to_str().unwrap()]));
    let text = both(&out);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text.matches("JSON array, not JSONL").count(), 1, "{text}");
    assert!(text.contains("1 problem\n"), "{text}");

    let pretty = d.join("doc.json");
    std::fs::write(&pretty, serde_json::to_string_pretty(&lines[1]).unwrap()).unwrap();
    let out = run(gyre().args(["validate", pretty.to_str().unwrap()]));
    assert!(
        both(&out).contains("pretty-printed JSON document"),
        "{}",
        both(&out)
    );

    let bom = d.join("bom.jsonl");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(example()).unwrap());
    std::fs::write(&bom, bytes).unwrap();
    let out = run(gyre().args(["validate", bom.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));

    let odd = d.join("odd.jsonl");
    std::fs::write(&odd, "{kind\n\"text\"\n[1]\n{\"kind\":\"execution\",\"execution\":\"e\",\"t\":0,\"t\":1}\n{\"kind\":\"closure\",\"execution\":\"e\",\"t\":1,\"status\":\"completed\",\"meta\":{\"a\":1,\"a\":[2]}}\n{\"kind\":\"request\",\"execution\":\"e\",\"id\":\"r\",\"input\":[1],\"output\":[2],\"logprobs\":[0],\"spans\":[{\"end\":1,\"source\":\"tool\",\"source\":\"user\"}]}\n").unwrap();
    let out = run(gyre().args(["validate", odd.to_str().unwrap()]));
    let text = both(&out);
    assert!(text.contains("odd.jsonl:1: malformed JSON"), "{text}");
    assert!(!text.contains("(?)") && !text.contains("Raw"), "{text}");
    assert!(text.contains("odd.jsonl:2: a record must be a JSON object, found a string"));
    assert!(text.contains("odd.jsonl:3: a record must be a JSON object, found an array"));
    assert!(text.contains("odd.jsonl:4: duplicate key \"t\""), "{text}");
    assert!(text.contains("odd.jsonl:5: duplicate key \"a\""), "{text}");
    assert!(text.contains("(meta.a)"), "{text}");
    // Inside an array element the path names the element (it said only `source`).
    assert!(
        text.contains("odd.jsonl:6: duplicate key \"source\" in one object (spans[0].source)"),
        "{text}"
    );
}

/// `ESC ] 0 ; title BEL ESC [ 2 J`: retitles the window and clears the screen when printed raw.
const HOSTILE: &str = "e\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}1m\u{202e}";

#[test]
fn ids_from_a_recording_never_reach_the_terminal_raw() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut lines = execution(HOSTILE, HOSTILE);
    lines[4]["critique"] = json!(HOSTILE);
    let file = write(d, "hostile.jsonl", &lines);
    let f = file.to_str().unwrap();
    let mut dup = lines.clone();
    dup.push(lines[1].clone());
    let dup_file = write(d, "dup.jsonl", &dup);
    let runs: Vec<Vec<&str>> = vec![
        vec!["show", f, "-e", HOSTILE],
        vec!["show", f, "-e", HOSTILE, "--runs"],
        vec!["show", f, "-e", HOSTILE, "--request", HOSTILE],
        vec!["show", f, "-e", HOSTILE, "--request", "r\u{1b}[2J"],
        vec!["replay", f, "-e", HOSTILE],
        vec!["replay", f, "-e", HOSTILE, "--json"],
        vec!["replay", f, "-e", "nope\u{1b}[2J"],
        vec!["stats", f],
        vec!["stats", f, "--json"],
        vec!["validate", dup_file.to_str().unwrap()],
        vec!["admit", dup_file.to_str().unwrap()],
        vec!["admit", f, "--out", "-"],
        vec!["why", f, "-e", HOSTILE, "--request", HOSTILE],
        vec!["why", f, "-e", HOSTILE, "--request", HOSTILE, "--json"],
        vec!["why", f, "-e", HOSTILE, "--request", "r\u{1b}[2J"],
        vec!["diff", f, "--a", "jmax=1", "--b", "jmax=0"],
        vec!["diff", f, "--a", "jmax=1", "--b", "jmax=0", "--json"],
        vec!["sweep", f],
        vec!["sweep", f, "--json"],
    ];
    for args in runs {
        let out = run(gyre().args(&args));
        for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(
                !text.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}']),
                "{args:?} wrote a raw control to {name}: {text:?}"
            );
        }
        // Totals only: stats, sweep, and a text diff in which no execution changed.
        let totals = matches!(args[0], "stats" | "sweep") || args[0] == "diff" && args.len() == 6;
        if !totals {
            assert!(
                both(&out).contains("␛") || both(&out).contains("\\u001b"),
                "{args:?} shows the id: {}",
                both(&out)
            );
        }
    }
}

#[test]
fn over_long_lines_are_refused_naming_the_line_and_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = execution("e1", "r1");
    let ids: Vec<u32> = (0..400_000).collect();
    lines.insert(
        2,
        json!({"kind": "request", "execution": "e1", "id": "big", "input": ids, "output": [1],
               "logprobs": [-0.1]}),
    );
    let file = write(dir.path(), "long.jsonl", &lines);
    let f = file.to_str().unwrap();
    let out = run(gyre().args(["validate", f]).env("GYRE_MAX_LINE_MB", "1"));
    let text = both(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("long.jsonl:3: line is longer than the limit of 1 MiB"),
        "{text}"
    );
    assert!(text.contains("GYRE_MAX_LINE_MB"), "{text}");
    let out = run(gyre()
        .args(["stats", f, "--lenient"])
        .env("GYRE_MAX_LINE_MB", "1"));
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(both(&out).contains("skipped 1 line"), "{}", both(&out));
    let out = run(gyre().args(["validate", f]));
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
}

#[test]
fn many_problems_are_counted_and_the_first_thousand_listed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("empty.jsonl");
    std::fs::write(&file, "{}\n".repeat(5000)).unwrap();
    // Read to the end: every problem counted, the first thousand listed.
    let out = run(gyre().args(["validate", file.to_str().unwrap(), "--max-problems", "0"]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stdout.lines().count(), 1001, "{stdout}");
    assert!(stdout.contains("empty.jsonl:1000: missing field `kind`"));
    assert!(stdout.contains("… and 4000 more"), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("5000 problems"));
    // By default reading stops at the thousandth, and says so.
    let out = run(gyre().args(["validate", file.to_str().unwrap()]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1000, "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("after 1000 problems"));
    let out = run(gyre().args(["admit", file.to_str().unwrap()]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("… and 980 more problems")
            && err.contains(":1000 after 1000 problems; the rest of the input was not read"),
        "{err}"
    );
}

#[test]
fn counts_and_hints_read_right() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = write(d, "one.jsonl", &execution("e1", "r1"));
    let out = run(gyre()
        .args(["admit", file.to_str().unwrap(), "--out"])
        .arg(d.join("o.jsonl")));
    assert!(
        both(&out).contains("wrote 1 row (1 execution, B = 1)"),
        "{}",
        both(&out)
    );
    let out = run(gyre().args(["stats", file.to_str().unwrap(), "--jmax", "1"]));
    assert!(
        both(&out).contains("J_max reached in 1 execution)"),
        "{}",
        both(&out)
    );
    let out = run(gyre().args(["stats", file.to_str().unwrap(), "--jmax", "-1"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(!both(&out).contains("-- -1"), "{}", both(&out));
    assert!(
        both(&out).contains("J_max is a number of draws"),
        "{}",
        both(&out)
    );
    // A repeated id in a second file names the first file.
    let first = write(d, "a.jsonl", &execution("e1", "r1")[..2]);
    let second = write(d, "b.jsonl", &execution("e1", "r1")[1..2]);
    let out = run(gyre().args(["validate"]).arg(&first).arg(&second));
    let text = both(&out);
    assert!(text.contains(&format!("{}:1:", second.display())), "{text}");
    assert!(
        text.contains(&format!("first at {}:2", first.display())),
        "{text}"
    );
}

#[test]
fn scores_beyond_1e300_are_refused_and_large_ones_keep_finite_advantages() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for (i, score) in [1e300, -1e300, 1e300, 1e300].into_iter().enumerate() {
        let mut e = execution(&format!("e{i}"), "r1");
        e[4]["score"] = json!(score);
        lines.extend(e);
    }
    let file = write(dir.path(), "big.jsonl", &lines);
    for mode in ["drgrpo", "grpo"] {
        let out = run(gyre().args(["admit", file.to_str().unwrap(), "--advantage", mode]));
        assert_eq!(out.status.code(), Some(0), "{}", both(&out));
        for row in String::from_utf8_lossy(&out.stdout).lines() {
            let row: Value = serde_json::from_str(row).unwrap();
            assert!(
                row["advantage"].as_f64().is_some_and(f64::is_finite),
                "{row}"
            );
        }
    }
    lines[4]["score"] = json!(1.7e308);
    let file = write(dir.path(), "huge.jsonl", &lines);
    let out = run(gyre().args(["validate", file.to_str().unwrap()]));
    let text = both(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("huge.jsonl:5:") && text.contains("(score)"),
        "{text}"
    );
}

/// `sh -c SCRIPT` with the exit status of gyre (the first command of the pipeline).
fn pipeline(script: &str) -> Output {
    run(Command::new("bash")
        .arg("-c")
        .arg(format!("{script}; exit ${{PIPESTATUS[0]}}"))
        .env("GYRE", env!("CARGO_BIN_EXE_gyre")))
}

#[test]
fn a_closed_pipe_is_a_normal_end() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("empty.jsonl");
    std::fs::write(&file, "{}\n".repeat(3000)).unwrap();
    let f = file.display();
    for _ in 0..5 {
        // stdout and stderr both into a reader that stops after one line.
        let out = pipeline(&format!("\"$GYRE\" validate {f} 2>&1 | head -1 >/dev/null"));
        assert_eq!(out.status.code(), Some(2), "{}", both(&out));
        let out = pipeline(&format!(
            "\"$GYRE\" admit {f} --lenient 2>&1 >/dev/null | head -1 >/dev/null"
        ));
        assert_eq!(out.status.code(), Some(0), "{}", both(&out));
        let out = pipeline(&format!(
            "\"$GYRE\" show {} -e e1 --runs | head -1 >/dev/null",
            example()
        ));
        assert_eq!(out.status.code(), Some(0), "{}", both(&out));
        let out = pipeline("\"$GYRE\" 2>&1 | head -1 >/dev/null");
        assert_eq!(out.status.code(), Some(0), "{}", both(&out));
        // JSON goes out through serde_json, which wraps the I/O error (it was an internal error).
        let demo = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/assets/demo/inspector.jsonl.zst"
        );
        for json in [
            format!("diff {demo} --a jmax=2 --b jmax=0 --json"),
            format!("replay {demo} --execution e0000 --json"),
            format!("sweep {demo} --seeds 2 --json"),
        ] {
            let out = pipeline(&format!("\"$GYRE\" {json} | head -c1 >/dev/null"));
            assert_eq!(out.status.code(), Some(0), "{json}: {}", both(&out));
            assert!(out.stderr.is_empty(), "{json}: {}", both(&out));
        }
    }
}

/// Starts `args`, waits until its hidden temporary file exists in `dir`, sends `signal`, and
/// checks that it died of it leaving no temporary file and no output.
fn signal_leaves_nothing(args: &[&str], dir: &Path, out: &Path, signal: i32) {
    let mut child = gyre()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while leftovers(dir).is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "{args:?} ended before its temporary file was seen"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no temporary file"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    #[allow(unsafe_code)]
    let sent = unsafe { libc::kill(child.id() as i32, signal) };
    assert_eq!(sent, 0);
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(signal), "{args:?}: {status:?}");
    assert!(
        leftovers(dir).is_empty(),
        "{args:?} left {:?}",
        leftovers(dir)
    );
    assert!(!out.exists(), "{args:?} left a partial output");
}

#[test]
fn signals_remove_the_temporary_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("out.jsonl.zst");
    let o = out.to_str().unwrap();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        signal_leaves_nothing(
            &["synth", "--out", o, "--executions", "100000"],
            d,
            &out,
            signal,
        );
    }
    // admit and import open the output first, then block reading a FIFO nobody writes.
    let fifo = d.join("input.jsonl");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let f = fifo.to_str().unwrap();
    signal_leaves_nothing(&["admit", f, "--out", o], d, &out, libc::SIGTERM);
    signal_leaves_nothing(&["import", "vllm", f, "--out", o], d, &out, libc::SIGINT);
}

#[test]
fn errors_do_not_leave_the_temporary_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bad = d.join("bad.jsonl");
    let mut f = std::fs::File::create(&bad).unwrap();
    writeln!(
        f,
        "{{\"kind\":\"execution\",\"execution\":\"e\",\"t\":\"x\"}}"
    )
    .unwrap();
    let out = d.join("out.jsonl");
    let r = run(gyre().args(["admit"]).arg(&bad).arg("--out").arg(&out));
    assert_eq!(r.status.code(), Some(2));
    assert!(leftovers(d).is_empty() && !out.exists());
}

#[test]
fn a_missing_input_is_named_without_an_os_error_number() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.jsonl");
    for cmd in ["stats", "validate", "admit"] {
        let out = run(gyre().arg(cmd).arg(&missing));
        let err = both(&out);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains(&format!("{}: cannot read: no such file", missing.display())),
            "{cmd}: {err}"
        );
        assert!(!err.contains("os error"), "{cmd}: {err}");
    }
}
