//! slime and SkyRL dumps written by the frameworks' own code (tests/fixtures/import/slime,
//! skyrl: PROVENANCE.md there) import with exact counts, and hostile dumps are one line each.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use serde_json::Value;

use super::common::{fixture, opts, try_import};

/// What the `trained` records of an output add up to.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    executions: usize,
    samples: usize,
    trained_tokens: usize,
    behaviour_logprobs: usize,
    trainer_logprobs: usize,
    ref_logprobs: usize,
    groups: usize,
    requests: usize,
}

fn lines(out: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn counts(records: &[Value]) -> Counts {
    let mut c = Counts::default();
    let mut executions = BTreeSet::new();
    let mut groups = BTreeSet::new();
    for r in records {
        match r["kind"].as_str() {
            Some("request") => c.requests += 1,
            Some("trained") => {
                c.samples += 1;
                executions.insert(r["execution"].as_str().unwrap().to_owned());
                if let Some(g) = r.get("group") {
                    groups.insert(g.to_string());
                }
                let mask: Vec<u64> = r["loss_mask"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_u64().unwrap())
                    .collect();
                let on = |key: &str| {
                    r.get(key).map_or(0, |v| {
                        v.as_array()
                            .unwrap()
                            .iter()
                            .zip(&mask)
                            .filter(|(v, m)| **m == 1 && !v.is_null())
                            .count()
                    })
                };
                c.trained_tokens += mask.iter().filter(|m| **m == 1).count();
                c.behaviour_logprobs += on("behaviour_logprobs");
                c.trainer_logprobs += on("trainer_logprobs");
                c.ref_logprobs += on("ref_logprobs");
            }
            _ => {}
        }
    }
    c.executions = executions.len();
    c.groups = groups.len();
    c
}

/// Each `trained` record's tokens, resolved through the requests they name.
fn resolved_tokens(records: &[Value]) -> Vec<Vec<u64>> {
    let mut paths: HashMap<(String, String), Vec<u64>> = HashMap::new();
    let ids = |v: &Value| -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    let mut out = Vec::new();
    for r in records {
        let exec = r["execution"].as_str().unwrap_or_default().to_owned();
        match r["kind"].as_str() {
            Some("request") => {
                let mut path = match r.get("extends") {
                    Some(e) => paths[&(exec.clone(), e.as_str().unwrap().to_owned())].clone(),
                    None => Vec::new(),
                };
                path.extend(ids(&r["input"]));
                path.extend(ids(&r["output"]));
                paths.insert((exec, r["id"].as_str().unwrap().to_owned()), path);
            }
            Some("trained") => {
                let mut tokens = Vec::new();
                for piece in r["tokens"].as_array().unwrap() {
                    match piece.get("request") {
                        Some(req) => {
                            let path = &paths[&(exec.clone(), req.as_str().unwrap().to_owned())];
                            let (s, e) = (
                                piece["start"].as_u64().unwrap(),
                                piece["end"].as_u64().unwrap(),
                            );
                            tokens.extend(&path[s as usize..e as usize]);
                        }
                        None => tokens.extend(ids(&piece["ids"])),
                    }
                }
                out.push(tokens);
            }
            _ => {}
        }
    }
    out
}

#[test]
fn slime_dump_details_import_with_exact_counts() {
    let (_dir, out, summary) =
        try_import("slime", &[fixture("slime/dump")], &opts(true, None)).unwrap();
    let records = lines(&out);
    let header = &records[0];
    assert_eq!(header["trainer"]["name"], "slime");
    assert_eq!(header["trainer"]["loss_agg"], "execution-mean");
    assert!(header["trainer"]["inferred"].as_array().unwrap().len() >= 2);
    assert_eq!(
        counts(&records),
        Counts {
            executions: 8,
            samples: 10,
            trained_tokens: 106,
            behaviour_logprobs: 106,
            trainer_logprobs: 106,
            ref_logprobs: 106,
            groups: 4,
            requests: 12,
        }
    );
    assert_eq!(
        (summary.executions, summary.samples, summary.trained_tokens),
        (8, 10, 106)
    );
    assert_eq!(
        (summary.behaviour_logprobs, summary.trainer_logprobs),
        (106, 106)
    );
    // The rollout split into two samples: one execution, two trained records; the second
    // sample's context re-rendered the first turn without its thinking, so it names a request
    // of its own, and its first tokens are not the first sample's.
    let split: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "trained" && r["execution"] == "0:2")
        .collect();
    assert_eq!(split.len(), 2);
    assert_eq!(split[0]["tokens"][0]["request"], "r1");
    assert_eq!(split[1]["tokens"][0]["request"], "r2");
    // The tool output inside the sample is mask 0 with no behaviour log-prob (slime's 0.0
    // placeholder), and the trainer's log-probs cover it.
    let mask = split[1]["loss_mask"].as_array().unwrap();
    assert_eq!(mask.iter().filter(|m| **m == 0).count(), 20);
    assert!(split[1]["behaviour_logprobs"][0].is_null());
    assert!(split[1]["trainer_logprobs"][0].is_number());
    assert_eq!(split[1]["source"]["index"], 3);
    // Every sample's tokens, resolved through its requests, are prompt + response as dumped:
    // the lengths of rollout 0 (33, 32, 38, 56, 63 tokens) twice.
    let lens: Vec<usize> = resolved_tokens(&records).iter().map(Vec::len).collect();
    assert_eq!(lens, [33, 32, 38, 56, 63, 33, 32, 38, 56, 63]);
}

#[test]
fn a_slime_rollout_dump_alone_has_behaviour_but_no_trainer_logprobs() {
    let (_dir, out, _) = try_import(
        "slime",
        &[fixture("slime/dump/rollout_data/1.pt")],
        &opts(true, None),
    )
    .unwrap();
    let c = counts(&lines(&out));
    assert_eq!(
        (
            c.executions,
            c.samples,
            c.trained_tokens,
            c.behaviour_logprobs,
            c.trainer_logprobs
        ),
        (4, 5, 53, 53, 0)
    );
}

#[test]
fn skyrl_dumps_import_with_exact_counts_and_padding_left_out() {
    let (_dir, out, summary) =
        try_import("skyrl", &[fixture("skyrl/dumped_data")], &opts(true, None)).unwrap();
    let records = lines(&out);
    assert_eq!(records[0]["trainer"]["name"], "skyrl");
    assert_eq!(records[0]["trainer"]["loss_agg"], "token-mean");
    assert_eq!(
        counts(&records),
        Counts {
            executions: 10,
            samples: 10,
            trained_tokens: 85,
            behaviour_logprobs: 54,
            trainer_logprobs: 85,
            ref_logprobs: 85,
            groups: 5,
            requests: 11,
        }
    );
    assert_eq!(
        (summary.executions, summary.samples, summary.trained_tokens),
        (10, 10, 85)
    );
    assert_eq!(
        (summary.behaviour_logprobs, summary.trainer_logprobs),
        (54, 85)
    );
    assert!(
        summary
            .warnings
            .iter()
            .any(|w| w.contains("2 padding rows left out")),
        "{:?}",
        summary.warnings
    );
    // Step 2 had no rollout log-probs: its requests say so.
    let reconstructed = records
        .iter()
        .filter(|r| r["kind"] == "request" && r["meta"]["reconstructed"] == true)
        .count();
    assert_eq!(reconstructed, 4);
    // Left padding is gone: the first row's prompt starts with <|im_start|>.
    let tokens = resolved_tokens(&records);
    assert_eq!(tokens[0][0], 151_644);
    assert_eq!(tokens[0].len(), 26 + 7);
    // The multi-turn row: its tool output is one mask-0 run between two requests.
    let row4: Vec<&Value> = records
        .iter()
        .filter(|r| r["execution"] == "1:4" && r["kind"] == "request")
        .collect();
    assert_eq!(row4.len(), 2);
    assert_eq!(row4[1]["extends"], "r1");
}

#[test]
fn a_skyrl_response_the_overlong_filter_dropped_is_still_what_the_policy_sampled() {
    // Row 4 of the audit fixture was cut at the length cap; SkyRL's apply_overlong_filtering
    // zeroed its loss mask and kept its rollout log-probs. Its tokens are a request (the policy
    // sampled them), with a zero loss mask and its behaviour log-probs: sampled, not trained.
    let (_dir, out, _) = try_import(
        "skyrl",
        &[fixture(
            "skyrl/audit/clean/global_step_1_training_input.pkl",
        )],
        &opts(true, None),
    )
    .unwrap();
    let records = lines(&out);
    let of = |kind: &str| -> Vec<&Value> {
        records
            .iter()
            .filter(|r| r["kind"] == kind && r["execution"] == "1:4")
            .collect()
    };
    let requests = of("request");
    assert_eq!(requests.len(), 1);
    let output = requests[0]["output"].as_array().unwrap().len();
    assert_eq!(output, 24);
    let logprobs = requests[0]["logprobs"].as_array().unwrap();
    assert!(logprobs.iter().all(|v| v.as_f64().unwrap() < 0.0));
    let trained = of("trained");
    assert_eq!(trained.len(), 1);
    let mask = trained[0]["loss_mask"].as_array().unwrap();
    assert_eq!(mask.len(), 24);
    assert!(mask.iter().all(|m| m == 0));
    let behaviour = trained[0]["behaviour_logprobs"].as_array().unwrap();
    assert!(behaviour.iter().all(Value::is_f64));
    // The tool response of row 2 (mask 0, rollout log-prob 0.0) stays context.
    let row2 = records
        .iter()
        .filter(|r| r["kind"] == "request" && r["execution"] == "1:2")
        .count();
    assert_eq!(row2, 2);
}

#[test]
fn hostile_dumps_are_one_line_and_write_nothing() {
    let cases: [(&str, &str, &str); 6] = [
        (
            "slime",
            "slime/hostile/truncated.pt",
            "not a complete zip archive",
        ),
        (
            "slime",
            "slime/hostile/unknown-global.pt",
            "unknown pickle global `datetime.date`",
        ),
        (
            "slime",
            "slime/hostile/unknown-dtype.pt",
            "unknown tensor dtype: storage type torch.ComplexFloatStorage",
        ),
        ("skyrl", "skyrl/hostile/truncated.pkl", "truncated"),
        (
            "skyrl",
            "skyrl/hostile/unknown-global.pkl",
            "unknown pickle global `datetime.date`",
        ),
        (
            "skyrl",
            "skyrl/hostile/unknown-dtype.pkl",
            "unknown tensor dtype `complex64`",
        ),
    ];
    for (source, file, what) in cases {
        let path: PathBuf = fixture(file);
        let err = try_import(source, std::slice::from_ref(&path), &opts(true, None))
            .map(|_| ())
            .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with(&path.display().to_string()), "{text}");
        assert!(text.contains(what), "{file}: {text}");
        assert!(!text.contains('\n'), "{text}");
        assert!(
            err.downcast_ref::<gyre_import::error::InputError>()
                .is_some()
        );
    }
}
