//! Codex CLI itself (npm `@openai/codex`, pinned in tests/cli/codex/package.json and installed by
//! .ci/run into target/codex) recorded through `gyre record`'s Responses API: a model provider
//! with `wire_api = "responses"` pointing at the proxy, the stand-in upstream answering.
#![cfg(feature = "record")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::proxy::Proxy;
use crate::proxy::standin::StandIn;
use crate::record_proxy::{exec, meta, read, stats, validate};
use serde_json::Value;

/// The Codex CLI: `$GYRE_CODEX`, else the one .ci/run installs. Missing is a failure, not a skip.
fn codex() -> PathBuf {
    if let Some(p) = std::env::var_os("GYRE_CODEX") {
        return p.into();
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/codex/node_modules/.bin/codex");
    assert!(
        p.exists(),
        "{} is missing: run .ci/run, or `mkdir -p target/codex && cp tests/cli/codex/package*.json \
         target/codex && npm ci --prefix target/codex`",
        p.display()
    );
    p
}

#[test]
fn codex_cli_is_recorded_through_the_responses_api() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    let home = dir.path().join("codex-home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"policy\"\nmodel_provider = \"gyre\"\n\n[model_providers.gyre]\n\
             name = \"gyre record\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n",
            proxy.url
        ),
    )
    .unwrap();
    let mut child = Command::new(codex())
        .args([
            "exec",
            "--skip-git-repo-check",
            "Run the steps one by one. steps=2",
        ])
        .current_dir(&work)
        .env("CODEX_HOME", &home)
        .env("HOME", dir.path())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting codex");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            panic!("codex exec did not finish in 180 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let done = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&done.stdout);
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "codex exec: {stdout}\n{stderr}");
    assert!(
        stdout.contains("Finished after 2 steps."),
        "{stdout}\n{stderr}"
    );

    let batch = read(&out);
    assert_eq!(
        batch.executions.len(),
        1,
        "one Codex session, one execution"
    );
    let id = batch.executions[0].id.clone();
    let e = exec(&batch, &id);
    assert_eq!(e.requests.len(), 3, "two tool rounds and an answer");
    for q in 0..3 {
        assert_eq!(meta(e, q, "api"), Some(&Value::from("responses")));
        // Codex's built-in web search has no syntax in the template: left out, and said so.
        let dropped = meta(e, q, "dropped_tools").and_then(Value::as_array);
        assert!(
            dropped.is_some_and(|d| d.contains(&Value::from("web_search"))),
            "{dropped:?}"
        );
        if q > 0 {
            // Codex sends the whole input every time; each call extends the previous one.
            assert_eq!(e.requests[q].extends, Some(q as u32 - 1), "request {q}");
            assert_eq!(meta(e, q, "restored_turns"), Some(&Value::from(q)));
        }
    }
    assert_eq!(stats(&out)["divergences_in_outputs"], 0);
    proxy.stop();
    validate(&out);
}
