//! Two real `spyglass serve --store postgres://…` replicas on one database; `kill -9` of
//! one in the middle of 64-way consumption of a stateful mock: an observer of the other
//! has every call answered before the kill, once, in one seq order, and the survivor goes
//! on serving the entries no call took, never one twice.

use crate::support::cli::{Served, consume_entries, kill_mid_consumption, spyglass, start_serve};
use crate::support::postgres::fresh_database;
use futures_util::StreamExt;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

const ENTRIES: usize = 400;
const WORKERS: usize = 64;
const TOOL: &str = "asaas/next_charge";

/// `serve` on the database; the replica and its URL.
async fn replica(database: &str) -> (Served, String) {
    let (child, url, _) = start_serve(spyglass(&[
        "serve",
        "--test-mode",
        "--addr",
        "127.0.0.1:0",
        "--store",
        database,
    ]))
    .await;
    (child, url)
}

async fn consume(url: &str, session: &str, served: &Arc<Mutex<Vec<u64>>>) {
    consume_entries(url, session, TOOL, WORKERS, served).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_one_replica_loses_nothing_answered_and_the_other_goes_on() {
    let database = fresh_database("replica_kill");
    let (mut a, url_a) = replica(&database).await;
    let (_b, url_b) = replica(&database).await;
    // An observer of B, from the start, collecting every frame.
    let observe = format!("{}/v1/observe?since=0", url_b.replacen("http", "ws", 1));
    let (mut ws, _) = tokio_tungstenite::connect_async(observe).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let reader = {
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = ws.next().await {
                if let Message::Text(text) = message {
                    seen.lock()
                        .unwrap()
                        .push(serde_json::from_str(&text).unwrap());
                }
            }
        })
    };
    let (session, answered) = kill_mid_consumption(&mut a, &url_a, TOOL, ENTRIES, WORKERS).await;
    let answered: BTreeSet<u64> = answered.into_iter().collect();

    // Every answered call reaches B's observer, once.
    let called = |frames: &[Value]| -> Vec<u64> {
        frames
            .iter()
            .filter(|f| f["kind"] == "tool.called" && f["sessionId"] == session.as_str())
            .filter_map(|f| f["outcome"]["result"]["n"].as_u64())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let have: BTreeSet<u64> = called(&seen.lock().unwrap()).into_iter().collect();
        if answered.is_subset(&have) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "answered before the kill but never seen on the other replica: {:?}",
            answered.difference(&have).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The survivor serves the rest.
    let after = Arc::new(Mutex::new(Vec::new()));
    consume(&url_b, &session, &after).await;
    let after: Vec<u64> = after.lock().unwrap().clone();
    tokio::time::sleep(Duration::from_millis(300)).await;
    reader.abort();
    let frames = seen.lock().unwrap().clone();
    let seqs: Vec<u64> = frames.iter().filter_map(|f| f["seq"].as_u64()).collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "one stream: every seq once, in order"
    );
    let stored = called(&frames);
    let distinct: BTreeSet<u64> = stored.iter().copied().collect();
    assert_eq!(distinct.len(), stored.len(), "no entry served twice");
    for n in &after {
        assert!(
            !answered.contains(n),
            "entry {n} served before the kill and after"
        );
    }
    println!(
        "answered before the kill: {}, in the stream: {}, served by the survivor: {}",
        answered.len(),
        stored.len(),
        after.len()
    );
    assert!(
        !after.is_empty(),
        "the survivor went on serving: {} of {ENTRIES} taken before",
        stored.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_waits_for_an_unreachable_database_saying_so_then_serves() {
    // A cluster made but not started: its port refuses connections for now.
    let mut cluster = crate::support::postgres::Cluster::init();
    let url = cluster.url("postgres");
    let mut child = Served(
        spyglass(&[
            "serve",
            "--test-mode",
            "--addr",
            "127.0.0.1:0",
            "--store",
            &url,
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let stderr = child.0.stderr.take().unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // Its log goes to stderr too: the line said to the operator is the one asserted.
    let waiting = loop {
        let line = next_line(&mut rx).await;
        if line.starts_with("spyglass runtime:") {
            break line;
        }
    };
    assert!(
        waiting.starts_with(
            "spyglass runtime: waiting for the store at postgres://spyglass@127.0.0.1:"
        ),
        "{waiting}"
    );
    assert!(waiting.contains("refused"), "says why: {waiting}");
    cluster.start();
    let serving = loop {
        let line = next_line(&mut rx).await;
        if line.starts_with("spyglass runtime on") {
            break line;
        }
    };
    assert!(
        serving.contains("spyglass runtime on http://127.0.0.1:"),
        "{serving}"
    );
    assert!(serving.contains("pool 16"), "{serving}");
    let at = serving.find("http://").unwrap();
    let url = serving[at..].split_whitespace().next().unwrap();
    let health: Value = reqwest::get(format!("{url}/health"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["store"]["state"], "ok", "{health}");
    drop(child);
}

/// The next line `serve` wrote to stderr (20 s at most).
async fn next_line(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .ok()
        .flatten()
        .expect("serve said nothing more")
}
