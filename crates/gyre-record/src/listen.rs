//! Serving a router on a TCP listener with the limits a shared node needs: a connection cap
//! (excess connections get a 503 and are closed, so a flood cannot exhaust file descriptors),
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
                     with 503 until some close (--max-connections)",
                    limits.max_connections
                );
                refused_noted = true;
            }
            tokio::spawn(refuse(stream));
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
