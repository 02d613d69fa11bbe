//! docs/format.md §1 bad input through the real binary: "Invalid input gets a clear error naming file, line
//! and field (exit code 2), never a panic and never a partial output", `--lenient`, `validate`,
//! and compressed inputs. Expectations are written from docs/format.md, not from the engine's output.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn gyre(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(args)
        .output()
        .expect("gyre runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn lp(output: &[u32]) -> Vec<f64> {
    output.iter().map(|&t| -(t as f64) / 100.0).collect()
}

fn request(id: &str, input: &[u32], output: &[u32]) -> Value {
    json!({"kind": "request", "execution": "e1", "id": id, "input": input, "output": output,
           "logprobs": lp(output)})
}

const HEADER: &str = r#"{"kind":"header","format":"gyre/1"}"#;
const EXEC: &str = r#"{"kind":"execution","execution":"e1","t":0}"#;
const CLOSE: &str = r#"{"kind":"closure","execution":"e1","t":10,"status":"completed","artifact":"art","version":1}"#;
const ASSESS: &str = r#"{"kind":"assessment","execution":"e1","artifact":"art","version":1,"status":"valid","score":1.0,"t":11}"#;

/// A recording whose lines are `lines` (line 1 is `lines[0]`).
fn write_lines(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let p = dir.join(name);
    let mut s = lines.join("\n");
    s.push('\n');
    std::fs::write(&p, s).unwrap();
    p
}

/// Header, execution, `bad` on line 3 (after `before` on line 3.. when given), closure,
/// assessment. Returns the file and the 1-based line of the bad record.
fn with_bad_line(dir: &Path, before: &[Value], bad: &str) -> (PathBuf, u64) {
    let mut lines = vec![HEADER.to_string(), EXEC.to_string()];
    lines.extend(before.iter().map(Value::to_string));
    lines.push(bad.to_string());
    let bad_line = lines.len() as u64;
    lines.push(CLOSE.to_string());
    lines.push(ASSESS.to_string());
    (write_lines(dir, "bad.jsonl", &lines), bad_line)
}

/// Whether a diagnostic line names `field` as a word (`score`, `spans[1].end`, `(input[1])`).
fn names_field(entry: &str, field: &str) -> bool {
    entry
        .split(|c: char| !(c.is_alphanumeric() || "_[].".contains(c)))
        .any(|w| {
            w == field
                || w.strip_prefix(field)
                    .is_some_and(|rest| rest.starts_with('[') || rest.starts_with('.'))
        })
}

/// Runs `admit FILE --out X` and checks: exit 2, `FILE:LINE:` and `field` in the message, no X.
fn assert_rejected(before: &[Value], bad: &str, field: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (file, line) = with_bad_line(dir.path(), before, bad);
    let out_path = dir.path().join("admitted.jsonl");
    let out = gyre(&[
        "admit",
        file.to_str().unwrap(),
        "--out",
        out_path.to_str().unwrap(),
    ]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(2), "exit code; output:\n{msg}");
    let at = format!("{}:{line}:", file.display());
    let entry = msg
        .lines()
        .find(|l| l.contains(&at))
        .unwrap_or_else(|| panic!("expected {at:?} in:\n{msg}"));
    assert!(
        names_field(entry, field),
        "expected field {field:?} named in: {entry}"
    );
    assert!(!msg.contains("panicked"), "panic:\n{msg}");
    assert!(!out_path.exists(), "no output file may be written");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "bad.jsonl")
        .collect();
    assert!(leftovers.is_empty(), "partial files left: {leftovers:?}");
}

#[test]
fn malformed_json_is_rejected_with_file_and_line() {
    // No field can be named for a line that is not JSON; the message must say so.
    let dir = tempfile::tempdir().unwrap();
    let (file, line) = with_bad_line(
        dir.path(),
        &[],
        r#"{"kind":"request","execution":"e1","id":"r1","input":[1,2"#,
    );
    let out_path = dir.path().join("admitted.jsonl");
    let out = gyre(&[
        "admit",
        file.to_str().unwrap(),
        "--out",
        out_path.to_str().unwrap(),
    ]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(
        msg.contains(&format!("{}:{line}:", file.display())),
        "{msg}"
    );
    assert!(msg.to_lowercase().contains("json"), "{msg}");
    assert!(!out_path.exists());
    // Never a partial output on stdout either.
    let out = gyre(&["admit", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "{}", text(&out));
}

#[test]
fn wrong_type_of_input_is_rejected_naming_the_field() {
    let mut r = request("r1", &[1, 2], &[10]);
    r["input"] = json!("1 2");
    assert_rejected(&[], &r.to_string(), "input");
}

#[test]
fn wrong_type_of_execution_time_is_rejected_naming_the_field() {
    assert_rejected(
        &[],
        r#"{"kind":"execution","execution":"e2","t":"soon"}"#,
        "t",
    );
}

#[test]
fn wrong_type_of_spans_is_rejected_naming_the_field() {
    let mut r = request("r1", &[1, 2], &[10]);
    r["spans"] = json!({"end": 2});
    assert_rejected(&[], &r.to_string(), "spans");
}

#[test]
fn logprobs_length_differs_from_output_length() {
    let mut r = request("r1", &[1, 2], &[10, 11]);
    r["logprobs"] = json!([-0.1]);
    assert_rejected(&[], &r.to_string(), "logprobs");
}

#[test]
fn logprobs_missing_on_a_non_reconstructed_record() {
    let mut r = request("r1", &[1, 2], &[10]);
    r.as_object_mut().unwrap().remove("logprobs");
    assert_rejected(&[], &r.to_string(), "logprobs");
    // Explicitly not reconstructed is the same.
    let mut r = request("r1", &[1, 2], &[10]);
    r.as_object_mut().unwrap().remove("logprobs");
    r["meta"] = json!({"reconstructed": false});
    assert_rejected(&[], &r.to_string(), "logprobs");
}

#[test]
fn span_ends_not_increasing() {
    let mut r = request("r1", &[1, 2, 3], &[10]);
    r["spans"] = json!([{"end": 2, "source": "system"}, {"end": 2, "source": "user"}]);
    assert_rejected(&[], &r.to_string(), "spans");
    let mut r = request("r1", &[1, 2, 3], &[10]);
    r["spans"] = json!([{"end": 3, "source": "system"}, {"end": 1, "source": "user"}]);
    assert_rejected(&[], &r.to_string(), "spans");
}

#[test]
fn span_end_past_the_input() {
    let mut r = request("r1", &[1, 2, 3], &[10]);
    r["spans"] = json!([{"end": 2, "source": "system"}, {"end": 4, "source": "user"}]);
    assert_rejected(&[], &r.to_string(), "spans");
}

#[test]
fn span_end_past_the_new_tokens_of_a_delta_record() {
    // Spans label this record's `input` array: 2 new tokens, so end 3 is past it.
    let mut r = request("r2", &[3, 4], &[11]);
    r["extends"] = json!("r1");
    r["spans"] = json!([{"end": 3, "source": "tool"}]);
    assert_rejected(&[request("r1", &[1, 2], &[10])], &r.to_string(), "spans");
}

#[test]
fn tool_call_offsets_outside_the_output() {
    let mut r = request("r1", &[1, 2], &[10, 11]);
    r["tool_calls"] = json!([{"id": "call_1", "name": "bash", "start": 1, "end": 3}]);
    assert_rejected(&[], &r.to_string(), "tool_calls");
    let mut r = request("r1", &[1, 2], &[10, 11]);
    r["tool_calls"] = json!([{"id": "call_1", "name": "bash", "start": 2, "end": 1}]);
    assert_rejected(&[], &r.to_string(), "tool_calls");
}

#[test]
fn duplicate_request_id_in_one_execution() {
    let dup = request("r1", &[1, 2], &[11]).to_string();
    assert_rejected(&[request("r1", &[1, 2], &[10])], &dup, "id");
}

#[test]
fn extends_naming_an_unknown_request() {
    let mut r = request("r2", &[3], &[11]);
    r["extends"] = json!("r9");
    assert_rejected(&[request("r1", &[1, 2], &[10])], &r.to_string(), "extends");
}

#[test]
fn extends_naming_a_later_request() {
    // r2 (line 3) extends r3, which only appears on line 4.
    let dir = tempfile::tempdir().unwrap();
    let mut r2 = request("r2", &[3], &[11]);
    r2["extends"] = json!("r3");
    let lines = vec![
        HEADER.to_string(),
        EXEC.to_string(),
        r2.to_string(),
        request("r3", &[1, 2], &[10]).to_string(),
        CLOSE.to_string(),
        ASSESS.to_string(),
    ];
    let file = write_lines(dir.path(), "bad.jsonl", &lines);
    let out_path = dir.path().join("admitted.jsonl");
    let out = gyre(&[
        "admit",
        file.to_str().unwrap(),
        "--out",
        out_path.to_str().unwrap(),
    ]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(msg.contains(&format!("{}:3:", file.display())), "{msg}");
    assert!(msg.contains("extends"), "{msg}");
    assert!(!out_path.exists());
}

#[test]
fn valid_assessment_without_a_score() {
    assert_rejected(
        &[],
        r#"{"kind":"assessment","execution":"e1","artifact":"art","version":1,"status":"valid","t":11}"#,
        "score",
    );
}

#[test]
fn valid_assessment_with_a_non_numeric_score() {
    assert_rejected(
        &[],
        r#"{"kind":"assessment","execution":"e1","artifact":"art","version":1,"status":"valid","score":"0.5","t":11}"#,
        "score",
    );
    assert_rejected(
        &[],
        r#"{"kind":"assessment","execution":"e1","artifact":"art","version":1,"status":"valid","score":null,"t":11}"#,
        "score",
    );
}

#[test]
fn valid_assessment_with_a_non_finite_score() {
    // JSON has no NaN/Infinity literals; 1e999 overflows to infinity.
    assert_rejected(
        &[],
        r#"{"kind":"assessment","execution":"e1","artifact":"art","version":1,"status":"valid","score":1e999,"t":11}"#,
        "score",
    );
}

#[test]
fn token_id_negative() {
    let mut r = request("r1", &[1, 2], &[10]);
    r["input"] = json!([1, -2]);
    assert_rejected(&[], &r.to_string(), "input");
}

#[test]
fn token_id_at_or_above_2_pow_32() {
    let mut r = request("r1", &[1, 2], &[10]);
    r["output"] = json!([4294967296u64]);
    assert_rejected(&[], &r.to_string(), "output");
}

#[test]
fn token_id_not_an_integer() {
    let mut r = request("r1", &[1, 2], &[10]);
    r["input"] = json!([1.5, 2]);
    assert_rejected(&[], &r.to_string(), "input");
    let mut r = request("r1", &[1, 2], &[10]);
    r["output"] = json!(["10"]);
    assert_rejected(&[], &r.to_string(), "output");
}

/// docs/format.md §8: "an existing file is not overwritten without --force"; §1: "never a partial output".
#[test]
fn existing_out_is_untouched_on_invalid_input_and_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = request("r1", &[1, 2], &[10, 11]);
    r["logprobs"] = json!([-0.1]);
    let (bad, _) = with_bad_line(dir.path(), &[], &r.to_string());
    let good = write_lines(
        dir.path(),
        "good.jsonl",
        &[
            HEADER.to_string(),
            request("r1", &[1, 2], &[10]).to_string(),
            CLOSE.to_string(),
            ASSESS.to_string(),
        ],
    );
    let out_path = dir.path().join("admitted.jsonl");
    std::fs::write(&out_path, "previous export\n").unwrap();
    let o = out_path.to_str().unwrap();

    // Invalid input, even with --force: exit 2, the old file stays.
    let out = gyre(&["admit", bad.to_str().unwrap(), "--out", o, "--force"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(&out_path).unwrap(),
        "previous export\n"
    );

    // Valid input without --force: refused, old file stays.
    let out = gyre(&["admit", good.to_str().unwrap(), "--out", o]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(&out_path).unwrap(),
        "previous export\n"
    );

    // Valid input with --force: replaced by the one admitted row.
    let out = gyre(&["admit", good.to_str().unwrap(), "--out", o, "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let written = std::fs::read_to_string(&out_path).unwrap();
    assert_eq!(written.lines().count(), 1);
    let row: Value = serde_json::from_str(written.lines().next().unwrap()).unwrap();
    assert_eq!(row["leaf"], "r1");
    let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(leftovers, 3, "only bad.jsonl, good.jsonl and the export");
}

/// docs/format.md §1: "--lenient turns per-line errors into counted warnings and skips those lines".
#[test]
fn lenient_skips_bad_lines_with_a_count_and_still_exports() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad_r2 = request("r2", &[1, 2, 10, 3], &[11, 12]);
    bad_r2["logprobs"] = json!([-0.1]);
    let e2 = |v: Value| {
        let mut v = v;
        v["execution"] = json!("e2");
        v.to_string()
    };
    let lines = vec![
        HEADER.to_string(),
        request("r1", &[1, 2], &[10]).to_string(),
        bad_r2.to_string(),
        CLOSE.to_string(),
        ASSESS.to_string(),
        e2(request("r1", &[5], &[20])),
        "{not json".to_string(),
        e2(serde_json::from_str(CLOSE).unwrap()),
        e2(serde_json::from_str(ASSESS).unwrap()),
    ];
    let file = write_lines(dir.path(), "mixed.jsonl", &lines);
    let f = file.to_str().unwrap();

    let strict = gyre(&["admit", f]);
    assert_eq!(strict.status.code(), Some(2), "{}", text(&strict));

    let out_path = dir.path().join("admitted.jsonl");
    let out = gyre(&["admit", f, "--lenient", "--out", out_path.to_str().unwrap()]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(0), "{msg}");
    assert!(
        msg.lines()
            .any(|l| l.contains("skipped") && l.contains(" 2 ")),
        "count of skipped lines:\n{msg}"
    );
    assert!(msg.contains(&format!("{f}:3:")), "{msg}");
    assert!(msg.contains(&format!("{f}:7:")), "{msg}");
    let rows: Vec<Value> = std::fs::read_to_string(&out_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(String, Vec<u64>)> = rows
        .iter()
        .map(|r| {
            (
                r["execution"].as_str().unwrap().to_string(),
                r["tokens"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t.as_u64().unwrap())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("e1".to_string(), vec![1, 2, 10]),
            ("e2".to_string(), vec![5, 20])
        ]
    );

    // stats --json reports the skipped lines too.
    let out = gyre(&["stats", f, "--lenient", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["skipped_lines"], 2);
    assert_eq!(s["executions"], 2);
    assert_eq!(s["scored"], 2);
}

/// docs/format.md §1: under --lenient, "whole executions whose tree can no longer be built" are skipped.
#[test]
fn lenient_drops_an_execution_whose_tree_cannot_be_built() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad_r1 = request("r1", &[1, 2], &[10, 11]);
    bad_r1["logprobs"] = json!([-0.1]);
    let mut r2 = request("r2", &[3], &[12]);
    r2["extends"] = json!("r1");
    let mut good = request("r1", &[1, 2], &[10]);
    good["execution"] = json!("ok");
    let ok = |s: &str| s.replace("\"e1\"", "\"ok\"");
    let lines = vec![
        HEADER.to_string(),
        bad_r1.to_string(),
        r2.to_string(),
        CLOSE.to_string(),
        ASSESS.to_string(),
        good.to_string(),
        ok(CLOSE),
        ok(ASSESS),
    ];
    let file = write_lines(dir.path(), "drop.jsonl", &lines);
    let out = gyre(&["admit", file.to_str().unwrap(), "--lenient"]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(0), "{msg}");
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{msg}");
    assert_eq!(rows[0]["execution"], "ok");
    assert_eq!(rows[0]["batch_executions"], 1);
}

/// `gyre validate` "print every problem as file:line and exit 2 if there is any".
#[test]
fn validate_lists_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let mut lp_bad = request("r2", &[1, 2], &[10, 11]);
    lp_bad["logprobs"] = json!([-0.1]);
    let mut span_bad = request("r3", &[1, 2], &[10]);
    span_bad["spans"] = json!([{"end": 5}]);
    let lines = vec![
        HEADER.to_string(),
        request("r1", &[1, 2], &[10]).to_string(),
        lp_bad.to_string(),
        "not json at all".to_string(),
        span_bad.to_string(),
        request("r1", &[1, 2], &[12]).to_string(),
        r#"{"kind":"assessment","execution":"e1","artifact":"art","version":1,"status":"valid","t":11}"#.to_string(),
    ];
    let file = write_lines(dir.path(), "many.jsonl", &lines);
    let f = file.to_str().unwrap();
    let out = gyre(&["validate", f]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    for (line, field) in [
        (3, "logprobs"),
        (4, ""),
        (5, "spans"),
        (6, "id"),
        (7, "score"),
    ] {
        let entry = msg
            .lines()
            .find(|l| l.contains(&format!("{f}:{line}:")))
            .unwrap_or_else(|| panic!("line {line} not reported:\n{msg}"));
        assert!(
            field.is_empty() || names_field(entry, field),
            "line {line} should name {field:?}: {entry}"
        );
    }
    assert!(!msg.contains(&format!("{f}:2:")), "line 2 is valid:\n{msg}");

    // A warning beside the problems is listed too (it was dropped when there were problems).
    let mixed = write_lines(
        dir.path(),
        "mixed.jsonl",
        &[
            HEADER.to_string(),
            r#"{"kind":"bogus"}"#.to_string(),
            "not json at all".to_string(),
        ],
    );
    let out = gyre(&["validate", mixed.to_str().unwrap()]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(
        msg.contains("warning: ") && msg.contains("mixed.jsonl:2: unknown kind"),
        "{msg}"
    );
    assert!(msg.contains("mixed.jsonl:3: "), "{msg}");

    // A valid file validates with exit 0.
    let good = write_lines(
        dir.path(),
        "good.jsonl",
        &[
            HEADER.to_string(),
            request("r1", &[1, 2], &[10]).to_string(),
            CLOSE.to_string(),
            ASSESS.to_string(),
        ],
    );
    let out = gyre(&["validate", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// docs/format.md §1: "Input is JSON Lines (.jsonl, or .jsonl.gz/.jsonl.zst)": compressed inputs load the
/// same as plain, for admit, stats and validate.
#[test]
fn gzip_and_zstd_inputs_load_like_plain() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = vec![HEADER.to_string()];
    for k in 0..4u32 {
        lines.push(request(&format!("r{k}"), &[1, 2], &[10 + k, 20]).to_string());
    }
    let mut r = request("r9", &[3], &[30]);
    r["extends"] = json!("r1");
    lines.push(r.to_string());
    lines.push(CLOSE.to_string());
    lines.push(ASSESS.to_string());
    let plain = write_lines(dir.path(), "rec.jsonl", &lines);
    let bytes = std::fs::read(&plain).unwrap();

    let gz = dir.path().join("rec.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&bytes).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();

    let zst = dir.path().join("rec.jsonl.zst");
    std::fs::write(&zst, zstd::encode_all(&bytes[..], 3).unwrap()).unwrap();

    let admit = |p: &Path| {
        let out = gyre(&["admit", p.to_str().unwrap(), "--jmax", "0", "--seed", "9"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        out.stdout
    };
    let want = admit(&plain);
    assert_eq!(String::from_utf8(want.clone()).unwrap().lines().count(), 4);
    assert_eq!(admit(&gz), want);
    assert_eq!(admit(&zst), want);

    let stats = |p: &Path| {
        let out = gyre(&["stats", p.to_str().unwrap(), "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["requests"].clone(),
            v["tree_tokens"].clone(),
            v["scored"].clone(),
        )
    };
    assert_eq!(stats(&plain), (json!(5), json!(12), json!(1)));
    assert_eq!(stats(&gz), stats(&plain));
    assert_eq!(stats(&zst), stats(&plain));

    for p in [&gz, &zst] {
        let out = gyre(&["validate", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }

    // A corrupt line inside a compressed file is still reported with its line number.
    let mut bad_lines = lines.clone();
    bad_lines[2] = "{oops".to_string();
    let bad_plain = bad_lines.join("\n") + "\n";
    let bad_gz = dir.path().join("bad.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bad_plain.as_bytes()).unwrap();
    std::fs::write(&bad_gz, enc.finish().unwrap()).unwrap();
    let out = gyre(&["validate", bad_gz.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{}:3:", bad_gz.display())),
        "{}",
        text(&out)
    );
}

/// A flood of bad lines (issue 19 §4: a small zstd file expanding to gigabytes of them): reading
/// stops at `--max-problems` (1000 by default), says where and how to count them all; `0` reads
/// to the end.
#[test]
fn validate_stops_a_flood_of_problems_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let n = 100_000;
    let plain = "not a record\n".repeat(n);
    let flood = dir.path().join("flood.jsonl.zst");
    std::fs::write(&flood, zstd::encode_all(plain.as_bytes(), 19).unwrap()).unwrap();
    let f = flood.to_str().unwrap();

    let out = gyre(&["validate", f]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let listed: Vec<&str> = stdout.lines().collect();
    assert_eq!(listed.len(), 1000, "{stderr}");
    assert!(
        listed[999].starts_with(&format!("{f}:1000: ")),
        "{}",
        listed[999]
    );
    assert!(
        stderr.contains(&format!("reading stopped at {f}:1000 after 1000 problems"))
            && stderr.contains("--max-problems 0"),
        "{stderr}"
    );

    let out = gyre(&["validate", f, "--max-problems", "7"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 7, "{}", text(&out));
    assert!(text(&out).contains(&format!("reading stopped at {f}:7 after 7 problems")));

    // 0: every line is read and counted; the first thousand are listed.
    let out = gyre(&["validate", f, "--max-problems", "0"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stdout.lines().count(), 1001, "{stderr}");
    assert!(stdout.ends_with("… and 99000 more (only the first 1000 are kept)\n"));
    assert!(stderr.contains("100000 problems"), "{stderr}");
    assert!(!stderr.contains("reading stopped"), "{stderr}");

    // Other commands stop too, and point at `validate` for the rest.
    let out = gyre(&["stats", f]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("reading stopped at") && text(&out).contains("after 1000 problems"),
        "{}",
        text(&out)
    );
}
