//! The durable store behind the runtime: one `Store` trait (what a runtime keeps across a
//! restart) and its engines: `sqlite` (one runtime's file) and `postgres` (one database
//! shared by several runtimes, which also decides seqs, mock claims and approvals).
//!
//! What is kept: the event log's stream (its epoch, every retained event with its tenant
//! and per-tenant seq, each tenant's next seq) and the runtime's state as documents
//! (`runtime::persist`: sessions and their counters, approvals, eval runs, suite
//! documents, eval outcomes). A reopened store continues the stream and the state.

pub mod journal;
pub mod postgres;
pub mod sqlite;

pub use sqlite::SqliteStore;

use crate::log::{EventLog, Logged, StoreWriter};
use crate::{Runtime, RuntimeConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;
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

/// What a runtime keeps across a restart. Writes come from one writer thread, grouped;
/// reads happen at open. Another engine implements this and nothing else changes.
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
    /// `append` for a store behind a journal (`journal`), which keeps the events the rings
    /// hold: `events` are only those it moved here, and `next_seqs` says where each
    /// tenant's seqs stand though the rest of its events are not here.
    fn append_journaled(
        &self,
        events: &[StoredEvent],
        next_seqs: &[(String, u64)],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), StoreError> {
        let _ = next_seqs;
        self.append(events, evicted, state)
    }
    /// Whether the store gives events their seqs itself (a store shared by several
    /// runtimes): the log then sends its events unstamped to `append_stamping`.
    fn stamps(&self) -> bool {
        false
    }
    /// `append` for a store that stamps: each event's seq is taken from the store in the
    /// same transaction (its tenant's next, in the order given) and its text encoded with
    /// it. Returns the seqs, in the order of `events`.
    fn append_stamping(
        &self,
        events: &[Arc<Logged>],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<Vec<u64>, StoreError> {
        let _ = (events, evicted, state);
        Err(StoreError::Postgres {
            shown: self.describe(),
            reason: "this store does not stamp events".to_owned(),
        })
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

    /// The runtime this choice makes: in memory, or continuing the store's stream. A
    /// Postgres store is opened by `open` (it connects, and may wait for the database).
    pub fn runtime(&self, config: RuntimeConfig) -> Result<Runtime, StoreError> {
        match self {
            StoreChoice::Memory => Ok(Runtime::new(config)),
            StoreChoice::File(path) => open_runtime(config, path),
            StoreChoice::Postgres(_) => Err(StoreError::Postgres {
                shown: self.shown(),
                reason: "a Postgres store is not available here; keep a SQLite file or memory, or point this at a runtime on Postgres with --url".to_owned(),
            }),
        }
    }

    /// `runtime`, and for a Postgres store a replica on it (`runtime::open_shared`) with a
    /// pool of `pool` connections, waiting while the database is unreachable (`on_wait`
    /// told why at each retry).
    pub async fn open(
        &self,
        config: RuntimeConfig,
        pool: usize,
        on_wait: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Runtime, StoreError> {
        let StoreChoice::Postgres(url) = self else {
            return self.runtime(config);
        };
        let settings = postgres::PgSettings {
            pool_size: pool,
            replica: format!("{}_{:08x}", std::process::id(), fastrand::u32(..)),
        };
        let store = postgres::PgStore::connect(url, settings, on_wait).await?;
        crate::open_shared(config, Arc::new(store)).await
    }
}

/// Opens (or creates) the `SQLite` store at `path` and a runtime continuing its stream.
/// What the journal holds past the database is replayed into it first (`journal`), and
/// the runtime's answers then wait for the journal, not for `SQLite`.
pub fn open_runtime(config: RuntimeConfig, path: &Path) -> Result<Runtime, StoreError> {
    let sqlite = SqliteStore::open(path)?;
    let journal = journal::Journal::recover(path, &sqlite)?;
    runtime_with(config, Arc::new(sqlite), Some(journal))
}

/// A runtime whose event log continues `store`'s stream and writes every new event to it
/// (each answer waits for the commit holding what it did).
pub fn runtime_on(config: RuntimeConfig, store: Arc<dyn Store>) -> Result<Runtime, StoreError> {
    runtime_with(config, store, None)
}

/// `runtime_on`, with answers waiting for `journal` when there is one.
pub(crate) fn runtime_with(
    config: RuntimeConfig,
    store: Arc<dyn Store>,
    journal: Option<Arc<journal::Journal>>,
) -> Result<Runtime, StoreError> {
    let retained = config.retained_events.max(1);
    let stream = store.stream(&crate::log::new_epoch(), retained)?;
    let restored: Vec<Logged> = stream
        .events
        .into_iter()
        .filter_map(|e| Logged::restore(&e.text, e.tenant))
        .collect();
    let state = store.state()?;
    let path = store.describe();
    let writer = match &journal {
        Some(journal) => StoreWriter::spawn_journaled(store, Arc::clone(journal)),
        None => StoreWriter::spawn(store),
    }
    .map_err(|source| StoreError::Thread { path, source })?;
    // The writer is in place before the history goes back, so what the capacity or the
    // byte budget evicts on the way in leaves the file too.
    let runtime = Runtime::with_log(config, move |config, budget| {
        let log = EventLog::new(config.retained_events, config.subscriber_queue, budget)
            .continuing(stream.epoch, stream.next_seqs)
            .with_writer(writer);
        match journal {
            Some(journal) => log.with_journal(journal),
            None => log,
        }
        .with_history(restored)
    });
    runtime.restore_state(state);
    if let Some(before_commit) = runtime.inner.log.before_commit() {
        // Held weakly: the writer thread must not keep the runtime alive.
        let weak = Arc::downgrade(&runtime.inner);
        let _ = before_commit.set(Box::new(move || {
            if let Some(inner) = weak.upgrade() {
                crate::Runtime { inner }.write_moved_counters();
            }
        }));
    }
    Ok(runtime)
}

impl Runtime {
    /// Waits until every event so far is committed to the store (a clean shutdown, a
    /// test that reopens the file). Without a store it returns at once.
    pub fn flush_store(&self) {
        self.write_moved_counters();
        self.inner.log.flush();
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
            let Err(err) = choice.runtime(RuntimeConfig::default()) else {
                panic!("a Postgres runtime is opened by `open`, not `runtime`");
            };
            assert!(err.to_string().contains("not available"), "{err}");
            assert!(!err.to_string().contains("pw"), "{err}");
        }
        assert_eq!(
            StoreChoice::parse("postgres.db"),
            StoreChoice::File(PathBuf::from("postgres.db"))
        );
    }

    /// An engine whose first `fails` writes fail (a full or read-only disk) and the rest
    /// succeed, holding what it was given.
    #[derive(Default)]
    struct Failing {
        fails: u32,
        calls: std::sync::Mutex<u32>,
        kept: std::sync::Mutex<Vec<StoredEvent>>,
    }

    impl Failing {
        fn first(fails: u32) -> Failing {
            Failing {
                fails,
                ..Failing::default()
            }
        }
    }

    impl Store for Failing {
        fn describe(&self) -> String {
            "failing".into()
        }
        fn stream(&self, fresh_epoch: &str, _: usize) -> Result<StoredStream, StoreError> {
            Ok(StoredStream {
                epoch: fresh_epoch.to_owned(),
                ..StoredStream::default()
            })
        }
        fn append(
            &self,
            events: &[StoredEvent],
            _: &[(String, u64)],
            _: &[StateWrite],
        ) -> Result<(), StoreError> {
            let mut calls = self.calls.lock().unwrap();
            *calls += 1;
            if *calls <= self.fails {
                return Err(StoreError::Full {
                    path: PathBuf::from("failing"),
                });
            }
            self.kept.lock().unwrap().extend_from_slice(events);
            Ok(())
        }
        fn state(&self) -> Result<Vec<StoredRecord>, StoreError> {
            Ok(Vec::new())
        }
    }

    /// A failed commit's writes go with the next one: an answer acknowledged after it
    /// (its acknowledgement alone in the next batch) is one whose writes are all kept.
    #[tokio::test]
    async fn writes_of_a_failed_commit_are_kept_by_the_next_before_any_answer_is() {
        let store = Arc::new(Failing::first(1));
        let rt = runtime_on(RuntimeConfig::default(), store.clone()).unwrap();
        rt.emit(
            None,
            spyglass_protocol::Event::SessionClosed(
                spyglass_protocol::events::SessionClosed::default(),
            ),
        );
        // The first commit (that event) fails; wait until it has.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while *store.calls.lock().unwrap() == 0 {
            assert!(std::time::Instant::now() < deadline, "never committed");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        rt.committed().await.unwrap();
        let kept = store.kept.lock().unwrap();
        assert_eq!(kept.len(), 1, "the event is kept before the answer goes");
        assert_eq!(kept[0].seq, 1);
    }

    /// Evicted events leave the file in ranges, not with every commit: at a flush, and
    /// on their own within `EVICT_EVERY` when the runtime goes quiet.
    #[tokio::test]
    async fn evicted_events_leave_the_file_at_a_flush_and_when_quiet() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("runtime.db")).unwrap());
        let config = RuntimeConfig {
            test_mode: true,
            retained_events: 5,
            ..RuntimeConfig::default()
        };
        let rt = runtime_on(config, store.clone()).unwrap();
        let create = || spyglass_protocol::rest::CreateSession {
            user_id: "u".into(),
            ..Default::default()
        };
        for _ in 0..20 {
            rt.create_session("default", create()).unwrap();
        }
        rt.flush_store();
        let stored = |store: &SqliteStore| store.stream("unused", 1000).unwrap().events.len();
        assert_eq!(stored(&store), 5, "a flush takes the evictions with it");
        for _ in 0..20 {
            rt.create_session("default", create()).unwrap();
        }
        rt.committed().await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while stored(&store) > 5 {
            assert!(
                std::time::Instant::now() < deadline,
                "evictions never reached the file"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Closed sessions past `retain_closed_sessions` go, oldest first, from memory and
    /// from the file; open ones stay however old.
    #[tokio::test]
    async fn closed_sessions_past_their_age_leave_memory_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runtime.db");
        let config = RuntimeConfig {
            test_mode: true,
            retain_closed_sessions: std::time::Duration::from_millis(300),
            ..RuntimeConfig::default()
        };
        let rt = open_runtime(config.clone(), &path).unwrap();
        let create = || spyglass_protocol::rest::CreateSession {
            user_id: "u".into(),
            ..Default::default()
        };
        let ids: Vec<String> = (0..3)
            .map(|_| rt.create_session("default", create()).unwrap().id)
            .collect();
        rt.close_session("default", &ids[0]).unwrap();
        rt.close_session("default", &ids[1]).unwrap();
        rt.evict_aged_sessions();
        assert!(
            rt.session("default", &ids[0]).is_ok(),
            "not yet past its age"
        );
        std::thread::sleep(std::time::Duration::from_millis(1100));
        rt.evict_aged_sessions();
        assert!(rt.session("default", &ids[0]).is_err());
        assert!(rt.session("default", &ids[1]).is_err());
        assert!(
            rt.session("default", &ids[2]).is_ok(),
            "open: kept however old"
        );
        rt.flush_store();
        drop(rt);
        let again = loop {
            // The writer thread closes the file once the runtime is gone.
            match open_runtime(config.clone(), &path) {
                Ok(rt) => break rt,
                Err(StoreError::Locked { .. }) => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(err) => panic!("{err}"),
            }
        };
        assert!(
            again.session("default", &ids[0]).is_err(),
            "gone from the file"
        );
        assert!(
            again.session("default", &ids[1]).is_err(),
            "gone from the file"
        );
        assert!(again.session("default", &ids[2]).is_ok());
    }

    #[tokio::test]
    async fn an_answer_whose_commit_failed_is_refused_not_acknowledged() {
        let config = RuntimeConfig {
            test_mode: true,
            ..RuntimeConfig::default()
        };
        let rt = runtime_on(config, Arc::new(Failing::first(u32::MAX))).unwrap();
        let body = spyglass_protocol::rest::CreateSession {
            user_id: "u".into(),
            mocks: Some(serde_json::json!({"a/b": {"ok": true}})),
            ..Default::default()
        };
        let session = rt.create_session("default", body).unwrap();
        let err = rt.committed().await.unwrap_err();
        assert_eq!(err.status, 503);
        assert_eq!(err.error.code, crate::STORE_UNAVAILABLE);
        let err = rt
            .execute(
                "default",
                &session.id,
                "a/b",
                spyglass_protocol::RawJson::from_value(&serde_json::json!({})),
            )
            .await
            .unwrap_err();
        assert_eq!(err.status, 503, "{err}");
        // A `send` streamed as SSE: the tool's result frame is refused the same way.
        let body: spyglass_protocol::rest::CreateSession =
            serde_json::from_value(serde_json::json!({
                "user_id": "u",
                "mocks": {"a/b": {"ok": true}},
                "model": {"sequence": [{"tool_calls": [{"name": "a/b"}]}, {"text": "done"}]}
            }))
            .unwrap();
        let agent = rt.create_session("default", body).unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        rt.run_agent("default", &agent.id, "go", Some(tx))
            .await
            .unwrap();
        let mut codes = Vec::new();
        while let Ok(frame) = rx.try_recv() {
            if let spyglass_protocol::rest::SendFrame::Error { error, .. } = frame {
                codes.push(error);
            }
        }
        assert!(
            codes.first().is_some_and(|c| c == crate::STORE_UNAVAILABLE),
            "{codes:?}"
        );
        // Memory: nothing to wait for.
        let memory = Runtime::new(RuntimeConfig::default());
        assert!(memory.committed().await.is_ok());
    }
}
