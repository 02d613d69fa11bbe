//! Loss coefficients, optimizer steps and data-parallel shards of admitted rows (docs/format.md §6 as a
//! trainer consumes it).
//!
//! The batch loss is `(1/B) Σ_i (1/L_i) Σ_{t∈T_i} ℓ_t`. A trainer that takes several optimizer
//! steps out of one admitted batch (mini-batches), or a fixed number of executions per step,
//! applies that formula to each step's executions: `B` is then the number of counted executions
//! *in the step*, and an execution must never be split across steps (its `1/L_i` would be spread
//! over two gradients). Within a step the loss is a plain sum of `coefficient × ℓ` over tokens,
//! so it does not depend on how the step's rows are divided among data-parallel ranks or
//! micro-batches, as long as every part is summed (never averaged by its own token or row
//! count).
//!
//! * [`coefficients`]: per response token of a row, `loss_mask × weight / B`.
//! * [`steps`]: consecutive counted executions, `n` per step (the last step holds the rest).
//! * [`shard`]: a step's executions dealt to `k` ranks, whole, balanced by row tokens.

use super::load::Batch;
use crate::process::Results;
use crate::rows::row_size;

/// The loss coefficient of each response token of a row (`tokens[prompt_len:]`): `loss_mask ×
/// weight / b`, as float64. `b = 0` (no counted execution) gives zeros.
pub fn coefficients(loss_mask: &[u8], weight: f64, b: u64) -> Vec<f64> {
    let c = if b == 0 { 0.0 } else { weight / b as f64 };
    loss_mask
        .iter()
        .map(|&m| if m != 0 { c } else { 0.0 })
        .collect()
}

/// A set of whole executions that one optimizer step (or one rank of one step) trains on, with
/// the `B` of its loss.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Execution indices (into [`Batch::executions`]), ascending: the rows keep the batch's
    /// execution order, then draw order.
    pub executions: Vec<usize>,
    /// `B` of this step: its counted executions (for a shard, the whole step's).
    pub batch_executions: u64,
}

/// The counted (scored and dummy) executions of `results`, in batch order.
pub fn counted(results: &Results) -> Vec<usize> {
    results
        .outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| o.counts())
        .map(|(i, _)| i)
        .collect()
}

/// The executions `of` (counted ones, ascending) in steps of `n` (≥ 1) consecutive executions; the
/// last step holds what is left. Each step's `B` is the number of executions it holds.
pub fn steps(of: &[usize], n: usize) -> Vec<Step> {
    of.chunks(n.max(1))
        .map(|c| Step {
            executions: c.to_vec(),
            batch_executions: c.len() as u64,
        })
        .collect()
}

/// Deals the executions of `step` to `k` (≥ 1) ranks, whole, balancing the tokens of their rows
/// (`tokens[e]` for execution `e`): largest first, each to the rank with the fewest tokens so far
/// (the lowest rank on a tie), so the result depends only on the token counts. Each rank's
/// executions stay in batch order; every rank keeps the step's `B`. With more ranks than
/// executions some ranks get none.
pub fn shard(step: &Step, tokens: impl Fn(usize) -> u64, k: usize) -> Vec<Step> {
    let k = k.max(1);
    let mut order: Vec<(u64, usize)> = step.executions.iter().map(|&e| (tokens(e), e)).collect();
    // Largest first; equal sizes in batch order.
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut load = vec![0u64; k];
    let mut ranks: Vec<Vec<usize>> = vec![Vec::new(); k];
    for (t, e) in order {
        let r = (0..k).min_by_key(|&r| (load[r], r)).expect("k ≥ 1");
        load[r] += t;
        ranks[r].push(e);
    }
    ranks
        .into_iter()
        .map(|mut executions| {
            executions.sort_unstable();
            Step {
                executions,
                batch_executions: step.batch_executions,
            }
        })
        .collect()
}

/// Tokens of execution `i`'s rows (prompt and response: what a forward pass reads).
pub fn row_tokens(batch: &Batch, results: &Results, i: usize) -> u64 {
    row_size(batch, results, i).1
}

/// Targets of execution `i` over its rows (`Σ loss_mask` = `L_i`; 0 when excluded).
pub fn execution_targets(results: &Results, i: usize) -> u64 {
    if results.outcomes[i].counts() {
        results.admissions[i].targets()
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{Input, LoadOptions, load_inputs};
    use crate::loss;
    use crate::recgen::{self, GenOptions};
    use crate::rows::execution_rows;
    use crate::score::AdvantageMode;

    /// 24 random executions in six groups, with every scoring fate, retries, sub-agents and
    /// compaction (the engine's own generator: the simulated harness is a layer above).
    fn synth_batch() -> Batch {
        let execs = recgen::generate(&GenOptions {
            executions: 24,
            turns: 6,
            seed: 5,
            ..GenOptions::default()
        });
        let mut text = Vec::new();
        recgen::write_recording(&execs, false, &mut text).expect("writes to memory");
        let input = [Input::Memory {
            name: "generated.jsonl",
            bytes: &text,
        }];
        load_inputs(&input, &LoadOptions::default(), &|_, _| {}).expect("the recording loads")
    }

    /// A per-token loss for every response token of every row: a deterministic pseudo-random
    /// value keyed by (execution, request, offset) of the target it is, so the same target has
    /// the same loss in whichever row it lands.
    fn token_loss(exec: &str, request: &str, offset: u32) -> f64 {
        let h = format!("{exec}/{request}/{offset}")
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
            });
        (h % 10_000) as f64 / 1000.0 - 5.0
    }

    /// Σ coefficient × loss over the rows of `execs`, with `b` as the step's B.
    fn step_loss(batch: &Batch, results: &Results, execs: &[usize], b: u64) -> f64 {
        let mut total = 0.0;
        for &i in execs {
            for row in execution_rows(batch, results, i) {
                let c = coefficients(&row.loss_mask, row.weight, b);
                for t in &row.targets {
                    for j in 0..t.len {
                        let at = (t.pos - row.prompt_len) as usize + j as usize;
                        total += c[at] * token_loss(&row.execution, &t.request, t.offset + j);
                    }
                }
            }
        }
        total
    }

    /// The docs/format.md §6 loss of executions `execs` as their own batch.
    fn contract_loss(batch: &Batch, results: &Results, execs: &[usize]) -> f64 {
        let per_exec: Vec<Vec<f64>> = execs
            .iter()
            .map(|&i| {
                execution_rows(batch, results, i)
                    .iter()
                    .flat_map(|row| {
                        row.targets.iter().flat_map(move |t| {
                            (0..t.len)
                                .map(move |j| token_loss(&row.execution, &t.request, t.offset + j))
                        })
                    })
                    .collect()
            })
            .collect();
        loss::batch_loss(per_exec.iter().map(|v| v.as_slice()), execs.len() as u64)
    }

    #[test]
    fn coefficients_are_mask_times_weight_over_b() {
        assert_eq!(
            coefficients(&[0, 1, 1, 0], 0.5, 4),
            vec![0.0, 0.125, 0.125, 0.0]
        );
        assert_eq!(coefficients(&[1], 1.0, 0), vec![0.0]);
        assert!(coefficients(&[], 1.0, 3).is_empty());
    }

    #[test]
    fn whole_batch_coefficients_give_the_batch_loss() {
        let batch = synth_batch();
        let results = crate::process::process(&batch, &Default::default(), AdvantageMode::DrGrpo);
        let all = counted(&results);
        assert_eq!(all.len() as u64, results.batch_executions);
        let got = step_loss(&batch, &results, &all, results.batch_executions);
        let want = contract_loss(&batch, &results, &all);
        assert!(
            (got - want).abs() <= 1e-12 * want.abs().max(1.0),
            "{got} vs {want}"
        );
        // Each execution's coefficients add up to 1/B (0 when it has no target).
        for &i in &all {
            let sum: f64 = execution_rows(&batch, &results, i)
                .iter()
                .flat_map(|r| coefficients(&r.loss_mask, r.weight, results.batch_executions))
                .sum();
            let want = if results.admissions[i].targets() == 0 {
                0.0
            } else {
                1.0 / results.batch_executions as f64
            };
            assert!(
                (sum - want).abs() < 1e-12 * want.max(1e-300),
                "execution {i}: {sum}"
            );
        }
    }

    #[test]
    fn steps_hold_whole_executions_and_their_own_b() {
        let batch = synth_batch();
        let results = crate::process::process(&batch, &Default::default(), AdvantageMode::DrGrpo);
        let all = counted(&results);
        for n in [1, 5, 7, all.len(), all.len() + 3] {
            let steps = steps(&all, n);
            let flat: Vec<usize> = steps.iter().flat_map(|s| s.executions.clone()).collect();
            assert_eq!(flat, all, "every counted execution once, in order");
            for (k, s) in steps.iter().enumerate() {
                assert_eq!(s.batch_executions as usize, s.executions.len());
                if k + 1 < steps.len() {
                    assert_eq!(s.executions.len(), n);
                }
                let got = step_loss(&batch, &results, &s.executions, s.batch_executions);
                let want = contract_loss(&batch, &results, &s.executions);
                assert!((got - want).abs() <= 1e-12 * want.abs().max(1.0));
            }
        }
    }

    #[test]
    fn shards_sum_to_the_step_and_balance_tokens() {
        let batch = synth_batch();
        let results = crate::process::process(&batch, &Default::default(), AdvantageMode::DrGrpo);
        let all = counted(&results);
        let step = &steps(&all, 16)[0];
        let want = contract_loss(&batch, &results, &step.executions);
        let tokens = |e| row_tokens(&batch, &results, e);
        for k in 1..=6 {
            let ranks = shard(step, tokens, k);
            assert_eq!(ranks.len(), k);
            let mut flat: Vec<usize> = ranks.iter().flat_map(|r| r.executions.clone()).collect();
            flat.sort_unstable();
            assert_eq!(
                flat, step.executions,
                "{k} ranks: each execution on one rank"
            );
            let got: f64 = ranks
                .iter()
                .map(|r| step_loss(&batch, &results, &r.executions, r.batch_executions))
                .sum();
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{k}: {got} vs {want}"
            );
            // Greedy largest-first: no rank exceeds the lightest by more than the largest
            // execution.
            let loads: Vec<u64> = ranks
                .iter()
                .map(|r| r.executions.iter().map(|&e| tokens(e)).sum())
                .collect();
            let largest = step.executions.iter().map(|&e| tokens(e)).max().unwrap();
            assert!(loads.iter().max().unwrap() - loads.iter().min().unwrap() <= largest);
        }
        // Deterministic.
        assert_eq!(shard(step, tokens, 3), shard(step, tokens, 3));
    }
}
