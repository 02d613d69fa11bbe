//! The HTTP side: the model listener (the harness's routes, plain and under capability URLs),
//! the control listener (issuing executions, closures, assessments; bearer token), one
//! request's path from the harness to the upstream and back, and shutdown (SIGINT/SIGTERM stop
//! accepting, finish in-flight requests for a bounded time, and close the recording).

use gyre_format::note;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use eyre::{Result, WrapErr, eyre};
use gyre_format::note::Invalid;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::budget::{self, Budget, Held};
use super::chat::{
    Api, ApiError, ChatRequest, ErrorKind, Finish, Reply, ReplyCall, TokenLogprob, now,
};
use super::control::{Control, TokenSource};
use super::journal::{Attribution, Hints, Journal, Outcome, check_id};
use super::listen::{self, Limits};
use super::recording;
use super::render::{Context, RenderTurn, Renderer, Shape, TooLong};
use super::sampled::{self, OutputReader};
use super::upstream::{Flavor, Stopped, Upstream};
use super::{anthropic, openai, responses};
use gyre_engine::record::Purpose;
use gyre_text::{ChatTemplate, ModelAssets, RenderOptions, TokenText, sanitize};

/// What `gyre record` was asked to do.
#[derive(Clone, Debug)]
pub struct Config {
    /// The policy server's base URL.
    pub upstream: String,
    /// Which server it is.
    pub flavor: Flavor,
    /// `NAME|DIR|FILE`: a bundled tokenizer, a model directory, or a `tokenizer.json` (or
    /// `.gz`) whose directory holds the chat template (see [`ModelAssets::load`]).
    pub tokenizer: String,
    /// A chat template file overriding the tokenizer's (`--chat-template`).
    pub chat_template: Option<PathBuf>,
    /// The tool-call parser, by vLLM name (`--tool-parser`); chosen from the template if unset.
    pub tool_parser: Option<String>,
    /// The recording (appended to when it exists).
    pub out: PathBuf,
    /// Address the harness's model routes listen on (port 0 = any free port).
    pub listen: String,
    /// Address the control routes listen on (port 0 = any free port).
    pub control_listen: String,
    /// Where the control routes' bearer token comes from.
    pub control_token: TokenSource,
    /// Listening on a non-loopback address is allowed (else refused).
    pub allow_remote: bool,
    /// Only capability URLs are served: the plain `/v1/…` routes answer 404.
    pub capability_only: bool,
    /// Longest wait for a request's header or body, and between requests on a kept-alive
    /// connection.
    pub read_timeout: Duration,
    /// Most connections open at once, per listener.
    pub max_connections: usize,
    /// Largest request body read (`--max-request-mb`); a larger one is answered 413.
    pub max_request_bytes: usize,
    /// The upstream's API key (`--upstream-api-key-env`): the variable's name and its value.
    pub upstream_api_key: Option<(String, String)>,
    /// What the upstream's log-probs are (`--upstream-logprobs-mode`), when its operator says.
    pub logprobs_mode: Option<&'static str>,
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
    /// Memory all requests together may take to parse, render and tokenise their bodies
    /// (`--max-memory-mb`); a request waits for its share, or is answered 503.
    pub max_memory_bytes: usize,
    /// Returns free heap memory to the OS (the binary knows its allocator), called after a
    /// large request.
    pub release_memory: Option<fn()>,
}

/// Everything the handlers share.
struct Shared {
    journal: Mutex<Journal>,
    /// Shared without a lock: concurrent requests render at once (its caches lock briefly).
    renderer: Renderer,
    reader: OutputReader,
    upstream: Upstream,
    inflight: AtomicUsize,
    closing: AtomicBool,
    recorded: AtomicU64,
    quiet: bool,
    control: Control,
    /// `http://addr` of the model listener, for the capability URLs issued.
    model_base: OnceLock<String>,
    capability_only: bool,
    read_timeout: Duration,
    max_request_bytes: usize,
    logprobs_mode: Option<&'static str>,
    budget: Budget,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A handler that panicked cannot leave the journal half-written (lines are written whole).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tokenizer, chat template and the header's `tokenizer` value for `arg` (and
/// `--chat-template`): the bundled name, or the tokenizer file's path relative to the
/// recording's directory when it is inside it.
fn load_tokenizer(
    arg: &str,
    chat_template: Option<&Path>,
    out: &Path,
) -> Result<(TokenText, ChatTemplate, Value)> {
    let assets = ModelAssets::load(arg, chat_template)?;
    let Some(file) = &assets.tokenizer_file else {
        return Ok((assets.tokenizer, assets.template, Value::from(arg)));
    };
    let out_dir = std::fs::canonicalize(
        out.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
    )
    .unwrap_or_default();
    let shown = file.strip_prefix(&out_dir).unwrap_or(file);
    let header = json!({ "path": shown.to_string_lossy() });
    Ok((assets.tokenizer, assets.template, header))
}

/// Runs the proxy until SIGINT or SIGTERM.
pub fn serve(cfg: Config) -> Result<()> {
    // Before any descriptor is opened: the caps keep the control listener and the recording
    // reachable under any flood of model connections.
    let caps = listen::Caps::new(cfg.max_connections);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    // Before anything is written: a refused address leaves no recording behind.
    let listeners = runtime.block_on(async {
        let model = bind(&cfg.listen, cfg.allow_remote, "--listen", MODEL_EXPOSED).await?;
        let control = bind(
            &cfg.control_listen,
            cfg.allow_remote,
            "--control-listen",
            CONTROL_EXPOSED,
        )
        .await?;
        Ok::<_, eyre::Report>((model, control))
    })?;
    // A problem with the model's files is the user's to fix: one plain line, exit 2.
    let (tok, tmpl, tok_value) =
        load_tokenizer(&cfg.tokenizer, cfg.chat_template.as_deref(), &cfg.out).map_err(|e| {
            Invalid(format!(
                "--tokenizer {}: {}",
                sanitize(&cfg.tokenizer),
                sanitize(&format!("{e:#}"))
            ))
        })?;
    let eos = tmpl.eos_token().map(str::to_owned);
    let parser_name = match &cfg.tool_parser {
        Some(name) => name.as_str(),
        None => sampled::detect(tmpl.source()),
    };
    let parser = sampled::by_name(parser_name).ok_or_else(|| {
        Invalid(format!(
            "--tool-parser {}: not a parser gyre has (one of: {})",
            sanitize(parser_name),
            sampled::PARSERS.join(", ")
        ))
    })?;
    let reader = OutputReader::new(tok.clone(), eos.as_deref(), parser);
    // Build the id → bytes table now rather than on the first request.
    tok.vocab_size();
    let renderer = Renderer::new(tok, tmpl, eos.as_deref())?;
    let upstream = Upstream::new(
        &cfg.upstream,
        cfg.flavor,
        cfg.timeout,
        cfg.model.clone(),
        cfg.upstream_api_key.clone(),
    )
    .map_err(|e| eyre!(e))?;
    // The recording first: a second writer is refused before anything is created, and what
    // this start creates is removed again if it is refused later (a full disk).
    let mut locked = recording::lock(&cfg.out)?;
    let mut leftovers = Leftovers(Vec::new());
    if locked.created {
        leftovers.0.push(cfg.out.clone());
    }
    let control = Control::load(&cfg.control_token)?;
    leftovers.0.extend(control.created.clone());
    let mut header_meta = Map::new();
    header_meta.insert("recorded_by".into(), "gyre record".into());
    header_meta.insert("upstream".into(), upstream.base().into());
    header_meta.insert("tool_parser".into(), reader.parser().name().into());
    let (journal, opened) = Journal::open(
        &cfg.out,
        &mut locked,
        &tok_value,
        &header_meta,
        &reader,
        cfg.payload_limit,
    )?;
    leftovers.0.clear();
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
        renderer,
        reader,
        upstream,
        inflight: AtomicUsize::new(0),
        closing: AtomicBool::new(false),
        recorded: AtomicU64::new(0),
        quiet: cfg.quiet,
        control,
        model_base: OnceLock::new(),
        capability_only: cfg.capability_only,
        read_timeout: cfg.read_timeout,
        max_request_bytes: cfg.max_request_bytes,
        logprobs_mode: cfg.logprobs_mode,
        budget: Budget::new(cfg.max_memory_bytes, cfg.release_memory),
    });
    match shared.renderer.floor() {
        Some(f) => {
            if !cfg.quiet {
                note!(
                    "gyre record: a conversation of more than max_model_len × {} bytes of \
                     rendered text is refused before tokenising (no token of this tokenizer is \
                     longer)",
                    f.max_token_bytes
                );
            }
        }
        None => note!(
            "gyre record: this tokenizer's normaliser can delete text, so conversations are not \
             refused by length before tokenising; only --max-request-mb bounds them"
        ),
    }
    if cfg.logprobs_mode.is_none() {
        note!(
            "gyre record: the upstream's log-prob mode is not known, so recorded as unknown: \
             vLLM's default (raw_logprobs) is before temperature/top-k/top-p, not the behaviour \
             policy's; start vLLM with --logprobs-mode processed_logprobs and pass \
             --upstream-logprobs-mode processed-logprobs (docs/record.md)"
        );
    }
    if let (Some((limit, before)), true) = (caps.fd_limit, caps.model < cfg.max_connections) {
        note!(
            "gyre record: the open-file limit is {limit}{}: at most {} model connections (each \
             may hold an upstream connection too) and {} control connections instead of \
             --max-connections {}, so the control listener and the recording keep descriptors",
            if limit > before {
                format!(" (raised from {before} to the hard limit)")
            } else {
                " (the hard limit)".to_owned()
            },
            caps.model,
            caps.control,
            cfg.max_connections
        );
    }
    runtime.block_on(run(cfg, shared, listeners, caps))
}

/// Files a start created, removed again when it is refused (dropped before being emptied): a
/// refused start leaves nothing behind to refuse the next one.
struct Leftovers(Vec<PathBuf>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What each listener exposes, for the warning on a non-loopback address.
const MODEL_EXPOSED: &str = "anyone who reaches it can sample from the upstream through it and \
     have the calls recorded (as new executions on the plain routes unless --capability-only)";
const CONTROL_EXPOSED: &str = "anyone who reaches it AND holds the control token can issue \
     executions, close them and write their scores";

/// Binds `addr`; a non-loopback address needs `allow_remote`, and is then said loudly.
async fn bind(
    addr: &str,
    allow_remote: bool,
    flag: &str,
    exposed: &str,
) -> Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .wrap_err_with(|| format!("listening on {addr} ({flag})"))?;
    let bound = listener.local_addr()?;
    if !bound.ip().is_loopback() {
        if !allow_remote {
            return Err(Invalid(format!(
                "{flag} {addr} is not a loopback address: {exposed}; pass --allow-remote to \
                 listen there anyway (docs/record.md, Security)"
            ))
            .into());
        }
        note!("gyre record: WARNING: {flag} {bound} is reachable from other hosts: {exposed}");
    }
    Ok(listener)
}

async fn run(
    cfg: Config,
    shared: Arc<Shared>,
    (listener, control_listener): (tokio::net::TcpListener, tokio::net::TcpListener),
    caps: listen::Caps,
) -> Result<()> {
    let addr: SocketAddr = listener.local_addr()?;
    let control_addr: SocketAddr = control_listener.local_addr()?;
    let _ = shared.model_base.set(format!("http://{addr}"));
    let app = model_router(Arc::clone(&shared));
    let control_app = control_router(Arc::clone(&shared));
    let signalled = shutdown_signal()?;
    // One write: a reader that takes the first line and closes the pipe still got both.
    let banner = format!(
        "gyre record: listening on http://{addr} (upstream {}, recording to {})\n\
         gyre record: control on http://{control_addr} (bearer token from {})\n",
        shared.upstream.base(),
        cfg.out.display(),
        shared.control.origin
    );
    {
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(banner.as_bytes())
            .and_then(|()| stdout.flush())
            .wrap_err("printing the listening addresses")?;
    }
    let limits = Limits {
        read_timeout: cfg.read_timeout,
        max_connections: caps.model,
        fd_capped: caps.model < cfg.max_connections,
    };
    let control_limits = Limits {
        max_connections: caps.control,
        fd_capped: caps.control < cfg.max_connections,
        ..limits
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let closing = Arc::clone(&shared);
    tokio::spawn(async move {
        signalled.await;
        closing.closing.store(true, Ordering::SeqCst);
        let n = closing.inflight.load(Ordering::SeqCst);
        note!("gyre record: stopping; finishing {n} in-flight request(s)");
        let _ = stop_tx.send(true);
    });
    let servers = async {
        tokio::join!(
            listen::serve(listener, app, limits, stop_rx.clone(), "model"),
            listen::serve(
                control_listener,
                control_app,
                control_limits,
                stop_rx.clone(),
                "control"
            ),
        )
    };
    let drain = cfg.drain;
    let mut stopped = stop_rx.clone();
    let gave_up = tokio::select! {
        _ = servers => false,
        _ = async {
            let _ = stopped.wait_for(|stop| *stop).await;
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

/// SIGINT or SIGTERM, listened for from the moment this is called (before "listening" is
/// printed, so a signal sent right after it is never the default action).
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).wrap_err("listening for SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).wrap_err("listening for SIGINT")?;
        Ok(async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
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
        Api::OpenAi | Api::Responses => openai::error(e),
        Api::Anthropic => anthropic::error(e),
    };
    let status = StatusCode::from_u16(e.kind.status()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut resp = (status, axum::Json(body)).into_response();
    if e.kind == ErrorKind::Unavailable {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

/// The harness's routes: plain (`/v1/…`, unless `--capability-only`) and under a capability
/// URL (`/x/<execution>/<capability>/v1/…`). No control route is served here.
fn model_router(shared: Arc<Shared>) -> Router {
    type Scope = UrlPath<(String, String)>;
    let mut app = Router::new()
        .route(
            "/x/{execution}/{capability}/v1/chat/completions",
            post(|s: State<Arc<Shared>>, p: Scope, h: HeaderMap, b: Body| {
                scoped_chat(s, p, h, b, Api::OpenAi)
            }),
        )
        .route(
            "/x/{execution}/{capability}/v1/messages",
            post(|s: State<Arc<Shared>>, p: Scope, h: HeaderMap, b: Body| {
                scoped_chat(s, p, h, b, Api::Anthropic)
            }),
        )
        .route(
            "/x/{execution}/{capability}/v1/responses",
            post(|s: State<Arc<Shared>>, p: Scope, h: HeaderMap, b: Body| {
                scoped_chat(s, p, h, b, Api::Responses)
            }),
        )
        .route(
            "/x/{execution}/{capability}/v1/messages/count_tokens",
            post(
                |s: State<Arc<Shared>>, p: Scope, h: HeaderMap, b: Body| async move {
                    match scope(&s, &p) {
                        Ok(_) => count_tokens(s, h, b).await,
                        Err(e) => error_response(Api::Anthropic, &e),
                    }
                },
            ),
        )
        .route(
            "/x/{execution}/{capability}/v1/models",
            get(|s: State<Arc<Shared>>, p: Scope| async move {
                match scope(&s, &p) {
                    Ok(_) => models(s).await,
                    Err(e) => error_response(Api::OpenAi, &e),
                }
            }),
        );
    if !shared.capability_only {
        app = app
            .route(
                "/v1/chat/completions",
                post(|s: State<Arc<Shared>>, h: HeaderMap, b: Body| {
                    chat(s, None, h, b, Api::OpenAi)
                }),
            )
            .route(
                "/v1/messages",
                post(|s: State<Arc<Shared>>, h: HeaderMap, b: Body| {
                    chat(s, None, h, b, Api::Anthropic)
                }),
            )
            .route(
                "/v1/responses",
                post(|s: State<Arc<Shared>>, h: HeaderMap, b: Body| {
                    chat(s, None, h, b, Api::Responses)
                }),
            )
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/models", get(models));
    }
    app.fallback(not_found).with_state(shared)
}

/// The control routes, every one behind the bearer token.
fn control_router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/gyre/executions", post(issue))
        .route("/gyre/closure", post(closure))
        .route("/gyre/assessment", post(assessment))
        .fallback(control_not_found)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&shared),
            require_token,
        ))
        .with_state(shared)
}

/// The execution a capability URL gives; a wrong capability is a 404, as for any unknown URL.
fn scope(st: &Shared, path: &UrlPath<(String, String)>) -> Result<String, ApiError> {
    let (execution, capability) = &path.0;
    if st.control.check(execution, capability) {
        Ok(execution.clone())
    } else {
        Err(ApiError::new(
            ErrorKind::NotFound,
            "no such URL on gyre record (a capability URL comes from POST /gyre/executions on \
             the control listener)",
        ))
    }
}

async fn scoped_chat(
    st: State<Arc<Shared>>,
    path: UrlPath<(String, String)>,
    headers: HeaderMap,
    body: Body,
    api: Api,
) -> Response {
    match scope(&st, &path) {
        Ok(execution) => chat(st, Some(execution), headers, body, api).await,
        Err(e) => {
            note!(
                "gyre record: {} error 404: a wrong capability URL",
                api.name()
            );
            error_response(api, &e)
        }
    }
}

/// The body, read within the read timeout and the size limit (a larger body is a 413,
/// refused from its `content-length` before it is read when it has one), with the part of the
/// memory budget it may cost held ([`budget::cost`], at most `text_cap` bytes of its text
/// tokenised): reserved from the `content-length` before reading, else as the body arrives.
async fn read_body(
    st: &Shared,
    headers: &HeaderMap,
    body: Body,
    text_cap: usize,
) -> Result<(Bytes, Held), ApiError> {
    use http_body_util::BodyExt;
    let limit = st.max_request_bytes;
    let too_large = |size: String| {
        ApiError::new(
            ErrorKind::TooLarge,
            format!(
                "the request body is {size}; gyre record reads at most {limit} bytes \
                 (--max-request-mb {}); nothing was recorded",
                limit >> 20
            ),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared.filter(|&n| n > limit as u64) {
        return Err(too_large(format!("{n} bytes")));
    }
    let timeout = st.read_timeout;
    let mut held = st.budget.none();
    let declared = declared.map_or(0, |n| n as usize);
    st.budget
        .reserve(&mut held, budget::cost(declared, text_cap), timeout)
        .await?;
    let read = async {
        let mut body = body;
        let mut buf = Vec::with_capacity(declared);
        let mut covered = declared;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                ApiError::new(
                    ErrorKind::InvalidRequest,
                    format!("reading the request body failed: {e}"),
                )
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let len = buf.len() + data.len();
            if len > limit {
                return Err(too_large(format!("more than {limit} bytes")));
            }
            if len > covered {
                // Ahead of the body, doubling, so a chunked body reserves a few times only.
                covered = len.max(covered * 2).min(limit);
                st.budget
                    .reserve(&mut held, budget::cost(covered, text_cap), timeout)
                    .await?;
            }
            buf.extend_from_slice(&data);
        }
        Ok(Bytes::from(buf))
    };
    match tokio::time::timeout(timeout, read).await {
        Err(_) => Err(ApiError::new(
            ErrorKind::InvalidRequest,
            format!(
                "the request body did not arrive within {} s (--read-timeout)",
                timeout.as_secs_f64()
            ),
        )),
        Ok(Err(e)) => Err(e),
        Ok(Ok(b)) => Ok((b, held)),
    }
}

impl Shared {
    /// The most text a model request can have tokenised: what the context holds before the
    /// refusal by length (non-ASCII text counted three times), unbounded without it. The
    /// upstream's error when it cannot say its context (the request would fail on it anyway).
    async fn text_cap(&self) -> Result<usize, ApiError> {
        let limit = self.upstream.context_len().await?;
        Ok(match (limit, self.renderer.floor()) {
            (Some(n), Some(f)) => usize::try_from(n)
                .unwrap_or(usize::MAX)
                .saturating_mul(f.max_token_bytes)
                .saturating_mul(3),
            _ => usize::MAX,
        })
    }
}

async fn chat(
    State(st): State<Arc<Shared>>,
    pinned: Option<String>,
    headers: HeaderMap,
    body: Body,
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
    let read = match st.text_cap().await {
        Ok(text_cap) => read_body(&st, &headers, body, text_cap).await,
        Err(e) => Err(e),
    };
    let handled = match read {
        // The budget is held until the answer is built.
        Ok((body, _held)) => handle(&st, api, pinned, &headers, body).await,
        Err(e) => Err(e),
    };
    match handled {
        Ok((resp, line)) => {
            if !st.quiet {
                note!("{} {} ms", sanitize(&line), started.elapsed().as_millis());
            }
            resp
        }
        Err(e) => {
            note!(
                "gyre record: {} error {}: {}",
                api.name(),
                e.kind.status(),
                sanitize(&e.to_string())
            );
            error_response(api, &e)
        }
    }
}

fn hints(
    headers: &HeaderMap,
    req: &ChatRequest,
    pinned: Option<String>,
) -> Result<Hints, ApiError> {
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
    // Every id, from a header or the body, has one alphabet and length (they reach the log).
    let id = |name: &str, value: Option<String>| -> Result<Option<String>, ApiError> {
        value.map(|v| check_id(name, &v).map(|()| v)).transpose()
    };
    let session = match get("x-claude-code-session-id")? {
        Some(s) => Some(s),
        None => id("metadata.user_id session_id", req.session.clone())?,
    };
    Ok(Hints {
        pinned,
        execution: id("x-gyre-execution", get("x-gyre-execution")?)?,
        session: id("x-claude-code-session-id", session)?,
        agent: id("x-gyre-agent", get("x-gyre-agent")?)?,
        purpose,
        group: id("x-gyre-group", get("x-gyre-group")?)?,
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
        Api::Responses => responses::parse(&value),
    }
}

/// Renders, samples, records and answers one chat request; the log line on success.
async fn handle(
    st: &Arc<Shared>,
    api: Api,
    pinned: Option<String>,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<(Response, String), ApiError> {
    let started = Instant::now();
    let req = parse_body(api, &body)?;
    // Only the parsed conversation is kept while rendering.
    drop(body);
    let hints = hints(headers, &req, pinned)?;
    let t = hints.arrived;
    let limit = st
        .upstream
        .context_len()
        .await?
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let prep_st = Arc::clone(st);
    let (req, attr, ctx) = tokio::task::spawn_blocking(move || prep_st.prepare(req, &hints, limit))
        .await
        .map_err(|e| ApiError::new(ErrorKind::Internal, format!("rendering failed: {e}")))??;
    let prepared = started.elapsed();
    let completion = st.upstream.complete(&ctx.tokens, &req.sampling).await?;
    let sampled_at = started.elapsed();
    // The text ends before a stop string (as vLLM's and SGLang's text does); the ids recorded
    // are all those sampled, the stop string's tokens included.
    let sampled = st
        .reader
        .read(&completion.ids, &completion.sent.stop, &req.tools)?;
    let model = completion
        .model
        .clone()
        .unwrap_or_else(|| req.model.clone());
    let mut request_meta = req.meta.clone();
    // The settings sent upstream (absent ones are the server's defaults, which may come from
    // the model's generation_config).
    request_meta.insert("sampling".into(), Value::Object(completion.sent.fields()));
    request_meta.insert(
        "logprobs_mode".into(),
        st.logprobs_mode.unwrap_or("unknown").into(),
    );
    request_meta.insert(
        "server".into(),
        match st.upstream.flavor() {
            Flavor::Vllm => "vllm",
            Flavor::Sglang => "sglang",
        }
        .into(),
    );
    let finish = match (&completion.stopped, sampled.calls.is_empty()) {
        (Stopped::Length, _) => Finish::Length,
        (_, false) => Finish::ToolCalls,
        (Stopped::Stop(s), true) => Finish::StopSequence(s.clone()),
        (Stopped::Eos, true) => Finish::Stop,
    };
    let (call_prefix, reply_prefix) = match api {
        Api::OpenAi => ("call_", "chatcmpl-"),
        Api::Anthropic => ("toolu_", "msg_"),
        Api::Responses => ("call_", "resp_"),
    };
    let (reply_id, calls, request_id, written) = {
        let mut j = lock(&st.journal);
        let calls: Vec<(ReplyCall, u32, u32)> = sampled
            .calls
            .iter()
            .map(|c| {
                (
                    ReplyCall {
                        id: if st.reader.parser().indexed_ids() {
                            j.indexed_call_id(&c.name)
                        } else {
                            j.call_id(call_prefix)
                        },
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
                request_meta: &request_meta,
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
        (Api::Responses, false) => {
            axum::Json(responses::response(&reply, req.logprobs)).into_response()
        }
        (Api::Responses, true) => sse(responses::stream(&reply, req.logprobs)),
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
    /// Attribution and the rendered context (CPU work: runs off the async workers). The
    /// journal is locked for the attribution only; rendering takes no shared lock. A context
    /// surely longer than `limit` (the upstream's `max_model_len`) is refused before it is
    /// tokenised.
    fn prepare(
        &self,
        mut req: ChatRequest,
        hints: &Hints,
        limit: Option<usize>,
    ) -> Result<(ChatRequest, Attribution, Context), ApiError> {
        let shape = Shape {
            opts: RenderOptions {
                add_generation_prompt: true,
                enable_thinking: req.enable_thinking,
            },
            prefill: req.prefill,
            limit,
        };
        let mut turns = std::mem::take(&mut req.turns);
        let (attr, ctx) = {
            let (mut rturns, attr) = lock(&self.journal).attribute(&mut turns, hints)?;
            if req.prefill {
                // The harness wrote the prefill: it is rendered (and left open), never restored.
                if let Some(last) = rturns.last_mut() {
                    last.candidates.clear();
                }
            }
            let ctx = self
                .renderer
                .context(&rturns, &req.tools, shape)
                .map_err(render_error)?;
            (attr, ctx)
        };
        req.turns = turns;
        Ok((req, attr, ctx))
    }
}

/// A rendering failure as the client's error: too long for the context, or a conversation the
/// template refuses.
fn render_error(e: eyre::Report) -> ApiError {
    match e.downcast_ref::<TooLong>() {
        Some(t) => ApiError::invalid("messages", t.to_string()),
        None => ApiError::new(
            ErrorKind::InvalidRequest,
            format!("rendering the conversation with the chat template: {e:#}"),
        ),
    }
}

async fn count_tokens(State(st): State<Arc<Shared>>, headers: HeaderMap, body: Body) -> Response {
    let api = Api::Anthropic;
    // Counting needs no upstream: without its context length, no bound on the text.
    let text_cap = st.text_cap().await.unwrap_or(usize::MAX);
    let (body, _held) = match read_body(&st, &headers, body, text_cap).await {
        Ok(b) => b,
        Err(e) => return error_response(api, &e),
    };
    // Counting needs no upstream: without its context length, no length limit.
    let limit = st
        .upstream
        .context_len()
        .await
        .unwrap_or(None)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
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
        let shape = Shape {
            opts: RenderOptions {
                add_generation_prompt: true,
                enable_thinking: req.enable_thinking,
            },
            prefill: req.prefill,
            limit,
        };
        st.renderer
            .context(&rturns, &req.tools, shape)
            .map(|c| c.tokens.len())
            .map_err(render_error)
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

/// Refuses a control request without the bearer token (401; nothing is recorded).
async fn require_token(State(st): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    if st.control.authorized(req.headers()) {
        return next.run(req).await;
    }
    note!(
        "gyre record: control request {} {} without the control token refused (401)",
        req.method(),
        sanitize(req.uri().path())
    );
    let e = ApiError::new(
        ErrorKind::Unauthorized,
        "the control routes need `Authorization: Bearer <token>` with the control token \
         (docs/record.md, Security)",
    );
    let mut resp = error_response(Api::OpenAi, &e);
    resp.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    resp
}

async fn control_body(st: &Shared, headers: &HeaderMap, body: Body) -> Result<Value, ApiError> {
    // Control bodies are parsed, never tokenised.
    gyre_body(&read_body(st, headers, body, 0).await?.0)
}

/// `POST /gyre/executions`: issues an execution and its capability URL.
async fn issue(State(st): State<Arc<Shared>>, headers: HeaderMap, body: Body) -> Response {
    let issued = async {
        let (bytes, _held) = read_body(&st, &headers, body, 0).await?;
        let v = if bytes.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            gyre_body(&bytes)?
        };
        let Value::Object(o) = &v else {
            return Err(ApiError::new(
                ErrorKind::InvalidRequest,
                "the body must be a JSON object: {\"execution\"?, \"group\"?, \"budget_s\"?, \
                 \"task\"?}",
            ));
        };
        if let Some(k) = o
            .keys()
            .find(|k| !["execution", "group", "budget_s", "task"].contains(&k.as_str()))
        {
            return Err(ApiError::invalid(
                k,
                format!("unknown field {k:?} (execution, group, budget_s, task)"),
            ));
        }
        let execution = match o.get("execution") {
            None | Some(Value::Null) => None,
            Some(Value::String(e)) => Some(e.as_str()),
            Some(_) => return Err(ApiError::invalid("execution", "execution must be a string")),
        };
        let group = match o.get("group") {
            None | Some(Value::Null) => None,
            Some(g @ Value::String(_)) => Some(g),
            Some(_) => return Err(ApiError::invalid("group", "group must be a string")),
        };
        let budget_s = match o.get("budget_s") {
            None | Some(Value::Null) => None,
            Some(b) => Some(
                b.as_f64()
                    .filter(|b| b.is_finite() && *b >= 0.0)
                    .ok_or_else(|| ApiError::invalid("budget_s", "budget_s must be seconds"))?,
            ),
        };
        let task = o.get("task").filter(|t| !t.is_null());
        let id = lock(&st.journal).issue(execution, group, budget_s, task)?;
        let base = format!(
            "{}/x/{id}/{}",
            st.model_base.get().map_or("", String::as_str),
            st.control.capability(&id)
        );
        note!("gyre record: issued {id}");
        Ok::<_, ApiError>(json!({
            "execution": id,
            "base_url": base,
            "openai_base_url": format!("{base}/v1"),
        }))
    };
    match issued.await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error_response(Api::OpenAi, &e),
    }
}

async fn closure(State(st): State<Arc<Shared>>, headers: HeaderMap, body: Body) -> Response {
    let done = match control_body(&st, &headers, body).await {
        Ok(v) => lock(&st.journal).closure(&v).map(|()| v),
        Err(e) => Err(e),
    };
    match done {
        Ok(v) => {
            let id = v.get("execution").and_then(Value::as_str).unwrap_or("");
            note!("gyre record: closed {}", sanitize(id));
            axum::Json(json!({"ok": true})).into_response()
        }
        Err(e) => error_response(Api::OpenAi, &e),
    }
}

async fn assessment(State(st): State<Arc<Shared>>, headers: HeaderMap, body: Body) -> Response {
    let done = match control_body(&st, &headers, body).await {
        Ok(v) => lock(&st.journal).assessment(&v),
        Err(e) => Err(e),
    };
    match done {
        Ok(()) => axum::Json(json!({"ok": true})).into_response(),
        Err(e) => error_response(Api::OpenAi, &e),
    }
}

async fn control_not_found(uri: axum::http::Uri) -> Response {
    let e = ApiError::new(
        ErrorKind::NotFound,
        format!(
            "the control listener serves POST /gyre/executions, /gyre/closure and \
             /gyre/assessment; not {}",
            uri.path()
        ),
    );
    error_response(Api::OpenAi, &e)
}

async fn not_found(State(st): State<Arc<Shared>>, uri: axum::http::Uri) -> Response {
    let plain = if st.capability_only {
        "only under capability URLs /x/<execution>/<capability>/v1/… (--capability-only)"
    } else {
        "plain and under capability URLs /x/<execution>/<capability>/v1/…"
    };
    let e = ApiError::new(
        ErrorKind::NotFound,
        format!(
            "gyre record serves POST /v1/chat/completions, /v1/responses, /v1/messages, \
             /v1/messages/count_tokens and GET /v1/models, {plain}; not {}",
            uri.path()
        ),
    );
    let api = if uri.path().contains("/v1/messages") {
        Api::Anthropic
    } else {
        Api::OpenAi
    };
    error_response(api, &e)
}
