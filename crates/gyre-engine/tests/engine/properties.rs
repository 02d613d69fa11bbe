//! Property tests on generated recordings (docs/format.md §2–§8 invariants).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;

use gyre_engine::admit::{Class, Settings};
use gyre_engine::load::{Batch, LoadOptions, load};
use gyre_engine::recgen::{self, GenExecution, GenOptions, GenRecord};
use gyre_engine::score::{AdvantageMode, Outcome};
use gyre_engine::{Results, export, process};
use proptest::prelude::*;
use serde_json::Value;

fn write_tmp(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
    p
}

fn recording_bytes(execs: &[GenExecution], delta: bool) -> Vec<u8> {
    let mut buf = Vec::new();
    recgen::write_recording(execs, delta, &mut buf).unwrap();
    buf
}

fn run(bytes: &[u8], settings: &Settings) -> (Batch, Results, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tmp(&dir, "rec.jsonl", bytes);
    let batch = load(&[p], &LoadOptions::default(), &|_, _| {}).expect("generated input is valid");
    let results = process(&batch, settings, AdvantageMode::DrGrpo);
    let mut out = Vec::new();
    export::jsonl::write_rows(&batch, &results, &mut out).unwrap();
    (batch, results, out)
}

fn rows(out: &[u8]) -> Vec<Value> {
    out.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

fn options() -> impl Strategy<Value = (GenOptions, Settings)> {
    (
        any::<u64>(),
        1usize..7,
        1usize..10,
        prop_oneof![Just(4u32), Just(16), Just(1000)],
        0u32..4,
        any::<u64>(),
    )
        .prop_map(|(seed, executions, turns, vocab, jmax, draw_seed)| {
            (
                GenOptions {
                    executions,
                    turns,
                    vocab,
                    context: 120,
                    seed,
                    ..GenOptions::default()
                },
                Settings {
                    seed: draw_seed,
                    jmax,
                    ..Settings::default()
                },
            )
        })
}

/// Full input + output of every generated request, by (execution, request id).
fn generated_paths(execs: &[GenExecution]) -> HashMap<(String, String), Vec<u32>> {
    let mut m = HashMap::new();
    for e in execs {
        for r in &e.records {
            if let GenRecord::Request(r) = r {
                m.insert(
                    (e.id.clone(), r.id.clone()),
                    [r.input.clone(), r.output.clone()].concat(),
                );
            }
        }
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn targets_are_disjoint_and_rows_are_paths((opts, settings) in options()) {
        let execs = recgen::generate(&opts);
        let (_, _, out) = run(&recording_bytes(&execs, false), &settings);
        let paths = generated_paths(&execs);
        let outputs: HashMap<(String, String), usize> = execs.iter().flat_map(|e| e.records.iter().filter_map(move |r| match r {
            GenRecord::Request(r) => Some(((e.id.clone(), r.id.clone()), r.output.len())),
            _ => None,
        })).collect();
        let mut seen: HashSet<(String, String, u64)> = HashSet::new();
        for row in rows(&out) {
            let exec = row["execution"].as_str().unwrap().to_owned();
            let tokens: Vec<u32> = serde_json::from_value(row["tokens"].clone()).unwrap();
            if let Some(leaf) = row["leaf"].as_str() {
                prop_assert_eq!(&tokens, &paths[&(exec.clone(), leaf.to_owned())]);
            }
            let prompt_len = row["prompt_len"].as_u64().unwrap() as usize;
            let mask: Vec<u8> = serde_json::from_value(row["loss_mask"].clone()).unwrap();
            prop_assert_eq!(mask.len(), tokens.len() - prompt_len);
            let mut ones = 0u64;
            for t in row["targets"].as_array().unwrap() {
                let (pos, len, off) = (t["pos"].as_u64().unwrap(), t["len"].as_u64().unwrap(), t["offset"].as_u64().unwrap());
                let req = t["request"].as_str().unwrap().to_owned();
                let req_path = &paths[&(exec.clone(), req.clone())];
                let req_out_start = req_path.len() - outputs[&(exec.clone(), req.clone())];
                for j in 0..len {
                    // The run names output tokens of `req`: the row holds exactly those ids there.
                    prop_assert_eq!(tokens[(pos + j) as usize], req_path[req_out_start + (off + j) as usize]);
                    prop_assert!(seen.insert((exec.clone(), req.clone(), off + j)), "target claimed twice");
                    prop_assert_eq!(mask[(pos + j) as usize - prompt_len], 1);
                    ones += 1;
                }
            }
            prop_assert_eq!(ones, mask.iter().map(|&m| m as u64).sum::<u64>());
            if !row["dummy"].as_bool().unwrap() {
                prop_assert!(ones > 0);
                prop_assert_eq!(mask[0], 1, "prompt_len is the first target");
            }
        }
    }

    #[test]
    fn uncapped_admission_claims_every_trainable_token((opts, mut settings) in options()) {
        settings.jmax = 0;
        let execs = recgen::generate(&opts);
        let (batch, results, _) = run(&recording_bytes(&execs, false), &settings);
        for (i, exec) in batch.executions.iter().enumerate() {
            let adm = &results.admissions[i];
            let trainable: u64 = exec.tree.nodes.iter().enumerate()
                .filter(|(n, _)| gyre_engine::admit::trainable_node(exec, *n as u32))
                .map(|(_, node)| node.len as u64)
                .sum();
            match results.outcomes[i] {
                Outcome::Scored { .. } => prop_assert_eq!(adm.targets(), trainable),
                _ => prop_assert_eq!(adm.targets(), 0),
            }
        }
    }

    #[test]
    fn class_priority_is_never_violated((opts, settings) in options()) {
        let execs = recgen::generate(&opts);
        let (batch, results, _) = run(&recording_bytes(&execs, false), &settings);
        for (i, exec) in batch.executions.iter().enumerate() {
            let adm = &results.admissions[i];
            for (k, d) in adm.draws.iter().enumerate() {
                // Weight of every candidate just before draw k+1, from the claims of draws 1..=k.
                for c in &adm.candidates {
                    let node = exec.requests[c.request as usize].output_node;
                    let w: u64 = exec.tree.path_nodes(node).into_iter()
                        .filter(|&n| gyre_engine::admit::trainable_node(exec, n))
                        .filter(|&n| adm.claimed_by[n as usize].is_none_or(|by| by as usize > k))
                        .map(|n| exec.tree.nodes[n as usize].len as u64)
                        .sum();
                    let rank = |cl: Class| settings.priority.iter().position(|&p| p == cl);
                    if w > 0 && c.class != d.class {
                        prop_assert!(rank(c.class) > rank(d.class), "a higher class had weight left");
                    }
                    let logged = d.candidates.iter().find(|x| x.request == c.request).map(|x| x.weight);
                    if c.class == d.class {
                        prop_assert_eq!(logged.unwrap_or(0), w);
                    }
                }
            }
        }
    }

    #[test]
    fn full_and_delta_encodings_export_identical_bytes((opts, settings) in options()) {
        let execs = recgen::generate(&opts);
        let (_, _, full) = run(&recording_bytes(&execs, false), &settings);
        let (_, _, delta) = run(&recording_bytes(&execs, true), &settings);
        prop_assert_eq!(full, delta);
    }

    /// A delta record is inserted from the end of the request it extends, searching only the
    /// forks above it; that must place every token exactly as matching its full input from the
    /// root does (docs/format.md §1: the two encodings are the same request).
    #[test]
    fn full_and_delta_encodings_build_the_same_trees((opts, _settings) in options()) {
        let execs = recgen::generate(&opts);
        let (full, _, _) = run(&recording_bytes(&execs, false), &Settings::default());
        let (delta, _, _) = run(&recording_bytes(&execs, true), &Settings::default());
        for (f, d) in full.executions.iter().zip(&delta.executions) {
            for (i, (rf, rd)) in f.requests.iter().zip(&d.requests).enumerate() {
                let who = |e: &gyre_engine::execution::Execution, n: u32| {
                    let node = &e.tree.nodes[n as usize];
                    (node.kind, node.owner, node.offset, node.len)
                };
                let pf: Vec<_> = f.tree.path_nodes(rf.output_node).into_iter().map(|n| who(f, n)).collect();
                let pd: Vec<_> = d.tree.path_nodes(rd.output_node).into_iter().map(|n| who(d, n)).collect();
                prop_assert_eq!(pf, pd, "{} request {}", f.id, i);
                prop_assert_eq!(rf.matched, rd.matched);
            }
            prop_assert_eq!(f.tree.nodes.len(), d.tree.nodes.len());
        }
    }

    #[test]
    fn interleaving_executions_changes_no_execution_rows((opts, settings) in options(), shuffle in any::<u64>()) {
        let execs = recgen::generate(&opts);
        let (_, _, ordered) = run(&recording_bytes(&execs, false), &settings);
        // Interleave lines of different executions at random, keeping each execution's order.
        let mut cursors: Vec<usize> = vec![0; execs.len()];
        let mut state = shuffle | 1;
        let mut buf = Vec::new();
        let total: usize = execs.iter().map(|e| e.records.len()).sum();
        for _ in 0..total {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            let open: Vec<usize> = (0..execs.len()).filter(|&e| cursors[e] < execs[e].records.len()).collect();
            let e = open[(state % open.len() as u64) as usize];
            recgen::write_record(&execs[e], cursors[e], false, &mut buf).unwrap();
            cursors[e] += 1;
        }
        let (_, _, shuffled) = run(&buf, &settings);
        let by_exec = |out: &[u8]| {
            let mut m: HashMap<String, Vec<Value>> = HashMap::new();
            for r in rows(out) {
                m.entry(r["execution"].as_str().unwrap().to_owned()).or_default().push(r);
            }
            m
        };
        prop_assert_eq!(by_exec(&ordered), by_exec(&shuffled));
    }

    #[test]
    fn same_seed_same_bytes_whatever_the_thread_count((opts, settings) in options()) {
        let bytes = recording_bytes(&recgen::generate(&opts), false);
        let (_, _, a) = run(&bytes, &settings);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let (_, _, b) = pool.install(|| run(&bytes, &settings));
        prop_assert_eq!(a, b);
    }
}
