//! docs/format.md §2 step 1 against a reference written from the format text alone: a trie with one node per
//! token, every path searched for the longest match, ties compared where they part (a branch
//! whose subtree holds an emitter's output, else the earliest created). Generated executions are
//! made of token-identical retries, continuations whose tool results name the call they answer,
//! and cut-down contexts, over a tiny alphabet so that ties are the rule. Every request names the
//! call ids of its whole conversation (full form), as real harnesses log them; the same
//! executions in delta form (`extends`, spans of the new tokens only) must place every token the
//! same way.

use gyre_engine::execution::{Execution, TokenIdentity};
use gyre_engine::load::{LoadOptions, load_bytes};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Who a path token is, as the reference and the engine both say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    /// Output token `j` of request `r`.
    Out(usize, usize),
    /// Context token first seen at full-input position `k` of request `r`.
    Ctx(usize, usize),
}

struct Node {
    tok: u32,
    parent: usize,
    children: Vec<usize>,
    who: Who,
}

/// The format's tree, one token per node.
struct Trie {
    nodes: Vec<Node>,
    /// Per request: the node of its last output token (its attach point when the output is empty).
    ends: Vec<usize>,
}

impl Trie {
    fn new() -> Self {
        Self {
            nodes: vec![Node {
                tok: u32::MAX,
                parent: 0,
                children: Vec::new(),
                who: Who::Ctx(usize::MAX, 0),
            }],
            ends: Vec::new(),
        }
    }

    fn push(&mut self, parent: usize, tok: u32, who: Who) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node {
            tok,
            parent,
            children: Vec::new(),
            who,
        });
        self.nodes[parent].children.push(id);
        id
    }

    /// Every end of a longest match of `input` (node, matched length).
    fn match_ends(&self, n: usize, pos: usize, input: &[u32], out: &mut Vec<(usize, usize)>) {
        let mut descended = false;
        if pos < input.len() {
            for &c in &self.nodes[n].children {
                if self.nodes[c].tok == input[pos] {
                    descended = true;
                    self.match_ends(c, pos + 1, input, out);
                }
            }
        }
        if !descended {
            out.push((n, pos));
        }
    }

    fn depth(&self, mut n: usize) -> usize {
        let mut d = 0;
        while n != 0 {
            n = self.nodes[n].parent;
            d += 1;
        }
        d
    }

    fn is_ancestor_or_self(&self, a: usize, mut b: usize) -> bool {
        loop {
            if a == b {
                return true;
            }
            if b == 0 {
                return false;
            }
            b = self.nodes[b].parent;
        }
    }

    /// The ancestor of `n` (or `n`) whose parent is `p`.
    fn child_towards(&self, p: usize, mut n: usize) -> usize {
        while self.nodes[n].parent != p {
            n = self.nodes[n].parent;
        }
        n
    }

    /// docs/format.md §2 step 1: among tied ends, compare where the paths part; a branch holding an
    /// emitter's output wins, else the earliest created; repeat below the chosen branch.
    fn choose(&self, ends: Vec<usize>, emitters: &[usize]) -> usize {
        if ends.len() == 1 {
            return ends[0];
        }
        // The parting point: the deepest node on every tied path.
        let mut p = ends[0];
        for &e in &ends[1..] {
            while !self.is_ancestor_or_self(p, e) {
                p = self.nodes[p].parent;
            }
        }
        let mut branches: Vec<usize> = ends.iter().map(|&e| self.child_towards(p, e)).collect();
        branches.sort_unstable();
        branches.dedup();
        // Node ids grow with creation, so the smallest is the earliest created branch.
        let chosen = branches
            .iter()
            .copied()
            .find(|&b| emitters.iter().any(|&em| self.is_ancestor_or_self(b, em)))
            .unwrap_or(branches[0]);
        let rest = ends
            .into_iter()
            .filter(|&e| self.is_ancestor_or_self(chosen, e))
            .collect();
        self.choose(rest, emitters)
    }

    fn insert(&mut self, r: usize, input: &[u32], output: &[u32], emitters: &[usize]) {
        let mut found = Vec::new();
        self.match_ends(0, 0, input, &mut found);
        let best = found.iter().map(|&(_, m)| m).max().unwrap();
        let ends: Vec<usize> = found
            .into_iter()
            .filter(|&(_, m)| m == best)
            .map(|(n, _)| n)
            .collect();
        let mut at = self.choose(ends, emitters);
        assert_eq!(self.depth(at), best);
        for (k, &t) in input.iter().enumerate().skip(best) {
            at = self.push(at, t, Who::Ctx(r, k));
        }
        for (j, &t) in output.iter().enumerate() {
            at = self.push(at, t, Who::Out(r, j));
        }
        self.ends.push(at);
    }

    fn path(&self, r: usize) -> Vec<Who> {
        let mut n = self.ends[r];
        let mut out = Vec::new();
        while n != 0 {
            out.push(self.nodes[n].who);
            n = self.nodes[n].parent;
        }
        out.reverse();
        out
    }
}

/// One generated request, full form.
#[derive(Clone, Debug)]
struct Req {
    input: Vec<u32>,
    output: Vec<u32>,
    /// Span ends over `input` with the call id of a tool span.
    spans: Vec<(usize, Option<String>)>,
    /// Call ids this request's output emits.
    calls: Vec<String>,
    /// The request this one continues (delta form: `extends`), with the length of the new part.
    extends: Option<usize>,
}

#[derive(Clone, Debug)]
enum Step {
    /// A new conversation.
    Fresh(Vec<u32>),
    /// Continue request `pick`: its tool result `toks` answers one of its calls.
    Continue(usize, Vec<u32>),
    /// A retry of request `pick`'s call: the same input; the same output or another.
    Retry(usize, Option<Vec<u32>>),
    /// A context that keeps the first `cut` tokens of request `pick`'s path, then `toks`.
    Cut(usize, usize, Vec<u32>),
}

fn toks(lo: u32) -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(lo..lo + 3, 1..4)
}

fn step() -> impl Strategy<Value = (Step, Vec<u32>, u8)> {
    let kind = prop_oneof![
        1 => toks(1).prop_map(Step::Fresh),
        4 => (any::<usize>(), toks(1)).prop_map(|(p, t)| Step::Continue(p, t)),
        4 => (any::<usize>(), prop::option::of(toks(10))).prop_map(|(p, o)| Step::Retry(p, o)),
        1 => (any::<usize>(), any::<usize>(), toks(1)).prop_map(|(p, c, t)| Step::Cut(p, c, t)),
    ];
    (kind, prop::collection::vec(10u32..13, 0..3), any::<u8>())
}

/// Builds the requests of `steps`: every request emits a call (usually its own id, sometimes the
/// id the request it retries emitted, sometimes none).
fn build(steps: &[(Step, Vec<u32>, u8)]) -> Vec<Req> {
    let mut reqs: Vec<Req> = Vec::new();
    for (i, (step, output, call)) in steps.iter().enumerate() {
        let step = if reqs.is_empty() {
            Step::Fresh(vec![1])
        } else {
            step.clone()
        };
        let n = reqs.len();
        let (input, spans, extends, output) = match step {
            Step::Fresh(t) => {
                let mut input = vec![1];
                input.extend(&t);
                let len = input.len();
                (input, vec![(len, None)], None, output.clone())
            }
            Step::Continue(p, t) => {
                let p = p % n;
                let prev = &reqs[p];
                let mut input = prev.input.clone();
                input.extend(&prev.output);
                let mut spans = prev.spans.clone();
                if !prev.output.is_empty() {
                    spans.push((input.len(), None));
                }
                input.extend(&t);
                spans.push((input.len(), prev.calls.first().cloned()));
                (input, spans, Some(p), output.clone())
            }
            Step::Retry(p, o) => {
                let prev = &reqs[p % n];
                let out = o.unwrap_or_else(|| prev.output.clone());
                (prev.input.clone(), prev.spans.clone(), None, out)
            }
            Step::Cut(p, c, t) => {
                let prev = &reqs[p % n];
                let mut path = prev.input.clone();
                path.extend(&prev.output);
                let cut = c % (path.len() + 1);
                let mut input = path[..cut].to_vec();
                let mut spans: Vec<(usize, Option<String>)> = prev
                    .spans
                    .iter()
                    .filter(|(e, _)| *e <= cut)
                    .cloned()
                    .collect();
                if spans.last().map_or(0, |s| s.0) < cut {
                    spans.push((cut, None));
                }
                input.extend(&t);
                spans.push((input.len(), None));
                (input, spans, None, output.clone())
            }
        };
        let calls = match call % 4 {
            0 => vec![],
            1 => match reqs.last() {
                Some(last) if !last.calls.is_empty() => last.calls.clone(),
                _ => vec![format!("call_{i}")],
            },
            _ => vec![format!("call_{i}")],
        };
        reqs.push(Req {
            input,
            output,
            spans,
            calls,
            extends,
        });
    }
    reqs
}

fn record(i: usize, r: &Req, delta: bool) -> Value {
    let (input, spans): (Vec<u32>, Vec<Value>) = match r.extends {
        Some(_) if delta => {
            // Only the tool result is new; its span is the record's one span.
            let (end, call) = r.spans.last().unwrap();
            let start = r.spans[r.spans.len() - 2].0;
            let span = match call {
                Some(c) => json!({"end": end - start, "source": "tool", "call_id": c}),
                None => json!({"end": end - start, "source": "tool"}),
            };
            (r.input[start..].to_vec(), vec![span])
        }
        _ => (
            r.input.clone(),
            r.spans
                .iter()
                .map(|(end, call)| match call {
                    Some(c) => json!({"end": end, "source": "tool", "call_id": c}),
                    None => json!({"end": end}),
                })
                .collect(),
        ),
    };
    let mut v = json!({
        "kind": "request", "execution": "e1", "id": format!("r{i}"),
        "input": input, "output": r.output,
        "logprobs": r.output.iter().map(|_| -0.5).collect::<Vec<_>>(),
        "spans": spans,
        "tool_calls": r.calls.iter().map(|c| json!({"id": c, "name": "bash", "start": 0, "end": r.output.len()})).collect::<Vec<_>>(),
    });
    if let (Some(p), true) = (r.extends, delta) {
        v["extends"] = json!(format!("r{p}"));
    }
    v
}

fn engine_paths(reqs: &[Req], delta: bool) -> Vec<Vec<Who>> {
    let mut src = String::from("{\"kind\":\"header\",\"format\":\"gyre/1\"}\n");
    for (i, r) in reqs.iter().enumerate() {
        src.push_str(&record(i, r, delta).to_string());
        src.push('\n');
    }
    let batch = load_bytes("gen.jsonl", src.as_bytes(), &LoadOptions::default())
        .unwrap_or_else(|e| panic!("generated recording is valid: {e}\n{src}"));
    let e: &Execution = &batch.executions[0];
    (0..reqs.len())
        .map(|r| {
            let mut out = Vec::new();
            for n in e.tree.path_nodes(e.requests[r].output_node) {
                for i in 0..e.tree.nodes[n as usize].len {
                    out.push(match e.identity(n, i) {
                        TokenIdentity::Output { request, offset } => {
                            Who::Out(request as usize, offset as usize)
                        }
                        TokenIdentity::Context {
                            request, offset, ..
                        } => Who::Ctx(request as usize, offset as usize),
                    });
                }
            }
            out
        })
        .collect()
}

fn reference_paths(reqs: &[Req]) -> Vec<Vec<Who>> {
    let mut trie = Trie::new();
    for (i, r) in reqs.iter().enumerate() {
        // Earlier requests that emitted a call id one of this request's tool spans names.
        let named: Vec<&String> = r.spans.iter().filter_map(|(_, c)| c.as_ref()).collect();
        let emitters: Vec<usize> = (0..i)
            .filter(|&q| reqs[q].calls.iter().any(|c| named.contains(&c)))
            .map(|q| trie.ends[q])
            .collect();
        trie.insert(i, &r.input, &r.output, &emitters);
    }
    (0..reqs.len()).map(|r| trie.path(r)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_token_is_placed_as_the_spec_says(steps in prop::collection::vec(step(), 1..24)) {
        let reqs = build(&steps);
        let want = reference_paths(&reqs);
        let full = engine_paths(&reqs, false);
        for (r, (w, f)) in want.iter().zip(&full).enumerate() {
            prop_assert_eq!(w, f, "full form, path of r{}", r);
        }
        let delta = engine_paths(&reqs, true);
        for (r, (w, d)) in want.iter().zip(&delta).enumerate() {
            prop_assert_eq!(w, d, "delta form, path of r{}", r);
        }
    }
}
