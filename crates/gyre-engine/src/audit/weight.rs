//! `weight_spread`: each execution's effective weight in its optimizer step under the trainer's
//! declared loss aggregation (the header's `trainer.loss_agg`, docs/format.md §9), against gyre's
//! contract that every execution weighs `1/B` (§6).
//!
//! An execution's weight is the sum, over its mask-on tokens, of the weight the trainer's loss
//! gives each token: the gradient of the aggregated loss with respect to each token's loss. Per
//! step `s` (the records' `step`; records without one form one step), with `L` mask-on tokens,
//! `n` samples and `B` executions:
//!
//! | `loss_agg` | execution `i`'s weight | trainer code it follows |
//! |---|---|---|
//! | `token-mean` | `L_i / ΣL` | verl `agg_loss` `token-mean` (`batch_num_tokens`), SkyRL `token_mean`, prime-rl `rl_scale` |
//! | `seq-mean-token-mean` | `n⁺_i / Σn` (`n⁺`: samples with a mask-on token) | verl `seq-mean-token-mean` (`global_batch_size` = the mini-batch's samples), SkyRL `sequence_mean` |
//! | `seq-mean-token-sum` | `L_i / Σn` | verl `seq-mean-token-sum` |
//! | `seq-mean-token-sum-norm` | `L_i / (Σn · max_len)` | verl (`loss_scale_factor`), SkyRL `seq_mean_token_sum_norm` (`max_seq_len`) |
//! | `execution-mean` | `Σ_k weight_k · L_k / B`, else `1/B` when `L_i > 0` | gyre (`weight = 1/L_i`), slime (`rollout_mask_sums`, divided by the step's rollouts) |
//!
//! `max_len` is the longest response of the step: the trainer's own constant (verl's padded
//! width, SkyRL's `max_seq_len`) is not in the dump, and scales every execution alike.

use std::collections::BTreeMap;

use gyre_format::named::Named;
use gyre_format::trained::LossAgg;
use serde::Serialize;
use serde_json::{Value, json};

use super::finding::{Finding, Kind};
use crate::execution::Execution;
use crate::report::plural;

/// One execution's weight in one step.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecutionWeight {
    /// Index of the execution in the batch.
    pub execution: u32,
    /// Its id.
    pub id: String,
    /// The step (`None`: records without a `step`).
    pub step: Option<u64>,
    /// The trainer's weight: the sum over the execution's mask-on tokens of each token's
    /// weight in the step's loss, in the trainer's own scale.
    pub weight: f64,
    /// `weight` over the mean weight of the step's weighted executions (1.0: as gyre's contract
    /// weighs it; 0.0: no mask-on token).
    pub relative: f64,
    /// gyre's contract for it: `1/B`, `B` the step's executions.
    pub contract: f64,
    /// Its mask-on tokens in the step.
    pub tokens: u64,
    /// Its samples in the step.
    pub samples: u32,
    /// Index (in the execution's `trained.list`) of its first sample in the step.
    pub first_sample: u32,
}

/// One step's weights.
#[derive(Clone, Debug, PartialEq)]
pub struct StepWeights {
    /// The step (`None`: records without a `step`).
    pub step: Option<u64>,
    /// Executions with a sample in the step (`B`).
    pub executions: u32,
    /// Samples in the step (`Σn`).
    pub samples: u64,
    /// Mask-on tokens in the step (`ΣL`).
    pub tokens: u64,
    /// Heaviest relative weight over lightest, among executions with a mask-on token (1.0:
    /// equal weights; 1.0 too when fewer than two weigh anything).
    pub spread: f64,
    /// Index in [`WeightSummary::executions`] of the heaviest execution (`None`: none weighs).
    pub heaviest: Option<u32>,
    /// Index in [`WeightSummary::executions`] of the lightest weighted execution.
    pub lightest: Option<u32>,
}

/// The weights of every execution of the batch under its trainer's `loss_agg`.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightSummary {
    /// The aggregation the weights follow.
    pub loss_agg: LossAgg,
    /// A step spread above this is a finding.
    pub bound: f64,
    /// Per step, in step order (records without a step first).
    pub steps: Vec<StepWeights>,
    /// Per (step, execution), grouped by step, executions in batch order.
    pub executions: Vec<ExecutionWeight>,
    /// The largest step spread.
    pub spread: f64,
    /// The step with the largest spread (index into `steps`).
    pub worst_step: Option<u32>,
    /// Executions (per step) that have samples but no mask-on token: they weigh nothing.
    pub unweighted: u64,
}

/// A sample's counts in its step.
struct SampleCount {
    execution: u32,
    sample: u32,
    tokens: u64,
    weight: Option<f64>,
    response: u64,
}

/// The weights of `executions`' samples under `loss_agg`, judged against `bound`; `None` for
/// `unknown` (nothing to compare with) and when no execution has a sample.
pub fn weights(executions: &[Execution], loss_agg: LossAgg, bound: f64) -> Option<WeightSummary> {
    if loss_agg == LossAgg::Unknown {
        return None;
    }
    let mut by_step: BTreeMap<Option<u64>, Vec<SampleCount>> = BTreeMap::new();
    for (e, exec) in executions.iter().enumerate() {
        for (k, s) in exec.trained.list.iter().enumerate() {
            let r = &s.record;
            by_step.entry(r.step).or_default().push(SampleCount {
                execution: e as u32,
                sample: k as u32,
                tokens: r.trained_tokens() as u64,
                weight: r.weight,
                response: r.response_len() as u64,
            });
        }
    }
    if by_step.is_empty() {
        return None;
    }
    let mut summary = WeightSummary {
        loss_agg,
        bound,
        steps: Vec::with_capacity(by_step.len()),
        executions: Vec::new(),
        spread: 1.0,
        worst_step: None,
        unweighted: 0,
    };
    for (step, samples) in by_step {
        let first = summary.executions.len();
        let weighs = step_weights(
            executions,
            loss_agg,
            step,
            &samples,
            &mut summary.executions,
        );
        summary.unweighted += summary.executions[first..]
            .iter()
            .filter(|w| w.weight == 0.0)
            .count() as u64;
        if summary.worst_step.is_none() || weighs.spread > summary.spread {
            summary.spread = weighs.spread;
            summary.worst_step = Some(summary.steps.len() as u32);
        }
        summary.steps.push(weighs);
    }
    Some(summary)
}

/// Appends one step's per-execution weights to `out` and returns the step's figures.
fn step_weights(
    executions: &[Execution],
    loss_agg: LossAgg,
    step: Option<u64>,
    samples: &[SampleCount],
    out: &mut Vec<ExecutionWeight>,
) -> StepWeights {
    let n_total = samples.len() as f64;
    let l_total: u64 = samples.iter().map(|s| s.tokens).sum();
    let max_len = samples.iter().map(|s| s.response).max().unwrap_or(0).max(1) as f64;
    // Per execution, in batch order: (its sample counts).
    let mut per_exec: BTreeMap<u32, Vec<&SampleCount>> = BTreeMap::new();
    for s in samples {
        per_exec.entry(s.execution).or_default().push(s);
    }
    let b = per_exec.len() as f64;
    let first = out.len();
    for (&execution, ss) in &per_exec {
        let tokens: u64 = ss.iter().map(|s| s.tokens).sum();
        let weight = match loss_agg {
            LossAgg::TokenMean if l_total > 0 => tokens as f64 / l_total as f64,
            LossAgg::TokenMean => 0.0,
            LossAgg::SeqMeanTokenMean => {
                ss.iter().filter(|s| s.tokens > 0).count() as f64 / n_total
            }
            LossAgg::SeqMeanTokenSum => tokens as f64 / n_total,
            LossAgg::SeqMeanTokenSumNorm => tokens as f64 / (n_total * max_len),
            LossAgg::ExecutionMean if tokens == 0 => 0.0,
            // A sample without a `weight` shares the execution's 1 by its tokens (slime's
            // per-rollout token mean; gyre writes `weight = 1/L_i`, the same thing).
            LossAgg::ExecutionMean => {
                ss.iter()
                    .map(|s| {
                        s.weight
                            .map_or(s.tokens as f64 / tokens as f64, |w| w * s.tokens as f64)
                    })
                    .sum::<f64>()
                    / b
            }
            LossAgg::Unknown => 0.0,
        };
        out.push(ExecutionWeight {
            execution,
            id: executions[execution as usize].id.clone(),
            step,
            weight,
            relative: 0.0,
            contract: 1.0 / b,
            tokens,
            samples: ss.len() as u32,
            first_sample: ss[0].sample,
        });
    }
    let placed = &mut out[first..];
    let weighted: Vec<f64> = placed
        .iter()
        .map(|w| w.weight)
        .filter(|&w| w > 0.0)
        .collect();
    let mean = weighted.iter().sum::<f64>() / weighted.len().max(1) as f64;
    for w in placed.iter_mut().filter(|w| w.weight > 0.0) {
        w.relative = w.weight / mean;
    }
    let (mut heaviest, mut lightest) = (None::<usize>, None::<usize>);
    for (k, w) in placed.iter().enumerate().filter(|(_, w)| w.weight > 0.0) {
        // First in batch order on ties.
        if heaviest.is_none_or(|h| w.weight > placed[h].weight) {
            heaviest = Some(k);
        }
        if lightest.is_none_or(|l| w.weight < placed[l].weight) {
            lightest = Some(k);
        }
    }
    let spread = match (heaviest, lightest) {
        (Some(h), Some(l)) => placed[h].weight / placed[l].weight,
        _ => 1.0,
    };
    StepWeights {
        step,
        executions: per_exec.len() as u32,
        samples: samples.len() as u64,
        tokens: l_total,
        spread,
        heaviest: heaviest.map(|h| (first + h) as u32),
        lightest: lightest.map(|l| (first + l) as u32),
    }
}

impl WeightSummary {
    /// One `weight_spread` finding per step whose spread is above the bound: on the heaviest
    /// execution's first sample of the step (its response), naming the lightest.
    pub fn findings(&self, executions: &[Execution]) -> Vec<Finding> {
        let mut out = Vec::new();
        for step in &self.steps {
            let (Some(h), Some(l)) = (step.heaviest, step.lightest) else {
                continue;
            };
            if step.spread <= self.bound {
                continue;
            }
            let (heavy, light) = (&self.executions[h as usize], &self.executions[l as usize]);
            let sample = &executions[heavy.execution as usize].trained.list
                [heavy.first_sample as usize]
                .record;
            let mut f = Finding::new(
                Kind::WeightSpread,
                heavy.execution,
                Some(heavy.first_sample),
                sample.prompt_len,
                sample.len() as u32,
            );
            f.value = Some(step.spread);
            let in_step = step
                .step
                .map_or(String::new(), |s| format!("in step {s}, "));
            f.detail = format!(
                "{in_step}under loss_agg {} execution {} weighs {:.2}× the mean ({} in {}) and \
                 execution {} {:.2}× ({} in {}): spread {:.2} > {}; gyre's contract weighs each of \
                 the step's {} executions 1/B",
                self.loss_agg,
                heavy.id,
                heavy.relative,
                plural(heavy.tokens as usize, "trained token"),
                plural(heavy.samples as usize, "sample"),
                light.id,
                light.relative,
                plural(light.tokens as usize, "trained token"),
                plural(light.samples as usize, "sample"),
                step.spread,
                self.bound,
                step.executions,
            );
            out.push(f);
        }
        out
    }

    fn execution_json(w: &ExecutionWeight) -> Value {
        json!({"execution": w.id, "step": w.step, "weight": w.weight, "relative": w.relative,
               "contract": w.contract, "tokens": w.tokens, "samples": w.samples})
    }

    /// The `weights` object of `gyre audit --json` (docs/audit.md).
    pub fn to_json(&self) -> Value {
        let worst = self.worst_step.map(|s| &self.steps[s as usize]);
        let named = |i: Option<u32>| i.map(|i| Self::execution_json(&self.executions[i as usize]));
        let id = |i: Option<u32>| i.map(|i| self.executions[i as usize].id.clone());
        json!({
            "loss_agg": self.loss_agg.name(),
            "bound": self.bound,
            "spread": self.spread,
            "step": worst.and_then(|s| s.step),
            "heaviest": named(worst.and_then(|s| s.heaviest)),
            "lightest": named(worst.and_then(|s| s.lightest)),
            "unweighted": self.unweighted,
            "steps": self.steps.iter().map(|s| json!({
                "step": s.step, "executions": s.executions, "samples": s.samples,
                "tokens": s.tokens, "spread": s.spread,
                "heaviest": id(s.heaviest), "lightest": id(s.lightest),
            })).collect::<Vec<_>>(),
            "executions": self.executions.iter().map(Self::execution_json).collect::<Vec<_>>(),
        })
    }
}

impl Serialize for WeightSummary {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{LoadOptions, load_bytes};

    /// Executions `a` (two samples of 3 and 1 mask-on tokens), `b` (one of 4 over a response of
    /// 6) and `c` (one, mask all off), in one step; `weight` on every sample when given.
    fn batch(weights: Option<[f64; 4]>) -> Vec<Execution> {
        let mut lines = vec![r#"{"kind":"header","format":"gyre/1"}"#.to_owned()];
        let samples = [
            ("a", "1", 2, "[1,1,1,0]"),
            ("a", "2", 2, "[0,1,0,0]"),
            ("b", "1", 1, "[1,1,0,1,1,0]"),
            ("c", "1", 2, "[0,0]"),
        ];
        for (k, (e, s, p, mask)) in samples.iter().enumerate() {
            let n = mask.matches(',').count() + 1 + p;
            let ids: Vec<String> = (0..n).map(|i| (i + 10).to_string()).collect();
            let weight = weights.map_or(String::new(), |w| format!(r#","weight":{}"#, w[k]));
            lines.push(format!(
                r#"{{"kind":"trained","execution":"{e}","sample":"{s}","prompt_len":{p},"tokens":[{{"ids":[{}]}}],"loss_mask":{mask}{weight}}}"#,
                ids.join(",")
            ));
        }
        let text = lines.join("\n") + "\n";
        load_bytes("w.jsonl", text.as_bytes(), &LoadOptions::default())
            .expect("the test dump loads")
            .executions
    }

    fn of(execs: &[Execution], agg: LossAgg) -> Vec<f64> {
        let w = weights(execs, agg, 2.0).expect("weights");
        w.executions.iter().map(|e| e.weight).collect()
    }

    fn close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn each_aggregation_gives_its_trainers_weights() {
        let execs = batch(None);
        // ΣL = 8, Σn = 4, B = 3, the longest response 6.
        close(
            &of(&execs, LossAgg::TokenMean),
            &[4.0 / 8.0, 4.0 / 8.0, 0.0],
        );
        close(
            &of(&execs, LossAgg::SeqMeanTokenMean),
            &[2.0 / 4.0, 1.0 / 4.0, 0.0],
        );
        close(
            &of(&execs, LossAgg::SeqMeanTokenSum),
            &[4.0 / 4.0, 4.0 / 4.0, 0.0],
        );
        close(
            &of(&execs, LossAgg::SeqMeanTokenSumNorm),
            &[4.0 / 24.0, 4.0 / 24.0, 0.0],
        );
        close(
            &of(&execs, LossAgg::ExecutionMean),
            &[1.0 / 3.0, 1.0 / 3.0, 0.0],
        );
        assert!(weights(&execs, LossAgg::Unknown, 2.0).is_none());
    }

    #[test]
    fn the_spread_names_the_heaviest_and_lightest_weighted_execution() {
        let execs = batch(None);
        let w = weights(&execs, LossAgg::SeqMeanTokenMean, 2.0).expect("weights");
        assert_eq!(w.steps.len(), 1);
        let step = &w.steps[0];
        assert_eq!((step.executions, step.samples, step.tokens), (3, 4, 8));
        assert_eq!(w.spread, 2.0);
        let heaviest = &w.executions[step.heaviest.expect("a heaviest") as usize];
        let lightest = &w.executions[step.lightest.expect("a lightest") as usize];
        assert_eq!((heaviest.execution, lightest.execution), (0, 1));
        assert!((heaviest.relative - 4.0 / 3.0).abs() < 1e-12);
        assert!((lightest.relative - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(w.unweighted, 1);
        assert!((heaviest.contract - 1.0 / 3.0).abs() < 1e-12);
        assert!(
            w.findings(&execs).is_empty(),
            "a spread of 2 is within a bound of 2"
        );
        let tight = weights(&execs, LossAgg::SeqMeanTokenMean, 1.5).expect("weights");
        let found = tight.findings(&execs);
        assert_eq!(found.len(), 1);
        let f = &found[0];
        assert_eq!(
            (f.kind, f.execution, f.sample, f.start, f.end),
            (Kind::WeightSpread, 0, Some(0), 2, 6)
        );
        assert_eq!(f.value, Some(2.0));
        assert!(
            f.detail.contains("execution a weighs 1.33×") && f.detail.contains("execution b 0.67×"),
            "{}",
            f.detail
        );
        let j = tight.to_json();
        assert_eq!(j["heaviest"]["execution"], "a");
        assert_eq!(j["lightest"]["execution"], "b");
        assert_eq!(j["loss_agg"], "seq-mean-token-mean");
        assert_eq!(j["executions"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn records_weights_are_applied_per_mask_on_token() {
        // gyre's own: weight = 1/L_i (a: 1/4 on both samples; b: 1/4).
        let execs = batch(Some([0.25, 0.25, 0.25, 1.0]));
        let w = weights(&execs, LossAgg::ExecutionMean, 2.0).expect("weights");
        close(
            &w.executions.iter().map(|e| e.weight).collect::<Vec<_>>(),
            &[1.0 / 3.0, 1.0 / 3.0, 0.0],
        );
        assert_eq!(w.spread, 1.0);
        // A trainer that weighs a's first sample double.
        let execs = batch(Some([0.5, 0.25, 0.25, 1.0]));
        let w = weights(&execs, LossAgg::ExecutionMean, 2.0).expect("weights");
        close(
            &w.executions.iter().map(|e| e.weight).collect::<Vec<_>>(),
            &[1.75 / 3.0, 1.0 / 3.0, 0.0],
        );
        assert!((w.spread - 1.75).abs() < 1e-12);
    }
}
