//! Shared by the recording-proxy tests: the stand-in upstream, the proxy binary, the Python
//! clients.

pub mod bodies;
pub mod standin;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `gyre record`.
pub struct Proxy {
    child: Child,
    /// `http://addr` of the model listener.
    pub url: String,
    /// `http://addr` of the control listener.
    pub control: String,
    /// The control token (read from the file the proxy created beside the recording).
    pub token: String,
}

impl Proxy {
    /// Starts `gyre record --upstream UPSTREAM --tokenizer qwen3 --out OUT --listen
    /// 127.0.0.1:0 --control-listen 127.0.0.1:0 EXTRA…` and waits for the addresses it prints.
    pub fn start(upstream: &str, out: &Path, extra: &[&str]) -> Proxy {
        Self::start_env(upstream, out, extra, &[])
    }

    /// [`start`](Self::start) with `env` set for the proxy.
    pub fn start_env(upstream: &str, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Proxy {
        Self::spawn(upstream, "qwen3", out, extra, env, Stdio::inherit())
    }

    /// [`start_logged`](Self::start_logged) without `--quiet` (a log line per request), run
    /// by `sh` after `ulimit -n NOFILE` when `nofile` is given (soft and hard limit both).
    pub fn start_verbose(
        upstream: &str,
        out: &Path,
        extra: &[&str],
        log: &Path,
        nofile: Option<u32>,
    ) -> Proxy {
        let log = std::fs::File::create(log).expect("creating the proxy's log file");
        let mut cmd = match nofile {
            Some(n) => {
                let mut c = Command::new("sh");
                c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\"")])
                    .arg(env!("CARGO_BIN_EXE_gyre"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_gyre")),
        };
        cmd.args([
            "record",
            "--upstream",
            upstream,
            "--tokenizer",
            "qwen3",
            "--out",
        ])
        .arg(out)
        .args(["--listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0"])
        .args(extra)
        .stderr(Stdio::from(log));
        Self::started(cmd, out)
    }

    /// [`start`](Self::start) with `--tokenizer TOKENIZER` instead of qwen3.
    pub fn start_model(upstream: &str, tokenizer: &str, out: &Path, extra: &[&str]) -> Proxy {
        Self::spawn(upstream, tokenizer, out, extra, &[], Stdio::inherit())
    }

    /// [`start`](Self::start) with the proxy's stderr written to `log`.
    pub fn start_logged(upstream: &str, out: &Path, extra: &[&str], log: &Path) -> Proxy {
        let log = std::fs::File::create(log).expect("creating the proxy's log file");
        Self::spawn(upstream, "qwen3", out, extra, &[], Stdio::from(log))
    }

    fn spawn(
        upstream: &str,
        tokenizer: &str,
        out: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> Proxy {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gyre"));
        cmd.args([
            "record",
            "--upstream",
            upstream,
            "--tokenizer",
            tokenizer,
            "--out",
        ])
        .arg(out)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--control-listen",
            "127.0.0.1:0",
            "--quiet",
        ])
        .envs(env.iter().copied())
        .args(extra)
        .stderr(stderr);
        Self::started(cmd, out)
    }

    /// Runs `cmd` (a `gyre record` whose recording is `out`) and waits for the addresses it
    /// prints.
    fn started(mut cmd: Command, out: &Path) -> Proxy {
        let mut child = cmd
            .env_remove("GYRE_CONTROL_TOKEN")
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting gyre record");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut address = || {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            line.split_whitespace()
                .find(|w| w.starts_with("http://"))
                .unwrap_or_else(|| panic!("no address in {line:?}"))
                .to_owned()
        };
        let url = address();
        let control = address();
        let mut token_file = out.as_os_str().to_owned();
        token_file.push(".control-token");
        let token = std::fs::read_to_string(&token_file)
            .expect("the control token file beside the recording")
            .trim()
            .to_owned();
        Proxy {
            child,
            url,
            control,
            token,
        }
    }

    /// Runs a scenario of `tests/cli/proxy/clients.py` against the model URL, with the
    /// control URL and token in `GYRE_CONTROL_URL` / `GYRE_CONTROL_TOKEN` (what an evaluator
    /// has; the agent scenarios do not read them).
    pub fn clients(&self, scenario: &str, extra: &[&str]) {
        clients_with(
            &self.url,
            scenario,
            extra,
            &[
                ("GYRE_CONTROL_URL", &self.control),
                ("GYRE_CONTROL_TOKEN", &self.token),
            ],
        );
    }

    /// The proxy's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        // SAFETY: kill(2) on our own child's pid.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0);
    }

    /// Sends SIGTERM and waits; the exit status must be success.
    pub fn stop(mut self) {
        self.terminate();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "gyre record exited with {status}");
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python with `openai` and `anthropic` installed: `$GYRE_PYTHON`, else the virtual
/// environment `.ci/run` makes (`target/py-record`). Missing is a failure, not a skip.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("GYRE_PYTHON") {
        return p.into();
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/py-record/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run .ci/run, or `python3 -m venv target/py-record && \
         target/py-record/bin/pip install -r tests/cli/proxy/requirements.txt`",
        p.display()
    );
    p
}

/// Runs a scenario of `tests/cli/proxy/clients.py` against `base` with only the model URL
/// (no control URL or token in its environment); it must succeed.
pub fn clients(base: &str, scenario: &str, extra: &[&str]) {
    clients_with(base, scenario, extra, &[]);
}

fn clients_with(base: &str, scenario: &str, extra: &[&str], env: &[(&str, &str)]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/proxy/clients.py");
    let out = Command::new(python())
        .arg(script)
        .args([base, scenario])
        .args(extra)
        .env_remove("GYRE_CONTROL_URL")
        .env_remove("GYRE_CONTROL_TOKEN")
        .envs(env.iter().copied())
        .output()
        .expect("running tests/cli/proxy/clients.py");
    assert!(
        out.status.success(),
        "clients.py {scenario} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs the gyre binary; returns (exit code, stdout, stderr).
pub fn gyre(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gyre"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One HTTP/1.1 request on a fresh connection; (status, body).
pub fn http(base: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    http_with(base, method, path, &[], body)
}

/// [`http`] with more header lines (`name`, `value`).
pub fn http_with(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let (status, _, body) = http_full(base, method, path, headers, body);
    (status, body)
}

/// [`http_with`], the answer's header block too: (status, header, body).
pub fn http_full(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let addr = base.trim_start_matches("http://");
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // A connection over the limit is answered 503 and closed at once, possibly before the
    // request is written: a broken pipe or a reset then still leaves the answer to read.
    let sent = write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         {extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    if let Err(e) = sent {
        assert!(
            matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset),
            "{e}"
        );
    }
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset && !raw.is_empty() => break,
            Err(e) => panic!("reading the answer: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (status, head.to_owned(), body.to_owned())
}

/// Reads from `s` until the peer closes it (or the 30 s guard expires: then `false`).
pub fn closed_by_peer(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}
