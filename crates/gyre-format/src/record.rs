//! gyre/1 input records (docs/format.md §1): one JSON object per line, parsed and checked line by line.
//!
//! Parsing is split from tree building: a line is checked on its own here (types, lengths,
//! offsets); checks that need the execution's history (duplicate ids, `extends`) happen when
//! the record is applied to its execution (the engine's loader).

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use serde_json::Value;

pub use crate::id::Id;
pub use crate::line_error::LineError;
use crate::trained::{TrainedRecord, Trainer, parse_trained};

/// Where a context token came from, as labelled by a request's `spans` (docs/format.md §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// System prompt.
    System,
    /// User turn.
    User,
    /// Tool result.
    Tool,
    /// Assistant-role content written by the harness (never trainable).
    Assistant,
    /// Evaluator feedback put back into context.
    Critique,
    /// A compaction summary put back into context.
    Summary,
    /// Chat-template scaffolding.
    Template,
    /// Anything unlabelled (the default).
    Context,
}

impl Source {
    /// Every source, in display order.
    pub const ALL: [Source; 8] = [
        Source::System,
        Source::User,
        Source::Tool,
        Source::Assistant,
        Source::Critique,
        Source::Summary,
        Source::Template,
        Source::Context,
    ];

    /// The name used in records and in reasons (`context:<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Source::System => "system",
            Source::User => "user",
            Source::Tool => "tool",
            Source::Assistant => "assistant",
            Source::Critique => "critique",
            Source::Summary => "summary",
            Source::Template => "template",
            Source::Context => "context",
        }
    }

    /// Parses a record's source name; `None` for names the format does not define.
    pub fn parse(s: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|src| src.name() == s)
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Who sampled a request's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Actor {
    /// The policy being trained: its outputs are trainable.
    Policy,
    /// An evaluator: its outputs are never trainable.
    Evaluator,
}

/// Why a request was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// Task-driving turn (the default).
    Task,
    /// Context-managing summary (compaction).
    Summary,
}

/// A labelled run of input tokens, in full-input coordinates.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    /// Exclusive end offset into the request's full input.
    pub end: u32,
    /// What the tokens are.
    pub source: Source,
    /// For `tool` spans: the call id the result answers.
    pub call_id: Option<Box<str>>,
}

/// A tool call made by an output, as offsets into that output.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ToolCall {
    /// Call id, used to associate later tool results.
    pub id: String,
    /// Tool name, when recorded.
    pub name: Option<String>,
    /// First output token of the call.
    pub start: u32,
    /// Exclusive end offset in the output.
    pub end: u32,
}

/// A `request` line, checked on its own.
#[derive(Clone, Debug)]
pub struct RequestRecord {
    /// Execution id.
    pub execution: String,
    /// Request id (unique within the execution).
    pub id: String,
    /// The `input` array as written (full, or only the new tokens when `extends` is set).
    pub input: Vec<u32>,
    /// Output token ids.
    pub output: Vec<u32>,
    /// Behaviour log-probs, one per output token; absent only on reconstructed records.
    pub logprobs: Option<Vec<f64>>,
    /// Delta encoding: the earlier request whose input + output precede `input`.
    pub extends: Option<String>,
    /// Spans over `input`, offsets relative to the `input` array as written.
    pub spans: Vec<Span>,
    /// Agent id (`main` or a sub-agent id).
    pub agent: String,
    /// Task or summary.
    pub purpose: Purpose,
    /// Policy or evaluator.
    pub actor: Actor,
    /// Why a policy output is not trainable (`not_trainable`: the log does not hold all of
    /// what the model generated, e.g. hidden thinking).
    pub not_trainable: Option<String>,
    /// Tool calls made by the output.
    pub tool_calls: Vec<ToolCall>,
    /// Finish reason, when recorded.
    pub finish: Option<String>,
    /// Time of the request, when recorded.
    pub t: Option<f64>,
    /// Model name, when recorded.
    pub model: Option<String>,
    /// Free-form metadata (e.g. `reconstructed: true`).
    pub meta: Option<Value>,
}

/// An `assessment` line.
#[derive(Clone, Debug)]
pub struct AssessmentRecord {
    /// Execution id.
    pub execution: String,
    /// Artifact name.
    pub artifact: Value,
    /// Artifact version.
    pub version: Value,
    /// `true` for `valid`, `false` for `failed`.
    pub valid: bool,
    /// Time of the assessment.
    pub t: f64,
    /// The reward, for valid assessments.
    pub score: Option<f64>,
    /// Request id of the branch assessed, when given.
    pub branch: Option<String>,
    /// Attempt number or label, when given.
    pub attempt: Option<Value>,
    /// Evaluator name, when given.
    pub evaluator: Option<Value>,
    /// Error message of a failed attempt, when given.
    pub error: Option<Value>,
    /// Critique text, when given.
    pub critique: Option<Value>,
}

/// Termination status written in a `closure`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClosureStatus {
    /// The harness finished normally.
    Completed,
    /// The time budget ran out.
    Timeout,
    /// The harness failed.
    Error,
}

impl ClosureStatus {
    /// The record's name for this status.
    pub fn name(self) -> &'static str {
        match self {
            ClosureStatus::Completed => "completed",
            ClosureStatus::Timeout => "timeout",
            ClosureStatus::Error => "error",
        }
    }
}

/// A `closure` line.
#[derive(Clone, Debug)]
pub struct ClosureRecord {
    /// Execution id.
    pub execution: String,
    /// Time of closure.
    pub t: f64,
    /// How the execution ended.
    pub status: ClosureStatus,
    /// The committed policy request, when given.
    pub committed: Option<String>,
    /// Artifact available at closure; `None` (absent or null) = no assessable work.
    pub artifact: Option<Value>,
    /// Its version.
    pub version: Option<Value>,
}

/// An `execution` line.
#[derive(Clone, Debug)]
pub struct ExecutionRecord {
    /// Execution id.
    pub execution: String,
    /// Start time, seconds.
    pub t: f64,
    /// Time budget, seconds (`None` = unlimited).
    pub budget_s: Option<f64>,
    /// GRPO group id.
    pub group: Option<Value>,
    /// Task description or id.
    pub task: Option<Value>,
    /// Free-form metadata.
    pub meta: Option<Value>,
}

/// A parsed line.
#[derive(Clone, Debug)]
pub enum Record {
    /// The optional `header` line.
    Header(Value),
    /// An `execution` line.
    Execution(Box<ExecutionRecord>),
    /// A `request` line.
    Request(Box<RequestRecord>),
    /// An `assessment` line.
    Assessment(Box<AssessmentRecord>),
    /// A `closure` line.
    Closure(Box<ClosureRecord>),
    /// A `trained` line: one sample a trainer trained on (docs/format.md §9).
    Trained(Box<TrainedRecord>),
    /// A line whose `kind` the format does not define (a warning, not an error).
    Unknown(String),
}

impl Record {
    /// The execution this record belongs to, if any.
    pub fn execution(&self) -> Option<&str> {
        match self {
            Record::Execution(r) => Some(&r.execution),
            Record::Request(r) => Some(&r.execution),
            Record::Assessment(r) => Some(&r.execution),
            Record::Closure(r) => Some(&r.execution),
            Record::Trained(r) => Some(&r.execution),
            Record::Header(_) | Record::Unknown(_) => None,
        }
    }
}

/// Outcome of parsing one line: the record plus warnings that do not reject it.
pub struct Parsed {
    /// The record.
    pub record: Record,
    /// Non-fatal remarks (unknown source names, unknown kinds, …).
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
#[serde(expecting = "a span object such as {\"end\": 12, \"source\": \"user\"}")]
struct RawSpan<'a> {
    end: u64,
    #[serde(borrow)]
    source: Option<Cow<'a, str>>,
    call_id: Option<Id>,
}

#[derive(Deserialize)]
#[serde(expecting = "a tool call object such as {\"id\": \"call_1\", \"start\": 0, \"end\": 9}")]
struct RawToolCall {
    id: Id,
    name: Option<String>,
    start: u64,
    end: u64,
}

/// Every field any kind may carry; which are required depends on `kind`.
#[derive(Deserialize)]
#[serde(expecting = "a record object")]
struct RawLine<'a> {
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    format: Option<Value>,
    execution: Option<Id>,
    t: Option<f64>,
    budget_s: Option<f64>,
    group: Option<Value>,
    task: Option<Value>,
    meta: Option<Value>,
    id: Option<Id>,
    input: Option<Vec<u32>>,
    output: Option<Vec<u32>>,
    logprobs: Option<Vec<f64>>,
    extends: Option<Id>,
    #[serde(borrow)]
    spans: Option<Vec<RawSpan<'a>>>,
    agent: Option<Id>,
    #[serde(borrow)]
    purpose: Option<Cow<'a, str>>,
    #[serde(borrow)]
    actor: Option<Cow<'a, str>>,
    not_trainable: Option<String>,
    tool_calls: Option<Vec<RawToolCall>>,
    finish: Option<String>,
    model: Option<String>,
    artifact: Option<Value>,
    version: Option<Value>,
    #[serde(borrow)]
    status: Option<Cow<'a, str>>,
    score: Option<Value>,
    branch: Option<Id>,
    attempt: Option<Value>,
    evaluator: Option<Value>,
    error: Option<Value>,
    critique: Option<Value>,
    committed: Option<Id>,
}

/// Parses and checks one line (without its trailing newline).
pub fn parse_line(line: &[u8]) -> Result<Parsed, LineError> {
    // Fast path: token arrays read by hand, the rest by serde_json. Anything unusual in the
    // arrays (or the line) falls back to serde_json for all of it, which also words the errors.
    let mut split = split_token_arrays(line);
    // serde_json skips unknown members without checking their text: JSON is UTF-8, so check it
    // here (the token arrays the split took out are ASCII digits).
    let text = match &split {
        Ok(s) => &s.rest[..],
        Err(_) => line,
    };
    if let Err(e) = std::str::from_utf8(text) {
        let at = line.len() - text.len() + e.valid_up_to();
        return Err(LineError {
            message: format!("malformed JSON: not UTF-8 text (near byte {})", at + 1),
            field: None,
        });
    }
    let raw = match &mut split {
        Ok(s) => match serde_json::from_slice::<RawLine>(&s.rest) {
            Ok(mut raw) => {
                raw.input = s.input.take();
                raw.output = s.output.take();
                if s.logprobs.is_some() {
                    raw.logprobs = s.logprobs.take();
                }
                raw
            }
            Err(_) => parse_slowly(line)?,
        },
        Err(Decline::DuplicateKey(key)) => return Err(duplicate_error(key, None)),
        Err(Decline::Unusual) => parse_slowly(line)?,
    };
    record_from(raw, line)
}

/// The record a line's members make, by `kind` (the line itself for a header, kept whole).
fn record_from(raw: RawLine, line: &[u8]) -> Result<Parsed, LineError> {
    let mut warnings = Vec::new();
    let kind = raw
        .kind
        .as_deref()
        .ok_or_else(|| LineError::new("missing field `kind`", "kind"))?;
    let record = match kind {
        "header" => parse_header(raw.format.as_ref(), line)?,
        "execution" => Record::Execution(Box::new(ExecutionRecord {
            execution: required_id(raw.execution, "execution")?,
            t: raw.t.ok_or_else(|| missing("t"))?,
            budget_s: match raw.budget_s {
                Some(b) if b < 0.0 => {
                    return Err(LineError::new("budget_s must not be negative", "budget_s"));
                }
                b => b,
            },
            group: raw.group.filter(|g| !g.is_null()),
            task: raw.task,
            meta: raw.meta,
        })),
        "request" => Record::Request(Box::new(parse_request(raw, &mut warnings, false)?.0)),
        "assessment" => Record::Assessment(Box::new(parse_assessment(raw)?)),
        "closure" => Record::Closure(Box::new(parse_closure(raw)?)),
        "trained" => Record::Trained(Box::new(parse_trained(line)?)),
        other => {
            warnings.push(format!("unknown kind \"{other}\": line ignored"));
            Record::Unknown(other.to_owned())
        }
    };
    Ok(Parsed { record, warnings })
}

/// A line read by [`parse_line_deferred`].
pub enum LineParse {
    /// Read in full: what [`parse_line`] gives.
    Read(Result<Parsed, LineError>),
    /// A full-form request whose `input` array is still to be read.
    Deferred(Deferred),
}

/// A request line without `extends`, checked but for its `input` array, whose bytes it points
/// at: the caller reads them (a [`crate::prefix::PrefixReader`] skips what an earlier input of
/// the same execution already said) and [`Deferred::finish`] completes the record.
pub struct Deferred {
    record: Box<RequestRecord>,
    warnings: Vec<String>,
    /// The array's bytes after its `[`, up to and including the first `]`.
    input: Range<usize>,
    /// The largest span end, checked against the input's length once it is read.
    span_end: u64,
}

impl Deferred {
    /// The request's execution id.
    pub fn execution(&self) -> &str {
        &self.record.execution
    }

    /// The request's agent id.
    pub fn agent(&self) -> &str {
        &self.record.agent
    }

    /// The `input` array's bytes in `line` (the line given to [`parse_line_deferred`]) after
    /// its `[`, up to and including the first `]` (which is its end when it is a token array).
    pub fn input<'a>(&self, line: &'a [u8]) -> &'a [u8] {
        line.get(self.input.clone()).unwrap_or_default()
    }

    /// The record, with `ids` read from [`Deferred::input`]: what [`parse_line`] gives for
    /// `line`. `None` (the bytes are not a plain token array) and ids the spans do not fit
    /// take the exact path, [`parse_line`], which words the error.
    pub fn finish(self, line: &[u8], ids: Option<Vec<u32>>) -> Result<Parsed, LineError> {
        match ids {
            Some(ids) if self.span_end <= ids.len() as u64 => {
                let mut record = self.record;
                record.input = ids;
                Ok(Parsed {
                    record: Record::Request(record),
                    warnings: self.warnings,
                })
            }
            _ => parse_line(line),
        }
    }
}

/// [`parse_line`], except that the `input` array of a request without `extends` (a full-form
/// input, which repeats much of an earlier one) is left for the caller to read: see
/// [`Deferred`]. Every other line, and every line the deferring path does not take as it is,
/// is read by [`parse_line`].
pub fn parse_line_deferred(line: &[u8]) -> LineParse {
    match defer(line) {
        Some(parse) => parse,
        None => LineParse::Read(parse_line(line)),
    }
}

/// The deferring path of [`parse_line_deferred`]; `None` wherever it could differ from
/// [`parse_line`] (the fast path declines, the rest is not JSON, the request has a problem).
fn defer(line: &[u8]) -> Option<LineParse> {
    let (mut split, input) = split(line, true).ok()?;
    let input = input?;
    std::str::from_utf8(&split.rest).ok()?;
    let mut raw = serde_json::from_slice::<RawLine>(&split.rest).ok()?;
    raw.output = split.output.take();
    if split.logprobs.is_some() {
        raw.logprobs = split.logprobs.take();
    }
    if raw.kind.as_deref() != Some("request") || raw.extends.is_some() {
        // Read the array now, where the fast path would have (it must end where it was found).
        let (ids, end) = read_token_array(line, input.start - 1)?;
        if end != input.end {
            return None;
        }
        raw.input = Some(ids);
        return Some(LineParse::Read(record_from(raw, line)));
    }
    raw.input = Some(Vec::new());
    let mut warnings = Vec::new();
    let (record, span_end) = parse_request(raw, &mut warnings, true).ok()?;
    Some(LineParse::Deferred(Deferred {
        record: Box::new(record),
        warnings,
        input,
        span_end,
    }))
}

/// The whole line through serde_json, for lines the fast path declines: errors worded with the
/// field at fault, duplicate keys refused at any depth.
fn parse_slowly(line: &[u8]) -> Result<RawLine<'_>, LineError> {
    if let Some(found) = not_an_object(line) {
        return Err(LineError {
            message: format!("a record must be a JSON object, found {found}"),
            field: None,
        });
    }
    let raw = serde_json::from_slice(line).map_err(|_| describe_json_error(line))?;
    match duplicate_key(line) {
        Some(e) => Err(e),
        None => Ok(raw),
    }
}

/// A key written twice in one object: refused, whatever the values (readers disagree on which
/// one counts, so the record would mean different things to different tools).
fn duplicate_error(key: &str, field: Option<String>) -> LineError {
    LineError {
        message: format!("duplicate key \"{key}\" in one object"),
        field: Some(field.unwrap_or_else(|| key.to_owned())),
    }
}

/// The first key repeated within one object anywhere in `json` (valid JSON), as an error.
fn duplicate_key(json: &[u8]) -> Option<LineError> {
    // Most lines have none: check without tracking the path, and find the path only for the
    // rare line that has one.
    serde_json::from_slice::<NoDuplicateKeys>(json).err()?;
    let de = &mut serde_json::Deserializer::from_slice(json);
    let err = serde_path_to_error::deserialize::<_, NoDuplicateKeys>(de).err()?;
    let path = err.path().to_string();
    let key = err.into_inner().to_string();
    let key = key.strip_prefix(DUPLICATE).unwrap_or(&key);
    let key = key.find(" at line ").map_or(key, |i| &key[..i]);
    let field = match path.as_str() {
        "." | "" | "?" => key.to_owned(),
        p => format!("{p}.{key}"),
    };
    Some(duplicate_error(key, Some(field)))
}

const DUPLICATE: &str = "duplicate key: ";

/// Walks a JSON value and fails on the first object that repeats a key.
struct NoDuplicateKeys;

impl<'de> Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoDuplicateKeysVisitor)
    }
}

struct NoDuplicateKeysVisitor;

impl<'de> serde::de::Visitor<'de> for NoDuplicateKeysVisitor {
    type Value = NoDuplicateKeys;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<NoDuplicateKeys, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<NoDuplicateKeys, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<NoDuplicateKeys, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<NoDuplicateKeys, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<NoDuplicateKeys, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_unit<E>(self) -> Result<NoDuplicateKeys, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> Result<NoDuplicateKeys, A::Error> {
        while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(NoDuplicateKeys)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<NoDuplicateKeys, A::Error> {
        // Objects in records are small: a linear scan beats hashing.
        let mut seen: Vec<Cow<'de, str>> = Vec::with_capacity(8);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if seen.contains(&key) {
                return Err(serde::de::Error::custom(format!("{DUPLICATE}{key}")));
            }
            map.next_value::<NoDuplicateKeys>()?;
            seen.push(key);
        }
        Ok(NoDuplicateKeys)
    }
}

/// `1 entry`, `2 entries`.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What a line holds when it is not a JSON object (`None` for an object, or for text that is
/// not JSON at all, which the parser words better).
fn not_an_object(line: &[u8]) -> Option<&'static str> {
    let first = line.iter().find(|b| !b.is_ascii_whitespace())?;
    Some(match first {
        b'{' => return None,
        b'[' => "an array",
        b'"' => "a string",
        b'-' | b'0'..=b'9' => "a number",
        b't' | b'f' => "a boolean",
        b'n' => "null",
        _ => return None,
    })
}

fn missing(field: &str) -> LineError {
    LineError::missing(field)
}

fn required_id(id: Option<Id>, field: &str) -> Result<String, LineError> {
    id.map(|i| i.0).ok_or_else(|| missing(field))
}

fn parse_header(format: Option<&Value>, line: &[u8]) -> Result<Record, LineError> {
    match format.and_then(Value::as_str) {
        Some("gyre/1") => {}
        Some(other) => {
            return Err(LineError::new(
                format!("unsupported format \"{other}\" (this gyre reads \"gyre/1\")"),
                "format",
            ));
        }
        None => return Err(missing("format")),
    }
    // The header is small and free-form (tokenizer, meta, …): keep all of it.
    let header: Value = serde_json::from_slice(line).map_err(|e| LineError {
        message: format!("malformed JSON: {e}"),
        field: None,
    })?;
    if let Some(spec) = header.get("tokenizer") {
        crate::tokenizer_spec::check_spec(spec).map_err(|e| LineError::new(e, "tokenizer"))?;
    }
    Trainer::from_header(&header)?;
    Ok(Record::Header(header))
}

fn is_reconstructed(meta: &Option<Value>) -> bool {
    meta.as_ref()
        .and_then(|m| m.get("reconstructed"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Also returns the largest span end. With `input_unread` the input is not known yet (see
/// [`Deferred`]): span ends are not checked against its length, which the caller does with
/// that largest end once it is read.
fn parse_request(
    raw: RawLine,
    warnings: &mut Vec<String>,
    input_unread: bool,
) -> Result<(RequestRecord, u64), LineError> {
    let execution = required_id(raw.execution, "execution")?;
    let id = required_id(raw.id, "id")?;
    let input = raw.input.ok_or_else(|| missing("input"))?;
    let output = raw.output.ok_or_else(|| missing("output"))?;
    if let Some(lp) = &raw.logprobs {
        if lp.len() != output.len() {
            return Err(LineError::new(
                format!(
                    "logprobs has {} but output has {}",
                    plural(lp.len(), "entry", "entries"),
                    plural(output.len(), "token", "tokens")
                ),
                "logprobs",
            ));
        }
    } else if !is_reconstructed(&raw.meta) {
        return Err(LineError::new(
            "missing field `logprobs` (required unless meta.reconstructed is true)",
            "logprobs",
        ));
    }
    let mut spans = Vec::new();
    let mut prev_end = 0u64;
    for (i, s) in raw.spans.unwrap_or_default().into_iter().enumerate() {
        if !input_unread && s.end > input.len() as u64 {
            return Err(LineError::new(
                format!(
                    "span end {} is past the input ({})",
                    s.end,
                    plural(input.len(), "token", "tokens")
                ),
                format!("spans[{i}].end"),
            ));
        }
        if i > 0 && s.end <= prev_end {
            return Err(LineError::new(
                format!("span ends must increase ({} after {prev_end})", s.end),
                format!("spans[{i}].end"),
            ));
        }
        prev_end = s.end;
        let source = match s.source.as_deref() {
            None => Source::Context,
            Some(name) => Source::parse(name).unwrap_or_else(|| {
                warnings.push(format!(
                    "spans[{i}].source \"{name}\" is not a gyre/1 source; read as \"context\""
                ));
                Source::Context
            }),
        };
        spans.push(Span {
            end: s.end as u32,
            source,
            call_id: s.call_id.map(|c| c.0.into_boxed_str()),
        });
    }
    let mut tool_calls = Vec::new();
    for (i, c) in raw.tool_calls.unwrap_or_default().into_iter().enumerate() {
        let n = output.len() as u64;
        if c.start > c.end || c.end > n {
            return Err(LineError::new(
                format!(
                    "tool call offsets {}..{} are outside the output ({})",
                    c.start,
                    c.end,
                    plural(n as usize, "token", "tokens")
                ),
                format!("tool_calls[{i}]"),
            ));
        }
        tool_calls.push(ToolCall {
            id: c.id.0,
            name: c.name,
            start: c.start as u32,
            end: c.end as u32,
        });
    }
    let purpose = match raw.purpose.as_deref() {
        None | Some("task") => Purpose::Task,
        Some("summary") => Purpose::Summary,
        Some(other) => {
            warnings.push(format!(
                "purpose \"{other}\" is not gyre/1; read as \"task\""
            ));
            Purpose::Task
        }
    };
    let actor = match raw.actor.as_deref() {
        None | Some("policy") => Actor::Policy,
        Some("evaluator") => Actor::Evaluator,
        Some(other) => {
            // Never train on output whose sampler we cannot name.
            warnings.push(format!(
                "actor \"{other}\" is not gyre/1; read as \"evaluator\" (not trainable)"
            ));
            Actor::Evaluator
        }
    };
    if raw
        .not_trainable
        .as_deref()
        .is_some_and(|r| r.trim().is_empty())
    {
        return Err(LineError::new(
            "not_trainable must say why (a non-empty string)",
            "not_trainable",
        ));
    }
    let request = RequestRecord {
        execution,
        id,
        input,
        output,
        logprobs: raw.logprobs,
        extends: raw.extends.map(|e| e.0),
        spans,
        agent: raw.agent.map(|a| a.0).unwrap_or_else(|| "main".to_owned()),
        purpose,
        actor,
        not_trainable: raw.not_trainable,
        tool_calls,
        finish: raw.finish,
        t: raw.t,
        model: raw.model,
        meta: raw.meta,
    };
    Ok((request, prev_end))
}

/// Largest reward magnitude accepted: the group advantage `reward − mean` of any rewards within
/// it is a finite `f64`.
pub const MAX_SCORE: f64 = 1e300;

fn parse_assessment(raw: RawLine) -> Result<AssessmentRecord, LineError> {
    let execution = required_id(raw.execution, "execution")?;
    let artifact = raw
        .artifact
        .filter(|a| !a.is_null())
        .ok_or_else(|| missing("artifact"))?;
    let version = raw
        .version
        .filter(|v| !v.is_null())
        .ok_or_else(|| missing("version"))?;
    let valid = match raw.status.as_deref() {
        Some("valid") => true,
        Some("failed") => false,
        Some(other) => {
            return Err(LineError::new(
                format!("status \"{other}\" is neither \"valid\" nor \"failed\""),
                "status",
            ));
        }
        None => return Err(missing("status")),
    };
    let t = raw.t.ok_or_else(|| missing("t"))?;
    let score = match raw.score {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(f) if f.abs() <= MAX_SCORE => Some(f),
            Some(f) if f.is_finite() => {
                return Err(LineError::new(
                    format!(
                        "score {f:e} is too large: rewards must lie within ±1e300 (group means and advantages of larger ones overflow)"
                    ),
                    "score",
                ));
            }
            _ => return Err(LineError::new("score is not a finite number", "score")),
        },
        Some(other) => {
            return Err(LineError::new(
                format!("score must be a number, found {}", json_type(&other)),
                "score",
            ));
        }
    };
    if valid && score.is_none() {
        return Err(LineError::new(
            "a valid assessment needs a numeric, finite score",
            "score",
        ));
    }
    Ok(AssessmentRecord {
        execution,
        artifact,
        version,
        valid,
        t,
        score,
        branch: raw.branch.map(|b| b.0),
        attempt: raw.attempt,
        evaluator: raw.evaluator,
        error: raw.error,
        critique: raw.critique,
    })
}

fn parse_closure(raw: RawLine) -> Result<ClosureRecord, LineError> {
    let execution = required_id(raw.execution, "execution")?;
    let t = raw.t.ok_or_else(|| missing("t"))?;
    let status = match raw.status.as_deref() {
        Some("completed") => ClosureStatus::Completed,
        Some("timeout") => ClosureStatus::Timeout,
        Some("error") => ClosureStatus::Error,
        Some(other) => {
            return Err(LineError::new(
                format!("status \"{other}\" is not completed, timeout or error"),
                "status",
            ));
        }
        None => return Err(missing("status")),
    };
    Ok(ClosureRecord {
        execution,
        t,
        status,
        committed: raw.committed.map(|c| c.0),
        artifact: raw.artifact.filter(|a| !a.is_null()),
        version: raw.version.filter(|v| !v.is_null()),
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Why the fast path ([`split_token_arrays`]) does not take a line.
#[derive(Debug, PartialEq)]
pub enum Decline {
    /// Anything it does not read itself: serde_json reads the whole line.
    Unusual,
    /// The line repeats one of its own keys.
    DuplicateKey(String),
}

/// A line with its `input`, `output` and `logprobs` arrays taken out and read.
pub struct SplitLine {
    /// The line without those members (still a JSON object).
    pub rest: Vec<u8>,
    /// The `input` token ids, when written as an array.
    pub input: Option<Vec<u32>>,
    /// The `output` token ids, when written as an array.
    pub output: Option<Vec<u32>>,
    /// The `logprobs`, when written as an array.
    pub logprobs: Option<Vec<f64>>,
}

/// Splits the `input` and `output` token arrays out of a record line, reading them with a
/// digit loop (serde_json spends most of a load in its per-element path otherwise). Declines
/// ([`Decline::Unusual`]) whenever the line is not a plain JSON object whose two arrays hold only
/// canonical integers below 2^32 (or when an object nested in it repeats a key), so every
/// unusual or invalid line takes the serde_json path; a line that repeats one of its own keys
/// is [`Decline::DuplicateKey`].
pub fn split_token_arrays(line: &[u8]) -> Result<SplitLine, Decline> {
    split(line, false).map(|(split, _)| split)
}

/// [`split_token_arrays`]; with `defer_input` the `input` array is not read but only found (up
/// to the first `]` after its `[`), and the range of its bytes after the `[`, `]` included, is
/// returned beside the split. Whether those bytes are a token array is for whoever reads them.
fn split(line: &[u8], defer_input: bool) -> Result<(SplitLine, Option<Range<usize>>), Decline> {
    use Decline::Unusual;
    let mut p = skip_ws(line, 0);
    if line.get(p) != Some(&b'{') {
        return Err(Unusual);
    }
    p += 1;
    let mut out = SplitLine {
        rest: Vec::with_capacity(line.len().min(4096)),
        input: None,
        output: None,
        logprobs: None,
    };
    out.rest.push(b'{');
    let mut first = true;
    let mut keys: Vec<&[u8]> = Vec::with_capacity(16);
    let mut scan = Scan::default();
    let mut deferred = None;
    loop {
        p = skip_ws(line, p);
        match line.get(p).ok_or(Unusual)? {
            b'}' => break,
            b',' if !keys.is_empty() => p = skip_ws(line, p + 1),
            _ if keys.is_empty() => {}
            _ => return Err(Unusual),
        }
        let key_start = p;
        if line.get(p) != Some(&b'"') {
            return Err(Unusual);
        }
        let key_len = line[key_start + 1..]
            .iter()
            .position(|&b| b == b'"')
            .ok_or(Unusual)?;
        let key_end = key_start + 1 + key_len;
        let key = &line[key_start + 1..key_end];
        if key.contains(&b'\\') {
            return Err(Unusual);
        }
        if keys.contains(&key) {
            // Valid UTF-8 is left to serde_json to check; an invalid key is no duplicate.
            return Err(match std::str::from_utf8(key) {
                Ok(k) => Decline::DuplicateKey(k.to_owned()),
                Err(_) => Unusual,
            });
        }
        keys.push(key);
        p = skip_ws(line, key_end + 1);
        if line.get(p) != Some(&b':') {
            return Err(Unusual);
        }
        p = skip_ws(line, p + 1);
        let array = line.get(p) == Some(&b'[');
        let slot = match key {
            b"input" => Some(&mut out.input),
            b"output" => Some(&mut out.output),
            _ => None,
        };
        match slot {
            Some(_) if array && defer_input && key == b"input" => {
                let close = memchr::memchr(b']', &line[p..]).ok_or(Unusual)?;
                deferred = Some(p + 1..p + close + 1);
                p += close + 1;
            }
            Some(slot) if array => {
                let (ids, end) = read_token_array(line, p).ok_or(Unusual)?;
                *slot = Some(ids);
                p = end;
            }
            None if array && key == b"logprobs" => {
                let (values, end) = read_number_array(line, p).ok_or(Unusual)?;
                out.logprobs = Some(values);
                p = end;
            }
            _ => {
                let end = skip_value(line, p, &mut scan).ok_or(Unusual)?;
                if !first {
                    out.rest.push(b',');
                }
                out.rest.extend_from_slice(&line[key_start..key_end + 1]);
                out.rest.push(b':');
                out.rest.extend_from_slice(&line[p..end]);
                first = false;
                p = end;
            }
        }
    }
    if skip_ws(line, p + 1) != line.len() {
        return Err(Unusual);
    }
    out.rest.push(b'}');
    Ok((out, deferred))
}

fn skip_ws(line: &[u8], mut p: usize) -> usize {
    while p < line.len() && matches!(line[p], b' ' | b'\t' | b'\n' | b'\r') {
        p += 1;
    }
    p
}

/// Reads `[1, 2, 3]` starting at `p`; `None` unless every element is a canonical integer below
/// 2^32. Returns the ids and the position after `]`.
fn read_token_array(line: &[u8], p: usize) -> Option<(Vec<u32>, usize)> {
    let mut ids = Vec::with_capacity((line.len() - p) / 4);
    let close = read_ids(line, p + 1, ArrayAt::Start, &mut ids)?;
    Some((ids, close + 1))
}

/// Where [`read_ids`] starts in a token array.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ArrayAt {
    /// Just after the `[`: the array may be empty.
    Start,
    /// Just after a `,`: an element must follow.
    Comma,
    /// Just after an element: a `,` or the `]` must follow.
    Element,
}

/// The one grammar of the fast token-array path: reads the elements of a token array from `p`
/// (in state `at`) to its `]`, appending them to `ids`. `None` unless every element is a
/// canonical integer below 2^32 (no sign, fraction, exponent or leading zero; at most ten
/// digits) separated by commas and JSON whitespace. Returns the position of the `]`.
pub(crate) fn read_ids(
    line: &[u8],
    mut p: usize,
    at: ArrayAt,
    ids: &mut Vec<u32>,
) -> Option<usize> {
    p = skip_ws(line, p);
    match at {
        ArrayAt::Start if line.get(p) == Some(&b']') => return Some(p),
        ArrayAt::Element => match line.get(p)? {
            b',' => p = skip_ws(line, p + 1),
            b']' => return Some(p),
            _ => return None,
        },
        ArrayAt::Start | ArrayAt::Comma => {}
    }
    loop {
        let start = p;
        let mut v: u64 = 0;
        while let Some(&d) = line.get(p).filter(|d| d.is_ascii_digit()) {
            v = v * 10 + (d - b'0') as u64;
            p += 1;
            if p - start > 10 {
                return None;
            }
        }
        let digits = p - start;
        if digits == 0 || (digits > 1 && line[start] == b'0') || v > u32::MAX as u64 {
            return None;
        }
        ids.push(v as u32);
        p = skip_ws(line, p);
        match line.get(p)? {
            b',' => p = skip_ws(line, p + 1),
            b']' => return Some(p),
            _ => return None,
        }
    }
}

/// Reads `[-0.5, -1e-3]` starting at `p`; `None` unless every element is a JSON number with a
/// finite value. Rust's `f64` parsing is correctly rounded, like serde_json's `float_roundtrip`,
/// so the values are bit for bit the same.
fn read_number_array(line: &[u8], mut p: usize) -> Option<(Vec<f64>, usize)> {
    p += 1;
    let mut values = Vec::new();
    p = skip_ws(line, p);
    if line.get(p) == Some(&b']') {
        return Some((values, p + 1));
    }
    loop {
        let end = json_number_end(line, p)?;
        let v: f64 = std::str::from_utf8(&line[p..end]).ok()?.parse().ok()?;
        if !v.is_finite() {
            return None;
        }
        values.push(v);
        p = skip_ws(line, end);
        match line.get(p)? {
            b',' => p = skip_ws(line, p + 1),
            b']' => return Some((values, p + 1)),
            _ => return None,
        }
    }
}

/// End of the JSON number at `p` (`-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`), if one is.
fn json_number_end(line: &[u8], mut p: usize) -> Option<usize> {
    let digits = |p: usize| line[p..].iter().take_while(|b| b.is_ascii_digit()).count();
    if line.get(p) == Some(&b'-') {
        p += 1;
    }
    match digits(p) {
        0 => return None,
        n if n > 1 && line[p] == b'0' => return None,
        n => p += n,
    }
    if line.get(p) == Some(&b'.') {
        match digits(p + 1) {
            0 => return None,
            n => p += 1 + n,
        }
    }
    if matches!(line.get(p), Some(b'e' | b'E')) {
        p += 1;
        if matches!(line.get(p), Some(b'+' | b'-')) {
            p += 1;
        }
        match digits(p) {
            0 => return None,
            n => p += n,
        }
    }
    Some(p)
}

/// Where the member value starting at `p` ends: the `,` or `}` after it at depth 0 (strings
/// with escapes, nested arrays and objects skipped). serde_json validates what this skips.
/// `None` also when an object inside repeats a key or has a key with an escape: serde_json then
/// reads the whole line, and the duplicate is reported with its path.
fn skip_value<'a>(line: &'a [u8], mut p: usize, scan: &mut Scan<'a>) -> Option<usize> {
    scan.keys.clear();
    scan.frames.clear();
    let mut expect_key = false;
    loop {
        match *line.get(p)? {
            b'"' => {
                let start = p + 1;
                let mut escaped = false;
                p += 1;
                loop {
                    match *line.get(p)? {
                        b'\\' => {
                            escaped = true;
                            p += 2;
                        }
                        b'"' => break,
                        _ => p += 1,
                    }
                }
                if expect_key {
                    let key = &line[start..p];
                    let first = scan.frames.last().map_or(0, |&(_, first)| first);
                    if escaped || scan.keys[first..].contains(&key) {
                        return None;
                    }
                    scan.keys.push(key);
                    expect_key = false;
                }
                p += 1;
            }
            c @ (b'[' | b'{') => {
                scan.frames.push((c == b'{', scan.keys.len()));
                expect_key = c == b'{';
                p += 1;
            }
            b']' | b'}' if !scan.frames.is_empty() => {
                let (_, first) = scan.frames.pop()?;
                scan.keys.truncate(first);
                expect_key = false;
                p += 1;
            }
            b',' | b'}' if scan.frames.is_empty() => return Some(p),
            b']' => return None,
            b',' => {
                expect_key = scan.frames.last().is_some_and(|&(object, _)| object);
                p += 1;
            }
            _ => p += 1,
        }
    }
}

/// Scratch space of [`skip_value`], reused across the members of a line: the keys of the
/// objects being read, and per open array or object whether it is an object and where its keys
/// start.
#[derive(Default)]
struct Scan<'a> {
    keys: Vec<&'a [u8]>,
    frames: Vec<(bool, usize)>,
}

/// Slow path, taken only for lines that failed: re-parse tracking the JSON path to name the field.
fn describe_json_error(line: &[u8]) -> LineError {
    let de = &mut serde_json::Deserializer::from_slice(line);
    match serde_path_to_error::deserialize::<_, RawLine>(de) {
        Ok(_) => LineError {
            message: "malformed JSON".into(),
            field: None,
        },
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let detail = strip_position(&inner.to_string());
            let duplicate = detail
                .strip_prefix("duplicate field `")
                .and_then(|d| d.strip_suffix('`'));
            if let Some(key) = duplicate {
                // The path is the object's (the second key is refused before its value).
                let field = match path.as_str() {
                    "." | "" | "?" => key.to_owned(),
                    p => format!("{p}.{key}"),
                };
                return duplicate_error(key, Some(field));
            }
            let message = if inner.is_syntax() || inner.is_eof() {
                format!("malformed JSON: {detail} at column {}", inner.column())
            } else if path.starts_with("input[") || path.starts_with("output[") {
                format!("token ids must be integers in 0..2^32: {detail}")
            } else {
                detail
            };
            // serde_path_to_error says `?` where the error is in a key it could not read.
            let field = (path != "." && path != "?" && !path.is_empty()).then_some(path);
            LineError { message, field }
        }
    }
}

/// serde_json appends " at line 1 column N"; the line is already named, keep the message short.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

/// Checks [`split_token_arrays`] against serde_json on one line, for the property test and the
/// fuzz target: when the fast path takes a line (and its other members are JSON, so
/// [`parse_line`] keeps it), serde_json reads the same line as an object
/// with the same arrays (log-probs bit for bit) and the same other members, and no object in it
/// repeats a key; when it reports a
/// duplicate key, the line's own keys do repeat. Declining is always allowed.
pub fn check_split_against_serde(line: &[u8]) -> Result<(), String> {
    let shown = String::from_utf8_lossy(line);
    let split = match split_token_arrays(line) {
        Err(Decline::Unusual) => return Ok(()),
        Err(Decline::DuplicateKey(key)) => {
            return match top_level_keys(line) {
                Some(keys) if keys.iter().filter(|k| **k == key).count() < 2 => {
                    Err(format!("no duplicate {key:?} in {shown}"))
                }
                _ => Ok(()),
            };
        }
        Ok(split) => split,
    };
    // The members left to serde_json are only skipped over by the fast path: when they are
    // not JSON, [`parse_line`] reads the whole line again with serde_json.
    let Ok(rest) = serde_json::from_slice::<Value>(&split.rest) else {
        return Ok(());
    };
    let whole: Value = serde_json::from_slice(line)
        .map_err(|e| format!("the fast path took a line serde_json rejects ({e}): {shown}"))?;
    if let Some(e) = duplicate_key(line) {
        return Err(format!(
            "the fast path took a line with a duplicate key ({}): {shown}",
            e.message
        ));
    }
    let Value::Object(mut whole) = whole else {
        return Err(format!("the fast path took a non-object: {shown}"));
    };
    for (key, ids) in [("input", &split.input), ("output", &split.output)] {
        if let Some(ids) = ids {
            if whole.remove(key) != Some(Value::from(ids.clone())) {
                return Err(format!("{key} read differently from {shown}"));
            }
            if rest.get(key).is_some() {
                return Err(format!("{key} left in the rest of {shown}"));
            }
        }
    }
    if let Some(values) = &split.logprobs {
        let expected: Vec<f64> = whole
            .remove("logprobs")
            .and_then(|v| serde_json::from_value(v).ok())
            .ok_or_else(|| format!("logprobs that serde_json does not read as numbers: {shown}"))?;
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        if bits(values) != bits(&expected) || rest.get("logprobs").is_some() {
            return Err(format!("logprobs read differently from {shown}"));
        }
    }
    if rest != Value::Object(whole) {
        return Err(format!("other members differ: {shown}"));
    }
    Ok(())
}

/// The keys of a JSON object line in order, repeats included (`None` if it is not one).
fn top_level_keys(line: &[u8]) -> Option<Vec<String>> {
    struct Keys(Vec<String>);
    impl<'de> Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut m: A,
                ) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some(k) = m.next_key::<String>()? {
                        m.next_value::<serde::de::IgnoredAny>()?;
                        keys.push(k);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(V)
        }
    }
    serde_json::from_slice::<Keys>(line).ok().map(|k| k.0)
}

#[cfg(test)]
mod tests {
    use super::{Decline, check_split_against_serde, split_token_arrays};
    use proptest::prelude::*;

    /// A JSON value as text, shaped like what records hold (and what breaks readers): numbers
    /// in every notation, strings with escapes and delimiters, nested arrays and objects.
    fn json_value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            (0u64..=u64::MAX).prop_map(|n| n.to_string()),
            (-1e300f64..1e300).prop_map(|f| f.to_string()),
            "-?(0|[1-9][0-9]{0,12})(\\.[0-9]{1,17})?([eE][+-]?[0-9]{1,3})?",
            "\"([a-z,:\\[\\]{}]|\\\\[\"\\\\/nt]|\\\\u00[0-9a-f]{2}){0,8}\"",
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(("[a-z]{1,3}", inner), 0..4).prop_map(|kv| {
                    let members: Vec<String> = kv
                        .into_iter()
                        .map(|(k, v)| format!("\"{k}\":{v}"))
                        .collect();
                    format!("{{{}}}", members.join(","))
                }),
            ]
        })
    }

    /// A token or log-prob array as text: mostly well-formed, sometimes not (signs, leading
    /// zeros, out-of-range ids, fractions, exponents, stray whitespace, trailing commas).
    fn array() -> impl Strategy<Value = String> {
        let element = prop_oneof![
            4 => (0u64..=u32::MAX as u64).prop_map(|n| n.to_string()),
            1 => (u32::MAX as u64..=u64::MAX).prop_map(|n| n.to_string()),
            1 => "-?[0-9]{1,3}(\\.[0-9]{0,3})?([eE][+-]?[0-9]{0,3})?",
            1 => (-50.0f64..0.0).prop_map(|f| f.to_string()),
            1 => Just("\"1\"".to_owned()),
        ];
        (
            prop::collection::vec(element, 0..12),
            " ?",
            prop::bool::weighted(0.05),
        )
            .prop_map(|(items, ws, trailing)| {
                let sep = format!("{ws},{ws}");
                let comma = if trailing { "," } else { "" };
                format!("[{ws}{}{comma}{ws}]", items.join(&sep))
            })
    }

    /// A record line: known and unknown keys (sometimes repeated), arrays or other values.
    fn line() -> impl Strategy<Value = String> {
        let key = prop_oneof![
            Just("input"),
            Just("output"),
            Just("logprobs"),
            Just("kind"),
            Just("meta"),
            Just("spans"),
            Just("x"),
        ];
        let value = prop_oneof![3 => array(), 2 => json_value()];
        (
            prop::collection::vec((key, value), 0..7),
            " ?",
            prop::bool::weighted(0.05),
        )
            .prop_map(|(members, ws, junk)| {
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| format!("{ws}\"{k}\"{ws}:{ws}{v}"))
                    .collect();
                let tail = if junk { " x" } else { "" };
                format!("{ws}{{{}}}{tail}", members.join(","))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn the_fast_path_reads_lines_as_serde_json_does(line in line()) {
            if let Err(e) = check_split_against_serde(line.as_bytes()) {
                prop_assert!(false, "{}", e);
            }
        }

        #[test]
        fn arbitrary_bytes_never_fool_the_fast_path(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut line = b"{\"input\":[1],".to_vec();
            line.extend_from_slice(&bytes);
            if let Err(e) = check_split_against_serde(&line) {
                prop_assert!(false, "{}", e);
            }
        }
    }

    /// Found by the parse_line fuzz target: invalid UTF-8 in an unknown member was accepted.
    #[test]
    fn text_that_is_not_utf8_is_refused_anywhere_in_a_line() {
        for line in [
            &b"{\"kind\":\"closure\",\"x\":\"e\xcc\",\"execution\":\"e\",\"t\":1,\"status\":\"timeout\"}"[..],
            b"{\"kind\":\"closure\",\"x\":[\"\xff\"],\"input\":[01],\"execution\":\"e\",\"t\":1,\"status\":\"timeout\"}",
        ] {
            let e = super::parse_line(line).err().expect("refused");
            assert!(e.message.contains("not UTF-8"), "{}", e.message);
        }
    }

    #[test]
    fn the_fast_path_takes_plain_records_and_refuses_repeated_keys() {
        let plain = br#"{"kind":"request","execution":"e1","id":"r1","input":[1,2,3],"output":[4],"logprobs":[-0.5]}"#;
        assert!(split_token_arrays(plain).is_ok());
        for (line, key) in [
            (&br#"{"input":[1],"input":[2]}"#[..], "input"),
            (br#"{"logprobs":null,"logprobs":[-1]}"#, "logprobs"),
            (br#"{"t":1,"x":2,"t":1}"#, "t"),
        ] {
            assert_eq!(
                split_token_arrays(line).err(),
                Some(Decline::DuplicateKey(key.into()))
            );
        }
        // A repeat inside a nested object goes to serde_json, which names its path.
        for line in [
            &br#"{"input":[1],"meta":{"a":1,"a":2}}"#[..],
            br#"{"spans":[{"end":1},{"end":2,"x":{"k":[{}],"k":3}}]}"#,
        ] {
            assert_eq!(split_token_arrays(line).err(), Some(Decline::Unusual));
        }
        assert!(
            split_token_arrays(br#"{"spans":[{"end":1},{"end":2}],"m":{"a":{"a":1}}}"#).is_ok()
        );
    }
}
