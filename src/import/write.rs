//! Writing gyre/1 records: typed lines, and the output file (atomic, optionally compressed).

use serde::Serialize;
use serde_json::{Map, Value};

use super::encode::Span;
pub use crate::output::Sink;

/// A `header` line.
#[derive(Serialize)]
pub struct HeaderLine<'a> {
    /// Always `header`.
    pub kind: &'static str,
    /// Always `gyre/1`.
    pub format: &'static str,
    /// Tokenizer (SPEC §7).
    pub tokenizer: &'a Value,
    /// Import metadata.
    pub meta: &'a Map<String, Value>,
}

/// An `execution` line.
#[derive(Serialize)]
pub struct ExecutionLine<'a> {
    /// Always `execution`.
    pub kind: &'static str,
    /// Execution id.
    pub execution: &'a str,
    /// Start time (seconds).
    pub t: f64,
    /// Task description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<&'a str>,
    /// Metadata.
    pub meta: &'a Map<String, Value>,
}

/// A span as written.
#[derive(Serialize)]
pub struct SpanOut<'a> {
    /// Exclusive end.
    pub end: usize,
    /// Source name.
    pub source: &'static str,
    /// Call id of a `tool` span.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<&'a str>,
}

/// Spans as written.
pub fn spans_out(spans: &[Span]) -> Vec<SpanOut<'_>> {
    spans
        .iter()
        .map(|s| SpanOut {
            end: s.end,
            source: s.source.name(),
            call_id: s.call_id.as_deref(),
        })
        .collect()
}

/// A tool call as written.
#[derive(Serialize)]
pub struct ToolCallOut<'a> {
    /// Call id.
    pub id: &'a str,
    /// Tool name.
    pub name: &'a str,
    /// First output token.
    pub start: usize,
    /// Exclusive end.
    pub end: usize,
}

/// A `request` line.
#[derive(Serialize)]
pub struct RequestLine<'a> {
    /// Always `request`.
    pub kind: &'static str,
    /// Execution id.
    pub execution: &'a str,
    /// Request id.
    pub id: &'a str,
    /// Agent (`main` or a sub-agent id).
    pub agent: &'a str,
    /// `summary` for compaction calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purpose: Option<&'static str>,
    /// Request time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t: Option<f64>,
    /// Model name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<&'a str>,
    /// Delta encoding: the request whose input + output precede `input`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extends: Option<&'a str>,
    /// Input tokens (new ones only with `extends`).
    pub input: &'a [u32],
    /// Output tokens.
    pub output: &'a [u32],
    /// Log-probs (absent on reconstructed records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<&'a [f64]>,
    /// Spans over `input`.
    pub spans: Vec<SpanOut<'a>>,
    /// Tool calls in `output`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallOut<'a>>,
    /// Finish reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish: Option<&'a str>,
    /// Metadata.
    pub meta: &'a Map<String, Value>,
}

/// An `assessment` line.
#[derive(Serialize)]
pub struct AssessmentLine<'a> {
    /// Always `assessment`.
    pub kind: &'static str,
    /// Execution id.
    pub execution: &'a str,
    /// Artifact.
    pub artifact: &'a Value,
    /// Version.
    pub version: &'a Value,
    /// `valid`.
    pub status: &'static str,
    /// The score.
    pub score: f64,
    /// Time.
    pub t: f64,
    /// Who scored.
    pub evaluator: &'static str,
}

/// A `closure` line.
#[derive(Serialize)]
pub struct ClosureLine<'a> {
    /// Always `closure`.
    pub kind: &'static str,
    /// Execution id.
    pub execution: &'a str,
    /// Time.
    pub t: f64,
    /// `completed`, `timeout` or `error`.
    pub status: &'static str,
    /// Artifact (`null` = no assessable work).
    pub artifact: &'a Value,
    /// Version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<&'a Value>,
    /// Importer metadata (kept and ignored by the engine).
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub meta: &'a Map<String, Value>,
}
