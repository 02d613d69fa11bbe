//! Loss normalisation (docs/format.md §6): per-execution denominators and the batch average.

use super::score::Outcome;

/// `B`: executions that count in the batch (scored and dummy).
pub fn batch_executions(outcomes: &[Outcome]) -> u64 {
    outcomes.iter().filter(|o| o.counts()).count() as u64
}

/// Coefficient of each target of an execution with `L_i = targets`: `1/L_i`, or 0 when empty.
pub fn target_weight(targets: u64) -> f64 {
    if targets == 0 {
        0.0
    } else {
        1.0 / targets as f64
    }
}

/// The batch loss `(1/B) Σ_i (1/L_i) Σ_{t∈T_i} ℓ_t`, given each counted execution's per-target
/// losses (one slice per execution, in any order, split across paths in any way).
pub fn batch_loss<'a>(executions: impl IntoIterator<Item = &'a [f64]>, b: u64) -> f64 {
    if b == 0 {
        return 0.0;
    }
    let sum: f64 = executions
        .into_iter()
        .map(|losses| target_weight(losses.len() as u64) * losses.iter().sum::<f64>())
        .sum();
    sum / b as f64
}
