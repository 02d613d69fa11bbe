//! `gyre sweep` figures are exactly what admissions run one by one give (the sweep derives every
//! J_max from one uncapped run per seed and reuses prepared executions: nothing may drift).

use gyre_engine::admit::{Class, Settings};
use gyre_engine::load::{Batch, LoadOptions, load_bytes};
use gyre_engine::provenance::{Reason, node_reason};
use gyre_engine::recgen::{self, GenOptions};
use gyre_engine::score::AdvantageMode;
use gyre_engine::sweep::{SweepOptions, sweep};
use gyre_engine::{admit::trainable_node, process, row_prefix, rows, tree_pack};
use gyre_synth::{SynthOptions, write_synth};

fn check(batch: &Batch, priority: Vec<Class>) {
    let options = SweepOptions {
        jmax: vec![1, 2, 3, 5, 0],
        seed: 7,
        seeds: 6,
        priority: priority.clone(),
    };
    let s = sweep(batch, &options);
    for (j, &jmax) in options.jmax.iter().enumerate() {
        for k in 0..options.seeds as usize {
            let settings = Settings {
                seed: options.seed + k as u64,
                jmax,
                priority: priority.clone(),
            };
            let results = process(batch, &settings, AdvantageMode::DrGrpo);
            for (i, e) in s.executions.iter().enumerate() {
                let exec = &batch.executions[i];
                let rows = rows::execution_rows(batch, &results, i);
                let f = e.figures[j][k];
                assert_eq!(
                    f.rows,
                    rows.len() as u64,
                    "{} rows, jmax {jmax}",
                    e.execution
                );
                let tokens: u64 = rows.iter().map(|r| r.tokens.len() as u64).sum();
                assert_eq!(f.tokens, tokens, "{} tokens", e.execution);
                assert_eq!(f.targets, results.admissions[i].targets());
                let (mut by_jmax, mut by_class) = (0, 0);
                for n in 0..exec.tree.nodes.len() as u32 {
                    if !trainable_node(exec, n) {
                        continue;
                    }
                    let len = exec.tree.nodes[n as usize].len as u64;
                    match node_reason(exec, &results.outcomes[i], &results.admissions[i], n, None) {
                        Some(Reason::LeftOutJmax) => by_jmax += len,
                        Some(Reason::LeftOutClass) => by_class += len,
                        _ => {}
                    }
                }
                assert_eq!((f.left_out_jmax, f.left_out_class), (by_jmax, by_class));
                // Tree-pack tokens: the layout a trainer gets, over this execution's rows.
                let with_targets: Vec<&[u32]> = rows
                    .iter()
                    .filter(|r| r.loss_mask.contains(&1))
                    .map(|r| r.tokens.as_slice())
                    .collect();
                assert_eq!(f.tree_tokens, tree_pack::tree_tokens(&with_targets).1);
                if jmax == 0 {
                    assert_eq!(f, e.uncapped[k]);
                }
            }
            assert_eq!(s.batch_executions, results.batch_executions);
            // The batch's tree-pack tokens share prefixes across executions, as `gyre stats`.
            assert_eq!(
                s.batch(Some(j), k).tree_tokens,
                row_prefix::tree_pack(batch, &results).distinct_tokens
            );
        }
    }
}

#[test]
fn sweep_matches_admissions_run_one_by_one() {
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
    let mut generated = Vec::new();
    let execs = recgen::generate(&GenOptions {
        executions: 12,
        vocab: 6,
        seed: 3,
        ..GenOptions::default()
    });
    recgen::write_recording(&execs, true, &mut generated).unwrap();
    for (name, bytes) in [
        ("example.jsonl", gyre_engine::demo::RECORDING),
        ("synth.jsonl", &synth[..]),
        ("gen.jsonl", &generated[..]),
    ] {
        let batch = load_bytes(name, bytes, &LoadOptions::default()).unwrap();
        check(&batch, Class::DEFAULT_PRIORITY.to_vec());
        check(&batch, vec![Class::Sub, Class::Main]);
    }
}

/// Seeds past u64::MAX wrap to 0 (the inspector's `S` on seed 0 asks for u64::MAX), as the
/// admissions they stand for do.
#[test]
fn sweep_seeds_wrap_past_the_largest() {
    let batch = load_bytes(
        "example.jsonl",
        gyre_engine::demo::RECORDING,
        &LoadOptions::default(),
    )
    .unwrap();
    let first = u64::MAX - 1;
    let s = sweep(
        &batch,
        &SweepOptions {
            jmax: vec![1, 0],
            seed: first,
            seeds: 3,
            priority: Class::DEFAULT_PRIORITY.to_vec(),
        },
    );
    for k in 0..3 {
        let settings = Settings {
            seed: first.wrapping_add(k as u64),
            jmax: 1,
            ..Settings::default()
        };
        let results = process(&batch, &settings, AdvantageMode::DrGrpo);
        let targets: u64 = results.admissions.iter().map(|a| a.targets()).sum();
        assert_eq!(
            s.batch(Some(0), k).targets,
            targets,
            "seed {}",
            settings.seed
        );
    }
}
