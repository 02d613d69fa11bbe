//! Serving a router on a TCP listener with the limits a shared node needs: a connection cap
//! (excess connections get a 503 and are closed, so a flood cannot exhaust file descriptors;
//! the caps of both listeners together stay below the open-file limit, which is raised to its
//! hard value at start, with descriptors kept for the recording and the runtime),
//! and a read timeout for a request's header, which hyper also applies while a kept-alive
//! connection waits for its next request (a trickled header or a half-open socket is closed
//! instead of holding a slot). Stopping lets requests in progress finish and closes idle
//! connections.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use gyre_format::note;

/// Per-listener limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longest wait for a request's header (and for the next one on a kept-alive connection).
    pub read_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
    /// The cap is lower than `--max-connections` because of the open-file limit.
    pub fd_capped: bool,
}

/// Descriptors no connection may take: standard streams, the runtime's, the recording, files
/// read at start, the upstream client's idle connections.
const RESERVED_FDS: u64 = 64;

/// Connections being answered 503 at once, per listener; past that a connection over the cap is
/// closed unanswered, so refusing costs a bounded number of descriptors too.
const MAX_REFUSING: usize = 16;

/// The connection caps of both listeners, within the open-file limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Model connections (each may hold an upstream connection as well).
    pub model: usize,
    /// Control connections.
    pub control: usize,
    /// The soft open-file limit after raising it, and before.
    pub fd_limit: Option<(u64, u64)>,
}

impl Caps {
    /// Raises the soft open-file limit to the hard one and caps connections below it: a quarter
    /// of what is left after [`RESERVED_FDS`] and the refusals for control, half of the rest for
    /// model connections (one descriptor for the harness, one for the upstream), each at most
    /// `max_connections`.
    pub fn new(max_connections: usize) -> Caps {
        let Some((soft, before)) = raise_fd_limit() else {
            return Caps {
                model: max_connections,
                control: max_connections,
                fd_limit: None,
            };
        };
        let free = soft.saturating_sub(RESERVED_FDS + 2 * MAX_REFUSING as u64);
        let control = usize::try_from(free / 4)
            .unwrap_or(usize::MAX)
            .clamp(1, max_connections.max(1));
        let model = usize::try_from(free.saturating_sub(control as u64) / 2)
            .unwrap_or(usize::MAX)
            .clamp(1, max_connections.max(1));
        Caps {
            model,
            control,
            fd_limit: Some((soft, before)),
        }
    }
}

/// Sets the soft `RLIMIT_NOFILE` to the hard one; the soft limit now and before (`None` where
/// there is none to read).
#[cfg(unix)]
fn raise_fd_limit() -> Option<(u64, u64)> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let lim = getrlimit(Resource::Nofile);
    let before = lim.current?;
    // Unlimited hard limits cannot be the soft one on every system (macOS caps it at
    // OPEN_MAX); a million descriptors is past any cap a proxy needs.
    let want = lim.maximum.unwrap_or(1 << 20).min(1 << 20).max(before);
    let raised = want > before
        && setrlimit(
            Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(want),
                maximum: lim.maximum,
            },
        )
        .is_ok();
    Some((if raised { want } else { before }, before))
}

#[cfg(not(unix))]
fn raise_fd_limit() -> Option<(u64, u64)> {
    None
}

/// Serves `app` on `listener` until `stop` turns true, then waits for the open connections to
/// finish their requests.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
    name: &'static str,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let (close_tx, close_rx) = watch::channel(());
    let mut refused_noted = false;
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait for connections to close.
                    note!("gyre record: accepting on the {name} listener failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            if !refused_noted {
                note!(
                    "gyre record: {} connections open on the {name} listener; refusing more \
                     with 503 until some close ({})",
                    limits.max_connections,
                    if limits.fd_capped {
                        "the cap the open-file limit sets, said at start; raise `ulimit -n`"
                    } else {
                        "--max-connections"
                    }
                );
                refused_noted = true;
            }
            // Closed unanswered when enough refusals are already being written.
            if let Ok(slot) = Arc::clone(&refusing).try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(stream).await;
                    drop(slot);
                });
            }
            continue;
        };
        let svc = TowerToHyperService::new(app.clone());
        let mut stop = stop.clone();
        let close_rx = close_rx.clone();
        tokio::spawn(async move {
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.read_timeout);
            let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), svc));
            tokio::select! {
                _ = conn.as_mut() => {}
                () = stopped(&mut stop) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.as_mut().await;
                }
            }
            drop(permit);
            drop(close_rx);
        });
    }
    drop(close_rx);
    close_tx.closed().await;
}

/// Resolves once `stop` is true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Answers a connection over the limit with a 503 and closes it.
async fn refuse(mut stream: TcpStream) {
    let body = r#"{"error": {"message": "gyre record: too many open connections; retry", "type": "service_unavailable", "param": null, "code": null}}"#;
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await?;
        // A lingering close: closing with the client's request still unread makes the kernel
        // send a reset, which can destroy the 503 before the client reads it. Read what it
        // sends (a bounded amount, within the same second) until it closes its side.
        let mut buf = [0u8; 4096];
        let mut drained = 0;
        while drained < 64 * 1024 {
            match stream.read(&mut buf).await? {
                0 => break,
                n => drained += n,
            }
        }
        std::io::Result::Ok(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}
