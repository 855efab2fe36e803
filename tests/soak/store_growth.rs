//! The store's file over many sessions created, called and closed: retention by count
//! (closed sessions) and by events drops them from the file too, and freed pages are
//! reused, so the closed store holds only the retained data; the write-ahead log is cut
//! back at each checkpoint, and the journal's segments are deleted once their events left
//! the rings, so both stay bounded while it runs.
//!
//! `SPYGLASS_SOAK_SESSIONS=1000000` runs the million of docs/PERFORMANCE.md.

use serde_json::json;
use spyglass::protocol::rest::CreateSession;
use spyglass::runtime::RuntimeConfig;
use spyglass::store::journal::SEGMENT_BYTES;
use spyglass::store::sqlite::WAL_SIZE_LIMIT;
use std::path::Path;

/// The database, its write-ahead log and the store's journal segments.
fn store_bytes(path: &Path) -> (u64, u64, u64) {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let name = path.file_name().unwrap().to_str().unwrap();
    let journal: u64 = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&format!("{name}-redo-")))
        })
        .map(|e| size(&e.path()))
        .sum();
    (size(path), size(Path::new(&wal)), journal)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_plateaus_over_sessions_created_and_closed() {
    let _process = crate::PROCESS.read().await;
    let total: usize = std::env::var("SPYGLASS_SOAK_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let config = RuntimeConfig {
        test_mode: true,
        retained_events: 2_000,
        max_sessions_per_tenant: 200,
        ..RuntimeConfig::default()
    };
    let rt = spyglass::store::open_runtime(config, &path).unwrap();
    let started = std::time::Instant::now();
    let (mut databases, mut logs, mut journals) = (Vec::new(), Vec::new(), Vec::new());
    for n in 1..=total {
        let id = rt
            .create_session(
                "default",
                CreateSession {
                    user_id: format!("user-{n}"),
                    mocks: Some(json!({"pay/charge": {"id": format!("ch_{n}"), "ok": true}})),
                    ..CreateSession::default()
                },
            )
            .unwrap()
            .id;
        rt.execute("default", &id, "pay/charge", json!({"amount": n}).into())
            .await
            .unwrap();
        rt.close_session("default", &id).unwrap();
        if n % (total / 8) == 0 {
            rt.flush_store();
            let (db, wal, journal) = store_bytes(&path);
            println!(
                "store growth: {n} sessions, database {db} B, log {wal} B, journal {journal} B, {:.1} s",
                started.elapsed().as_secs_f64()
            );
            databases.push(db);
            logs.push(wal);
            journals.push(journal);
        }
    }
    // Each part is bounded whatever the count of sessions: the log by its cut-back at
    // each checkpoint (its size is the largest a run of commits between two made it; a
    // loaded machine commits bigger batches), the journal by deleting a segment once its
    // events left the rings. The database only grows at checkpoints, so it is judged
    // after a clean close, when all that is retained is in it.
    let bound = 2 * WAL_SIZE_LIMIT.unsigned_abs();
    assert!(
        logs.iter().all(|s| *s <= bound),
        "the write-ahead log passed {bound} B: {logs:?}"
    );
    // The journal: the segment being written, and at most one more not yet deleted.
    let bound = 2 * SEGMENT_BYTES;
    assert!(
        journals.iter().all(|s| *s <= bound),
        "the journal passed {bound} B: {journals:?}"
    );
    for ((db, wal), journal) in databases.iter().zip(&logs).zip(&journals) {
        let total = db + wal + journal;
        assert!(
            total < 16 * 1024 * 1024,
            "200 sessions and 2,000 events take {total} B"
        );
    }
    drop(rt);
    // Closed, the database holds what was retained: 200 closed sessions' documents and
    // 2,000 events (about 0.75 MB); every session's would be ten times that.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while let Err(spyglass::store::StoreError::Locked { .. }) =
        spyglass::store::SqliteStore::open(&path)
    {
        assert!(std::time::Instant::now() < deadline, "never closed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (db, wal, journal) = store_bytes(&path);
    println!("store growth: closed, database {db} B, log {wal} B, journal {journal} B");
    assert_eq!(
        journal, 0,
        "a clean close moves the journal into the database"
    );
    assert!(
        db + wal < 3 * 1024 * 1024,
        "the closed store takes {} B",
        db + wal
    );
}
