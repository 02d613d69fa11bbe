//! The loss mask against what the policy sampled: `trained_not_sampled` (a mask-on token the
//! policy did not sample, with the evidence that says so) and `sampled_not_trained` (a policy
//! token with the mask off in every sample holding it, with the reason when one is known).

use gyre_format::named::Named;

use super::finding::{Evidence, Finding, Kind, Scope, runs};
use super::layout::{Key, Layout};
use crate::execution::{Execution, TokenIdentity};
use crate::report::plural;
use crate::score::{Outcome, score};

/// A zero-log-prob run at least this long is not a run of confident samples: one confident
/// token rounds to 0.0, a tool output written as "sampled" is 0.0 throughout.
pub const ZERO_RUN: u32 = 4;

/// What a mask-on token is, as far as `trained_not_sampled` cares.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Verdict {
    /// The recording: context with this source, or the output of a request that is not a
    /// trainable policy output (the reason).
    Recorded(&'static str),
    /// The tokenizer's turns: outside an assistant turn.
    Turn,
    /// No behaviour log-prob although the sample holds others.
    Missing,
    /// Behaviour log-prob exactly 0.0 (a finding only in a long or whole run).
    Zero,
}

/// Why a request's output is not a trainable policy output.
fn untrainable(exec: &Execution, request: u32) -> Option<&'static str> {
    let r = &exec.requests[request as usize];
    if r.trainable() {
        None
    } else if r.after_closure {
        Some("the output of a request after its execution's closure")
    } else if r.not_trainable.is_some() {
        Some("an output the recording marks not_trainable")
    } else {
        Some("an evaluator's output")
    }
}

/// What context source `source` reads as in a finding.
fn context_label(source: gyre_format::record::Source) -> &'static str {
    use gyre_format::record::Source as S;
    match source {
        S::System => "context:system",
        S::User => "context:user",
        S::Tool => "context:tool",
        S::Assistant => "context:assistant (harness-written)",
        S::Critique => "context:critique",
        S::Summary => "context:summary",
        S::Template => "context:template",
        S::Context => "context",
    }
}

/// Mask-on tokens of each sample that the policy did not sample, one finding per maximal run
/// sharing the evidence. Returns the findings and the mask-on tokens off the tree that no
/// evidence classifies (neither turns nor log-probs say).
pub fn trained_not_sampled(scope: &Scope) -> (Vec<Finding>, u64) {
    let (exec, layout) = (scope.exec, scope.layout);
    let mut findings = Vec::new();
    let mut unclassified = 0u64;
    for (s, sample) in layout.samples.iter().enumerate() {
        let keys = &sample.keys;
        let record = &exec.trained.list[s].record;
        if record.trained_tokens() == 0 {
            continue;
        }
        let on = |p: usize| Layout::mask_on(exec, s, p);
        // The turn structure, asked only when a token needs it.
        let needs_turns = (0..keys.len()).any(|p| {
            on(p)
                && match layout.identity(exec, keys[p]) {
                    None => true,
                    Some(TokenIdentity::Context { source, .. }) => {
                        source == gyre_format::record::Source::Context
                    }
                    Some(TokenIdentity::Output { .. }) => false,
                }
        });
        let turns = match scope.turns {
            Some(t) if needs_turns => Some(t.assistant(&layout.ids(exec, s))),
            _ => None,
        };
        let outside_turn =
            |p: usize| turns.as_ref().and_then(|t| t.get(p).copied().flatten()) == Some(false);
        let has_logprobs = (0..keys.len()).any(|p| on(p) && layout.behaviour(exec, s, p).is_some());
        let verdict = |p: usize| -> Option<Verdict> {
            if !on(p) {
                return None;
            }
            let logprob = || match layout.behaviour(exec, s, p) {
                None if has_logprobs => Some(Verdict::Missing),
                Some(0.0) => Some(Verdict::Zero),
                _ => None,
            };
            match layout.identity(exec, keys[p]) {
                Some(TokenIdentity::Output { request, .. }) => match untrainable(exec, request) {
                    Some(why) => Some(Verdict::Recorded(why)),
                    None => logprob(),
                },
                Some(TokenIdentity::Context { source, .. }) => {
                    if source == gyre_format::record::Source::Context && outside_turn(p) {
                        Some(Verdict::Turn)
                    } else {
                        Some(Verdict::Recorded(context_label(source)))
                    }
                }
                None if outside_turn(p) => Some(Verdict::Turn),
                None => logprob(),
            }
        };
        let all: Vec<Option<Verdict>> = (0..keys.len()).map(verdict).collect();
        for (p, v) in all.iter().enumerate() {
            if v.is_none() && on(p) && layout.identity(exec, keys[p]).is_none() {
                unclassified += 1;
            }
        }
        for (start, end, v) in runs(keys.len(), |p| all[p]) {
            let n = end - start;
            if v == Verdict::Zero
                && n < ZERO_RUN
                && !whole_output(scope, &keys[start as usize..end as usize])
            {
                continue;
            }
            let mut f = Finding::new(
                Kind::TrainedNotSampled,
                scope.index,
                Some(s as u32),
                start,
                end,
            );
            f.request = layout
                .output(exec, keys[start as usize])
                .map(|(r, _)| r)
                .or_else(|| match layout.identity(exec, keys[start as usize]) {
                    Some(TokenIdentity::Context { request, .. }) => Some(request),
                    _ => None,
                });
            let tokens = plural(n as usize, "token");
            let (evidence, why) = match v {
                Verdict::Recorded(what) => (
                    Evidence::Spans,
                    format!("the recording holds them as {what}"),
                ),
                Verdict::Turn => (
                    Evidence::Turns,
                    "the chat template puts them outside an assistant turn".to_owned(),
                ),
                Verdict::Missing => (
                    Evidence::Logprob,
                    "they have no behaviour log-prob although the sample's other trained tokens do"
                        .to_owned(),
                ),
                Verdict::Zero => (
                    Evidence::Logprob,
                    format!(
                        "their behaviour log-prob is 0.0 on every token ({})",
                        if n >= ZERO_RUN {
                            format!("a run of {n}")
                        } else {
                            "a whole recorded output".to_owned()
                        }
                    ),
                ),
            };
            f.evidence = Some(evidence);
            f.detail = format!(
                "{tokens} at {start}..{end} trained with the mask on, not sampled by the policy: {why} (evidence: {})",
                evidence.name()
            );
            findings.push(f);
        }
    }
    (findings, unclassified)
}

/// Whether `keys` are exactly one recorded request's whole output.
fn whole_output(scope: &Scope, keys: &[Key]) -> bool {
    let (exec, layout) = (scope.exec, scope.layout);
    let Some((first, last)) = keys.first().zip(keys.last()) else {
        return false;
    };
    match (layout.output(exec, *first), layout.output(exec, *last)) {
        (Some((r, 0)), Some((q, end))) => {
            r == q
                && end + 1 == exec.requests[r as usize].output_len
                && keys.len() as u32 == end + 1
        }
        _ => false,
    }
}

/// Policy tokens the audit leaves out of `sampled_not_trained` because the recording says why,
/// or because no sample holds them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Untrained {
    /// Trainable policy tokens that no sample holds (gyre's J_max leaves undrawn paths out on
    /// purpose).
    pub in_no_sample: u64,
    /// Held by a sample, mask-off everywhere, in an execution closed with no assessable work
    /// (its samples are zero-reward placeholders).
    pub placeholder: u64,
    /// Outputs marked `not_trainable` held by a sample (never policy-sampled tokens to train).
    pub not_trainable: u64,
}

/// Policy tokens held by a sample of the execution and mask-off in every one, one finding per
/// maximal run in the first sample holding them, with the reason when one is known.
pub fn sampled_not_trained(scope: &Scope) -> (Vec<Finding>, Untrained) {
    let (exec, layout) = (scope.exec, scope.layout);
    const NONE: u32 = u32::MAX;
    let mut holder = vec![NONE; layout.keys()];
    let mut trained = vec![false; layout.keys()];
    for (s, sample) in layout.samples.iter().enumerate() {
        for (p, &k) in sample.keys.iter().enumerate() {
            if holder[k as usize] == NONE {
                holder[k as usize] = s as u32;
            }
            trained[k as usize] |= Layout::mask_on(exec, s, p);
        }
    }
    let mut untrained = Untrained::default();
    for k in 0..layout.tree_len {
        if let Some((r, _)) = layout.output(exec, k) {
            let req = &exec.requests[r as usize];
            let held = holder[k as usize] != NONE;
            if req.trainable() && !held {
                untrained.in_no_sample += 1;
            } else if req.not_trainable.is_some() && held {
                untrained.not_trainable += 1;
            }
        }
    }
    let placeholder = score(exec) == Outcome::Dummy;
    let mut findings = Vec::new();
    for (s, sample) in layout.samples.iter().enumerate() {
        let keys = &sample.keys;
        let record = &exec.trained.list[s].record;
        let dropped = record.trained_tokens() == 0;
        let last = keys.last().and_then(|&k| layout.output(exec, k));
        let flagged = runs(keys.len(), |p| {
            let k = keys[p];
            if holder[k as usize] != s as u32 || trained[k as usize] || !layout.sampled(exec, k) {
                return None;
            }
            let (r, _) = layout.output(exec, k)?;
            let req = &exec.requests[r as usize];
            let reason = if dropped {
                Reason::Dropped
            } else if req.finish.as_deref() == Some("length") {
                Reason::Cap
            } else if last.is_some_and(|(q, j)| q == r && j + 1 < req.output_len) {
                Reason::Truncated
            } else if p < record.prompt_len as usize {
                Reason::Prompt
            } else {
                Reason::MaskOff
            };
            Some((r, reason))
        });
        for (start, end, (r, reason)) in flagged {
            if placeholder {
                untrained.placeholder += u64::from(end - start);
                continue;
            }
            let mut f = Finding::new(
                Kind::SampledNotTrained,
                scope.index,
                Some(s as u32),
                start,
                end,
            );
            f.request = Some(r);
            f.detail = format!(
                "{} at {start}..{end} sampled by the policy (request {}) and trained by no sample: {}",
                plural((end - start) as usize, "token"),
                exec.requests[r as usize].id,
                reason.words()
            );
            findings.push(f);
        }
    }
    (findings, untrained)
}

/// Why policy tokens went untrained, when the sample says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    /// The sample's mask is all zero.
    Dropped,
    /// The output stopped at its length cap.
    Cap,
    /// The sample ends inside the output.
    Truncated,
    /// Held only in the sample's prompt.
    Prompt,
    /// Mask off, no reason known.
    MaskOff,
}

impl Reason {
    fn words(self) -> &'static str {
        match self {
            Reason::Dropped => "the sample's mask is all zero (a dropped sample)",
            Reason::Cap => {
                "the output stopped at its length cap (finish = length): an overlong filter"
            }
            Reason::Truncated => "the sample ends inside this output (truncated at a cap)",
            Reason::Prompt => "held only in the prompt of the samples holding it",
            Reason::MaskOff => "the mask is off wherever it is held",
        }
    }
}
