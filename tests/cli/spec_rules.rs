//! Format conformance (docs/format.md, gyre/1): one test per rule, on small
//! hand-written recordings. Every expected value below was worked out by hand from the format text
//! quoted in the test's doc comment, not by running the engine.
//!
//! Token ids used as letters: S=1 U=2 T=3 Q/V=4 W/X=5, outputs a=10 b=11 c=12 d=13 …
//! Recorded behaviour logprob of output token `t` is always `-t/100` (see [`lp`]), so the
//! expected `logprobs` of an exported row can be written down by hand.

use std::path::Path;
use std::process::Command;

use gyre_engine::admit::{Class, Settings};
use gyre_engine::execution::{Execution, TokenIdentity};
use gyre_engine::load::{self, Batch, LoadOptions};
use gyre_engine::loss;
use gyre_engine::provenance::token_reason;
use gyre_engine::record::Source;
use gyre_engine::score::{AdvantageMode, Exclusion, Outcome};
use gyre_engine::tree::{NodeId, NodeKind, ROOT};
use gyre_engine::{Results, export};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Recording builders

/// Recorded logprob of output token `t`.
fn lpv(t: u32) -> f64 {
    -(t as f64) / 100.0
}

fn lp(tokens: &[u32]) -> Vec<f64> {
    tokens.iter().map(|&t| lpv(t)).collect()
}

/// Merges `extra` into `v`; a `null` in `extra` removes the key.
fn merge(v: &mut Value, extra: Value) {
    if let Value::Object(extra) = extra {
        let obj = v.as_object_mut().expect("record is an object");
        for (k, x) in extra {
            if x.is_null() {
                obj.remove(&k);
            } else {
                obj.insert(k, x);
            }
        }
    }
}

/// A `request` line with recorded logprobs, plus `extra` fields.
fn req(exec: &str, id: &str, input: &[u32], output: &[u32], extra: Value) -> String {
    let mut v = json!({
        "kind": "request", "execution": exec, "id": id,
        "input": input, "output": output, "logprobs": lp(output),
    });
    merge(&mut v, extra);
    v.to_string()
}

fn rq(exec: &str, id: &str, input: &[u32], output: &[u32]) -> String {
    req(exec, id, input, output, json!({}))
}

/// Closure with artifact `art` version 1 at t=10, then a valid assessment of it at t=11.
fn scored(exec: &str, score: f64) -> String {
    [
        json!({"kind": "closure", "execution": exec, "t": 10, "status": "completed",
               "artifact": "art", "version": 1}),
        json!({"kind": "assessment", "execution": exec, "artifact": "art", "version": 1,
               "status": "valid", "score": score, "t": 11}),
    ]
    .map(|v| v.to_string())
    .join("\n")
}

fn line(v: Value) -> String {
    v.to_string()
}

fn recording(lines: &[String]) -> String {
    let mut s = String::from("{\"kind\":\"header\",\"format\":\"gyre/1\"}\n");
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Engine helpers

fn uncapped() -> Settings {
    Settings {
        jmax: 0,
        ..Settings::default()
    }
}

fn run_with(src: &str, settings: &Settings, mode: AdvantageMode) -> (Batch, Results) {
    let batch = load::load_bytes("spec.jsonl", src.as_bytes(), &LoadOptions::default())
        .unwrap_or_else(|e| panic!("recording should be valid:\n{e}"));
    let results = gyre_engine::process(&batch, settings, mode);
    (batch, results)
}

fn run(src: &str, settings: &Settings) -> (Batch, Results) {
    run_with(src, settings, AdvantageMode::DrGrpo)
}

/// Exported rows (the serialised `gyre/admitted-1` lines) of the whole batch.
fn rows(batch: &Batch, results: &Results) -> Vec<Value> {
    let mut buf = Vec::new();
    export::jsonl::write_rows(batch, results, &mut buf).expect("rows serialise");
    String::from_utf8(buf)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each row is JSON"))
        .collect()
}

fn rows_of<'a>(all: &'a [Value], exec: &str) -> Vec<&'a Value> {
    all.iter().filter(|r| r["execution"] == exec).collect()
}

fn ex<'a>(batch: &'a Batch, id: &str) -> (usize, &'a Execution) {
    let i = batch.execution_index(id).expect("execution exists");
    (i, &batch.executions[i])
}

fn ridx(exec: &Execution, id: &str) -> u32 {
    exec.request_index(id).expect("request exists")
}

/// The tree as text: `root → [1 2] → {[10 11]r1 → …, [10 11]r3}`. Context nodes are `[tokens]`,
/// output nodes `[tokens]<request>` (with `@offset` for a piece not starting at output token
/// 0). Siblings are sorted by their text so the shape does not depend on storage order.
fn shape(exec: &Execution) -> String {
    render(exec, ROOT)
}

fn render(exec: &Execution, n: NodeId) -> String {
    let node = &exec.tree.nodes[n as usize];
    let toks = exec
        .tree
        .node_tokens(n)
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    let label = match node.kind {
        NodeKind::Root => "root".to_string(),
        NodeKind::Context => format!("[{toks}]"),
        NodeKind::Output => {
            let id = &exec.requests[node.owner as usize].id;
            if node.offset == 0 {
                format!("[{toks}]{id}")
            } else {
                format!("[{toks}]{id}@{}", node.offset)
            }
        }
    };
    let mut kids: Vec<String> = node.children.iter().map(|&c| render(exec, c)).collect();
    kids.sort();
    match kids.len() {
        0 => label,
        1 => format!("{label} → {}", kids[0]),
        _ => format!("{label} → {{{}}}", kids.join(", ")),
    }
}

fn candidate_ids(batch: &Batch, results: &Results, exec: &str) -> Vec<String> {
    let (i, e) = ex(batch, exec);
    results.admissions[i]
        .candidates
        .iter()
        .map(|c| e.requests[c.request as usize].id.clone())
        .collect()
}

/// Every trainable token of the tree, as `r1.out[0]`, sorted.
fn trainable_tokens(exec: &Execution) -> Vec<String> {
    let mut out = Vec::new();
    for (n, node) in exec.tree.nodes.iter().enumerate() {
        if gyre_engine::admit::trainable_node(exec, n as NodeId) {
            let id = &exec.requests[node.owner as usize].id;
            for j in node.offset..node.offset + node.len {
                out.push(format!("{id}.out[{j}]"));
            }
        }
    }
    out.sort();
    out
}

/// Node and index of path position `pos` on request `leaf`'s root-to-output path.
fn at_pos(exec: &Execution, leaf: &str, pos: usize) -> (NodeId, u32) {
    let r = ridx(exec, leaf);
    let mut p = 0usize;
    for n in exec.tree.path_nodes(exec.requests[r as usize].output_node) {
        let len = exec.tree.nodes[n as usize].len as usize;
        if pos < p + len {
            return (n, (pos - p) as u32);
        }
        p += len;
    }
    panic!("position {pos} is past the path of {leaf}");
}

/// Identity of path position `pos` of `leaf`'s path: `r1.out[0]` or `ctx:<source>`.
fn who(exec: &Execution, leaf: &str, pos: usize) -> String {
    let (n, i) = at_pos(exec, leaf, pos);
    match exec.identity(n, i) {
        TokenIdentity::Output { request, offset } => {
            format!("{}.out[{offset}]", exec.requests[request as usize].id)
        }
        TokenIdentity::Context { source, .. } => format!("ctx:{}", source.name()),
    }
}

/// `token_reason` of path position `pos` of `leaf`'s path, as text.
fn reason(batch: &Batch, results: &Results, exec: &str, leaf: &str, pos: usize) -> String {
    let (i, e) = ex(batch, exec);
    let (n, k) = at_pos(e, leaf, pos);
    token_reason(e, &results.outcomes[i], &results.admissions[i], n, k, None).to_string()
}

fn path(exec: &Execution, leaf: &str) -> Vec<u32> {
    exec.path_tokens(ridx(exec, leaf))
}

/// Target tokens of a row, expanded to `r1.out[0]` (checks `targets` against `tokens` too).
fn row_target_tokens(row: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for t in row["targets"].as_array().expect("targets array") {
        let (r, off, len) = (
            t["request"].as_str().unwrap(),
            t["offset"].as_u64().unwrap(),
            t["len"].as_u64().unwrap(),
        );
        for j in off..off + len {
            out.push(format!("{r}.out[{j}]"));
        }
    }
    out
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("integer") as u32)
        .collect()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn gyre_bin(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(args)
        .output()
        .expect("gyre runs")
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p.to_str().unwrap().to_string()
}

fn stdout_rows(out: &std::process::Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "gyre failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// §2 The shared-prefix tree

/// The docs/format.md §2 example, r1..r3: "Outputs are never merged: two requests with the same context get
/// two output nodes even when their outputs are token-identical". Tree
/// `root → [S U] → {[a b]₁ → [T] → [c]₂, [a b]₃}`; candidates r2, r3; trainable a b of r1, c,
/// a b of r3.
#[test]
fn s2_identical_independent_outputs_are_separate_nodes() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10, 11]),
        rq("e1", "r2", &[1, 2, 10, 11, 3], &[12]),
        rq("e1", "r3", &[1, 2], &[10, 11]),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → [1 2] → {[10 11]r1 → [3] → [12]r2, [10 11]r3}"
    );
    assert_eq!(candidate_ids(&batch, &results, "e1"), strs(&["r2", "r3"]));
    assert_eq!(
        trainable_tokens(e),
        strs(&[
            "r1.out[0]",
            "r1.out[1]",
            "r2.out[0]",
            "r3.out[0]",
            "r3.out[1]"
        ])
    );
    // The root-to-output path of R is exactly I + O.
    assert_eq!(path(e, "r1"), vec![1, 2, 10, 11]);
    assert_eq!(path(e, "r2"), vec![1, 2, 10, 11, 3, 12]);
    assert_eq!(path(e, "r3"), vec![1, 2, 10, 11]);
    // A token of I that matched an earlier output *is* that output token.
    assert_eq!(who(e, "r2", 2), "r1.out[0]");
    assert_eq!(who(e, "r2", 3), "r1.out[1]");
    assert_eq!(who(e, "r3", 2), "r3.out[0]");
}

/// docs/format.md §2 example: "If a later r4 has input [S U a b V] whose tool span names the call id emitted
/// by r3, it continues under [a b]₃". Candidates then: r2 and r4 (r3 has r4 below it).
#[test]
fn s2_call_id_association_continues_under_the_emitting_output() {
    let src = recording(&[
        req(
            "e1",
            "r1",
            &[1, 2],
            &[10, 11],
            json!({"tool_calls": [{"id": "call_1", "name": "bash", "start": 0, "end": 2}]}),
        ),
        req(
            "e1",
            "r2",
            &[1, 2, 10, 11, 3],
            &[12],
            json!({"spans": [{"end": 4}, {"end": 5, "source": "tool", "call_id": "call_1"}]}),
        ),
        req(
            "e1",
            "r3",
            &[1, 2],
            &[10, 11],
            json!({"tool_calls": [{"id": "call_3", "name": "bash", "start": 0, "end": 2}]}),
        ),
        req(
            "e1",
            "r4",
            &[1, 2, 10, 11, 4],
            &[13],
            json!({"spans": [{"end": 4}, {"end": 5, "source": "tool", "call_id": "call_3"}]}),
        ),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → [1 2] → {[10 11]r1 → [3] → [12]r2, [10 11]r3 → [4] → [13]r4}"
    );
    assert_eq!(candidate_ids(&batch, &results, "e1"), strs(&["r2", "r4"]));
    assert_eq!(who(e, "r4", 2), "r3.out[0]");
    assert_eq!(who(e, "r4", 4), "ctx:tool");
    assert_eq!(path(e, "r4"), vec![1, 2, 10, 11, 4, 13]);
}

/// docs/format.md §2 example: "with no call id it continues under [a b]₁ (earliest)".
#[test]
fn s2_without_call_id_a_tie_goes_to_the_earliest_path() {
    let src = recording(&[
        req(
            "e1",
            "r1",
            &[1, 2],
            &[10, 11],
            json!({"tool_calls": [{"id": "call_1", "start": 0, "end": 2}]}),
        ),
        rq("e1", "r2", &[1, 2, 10, 11, 3], &[12]),
        req(
            "e1",
            "r3",
            &[1, 2],
            &[10, 11],
            json!({"tool_calls": [{"id": "call_3", "start": 0, "end": 2}]}),
        ),
        req(
            "e1",
            "r4",
            &[1, 2, 10, 11, 4],
            &[13],
            json!({"spans": [{"end": 4}, {"end": 5, "source": "tool"}]}),
        ),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → [1 2] → {[10 11]r1 → {[3] → [12]r2, [4] → [13]r4}, [10 11]r3}"
    );
    assert_eq!(
        candidate_ids(&batch, &results, "e1"),
        strs(&["r2", "r3", "r4"])
    );
    assert_eq!(who(e, "r4", 2), "r1.out[0]");
}

/// docs/format.md §2 step 1: the longest prefix wins first; the call id only breaks ties "When several
/// paths give the same longest match". r6 names r3's call id, but r1's path matches one token
/// more ([T] already below r1), so r6 continues there.
#[test]
fn s2_call_id_only_breaks_ties_the_longest_match_wins() {
    let src = recording(&[
        req(
            "e1",
            "r1",
            &[1, 2],
            &[10, 11],
            json!({"tool_calls": [{"id": "call_1", "start": 0, "end": 2}]}),
        ),
        req(
            "e1",
            "r3",
            &[1, 2],
            &[10, 11],
            json!({"tool_calls": [{"id": "call_3", "start": 0, "end": 2}]}),
        ),
        rq("e1", "r5", &[1, 2, 10, 11, 3], &[12]),
        req(
            "e1",
            "r6",
            &[1, 2, 10, 11, 3],
            &[13],
            json!({"spans": [{"end": 4}, {"end": 5, "source": "tool", "call_id": "call_3"}]}),
        ),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → [1 2] → {[10 11]r1 → [3] → {[12]r5, [13]r6}, [10 11]r3}"
    );
    assert_eq!(
        candidate_ids(&batch, &results, "e1"),
        strs(&["r3", "r5", "r6"])
    );
}

/// docs/format.md §2: placement is by matching token ids ("Matching compares token ids"), and §1 makes the
/// delta and full encodings the same request. So `extends: "r3"` does not by itself pick r3's
/// branch among token-identical ones: with no call id the tie goes to the earliest (r1).
#[test]
fn s2_extends_does_not_choose_among_token_identical_branches() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10, 11]),
        rq("e1", "r3", &[1, 2], &[10, 11]),
        req("e1", "r4", &[4], &[13], json!({"extends": "r3"})),
        scored("e1", 1.0),
    ]);
    let (batch, _) = run(&src, &uncapped());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(path(e, "r4"), vec![1, 2, 10, 11, 4, 13]);
    assert_eq!(
        shape(e),
        "root → [1 2] → {[10 11]r1 → [4] → [13]r4, [10 11]r3}"
    );
    assert_eq!(who(e, "r4", 2), "r1.out[0]");
}

/// A tool span naming `call` over input token `end - 1` (the rest of the input unlabelled).
fn tool_spans(end: usize, calls: &[&str]) -> Value {
    let mut spans = vec![json!({"end": end - calls.len()})];
    for (i, c) in calls.iter().enumerate() {
        spans.push(json!({"end": end - calls.len() + i + 1, "source": "tool", "call_id": c}));
    }
    json!({ "spans": spans })
}

fn emits(call: &str, len: usize) -> Value {
    json!({"tool_calls": [{"id": call, "name": "bash", "start": 0, "end": len}]})
}

/// docs/format.md §2 step 1 (clarified): "compare them where they part … An emitter above the parting
/// point lies on every tied path and decides nothing: a full-form request names the call ids of
/// its whole conversation". Every request below names all call ids of its conversation. r2 and
/// r3 are token-identical retries continuing r1 (whose call_1 lies above where they part); r4
/// continues r3 and names call_1 and call_3, so it joins r3, not the earliest (r2).
#[test]
fn s2_emitters_above_the_parting_point_decide_nothing() {
    let src = recording(&[
        req("e1", "r1", &[1, 2], &[10, 11], emits("call_1", 2)),
        req("e1", "r2", &[1, 2, 10, 11, 3], &[12], {
            let mut v = tool_spans(5, &["call_1"]);
            merge(&mut v, emits("call_2", 1));
            v
        }),
        req("e1", "r3", &[1, 2, 10, 11, 3], &[12], {
            let mut v = tool_spans(5, &["call_1"]);
            merge(&mut v, emits("call_3", 1));
            v
        }),
        req(
            "e1",
            "r4",
            &[1, 2, 10, 11, 3, 12, 4, 5],
            &[13],
            tool_spans(8, &["call_1", "call_3"]),
        ),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → [1 2] → [10 11]r1 → [3] → {[12]r2, [12]r3 → [4 5] → [13]r4}"
    );
    assert_eq!(who(e, "r4", 5), "r3.out[0]");
    assert_eq!(candidate_ids(&batch, &results, "e1"), strs(&["r2", "r4"]));

    // The same recording in delta form places every request the same way.
    let delta = recording(&[
        req("e1", "r1", &[1, 2], &[10, 11], emits("call_1", 2)),
        req("e1", "r2", &[3], &[12], {
            let mut v = json!({"extends": "r1", "spans": [{"end": 1, "source": "tool", "call_id": "call_1"}]});
            merge(&mut v, emits("call_2", 1));
            v
        }),
        req("e1", "r3", &[3], &[12], {
            let mut v = json!({"extends": "r1", "spans": [{"end": 1, "source": "tool", "call_id": "call_1"}]});
            merge(&mut v, emits("call_3", 1));
            v
        }),
        req(
            "e1",
            "r4",
            &[4, 5],
            &[13],
            json!({"extends": "r3", "spans": [{"end": 1}, {"end": 2, "source": "tool", "call_id": "call_3"}]}),
        ),
        scored("e1", 1.0),
    ]);
    let (db, _) = run(&delta, &uncapped());
    assert_eq!(shape(&db.executions[0]), shape(e));
}

/// The example of docs/format.md extended: r1 and r3 are token-identical retries; r2 continues r1 (tool
/// result [T]) and r4, r5 continue r3 (tool result [W], placed by call_3: at the first parting
/// point r3's branch holds its emitter). r4 and r5 are token-identical retries in turn. r6
/// continues r5 and names call_3 and call_5: where r4 and r5 part, r3 lies above (on both
/// paths) and decides nothing, r5's branch holds call_5's emitter, so r6 goes under r5, not the
/// earliest (r4). r7 names only call_3: nothing tells r4 and r5 apart, the earliest wins.
#[test]
fn s2_a_tie_below_an_emitter_on_one_branch_only() {
    let src = recording(&[
        req("e1", "r1", &[1, 2], &[10, 11], emits("call_1", 2)),
        req("e1", "r3", &[1, 2], &[10, 11], emits("call_3", 2)),
        req("e1", "r2", &[1, 2, 10, 11, 3], &[12], {
            let mut v = tool_spans(5, &["call_1"]);
            merge(&mut v, emits("call_2", 1));
            v
        }),
        req("e1", "r4", &[1, 2, 10, 11, 5], &[12], {
            let mut v = tool_spans(5, &["call_3"]);
            merge(&mut v, emits("call_4", 1));
            v
        }),
        req("e1", "r5", &[1, 2, 10, 11, 5], &[12], {
            let mut v = tool_spans(5, &["call_3"]);
            merge(&mut v, emits("call_5", 1));
            v
        }),
        req(
            "e1",
            "r6",
            &[1, 2, 10, 11, 5, 12, 4],
            &[13],
            tool_spans(7, &["call_3", "call_5"]),
        ),
        req(
            "e1",
            "r7",
            &[1, 2, 10, 11, 5, 12, 6],
            &[14],
            tool_spans(7, &["call_3"]),
        ),
        scored("e1", 1.0),
    ]);
    let (batch, _) = run(&src, &uncapped());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → [1 2] → {[10 11]r1 → [3] → [12]r2, \
         [10 11]r3 → [5] → {[12]r4 → [6] → [14]r7, [12]r5 → [4] → [13]r6}}"
    );
    assert_eq!(who(e, "r4", 2), "r3.out[0]");
    assert_eq!(who(e, "r6", 5), "r5.out[0]");
    assert_eq!(who(e, "r7", 5), "r4.out[0]");
}

/// docs/format.md §2 step 2: "If the match ends inside a node, split the node there (identities are kept; a
/// request whose output is split still owns both parts)". §5: r1's output has no other policy
/// output below its end, so r1 stays a candidate. Targets over all draws: r1's 4 tokens + r2's 1.
#[test]
fn s2_split_inside_an_output_keeps_identity_and_the_earlier_candidate() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10, 11, 12, 13]),
        // A later input re-serialises r1's output differently after `a b` (X = 5).
        rq("e1", "r2", &[1, 2, 10, 11, 5], &[20]),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (i, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → [1 2] → [10 11]r1 → {[12 13]r1@2, [5] → [20]r2}"
    );
    assert_eq!(candidate_ids(&batch, &results, "e1"), strs(&["r1", "r2"]));
    assert_eq!(path(e, "r1"), vec![1, 2, 10, 11, 12, 13]);
    assert_eq!(path(e, "r2"), vec![1, 2, 10, 11, 5, 20]);
    assert_eq!(who(e, "r1", 2), "r1.out[0]");
    assert_eq!(who(e, "r1", 4), "r1.out[2]");
    assert_eq!(who(e, "r2", 3), "r1.out[1]");
    assert_eq!(who(e, "r2", 4), "ctx:context");
    // Every trainable token admitted once, whichever leaf is drawn first.
    let all = rows(&batch, &results);
    assert_eq!(all.len(), 2);
    let mut targets: Vec<String> = all.iter().flat_map(row_target_tokens).collect();
    targets.sort();
    assert_eq!(
        targets,
        strs(&[
            "r1.out[0]",
            "r1.out[1]",
            "r1.out[2]",
            "r1.out[3]",
            "r2.out[0]"
        ])
    );
    assert_eq!(results.admissions[i].targets(), 5);
}

/// Compaction recording used by several tests. S=1 U=2 a=10 T=3 b=11 Q=4; r3 is a main-agent
/// summary with output [m n] = [20 21]; r4 continues after compaction with input
/// [S m n W] (the summary put back as context, W=5) and output [c]=[12].
fn compaction_recording() -> String {
    recording(&[
        req(
            "e1",
            "r1",
            &[1, 2],
            &[10],
            json!({"spans": [{"end": 1, "source": "system"}, {"end": 2, "source": "user"}]}),
        ),
        rq("e1", "r2", &[1, 2, 10, 3], &[11]),
        req(
            "e1",
            "r3",
            &[1, 2, 10, 3, 11, 4],
            &[20, 21],
            json!({"purpose": "summary"}),
        ),
        req(
            "e1",
            "r4",
            &[1, 20, 21, 5],
            &[12],
            json!({"spans": [{"end": 1, "source": "system"}, {"end": 3, "source": "summary"},
                             {"end": 4, "source": "user"}]}),
        ),
        scored("e1", 1.0),
    ])
}

/// docs/format.md §2: "compaction and sub-agents show up as branches near the root". The continuation after
/// a summary shares only [S] with the pre-compaction history; the summary tokens it carries did not
/// match any output on its path, so they are context (source `summary`).
#[test]
fn s2_compaction_continuation_branches_near_the_root() {
    let (batch, results) = run(&compaction_recording(), &Settings::default());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → [1] → {[20 21 5] → [12]r4, [2] → [10]r1 → [3] → [11]r2 → [4] → [20 21]r3}"
    );
    assert_eq!(candidate_ids(&batch, &results, "e1"), strs(&["r3", "r4"]));
    // The branch point of r4 is one token below the root.
    let r4 = &e.requests[ridx(e, "r4") as usize];
    let ctx = e.tree.nodes[r4.output_node as usize].parent;
    let branch = e.tree.nodes[ctx as usize].parent;
    assert_eq!(e.tree.depth_tokens(branch), 1);
    assert_eq!(who(e, "r4", 1), "ctx:summary");
    assert_eq!(who(e, "r4", 2), "ctx:summary");
    assert_eq!(reason(&batch, &results, "e1", "r4", 1), "context:summary");
    assert_eq!(path(e, "r4"), vec![1, 20, 21, 5, 12]);
    assert_eq!(path(e, "r3"), vec![1, 2, 10, 3, 11, 4, 20, 21]);
}

/// docs/format.md §2 step 4: "A request with no matching prefix attaches to the root"; §5 classes: a
/// delegated sub-agent (`agent` other than `main`) is class `sub`.
#[test]
fn s2_sub_agent_attaches_to_the_root() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10]),
        req("e1", "s1", &[6, 7], &[30], json!({"agent": "sub-1"})),
        rq("e1", "r2", &[1, 2, 10, 3], &[11]),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (i, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → {[1 2] → [10]r1 → [3] → [11]r2, [6 7] → [30]s1}"
    );
    let s1 = &e.requests[ridx(e, "s1") as usize];
    let s1_ctx = e.tree.nodes[s1.output_node as usize].parent;
    assert_eq!(e.tree.nodes[s1_ctx as usize].parent, ROOT);
    let mut classes: Vec<(String, Class)> = results.admissions[i]
        .candidates
        .iter()
        .map(|c| (e.requests[c.request as usize].id.clone(), c.class))
        .collect();
    classes.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        classes,
        vec![
            ("r2".to_string(), Class::Main),
            ("s1".to_string(), Class::Sub)
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// §3 Provenance

/// docs/format.md §2/§3: "input tokens that did not match any output are context even if their span says
/// `assistant` (harness-injected or re-serialised content)"; but "a token of I that matched an
/// earlier output *is* that output token (policy)".
#[test]
fn s3_harness_injected_assistant_content_is_context() {
    let src = recording(&[
        req(
            "e1",
            "r1",
            &[1, 2],
            &[10, 11],
            json!({"spans": [{"end": 1, "source": "system"}, {"end": 2, "source": "user"}]}),
        ),
        // Harness writes assistant-role tokens [30 31] that no output produced, then a tool result.
        req(
            "e1",
            "r2",
            &[1, 2, 30, 31, 3],
            &[12],
            json!({"spans": [{"end": 1, "source": "system"}, {"end": 2, "source": "user"},
                             {"end": 4, "source": "assistant"}, {"end": 5, "source": "tool"}]}),
        ),
        // Assistant span that does reproduce r1's output in place: those tokens are r1's output.
        req(
            "e1",
            "r3",
            &[1, 2, 10, 11, 4],
            &[13],
            json!({"spans": [{"end": 2, "source": "user"}, {"end": 4, "source": "assistant"},
                             {"end": 5, "source": "tool"}]}),
        ),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → [1 2] → {[10 11]r1 → [4] → [13]r3, [30 31 3] → [12]r2}"
    );
    assert_eq!(who(e, "r2", 2), "ctx:assistant");
    assert_eq!(who(e, "r2", 3), "ctx:assistant");
    assert_eq!(reason(&batch, &results, "e1", "r2", 0), "context:system");
    assert_eq!(reason(&batch, &results, "e1", "r2", 1), "context:user");
    assert_eq!(reason(&batch, &results, "e1", "r2", 2), "context:assistant");
    assert_eq!(reason(&batch, &results, "e1", "r2", 4), "context:tool");
    assert_eq!(who(e, "r3", 2), "r1.out[0]");
    assert_eq!(who(e, "r3", 3), "r1.out[1]");
    assert_eq!(
        trainable_tokens(e),
        strs(&["r1.out[0]", "r1.out[1]", "r2.out[0]", "r3.out[0]"])
    );
    let all = rows(&batch, &results);
    let r2_row = all.iter().find(|r| r["leaf"] == "r2").expect("r2 drawn");
    assert_eq!(u32s(&r2_row["tokens"]), vec![1, 2, 30, 31, 3, 12]);
    assert_eq!(r2_row["prompt_len"], 5);
    assert_eq!(u32s(&r2_row["loss_mask"]), vec![1]);
}

/// docs/format.md §3: "A token is trainable iff it is an output token of a request with actor: policy …
/// critiques, evaluator outputs … are conditioning context only". A critique fed back into a
/// policy input (not matching the evaluator's path) is context:critique.
#[test]
fn s3_evaluator_output_is_never_trainable_and_critique_is_context() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10, 11]),
        req(
            "e1",
            "j1",
            &[7, 10, 11],
            &[40, 41],
            json!({"actor": "evaluator"}),
        ),
        req(
            "e1",
            "r2",
            &[1, 2, 10, 11, 8, 40, 41],
            &[12],
            json!({"spans": [{"end": 4}, {"end": 5, "source": "template"},
                             {"end": 7, "source": "critique"}]}),
        ),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(
        shape(e),
        "root → {[1 2] → [10 11]r1 → [8 40 41] → [12]r2, [7 10 11] → [40 41]j1}"
    );
    assert_eq!(candidate_ids(&batch, &results, "e1"), strs(&["r2"]));
    assert_eq!(
        trainable_tokens(e),
        strs(&["r1.out[0]", "r1.out[1]", "r2.out[0]"])
    );
    assert_eq!(reason(&batch, &results, "e1", "j1", 3), "evaluator output");
    assert_eq!(reason(&batch, &results, "e1", "j1", 4), "evaluator output");
    assert_eq!(reason(&batch, &results, "e1", "r2", 5), "context:critique");
    assert_eq!(reason(&batch, &results, "e1", "r2", 6), "context:critique");
    let all = rows(&batch, &results);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["leaf"], "r2");
    assert_eq!(u32s(&all[0]["tokens"]), vec![1, 2, 10, 11, 8, 40, 41, 12]);
    assert_eq!(all[0]["prompt_len"], 2);
    assert_eq!(u32s(&all[0]["loss_mask"]), vec![1, 1, 0, 0, 0, 1]);
    assert_eq!(all[0]["exec_targets"], 3);
}

/// docs/format.md §5: "Candidates: every policy request … whose output has no other *policy* request's output
/// below it". An evaluator continuing on r1's path does not take r1's candidacy away, and its
/// output is never a target.
#[test]
fn s5_evaluator_output_below_does_not_hide_a_candidate() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10, 11]),
        req(
            "e1",
            "j1",
            &[1, 2, 10, 11, 7],
            &[40],
            json!({"actor": "evaluator"}),
        ),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (_, e) = ex(&batch, "e1");
    assert_eq!(shape(e), "root → [1 2] → [10 11]r1 → [7] → [40]j1");
    assert_eq!(candidate_ids(&batch, &results, "e1"), strs(&["r1"]));
    assert_eq!(who(e, "j1", 2), "r1.out[0]");
    assert_eq!(reason(&batch, &results, "e1", "j1", 5), "evaluator output");
    let all = rows(&batch, &results);
    assert_eq!(all.len(), 1);
    assert_eq!(
        row_target_tokens(&all[0]),
        strs(&["r1.out[0]", "r1.out[1]"])
    );
}

/// docs/format.md §1: "A request that appears after its execution's closure is not part of the execution:
/// it is shown, flagged "after closure", and ignored by scoring and admission."
#[test]
fn s1_request_after_closure_is_in_the_tree_flagged_and_not_admitted() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10]),
        scored("e1", 1.0),
        rq("e1", "r2", &[1, 2, 10, 3], &[11]),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (i, e) = ex(&batch, "e1");
    assert_eq!(shape(e), "root → [1 2] → [10]r1 → [3] → [11]r2");
    assert!(e.requests[ridx(e, "r2") as usize].after_closure);
    assert!(!e.requests[ridx(e, "r1") as usize].after_closure);
    assert_eq!(candidate_ids(&batch, &results, "e1"), strs(&["r1"]));
    assert_eq!(trainable_tokens(e), strs(&["r1.out[0]"]));
    assert_eq!(reason(&batch, &results, "e1", "r2", 4), "after closure");
    assert_eq!(
        results.outcomes[i],
        Outcome::Scored {
            reward: 1.0,
            assessment: 0
        }
    );
    let all = rows(&batch, &results);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["leaf"], "r1");
    assert_eq!(u32s(&all[0]["tokens"]), vec![1, 2, 10]);
    assert_eq!(
        all[0]["targets"],
        json!([{"request": "r1", "offset": 0, "len": 1, "pos": 2, "temperature": null}])
    );
}

/// docs/format.md §3: every token answers "why is this (not) a target" with one of `context:<source>`,
/// `evaluator output`, `after closure`, `execution excluded: <reason>`,
/// `claimed by draw k (leaf R)`, `left out: J_max reached`.
#[test]
fn s3_provenance_reasons() {
    let src = recording(&[
        req(
            "e1",
            "r1",
            &[1, 2],
            &[10],
            json!({"spans": [{"end": 1, "source": "system"}, {"end": 2, "source": "template"}]}),
        ),
        rq("e1", "r2", &[1, 2], &[11]),
        req("e1", "j1", &[5], &[40], json!({"actor": "evaluator"})),
        scored("e1", 1.0),
        rq("e1", "r3", &[1, 2, 10, 3], &[12]),
        rq("e2", "r1", &[1], &[10]),
    ]);
    let settings = Settings {
        jmax: 1,
        ..Settings::default()
    };
    let (batch, results) = run(&src, &settings);
    let (i, e) = ex(&batch, "e1");
    assert_eq!(reason(&batch, &results, "e1", "r1", 0), "context:system");
    assert_eq!(reason(&batch, &results, "e1", "r1", 1), "context:template");
    assert_eq!(reason(&batch, &results, "e1", "j1", 0), "context:context");
    assert_eq!(reason(&batch, &results, "e1", "j1", 1), "evaluator output");
    assert_eq!(reason(&batch, &results, "e1", "r3", 4), "after closure");
    let drawn = &e.requests[results.admissions[i].draws[0].chosen as usize].id;
    let other = if drawn == "r1" { "r2" } else { "r1" };
    assert_eq!(
        reason(&batch, &results, "e1", drawn, 2),
        format!("claimed by draw 1 (leaf {drawn})")
    );
    assert_eq!(
        reason(&batch, &results, "e1", other, 2),
        "left out: J_max reached"
    );
    assert_eq!(
        reason(&batch, &results, "e2", "r1", 1),
        "execution excluded: open"
    );
}

// ---------------------------------------------------------------------------------------------
// §4 Scoring

/// docs/format.md §4: "the reward is the score of the first valid assessment, in file order, whose artifact
/// and version equal the closure's and whose t ≤ execution.t + budget_s. Failed attempts before it
/// are kept … Assessments of other versions … never overwrite each other."
#[test]
fn s4_failed_then_valid_retry_within_budget_is_scored_with_the_valid_one() {
    let src = recording(&[
        line(json!({"kind": "execution", "execution": "e1", "t": 100, "budget_s": 60})),
        rq("e1", "r1", &[1, 2], &[10]),
        line(
            json!({"kind": "assessment", "execution": "e1", "artifact": "art", "version": 1,
                    "status": "valid", "score": 0.1, "t": 140}),
        ),
        line(
            json!({"kind": "closure", "execution": "e1", "t": 150, "status": "completed",
                    "artifact": "art", "version": 2}),
        ),
        line(
            json!({"kind": "assessment", "execution": "e1", "artifact": "art", "version": 2,
                    "status": "failed", "error": "grader crashed", "t": 151, "attempt": 1}),
        ),
        line(
            json!({"kind": "assessment", "execution": "e1", "artifact": "art", "version": 2,
                    "status": "valid", "score": 0.75, "t": 155, "attempt": 2}),
        ),
        line(
            json!({"kind": "assessment", "execution": "e1", "artifact": "art", "version": 2,
                    "status": "valid", "score": 0.9, "t": 158, "attempt": 3}),
        ),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (i, e) = ex(&batch, "e1");
    assert_eq!(e.assessments.len(), 4, "every assessment is kept");
    assert_eq!(
        results.outcomes[i],
        Outcome::Scored {
            reward: 0.75,
            assessment: 2
        }
    );
    let all = rows(&batch, &results);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["reward"], 0.75);
}

/// docs/format.md §4: "no such assessment → excluded (no valid reward by budget end)"; the bound is
/// `t ≤ execution.t + budget_s` (inclusive).
#[test]
fn s4_late_valid_assessment_excludes_the_execution() {
    let exec_with_assessment_at = |id: &str, t: f64| {
        [
            line(json!({"kind": "execution", "execution": id, "t": 100, "budget_s": 60})),
            rq(id, "r1", &[1, 2], &[10]),
            line(
                json!({"kind": "closure", "execution": id, "t": 150, "status": "completed",
                        "artifact": "art", "version": 1}),
            ),
            line(
                json!({"kind": "assessment", "execution": id, "artifact": "art", "version": 1,
                        "status": "valid", "score": 1.0, "t": t}),
            ),
        ]
    };
    let mut lines = exec_with_assessment_at("late", 160.5).to_vec();
    lines.extend(exec_with_assessment_at("edge", 160.0));
    let (batch, results) = run(&recording(&lines), &uncapped());
    let (late, _) = ex(&batch, "late");
    let (edge, _) = ex(&batch, "edge");
    assert_eq!(
        results.outcomes[late],
        Outcome::Excluded(Exclusion::NoValidReward)
    );
    assert_eq!(
        results.outcomes[edge],
        Outcome::Scored {
            reward: 1.0,
            assessment: 0
        }
    );
    assert_eq!(
        reason(&batch, &results, "late", "r1", 2),
        "execution excluded: no valid reward by budget end"
    );
    let all = rows(&batch, &results);
    assert!(rows_of(&all, "late").is_empty());
    assert_eq!(rows_of(&all, "edge").len(), 1);
    assert_eq!(all[0]["batch_executions"], 1);
}

/// docs/format.md §4: "A valid 0 is a reward like any other"; paper: "a valid zero remains trainable".
#[test]
fn s4_valid_zero_is_scored_and_its_targets_admitted() {
    let src = recording(&[rq("e1", "r1", &[1, 2], &[10, 11]), scored("e1", 0.0)]);
    let (batch, results) = run(&src, &uncapped());
    assert_eq!(
        results.outcomes[0],
        Outcome::Scored {
            reward: 0.0,
            assessment: 0
        }
    );
    let all = rows(&batch, &results);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["reward"], 0.0);
    assert_eq!(all[0]["dummy"], false);
    assert_eq!(u32s(&all[0]["loss_mask"]), vec![1, 1]);
    assert_eq!(all[0]["exec_targets"], 2);
}

/// docs/format.md §4: "The reward never depends on … termination status (timeout with a valid assessment is
/// scored normally)."
#[test]
fn s4_timeout_with_a_valid_assessment_is_scored_normally() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10]),
        line(
            json!({"kind": "closure", "execution": "e1", "t": 10, "status": "timeout",
                    "artifact": "art", "version": 1}),
        ),
        line(
            json!({"kind": "assessment", "execution": "e1", "artifact": "art", "version": 1,
                    "status": "valid", "score": 0.5, "t": 11}),
        ),
    ]);
    let (batch, results) = run(&src, &uncapped());
    assert_eq!(results.outcomes[0].reward(), Some(0.5));
    assert_eq!(rows(&batch, &results)[0]["reward"], 0.5);
}

/// docs/format.md §4: "Assessments of other versions or branches are kept and shown separately; they never
/// overwrite each other." An assessment of another branch than the committed one is not the
/// reward even with the closure's artifact and version (docs/decisions.md).
#[test]
fn s4_assessment_of_another_branch_is_not_the_reward() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10]),
        rq("e1", "r2", &[1, 2], &[11]),
        line(
            json!({"kind": "closure", "execution": "e1", "t": 10, "status": "completed",
                    "committed": "r2", "artifact": "art", "version": 1}),
        ),
        line(
            json!({"kind": "assessment", "execution": "e1", "artifact": "art", "version": 1,
                    "branch": "r1", "status": "valid", "score": 0.2, "t": 11}),
        ),
        line(
            json!({"kind": "assessment", "execution": "e1", "artifact": "art", "version": 1,
                    "branch": "r2", "status": "valid", "score": 0.9, "t": 12}),
        ),
    ]);
    let (batch, results) = run(&src, &uncapped());
    assert_eq!(results.outcomes[0].reward(), Some(0.9));
    let branches: Vec<_> = batch.executions[0]
        .assessments
        .iter()
        .map(|a| a.record.branch.as_deref())
        .collect();
    assert_eq!(branches, [Some("r1"), Some("r2")]);
}

/// docs/format.md §4: "closure without an artifact → dummy: no assessable work; reward 0"; §5 "exactly one
/// placeholder trajectory, dummy: true, reward 0, no targets"; §6 L_i = 0 → weight 0.
#[test]
fn s4_dummy_closure_without_artifact_gives_exactly_one_placeholder_row() {
    let src = recording(&[
        rq("d1", "r1", &[1, 2], &[10, 11]),
        rq("d1", "r2", &[1, 2, 10, 11, 3], &[12]),
        line(
            json!({"kind": "closure", "execution": "d1", "t": 10, "status": "error",
                    "artifact": null}),
        ),
        line(json!({"kind": "execution", "execution": "d2", "t": 0})),
        line(json!({"kind": "closure", "execution": "d2", "t": 10, "status": "completed"})),
    ]);
    let (batch, results) = run(&src, &uncapped());
    assert_eq!(results.outcomes[0], Outcome::Dummy);
    assert_eq!(results.outcomes[1], Outcome::Dummy);
    assert_eq!(results.batch_executions, 2);
    let all = rows(&batch, &results);
    for exec in ["d1", "d2"] {
        let r = rows_of(&all, exec);
        assert_eq!(r.len(), 1, "exactly one placeholder for {exec}");
        let r = r[0];
        assert_eq!(r["dummy"], true);
        assert_eq!(r["reward"], 0.0);
        assert_eq!(r["draw"], 1);
        assert_eq!(r["targets"], json!([]));
        let mask = u32s(&r["loss_mask"]);
        assert!(mask.iter().all(|&m| m == 0), "{exec}: mask {mask:?}");
        let tokens = u32s(&r["tokens"]);
        assert_eq!(
            mask.len(),
            tokens.len() - r["prompt_len"].as_u64().unwrap() as usize
        );
        assert_eq!(r["exec_targets"], 0);
        assert_eq!(r["weight"], 0.0);
        assert_eq!(r["batch_executions"], 2);
    }
}

/// docs/format.md §4: "no closure record → excluded (open)"; §5 "Excluded executions: no candidates,
/// nothing exported"; §6: B counts scored + dummy only.
#[test]
fn s4_open_execution_is_excluded_with_no_rows() {
    let src = recording(&[
        rq("open", "r1", &[1, 2], &[10]),
        line(
            json!({"kind": "assessment", "execution": "open", "artifact": "art", "version": 1,
                    "status": "valid", "score": 1.0, "t": 11}),
        ),
        rq("done", "r1", &[1, 2], &[10]),
        scored("done", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (o, _) = ex(&batch, "open");
    assert_eq!(results.outcomes[o], Outcome::Excluded(Exclusion::Open));
    assert!(results.admissions[o].draws.is_empty());
    assert_eq!(results.batch_executions, 1);
    let all = rows(&batch, &results);
    assert!(rows_of(&all, "open").is_empty());
    assert_eq!(rows_of(&all, "done").len(), 1);
    assert_eq!(all[0]["batch_executions"], 1);
    assert_eq!(
        reason(&batch, &results, "open", "r1", 2),
        "execution excluded: open"
    );
}

/// docs/format.md §1: "An execution record is optional; without one, the execution starts at t = 0 with an
/// unlimited budget."
#[test]
fn s1_execution_record_is_optional_with_unlimited_budget() {
    let src = recording(&[
        rq("e1", "r1", &[1], &[10]),
        line(
            json!({"kind": "closure", "execution": "e1", "t": 5, "status": "completed",
                    "artifact": "art", "version": 1}),
        ),
        line(
            json!({"kind": "assessment", "execution": "e1", "artifact": "art", "version": 1,
                    "status": "valid", "score": 0.25, "t": 1.0e9}),
        ),
    ]);
    let (batch, results) = run(&src, &uncapped());
    assert_eq!(batch.executions[0].start(), 0.0);
    assert_eq!(results.outcomes[0].reward(), Some(0.25));
}

/// docs/format.md §4: "for executions sharing a group, advantage = reward − mean over the group's
/// non-excluded executions (--advantage grpo also divides by the group's standard deviation +
/// 1e-6; none omits it)". Group g: rewards 1, 0, 0.5, a dummy (0) and an excluded one (ignored):
/// mean 0.375. Standard deviation read as the sample one (Bessel), as torch.std / GRPO use.
#[test]
fn s4_group_advantages_drgrpo_grpo_none() {
    let mut lines = Vec::new();
    for (id, score) in [("e1", 1.0), ("e2", 0.0), ("e3", 0.5)] {
        lines.push(line(
            json!({"kind": "execution", "execution": id, "t": 0, "group": "g"}),
        ));
        lines.push(rq(id, "r1", &[1], &[10]));
        lines.push(scored(id, score));
    }
    // Excluded: assessment after the budget.
    lines.push(line(
        json!({"kind": "execution", "execution": "e4", "t": 0, "budget_s": 5, "group": "g"}),
    ));
    lines.push(rq("e4", "r1", &[1], &[10]));
    lines.push(scored("e4", 1.0));
    // Dummy: reward 0, non-excluded.
    lines.push(line(
        json!({"kind": "execution", "execution": "e5", "t": 0, "group": "g"}),
    ));
    lines.push(rq("e5", "r1", &[1], &[10]));
    lines.push(line(
        json!({"kind": "closure", "execution": "e5", "t": 3, "status": "error"}),
    ));
    let src = recording(&lines);

    let (batch, results) = run_with(&src, &uncapped(), AdvantageMode::DrGrpo);
    let all = rows(&batch, &results);
    let adv = |all: &[Value], id: &str| rows_of(all, id)[0]["advantage"].as_f64().unwrap();
    assert!(rows_of(&all, "e4").is_empty());
    assert_eq!(adv(&all, "e1"), 0.625);
    assert_eq!(adv(&all, "e2"), -0.375);
    assert_eq!(adv(&all, "e3"), 0.125);
    assert_eq!(adv(&all, "e5"), -0.375);

    let (batch, results) = run_with(&src, &uncapped(), AdvantageMode::Grpo);
    let all = rows(&batch, &results);
    let std =
        ((0.625f64.powi(2) + 0.375f64.powi(2) + 0.125f64.powi(2) + 0.375f64.powi(2)) / 3.0).sqrt();
    for (id, r) in [("e1", 1.0), ("e2", 0.0), ("e3", 0.5), ("e5", 0.0)] {
        let want = (r - 0.375) / (std + 1e-6);
        assert!(
            (adv(&all, id) - want).abs() < 1e-12,
            "{id}: {} vs {want}",
            adv(&all, id)
        );
    }

    let (batch, results) = run_with(&src, &uncapped(), AdvantageMode::None);
    let all = rows(&batch, &results);
    assert_eq!(all.len(), 4);
    for r in &all {
        assert!(r.get("advantage").is_none(), "advantage present: {r}");
    }
}

// ---------------------------------------------------------------------------------------------
// §1 Encodings, files, ids

/// docs/format.md §1: delta encoding "the full input is then r7's full input + r7's output + this record's
/// input"; both encodings describe the same requests, so the export is byte-identical.
#[test]
fn s1_delta_and_full_encodings_export_identical_bytes() {
    let full = recording(&[
        rq("e1", "r1", &[1, 2], &[10, 11]),
        rq("e1", "r2", &[1, 2, 10, 11, 3], &[12]),
        rq("e1", "r3", &[1, 2, 10, 11, 3, 12, 4, 5], &[13, 14]),
        rq("e1", "r4", &[1, 2], &[10, 11]),
        rq("e1", "r5", &[1, 2, 10, 11, 3, 12, 6], &[15]),
        scored("e1", 0.5),
    ]);
    let delta = recording(&[
        rq("e1", "r1", &[1, 2], &[10, 11]),
        req("e1", "r2", &[3], &[12], json!({"extends": "r1"})),
        req("e1", "r3", &[4, 5], &[13, 14], json!({"extends": "r2"})),
        rq("e1", "r4", &[1, 2], &[10, 11]),
        req("e1", "r5", &[6], &[15], json!({"extends": "r2"})),
        scored("e1", 0.5),
    ]);
    let settings = Settings {
        seed: 3,
        jmax: 0,
        ..Settings::default()
    };
    let export = |src: &str| {
        let (batch, results) = run(src, &settings);
        let mut buf = Vec::new();
        export::jsonl::write_rows(&batch, &results, &mut buf).unwrap();
        (shape(&batch.executions[0]), buf)
    };
    let (full_shape, full_bytes) = export(&full);
    let (delta_shape, delta_bytes) = export(&delta);
    assert_eq!(
        full_shape,
        "root → [1 2] → {[10 11]r1 → [3] → [12]r2 → {[4 5] → [13 14]r3, [6] → [15]r5}, [10 11]r4}"
    );
    assert_eq!(delta_shape, full_shape);
    assert!(!full_bytes.is_empty());
    assert_eq!(
        String::from_utf8(delta_bytes).unwrap(),
        String::from_utf8(full_bytes).unwrap()
    );
}

/// docs/format.md §1: "ids are per execution"; "Records of different executions may interleave in any
/// order"; `extends` resolves within the record's own execution.
#[test]
fn s1_ids_are_per_execution_and_records_interleave() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10]),
        rq("e2", "r1", &[5, 6], &[20]),
        req("e1", "r2", &[3], &[11], json!({"extends": "r1"})),
        scored("e2", 1.0),
        req("e2", "r2", &[7], &[21], json!({"extends": "r1"})),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let (_, e1) = ex(&batch, "e1");
    let (_, e2) = ex(&batch, "e2");
    assert_eq!(path(e1, "r2"), vec![1, 2, 10, 3, 11]);
    assert_eq!(path(e2, "r2"), vec![5, 6, 20, 7, 21]);
    assert!(e2.requests[ridx(e2, "r2") as usize].after_closure);
    assert_eq!(candidate_ids(&batch, &results, "e1"), strs(&["r2"]));
    assert_eq!(candidate_ids(&batch, &results, "e2"), strs(&["r1"]));
}

/// docs/format.md §1: "Several files may be given; they are read in the order given" (the order decides,
/// e.g., whether a request comes after its closure).
#[test]
fn s1_several_files_are_read_in_the_order_given() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    std::fs::write(
        &a,
        recording(&[rq("e1", "r1", &[1, 2], &[10]), scored("e1", 1.0)]),
    )
    .unwrap();
    std::fs::write(&b, recording(&[rq("e1", "r2", &[1, 2, 10, 3], &[11])])).unwrap();
    let ab = load::load(&[a.clone(), b.clone()], &LoadOptions::default(), &|_, _| {}).unwrap();
    let ba = load::load(&[b, a], &LoadOptions::default(), &|_, _| {}).unwrap();
    let e = &ab.executions[0];
    assert!(e.requests[ridx(e, "r2") as usize].after_closure);
    let e = &ba.executions[0];
    assert!(!e.requests[ridx(e, "r2") as usize].after_closure);
    assert_eq!(e.requests[0].id, "r2");
}

/// docs/format.md §1: "Unknown fields are kept and ignored; unknown kinds are a warning, not an error."
#[test]
fn s1_unknown_kinds_warn_and_unknown_fields_are_ignored() {
    let src = recording(&[
        line(json!({"kind": "telemetry", "execution": "e1", "gpu": 3})),
        req(
            "e1",
            "r1",
            &[1, 2],
            &[10],
            json!({"foo": {"bar": [1, 2]}, "priority": 9}),
        ),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    assert_eq!(batch.executions.len(), 1);
    assert_eq!(batch.executions[0].requests.len(), 1);
    assert_eq!(batch.warnings.len(), 1);
    assert_eq!(batch.warnings[0].line, 2);
    assert_eq!(rows(&batch, &results).len(), 1);
}

/// docs/format.md §1: token ids are "non-negative integers below 2^32": 0 and 2^32 − 1 are valid.
#[test]
fn s1_token_id_bounds_are_accepted() {
    let src = recording(&[
        rq("e1", "r1", &[0, 4294967295], &[4294967295]),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let all = rows(&batch, &results);
    assert_eq!(u32s(&all[0]["tokens"]), vec![0, 4294967295, 4294967295]);
}

// ---------------------------------------------------------------------------------------------
// §5 Admission

/// docs/format.md §5: "Stop when J_max draws were made"; unclaimed trainable tokens answer
/// "left out: J_max reached" (§3).
#[test]
fn s5_jmax_cut_leaves_tokens_unclaimed() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10]),
        rq("e1", "r2", &[1, 2], &[11]),
        rq("e1", "r3", &[1, 2], &[12]),
        scored("e1", 1.0),
    ]);
    let settings = Settings {
        jmax: 1,
        ..Settings::default()
    };
    let (batch, results) = run(&src, &settings);
    let (i, e) = ex(&batch, "e1");
    assert_eq!(results.admissions[i].draws.len(), 1);
    let drawn = e.requests[results.admissions[i].draws[0].chosen as usize]
        .id
        .clone();
    let mut left = Vec::new();
    for r in ["r1", "r2", "r3"] {
        let why = reason(&batch, &results, "e1", r, 2);
        if r == drawn {
            assert_eq!(why, format!("claimed by draw 1 (leaf {r})"));
        } else {
            assert_eq!(why, "left out: J_max reached");
            left.push(r);
        }
    }
    assert_eq!(left.len(), 2);
    let all = rows(&batch, &results);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0]["exec_targets"], 1);
}

/// docs/decisions.md: a `--priority` that leaves a class out never draws it; its tokens say so,
/// even when J_max also stopped the draws.
#[test]
fn s5_classes_left_out_of_the_priority_are_never_drawn() {
    let sub = |id: &str, input: &[u32], output: &[u32]| {
        req("e1", id, input, output, json!({"agent": "sub-1"}))
    };
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10]),
        rq("e1", "r2", &[1, 2], &[11]),
        sub("s1", &[5, 6], &[20]),
        scored("e1", 1.0),
    ]);
    let settings = Settings {
        jmax: 1,
        priority: vec![Class::Main],
        ..Settings::default()
    };
    let (batch, results) = run(&src, &settings);
    let (i, e) = ex(&batch, "e1");
    let adm = &results.admissions[i];
    assert_eq!(adm.draws.len(), 1);
    assert_eq!(adm.draws[0].class, Class::Main);
    let drawn = e.requests[adm.draws[0].chosen as usize].id.clone();
    let other = if drawn == "r1" { "r2" } else { "r1" };
    assert_eq!(
        reason(&batch, &results, "e1", other, 2),
        "left out: J_max reached"
    );
    assert_eq!(
        reason(&batch, &results, "e1", "s1", 2),
        "left out: class not in priority"
    );
}

/// docs/format.md §5: "--jmax, default 5 … --jmax 0 = uncapped", through the CLI.
#[test]
fn s5_jmax_defaults_to_5_and_0_is_uncapped() {
    let mut lines: Vec<String> = (0..7)
        .map(|k| rq("e1", &format!("r{k}"), &[1, 2], &[10 + k]))
        .collect();
    lines.push(scored("e1", 1.0));
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "r.jsonl", &recording(&lines));
    assert_eq!(stdout_rows(&gyre_bin(&["admit", &f])).len(), 5);
    assert_eq!(
        stdout_rows(&gyre_bin(&["admit", &f, "--jmax", "0"])).len(),
        7
    );
    assert_eq!(
        stdout_rows(&gyre_bin(&["admit", &f, "--jmax", "2"])).len(),
        2
    );
}

/// One candidate per class, on disjoint paths (weights 1, 2, 3, 4).
fn four_class_recording() -> String {
    recording(&[
        rq("e1", "r1", &[1], &[10]),
        req("e1", "s1", &[2], &[11, 12], json!({"agent": "sub-1"})),
        req(
            "e1",
            "m1",
            &[3],
            &[13, 14, 15],
            json!({"purpose": "summary"}),
        ),
        req(
            "e1",
            "s2",
            &[4],
            &[16, 17, 18, 19],
            json!({"agent": "explore", "purpose": "summary"}),
        ),
        scored("e1", 1.0),
    ])
}

/// docs/format.md §5: "Default priority, highest first: main > main-summary > sub > sub-summary"; "take the
/// highest-priority class that has a candidate with weight > 0" (regardless of weights).
#[test]
fn s5_class_priority_default_order() {
    let (batch, results) = run(&four_class_recording(), &uncapped());
    let all = rows(&batch, &results);
    let got: Vec<(String, String)> = all
        .iter()
        .map(|r| {
            (
                r["leaf"].as_str().unwrap().to_string(),
                r["class"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        ("r1", "main"),
        ("m1", "main-summary"),
        ("s1", "sub"),
        ("s2", "sub-summary"),
    ]
    .map(|(a, b)| (a.to_string(), b.to_string()));
    assert_eq!(got, want.to_vec());
    let draws: Vec<u64> = all.iter().map(|r| r["draw"].as_u64().unwrap()).collect();
    assert_eq!(draws, vec![1, 2, 3, 4]);
}

/// docs/format.md §5: "--priority overrides it", through the CLI.
#[test]
fn s5_priority_override() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "r.jsonl", &four_class_recording());
    let out = gyre_bin(&[
        "admit",
        &f,
        "--jmax",
        "0",
        "--priority",
        "sub-summary,sub,main-summary,main",
    ]);
    let leaves: Vec<String> = stdout_rows(&out)
        .iter()
        .map(|r| r["leaf"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(leaves, strs(&["s2", "s1", "m1", "r1"]));
}

/// docs/format.md §5: "Weight of a candidate: the number of trainable tokens on its path not yet claimed";
/// "its targets are fixed to the still-unclaimed trainable tokens on its path; then every
/// trainable token on the path is claimed". Through `gyre replay --json`.
#[test]
fn s5_weights_are_unclaimed_trainable_tokens_on_the_path() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10, 11]),
        rq("e1", "r2", &[1, 2, 10, 11, 3], &[12, 13]),
        rq("e1", "r3", &[1, 2, 10, 11, 4], &[14]),
        scored("e1", 1.0),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "r.jsonl", &src);
    let out = gyre_bin(&["replay", &f, "--execution", "e1", "--json", "--jmax", "0"]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let draws = v["draws"].as_array().unwrap();
    assert_eq!(draws.len(), 2);
    assert_eq!(
        draws[0]["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (
                c["request"].as_str().unwrap(),
                c["weight"].as_u64().unwrap()
            ))
            .collect::<Vec<_>>(),
        vec![("r2", 4), ("r3", 3)]
    );
    assert_eq!(draws[0]["total"], 7);
    let (second, w, first_fixed) = if draws[0]["chosen"] == "r2" {
        ("r3", 1, 4)
    } else {
        ("r2", 2, 3)
    };
    assert_eq!(draws[0]["target_tokens"], first_fixed);
    assert_eq!(draws[1]["chosen"], second);
    assert_eq!(
        draws[1]["candidates"],
        json!([{"request": second, "weight": w, "p": 1.0}])
    );
    assert_eq!(draws[1]["target_tokens"], w);
    // L_i: r1's a b, r2's c d, r3's e, each once.
    assert_eq!(v["exec_targets"], 5);
    assert_eq!(v["stop"], "exhausted");
}

/// docs/format.md §5: "draw one of its candidates with probability proportional to weight". Two retries
/// with weights 1 and 3: over 4000 seeds the heavier one is drawn first about 3/4 of the time
/// (standard error 0.007; the bound is over 4 of them).
#[test]
fn s5_draw_probability_is_proportional_to_weight() {
    let src = recording(&[
        rq("e1", "r1", &[1], &[10]),
        rq("e1", "r2", &[1], &[11, 12, 13]),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let e = &batch.executions[0];
    let heavy = ridx(e, "r2");
    let n = 4000u64;
    let hits = (0..n)
        .filter(|&seed| {
            let settings = Settings {
                seed,
                jmax: 1,
                ..Settings::default()
            };
            let a = gyre_engine::admit::admit(e, &results.outcomes[0], &settings);
            a.draws[0].chosen == heavy
        })
        .count() as f64;
    let freq = hits / n as f64;
    assert!(
        (freq - 0.75).abs() < 0.03,
        "r2 drawn first in {freq} of seeds"
    );
}

/// docs/format.md §5: "the draws of an execution depend only on (--seed, execution id, its records), not on
/// other executions or on thread scheduling."
#[test]
fn s5_draws_depend_only_on_seed_execution_and_its_records() {
    let target: Vec<String> = {
        let mut l: Vec<String> = (0..6)
            .map(|k| rq("x", &format!("r{k}"), &[1], &vec![10; k as usize + 1]))
            .collect();
        l.push(scored("x", 1.0));
        l
    };
    let settings = Settings {
        seed: 11,
        jmax: 3,
        ..Settings::default()
    };
    let leaves = |lines: &[String]| {
        let (batch, results) = run(&recording(lines), &settings);
        let (i, e) = ex(&batch, "x");
        results.admissions[i]
            .draws
            .iter()
            .map(|d| e.requests[d.chosen as usize].id.clone())
            .collect::<Vec<_>>()
    };
    let alone = leaves(&target);
    let mut crowded: Vec<String> = Vec::new();
    for k in 0..20 {
        let id = format!("other{k}");
        crowded.push(rq(&id, "r0", &[1], &[10, 11]));
        crowded.push(rq(&id, "r1", &[1], &[12]));
        crowded.push(scored(&id, 1.0));
    }
    // Interleave the target execution's records with the others.
    for (k, l) in target.iter().enumerate() {
        crowded.insert(k * 3, l.clone());
    }
    assert_eq!(alone.len(), 3);
    assert_eq!(leaves(&crowded), alone);
    assert_eq!(leaves(&target), alone);
}

// ---------------------------------------------------------------------------------------------
// §6 Loss normalisation

/// docs/format.md §6: "L_i = number of admitted targets … coefficient 1/L_i; an execution with L_i = 0
/// contributes zero loss. B = number of non-excluded executions (scored + dummy)"; §8
/// `exec_targets`, `weight`, `batch_executions`.
#[test]
fn s6_loss_normalisation_per_execution() {
    let src = recording(&[
        // Scored: candidates r2 (a b c) and r3 (d e f): L = 6 whatever the order.
        rq("e1", "r1", &[1, 2], &[10, 11]),
        rq("e1", "r2", &[1, 2, 10, 11, 3], &[12]),
        rq("e1", "r3", &[1, 2], &[13, 14, 15]),
        scored("e1", 1.0),
        // Dummy.
        rq("e2", "r1", &[1], &[10]),
        line(json!({"kind": "closure", "execution": "e2", "t": 1, "status": "error"})),
        // Open: excluded, not in B.
        rq("e3", "r1", &[1], &[10]),
        // Scored with no policy output: L = 0, no rows, but counted in B.
        req("e4", "j1", &[1], &[40], json!({"actor": "evaluator"})),
        scored("e4", 0.5),
    ]);
    let (batch, results) = run(&src, &uncapped());
    assert_eq!(results.batch_executions, 3);
    let all = rows(&batch, &results);
    let e1 = rows_of(&all, "e1");
    assert_eq!(e1.len(), 2);
    let ones: u64 = e1
        .iter()
        .map(|r| u32s(&r["loss_mask"]).iter().map(|&m| m as u64).sum::<u64>())
        .sum();
    assert_eq!(ones, 6);
    for r in &e1 {
        assert_eq!(r["exec_targets"], 6);
        assert_eq!(r["weight"].as_f64().unwrap(), 1.0 / 6.0);
        assert_eq!(r["batch_executions"], 3);
    }
    let e2 = rows_of(&all, "e2");
    assert_eq!(e2.len(), 1);
    assert_eq!(e2[0]["exec_targets"], 0);
    assert_eq!(e2[0]["weight"], 0.0);
    assert_eq!(e2[0]["batch_executions"], 3);
    assert!(rows_of(&all, "e3").is_empty());
    assert!(rows_of(&all, "e4").is_empty());
    assert_eq!(all.len(), 3);
    // (1/B) Σ_i (1/L_i) Σ ℓ_t: per-execution means averaged over B, empty executions add 0.
    let lossy: [&[f64]; 3] = [&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[], &[]];
    assert_eq!(loss::batch_loss(lossy, 3), 3.5 / 3.0);
    assert_eq!(loss::target_weight(0), 0.0);
    assert_eq!(loss::target_weight(4), 0.25);
}

// ---------------------------------------------------------------------------------------------
// §8 Export

/// docs/format.md §8 on the compaction recording (default settings). Draw 1 is class main (r4, the only
/// main candidate), draw 2 main-summary (r3). Row fields:
/// tokens = leaf's I + O; prompt_len = index of the first target; loss_mask 1 exactly at the
/// targets; logprobs = recorded value at policy tokens, 0.0 elsewhere; temperature null (none
/// recorded); targets runs request/offset/len/pos/temperature; exec_targets/weight/batch_executions.
#[test]
fn s8_export_row_invariants() {
    let (batch, results) = run(&compaction_recording(), &Settings::default());
    let all = rows(&batch, &results);
    assert_eq!(all.len(), 2);

    let r = &all[0];
    assert_eq!(r["execution"], "e1");
    assert_eq!(r["group"], Value::Null);
    assert_eq!(r["draw"], 1);
    assert_eq!(r["leaf"], "r4");
    assert_eq!(r["class"], "main");
    assert_eq!(r["reward"], 1.0);
    assert_eq!(r["dummy"], false);
    assert_eq!(u32s(&r["tokens"]), vec![1, 20, 21, 5, 12]);
    assert_eq!(r["prompt_len"], 4);
    assert_eq!(u32s(&r["loss_mask"]), vec![1]);
    assert_eq!(f64s(&r["logprobs"]), vec![lpv(12)]);
    assert_eq!(r["temperature"], Value::Null);
    assert_eq!(
        r["targets"],
        json!([{"request": "r4", "offset": 0, "len": 1, "pos": 4, "temperature": null}])
    );

    let r = &all[1];
    assert_eq!(r["draw"], 2);
    assert_eq!(r["leaf"], "r3");
    assert_eq!(r["class"], "main-summary");
    assert_eq!(u32s(&r["tokens"]), vec![1, 2, 10, 3, 11, 4, 20, 21]);
    assert_eq!(r["prompt_len"], 2);
    assert_eq!(u32s(&r["loss_mask"]), vec![1, 0, 1, 0, 1, 1]);
    assert_eq!(
        f64s(&r["logprobs"]),
        vec![lpv(10), 0.0, lpv(11), 0.0, lpv(20), lpv(21)]
    );
    assert_eq!(
        r["targets"],
        json!([
            {"request": "r1", "offset": 0, "len": 1, "pos": 2, "temperature": null},
            {"request": "r2", "offset": 0, "len": 1, "pos": 4, "temperature": null},
            {"request": "r3", "offset": 0, "len": 2, "pos": 6, "temperature": null},
        ])
    );
    for r in &all {
        assert_eq!(r["exec_targets"], 5);
        assert_eq!(r["weight"], 0.2);
        assert_eq!(r["batch_executions"], 1);
        // Generic invariants.
        let tokens = u32s(&r["tokens"]);
        let p = r["prompt_len"].as_u64().unwrap() as usize;
        let mask = u32s(&r["loss_mask"]);
        assert_eq!(mask.len(), tokens.len() - p);
        let mut from_targets = vec![0u32; tokens.len() - p];
        for t in r["targets"].as_array().unwrap() {
            let (pos, len) = (
                t["pos"].as_u64().unwrap() as usize,
                t["len"].as_u64().unwrap(),
            );
            for k in 0..len as usize {
                from_targets[pos + k - p] = 1;
            }
        }
        assert_eq!(mask, from_targets);
        assert_eq!(mask[0], 1, "prompt_len is the first target");
    }
}

/// docs/format.md §8: logprobs is "null for the whole row when any target lacks a recorded logprob (never
/// invented values)"; a row whose targets all have recorded logprobs keeps them even if an earlier
/// reconstructed output sits in its prompt.
#[test]
fn s8_logprobs_null_when_a_target_lacks_a_recorded_logprob() {
    let src = recording(&[
        req(
            "e1",
            "r1",
            &[1],
            &[10],
            json!({"logprobs": null, "meta": {"reconstructed": true}}),
        ),
        rq("e1", "r2", &[1, 10, 2], &[11]),
        rq("e1", "r3", &[1, 10, 3], &[12]),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    let all = rows(&batch, &results);
    assert_eq!(all.len(), 2);
    let (first, second) = (&all[0], &all[1]);
    assert_eq!(first["prompt_len"], 1);
    assert_eq!(first["logprobs"], Value::Null);
    assert_eq!(second["prompt_len"], 3);
    let want = if second["leaf"] == "r2" {
        lpv(11)
    } else {
        lpv(12)
    };
    assert_eq!(f64s(&second["logprobs"]), vec![want]);
    assert_eq!(u32s(&second["loss_mask"]), vec![1]);
}

/// docs/format.md §2: a context token keeps "the span source it was first seen with": a later request
/// labelling the same shared tokens differently does not relabel them.
#[test]
fn s3_context_source_is_the_one_first_seen() {
    let src = recording(&[
        rq("e1", "r1", &[1, 2], &[10]),
        req(
            "e1",
            "r2",
            &[1, 2, 10, 3],
            &[11],
            json!({"spans": [{"end": 1, "source": "system"}, {"end": 2, "source": "user"},
                             {"end": 3, "source": "assistant"}, {"end": 4, "source": "tool"}]}),
        ),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    assert_eq!(reason(&batch, &results, "e1", "r2", 0), "context:context");
    assert_eq!(reason(&batch, &results, "e1", "r2", 1), "context:context");
    assert_eq!(
        reason(&batch, &results, "e1", "r2", 2),
        "claimed by draw 1 (leaf r2)"
    );
    assert_eq!(reason(&batch, &results, "e1", "r2", 3), "context:tool");
}

/// docs/format.md §3 sources: every span source name is carried into the reason `context:<source>`.
#[test]
fn s3_every_span_source_reads_back_as_its_context_reason() {
    let names = [
        "system",
        "user",
        "tool",
        "assistant",
        "critique",
        "summary",
        "template",
        "context",
    ];
    let spans: Vec<Value> = names
        .iter()
        .enumerate()
        .map(|(k, s)| json!({"end": k + 1, "source": s}))
        .collect();
    let input: Vec<u32> = (1..=8).collect();
    let src = recording(&[
        req("e1", "r1", &input, &[10], json!({"spans": spans})),
        scored("e1", 1.0),
    ]);
    let (batch, results) = run(&src, &uncapped());
    for (k, name) in names.iter().enumerate() {
        assert_eq!(
            reason(&batch, &results, "e1", "r1", k),
            format!("context:{name}")
        );
        assert_eq!(Source::parse(name).map(|s| s.name()), Some(*name));
    }
    assert_eq!(
        reason(&batch, &results, "e1", "r1", 8),
        "claimed by draw 1 (leaf r1)"
    );
}
