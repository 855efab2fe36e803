//! The runtime on a store: commits that fail and the answers waiting on them, evictions,
//! aged sessions, a Postgres choice refused. Compiled only under `#[cfg(test)]` (`open.rs`).

use super::*;
use crate::store::{StateWrite, StoredEvent, StoredRecord, StoredStream};
use std::path::PathBuf;

#[test]
fn a_postgres_choice_is_opened_by_open_and_refused_by_runtime_without_its_password() {
    for url in ["postgres://u:pw@h:5432/d", "postgresql://u:pw@h/d"] {
        let Err(err) = StoreChoice::parse(url).runtime(RuntimeConfig::default()) else {
            panic!("a Postgres runtime is opened by `open`, not `runtime`");
        };
        assert!(err.to_string().contains("not available"), "{err}");
        assert!(!err.to_string().contains("pw"), "{err}");
    }
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
    let clock = crate::Clock::manual();
    let config = RuntimeConfig {
        test_mode: true,
        retain_closed_sessions: std::time::Duration::from_mins(1),
        clock: clock.clone(),
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
    clock.advance(std::time::Duration::from_mins(2)).unwrap();
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
    let body: spyglass_protocol::rest::CreateSession = serde_json::from_value(serde_json::json!({
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
