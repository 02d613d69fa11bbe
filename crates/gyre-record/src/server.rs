//! The HTTP side: routes, one request's path from the harness to the upstream and back, and
//! shutdown (SIGINT/SIGTERM stop accepting, finish in-flight requests for a bounded time, and
//! close the recording).

use gyre_format::note;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use eyre::{Result, WrapErr, bail, eyre};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::chat::{
    Api, ApiError, ChatRequest, ErrorKind, Finish, Reply, ReplyCall, TokenLogprob, now,
};
use super::journal::{Attribution, Hints, Journal, Outcome};
use super::render::{Context, RenderTurn, Renderer};
use super::sampled::OutputReader;
use super::upstream::{Flavor, Stopped, Upstream};
use super::{anthropic, openai};
use gyre_engine::record::Purpose;
use gyre_text::{ChatTemplate, RenderOptions, TokenText};

/// What `gyre record` was asked to do.
#[derive(Clone, Debug)]
pub struct Config {
    /// The policy server's base URL.
    pub upstream: String,
    /// Which server it is.
    pub flavor: Flavor,
    /// `NAME|PATH`: a bundled tokenizer, or a `tokenizer.json` (or the directory holding it)
    /// with its `tokenizer_config.json` beside it.
    pub tokenizer: String,
    /// The recording (appended to when it exists).
    pub out: PathBuf,
    /// Address to listen on (port 0 = any free port).
    pub listen: String,
    /// Model name sent upstream (default: the upstream's first served model).
    pub model: Option<String>,
    /// Longest wait for one upstream answer.
    pub timeout: Duration,
    /// Longest wait for in-flight requests at shutdown.
    pub drain: Duration,
    /// Outputs kept for payload restoration.
    pub payload_limit: usize,
    /// No per-request log lines.
    pub quiet: bool,
}

/// Everything the handlers share.
struct Shared {
    journal: Mutex<Journal>,
    renderer: Mutex<Renderer>,
    reader: OutputReader,
    upstream: Upstream,
    inflight: AtomicUsize,
    closing: AtomicBool,
    recorded: AtomicU64,
    quiet: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A handler that panicked cannot leave the journal half-written (lines are written whole).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tokenizer, chat template and the header's `tokenizer` value for `arg`.
fn load_tokenizer(arg: &str, out: &Path) -> Result<(TokenText, ChatTemplate, Value)> {
    if gyre_text::tokenizer::BUNDLED.contains(&arg) {
        let tok = TokenText::bundled(arg)?;
        let tmpl = match arg {
            "qwen3" => ChatTemplate::qwen3()?,
            other => bail!("no chat template is bundled for {other}"),
        };
        return Ok((tok, tmpl, Value::from(arg)));
    }
    let path = Path::new(arg);
    let (json, config) = if path.is_dir() {
        (
            path.join("tokenizer.json"),
            path.join("tokenizer_config.json"),
        )
    } else {
        let dir = path.parent().unwrap_or(Path::new("."));
        (path.to_path_buf(), dir.join("tokenizer_config.json"))
    };
    let tok = TokenText::from_file(&json)?;
    let tmpl = ChatTemplate::from_config_file(&config).wrap_err_with(|| {
        format!(
            "the chat template: gyre record needs the tokenizer_config.json that comes with {}",
            json.display()
        )
    })?;
    let abs = std::fs::canonicalize(&json).unwrap_or(json.clone());
    let out_dir = std::fs::canonicalize(
        out.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
    )
    .unwrap_or_default();
    let shown = abs.strip_prefix(&out_dir).unwrap_or(&abs);
    Ok((tok, tmpl, json!({ "path": shown.to_string_lossy() })))
}

/// Runs the proxy until SIGINT or SIGTERM.
pub fn serve(cfg: Config) -> Result<()> {
    let (tok, tmpl, tok_value) = load_tokenizer(&cfg.tokenizer, &cfg.out)
        .wrap_err_with(|| format!("loading tokenizer {:?}", cfg.tokenizer))?;
    let eos = tmpl.eos_token().map(str::to_owned);
    let reader = OutputReader::new(tok.clone(), eos.as_deref());
    // Build the id → bytes table now rather than on the first request.
    tok.vocab_size();
    let renderer = Renderer::new(tok, tmpl, eos.as_deref())?;
    let upstream = Upstream::new(&cfg.upstream, cfg.flavor, cfg.timeout, cfg.model.clone())
        .map_err(|e| eyre!(e))?;
    let mut header_meta = Map::new();
    header_meta.insert("recorded_by".into(), "gyre record".into());
    header_meta.insert("upstream".into(), upstream.base().into());
    let (journal, opened) = Journal::open(
        &cfg.out,
        &tok_value,
        &header_meta,
        &reader,
        cfg.payload_limit,
    )?;
    if opened.lines > 0 {
        note!(
            "gyre record: appending to {} ({} lines; {} outputs of open executions restorable)",
            cfg.out.display(),
            opened.lines,
            opened.restorable
        );
    }
    let shared = Arc::new(Shared {
        journal: Mutex::new(journal),
        renderer: Mutex::new(renderer),
        reader,
        upstream,
        inflight: AtomicUsize::new(0),
        closing: AtomicBool::new(false),
        recorded: AtomicU64::new(0),
        quiet: cfg.quiet,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    runtime.block_on(run(cfg, shared))
}

async fn run(cfg: Config, shared: Arc<Shared>) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .wrap_err_with(|| format!("listening on {}", cfg.listen))?;
    let addr: SocketAddr = listener.local_addr()?;
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(|s: State<Arc<Shared>>, h: HeaderMap, b: Bytes| chat(s, h, b, Api::OpenAi)),
        )
        .route(
            "/v1/messages",
            post(|s: State<Arc<Shared>>, h: HeaderMap, b: Bytes| chat(s, h, b, Api::Anthropic)),
        )
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/models", get(models))
        .route("/gyre/closure", post(closure))
        .route("/gyre/assessment", post(assessment))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(256 << 20))
        .with_state(Arc::clone(&shared));
    println!(
        "gyre record: listening on http://{addr} (upstream {}, recording to {})",
        shared.upstream.base(),
        cfg.out.display()
    );
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let closing = Arc::clone(&shared);
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        shutdown_signal().await;
        closing.closing.store(true, Ordering::SeqCst);
        let n = closing.inflight.load(Ordering::SeqCst);
        note!("gyre record: stopping; finishing {n} in-flight request(s)");
        let _ = stop_tx.send(true);
    });
    let drain = cfg.drain;
    let gave_up = tokio::select! {
        r = server => {
            r.wrap_err("serving")?;
            false
        }
        _ = async {
            let _ = stop_rx.wait_for(|stop| *stop).await;
            tokio::time::sleep(drain).await;
        } => true,
    };
    let mut journal = lock(&shared.journal);
    journal.flush().map_err(|e| eyre!("{e}"))?;
    let n = shared.recorded.load(Ordering::SeqCst);
    if gave_up {
        note!(
            "gyre record: gave up on {} request(s) still in flight after {} s (not recorded)",
            shared.inflight.load(Ordering::SeqCst),
            drain.as_secs()
        );
    }
    note!(
        "gyre record: {n} request(s) recorded this run; {} closed",
        cfg.out.display()
    );
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Counts a request as in flight while alive.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn error_response(api: Api, e: &ApiError) -> Response {
    let body = match api {
        Api::OpenAi => openai::error(e),
        Api::Anthropic => anthropic::error(e),
    };
    let status = StatusCode::from_u16(e.kind.status()).unwrap_or(StatusCode::BAD_GATEWAY);
    (status, axum::Json(body)).into_response()
}

async fn chat(
    State(st): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
    api: Api,
) -> Response {
    st.inflight.fetch_add(1, Ordering::SeqCst);
    let _guard = InFlight(&st.inflight);
    if st.closing.load(Ordering::SeqCst) {
        return error_response(
            api,
            &ApiError::new(ErrorKind::Unavailable, "gyre record is shutting down"),
        );
    }
    let started = Instant::now();
    match handle(&st, api, &headers, &body).await {
        Ok((resp, line)) => {
            if !st.quiet {
                note!("{line} {} ms", started.elapsed().as_millis());
            }
            resp
        }
        Err(e) => {
            note!("gyre record: {} error {}: {e}", api.name(), e.kind.status());
            error_response(api, &e)
        }
    }
}

fn hints(headers: &HeaderMap, req: &ChatRequest) -> Result<Hints, ApiError> {
    let get = |name: &str| -> Result<Option<String>, ApiError> {
        headers
            .get(name)
            .map(|v| {
                v.to_str()
                    .map(|s| s.trim().to_owned())
                    .map_err(|_| ApiError::invalid(name, format!("header {name} is not text")))
            })
            .transpose()
            .map(|v| v.filter(|s| !s.is_empty()))
    };
    let purpose = match get("x-gyre-purpose")?.as_deref() {
        None => None,
        Some("task") => Some(Purpose::Task),
        Some("summary") => Some(Purpose::Summary),
        Some(other) => {
            return Err(ApiError::invalid(
                "x-gyre-purpose",
                format!("x-gyre-purpose must be task or summary, not {other:?}"),
            ));
        }
    };
    let budget_s = match get("x-gyre-budget")? {
        None => None,
        Some(b) => Some(
            b.parse::<f64>()
                .ok()
                .filter(|b| b.is_finite() && *b >= 0.0)
                .ok_or_else(|| {
                    ApiError::invalid("x-gyre-budget", "x-gyre-budget must be seconds (a number)")
                })?,
        ),
    };
    Ok(Hints {
        execution: get("x-gyre-execution")?,
        session: get("x-claude-code-session-id")?.or_else(|| req.session.clone()),
        agent: get("x-gyre-agent")?,
        purpose,
        group: get("x-gyre-group")?,
        budget_s,
        arrived: now(),
    })
}

fn parse_body(api: Api, body: &[u8]) -> Result<ChatRequest, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            ErrorKind::InvalidRequest,
            format!("the body is not JSON: {e}"),
        )
    })?;
    match api {
        Api::OpenAi => openai::parse(&value),
        Api::Anthropic => anthropic::parse(&value),
    }
}

/// Renders, samples, records and answers one chat request; the log line on success.
async fn handle(
    st: &Arc<Shared>,
    api: Api,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Response, String), ApiError> {
    let started = Instant::now();
    let req = parse_body(api, body)?;
    let hints = hints(headers, &req)?;
    let t = hints.arrived;
    let prep_st = Arc::clone(st);
    let (req, attr, ctx) = tokio::task::spawn_blocking(move || prep_st.prepare(req, &hints))
        .await
        .map_err(|e| ApiError::new(ErrorKind::Internal, format!("rendering failed: {e}")))??;
    let prepared = started.elapsed();
    let completion = st
        .upstream
        .complete(&ctx.tokens, &req.sampling, &req.model)
        .await?;
    let sampled_at = started.elapsed();
    let sampled = st.reader.read(&completion.ids)?;
    let model = st.upstream.model(&req.model).await;
    let finish = match (&completion.stopped, sampled.calls.is_empty()) {
        (Stopped::Length, _) => Finish::Length,
        (_, false) => Finish::ToolCalls,
        (Stopped::Stop(s), true) => Finish::StopSequence(s.clone()),
        (Stopped::Eos, true) => Finish::Stop,
    };
    let (call_prefix, reply_prefix) = match api {
        Api::OpenAi => ("call_", "chatcmpl-"),
        Api::Anthropic => ("toolu_", "msg_"),
    };
    let (reply_id, calls, request_id, written) = {
        let mut j = lock(&st.journal);
        let calls: Vec<(ReplyCall, u32, u32)> = sampled
            .calls
            .iter()
            .map(|c| {
                (
                    ReplyCall {
                        id: j.call_id(call_prefix),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    },
                    c.start,
                    c.end,
                )
            })
            .collect();
        let written = j.commit(
            &attr,
            &ctx,
            t,
            &Outcome {
                output: &completion.ids,
                logprobs: &completion.logprobs,
                calls: &calls,
                content: &sampled.content,
                eos: sampled.eos,
                finish: finish.name(),
                model: &model,
                api: api.name(),
            },
        )?;
        (j.response_id(reply_prefix), calls, written.0, written.1)
    };
    st.recorded.fetch_add(1, Ordering::SeqCst);
    let logprobs = if req.logprobs {
        let pieces = st.reader.pieces(&completion.ids)?;
        pieces
            .iter()
            .zip(&completion.logprobs)
            .map(|(b, &lp)| TokenLogprob {
                token: String::from_utf8_lossy(b).into_owned(),
                bytes: b.to_vec(),
                logprob: lp,
            })
            .collect()
    } else {
        Vec::new()
    };
    let reply = Reply {
        id: reply_id,
        created: t as u64,
        model: req.model.clone(),
        reasoning: sampled.reasoning,
        content: sampled.content,
        calls: calls.into_iter().map(|(c, _, _)| c).collect(),
        finish,
        prompt_tokens: ctx.tokens.len(),
        completion_tokens: completion.ids.len(),
        logprobs,
    };
    let line = format!(
        "{} {} {} {}{} +{} in, {} out",
        attr.execution,
        request_id,
        attr.agent,
        if attr.purpose == Purpose::Summary {
            "summary "
        } else {
            ""
        },
        match &written {
            Some(base) => format!("extends {base}"),
            None => "full".to_owned(),
        },
        ctx.tokens.len(),
        completion.ids.len(),
    );
    let mut resp = match (api, req.stream) {
        (Api::OpenAi, false) => axum::Json(openai::response(&reply, req.logprobs)).into_response(),
        (Api::Anthropic, false) => axum::Json(anthropic::response(&reply)).into_response(),
        (Api::OpenAi, true) => sse(openai::stream(&reply, req.logprobs, req.include_usage)),
        (Api::Anthropic, true) => sse(anthropic::stream(&reply)),
    };
    // Where the time went, for clients and benchmarks (W3C Server-Timing).
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let timing = format!(
        "render;dur={:.3}, upstream;dur={:.3}, record;dur={:.3}",
        ms(prepared),
        ms(sampled_at - prepared),
        ms(started.elapsed() - sampled_at)
    );
    if let Ok(v) = HeaderValue::from_str(&timing) {
        resp.headers_mut().insert("server-timing", v);
    }
    Ok((resp, line))
}

fn sse(text: String) -> Response {
    let mut resp = Response::new(Body::from(text));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

impl Shared {
    /// Attribution and the rendered context (CPU work: runs off the async workers).
    fn prepare(
        &self,
        mut req: ChatRequest,
        hints: &Hints,
    ) -> Result<(ChatRequest, Attribution, Context), ApiError> {
        let opts = RenderOptions {
            add_generation_prompt: true,
            enable_thinking: req.enable_thinking,
        };
        let mut turns = std::mem::take(&mut req.turns);
        let (attr, ctx) = {
            let (rturns, attr) = lock(&self.journal).attribute(&mut turns, hints);
            let ctx = lock(&self.renderer)
                .context(&rturns, &req.tools, opts)
                .map_err(|e| {
                    ApiError::new(
                        ErrorKind::InvalidRequest,
                        format!("rendering the conversation with the chat template: {e:#}"),
                    )
                })?;
            (attr, ctx)
        };
        req.turns = turns;
        Ok((req, attr, ctx))
    }
}

async fn count_tokens(State(st): State<Arc<Shared>>, body: Bytes) -> Response {
    let api = Api::Anthropic;
    let counted = (|| {
        let mut value: Value = serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(
                ErrorKind::InvalidRequest,
                format!("the body is not JSON: {e}"),
            )
        })?;
        if let Some(o) = value.as_object_mut() {
            o.entry("max_tokens").or_insert(1.into());
        }
        let req = anthropic::parse(&value)?;
        let rturns: Vec<RenderTurn> = req
            .turns
            .iter()
            .map(|turn| RenderTurn {
                turn,
                candidates: Vec::new(),
            })
            .collect();
        let opts = RenderOptions {
            add_generation_prompt: true,
            enable_thinking: req.enable_thinking,
        };
        lock(&st.renderer)
            .context(&rturns, &req.tools, opts)
            .map(|c| c.tokens.len())
            .map_err(|e| ApiError::new(ErrorKind::InvalidRequest, format!("{e:#}")))
    })();
    match counted {
        Ok(n) => axum::Json(json!({ "input_tokens": n })).into_response(),
        Err(e) => error_response(api, &e),
    }
}

async fn models(State(st): State<Arc<Shared>>) -> Response {
    let id = st.upstream.model("gyre-record").await;
    axum::Json(json!({
        "object": "list",
        "data": [{"id": id, "object": "model", "created": 0, "owned_by": "gyre-record"}],
    }))
    .into_response()
}

fn gyre_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            ErrorKind::InvalidRequest,
            format!("the body is not JSON: {e}"),
        )
    })
}

async fn closure(State(st): State<Arc<Shared>>, body: Bytes) -> Response {
    let done = gyre_body(&body).and_then(|v| {
        lock(&st.journal).closure(&v)?;
        Ok(v)
    });
    match done {
        Ok(v) => {
            note!(
                "gyre record: closed {}",
                v.get("execution").unwrap_or(&Value::Null)
            );
            axum::Json(json!({"ok": true})).into_response()
        }
        Err(e) => error_response(Api::OpenAi, &e),
    }
}

async fn assessment(State(st): State<Arc<Shared>>, body: Bytes) -> Response {
    match gyre_body(&body).and_then(|v| lock(&st.journal).assessment(&v)) {
        Ok(()) => axum::Json(json!({"ok": true})).into_response(),
        Err(e) => error_response(Api::OpenAi, &e),
    }
}

async fn not_found(uri: axum::http::Uri) -> Response {
    let e = ApiError::new(
        ErrorKind::NotFound,
        format!(
            "gyre record serves POST /v1/chat/completions, /v1/messages, /gyre/closure and \
             /gyre/assessment; not {}",
            uri.path()
        ),
    );
    let api = if uri.path().starts_with("/v1/messages") {
        Api::Anthropic
    } else {
        Api::OpenAi
    };
    error_response(api, &e)
}
