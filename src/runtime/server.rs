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

use super::http::guard::Guard;
use super::lock;
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
use std::task::{Context, Poll};
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
    close: Notify,
}

impl Conn {
    fn evictable(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0 && !self.upgraded.load(Ordering::Acquire)
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
    /// since before `deadline`.
    fn close_idle_since(&mut self, deadline: u64) -> usize {
        let stale: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.evictable() && c.idle_since.load(Ordering::Relaxed) < deadline)
            .map(|(id, _)| *id)
            .collect();
        for id in &stale {
            if let Some(conn) = self.remove(*id) {
                conn.close.notify_one();
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
    _slot: Slot,
}

impl Tracked {
    /// A write that moved bytes keeps the connection from counting as idle.
    fn wrote(&self, result: &Poll<std::io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = result
            && *n > 0
        {
            self.conn.touch(&self.clock);
        }
    }
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let result = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.wrote(&result);
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
        let result = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.wrote(&result);
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
    guard: Guard,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let site = Arc::new(Site { app, guard, limits });
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
    guard: Guard,
    limits: ConnLimits,
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
        let refused = shared
            .guard
            .check(req.method(), req.uri().path(), req.headers())
            .err();
        let mut app = shared.app.clone();
        let limit = shared.limits.max_body_bytes;
        let routed = match refused {
            None => Ok(tower_service::Service::call(&mut app, req.map(Body::new))),
            Some(refusal) => Err((refusal, req)),
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
    let mut builder = http1::Builder::new();
    // No hyper timer: the header-read and idle timeout is `sweep_idle`'s.
    builder.keep_alive(true);
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
