//! One execution: its requests (in file order), assessments, closure and shared-prefix tree,
//! built record by record.

use std::collections::HashMap;

use serde_json::Value;

pub use super::line_ref::LineRef;
use super::samples::Samples;
use super::tree::{NodeId, NodeKind, ROOT, Tree};
use gyre_format::record::{
    Actor, AssessmentRecord, ClosureRecord, ExecutionRecord, LineError, Purpose, Record,
    RequestRecord, Source, Span, ToolCall,
};

/// A request as kept after insertion: metadata only, its tokens live in the tree.
#[derive(Clone, Debug)]
pub struct Request {
    /// Request id.
    pub id: String,
    /// Agent id (`main` or a sub-agent).
    pub agent: String,
    /// Task or summary.
    pub purpose: Purpose,
    /// Policy or evaluator.
    pub actor: Actor,
    /// Length of the full input.
    pub input_len: u32,
    /// Length of the output.
    pub output_len: u32,
    /// Node holding the last piece of the output; the request's path ends there.
    pub output_node: NodeId,
    /// Input tokens that matched an existing path when the request was inserted.
    pub matched: u32,
    /// Behaviour log-probs (absent on reconstructed records).
    pub logprobs: Option<Logprobs>,
    /// Spans in full-input coordinates, kept only over the context this request brought into
    /// the tree (offsets from `matched` on): the rest labels tokens some earlier node holds.
    pub spans: Vec<Span>,
    /// Requests that emitted a call id named by a `tool` span of this record's own `input`,
    /// oldest first (a delta record's chain is reached through [`Request::extends`]).
    pub call_emitters: Vec<u32>,
    /// The request this one extends (delta encoding).
    pub extends: Option<u32>,
    /// Tool calls made by the output.
    pub tool_calls: Vec<ToolCall>,
    /// Finish reason.
    pub finish: Option<String>,
    /// Request time.
    pub t: Option<f64>,
    /// Model name.
    pub model: Option<String>,
    /// Metadata.
    pub meta: Option<Value>,
    /// Appeared after its execution's closure: shown, never scored or admitted.
    pub after_closure: bool,
    /// Why its output is not trainable although the policy sampled it (`not_trainable`).
    pub not_trainable: Option<Box<str>>,
    /// Where the record is.
    pub at: LineRef,
    /// Length of the `input` array as written (the new tokens, for delta records).
    pub encoded_len: u32,
    /// Full-input offset where the first kept span starts.
    spans_start: u32,
}

impl Request {
    /// Whether this request's output is trainable (docs/format.md §3): policy, part of the execution,
    /// not marked `not_trainable`.
    pub fn trainable(&self) -> bool {
        self.actor == Actor::Policy && !self.after_closure && self.not_trainable.is_none()
    }

    /// Whether the record was rebuilt from logs rather than recorded (`meta.reconstructed`).
    pub fn reconstructed(&self) -> bool {
        self.meta
            .as_ref()
            .and_then(|m| m.get("reconstructed"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The temperature the output was sampled at: `meta.sampling.temperature` when it is a
    /// finite number ≥ 0 (docs/format.md §1, §8); `None` when not recorded (the server's
    /// default was in force, which the record does not say) or not a valid temperature.
    pub fn temperature(&self) -> Option<f64> {
        self.meta
            .as_ref()?
            .get("sampling")?
            .get("temperature")?
            .as_f64()
            .filter(|t| t.is_finite() && *t >= 0.0)
    }

    /// Span covering full-input offset `offset` (`None` = unlabelled). Only offsets of
    /// context this request brought into the tree are answered (see [`Request::spans`]).
    pub fn span_at(&self, offset: u32) -> Option<&Span> {
        let i = self.spans.partition_point(|s| s.end <= offset);
        let span = self.spans.get(i)?;
        let start = if i == 0 {
            self.spans_start
        } else {
            self.spans[i - 1].end
        };
        (offset >= start).then_some(span)
    }

    /// Source of full-input token `offset` (`context` where no span labels it).
    pub fn source_at(&self, offset: u32) -> Source {
        self.span_at(offset).map_or(Source::Context, |s| s.source)
    }

    /// Behaviour log-prob of output token `j`, when recorded.
    pub fn logprob(&self, j: u32) -> Option<f64> {
        self.logprobs.as_ref().map(|l| l.get(j as usize))
    }
}

/// Recorded behaviour log-probs, stored exactly but compactly. Samplers compute them in float32,
/// and loggers often round them to a few decimals; either form fits in 4 bytes per token without
/// changing a single bit of the value read back.
#[derive(Clone, Debug, PartialEq)]
pub enum Logprobs {
    /// Every value is exactly a float32.
    F32(Vec<f32>),
    /// Every value is exactly `k / 10^decimals` for an integer `k` (the value a correctly
    /// rounded parser reads from a decimal with that many places).
    Decimal {
        /// Decimal places.
        decimals: u8,
        /// The integers `k`.
        scaled: Vec<i32>,
    },
    /// Anything else.
    F64(Vec<f64>),
}

impl Logprobs {
    /// Stores `values` in the smallest exact form.
    pub fn new(mut values: Vec<f64>) -> Self {
        if values.iter().all(|&v| (v as f32) as f64 == v) {
            return Logprobs::F32(values.iter().map(|&v| v as f32).collect());
        }
        for decimals in 1..=8u8 {
            let scale = 10f64.powi(decimals as i32);
            let exact = |v: f64| {
                let k = (v * scale).round();
                k.abs() < i32::MAX as f64 && k / scale == v
            };
            if values.iter().all(|&v| exact(v)) {
                return Logprobs::Decimal {
                    decimals,
                    scaled: values.iter().map(|&v| (v * scale).round() as i32).collect(),
                };
            }
        }
        values.shrink_to_fit();
        Logprobs::F64(values)
    }

    /// Value `j`, exactly as recorded.
    pub fn get(&self, j: usize) -> f64 {
        match self {
            Logprobs::F32(v) => v[j] as f64,
            Logprobs::Decimal { decimals, scaled } => {
                scaled[j] as f64 / 10f64.powi(*decimals as i32)
            }
            Logprobs::F64(v) => v[j],
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Logprobs::F32(v) => v.len(),
            Logprobs::Decimal { scaled, .. } => scaled.len(),
            Logprobs::F64(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::Logprobs;

    #[test]
    fn logprobs_read_back_bit_for_bit() {
        let cases: [&[f64]; 4] = [
            &[-0.5, -0.25, -1.0],
            &[-0.1234, -2.5, -0.0001, -13.0],
            &[-0.412_014_544_010_162_35, -0.1],
            &[-1e-300, -0.3],
        ];
        for values in cases {
            let parsed: Vec<f64> = values
                .iter()
                .map(|v| format!("{v}").parse().unwrap())
                .collect();
            let lp = Logprobs::new(parsed.clone());
            let back: Vec<f64> = (0..lp.len()).map(|j| lp.get(j)).collect();
            assert_eq!(
                back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                parsed.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
        assert!(matches!(Logprobs::new(vec![-0.5, -0.25]), Logprobs::F32(_)));
        assert!(matches!(
            Logprobs::new(vec![-0.1234, -0.1]),
            Logprobs::Decimal { decimals: 4, .. }
        ));
    }
}

/// An assessment with its place in the input.
#[derive(Clone, Debug)]
pub struct Assessment {
    /// The record.
    pub record: AssessmentRecord,
    /// Where it is.
    pub at: LineRef,
}

/// A closure with its place in the input.
#[derive(Clone, Debug)]
pub struct Closure {
    /// The record.
    pub record: ClosureRecord,
    /// Where it is.
    pub at: LineRef,
}

/// Everything recorded for one execution.
#[derive(Clone, Debug)]
pub struct Execution {
    /// Execution id.
    pub id: String,
    /// The `execution` record, when there is one.
    pub info: Option<Box<ExecutionRecord>>,
    /// Requests in file order.
    pub requests: Vec<Request>,
    /// Assessments in file order.
    pub assessments: Vec<Assessment>,
    /// The closure, when recorded.
    pub closure: Option<Box<Closure>>,
    /// The shared-prefix tree.
    pub tree: Tree,
    /// Where the execution first appears.
    pub first_seen: LineRef,
    /// The samples a trainer trained on (`trained` records, docs/format.md §9), in dump order.
    pub trained: Samples,
    ids: HashMap<String, u32>,
    emitters: HashMap<Box<str>, Vec<u32>>,
    /// The path (`I + O`) of the latest request, while requests keep extending it and forks
    /// above it need its tokens: each extension then costs its new tokens, not the path.
    path_cache: Option<(u32, Vec<u32>)>,
}

impl Execution {
    /// An empty execution first seen at `at`.
    pub fn new(id: String, at: LineRef) -> Self {
        Execution {
            id,
            info: None,
            requests: Vec::new(),
            assessments: Vec::new(),
            closure: None,
            tree: Tree::default(),
            first_seen: at,
            trained: Samples::default(),
            ids: HashMap::new(),
            emitters: HashMap::new(),
            path_cache: None,
        }
    }

    /// Start time (0 without an `execution` record).
    pub fn start(&self) -> f64 {
        self.info.as_ref().map_or(0.0, |i| i.t)
    }

    /// Budget in seconds (`None` = unlimited).
    pub fn budget(&self) -> Option<f64> {
        self.info.as_ref().and_then(|i| i.budget_s)
    }

    /// GRPO group id.
    pub fn group(&self) -> Option<&Value> {
        self.info.as_ref().and_then(|i| i.group.as_ref())
    }

    /// Index of request `id`.
    pub fn request_index(&self, id: &str) -> Option<u32> {
        self.ids.get(id).copied()
    }

    /// Where the record `record` would clash with one already applied: the request that
    /// already uses its id, or the closure already recorded (for messages that name both).
    pub fn clash(&self, record: &Record) -> Option<LineRef> {
        match record {
            Record::Request(r) => self
                .request_index(&r.id)
                .map(|i| self.requests[i as usize].at),
            Record::Closure(_) => self.closure.as_ref().map(|c| c.at),
            _ => None,
        }
    }

    /// Applies one record of this execution, in file order.
    pub fn apply(&mut self, record: Record, at: LineRef) -> Result<(), LineError> {
        self.apply_reusing(record, at, &mut Vec::new())
    }

    /// [`Execution::apply`], handing a request's `input` array back in `spent` once its tokens
    /// are in the tree (the loader reads later inputs into these allocations).
    pub fn apply_reusing(
        &mut self,
        record: Record,
        at: LineRef,
        spent: &mut Vec<Vec<u32>>,
    ) -> Result<(), LineError> {
        match record {
            Record::Request(r) => self.add_request(*r, at, spent),
            Record::Assessment(record) => {
                grow_gently(&mut self.assessments);
                self.assessments.push(Assessment {
                    record: *record,
                    at,
                });
                Ok(())
            }
            Record::Closure(record) => {
                if self.closure.is_some() {
                    return Err(LineError {
                        message: format!("execution \"{}\" already has a closure", self.id),
                        field: Some("kind".into()),
                    });
                }
                self.closure = Some(Box::new(Closure {
                    record: *record,
                    at,
                }));
                Ok(())
            }
            Record::Execution(info) => {
                if self.info.is_some() {
                    return Err(LineError {
                        message: format!("execution \"{}\" is declared twice", self.id),
                        field: Some("execution".into()),
                    });
                }
                self.info = Some(info);
                Ok(())
            }
            Record::Trained(record) => {
                let (requests, ids) = (&self.requests, &self.ids);
                self.trained.add(&self.id, *record, at, |id| {
                    let idx = *ids.get(id)?;
                    let r = &requests[idx as usize];
                    Some((idx, r.input_len as u64 + r.output_len as u64))
                })
            }
            Record::Header(_) | Record::Unknown(_) => Ok(()),
        }
    }

    /// Full input of request `idx`: its root-to-output path minus the output.
    pub fn full_input(&self, idx: u32) -> Vec<u32> {
        let r = &self.requests[idx as usize];
        let mut path = self.path_tokens(idx);
        path.truncate(r.input_len as usize);
        path
    }

    /// Tokens of request `idx`'s path `I + O`, rebuilt from the tree.
    pub fn path_tokens(&self, idx: u32) -> Vec<u32> {
        let r = &self.requests[idx as usize];
        let mut out = Vec::with_capacity((r.input_len + r.output_len) as usize);
        for n in self.tree.path_nodes(r.output_node) {
            out.extend_from_slice(self.tree.node_tokens(n));
        }
        out
    }

    /// The node whose end is the end of request `e`'s path.
    fn continuation_node(&self, e: u32) -> NodeId {
        let r = &self.requests[e as usize];
        // Nothing ever matches into an empty output node; its parent ends the same path.
        if r.output_len == 0 {
            self.tree.nodes[r.output_node as usize].parent
        } else {
            r.output_node
        }
    }

    /// Releases memory only needed while records are still being added.
    pub fn finish_loading(&mut self) {
        self.path_cache = None;
        self.compact();
    }

    /// Gives back spare room after a batch of records was applied: the token arena when it is
    /// mostly empty (the tree reserves room for a thousand tokens at once, which a one-request
    /// execution never uses; arenas that grew past that keep their gentle growth margin), and
    /// the room vectors grown by push keep for four or more elements (a `Request` is a few
    /// hundred bytes: with 300,000 one-request executions that room outweighed the records).
    pub fn compact(&mut self) {
        let tokens = &mut self.tree.tokens;
        if tokens.capacity() > 2 * tokens.len() + 64 {
            tokens.shrink_to_fit();
        }
        if self.requests.len() < 16 {
            self.requests.shrink_to_fit();
            self.tree.shrink_to_fit();
        }
        self.assessments.shrink_to_fit();
    }

    fn add_request(
        &mut self,
        r: RequestRecord,
        at: LineRef,
        spent: &mut Vec<Vec<u32>>,
    ) -> Result<(), LineError> {
        if self.ids.contains_key(&r.id) {
            return Err(LineError {
                message: format!(
                    "request id \"{}\" is already used in execution \"{}\"",
                    r.id, self.id
                ),
                field: Some("id".into()),
            });
        }
        let idx = self.requests.len() as u32;
        let extends = match &r.extends {
            None => None,
            Some(e) => Some(self.ids.get(e).copied().ok_or_else(|| LineError {
                message: format!(
                    "extends names \"{e}\", which is not an earlier request of execution \"{}\"",
                    self.id
                ),
                field: Some("extends".into()),
            })?),
        };
        let encoded_len = r.input.len() as u32;
        // Emitters of the call ids this record's own tool spans name.
        let mut call_emitters: Vec<u32> = Vec::new();
        for s in &r.spans {
            if let (Source::Tool, Some(id)) = (s.source, &s.call_id) {
                for &e in self.emitters.get(id).into_iter().flatten() {
                    if !call_emitters.contains(&e) {
                        call_emitters.push(e);
                    }
                }
            }
        }
        // A delta record continues from the end of the request it extends: matching from the
        // root would walk down that path anyway, and only forks along it can lead elsewhere.
        let cache = self.path_cache.take();
        let (base, inserted, cache) = match extends {
            Some(e) => {
                let from = self.continuation_node(e);
                let base = self.tree.depth_tokens(from) as u32;
                let cached = cache.filter(|(q, _)| *q == e).map(|(_, path)| path);
                let needs_prefix = self.tree.needs_prefix(from);
                let prefix = if needs_prefix {
                    Some(cached.unwrap_or_else(|| self.path_tokens(e)))
                } else {
                    cached
                };
                let above = match &prefix {
                    Some(p) if needs_prefix => p.as_slice(),
                    _ => &[],
                };
                let requests = &self.requests;
                let inserted = self.tree.insert(idx, from, above, &r.input, &r.output, || {
                    // Side branches can tie with this path above its end: every call id of the
                    // chain counts there, as in the equivalent full-form record.
                    let mut all = if needs_prefix {
                        chain_emitters(requests, e)
                    } else {
                        Vec::new()
                    };
                    for c in &call_emitters {
                        if !all.contains(c) {
                            all.push(*c);
                        }
                    }
                    output_nodes(requests, &all)
                });
                // The path of this request is the next one's prefix when it is extended in turn.
                let cache = prefix.map(|mut path| {
                    path.extend_from_slice(&r.input);
                    path.extend_from_slice(&r.output);
                    (idx, path)
                });
                (base, inserted, cache)
            }
            None => {
                let requests = &self.requests;
                let inserted = self.tree.insert(idx, ROOT, &[], &r.input, &r.output, || {
                    output_nodes(requests, &call_emitters)
                });
                (0, inserted, None)
            }
        };
        self.path_cache = cache;
        let input_len = base + encoded_len;
        // Keep only the spans over context this request brought in: full-form records repeat
        // the spans of the whole conversation, which would otherwise grow memory quadratically.
        let matched = inserted.matched as u32;
        let mut spans_start = base;
        let mut spans: Vec<Span> = Vec::new();
        for s in r.spans {
            let end = s.end + base;
            if end <= matched {
                spans_start = end;
                continue;
            }
            spans.push(Span { end, ..s });
        }
        for call in &r.tool_calls {
            self.emitters
                .entry(call.id.as_str().into())
                .or_default()
                .push(idx);
        }
        self.ids.insert(r.id.clone(), idx);
        grow_gently(&mut self.requests);
        self.requests.push(Request {
            id: r.id,
            agent: r.agent,
            purpose: r.purpose,
            actor: r.actor,
            input_len,
            output_len: r.output.len() as u32,
            output_node: inserted.output,
            matched: inserted.matched as u32,
            logprobs: r.logprobs.map(Logprobs::new),
            spans,
            call_emitters,
            extends,
            tool_calls: r.tool_calls,
            finish: r.finish,
            t: r.t,
            model: r.model,
            meta: r.meta,
            after_closure: self.closure.is_some(),
            not_trainable: r.not_trainable.map(String::into_boxed_str),
            at,
            encoded_len,
            spans_start,
        });
        spent.push(r.input);
        Ok(())
    }

    /// Identity of token `i` of node `n` (docs/format.md §2): an output token or a context token.
    pub fn identity(&self, n: NodeId, i: u32) -> TokenIdentity {
        let node = &self.tree.nodes[n as usize];
        let offset = node.offset + i;
        match node.kind {
            NodeKind::Output => TokenIdentity::Output {
                request: node.owner,
                offset,
            },
            NodeKind::Context | NodeKind::Root => TokenIdentity::Context {
                request: node.owner,
                offset,
                source: self.requests[node.owner as usize].source_at(offset),
            },
        }
    }
}

/// Makes room for one more element, growing by half rather than doubling (and from one, not
/// four): most executions hold a handful of requests and assessments, and a 344-byte request
/// slot left empty in each of 300,000 executions is 100 MB.
fn grow_gently<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(v.len() / 2 + 1);
    }
}

/// Requests that emitted a call id named along the `extends` chain ending at `e` (`e`
/// included), oldest first.
fn chain_emitters(requests: &[Request], e: u32) -> Vec<u32> {
    let mut chain = Vec::new();
    let mut cur = Some(e);
    while let Some(c) = cur {
        chain.push(c);
        cur = requests[c as usize].extends;
    }
    let mut out: Vec<u32> = Vec::new();
    for &c in chain.iter().rev() {
        for &em in &requests[c as usize].call_emitters {
            if !out.contains(&em) {
                out.push(em);
            }
        }
    }
    out
}

/// The output nodes of requests `list`.
fn output_nodes(requests: &[Request], list: &[u32]) -> Vec<NodeId> {
    list.iter()
        .map(|&e| requests[e as usize].output_node)
        .collect()
}

/// Who a token is (docs/format.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenIdentity {
    /// Output token `offset` of request `request` (index).
    Output {
        /// Request index.
        request: u32,
        /// Offset in the output.
        offset: u32,
    },
    /// Context token first seen as full-input token `offset` of request `request`.
    Context {
        /// Request index.
        request: u32,
        /// Offset in that request's full input.
        offset: u32,
        /// Span source it was first seen with.
        source: Source,
    },
}
