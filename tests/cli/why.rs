//! "Why was this path (not) drawn?": every fate, read off the engine's admission, through the
//! library and through `gyre why`; and the draw log's random values and slices, which let a draw
//! be checked by hand.

use std::process::Command;

use gyre_engine::Results;
use gyre_engine::admit::{Class, Settings};
use gyre_engine::load::{Batch, LoadOptions, load_bytes};
use gyre_engine::score::AdvantageMode;
use gyre_engine::why::{Fate, Why, why};

fn load(text: &str) -> Batch {
    load_bytes("t.jsonl", text.as_bytes(), &LoadOptions::default()).expect("valid")
}

fn fate(batch: &Batch, results: &Results, exec: &str, req: &str) -> Why {
    let i = batch.execution_index(exec).unwrap();
    let e = &batch.executions[i];
    why(
        e,
        &results.outcomes[i],
        &results.admissions[i],
        e.request_index(req).unwrap(),
    )
}

fn example(settings: &Settings) -> (Batch, Results) {
    let batch = load(std::str::from_utf8(gyre_engine::demo::RECORDING).unwrap());
    let results = gyre_engine::process(&batch, settings, AdvantageMode::DrGrpo);
    (batch, results)
}

#[test]
fn drawn_candidates_name_their_draw_and_their_standing_at_every_draw() {
    let (b, r) = example(&Settings::default());
    let w = fate(&b, &r, "e1", "r7");
    assert_eq!(w.fate, Fate::Drawn);
    assert!(w.candidate);
    assert_eq!(w.class, Some(Class::Main));
    assert_eq!(w.draw, Some(2));
    // Draw 1 drew from its class and it lost to r3; draw 2 drew it.
    assert_eq!(w.draws[0].winner, "r3");
    assert!(w.draws[0].in_pool);
    assert!((w.draws[0].p - 5.0 / 13.0).abs() < 1e-12);
    assert_eq!(w.draws[0].slice, Some([8, 13]));
    assert_eq!(w.draws[1].winner, "r7");
    assert!((w.draws[1].p - 1.0).abs() < 1e-12);
    // Later draws are of other classes: not in their pools.
    assert!(!w.draws[2].in_pool && w.draws[2].p == 0.0);
    assert_eq!(w.unclaimed, 0);
}

#[test]
fn j_max_and_class_not_listed_and_not_candidate() {
    let (b, r) = example(&Settings {
        jmax: 1,
        ..Settings::default()
    });
    let w = fate(&b, &r, "e1", "r7");
    assert_eq!(w.fate, Fate::JMax);
    assert_eq!(w.draw, None);
    assert_eq!(w.unclaimed, w.weight);
    assert!(
        w.summary().contains("lost every draw until J_max"),
        "{}",
        w.summary()
    );

    let (b, r) = example(&Settings {
        priority: vec![Class::Main],
        ..Settings::default()
    });
    let w = fate(&b, &r, "e1", "s1");
    assert_eq!(w.fate, Fate::ClassNotListed);
    assert!(w.candidate);

    // r1 has r2's output below it (r2 continues r1); the evaluator request is never a candidate.
    let w = fate(&b, &r, "e1", "r1");
    assert_eq!(w.fate, Fate::NotCandidate);
    assert!(!w.candidate);
    assert_eq!(w.below.as_deref(), Some("r2"));
    let w = fate(&b, &r, "e1", "v1");
    assert_eq!(w.fate, Fate::NotCandidate);
    assert_eq!(w.class, None);
    assert!(w.reason.unwrap().contains("evaluator"));
}

#[test]
fn excluded_and_dummy_executions_draw_nothing() {
    let (b, r) = example(&Settings::default());
    let w = fate(&b, &r, "e3", "r1");
    assert_eq!(w.fate, Fate::Excluded);
    assert_eq!(w.reason.as_deref(), Some("open"));
    let w = fate(&b, &r, "e2", "r1");
    assert_eq!(w.fate, Fate::Dummy);
    assert!(w.draws.is_empty());
}

#[test]
fn a_candidate_whose_tokens_other_leaves_claimed_is_exhausted_at_that_draw() {
    // r2 (empty output) and r3 both continue r1; drawing r3 claims r1's output, the only
    // trainable tokens on r2's path.
    let b = load(concat!(
        r#"{"kind":"request","execution":"e","id":"r1","input":[1],"output":[2,3],"logprobs":[-1,-1]}"#,
        "\n",
        r#"{"kind":"request","execution":"e","id":"r2","input":[1,2,3,4],"output":[],"logprobs":[]}"#,
        "\n",
        r#"{"kind":"request","execution":"e","id":"r3","input":[1,2,3,5],"output":[6],"logprobs":[-1]}"#,
        "\n",
        r#"{"kind":"closure","execution":"e","t":1,"status":"completed","artifact":"a","version":1}"#,
        "\n",
        r#"{"kind":"assessment","execution":"e","artifact":"a","version":1,"status":"valid","score":1,"t":1}"#,
        "\n",
    ));
    let r = gyre_engine::process(&b, &Settings::default(), AdvantageMode::DrGrpo);
    let first = &r.admissions[0].draws[0];
    let leaf = &b.executions[0].requests[first.chosen as usize].id;
    let w = fate(&b, &r, "e", "r2");
    if leaf == "r3" {
        assert_eq!(w.fate, Fate::Exhausted);
        assert_eq!(w.draw, Some(1));
        assert_eq!(w.claims[0].leaf, "r3");
        assert!(
            w.summary().contains("weight reached 0 at draw 1"),
            "{}",
            w.summary()
        );
    } else {
        assert_eq!(w.fate, Fate::Drawn);
        assert_eq!(fate(&b, &r, "e", "r3").fate, Fate::Drawn);
    }
    // Whichever the seed draws first, the other one's fate follows from it.
    let seeds_exhausting = (0..40)
        .filter(|&seed| {
            let r = gyre_engine::process(
                &b,
                &Settings {
                    seed,
                    ..Settings::default()
                },
                AdvantageMode::DrGrpo,
            );
            fate(&b, &r, "e", "r2").fate == Fate::Exhausted
        })
        .count();
    assert!(seeds_exhausting > 0, "some seed draws r3 first");
}

#[test]
fn every_draw_can_be_checked_by_hand() {
    let (b, r) = example(&Settings {
        jmax: 0,
        ..Settings::default()
    });
    for (i, adm) in r.admissions.iter().enumerate() {
        for d in &adm.draws {
            assert_eq!(d.point, d.random % d.total, "{}", b.executions[i].id);
            let mut from = 0;
            for c in &d.candidates {
                assert_eq!(c.from, from, "slices follow request order");
                from = c.to();
            }
            assert_eq!(from, d.total);
            let chosen = d.candidates.iter().find(|c| c.request == d.chosen).unwrap();
            assert!(chosen.from <= d.point && d.point < chosen.to());
        }
    }
}

fn gyre(args: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("example.jsonl");
    std::fs::write(&p, gyre_engine::demo::RECORDING).unwrap();
    let mut full = vec![args[0], p.to_str().unwrap()];
    full.extend(&args[1..]);
    Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(&full)
        .output()
        .unwrap()
}

#[test]
fn gyre_why_prints_the_fate_and_its_json_has_the_documented_fields() {
    let out = gyre(&["why", "-e", "e1", "-r", "r7", "--jmax", "1", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["request"], "r7");
    assert_eq!(v["candidate"], true);
    assert_eq!(v["fate"], "j_max");
    assert!(v["draw"].is_null());
    let d = &v["draws"][0];
    for field in ["draw", "class", "weight", "p", "winner"] {
        assert!(!d[field].is_null(), "draws[0].{field}");
    }
    assert_eq!(d["winner"], "r3");
    let out = gyre(&["why", "-e", "e1", "-r", "r3"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("drawn at draw 1 of 4"), "{text}");
    assert!(text.contains("◀ this request"), "{text}");
    // Unknown ids: one clear line, exit 2.
    let out = gyre(&["why", "-e", "e1", "-r", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no request \"nope\""));
    let out = gyre(&["why", "-e", "zz", "-r", "r1"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn gyre_replay_prints_the_random_value_and_the_slices() {
    let out = gyre(&["replay", "-e", "e1"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("random 325990950228498521 mod 13 = 5"),
        "{text}"
    );
    assert!(
        text.contains("[0, 8)") && text.contains("[8, 13)"),
        "{text}"
    );
    assert!(text.contains("r1[0..4]@7 r3[0..4]@14"), "{text}");
    let out = gyre(&["replay", "-e", "e1", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["draws"][0];
    assert_eq!(d["random"], 325990950228498521u64);
    assert_eq!(d["point"], 5);
    assert_eq!(d["slices"], serde_json::json!([[0, 8], [8, 13]]));
    // The fields that were there stay.
    for field in ["draw", "class", "total", "candidates", "chosen", "targets"] {
        assert!(!d[field].is_null(), "{field}");
    }
}

/// Four digits everywhere a probability is printed, and never a rounded 0 or 1 for a candidate
/// that could (or could fail to) be drawn: 1 token against 20000 is `<0.0001` against
/// `>0.9999`, in `gyre replay`, in `gyre why` and in the library's text.
#[test]
fn probabilities_never_round_to_certainty_or_to_zero() {
    use gyre_engine::why::prob_text;
    assert_eq!(prob_text(0.0), "0");
    assert_eq!(prob_text(1.0), "1.0000");
    assert_eq!(prob_text(0.196_34), "0.1963");
    assert_eq!(prob_text(1.0 / 20001.0), "<0.0001");
    assert_eq!(prob_text(20000.0 / 20001.0), ">0.9999");
    assert_eq!(prob_text(0.999_94), "0.9999");
    let text = format!(
        "{}\n{}\n{}\n{}\n{}\n",
        r#"{"kind":"execution","execution":"tiny","t":0}"#,
        r#"{"kind":"request","execution":"tiny","id":"small","input":[1,2],"output":[3],"logprobs":[-1]}"#,
        format_args!(
            r#"{{"kind":"request","execution":"tiny","id":"huge","input":[9,9],"output":{:?},"logprobs":{:?}}}"#,
            (100..20100).collect::<Vec<u32>>(),
            vec![-0.1; 20000]
        ),
        r#"{"kind":"closure","execution":"tiny","t":5,"status":"completed","artifact":"a","version":1}"#,
        r#"{"kind":"assessment","execution":"tiny","artifact":"a","version":1,"status":"valid","score":1,"t":4}"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.jsonl");
    std::fs::write(&path, text).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
            .args(args)
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let replay = run(&["replay", "-e", "tiny"]);
    assert!(
        replay.contains("p=<0.0001") && replay.contains("p=>0.9999"),
        "{replay}"
    );
    assert!(!replay.contains("p=1.0000  [1, 20001)"), "{replay}");
    let small = run(&["why", "-e", "tiny", "-r", "small"]);
    assert!(small.contains("p=<0.0001"), "{small}");
    let huge = run(&["why", "-e", "tiny", "-r", "huge"]);
    assert!(huge.contains("p=>0.9999"), "{huge}");
}

/// A policy output marked `not_trainable` (hidden thinking) is not a candidate and claims
/// nothing; `gyre why` names it a policy output with the reason, `gyre show --runs` prints the
/// reason on its output run, and the request below it is the only candidate.
#[test]
fn a_not_trainable_output_is_named_so_and_never_claimed() {
    let text = r#"{"kind":"request","execution":"e1","id":"r1","input":[1,2],"output":[3,4],"logprobs":[-0.1,-0.2],"not_trainable":"hidden thinking: the log holds a signature, not the reasoning"}
{"kind":"request","execution":"e1","id":"r2","extends":"r1","input":[5],"output":[6],"logprobs":[-0.3]}
{"kind":"closure","execution":"e1","t":1,"status":"completed","artifact":"a","version":1}
{"kind":"assessment","execution":"e1","artifact":"a","version":1,"status":"valid","score":1,"t":2}
"#;
    let batch = load(text);
    let results = gyre_engine::process(&batch, &Settings::default(), AdvantageMode::DrGrpo);
    let w = fate(&batch, &results, "e1", "r1");
    assert_eq!(w.fate, Fate::NotCandidate);
    assert_eq!(w.class, None);
    assert_eq!(w.role(), "policy output, not trainable");
    assert_eq!(w.weight, 0);
    let r2 = fate(&batch, &results, "e1", "r2");
    assert_eq!(
        (r2.fate, r2.weight),
        (Fate::Drawn, 1),
        "only r2's own token is a target"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hidden.jsonl");
    std::fs::write(&file, text).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
            .args(args)
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let why_text = run(&["why", "-e", "e1", "-r", "r1"]);
    assert!(
        why_text.starts_with("e1 · r1 · policy output, not trainable · not_candidate"),
        "{why_text}"
    );
    assert!(
        why_text.contains("not a candidate: not trainable: hidden thinking"),
        "{why_text}"
    );
    let runs = run(&["show", "-e", "e1", "-r", "r2", "--runs"]);
    assert!(runs.contains("not trainable: hidden thinking"), "{runs}");
}
