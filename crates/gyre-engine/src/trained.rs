//! What a trainer trained on (docs/format.md §9), per execution: each `trained` record with its
//! request pieces resolved to the execution's requests, in dump order, and the counts
//! (`samples`, `trained_tokens`, …) that `gyre stats` and the audit report; and gyre's own
//! admitted rows as `trained` records (`gyre admit --format trained`, and read back from
//! `gyre/admitted-1` JSONL).

use std::io::{self, BufRead, Write};

use gyre_format::named::Named;
use gyre_format::trained::{LossAgg, Piece, Trainer};
use gyre_format::write::{
    AdvantageOut, Gyre1, HeaderOut, Line, LineWriter, PieceOut, TrainedOut, TrainerOut,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::execution::Execution;
use super::load::Batch;
use super::process::Results;
use super::rows::{Row, execution_rows};
pub use super::samples::{Sample, Samples};

impl Execution {
    /// The token ids of sample `s` of this execution (its pieces, concatenated).
    pub fn sample_tokens(&self, s: &Sample) -> Vec<u32> {
        let mut out = Vec::with_capacity(s.record.len());
        for (piece, idx) in s.record.tokens.iter().zip(&s.requests) {
            match (piece, idx) {
                (Piece::Request { start, end, .. }, Some(idx)) => {
                    let path = self.path_tokens(*idx);
                    out.extend_from_slice(&path[*start as usize..*end as usize]);
                }
                (Piece::Ids(ids), _) => out.extend_from_slice(ids),
                // `Samples::add` resolves every request piece.
                (Piece::Request { .. }, None) => {}
            }
        }
        out
    }
}

/// What the trained records of an input hold (docs/format.md §9, "Counts").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TrainedCounts {
    /// Executions with at least one sample.
    pub executions: u64,
    /// Training samples (padding rows are never written).
    pub samples: u64,
    /// Σ over samples of mask-on tokens: what the policy-gradient loss runs over.
    pub trained_tokens: u64,
    /// Σ over samples of auxiliary-loss tokens (reported beside, never inside, the above).
    pub aux_tokens: u64,
    /// Mask-on tokens with a behaviour log-prob (0.0 counts).
    pub behaviour_logprobs: u64,
    /// Mask-on tokens with a trainer log-prob (0.0 counts).
    pub trainer_logprobs: u64,
}

impl TrainedCounts {
    /// The counts over `executions`.
    pub fn of<'a>(executions: impl IntoIterator<Item = &'a Execution>) -> Self {
        let mut c = TrainedCounts::default();
        for e in executions {
            if e.trained.list.is_empty() {
                continue;
            }
            c.executions += 1;
            for s in &e.trained.list {
                let r = &s.record;
                c.samples += 1;
                c.trained_tokens += r.trained_tokens() as u64;
                c.aux_tokens += r.aux_tokens() as u64;
                c.behaviour_logprobs += r.masked_values(r.behaviour_logprobs.as_deref()) as u64;
                c.trainer_logprobs += r.masked_values(r.trainer_logprobs.as_deref()) as u64;
            }
        }
        c
    }
}

impl Batch {
    /// What wrote the batch's `trained` records: the first header naming a `trainer`.
    pub fn trainer(&self) -> Option<Trainer> {
        self.headers
            .iter()
            .flatten()
            .find_map(|(h, _)| Trainer::from_header(h).ok().flatten())
    }

    /// The counts of the batch's `trained` records.
    pub fn trained_counts(&self) -> TrainedCounts {
        TrainedCounts::of(&self.executions)
    }
}

/// What `gyre admit` writes: `gyre/admitted-1` rows (§8), or the same rows as `trained`
/// records (§9) to read beside the recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowFormat {
    /// `gyre/admitted-1` rows (docs/format.md §8).
    Admitted,
    /// gyre/1 `trained` records (docs/format.md §9).
    Trained,
}

impl Named for RowFormat {
    const ALL: &'static [Self] = &[RowFormat::Admitted, RowFormat::Trained];

    fn name(self) -> &'static str {
        match self {
            RowFormat::Admitted => "admitted",
            RowFormat::Trained => "trained",
        }
    }

    fn help(self) -> &'static str {
        match self {
            RowFormat::Admitted => "gyre/admitted-1 rows (docs/format.md §8)",
            RowFormat::Trained => "gyre/1 trained records, read beside the recording (§9)",
        }
    }
}

/// An admitted row (docs/format.md §8) as far as a `trained` record needs it: built from
/// what `gyre admit` computes, or read back from `gyre/admitted-1` JSONL.
#[derive(Clone, Debug, Deserialize)]
pub struct AdmittedRow {
    /// Execution id.
    pub execution: String,
    /// GRPO group.
    #[serde(default)]
    pub group: Option<Value>,
    /// 1-based draw index.
    pub draw: u32,
    /// Leaf request id.
    #[serde(default)]
    pub leaf: Option<String>,
    /// Leaf class.
    #[serde(default)]
    pub class: Option<String>,
    /// Reward.
    pub reward: f64,
    /// Advantage (absent with `--advantage none`).
    #[serde(default)]
    pub advantage: Option<f64>,
    /// A dummy's placeholder.
    pub dummy: bool,
    /// The leaf's path.
    pub tokens: Vec<u32>,
    /// Index of the first response token.
    pub prompt_len: u64,
    /// 0/1 per response token.
    pub loss_mask: Vec<u8>,
    /// Behaviour log-probs per response token (0.0 off-policy), or none.
    #[serde(default)]
    pub logprobs: Option<Vec<f64>>,
    /// `1/L_i`.
    pub weight: f64,
}

impl From<&Row> for AdmittedRow {
    fn from(r: &Row) -> Self {
        AdmittedRow {
            execution: r.execution.clone(),
            group: r.group.clone(),
            draw: r.draw,
            leaf: r.leaf.clone(),
            class: r.class.map(|c| c.name().to_owned()),
            reward: r.reward,
            advantage: r.advantage.flatten(),
            dummy: r.dummy,
            tokens: r.tokens.clone(),
            prompt_len: r.prompt_len,
            loss_mask: r.loss_mask.clone(),
            logprobs: r.logprobs.clone(),
            weight: r.weight,
        }
    }
}

/// The header of gyre's own rows as `trained` records: gyre, this version, `execution-mean`.
fn gyre_header(out: &mut LineWriter<&mut dyn Write>) -> io::Result<()> {
    out.write(&Line::Header(HeaderOut {
        format: Gyre1,
        tokenizer: None,
        trainer: Some(TrainerOut {
            name: "gyre",
            version: Some(env!("CARGO_PKG_VERSION")),
            loss_agg: LossAgg::ExecutionMean,
            inferred: &[],
            meta: None,
        }),
        meta: None,
    }))
}

/// Writes `row` as a `trained` record. The sample is one piece, the leaf's path, when
/// `exec` holds the leaf and its path is the row's tokens; literal ids otherwise (the
/// difference stays visible). Returns whether the row matched its leaf.
fn write_row(
    out: &mut LineWriter<&mut dyn Write>,
    row: &AdmittedRow,
    exec: Option<&Execution>,
) -> io::Result<bool> {
    let leaf = row.leaf.as_deref().and_then(|leaf| {
        let exec = exec?;
        let idx = exec.request_index(leaf)?;
        (exec.path_tokens(idx) == row.tokens).then_some(leaf)
    });
    let pieces = [match leaf {
        Some(request) => PieceOut::Request {
            request,
            start: 0,
            end: row.tokens.len() as u32,
        },
        None => PieceOut::Ids { ids: &row.tokens },
    }];
    // §8 writes 0.0 where a response token has no behaviour log-prob (context, or a policy
    // token the row does not train); §9 says "no value" with null. Targets always carry
    // theirs; elsewhere a recorded 0.0 cannot be told from the filler and reads as null.
    let behaviour: Option<Vec<Option<f64>>> = row.logprobs.as_ref().map(|lp| {
        lp.iter()
            .zip(&row.loss_mask)
            .map(|(&v, &m)| (m == 1 || v != 0.0).then_some(v))
            .collect()
    });
    let mut meta = Map::new();
    if let Some(class) = &row.class {
        meta.insert("class".into(), Value::from(class.as_str()));
    }
    if row.dummy {
        meta.insert("dummy".into(), Value::Bool(true));
    }
    let sample = row.draw.to_string();
    let record = TrainedOut {
        group: row.group.as_ref(),
        reward: Some(row.reward),
        advantage: row.advantage.map(AdvantageOut::Sample),
        weight: Some(row.weight),
        behaviour_logprobs: behaviour.as_deref(),
        meta: Some(&meta).filter(|m| !m.is_empty()),
        ..TrainedOut::new(
            &row.execution,
            &sample,
            &pieces,
            row.prompt_len as u32,
            &row.loss_mask,
        )
    };
    out.write(&Line::Trained(record))?;
    Ok(leaf.is_some())
}

/// Writes the batch's admitted rows as `trained` records (`gyre admit --format trained`),
/// in the order of `gyre/admitted-1`: a header naming gyre as the trainer, then one record
/// per row. Returns the number of rows.
pub fn write_trained(batch: &Batch, results: &Results, out: &mut dyn Write) -> io::Result<u64> {
    let mut w = LineWriter::new(out);
    gyre_header(&mut w)?;
    let mut rows = 0;
    for (i, exec) in batch.executions.iter().enumerate() {
        for row in execution_rows(batch, results, i) {
            write_row(&mut w, &AdmittedRow::from(&row), Some(exec))?;
            rows += 1;
        }
    }
    w.flush()?;
    Ok(rows)
}

/// What [`import_admitted`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdmittedImport {
    /// Rows read and written.
    pub rows: u64,
    /// Rows whose tokens are not their leaf's path in the recording (written as literal ids).
    pub unmatched: u64,
}

/// Reads `gyre/admitted-1` rows (JSONL, from `rows`, reported as `name`) and writes them as
/// `trained` records against `batch`, the recording they were admitted from: the same bytes
/// `gyre admit --format trained` writes for the same rows. A line that is not a row is an
/// error naming it.
pub fn import_admitted(
    batch: &Batch,
    rows: impl BufRead,
    name: &str,
    out: &mut dyn Write,
) -> eyre::Result<AdmittedImport> {
    let mut w = LineWriter::new(out);
    gyre_header(&mut w)?;
    let mut done = AdmittedImport::default();
    for (n, line) in rows.lines().enumerate() {
        let line = line.map_err(|e| eyre::eyre!("{name}:{}: {e}", n + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let row: AdmittedRow = serde_json::from_str(&line).map_err(|e| {
            eyre::eyre!(
                "{name}:{}: not a gyre/admitted-1 row: {}",
                n + 1,
                gyre_format::sanitize(&e.to_string())
            )
        })?;
        let exec = batch
            .execution_index(&row.execution)
            .map(|i| &batch.executions[i]);
        if !write_row(&mut w, &row, exec)? {
            done.unmatched += u64::from(row.leaf.is_some());
        }
        done.rows += 1;
    }
    w.flush()?;
    Ok(done)
}
