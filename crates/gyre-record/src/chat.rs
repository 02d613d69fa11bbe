//! The API-neutral view of a chat request and reply, and the errors the proxy answers with.

use std::fmt;

use serde_json::Value;

use gyre_engine::record::Source;
use gyre_text::Message;

/// Which API a request came in on (decides the shape of answers and errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    OpenAi,
    /// Anthropic Messages (`POST /v1/messages`).
    Anthropic,
    /// OpenAI Responses (`POST /v1/responses`).
    Responses,
}

impl Api {
    /// The name written in a record's `meta.api`.
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAi => "openai",
            Api::Anthropic => "anthropic",
            Api::Responses => "responses",
        }
    }
}

/// One message of a conversation and the span source of its content.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    /// The message as the chat template sees it.
    pub msg: Message,
    /// Where its content came from.
    pub source: Source,
}

impl Turn {
    /// A turn labelled by its role (`system`, `user`, `tool`, else `assistant`).
    pub fn of(msg: Message) -> Self {
        let source = match msg.role.as_str() {
            "system" => Source::System,
            "user" => Source::User,
            "tool" => Source::Tool,
            _ => Source::Assistant,
        };
        Turn { msg, source }
    }
}

/// Sampling settings passed on to the upstream (absent = the upstream's default).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sampling {
    /// Most tokens to sample.
    pub max_tokens: Option<u64>,
    /// Temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Top-k sampling.
    pub top_k: Option<i64>,
    /// Min-p sampling (vLLM/SGLang extension of the Chat API).
    pub min_p: Option<f64>,
    /// Repetition penalty (vLLM/SGLang extension of the Chat API).
    pub repetition_penalty: Option<f64>,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Sampling seed.
    pub seed: Option<i64>,
    /// OpenAI presence penalty.
    pub presence_penalty: Option<f64>,
    /// OpenAI frequency penalty.
    pub frequency_penalty: Option<f64>,
}

impl Sampling {
    /// The settings given, by their OpenAI/vLLM names (absent ones left out: the server's
    /// defaults apply). What is sent upstream and what the record's `meta.sampling` says are
    /// this one map, so they cannot disagree.
    pub fn fields(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.into(), v);
            }
        };
        put("max_tokens", self.max_tokens.map(Value::from));
        put("temperature", self.temperature.map(Value::from));
        put("top_p", self.top_p.map(Value::from));
        put("top_k", self.top_k.map(Value::from));
        put("min_p", self.min_p.map(Value::from));
        put(
            "repetition_penalty",
            self.repetition_penalty.map(Value::from),
        );
        put("seed", self.seed.map(Value::from));
        put("presence_penalty", self.presence_penalty.map(Value::from));
        put("frequency_penalty", self.frequency_penalty.map(Value::from));
        put(
            "stop",
            (!self.stop.is_empty()).then(|| Value::from(self.stop.clone())),
        );
        m
    }
}

/// A chat request in either API, as the proxy needs it.
#[derive(Clone, Debug)]
pub struct ChatRequest {
    /// The model the client named.
    pub model: String,
    /// The conversation.
    pub turns: Vec<Turn>,
    /// Tool schemas in OpenAI function form (`{"type": "function", "function": {…}}`).
    pub tools: Vec<Value>,
    /// Sampling settings.
    pub sampling: Sampling,
    /// Answer as server-sent events.
    pub stream: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
    /// OpenAI `logprobs: true`: return the sampled tokens' log-probs.
    pub logprobs: bool,
    /// The template's `enable_thinking`, when the request sets it.
    pub enable_thinking: Option<bool>,
    /// A harness session id found in the body (Anthropic `metadata.user_id`'s `session_…`).
    pub session: Option<String>,
    /// What parsing changed on the way to the template, for the record's `meta`
    /// (`dropped_system_blocks`, `placeholders`, `prefill`).
    pub meta: serde_json::Map<String, Value>,
    /// The last turn is an assistant prefill (Anthropic: a final assistant message with text):
    /// the context ends inside it and the model continues it.
    pub prefill: bool,
}

/// Why generation stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The model ended its turn.
    Stop,
    /// The token limit was reached.
    Length,
    /// The turn ends with tool calls.
    ToolCalls,
    /// A stop string matched.
    StopSequence(String),
}

impl Finish {
    /// The record's `finish` value.
    pub fn name(&self) -> &'static str {
        match self {
            Finish::Stop | Finish::StopSequence(_) => "stop",
            Finish::Length => "length",
            Finish::ToolCalls => "tool_calls",
        }
    }
}

/// A tool call of the reply.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplyCall {
    /// The call id the proxy issued.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments (a JSON object).
    pub arguments: Value,
}

/// One sampled token, for clients that asked for log-probs.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The token's text.
    pub token: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its behaviour log-prob.
    pub logprob: f64,
}

/// The answer to a chat request, in neither API's shape yet.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// Response id (`chatcmpl-…` / `msg_…`).
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// Model name echoed to the client.
    pub model: String,
    /// Thinking text, when the model thought.
    pub reasoning: Option<String>,
    /// Visible text.
    pub content: String,
    /// Tool calls.
    pub calls: Vec<ReplyCall>,
    /// Why sampling stopped.
    pub finish: Finish,
    /// Input tokens.
    pub prompt_tokens: usize,
    /// Output tokens.
    pub completion_tokens: usize,
    /// Per-token log-probs (filled only when the client asked).
    pub logprobs: Vec<TokenLogprob>,
}

/// What kind of failure an [`ApiError`] is (mapped to each API's error type names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The client's request is unusable (400).
    InvalidRequest,
    /// No credentials, or not the right ones (401: the control routes' bearer token).
    Unauthorized,
    /// Not allowed for this caller (403: a request naming an execution its URL does not give).
    Forbidden,
    /// No such route (404).
    NotFound,
    /// The record conflicts with the recording (409, e.g. a second closure).
    Conflict,
    /// The request body is larger than `--max-request-mb` (413).
    TooLarge,
    /// The upstream failed or answered something unusable (502).
    Upstream,
    /// The upstream did not answer in time (504).
    Timeout,
    /// The proxy itself failed (500, e.g. the recording cannot be written).
    Internal,
    /// The proxy is shutting down (503).
    Unavailable,
}

impl ErrorKind {
    /// The HTTP status.
    pub fn status(self) -> u16 {
        match self {
            ErrorKind::InvalidRequest => 400,
            ErrorKind::Unauthorized => 401,
            ErrorKind::Forbidden => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict => 409,
            ErrorKind::TooLarge => 413,
            ErrorKind::Upstream => 502,
            ErrorKind::Timeout => 504,
            ErrorKind::Internal => 500,
            ErrorKind::Unavailable => 503,
        }
    }
}

/// An error answered to the client, in the shape of the API it called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// What failed.
    pub kind: ErrorKind,
    /// One line for the client (and the proxy's log).
    pub message: String,
    /// The offending request field, when known (OpenAI `param`).
    pub param: Option<String>,
}

impl ApiError {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ApiError {
            kind,
            message: message.into(),
            param: None,
        }
    }

    /// A 400 about request field `param`.
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        ApiError {
            kind: ErrorKind::InvalidRequest,
            message: message.into(),
            param: Some(param.to_owned()),
        }
    }

    /// A 502: the upstream answered something unusable.
    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Upstream, message)
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.param {
            Some(p) => write!(f, "{} ({p})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ApiError {}

/// The text of a content value that may be a string, `null`, or a list of text parts
/// (`{"type": "text", "text": …}`); other parts (images, audio, files) are refused, since the
/// policy is fed token ids of text.
pub fn text_of(content: Option<&Value>, param: &str) -> Result<String, ApiError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for (i, p) in parts.iter().enumerate() {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        out.push_str(p.get("text").and_then(Value::as_str).ok_or_else(|| {
                            ApiError::invalid(&format!("{param}[{i}].text"), "text is missing")
                        })?)
                    }
                    other => {
                        return Err(ApiError::invalid(
                            &format!("{param}[{i}].type"),
                            format!(
                                "content part type {} is not supported: gyre record feeds the \
                                 policy text only",
                                other.map_or("(none)".into(), |t| format!("{t:?}"))
                            ),
                        ));
                    }
                }
            }
            Ok(out)
        }
        Some(_) => Err(ApiError::invalid(
            param,
            "content must be a string or a list of parts",
        )),
    }
}

/// Optional number field `key` of `body`.
pub fn opt_f64(body: &Value, key: &str) -> Result<Option<f64>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| ApiError::invalid(key, format!("{key} must be a number"))),
    }
}

/// Optional non-negative integer field `key` of `body`.
pub fn opt_u64(body: &Value, key: &str) -> Result<Option<u64>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| ApiError::invalid(key, format!("{key} must be a non-negative integer"))),
    }
}

/// Optional integer field `key` of `body`.
pub fn opt_i64(body: &Value, key: &str) -> Result<Option<i64>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| ApiError::invalid(key, format!("{key} must be an integer"))),
    }
}

/// Optional boolean field `key` of `body` (absent = `false`).
pub fn flag(body: &Value, key: &str) -> Result<bool, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::invalid(
            key,
            format!("{key} must be true or false"),
        )),
    }
}

/// A stop value: a string or a list of strings.
pub fn stop_list(v: Option<&Value>, key: &str) -> Result<Vec<String>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|s| {
                s.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| ApiError::invalid(key, format!("{key} must hold strings")))
            })
            .collect(),
        Some(_) => Err(ApiError::invalid(
            key,
            format!("{key} must be a string or a list of strings"),
        )),
    }
}

/// A random id body: `len` characters from `[0-9A-Za-z]` (the generator is seeded from the
/// OS's random source at start, so ids never repeat across restarts of the proxy).
pub fn random_id(rng: &mut impl rand_core::RngCore, len: usize) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    (0..len)
        .map(|_| {
            // Rejection sampling keeps every character equally likely (248 = 4 × 62).
            loop {
                let b = (rng.next_u32() & 0xff) as usize;
                if b < 248 {
                    return ALPHABET[b % 62] as char;
                }
            }
        })
        .collect()
}

/// Seconds since the Unix epoch.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
