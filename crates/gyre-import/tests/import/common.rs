//! Helpers shared by the import tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use gyre_engine::admit::Settings;
use gyre_engine::load::{self, Batch, LoadOptions};
use gyre_engine::score::AdvantageMode;
use gyre_engine::stats::{self, Stats};
use gyre_import::convo::Builder;
use gyre_import::write::Sink;
use gyre_import::{Options, Summary};
use gyre_text::{ChatTemplate, TokenText};
use serde_json::Value;

pub fn fixture(p: &str) -> PathBuf {
    // Shared by the importers' tests and the binary's: the fixtures are at the repository root,
    // the nearest ancestor of this package that holds Cargo.lock.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .expect("the repository root")
        .join("tests/fixtures/import")
        .join(p)
}

pub const BIG: &str = "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl";

pub fn builder() -> Builder {
    Builder::new(TokenText::qwen3().unwrap(), ChatTemplate::qwen3().unwrap()).unwrap()
}

pub fn opts(restore: bool, score: Option<f64>) -> Options {
    Options {
        tokenizer: "qwen3".into(),
        chat_template: None,
        restore,
        score,
        lenient: false,
    }
}

/// Imports `inputs` with the importer named `source` into a fresh output file; the directory
/// guard, the file and the summary.
pub fn try_import(
    source: &str,
    inputs: &[PathBuf],
    opts: &Options,
) -> eyre::Result<(tempfile::TempDir, PathBuf, Summary)> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    let sink = Sink::open(&out, false).unwrap();
    let mut b = builder();
    let summary = gyre_import::import(
        gyre_import::importer(source).unwrap(),
        inputs,
        opts,
        &mut b,
        &Value::String("qwen3".into()),
        sink,
        &mut |_| {},
    )?;
    Ok((dir, out, summary))
}

/// [`try_import`] that must succeed.
pub fn import(
    source: &str,
    input: &Path,
    restore: bool,
    score: Option<f64>,
) -> (tempfile::TempDir, PathBuf, Summary) {
    try_import(source, &[input.to_path_buf()], &opts(restore, score))
        .unwrap_or_else(|e| panic!("importing {}: {e}", input.display()))
}

pub fn claude_code(
    session: &Path,
    restore: bool,
    score: Option<f64>,
) -> (tempfile::TempDir, PathBuf, Summary) {
    import("claude-code", session, restore, score)
}

pub fn load(path: &Path) -> Batch {
    load::load(&[path.to_path_buf()], &LoadOptions::default(), &|_, _| {})
        .unwrap_or_else(|e| panic!("the import does not validate:\n{e}"))
}

pub fn stats(batch: &Batch) -> Stats {
    let results = gyre_engine::process(batch, &Settings::default(), AdvantageMode::DrGrpo);
    stats::stats(batch, &results)
}

pub fn class(s: &Stats, c: &str) -> u64 {
    s.candidates_by_class[c]
}

/// Every line of a written file.
pub fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A record's token array (`input`, `output`) as ids.
pub fn token_ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Request records with their full inputs (delta encodings resolved).
pub fn requests(path: &Path) -> Vec<(Value, Vec<u32>)> {
    let ids = |v: &Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    let mut full: std::collections::HashMap<(String, String), Vec<u32>> = Default::default();
    let mut out = Vec::new();
    for r in lines(path) {
        if r["kind"] != "request" {
            continue;
        }
        let ex = r["execution"].as_str().unwrap().to_owned();
        let mut input = match r.get("extends").and_then(Value::as_str) {
            Some(p) => full[&(ex.clone(), p.to_owned())].clone(),
            None => Vec::new(),
        };
        input.extend(ids(&r["input"]));
        let mut io = input.clone();
        io.extend(ids(&r["output"]));
        full.insert((ex, r["id"].as_str().unwrap().to_owned()), io);
        out.push((r, input));
    }
    out
}

/// Checks format-level properties of every request: spans label every token of the written
/// input, tool-call offsets decode to the rendered call of that name.
pub fn check_requests(path: &Path, tok: &TokenText) {
    for (r, _) in requests(path) {
        let input = r["input"].as_array().unwrap().len();
        let spans = r["spans"].as_array().unwrap();
        if input > 0 {
            assert_eq!(
                spans.last().unwrap()["end"].as_u64().unwrap() as usize,
                input,
                "spans of {} do not cover its input",
                r["id"]
            );
        }
        let output = token_ids(&r["output"]);
        for c in r["tool_calls"].as_array().into_iter().flatten() {
            let (s, e) = (
                c["start"].as_u64().unwrap() as usize,
                c["end"].as_u64().unwrap() as usize,
            );
            let text = tok.decode(&output[s..e]);
            assert!(
                text.starts_with("<tool_call>\n{\"name\": \"")
                    && text.ends_with("}\n</tool_call>")
                    && text.contains(&format!("\"name\": \"{}\"", c["name"].as_str().unwrap())),
                "tool call {} of {} decodes to {text:?}",
                c["id"],
                r["id"]
            );
        }
    }
}
