//! A conversation log reconstructed as requests (Claude Code, SWE-agent, OpenHands), written as
//! gyre/1 records marked `meta.reconstructed`.

use std::rc::Rc;

use color_eyre::eyre::{Result, WrapErr};
use serde_json::{Map, Value, json};

use super::convo::{Builder, Output, Turn};
use super::encode::tail_spans;
use super::write::{
    AssessmentOut, ClosureOut, ExecutionOut, Gyre1, HeaderOut, Line, RequestOut, Sink, ToolCallOut,
    Validity, spans_out,
};
use super::{Options, Summary};
use crate::engine::record::{Actor, ClosureStatus, Purpose};
use crate::text::Message;

/// One model response, to become one request.
#[derive(Clone, Debug)]
pub struct Response {
    /// Indices into [`Session::turns`]: the conversation the model saw (system first).
    pub context: Vec<u32>,
    /// The response as an assistant message.
    pub message: Message,
    /// Agent id (`main`, `sub-…`).
    pub agent: String,
    /// A compaction (summary) call.
    pub summary: bool,
    /// Request time (seconds).
    pub t: Option<f64>,
    /// Model name.
    pub model: Option<String>,
    /// Finish reason.
    pub finish: Option<String>,
    /// Request metadata (`reconstructed` is added).
    pub meta: Map<String, Value>,
}

/// How the session ended.
#[derive(Clone, Debug)]
pub struct Closure {
    /// Time (seconds).
    pub t: f64,
    /// How the session ended.
    pub status: ClosureStatus,
    /// Artifact (`Null` = no assessable work).
    pub artifact: Value,
    /// Version.
    pub version: Option<Value>,
    /// Extra fields (kept and ignored by the engine).
    pub meta: Map<String, Value>,
}

/// A whole reconstructed execution.
#[derive(Clone, Debug)]
pub struct Session {
    /// Execution id.
    pub execution: String,
    /// Start time (seconds).
    pub t: f64,
    /// Task description, when known.
    pub task: Option<String>,
    /// Execution metadata.
    pub meta: Map<String, Value>,
    /// Every turn any context uses.
    pub turns: Vec<Turn>,
    /// Responses in request order (a turn's `response` indexes this).
    pub responses: Vec<Response>,
    /// The closure.
    pub closure: Closure,
}

/// Header metadata common to reconstructed imports.
pub fn header_meta(source: &str, opts: &Options, inputs: &[String]) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("reconstructed".into(), Value::Bool(true));
    m.insert("source".into(), json!(source));
    m.insert(
        "importer".into(),
        json!(format!(
            "gyre {} import {source}",
            env!("CARGO_PKG_VERSION")
        )),
    );
    m.insert("inputs".into(), json!(inputs));
    m.insert("restore".into(), Value::Bool(opts.restore));
    m.insert(
        "note".into(),
        json!(
            "reconstructed, not recorded: token ids come from re-tokenising the log through the \
             chat template; there are no log-probs"
        ),
    );
    m
}

/// Writes a header (when `header` is given) and the session's records to `sink`.
pub fn write_session(
    s: &Session,
    builder: &mut Builder,
    opts: &Options,
    header: Option<(&Value, &Map<String, Value>)>,
    sink: &mut Sink,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Summary> {
    let mut summary = Summary::default();
    if let Some((tokenizer, meta)) = header {
        sink.line(&Line::Header(HeaderOut {
            format: Gyre1,
            tokenizer: Some(tokenizer),
            meta: Some(meta),
        }))?;
    }
    let task = s.task.as_deref().map(Value::from);
    sink.line(&Line::Execution(ExecutionOut {
        execution: &s.execution,
        t: s.t,
        budget_s: None,
        group: None,
        task: task.as_ref(),
        meta: Some(&s.meta),
    }))?;
    let mut outputs: Vec<Option<Rc<Output>>> = Vec::with_capacity(s.responses.len());
    for (i, r) in s.responses.iter().enumerate() {
        let out = builder
            .output(&r.message)
            .wrap_err_with(|| format!("rendering response {} ({})", i + 1, request_id(i)))?;
        outputs.push(Some(Rc::new(out)));
    }
    // Per written request: its segment keys (restoration) or its full input + output.
    let mut seg_keys: Vec<Vec<u64>> = vec![Vec::new(); s.responses.len()];
    let mut full: Vec<Option<Vec<u32>>> = vec![None; s.responses.len()];
    for (i, r) in s.responses.iter().enumerate() {
        progress(i, s.responses.len());
        let turns: Vec<&Turn> = r.context.iter().map(|&k| &s.turns[k as usize]).collect();
        let ctx = builder
            .context(&turns, &outputs, opts.restore)
            .wrap_err_with(|| format!("building the context of {}", request_id(i)))?;
        let out = outputs[i].as_ref().expect("every output is rendered");
        // Delta encoding against the request whose response this context continues.
        let mut extends: Option<(usize, usize)> = None; // (request, tokens it covers)
        if opts.restore {
            if let Some(pos) = ctx.segments.iter().rposition(|g| g.restores.is_some()) {
                let p = ctx.segments[pos].restores.expect("output segment");
                let same = seg_keys[p].len() == pos
                    && seg_keys[p]
                        .iter()
                        .zip(&ctx.segments)
                        .all(|(k, g)| *k == g.key);
                if p < i && same {
                    let n = ctx.segments[..=pos].iter().map(|g| g.len).sum();
                    extends = Some((p, n));
                }
            }
            seg_keys[i] = ctx.segments.iter().map(|g| g.key).collect();
        } else {
            for &k in r.context.iter().rev() {
                let Some(p) = s.turns[k as usize].response else {
                    continue;
                };
                if p >= i {
                    continue;
                }
                if let Some(f) = &full[p] {
                    if ctx.tokens.starts_with(f) {
                        extends = Some((p, f.len()));
                        break;
                    }
                }
            }
        }
        let covered = extends.map_or(0, |(_, n)| n);
        let input = &ctx.tokens[covered..];
        let spans = tail_spans(&ctx.spans, covered);
        let mut meta = r.meta.clone();
        meta.insert("reconstructed".into(), Value::Bool(true));
        let id = request_id(i);
        let ext_id = extends.map(|(p, _)| request_id(p));
        let spans = spans_out(&spans);
        let tool_calls: Vec<ToolCallOut> = out
            .tool_calls
            .iter()
            .map(|c| ToolCallOut {
                id: &c.id,
                name: Some(&c.name),
                start: c.start as u32,
                end: c.end as u32,
            })
            .collect();
        sink.line(&Line::Request(RequestOut {
            execution: &s.execution,
            id: &id,
            agent: &r.agent,
            purpose: if r.summary {
                Purpose::Summary
            } else {
                Purpose::Task
            },
            actor: Actor::Policy,
            t: r.t,
            model: r.model.as_deref(),
            extends: ext_id.as_deref(),
            input,
            spans: &spans,
            output: &out.tokens,
            logprobs: None,
            tool_calls: &tool_calls,
            finish: r.finish.as_deref(),
            meta: Some(&meta),
        }))?;
        summary.requests += 1;
        summary.input_tokens += ctx.tokens.len() as u64;
        summary.output_tokens += out.tokens.len() as u64;
        summary.written_input_tokens += input.len() as u64;
        if !opts.restore {
            let mut f = ctx.tokens;
            f.extend_from_slice(&out.tokens);
            full[i] = Some(f);
        }
    }
    progress(s.responses.len(), s.responses.len());
    write_end(sink, &s.execution, &s.closure, opts.score)?;
    Ok(summary)
}

/// The closure (and, with a score, a valid assessment of the closure's artifact).
pub fn write_end(sink: &mut Sink, execution: &str, c: &Closure, score: Option<f64>) -> Result<()> {
    if let (Some(score), false) = (score, c.artifact.is_null()) {
        let version = c.version.clone().unwrap_or(Value::Null);
        let evaluator = Value::from("gyre import --score");
        sink.line(&Line::Assessment(AssessmentOut {
            execution,
            artifact: &c.artifact,
            version: &version,
            status: Validity::Valid,
            score: Some(score),
            t: c.t,
            branch: None,
            attempt: None,
            evaluator: Some(&evaluator),
            error: None,
            critique: None,
        }))?;
    }
    sink.line(&Line::Closure(ClosureOut {
        execution,
        t: c.t,
        status: c.status,
        committed: None,
        artifact: (!c.artifact.is_null()).then_some(&c.artifact),
        version: c.version.as_ref(),
        meta: (!c.meta.is_empty()).then_some(&c.meta),
    }))
}

/// Request ids: `r1`, `r2`, … in request order.
pub fn request_id(i: usize) -> String {
    format!("r{}", i + 1)
}
