//! The Postgres store: one database shared by any number of runtimes (replicas). Besides
//! what every store keeps, it decides what must be one truth across them: seqs, mock claims, approval decisions.
//!
//! Tables (schema version 1, `spyglass_schema` holds the version):
//! - `spyglass_meta(key text primary key, value text)`: `epoch`.
//! - `spyglass_streams(tenant text primary key, next_seq bigint)`: each tenant's next seq.
//!   A commit takes its seqs with `UPDATE … RETURNING` on the tenant's row, so the row is
//!   locked until the commit: across replicas a tenant's seq order is its commit order,
//!   and a follower reading `seq > n` never skips one that commits later.
//! - `spyglass_events(tenant text, seq bigint, origin text, text text, ord bigint identity,
//!   primary key (tenant, seq))`: `origin` names the replica that wrote it; `ord` is the
//!   insertion order across tenants (a runtime opening takes the newest `retained` by it).
//! - `spyglass_state(kind text, tenant text, key text, value text, primary key (kind, tenant, key))`.
//! - `spyglass_claims(tenant text, session text, tool text, consumed bigint, primary key (tenant, session, tool))`:
//!   the stateful mock entries served.
//! - `spyglass_decisions(tenant text, approval text, decision text, decided_at timestamptz, primary key (tenant, approval))`.
//!
//! A commit that writes events sends `NOTIFY spyglass_events, '<replica>\t<tenant>'` once
//! per tenant, at most one commit of a replica in `NOTIFY_EVERY`; a replica's listener
//! passes on the others' (its own commits reach its log without asking the database).
//!
//! The schema is created and migrated in one transaction under an advisory lock, so
//! replicas starting together take turns; a database of a newer version is refused. The
//! sync `Store` calls come from the log's writer thread (no tokio worker) and run on the
//! tokio runtime `connect` was called on, but for the writer's commits: one statement each
//! (`COMMIT`), on a connection of the writer's own driven on its thread. No TLS:
//! `sslmode=require` is refused at once.

use super::{StateWrite, Store, StoreError, StoredEvent, StoredRecord, StoredStream};
use crate::log::Logged;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, TimeoutType};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::error::SqlState;
use tokio_postgres::{AsyncMessage, Config, GenericClient, NoTls};

/// A statement's parameter.
type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// What a batch's commit writes: its statement (`commit_sql`) has only these parts, so
/// Postgres plans and starts no part a batch does not use (most batches are events alone).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "four independent parts, each present or not"
)]
struct Parts {
    events: bool,
    evict: bool,
    put: bool,
    delete: bool,
}

/// One batch's commit in one statement (so one round trip, no `BEGIN`/`COMMIT`), with the
/// parts in `parts`, parameters numbered in this order:
/// - events: each tenant's seqs taken on its stream row, locked until the statement
///   commits (tenants in name order, so two replicas' batches never wait on each other in
///   a cycle); the events inserted with their seqs, each text written around its seq here
///   (`head || seq || tail`, or `head` alone when `tail` is null; the seqs are new, so a
///   plain insert, without `ON CONFLICT`'s check of the index first); when the flag is set,
///   one notification per tenant. The rows returned are each tenant's next seq.
/// - evict: each tenant's events in `(after, upto]` deleted (a bounded range, so an index
///   scan: `seq <= upto` alone was planned as a scan of the whole table);
/// - put / delete: the state documents, each key once, in key order.
///
/// Data-modifying `WITH` parts all run, in this order, whatever the outer query reads.
fn commit_sql(parts: Parts) -> String {
    let mut n = 0;
    let mut next = || {
        n += 1;
        format!("${n}")
    };
    let mut with = Vec::new();
    let mut select = "SELECT NULL::text, NULL::bigint, NULL::text WHERE false".to_owned();
    if parts.events {
        let (tenants, counts, origin) = (next(), next(), next());
        let (ts, backs, heads, tails) = (next(), next(), next(), next());
        let (notify, channel) = (next(), next());
        with.push(format!(
            "taken AS (
                 INSERT INTO spyglass_streams (tenant, next_seq)
                 SELECT t, 1 + n FROM unnest({tenants}::text[], {counts}::bigint[]) AS c(t, n)
                 ORDER BY t
                 ON CONFLICT (tenant) DO UPDATE
                 SET next_seq = spyglass_streams.next_seq + excluded.next_seq - 1
                 RETURNING tenant, next_seq
             )"
        ));
        with.push(format!(
            "added AS (
                 INSERT INTO spyglass_events (tenant, seq, origin, text)
                 SELECT e.t, taken.next_seq - e.back, {origin},
                        CASE WHEN e.tail IS NULL THEN e.head
                             ELSE e.head || (taken.next_seq - e.back) || e.tail END
                 FROM unnest({ts}::text[], {backs}::bigint[], {heads}::text[], {tails}::text[])
                      WITH ORDINALITY AS e(t, back, head, tail, i)
                 JOIN taken ON taken.tenant = e.t
                 ORDER BY e.i
             )"
        ));
        select = format!(
            "SELECT tenant, next_seq,
                    CASE WHEN {notify} THEN pg_notify({channel}, {origin} || E'\\t' || tenant)::text END
             FROM taken"
        );
    }
    if parts.evict {
        let (tenants, after, upto) = (next(), next(), next());
        with.push(format!(
            "evicted AS (
                 DELETE FROM spyglass_events AS x
                 USING unnest({tenants}::text[], {after}::bigint[], {upto}::bigint[])
                       AS d(tenant, after, upto)
                 WHERE x.tenant = d.tenant AND x.seq > d.after AND x.seq <= d.upto
             )"
        ));
    }
    if parts.put {
        let (kinds, tenants, keys, values) = (next(), next(), next(), next());
        with.push(format!(
            "put AS (
                 INSERT INTO spyglass_state (kind, tenant, key, value)
                 SELECT * FROM unnest({kinds}::text[], {tenants}::text[], {keys}::text[], {values}::text[])
                 ON CONFLICT (kind, tenant, key) DO UPDATE SET value = excluded.value
             )"
        ));
    }
    if parts.delete {
        let (kinds, tenants, keys) = (next(), next(), next());
        with.push(format!(
            "deleted AS (
                 DELETE FROM spyglass_state AS s
                 USING unnest({kinds}::text[], {tenants}::text[], {keys}::text[]) AS d(kind, tenant, key)
                 WHERE s.kind = d.kind AND s.tenant = d.tenant AND s.key = d.key
             )"
        ));
    }
    if with.is_empty() {
        return select;
    }
    format!("WITH {} {select}", with.join(", "))
}

/// A replica's commits notify at most this often; the followers woken read again every
/// `FOLLOW_EVERY` for `FOLLOW_HOT` (`runtime::shared`), so no commit waits longer unseen.
pub const NOTIFY_EVERY: Duration = Duration::from_millis(20);

/// The schema version this spyglass writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// The channel every commit with events notifies, its payload the tenant.
pub const CHANNEL: &str = "spyglass_events";

/// Migration `i` takes the schema from version `i` to `i + 1`; a shipped one is never
/// edited. All the missing ones run in one transaction with the version's update.
const MIGRATIONS: &[&str] = &["
    CREATE TABLE spyglass_meta (key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE spyglass_streams (tenant text PRIMARY KEY, next_seq bigint NOT NULL);
    CREATE TABLE spyglass_events (
        tenant text NOT NULL,
        seq bigint NOT NULL,
        origin text NOT NULL,
        text text NOT NULL,
        ord bigint GENERATED ALWAYS AS IDENTITY,
        PRIMARY KEY (tenant, seq)
    );
    CREATE INDEX spyglass_events_ord ON spyglass_events (ord);
    CREATE TABLE spyglass_state (
        kind text NOT NULL,
        tenant text NOT NULL,
        key text NOT NULL,
        value text NOT NULL,
        PRIMARY KEY (kind, tenant, key)
    );
    CREATE TABLE spyglass_claims (
        tenant text NOT NULL,
        session text NOT NULL,
        tool text NOT NULL,
        consumed bigint NOT NULL,
        PRIMARY KEY (tenant, session, tool)
    );
    CREATE TABLE spyglass_decisions (
        tenant text NOT NULL,
        approval text NOT NULL,
        decision text NOT NULL,
        decided_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, approval)
    );
"];

/// The advisory lock replicas take turns on while creating or migrating the schema
/// ("SPYGLASS" in ASCII).
const SCHEMA_LOCK: i64 = 0x5350_5947_4C41_5353;

/// The state documents `store status` counts as sessions (`runtime::persist::SESSION`).
const SESSION_KIND: &str = "session";

/// How long a call waits for a free pooled connection, or for a new one to open,
/// before it is an error rather than a hang.
const POOL_WAIT: Duration = Duration::from_secs(5);

/// How long one attempt to reach the database may take (unless the URL says).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Idle time before TCP keepalive probes a pooled or LISTEN connection (unless the URL
/// sets `keepalives_idle`).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);

/// Start's retry interval while the database is unreachable.
const RETRY: Duration = Duration::from_secs(1);

/// The longest pause between two attempts to get the LISTEN connection back.
const LISTEN_BACKOFF: Duration = Duration::from_secs(5);

/// How the pool is sized and how long start waits for the database.
#[derive(Debug, Clone)]
pub struct PgSettings {
    /// Connections the pool holds at most (`--store-pool`).
    pub pool_size: usize,
    /// This runtime's name in `spyglass_events.origin` (a fresh random one per process).
    pub replica: String,
}

/// `--store-pool`'s default: connections one replica holds at most.
pub const DEFAULT_POOL_SIZE: usize = 16;

/// What `spyglass store status` prints: where, which schema version, what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaStatus {
    /// The database as shown (no password).
    pub shown: String,
    /// `None`: no spyglass schema yet.
    pub version: Option<i64>,
    pub supported: i64,
    pub events: i64,
    pub sessions: i64,
}

/// How a decision on an approval went in the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// This call made it: the caller applies it (and replays an approved call).
    Won,
    /// Another came first, with this decision (`approved`, `denied`, `expired`).
    Already(String),
    /// Its expiry passed before any decision.
    Expired,
}

/// The Postgres store.
pub struct PgStore {
    shown: String,
    replica: String,
    config: Config,
    pool: Pool,
    pool_size: usize,
    /// The tokio runtime `connect` ran on: the sync `Store` calls block on it.
    handle: tokio::runtime::Handle,
    /// When this replica's commits last notified: at most one in `NOTIFY_EVERY` does.
    notified: std::sync::Mutex<Option<std::time::Instant>>,
    /// The writer thread's connection (`append_stamping`), made at its first commit.
    own: std::sync::Mutex<Option<OwnConnection>>,
    /// Each tenant's newest seq this store's evictions deleted up to.
    evicted_upto: std::sync::Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("db", &self.shown)
            .finish_non_exhaustive()
    }
}

/// What one failed attempt to reach the database means for start.
enum Attempt {
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
    fn notify_now(&self) -> bool {
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

    /// The stream as stored (like `Store::stream`, for a runtime opening on it).
    pub async fn open_stream(
        &self,
        fresh_epoch: &str,
        retained: usize,
    ) -> Result<StoredStream, StoreError> {
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        let put = client
            .prepare_cached(
                "INSERT INTO spyglass_meta (key, value) VALUES ('epoch', $1)
                 ON CONFLICT (key) DO NOTHING",
            )
            .await
            .map_err(sql)?;
        client.execute(&put, &[&fresh_epoch]).await.map_err(sql)?;
        let epoch: String = client
            .query_one("SELECT value FROM spyglass_meta WHERE key = 'epoch'", &[])
            .await
            .map_err(sql)?
            .get(0);
        let next_seqs = client
            .query(
                "SELECT tenant, next_seq FROM spyglass_streams ORDER BY tenant",
                &[],
            )
            .await
            .map_err(sql)?
            .iter()
            .map(|row| (row.get::<_, String>(0), to_u64(row.get::<_, i64>(1).max(1))))
            .collect();
        let limit = i64::try_from(retained).unwrap_or(i64::MAX);
        let newest = client
            .prepare_cached(
                "SELECT tenant, seq, text FROM
                   (SELECT tenant, seq, text, ord FROM spyglass_events ORDER BY ord DESC LIMIT $1) AS newest
                 ORDER BY ord",
            )
            .await
            .map_err(sql)?;
        let events = client
            .query(&newest, &[&limit])
            .await
            .map_err(sql)?
            .iter()
            .map(|row| StoredEvent {
                tenant: row.get(0),
                seq: to_u64(row.get(1)),
                text: row.get(2),
            })
            .collect();
        Ok(StoredStream {
            epoch,
            next_seqs,
            events,
        })
    }

    /// Every state document (like `Store::state`).
    pub async fn open_state(&self) -> Result<Vec<StoredRecord>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT kind, tenant, key, value FROM spyglass_state ORDER BY kind, tenant, key",
                &[],
            )
            .await
            .map_err(|err| self.sql_error(&err))?;
        Ok(rows
            .iter()
            .map(|row| StoredRecord {
                kind: row.get(0),
                tenant: row.get(1),
                key: row.get(2),
                value: row.get(3),
            })
            .collect())
    }

    /// Takes the next entry of a stateful mock of `total` entries: `Some(index)` (from 0)
    /// served to this call alone, `None` when all are taken.
    pub async fn claim(
        &self,
        tenant: &str,
        session: &str,
        tool: &str,
        total: u32,
    ) -> Result<Option<u32>, StoreError> {
        if total == 0 {
            return Ok(None);
        }
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        // The row lock `ON CONFLICT DO UPDATE` takes makes the claims of one entry queue
        // up; each re-reads `consumed` after the one before it commits.
        let take = client
            .prepare_cached(
                "INSERT INTO spyglass_claims (tenant, session, tool, consumed)
                 VALUES ($1, $2, $3, 1)
                 ON CONFLICT (tenant, session, tool) DO UPDATE
                 SET consumed = spyglass_claims.consumed + 1
                 WHERE spyglass_claims.consumed < $4::bigint
                 RETURNING consumed",
            )
            .await
            .map_err(sql)?;
        let row = client
            .query_opt(&take, &[&tenant, &session, &tool, &i64::from(total)])
            .await
            .map_err(sql)?;
        Ok(row.and_then(|row| u32::try_from(row.get::<_, i64>(0) - 1).ok()))
    }

    /// Each tool's entries taken in a session.
    pub async fn claimed(
        &self,
        tenant: &str,
        session: &str,
    ) -> Result<Vec<(String, u32)>, StoreError> {
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        let read = client
            .prepare_cached(
                "SELECT tool, consumed FROM spyglass_claims
                 WHERE tenant = $1 AND session = $2 ORDER BY tool",
            )
            .await
            .map_err(sql)?;
        Ok(client
            .query(&read, &[&tenant, &session])
            .await
            .map_err(sql)?
            .iter()
            .map(|row| {
                let consumed: i64 = row.get(1);
                (row.get(0), u32::try_from(consumed).unwrap_or(u32::MAX))
            })
            .collect())
    }

    /// Decides an approval once for every replica: the first decision before
    /// `expires_at_ms` (Unix ms, judged by the database's clock) wins.
    pub async fn decide(
        &self,
        tenant: &str,
        approval: &str,
        decision: &str,
        expires_at_ms: i64,
    ) -> Result<Decided, StoreError> {
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        // A concurrent insert of the same key makes this one wait for its commit, then
        // do nothing: the read after it sees the winner.
        let insert = client
            .prepare_cached(
                "INSERT INTO spyglass_decisions (tenant, approval, decision, decided_at)
                 SELECT $1, $2, $3, now()
                 WHERE $4::bigint > (extract(epoch FROM now()) * 1000)::bigint
                 ON CONFLICT (tenant, approval) DO NOTHING
                 RETURNING decision",
            )
            .await
            .map_err(sql)?;
        if client
            .query_opt(&insert, &[&tenant, &approval, &decision, &expires_at_ms])
            .await
            .map_err(sql)?
            .is_some()
        {
            return Ok(Decided::Won);
        }
        let read = client
            .prepare_cached(
                "SELECT decision FROM spyglass_decisions WHERE tenant = $1 AND approval = $2",
            )
            .await
            .map_err(sql)?;
        Ok(
            match client
                .query_opt(&read, &[&tenant, &approval])
                .await
                .map_err(sql)?
            {
                Some(row) => Decided::Already(row.get(0)),
                None => Decided::Expired,
            },
        )
    }

    /// Up to `limit` of a tenant's events with seq over `after`, in seq order, with the
    /// replica that wrote each.
    pub async fn events_after(
        &self,
        tenant: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(StoredEvent, String)>, StoreError> {
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        let read = client
            .prepare_cached(
                "SELECT seq, text, origin FROM spyglass_events
                 WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            )
            .await
            .map_err(sql)?;
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(client
            .query(&read, &[&tenant, &after, &limit])
            .await
            .map_err(sql)?
            .iter()
            .map(|row| {
                (
                    StoredEvent {
                        tenant: tenant.to_owned(),
                        seq: to_u64(row.get(0)),
                        text: row.get(1),
                    },
                    row.get(2),
                )
            })
            .collect())
    }

    /// Each tenant's newest seq.
    pub async fn heads(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT tenant, next_seq - 1 FROM spyglass_streams ORDER BY tenant",
                &[],
            )
            .await
            .map_err(|err| self.sql_error(&err))?;
        Ok(rows
            .iter()
            .map(|row| (row.get(0), to_u64(row.get(1))))
            .collect())
    }

    /// One state document.
    pub async fn record(
        &self,
        kind: &str,
        tenant: &str,
        key: &str,
    ) -> Result<Option<StoredRecord>, StoreError> {
        let client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        let read = client
            .prepare_cached(
                "SELECT value FROM spyglass_state WHERE kind = $1 AND tenant = $2 AND key = $3",
            )
            .await
            .map_err(sql)?;
        Ok(client
            .query_opt(&read, &[&kind, &tenant, &key])
            .await
            .map_err(sql)?
            .map(|row| StoredRecord {
                kind: kind.to_owned(),
                tenant: tenant.to_owned(),
                key: key.to_owned(),
                value: row.get(0),
            }))
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

    /// `spyglass store status`.
    pub async fn status(&self) -> Result<SchemaStatus, StoreError> {
        let client = self.client().await?;
        schema_status(&**client, &self.shown)
            .await
            .map_err(|err| self.sql_error(&err))
    }

    /// A pooled connection, or an error saying why none came within `POOL_WAIT`.
    /// The writer thread's own connection (`OwnConnection`), with the commit statement
    /// prepared on it; the URL's timeouts and options as the pool's connections have them.
    fn open_own(&self) -> Result<OwnConnection, StoreError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| self.error(format!("cannot start the writer's runtime: {err}")))?;
        let client = rt.block_on(async {
            let (client, connection) = self.config.connect(NoTls).await.map_err(|err| {
                let reason = match connect_attempt(&err) {
                    Attempt::Wait(reason) => format!("database unreachable: {reason}"),
                    Attempt::Fail(reason) => reason,
                };
                self.error(reason)
            })?;
            // Polled whenever the writer waits on this runtime; ends with the connection.
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok::<_, StoreError>(client)
        })?;
        Ok(OwnConnection {
            rt: Some(rt),
            client,
            statements: HashMap::new(),
        })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
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

    fn error(&self, reason: String) -> StoreError {
        StoreError::Postgres {
            shown: self.shown.clone(),
            reason,
        }
    }

    fn sql_error(&self, err: &tokio_postgres::Error) -> StoreError {
        self.error(describe(err))
    }

    /// Creates or migrates the schema in one transaction, under the advisory lock so
    /// replicas starting together take turns; a newer schema is refused.
    async fn migrate(&self, client: &mut deadpool_postgres::Object) -> Result<(), StoreError> {
        let sql = |err| self.sql_error(&err);
        let tx = client.transaction().await.map_err(sql)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .await
            .map_err(sql)?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS spyglass_schema (version bigint NOT NULL)")
            .await
            .map_err(sql)?;
        let found: Option<i64> = tx
            .query_one("SELECT max(version) FROM spyglass_schema", &[])
            .await
            .map_err(sql)?
            .get(0);
        let found = found.unwrap_or(0);
        if found > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: self.shown.clone().into(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found == SCHEMA_VERSION {
            return Ok(());
        }
        for migration in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
            tx.batch_execute(migration).await.map_err(sql)?;
        }
        tx.execute("DELETE FROM spyglass_schema", &[])
            .await
            .map_err(sql)?;
        tx.execute(
            "INSERT INTO spyglass_schema (version) VALUES ($1)",
            &[&SCHEMA_VERSION],
        )
        .await
        .map_err(sql)?;
        tx.commit().await.map_err(sql)?;
        tracing::info!(db = %self.shown, from = found, to = SCHEMA_VERSION, "store schema migrated");
        Ok(())
    }

    /// Runs a store call from a sync caller: the writer thread (no runtime of its own)
    /// blocks on `connect`'s runtime; a caller inside a runtime hands it to a scoped
    /// thread, since blocking a worker on its own runtime would panic.
    fn block<T: Send>(&self, work: impl Future<Output = T> + Send) -> T {
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

    /// The events (already stamped), evictions and state of one batch, in `tx`.
    async fn write_batch(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        events: &[StoredEvent],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), tokio_postgres::Error> {
        if !events.is_empty() {
            let insert = tx
                .prepare_cached(
                    "INSERT INTO spyglass_events (tenant, seq, origin, text)
                     SELECT t, s, $3, x FROM unnest($1::text[], $2::bigint[], $4::text[]) AS e(t, s, x)
                     ON CONFLICT (tenant, seq) DO NOTHING",
                )
                .await?;
            let tenants: Vec<&str> = events.iter().map(|e| &*e.tenant).collect();
            let seqs: Vec<i64> = events.iter().map(|e| to_i64(e.seq)).collect();
            let texts: Vec<&str> = events.iter().map(|e| e.text.as_str()).collect();
            tx.execute(&insert, &[&tenants, &seqs, &self.replica, &texts])
                .await?;
        }
        if !evicted.is_empty() {
            let delete = tx
                .prepare_cached(
                    "DELETE FROM spyglass_events AS e
                     USING unnest($1::text[], $2::bigint[]) AS d(tenant, upto)
                     WHERE e.tenant = d.tenant AND e.seq <= d.upto",
                )
                .await?;
            let tenants: Vec<&str> = evicted.iter().map(|(t, _)| t.as_str()).collect();
            let upto: Vec<i64> = evicted.iter().map(|(_, s)| to_i64(*s)).collect();
            tx.execute(&delete, &[&tenants, &upto]).await?;
        }
        // Each document's last write only, so one statement of puts and one of deletes
        // touch each row once, in key order.
        let writes = last_writes(state);
        let columns = |put: bool| {
            let mut cols: [Vec<&str>; 4] = Default::default();
            for write in &writes {
                if let (StateWrite::Put(r), true) | (StateWrite::Delete(r), false) = (write, put) {
                    cols[0].push(&r.kind);
                    cols[1].push(&r.tenant);
                    cols[2].push(&r.key);
                    cols[3].push(&r.value);
                }
            }
            cols
        };
        let [kinds, tenants, keys, values] = columns(true);
        if !kinds.is_empty() {
            let put = tx
                .prepare_cached(
                    "INSERT INTO spyglass_state (kind, tenant, key, value)
                     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
                     ON CONFLICT (kind, tenant, key) DO UPDATE SET value = excluded.value",
                )
                .await?;
            tx.execute(&put, &[&kinds, &tenants, &keys, &values])
                .await?;
        }
        let [kinds, tenants, keys, _] = columns(false);
        if !kinds.is_empty() {
            let delete = tx
                .prepare_cached(
                    "DELETE FROM spyglass_state AS s
                     USING unnest($1::text[], $2::text[], $3::text[]) AS d(kind, tenant, key)
                     WHERE s.kind = d.kind AND s.tenant = d.tenant AND s.key = d.key",
                )
                .await?;
            tx.execute(&delete, &[&kinds, &tenants, &keys]).await?;
        }
        Ok(())
    }

    /// `append_stamping` on the runtime, in two round trips: `BEGIN` with the seqs, then
    /// every write with `COMMIT`, each pipelined (sent together, answered in order). The
    /// commit's latency is what the answers waiting on it wait: one round trip a
    /// statement made it six.
    async fn stamp_and_write(
        &self,
        events: &[Arc<Logged>],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<Vec<u64>, StoreError> {
        if events.is_empty() && evicted.is_empty() && state.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        self.commit_on(Via::Pooled(&client), events, evicted, state)
            .await
    }

    /// One batch's commit (`commit_sql`) on `via`: the events' seqs, in order.
    async fn commit_on(
        &self,
        via: Via<'_>,
        events: &[Arc<Logged>],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<Vec<u64>, StoreError> {
        let sql = |err| self.sql_error(&err);
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for event in events {
            *counts.entry(&*event.tenant).or_default() += 1;
        }
        let tenants: Vec<&str> = counts.keys().copied().collect();
        let ns: Vec<i64> = counts.values().copied().collect();
        // Each event's distance back from its tenant's next seq after the commit.
        let mut backs = Vec::with_capacity(events.len());
        let mut heads = Vec::with_capacity(events.len());
        let mut tails: Vec<Option<String>> = Vec::with_capacity(events.len());
        for event in events {
            let left = counts.get_mut(&*event.tenant).map_or(0, |n| {
                let left = *n;
                *n -= 1;
                left
            });
            backs.push(left);
            let (mut text, at) = spyglass_protocol::encode_around_seq(&event.frame);
            tails.push(at.map(|at| {
                let tail = text.get(at + 1..).unwrap_or_default().to_owned();
                text.truncate(at);
                tail
            }));
            heads.push(text);
        }
        let event_tenants: Vec<&str> = events.iter().map(|e| &*e.tenant).collect();
        let evicted_tenants: Vec<&str> = evicted.iter().map(|(t, _)| t.as_str()).collect();
        let evicted_upto: Vec<i64> = evicted.iter().map(|(_, s)| to_i64(*s)).collect();
        // Where each tenant's last eviction this store made ended: its events up to there
        // are gone (they committed before it evicted them, and so did every seq before).
        let evicted_after: Vec<i64> = {
            let done = self
                .evicted_upto
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            evicted
                .iter()
                .map(|(t, upto)| to_i64(done.get(t).copied().unwrap_or(0).min(*upto)))
                .collect()
        };
        // Each document's last write only, so the puts and the deletes touch each row
        // once, in key order.
        let writes = last_writes(state);
        let mut puts: [Vec<&str>; 4] = Default::default();
        let mut deletes: [Vec<&str>; 3] = Default::default();
        for write in &writes {
            match write {
                StateWrite::Put(r) => {
                    puts[0].push(&r.kind);
                    puts[1].push(&r.tenant);
                    puts[2].push(&r.key);
                    puts[3].push(&r.value);
                }
                StateWrite::Delete(r) => {
                    deletes[0].push(&r.kind);
                    deletes[1].push(&r.tenant);
                    deletes[2].push(&r.key);
                }
            }
        }
        let parts = Parts {
            events: !events.is_empty(),
            evict: !evicted.is_empty(),
            put: !puts[0].is_empty(),
            delete: !deletes[0].is_empty(),
        };
        let notify = parts.events && self.notify_now();
        let mut params: Vec<Param<'_>> = Vec::with_capacity(18);
        if parts.events {
            params.extend::<[Param<'_>; 9]>([
                &tenants,
                &ns,
                &self.replica,
                &event_tenants,
                &backs,
                &heads,
                &tails,
                &notify,
                &CHANNEL,
            ]);
        }
        if parts.evict {
            params.extend::<[Param<'_>; 3]>([&evicted_tenants, &evicted_after, &evicted_upto]);
        }
        if parts.put {
            params.extend::<[Param<'_>; 4]>([&puts[0], &puts[1], &puts[2], &puts[3]]);
        }
        if parts.delete {
            params.extend::<[Param<'_>; 3]>([&deletes[0], &deletes[1], &deletes[2]]);
        }
        let (client, statement) = match via {
            // Prepared once per connection (cached): no round trip after its first batch.
            Via::Pooled(client) => {
                let statement = client
                    .prepare_cached(&commit_sql(parts))
                    .await
                    .map_err(sql)?;
                (&***client, statement)
            }
            Via::Own(client, statements) => {
                let statement = if let Some(statement) = statements.get(&parts) {
                    statement.clone()
                } else {
                    let statement = client.prepare(&commit_sql(parts)).await.map_err(sql)?;
                    statements.insert(parts, statement.clone());
                    statement
                };
                (client, statement)
            }
        };
        let rows = client.query(&statement, &params).await.map_err(sql)?;
        if parts.evict {
            let mut done = self
                .evicted_upto
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (tenant, upto) in evicted {
                let end = done.entry(tenant.clone()).or_default();
                *end = (*end).max(*upto);
            }
        }
        let mut next: BTreeMap<&str, i64> = BTreeMap::new();
        for row in &rows {
            let tenant: &str = row.get(0);
            let after: i64 = row.get(1);
            if let Some(&name) = tenants.iter().find(|t| **t == tenant) {
                next.insert(name, after);
            }
        }
        let mut seqs = Vec::with_capacity(events.len());
        for (event, back) in events.iter().zip(&backs) {
            let Some(after) = next.get(&*event.tenant) else {
                return Err(self.error(format!(
                    "the database gave no seq for tenant {}",
                    event.tenant
                )));
            };
            seqs.push(to_u64(after - back));
        }
        Ok(seqs)
    }

    /// `append` (events stamped by the caller) on the runtime.
    async fn write_stamped(
        &self,
        events: &[StoredEvent],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), StoreError> {
        if events.is_empty() && evicted.is_empty() && state.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let sql = |err| self.sql_error(&err);
        let tx = client.transaction().await.map_err(sql)?;
        let mut newest: BTreeMap<&str, i64> = BTreeMap::new();
        for event in events {
            let seq = to_i64(event.seq);
            let upto = newest.entry(&*event.tenant).or_insert(seq);
            *upto = (*upto).max(seq);
        }
        let next = tx
            .prepare_cached(
                "INSERT INTO spyglass_streams (tenant, next_seq) VALUES ($1, $2::bigint + 1)
                 ON CONFLICT (tenant) DO UPDATE
                 SET next_seq = GREATEST(spyglass_streams.next_seq, excluded.next_seq)",
            )
            .await
            .map_err(sql)?;
        for (tenant, seq) in &newest {
            tx.execute(&next, &[tenant, seq]).await.map_err(sql)?;
        }
        self.write_batch(&tx, events, evicted, state)
            .await
            .map_err(sql)?;
        tx.commit().await.map_err(sql)
    }
}

impl Store for PgStore {
    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn stream(&self, fresh_epoch: &str, retained: usize) -> Result<StoredStream, StoreError> {
        self.block(self.open_stream(fresh_epoch, retained))
    }

    fn append(
        &self,
        events: &[StoredEvent],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), StoreError> {
        self.block(self.write_stamped(events, evicted, state))
    }

    fn state(&self) -> Result<Vec<StoredRecord>, StoreError> {
        self.block(self.open_state())
    }

    fn stamps(&self) -> bool {
        true
    }

    fn append_stamping(
        &self,
        events: &[Arc<Logged>],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<Vec<u64>, StoreError> {
        if tokio::runtime::Handle::try_current().is_ok() {
            // Not the writer thread (a caller inside a runtime): a pooled connection.
            return self.block(self.stamp_and_write(events, evicted, state));
        }
        if events.is_empty() && evicted.is_empty() && state.is_empty() {
            return Ok(Vec::new());
        }
        let mut own = self
            .own
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if own.is_none() {
            *own = Some(self.open_own()?);
        }
        let Some(OwnConnection {
            rt: Some(rt),
            client,
            statements,
        }) = own.as_mut()
        else {
            return Err(self.error("the writer's connection is gone".to_owned()));
        };
        let result =
            rt.block_on(self.commit_on(Via::Own(client, statements), events, evicted, state));
        if result.is_err() && client.is_closed() {
            // Made again at the next commit (the writer retries what failed).
            *own = None;
        }
        result
    }
}

/// The writer thread's own connection, driven on that thread by a one-thread runtime of
/// its own: a commit's round trip wakes no other thread (through the pool, the request
/// went to the connection's task on a worker and its answer came back to the writer,
/// two thread wake-ups a round trip).
struct OwnConnection {
    /// Always `Some` until dropped.
    rt: Option<tokio::runtime::Runtime>,
    client: tokio_postgres::Client,
    /// Each statement `commit_sql` made, prepared on `client`.
    statements: HashMap<Parts, tokio_postgres::Statement>,
}

/// The connection a commit runs on.
enum Via<'a> {
    Pooled(&'a deadpool_postgres::Object),
    Own(
        &'a tokio_postgres::Client,
        &'a mut HashMap<Parts, tokio_postgres::Statement>,
    ),
}

impl Drop for OwnConnection {
    fn drop(&mut self) {
        // The store may go last on a worker of another runtime, where dropping a runtime
        // the plain way panics.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// The last write to each document, in key order: the batch's outcome is the same (a
/// later write to a key replaces an earlier one), and two replicas' commits lock the
/// rows they share in one order, so neither waits on the other in a cycle.
fn last_writes(state: &[StateWrite]) -> Vec<&StateWrite> {
    let mut last: BTreeMap<(&str, &str, &str), &StateWrite> = BTreeMap::new();
    for write in state {
        let (StateWrite::Put(r) | StateWrite::Delete(r)) = write;
        last.insert((&r.kind, &r.tenant, &r.key), write);
    }
    last.into_values().collect()
}

/// A `LISTEN` connection: the client (dropping it closes the connection) and the task
/// forwarding its notifications to `tx`, which ends when the connection does.
async fn listening(
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

/// The schema version and counts, creating nothing.
async fn schema_status(
    client: &impl GenericClient,
    shown: &str,
) -> Result<SchemaStatus, tokio_postgres::Error> {
    let exists: bool = client
        .query_one("SELECT to_regclass('spyglass_schema') IS NOT NULL", &[])
        .await?
        .get(0);
    let version: Option<i64> = if exists {
        client
            .query_one("SELECT max(version) FROM spyglass_schema", &[])
            .await?
            .get(0)
    } else {
        None
    };
    let (mut events, mut sessions) = (0, 0);
    // A newer schema's tables may not read as this version's.
    if version.is_some_and(|v| (1..=SCHEMA_VERSION).contains(&v)) {
        events = client
            .query_one("SELECT count(*) FROM spyglass_events", &[])
            .await?
            .get(0);
        sessions = client
            .query_one(
                "SELECT count(*) FROM spyglass_state WHERE kind = $1",
                &[&SESSION_KIND],
            )
            .await?
            .get(0);
    }
    Ok(SchemaStatus {
        shown: shown.to_owned(),
        version,
        supported: SCHEMA_VERSION,
        events,
        sessions,
    })
}

/// What a store URL looks like, for the messages refusing one.
const FORM: &str = "give postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE";

/// The URL parsed (as `tokio_postgres::Config` reads it) and as shown: no password.
fn parse(url: &str) -> Result<(Config, String), StoreError> {
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
const STATEMENT_TIMEOUT: &str = "-c statement_timeout=10000";

/// Whether `url` is one this store can connect with (scheme, syntax, no TLS asked), and
/// if not, why: for a command to refuse it as bad input before trying.
pub fn check_url(url: &str) -> Result<(), StoreError> {
    parse(url).map(|_| ())
}

/// Whether `text` is a store URL for this engine (`postgres://` or `postgresql://`).
pub fn is_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// `url` without its password, in the userinfo or a `password=` parameter: how the
/// store is named in every message and status line.
pub fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            format!("{user}@{host}")
        }
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|pair| !pair.to_ascii_lowercase().starts_with("password="))
                .collect();
            if kept.is_empty() {
                path.to_owned()
            } else {
                format!("{path}?{}", kept.join("&"))
            }
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// What a failed `pool.get()` at start means: wait or fail.
fn attempt(err: &PoolError) -> Attempt {
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
fn connect_attempt(err: &tokio_postgres::Error) -> Attempt {
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
fn describe(err: &tokio_postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    match std::error::Error::source(err) {
        Some(cause) => format!("{err}: {cause}"),
        None => err.to_string(),
    }
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shown_url_has_no_password() {
        assert_eq!(
            shown_url("postgres://u:secret@db.example:5433/spy?sslmode=disable"),
            "postgres://u@db.example:5433/spy?sslmode=disable"
        );
        assert_eq!(
            shown_url("postgresql://u@h/d?password=secret&application_name=x"),
            "postgresql://u@h/d?application_name=x"
        );
        assert_eq!(
            shown_url("postgres://h/d?password=secret"),
            "postgres://h/d"
        );
        assert_eq!(shown_url("postgres://u:p@h"), "postgres://u@h");
    }

    #[test]
    fn a_batch_writes_each_document_once_as_its_last_write_says() {
        let doc = |key: &str, value: &str| StoredRecord {
            kind: "session".into(),
            tenant: "t".into(),
            key: key.into(),
            value: value.into(),
        };
        let state = [
            StateWrite::Put(doc("b", "1")),
            StateWrite::Put(doc("a", "1")),
            StateWrite::Delete(doc("b", "")),
            StateWrite::Put(doc("a", "2")),
        ];
        assert_eq!(
            last_writes(&state),
            vec![
                &StateWrite::Put(doc("a", "2")),
                &StateWrite::Delete(doc("b", ""))
            ]
        );
    }

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
