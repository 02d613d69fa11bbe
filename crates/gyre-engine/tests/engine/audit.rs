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

/// Loads one file holding both the requests and the trained records, as a trainer's import
/// writes them.
fn load_one(text: &str) -> Batch {
    load_inputs(
        &[Input::Memory {
            name: "import.jsonl",
            bytes: text.as_bytes(),
        }],
        &LoadOptions::default(),
        &|_, _| {},
    )
    .unwrap()
}

#[test]
fn a_mask_on_tool_tokens_is_trained_not_sampled_by_the_spans() {
    let planted = trained(&[
        r#""sample":"t2","prompt_len":7,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[1,1,1,1,1,1]"#,
    ]);
    let a = run(TWO_TURNS, &planted);
    // r1's output is in no sample's mask either: held in t2's prompt only.
    assert_eq!(
        found(&a),
        [
            (Kind::SampledNotTrained, 0, Some(0), 3, 7),
            (Kind::TrainedNotSampled, 0, Some(0), 7, 9)
        ]
    );
    assert_eq!(a.findings[1].evidence, Some(audit::Evidence::Spans));
    assert!(
        a.findings[1].detail.contains("context:tool"),
        "{}",
        a.findings[1].detail
    );
    let clean = trained(&[
        r#""sample":"t2","prompt_len":3,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[1,1,1,1,0,0,1,1,1,1]"#,
    ]);
    assert_eq!(found(&run(TWO_TURNS, &clean)), []);
}

/// An import whose mask covered a tool result: the importer cut it as a "sampled" request
/// (r2, log-probs 0.0 throughout), so only the log-probs tell.
fn zero_run(logprob: &str) -> String {
    format!(
        r#"{{"kind":"request","execution":"e1","id":"r1","input":[1,2,3],"output":[4,5],"logprobs":[-0.1,-0.2]}}
{{"kind":"request","execution":"e1","id":"r2","input":[1,2,3,4,5],"output":[30,31,32,33,34],"logprobs":[{logprob},{logprob},{logprob},{logprob},{logprob}]}}
{{"kind":"trained","execution":"e1","sample":"0","prompt_len":3,"tokens":[{{"request":"r2","start":0,"end":10}}],"loss_mask":[1,1,1,1,1,1,1]}}
"#
    )
}

#[test]
fn a_tool_output_cut_as_sampled_is_found_by_its_zero_logprobs() {
    let a = audit::audit(&load_one(&zero_run("0.0")), &Options::default(), None);
    assert_eq!(found(&a), [(Kind::TrainedNotSampled, 0, Some(0), 5, 10)]);
    assert_eq!(a.findings[0].evidence, Some(audit::Evidence::Logprob));
    let a = audit::audit(&load_one(&zero_run("-0.3")), &Options::default(), None);
    assert_eq!(found(&a), []);
}

/// Marks ids of 100 and above as outside an assistant turn.
struct HundredsAreUsers;

impl audit::Turns for HundredsAreUsers {
    fn assistant(&self, tokens: &[u32]) -> Vec<Option<bool>> {
        tokens.iter().map(|&t| Some(t < 100)).collect()
    }
}

#[test]
fn off_the_tree_the_turns_or_a_missing_logprob_tell() {
    let t = trained(&[
        // Leaves the tree after r1's output: 100, 101 (a user turn by the turns) then 50, 51.
        r#""sample":"a","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7},{"ids":[100,101,50,51]}],"loss_mask":[1,1,1,1,1,1,1,1],"behaviour_logprobs":[-0.1,-0.2,-0.3,-0.4,null,null,-0.5,null]"#,
    ]);
    let batch = load(TWO_TURNS, &t);
    let with = audit::audit(&batch, &Options::default(), Some(&HundredsAreUsers));
    assert_eq!(
        found(&with),
        [
            (Kind::TrainedNotSampled, 0, Some(0), 7, 9),
            (Kind::TrainedNotSampled, 0, Some(0), 10, 11)
        ]
    );
    assert_eq!(with.findings[0].evidence, Some(audit::Evidence::Turns));
    assert_eq!(with.findings[1].evidence, Some(audit::Evidence::Logprob));
    // Without a tokenizer the missing log-probs of 100 and 101 tell; 50, with its log-prob,
    // goes unjudged (a note).
    let without = audit::audit(&batch, &Options::default(), None);
    assert_eq!(
        found(&without),
        [
            (Kind::TrainedNotSampled, 0, Some(0), 7, 9),
            (Kind::TrainedNotSampled, 0, Some(0), 10, 11)
        ]
    );
    assert_eq!(without.findings[0].evidence, Some(audit::Evidence::Logprob));
    assert!(
        without
            .notes
            .iter()
            .any(|n| n.contains("1 mask-on token off")),
        "{:?}",
        without.notes
    );
}

#[test]
fn a_dropped_sample_leaves_its_tokens_sampled_not_trained() {
    let dropped = trained(&[
        r#""sample":"a","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7}],"loss_mask":[1,1,1,1]"#,
        r#""sample":"b","prompt_len":9,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[0,0,0,0]"#,
    ]);
    let a = run(TWO_TURNS, &dropped);
    assert_eq!(found(&a), [(Kind::SampledNotTrained, 0, Some(1), 9, 13)]);
    assert!(
        a.findings[0].detail.contains("dropped sample"),
        "{}",
        a.findings[0].detail
    );
    // A capped output that no sample trains says so.
    let capped = TWO_TURNS.replace(
        r#""output":[10,11,12,13],"#,
        r#""finish":"length","output":[10,11,12,13],"#,
    );
    let b = trained(&[
        r#""sample":"a","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7}],"loss_mask":[1,1,1,1]"#,
        r#""sample":"b","prompt_len":9,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[1,0,0,0]"#,
    ]);
    let a = run(&capped, &b);
    assert_eq!(found(&a), [(Kind::SampledNotTrained, 0, Some(1), 10, 13)]);
    assert!(
        a.findings[0].detail.contains("finish = length"),
        "{}",
        a.findings[0].detail
    );
}

/// r1 samples [4 5 6 7 20 21 22 23]; r2's context rewrites its third token (6 → 9) and goes
/// on as its continuation (`rewrite`), or extends it exactly (clean). One sample per call.
fn rewritten(rewrite: bool) -> String {
    let third = if rewrite { 9 } else { 6 };
    format!(
        r#"{{"kind":"request","execution":"e1","id":"r1","input":[1,2,3],"output":[4,5,6,7,20,21,22,23],"logprobs":[-0.1,-0.1,-0.1,-0.1,-0.1,-0.1,-0.1,-0.1]}}
{{"kind":"request","execution":"e1","id":"r2","input":[1,2,3,4,5,{third},7,20,21,22,23,8],"output":[10,11],"logprobs":[-0.2,-0.2]}}
"#
    )
}

fn one_sample_per_call() -> String {
    trained(&[
        r#""sample":"s1","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":11}],"loss_mask":[1,1,1,1,1,1,1,1]"#,
        r#""sample":"s2","prompt_len":12,"tokens":[{"request":"r2","start":0,"end":14}],"loss_mask":[1,1]"#,
    ])
}

#[test]
fn a_rewritten_turn_is_a_false_fork_and_a_retokenized_context() {
    // A trainer's import: the requests come from the trainer's own rows, in one file.
    let import = |rewrite| load_one(&(rewritten(rewrite) + &one_sample_per_call()));
    let a = audit::audit(&import(true), &Options::default(), None);
    assert_eq!(
        found(&a),
        [
            (Kind::FalseFork, 0, Some(1), 5, 6),
            (Kind::Retokenized, 0, Some(1), 5, 6)
        ]
    );
    let fork = &a.findings[0];
    assert_eq!((fork.other, fork.value), (Some(0), Some(5.0)));
    assert!(
        fork.detail.contains("[9]") && fork.detail.contains("[6]"),
        "{}",
        fork.detail
    );
    assert_eq!((a.forks.samples, a.forks.tokens), (1, 5));
    assert_eq!(
        found(&audit::audit(&import(false), &Options::default(), None)),
        []
    );
    // Beside a recording apart from the samples, the rewrite is the harness's: the policy was
    // called with it, and samples following the recorded requests are faithful.
    let apart = run(&rewritten(true), &one_sample_per_call());
    assert_eq!(found(&apart), []);
    assert_eq!(
        (apart.recorded.rewrites, apart.recorded.forks.samples),
        (1, 1)
    );
}

#[test]
fn real_forks_and_fresh_starts_are_not_findings() {
    // Two samplings from one context, and a sub-agent's first call sharing the system prompt.
    let rec = r#"{"kind":"request","execution":"e1","id":"r1","input":[1,2,3],"output":[4,5,6,7],"logprobs":[-0.1,-0.1,-0.1,-0.1]}
{"kind":"request","execution":"e1","id":"r2","input":[1,2,3],"output":[4,5,8,9],"logprobs":[-0.1,-0.1,-0.1,-0.1]}
{"kind":"request","execution":"e1","id":"r3","input":[1,2,60,61,62,63,64],"output":[65],"logprobs":[-0.1]}
"#;
    let t = trained(&[
        r#""sample":"a","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7}],"loss_mask":[1,1,1,1]"#,
        r#""sample":"b","prompt_len":3,"tokens":[{"request":"r2","start":0,"end":7}],"loss_mask":[1,1,1,1]"#,
        r#""sample":"c","prompt_len":7,"tokens":[{"request":"r3","start":0,"end":8}],"loss_mask":[1]"#,
    ]);
    let a = audit::audit(&load_one(&(rec.to_owned() + &t)), &Options::default(), None);
    assert_eq!(found(&a), []);
}

#[test]
fn a_trainer_row_that_drifts_from_the_recording_is_retokenized() {
    // r2's path as the trainer's row holds it: r1's output with one id changed.
    let t = trained(&[
        r#""sample":"a","prompt_len":9,"tokens":[{"ids":[1,2,3,4,5,66,7,8,9,10,11,12,13]}],"loss_mask":[1,1,1,1],"behaviour_logprobs":[-0.5,-0.6,-0.7,-0.8]"#,
    ]);
    let a = run(TWO_TURNS, &t);
    assert_eq!(
        found(&a),
        [
            // The recorded r1's output is held, in the prompt, as far as the row follows it.
            (Kind::SampledNotTrained, 0, Some(0), 3, 5),
            (Kind::Retokenized, 0, Some(0), 5, 6)
        ]
    );
    assert_eq!(a.off_tree_tokens, 8);
}

/// The same guarantee on random recordings: small vocabularies (accidental matches), retries,
/// sub-agents, compaction, full and delta encodings, several admission settings.
#[test]
fn gyre_admit_rows_audit_clean_on_random_recordings() {
    use gyre_engine::recgen::{self, GenOptions};
    for seed in 0..24u64 {
        let opts = GenOptions {
            seed,
            vocab: [4, 32, 1000][seed as usize % 3],
            executions: 6,
            ..GenOptions::default()
        };
        let mut bytes = Vec::new();
        recgen::write_recording(&recgen::generate(&opts), seed % 2 == 1, &mut bytes).unwrap();
        for settings in ["", "jmax=0", "jmax=1,seed=5"] {
            let a = own_rows("random.jsonl", &bytes, settings);
            assert!(a.counts.samples > 0, "seed {seed}: no rows");
            let first: Vec<String> = a
                .findings
                .iter()
                .take(3)
                .map(|f| {
                    format!(
                        "{:?} e{} s{:?} {}..{}: {}",
                        f.kind, f.execution, f.sample, f.start, f.end, f.detail
                    )
                })
                .collect();
            assert!(a.clean(), "seed {seed} [{settings}]: {first:#?}");
        }
    }
}
