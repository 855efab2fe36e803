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
//!
//! Built with the `postgres` feature (on by default); without it only the URL helpers and
//! the shared types below are here, and a `postgres://` store is refused with what to do.
//! `pool`: connecting, the pool, `LISTEN`, URLs and driver errors; `schema`: creating and
//! migrating the tables, `store status`; `stream`: the events and documents, the writer's
//! one-statement commits; `claims`: the decisions taken once for every replica.

#[cfg(feature = "postgres")]
mod claims;
#[cfg(feature = "postgres")]
mod pool;
#[cfg(feature = "postgres")]
mod schema;
#[cfg(feature = "postgres")]
mod stream;

#[cfg(feature = "postgres")]
pub use pool::{PgStore, check_url};
use std::time::Duration;

/// A replica's commits notify at most this often; the followers woken read again every
/// `FOLLOW_EVERY` for `FOLLOW_HOT` (`runtime::shared`), so no commit waits longer unseen.
pub const NOTIFY_EVERY: Duration = Duration::from_millis(20);

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
}
