//! How `spyglass serve --store F` stops and starts again: SIGTERM is a clean stop (exit 0,
//! the database file holding everything, no write-ahead log left to lose), and a store
//! that comes back holding less than it last held is refused, naming the file.

use crate::support::cli::{Served, spyglass, start_serve, wait_exit};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

async fn serve(store: &Path) -> (Served, String) {
    let mut command = spyglass(&["serve", "--test-mode", "--addr", "127.0.0.1:0"]);
    command.arg("--store").arg(store);
    let (server, url, _) = start_serve(command).await;
    (server, url)
}

async fn create(url: &str, user: &str) -> String {
    let created: Value = reqwest::Client::new()
        .post(format!("{url}/v1/sessions"))
        .json(&json!({"servers": [], "user_id": user}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    created["id"].as_str().unwrap().to_owned()
}

fn signal(server: &Served, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_is_a_clean_stop_that_leaves_the_database_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runtime.db");
    let (mut server, url) = serve(&store).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(create(&url, &format!("u{i}")).await);
    }
    signal(&server, "TERM");
    let status = wait_exit(&mut server.0, Duration::from_secs(20));
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM ends serve cleanly: {status:?}"
    );
    // Everything is in the database file itself: the write-ahead log is folded in.
    let wal = dir.path().join("runtime.db-wal");
    assert!(
        std::fs::metadata(&wal).map_or(true, |m| m.len() == 0),
        "a -wal file of {} bytes was left",
        std::fs::metadata(&wal).map_or(0, |m| m.len())
    );
    let (_server, url) = serve(&store).await;
    for (i, id) in ids.iter().enumerate() {
        let detail: Value = reqwest::get(format!("{url}/v1/sessions/{id}"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(detail["user_id"], format!("u{i}"), "{detail}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_wal_was_lost_is_refused_naming_the_file_unless_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runtime.db");
    let (mut server, url) = serve(&store).await;
    for i in 0..20 {
        create(&url, &format!("u{i}")).await;
    }
    let held = dir.path().join("runtime.db.held");
    // The record is written at most once a second after commits: wait for one that
    // counts the 20 sessions (polled, with a deadline).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let seqs = std::fs::read_to_string(&held)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["seqs"].as_u64())
            .unwrap_or(0);
        if seqs >= 20 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no record of 20 events"
        );
        create(&url, "nudge").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let wal = dir.path().join("runtime.db-wal");
    assert!(wal.exists(), "kill -9 leaves the write-ahead log");
    std::fs::remove_file(&wal).unwrap();

    let mut refused = spyglass(&["serve", "--test-mode", "--addr", "127.0.0.1:0"]);
    let out = refused.arg("--store").arg(&store).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "store {} holds less than it last held",
            store.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("--accept-store-loss"), "{stderr}");
    assert!(stderr.contains("runtime.db-wal"), "{stderr}");

    let mut command = spyglass(&["serve", "--test-mode", "--addr", "127.0.0.1:0"]);
    command
        .arg("--store")
        .arg(&store)
        .arg("--accept-store-loss");
    let (mut accepted, url, _) = start_serve(command).await;
    create(&url, "after").await;
    signal(&accepted, "TERM");
    assert_eq!(
        wait_exit(&mut accepted.0, Duration::from_secs(20)).code(),
        Some(0)
    );
    // Accepted once, the store goes on: the next start needs no flag.
    let (_again, url) = serve(&store).await;
    let status = reqwest::get(format!("{url}/health"))
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 200);
}
