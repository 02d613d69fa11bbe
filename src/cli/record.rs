//! `gyre record`: the recording proxy (docs/record.md).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use color_eyre::eyre::Result;

use gyre_record::{Config, Flavor, serve};

/// `gyre record` arguments.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The policy server, e.g. http://127.0.0.1:8000 (a trailing /v1 is fine).
    #[arg(long)]
    upstream: String,
    /// The served model's tokenizer: a bundled name (qwen3), or a tokenizer.json (or its
    /// directory) with the model's tokenizer_config.json beside it (for the chat template).
    #[arg(long)]
    tokenizer: String,
    /// The recording (gyre/1 JSONL); an existing one is appended to.
    #[arg(long, short)]
    out: PathBuf,
    /// Address to serve the harness on (port 0: any free port; the address is printed).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: String,
    /// What the upstream speaks.
    #[arg(long, value_parser = super::args::named::<Flavor>(), default_value = "vllm")]
    upstream_api: Flavor,
    /// Model name sent upstream (default: the upstream's first model in /v1/models).
    #[arg(long)]
    model: Option<String>,
    /// Seconds to wait for one upstream answer before answering the harness 504.
    #[arg(long, default_value_t = 600.0)]
    timeout: f64,
    /// Seconds to let in-flight requests finish after SIGINT/SIGTERM.
    #[arg(long, default_value_t = 30.0)]
    drain: f64,
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

/// Runs `gyre record` until SIGINT or SIGTERM.
pub fn run(args: RecordArgs) -> Result<ExitCode> {
    serve(Config {
        upstream: args.upstream,
        flavor: args.upstream_api,
        tokenizer: args.tokenizer,
        out: args.out,
        listen: args.listen,
        model: args.model,
        timeout: seconds(args.timeout, "timeout")?,
        drain: seconds(args.drain, "drain")?,
        payload_limit: args.payload_cache,
        quiet: args.quiet,
    })?;
    Ok(ExitCode::SUCCESS)
}
