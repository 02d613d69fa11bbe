//! `gyre record` as the agent under training sees it: with the model URL alone it cannot write
//! a closure or a score, or reach another execution; the control side issues capability URLs;
//! the listeners close slow and surplus connections; the files are private; the upstream's key
//! comes from the environment (docs/record.md, "Security").
#![cfg(feature = "record")]

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::proxy::standin::StandIn;
use crate::proxy::{Proxy, clients, closed_by_peer, gyre, http};
use gyre_engine::load::{Batch, LoadOptions, load};
use serde_json::Value;

fn read(path: &Path) -> Batch {
    load(&[path.to_path_buf()], &LoadOptions::default(), &|_, _| {}).unwrap()
}

fn issued(state: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap()
}

fn requests_of(batch: &Batch, id: &str) -> usize {
    batch
        .executions
        .iter()
        .find(|e| e.id == id)
        .map_or(0, |e| e.requests.len())
}

#[test]
fn the_agent_with_the_model_url_cannot_write_its_reward_or_reach_another_execution() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let state = dir.path().join("issued.json");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    proxy.clients("issue", &[state.to_str().unwrap(), "victim-1", "agent-1"]);
    let urls = issued(&state);
    let (victim, own) = (
        urls["victim-1"]["base_url"].as_str().unwrap(),
        urls["agent-1"]["base_url"].as_str().unwrap(),
    );
    // The victim's harness works through its own URL.
    clients(victim, "capability-loops", &[victim, victim]);
    let before = requests_of(&read(&out), "victim-1");
    assert_eq!(before, 12, "three loops of four calls");

    // The agent has no control URL or token in its environment (`clients`, not
    // `proxy.clients`); the control address stands for what a port scan finds.
    clients(&proxy.url, "agent", &[own, "victim-1", &proxy.control]);

    // The evaluator scores the agent 0 and the victim 1, and is not refused (no 409).
    proxy.clients("score", &["agent-1", "0"]);
    proxy.clients("score", &["victim-1", "1"]);
    proxy.stop();
    let (code, out_text, err) = gyre(&["validate", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{out_text}{err}");

    let batch = read(&out);
    assert_eq!(
        requests_of(&batch, "victim-1"),
        before,
        "nothing added to the victim"
    );
    assert_eq!(
        requests_of(&batch, "agent-1"),
        1,
        "the agent's one call on its own URL"
    );
    let others: Vec<&str> = batch
        .executions
        .iter()
        .map(|e| e.id.as_str())
        .filter(|id| !["victim-1", "agent-1"].contains(id))
        .collect();
    // Its plain-route call started a fresh execution with an unguessable id.
    assert_eq!(others.len(), 1, "{others:?}");
    let fresh = others[0];
    assert!(
        fresh.len() == 33
            && fresh.starts_with('e')
            && fresh[1..].bytes().all(|b| b.is_ascii_hexdigit()),
        "{fresh}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.matches(r#""kind":"closure""#).count(), 2);
    assert_eq!(text.matches(r#""kind":"assessment""#).count(), 2);

    let admitted = dir.path().join("admitted.jsonl");
    let (code, _, err) = gyre(&[
        "admit",
        out.to_str().unwrap(),
        "--out",
        admitted.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let rewards: Vec<(String, f64)> = std::fs::read_to_string(&admitted)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|r| {
            (
                r["execution"].as_str().unwrap().to_owned(),
                r["reward"].as_f64().unwrap(),
            )
        })
        .collect();
    assert!(
        rewards.contains(&("agent-1".to_owned(), 0.0)),
        "{rewards:?}"
    );
    assert!(rewards.iter().all(|(e, r)| e != "agent-1" || *r == 0.0));
    assert!(
        rewards.contains(&("victim-1".to_owned(), 1.0)),
        "{rewards:?}"
    );
}

#[test]
fn capability_urls_record_real_clients_exactly_as_the_plain_routes() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let state = dir.path().join("issued.json");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    proxy.clients("loops", &[]);
    proxy.clients("issue", &[state.to_str().unwrap(), "cap-oa", "cap-an", "-"]);
    let urls = issued(&state);
    let base = |e: &str| urls[e]["base_url"].as_str().unwrap().to_owned();
    clients(
        &base("cap-oa"),
        "capability-loops",
        &[&base("cap-oa"), &base("cap-oa")],
    );
    clients(
        &base("cap-an"),
        "capability-loops",
        &[&base("cap-an"), &base("cap-an")],
    );
    // Issued without an id: a random one, reachable only through its own URL.
    let random = urls
        .as_object()
        .unwrap()
        .keys()
        .find(|k| !k.starts_with("cap-"))
        .unwrap()
        .clone();
    assert!(random.len() == 33 && random.starts_with('e'), "{random}");
    proxy.stop();
    let batch = read(&out);
    let reference = batch
        .executions
        .iter()
        .find(|e| e.id == "oa-plain")
        .unwrap();
    for id in ["cap-oa", "cap-an"] {
        let e = batch.executions.iter().find(|e| e.id == *id).unwrap();
        assert_eq!(e.requests.len(), 3 * reference.requests.len(), "{id}");
        let info = e.info.as_ref().expect("written when issued");
        assert_eq!(info.group, Some(Value::from("g1")));
        assert_eq!(
            info.meta.as_ref().and_then(|m| m.get("attribution")),
            Some(&Value::from("capability"))
        );
        for q in 0..e.requests.len() {
            // Every call after a root continues the previous exactly (own outputs restored).
            let r = &e.requests[q];
            if q % 4 != 0 {
                assert_eq!(r.extends, Some(q as u32 - 1), "{id} request {q}");
            }
            let want = &reference.requests[q % 4];
            assert_eq!(r.output_len, want.output_len, "{id} request {q}");
        }
    }
    // An issued execution survives a restart: its path still works on the new port (same
    // token file).
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    let old = base("cap-oa");
    let path = &old[old.find("/x/").unwrap()..];
    let moved = format!("{}{path}", proxy.url);
    clients(&moved, "capability-loops", &[&moved, &moved]);
    proxy.stop();
    assert_eq!(requests_of(&read(&out), "cap-oa"), 24);
}

#[test]
fn capability_only_serves_no_plain_route() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &["--capability-only"]);
    for route in ["/v1/chat/completions", "/v1/responses", "/v1/messages"] {
        let (status, body) = http(&proxy.url, "POST", route, "{}");
        assert_eq!(status, 404, "{route}: {body}");
        assert!(body.contains("--capability-only"), "{route}: {body}");
    }
    proxy.stop();
    assert_eq!(read(&out).executions.len(), 0);
}

#[test]
fn a_trickled_header_and_an_idle_connection_are_closed_and_surplus_connections_get_503() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(
        &standin.url(),
        &out,
        &["--read-timeout", "1", "--max-connections", "2"],
    );
    let addr = proxy.url.trim_start_matches("http://").to_owned();
    // A header that never ends, and a connection that never sends: both closed by the proxy.
    let mut trickle = TcpStream::connect(&addr).unwrap();
    trickle
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        .unwrap();
    let mut idle = TcpStream::connect(&addr).unwrap();
    // While both hold their slots, a third connection is answered 503 and closed.
    let (status, body) = http(&proxy.url, "GET", "/v1/models", "");
    assert_eq!(status, 503, "{body}");
    assert!(
        closed_by_peer(&mut trickle),
        "the trickled header was not closed"
    );
    assert!(
        closed_by_peer(&mut idle),
        "the idle connection was not closed"
    );
    // The slots are free again.
    let mut status = 0;
    for _ in 0..50 {
        status = http(&proxy.url, "GET", "/v1/models", "").0;
        if status == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status, 200);
    // The control listener has its own slots: the evaluator is not starved by the model side.
    let _a = TcpStream::connect(&addr).unwrap();
    let _b = TcpStream::connect(&addr).unwrap();
    let (status, _) = http(&proxy.control, "POST", "/gyre/closure", "{}");
    assert_eq!(
        status, 401,
        "reached the control listener (and it wants the token)"
    );
    proxy.stop();
}

#[test]
fn a_non_loopback_listen_address_is_refused_without_allow_remote() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    for flag in ["--listen", "--control-listen"] {
        let (code, _, err) = gyre(&[
            "record",
            "--upstream",
            "http://127.0.0.1:9",
            "--tokenizer",
            "qwen3",
            "--out",
            out.to_str().unwrap(),
            flag,
            "0.0.0.0:0",
        ]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("--allow-remote") && err.contains("anyone"),
            "{err}"
        );
        assert!(
            !out.exists(),
            "nothing is written before the listeners are up"
        );
    }
}

/// A model directory gyre cannot use (no template, a SentencePiece-only tokenizer, a broken
/// `--chat-template`) is one plain line and exit 2, never "internal error", and nothing is
/// recorded.
#[test]
fn model_assets_it_cannot_use_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let model = dir.path().join("gpt-oss-20b");
    std::fs::create_dir(&model).unwrap();
    let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/tokenizers/qwen3");
    std::fs::copy(
        assets.join("tokenizer.json.gz"),
        model.join("tokenizer.json.gz"),
    )
    .unwrap();
    std::fs::write(
        model.join("tokenizer_config.json"),
        "{\"eos_token\": \"<|im_end|>\"}",
    )
    .unwrap();
    let sp_only = dir.path().join("llama");
    std::fs::create_dir(&sp_only).unwrap();
    std::fs::write(sp_only.join("tokenizer.model"), b"sentencepiece").unwrap();
    let broken = dir.path().join("broken.jinja");
    std::fs::write(&broken, "{% if %}").unwrap();
    // Hostile layouts: nothing, a config alone, a cut-off .gz, a config that is not JSON, a
    // config whose chat_template is a list of named templates with tool_use.
    let hostile = |name: &str, files: &[(&str, &[u8])]| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        for (file, bytes) in files {
            std::fs::write(d.join(file), bytes).unwrap();
        }
        d.to_str().unwrap().to_owned()
    };
    let gz = std::fs::read(assets.join("tokenizer.json.gz")).unwrap();
    let empty = hostile("empty", &[]);
    let config_only = hostile("config-only", &[("tokenizer_config.json", b"{}")]);
    let truncated = hostile("truncated", &[("tokenizer.json.gz", &gz[..100_000])]);
    let not_json = hostile(
        "not-json",
        &[
            ("tokenizer.json.gz", &gz),
            ("tokenizer_config.json", b"{\"eos"),
        ],
    );
    let listed = hostile(
        "listed",
        &[
            ("tokenizer.json.gz", &gz),
            (
                "tokenizer_config.json",
                br#"{"chat_template": [{"name": "default", "template": "a"},
                    {"name": "tool_use", "template": "b"}]}"#,
            ),
        ],
    );
    let m = model.to_str().unwrap();
    for (args, needle) in [
        (vec!["--tokenizer", m], "no chat template"),
        (
            vec!["--tokenizer", &empty],
            "empty holds no tokenizer.json or tokenizer.json.gz",
        ),
        (
            vec!["--tokenizer", &config_only],
            "config-only holds no tokenizer.json or tokenizer.json.gz",
        ),
        (
            vec!["--tokenizer", &truncated],
            "truncated/tokenizer.json.gz is not a readable gzip file",
        ),
        (
            vec!["--tokenizer", &not_json],
            "not-json/tokenizer_config.json is not JSON",
        ),
        (
            vec!["--tokenizer", &listed],
            "listed/tokenizer_config.json: chat_template is a list of named templates \
             (default, tool_use)",
        ),
        (
            vec!["--tokenizer", sp_only.to_str().unwrap()],
            "holds tokenizer.model but no tokenizer.json",
        ),
        (
            vec![
                "--tokenizer",
                m,
                "--chat-template",
                broken.to_str().unwrap(),
            ],
            "does not compile",
        ),
    ] {
        let mut all = vec![
            "record",
            "--upstream",
            "http://127.0.0.1:9",
            "--out",
            out.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--control-listen",
            "127.0.0.1:0",
        ];
        all.extend(args);
        let (code, _, err) = gyre(&all);
        assert_eq!(code, 2, "{all:?}: {err}");
        assert!(err.contains(needle), "{all:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(!err.contains("internal error"), "{err}");
        assert!(!out.exists(), "nothing is recorded");
    }
}

#[cfg(unix)]
#[test]
fn the_recording_and_the_token_file_are_private_and_a_shared_token_file_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    proxy.stop();
    let token_file = dir.path().join("run.jsonl.control-token");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), 0o600);
    assert_eq!(mode(&token_file), 0o600);
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, err) = gyre(&[
        "record",
        "--upstream",
        &standin.url(),
        "--tokenizer",
        "qwen3",
        "--out",
        out.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--control-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("chmod 600"), "{err}");
}

#[test]
fn the_upstream_key_comes_from_the_environment_and_a_refusal_says_so() {
    let standin = StandIn::start_with_key(Some("sekret-key"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let proxy = Proxy::start(&standin.url(), &out, &[]);
    clients(&proxy.url, "upstream-auth", &["--upstream-api-key-env"]);
    proxy.stop();
    assert_eq!(read(&out).executions.len(), 0, "nothing recorded");

    let out = dir.path().join("keyed.jsonl");
    let proxy = Proxy::start_env(
        &standin.url(),
        &out,
        &["--upstream-api-key-env", "GYRE_TEST_UPSTREAM_KEY"],
        &[("GYRE_TEST_UPSTREAM_KEY", "sekret-key")],
    );
    clients(&proxy.url, "loops", &[]);
    proxy.stop();
    assert_eq!(read(&out).executions.len(), 4);
}

#[test]
fn a_second_proxy_on_the_same_recording_exits_2_naming_the_first() {
    let standin = StandIn::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let first = Proxy::start(&standin.url(), &out, &[]);
    clients(&first.url, "edited", &[]);
    let before = std::fs::read(&out).unwrap();
    let (code, _, err) = gyre(&[
        "record",
        "--upstream",
        &standin.url(),
        "--tokenizer",
        "qwen3",
        "--out",
        out.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--control-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "{err}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        before,
        "the second wrote nothing"
    );
    first.stop();
    // Once the first has exited, the recording can be taken again.
    let again = Proxy::start(&standin.url(), &out, &[]);
    again.stop();
}
