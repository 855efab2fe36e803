//! The durable store behind the runtime: one `Store` trait (what a runtime keeps across a
//! restart) and its engines: `sqlite` (one runtime's file) and `postgres` (one database
//! shared by several runtimes, which also decides seqs, mock claims and approvals).
//!
//! What is kept: the event log's stream (its epoch, every retained event with its tenant
//! and per-tenant seq, each tenant's next seq) and the runtime's state as documents
//! (`runtime::persist`: sessions and their counters, approvals, eval runs, suite
//! documents, eval outcomes). A reopened store continues the stream and the state.
//! The store knows rows, not the runtime: a runtime is built on a store by `runtime::open`.

pub mod journal;
pub mod postgres;
pub mod sqlite;

pub use sqlite::SqliteStore;

use std::path::PathBuf;
use thiserror::Error;

/// Everything that can go wrong opening or writing a store; every message names the file
/// and says what to do.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error(
        "store {path} is not a spyglass store or is damaged ({source}); move it aside to start a new one, or pass --store memory"
    )]
    Corrupt {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "store {path} has schema version {found}, newer than this spyglass knows ({supported}); run a newer spyglass, or pass another --store"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error(
        "store {path} holds less than it last held ({holds}; {held} recorded in {record} at {at}): its write-ahead log ({path}-wal) was lost or damaged, or an older copy was put back. Restore the file with its -wal from where it was, or start with --accept-store-loss to go on from what it holds"
    )]
    Shrunk {
        path: PathBuf,
        record: PathBuf,
        held: String,
        holds: String,
        at: String,
    },
    #[error(
        "store {path} is in use by another spyglass runtime; stop that one, point this one at it with --url, or pass another --store (or --store memory)"
    )]
    Locked { path: PathBuf },
    #[error(
        "store {path} cannot be written: {reason}; make the file and its directory writable, or pass another --store (or --store memory)"
    )]
    ReadOnly { path: PathBuf, reason: String },
    #[error(
        "store {path} cannot be written: the disk is full; free space on that disk, or pass another --store (or --store memory)"
    )]
    Full { path: PathBuf },
    #[error("cannot open store {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("cannot create the directory of store {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the writer of store {path}: {source}")]
    Thread {
        path: String,
        source: std::io::Error,
    },
    #[error("store {shown}: {reason}")]
    Postgres { shown: String, reason: String },
    #[error(
        "cannot read or write the journal of store {path}: {reason}; check the disk and the directory's permissions, or pass another --store (or --store memory)"
    )]
    Journal { path: PathBuf, reason: String },
    #[error("store {path}: {source}")]
    Write {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

/// One stored event: the tenant whose stream shows it, its seq in that tenant and its
/// wire text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub tenant: String,
    pub seq: u64,
    pub text: String,
}

/// The stream a store holds: its epoch, each tenant's next seq and the events, in the
/// order they were stamped.
#[derive(Debug, Clone, Default)]
pub struct StoredStream {
    pub epoch: String,
    /// Each tenant's seq after its newest stored; a tenant missing starts at 1.
    pub next_seqs: Vec<(String, u64)>,
    pub events: Vec<StoredEvent>,
}

/// One document of the runtime's state: a session, its counters, an approval, an eval
/// run, a suite document, an eval outcome (`kind`), JSON text in `value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    pub kind: String,
    pub tenant: String,
    pub key: String,
    pub value: String,
}

/// A change to the state, committed with the events of the same batch, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateWrite {
    Put(StoredRecord),
    /// Only `kind`, `tenant` and `key` matter.
    Delete(StoredRecord),
}

/// What a runtime keeps across a restart, as every engine keeps it. Writes come from one
/// writer thread, grouped; reads happen at open. Another engine implements this and
/// nothing else changes. What only one engine does is its own: `SQLite` behind its journal
/// commits through `journal::JournaledStore`, Postgres stamps seqs itself
/// (`postgres::PgStore::append_stamping`).
pub trait Store: Send + Sync + 'static {
    /// Where it lives, for messages.
    fn describe(&self) -> String;
    /// The stream as stored, creating its epoch (`fresh_epoch`) on first use; at most
    /// `retained` newest events (older ones, left by a write that failed, are dropped).
    fn stream(&self, fresh_epoch: &str, retained: usize) -> Result<StoredStream, StoreError>;
    /// Writes a batch in one transaction: the events in stamping order (each tenant's
    /// next seq with them), and for each `(tenant, seq)` of `evicted` that event and the
    /// tenant's older ones dropped, so the store holds what the log's rings hold.
    /// ... and `state`'s puts and deletes, in the same transaction.
    fn append(
        &self,
        events: &[StoredEvent],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), StoreError>;
    /// Every state document, read at open.
    fn state(&self) -> Result<Vec<StoredRecord>, StoreError>;
    /// A clean stop, after the last append: what the engine keeps beside its main file is
    /// folded into it, so the file alone holds everything. Nothing to do by default.
    fn close(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Where `--store` says the runtime keeps its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// Today's behaviour: nothing survives the process.
    Memory,
    File(PathBuf),
    /// A database shared by replicas: the URL as given (password and all).
    Postgres(String),
}

impl StoreChoice {
    /// `memory`, a `postgres://` (or `postgresql://`) URL, or a path.
    pub fn parse(text: &str) -> StoreChoice {
        if text == "memory" {
            StoreChoice::Memory
        } else if postgres::is_url(text) {
            StoreChoice::Postgres(text.to_owned())
        } else {
            StoreChoice::File(PathBuf::from(text))
        }
    }

    /// Where it is, for messages: a URL without its password.
    pub fn shown(&self) -> String {
        match self {
            StoreChoice::Memory => "memory".to_owned(),
            StoreChoice::File(path) => path.display().to_string(),
            StoreChoice::Postgres(url) => postgres::shown_url(url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_url_is_a_postgres_store_shown_without_its_password() {
        for url in ["postgres://u:pw@h:5432/d", "postgresql://u:pw@h/d"] {
            let choice = StoreChoice::parse(url);
            assert_eq!(choice, StoreChoice::Postgres(url.to_owned()));
            assert!(!choice.shown().contains("pw"), "{}", choice.shown());
        }
        assert_eq!(
            StoreChoice::parse("postgres.db"),
            StoreChoice::File(PathBuf::from("postgres.db"))
        );
    }
}
