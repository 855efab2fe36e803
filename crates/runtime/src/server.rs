//! The runtime's HTTP server: hyper's HTTP/1 connection over each accepted socket (header-read
//! and idle timeout, head size bound, upgrades), every request answered by the axum router.
//!
//! What hyper has no setting for is kept here, small: caps on open connections, per peer IP
//! and in total, below the descriptor limit. When a cap is reached a new connection takes the
//! slot of the connection idle the longest (no request in flight, not a WebSocket), which is
//! closed; only when every slot is busy is the new one refused with 503
//! `too_many_connections`. So sockets that send nothing (or half a request line) cannot keep
//! `/health` or an authenticated client out. And a write that has waited the header timeout
//! on a peer that takes nothing fails, so a WebSocket whose peer stopped reading (or never
//! read its 101) gives its slot back.

use super::http::guard::Guard;
use super::{ApiErrorWithStatus, lock};
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Sleep;

/// What bounds the connections one server holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    pub total: usize,
    pub per_ip: usize,
    pub header_timeout: Duration,
    pub max_body_bytes: usize,
}

/// Descriptors kept free for everything that is not a client connection (the listener,
/// files, the runtime's own outgoing sockets).
const SPARE_DESCRIPTORS: usize = 64;

/// The soft `Max open files` of this process, from /proc/self/limits (Linux); None elsewhere
/// or when unlimited.
fn descriptor_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The total cap actually applied: the configured one, lowered below the descriptor limit
/// so a full server still has descriptors to accept (and refuse) with.
pub(crate) fn effective_total(configured: usize) -> usize {
    let bound = descriptor_limit().map_or(usize::MAX, |limit| {
        limit.saturating_sub(SPARE_DESCRIPTORS).max(16)
    });
    configured.clamp(1, bound)
}

/// One open connection as the table sees it.
struct Conn {
    ip: IpAddr,
    in_flight: AtomicUsize,
    upgraded: AtomicBool,
    /// When the connection was opened or last finished a request, in µs since the
    /// server's `Clock` began: the idlest is the one a full server closes.
    idle_since: AtomicU64,
    close: Notify,
}

impl Conn {
    fn evictable(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0 && !self.upgraded.load(Ordering::Acquire)
    }
}

/// Microseconds since the server started.
#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn now(self) -> u64 {
        u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX)
    }
}

#[derive(Default)]
struct Table {
    next_id: u64,
    conns: HashMap<u64, Arc<Conn>>,
    per_ip: HashMap<IpAddr, usize>,
}

impl Table {
    fn remove(&mut self, id: u64) -> Option<Arc<Conn>> {
        let conn = self.conns.remove(&id)?;
        if let Some(n) = self.per_ip.get_mut(&conn.ip) {
            *n -= 1;
            if *n == 0 {
                self.per_ip.remove(&conn.ip);
            }
        }
        Some(conn)
    }

    /// The connection idle the longest, among `ip`'s when given.
    fn idlest(&self, ip: Option<IpAddr>) -> Option<u64> {
        self.conns
            .iter()
            .filter(|(_, c)| ip.is_none_or(|ip| c.ip == ip) && c.evictable())
            .min_by_key(|(_, c)| c.idle_since.load(Ordering::Relaxed))
            .map(|(id, _)| *id)
    }
}

struct Admission {
    limits: ConnLimits,
    table: Mutex<Table>,
    clock: Clock,
}

/// A connection's place in the table, given back when its socket (or the WebSocket it
/// became) is dropped.
struct Slot {
    admission: Arc<Admission>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.admission.table).remove(self.id);
    }
}

impl Admission {
    /// A slot for a connection from `ip`, closing the idlest connection when a cap is
    /// reached; None when every connection under the cap is busy.
    fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<(Slot, Arc<Conn>)> {
        let mut table = lock(&self.table);
        let from_ip = table.per_ip.get(&ip).copied().unwrap_or(0);
        let full = if from_ip >= self.limits.per_ip {
            Some(Some(ip))
        } else if table.conns.len() >= self.limits.total {
            Some(None)
        } else {
            None
        };
        if let Some(scope) = full {
            let id = table.idlest(scope)?;
            if let Some(evicted) = table.remove(id) {
                evicted.close.notify_one();
            }
        }
        let conn = Arc::new(Conn {
            ip,
            in_flight: AtomicUsize::new(0),
            upgraded: AtomicBool::new(false),
            idle_since: AtomicU64::new(self.clock.now()),
            close: Notify::new(),
        });
        table.next_id += 1;
        let id = table.next_id;
        table.conns.insert(id, conn.clone());
        *table.per_ip.entry(ip).or_default() += 1;
        drop(table);
        Some((
            Slot {
                admission: self.clone(),
                id,
            },
            conn,
        ))
    }
}

/// A socket that holds its slot (through a WebSocket upgrade too) and whose writes fail
/// once one has waited `stall_limit` on a peer that takes nothing. The timer exists only
/// while a write waits.
struct Socket {
    stream: TcpStream,
    stall_limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
    _slot: Slot,
}

impl Socket {
    fn wrote<T>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if result.is_ready() {
            self.stalled = None;
            return result;
        }
        let limit = self.stall_limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if stalled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "closed: the peer took nothing written for the header timeout",
            )));
        }
        Poll::Pending
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.wrote(cx, result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.wrote(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Marks a connection busy while one of its requests is handled.
struct Busy(Arc<Conn>, Clock);

impl Busy {
    fn new(conn: Arc<Conn>, clock: Clock) -> Busy {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        Busy(conn, clock)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.idle_since.store(self.1.now(), Ordering::Relaxed);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

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
    clock: Clock,
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
    let clock = Clock(Instant::now());
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
        clock,
    });
    let admission = Arc::new(Admission {
        limits,
        table: Mutex::new(Table::default()),
        clock,
    });
    let (alive_tx, alive_rx) = watch::channel(());
    loop {
        let (stream, remote) = tokio::select! {
            () = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors (or a peer gone before accept): wait, do not spin.
                    tracing::debug!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some((slot, conn)) = admission.admit(remote.ip()) else {
            tracing::debug!(%remote, "connection refused: every slot busy");
            tokio::spawn(refuse(stream));
            continue;
        };
        let socket = Socket {
            stream,
            stall_limit: limits.header_timeout,
            stalled: None,
            _slot: slot,
        };
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
        let busy = Busy::new(state.clone(), shared.clock);
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
                busy.0.upgraded.store(true, Ordering::Release);
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
