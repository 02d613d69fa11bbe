//! `gyre record`: the recording proxy (docs/record.md).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use color_eyre::eyre::Result;
use gyre_format::note::Invalid;

use gyre_record::{Config, Flavor, TokenSource, serve};

/// What the upstream's log-probs are, as its operator started it.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogprobsMode {
    /// Before temperature, top-k, top-p (vLLM's default `raw_logprobs`).
    RawLogprobs,
    /// After them: the behaviour policy's (vLLM `--logprobs-mode processed_logprobs`).
    ProcessedLogprobs,
}

/// `gyre record` arguments.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The policy server, e.g. http://127.0.0.1:8000 (a trailing /v1 is fine).
    #[arg(long)]
    upstream: String,
    /// The served model's tokenizer: a bundled name (qwen3), the model's directory (as Hugging
    /// Face ships it: tokenizer.json or tokenizer.json.gz, tokenizer_config.json and/or
    /// chat_template.jinja), or a tokenizer.json / .gz file (the rest read from its directory).
    /// The template is the config's chat_template, else chat_template.jinja, else
    /// chat_template.json; bos_token / eos_token come from the config.
    #[arg(long, value_name = "NAME|DIR|FILE")]
    tokenizer: String,
    /// Chat template to render with instead of the tokenizer's: a .jinja file, or a JSON file
    /// holding chat_template (tokenizer_config.json, chat_template.json). Qwen3-Coder, for one,
    /// runs on the Qwen3 tokenizer with its own template: `--tokenizer qwen3 --chat-template
    /// Qwen3-Coder/chat_template.jinja`.
    #[arg(long, value_name = "FILE")]
    chat_template: Option<PathBuf>,
    /// How sampled text is split into reasoning, text and tool calls, by vLLM's
    /// --tool-call-parser name: hermes (Qwen3, Qwen2.5), qwen3_coder / qwen3_xml (Qwen3-Coder,
    /// Qwen3.5), deepseek_v31, deepseek_v32, deepseek_v4, openai (gpt-oss Harmony),
    /// llama3_json, kimi_k2, glm45 / glm47, minimax_m2. Default: the family whose syntax the chat
    /// template writes (the recording's header says which was used).
    #[arg(long, value_name = "NAME")]
    tool_parser: Option<String>,
    /// The recording (gyre/1 JSONL); an existing one is appended to.
    #[arg(long, short)]
    out: PathBuf,
    /// Address to serve the harness's model routes on (port 0: any free port; the address is
    /// printed). No control route is served here.
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: String,
    /// Address of the control routes (issuing executions, closures, assessments), behind the
    /// control token. Keep it where the agent under training cannot connect if you can; the
    /// token is what keeps it out otherwise.
    #[arg(long, default_value = "127.0.0.1:8788")]
    control_listen: String,
    /// File holding the control token (created mode 0600 with a random token when missing;
    /// refused when other users can read it). Default: the recording's path + .control-token.
    /// $GYRE_CONTROL_TOKEN, when set, is used instead. Never pass the token itself.
    #[arg(long, value_name = "PATH")]
    control_token_file: Option<PathBuf>,
    /// Allow --listen / --control-listen on a non-loopback address (refused otherwise; a loud
    /// warning says what is exposed).
    #[arg(long)]
    allow_remote: bool,
    /// Serve model requests only under capability URLs (POST /gyre/executions); the plain /v1
    /// routes answer 404. Use it whenever several harnesses or untrusted agents share the proxy.
    #[arg(long)]
    capability_only: bool,
    /// Seconds to wait for a request's header or body, and for the next request on an idle
    /// kept-alive connection, before closing it.
    #[arg(long, default_value_t = 30.0)]
    read_timeout: f64,
    /// Most connections open at once per listener (more are answered 503 and closed).
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Largest request body read, in MiB (the Messages API's own limit is 32 MB); a larger
    /// one is answered 413 and not recorded.
    #[arg(long, value_name = "MiB", default_value_t = 32)]
    max_request_mb: usize,
    /// Name of the environment variable holding the upstream's API key (vLLM/SGLang
    /// --api-key), sent as a bearer token. The key itself never goes on the command line.
    #[arg(long, value_name = "NAME")]
    upstream_api_key_env: Option<String>,
    /// What the upstream speaks.
    #[arg(long, value_parser = super::args::named::<Flavor>(), default_value = "vllm")]
    upstream_api: Flavor,
    /// How the upstream computes log-probs (vLLM --logprobs-mode; the API does not say, so the
    /// operator does). Written in every record's meta.logprobs_mode; unknown when not given.
    #[arg(long, value_enum, value_name = "MODE")]
    upstream_logprobs_mode: Option<LogprobsMode>,
    /// Model name sent upstream (default: the one model /v1/models lists; required when it
    /// lists several, e.g. a base model and LoRA adapters).
    #[arg(long)]
    model: Option<String>,
    /// Seconds to wait for one upstream answer before answering the harness 504.
    #[arg(long, default_value_t = 600.0)]
    timeout: f64,
    /// Seconds to let in-flight requests finish after SIGINT/SIGTERM.
    #[arg(long, default_value_t = 30.0)]
    drain: f64,
    /// Memory in MiB that all requests together may take to parse, render and tokenise their
    /// bodies (docs/record.md, Memory): a request reserves what its body can cost, waits up to
    /// --read-timeout while the budget is spent, and is answered 503 (Retry-After) past that; a
    /// body that would cost more than all of it is answered 413.
    #[arg(long, value_name = "MiB", default_value_t = 6144)]
    max_memory_mb: usize,
    /// Outputs kept in memory for payload restoration (oldest forgotten first; a closure
    /// forgets its execution's).
    #[arg(long, default_value_t = 200_000)]
    payload_cache: usize,
    /// No log line per request.
    #[arg(long, short)]
    quiet: bool,
}

fn seconds(s: f64, flag: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| color_eyre::eyre::eyre!("--{flag} must be a non-negative number of seconds"))
}

/// The control token's source: `$GYRE_CONTROL_TOKEN`, else `--control-token-file`, else the
/// recording's path + `.control-token`.
fn control_token(args: &RecordArgs) -> TokenSource {
    const VAR: &str = "GYRE_CONTROL_TOKEN";
    if let Some(value) = std::env::var(VAR).ok().filter(|v| !v.is_empty()) {
        return TokenSource::Env {
            name: VAR.to_owned(),
            value,
        };
    }
    TokenSource::File(args.control_token_file.clone().unwrap_or_else(|| {
        let mut p = args.out.clone().into_os_string();
        p.push(".control-token");
        p.into()
    }))
}

/// `--upstream-api-key-env NAME`: the name and the variable's value (it must be set).
fn upstream_key(name: Option<&str>) -> Result<Option<(String, String)>> {
    let Some(name) = name else {
        return Ok(None);
    };
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(Some((name.to_owned(), v.trim().to_owned()))),
        _ => Err(Invalid(format!(
            "--upstream-api-key-env {name}: ${name} is not set or empty"
        ))
        .into()),
    }
}

/// Runs `gyre record` until SIGINT or SIGTERM.
pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let control_token = control_token(&args);
    let upstream_api_key = upstream_key(args.upstream_api_key_env.as_deref())?;
    serve(Config {
        upstream: args.upstream,
        flavor: args.upstream_api,
        tokenizer: args.tokenizer,
        chat_template: args.chat_template,
        tool_parser: args.tool_parser,
        out: args.out,
        listen: args.listen,
        control_listen: args.control_listen,
        control_token,
        allow_remote: args.allow_remote,
        capability_only: args.capability_only,
        read_timeout: seconds(args.read_timeout, "read-timeout")?,
        max_connections: args.max_connections,
        max_request_bytes: args.max_request_mb.max(1).saturating_mul(1 << 20),
        upstream_api_key,
        logprobs_mode: args.upstream_logprobs_mode.map(|m| match m {
            LogprobsMode::RawLogprobs => "raw_logprobs",
            LogprobsMode::ProcessedLogprobs => "processed_logprobs",
        }),
        model: args.model,
        timeout: seconds(args.timeout, "timeout")?,
        drain: seconds(args.drain, "drain")?,
        payload_limit: args.payload_cache,
        quiet: args.quiet,
        max_memory_bytes: args.max_memory_mb.max(1).saturating_mul(1 << 20),
        release_memory: crate::RELEASE_MEMORY,
    })?;
    Ok(ExitCode::SUCCESS)
}
