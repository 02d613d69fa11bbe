//! Writing gyre/1 records (docs/format.md §1): one borrowed type per record kind and one line writer,
//! shared by every producer (`gyre synth`, `gyre import`, the property-test generator, the
//! engine's `Recorder` and the bindings built on it).
//!
//! Field order on a line is fixed (`kind` first, then the record's fields as declared below),
//! so the same record is always the same bytes. Optional fields are left out when absent.
//! Floats are written in their shortest round-trip form, so a value read back is bit for bit
//! the value written.

use std::io::{self, Write};

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::named::Named;
use super::record::{Actor, ClosureStatus, LineError, Parsed, Purpose, Source, parse_line};
use super::trained::LossAgg;

/// One gyre/1 line.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Line<'a> {
    /// The optional first line of a file.
    Header(HeaderOut<'a>),
    /// An execution's start, budget and group.
    Execution(ExecutionOut<'a>),
    /// One model call.
    Request(RequestOut<'a>),
    /// One assessment of an artifact version.
    Assessment(AssessmentOut<'a>),
    /// The end of an execution.
    Closure(ClosureOut<'a>),
    /// One sample a trainer trained on (docs/format.md §9).
    Trained(TrainedOut<'a>),
}

/// A `header` line.
#[derive(Clone, Debug, Serialize)]
pub struct HeaderOut<'a> {
    /// Always `gyre/1`.
    pub format: Gyre1,
    /// Tokenizer (docs/format.md §7): a bundled name, `{"path": …}` or `{"vocab": […]}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<&'a Value>,
    /// What wrote the file's `trained` records (docs/format.md §9).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trainer: Option<TrainerOut<'a>>,
    /// Free-form metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<&'a Map<String, Value>>,
}

/// The header's `trainer` object (docs/format.md §9).
#[derive(Clone, Debug, Serialize)]
pub struct TrainerOut<'a> {
    /// The trainer's name (`prime-rl`, `gyre`, …).
    pub name: &'a str,
    /// Its version; written as `null` when the dump does not say.
    pub version: Option<&'a str>,
    /// How its loss aggregates tokens.
    #[serde(serialize_with = "named")]
    pub loss_agg: LossAgg,
    /// What the importer inferred because the dump was silent.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub inferred: &'a [String],
    /// Anything else worth keeping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<&'a Map<String, Value>>,
}

/// A `trained` line: one training sample (docs/format.md §9).
#[derive(Clone, Debug, Serialize)]
pub struct TrainedOut<'a> {
    /// The execution the sample belongs to.
    pub execution: &'a str,
    /// The trainer's own sample id, unique within the execution.
    pub sample: &'a str,
    /// GRPO group id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<&'a Value>,
    /// Optimizer step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// Where the sample was in its dump.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceOut<'a>>,
    /// Reward.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reward: Option<f64>,
    /// Advantage, per sample or per response token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advantage: Option<AdvantageOut<'a>>,
    /// The per-sample loss weight the trainer applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    /// Index of the first response token in `tokens`.
    pub prompt_len: u32,
    /// The full token sequence, as pieces in order.
    pub tokens: &'a [PieceOut<'a>],
    /// 0 or 1 per response token: the loss mask the trainer used.
    pub loss_mask: &'a [u8],
    /// Behaviour log-probs per response token (`None` = no value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behaviour_logprobs: Option<&'a [Option<f64>]>,
    /// The trainer's recomputed log-probs per response token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trainer_logprobs: Option<&'a [Option<f64>]>,
    /// The reference model's log-probs per response token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ref_logprobs: Option<&'a [Option<f64>]>,
    /// The auxiliary loss's name (with `aux_mask`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aux_loss: Option<&'a str>,
    /// 0 or 1 per response token: the auxiliary loss's mask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aux_mask: Option<&'a [u8]>,
    /// Anything else from the dump.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<&'a Map<String, Value>>,
}

impl<'a> TrainedOut<'a> {
    /// A sample of the required fields, every optional one absent: producers set what they
    /// have with struct update syntax, as with [`RequestOut::new`].
    pub fn new(
        execution: &'a str,
        sample: &'a str,
        tokens: &'a [PieceOut<'a>],
        prompt_len: u32,
        loss_mask: &'a [u8],
    ) -> Self {
        TrainedOut {
            execution,
            sample,
            group: None,
            step: None,
            source: None,
            reward: None,
            advantage: None,
            weight: None,
            prompt_len,
            tokens,
            loss_mask,
            behaviour_logprobs: None,
            trainer_logprobs: None,
            ref_logprobs: None,
            aux_loss: None,
            aux_mask: None,
            meta: None,
        }
    }
}

/// A piece of a sample's tokens as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum PieceOut<'a> {
    /// Positions `start..end` of request `request`'s full path.
    Request {
        /// Request id.
        request: &'a str,
        /// First position.
        start: u32,
        /// Exclusive end.
        end: u32,
    },
    /// Literal ids.
    Ids {
        /// The ids.
        ids: &'a [u32],
    },
}

/// An advantage as written: a number, or one value per response token.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AdvantageOut<'a> {
    /// Sample-level.
    Sample(f64),
    /// Per response token.
    PerToken(&'a [Option<f64>]),
}

/// Where a sample was in its dump.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceOut<'a> {
    /// The dump file, as given on the command line.
    pub file: &'a str,
    /// The sample's position in it, from 0.
    pub index: u64,
}

/// The format name, `gyre/1`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gyre1;

impl Serialize for Gyre1 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("gyre/1")
    }
}

/// An `execution` line.
#[derive(Clone, Debug, Serialize)]
pub struct ExecutionOut<'a> {
    /// Execution id.
    pub execution: &'a str,
    /// Start time, seconds.
    pub t: f64,
    /// Time budget, seconds (absent = unlimited).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
    /// GRPO group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<&'a Value>,
    /// Task description or id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<&'a Value>,
    /// Free-form metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<&'a Map<String, Value>>,
}

/// A `request` line.
#[derive(Clone, Debug, Serialize)]
pub struct RequestOut<'a> {
    /// Execution id.
    pub execution: &'a str,
    /// Request id (unique within the execution).
    pub id: &'a str,
    /// Agent: `main` or a sub-agent id.
    pub agent: &'a str,
    /// `summary` for compaction calls; `task` is the default and left out.
    #[serde(skip_serializing_if = "is_task", serialize_with = "purpose_name")]
    pub purpose: Purpose,
    /// `evaluator` for evaluator calls; `policy` is the default and left out.
    #[serde(skip_serializing_if = "is_policy", serialize_with = "actor_name")]
    pub actor: Actor,
    /// Why the output is not trainable although the policy sampled it (docs/format.md §1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_trainable: Option<&'a str>,
    /// Request time, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t: Option<f64>,
    /// Model name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<&'a str>,
    /// Delta encoding: the earlier request whose input + output precede `input`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extends: Option<&'a str>,
    /// Input token ids (only the new ones with `extends`).
    pub input: &'a [u32],
    /// Spans over `input`, by exclusive end offset.
    pub spans: &'a [SpanOut<'a>],
    /// Output token ids.
    pub output: &'a [u32],
    /// Behaviour log-probs, one per output token (absent only on reconstructed records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<&'a [f64]>,
    /// Tool calls in `output`.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub tool_calls: &'a [ToolCallOut<'a>],
    /// Finish reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<&'a str>,
    /// Free-form metadata (`reconstructed: true` on records rebuilt from logs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<&'a Map<String, Value>>,
}

impl<'a> RequestOut<'a> {
    /// A policy `task` request of the required fields, every optional one absent: producers set
    /// what they have with struct update syntax (`RequestOut { t: Some(t), ..RequestOut::new(…) }`),
    /// so a new optional gyre/1 field changes only the producers that write it.
    pub fn new(
        execution: &'a str,
        id: &'a str,
        agent: &'a str,
        input: &'a [u32],
        spans: &'a [SpanOut<'a>],
        output: &'a [u32],
    ) -> Self {
        RequestOut {
            execution,
            id,
            agent,
            purpose: Purpose::Task,
            actor: Actor::Policy,
            not_trainable: None,
            t: None,
            model: None,
            extends: None,
            input,
            spans,
            output,
            logprobs: None,
            tool_calls: &[],
            finish: None,
            meta: None,
        }
    }
}

/// A span as written: tokens up to `end` (exclusive) of the record's `input` came from `source`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SpanOut<'a> {
    /// Exclusive end offset into `input`.
    pub end: u32,
    /// Where the tokens came from.
    #[serde(serialize_with = "source_name")]
    pub source: Source,
    /// For `tool` spans: the call id the result answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<&'a str>,
}

/// A tool call as written: output tokens `start..end` made call `id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolCallOut<'a> {
    /// Call id.
    pub id: &'a str,
    /// Tool name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    /// First output token of the call.
    pub start: u32,
    /// Exclusive end offset in the output.
    pub end: u32,
}

/// An `assessment` line.
#[derive(Clone, Debug, Serialize)]
pub struct AssessmentOut<'a> {
    /// Execution id.
    pub execution: &'a str,
    /// Artifact name.
    pub artifact: &'a Value,
    /// Artifact version.
    pub version: &'a Value,
    /// `valid` or `failed`.
    #[serde(serialize_with = "validity_name")]
    pub status: Validity,
    /// The reward (required when valid).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Time, seconds.
    pub t: f64,
    /// Request id of the branch assessed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<&'a str>,
    /// Attempt number or label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<&'a Value>,
    /// Who assessed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<&'a Value>,
    /// Error of a failed attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a Value>,
    /// Critique text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critique: Option<&'a Value>,
}

/// Outcome of an assessment attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// A usable score.
    Valid,
    /// The attempt failed.
    Failed,
}

/// A `closure` line.
#[derive(Clone, Debug, Serialize)]
pub struct ClosureOut<'a> {
    /// Execution id.
    pub execution: &'a str,
    /// Time, seconds.
    pub t: f64,
    /// How the execution ended.
    #[serde(serialize_with = "closure_status_name")]
    pub status: ClosureStatus,
    /// The committed policy request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub committed: Option<&'a str>,
    /// Artifact available at closure; written as `null` when there is no assessable work.
    pub artifact: Option<&'a Value>,
    /// Its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<&'a Value>,
    /// Free-form metadata (kept and ignored by the engine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<&'a Map<String, Value>>,
}

fn is_task(p: &Purpose) -> bool {
    *p == Purpose::Task
}

fn is_policy(a: &Actor) -> bool {
    *a == Actor::Policy
}

fn purpose_name<S: Serializer>(p: &Purpose, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match p {
        Purpose::Task => "task",
        Purpose::Summary => "summary",
    })
}

fn actor_name<S: Serializer>(a: &Actor, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match a {
        Actor::Policy => "policy",
        Actor::Evaluator => "evaluator",
    })
}

fn source_name<S: Serializer>(src: &Source, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(src.name())
}

fn validity_name<S: Serializer>(v: &Validity, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match v {
        Validity::Valid => "valid",
        Validity::Failed => "failed",
    })
}

fn named<S: Serializer, N: Named>(v: &N, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.name())
}

fn closure_status_name<S: Serializer>(c: &ClosureStatus, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.name())
}

impl Line<'_> {
    /// The line's bytes, without the newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(256);
        self.write_into(&mut buf);
        buf
    }

    /// Appends the line's bytes (without the newline) to `buf`.
    pub fn write_into(&self, buf: &mut Vec<u8>) {
        // Writing into a Vec cannot fail, and every field serialises (non-finite floats are
        // written as `null`, which the parser then refuses: see `check`). Terminal-safe, so a
        // record written to a terminal (`--out -`) cannot drive it; the values are unchanged.
        crate::sanitize::write_json_compact(&mut *buf, self)
            .expect("a record serialises into memory");
    }

    /// Checks the line as the loader would (types, lengths, offsets, required fields); checks
    /// that need the execution's history (ids, `extends`) are the recorder's.
    pub fn check(&self) -> Result<Parsed, LineError> {
        parse_line(&self.to_bytes())
    }
}

/// Writes whole lines to `out`, counting them.
pub struct LineWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    lines: u64,
    bytes: u64,
}

impl<W: Write> LineWriter<W> {
    /// A writer over `out`.
    pub fn new(out: W) -> Self {
        LineWriter {
            out,
            buf: Vec::with_capacity(1 << 16),
            lines: 0,
            bytes: 0,
        }
    }

    /// Writes one line (built whole in memory first, so a line is never half-written by us).
    pub fn write(&mut self, line: &Line) -> io::Result<()> {
        self.buf.clear();
        line.write_into(&mut self.buf);
        self.buf.push(b'\n');
        self.out.write_all(&self.buf)?;
        self.lines += 1;
        self.bytes += self.buf.len() as u64;
        Ok(())
    }

    /// Lines written so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Gives the underlying writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;

    #[test]
    fn a_request_reads_back_as_written() {
        let spans = [
            SpanOut {
                end: 2,
                source: Source::System,
                call_id: None,
            },
            SpanOut {
                end: 3,
                source: Source::Tool,
                call_id: Some("c\u{1b}1"),
            },
        ];
        let calls = [ToolCallOut {
            id: "call_1",
            name: Some("bash"),
            start: 0,
            end: 1,
        }];
        let line = Line::Request(RequestOut {
            purpose: Purpose::Summary,
            t: Some(1.5),
            extends: Some("r1"),
            logprobs: Some(&[-0.1, -0.30000000000000004]),
            tool_calls: &calls,
            finish: Some("stop"),
            ..RequestOut::new("e1", "r2", "main", &[1, 2, 3], &spans, &[4, 5])
        });
        let text = String::from_utf8(line.to_bytes()).unwrap();
        assert!(text.starts_with(r#"{"kind":"request","execution":"e1","id":"r2","agent":"main","purpose":"summary","t":1.5,"extends":"r1","input":[1,2,3]"#), "{text}");
        let Record::Request(r) = line.check().unwrap().record else {
            panic!("not a request")
        };
        assert_eq!(r.input, [1, 2, 3]);
        assert_eq!(
            r.logprobs.unwrap()[1].to_bits(),
            (-0.30000000000000004f64).to_bits()
        );
        assert_eq!(r.spans[1].call_id.as_deref(), Some("c\u{1b}1"));
        assert_eq!(r.purpose, Purpose::Summary);
        assert_eq!(r.extends.as_deref(), Some("r1"));
    }

    #[test]
    fn bad_records_are_refused_by_check() {
        let line = Line::Request(RequestOut {
            logprobs: Some(&[-0.1]),
            ..RequestOut::new("e1", "r1", "main", &[1], &[], &[4, 5])
        });
        let e = line.check().err().expect("refused");
        assert_eq!(e.field.as_deref(), Some("logprobs"));
        let nan = Line::Assessment(AssessmentOut {
            execution: "e1",
            artifact: &Value::from("patch"),
            version: &Value::from(1),
            status: Validity::Valid,
            score: Some(f64::NAN),
            t: 0.0,
            branch: None,
            attempt: None,
            evaluator: None,
            error: None,
            critique: None,
        });
        assert!(nan.check().is_err());
    }
}
