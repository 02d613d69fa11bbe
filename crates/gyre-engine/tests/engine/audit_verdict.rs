//! The audit's word on each tree token (`audit::verdict`), which the inspector's `audit` and
//! `gap` colourings, its why line and its jumps read.

use gyre_engine::audit::verdict::{TokenAudit, Verdict, finding_position, sample_position};
use gyre_engine::audit::{self, Kind, Layout, Options};
use gyre_engine::load::{Input, LoadOptions, load_inputs};
use gyre_engine::paint::{AuditTones, ColorMode, Tone};

/// r1: user [1 2 3] → output [4 5 6 7]; r2: r1's path + a tool result [8 9] → [10 11 12 13].
const TWO_TURNS: &str = r#"{"kind":"request","execution":"e1","id":"r1","input":[1,2,3],"output":[4,5,6,7],"logprobs":[-0.1,-0.2,-0.3,-0.4],"spans":[{"end":3,"source":"user"}]}
{"kind":"request","execution":"e1","id":"r2","input":[1,2,3,4,5,6,7,8,9],"output":[10,11,12,13],"logprobs":[-0.5,-0.6,-0.7,-0.8],"spans":[{"end":3,"source":"user"},{"end":7,"source":"assistant"},{"end":9,"source":"tool"}]}
"#;

/// Sample 0 trains r1's output (its trainer far less sure of output token 2); sample 1 trains
/// r2's tool result and output: the tool result is a mask on tokens the policy never sampled.
const SAMPLES: &str = r#"{"kind":"trained","execution":"e1","sample":"a","prompt_len":3,"tokens":[{"request":"r1","start":0,"end":7}],"loss_mask":[1,1,1,1],"trainer_logprobs":[-0.1,-0.2,-1.6,-0.4]}
{"kind":"trained","execution":"e1","sample":"b","prompt_len":7,"tokens":[{"request":"r2","start":0,"end":13}],"loss_mask":[1,1,1,1,1,1]}
"#;

#[test]
fn each_tree_token_gets_the_verdict_of_the_finding_over_it_and_its_gap() {
    let batch = load_inputs(
        &[
            Input::Memory {
                name: "rec.jsonl",
                bytes: TWO_TURNS.as_bytes(),
            },
            Input::Memory {
                name: "trained.jsonl",
                bytes: SAMPLES.as_bytes(),
            },
        ],
        &LoadOptions::default(),
        &|_, _| {},
    )
    .unwrap();
    let a = audit::audit(&batch, &Options::default(), None);
    let exec = &batch.executions[0];
    let layout = Layout::of(exec);
    let t = TokenAudit::of(&a, exec, 0, &layout);
    // Sample b's keys are r2's path: user, r1's output, tool, r2's output.
    let key = |p: usize| layout.samples[1].keys[p];
    let verdicts: Vec<Verdict> = (0..13).map(|p| t.verdict(key(p))).collect();
    use Verdict::*;
    assert_eq!(
        verdicts,
        [
            Context,
            Context,
            Context,
            Agreeing,
            Agreeing,
            Agreeing,
            Agreeing,
            TrainedNotSampled,
            TrainedNotSampled,
            Agreeing,
            Agreeing,
            Agreeing,
            Agreeing
        ]
    );
    let tool = t.finding(key(7)).map(|i| &a.findings[i]);
    assert_eq!(tool.map(|f| f.kind), Some(Kind::TrainedNotSampled));
    assert_eq!(t.finding(key(3)), None);
    assert_eq!(t.trained(key(4)), 1);
    // The gap: trainer − behaviour where sample a has both, nothing where it has no trainer
    // log-prob (sample b).
    assert!((t.gap(key(5)).unwrap() + 1.3).abs() < 1e-6);
    assert_eq!(t.gap(key(4)), Some(0.0));
    assert_eq!(t.gap(key(10)), None);
    assert_eq!(t.tone(key(5), ColorMode::Gap), Tone::Gap(0));
    assert_eq!(t.tone(key(4), ColorMode::Gap), Tone::Gap(3));
    assert_eq!(t.tone(key(10), ColorMode::Gap), Tone::NoGap);
    assert_eq!(t.tone(key(8), ColorMode::Audit), Tone::TrainedNotSampled);
    // The jump to the finding: r2's path, at the tool result.
    let f = tool.unwrap();
    let (request, pos) = finding_position(exec, &layout, f).unwrap();
    assert_eq!((request, pos), (1, 7));
    assert_eq!(sample_position(exec, &layout, 0, 3), Some((0, 3)));
}
