//! A runtime on a `SQLite` store behind its journal: what answers were told coming back from
//! the journal alone, segments going and moving. Compiled only under `#[cfg(test)]` (`open.rs`).

use super::{open_runtime, runtime_journaled};
use crate::store::journal::{Journal, JournaledStore, decode, segment_path, segments};
use crate::store::{
    SqliteStore, StateWrite, Store, StoreError, StoredEvent, StoredRecord, StoredStream,
};
use crate::{ExecuteReply, Runtime, RuntimeConfig};
use serde_json::json;
use spyglass_protocol::rest::CreateSession;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A database that takes nothing: every commit fails, so only the journal keeps what
/// the answers were told (a runtime killed before its writer committed).
struct NeverCommits(SqliteStore);

impl Store for NeverCommits {
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn stream(&self, fresh_epoch: &str, retained: usize) -> Result<StoredStream, StoreError> {
        self.0.stream(fresh_epoch, retained)
    }
    fn append(
        &self,
        _: &[StoredEvent],
        _: &[(String, u64)],
        _: &[StateWrite],
    ) -> Result<(), StoreError> {
        Err(StoreError::Journal {
            path: PathBuf::from("never"),
            reason: "this test's database takes nothing".into(),
        })
    }
    fn state(&self) -> Result<Vec<StoredRecord>, StoreError> {
        self.0.state()
    }
}

impl JournaledStore for NeverCommits {
    fn append_journaled(
        &self,
        events: &[StoredEvent],
        _: &[(String, u64)],
        evicted: &[(String, u64)],
        state: &[StateWrite],
    ) -> Result<(), StoreError> {
        self.append(events, evicted, state)
    }
}

/// What the session's next call of `pay/charge` is served.
async fn served(rt: &Runtime, id: &str) -> serde_json::Value {
    match rt
        .execute("default", id, "pay/charge", json!({}).into())
        .await
        .unwrap()
    {
        ExecuteReply::Ok(result) => serde_json::to_value(&result.data).unwrap(),
        ExecuteReply::Envelope(envelope) => panic!("{envelope:?}"),
    }
}

fn config() -> RuntimeConfig {
    RuntimeConfig {
        test_mode: true,
        ..RuntimeConfig::default()
    }
}

/// A session with a stateful mock of three entries, two of them consumed by answered
/// calls, on a runtime whose database never commits; the runtime is then gone. With
/// `documented`, the calls' counters were written after them (as every
/// `COMMIT_EVERY`); without, only their events were (as a `kill -9` right after).
async fn answered_but_never_committed(db: &Path, documented: bool) -> String {
    let sqlite = SqliteStore::open(db).unwrap();
    let journal = Journal::recover(db, &sqlite).unwrap();
    let rt = runtime_journaled(config(), Arc::new(NeverCommits(sqlite)), journal).unwrap();
    let body: CreateSession = serde_json::from_value(json!({
        "user_id": "u",
        "mocks": {"pay/charge": [{"n": 1}, {"n": 2}, {"n": 3}]}
    }))
    .unwrap();
    let id = rt.create_session("default", body).unwrap().id;
    rt.committed().await.unwrap();
    for _ in 0..2 {
        rt.execute("default", &id, "pay/charge", json!({}).into())
            .await
            .unwrap();
    }
    if documented {
        rt.write_moved_counters();
        rt.committed().await.unwrap();
    }
    drop(rt);
    id
}

/// Reopens the store at `db`, waiting while the last runtime's writer lets go of it.
fn reopen(db: &Path) -> Runtime {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match open_runtime(config(), db) {
            Ok(rt) => return rt,
            Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(err) => panic!("{err}"),
        }
    }
}

#[tokio::test]
async fn what_answers_were_told_comes_back_from_the_journal_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.db");
    let id = answered_but_never_committed(&db, false).await;
    let before: Vec<u64> = segments(&db).unwrap().iter().map(|(n, _)| *n).collect();
    assert!(
        segments(&db)
            .unwrap()
            .iter()
            .any(|(_, p)| std::fs::metadata(p).unwrap().len() > 0),
        "the journal holds the calls"
    );
    let rt = reopen(&db);
    assert!(rt.session("default", &id).is_ok(), "the session is back");
    let calls: Vec<_> = rt
        .events_since(0, usize::MAX)
        .into_iter()
        .filter(|f| matches!(f.event, spyglass_protocol::Event::ToolCalled(_)))
        .map(|f| f.seq)
        .collect();
    assert_eq!(calls, vec![2, 3], "both calls, with their seqs");
    // The third entry is the next served: neither of the first two twice.
    assert_eq!(served(&rt, &id).await, json!({"n": 3}));
    // Replayed into the database at open, the segments went.
    let after: Vec<u64> = segments(&db).unwrap().iter().map(|(n, _)| *n).collect();
    assert!(
        after.iter().all(|n| !before.contains(n)),
        "{before:?} then {after:?}"
    );
}

#[tokio::test]
async fn a_torn_last_record_is_left_out_and_the_rest_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.db");
    let id = answered_but_never_committed(&db, true).await;
    let (_, path) = segments(&db).unwrap().pop().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let whole = decode(&bytes);
    assert_eq!(whole.dropped, 0);
    // The last record is the second call's counters document: cut it short, as a
    // power cut in the middle of its write would.
    std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
    let torn = decode(&std::fs::read(&path).unwrap());
    assert_eq!(torn.writes.len() + 1, whole.writes.len());
    assert_eq!(torn.events, whole.events);
    assert!(torn.dropped > 0);
    let rt = reopen(&db);
    // The second call's event is whole: the counters roll forward from it.
    assert_eq!(served(&rt, &id).await, json!({"n": 3}));
}

/// A runtime on a `SQLite` store at `db` whose journal closes segments at 2 KiB and
/// keeps `keep_closed` of them, with a session of 200 stateful entries, 150 served.
async fn a_hundred_and_fifty_calls(
    db: &Path,
    config: RuntimeConfig,
    keep_closed: usize,
) -> (Runtime, String) {
    let sqlite = SqliteStore::open(db).unwrap();
    let journal = Journal::recover_with(db, &sqlite, 2048, keep_closed).unwrap();
    let rt = runtime_journaled(config, Arc::new(sqlite), journal).unwrap();
    let body: CreateSession = serde_json::from_value(json!({
        "user_id": "u",
        "mocks": {"pay/charge": (1..=200).map(|n| json!({"n": n})).collect::<Vec<_>>()}
    }))
    .unwrap();
    let id = rt.create_session("default", body).unwrap().id;
    for _ in 0..150 {
        rt.execute("default", &id, "pay/charge", json!({}).into())
            .await
            .unwrap();
    }
    (rt, id)
}

fn numbers(db: &Path) -> Vec<u64> {
    segments(db).unwrap().iter().map(|(n, _)| *n).collect()
}

fn calls(rt: &Runtime) -> usize {
    rt.events_since(0, usize::MAX)
        .iter()
        .filter(|f| matches!(f.event, spyglass_protocol::Event::ToolCalled(_)))
        .count()
}

#[tokio::test]
async fn counters_are_written_before_the_log_forgets_a_call_they_do_not_count() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.db");
    // 64 events: moved counters are due after 8 calls; this session makes one.
    let small = RuntimeConfig {
        retained_events: 64,
        ..config()
    };
    let sqlite = SqliteStore::open(&db).unwrap();
    let journal = Journal::recover(&db, &sqlite).unwrap();
    let rt = runtime_journaled(small, Arc::new(sqlite), journal).unwrap();
    let session = |mocks: serde_json::Value| {
        let body: CreateSession =
            serde_json::from_value(json!({"user_id": "u", "mocks": mocks})).unwrap();
        rt.create_session("default", body).unwrap().id
    };
    let id = session(json!({"pay/charge": [{"n": 1}, {"n": 2}, {"n": 3}]}));
    let other = session(json!({"pay/charge": {"ok": true}}));
    assert_eq!(served(&rt, &id).await, json!({"n": 1}));
    // Other events push the call's event out of the log, then another session calls.
    for _ in 0..80 {
        rt.emit(
            None,
            spyglass_protocol::Event::SessionClosed(
                spyglass_protocol::events::SessionClosed::default(),
            ),
        );
    }
    assert_eq!(served(&rt, &other).await, json!({"ok": true}));
    // Gone without a flush: the reopened log holds no event of the first call, so
    // only its counters document says its entry was served.
    drop(rt);
    let rt = reopen(&db);
    assert!(
        !rt.events_since(0, usize::MAX).iter().any(|f| {
            f.session_id.as_deref() == Some(id.as_str())
                && matches!(f.event, spyglass_protocol::Event::ToolCalled(_))
        }),
        "the call's event left the log"
    );
    assert_eq!(served(&rt, &id).await, json!({"n": 2}));
}

#[tokio::test]
async fn a_segment_goes_once_the_rings_hold_none_of_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.db");
    let small = RuntimeConfig {
        retained_events: 20,
        ..config()
    };
    let (rt, id) = a_hundred_and_fifty_calls(&db, small, usize::MAX).await;
    rt.flush_store();
    let kept = numbers(&db);
    assert!(
        *kept.last().unwrap() > 12,
        "segments of 2 KiB rotate: {kept:?}"
    );
    assert!(
        kept.len() <= 12,
        "segments of evicted events went, those of the 20 retained stay: {kept:?}"
    );
    drop(rt);
    let rt = reopen(&db);
    assert_eq!(rt.stats().retained, 20);
    assert_eq!(served(&rt, &id).await, json!({"n": 151}));
}

#[tokio::test]
async fn past_the_bound_the_oldest_segments_events_move_to_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.db");
    let (rt, id) = a_hundred_and_fifty_calls(&db, config(), 2).await;
    rt.flush_store();
    let kept = numbers(&db);
    assert!(kept.len() <= 3, "two closed and the one written: {kept:?}");
    drop(rt);
    // A clean close moves the rest: the database alone has every event.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let closed = loop {
        match SqliteStore::open(&db) {
            Ok(store) => break store,
            Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(err) => panic!("{err}"),
        }
    };
    let stored = closed.stream("unused", usize::MAX).unwrap().events;
    assert_eq!(
        stored
            .iter()
            .filter(|e| e.text.contains("\"tool.called\""))
            .count(),
        150
    );
    drop(closed);
    assert!(
        segments(&db)
            .unwrap()
            .iter()
            .all(|(_, p)| std::fs::metadata(p).map_or(0, |m| m.len()) == 0),
        "{:?}",
        numbers(&db)
    );
    let rt = reopen(&db);
    assert_eq!(calls(&rt), 150);
    assert_eq!(served(&rt, &id).await, json!({"n": 151}));
}

#[tokio::test]
async fn a_segment_that_cannot_be_read_back_stays_for_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.db");
    let (rt, id) = a_hundred_and_fifty_calls(&db, config(), usize::MAX).await;
    rt.flush_store();
    // The oldest closed segment cannot be read at the close (a directory in its
    // place): it must not be deleted, nor the segment being written emptied.
    let oldest = segment_path(&db, numbers(&db)[0]);
    let aside = dir.path().join("aside");
    std::fs::rename(&oldest, &aside).unwrap();
    std::fs::create_dir(&oldest).unwrap();
    drop(rt);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while let Err(StoreError::Locked { .. }) = SqliteStore::open(&db) {
        assert!(std::time::Instant::now() < deadline, "never closed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::remove_dir(&oldest).unwrap();
    std::fs::rename(&aside, &oldest).unwrap();
    let rt = reopen(&db);
    assert_eq!(calls(&rt), 150);
    assert_eq!(served(&rt, &id).await, json!({"n": 151}));
}

#[test]
fn a_segment_that_cannot_be_read_at_open_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.db");
    std::fs::create_dir(segment_path(&db, 3)).unwrap();
    let Err(err) = open_runtime(config(), &db) else {
        panic!("a journal it cannot read is not a fresh start");
    };
    let message = err.to_string();
    assert!(message.contains("runtime.db-redo-3"), "{message}");
    assert!(message.contains("--store"), "says what to do: {message}");
}
