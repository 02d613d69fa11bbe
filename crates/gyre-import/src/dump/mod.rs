//! What the trainer-dump importers (slime, SkyRL, prime-rl) share: one [`Row`] per training sample, as
//! the trainer saw it, cut into the requests the policy sampled and written as those requests
//! plus one `trained` record (docs/format.md §9, docs/import.md "Trainer dumps").
//!
//! A row's response is cut at its sampled mask: each run of sampled tokens is one request whose
//! input is everything before it (the prompt, earlier turns, tool output) and whose output is
//! the run, with its behaviour log-probs. A request identical to an earlier one of the same
//! execution (same input, same output) is that request: the policy sampled it once, and two
//! samples holding it both point at it.

pub mod field;
mod write;

pub use write::Rows;

use std::ops::Range;
use std::path::{Path, PathBuf};

use gyre_engine::record::Source;
use serde_json::{Map, Value};

/// Where the tokens of a row up to `end` (exclusive, an offset into [`Row::tokens`]) came
/// from: the requests' spans (docs/format.md §1).
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    /// Exclusive end offset into the row's tokens.
    pub end: usize,
    /// Where the tokens came from.
    pub source: Source,
    /// For `tool` tokens: the call the result answers.
    pub call_id: Option<String>,
}

/// An auxiliary loss on other tokens than the policy-gradient mask (prime-rl's ECHO
/// cross-entropy on tool output).
#[derive(Clone, Debug, PartialEq)]
pub struct Aux {
    /// The loss's name (`echo-ce`).
    pub loss: String,
    /// 0 or 1 per response token.
    pub mask: Vec<u8>,
}

/// An advantage as the dump holds it.
#[derive(Clone, Debug, PartialEq)]
pub enum Advantage {
    /// One number for the sample.
    Sample(f64),
    /// One value per response token.
    PerToken(Vec<Option<f64>>),
}

/// One training sample of a dump.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    /// The execution it belongs to.
    pub execution: String,
    /// The trainer's sample id, unique within the execution.
    pub sample: String,
    /// GRPO group.
    pub group: Option<Value>,
    /// Optimizer step (the dump's rollout or global step).
    pub step: Option<u64>,
    /// The dump file, as given on the command line (or found in the folder given).
    pub file: String,
    /// The sample's position in it, from 0 (padding rows excluded).
    pub index: u64,
    /// Prompt + response, no padding.
    pub tokens: Vec<u32>,
    /// Index of the first response token.
    pub prompt_len: usize,
    /// Per response token: 1 = the policy sampled it (cuts requests; the rollout's own mask).
    pub sampled: Vec<u8>,
    /// Per response token: the loss mask the trainer used.
    pub loss_mask: Vec<u8>,
    /// Behaviour log-probs per response token (`None` inside = no value).
    pub behaviour: Option<Vec<Option<f64>>>,
    /// The trainer's log-probs per response token.
    pub trainer: Option<Vec<Option<f64>>>,
    /// The reference model's log-probs per response token.
    pub reference: Option<Vec<Option<f64>>>,
    /// Advantage.
    pub advantage: Option<Advantage>,
    /// Reward.
    pub reward: Option<f64>,
    /// Anything else worth keeping.
    pub meta: Map<String, Value>,
    /// Labels of the tokens, in order (empty: every input token is `context`).
    pub labels: Vec<Label>,
    /// The agent that sampled the row's runs (`None`: `main`).
    pub agent: Option<String>,
    /// An auxiliary loss beside the policy-gradient mask.
    pub aux: Option<Aux>,
    /// The trainer did not train the row: its sampled runs are written as requests (what
    /// the policy sampled), and no `trained` record.
    pub requests_only: bool,
}

impl Row {
    /// Response tokens.
    pub fn response_len(&self) -> usize {
        self.tokens.len() - self.prompt_len
    }

    /// The sampled runs, as ranges of `tokens`.
    pub fn segments(&self) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut start = None;
        for (i, &m) in self.sampled.iter().enumerate() {
            match (m != 0, start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    out.push(self.prompt_len + s..self.prompt_len + i);
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            out.push(self.prompt_len + s..self.tokens.len());
        }
        out
    }

    /// Mask-on tokens (the trainer's loss mask).
    pub fn trained_tokens(&self) -> u64 {
        self.loss_mask.iter().map(|&m| u64::from(m)).sum()
    }

    /// Checks the per-response-token arrays against the response: what is wrong, with the
    /// field it concerns.
    pub fn check(&self) -> Result<(), (String, &'static str)> {
        let n = self.response_len();
        let len = |what: &'static str, got: usize| {
            if got == n {
                Ok(())
            } else {
                Err((format!("{got} values for a response of {n} tokens"), what))
            }
        };
        len("sampled mask", self.sampled.len())?;
        len("loss_mask", self.loss_mask.len())?;
        for (what, v) in [
            ("behaviour log-probs", &self.behaviour),
            ("trainer log-probs", &self.trainer),
            ("reference log-probs", &self.reference),
        ] {
            if let Some(v) = v {
                len(what, v.len())?;
            }
        }
        if let Some(Advantage::PerToken(v)) = &self.advantage {
            len("advantages", v.len())?;
        }
        if let Some(aux) = &self.aux {
            len("aux mask", aux.mask.len())?;
        }
        Ok(())
    }
}

/// The dump files the inputs name: a folder stands for the files `listing` finds in it, a file
/// for itself (in the order given).
pub fn files(inputs: &[PathBuf], listing: fn(&Path) -> Vec<PathBuf>) -> Vec<PathBuf> {
    inputs
        .iter()
        .flat_map(|p| {
            if p.is_dir() {
                listing(p)
            } else {
                vec![p.clone()]
            }
        })
        .collect()
}

/// Token ids from a dump's integers: each must fit gyre/1's ids (0 to 2^32 − 1).
pub fn token_ids(values: &[i64]) -> Result<Vec<u32>, String> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| u32::try_from(v).map_err(|_| format!("token {i} is {v}, not a token id")))
        .collect()
}

/// A 0/1 mask from a dump's numbers (integer or float tensors both occur).
pub fn mask(values: &[f64]) -> Result<Vec<u8>, String> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| match v {
            0.0 => Ok(0),
            1.0 => Ok(1),
            v => Err(format!("mask value {i} is {v}, not 0 or 1")),
        })
        .collect()
}

/// Behaviour log-probs: a value where the policy sampled the token; the dump's placeholder
/// (0.0) elsewhere is no value.
pub fn behaviour(values: &[f64], sampled: &[u8]) -> Vec<Option<f64>> {
    values
        .iter()
        .zip(sampled)
        .map(|(&v, &s)| (s != 0).then_some(v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_the_sampled_runs() {
        let row = Row {
            tokens: (0..10).collect(),
            prompt_len: 3,
            sampled: vec![1, 1, 0, 0, 1, 0, 1],
            loss_mask: vec![1, 1, 0, 0, 1, 0, 1],
            ..Row::default()
        };
        assert_eq!(row.segments(), [3..5, 7..8, 9..10]);
        assert_eq!(row.trained_tokens(), 4);
        assert!(row.check().is_ok());
        let none = Row {
            sampled: vec![0; 7],
            ..row.clone()
        };
        assert!(none.segments().is_empty());
        let short = Row {
            trainer: Some(vec![None; 6]),
            ..row
        };
        assert_eq!(short.check().unwrap_err().1, "trainer log-probs");
    }

    #[test]
    fn values_are_checked() {
        assert_eq!(token_ids(&[0, 151_643]).unwrap(), [0, 151_643]);
        assert!(token_ids(&[-1]).unwrap_err().contains("token 0 is -1"));
        assert!(token_ids(&[1 << 32]).is_err());
        assert_eq!(mask(&[0.0, 1.0]).unwrap(), [0, 1]);
        assert!(mask(&[0.5]).is_err());
        assert_eq!(
            behaviour(&[-0.5, 0.0, -0.25], &[1, 0, 1]),
            [Some(-0.5), None, Some(-0.25)]
        );
    }
}
