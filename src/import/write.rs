//! Writing imported records: the engine's gyre/1 line types ([`crate::engine::write`]) into an
//! output file written atomically ([`Sink`]).

pub use crate::engine::write::{
    AssessmentOut, ClosureOut, ExecutionOut, Gyre1, HeaderOut, Line, RequestOut, SpanOut,
    ToolCallOut, Validity,
};
pub use crate::output::Sink;

use super::encode::Span;

/// Spans as written.
pub fn spans_out(spans: &[Span]) -> Vec<SpanOut<'_>> {
    spans
        .iter()
        .map(|s| SpanOut {
            end: s.end as u32,
            source: s.source,
            call_id: s.call_id.as_deref(),
        })
        .collect()
}
