//! The recorder (`engine::recorder`): records are checked as the loader checks them before they
//! are written, delta form is chosen automatically, and a recording can be appended to.

use gyre_engine::admit::Settings;
use gyre_engine::load::{LoadOptions, load, load_bytes};
use gyre_engine::record::{ClosureStatus, Source};
use gyre_engine::recorder::{RecordError, Recorder};
use gyre_engine::score::AdvantageMode;
use gyre_engine::write::{AssessmentOut, ClosureOut, ExecutionOut, RequestOut, SpanOut, Validity};
use gyre_engine::{export, process};
use serde_json::Value;

fn request<'a>(
    exec: &'a str,
    id: &'a str,
    input: &'a [u32],
    output: &'a [u32],
    logprobs: &'a [f64],
    spans: &'a [SpanOut<'a>],
) -> RequestOut<'a> {
    RequestOut {
        logprobs: Some(logprobs),
        ..RequestOut::new(exec, id, "main", input, spans, output)
    }
}

fn closure(exec: &str) -> ClosureOut<'_> {
    ClosureOut {
        execution: exec,
        t: 10.0,
        status: ClosureStatus::Completed,
        committed: None,
        artifact: Some(&PATCH),
        version: Some(&ONE),
        meta: None,
    }
}

static PATCH: Value = Value::String(String::new());
static ONE: Value = Value::Bool(true);

fn assessment(exec: &str) -> AssessmentOut<'_> {
    AssessmentOut {
        execution: exec,
        artifact: &PATCH,
        version: &ONE,
        status: Validity::Valid,
        score: Some(1.0),
        t: 11.0,
        branch: None,
        attempt: None,
        evaluator: None,
        error: None,
        critique: None,
        meta: None,
    }
}

/// A conversation of three turns, a retry of the second, and a sub-agent at the root, recorded
/// with full inputs.
fn record(delta: bool) -> Vec<u8> {
    let mut rec = Recorder::new(Vec::new()).with_delta(delta);
    rec.execution(&ExecutionOut {
        execution: "e1",
        t: 0.0,
        budget_s: Some(60.0),
        group: None,
        task: None,
        meta: None,
    })
    .unwrap();
    let sys = [SpanOut {
        end: 2,
        source: Source::System,
        call_id: None,
    }];
    rec.request(&request(
        "e1",
        "r1",
        &[1, 2],
        &[10, 11],
        &[-0.1, -0.2],
        &sys,
    ))
    .unwrap();
    let tool = [
        SpanOut {
            end: 2,
            source: Source::System,
            call_id: None,
        },
        SpanOut {
            end: 5,
            source: Source::Tool,
            call_id: Some("c1"),
        },
    ];
    rec.request(&request(
        "e1",
        "r2",
        &[1, 2, 10, 11, 3],
        &[12],
        &[-0.3],
        &tool,
    ))
    .unwrap();
    rec.request(&request(
        "e1",
        "r3",
        &[1, 2, 10, 11, 3],
        &[12],
        &[-0.4],
        &tool,
    ))
    .unwrap();
    rec.request(&request(
        "e1",
        "r4",
        &[1, 2, 10, 11, 3, 12, 4, 5],
        &[13, 14],
        &[-0.5, -0.6],
        &tool,
    ))
    .unwrap();
    rec.request(&RequestOut {
        agent: "sub-1",
        ..request("e1", "s1", &[7, 8], &[20], &[-0.7], &[])
    })
    .unwrap();
    rec.closure(&closure("e1")).unwrap();
    rec.assessment(&assessment("e1")).unwrap();
    rec.finish().unwrap()
}

fn lines(bytes: &[u8]) -> Vec<Value> {
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

fn rows(bytes: &[u8]) -> Vec<u8> {
    let batch = load_bytes("rec.jsonl", bytes, &LoadOptions::default()).unwrap();
    assert!(batch.warnings.is_empty(), "{:?}", batch.warnings);
    let results = process(
        &batch,
        &Settings {
            jmax: 0,
            ..Settings::default()
        },
        AdvantageMode::DrGrpo,
    );
    let mut out = Vec::new();
    export::jsonl::write_rows(&batch, &results, &mut out).unwrap();
    out
}

#[test]
fn continuing_requests_are_written_in_delta_form_and_mean_the_same() {
    let delta = record(true);
    let full = record(false);
    let written = lines(&delta);
    let extends: Vec<Option<&str>> = written
        .iter()
        .filter(|l| l["kind"] == "request")
        .map(|l| l["extends"].as_str())
        .collect();
    // r2 and r3 continue r1; r4 continues r3 (the latest of the two identical paths); the
    // sub-agent starts afresh.
    assert_eq!(extends, [None, Some("r1"), Some("r1"), Some("r3"), None]);
    assert_eq!(written[4]["input"], serde_json::json!([4, 5]));
    assert_eq!(
        written[4]["spans"],
        serde_json::json!([]),
        "spans before the new tokens are left out"
    );
    assert_eq!(
        written[2]["spans"],
        serde_json::json!([{"end": 1, "source": "tool", "call_id": "c1"}])
    );
    assert!(lines(&full).iter().all(|l| l.get("extends").is_none()));
    assert_eq!(rows(&delta), rows(&full));
}

#[test]
fn invalid_records_are_refused_and_nothing_is_written() {
    let mut rec = Recorder::new(Vec::new());
    rec.request(&request("e1", "r1", &[1], &[2], &[-0.1], &[]))
        .unwrap();
    let cases: Vec<(RequestOut, &str)> = vec![
        (request("e1", "r1", &[1], &[3], &[-0.1], &[]), "id"),
        (request("e1", "r2", &[1], &[3, 4], &[-0.1], &[]), "logprobs"),
        (
            request(
                "e1",
                "r3",
                &[1],
                &[3],
                &[-0.1],
                &[SpanOut {
                    end: 5,
                    source: Source::User,
                    call_id: None,
                }],
            ),
            "spans[0].end",
        ),
        (
            RequestOut {
                extends: Some("r9"),
                ..request("e1", "r4", &[1], &[3], &[-0.1], &[])
            },
            "extends",
        ),
    ];
    for (bad, field) in cases {
        match rec.request(&bad) {
            Err(RecordError::Invalid(e)) => assert_eq!(e.field.as_deref(), Some(field), "{e:?}"),
            other => panic!("{field}: {other:?}"),
        }
    }
    rec.closure(&closure("e1")).unwrap();
    assert!(matches!(
        rec.closure(&closure("e1")),
        Err(RecordError::Invalid(_))
    ));
    // After closure the id is still taken; a new one is accepted (shown as after closure).
    assert!(matches!(
        rec.request(&request("e1", "r1", &[1], &[2], &[-0.1], &[])),
        Err(RecordError::Invalid(_))
    ));
    rec.request(&request("e1", "r5", &[1], &[2], &[-0.1], &[]))
        .unwrap();
    let out = rec.finish().unwrap();
    assert_eq!(lines(&out).len(), 3);
    load_bytes("rec.jsonl", &out, &LoadOptions::default()).unwrap();
}

#[test]
fn appending_continues_a_recording_and_drops_a_cut_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let mut rec = Recorder::create(&path).unwrap();
    rec.header(None, None).unwrap();
    rec.request(&request("e1", "r1", &[1, 2], &[10], &[-0.1], &[]))
        .unwrap();
    rec.finish().unwrap();
    assert!(Recorder::create(&path).is_err(), "create never overwrites");
    // A writer killed mid-line.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"kind":"request","execution":"e1","id":"r2","inp"#);
    std::fs::write(&path, &bytes).unwrap();

    let mut rec = Recorder::append(&path).unwrap();
    assert!(rec.knows_execution("e1") && !rec.knows_execution("e2"));
    assert!(rec.knows_request("e1", "r1") && !rec.knows_request("e1", "r2"));
    assert!(matches!(
        rec.header(None, None),
        Err(RecordError::Invalid(_))
    ));
    assert!(matches!(
        rec.request(&request("e1", "r1", &[1], &[2], &[-0.1], &[])),
        Err(RecordError::Invalid(_))
    ));
    let w = rec
        .request(&request("e1", "r2", &[1, 2, 10, 3], &[11], &[-0.2], &[]))
        .unwrap();
    assert_eq!(w.extends.as_deref(), Some("r1"));
    assert_eq!(w.input_tokens, 1);
    rec.finish().unwrap();
    let batch = load(&[path], &LoadOptions::default(), &|_, _| {}).unwrap();
    let e = &batch.executions[0];
    assert_eq!(e.requests.len(), 2);
    assert_eq!(e.path_tokens(1), [1, 2, 10, 3, 11]);
}
