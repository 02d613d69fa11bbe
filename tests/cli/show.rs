//! `gyre show`: a path as text, with reasons, never writing raw escape sequences.

use std::process::Command;

const RECORDING: &str = r#"{"kind":"header","format":"gyre/1","tokenizer":{"vocab":["<s>","You are a bot.","\n","Hi","Hello","\u001b[31mred","!","[tool]"]}}
{"kind":"request","execution":"e1","id":"r1","input":[0,1,2,3,2],"spans":[{"end":1,"source":"template"},{"end":2,"source":"system"},{"end":3,"source":"template"},{"end":4,"source":"user"},{"end":5,"source":"template"}],"output":[4,5],"logprobs":[-0.1,-2.5],"tool_calls":[{"id":"c1","start":1,"end":2}]}
{"kind":"request","execution":"e1","id":"r2","input":[0,1,2,3,2,4,5,7],"spans":[{"end":5,"source":"template"},{"end":7,"source":"assistant"},{"end":8,"source":"tool","call_id":"c1"}],"output":[6],"logprobs":[-0.3]}
{"kind":"closure","execution":"e1","t":5,"status":"completed","artifact":"a","version":1}
{"kind":"assessment","execution":"e1","artifact":"a","version":1,"status":"valid","score":1,"t":6}
"#;

fn gyre(args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rec.jsonl");
    std::fs::write(&path, RECORDING).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .arg("show")
        .arg(&path)
        .args(args)
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn plain_text_when_stdout_is_not_a_terminal_and_escapes_are_sanitised() {
    let (code, out, _) = gyre(&["--execution", "e1"]);
    assert_eq!(code, 0);
    assert!(!out.contains('\x1b'), "no raw escape sequences: {out:?}");
    assert!(out.contains("␛[31mred"), "ESC shown as a glyph: {out:?}");
    assert!(out.starts_with("e1 · path of r2 (leaf of draw 1/1) · 9 tokens (input 8, output 1)"));
    // The path text, newlines kept as line breaks.
    assert!(
        out.contains("<s>You are a bot.\nHi\nHello␛[31mred[tool]!\n"),
        "{out:?}"
    );
}

#[test]
fn runs_name_every_reason_on_the_path() {
    let (code, out, _) = gyre(&["--execution", "e1", "--runs"]);
    assert_eq!(code, 0);
    let rows: Vec<(u64, u64, String)> = out
        .lines()
        .skip(2)
        .map(|l| {
            let mut f = l.split_whitespace();
            (
                f.next().unwrap().parse().unwrap(),
                f.next().unwrap().parse().unwrap(),
                f.next().unwrap().to_owned(),
            )
        })
        .collect();
    let reasons: Vec<(u64, u64, &str)> =
        rows.iter().map(|(p, l, r)| (*p, *l, r.as_str())).collect();
    assert_eq!(
        reasons,
        [
            (0, 1, "context:template"),
            (1, 1, "context:system"),
            (2, 1, "context:template"),
            (3, 1, "context:user"),
            (4, 1, "context:template"),
            (5, 2, "claimed"),
            (7, 1, "context:tool"),
            (8, 1, "claimed"),
        ]
    );
    assert!(out.contains("claimed by draw 1 (leaf r2)"));
}

#[test]
fn request_and_draw_are_checked() {
    let (code, _, err) = gyre(&["--execution", "e1", "--request", "r9"]);
    assert_eq!(code, 2);
    assert!(err.contains("no request \"r9\""));
    let (code, _, err) = gyre(&["--execution", "e1", "--draw", "3"]);
    assert_eq!(code, 2);
    assert!(err.contains("--draw 3 is outside 1..=1"));
    let (code, out, _) = gyre(&["--execution", "e1", "--request", "r1", "--boundaries"]);
    assert_eq!(code, 0);
    assert!(out.contains("<s>│You are a bot.│"), "{out:?}");
}
