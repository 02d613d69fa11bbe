//! How a token looks, shared by `gyre show` and the inspector: a path laid out by position, and
//! each token's tone under a colour mode. Tones come from the engine's decisions (reasons,
//! claims, recorded log-probs); nothing is recomputed here, and nothing here knows a terminal.

use crate::admit::Admission;
use crate::execution::{Execution, TokenIdentity};
use crate::lens::ExecutionLens;
use crate::process::Results;
use crate::provenance::{Reason, token_reason};
use crate::score::Outcome;
use crate::tree::NodeId;
use gyre_format::record::{Actor, Source};

/// What colours the tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ColorMode {
    /// Where each token came from.
    #[default]
    Provenance,
    /// Claim state after admission (or at a replay step).
    Claims,
    /// Behaviour log-prob heat.
    Logprob,
    /// The lens: the share of seeds under which each policy token is a target (at the J_max
    /// and priority shown).
    Lens,
    /// Tokens that change sides between pinned settings and the settings shown.
    Flips,
    /// The audit's verdict on each token against the trainer's samples (`audit::verdict`).
    Audit,
    /// Trainer − behaviour log-prob of the tokens the samples train (a diverging scale).
    Gap,
}

impl ColorMode {
    /// Every mode, in toggle order.
    pub const ALL: [ColorMode; 7] = [
        ColorMode::Provenance,
        ColorMode::Claims,
        ColorMode::Logprob,
        ColorMode::Lens,
        ColorMode::Flips,
        ColorMode::Audit,
        ColorMode::Gap,
    ];

    /// Name on the command line and in the UI.
    pub fn name(self) -> &'static str {
        match self {
            ColorMode::Provenance => "provenance",
            ColorMode::Claims => "claims",
            ColorMode::Logprob => "logprob",
            ColorMode::Lens => "lens",
            ColorMode::Flips => "flips vs pin",
            ColorMode::Audit => "audit",
            ColorMode::Gap => "gap",
        }
    }

    /// The next mode (for a toggle key); `flips` only when there is something to compare with.
    pub fn next(self, flips: bool) -> ColorMode {
        self.next_of(|m| m != ColorMode::Flips || flips)
    }

    /// The next mode `shown` allows (the audit's only where there are trained samples); this
    /// one when no other is.
    pub fn next_of(self, shown: impl Fn(ColorMode) -> bool) -> ColorMode {
        let i = ColorMode::ALL.iter().position(|&m| m == self).unwrap_or(0);
        (1..=ColorMode::ALL.len())
            .map(|k| ColorMode::ALL[(i + k) % ColorMode::ALL.len()])
            .find(|&m| shown(m))
            .unwrap_or(self)
    }
}

/// The look of one token under a mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tone {
    /// Context from a span source.
    Context(Source),
    /// Policy output (trainable).
    Policy,
    /// Evaluator output.
    Evaluator,
    /// Output of a request after closure.
    AfterClosure,
    /// Policy output marked `not_trainable` (hidden thinking).
    NotTrainable,
    /// A target of the draw being shown.
    ThisDraw,
    /// Claimed by an earlier draw.
    Claimed,
    /// Trainable, not claimed (yet).
    Unclaimed,
    /// Trainable, left out (J_max or priority).
    LeftOut,
    /// Trainable, but the execution is excluded (or a dummy).
    Excluded,
    /// Log-prob heat, 0 (likely, p ≥ 0.9) to 4 (unlikely, p < 0.05).
    Heat(u8),
    /// Output token without a recorded log-prob.
    NoLogprob,
    /// Lens share of seeds under which the token is a target: 0 never, 1 below a third, 2 below
    /// two thirds, 3 short of all, 4 every seed.
    Lens(u8),
    /// Lens not computed yet.
    LensPending,
    /// A target under the settings shown, not under the pinned ones.
    Gained,
    /// A target under the pinned settings, not under those shown.
    Lost,
    /// A target under both.
    Kept,
    /// Trained (mask on) in a sample, with no finding: as it should be.
    Agreeing,
    /// Trained, but the policy did not sample it (`trained_not_sampled`).
    TrainedNotSampled,
    /// Sampled by the policy, trained by no sample (`sampled_not_trained`).
    SampledNotTrained,
    /// Trained in more than one sample (`trained_twice`).
    TrainedTwice,
    /// Where a sample parts from the tree's story: a false fork or a retokenised context.
    Forked,
    /// Sampled, in a sample with the mask off, and the recording says why (not a finding).
    Untrained,
    /// In no sample.
    InNoSample,
    /// Trainer − behaviour log-prob of a trained token: 0 (trainer far less likely, Δ ≤ −1)
    /// through 3 (|Δ| < 0.05) to 6 (trainer far more likely, Δ ≥ 1).
    Gap(u8),
    /// A token without a gap: not trained, or without a trainer or behaviour log-prob.
    NoGap,
    /// The audit is not there (yet, or the input holds no trained sample).
    AuditPending,
}

impl Tone {
    /// Claim-state tone of a token with this engine reason, at replay step `step`.
    pub fn of_reason(reason: &Reason, step: Option<u32>) -> Tone {
        match reason {
            Reason::Claimed { draw, .. } if step == Some(*draw) => Tone::ThisDraw,
            Reason::Claimed { .. } => Tone::Claimed,
            Reason::NotYetClaimed => Tone::Unclaimed,
            Reason::LeftOutJmax | Reason::LeftOutClass => Tone::LeftOut,
            Reason::Excluded(_) | Reason::Dummy => Tone::Excluded,
            Reason::EvaluatorOutput => Tone::Evaluator,
            Reason::AfterClosure => Tone::AfterClosure,
            Reason::NotTrainable(_) => Tone::NotTrainable,
            Reason::Context(_) => Tone::Context(Source::Context),
        }
    }

    /// Legend label.
    pub fn label(self) -> String {
        match self {
            Tone::Context(s) => s.name().to_string(),
            Tone::Policy => "policy".into(),
            Tone::Evaluator => "evaluator".into(),
            Tone::AfterClosure => "after closure".into(),
            Tone::NotTrainable => "not trainable".into(),
            Tone::ThisDraw => "target of this draw".into(),
            Tone::Claimed => "claimed".into(),
            Tone::Unclaimed => "unclaimed trainable".into(),
            Tone::LeftOut => "left out".into(),
            Tone::Excluded => "excluded execution".into(),
            Tone::Heat(b) => {
                ["p≥0.9", "p≥0.5", "p≥0.2", "p≥0.05", "p<0.05"][b.min(4) as usize].into()
            }
            Tone::NoLogprob => "no log-prob".into(),
            Tone::Lens(b) => {
                ["never", "<33%", "33–67%", "67–99%", "every seed"][b.min(4) as usize].into()
            }
            Tone::LensPending => "lens computing…".into(),
            Tone::Gained => "target now, not pinned".into(),
            Tone::Lost => "target pinned, not now".into(),
            Tone::Kept => "target under both".into(),
            Tone::Agreeing => "trained, agreeing".into(),
            Tone::TrainedNotSampled => "trained, not sampled".into(),
            Tone::SampledNotTrained => "sampled, not trained".into(),
            Tone::TrainedTwice => "trained twice".into(),
            Tone::Forked => "forked".into(),
            Tone::Untrained => "not trained (said why)".into(),
            Tone::InNoSample => "in no sample".into(),
            Tone::Gap(b) => [
                "Δ≤−1",
                "−1…−.3",
                "−.3…−.05",
                "|Δ|<.05",
                ".05….3",
                ".3…1",
                "Δ≥1",
            ][b.min(6) as usize]
                .into(),
            Tone::NoGap => "no Δ".into(),
            Tone::AuditPending => "no audit".into(),
        }
    }

    /// The tones a legend shows for a mode.
    pub fn legend(mode: ColorMode) -> Vec<Tone> {
        match mode {
            ColorMode::Provenance => {
                let mut v: Vec<Tone> = Source::ALL.iter().map(|&s| Tone::Context(s)).collect();
                v.extend([Tone::Policy, Tone::Evaluator, Tone::AfterClosure]);
                v
            }
            ColorMode::Claims => vec![
                Tone::ThisDraw,
                Tone::Claimed,
                Tone::Unclaimed,
                Tone::LeftOut,
                Tone::Excluded,
                Tone::Context(Source::Context),
            ],
            ColorMode::Logprob => {
                let mut v: Vec<Tone> = (0..5).map(Tone::Heat).collect();
                v.extend([Tone::NoLogprob, Tone::Context(Source::Context)]);
                v
            }
            ColorMode::Lens => {
                let mut v: Vec<Tone> = (0..5).map(Tone::Lens).collect();
                v.extend([Tone::Excluded, Tone::Context(Source::Context)]);
                v
            }
            ColorMode::Flips => vec![
                Tone::Gained,
                Tone::Lost,
                Tone::Kept,
                Tone::Unclaimed,
                Tone::Excluded,
                Tone::Context(Source::Context),
            ],
            ColorMode::Audit => vec![
                Tone::Agreeing,
                Tone::TrainedNotSampled,
                Tone::SampledNotTrained,
                Tone::TrainedTwice,
                Tone::Forked,
                Tone::Untrained,
                Tone::InNoSample,
                Tone::Context(Source::Context),
            ],
            ColorMode::Gap => {
                let mut v: Vec<Tone> = (0..7).map(Tone::Gap).collect();
                v.push(Tone::NoGap);
                v
            }
        }
    }
}

/// Gap bucket of trainer − behaviour log-prob `delta` (see [`Tone::Gap`]): symmetric
/// around 0, its outer edges at the audit's default bound of 1 nat.
pub fn gap_bucket(delta: f64) -> u8 {
    match delta {
        d if d <= -1.0 => 0,
        d if d <= -0.3 => 1,
        d if d <= -0.05 => 2,
        d if d < 0.05 => 3,
        d if d < 0.3 => 4,
        d if d < 1.0 => 5,
        _ => 6,
    }
}

/// The audit's tones of an execution's tree tokens, by tree key (`node.start + index`): the
/// audit implements it (`audit::verdict::TokenAudit`), so that the painter needs no audit.
pub trait AuditTones {
    /// The tone of tree key `key` under `mode` (`Audit` or `Gap`).
    fn tone(&self, key: u32, mode: ColorMode) -> Tone;
}

/// Lens bucket of a share of seeds (see [`Tone::Lens`]).
pub fn lens_bucket(f: f64) -> u8 {
    match f {
        f if f <= 0.0 => 0,
        f if f < 1.0 / 3.0 => 1,
        f if f < 2.0 / 3.0 => 2,
        f if f < 1.0 => 3,
        _ => 4,
    }
}

/// A request's root-to-output path, laid out by token position (tokens stay in the tree).
#[derive(Clone, Debug)]
pub struct PathView {
    /// The request whose path this is.
    pub request: u32,
    /// Path nodes in order, with the position of their first token.
    pub segments: Vec<(NodeId, u64)>,
    /// Number of tokens (`|I| + |O|`).
    pub len: u64,
}

impl PathView {
    /// The path of request `request`.
    pub fn new(exec: &Execution, request: u32) -> PathView {
        let r = &exec.requests[request as usize];
        let mut pos = 0u64;
        let segments = exec
            .tree
            .path_nodes(r.output_node)
            .into_iter()
            .map(|n| {
                let start = pos;
                pos += exec.tree.nodes[n as usize].len as u64;
                (n, start)
            })
            .collect();
        PathView {
            request,
            segments,
            len: pos,
        }
    }

    /// The node and in-node index of path position `pos`.
    pub fn locate(&self, pos: u64) -> Option<(NodeId, u32)> {
        if pos >= self.len {
            return None;
        }
        let i = self.segments.partition_point(|&(_, s)| s <= pos) - 1;
        let (n, start) = self.segments[i];
        Some((n, (pos - start) as u32))
    }

    /// Token ids of positions `range` (clamped to the path).
    pub fn tokens(&self, exec: &Execution, range: std::ops::Range<u64>) -> Vec<u32> {
        let end = range.end.min(self.len);
        let mut out = Vec::with_capacity(end.saturating_sub(range.start) as usize);
        let mut pos = range.start;
        while pos < end {
            let Some((n, i)) = self.locate(pos) else {
                break;
            };
            let toks = exec.tree.node_tokens(n);
            let take = ((toks.len() as u64 - i as u64).min(end - pos)) as usize;
            out.extend_from_slice(&toks[i as usize..i as usize + take]);
            pos += take as u64;
        }
        out
    }
}

/// Everything needed to judge the tokens of one execution.
#[derive(Clone, Copy)]
pub struct ExecView<'a> {
    /// The execution.
    pub exec: &'a Execution,
    /// Its scoring outcome.
    pub outcome: &'a Outcome,
    /// Its admission.
    pub admission: &'a Admission,
    /// Its lens and the J_max to read it at, once computed.
    pub lens: Option<(&'a ExecutionLens, u32)>,
    /// Its admission under pinned settings, to show flips against.
    pub pinned: Option<&'a Admission>,
    /// The audit's tones of its tokens, once audited.
    pub audit: Option<&'a dyn AuditTones>,
}

impl<'a> ExecView<'a> {
    /// Execution `i` of a processed batch.
    pub fn new(exec: &'a Execution, results: &'a Results, i: usize) -> Self {
        ExecView {
            exec,
            outcome: &results.outcomes[i],
            admission: &results.admissions[i],
            lens: None,
            pinned: None,
            audit: None,
        }
    }

    /// The same, reading `lens` at cap `jmax` (the J_max its admission ran with).
    pub fn with_lens(mut self, lens: Option<&'a ExecutionLens>, jmax: u32) -> Self {
        self.lens = lens.map(|l| (l, jmax));
        self
    }

    /// The same, showing flips against `pinned`.
    pub fn with_pinned(mut self, pinned: Option<&'a Admission>) -> Self {
        self.pinned = pinned;
        self
    }

    /// The same, with the audit's tones of its tokens.
    pub fn with_audit(mut self, audit: Option<&'a dyn AuditTones>) -> Self {
        self.audit = audit;
        self
    }

    /// The engine's reason for token `i` of node `n` at replay step `step` (`None` = final).
    pub fn reason(&self, n: NodeId, i: u32, step: Option<u32>) -> Reason {
        token_reason(self.exec, self.outcome, self.admission, n, i, step)
    }

    /// Tone of token `i` of node `n` under `mode` at replay step `step` (`None` = final).
    pub fn tone(&self, n: NodeId, i: u32, mode: ColorMode, step: Option<u32>) -> Tone {
        let identity = self.exec.identity(n, i);
        match (mode, identity) {
            // The audit judges context and outputs alike (a context token can be trained).
            (ColorMode::Audit | ColorMode::Gap, _) => {
                let key = self.exec.tree.nodes[n as usize].start + i;
                self.audit.map_or(Tone::AuditPending, |a| a.tone(key, mode))
            }
            (ColorMode::Provenance, TokenIdentity::Context { source, .. }) => Tone::Context(source),
            // Context is one dim tone when colour is about claims or log-probs.
            (_, TokenIdentity::Context { .. }) => Tone::Context(Source::Context),
            (ColorMode::Provenance, TokenIdentity::Output { request, .. }) => {
                let r = &self.exec.requests[request as usize];
                if r.after_closure {
                    Tone::AfterClosure
                } else if r.not_trainable.is_some() {
                    Tone::NotTrainable
                } else if r.actor == Actor::Evaluator {
                    Tone::Evaluator
                } else {
                    Tone::Policy
                }
            }
            (ColorMode::Logprob, TokenIdentity::Output { request, offset }) => {
                match self.exec.requests[request as usize].logprob(offset) {
                    Some(lp) => Tone::Heat(heat_bucket(lp)),
                    None => Tone::NoLogprob,
                }
            }
            (ColorMode::Claims, TokenIdentity::Output { .. }) => {
                Tone::of_reason(&self.reason(n, i, step), step)
            }
            (ColorMode::Lens | ColorMode::Flips, TokenIdentity::Output { .. }) => {
                match self.reason(n, i, None) {
                    r @ (Reason::EvaluatorOutput
                    | Reason::AfterClosure
                    | Reason::NotTrainable(_)
                    | Reason::Excluded(_)
                    | Reason::Dummy) => Tone::of_reason(&r, None),
                    _ if mode == ColorMode::Lens => match self.lens {
                        Some((l, jmax)) => l
                            .node(n, jmax)
                            .map_or(Tone::LensPending, |o| Tone::Lens(lens_bucket(o.fraction()))),
                        None => Tone::LensPending,
                    },
                    now => {
                        let then = self.pinned.is_some_and(|p| {
                            p.claimed_by.get(n as usize).is_some_and(Option::is_some)
                        });
                        match (then, now.is_target()) {
                            (true, true) => Tone::Kept,
                            (false, true) => Tone::Gained,
                            (true, false) => Tone::Lost,
                            (false, false) => Tone::Unclaimed,
                        }
                    }
                }
            }
        }
    }
}

/// Heat bucket of a log-prob: 0 for p ≥ 0.9 … 4 for p < 0.05.
pub fn heat_bucket(logprob: f64) -> u8 {
    let p = logprob.exp();
    match p {
        p if p >= 0.9 => 0,
        p if p >= 0.5 => 1,
        p if p >= 0.2 => 2,
        p if p >= 0.05 => 3,
        _ => 4,
    }
}
