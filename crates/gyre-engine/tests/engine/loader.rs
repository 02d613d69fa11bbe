//! The loader against the exact path: every line read on its own by `parse_line` and applied to
//! its execution in file order. Full-form inputs that repeat the previous one of their agent
//! (read by comparing bytes), written with spaces or in spellings that are no token ids,
//! interleaved executions and agents, delta records among them, lines longer than a chunk: the
//! trees, requests and skipped lines are the same.

use std::collections::HashMap;

use gyre_engine::execution::{Execution, LineRef};
use gyre_engine::load::{LoadOptions, load_bytes};
use gyre_engine::record::parse_line;
use proptest::prelude::*;

/// What the exact path builds from `src`, read leniently: the executions in order of first
/// appearance (without those dropped because an `extends` could not be followed) and the
/// number of lines skipped. The recordings are small enough to be one chunk, so the loader
/// drops an execution after applying the chunk's other lines to it, and so does this.
fn exact(src: &[u8]) -> (Vec<Execution>, u64) {
    let mut execs: Vec<Execution> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut dropped: Vec<bool> = Vec::new();
    let mut skipped = 0;
    for (i, line) in src.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let at = LineRef {
            file: 0,
            line: i as u64 + 1,
        };
        let Ok(parsed) = parse_line(line) else {
            skipped += 1;
            continue;
        };
        let Some(id) = parsed.record.execution().map(str::to_owned) else {
            continue;
        };
        let e = *index.entry(id.clone()).or_insert_with(|| {
            execs.push(Execution::new(id, at));
            dropped.push(false);
            execs.len() - 1
        });
        if let Err(err) = execs[e].apply(parsed.record, at) {
            skipped += 1;
            dropped[e] |= err.field.as_deref() == Some("extends");
        }
    }
    let kept = execs
        .into_iter()
        .zip(dropped)
        .filter(|(_, d)| !d)
        .map(|(e, _)| e)
        .collect();
    (kept, skipped)
}

/// Fails unless loading `src` builds what the exact path builds.
fn same_as_exact(src: &[u8]) -> Result<(), String> {
    let options = LoadOptions {
        lenient: true,
        ..LoadOptions::default()
    };
    let batch = load_bytes("gen.jsonl", src, &options).map_err(|e| e.to_string())?;
    let (want, skipped) = exact(src);
    let ids = |e: &[Execution]| e.iter().map(|x| x.id.clone()).collect::<Vec<_>>();
    if ids(&batch.executions) != ids(&want) {
        return Err(format!(
            "executions {:?}, exact path {:?}",
            ids(&batch.executions),
            ids(&want)
        ));
    }
    if batch.skipped_lines != skipped {
        return Err(format!(
            "{} lines skipped, exact path {skipped}",
            batch.skipped_lines
        ));
    }
    for (got, want) in batch.executions.iter().zip(&want) {
        if format!("{:?}", got.tree) != format!("{:?}", want.tree) {
            return Err(format!("execution {}: the trees differ", got.id));
        }
        if format!("{:?}", got.requests) != format!("{:?}", want.requests) {
            return Err(format!("execution {}: the requests differ", got.id));
        }
    }
    Ok(())
}

/// How an input array is written: plainly, with spaces, or with one element spelled as no
/// token id is (or with a stray comma).
#[derive(Clone, Copy, Debug)]
enum Spelling {
    Plain,
    Spaced,
    Odd(usize, &'static str),
    Trailing,
}

fn spelling() -> impl Strategy<Value = Spelling> {
    let odd = prop::sample::select(vec!["1e2", "-0", "07", "4294967296", "2.0", "\"3\""]);
    prop_oneof![
        12 => Just(Spelling::Plain),
        2 => Just(Spelling::Spaced),
        2 => (any::<usize>(), odd).prop_map(|(i, s)| Spelling::Odd(i, s)),
        1 => Just(Spelling::Trailing),
    ]
}

fn array(ids: &[u32], spelling: Spelling) -> String {
    let mut items: Vec<String> = ids.iter().map(u32::to_string).collect();
    let sep = match spelling {
        Spelling::Spaced => ", ",
        _ => ",",
    };
    if let Spelling::Odd(i, s) = spelling {
        if !items.is_empty() {
            let i = i % items.len();
            items[i] = s.to_owned();
        }
    }
    let comma = if matches!(spelling, Spelling::Trailing) {
        ","
    } else {
        ""
    };
    format!("[{}{comma}]", items.join(sep))
}

/// One step of a generated recording: which execution and agent speak, what they add to their
/// context, and how the record is written.
#[derive(Clone, Debug)]
struct Step {
    exec: usize,
    agent: usize,
    /// Keep this fraction of the context first (1.0 most of the time: a continuation).
    keep: f64,
    new: Vec<u32>,
    output: Vec<u32>,
    spelling: Spelling,
    delta: bool,
    close: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        0..3usize,
        prop_oneof![4 => Just(0usize), 1 => Just(1), 1 => Just(2)],
        prop_oneof![6 => Just(1.0), 1 => 0.0..1.0f64],
        prop::collection::vec(prop_oneof![0..12u32, 95..105u32, any::<u32>()], 0..6),
        prop::collection::vec(0..12u32, 0..3),
        spelling(),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.03),
    )
        .prop_map(
            |(exec, agent, keep, new, output, spelling, delta, close)| Step {
                exec,
                agent,
                keep,
                new,
                output,
                spelling,
                delta,
                close,
            },
        )
}

/// The recording of `steps`: each agent of each execution keeps its context (the previous
/// request's input and output, then new tokens), written in full form or, now and then, as a
/// delta of that previous request.
fn recording(steps: &[Step], crlf: bool) -> Vec<u8> {
    let mut out = String::from("{\"kind\":\"header\",\"format\":\"gyre/1\"}\n");
    // Per (execution, agent): the context and the id of its last request.
    let mut ctx: HashMap<(usize, usize), (Vec<u32>, Option<String>)> = HashMap::new();
    let eol = if crlf { "\r\n" } else { "\n" };
    for (n, s) in steps.iter().enumerate() {
        let (context, last) = ctx.entry((s.exec, s.agent)).or_default();
        if s.close {
            out.push_str(&format!(
                "{{\"kind\":\"closure\",\"execution\":\"e{}\",\"t\":1,\"status\":\"completed\"}}{eol}",
                s.exec
            ));
            continue;
        }
        let before = context.len();
        let kept = (before as f64 * s.keep) as usize;
        context.truncate(kept);
        context.extend(&s.new);
        let id = format!("r{n}");
        // A delta continues the previous request's path (its input and output) unchanged.
        let (input, extends) = match last {
            Some(prev) if s.delta && kept == before => (
                array(&context[before..], s.spelling),
                format!(",\"extends\":\"{prev}\""),
            ),
            _ => (array(context, s.spelling), String::new()),
        };
        let logprobs: Vec<String> = s.output.iter().map(|_| "-0.5".to_owned()).collect();
        out.push_str(&format!(
            "{{\"kind\":\"request\",\"execution\":\"e{}\",\"id\":\"{id}\",\"agent\":\"a{}\",\
             \"input\":{input}{extends},\"output\":{:?},\"logprobs\":[{}]}}{eol}",
            s.exec,
            s.agent,
            s.output,
            logprobs.join(",")
        ));
        context.extend(&s.output);
        *last = Some(id);
    }
    out.into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn the_loader_builds_what_the_exact_path_builds(
        steps in prop::collection::vec(step(), 1..40),
        crlf in prop::bool::weighted(0.1),
    ) {
        let src = recording(&steps, crlf);
        if let Err(e) = same_as_exact(&src) {
            prop_assert!(false, "{}\n{}", e, String::from_utf8_lossy(&src));
        }
    }
}

/// Lines longer than a chunk (1 MiB), between short ones and blank ones: every line is read
/// whole, once, whichever chunk it starts in.
#[test]
fn lines_longer_than_a_chunk_are_read_whole() {
    let mut steps = Vec::new();
    for k in 0..12u32 {
        steps.push(Step {
            exec: (k % 2) as usize,
            agent: 0,
            keep: 1.0,
            new: (0..60_000 + 7_919 * k).map(|i| i * 13 + k).collect(),
            output: vec![k, k + 1],
            spelling: if k == 5 {
                Spelling::Spaced
            } else {
                Spelling::Plain
            },
            delta: false,
            close: false,
        });
    }
    let mut src = recording(&steps, false);
    src.extend_from_slice(b"\n   \n");
    src.extend_from_slice(&recording(&steps[..3], true));
    assert!(src.len() > 8 << 20, "{} bytes", src.len());
    same_as_exact(&src).unwrap();
}
