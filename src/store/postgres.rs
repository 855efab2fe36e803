//! The Postgres store: one database shared by any number of runtimes (replicas). Besides
//! what every store keeps, it decides what must be one truth across them: seqs, mock claims, approval decisions.
//!
//! Tables (schema version 1, `spyglass_schema` holds the version):
//! - `spyglass_meta(key text primary key, value text)`: `epoch`.
//! - `spyglass_streams(tenant text primary key, next_seq bigint)`: each tenant's next seq.
//!   A commit takes its seqs with `UPDATE … RETURNING` on the tenant's row, so the row is
//!   locked until the commit: across replicas a tenant's seq order is its commit order,
//!   and a follower reading `seq > n` never skips one that commits later.
//! - `spyglass_events(tenant text, seq bigint, origin text, text text, primary key (tenant, seq))`:
//!   `origin` names the replica that wrote it.
//! - `spyglass_state(kind text, tenant text, key text, value text, primary key (kind, tenant, key))`.
//! - `spyglass_claims(tenant text, session text, tool text, consumed bigint, primary key (tenant, session, tool))`:
//!   the stateful mock entries served.
//! - `spyglass_decisions(tenant text, approval text, decision text, decided_at timestamptz, primary key (tenant, approval))`.
//!
//! Every commit that writes events sends `NOTIFY spyglass_events, '<tenant>'` once per tenant.

use super::{StateWrite, Store, StoreError, StoredEvent, StoredRecord, StoredStream};
use crate::runtime::log::Logged;
use std::sync::Arc;

/// The schema version this spyglass writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// The channel every commit with events notifies, its payload the tenant.
pub const CHANNEL: &str = "spyglass_events";

/// How the pool is sized and how long start waits for the database.
#[derive(Debug, Clone)]
pub struct PgSettings {
    /// Connections the pool holds at most (`--store-pool`).
    pub pool_size: usize,
    /// This runtime's name in `spyglass_events.origin` (a fresh random one per process).
    pub replica: String,
}

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
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("db", &self.shown)
            .finish_non_exhaustive()
    }
}

fn not_built(shown: &str) -> StoreError {
    StoreError::Postgres {
        shown: shown.to_owned(),
        reason: "the Postgres store is not built yet".to_owned(),
    }
}

// The bodies come with the connection pool; the signatures are what the runtime uses.
#[allow(clippy::unused_async)]
impl PgStore {
    /// Connects (waiting while the database is unreachable, `on_wait` told each retry's
    /// reason), creates or migrates the schema, refuses a newer one.
    pub async fn connect(
        url: &str,
        settings: PgSettings,
        on_wait: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<PgStore, StoreError> {
        let _ = (settings.pool_size, on_wait);
        let _ = PgStore {
            shown: url.to_owned(),
            replica: settings.replica,
        };
        Err(not_built(url))
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
        let _ = (fresh_epoch, retained);
        Err(not_built(&self.shown))
    }

    /// Every state document (like `Store::state`).
    pub async fn open_state(&self) -> Result<Vec<StoredRecord>, StoreError> {
        Err(not_built(&self.shown))
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
        let _ = (tenant, session, tool, total);
        Err(not_built(&self.shown))
    }

    /// Each tool's entries taken in a session.
    pub async fn claimed(
        &self,
        tenant: &str,
        session: &str,
    ) -> Result<Vec<(String, u32)>, StoreError> {
        let _ = (tenant, session);
        Err(not_built(&self.shown))
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
        let _ = (tenant, approval, decision, expires_at_ms);
        Err(not_built(&self.shown))
    }

    /// Up to `limit` of a tenant's events with seq over `after`, in seq order, with the
    /// replica that wrote each.
    pub async fn events_after(
        &self,
        tenant: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(StoredEvent, String)>, StoreError> {
        let _ = (tenant, after, limit);
        Err(not_built(&self.shown))
    }

    /// Each tenant's newest seq.
    pub async fn heads(&self) -> Result<Vec<(String, u64)>, StoreError> {
        Err(not_built(&self.shown))
    }

    /// One state document.
    pub async fn record(
        &self,
        kind: &str,
        tenant: &str,
        key: &str,
    ) -> Result<Option<StoredRecord>, StoreError> {
        let _ = (kind, tenant, key);
        Err(not_built(&self.shown))
    }

    /// The tenants named by `NOTIFY spyglass_events` from now on, on a connection of its
    /// own (reconnecting when it drops: a `None` tenant then means "look at every one").
    pub async fn listen(
        &self,
    ) -> Result<tokio::sync::mpsc::UnboundedReceiver<Option<String>>, StoreError> {
        Err(not_built(&self.shown))
    }

    /// `spyglass store status`.
    pub async fn status(&self) -> Result<SchemaStatus, StoreError> {
        Err(not_built(&self.shown))
    }
}

impl Store for PgStore {
    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn stream(&self, _fresh_epoch: &str, _retained: usize) -> Result<StoredStream, StoreError> {
        Err(not_built(&self.shown))
    }

    fn append(
        &self,
        _events: &[StoredEvent],
        _evicted: &[(String, u64)],
        _state: &[StateWrite],
    ) -> Result<(), StoreError> {
        Err(not_built(&self.shown))
    }

    fn state(&self) -> Result<Vec<StoredRecord>, StoreError> {
        Err(not_built(&self.shown))
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
        let _ = (events, evicted, state);
        Err(not_built(&self.shown))
    }
}
