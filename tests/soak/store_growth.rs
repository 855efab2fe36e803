//! The store's file over many sessions created, called and closed: retention by count
//! (closed sessions) and by events drops them from the file too, and freed pages are
//! reused, so the file stops growing once the retained data reached its size.
//!
//! `SPYGLASS_SOAK_SESSIONS=1000000` runs the million of docs/PERFORMANCE.md.

use serde_json::json;
use spyglass::protocol::rest::CreateSession;
use spyglass::runtime::RuntimeConfig;
use std::path::Path;

/// The database and its write-ahead log together.
fn store_bytes(path: &Path) -> (u64, u64) {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    (size(path), size(Path::new(&wal)))
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
    let mut sizes = Vec::new();
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
            let (db, wal) = store_bytes(&path);
            println!(
                "store growth: {n} sessions, database {db} B, log {wal} B, {:.1} s",
                started.elapsed().as_secs_f64()
            );
            sizes.push(db + wal);
        }
    }
    // By half-way the retained data is at its size (sooner on a quiet machine; a loaded
    // one commits bigger batches, so the write-ahead log takes longer to reach its own):
    // from there the file may move by what page fill does, never grow with the sessions,
    // which would double it by the end.
    let half = sizes.len() / 2;
    let settled = sizes[half];
    let last = *sizes.last().unwrap();
    assert!(
        sizes[half..].iter().all(|s| *s <= settled + settled / 10),
        "the file kept growing: {sizes:?}"
    );
    assert!(
        last < 16 * 1024 * 1024,
        "200 sessions and 2,000 events take {last} B"
    );
    drop(rt);
}
