//! The audit's log-prob gap, execution weights and `--against` comparison (docs/audit.md) on
//! small hand-built dumps: each planted defect found where it is, its clean twin without.

use gyre_engine::audit::{self, Audit, Kind, Options, against};
use gyre_engine::load::{Batch, Input, LoadOptions, load_inputs};
use gyre_format::named::Named;

fn load(files: &[(&str, &str)]) -> Batch {
    let files: Vec<(&str, &[u8])> = files.iter().map(|(n, t)| (*n, t.as_bytes())).collect();
    load_bytes(&files)
}

/// Loads files given as bytes (compressed or not), in order, into one batch.
fn load_bytes(files: &[(&str, &[u8])]) -> Batch {
    let inputs: Vec<Input> = files
        .iter()
        .map(|(name, bytes)| Input::Memory { name, bytes })
        .collect();
    load_inputs(&inputs, &LoadOptions::default(), &|_, _| {}).unwrap()
}

/// `(kind, execution, sample, start, end)` of each finding of `kinds`.
fn found(findings: &[audit::Finding], kinds: &[Kind]) -> Vec<(Kind, u32, Option<u32>, u32, u32)> {
    let mut v: Vec<_> = findings
        .iter()
        .filter(|f| kinds.contains(&f.kind))
        .map(|f| (f.kind, f.execution, f.sample, f.start, f.end))
        .collect();
    v.sort_by_key(|x| (x.1, x.2, x.3));
    v
}

/// r1 (main): input [1 2 3], output [4 5 6 7]; r2 (main): r1's path + a tool result [8 9],
/// output [10 11 12 13]; r3 (sub-agent "s"): input [20 21], output [22 23].
const REC: &str = r#"{"kind":"header","format":"gyre/1"}
{"kind":"request","execution":"e1","id":"r1","input":[1,2,3],"output":[4,5,6,7],"logprobs":[-0.1,-0.2,-0.3,-0.4],"spans":[{"end":3,"source":"user"}]}
{"kind":"request","execution":"e1","id":"r2","input":[1,2,3,4,5,6,7,8,9],"output":[10,11,12,13],"logprobs":[-0.5,-0.6,-0.7,-0.8],"spans":[{"end":3,"source":"user"},{"end":7,"source":"assistant"},{"end":9,"source":"tool"}]}
{"kind":"request","execution":"e1","id":"r3","agent":"s","input":[20,21],"output":[22,23],"logprobs":[-1.0,-1.0],"spans":[{"end":2,"source":"user"}]}
"#;

fn trained(header: &str, lines: &[&str]) -> String {
    let mut out = format!("{{\"kind\":\"header\",\"format\":\"gyre/1\",\"trainer\":{header}}}\n");
    for l in lines {
        out.push_str(&format!("{{\"kind\":\"trained\",{l}}}\n"));
    }
    out
}

const GYRE: &str = r#"{"name":"test","loss_agg":"token-mean"}"#;

#[test]
fn a_trainer_log_prob_shifted_on_two_tokens_is_one_gap_finding_and_the_summary_counts_mask_on_tokens_only()
 {
    // r2's path as one sample: mask on both outputs; the trainer's log-probs equal the
    // behaviour's except on 11 and 12 (positions 10 and 11, shifted by -2 nats), and a huge gap on the mask-off tool
    // token 8, which must not count.
    let shifted = trained(
        GYRE,
        &[
            r#""execution":"e1","sample":"a","prompt_len":3,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[1,1,1,1,0,0,1,1,1,1],"trainer_logprobs":[-0.1,-0.2,-0.3,-0.4,-20.0,null,-0.5,-2.6,-2.7,-0.8]"#,
            r#""execution":"e1","sample":"b","prompt_len":2,"tokens":[{"request":"r3","start":0,"end":4}],"loss_mask":[1,1],"trainer_logprobs":[-1.0,-1.1]"#,
        ],
    );
    let a = audit::audit(
        &load(&[("rec.jsonl", REC), ("t.jsonl", &shifted)]),
        &Options::default(),
        None,
    );
    assert_eq!(
        found(&a.findings, &[Kind::LogprobGap]),
        [(Kind::LogprobGap, 0, Some(0), 10, 12)]
    );
    let f = a
        .findings
        .iter()
        .find(|f| f.kind == Kind::LogprobGap)
        .unwrap();
    assert_eq!(f.request, Some(1));
    assert!((f.value.unwrap() - 2.0).abs() < 1e-9);
    let gap = a.gap.as_ref().expect("a gap summary");
    // 8 mask-on tokens of a, 2 of b; mask-off token 8's -20 is left out.
    assert_eq!(gap.all.tokens, 10);
    assert_eq!(gap.all.beyond, 2);
    assert!((gap.all.max_abs - 2.0).abs() < 1e-9);
    let labels = |v: &[audit::gap::GapFigures]| {
        v.iter()
            .map(|g| (g.label.clone(), g.tokens))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        labels(&gap.by_role),
        [("main".to_owned(), 8), ("sub".to_owned(), 2)]
    );
    assert_eq!(
        labels(&gap.by_turn),
        [
            ("1".to_owned(), 4),
            ("2".to_owned(), 4),
            ("3".to_owned(), 2)
        ]
    );
    assert_eq!(labels(&gap.by_position), [("<1k".to_owned(), 10)]);
    assert!(
        a.notes.iter().any(|n| n.contains("mask-on tokens")),
        "{:?}",
        a.notes
    );
    // A looser bound: no finding, the same summary.
    let loose = Options {
        gap_bound: 3.0,
        ratio_bounds: (0.01, 100.0),
        ..Options::default()
    };
    let a = audit::audit(
        &load(&[("rec.jsonl", REC), ("t.jsonl", &shifted)]),
        &loose,
        None,
    );
    assert_eq!(found(&a.findings, &[Kind::LogprobGap]), []);
    assert_eq!(a.gap.as_ref().unwrap().all.tokens, 10);
}

fn weights_of(a: &Audit) -> Vec<(String, f64)> {
    let w = a.weights.as_ref().expect("weights");
    w.executions
        .iter()
        .map(|e| (e.id.clone(), e.weight))
        .collect()
}

#[test]
fn weights_follow_the_declared_aggregation_and_a_long_execution_under_token_mean_is_a_finding() {
    // e1 trains 8 tokens, e2 2: under token-mean e1 weighs 4× e2.
    let rec2 = REC.replace("\"e1\",\"id\":\"r3\"", "\"e2\",\"id\":\"r3\"");
    let lines = [
        r#""execution":"e1","sample":"a","prompt_len":3,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[1,1,1,1,0,0,1,1,1,1]"#,
        r#""execution":"e2","sample":"b","prompt_len":2,"tokens":[{"request":"r3","start":0,"end":4}],"loss_mask":[1,1]"#,
    ];
    let token_mean = trained(GYRE, &lines);
    let a = audit::audit(
        &load(&[("rec.jsonl", &rec2), ("t.jsonl", &token_mean)]),
        &Options::default(),
        None,
    );
    assert_eq!(
        weights_of(&a),
        [("e1".to_owned(), 0.8), ("e2".to_owned(), 0.2)]
    );
    assert_eq!(
        found(&a.findings, &[Kind::WeightSpread]),
        [(Kind::WeightSpread, 0, Some(0), 3, 13)]
    );
    assert_eq!(a.weights.as_ref().unwrap().spread, 4.0);
    // The same samples under seq-mean-token-mean (one sample each): equal, clean.
    let seq = trained(
        r#"{"name":"test","loss_agg":"seq-mean-token-mean"}"#,
        &lines,
    );
    let a = audit::audit(
        &load(&[("rec.jsonl", &rec2), ("t.jsonl", &seq)]),
        &Options::default(),
        None,
    );
    assert_eq!(
        weights_of(&a),
        [("e1".to_owned(), 0.5), ("e2".to_owned(), 0.5)]
    );
    assert_eq!(found(&a.findings, &[Kind::WeightSpread]), []);
    // unknown: no weights, a note.
    let unknown = trained(r#"{"name":"test"}"#, &lines);
    let a = audit::audit(
        &load(&[("rec.jsonl", &rec2), ("t.jsonl", &unknown)]),
        &Options::default(),
        None,
    );
    assert!(a.weights.is_none());
    assert!(
        a.notes.iter().any(|n| n.contains("loss_agg is unknown")),
        "{:?}",
        a.notes
    );
}

/// A trainer's dump of the same run: its own execution id and requests (as an importer writes
/// them), one sample holding r2's path as literal ids.
fn dump(ids: &str, behaviour: &str) -> String {
    let req = r#"{"kind":"request","execution":"x9","id":"q1","input":[1,2,3],"output":[4,5,6,7],"logprobs":[-0.1,-0.2,-0.3,-0.4]}"#;
    trained(
        GYRE,
        &[&format!(
            r#""execution":"x9","sample":"0","prompt_len":3,"tokens":[{{"ids":{ids}}}],"loss_mask":[1,1,1,1,0,0,1,1,1,1],"behaviour_logprobs":{behaviour}"#
        )],
    )
    .replacen('\n', &format!("\n{req}\n"), 1)
}

#[test]
fn against_the_recording_drift_log_prob_mismatches_and_unseen_outputs_are_found_token_by_token() {
    let recording = load(&[("rec.jsonl", REC)]);
    let recorded = vec![true; recording.executions.len()];
    let clean = load(&[(
        "dump.jsonl",
        &dump(
            "[1,2,3,4,5,6,7,8,9,10,11,12,13]",
            "[-0.1,-0.2,-0.3,-0.4,null,null,-0.5,-0.6,-0.7,-0.8]",
        ),
    )]);
    let r = against::against(&clean, &recording, &recorded);
    // Clean but for r3 (the sub-agent's output), which no sample holds.
    assert_eq!(
        found(&r.findings, Kind::ALL),
        [(Kind::SampledNotTrained, 0, None, 2, 4)]
    );
    assert!(r.findings[0].detail.contains("against the recording"));
    let s = &r.summary;
    assert_eq!(
        (
            s.samples,
            s.matched_samples,
            s.aligned_tokens,
            s.drifted_tokens
        ),
        (1, 1, 13, 0)
    );
    assert_eq!((s.behaviour_compared, s.behaviour_mismatched), (8, 0));
    assert_eq!((s.recorded_output_tokens, s.unseen_output_tokens), (10, 2));
    // Perturbed: r1's output token 5 retokenised as two ids (55, 56), and the dump's
    // behaviour log-probs of 11 and 12 are not the server's.
    let perturbed = load(&[(
        "dump.jsonl",
        &dump(
            "[1,2,3,4,55,56,6,7,8,9,10,11,12,13]",
            "[-0.1,-0.2,-0.2,-0.3,-0.4,null,null,-0.5,-0.9,-0.9,-0.8]",
        )
        .replace("[1,1,1,1,0,0,1,1,1,1]", "[1,1,1,1,1,0,0,1,1,1,1]"),
    )]);
    let r = against::against(&perturbed, &recording, &recorded);
    assert_eq!(
        found(&r.findings, Kind::ALL),
        [
            (Kind::SampledNotTrained, 0, None, 2, 4),
            (Kind::Retokenized, 0, Some(0), 4, 6),
            (Kind::BehaviourMismatch, 0, Some(0), 11, 13),
        ]
    );
    let drift = r
        .findings
        .iter()
        .find(|f| f.kind == Kind::Retokenized)
        .unwrap();
    assert!(
        drift.detail.contains("[55, 56] vs recorded [5]"),
        "{}",
        drift.detail
    );
    assert_eq!(r.summary.drifted_tokens, 2);
    assert_eq!(r.summary.behaviour_mismatched, 2);
}

/// A bundled demo's own admitted rows as `trained` records (with `settings`), read beside it.
fn demo_rows(bytes: &[u8], settings: &str) -> (Vec<u8>, Vec<u8>) {
    use gyre_engine::admit::Settings;
    use gyre_engine::score::AdvantageMode;
    use gyre_engine::{process, trained};
    let batch = load_inputs(
        &[Input::Memory {
            name: "demo.jsonl",
            bytes,
        }],
        &LoadOptions::default(),
        &|_, _| {},
    )
    .unwrap();
    let settings = Settings::default().with_overrides(settings).unwrap();
    let results = process(&batch, &settings, AdvantageMode::DrGrpo);
    let mut rows = Vec::new();
    trained::write_trained(&batch, &results, &mut rows).unwrap();
    (bytes.to_vec(), rows)
}

/// `against` over the recording and its rows read as one batch (gyre's own rows name the
/// recording's requests), as `gyre audit ROWS --against REC` reads them.
fn against_own(rec: &[u8], rows: &[u8]) -> against::Against {
    let both = load_bytes(&[("demo.jsonl", rec), ("trained.jsonl", rows)]);
    let recorded: Vec<bool> = both
        .executions
        .iter()
        .map(|e| e.requests.iter().any(|r| r.at.file == 0))
        .collect();
    against::against(&both, &both, &recorded)
}

#[test]
fn gyre_admit_rows_match_their_recording_and_perturbed_rows_do_not() {
    use gyre_engine::demo;
    use serde_json::Value;
    let mut recordings = vec![demo::RECORDING];
    recordings.extend(demo::Demo::ALL.iter().map(|d| d.bytes()));
    for bytes in recordings {
        let (rec, rows) = demo_rows(bytes, "jmax=0");
        let r = against_own(&rec, &rows);
        // Every sample matched, in step with its recorded path, with the server's log-probs.
        let kinds = [Kind::Retokenized, Kind::BehaviourMismatch];
        assert_eq!(found(&r.findings, &kinds), [], "{:?}", r.notes);
        assert_eq!(r.summary.matched_samples, r.summary.samples);
        assert_eq!(r.summary.drifted_tokens, 0);
        // The outputs no row holds (a failed execution's placeholder holds one path; outputs
        // off every admitted path) are the ones the audit itself counts as in no sample.
        let both = load_bytes(&[("demo.jsonl", &rec), ("trained.jsonl", &rows)]);
        let a = audit::audit(&both, &Options::default(), None);
        assert_eq!(
            r.summary.unseen_output_tokens + r.summary.unmatched_output_tokens,
            a.untrained.in_no_sample
        );
        // Rows with behaviour log-probs were compared with the server's (a demo imported
        // from a harness log has none).
        assert_eq!(
            r.summary.behaviour_compared > 0,
            a.counts.behaviour_logprobs > 0
        );
    }
    // The default J_max leaves leaves out: the trainer never saw them, said against the
    // recording, with the recorded request named.
    let (rec, rows) = demo_rows(demo::RECORDING, "jmax=1");
    let r = against_own(&rec, &rows);
    assert!(r.summary.unseen_output_tokens > 0);
    assert!(
        r.findings.iter().all(|f| f.kind == Kind::SampledNotTrained
            && f.sample.is_none()
            && f.request.is_some())
    );
    // The same rows perturbed: the first row's tokens as literal ids with one id changed in its
    // last output, and one of its behaviour log-probs moved by 0.5.
    let (rec, rows) = demo_rows(demo::RECORDING, "jmax=0");
    let batch = load_bytes(&[("demo.jsonl", &rec)]);
    let mut lines: Vec<Value> = String::from_utf8(rows)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let row = lines.iter_mut().find(|v| v["kind"] == "trained").unwrap();
    let exec = &batch.executions[batch
        .execution_index(row["execution"].as_str().unwrap())
        .unwrap()];
    let piece = &row["tokens"][0];
    let req = exec
        .request_index(piece["request"].as_str().unwrap())
        .unwrap();
    let mut ids = exec.path_tokens(req);
    ids.truncate(piece["end"].as_u64().unwrap() as usize);
    let prompt_len = row["prompt_len"].as_u64().unwrap() as usize;
    let changed = ids.len() - 3;
    ids[changed] = 999_999;
    row["tokens"] = serde_json::json!([{ "ids": ids }]);
    let lps = row["behaviour_logprobs"].as_array_mut().unwrap();
    let moved = lps.iter().position(Value::is_f64).unwrap();
    lps[moved] = (lps[moved].as_f64().unwrap() - 0.5).into();
    let perturbed: String = lines.iter().map(|v| format!("{v}\n")).collect();
    let r = against_own(&rec, perturbed.as_bytes());
    let got = found(&r.findings, Kind::ALL);
    assert!(
        got.contains(&(
            Kind::Retokenized,
            0,
            Some(0),
            changed as u32,
            changed as u32 + 1
        )),
        "{got:?}"
    );
    let at = (prompt_len + moved) as u32;
    assert!(
        got.contains(&(Kind::BehaviourMismatch, 0, Some(0), at, at + 1)),
        "{got:?}"
    );
    assert_eq!(r.summary.drifted_tokens, 1);
}
