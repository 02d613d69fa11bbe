//! What the audit says of each token of an execution's tree: its verdict, the finding that
//! covers it and its trainer − behaviour gap, for the inspector's `audit` and `gap` colourings,
//! its why line and its jumps to findings. Read from the layout and the findings: nothing is
//! judged here that the kinds did not judge.

use gyre_format::record::Source;

use super::layout::Place;
use super::{Audit, Finding, Kind, Layout};
use crate::execution::Execution;
use crate::paint::{AuditTones, ColorMode, Tone, gap_bucket};

/// The audit's word on one tree token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// No sample holds it.
    InNoSample,
    /// Held by a sample with the mask off, and not policy-sampled: context, as it should be.
    Context,
    /// Policy-sampled, held with the mask off in every sample, and no finding: the recording
    /// says why (`not_trainable`, a placeholder).
    Untrained,
    /// Trained (mask on) in a sample, with no finding.
    Agreeing,
    /// `sampled_not_trained`.
    SampledNotTrained,
    /// `false_fork` or `retokenized`: where a sample parts from the tree's story.
    Forked,
    /// `trained_twice`.
    TrainedTwice,
    /// `trained_not_sampled`.
    TrainedNotSampled,
}

impl Verdict {
    /// The verdict a finding of `kind` gives the tokens it covers (`None`: the kind judges no
    /// token's verdict: the gap has its own colouring, the weight spread is per execution, and
    /// a behaviour mismatch compares the dump with a recording apart, `--against`).
    pub fn of_kind(kind: Kind) -> Option<Verdict> {
        match kind {
            Kind::TrainedNotSampled => Some(Verdict::TrainedNotSampled),
            Kind::SampledNotTrained => Some(Verdict::SampledNotTrained),
            Kind::TrainedTwice => Some(Verdict::TrainedTwice),
            Kind::FalseFork | Kind::Retokenized => Some(Verdict::Forked),
            Kind::LogprobGap | Kind::WeightSpread | Kind::BehaviourMismatch => None,
        }
    }

    /// Which of two verdicts on one token is said: a finding over none, then the one that
    /// costs the training more (a trained tool token over a duplicate over a fork over an
    /// untrained sample).
    fn rank(self) -> u8 {
        match self {
            Verdict::InNoSample | Verdict::Context | Verdict::Untrained | Verdict::Agreeing => 0,
            Verdict::SampledNotTrained => 1,
            Verdict::Forked => 2,
            Verdict::TrainedTwice => 3,
            Verdict::TrainedNotSampled => 4,
        }
    }

    /// In words, for the why line.
    pub fn said(self) -> &'static str {
        match self {
            Verdict::InNoSample => "in no sample",
            Verdict::Context => "context, not trained",
            Verdict::Untrained => "sampled, not trained (the recording says why)",
            Verdict::Agreeing => "trained, agreeing",
            Verdict::SampledNotTrained => "sampled, not trained",
            Verdict::Forked => "forked: a sample parts from the tree here",
            Verdict::TrainedTwice => "trained twice",
            Verdict::TrainedNotSampled => "trained, not sampled",
        }
    }

    /// Its tone in the `audit` colouring.
    pub fn tone(self) -> Tone {
        match self {
            Verdict::InNoSample => Tone::InNoSample,
            Verdict::Context => Tone::Context(Source::Context),
            Verdict::Untrained => Tone::Untrained,
            Verdict::Agreeing => Tone::Agreeing,
            Verdict::SampledNotTrained => Tone::SampledNotTrained,
            Verdict::Forked => Tone::Forked,
            Verdict::TrainedTwice => Tone::TrainedTwice,
            Verdict::TrainedNotSampled => Tone::TrainedNotSampled,
        }
    }
}

/// The audit's word on every tree token of one execution, by tree key (`node.start + index`).
#[derive(Clone, Debug, Default)]
pub struct TokenAudit {
    verdict: Vec<Verdict>,
    /// Trainer − behaviour log-prob; NaN where none.
    gap: Vec<f32>,
    /// 1 + the index into `Audit::findings` of the finding said of the token; 0 for none.
    finding: Vec<u32>,
    /// Samples holding the token with the mask on.
    trained: Vec<u16>,
}

impl TokenAudit {
    /// The verdicts of execution `index` (`exec`, laid out as `layout`) under `audit`.
    pub fn of(audit: &Audit, exec: &Execution, index: u32, layout: &Layout) -> TokenAudit {
        let n = layout.tree_len as usize;
        let mut held = vec![false; n];
        let mut trained = vec![0u16; n];
        let mut gap = vec![f32::NAN; n];
        for (s, sample) in layout.samples.iter().enumerate() {
            for (p, &k) in sample.keys.iter().enumerate() {
                let Some(at) = (k < layout.tree_len).then_some(k as usize) else {
                    continue;
                };
                held[at] = true;
                if !Layout::mask_on(exec, s, p) {
                    continue;
                }
                trained[at] = trained[at].saturating_add(1);
                // Several samples training one token: the widest gap is said.
                let d = Layout::trainer(exec, s, p)
                    .zip(layout.behaviour(exec, s, p))
                    .map(|(t, b)| t - b);
                if let Some(d) = d {
                    if gap[at].is_nan() || d.abs() > (gap[at] as f64).abs() {
                        gap[at] = d as f32;
                    }
                }
            }
        }
        let verdict = (0..n)
            .map(|k| {
                if trained[k] > 0 {
                    Verdict::Agreeing
                } else if !held[k] {
                    Verdict::InNoSample
                } else if layout.sampled(exec, k as u32) {
                    Verdict::Untrained
                } else {
                    Verdict::Context
                }
            })
            .collect();
        let mut t = TokenAudit {
            verdict,
            gap,
            finding: vec![0; n],
            trained,
        };
        let first = audit.findings.partition_point(|f| f.execution < index);
        let last = audit.findings.partition_point(|f| f.execution <= index);
        for (i, f) in audit.findings[first..last].iter().enumerate() {
            let v = Verdict::of_kind(f.kind);
            let said = (first + i) as u32 + 1;
            for k in keys_of(exec, layout, f) {
                let k = k as usize;
                match v.filter(|v| v.rank() > t.verdict[k].rank()) {
                    Some(v) => {
                        t.verdict[k] = v;
                        t.finding[k] = said;
                    }
                    None if t.finding[k] == 0 => t.finding[k] = said,
                    None => {}
                }
            }
        }
        t
    }

    /// The verdict on tree key `key`.
    pub fn verdict(&self, key: u32) -> Verdict {
        self.verdict
            .get(key as usize)
            .copied()
            .unwrap_or(Verdict::InNoSample)
    }

    /// Trainer − behaviour log-prob of tree key `key` (the widest over the samples training
    /// it), when a sample trains it with both.
    pub fn gap(&self, key: u32) -> Option<f64> {
        let g = *self.gap.get(key as usize)?;
        (!g.is_nan()).then_some(g as f64)
    }

    /// The index into `Audit::findings` of the finding said of tree key `key`.
    pub fn finding(&self, key: u32) -> Option<usize> {
        let i = *self.finding.get(key as usize)?;
        i.checked_sub(1).map(|i| i as usize)
    }

    /// How many samples train tree key `key`.
    pub fn trained(&self, key: u32) -> u16 {
        self.trained.get(key as usize).copied().unwrap_or(0)
    }
}

impl AuditTones for TokenAudit {
    fn tone(&self, key: u32, mode: ColorMode) -> Tone {
        match mode {
            ColorMode::Gap => self
                .gap(key)
                .map_or(Tone::NoGap, |d| Tone::Gap(gap_bucket(d))),
            _ => self.verdict(key).tone(),
        }
    }
}

/// The tree keys a finding covers: its range in its sample (tokens off the tree left out), or
/// in its request's path when no sample holds it.
fn keys_of(exec: &Execution, layout: &Layout, f: &Finding) -> Vec<u32> {
    let (start, end) = (f.start as usize, f.end as usize);
    match (f.sample, f.request) {
        (Some(s), _) => layout
            .samples
            .get(s as usize)
            .map(|sl| {
                let end = end.min(sl.keys.len());
                sl.keys[start.min(end)..end]
                    .iter()
                    .copied()
                    .filter(|&k| k < layout.tree_len)
                    .collect()
            })
            .unwrap_or_default(),
        (None, Some(r)) => path_keys(exec, r, start, end),
        (None, None) => Vec::new(),
    }
}

/// The tree keys of positions `start..end` of request `r`'s path.
fn path_keys(exec: &Execution, r: u32, start: usize, end: usize) -> Vec<u32> {
    let Some(req) = exec.requests.get(r as usize) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut pos = 0usize;
    for n in exec.tree.path_nodes(req.output_node) {
        let node = &exec.tree.nodes[n as usize];
        let len = node.len as usize;
        let (a, b) = (pos.max(start), (pos + len).min(end));
        out.extend((a..b).map(|p| node.start + (p - pos) as u32));
        pos += len;
        if pos >= end {
            break;
        }
    }
    out
}

/// Where position `p` of sample `s` lies on the tree: a request whose path holds it and the
/// position on that path. A position off the tree is shown at the last tree token before it
/// (where the sample left the tree); `None` when the sample has no tree token before it.
pub fn sample_position(exec: &Execution, layout: &Layout, s: u32, p: u32) -> Option<(u32, u64)> {
    let keys = &layout.samples.get(s as usize)?.keys;
    let p = (p as usize).min(keys.len().checked_sub(1)?);
    let k = keys[..=p]
        .iter()
        .rev()
        .copied()
        .find(|&k| k < layout.tree_len)?;
    let Place::Tree { node, index } = layout.place(exec, k) else {
        return None;
    };
    let n = &exec.tree.nodes[node as usize];
    Some((n.owner, exec.tree.depth_tokens(n.parent) + index as u64))
}

/// Where a finding starts on its execution's tree: a request whose path holds its first token
/// and the position on that path.
pub fn finding_position(exec: &Execution, layout: &Layout, f: &Finding) -> Option<(u32, u64)> {
    match (f.sample, f.request) {
        (Some(s), _) => sample_position(exec, layout, s, f.start),
        (None, Some(r)) => Some((r, f.start as u64)),
        (None, None) => None,
    }
}
