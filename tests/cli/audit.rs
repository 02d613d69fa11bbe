//! `gyre audit` end to end: gyre's own rows audit clean (every bundled demo, `gyre synth`
//! batches), a planted defect is reported with a `gyre show` command that displays it, the
//! exit codes, the JSON's shape and `--help`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn gyre() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gyre"))
}

fn demo(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/demo")
        .join(name)
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

fn ok(cmd: &mut Command) -> Output {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `gyre audit REC T --json` on the rows `gyre admit REC --format trained` writes.
fn audit_own_rows(rec: &Path, dir: &Path, settings: &[&str]) -> (i32, Value) {
    let rows = dir.join("trained.jsonl");
    ok(gyre()
        .arg("admit")
        .arg(rec)
        .args(settings)
        .args(["--format", "trained", "--force", "-o"])
        .arg(&rows));
    let out = run(gyre().arg("audit").arg(rec).arg(&rows).arg("--json"));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    (out.status.code().unwrap(), json)
}

#[test]
fn gyre_admit_rows_audit_clean_on_the_demos_and_synth_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut recordings: Vec<PathBuf> = [
        "example.jsonl",
        "inspector.jsonl.zst",
        "claude-code.jsonl.zst",
    ]
    .iter()
    .map(|n| demo(n))
    .collect();
    for (i, args) in [
        &["--executions", "12"][..],
        &["--executions", "12", "--delta", "--seed", "7"],
        &["--executions", "6", "--turns", "30", "--seed", "3"],
    ]
    .iter()
    .enumerate()
    {
        let path = dir.path().join(format!("synth-{i}.jsonl"));
        ok(gyre().arg("synth").args(*args).arg("--out").arg(&path));
        recordings.push(path);
    }
    for rec in &recordings {
        for settings in [&[][..], &["--jmax", "0"], &["--jmax", "1", "--seed", "4"]] {
            let (code, json) = audit_own_rows(rec, dir.path(), settings);
            assert!(
                json["samples"].as_u64().unwrap() > 0,
                "{rec:?} {settings:?}"
            );
            assert_eq!(
                (code, &json["findings"]),
                (0, &Value::Array(Vec::new())),
                "{rec:?} {settings:?}"
            );
            assert_eq!(json["duplication"]["factor"], 1.0);
        }
    }
}

/// A trainer's import (requests and trained records in one file) whose second sample trains
/// the first turn again.
const TWICE: &str = r#"{"kind":"header","format":"gyre/1","trainer":{"name":"slime","loss_agg":"token-mean"}}
{"kind":"request","execution":"e1","id":"r1","input":[1,2,3],"output":[4,5,6,7],"logprobs":[-0.1,-0.2,-0.3,-0.4]}
{"kind":"request","execution":"e1","id":"r2","input":[1,2,3,4,5,6,7,8,9],"output":[10,11,12,13],"logprobs":[-0.5,-0.6,-0.7,-0.8]}
{"kind":"trained","execution":"e1","sample":"0","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7}],"loss_mask":[1,1,1,1]}
{"kind":"trained","execution":"e1","sample":"1","prompt_len":3,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[1,1,1,1,0,0,1,1,1,1]}
"#;

#[test]
fn a_finding_names_its_sample_and_range_and_the_command_that_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    std::fs::write(&path, TWICE).unwrap();
    let out = run(gyre()
        .current_dir(dir.path())
        .args(["audit", "run.jsonl", "--json"]));
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "executions",
        "samples",
        "trained_tokens",
        "behaviour_logprobs",
        "trainer_logprobs",
    ] {
        assert!(json[key].is_u64(), "{key}");
    }
    assert_eq!(json["trained_tokens"], 12);
    assert_eq!(json["by_kind"].as_object().unwrap().len(), 8);
    assert_eq!(json["by_kind"]["trained_twice"], 1);
    assert_eq!(json["duplication"]["factor"], 1.5);
    let f = &json["findings"][0];
    assert_eq!(
        (
            &f["kind"],
            &f["execution"],
            &f["sample"],
            &f["start"],
            &f["end"],
            &f["other"]
        ),
        (
            &"trained_twice".into(),
            &"e1".into(),
            &"1".into(),
            &3.into(),
            &7.into(),
            &"0".into()
        )
    );
    assert_eq!(
        f["source"],
        serde_json::json!({"file": "run.jsonl", "index": 1})
    );
    let show = f["show"].as_str().unwrap();
    assert_eq!(show, "gyre show run.jsonl -e e1 --sample 1 --tokens 3..7");
    // The command runs and shows the range, trained again.
    let words: Vec<&str> = show.split(' ').skip(1).collect();
    let shown = ok(gyre().current_dir(dir.path()).args(&words));
    let text = String::from_utf8(shown.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("3 "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("r1 output") && line.contains("trained_twice"),
        "{text}"
    );
    assert_eq!(
        text.lines().count(),
        3,
        "the header, the columns, one run: {text}"
    );
    // The report groups the findings by kind, each with its command.
    let out = run(gyre().current_dir(dir.path()).args(["audit", "run.jsonl"]));
    assert_eq!(out.status.code(), Some(1));
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.contains("duplication 1.50"), "{report}");
    assert!(report.contains("trained_twice (1)"), "{report}");
    assert!(report.contains(show), "{report}");
}

#[test]
fn bad_input_and_bad_bounds_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        r#"{"kind":"trained","execution":"e1","sample":"0","prompt_len":1,"tokens":[{"request":"r9","start":0,"end":2}],"loss_mask":[1]}
"#,
    )
    .unwrap();
    let out = run(gyre().arg("audit").arg(&path));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("bad.jsonl:1"), "{err}");
    let out = run(gyre()
        .arg("audit")
        .arg(demo("example.jsonl"))
        .args(["--bound", "ratio=2,1"]));
    assert_eq!(out.status.code(), Some(2));
    let out = run(gyre()
        .arg("audit")
        .arg(demo("example.jsonl"))
        .args(["--bound", "gap=0.5"]));
    assert_eq!(
        out.status.code(),
        Some(0),
        "a recording without samples is clean"
    );
}

#[test]
fn help_teaches_with_examples() {
    let out = ok(gyre().args(["audit", "--help"]));
    let help = String::from_utf8(out.stdout).unwrap();
    for want in [
        "Examples:",
        "gyre audit runs.jsonl trained.jsonl",
        "trained_twice",
        "Exit codes: 0 clean, 1 findings",
    ] {
        assert!(help.contains(want), "{want}: {help}");
    }
}
