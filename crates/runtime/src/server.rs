//! The runtime's HTTP server: hyper's HTTP/1 connection over each accepted socket (header-read
//! and idle timeout, head size bound, upgrades), every request answered by the axum router.
//!
//! What hyper has no setting for is kept in `listen`, small, and shared with the OTLP/gRPC
//! server: caps on open connections, per peer IP and in total (each listener its own
//! table), below the descriptor limit. When a cap is reached a new connection takes the
//! slot of the connection idle the longest (no request in flight, not a WebSocket), which is
//! closed; only when every slot is busy is the new one refused with 503
//! `too_many_connections`. So sockets that send nothing (or half a request line) cannot keep
//! `/health` or an authenticated client out. And a write that has waited the header timeout
//! on a peer that takes nothing fails, so a WebSocket whose peer stopped reading (or never
//! read its 101) gives its slot back.

pub(crate) mod listen;

use super::ApiErrorWithStatus;
use super::http::guard::Guard;
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use listen::{Admission, Busy, Conn, Socket};
pub(crate) use listen::{ConnLimits, effective_total};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A request target longer than this is refused 414 `uri_too_long` (hyper's own bound is
/// 64 KiB); no route takes more than a few hundred bytes of path and query.
pub(crate) const MAX_URI_BYTES: usize = 8 * 1024;
/// A request head (request line and headers) longer than this is refused 431 by hyper
/// (`max_header_size`), which then closes the connection.
pub(crate) const MAX_HEAD_BYTES: usize = 32 * 1024;

/// What 414 answers when a request target is over `MAX_URI_BYTES`.
pub const URI_TOO_LONG: &str = "uri_too_long";
/// What 503 answers when every connection slot is busy.
pub const TOO_MANY_CONNECTIONS: &str = "too_many_connections";

/// The request target's length as sent (origin form: path and query; absolute form too).
fn target_len(uri: &hyper::Uri) -> usize {
    let path = uri.path_and_query().map_or(0, |p| p.as_str().len());
    let authority = uri.authority().map_or(0, |a| a.as_str().len());
    path + authority + uri.scheme_str().map_or(0, str::len)
}

/// Answers 503 `too_many_connections` to the one request of a socket the caps leave no
/// room for, then closes it (hyper's connection without keep-alive).
async fn refuse(stream: TcpStream) {
    let service = hyper::service::service_fn(|_req: hyper::Request<Incoming>| async {
        let mut response = ApiErrorWithStatus::new(
            503,
            TOO_MANY_CONNECTIONS,
            "the runtime holds as many connections as it allows and none is idle; retry shortly",
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        Ok::<_, Infallible>(response)
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(1))
        .keep_alive(false)
        .max_header_size(MAX_HEAD_BYTES);
    let refused = builder.serve_connection(TokioIo::new(stream), service);
    let _ = tokio::time::timeout(Duration::from_secs(2), refused).await;
}

/// Reads (at most `limit` bytes, for at most 5 s) and drops a refused request's body, so
/// a client still sending it sees the answer rather than a reset.
async fn discard(body: Incoming, limit: usize) {
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        axum::body::to_bytes(Body::new(body), limit),
    )
    .await;
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    // A dropped handle leaves the server running: only `shutdown` stops it.
    if stop.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// What every connection of one server shares.
struct Site {
    app: Router,
    guard: Guard,
    limits: ConnLimits,
    /// hyper's HTTP/1 settings: the header-read (and keep-alive idle) timeout on tokio's
    /// timer, the head bound, keep-alive.
    http: http1::Builder,
}

/// Serves `app` on `listener` until `stop`, then lets open connections finish (`WebSockets`
/// close themselves on the same signal) and returns once they have.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    guard: Guard,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let admission = Admission::new(limits);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true)
        .max_header_size(MAX_HEAD_BYTES);
    let site = Arc::new(Site {
        app,
        guard,
        limits,
        http,
    });
    let (alive_tx, alive_rx) = watch::channel(());
    loop {
        let (stream, remote) = tokio::select! {
            () = stopped(&mut stop) => break,
            accepted = listen::accept(&listener) => accepted,
        };
        let Some(admitted) = admission.admit(remote.ip()) else {
            tracing::debug!(%remote, "connection refused: every slot busy");
            tokio::spawn(refuse(stream));
            continue;
        };
        let conn = admitted.1.clone();
        let socket = Socket::new(stream, admitted, limits.header_timeout);
        tokio::spawn(connection(
            socket,
            conn,
            site.clone(),
            stop.clone(),
            alive_rx.clone(),
        ));
    }
    drop(listener);
    drop(alive_rx);
    alive_tx.closed().await;
    Ok(())
}

/// One connection: every request passes the guard (browser checks, target length) and
/// is answered by the router, while `conn` tells the table whether it is busy.
async fn connection(
    socket: Socket,
    conn: Arc<Conn>,
    site: Arc<Site>,
    mut stop: watch::Receiver<bool>,
    _alive: watch::Receiver<()>,
) {
    let state = conn.clone();
    let shared = site.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let busy = Busy::new(state.clone());
        let refused = if target_len(req.uri()) > MAX_URI_BYTES {
            Some(ApiErrorWithStatus::new(
                414,
                URI_TOO_LONG,
                format!("the request target is over {MAX_URI_BYTES} bytes"),
            ))
        } else {
            shared
                .guard
                .check(req.method(), req.uri().path(), req.headers())
                .err()
        };
        let limit = shared.limits.max_body_bytes;
        let routed = match refused {
            Some(refusal) => Err((refusal, req)),
            None => Ok(tower_service::Service::call(
                &mut shared.app.clone(),
                req.map(Body::new),
            )),
        };
        async move {
            let response = match routed {
                Ok(routed) => routed.await,
                Err((refusal, req)) => {
                    discard(req.into_body(), limit).await;
                    Ok(refusal.into_response())
                }
            };
            if let Ok(response) = &response
                && response.status() == hyper::StatusCode::SWITCHING_PROTOCOLS
            {
                busy.conn().upgraded();
            }
            drop(busy);
            response
        }
    });
    let served = site
        .http
        .serve_connection(TokioIo::new(socket), service)
        .with_upgrades();
    tokio::pin!(served);
    let mut stopping = false;
    loop {
        tokio::select! {
            result = served.as_mut() => {
                if let Err(err) = result {
                    tracing::trace!(%err, "connection ended");
                }
                return;
            }
            () = conn.close.notified() => return,
            () = stopped(&mut stop), if !stopping => {
                stopping = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}
