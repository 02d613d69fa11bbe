//! `trained_twice`: a token with the mask on in more than one sample of its execution, and the
//! execution's duplication factor (mask-on tokens over distinct mask-on tokens).

use super::finding::{Finding, Kind, Scope, runs};
use super::layout::Layout;
use crate::report::plural;

/// Mask-on tokens summed over an execution's samples, and how many distinct tokens they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trained {
    /// Σ over samples of mask-on tokens.
    pub tokens: u64,
    /// Distinct mask-on keys.
    pub distinct: u64,
}

/// One finding per maximal run of tokens a later sample trains again (dump order), naming the
/// first earlier sample that trained them; and the execution's mask-on counts.
pub fn trained_twice(scope: &Scope) -> (Vec<Finding>, Trained) {
    let (exec, layout) = (scope.exec, scope.layout);
    const NONE: u32 = u32::MAX;
    // Per key: the first sample that trained it.
    let mut first = vec![NONE; layout.keys()];
    let mut trained = Trained::default();
    let mut findings = Vec::new();
    for (s, sample) in layout.samples.iter().enumerate() {
        let keys = &sample.keys;
        let again = runs(keys.len(), |p| {
            if !Layout::mask_on(exec, s, p) {
                return None;
            }
            trained.tokens += 1;
            let slot = &mut first[keys[p] as usize];
            if *slot == NONE {
                *slot = s as u32;
                trained.distinct += 1;
                None
            } else {
                Some(*slot)
            }
        });
        for (start, end, other) in again {
            let mut f = Finding::new(Kind::TrainedTwice, scope.index, Some(s as u32), start, end);
            f.other = Some(other);
            f.request = layout.output(exec, keys[start as usize]).map(|(r, _)| r);
            f.value = Some(f64::from(end - start));
            let earlier = &exec.trained.list[other as usize].record.sample;
            f.detail = if other as usize == s {
                format!(
                    "{} at {start}..{end} trained again within this sample",
                    plural((end - start) as usize, "token")
                )
            } else {
                format!(
                    "{} at {start}..{end} already trained by sample {earlier}",
                    plural((end - start) as usize, "token")
                )
            };
            findings.push(f);
        }
    }
    (findings, trained)
}
