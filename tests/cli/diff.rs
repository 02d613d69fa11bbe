//! `gyre diff`: two admissions compared execution by execution, tokens matched by identity.

use std::process::Command;

use gyre_engine::admit::Settings;
use gyre_engine::diff::{Side, diff};
use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_engine::process;
use gyre_engine::score::AdvantageMode;
use serde_json::Value;

fn settings(seed: u64, jmax: u32) -> Settings {
    Settings {
        seed,
        jmax,
        ..Settings::default()
    }
}

#[test]
fn raising_the_cap_only_adds_targets_and_they_are_the_difference() {
    let batch = load_bytes(
        "example.jsonl",
        gyre_engine::demo::RECORDING,
        &LoadOptions::default(),
    )
    .unwrap();
    let a = process(&batch, &settings(0, 1), AdvantageMode::DrGrpo);
    let b = process(&batch, &settings(0, 0), AdvantageMode::DrGrpo);
    let d = diff(
        Side {
            batch: &batch,
            results: &a,
        },
        Side {
            batch: &batch,
            results: &b,
        },
    );
    assert_eq!(d.executions.len(), batch.executions.len());
    for e in &d.executions {
        // The capped draws are a prefix of the uncapped ones (same seed): nothing is lost.
        assert_eq!(e.flips_to_left_out, 0, "{}", e.execution);
        assert_eq!(
            e.flips_to_target,
            e.targets_b - e.targets_a,
            "{}",
            e.execution
        );
        assert_eq!(e.status_a, e.status_b);
    }
    let e1 = d.executions.iter().find(|e| e.execution == "e1").unwrap();
    assert_eq!((e1.rows_a, e1.rows_b), (1, 4));
    assert!(e1.flips_to_target > 0);
    assert!(e1.first_flips.iter().all(|f| f.to_target));

    let same = diff(
        Side {
            batch: &batch,
            results: &a,
        },
        Side {
            batch: &batch,
            results: &a,
        },
    );
    assert!(same.executions.iter().all(|e| !e.changed()));
}

#[test]
fn two_seeds_flip_both_ways_and_balance_per_execution() {
    let batch = load_bytes(
        "example.jsonl",
        gyre_engine::demo::RECORDING,
        &LoadOptions::default(),
    )
    .unwrap();
    for seed in 1..20 {
        let a = process(&batch, &settings(0, 1), AdvantageMode::DrGrpo);
        let b = process(&batch, &settings(seed, 1), AdvantageMode::DrGrpo);
        let d = diff(
            Side {
                batch: &batch,
                results: &a,
            },
            Side {
                batch: &batch,
                results: &b,
            },
        );
        for e in &d.executions {
            assert_eq!(
                e.targets_b as i64 - e.targets_a as i64,
                e.flips_to_target as i64 - e.flips_to_left_out as i64,
                "{} seed {seed}",
                e.execution
            );
        }
    }
}

fn gyre(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn the_command_compares_settings_or_two_recordings() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo/example.jsonl");
    let (code, out) = gyre(&[
        "diff",
        example,
        "--a",
        "jmax=1",
        "--b",
        "jmax=0,priority=main>sub",
        "--json",
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    for e in v["executions"].as_array().unwrap() {
        for key in [
            "execution",
            "rows_a",
            "rows_b",
            "targets_a",
            "targets_b",
            "flips",
        ] {
            assert!(e.get(key).is_some(), "{key} in {e}");
        }
    }
    assert_eq!(v["b"]["priority"], serde_json::json!(["main", "sub"]));
    let (code, out) = gyre(&["diff", example, example]);
    assert_eq!(code, 0);
    assert!(out.contains("no execution changed (4 compared)"), "{out}");
    let (code, _) = gyre(&["diff", example]);
    assert_eq!(code, 2);
    let (code, _) = gyre(&["diff", example, "--a", "jmax=x"]);
    assert_eq!(code, 2);
}
