//! The audit (docs/audit.md) on small hand-built executions: each planted defect is found at
//! its execution, sample and range with the right kind, and its clean twin has none.

use gyre_engine::audit::{self, Audit, Finding, Kind, Layout, Options, Place};
use gyre_engine::load::{Batch, Input, LoadOptions, load_inputs};

/// Loads a recording and trained records, as `gyre audit REC TRAINED` does.
fn load(rec: &str, trained: &str) -> Batch {
    load_inputs(
        &[
            Input::Memory {
                name: "rec.jsonl",
                bytes: rec.as_bytes(),
            },
            Input::Memory {
                name: "trained.jsonl",
                bytes: trained.as_bytes(),
            },
        ],
        &LoadOptions::default(),
        &|_, _| {},
    )
    .unwrap()
}

fn run(rec: &str, trained: &str) -> Audit {
    audit::audit(&load(rec, trained), &Options::default(), None)
}

/// `(kind, execution, sample, start, end)` of each finding.
fn found(a: &Audit) -> Vec<(Kind, u32, Option<u32>, u32, u32)> {
    a.findings
        .iter()
        .map(|f: &Finding| (f.kind, f.execution, f.sample, f.start, f.end))
        .collect()
}

/// Two turns: r1 input [1 2 3] output [4 5 6 7]; r2 input r1's path + [8 9] (a tool result),
/// output [10 11 12 13].
const TWO_TURNS: &str = r#"{"kind":"request","execution":"e1","id":"r1","input":[1,2,3],"output":[4,5,6,7],"logprobs":[-0.1,-0.2,-0.3,-0.4],"spans":[{"end":3,"source":"user"}]}
{"kind":"request","execution":"e1","id":"r2","input":[1,2,3,4,5,6,7,8,9],"output":[10,11,12,13],"logprobs":[-0.5,-0.6,-0.7,-0.8],"spans":[{"end":3,"source":"user"},{"end":7,"source":"assistant"},{"end":9,"source":"tool"}]}
"#;

fn trained(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| format!("{{\"kind\":\"trained\",\"execution\":\"e1\",{l}}}\n"))
        .collect()
}

#[test]
fn samples_lie_on_the_tree_and_literal_ones_share_the_overlay() {
    let t = trained(&[
        // On the tree through a request piece.
        r#""sample":"a","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7}],"loss_mask":[1,1,1,1]"#,
        // Literal ids that follow the tree, then leave it at 99.
        r#""sample":"b","prompt_len":3,"tokens":[{"ids":[1,2,3,4,5,99,98]}],"loss_mask":[0,0,0,0]"#,
        // Leaves the same way: shares b's overlay keys.
        r#""sample":"c","prompt_len":3,"tokens":[{"ids":[1,2,3,4,5,99,98]}],"loss_mask":[0,0,0,0]"#,
    ]);
    let batch = load(TWO_TURNS, &t);
    let exec = &batch.executions[0];
    let layout = Layout::of(exec);
    let [a, b, c] = &layout.samples[..] else {
        panic!("three samples")
    };
    assert_eq!(a.keys[..5], b.keys[..5]);
    assert_eq!(b.keys, c.keys);
    assert_eq!((a.leaves_tree, b.leaves_tree), (7, 5));
    assert!(matches!(layout.place(exec, b.keys[5]), Place::Off(_)));
    assert_eq!(layout.ids(exec, 1), [1, 2, 3, 4, 5, 99, 98]);
    assert!(!layout.sampled(exec, a.keys[2]));
    assert!(layout.sampled(exec, a.keys[3]));
    assert_eq!(layout.output(exec, a.keys[4]), Some((0, 1)));
    assert_eq!(layout.behaviour(exec, 0, 4), Some(-0.2));
}

#[test]
fn a_prefix_trained_twice_is_found_in_the_later_sample() {
    // Clean: turn 1's sample trains r1's output, turn 2's trains r2's only.
    let clean = trained(&[
        r#""sample":"t1","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7}],"loss_mask":[1,1,1,1]"#,
        r#""sample":"t2","prompt_len":9,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[1,1,1,1]"#,
    ]);
    let a = run(TWO_TURNS, &clean);
    assert_eq!(found(&a), []);
    assert_eq!(a.duplication.factor, 1.0);
    // Planted: turn 2's sample trains r1's output again (its prompt starts at 3).
    let twice = trained(&[
        r#""sample":"t1","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7}],"loss_mask":[1,1,1,1]"#,
        r#""sample":"t2","prompt_len":3,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[1,1,1,1,0,0,1,1,1,1]"#,
    ]);
    let a = run(TWO_TURNS, &twice);
    assert_eq!(found(&a), [(Kind::TrainedTwice, 0, Some(1), 3, 7)]);
    assert_eq!(a.findings[0].other, Some(0));
    assert_eq!(a.by_kind[&Kind::TrainedTwice], 1);
    // 12 mask-on tokens over 8 distinct.
    assert_eq!(a.duplication.factor, 1.5);
    assert_eq!(a.duplication.max_execution.as_deref(), Some("e1"));
}

/// `gyre admit`'s rows written as `trained` records, audited beside their recording.
fn own_rows(name: &str, recording: &[u8], settings: &str) -> Audit {
    use gyre_engine::admit::Settings;
    use gyre_engine::score::AdvantageMode;
    use gyre_engine::{process, trained};
    let input = [Input::Memory {
        name,
        bytes: recording,
    }];
    let batch = load_inputs(&input, &LoadOptions::default(), &|_, _| {}).unwrap();
    let settings = Settings::default().with_overrides(settings).unwrap();
    let results = process(&batch, &settings, AdvantageMode::DrGrpo);
    let mut rows = Vec::new();
    trained::write_trained(&batch, &results, &mut rows).unwrap();
    let both = load_inputs(
        &[
            input[0],
            Input::Memory {
                name: "trained.jsonl",
                bytes: &rows,
            },
        ],
        &LoadOptions::default(),
        &|_, _| {},
    )
    .unwrap();
    audit::audit(&both, &Options::default(), None)
}

/// The admission's own guarantee, checked independently: each policy token trained once,
/// no context a target, on every bundled demo and under several settings.
#[test]
fn gyre_admit_rows_audit_clean_on_every_demo() {
    use gyre_engine::demo;
    use gyre_format::named::Named;
    let mut recordings = vec![(demo::NAME, demo::RECORDING)];
    recordings.extend(demo::Demo::ALL.iter().map(|d| (d.file_name(), d.bytes())));
    for (name, bytes) in recordings {
        for settings in ["", "jmax=0", "jmax=1,seed=3", "priority=main"] {
            let a = own_rows(name, bytes, settings);
            assert!(a.counts.samples > 0, "{name} {settings}: no rows");
            let first: Vec<String> = a
                .findings
                .iter()
                .take(5)
                .map(|f| {
                    format!(
                        "{:?} e{} s{:?} {}..{}: {}",
                        f.kind, f.execution, f.sample, f.start, f.end, f.detail
                    )
                })
                .collect();
            assert!(
                a.clean(),
                "{name} [{settings}]: {} findings, first {first:#?}",
                a.findings.len()
            );
            assert_eq!(a.duplication.factor, 1.0, "{name} {settings}");
        }
    }
}
