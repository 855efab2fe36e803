//! The test-mode runtime: one `Runtime` value holds every part of the state (`Inner`: the
//! event log, the session map, the approval queue, the eval tables, the OTLP assembler),
//! each a type with its own methods, and coordinates them; it can be served over HTTP any
//! number of times; `ServerHandle::shutdown` stops one server, the state lives on.

pub mod agent;
pub mod approvals;
pub mod clock;
pub mod evals;
pub mod http;
pub mod llm;
pub mod log;
pub mod mocks;
pub mod observe;
pub mod open;
pub mod otel;
pub mod otlp;
mod persist;
pub mod policy;
mod server;
pub mod sessions;
#[cfg(feature = "postgres")]
mod shared;
pub mod store;
#[cfg(not(feature = "postgres"))]
mod unshared;

pub use agent::AgentRunResult;
pub use clock::{Clock, ClockError};
pub use log::{BudgetStats, LogStats};
pub use persist::STORE_UNAVAILABLE;
pub use policy::{Policy, PolicyError};
pub use sessions::ExecuteReply;
#[cfg(feature = "postgres")]
use shared::SharedLink;
#[cfg(feature = "postgres")]
pub use shared::open_shared;
#[cfg(not(feature = "postgres"))]
use unshared::SharedLink;

use log::EventLog;
use sessions::SessionMap;
use spyglass_eval::HistorySettings;
use spyglass_protocol::{ApiError, Event, Frame};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Everything a runtime can be told at start.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Mocks allowed (`--test-mode`, `CODESPAR_TEST_MODE_ENABLED`); off, creating a
    /// session with mocks answers 501 `mocks_not_permitted`.
    pub test_mode: bool,
    pub policy: Policy,
    /// When non-empty every /v1 route needs `Authorization: Bearer <one of these>`.
    pub api_keys: Vec<String>,
    /// How many events the log keeps for `since=` resume and `GET /v1/events`.
    pub retained_events: usize,
    /// How long an approval waits before a decision gets 410.
    pub approval_ttl: Duration,
    /// Events a live subscriber may fall behind before it has to catch up from the log.
    pub subscriber_queue: usize,
    pub ping_interval: Duration,
    /// Request bodies above this answer 413 `payload_too_large`.
    pub max_body_bytes: usize,
    /// Model-loop iterations per `send` before the run fails.
    pub max_iterations: u32,
    /// Calls kept per session for `GET /v1/sessions/:id` (counters count them all).
    pub retained_calls: usize,
    /// Runs per suite and outcomes per case the eval history keeps for
    /// `GET /v1/evals/summary`.
    pub eval_history: HistorySettings,
    /// Eval runs kept for `GET /v1/evals/runs/:id`; the oldest finished ones go first.
    pub retained_eval_runs: usize,
    /// How long an eval case may run when its suite sets no `timeout_ms`.
    pub eval_case_timeout: Duration,
    /// Case attempts (cases × repeat) one eval run may plan.
    pub max_eval_attempts: usize,
    /// Bytes the event log and the sessions may retain together (`--max-retained-bytes`);
    /// past it closed sessions go first, then the oldest events (`/health` counts them).
    pub max_retained_bytes: usize,
    /// Sessions one tenant may hold open; past it create answers 429 `too_many_sessions`.
    /// Its closed ones beyond this many are dropped, oldest first.
    pub max_sessions_per_tenant: usize,
    /// Closed sessions whose last activity (their close) is older than this are dropped,
    /// with their counters, oldest first (`--retain-closed`); open ones never are.
    pub retain_closed_sessions: Duration,
    /// Decided and expired approvals kept for `GET /v1/approvals?status=all`, every tenant's;
    /// past it (or the byte budget) the oldest resolved go first. Pending ones never do.
    pub max_resolved_approvals: usize,
    /// Approvals one tenant may have waiting; past it a call its policy holds answers 429
    /// `too_many_pending_approvals` (nothing counted or emitted).
    pub max_pending_approvals: usize,
    /// Bytes of one string field of a create body (`user_id`, each server, metadata).
    pub max_string_bytes: usize,
    /// Model steps, and tool calls over all steps, a session's script may hold.
    pub max_script_calls: usize,
    /// Bytes of tool inputs and outputs one `send` may gather before the run is cut.
    pub max_send_response_bytes: usize,
    /// Keys bound to projects (`--api-key KEY=p1,p2`, `--keys-file`): such a key acts
    /// only for these `x-codespar-project`s and is accepted like `api_keys`.
    pub key_projects: Vec<(String, Vec<String>)>,
    /// How long a client has to send a request's headers; also how long a kept-alive
    /// connection may sit idle before the next request (one hyper timer does both).
    pub header_timeout: Duration,
    /// Open connections (`WebSockets` included) the server holds in total; lowered below
    /// the process's descriptor limit when that is smaller.
    pub max_connections: usize,
    /// Open connections one peer IP may hold.
    pub max_connections_per_ip: usize,
    /// Browser origins (`scheme://host[:port]`, or `*`) allowed to call the runtime
    /// (`--allow-origin`); any other `Origin` header is refused 403.
    pub allowed_origins: Vec<String>,
    /// Extra `Host` names a loopback-bound runtime answers (`--allow-host`), besides
    /// localhost and loopback addresses.
    pub allowed_hosts: Vec<String>,
    /// Real model providers behind `send` (`runtime::llm`): routes, keys, cassettes.
    pub models: crate::llm::settings::ProviderSettings,
    /// Whether eval suites may use `command` assertions, which run programs on this host
    /// (`serve --allow-command-assertions`); off, such a suite is refused 403
    /// `command_assertions_disabled`. `spyglass eval` turns it on for its own runtime.
    pub allow_command_assertions: bool,
    /// Open a `SQLite` store that holds less than it last recorded holding (its `-wal`
    /// lost, an older copy put back) and go on from what it holds
    /// (`serve --accept-store-loss`); off, such a store is refused naming the file.
    pub accept_store_loss: bool,
    /// Where approval expiry and the age of closed sessions read the time: the system's,
    /// or a manual clock a test advances (`Clock::manual`).
    pub clock: Clock,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            test_mode: false,
            policy: Policy::default(),
            api_keys: Vec::new(),
            retained_events: 100_000,
            approval_ttl: Duration::from_mins(15),
            subscriber_queue: 4096,
            ping_interval: Duration::from_secs(15),
            max_body_bytes: 1024 * 1024,
            max_iterations: 16,
            retained_calls: 1000,
            eval_history: HistorySettings::default(),
            retained_eval_runs: 100,
            eval_case_timeout: Duration::from_secs(30),
            max_eval_attempts: 10_000,
            max_retained_bytes: 256 * 1024 * 1024,
            max_sessions_per_tenant: 1_000,
            retain_closed_sessions: Duration::from_hours(7 * 24),
            max_resolved_approvals: 10_000,
            max_pending_approvals: 1_000,
            max_string_bytes: 1024,
            max_script_calls: 256,
            max_send_response_bytes: 8 * 1024 * 1024,
            key_projects: Vec::new(),
            header_timeout: Duration::from_secs(15),
            max_connections: 1024,
            max_connections_per_ip: 256,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            models: crate::llm::settings::ProviderSettings::default(),
            allow_command_assertions: false,
            accept_store_loss: false,
            clock: Clock::real(),
        }
    }
}

/// A REST error with its HTTP status: what every route answers on failure.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{status} {}: {}", error.code, error.message)]
pub struct ApiErrorWithStatus {
    pub status: u16,
    pub error: ApiError,
}

impl ApiErrorWithStatus {
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            error: ApiError::new(code, message),
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, spyglass_protocol::envelope::codes::NOT_FOUND, message)
    }

    pub fn invalid_body(message: impl Into<String>) -> Self {
        Self::new(
            400,
            spyglass_protocol::envelope::codes::INVALID_BODY,
            message,
        )
    }
}

/// The runtime's parts, each a type with its own methods in its own file: the event log
/// (`EventLog`, log.rs, which also carries state documents to the store), the session
/// map (`SessionMap`, sessions.rs, each `Session` behind its own mutex), the approval
/// queue (`ApprovalQueue`, approvals.rs), the eval tables (`EvalState`, evals.rs), the
/// OTLP assembler (otel/), the moved counters (`MovedCounters`, persist.rs) and the
/// shared-store link (`SharedLink`, shared.rs). `Runtime`'s methods coordinate them.
///
/// Lock order, outermost first: while holding one of these locks a path takes only
/// locks listed after it, never one listed before it (the order the code has always had).
/// 1. `following` (a shared store only, async): held while a batch of committed events
///    is applied.
/// 2. `otel`: held while the events of one export request's spans are emitted.
/// 3. `sessions`, the map (read or write): a session's mutex may be taken under it; the
///    map is never taken while a session is held (close releases the session first).
/// 4. One session's mutex: calls, replays, closes and counters run under it, and they
///    take the approvals, the moved counters and the log below it.
/// 5. `approvals`: under a session's lock (queueing a held call, expiring a closing
///    session's) or alone; a replay takes the session only after letting the queue go.
/// 6. `moved`'s list of sessions: under a session's lock; the group write takes it
///    alone, then each session in turn.
/// 7. The eval tables inside `evals` (runs, history, documents, removed, outcome slots):
///    each taken briefly, after the log has appended, holding no session or queue.
/// 8. The log's ring and its store writer or journal: innermost, taken under any of the
///    above (an emit, a document's put) and holding none of them.
///
/// `aged_sweep` is taken alone; the byte budget is atomics.
pub(crate) struct Inner {
    pub(crate) config: RuntimeConfig,
    pub(crate) log: EventLog,
    pub(crate) budget: Arc<log::Budget>,
    pub(crate) sessions: RwLock<SessionMap>,
    pub(crate) approvals: Mutex<approvals::ApprovalQueue>,
    pub(crate) evals: evals::EvalState,
    /// Traces whose spans came before their root (`POST /v1/traces`).
    pub(crate) otel: Mutex<crate::otel::Assembler>,
    /// When closed sessions were last looked at for their age (`evict_aged_sessions`).
    pub(crate) aged_sweep: Mutex<Option<std::time::Instant>>,
    /// The store this runtime shares with others (`shared`), set once at open; never
    /// set in a build without the `postgres` feature (`unshared`).
    pub(crate) shared: SharedLink,
    /// Held while events from a shared store are taken in and applied (the follower, or
    /// a request that must have heard everything committed before it), so they are
    /// applied one at a time, in seq order.
    #[cfg(feature = "postgres")]
    pub(crate) following: tokio::sync::Mutex<()>,
    /// Sessions whose counters wait for their document (a store with a journal).
    pub(crate) moved: persist::MovedCounters,
}

/// The runtime's state; cheap to clone (all clones share it).
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

/// Locks a mutex, treating poison as usable: every critical section here leaves its data
/// consistent before anything that could panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Read-locks a `RwLock`, treating poison as `lock` does.
pub(crate) fn read<T>(rw: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    rw.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Write-locks a `RwLock`, treating poison as `lock` does.
pub(crate) fn write<T>(rw: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    rw.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The default tenant when a request names no `x-codespar-project`.
pub const DEFAULT_TENANT: &str = "default";

impl Runtime {
    pub fn new(config: RuntimeConfig) -> Runtime {
        Self::with_log(config, |config, budget| {
            EventLog::new(config.retained_events, config.subscriber_queue, budget)
        })
    }

    /// A runtime over the log `make_log` builds on the runtime's byte budget (a fresh
    /// one, or one continuing a store: `crate::store`).
    pub(crate) fn with_log(
        mut config: RuntimeConfig,
        make_log: impl FnOnce(&RuntimeConfig, Arc<log::Budget>) -> EventLog,
    ) -> Runtime {
        // A bound key is a key: the auth layer and the exposure warning see it.
        for (key, _) in &config.key_projects {
            if !config.api_keys.contains(key) {
                config.api_keys.push(key.clone());
            }
        }
        let budget = Arc::new(log::Budget::new(config.max_retained_bytes));
        let log = make_log(&config, budget.clone());
        let evals = evals::EvalState::new(
            config.eval_history,
            config.retained_eval_runs,
            budget.clone(),
        );
        // A sixteenth of the byte budget: pending traces hold ids and parents only.
        let otel = Mutex::new(crate::otel::Assembler::new(config.max_retained_bytes / 16));
        let approvals = Mutex::new(approvals::ApprovalQueue::new(
            config.max_resolved_approvals,
            budget.clone(),
        ));
        let moved = persist::MovedCounters::new(config.retained_events);
        Runtime {
            inner: Arc::new(Inner {
                config,
                log,
                budget,
                sessions: RwLock::new(SessionMap::default()),
                approvals,
                evals,
                otel,
                aged_sweep: Mutex::new(None),
                shared: SharedLink::new(),
                #[cfg(feature = "postgres")]
                following: tokio::sync::Mutex::new(()),
                moved,
            }),
        }
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// Stamps an event with the next seq and `ts`, retains it and broadcasts it. The
    /// tenant whose stream shows it is its session's, else the default tenant.
    pub fn emit(&self, session_id: Option<String>, event: Event) -> Frame {
        let tenant = session_id
            .as_deref()
            .and_then(|id| read(&self.inner.sessions).tenant_of(id))
            .unwrap_or_else(|| DEFAULT_TENANT.to_owned());
        self.emit_for(&tenant, session_id, event).frame.clone()
    }

    /// Every event the runtime logs passes here, its own and ingested ones, so the eval
    /// history counts other runners' `agent.eval.completed` like the runner's.
    pub(crate) fn emit_for(
        &self,
        tenant: &str,
        session_id: Option<String>,
        event: Event,
    ) -> Arc<log::Logged> {
        self.emit_shared(Arc::from(tenant), session_id, event)
    }

    /// `emit_for` with the tenant's name already shared: the event keeps it, uncopied.
    pub(crate) fn emit_shared(
        &self,
        tenant: Arc<str>,
        session_id: Option<String>,
        event: Event,
    ) -> Arc<log::Logged> {
        let logged = self.inner.log.append(tenant, session_id, event);
        let tenant = &*logged.tenant;
        self.inner.evals.observe(tenant, &logged.frame);
        if matches!(logged.frame.event, Event::AgentEvalCompleted(_)) {
            // What the history dropped to stay in budget leaves the store at once.
            self.inner.evals.unpersist(&self.inner.log);
        }
        if self.inner.log.has_store() {
            self.inner
                .evals
                .persist_outcome(&self.inner.log, tenant, &logged);
        }
        logged
    }

    /// What the event log holds now; every figure is bounded by the config
    /// (`retained_events`, `subscriber_queue`), however slow a subscriber is.
    pub fn stats(&self) -> log::LogStats {
        self.inner.log.stats()
    }

    /// What the byte budget holds and what it evicted (`max_retained_bytes`).
    pub fn budget_stats(&self) -> log::BudgetStats {
        self.inner.budget.stats()
    }

    /// Up to `limit` retained events of every tenant with seq (in its tenant) > `since`,
    /// oldest first.
    pub fn events_since(&self, since: u64, limit: usize) -> Vec<Frame> {
        self.inner
            .log
            .all_since(since, limit)
            .iter()
            .map(|logged| logged.frame.clone())
            .collect()
    }

    /// Binds `addr` (`SO_REUSEADDR`, so a restart can take the same port at once) and serves
    /// the HTTP and WebSocket routes until `ServerHandle::shutdown`.
    // Async in the public API so that callers need not change when it comes to await.
    #[expect(clippy::unused_async)]
    pub async fn serve(&self, addr: SocketAddr) -> std::io::Result<ServerHandle> {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        let listener = socket.listen(1024)?;
        let bound = listener.local_addr()?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let app = http::router(self.clone(), stop_rx.clone());
        let guard = http::guard::Guard::new(&self.inner.config, bound);
        self.spawn_expiry_sweep(stop_rx.clone());
        let config = &self.inner.config;
        let limits = server::ConnLimits {
            total: server::effective_total(config.max_connections),
            per_ip: config.max_connections_per_ip.max(1),
            header_timeout: config.header_timeout.max(Duration::from_millis(1)),
            max_body_bytes: config.max_body_bytes,
        };
        let task = tokio::spawn(server::serve(listener, app, guard, limits, stop_rx));
        tracing::info!(addr = %bound, "runtime listening");
        if should_warn(&bound, &self.inner.config.api_keys) {
            tracing::warn!(
                addr = %bound,
                "runtime bound to a non-loopback address with no API key: anyone who can reach it can read and drive every session; pass --api-key"
            );
        }
        Ok(ServerHandle {
            addr: bound,
            runtime: self.clone(),
            stop: stop_tx,
            task,
        })
    }
}

impl Runtime {
    /// One tick of the timer: overdue approvals expire, closed sessions past their age go.
    fn sweep(&self) {
        self.expire_due_approvals();
        self.evict_aged_sessions();
    }

    /// Expires overdue approvals on a timer while a server runs, so the stream announces
    /// an expiry when it happens rather than when someone next reads the queue.
    fn spawn_expiry_sweep(&self, mut stop: watch::Receiver<bool>) {
        let rt = self.clone();
        let every = self
            .inner
            .config
            .approval_ttl
            .clamp(Duration::from_millis(50), Duration::from_secs(1));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => rt.sweep(),
                    stopped = async { stop.wait_for(|stop| *stop).await.is_ok() } => {
                        if stopped {
                            return;
                        }
                        // The handle was dropped without a stop: the server runs on, so
                        // does the sweep (ticks only from here).
                        loop {
                            tick.tick().await;
                            rt.sweep();
                        }
                    }
                }
            }
        });
    }
}

/// Whether serving on `addr` with these keys exposes the runtime: a non-loopback address
/// (including the unspecified 0.0.0.0 / ::) and no API key.
pub fn should_warn(addr: &SocketAddr, api_keys: &[String]) -> bool {
    !addr.ip().is_loopback() && api_keys.iter().all(|key| key.trim().is_empty())
}

/// Creates a runtime and serves it on `addr` (use `127.0.0.1:0` for any free port).
pub async fn start(config: RuntimeConfig, addr: SocketAddr) -> std::io::Result<ServerHandle> {
    Runtime::new(config).serve(addr).await
}

/// A runtime for this process alone: served on `addr`, else on a free loopback port. Every
/// role that needs a runtime in-process (the inspector with no URL, the demo, `eval`
/// without `--url`) starts it here.
pub async fn embedded(
    config: RuntimeConfig,
    addr: Option<SocketAddr>,
) -> std::io::Result<ServerHandle> {
    start(
        config,
        addr.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0))),
    )
    .await
}

/// A running server over a runtime's state. Dropping the handle leaves the server
/// running (until the tokio runtime ends); `shutdown` is the only way to stop it.
pub struct ServerHandle {
    pub addr: SocketAddr,
    runtime: Runtime,
    stop: watch::Sender<bool>,
    task: JoinHandle<std::io::Result<()>>,
}

/// How long in-flight requests get to finish on shutdown before they are cut.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

impl ServerHandle {
    /// `http://ADDR`, e.g. `http://127.0.0.1:8000`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `ws://ADDR/v1/observe`.
    pub fn observe_url(&self) -> String {
        format!("ws://{}/v1/observe", self.addr)
    }

    pub fn runtime(&self) -> Runtime {
        self.runtime.clone()
    }

    /// Stops accepting, closes every open WebSocket, waits (bounded) for in-flight
    /// requests and releases the port. The runtime's state is untouched.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let mut task = self.task;
        if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
            .await
            .is_err()
        {
            task.abort();
            let _ = task.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::should_warn;

    #[test]
    fn warns_only_for_a_non_loopback_address_without_a_key() {
        let key = vec!["csk_test_k".to_owned()];
        for addr in ["127.0.0.1:8000", "127.8.9.10:1", "[::1]:8000"] {
            let addr = addr.parse().unwrap();
            assert!(!should_warn(&addr, &[]), "{addr}");
            assert!(!should_warn(&addr, &key), "{addr}");
        }
        for addr in [
            "0.0.0.0:8000",
            "[::]:8000",
            "192.168.1.5:80",
            "10.0.0.1:8000",
        ] {
            let addr = addr.parse().unwrap();
            assert!(should_warn(&addr, &[]), "{addr}");
            assert!(
                should_warn(&addr, &[" ".to_owned()]),
                "{addr}: a blank key is none"
            );
            assert!(!should_warn(&addr, &key), "{addr}");
        }
    }
}
