//! The Postgres store's connections: the URL parsed and checked, the bounded pool and
//! waiting for the database at start, the `LISTEN` connection, and the driver's errors.

use super::schema::schema_status;
use super::stream::OwnConnection;
use super::{CHANNEL, NOTIFY_EVERY, PgSettings, SchemaStatus, is_url, shown_url};
use crate::store::StoreError;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, TimeoutType};
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;
use tokio_postgres::error::SqlState;
use tokio_postgres::{AsyncMessage, Config, NoTls};

/// How long a call waits for a free pooled connection, or for a new one to open,
/// before it is an error rather than a hang.
pub(super) const POOL_WAIT: Duration = Duration::from_secs(5);

/// How long one attempt to reach the database may take (unless the URL says).
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Idle time before TCP keepalive probes a pooled or LISTEN connection (unless the URL
/// sets `keepalives_idle`).
pub(super) const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);

/// Start's retry interval while the database is unreachable.
pub(super) const RETRY: Duration = Duration::from_secs(1);

/// The longest pause between two attempts to get the LISTEN connection back.
pub(super) const LISTEN_BACKOFF: Duration = Duration::from_secs(5);
/// The Postgres store.
pub struct PgStore {
    pub(super) shown: String,
    pub(super) replica: String,
    pub(super) config: Config,
    pub(super) pool: Pool,
    pub(super) pool_size: usize,
    /// The tokio runtime `connect` ran on: the sync `Store` calls block on it.
    pub(super) handle: tokio::runtime::Handle,
    /// When this replica's commits last notified: at most one in `NOTIFY_EVERY` does.
    pub(super) notified: std::sync::Mutex<Option<std::time::Instant>>,
    /// The writer thread's connection (`append_stamping`), made at its first commit.
    pub(super) own: std::sync::Mutex<Option<OwnConnection>>,
    /// Each tenant's newest seq this store's evictions deleted up to.
    pub(super) evicted_upto: std::sync::Mutex<HashMap<String, u64>>,
}
impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("db", &self.shown)
            .finish_non_exhaustive()
    }
}
/// What one failed attempt to reach the database means for start.
pub(super) enum Attempt {
    /// Unreachable for now (refused, timed out, starting up): wait and retry.
    Wait(String),
    /// Retrying cannot help (a refused password, a missing database): say what to do.
    Fail(String),
}
impl PgStore {
    /// Connects (waiting while the database is unreachable, `on_wait` told each retry's
    /// reason), creates or migrates the schema, refuses a newer one.
    pub async fn connect(
        url: &str,
        settings: PgSettings,
        on_wait: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<PgStore, StoreError> {
        let (config, shown) = parse(url)?;
        let pool_size = settings.pool_size.max(1);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(POOL_WAIT))
            .recycle_timeout(Some(POOL_WAIT))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|err| StoreError::Postgres {
                shown: shown.clone(),
                reason: format!("cannot build the connection pool: {err}"),
            })?;
        let store = PgStore {
            shown,
            replica: settings.replica,
            config,
            pool,
            pool_size,
            handle: tokio::runtime::Handle::current(),
            notified: std::sync::Mutex::new(None),
            own: std::sync::Mutex::new(None),
            evicted_upto: std::sync::Mutex::new(HashMap::new()),
        };
        loop {
            match store.pool.get().await {
                Ok(mut client) => {
                    store.migrate(&mut client).await?;
                    return Ok(store);
                }
                Err(err) => match attempt(&err) {
                    Attempt::Wait(reason) => {
                        tracing::warn!(db = %store.shown, %reason, "store unreachable; retrying");
                        on_wait(&reason);
                        tokio::time::sleep(RETRY).await;
                    }
                    Attempt::Fail(reason) => return Err(store.error(reason)),
                },
            }
        }
    }

    /// Whether this commit notifies the other replicas: the first after a quiet spell
    /// does, then one in `NOTIFY_EVERY`. A notification's commit takes a lock every
    /// notifying commit in the database waits on (a quarter of a busy replica's
    /// throughput); the others, woken, read the database again for `FOLLOW_HOT` (the
    /// follower), which finds the commits that did not notify.
    pub(super) fn notify_now(&self) -> bool {
        let mut last = self
            .notified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = std::time::Instant::now();
        if last.is_some_and(|at| now.duration_since(at) < NOTIFY_EVERY) {
            return false;
        }
        *last = Some(now);
        true
    }

    /// What `spyglass store status` reports, from one connection and without creating
    /// anything: an unreachable database is an error at once (no waiting).
    pub async fn inspect(url: &str) -> Result<SchemaStatus, StoreError> {
        let (config, shown) = parse(url)?;
        let fail = |reason: String| StoreError::Postgres {
            shown: shown.clone(),
            reason,
        };
        let (client, conn) =
            config
                .connect(NoTls)
                .await
                .map_err(|err| match connect_attempt(&err) {
                    Attempt::Wait(reason) => fail(format!("cannot reach the database: {reason}")),
                    Attempt::Fail(reason) => fail(reason),
                })?;
        let driver = tokio::spawn(conn);
        let status = schema_status(&client, &shown)
            .await
            .map_err(|err| fail(describe(&err)));
        drop(client);
        let _ = driver.await;
        status
    }

    /// This runtime's name among the replicas.
    pub fn replica(&self) -> &str {
        &self.replica
    }
    /// The tenants named by `NOTIFY spyglass_events` from now on, on a connection of its
    /// own (reconnecting when it drops: a `None` tenant then means "look at every one").
    pub async fn listen(
        &self,
    ) -> Result<tokio::sync::mpsc::UnboundedReceiver<Option<String>>, StoreError> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let first = listening(&self.config, tx.clone(), self.replica.clone())
            .await
            .map_err(|err| self.error(format!("cannot LISTEN: {}", describe(&err))))?;
        let config = self.config.clone();
        let shown = self.shown.clone();
        let own = self.replica.clone();
        tokio::spawn(async move {
            let (mut client, mut pump) = first;
            loop {
                tokio::select! {
                    _ = &mut pump => {}
                    () = tx.closed() => return,
                }
                drop(client);
                tracing::warn!(db = %shown, "the LISTEN connection dropped; reconnecting");
                let mut delay = Duration::from_millis(100);
                loop {
                    if tx.is_closed() {
                        return;
                    }
                    tokio::time::sleep(delay).await;
                    match listening(&config, tx.clone(), own.clone()).await {
                        Ok((c, p)) => {
                            client = c;
                            pump = p;
                            break;
                        }
                        Err(err) => {
                            tracing::debug!(db = %shown, err = %describe(&err), "LISTEN reconnect failed");
                            delay = (delay * 2).min(LISTEN_BACKOFF);
                        }
                    }
                }
                // Whatever was notified while it was down is unknown: look at every one.
                if tx.send(None).is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }
    pub(super) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|err| match err {
            PoolError::Timeout(TimeoutType::Wait) => self.error(format!(
                "no database connection came free within {}s (all {} of --store-pool in use); raise --store-pool, or the database's max_connections",
                POOL_WAIT.as_secs(),
                self.pool_size
            )),
            other => match attempt(&other) {
                Attempt::Wait(reason) => self.error(format!("database unreachable: {reason}")),
                Attempt::Fail(reason) => self.error(reason),
            },
        })
    }

    pub(super) fn error(&self, reason: String) -> StoreError {
        StoreError::Postgres {
            shown: self.shown.clone(),
            reason,
        }
    }

    pub(super) fn sql_error(&self, err: &tokio_postgres::Error) -> StoreError {
        self.error(describe(err))
    }
    /// Runs a store call from a sync caller: the writer thread (no runtime of its own)
    /// blocks on `connect`'s runtime; a caller inside a runtime hands it to a scoped
    /// thread, since blocking a worker on its own runtime would panic.
    pub(super) fn block<T: Send>(&self, work: impl Future<Output = T> + Send) -> T {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.handle.block_on(work);
        }
        std::thread::scope(|scope| {
            scope
                .spawn(|| self.handle.block_on(work))
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }
}

/// A `LISTEN` connection: the client (dropping it closes the connection) and the task
/// forwarding its notifications to `tx`, which ends when the connection does.
pub(super) async fn listening(
    config: &Config,
    tx: tokio::sync::mpsc::UnboundedSender<Option<String>>,
    own: String,
) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error> {
    let (client, mut conn) = config.connect(NoTls).await?;
    let pump = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(note))) => {
                    let tenant = match note.payload().split_once('\t') {
                        // This replica's own commit: already in its log.
                        Some((from, _)) if from == own => continue,
                        Some((_, tenant)) => tenant,
                        None => note.payload(),
                    };
                    if tx.send(Some(tenant.to_owned())).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            }
        }
    });
    if let Err(err) = client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
        pump.abort();
        return Err(err);
    }
    Ok((client, pump))
}
/// What a store URL looks like, for the messages refusing one.
pub(super) const FORM: &str = "give postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE";

/// The URL parsed (as `tokio_postgres::Config` reads it) and as shown: no password.
pub(super) fn parse(url: &str) -> Result<(Config, String), StoreError> {
    let shown = shown_url(url);
    let fail = |reason: String| StoreError::Postgres {
        shown: shown.clone(),
        reason,
    };
    if !is_url(url) {
        return Err(fail(format!("not a postgres:// URL; {FORM}")));
    }
    let mut config: Config = url
        .parse()
        .map_err(|err: tokio_postgres::Error| fail(format!("{}; {FORM}", describe(&err))))?;
    if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
        return Err(fail(
            "sslmode=require is not supported: this spyglass connects without TLS; reach the database over a private network or a loopback (sslmode=disable or prefer), or through a local TLS tunnel".to_owned(),
        ));
    }
    if config.get_hosts().is_empty() {
        return Err(fail(format!("the URL names no host; {FORM}")));
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    // A database that vanishes without closing the connection (a partition, a host gone)
    // is noticed in about a minute, not after the kernel's two hours.
    if config.get_keepalives_idle() == Duration::from_hours(2) {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if config.get_application_name().is_none() {
        config.application_name("spyglass");
    }
    // A statement stuck behind another replica's lock (a claim, a stream row) gives up
    // and is answered 503, rather than holding its pooled connection for good.
    if config.get_options().is_none() {
        config.options(STATEMENT_TIMEOUT);
    }
    Ok((config, shown))
}

/// Every pooled statement's bound, unless the URL sets `options` itself.
pub(super) const STATEMENT_TIMEOUT: &str = "-c statement_timeout=10000";

/// Whether `url` is one this store can connect with (scheme, syntax, no TLS asked), and
/// if not, why: for a command to refuse it as bad input before trying.
pub fn check_url(url: &str) -> Result<(), StoreError> {
    parse(url).map(|_| ())
}
/// What a failed `pool.get()` at start means: wait or fail.
pub(super) fn attempt(err: &PoolError) -> Attempt {
    match err {
        PoolError::Backend(err) => connect_attempt(err),
        PoolError::Timeout(_) => {
            Attempt::Wait(format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()))
        }
        other => Attempt::Fail(other.to_string()),
    }
}

/// What a failed connection attempt means: the server's refusals that retrying cannot
/// mend fail with what to do; the network's and a starting server's wait.
pub(super) fn connect_attempt(err: &tokio_postgres::Error) -> Attempt {
    if let Some(db) = err.as_db_error() {
        let code = db.code();
        let message = db.message();
        return if *code == SqlState::INVALID_PASSWORD {
            Attempt::Fail(format!(
                "the database refused the password ({message}); put the right one in the URL (postgres://USER:PASSWORD@HOST/DATABASE)"
            ))
        } else if *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION {
            Attempt::Fail(format!(
                "the database refused the connection ({message}); check the user in the URL and the server's pg_hba.conf"
            ))
        } else if *code == SqlState::INVALID_CATALOG_NAME {
            Attempt::Fail(format!(
                "{message}; create it (createdb NAME) or name an existing database in the URL"
            ))
        } else if *code == SqlState::CANNOT_CONNECT_NOW
            || *code == SqlState::TOO_MANY_CONNECTIONS
            || *code == SqlState::ADMIN_SHUTDOWN
        {
            Attempt::Wait(message.to_owned())
        } else {
            Attempt::Fail(describe(err))
        };
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            return Attempt::Wait(match io.kind() {
                K::ConnectionRefused
                | K::ConnectionReset
                | K::ConnectionAborted
                | K::TimedOut
                | K::NotFound
                | K::HostUnreachable
                | K::NetworkUnreachable
                | K::AddrNotAvailable
                | K::UnexpectedEof => io.kind().to_string(),
                _ => io.to_string(),
            });
        }
        source = cause.source();
    }
    let text = describe(err);
    if text.contains("password missing") {
        Attempt::Fail(
            "the database asks for a password; put it in the URL (postgres://USER:PASSWORD@HOST/DATABASE)".to_owned(),
        )
    } else if err.is_closed() || text.starts_with("timeout") {
        Attempt::Wait(text)
    } else {
        Attempt::Fail(text)
    }
}

/// A driver error with what the server said (its message and SQLSTATE), or its cause.
pub(super) fn describe(err: &tokio_postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    match std::error::Error::source(err) {
        Some(cause) => format!("{err}: {cause}"),
        None => err.to_string(),
    }
}

pub(super) fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

pub(super) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_bounded_unless_the_url_sets_its_own_options() {
        let (config, _) = parse("postgres://u@h/d").unwrap();
        assert_eq!(config.get_options(), Some(STATEMENT_TIMEOUT));
        let (config, _) = parse("postgres://u@h/d?options=-c%20statement_timeout%3D1000").unwrap();
        assert_eq!(config.get_options(), Some("-c statement_timeout=1000"));
    }

    #[test]
    fn bad_urls_and_tls_are_refused_with_what_to_do() {
        let err = |url: &str| parse(url).map(|_| ()).unwrap_err().to_string();
        assert!(err("mysql://h/d").contains("not a postgres:// URL"));
        assert!(err("postgres://u:pw@h:notaport/d").contains("give postgres://"));
        let tls = err("postgres://u:secret@h/d?sslmode=require");
        assert!(tls.contains("sslmode=require is not supported"), "{tls}");
        assert!(!tls.contains("secret"), "{tls}");
        assert!(parse("postgresql://u@127.0.0.1:5/d").is_ok());
    }
}
