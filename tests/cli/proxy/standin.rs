//! A small deterministic stand-in for the policy server: vLLM's token-id `POST /v1/completions`
//! (`prompt` as ids, `logprobs: 1`, `return_token_ids: true`) and SGLang's `POST /generate`.
//!
//! The answer depends only on the prompt. The last user turn (or tool result) decides it:
//! - `FAIL-STATUS` → HTTP 500; `FAIL-NOIDS` → no `token_ids`; `FAIL-LOGPROBS` → one log-prob
//!   short; `FAIL-BADID` → a token id outside the vocabulary; `FAIL-SLOW` → answers after 3 s;
//! - a compaction request (`create a detailed summary of the conversation so far`) → a summary;
//! - otherwise the first user message's `steps=N` (default 2) decides: while fewer than N tool
//!   results are in the prompt, a thought, a line of text and one `bash` call (or, when the
//!   first message says `delegate` and nothing ran yet, a `Task` call); then a final answer.
//!
//! A prompt that ends inside an assistant turn (a prefill: text after the last
//! `<|im_start|>assistant\n`, past an empty think block, and no end-of-turn token) is continued:
//! a prefill `{` gets `"title": "Shell steps"}` (what Claude Code's title call wants), any other
//! ` and so on.`.
//!
//! vLLM's own defaults are kept: without `max_tokens` 16 tokens are sampled, and a prompt
//! longer than `max_model_len − max_tokens` is a 400. `/v1/models` lists the models with their
//! `max_model_len`, and can answer 503 for its first calls (a server still loading).
//!
//! Started with an API key (vLLM `--api-key`), every route answers 401 without
//! `Authorization: Bearer <key>`, as vLLM does.
//!
//! Stop strings behave as vLLM's: sampling stops at the token that completes one, the token
//! ids keep that token, the text is cut before the stop string, `finish_reason: "stop"` with
//! `stop_reason` naming it (SGLang: `finish_reason.matched`).
//!
//! With a [`Family`] the stand-in samples another model family's syntax with that family's
//! tokenizer instead: while fewer tool results than the first user message's `steps=N` are
//! in the prompt, the family's `bash` call; then its final answer.
//!
//! Log-probs are a hash of (prompt length, position). Every prompt received is kept, with
//! whether it was answered normally, so tests can compare it with the recording.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gyre_text::TokenText;
use serde_json::{Value, json};

/// One prompt the stand-in received.
#[derive(Clone, Debug)]
pub struct Received {
    /// The prompt ids.
    pub prompt: Vec<u32>,
    /// Answered with a normal completion.
    pub ok: bool,
    /// The settings sent with it: vLLM's body without `prompt`, SGLang's `sampling_params`.
    pub sent: Value,
}

/// A model family the stand-in samples for: its tokenizer and the syntax it writes.
#[derive(Clone, Debug)]
pub struct Family {
    /// The family's `tokenizer.json` (or `.gz`).
    pub tokenizer: std::path::PathBuf,
    /// What the chat template writes once per tool result (counts the steps done).
    pub result_marker: &'static str,
    /// The sample for step `done` of `steps`: a `bash` call, with the end-of-turn token.
    pub call: fn(done: usize, steps: usize) -> String,
    /// The final answer after `done` steps, with the end-of-turn token.
    pub answer: fn(done: usize) -> String,
}

/// How a stand-in behaves beyond its defaults.
#[derive(Clone, Debug)]
pub struct Options {
    /// vLLM `--api-key`.
    pub api_key: Option<String>,
    /// Served model ids (`/v1/models`).
    pub models: Vec<String>,
    /// Context length of every model.
    pub max_model_len: u64,
    /// `/v1/models` answers 503 this many times first.
    pub models_fail_first: usize,
    /// Sample this family's syntax (default: Qwen3's, with its scripted behaviours).
    pub family: Option<Family>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            api_key: None,
            models: vec!["standin".to_owned()],
            max_model_len: 40_960,
            models_fail_first: 0,
            family: None,
        }
    }
}

/// vLLM's `max_tokens` when a request has none.
const VLLM_DEFAULT_MAX_TOKENS: u64 = 16;

struct Inner {
    tok: TokenText,
    opts: Options,
    models_asked: Mutex<usize>,
    received: Mutex<Vec<Received>>,
    encoded: Mutex<HashMap<String, Vec<u32>>>,
}

/// A running stand-in.
pub struct StandIn {
    /// Its address.
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    _runtime: tokio::runtime::Runtime,
}

impl StandIn {
    /// Starts a stand-in on a free loopback port.
    pub fn start() -> StandIn {
        Self::start_with_key(None)
    }

    /// Starts a stand-in that wants `Authorization: Bearer KEY` (vLLM `--api-key KEY`).
    pub fn start_with_key(api_key: Option<&str>) -> StandIn {
        Self::start_with(Options {
            api_key: api_key.map(str::to_owned),
            ..Options::default()
        })
    }

    /// Starts a stand-in with `opts`.
    pub fn start_with(opts: Options) -> StandIn {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let tok = match &opts.family {
            Some(f) => TokenText::from_file(&f.tokenizer).unwrap(),
            None => TokenText::qwen3().unwrap(),
        };
        let inner = Arc::new(Inner {
            tok,
            opts,
            models_asked: Mutex::new(0),
            received: Mutex::new(Vec::new()),
            encoded: Mutex::new(HashMap::new()),
        });
        let app = Router::new()
            .route("/v1/completions", post(completions))
            .route("/generate", post(generate))
            .route("/v1/models", get(models))
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&inner),
                require_key,
            ))
            .with_state(Arc::clone(&inner));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move { axum::serve(listener, app).await });
        StandIn {
            addr,
            inner,
            _runtime: runtime,
        }
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every prompt received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }
}

/// vLLM's `--api-key` check: 401 `{"error": "Unauthorized"}` without the bearer key.
async fn require_key(
    State(inner): State<Arc<Inner>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(key) = &inner.opts.api_key else {
        return next.run(req).await;
    };
    let given = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    if given == Some(&format!("Bearer {key}")) {
        next.run(req).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "Unauthorized"})),
        )
            .into_response()
    }
}

async fn models(State(inner): State<Arc<Inner>>) -> Response {
    {
        let mut asked = inner.models_asked.lock().unwrap();
        *asked += 1;
        if *asked <= inner.opts.models_fail_first {
            return (StatusCode::SERVICE_UNAVAILABLE, "loading").into_response();
        }
    }
    let data: Vec<Value> = inner
        .opts
        .models
        .iter()
        .map(|id| json!({"id": id, "object": "model", "max_model_len": inner.opts.max_model_len}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

/// What to answer to a prompt.
enum Plan {
    Text(String),
    Fail(&'static str),
}

const COMPACTION_ASK: &str = "create a detailed summary of the conversation so far";

fn plan(prompt_text: &str) -> Plan {
    let open_turn = prompt_text
        .rsplit("<|im_start|>assistant\n")
        .next()
        .unwrap_or_default();
    let open_turn = open_turn
        .strip_prefix("<think>\n\n</think>\n\n")
        .unwrap_or(open_turn);
    if prompt_text.contains("<|im_start|>assistant\n")
        && !open_turn.is_empty()
        && !open_turn.contains("<|im_end|>")
    {
        return Plan::Text(if open_turn.ends_with('{') {
            "\"title\": \"Shell steps\"}<|im_end|>".into()
        } else {
            " and so on.<|im_end|>".into()
        });
    }
    let last_user = prompt_text
        .rsplit("<|im_start|>user\n")
        .next()
        .unwrap_or_default();
    for marker in [
        "FAIL-STATUS",
        "FAIL-NOIDS",
        "FAIL-LOGPROBS",
        "FAIL-BADID",
        "FAIL-SLOW",
    ] {
        if last_user.contains(marker) {
            return Plan::Fail(marker);
        }
    }
    if last_user.contains(COMPACTION_ASK) {
        return Plan::Text(
            "<think>\nSummarise.\n</think>\n\n<analysis>\nShort.\n</analysis>\n<summary>\n\
             1. The user asked for a series of shell steps to be run one by one.\n\
             2. Every step so far printed its own number and nothing failed.\n</summary><|im_end|>"
                .into(),
        );
    }
    let first_user = prompt_text
        .split("<|im_start|>user\n")
        .nth(1)
        .unwrap_or_default();
    let steps = first_user
        .split("steps=")
        .nth(1)
        .and_then(|s| {
            s.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse::<usize>()
                .ok()
        })
        .unwrap_or(2);
    let done = prompt_text.matches("<tool_response>").count();
    if done == 0 && first_user.contains("delegate") && !first_user.contains("Investigate") {
        return Plan::Text(
            "<think>\nDelegate it.\n</think>\n\nAsking a helper.\n<tool_call>\n\
             {\"name\": \"Task\", \"arguments\": {\"description\": \"look\", \"prompt\": \
             \"Investigate the build and report steps=1 back.\"}}\n</tool_call><|im_end|>"
                .into(),
        );
    }
    if done < steps {
        return Plan::Text(format!(
            "<think>\nStep {done} of {steps}.\n</think>\n\nRunning step {done}.\n<tool_call>\n\
             {{\"name\": \"bash\", \"arguments\": {{\"command\": \"echo {done}\", \"step\": {done}, \
             \"options\": {{\"timeout\": 10, \"shell\": \"sh\"}}}}}}\n</tool_call><|im_end|>"
        ));
    }
    Plan::Text(format!(
        "<think>\nAll {done} done.\n</think>\n\nFinished after {done} steps.<|im_end|>"
    ))
}

/// The family's call while fewer than `steps=N` tool results are in the prompt, then its answer.
fn family_plan(f: &Family, prompt_text: &str) -> Plan {
    let steps = prompt_text
        .split("steps=")
        .nth(1)
        .and_then(|s| {
            s.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse::<usize>()
                .ok()
        })
        .unwrap_or(2);
    let done = prompt_text.matches(f.result_marker).count();
    Plan::Text(if done < steps {
        (f.call)(done, steps)
    } else {
        (f.answer)(done)
    })
}

fn logprob(len: usize, i: usize) -> f64 {
    let mut h = (len as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64 + 1);
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 32;
    -((h % 4000) as f64) / 1000.0 - 0.001
}

/// Ids, log-probs and finish reason for `prompt`, or the failure to answer with.
fn answer(
    inner: &Inner,
    prompt: &[u32],
    max_tokens: Option<u64>,
    stop: &[String],
) -> Result<Answer, &'static str> {
    let text = inner.tok.decode(prompt);
    let planned = match &inner.opts.family {
        Some(f) => family_plan(f, &text),
        None => plan(&text),
    };
    let reply = match planned {
        Plan::Fail(m) => return Err(m),
        Plan::Text(t) => t,
    };
    let mut ids = {
        let mut cache = inner.encoded.lock().unwrap();
        cache
            .entry(reply.clone())
            .or_insert_with(|| inner.tok.encode(&reply).unwrap())
            .clone()
    };
    let mut finish = "stop";
    if let Some(m) = max_tokens {
        if (m as usize) < ids.len() {
            ids.truncate(m as usize);
            finish = "length";
        }
    }
    let mut text = inner.tok.decode(&ids);
    let mut matched = None;
    // The first token whose text completes a stop string ends the sample (kept in the ids);
    // the text ends before the stop string.
    let upto = if stop.is_empty() { 0 } else { ids.len() };
    if let Some((n, at, s)) = (1..=upto).find_map(|n| {
        let t = inner.tok.decode(&ids[..n]);
        stop.iter()
            .filter_map(|s| t.find(s.as_str()).map(|at| (at, s)))
            .min()
            .map(|(at, s)| (n, at, s.clone()))
    }) {
        ids.truncate(n);
        text = inner.tok.decode(&ids)[..at].to_owned();
        finish = "stop";
        matched = Some(s);
    }
    let lps = (0..ids.len()).map(|i| logprob(prompt.len(), i)).collect();
    Ok(Answer {
        ids,
        lps,
        finish,
        text,
        matched,
    })
}

/// A sample as the stand-in answers it.
struct Answer {
    ids: Vec<u32>,
    lps: Vec<f64>,
    finish: &'static str,
    /// The text returned (cut before a matched stop string).
    text: String,
    /// The stop string that ended it.
    matched: Option<String>,
}

/// The stop strings of a request (`stop` as vLLM and SGLang take it: a string or a list).
fn stops_of(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

fn prompt_of(v: Option<&Value>) -> Option<Vec<u32>> {
    v?.as_array()?
        .iter()
        .map(|t| t.as_u64().map(|t| t as u32))
        .collect()
}

async fn failure(marker: &str) -> Option<Response> {
    match marker {
        "FAIL-STATUS" => Some(
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({"object": "error", "message": "engine crashed", "code": 500})),
            )
                .into_response(),
        ),
        "FAIL-SLOW" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            None
        }
        _ => None,
    }
}

async fn completions(
    State(inner): State<Arc<Inner>>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let Some(prompt) = prompt_of(body.get("prompt")) else {
        return (StatusCode::BAD_REQUEST, "prompt must be token ids").into_response();
    };
    assert_eq!(body["logprobs"], 1);
    assert_eq!(body["return_token_ids"], true);
    let max_tokens = body
        .get("max_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(VLLM_DEFAULT_MAX_TOKENS);
    if prompt.len() as u64 + max_tokens > inner.opts.max_model_len {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"object": "error", "message": format!(
                "This model's maximum context length is {} tokens. However, you requested {} \
                 tokens ({} in the messages, {max_tokens} in the completion).",
                inner.opts.max_model_len, prompt.len() as u64 + max_tokens, prompt.len()),
                "code": 400})),
        )
            .into_response();
    }
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !inner.opts.models.iter().any(|m| m == model) {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"object": "error", "message": format!("The model `{model}` does not exist."), "code": 404})),
        )
            .into_response();
    }
    let answered = answer(
        &inner,
        &prompt,
        Some(max_tokens),
        &stops_of(body.get("stop")),
    );
    let mut sent = body.clone();
    sent.as_object_mut().map(|b| b.remove("prompt"));
    inner.received.lock().unwrap().push(Received {
        prompt: prompt.clone(),
        ok: answered.is_ok(),
        sent,
    });
    let marker = answered.as_ref().err().copied();
    let Answer {
        mut ids,
        mut lps,
        finish,
        text,
        matched,
    } = match answered {
        Ok(a) => a,
        Err(marker) => {
            if let Some(resp) = failure(marker).await {
                return resp;
            }
            Answer {
                ids: vec![9707, 151645],
                lps: vec![-0.1, -0.2],
                finish: "stop",
                text: inner.tok.decode(&[9707, 151645]),
                matched: None,
            }
        }
    };
    let mut choice = json!({"index": 0, "text": text, "finish_reason": finish,
        "stop_reason": matched, "prompt_token_ids": prompt});
    match marker {
        Some("FAIL-LOGPROBS") => {
            lps.pop();
        }
        Some("FAIL-BADID") => {
            // With its log-prob: only the id itself is wrong.
            ids.push(999_999_999);
            lps.push(-0.5);
        }
        _ => {}
    }
    choice["logprobs"] = json!({"token_logprobs": lps, "tokens": [], "top_logprobs": []});
    if marker != Some("FAIL-NOIDS") {
        choice["token_ids"] = json!(ids);
    }
    axum::Json(json!({"id": "cmpl-standin", "object": "text_completion", "model": "standin",
        "choices": [choice], "usage": {"prompt_tokens": prompt.len(), "completion_tokens": ids.len()}}))
    .into_response()
}

async fn generate(
    State(inner): State<Arc<Inner>>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let Some(prompt) = prompt_of(body.get("input_ids")) else {
        return (StatusCode::BAD_REQUEST, "input_ids must be token ids").into_response();
    };
    assert_eq!(body["return_logprob"], true);
    let params = body.get("sampling_params").cloned().unwrap_or(Value::Null);
    let max_tokens = params.get("max_new_tokens").and_then(Value::as_u64);
    let answered = answer(&inner, &prompt, max_tokens, &stops_of(params.get("stop")));
    inner.received.lock().unwrap().push(Received {
        prompt: prompt.clone(),
        ok: answered.is_ok(),
        sent: params,
    });
    let Ok(Answer {
        ids,
        lps,
        finish,
        text,
        matched,
    }) = answered
    else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "failure requested").into_response();
    };
    let triples: Vec<Value> = ids
        .iter()
        .zip(&lps)
        .map(|(id, lp)| json!([lp, id, null]))
        .collect();
    let finish = match (finish, matched) {
        ("length", _) => json!({"type": "length", "length": ids.len()}),
        (_, Some(s)) => json!({"type": "stop", "matched": s}),
        _ => json!({"type": "stop", "matched": 151645}),
    };
    axum::Json(json!({"text": text, "meta_info": {"id": "standin",
        "finish_reason": finish, "prompt_tokens": prompt.len(), "completion_tokens": ids.len(),
        "output_token_logprobs": triples}}))
    .into_response()
}
