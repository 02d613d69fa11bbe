//! The `trained` record and the header's `trainer` (docs/format.md §9): what is read, what is
//! refused (with the field at fault), and that the one writer's lines read back unchanged.

use gyre_format::copy::TrainedCopy;
use gyre_format::named::Named;
use gyre_format::record::{LineError, Record, parse_line};
use gyre_format::sanitize;
use gyre_format::trained::{Advantage, LossAgg, Piece, Trainer};
use gyre_format::write::{AdvantageOut, Line, PieceOut, SourceOut, TrainedOut};
use serde_json::{Value, json};

fn read(v: &Value) -> Result<Record, LineError> {
    parse_line(v.to_string().as_bytes()).map(|p| p.record)
}

fn refused(v: Value) -> LineError {
    match read(&v) {
        Ok(r) => panic!("accepted {v}: {r:?}"),
        Err(e) => e,
    }
}

/// A valid sample: 4 tokens from r1 and 2 literal ids, prompt 3, response 3.
fn sample() -> Value {
    json!({
        "kind": "trained", "execution": "e1", "sample": 0,
        "tokens": [{"request": "r1", "start": 0, "end": 4}, {"ids": [7, 8]}],
        "prompt_len": 3, "loss_mask": [1, 0, 1],
        "behaviour_logprobs": [-0.5, null, 0.0],
        "trainer_logprobs": [-0.4, -0.1, null],
        "advantage": 0.5
    })
}

fn with(mut v: Value, key: &str, value: Value) -> Value {
    v[key] = value;
    v
}

#[test]
fn a_sample_is_read_with_its_pieces_and_counts() {
    let Record::Trained(t) = read(&sample()).unwrap() else {
        panic!("not a trained record")
    };
    assert_eq!(t.execution, "e1");
    assert_eq!(t.sample, "0");
    assert_eq!(
        t.tokens,
        [
            Piece::Request {
                request: "r1".into(),
                start: 0,
                end: 4
            },
            Piece::Ids(vec![7, 8])
        ]
    );
    assert_eq!((t.len(), t.response_len(), t.trained_tokens()), (6, 3, 2));
    // A present 0.0 is a value, null is none: of the two mask-on tokens, both have a
    // behaviour log-prob (one of them 0.0) and one a trainer log-prob.
    assert_eq!(t.masked_values(t.behaviour_logprobs.as_deref()), 2);
    assert_eq!(t.masked_values(t.trainer_logprobs.as_deref()), 1);
    assert_eq!(t.advantage, Some(Advantage::Sample(0.5)));
    assert_eq!(t.aux_tokens(), 0);
}

#[test]
fn required_fields_are_named_when_missing() {
    for field in ["execution", "sample", "tokens", "prompt_len", "loss_mask"] {
        let mut v = sample();
        v.as_object_mut().unwrap().remove(field);
        let e = refused(v);
        assert_eq!(e.field.as_deref(), Some(field), "{}", e.message);
        assert!(e.message.contains("missing"), "{}", e.message);
    }
}

#[test]
fn array_lengths_follow_the_response() {
    for field in [
        "loss_mask",
        "behaviour_logprobs",
        "trainer_logprobs",
        "ref_logprobs",
        "advantage",
    ] {
        let e = refused(with(sample(), field, json!([0, 1])));
        assert_eq!(e.field.as_deref(), Some(field), "{}", e.message);
        assert!(
            e.message
                .contains("2 entries but the response has 3 tokens"),
            "{}",
            e.message
        );
    }
    let e = refused(with(sample(), "prompt_len", json!(7)));
    assert_eq!(e.field.as_deref(), Some("prompt_len"));
    assert!(
        e.message.contains("past the sample's 6 tokens"),
        "{}",
        e.message
    );
    // prompt_len = len(tokens): no response, every array empty.
    let empty = with(
        with(sample(), "prompt_len", json!(6)),
        "loss_mask",
        json!([]),
    );
    let empty = with(
        with(empty, "behaviour_logprobs", json!([])),
        "trainer_logprobs",
        json!([]),
    );
    assert!(read(&empty).is_ok());
}

#[test]
fn masks_hold_zeros_and_ones_only() {
    for bad in [
        json!([1, 2, 0]),
        json!([1, -1, 0]),
        json!([1, 0.5, 0]),
        json!([1, true, 0]),
    ] {
        let e = refused(with(sample(), "loss_mask", bad.clone()));
        assert_eq!(
            e.field.as_deref(),
            Some("loss_mask[1]"),
            "{bad}: {}",
            e.message
        );
        assert!(e.message.contains("0 or 1"), "{}", e.message);
    }
    let aux = with(sample(), "aux_mask", json!([0, 1, 1]));
    let e = refused(aux.clone());
    assert_eq!(e.field.as_deref(), Some("aux_loss"));
    let e = refused(with(
        with(sample(), "aux_loss", json!("echo-ce")),
        "x",
        json!(1),
    ));
    assert_eq!(e.field.as_deref(), Some("aux_mask"));
    let Record::Trained(t) = read(&with(aux, "aux_loss", json!("echo-ce"))).unwrap() else {
        panic!()
    };
    assert_eq!((t.aux_tokens(), t.trained_tokens()), (2, 2));
}

#[test]
fn pieces_are_request_ranges_or_literal_ids() {
    for (piece, says) in [
        (
            json!({"request": "r1", "start": 3}),
            "needs `start` and `end`",
        ),
        (
            json!({"request": "r1", "start": 5, "end": 4}),
            "not a range",
        ),
        (
            json!({"request": "r1", "start": 0, "end": 4, "ids": [1]}),
            "not both",
        ),
        (json!({"ids": [1], "start": 0}), "no `start` or `end`"),
        (json!({}), "needs `request`"),
    ] {
        let v = with(sample(), "tokens", json!([piece, {"ids": [7, 8]}]));
        let e = refused(v);
        assert_eq!(
            e.field.as_deref(),
            Some("tokens[0]"),
            "{piece}: {}",
            e.message
        );
        assert!(e.message.contains(says), "{piece}: {}", e.message);
    }
    let e = refused(with(sample(), "tokens", json!([{"ids": [1, -2]}])));
    assert_eq!(
        e.field.as_deref(),
        Some("tokens[0].ids[1]"),
        "{}",
        e.message
    );
}

/// Hostile input: positions that overflow, ids with escape codes, non-finite numbers.
#[test]
fn hostile_samples_are_refused_or_kept_inert() {
    // Two pieces of 2^32 − 1 tokens each: the sum overflows u32, refused before any array is
    // sized by it.
    let huge = json!({"request": "r1", "start": 0, "end": u32::MAX as u64});
    let e = refused(with(sample(), "tokens", json!([huge, huge])));
    assert_eq!(e.field.as_deref(), Some("tokens[1]"));
    assert!(e.message.contains("longer than"), "{}", e.message);
    let e = refused(with(
        sample(),
        "tokens",
        json!([{"request": "r1", "start": 0, "end": u64::MAX}]),
    ));
    assert!(e.message.contains("within 0..2^32"), "{}", e.message);
    let e = refused(with(sample(), "prompt_len", json!(u64::MAX)));
    assert_eq!(e.field.as_deref(), Some("prompt_len"));
    // A log-prob of 1e999 is not a finite number: refused by the JSON reader.
    let line = sample().to_string().replace("-0.5", "-1e999");
    let e = parse_line(line.as_bytes()).err().expect("refused");
    assert_eq!(
        e.field.as_deref(),
        Some("behaviour_logprobs[0]"),
        "{}",
        e.message
    );
    // An id with escape codes reads as it is; the one sanitiser makes it inert for a terminal.
    let evil = "e\u{1b}[31m\u{7}";
    let Record::Trained(t) = read(&with(sample(), "execution", json!(evil))).unwrap() else {
        panic!()
    };
    assert_eq!(t.execution, evil);
    assert!(!sanitize(&t.execution).contains('\u{1b}'));
    // A key repeated inside a piece is refused like anywhere else in gyre/1.
    let line = sample()
        .to_string()
        .replace(r#""start":0"#, r#""start":0,"start":1"#);
    let e = parse_line(line.as_bytes()).err().expect("refused");
    assert!(
        e.message.contains("duplicate key \"start\""),
        "{}",
        e.message
    );
}

#[test]
fn the_header_names_its_trainer_in_a_closed_set() {
    let header = |trainer: Value| json!({"kind": "header", "format": "gyre/1", "trainer": trainer});
    let Record::Header(h) = read(&header(json!({"name": "slime", "version": null,
        "loss_agg": "seq-mean-token-mean", "inferred": ["executions: grouped by prompt"]})))
    .unwrap() else {
        panic!()
    };
    let t = Trainer::from_header(&h).unwrap().unwrap();
    assert_eq!(t.name, "slime");
    assert_eq!(t.version, None);
    assert_eq!(t.loss_agg, LossAgg::SeqMeanTokenMean);
    assert_eq!(t.inferred, ["executions: grouped by prompt"]);
    let e = refused(header(json!({"name": "x", "loss_agg": "mean"})));
    assert_eq!(e.field.as_deref(), Some("trainer.loss_agg"));
    assert!(e.message.contains(&LossAgg::names()), "{}", e.message);
    let e = refused(header(json!({"version": "1"})));
    assert_eq!(e.field.as_deref(), Some("trainer.name"));
    let e = refused(header(json!("slime")));
    assert_eq!(e.field.as_deref(), Some("trainer"));
    // Without loss_agg the mode is unknown, never guessed.
    let Record::Header(h) = read(&header(json!({"name": "nemo-rl"}))).unwrap() else {
        panic!()
    };
    assert_eq!(
        Trainer::from_header(&h).unwrap().unwrap().loss_agg,
        LossAgg::Unknown
    );
    for mode in LossAgg::ALL {
        assert_eq!(LossAgg::parse(mode.name()), Some(*mode));
    }
}

#[test]
fn the_writer_writes_what_the_reader_reads() {
    let pieces = [
        PieceOut::Request {
            request: "r1",
            start: 0,
            end: 4,
        },
        PieceOut::Ids { ids: &[7, 8] },
    ];
    let adv = [Some(0.5), None, Some(-0.0)];
    let lp = [Some(-0.30000000000000004), None, Some(0.0)];
    let group = json!("g1");
    let out = TrainedOut {
        group: Some(&group),
        step: Some(3),
        source: Some(SourceOut {
            file: "rollouts/step_3/train/all/traces.jsonl",
            index: 2,
        }),
        advantage: Some(AdvantageOut::PerToken(&adv)),
        weight: Some(0.25),
        behaviour_logprobs: Some(&lp),
        ..TrainedOut::new("e1", "s1", &pieces, 3, &[1, 0, 1])
    };
    let line = Line::Trained(out);
    let text = String::from_utf8(line.to_bytes()).unwrap();
    assert!(
        text.starts_with(r#"{"kind":"trained","execution":"e1","sample":"s1","group":"g1","step":3,"source":{"file":"rollouts/step_3/train/all/traces.jsonl","index":2},"advantage":[0.5,null,-0.0],"weight":0.25,"prompt_len":3,"tokens":[{"request":"r1","start":0,"end":4},{"ids":[7,8]}],"loss_mask":[1,0,1]"#),
        "{text}"
    );
    let Record::Trained(t) = line.check().unwrap().record else {
        panic!()
    };
    assert_eq!(
        t.behaviour_logprobs.as_ref().unwrap()[0].map(f64::to_bits),
        Some((-0.30000000000000004f64).to_bits())
    );
    // Read → copy → write gives the same bytes.
    assert_eq!(
        Line::Trained(TrainedCopy::from(t.as_ref()).out()).to_bytes(),
        text.as_bytes()
    );
    // The writer's check refuses what the reader would.
    let bad = Line::Trained(TrainedOut::new("e1", "s1", &pieces, 3, &[1, 0]));
    assert_eq!(
        bad.check().err().unwrap().field.as_deref(),
        Some("loss_mask")
    );
}

/// The JSON blocks of docs/format.md §9 are lines the reader takes.
#[test]
fn the_examples_of_section_9_read() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/format.md"))
        .unwrap();
    let section = doc
        .split("\n## 9.")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/format.md has a §9");
    let blocks: Vec<&str> = section
        .split("```json\n")
        .skip(1)
        .map(|b| b.split("\n```").next().unwrap())
        .collect();
    assert_eq!(blocks.len(), 2);
    for block in blocks {
        let parsed = parse_line(block.as_bytes()).unwrap_or_else(|e| panic!("{block}: {e:?}"));
        if let Record::Header(h) = &parsed.record {
            assert!(Trainer::from_header(h).unwrap().is_some());
        }
    }
}
