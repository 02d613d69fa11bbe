//! `gyre synth` output read back by the engine: every intended fate is the fate SPEC §4 gives,
//! and the features the simulator promises show up in the trees.

use gyre::engine::admit::Settings;
use gyre::engine::load::{LoadOptions, load};
use gyre::engine::score::{AdvantageMode, Exclusion, Outcome};
use gyre::engine::{process, stats};
use gyre::synth::{SynthOptions, write_synth};

#[test]
fn synth_fates_and_features_as_the_engine_sees_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("synth.jsonl");
    let mut buf = Vec::new();
    let opts = SynthOptions {
        executions: 8,
        turns: 8,
        context: 2500,
        seed: 3,
        delta: true,
    };
    write_synth(&opts, &mut buf).unwrap();
    std::fs::write(&path, &buf).unwrap();
    let batch = load(&[path], &LoadOptions::default(), &|_, _| {}).unwrap();
    assert!(batch.warnings.is_empty(), "{:?}", batch.warnings);
    let results = process(&batch, &Settings::default(), AdvantageMode::DrGrpo);
    for (exec, outcome) in batch.executions.iter().zip(&results.outcomes) {
        let fate = exec.info.as_ref().unwrap().meta.as_ref().unwrap()["synth_fate"]
            .as_str()
            .unwrap()
            .to_owned();
        match fate.as_str() {
            "scored" | "failed_then_retried" | "timeout" => {
                assert!(
                    matches!(outcome, Outcome::Scored { reward, .. } if *reward > 0.0),
                    "{fate}: {outcome:?}"
                )
            }
            "valid_zero" => {
                assert!(matches!(outcome, Outcome::Scored { reward, .. } if *reward == 0.0))
            }
            "valid_after_budget" | "all_failed" => {
                assert_eq!(
                    *outcome,
                    Outcome::Excluded(Exclusion::NoValidReward),
                    "{fate}"
                )
            }
            "dummy" => assert_eq!(*outcome, Outcome::Dummy),
            "open" => assert_eq!(*outcome, Outcome::Excluded(Exclusion::Open)),
            other => panic!("unknown synth fate {other}"),
        }
    }
    let s = stats::stats(&batch, &results);
    assert_eq!((s.scored, s.dummy, s.excluded), (4, 1, 3));
    assert!(
        s.candidates_by_class["main-summary"] > 0,
        "compaction summaries"
    );
    assert!(s.candidates_by_class["sub"] > 0, "sub-agents");
    assert!(s.divergences_in_outputs > 0, "re-serialised tool calls");
    assert!(s.requests_after_closure > 0);
    assert!(s.tokens_by_source["evaluator"] > 0 && s.tokens_by_source["critique"] > 0);
    assert!(s.tokens_by_source["summary"] > 0 && s.tokens_by_source["assistant"] > 0);
    assert!(
        s.dedup_ratio > 2.0,
        "shared prefixes are stored once: {}",
        s.dedup_ratio
    );
}
