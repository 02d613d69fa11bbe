//! `trained` records beside a recording (docs/format.md §9): request pieces resolve to the
//! execution's requests across files, checks that need the requests name file and line, and
//! the counts.

use gyre_engine::load::{Input, LoadOptions, load_inputs};
use gyre_engine::trained::TrainedCounts;
use gyre_format::trained::LossAgg;

/// r1: input [1 2 3], output [4 5]; r2 extends it: input [6], output [7 8 9].
const REC: &str = r#"{"kind":"header","format":"gyre/1"}
{"kind":"request","execution":"e1","id":"r1","input":[1,2,3],"output":[4,5],"logprobs":[-0.1,-0.2]}
{"kind":"request","execution":"e1","id":"r2","extends":"r1","input":[6],"output":[7,8,9],"logprobs":[-0.3,0.0,-0.5]}
"#;

fn load(trained: &str) -> Result<gyre_engine::load::Batch, gyre_engine::load::LoadError> {
    load_inputs(
        &[
            Input::Memory {
                name: "rec.jsonl",
                bytes: REC.as_bytes(),
            },
            Input::Memory {
                name: "trained.jsonl",
                bytes: trained.as_bytes(),
            },
        ],
        &LoadOptions::default(),
        &|_, _| {},
    )
}

fn first_error(trained: &str) -> String {
    let Err(e) = load(trained) else {
        panic!("accepted {trained}")
    };
    let d = &e.diagnostics[0];
    format!(
        "{}:{}: {} ({})",
        d.file.display(),
        d.line,
        d.message,
        d.field.as_deref().unwrap_or("-")
    )
}

#[test]
fn samples_resolve_against_the_recording_and_are_counted() {
    let trained = r#"{"kind":"header","format":"gyre/1","trainer":{"name":"gyre","version":"0.1","loss_agg":"execution-mean"}}
{"kind":"trained","execution":"e1","sample":"a","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":5}],"loss_mask":[1,1],"behaviour_logprobs":[-0.1,-0.2]}
{"kind":"trained","execution":"e1","sample":"b","prompt_len":6,"tokens":[{"request":"r2","start":0,"end":9},{"ids":[99]}],"loss_mask":[1,0,1,0],"behaviour_logprobs":[-0.3,0.0,null,null],"trainer_logprobs":[-0.3,-0.1,-0.4,null],"aux_loss":"echo-ce","aux_mask":[0,1,0,0]}
"#;
    let batch = load(trained).unwrap();
    let e = &batch.executions[0];
    assert_eq!(e.trained.list.len(), 2);
    let b = &e.trained.list[1];
    assert_eq!(b.requests, [Some(1), None]);
    assert_eq!(e.sample_tokens(b), [1, 2, 3, 4, 5, 6, 7, 8, 9, 99]);
    assert_eq!((b.at.file, b.at.line), (1, 3));
    assert_eq!(
        batch.trained_counts(),
        TrainedCounts {
            executions: 1,
            samples: 2,
            trained_tokens: 4,
            aux_tokens: 1,
            // a: both; b: the first mask-on token has -0.3, the second (index 2) null.
            behaviour_logprobs: 3,
            trainer_logprobs: 2,
        }
    );
    let trainer = batch.trainer().unwrap();
    assert_eq!(
        (trainer.name.as_str(), trainer.loss_agg),
        ("gyre", LossAgg::ExecutionMean)
    );
}

#[test]
fn checks_that_need_the_requests_name_file_and_line() {
    let sample = |tokens: &str, id: &str| {
        format!(
            r#"{{"kind":"trained","execution":"e1","sample":"{id}","prompt_len":0,"tokens":[{tokens}],"loss_mask":[1,1]}}"#
        )
    };
    let unknown = sample(r#"{"request":"r9","start":0,"end":2}"#, "a");
    assert_eq!(
        first_error(&unknown),
        "trained.jsonl:1: request \"r9\" is not an earlier request of execution \"e1\" (tokens[0].request)"
    );
    let past = sample(r#"{"request":"r1","start":4,"end":6}"#, "a");
    assert_eq!(
        first_error(&past),
        "trained.jsonl:1: piece end 6 is past request \"r1\"'s path (5 tokens: input + output) (tokens[0].end)"
    );
    let ok = sample(r#"{"request":"r2","start":7,"end":9}"#, "a");
    let twice = format!("{ok}\n{ok}\n");
    assert_eq!(
        first_error(&twice),
        "trained.jsonl:2: sample id \"a\" is already used in execution \"e1\" (sample)"
    );
    // Samples of another execution may reuse the id; one with only literal ids needs no
    // request.
    let other = r#"{"kind":"trained","execution":"e2","sample":"a","prompt_len":1,"tokens":[{"ids":[5,6]}],"loss_mask":[0]}"#;
    let batch = load(&format!("{ok}\n{other}\n")).unwrap();
    assert_eq!(batch.trained_counts().executions, 2);
    assert_eq!(batch.trained_counts().trained_tokens, 2);
}

/// gyre's own rows round-trip: `gyre/admitted-1` rows read back against their recording
/// give the bytes `gyre admit --format trained` writes.
#[test]
fn admitted_rows_read_back_as_the_same_trained_records() {
    use gyre_engine::admit::Settings;
    use gyre_engine::score::AdvantageMode;
    use gyre_engine::{export, process, rows, trained};
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../assets/demo/example.jsonl"
    );
    let batch = gyre_engine::load::load(&[path.into()], &LoadOptions::default(), &|_, _| {})
        .map_err(|e| format!("{:?}", e.diagnostics))
        .unwrap();
    let results = process(&batch, &Settings::default(), AdvantageMode::DrGrpo);
    let mut direct = Vec::new();
    let n = trained::write_trained(&batch, &results, &mut direct).unwrap();
    let mut rows = Vec::new();
    assert_eq!(
        export::jsonl::write_rows(&batch, &results, &mut rows).unwrap(),
        n
    );
    let mut imported = Vec::new();
    let done = trained::import_admitted(&batch, &rows[..], "rows.jsonl", &mut imported).unwrap();
    assert_eq!((done.rows, done.unmatched), (n, 0));
    assert!(n > 0);
    assert_eq!(
        String::from_utf8(imported).unwrap(),
        String::from_utf8(direct.clone()).unwrap()
    );
    // Read beside the recording, the records count what the rows train.
    let both = load_inputs(
        &[
            Input::File(std::path::Path::new(path)),
            Input::Memory {
                name: "trained.jsonl",
                bytes: &direct,
            },
        ],
        &LoadOptions::default(),
        &|_, _| {},
    )
    .map_err(|e| format!("{:?}", e.diagnostics))
    .unwrap();
    let targets: u64 = (0..batch.executions.len())
        .flat_map(|i| rows::execution_rows(&batch, &results, i))
        .map(|r| r.loss_mask.iter().filter(|&&m| m == 1).count() as u64)
        .sum();
    assert_eq!(both.trained_counts().trained_tokens, targets);
    assert_eq!(both.trained_counts().samples, n);
    // A row whose tokens are not its leaf's path stays visible as literal ids.
    let text = String::from_utf8(rows).unwrap();
    let first = text.lines().next().unwrap();
    let mut row: serde_json::Value = serde_json::from_str(first).unwrap();
    row["tokens"][0] = serde_json::json!(999_999);
    let mut out = Vec::new();
    let done = trained::import_admitted(&batch, row.to_string().as_bytes(), "rows.jsonl", &mut out)
        .unwrap();
    assert_eq!(done.unmatched, 1);
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains(r#""tokens":[{"ids":[999999,"#)
    );
}
