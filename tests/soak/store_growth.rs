//! The store's file over many sessions created, called and closed: retention by count
//! (closed sessions) and by events drops them from the file too, and freed pages are
//! reused, so the database stops growing once the retained data reached its size; the
//! write-ahead log is cut back at each checkpoint, and the journal's segments are deleted
//! once committed, so both stay bounded.
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
    // By half-way the retained data is at its size (sooner on a quiet machine): from
    // there the database may move by what page fill does, never grow with the sessions,
    // which would double it by the end. The log's size is the largest a run of commits
    // between two checkpoints made it (a loaded machine commits bigger batches), cut
    // back at each checkpoint: bounded, whatever the count of sessions.
    let half = databases.len() / 2;
    let settled = databases[half];
    assert!(
        databases[half..]
            .iter()
            .all(|s| *s <= settled + settled / 10),
        "the database kept growing: {databases:?}"
    );
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
    let last = databases.last().unwrap() + logs.last().unwrap() + journals.last().unwrap();
    assert!(
        last < 16 * 1024 * 1024,
        "200 sessions and 2,000 events take {last} B"
    );
    drop(rt);
}
