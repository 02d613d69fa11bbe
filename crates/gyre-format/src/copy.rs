//! A read record in written form: one conversion per record kind, so a record copied from one
//! recording into another (an importer passing gyre/1 lines through, the proxy writing a
//! closure it was sent) keeps every field it had, and a new gyre/1 field is carried here once
//! rather than at every copier.

use serde_json::Value;

use super::record::{
    AssessmentRecord, ClosureRecord, ExecutionRecord, RequestRecord, Span, ToolCall,
};
use super::trained::{Advantage, Piece, TrainedRecord, Trainer};
use super::write::{
    AdvantageOut, AssessmentOut, ClosureOut, ExecutionOut, PieceOut, RequestOut, SourceOut,
    SpanOut, ToolCallOut, TrainedOut, TrainerOut, Validity,
};

impl<'a> From<&'a Span> for SpanOut<'a> {
    fn from(s: &'a Span) -> Self {
        SpanOut {
            end: s.end,
            source: s.source,
            call_id: s.call_id.as_deref(),
        }
    }
}

impl<'a> From<&'a ToolCall> for ToolCallOut<'a> {
    fn from(c: &'a ToolCall) -> Self {
        ToolCallOut {
            id: &c.id,
            name: c.name.as_deref(),
            start: c.start,
            end: c.end,
        }
    }
}

/// A read request with its spans and tool calls in written form; [`RequestCopy::out`] is the
/// request to write. (The written request borrows its spans, so they need a home.)
#[derive(Clone, Debug)]
pub struct RequestCopy<'a> {
    rec: &'a RequestRecord,
    spans: Vec<SpanOut<'a>>,
    tool_calls: Vec<ToolCallOut<'a>>,
}

impl<'a> From<&'a RequestRecord> for RequestCopy<'a> {
    fn from(rec: &'a RequestRecord) -> Self {
        RequestCopy {
            rec,
            spans: rec.spans.iter().map(SpanOut::from).collect(),
            tool_calls: rec.tool_calls.iter().map(ToolCallOut::from).collect(),
        }
    }
}

impl RequestCopy<'_> {
    /// The request as written, every field as read (spans and `input` as written: a delta
    /// record stays a delta of the same `extends`).
    pub fn out(&self) -> RequestOut<'_> {
        let r = self.rec;
        RequestOut {
            execution: &r.execution,
            id: &r.id,
            agent: &r.agent,
            purpose: r.purpose,
            actor: r.actor,
            not_trainable: r.not_trainable.as_deref(),
            t: r.t,
            model: r.model.as_deref(),
            extends: r.extends.as_deref(),
            input: &r.input,
            spans: &self.spans,
            output: &r.output,
            logprobs: r.logprobs.as_deref(),
            tool_calls: &self.tool_calls,
            finish: r.finish.as_deref(),
            meta: r.meta.as_ref().and_then(Value::as_object),
        }
    }
}

impl<'a> From<&'a ExecutionRecord> for ExecutionOut<'a> {
    fn from(e: &'a ExecutionRecord) -> Self {
        ExecutionOut {
            execution: &e.execution,
            t: e.t,
            budget_s: e.budget_s,
            group: e.group.as_ref(),
            task: e.task.as_ref(),
            meta: e.meta.as_ref().and_then(Value::as_object),
        }
    }
}

impl<'a> From<&'a AssessmentRecord> for AssessmentOut<'a> {
    fn from(a: &'a AssessmentRecord) -> Self {
        AssessmentOut {
            execution: &a.execution,
            artifact: &a.artifact,
            version: &a.version,
            status: if a.valid {
                Validity::Valid
            } else {
                Validity::Failed
            },
            score: a.score,
            t: a.t,
            branch: a.branch.as_deref(),
            attempt: a.attempt.as_ref(),
            evaluator: a.evaluator.as_ref(),
            error: a.error.as_ref(),
            critique: a.critique.as_ref(),
        }
    }
}

/// A closure's `meta` is not kept by the reader (the engine ignores it): a copier that has the
/// raw line sets it (`ClosureOut { meta, ..(&c).into() }`).
impl<'a> From<&'a ClosureRecord> for ClosureOut<'a> {
    fn from(c: &'a ClosureRecord) -> Self {
        ClosureOut {
            execution: &c.execution,
            t: c.t,
            status: c.status,
            committed: c.committed.as_deref(),
            artifact: c.artifact.as_ref(),
            version: c.version.as_ref(),
            meta: None,
        }
    }
}

impl<'a> From<&'a Piece> for PieceOut<'a> {
    fn from(p: &'a Piece) -> Self {
        match p {
            Piece::Request {
                request,
                start,
                end,
            } => PieceOut::Request {
                request,
                start: *start,
                end: *end,
            },
            Piece::Ids(ids) => PieceOut::Ids { ids },
        }
    }
}

/// A read `trained` record with its pieces in written form; [`TrainedCopy::out`] is the record
/// to write.
#[derive(Clone, Debug)]
pub struct TrainedCopy<'a> {
    rec: &'a TrainedRecord,
    tokens: Vec<PieceOut<'a>>,
}

impl<'a> From<&'a TrainedRecord> for TrainedCopy<'a> {
    fn from(rec: &'a TrainedRecord) -> Self {
        TrainedCopy {
            rec,
            tokens: rec.tokens.iter().map(PieceOut::from).collect(),
        }
    }
}

impl TrainedCopy<'_> {
    /// The record as written, every field as read.
    pub fn out(&self) -> TrainedOut<'_> {
        let r = self.rec;
        TrainedOut {
            execution: &r.execution,
            sample: &r.sample,
            group: r.group.as_ref(),
            step: r.step,
            source: r.source.as_ref().map(|s| SourceOut {
                file: &s.file,
                index: s.index,
            }),
            reward: r.reward,
            advantage: r.advantage.as_ref().map(|a| match a {
                Advantage::Sample(v) => AdvantageOut::Sample(*v),
                Advantage::PerToken(v) => AdvantageOut::PerToken(v),
            }),
            weight: r.weight,
            prompt_len: r.prompt_len,
            tokens: &self.tokens,
            loss_mask: &r.loss_mask,
            behaviour_logprobs: r.behaviour_logprobs.as_deref(),
            trainer_logprobs: r.trainer_logprobs.as_deref(),
            ref_logprobs: r.ref_logprobs.as_deref(),
            aux_loss: r.aux_loss.as_deref(),
            aux_mask: r.aux_mask.as_deref(),
            meta: r.meta.as_ref().and_then(Value::as_object),
        }
    }
}

impl<'a> From<&'a Trainer> for TrainerOut<'a> {
    fn from(t: &'a Trainer) -> Self {
        TrainerOut {
            name: &t.name,
            version: t.version.as_deref(),
            loss_agg: t.loss_agg,
            inferred: &t.inferred,
            meta: t.meta.as_ref().and_then(Value::as_object),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Record, parse_line};
    use crate::write::Line;

    /// Every field survives read → copy → write → read, for each record kind.
    #[test]
    fn a_copied_record_writes_the_same_bytes() {
        let lines = [
            r#"{"kind":"execution","execution":"e1","t":0.5,"budget_s":60.0,"group":"g","task":{"id":7},"meta":{"k":1}}"#,
            r#"{"kind":"request","execution":"e1","id":"r2","agent":"a1","purpose":"summary","actor":"evaluator","not_trainable":"hidden thinking","t":1.5,"model":"m","extends":"r1","input":[1,2,3],"spans":[{"end":2,"source":"system"},{"end":3,"source":"tool","call_id":"c1"}],"output":[4,5],"logprobs":[-0.1,-0.2],"tool_calls":[{"id":"c2","name":"bash","start":0,"end":2}],"finish":"tool_calls","meta":{"api":"chat"}}"#,
            r#"{"kind":"assessment","execution":"e1","artifact":"patch","version":2,"status":"failed","t":3.0,"branch":"r2","attempt":1,"evaluator":"tests","error":"timeout","critique":"slow"}"#,
            r#"{"kind":"closure","execution":"e1","t":4.0,"status":"timeout","committed":"r2","artifact":"patch","version":2}"#,
            r#"{"kind":"trained","execution":"e1","sample":"7","group":"g","step":3,"source":{"file":"a.pt","index":5},"reward":1.0,"advantage":[0.5,null],"weight":0.25,"prompt_len":3,"tokens":[{"request":"r2","start":0,"end":4},{"ids":[9]}],"loss_mask":[1,0],"behaviour_logprobs":[-0.5,null],"trainer_logprobs":[0.0,-1.0],"ref_logprobs":[null,null],"aux_loss":"echo-ce","aux_mask":[0,1],"meta":{"padding":3}}"#,
        ];
        for line in lines {
            let read = parse_line(line.as_bytes()).unwrap().record;
            let bytes = match &read {
                Record::Execution(e) => Line::Execution(e.as_ref().into()).to_bytes(),
                Record::Request(r) => Line::Request(RequestCopy::from(r.as_ref()).out()).to_bytes(),
                Record::Assessment(a) => Line::Assessment(a.as_ref().into()).to_bytes(),
                Record::Closure(c) => Line::Closure(c.as_ref().into()).to_bytes(),
                Record::Trained(t) => Line::Trained(TrainedCopy::from(t.as_ref()).out()).to_bytes(),
                other => panic!("not a record kind copied here: {other:?}"),
            };
            let written = String::from_utf8(bytes).unwrap();
            let same = |t: &str| serde_json::from_str::<Value>(t).unwrap();
            assert_eq!(same(&written), same(line), "{written}");
        }
    }
}
