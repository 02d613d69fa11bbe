//! `gyre audit` on trainer dumps written by the frameworks' own code (slime, SkyRL, NeMo-RL's
//! layout, Harbor ATIF), each in a clean and a planted twin: every planted defect is found at
//! its execution, sample, source and token range with the right kind, as the generator's own
//! plant list (`audit/plants.json`, written beside the dumps) says, and nothing else of those
//! kinds is found; the clean twins give no finding of those kinds. What the trainer did on purpose
//! in both twins (SkyRL's overlong filter) is found in both (`both` in the plant list).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::import_common::fixture;

/// One format's fixtures: the importer, the fixture folder, and the inputs given to the
/// importer, relative to the variant's folder (the importer is run there, so that `source.file`
/// is what the plant list says).
struct Case {
    format: &'static str,
    folder: &'static str,
    inputs: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        format: "slime",
        folder: "slime",
        inputs: &["rollout_data/0.pt", "train_data/0.pt"],
    },
    Case {
        format: "skyrl",
        folder: "skyrl",
        inputs: &["global_step_1_training_input.pkl"],
    },
    Case {
        format: "nemo-rl",
        folder: "nemo-rl",
        inputs: &["train_data_step3.jsonl"],
    },
    Case {
        format: "atif",
        folder: "atif",
        inputs: &["tools/trajectory.json", "chat/trajectory.json"],
    },
];

fn gyre(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Imports one variant and audits it: the audit's JSON.
fn audit(case: &Case, variant: &str, out: &Path) -> Value {
    let dir = fixture(&format!("{}/audit/{variant}", case.folder));
    let out_s = out.to_str().unwrap();
    let mut args = vec!["import", case.format];
    args.extend(case.inputs);
    args.extend(["--out", out_s]);
    let (code, _, err) = gyre(&dir, &args);
    assert_eq!(code, 0, "{} {variant}: {err}", case.format);
    let (code, json, err) = gyre(&dir, &["audit", out_s, "--json"]);
    assert!(
        code == 0 || code == 1,
        "{} {variant}: exit {code}: {err}",
        case.format
    );
    let audit: Value = serde_json::from_str(&json).unwrap();
    let findings = audit["findings"].as_array().unwrap();
    assert_eq!(
        code == 1,
        !findings.is_empty(),
        "{} {variant}: exit {code}",
        case.format
    );
    audit
}

/// A finding or a plant as the fields compared.
fn key(v: &Value) -> (String, String, String, String, u64, u64, u64) {
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
    (
        s("kind"),
        s("execution"),
        s("sample"),
        v["source"]["file"].as_str().unwrap_or_default().to_owned(),
        v["source"]["index"].as_u64().unwrap_or(u64::MAX),
        v["start"].as_u64().unwrap(),
        v["end"].as_u64().unwrap(),
    )
}

/// The plant list: the kinds it covers, the plants, the findings expected in both twins.
fn plants(case: &Case) -> (Vec<String>, Vec<Value>, Vec<Value>) {
    let path: PathBuf = fixture(&format!("{}/audit/plants.json", case.folder));
    let list: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let kinds = list["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    let both = list["both"].as_array().cloned().unwrap_or_default();
    (kinds, list["plants"].as_array().unwrap().clone(), both)
}

/// Whether finding `f` is plant `p`: the same kind, execution, sample, source and range.
fn is(f: &Value, p: &Value) -> bool {
    key(f) == key(p)
}

#[test]
fn planted_defects_are_found_where_they_were_planted() {
    let tmp = tempfile::tempdir().unwrap();
    for case in CASES {
        let (kinds, plants, both) = plants(case);
        assert!(!plants.is_empty(), "{}", case.format);
        let audit = audit(
            case,
            "planted",
            &tmp.path().join(format!("{}.jsonl", case.format)),
        );
        let all = audit["findings"].as_array().unwrap();
        for b in &both {
            assert!(
                all.iter().any(|f| key(f) == key(b)),
                "{}: {b} not found in {all:#?}",
                case.format
            );
        }
        let found: Vec<&Value> = all
            .iter()
            .filter(|f| kinds.iter().any(|k| f["kind"] == k.as_str()))
            .collect();
        for p in &plants {
            let f = found.iter().find(|f| is(f, p));
            let f = f.unwrap_or_else(|| {
                panic!("{}: planted {p} not found; found {found:#?}", case.format)
            });
            match p["kind"].as_str().unwrap() {
                // Every tool-token mask is found by the evidence that survives the import: the
                // rollout's own mask called the tokens sampled, their 0.0 log-probs did not.
                "trained_not_sampled" => assert_eq!(f["evidence"], "logprob", "{f}"),
                // A pair names its earlier sample.
                "trained_twice" | "false_fork" => assert!(f["other"].is_string(), "{f}"),
                _ => {}
            }
            assert!(f["show"].as_str().unwrap().starts_with("gyre show "), "{f}");
        }
        for f in &found {
            assert!(
                plants.iter().any(|p| is(f, p)),
                "{}: {f} was not planted; planted {plants:#?}",
                case.format
            );
        }
    }
}

#[test]
fn clean_twins_give_no_finding_of_the_planted_kinds() {
    let tmp = tempfile::tempdir().unwrap();
    for case in CASES {
        let (kinds, _, both) = plants(case);
        let audit = audit(
            case,
            "clean",
            &tmp.path().join(format!("{}.jsonl", case.format)),
        );
        let all = audit["findings"].as_array().unwrap();
        for b in &both {
            assert!(
                all.iter().any(|f| key(f) == key(b)),
                "{} clean: {b} not found in {all:#?}",
                case.format
            );
        }
        for k in &kinds {
            assert_eq!(
                audit["by_kind"][k], 0,
                "{} clean: {k}: {audit:#}",
                case.format
            );
        }
        assert!(
            audit["trained_tokens"].as_u64().unwrap() > 0,
            "{}",
            case.format
        );
    }
}
