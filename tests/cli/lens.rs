//! The lens (`engine::lens`, `gyre show --color lens`, `gyre why --seeds`) is exactly what
//! admissions run one by one give: a token is a target under (seed, J_max) iff the lens says so,
//! a candidate is drawn iff the lens says so, and the smallest J_max and the priority what-ifs
//! are the ones brute force finds.

use std::process::Command;

use gyre_engine::admit::{Class, Settings, trainable_node};
use gyre_engine::lens::{self, LensOptions};
use gyre_engine::load::{Batch, LoadOptions, load_bytes};
use gyre_engine::recgen::{self, GenOptions};
use gyre_engine::score::{AdvantageMode, Outcome};
use gyre_engine::{Results, process};
use gyre_synth::{SynthOptions, write_synth};
use proptest::prelude::*;
use serde_json::Value;

const SEEDS: u32 = 6;

fn admit(batch: &Batch, seed: u64, jmax: u32, priority: &[Class]) -> Results {
    process(
        batch,
        &Settings {
            seed,
            jmax,
            priority: priority.to_vec(),
        },
        AdvantageMode::DrGrpo,
    )
}

/// Every node and candidate of every execution, against admissions at every (seed, J_max).
fn check(batch: &Batch, seed: u64, priority: &[Class]) {
    let options = LensOptions {
        seed,
        seeds: SEEDS,
        priority: priority.to_vec(),
    };
    let l = lens::lens(batch, &options, &|_, _| {});
    let runs: Vec<Vec<Results>> = (0..SEEDS as u64)
        .map(|s| {
            (0..=6)
                .map(|j| admit(batch, seed + s, j, priority))
                .collect()
        })
        .collect();
    for (i, exec) in batch.executions.iter().enumerate() {
        let el = &l.executions[i];
        let scored = matches!(runs[0][0].outcomes[i], Outcome::Scored { .. });
        for n in 0..exec.tree.nodes.len() as u32 {
            let odds = el.node(n, 3);
            if !scored || !trainable_node(exec, n) {
                assert_eq!(odds, None, "{}: node {n} has no odds", exec.id);
                continue;
            }
            for jmax in 0..=6u32 {
                let o = el
                    .node(n, jmax)
                    .expect("a trainable node of a scored execution");
                let target = |s: usize| {
                    runs[s][jmax as usize].admissions[i].claimed_by[n as usize].is_some()
                };
                let hits = (0..SEEDS as usize).filter(|&s| target(s)).count() as u32;
                assert_eq!(o.hits, hits, "{} node {n} at J_max {jmax}", exec.id);
                assert_eq!(o.seeds, SEEDS);
            }
            let o = el.node(n, 1).unwrap();
            // The smallest J_max at the first seed: the first cap under which it is a target.
            let first = (1..=6)
                .find(|&j| runs[0][j as usize].admissions[i].claimed_by[n as usize].is_some());
            match o.from_jmax {
                Some(k) if k <= 6 => assert_eq!(first, Some(k), "{} node {n}", exec.id),
                Some(_) => assert_eq!(first, None),
                None => assert!(runs[0][0].admissions[i].claimed_by[n as usize].is_none()),
            }
            if let Some(a) = o.always_from_jmax.filter(|&a| a <= 6) {
                for s in 0..SEEDS as usize {
                    assert!(runs[s][a as usize].admissions[i].claimed_by[n as usize].is_some());
                    if a > 1 {
                        assert!((0..SEEDS as usize).any(|s| {
                            runs[s][a as usize - 1].admissions[i].claimed_by[n as usize].is_none()
                        }));
                    }
                }
            }
        }
        for c in &runs[0][0].admissions[i].candidates {
            for jmax in 0..=6u32 {
                let o = el.candidate(c.request, jmax);
                if !scored {
                    assert_eq!(o, None);
                    continue;
                }
                let drawn = (0..SEEDS as usize)
                    .filter(|&s| {
                        runs[s][jmax as usize].admissions[i]
                            .draws
                            .iter()
                            .any(|d| d.chosen == c.request)
                    })
                    .count() as u32;
                assert_eq!(
                    o.unwrap().hits,
                    drawn,
                    "{} candidate {}",
                    exec.id,
                    c.request
                );
            }
        }
    }
}

fn synth_batch() -> Batch {
    let mut synth = Vec::new();
    write_synth(
        &SynthOptions {
            executions: 8,
            turns: 8,
            ..SynthOptions::default()
        },
        &mut synth,
    )
    .unwrap();
    load_bytes("synth.jsonl", &synth, &LoadOptions::default()).unwrap()
}

#[test]
fn lens_matches_admissions_run_one_by_one() {
    let example = load_bytes(
        "example.jsonl",
        gyre_engine::demo::RECORDING,
        &LoadOptions::default(),
    )
    .unwrap();
    for batch in [example, synth_batch()] {
        check(&batch, 0, &Class::DEFAULT_PRIORITY);
        check(&batch, 11, &[Class::Sub, Class::Main]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn lens_matches_admissions_on_generated_recordings(gen_seed in any::<u64>(), seed in 0u64..1000) {
        let execs = recgen::generate(&GenOptions {
            executions: 4,
            turns: 8,
            vocab: 5,
            seed: gen_seed,
            ..GenOptions::default()
        });
        let mut bytes = Vec::new();
        recgen::write_recording(&execs, true, &mut bytes).unwrap();
        let batch = load_bytes("gen.jsonl", &bytes, &LoadOptions::default()).unwrap();
        check(&batch, seed, &Class::DEFAULT_PRIORITY);
    }
}

#[test]
fn priority_what_ifs_are_the_admissions_under_the_changed_priority() {
    let batch = synth_batch();
    let settings = Settings {
        seed: 2,
        jmax: 2,
        priority: vec![Class::Main, Class::MainSummary],
    };
    let now = process(&batch, &settings, AdvantageMode::DrGrpo);
    let mut asked = 0;
    for (i, exec) in batch.executions.iter().enumerate() {
        for r in 0..exec.requests.len() as u32 {
            let req = &exec.requests[r as usize];
            let w = lens::priority_what_if(exec, &now.outcomes[i], &settings, r);
            if !matches!(now.outcomes[i], Outcome::Scored { .. }) || !req.trainable() {
                assert!(w.is_none());
                continue;
            }
            let class = Class::of(&req.agent, req.purpose);
            if class == Class::Main {
                assert!(w.is_none(), "its class is first already");
                continue;
            }
            let w = w.expect("a what-if for a class not first");
            asked += 1;
            assert_eq!(w.priority[0], class);
            let alt = process(
                &batch,
                &Settings {
                    priority: w.priority.clone(),
                    ..settings.clone()
                },
                AdvantageMode::DrGrpo,
            );
            let drawn = alt.admissions[i]
                .draws
                .iter()
                .position(|d| d.chosen == r)
                .map(|k| k as u32 + 1);
            assert_eq!(w.drawn, drawn);
            let own = |res: &Results| -> u64 {
                exec.tree
                    .nodes
                    .iter()
                    .enumerate()
                    .filter(|(n, node)| {
                        node.owner == r
                            && trainable_node(exec, *n as u32)
                            && res.admissions[i].claimed_by[*n].is_some()
                    })
                    .map(|(_, node)| node.len as u64)
                    .sum()
            };
            assert_eq!(w.output_targets, own(&alt));
            assert_eq!(w.output_targets_now, own(&now));
        }
        for n in 0..exec.tree.nodes.len() as u32 {
            let Some((p, k)) = lens::node_priority_what_if(exec, &now.outcomes[i], &settings, n)
            else {
                continue;
            };
            let alt = process(
                &batch,
                &Settings {
                    priority: p.clone(),
                    ..settings.clone()
                },
                AdvantageMode::DrGrpo,
            );
            assert_eq!(alt.admissions[i].claimed_by[n as usize], Some(k));
            assert_ne!(p, settings.priority);
        }
    }
    assert!(asked > 0, "the synth recording has sub-agent candidates");
}

fn gyre(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn why_seeds_adds_the_lens_in_text_and_json() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo/example.jsonl");
    let (code, out, err) = gyre(&[
        "why",
        example,
        "--execution",
        "e1",
        "--request",
        "r7",
        "--jmax",
        "1",
        "--seeds",
        "16",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let l = &v["lens"];
    assert_eq!(l["seeds"], 16);
    assert_eq!(l["first_seed"], 0);
    assert_eq!(l["jmax"], 1);
    // Under J_max 1 r7 is drawn exactly under the seeds whose single draw picks it.
    let batch = load_bytes(
        "example.jsonl",
        gyre_engine::demo::RECORDING,
        &LoadOptions::default(),
    )
    .unwrap();
    let i = batch.execution_index("e1").unwrap();
    let r7 = batch.executions[i].request_index("r7").unwrap();
    let drawn = (0..16)
        .filter(|&s| {
            admit(&batch, s, 1, &Class::DEFAULT_PRIORITY).admissions[i]
                .draws
                .iter()
                .any(|d| d.chosen == r7)
        })
        .count();
    assert_eq!(l["drawn_seeds"], drawn as u64);
    assert_eq!(l["drawn_fraction"].as_f64().unwrap(), drawn as f64 / 16.0);
    // At seed 0 it is drawn at draw 2 uncapped: J_max 2 draws it.
    assert_eq!(l["min_jmax"], 2);
    assert!(l["always_at_jmax"].as_u64().unwrap() >= 2);
    assert_eq!(l["output_tokens"], 2);
    assert!(l["priority"].is_null(), "main is first already");
    // Without --seeds there is no lens.
    let (_, out, _) = gyre(&[
        "why",
        example,
        "--execution",
        "e1",
        "--request",
        "r7",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v.get("lens").is_none());
    let (code, out, _) = gyre(&[
        "why",
        example,
        "--execution",
        "e1",
        "--request",
        "r7",
        "--jmax",
        "1",
        "--seeds",
        "16",
    ]);
    assert_eq!(code, 0);
    assert!(out.contains("lens: 16 seeds from 0 at J_max 1"), "{out}");
    assert!(out.contains("at seed 0: drawn from J_max ≥ 2"), "{out}");
}

#[test]
fn why_seeds_says_what_a_priority_change_would_do() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo/example.jsonl");
    // s1 is the sub-agent's candidate; with only main listed it is never drawn.
    let (code, out, err) = gyre(&[
        "why",
        example,
        "--execution",
        "e1",
        "--request",
        "s1",
        "--priority",
        "main",
        "--seeds",
        "4",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["fate"], "class_not_listed");
    let p = &v["lens"]["priority"];
    assert_eq!(p["priority"], serde_json::json!(["sub", "main"]));
    assert_eq!(p["drawn"], 1);
    assert_eq!(p["output_targets_now"], 0);
    assert_eq!(p["output_targets"], v["weight"]);
    assert_eq!(v["lens"]["drawn_seeds"], 0);
    assert!(v["lens"]["min_jmax"].is_null());
}

#[test]
fn show_colours_by_lens_and_runs_carry_a_lens_column() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo/example.jsonl");
    let (code, out, err) = gyre(&[
        "show",
        example,
        "--execution",
        "e1",
        "--request",
        "r7",
        "--jmax",
        "1",
        "--runs",
        "--seeds",
        "16",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines().next().unwrap().contains("lens 16 seeds from 0"),
        "{out}"
    );
    let header = out.lines().nth(1).unwrap();
    assert!(
        header.contains("reason") && header.contains("lens"),
        "{header}"
    );
    let r7 = out
        .lines()
        .find(|l| l.contains("left out: J_max reached"))
        .expect("r7's output is left out under J_max 1 at seed 0");
    assert!(r7.contains("/16)"), "{r7}");
    let (code, out, err) = gyre(&["show", example, "--execution", "e1", "--color", "lens"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("colour: lens · never <33% 33–67% 67–99% every seed"),
        "{out}"
    );
    // --seeds alone means nothing: refused before any work.
    let (code, _, err) = gyre(&["show", example, "--execution", "e1", "--seeds", "4"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--seeds goes with --color lens or --runs"),
        "{err}"
    );
}
