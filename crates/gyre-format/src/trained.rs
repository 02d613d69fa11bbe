//! What a trainer trained on (docs/format.md §9): the `trained` record, one per training
//! sample, and the header's `trainer` object, each read and checked on its own line.
//!
//! Checks that need the execution's requests (a `request` piece names an earlier request of
//! the same execution and lies within its path; sample ids unique per execution) are the
//! engine's loader's, like `extends` for requests.

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use crate::id::Id;
use crate::line_error::LineError;
use crate::named::Named;

/// How a trainer's loss aggregates its tokens (the header's `trainer.loss_agg`): one spelling
/// per mode, as in verl's `loss_agg_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LossAgg {
    /// One mean over every mask-on token of the (mini)batch: prime-rl, SkyRL `token_mean`,
    /// verl `token-mean`.
    TokenMean,
    /// Mean over sequences of each sequence's token mean (SkyRL `sequence_mean`).
    SeqMeanTokenMean,
    /// Mean over sequences of each sequence's token sum.
    SeqMeanTokenSum,
    /// Sequence token sums divided by a fixed length (SkyRL `seq_mean_token_sum_norm`).
    SeqMeanTokenSumNorm,
    /// gyre's own: `1/L_i` per execution, mean over the batch's `B` executions (§6).
    ExecutionMean,
    /// The dump does not say and the framework has no single default.
    Unknown,
}

impl Named for LossAgg {
    const ALL: &'static [Self] = &[
        LossAgg::TokenMean,
        LossAgg::SeqMeanTokenMean,
        LossAgg::SeqMeanTokenSum,
        LossAgg::SeqMeanTokenSumNorm,
        LossAgg::ExecutionMean,
        LossAgg::Unknown,
    ];

    fn name(self) -> &'static str {
        match self {
            LossAgg::TokenMean => "token-mean",
            LossAgg::SeqMeanTokenMean => "seq-mean-token-mean",
            LossAgg::SeqMeanTokenSum => "seq-mean-token-sum",
            LossAgg::SeqMeanTokenSumNorm => "seq-mean-token-sum-norm",
            LossAgg::ExecutionMean => "execution-mean",
            LossAgg::Unknown => "unknown",
        }
    }

    fn help(self) -> &'static str {
        match self {
            LossAgg::TokenMean => "one mean over every mask-on token of the batch",
            LossAgg::SeqMeanTokenMean => "mean over samples of each sample's token mean",
            LossAgg::SeqMeanTokenSum => "mean over samples of each sample's token sum",
            LossAgg::SeqMeanTokenSumNorm => "token sums divided by a fixed length",
            LossAgg::ExecutionMean => "gyre: 1/L_i per execution, mean over B (§6)",
            LossAgg::Unknown => "the dump does not say",
        }
    }
}

impl fmt::Display for LossAgg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The header's `trainer` object: what wrote the `trained` records of the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Trainer {
    /// The trainer's name (`prime-rl`, `slime`, `gyre`, …).
    pub name: String,
    /// Its version; `None` when the dump does not say (never guessed).
    pub version: Option<String>,
    /// How its loss aggregates tokens (`unknown` when absent).
    pub loss_agg: LossAgg,
    /// What the importer inferred because the dump was silent, one sentence each.
    pub inferred: Vec<String>,
    /// Anything else worth keeping.
    pub meta: Option<Value>,
}

#[derive(Deserialize)]
#[serde(expecting = "a trainer object such as {\"name\": \"slime\", \"loss_agg\": \"token-mean\"}")]
struct RawTrainer {
    name: Option<String>,
    version: Option<String>,
    loss_agg: Option<String>,
    inferred: Option<Vec<String>>,
    meta: Option<Value>,
}

impl Trainer {
    /// The header's `trainer`, when it has one; an error names the field at fault.
    pub fn from_header(header: &Value) -> Result<Option<Trainer>, LineError> {
        let Some(raw) = header.get("trainer") else {
            return Ok(None);
        };
        let raw = RawTrainer::deserialize(raw).map_err(|e| {
            LineError::new(
                format!("trainer: {}", strip_position(&e.to_string())),
                "trainer",
            )
        })?;
        let name = raw
            .name
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| LineError::new("trainer needs a non-empty `name`", "trainer.name"))?;
        let loss_agg = match raw.loss_agg.as_deref() {
            None => LossAgg::Unknown,
            Some(s) => LossAgg::parse(s).ok_or_else(|| {
                LineError::new(
                    format!(
                        "trainer.loss_agg \"{s}\" is not one of {}",
                        LossAgg::names()
                    ),
                    "trainer.loss_agg",
                )
            })?,
        };
        Ok(Some(Trainer {
            name,
            version: raw.version,
            loss_agg,
            inferred: raw.inferred.unwrap_or_default(),
            meta: raw.meta,
        }))
    }
}

/// One piece of a sample's token sequence.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    /// Positions `start..end` of a request's full path (its full input + its output, §2).
    Request {
        /// The request id (of the sample's execution).
        request: String,
        /// First position.
        start: u32,
        /// Exclusive end.
        end: u32,
    },
    /// Literal ids: tokens the sample holds that do not match a request.
    Ids(Vec<u32>),
}

impl Piece {
    /// How many tokens the piece stands for.
    pub fn len(&self) -> usize {
        match self {
            Piece::Request { start, end, .. } => (end - start) as usize,
            Piece::Ids(ids) => ids.len(),
        }
    }

    /// Whether the piece stands for no token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A sample's advantage: one number for the sample, or one per response token.
#[derive(Clone, Debug, PartialEq)]
pub enum Advantage {
    /// Sample-level.
    Sample(f64),
    /// Per response token (`None` = no value for that token).
    PerToken(Vec<Option<f64>>),
}

/// Where a sample sits in the dump it was imported from.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleSource {
    /// The dump file, as given on the command line.
    pub file: String,
    /// The sample's position in it, from 0 (padding rows excluded).
    pub index: u64,
}

/// A `trained` line, checked on its own: one training sample as the trainer saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainedRecord {
    /// The execution the sample belongs to.
    pub execution: String,
    /// The trainer's own sample id (unique within the execution).
    pub sample: String,
    /// The full token sequence (prompt + response, no padding), as pieces in order.
    pub tokens: Vec<Piece>,
    /// Index of the first response token in `tokens`.
    pub prompt_len: u32,
    /// The loss mask the trainer used, 0 or 1 per response token.
    pub loss_mask: Vec<u8>,
    /// Where the sample was in its dump.
    pub source: Option<SampleSource>,
    /// GRPO group id.
    pub group: Option<Value>,
    /// Optimizer step.
    pub step: Option<u64>,
    /// Reward.
    pub reward: Option<f64>,
    /// Advantage, per sample or per response token.
    pub advantage: Option<Advantage>,
    /// The per-sample loss weight the trainer applied.
    pub weight: Option<f64>,
    /// The rollout (behaviour) log-probs as the trainer saw them, per response token.
    pub behaviour_logprobs: Option<Vec<Option<f64>>>,
    /// The trainer's own recomputed log-probs, per response token.
    pub trainer_logprobs: Option<Vec<Option<f64>>>,
    /// The reference model's log-probs, per response token.
    pub ref_logprobs: Option<Vec<Option<f64>>>,
    /// An auxiliary loss's mask, 0 or 1 per response token (never inside `loss_mask`).
    pub aux_mask: Option<Vec<u8>>,
    /// The auxiliary loss's name.
    pub aux_loss: Option<String>,
    /// Anything else from the dump.
    pub meta: Option<Value>,
}

impl TrainedRecord {
    /// Length of the full token sequence (the pieces' lengths summed).
    pub fn len(&self) -> usize {
        self.tokens.iter().map(Piece::len).sum()
    }

    /// Whether the sample holds no token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of response tokens (the length of every per-token array).
    pub fn response_len(&self) -> usize {
        self.len() - self.prompt_len as usize
    }

    /// Response tokens the policy-gradient loss runs over (mask on).
    pub fn trained_tokens(&self) -> usize {
        self.loss_mask.iter().filter(|&&m| m == 1).count()
    }

    /// Response tokens the auxiliary loss runs over.
    pub fn aux_tokens(&self) -> usize {
        self.aux_mask
            .as_ref()
            .map_or(0, |m| m.iter().filter(|&&v| v == 1).count())
    }

    /// How many mask-on tokens have a value in `logprobs` (0.0 counts; `None` = the array
    /// is absent, 0).
    pub fn masked_values(&self, logprobs: Option<&[Option<f64>]>) -> usize {
        logprobs.map_or(0, |lp| {
            self.loss_mask
                .iter()
                .zip(lp)
                .filter(|(m, v)| **m == 1 && v.is_some())
                .count()
        })
    }
}

/// Longest sample read: positions are `u32` everywhere in gyre.
const MAX_TOKENS: u64 = u32::MAX as u64;

#[derive(Deserialize)]
#[serde(
    expecting = "a piece such as {\"request\": \"r1\", \"start\": 0, \"end\": 9} or {\"ids\": [1, 2]}"
)]
struct RawPiece {
    request: Option<Id>,
    start: Option<u64>,
    end: Option<u64>,
    ids: Option<Vec<u32>>,
}

#[derive(Deserialize)]
#[serde(expecting = "a source object such as {\"file\": \"rollout_data/3.pt\", \"index\": 5}")]
struct RawSource {
    file: String,
    index: u64,
}

/// A number, or an array of numbers and nulls.
enum RawAdvantage {
    One(f64),
    Each(Vec<Option<f64>>),
}

impl<'de> Deserialize<'de> for RawAdvantage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawAdvantage;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or an array of numbers and nulls")
            }
            fn visit_f64<E>(self, v: f64) -> Result<RawAdvantage, E> {
                Ok(RawAdvantage::One(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<RawAdvantage, E> {
                Ok(RawAdvantage::One(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<RawAdvantage, E> {
                Ok(RawAdvantage::One(v as f64))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawAdvantage, A::Error> {
                let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(v) = seq.next_element::<Option<f64>>()? {
                    values.push(v);
                }
                Ok(RawAdvantage::Each(values))
            }
        }
        d.deserialize_any(V)
    }
}

/// Every field a `trained` line may carry (unknown members are ignored).
#[derive(Deserialize)]
#[serde(expecting = "a trained record object")]
struct RawTrained {
    execution: Option<Id>,
    sample: Option<Id>,
    tokens: Option<Vec<RawPiece>>,
    prompt_len: Option<u64>,
    loss_mask: Option<Vec<u8>>,
    source: Option<RawSource>,
    group: Option<Value>,
    step: Option<u64>,
    reward: Option<f64>,
    advantage: Option<RawAdvantage>,
    weight: Option<f64>,
    behaviour_logprobs: Option<Vec<Option<f64>>>,
    trainer_logprobs: Option<Vec<Option<f64>>>,
    ref_logprobs: Option<Vec<Option<f64>>>,
    aux_mask: Option<Vec<u8>>,
    aux_loss: Option<String>,
    meta: Option<Value>,
}

/// Reads and checks a `trained` line (a JSON object already known to be one, without repeated
/// keys): types, piece shapes, `prompt_len`, array lengths and mask values.
pub fn parse_trained(line: &[u8]) -> Result<TrainedRecord, LineError> {
    let de = &mut serde_json::Deserializer::from_slice(line);
    let raw: RawTrained = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let detail = strip_position(&e.into_inner().to_string());
        let detail = if path.starts_with("loss_mask[") || path.starts_with("aux_mask[") {
            format!("mask values are 0 or 1: {detail}")
        } else {
            detail
        };
        LineError {
            message: detail,
            field: (path != "." && path != "?" && !path.is_empty()).then_some(path),
        }
    })?;
    let missing = LineError::missing;
    let execution = raw.execution.ok_or_else(|| missing("execution"))?.0;
    let sample = raw.sample.ok_or_else(|| missing("sample"))?.0;
    let raw_tokens = raw.tokens.ok_or_else(|| missing("tokens"))?;
    let prompt_len = raw.prompt_len.ok_or_else(|| missing("prompt_len"))?;
    let loss_mask = raw.loss_mask.ok_or_else(|| missing("loss_mask"))?;
    let mut tokens = Vec::with_capacity(raw_tokens.len());
    let mut total = 0u64;
    for (i, p) in raw_tokens.into_iter().enumerate() {
        let piece = piece(p).map_err(|m| LineError::new(m, format!("tokens[{i}]")))?;
        total += piece.len() as u64;
        if total > MAX_TOKENS {
            return Err(LineError::new(
                format!("the sample is longer than {MAX_TOKENS} tokens"),
                format!("tokens[{i}]"),
            ));
        }
        tokens.push(piece);
    }
    if prompt_len > total {
        return Err(LineError::new(
            format!("prompt_len {prompt_len} is past the sample's {total} tokens"),
            "prompt_len",
        ));
    }
    let response = (total - prompt_len) as usize;
    let fits = |field: &str, n: usize| {
        if n == response {
            Ok(())
        } else {
            Err(LineError::new(
                format!(
                    "{field} has {n} entries but the response has {response} tokens (len(tokens) {total} − prompt_len {prompt_len})"
                ),
                field,
            ))
        }
    };
    fits("loss_mask", loss_mask.len())?;
    check_mask("loss_mask", &loss_mask)?;
    for (field, values) in [
        ("behaviour_logprobs", &raw.behaviour_logprobs),
        ("trainer_logprobs", &raw.trainer_logprobs),
        ("ref_logprobs", &raw.ref_logprobs),
    ] {
        if let Some(v) = values {
            fits(field, v.len())?;
        }
    }
    let advantage = match raw.advantage {
        None => None,
        Some(RawAdvantage::One(a)) => Some(Advantage::Sample(a)),
        Some(RawAdvantage::Each(v)) => {
            fits("advantage", v.len())?;
            Some(Advantage::PerToken(v))
        }
    };
    match (&raw.aux_mask, &raw.aux_loss) {
        (Some(m), Some(name)) if !name.trim().is_empty() => {
            fits("aux_mask", m.len())?;
            check_mask("aux_mask", m)?;
        }
        (Some(_), _) => {
            return Err(LineError::new(
                "aux_mask needs aux_loss, the auxiliary loss's name",
                "aux_loss",
            ));
        }
        (None, Some(_)) => {
            return Err(LineError::new(
                "aux_loss needs aux_mask, the tokens it runs over",
                "aux_mask",
            ));
        }
        (None, None) => {}
    }
    Ok(TrainedRecord {
        execution,
        sample,
        tokens,
        prompt_len: prompt_len as u32,
        loss_mask,
        source: raw.source.map(|s| SampleSource {
            file: s.file,
            index: s.index,
        }),
        group: raw.group.filter(|g| !g.is_null()),
        step: raw.step,
        reward: raw.reward,
        advantage,
        weight: raw.weight,
        behaviour_logprobs: raw.behaviour_logprobs,
        trainer_logprobs: raw.trainer_logprobs,
        ref_logprobs: raw.ref_logprobs,
        aux_mask: raw.aux_mask,
        aux_loss: raw.aux_loss,
        meta: raw.meta,
    })
}

fn piece(p: RawPiece) -> Result<Piece, String> {
    match (p.request, p.ids) {
        (Some(request), None) => {
            let (Some(start), Some(end)) = (p.start, p.end) else {
                return Err("a request piece needs `start` and `end`".into());
            };
            if start > end || end > MAX_TOKENS {
                return Err(format!(
                    "piece positions {start}..{end} are not a range within 0..2^32"
                ));
            }
            Ok(Piece::Request {
                request: request.0,
                start: start as u32,
                end: end as u32,
            })
        }
        (None, Some(ids)) if p.start.is_none() && p.end.is_none() => Ok(Piece::Ids(ids)),
        (None, Some(_)) => Err("an `ids` piece has no `start` or `end`".into()),
        (Some(_), Some(_)) => Err("a piece is `request` or `ids`, not both".into()),
        (None, None) => Err("a piece needs `request` (with start, end) or `ids`".into()),
    }
}

fn check_mask(field: &str, mask: &[u8]) -> Result<(), LineError> {
    match mask.iter().position(|&m| m > 1) {
        Some(i) => Err(LineError::new(
            format!("mask values are 0 or 1, found {}", mask[i]),
            format!("{field}[{i}]"),
        )),
        None => Ok(()),
    }
}

/// serde_json appends " at line 1 column N"; the line is already named.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}
