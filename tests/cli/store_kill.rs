//! `kill -9` of a real `spyglass serve --store F` in the middle of 64-way concurrent
//! consumption of a stateful mock, then a restart on the same file: every answer sent
//! before the kill is in the store (counter, `tool.called`, seq), and each entry is
//! served exactly once over both runtimes.

use crate::support::cli::{Served, consume_entries, kill_mid_consumption, spyglass, start_serve};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

const ENTRIES: usize = 600;
const WORKERS: usize = 64;
const TOOL: &str = "asaas/next_charge";

async fn serve(store: &Path, data: &Path) -> (Served, String) {
    let (server, url, _) = serve_with(Some(store), data).await;
    (server, url)
}

/// `serve` on `store`, else on its default; the URL and the line that announced it.
async fn serve_with(store: Option<&Path>, data: &Path) -> (Served, String, String) {
    let mut command = spyglass(&["serve", "--test-mode", "--addr", "127.0.0.1:0"]);
    if let Some(store) = store {
        command.arg("--store").arg(store);
    }
    command.env("XDG_DATA_HOME", data);
    start_serve(command).await
}

#[tokio::test]
async fn serve_keeps_its_state_in_the_data_dir_by_default() {
    let data = tempfile::tempdir().unwrap();
    let (mut server, url, line) = serve_with(None, data.path()).await;
    let file = data.path().join("spyglass/runtime.db");
    assert!(
        line.contains(&format!("store {}", file.display())),
        "{line}"
    );
    let created: Value = reqwest::Client::new()
        .post(format!("{url}/v1/sessions"))
        .json(&json!({"servers": [], "user_id": "kept", "mocks": {}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    assert!(file.exists());
    let (_server, url, _) = serve_with(None, data.path()).await;
    let detail: Value = reqwest::get(format!("{url}/v1/sessions/{id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(detail["user_id"], "kept", "{detail}");
}

async fn consume(url: &str, session: &str, served: &Arc<Mutex<Vec<u64>>>) {
    consume_entries(url, session, TOOL, WORKERS, served).await;
}

/// The entries the runtime's `tool.called` events say were served, with their seqs.
async fn served_by_events(url: &str, session: &str) -> Vec<(u64, u64)> {
    let page: Value = reqwest::get(format!("{url}/v1/events?since=0&limit=5000"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool.called" && e["sessionId"] == session)
        .filter_map(|e| Some((e["outcome"]["result"]["n"].as_u64()?, e["seq"].as_u64()?)))
        .collect()
}

async fn consumed(url: &str, session: &str) -> u64 {
    let detail: Value = reqwest::get(format!("{url}/v1/sessions/{session}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    detail["mocks"][0]["counter"]["consumed"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_consumption_loses_no_answered_call_and_serves_no_entry_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runtime.db");
    let (mut server, url) = serve(&store, dir.path()).await;
    let (session, answered) = kill_mid_consumption(&mut server, &url, TOOL, ENTRIES, WORKERS).await;

    let (_server, url) = serve(&store, dir.path()).await;
    let stored = served_by_events(&url, &session).await;
    let stored_entries: BTreeSet<u64> = stored.iter().map(|(n, _)| *n).collect();
    assert_eq!(stored_entries.len(), stored.len(), "no entry in two events");
    for n in &answered {
        assert!(
            stored_entries.contains(n),
            "entry {n} was answered 200 before the kill but is not in the store"
        );
    }
    let seqs: BTreeSet<u64> = stored.iter().map(|(_, seq)| *seq).collect();
    assert_eq!(
        seqs.len(),
        stored.len(),
        "every stored call has its own seq"
    );
    assert_eq!(
        consumed(&url, &session).await,
        stored.len() as u64,
        "the counter matches the stored calls"
    );

    let after = Arc::new(Mutex::new(Vec::new()));
    consume(&url, &session, &after).await;
    let after: Vec<u64> = after.lock().unwrap().clone();
    println!(
        "answered before the kill: {}, stored: {}, served after the restart: {}",
        answered.len(),
        stored.len(),
        after.len()
    );
    let mut overall: Vec<u64> = stored_entries.iter().copied().chain(after).collect();
    overall.sort_unstable();
    assert_eq!(
        overall,
        (0..ENTRIES as u64).collect::<Vec<_>>(),
        "each entry served exactly once over both runtimes"
    );
    assert_eq!(consumed(&url, &session).await, ENTRIES as u64);
}

/// Polls `GET path` until `done` holds for its body (10 s at most).
async fn poll_until(url: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let body: Value = reqwest::get(format!("{url}{path}"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if done(&body) {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{path} never got there: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn kill_9_mid_eval_run_keeps_its_finished_cases_and_closes_the_case_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runtime.db");
    let (mut server, url) = serve(&store, dir.path()).await;
    let quick = |id: &str| {
        json!({"id": id, "input": "x", "model": {"sequence": [{"text": "done"}]},
               "assert": {"contains": "done"}})
    };
    let suite = json!({
        "suite": "killed",
        "cases": [quick("first"), quick("second"),
                  {"id": "waits", "input": "x",
                   "model": {"sequence": [{"text": "late", "delay_ms": 60_000}]},
                   "assert": {"contains": "late"}}]
    });
    let created: Value = reqwest::Client::new()
        .post(format!("{url}/v1/evals/runs"))
        .json(&json!({"suites": [suite]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run = created["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    // Two cases finished, the third's session open and waiting on its model.
    poll_until(&url, &format!("/v1/evals/runs/{run}"), |d| {
        d["cases"].as_array().is_some_and(|c| c.len() == 2)
    })
    .await;
    let open = |sessions: &Value| {
        sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["user_id"] == "spyglass-eval" && s["status"] == "active")
            .count()
    };
    poll_until(&url, "/v1/sessions", |s| open(s) == 1).await;
    // And stored: the stream shows only what the store's journal has written.
    poll_until(&url, "/v1/events?since=0", |page| {
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "session.created")
            .count()
            == 3
    })
    .await;
    server.0.kill().unwrap();
    server.0.wait().unwrap();

    let (_server, url) = serve(&store, dir.path()).await;
    let detail: Value = reqwest::get(format!("{url}/v1/evals/runs/{run}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(detail["status"], "interrupted", "{detail}");
    let cases: Vec<&str> = detail["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["case"].as_str().unwrap())
        .collect();
    assert_eq!(cases, ["first", "second"], "{detail}");
    assert_eq!(detail["passed"], 2, "{detail}");
    let sessions: Value = reqwest::get(format!("{url}/v1/sessions"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let eval_sessions: Vec<&Value> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["user_id"] == "spyglass-eval")
        .collect();
    assert_eq!(eval_sessions.len(), 3, "{sessions}");
    assert_eq!(
        open(&sessions),
        0,
        "the case in flight is closed: {sessions}"
    );
}
