//! Writing imported records: every line goes through the engine's validating
//! [`Recorder`], so nothing the loader would refuse reaches
//! the output (which is only renamed into place once every record has passed), and requests
//! that continue an earlier one are delta-encoded automatically.

use std::collections::HashSet;
use std::path::Path;

use eyre::{Result, WrapErr};
use serde_json::{Map, Value};

pub use gyre_engine::write::{
    AdvantageOut, AssessmentOut, ClosureOut, ExecutionOut, Gyre1, HeaderOut, PieceOut, RequestOut,
    SourceOut, SpanOut, ToolCallOut, TrainedOut, TrainerOut, Validity,
};
pub use gyre_format::output::Sink;
pub use gyre_format::trained::{LossAgg, Trainer};

use super::Summary;
use super::error::bad;
use gyre_engine::recorder::{RecordError, Recorder};
use gyre_text::label::Span;

/// Spans as written.
pub fn spans_out(spans: &[Span]) -> Vec<SpanOut<'_>> {
    spans.iter().map(SpanOut::from).collect()
}

/// Where a record comes from in the input: its errors are reported there.
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    /// The input file.
    pub file: &'a Path,
    /// Its line (0 = the file as a whole).
    pub line: u64,
}

/// The output of an import: a validating recorder over the output file, and what was written.
pub struct Out {
    rec: Recorder<Sink>,
    summary: Summary,
    executions: HashSet<String>,
}

impl Out {
    /// Writes to `sink`, starting with a header naming `tokenizer` and carrying `meta`.
    /// With `trainer`, the header names what wrote the `trained` records (docs/format.md §9).
    pub fn new(
        sink: Sink,
        tokenizer: &Value,
        meta: &Map<String, Value>,
        trainer: Option<&Trainer>,
    ) -> Result<Self> {
        let mut rec = Recorder::new(sink);
        rec.header_line(&HeaderOut {
            format: Gyre1,
            tokenizer: Some(tokenizer),
            trainer: trainer.map(TrainerOut::from),
            meta: Some(meta),
        })
        .map_err(|e| eyre::eyre!("writing the header: {e}"))?;
        Ok(Self {
            rec,
            summary: Summary::default(),
            executions: HashSet::new(),
        })
    }

    fn fail(e: RecordError, at: At) -> eyre::Report {
        match e {
            RecordError::Invalid(e) => bad(
                at.file,
                at.line,
                format!("would write an invalid record: {}", e.message),
                e.field.as_deref(),
            ),
            RecordError::Io(e) => eyre::Report::from(e).wrap_err("writing the output"),
        }
    }

    /// Writes an `execution` line.
    pub fn execution(&mut self, rec: &ExecutionOut, at: At) -> Result<()> {
        self.rec.execution(rec).map_err(|e| Self::fail(e, at))?;
        self.seen(rec.execution);
        Ok(())
    }

    /// Writes a request; `rec.input` is the full input (the recorder picks the delta form).
    pub fn request(&mut self, rec: &RequestOut, at: At) -> Result<()> {
        let written = self.rec.request(rec).map_err(|e| Self::fail(e, at))?;
        self.seen(rec.execution);
        let s = &mut self.summary;
        s.requests += 1;
        s.input_tokens += rec.input.len() as u64;
        s.output_tokens += rec.output.len() as u64;
        s.delta_requests += u64::from(written.extends.is_some());
        s.written_input_tokens += written.input_tokens as u64;
        if let Some(why) = rec.not_trainable {
            *s.not_trainable.entry(why.to_owned()).or_default() += 1;
        }
        Ok(())
    }

    /// Writes an `assessment`.
    pub fn assessment(&mut self, rec: &AssessmentOut, at: At) -> Result<()> {
        self.rec.assessment(rec).map_err(|e| Self::fail(e, at))?;
        self.seen(rec.execution);
        Ok(())
    }

    /// Writes a `closure`.
    pub fn closure(&mut self, rec: &ClosureOut, at: At) -> Result<()> {
        self.rec.closure(rec).map_err(|e| Self::fail(e, at))?;
        self.seen(rec.execution);
        Ok(())
    }

    /// Writes a `trained` record (before its execution's closure: see
    /// [`Recorder::trained`]).
    pub fn trained(&mut self, rec: &TrainedOut, at: At) -> Result<()> {
        self.rec.trained(rec).map_err(|e| Self::fail(e, at))?;
        self.seen(rec.execution);
        let s = &mut self.summary;
        s.samples += 1;
        let on = |m: &[u8]| m.iter().filter(|&&v| v == 1).count() as u64;
        s.trained_tokens += on(rec.loss_mask);
        s.aux_tokens += rec.aux_mask.map_or(0, on);
        let present = |lp: Option<&[Option<f64>]>| {
            lp.map_or(0, |lp| {
                rec.loss_mask
                    .iter()
                    .zip(lp)
                    .filter(|(m, v)| **m == 1 && v.is_some())
                    .count() as u64
            })
        };
        s.behaviour_logprobs += present(rec.behaviour_logprobs);
        s.trainer_logprobs += present(rec.trainer_logprobs);
        Ok(())
    }

    fn seen(&mut self, execution: &str) {
        if !self.executions.contains(execution) {
            self.executions.insert(execution.to_owned());
            self.summary.executions += 1;
        }
    }

    /// What was written so far.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Flushes and gives back the sink (to be finished, i.e. renamed into place) and the
    /// summary, with the number of lines written.
    pub fn finish(self) -> Result<(Sink, Summary)> {
        let lines = self.rec.lines();
        let sink = self.rec.finish().wrap_err("writing the output")?;
        let mut summary = self.summary;
        summary.lines = lines;
        Ok((sink, summary))
    }
}
