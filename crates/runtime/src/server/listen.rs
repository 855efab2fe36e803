//! The accounting every listener shares (the HTTP server and OTLP/gRPC): caps on open
//! connections, per peer IP and in total, the idlest closed when one is reached, and sockets.
//!
//! When a cap is reached a new connection takes the slot of the connection idle the longest
//! (no request in flight, not a WebSocket), which is closed; only when every slot is busy is
//! the new one refused. A socket's writes fail once one has waited the header timeout on a
//! peer that takes nothing; a socket made `closing_when_idle` also fails its reads once
//! nothing has been read for the header timeout with no request in flight (hyper's HTTP/2
//! server has no header-read timeout of its own).

use crate::lock;
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Sleep;

/// What bounds the connections one server holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    pub total: usize,
    pub per_ip: usize,
    pub header_timeout: Duration,
    pub max_body_bytes: usize,
}

impl ConnLimits {
    /// The limits `config` sets (`--max-connections`, `--max-connections-per-ip`, the
    /// header timeout, `--max-body-bytes`), as every listener applies them.
    #[cfg_attr(
        not(feature = "otlp-grpc"),
        expect(dead_code, reason = "used by the OTLP/gRPC server only")
    )]
    pub(crate) fn of(config: &crate::RuntimeConfig) -> ConnLimits {
        ConnLimits {
            total: effective_total(config.max_connections),
            per_ip: config.max_connections_per_ip.max(1),
            header_timeout: config.header_timeout.max(Duration::from_millis(1)),
            max_body_bytes: config.max_body_bytes,
        }
    }
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
pub(crate) struct Conn {
    ip: IpAddr,
    in_flight: AtomicUsize,
    upgraded: AtomicBool,
    /// When the connection was opened or last finished a request, in µs since the
    /// server's `Clock` began: the idlest is the one a full server closes.
    idle_since: AtomicU64,
    clock: Clock,
    /// Notified when a new connection takes this one's slot.
    pub(crate) close: Notify,
}

impl Conn {
    fn evictable(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0 && !self.upgraded.load(Ordering::Acquire)
    }

    fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    /// Marks the connection a WebSocket (or other upgrade): never closed for a newcomer.
    pub(crate) fn upgraded(&self) {
        self.upgraded.store(true, Ordering::Release);
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

/// The open connections of one listener, against its caps.
pub(crate) struct Admission {
    limits: ConnLimits,
    table: Mutex<Table>,
    clock: Clock,
}

/// A connection's place in the table, given back when its socket (or the WebSocket it
/// became) is dropped.
pub(crate) struct Slot {
    admission: Arc<Admission>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.admission.table).remove(self.id);
    }
}

impl Admission {
    pub(crate) fn new(limits: ConnLimits) -> Arc<Admission> {
        Arc::new(Admission {
            limits,
            table: Mutex::new(Table::default()),
            clock: Clock(Instant::now()),
        })
    }

    /// Tells every connection with no request in flight (nor upgraded) to close: a server
    /// stopping does not wait on sockets that may never send a request.
    #[cfg_attr(
        not(feature = "otlp-grpc"),
        expect(dead_code, reason = "used by the OTLP/gRPC server only")
    )]
    pub(crate) fn close_idle(&self) {
        for conn in lock(&self.table).conns.values() {
            if conn.evictable() {
                conn.close.notify_one();
            }
        }
    }

    /// A slot for a connection from `ip`, closing the idlest connection when a cap is
    /// reached; None when every connection under the cap is busy.
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<(Slot, Arc<Conn>)> {
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
            clock: self.clock,
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

/// The next accepted socket; an accept that fails (out of descriptors, a peer gone before
/// accept) waits 50 ms rather than spin.
pub(crate) async fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(err) => {
                tracing::debug!(%err, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The read side of a socket `closing_when_idle`.
struct Idle {
    last_read: tokio::time::Instant,
    timer: Pin<Box<Sleep>>,
    /// Resolves when a newcomer took this connection's slot; None once it has.
    evicted: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Idle {
    /// Whether the connection has read nothing for `limit` with no request in flight;
    /// otherwise the timer is set for the next time it could have.
    fn expired(&mut self, conn: &Conn, limit: Duration, cx: &mut Context<'_>) -> bool {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            let now = tokio::time::Instant::now();
            let quiet_until = self.last_read + limit;
            if quiet_until > now {
                self.timer.as_mut().reset(quiet_until);
            } else if conn.busy() {
                self.timer.as_mut().reset(now + limit);
            } else {
                return true;
            }
        }
    }
}

/// A socket that holds its slot (through a WebSocket upgrade too) and whose writes fail
/// once one has waited `stall_limit` on a peer that takes nothing. The timer exists only
/// while a write waits.
pub(crate) struct Socket {
    stream: TcpStream,
    conn: Arc<Conn>,
    stall_limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
    idle: Option<Idle>,
    _slot: Slot,
}

impl Socket {
    pub(crate) fn new(
        stream: TcpStream,
        (slot, conn): (Slot, Arc<Conn>),
        stall_limit: Duration,
    ) -> Socket {
        Socket {
            stream,
            conn,
            stall_limit,
            stalled: None,
            idle: None,
            _slot: slot,
        }
    }

    /// Reads fail once nothing has been read for the stall limit while the connection has
    /// no request in flight (a peer that never sends its preface, or stopped using the
    /// connection), or once a newcomer took its slot.
    #[cfg_attr(
        not(feature = "otlp-grpc"),
        expect(dead_code, reason = "used by the OTLP/gRPC server only")
    )]
    pub(crate) fn closing_when_idle(mut self) -> Socket {
        let limit = self.stall_limit;
        let watched = self.conn.clone();
        self.idle = Some(Idle {
            last_read: tokio::time::Instant::now(),
            timer: Box::pin(tokio::time::sleep(limit)),
            evicted: Some(Box::pin(async move { watched.close.notified().await })),
        });
        self
    }

    /// The connection this socket is, as the table sees it.
    #[cfg_attr(
        not(feature = "otlp-grpc"),
        expect(dead_code, reason = "used by the OTLP/gRPC server only")
    )]
    pub(crate) fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }

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
        let before = buf.filled().len();
        let this = &mut *self;
        let Some(idle) = &mut this.idle else {
            return Pin::new(&mut this.stream).poll_read(cx, buf);
        };
        let Some(evicted) = &mut idle.evicted else {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "closed: a new connection took this idle one's slot",
            )));
        };
        if evicted.as_mut().poll(cx).is_ready() {
            idle.evicted = None;
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "closed: a new connection took this idle one's slot",
            )));
        }
        let result = Pin::new(&mut this.stream).poll_read(cx, buf);
        match &result {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                idle.last_read = tokio::time::Instant::now();
            }
            Poll::Pending if idle.expired(&this.conn, this.stall_limit, cx) => {
                return Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "closed: nothing read for the header timeout and no request in flight",
                )));
            }
            _ => {}
        }
        result
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
pub(crate) struct Busy(Arc<Conn>);

impl Busy {
    pub(crate) fn new(conn: Arc<Conn>) -> Busy {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        Busy(conn)
    }

    pub(crate) fn conn(&self) -> &Conn {
        &self.0
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0
            .idle_since
            .store(self.0.clock.now(), Ordering::Relaxed);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}
