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
