//! `gyre audit TRAINED --against RECORDING`: every trained sample matched, by token ids, to the
//! recorded request it came from, and compared with it token by token: ids that differ
//! (retokenisation drift: `retokenized`), behaviour log-probs that differ from what the server
//! returned (`behaviour_mismatch`), and recorded policy outputs the trainer never saw
//! (`sampled_not_trained`), each said to be against the recording.
//!
//! **Matching.** A trainer's dump has its own execution ids, so a sample is matched by its
//! tokens. Every recorded policy output is indexed by its first [`ANCHOR`] ids. A sample's
//! mask-on runs are looked up from its last one back: the first run that starts with a recorded
//! output (the whole output, or as much of it as the sample holds) names the recorded request
//! `R`; among several, the one whose input is as long as the sample's tokens before the run, then
//! the first recorded. When no run start does, every response position is tried, last first. The
//! sample is then aligned with `R`'s path (input + output): equal stretches are walked in step;
//! at a difference, both sides re-synchronise at the nearest common [`ANCHOR`]-gram (the least
//! tokens skipped on both sides together); what lies between is the drift.

use std::collections::{HashMap, HashSet};

use rayon::prelude::*;
use serde::Serialize;

use super::finding::{Finding, Kind, ids_text};
use crate::execution::Execution;
use crate::load::Batch;
use crate::report::plural;
use gyre_format::trained::TrainedRecord;

/// Ids that index a recorded output, and that re-synchronise an alignment.
pub const ANCHOR: usize = 8;

/// How far apart the dump's behaviour log-prob and the server's may be and still agree: float32
/// against a rounded log, and a bf16 copy (8 significant bits).
pub fn tolerance(recorded: f64) -> f64 {
    1e-3 + recorded.abs() / 256.0
}

/// What the comparison with the recording counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AgainstSummary {
    /// Executions of the recording with a policy output.
    pub recorded_executions: u64,
    /// Of those, the ones some sample was matched to.
    pub matched_executions: u64,
    /// Trained samples.
    pub samples: u64,
    /// Samples matched to a recorded request.
    pub matched_samples: u64,
    /// Sample tokens equal to their recorded request's path, in step.
    pub aligned_tokens: u64,
    /// Sample tokens inside a stretch that differs from the recording (drift).
    pub drifted_tokens: u64,
    /// Aligned tokens whose behaviour log-prob was compared with the server's.
    pub behaviour_compared: u64,
    /// Of those, the ones that differ beyond [`tolerance`].
    pub behaviour_mismatched: u64,
    /// Policy output tokens of the matched recorded executions.
    pub recorded_output_tokens: u64,
    /// Of those, the ones no sample holds.
    pub unseen_output_tokens: u64,
    /// Policy output tokens of recorded executions no sample was matched to.
    pub unmatched_output_tokens: u64,
}

/// The comparison's findings (on the trained batch's executions and samples), its counts and
/// its notes.
#[derive(Clone, Debug, Default)]
pub struct Against {
    /// The counts.
    pub summary: AgainstSummary,
    /// Findings, unsorted.
    pub findings: Vec<Finding>,
    /// What could not be matched, said once.
    pub notes: Vec<String>,
}

/// A run of a path: `len` tokens from path position `at`, tree keys from `key` (the node's
/// first token in the tree's arena, as the layout keys them).
#[derive(Clone, Copy, Debug)]
struct Segment {
    at: u32,
    len: u32,
    key: u32,
}

/// The tokens of request `r`'s path and its segments.
fn path_of(exec: &Execution, r: u32) -> (Vec<u32>, Vec<Segment>) {
    let req = &exec.requests[r as usize];
    let mut tokens = Vec::with_capacity((req.input_len + req.output_len) as usize);
    let mut segments = Vec::new();
    for n in exec.tree.path_nodes(req.output_node) {
        let node = &exec.tree.nodes[n as usize];
        segments.push(Segment {
            at: tokens.len() as u32,
            len: node.len,
            key: node.start,
        });
        tokens.extend_from_slice(exec.tree.node_tokens(n));
    }
    (tokens, segments)
}

fn hash(ids: &[u32]) -> u64 {
    ids.iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, &t| {
        (h ^ u64::from(t)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A recorded policy output: its ids and their tree keys.
struct Output {
    execution: u32,
    request: u32,
    tokens: Vec<u32>,
    keys: Vec<u32>,
}

/// Where recorded outputs lie on their execution's tree: `(key, output, offset)`, sorted. Two
/// requests that sampled the same tokens from the same context share keys.
type AtKey = Vec<(u32, u32, u32)>;

/// The recording's policy outputs, indexed by their first ids and by tree key.
struct Index<'a> {
    recording: &'a Batch,
    outputs: Vec<Output>,
    /// Hash of the first `min(ANCHOR, len)` ids → indexes into `outputs`.
    by_start: HashMap<u64, Vec<u32>>,
    /// Per execution of the recording.
    at_key: Vec<AtKey>,
}

impl<'a> Index<'a> {
    fn of(recording: &'a Batch, recorded: &[bool]) -> Index<'a> {
        let outputs: Vec<Output> = recording
            .executions
            .par_iter()
            .enumerate()
            .filter(|(e, _)| recorded[*e])
            .flat_map_iter(|(e, exec)| {
                exec.requests
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.trainable() && r.output_len > 0)
                    .map(move |(r, req)| {
                        let (path, segments) = path_of(exec, r as u32);
                        let from = req.input_len;
                        let keys = segments
                            .iter()
                            .filter(|g| g.at + g.len > from)
                            .flat_map(|g| {
                                let skip = from.saturating_sub(g.at);
                                g.key + skip..g.key + g.len
                            })
                            .collect();
                        Output {
                            execution: e as u32,
                            request: r as u32,
                            tokens: path[from as usize..].to_vec(),
                            keys,
                        }
                    })
            })
            .collect();
        let mut by_start: HashMap<u64, Vec<u32>> = HashMap::new();
        let mut at_key: Vec<AtKey> = vec![Vec::new(); recording.executions.len()];
        for (k, o) in outputs.iter().enumerate() {
            let n = o.tokens.len().min(ANCHOR);
            by_start
                .entry(hash(&o.tokens[..n]))
                .or_default()
                .push(k as u32);
            let at = &mut at_key[o.execution as usize];
            at.extend(
                o.keys
                    .iter()
                    .enumerate()
                    .map(|(j, &key)| (key, k as u32, j as u32)),
            );
        }
        at_key.par_iter_mut().for_each(|a| a.sort_unstable());
        Index {
            recording,
            outputs,
            by_start,
            at_key,
        }
    }

    /// The recorded output sample `ids` (record `rec`) holds from position `p`: among the
    /// candidates, one held whole, then one whose log-probs the sample's behaviour log-probs
    /// agree with on the most tokens (a retry that sampled the same tokens is told apart by
    /// them), then one no earlier sample of the execution was matched to (identical twins go
    /// one to each sample), then one whose input is as long as `p`, then the first recorded.
    fn at(
        &self,
        rec: &TrainedRecord,
        ids: &[u32],
        p: usize,
        claimed: &HashSet<u32>,
    ) -> Option<u32> {
        let recording = self.recording;
        let rest = &ids[p..];
        let dump = |q: usize| {
            q.checked_sub(rec.prompt_len as usize)
                .and_then(|j| rec.behaviour_logprobs.as_ref()?.get(j).copied().flatten())
        };
        type Score = (bool, usize, bool, std::cmp::Reverse<u64>);
        let mut best: Option<(Score, u32)> = None;
        for n in (1..=ANCHOR.min(rest.len())).rev() {
            let Some(cands) = self.by_start.get(&hash(&rest[..n])) else {
                continue;
            };
            for &k in cands {
                let o = &self.outputs[k as usize];
                let held = o.tokens.len().min(rest.len());
                if o.tokens.len().min(ANCHOR) != n || o.tokens[..held] != rest[..held] {
                    continue;
                }
                let req = &recording.executions[o.execution as usize].requests[o.request as usize];
                let agree = (0..held)
                    .filter(|&j| match (dump(p + j), req.logprob(j as u32)) {
                        (Some(d), Some(v)) => (d - v).abs() <= tolerance(v),
                        _ => false,
                    })
                    .count();
                let off = (i64::from(req.input_len) - p as i64).unsigned_abs();
                let score = (
                    held == o.tokens.len(),
                    agree,
                    !claimed.contains(&k),
                    std::cmp::Reverse(off),
                );
                if best.is_none_or(|(b, _)| score > b) {
                    best = Some((score, k));
                }
            }
            if best.is_some() {
                break;
            }
        }
        best.map(|(_, k)| k)
    }

    /// The entries of recorded execution `x` whose keys lie in `from..to`.
    fn entries(&self, x: u32, from: u32, to: u32) -> &[(u32, u32, u32)] {
        let at = &self.at_key[x as usize];
        let a = at.partition_point(|e| e.0 < from);
        let b = a + at[a..].partition_point(|e| e.0 < to);
        &at[a..b]
    }
}

/// One stretch of an alignment: `a` sample tokens from `i` against `b` path tokens from `j`,
/// equal (`equal`, then `a == b`) or differing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stretch {
    /// First sample position.
    pub i: u32,
    /// Sample tokens.
    pub a: u32,
    /// First path position.
    pub j: u32,
    /// Path tokens.
    pub b: u32,
    /// Whether the two sides are equal.
    pub equal: bool,
}

/// Aligns `s` (a sample) with `p` (a recorded path); see the module's documentation. The
/// stretches cover both sequences in order.
pub fn align(s: &[u32], p: &[u32]) -> Vec<Stretch> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0usize, 0usize);
    // The path's ANCHOR-grams → their positions (ascending), built at the first difference.
    let mut grams: Option<HashMap<u64, Vec<u32>>> = None;
    while i < s.len() && j < p.len() {
        let n = s[i..]
            .iter()
            .zip(&p[j..])
            .take_while(|(x, y)| x == y)
            .count();
        if n > 0 {
            out.push(Stretch {
                i: i as u32,
                a: n as u32,
                j: j as u32,
                b: n as u32,
                equal: true,
            });
            i += n;
            j += n;
            continue;
        }
        let grams = grams.get_or_insert_with(|| {
            let mut m: HashMap<u64, Vec<u32>> = HashMap::new();
            for (q, w) in p.windows(ANCHOR).enumerate() {
                m.entry(hash(w)).or_default().push(q as u32);
            }
            m
        });
        // The nearest re-synchronisation: least a + b with s[i+a..] and p[j+b..] sharing an
        // ANCHOR-gram.
        let mut best: Option<(usize, usize)> = None;
        let mut a = 1;
        while i + a + ANCHOR <= s.len() && best.is_none_or(|(ba, bb)| a < ba + bb) {
            let w = &s[i + a..i + a + ANCHOR];
            if let Some(qs) = grams.get(&hash(w)) {
                let from = qs.partition_point(|&q| (q as usize) < j);
                if let Some(&q) = qs[from..]
                    .iter()
                    .find(|&&q| &p[q as usize..q as usize + ANCHOR] == w)
                {
                    let b = q as usize - j;
                    if best.is_none_or(|(ba, bb)| a + b < ba + bb) {
                        best = Some((a, b));
                    }
                }
            }
            a += 1;
        }
        // Also a re-synchronisation that skips path tokens only.
        if let Some(qs) = (i + ANCHOR <= s.len())
            .then(|| grams.get(&hash(&s[i..i + ANCHOR])))
            .flatten()
        {
            let from = qs.partition_point(|&q| (q as usize) <= j);
            if let Some(&q) = qs[from..]
                .iter()
                .find(|&&q| p[q as usize..q as usize + ANCHOR] == s[i..i + ANCHOR])
            {
                let b = q as usize - j;
                if best.is_none_or(|(ba, bb)| b < ba + bb) {
                    best = Some((0, b));
                }
            }
        }
        // No common gram ahead: the two may still end alike (a difference near the end).
        let (a, b) = best.unwrap_or_else(|| {
            let tail = s[i..]
                .iter()
                .rev()
                .zip(p[j..].iter().rev())
                .take_while(|(x, y)| x == y)
                .count();
            (s.len() - i - tail, p.len() - j - tail)
        });
        out.push(Stretch {
            i: i as u32,
            a: a as u32,
            j: j as u32,
            b: b as u32,
            equal: false,
        });
        i += a;
        j += b;
    }
    if i < s.len() || j < p.len() {
        out.push(Stretch {
            i: i as u32,
            a: (s.len() - i) as u32,
            j: j as u32,
            b: (p.len() - j) as u32,
            equal: false,
        });
    }
    out
}

/// What one trained sample gave.
#[derive(Default)]
struct SampleResult {
    findings: Vec<Finding>,
    /// Tree keys of the recorded execution the sample holds (aligned or rewritten):
    /// `(from, to)`.
    seen: Vec<(u32, u32)>,
    /// The recorded execution it was matched to.
    matched: Option<u32>,
    aligned: u64,
    drifted: u64,
    compared: u64,
    mismatched: u64,
}

/// Compares every sample of `trained` with `recording`. `recorded[e]` says which executions of
/// `recording` are the recording's (all of them when it was loaded alone; with gyre's own rows
/// read beside their recording, the two are one batch).
pub fn against(trained: &Batch, recording: &Batch, recorded: &[bool]) -> Against {
    let index = Index::of(recording, recorded);
    let per_exec: Vec<Vec<SampleResult>> = trained
        .executions
        .par_iter()
        .enumerate()
        .map(|(e, exec)| {
            let mut claimed = HashSet::new();
            (0..exec.trained.list.len())
                .map(|s| sample(&index, exec, e as u32, s as u32, &mut claimed))
                .collect()
        })
        .collect();
    let mut out = Against::default();
    let sm = &mut out.summary;
    // Per recorded output: which of its tokens some sample holds.
    let mut covered: Vec<Vec<bool>> = index
        .outputs
        .iter()
        .map(|o| vec![false; o.tokens.len()])
        .collect();
    // Per recorded execution: the trained execution first matched to it.
    let mut first_match: HashMap<u32, u32> = HashMap::new();
    let mut unmatched_samples = 0u64;
    for (e, results) in per_exec.into_iter().enumerate() {
        for r in results {
            sm.samples += 1;
            sm.aligned_tokens += r.aligned;
            sm.drifted_tokens += r.drifted;
            sm.behaviour_compared += r.compared;
            sm.behaviour_mismatched += r.mismatched;
            let Some(x) = r.matched else {
                unmatched_samples += 1;
                continue;
            };
            sm.matched_samples += 1;
            first_match.entry(x).or_insert(e as u32);
            for (from, to) in r.seen {
                for &(_, o, j) in index.entries(x, from, to) {
                    covered[o as usize][j as usize] = true;
                }
            }
            out.findings.extend(r.findings);
        }
    }
    let same = std::ptr::eq(trained, recording);
    let mut unmatched_executions = HashSet::new();
    let mut recorded_executions = HashSet::new();
    for (o, cov) in index.outputs.iter().zip(&covered) {
        recorded_executions.insert(o.execution);
        let len = o.tokens.len() as u64;
        let Some(&te) = first_match.get(&o.execution) else {
            sm.unmatched_output_tokens += len;
            unmatched_executions.insert(o.execution);
            continue;
        };
        sm.recorded_output_tokens += len;
        let rexec = &recording.executions[o.execution as usize];
        let req = &rexec.requests[o.request as usize];
        let unseen = super::finding::runs(cov.len(), |j| (!cov[j]).then_some(()));
        for (from, to, ()) in unseen {
            sm.unseen_output_tokens += u64::from(to - from);
            let start = req.input_len + from;
            let mut f = Finding::new(Kind::SampledNotTrained, te, None, start, req.input_len + to);
            f.detail = format!(
                "against the recording: {} of recorded request {} (execution {}, output offsets \
                 {from}..{to}) in no sample: the trainer never saw them",
                plural((to - from) as usize, "output token"),
                req.id,
                rexec.id,
            );
            if same && te == o.execution {
                f.request = Some(o.request);
            }
            out.findings.push(f);
        }
    }
    sm.recorded_executions = recorded_executions.len() as u64;
    sm.matched_executions = sm.recorded_executions - unmatched_executions.len() as u64;
    if unmatched_samples > 0 {
        out.notes.push(format!(
            "against the recording: {} match no recorded request (no mask-on run starts with a \
             recorded output)",
            plural(unmatched_samples as usize, "sample")
        ));
    }
    if !unmatched_executions.is_empty() {
        out.notes.push(format!(
            "against the recording: {} ({}) match no trained sample",
            plural(unmatched_executions.len(), "recorded execution"),
            plural(sm.unmatched_output_tokens as usize, "policy output token")
        ));
    }
    out
}

/// Sample `s` of trained execution `exec` (index `e`) against the recording.
/// `claimed`: the recorded outputs earlier samples of the execution were matched to.
fn sample(
    index: &Index,
    exec: &Execution,
    e: u32,
    s: u32,
    claimed: &mut HashSet<u32>,
) -> SampleResult {
    let mut res = SampleResult::default();
    let rec = &exec.trained.list[s as usize].record;
    let ids = exec.sample_tokens(&exec.trained.list[s as usize]);
    let p0 = rec.prompt_len as usize;
    let mask_on = |p: usize| p >= p0 && rec.loss_mask[p - p0] == 1;
    // Mask-on run starts, last first; then every position, last first (a mask that starts
    // on a tool result, or inside an output whose start an earlier sample trained).
    let starts = (p0..ids.len())
        .rev()
        .filter(|&p| mask_on(p) && (p == p0 || !mask_on(p - 1)));
    let Some(k) = starts
        .chain((0..ids.len()).rev())
        .find_map(|p| index.at(rec, &ids, p, claimed))
    else {
        return res;
    };
    claimed.insert(k);
    let out = &index.outputs[k as usize];
    res.matched = Some(out.execution);
    let rexec = &index.recording.executions[out.execution as usize];
    let request = extend(rexec, out.request, rec, &ids, &mask_on);
    let (path, segments) = path_of(rexec, request);
    let stretches = align(&ids, &path);
    let last = stretches.len().saturating_sub(1);
    for (n, st) in stretches.iter().enumerate() {
        if st.equal {
            res.aligned += u64::from(st.a);
            compare(
                index,
                rexec,
                out.execution,
                &segments,
                rec,
                st,
                (e, s),
                &mut res,
            );
            continue;
        }
        // The sample going on past the recorded path (a turn end the trainer appended) or
        // ending inside it (a cap) rewrites nothing the policy saw.
        if n == last && (st.b == 0 || st.a == 0) {
            continue;
        }
        res.drifted += u64::from(st.a);
        // The trainer saw these recorded tokens, rewritten: the drift says so, not
        // `sampled_not_trained`.
        res.seen.extend(keys(&segments, st.j, st.b));
        let end = (st.i + st.a.max(1)).min(ids.len() as u32);
        let mut f = Finding::new(
            Kind::Retokenized,
            e,
            Some(s),
            st.i.min(end.saturating_sub(1)),
            end,
        );
        f.value = Some(f64::from(st.i));
        f.detail = format!(
            "against the recording: ids differ from recorded request {} (execution {}) at \
             position {} of its path: sample {} vs recorded {}",
            rexec.requests[request as usize].id,
            rexec.id,
            st.j,
            ids_text(&ids[st.i as usize..(st.i + st.a) as usize]),
            ids_text(&path[st.j as usize..(st.j + st.b) as usize]),
        );
        res.findings.push(f);
    }
    res
}

/// The request whose path the sample follows: `anchor`'s, unless the sample goes on past it with
/// mask-on tokens (its last outputs did not anchor: they differ from the recording). Then, among
/// the requests whose path goes through `anchor`'s output, the one sharing the longest prefix
/// with the sample, then agreeing with the most of its behaviour log-probs, then as long as it.
fn extend(
    rexec: &Execution,
    anchor: u32,
    rec: &TrainedRecord,
    ids: &[u32],
    mask_on: &dyn Fn(usize) -> bool,
) -> u32 {
    let a = &rexec.requests[anchor as usize];
    let end = (a.input_len + a.output_len) as usize;
    if !(end..ids.len()).any(mask_on) {
        return anchor;
    }
    let dump = |q: usize| {
        q.checked_sub(rec.prompt_len as usize)
            .and_then(|j| rec.behaviour_logprobs.as_ref()?.get(j).copied().flatten())
    };
    let mut best = (end, 0usize, std::cmp::Reverse(usize::MAX), anchor);
    for (q, req) in rexec.requests.iter().enumerate() {
        let len = (req.input_len + req.output_len) as usize;
        if len <= end
            || !rexec
                .tree
                .is_ancestor_or_self(a.output_node, req.output_node)
        {
            continue;
        }
        let (path, _) = path_of(rexec, q as u32);
        let prefix = path.iter().zip(ids).take_while(|(x, y)| x == y).count();
        let agree = (req.input_len as usize..prefix)
            .filter(
                |&p| match (dump(p), req.logprob((p - req.input_len as usize) as u32)) {
                    (Some(d), Some(v)) => (d - v).abs() <= tolerance(v),
                    _ => false,
                },
            )
            .count();
        let score = (
            prefix,
            agree,
            std::cmp::Reverse(len.abs_diff(ids.len())),
            q as u32,
        );
        if (score.0, score.1, score.2) > (best.0, best.1, best.2) {
            best = score;
        }
    }
    best.3
}

/// The tree-key ranges of path positions `j..j + b`.
fn keys(segments: &[Segment], j: u32, b: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
    let first = segments.partition_point(|g| g.at + g.len <= j);
    segments[first..]
        .iter()
        .take_while(move |g| g.at < j + b)
        .filter_map(move |g| {
            let (from, to) = (g.at.max(j), (g.at + g.len).min(j + b));
            (from < to).then(|| (g.key + (from - g.at), g.key + (to - g.at)))
        })
}

/// An equal stretch: the recorded output tokens it holds, and the dump's behaviour log-probs
/// compared with the server's (one `behaviour_mismatch` finding per run of consecutive tokens
/// that agree with no request that sampled them).
#[allow(clippy::too_many_arguments)]
fn compare(
    index: &Index,
    rexec: &Execution,
    x: u32,
    segments: &[Segment],
    rec: &TrainedRecord,
    st: &Stretch,
    (e, s): (u32, u32),
    res: &mut SampleResult,
) {
    let p0 = rec.prompt_len;
    let dump_lps = rec.behaviour_logprobs.as_deref();
    // (start, end, dump, server) of the open run.
    let mut open: Option<(u32, u32, f64, f64)> = None;
    let flush = |open: &mut Option<(u32, u32, f64, f64)>, res: &mut SampleResult| {
        if let Some((a, b, dump, server)) = open.take() {
            let mut f = Finding::new(Kind::BehaviourMismatch, e, Some(s), a, b);
            f.value = Some((dump - server).abs());
            f.detail = format!(
                "against the recording: the dump's behaviour log-prob differs from the server's \
                 on {} (first: {dump:.4} vs {server:.4})",
                plural((b - a) as usize, "token")
            );
            res.findings.push(f);
        }
    };
    for (from, to) in keys(segments, st.j, st.b) {
        res.seen.push((from, to));
        let entries = index.entries(x, from, to);
        let seg = segments.partition_point(|g| g.key + g.len <= from);
        let g = segments[seg.min(segments.len() - 1)];
        let mut k = 0;
        while k < entries.len() {
            let key = entries[k].0;
            let same = entries[k..].iter().take_while(|x| x.0 == key).count();
            let here = &entries[k..k + same];
            k += same;
            // The sample position of this key.
            let pos = st.i + (g.at + (key - g.key) - st.j);
            let dump = pos
                .checked_sub(p0)
                .and_then(|j| dump_lps?.get(j as usize).copied().flatten());
            let servers: Vec<f64> = here
                .iter()
                .filter_map(|&(_, o, j)| {
                    let out = &index.outputs[o as usize];
                    rexec.requests[out.request as usize].logprob(j)
                })
                .collect();
            let (Some(dump), Some(&server)) = (dump, servers.first()) else {
                flush(&mut open, res);
                continue;
            };
            res.compared += 1;
            if servers.iter().any(|&v| (dump - v).abs() <= tolerance(v)) {
                flush(&mut open, res);
                continue;
            }
            res.mismatched += 1;
            match open.as_mut() {
                Some((_, b, _, _)) if *b == pos => *b = pos + 1,
                _ => {
                    flush(&mut open, res);
                    open = Some((pos, pos + 1, dump, server));
                }
            }
        }
    }
    flush(&mut open, res);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stretches(s: &[u32], p: &[u32]) -> Vec<(u32, u32, u32, u32, bool)> {
        align(s, p)
            .iter()
            .map(|x| (x.i, x.a, x.j, x.b, x.equal))
            .collect()
    }

    #[test]
    fn equal_sequences_are_one_stretch() {
        let p: Vec<u32> = (0..40).collect();
        assert_eq!(stretches(&p, &p), vec![(0, 40, 0, 40, true)]);
    }

    #[test]
    fn a_rewritten_stretch_resynchronises_after_it() {
        let p: Vec<u32> = (0..60).collect();
        let mut s = p.clone();
        // Positions 20..23 rewritten as two tokens.
        s.splice(20..23, [900, 901]);
        assert_eq!(
            stretches(&s, &p),
            vec![
                (0, 20, 0, 20, true),
                (20, 2, 20, 3, false),
                (22, 37, 23, 37, true)
            ]
        );
    }

    #[test]
    fn inserted_and_dropped_tokens_are_stretches_of_one_side() {
        let p: Vec<u32> = (0..60).collect();
        let mut s = p.clone();
        s.splice(30..30, [700, 701, 702]);
        assert_eq!(
            stretches(&s, &p),
            vec![
                (0, 30, 0, 30, true),
                (30, 3, 30, 0, false),
                (33, 30, 30, 30, true)
            ]
        );
        let mut s = p.clone();
        s.drain(10..14);
        assert_eq!(
            stretches(&s, &p),
            vec![
                (0, 10, 0, 10, true),
                (10, 0, 10, 4, false),
                (10, 46, 14, 46, true)
            ]
        );
    }

    #[test]
    fn a_sample_going_past_or_ending_inside_the_path_leaves_a_trailing_stretch() {
        let p: Vec<u32> = (0..30).collect();
        let mut s = p.clone();
        s.extend([5000, 5001]);
        assert_eq!(
            stretches(&s, &p),
            vec![(0, 30, 0, 30, true), (30, 2, 30, 0, false)]
        );
        assert_eq!(
            stretches(&p[..25], &p),
            vec![(0, 25, 0, 25, true), (25, 0, 25, 5, false)]
        );
    }

    #[test]
    fn a_difference_near_the_end_keeps_the_equal_tail() {
        let p: Vec<u32> = (0..20).collect();
        let mut s = p.clone();
        s[17] = 900;
        assert_eq!(
            stretches(&s, &p),
            vec![
                (0, 17, 0, 17, true),
                (17, 1, 17, 1, false),
                (18, 2, 18, 2, true)
            ]
        );
    }

    #[test]
    fn tolerance_admits_bf16_rounding_and_not_a_real_difference() {
        assert!(0.02 <= tolerance(-8.0));
        assert!(0.05 > tolerance(-8.0));
        assert!(tolerance(0.0) >= 1e-3);
    }
}
