//! The runtime's accept loop: one hyper HTTP/1 connection per socket, a header-read (and
//! idle) timeout, and a cap on open connections, per peer IP and in total, below the descriptor limit.
//!
//! When a cap is reached a new connection takes the slot of the connection idle the longest
//! (no request in flight, not a WebSocket), which is closed; only when every slot is busy is
//! the new one refused at once with 503 `too_many_connections`. So sockets that send nothing
//! (or half a request line) cannot keep `/health` or an authenticated client out.
//!
//! The timeout is one sweep over the connection table, not a timer per request: a connection
//! with no request in flight whose socket has written nothing for `header_timeout` (so it
//! has sent no complete request head since its last answer) is closed. hyper's own
//! `header_read_timeout` arms and cancels a timer for every request, a tenth of the server's
//! CPU for a mocked execute.

use super::http::AppState;
use super::http::guard::Guard;
use super::{ApiErrorWithStatus, lock};
use axum::Router;
use axum::body::Body;
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

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
    /// When the connection last finished a request or wrote to its socket, in µs since
    /// the server's `Clock` began.
    idle_since: AtomicU64,
    /// Since when (µs, plus one so 0 means "not stalled") a write has waited on a socket
    /// the peer does not read.
    stalled_since: AtomicU64,
    /// Set by the sweep: every further read or write fails, which ends a WebSocket whose
    /// task sits in a send that will never complete.
    killed: AtomicBool,
    /// The task parked on a stalled write, woken when the sweep kills the connection.
    parked: Mutex<Option<Waker>>,
    close: Notify,
}

impl Conn {
    fn evictable(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0 && !self.upgraded.load(Ordering::Acquire)
    }

    /// An upgraded connection (or one between its 101 and the upgrade) whose peer has not
    /// taken a byte since before `deadline`: idle eviction spares it, this does not.
    fn write_stalled_before(&self, deadline: u64) -> bool {
        let since = self.stalled_since.load(Ordering::Relaxed);
        since != 0 && since - 1 < deadline
    }

    fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.close.notify_one();
        if let Some(waker) = lock(&self.parked).take() {
            waker.wake();
        }
    }

    fn touch(&self, clock: &Clock) {
        self.idle_since.store(clock.now(), Ordering::Relaxed);
    }
}

/// Microseconds since the server started, cheap enough to read on every write.
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

    /// Closes every connection that has been idle (nothing in flight, nothing written)
    /// since before `deadline`, and every one whose writes have waited on an unread
    /// socket since then (a WebSocket whose peer stopped reading, or never read its 101).
    fn close_idle_since(&mut self, deadline: u64) -> usize {
        let stale: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                (c.evictable() && c.idle_since.load(Ordering::Relaxed) < deadline)
                    || c.write_stalled_before(deadline)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in &stale {
            if let Some(conn) = self.remove(*id) {
                conn.kill();
            }
        }
        stale.len()
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
            stalled_since: AtomicU64::new(0),
            killed: AtomicBool::new(false),
            parked: Mutex::new(None),
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

/// A socket that holds its slot: the slot lives as long as the socket does, through a
/// WebSocket upgrade too.
struct Tracked {
    stream: TcpStream,
    conn: Arc<Conn>,
    clock: Clock,
    /// hyper's own refusal being replaced on the socket (`refusal_body`): the JSON answer
    /// and how much of it is written.
    replacing: Option<(Vec<u8>, usize)>,
    _slot: Slot,
}

fn killed() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "closed: the peer took nothing written for the header timeout",
    )
}

impl Tracked {
    /// A write that moved bytes keeps the connection from counting as idle; one that
    /// waits starts (or continues) a stall the sweep may end.
    fn wrote(&self, result: &Poll<std::io::Result<usize>>, cx: &Context<'_>) {
        match result {
            Poll::Ready(Ok(n)) if *n > 0 => {
                self.conn.touch(&self.clock);
                if self.conn.stalled_since.load(Ordering::Relaxed) != 0 {
                    self.conn.stalled_since.store(0, Ordering::Relaxed);
                }
            }
            Poll::Pending => {
                if self.conn.stalled_since.load(Ordering::Relaxed) == 0 {
                    self.conn
                        .stalled_since
                        .store(self.clock.now() + 1, Ordering::Relaxed);
                }
                *lock(&self.conn.parked) = Some(cx.waker().clone());
            }
            Poll::Ready(_) => {}
        }
    }

    /// Writes the JSON answer in place of hyper's bodiless one; Ready(n) with hyper's whole
    /// `n` bytes once the JSON is out, as if hyper's had been written.
    fn poll_replace(&mut self, cx: &mut Context<'_>, n: usize) -> Poll<std::io::Result<usize>> {
        while let Some((answer, done)) = self.replacing.take() {
            if done == answer.len() {
                break;
            }
            let result = Pin::new(&mut self.stream).poll_write(cx, &answer[done..]);
            self.wrote(&result, cx);
            match result {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(k)) => self.replacing = Some((answer, done + k)),
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Pending => {
                    self.replacing = Some((answer, done));
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Ok(n))
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.conn.killed.load(Ordering::Acquire) {
            return Poll::Ready(Err(killed()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.conn.killed.load(Ordering::Acquire) {
            return Poll::Ready(Err(killed()));
        }
        if self.replacing.is_none()
            && let Some(answer) = refusal_body(buf)
        {
            self.replacing = Some((answer, 0));
        }
        if self.replacing.is_some() {
            return self.poll_replace(cx, buf.len());
        }
        let result = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.wrote(&result, cx);
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        if self.conn.killed.load(Ordering::Acquire) {
            return Poll::Ready(Err(killed()));
        }
        // hyper's refusal is a head alone: one slice (or one with empty ones after it).
        if self.replacing.is_none()
            && let Some(first) = bufs.first()
            && bufs[1..].iter().all(|b| b.is_empty())
            && let Some(answer) = refusal_body(first)
        {
            self.replacing = Some((answer, 0));
        }
        if self.replacing.is_some() {
            let n = bufs.iter().map(|b| b.len()).sum();
            return self.poll_replace(cx, n);
        }
        let result = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.wrote(&result, cx);
        result
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
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
        self.0.touch(&self.1);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How often the sweep looks for idle connections: a quarter of the timeout, so one is
/// closed at most 1.25 timeouts after its last answer.
fn sweep_period(timeout: Duration) -> Duration {
    (timeout / 4).clamp(Duration::from_millis(5), Duration::from_secs(1))
}

/// Closes, every `sweep_period`, the connections idle for longer than `header_timeout`:
/// sockets that sent no complete request head since their last answer, slow or silent.
async fn sweep_idle(admission: Arc<Admission>, mut stop: watch::Receiver<bool>) {
    let timeout = u64::try_from(admission.limits.header_timeout.as_micros()).unwrap_or(u64::MAX);
    let mut tick = tokio::time::interval(sweep_period(admission.limits.header_timeout));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stopped(&mut stop) => return,
            _ = tick.tick() => {}
        }
        let deadline = admission.clock.now().saturating_sub(timeout);
        let closed = lock(&admission.table).close_idle_since(deadline);
        if closed > 0 {
            tracing::debug!(closed, "idle connections closed (header timeout)");
        }
    }
}

/// A request target longer than this is refused 414 `uri_too_long` (hyper's own bound is
/// 64 KiB); no route takes more than a few hundred bytes of path and query.
pub(crate) const MAX_URI_BYTES: usize = 8 * 1024;
/// A request head (request line and headers) longer than this is refused 431
/// `headers_too_large` (hyper's own bound is its ~400 KiB read buffer).
pub(crate) const MAX_HEAD_BYTES: usize = 32 * 1024;

/// The JSON answer of a 4xx hyper writes itself, with no body, when it cannot read a
/// request head (too large, malformed): the same `{code, message}` every route answers.
fn refusal_answer(status: &str, code: &str, message: &str) -> Vec<u8> {
    let body = serde_json::json!({ "code": code, "message": message }).to_string();
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// What replaces `head` on the socket when it is one of hyper's own bodiless refusals
/// (`proto::h1::role::Server::on_error`: 400, 414 or 431, `content-length: 0`, and the
/// connection closes after it). hyper offers no hook to give them a body, and no route
/// answers these statuses without one, so the head alone identifies them. Costs one
/// 10-byte compare on every other write.
fn refusal_body(head: &[u8]) -> Option<Vec<u8>> {
    if !head.starts_with(b"HTTP/1.1 4") || head.len() > 512 || !head.ends_with(b"\r\n\r\n") {
        return None;
    }
    if !head.windows(21).any(|w| w == b"\r\ncontent-length: 0\r\n") {
        return None;
    }
    Some(match &head[9..12] {
        b"400" => refusal_answer(
            "400 Bad Request",
            BAD_REQUEST,
            "the request is not HTTP/1.1 this server can read (request line or a header is malformed)",
        ),
        b"414" => refusal_answer(
            "414 URI Too Long",
            URI_TOO_LONG,
            &format!("the request target is over {MAX_URI_BYTES} bytes"),
        ),
        b"431" => refusal_answer(
            "431 Request Header Fields Too Large",
            HEADERS_TOO_LARGE,
            &format!("the request head (request line and headers) is over {MAX_HEAD_BYTES} bytes"),
        ),
        _ => return None,
    })
}

const REFUSAL: &str = "{\"code\":\"too_many_connections\",\"message\":\"the runtime holds as many connections as it allows and none is idle; retry shortly\"}";

/// Answers 503 on a socket the caps leave no room for, then closes it.
async fn refuse(mut stream: TcpStream) {
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{REFUSAL}",
        REFUSAL.len()
    );
    // The request head is read first: closing with it unread makes the kernel reset the
    // connection, and the client would see the reset instead of the answer.
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        // Drain what else arrives until the client closes, so the close stays orderly.
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
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

/// Serves `app` on `listener` until `stop`, then lets open connections finish (`WebSockets`
/// close themselves on the same signal) and returns once they have.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    direct: Option<AppState>,
    guard: Guard,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let site = Arc::new(Site {
        app,
        direct,
        guard,
        limits,
    });
    let admission = Arc::new(Admission {
        limits,
        table: Mutex::new(Table::default()),
        clock: Clock(Instant::now()),
    });
    tokio::spawn(sweep_idle(admission.clone(), stop.clone()));
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
        let io = TokioIo::new(Tracked {
            stream,
            conn: conn.clone(),
            clock: admission.clock,
            replacing: None,
            _slot: slot,
        });
        tokio::spawn(connection(
            io,
            conn,
            admission.clock,
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

/// What every connection of one server shares.
struct Site {
    app: Router,
    /// The state `POST /v1/sessions/{id}/execute` is answered with from here, without the
    /// router (`http::execute_direct`); `None` when the runtime has API keys, so every
    /// request passes the router's auth layer.
    direct: Option<AppState>,
    guard: Guard,
    limits: ConnLimits,
}

impl Site {
    /// An execute `connection` routed here (`Routed::Execute`).
    async fn execute(&self, req: hyper::Request<Incoming>) -> axum::response::Response {
        match &self.direct {
            Some(state) => super::http::execute_direct(state, req).await,
            // Not reached (`connection` checked); the router answers as ever.
            None => match tower_service::Service::call(&mut self.app.clone(), req.map(Body::new))
                .await
            {
                Ok(response) => response,
                Err(never) => match never {},
            },
        }
    }
}

/// Where `connection` sends a request.
enum Routed {
    App(axum::routing::future::RouteFuture<std::convert::Infallible>),
    Execute(Arc<Site>, hyper::Request<Incoming>),
    Refused(ApiErrorWithStatus, hyper::Request<Incoming>),
}

/// What 414 answers when a request target is over `MAX_URI_BYTES`.
pub const URI_TOO_LONG: &str = "uri_too_long";
/// What 431 answers when a request head is over `MAX_HEAD_BYTES`.
pub const HEADERS_TOO_LARGE: &str = "headers_too_large";
/// What 400 answers for a request head hyper cannot parse.
pub const BAD_REQUEST: &str = "bad_request";

/// The request target's length as sent (origin form: path and query; absolute form too).
fn target_len(uri: &hyper::Uri) -> usize {
    let path = uri.path_and_query().map_or(0, |p| p.as_str().len());
    let authority = uri.authority().map_or(0, |a| a.as_str().len());
    path + authority + uri.scheme_str().map_or(0, str::len)
}

async fn connection(
    io: TokioIo<Tracked>,
    conn: Arc<Conn>,
    clock: Clock,
    site: Arc<Site>,
    mut stop: watch::Receiver<bool>,
    _alive: watch::Receiver<()>,
) {
    let state = conn.clone();
    let shared = site.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let busy = Busy::new(state.clone(), clock);
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
            Some(refusal) => Routed::Refused(refusal, req),
            None if shared.direct.is_some()
                && super::http::execute_target(req.method(), req.uri().path()).is_some() =>
            {
                Routed::Execute(shared.clone(), req)
            }
            None => Routed::App(tower_service::Service::call(
                &mut shared.app.clone(),
                req.map(Body::new),
            )),
        };
        async move {
            let response = match routed {
                Routed::App(routed) => routed.await,
                Routed::Execute(site, req) => Ok(site.execute(req).await),
                Routed::Refused(refusal, req) => {
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
    let mut builder = http1::Builder::new();
    // No hyper timer: the header-read and idle timeout is `sweep_idle`'s.
    builder.keep_alive(true).max_header_size(MAX_HEAD_BYTES);
    let served = builder.serve_connection(io, service).with_upgrades();
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
