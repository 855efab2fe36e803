//! A runtime on a real `SQLite` store, restarted: sessions with their mocks and counters,
//! pending approvals (approved after the restart, replaying the original call), eval
//! runs, suite documents and pass-rate history come back and the seq goes on; stores of
//! schema versions 1 and 2 open and migrate.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{Runtime, RuntimeConfig, ServerHandle};
use std::path::Path;
use std::time::Duration;

fn config() -> RuntimeConfig {
    policy_config(
        "[[rule]]\nid = \"payments_need_approval\"\ntool = \"*/create_payment\"\naction = \"approval\"\n",
    )
}

async fn open(path: &Path) -> (Runtime, ServerHandle) {
    let rt = spyglass::store::open_runtime(config(), path).unwrap();
    let handle = rt.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    (rt, handle)
}

/// Stops serving and drops the runtime; no flush: every answer already waited for its
/// commit, which is what this checks.
async fn stop(rt: Runtime, handle: ServerHandle) {
    handle.shutdown().await;
    drop(rt);
}

fn mock_state<'a>(summary: &'a Value, tool: &str) -> &'a Value {
    summary["mocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool"] == tool)
        .unwrap_or_else(|| panic!("no mock {tool} in {summary}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_counters_and_a_pending_approval_come_back_and_the_approval_replays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let (rt, handle) = open(&path).await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({
                "servers": ["asaas"],
                "user_id": "kept_user",
                "metadata": {"team": "payments"},
                "mocks": {
                    "asaas/list_charges": [{"n": 1}, {"n": 2}, {"n": 3}],
                    "asaas/create_payment": [{"id": "pay_1"}, {"id": "pay_2"}],
                    "asaas/get_balance": {"balance": 10}
                }
            }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    for expected in [1, 2] {
        let (status, body) = api.execute(&id, "asaas/list_charges", json!({})).await;
        assert_eq!((status, &body["data"]["n"]), (200, &json!(expected)));
    }
    let (status, body) = api.execute(&id, "asaas/get_balance", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, held) = api
        .execute(&id, "asaas/create_payment", json!({"value": 5000}))
        .await;
    assert_eq!(status, 202, "{held}");
    let approval = held["approval_id"].as_str().unwrap().to_owned();
    let closed = api.session(json!({})).await;
    assert_eq!(api.delete(&format!("/v1/sessions/{closed}")).await.0, 204);
    let (_, before) = api.get(&format!("/v1/sessions/{id}")).await;
    let (_, events) = api.get("/v1/events?since=0").await;
    let newest = events["events"].as_array().unwrap().last().unwrap()["seq"]
        .as_u64()
        .unwrap();
    stop(rt, handle).await;

    let (rt, handle) = open(&path).await;
    let api = Api::new(&handle);
    let (status, after) = api.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, 200, "{after}");
    assert_eq!(
        after, before,
        "the session reads as it did before the restart"
    );
    assert_eq!(after["user_id"], "kept_user");
    assert_eq!(after["calls"].as_array().unwrap().len(), 4);
    assert_eq!(
        mock_state(&after, "asaas/list_charges")["counter"]["consumed"],
        json!(2)
    );
    let (_, list) = api.get("/v1/sessions").await;
    let statuses: Vec<(&str, &str)> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [(id.as_str(), "active"), (closed.as_str(), "closed")]
    );
    // The next stateful entry served is the next one, never one served before.
    let (status, body) = api.execute(&id, "asaas/list_charges", json!({})).await;
    assert_eq!((status, &body["data"]["n"]), (200, &json!(3)), "{body}");
    let (status, body) = api.execute(&id, "asaas/list_charges", json!({})).await;
    assert_eq!(
        (status, &body["code"]),
        (422, &json!("mocks_exhausted")),
        "{body}"
    );
    // The pending approval is still pending, and approving it replays the original call.
    let (_, pending) = api.get("/v1/approvals").await;
    assert_eq!(
        pending["approvals"][0]["id"],
        approval.as_str(),
        "{pending}"
    );
    assert_eq!(pending["approvals"][0]["input"], json!({"value": 5000}));
    let (status, decided) = api
        .post(&format!("/v1/approvals/{approval}/approve"), json!({}))
        .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["status"], "approved");
    assert_eq!(
        decided["replay"]["result"],
        json!({"id": "pay_1"}),
        "{decided}"
    );
    let (_, events) = api.get(&format!("/v1/events?since={newest}")).await;
    let seqs: Vec<u64> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs[0], newest + 1, "the seq goes on: {events}");
    // The replay moved the counter, and that too survives the next restart.
    stop(rt, handle).await;
    let (rt, handle) = open(&path).await;
    let api = Api::new(&handle);
    let (_, again) = api.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(
        mock_state(&again, "asaas/create_payment")["counter"]["consumed"],
        json!(1)
    );
    let (_, all) = api.get("/v1/approvals?status=all").await;
    assert_eq!(all["approvals"][0]["status"], "approved", "{all}");
    assert!(
        rt.budget_stats().session_bytes > 0,
        "restored sessions count against the budget"
    );
    stop(rt, handle).await;
}

fn suite() -> Value {
    json!({
        "suite": "confirm",
        "defaults": {"mocks": {"asaas/create_payment": {"id": "pay_1"}}},
        "cases": [
            {"id": "pass", "input": "x", "model": {"sequence": [{"text": "pay_1"}]},
             "assert": {"contains": "pay_1"}},
            {"id": "fail", "input": "x", "model": {"sequence": [{"text": "nothing"}]},
             "assert": {"contains": "pay_1"}}
        ]
    })
}

async fn run_to_end(api: &Api) -> Value {
    let (status, created) = api
        .post("/v1/evals/runs", json!({"suites": [suite()]}))
        .await;
    assert_eq!(status, 202, "{created}");
    let id = created["run_id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        let (_, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
        if detail["status"] == "completed" {
            return detail;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("run {id} did not complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_runs_suite_documents_and_history_accumulate_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let mut runs = Vec::new();
    for _ in 0..3 {
        let (rt, handle) = open(&path).await;
        let api = Api::new(&handle);
        runs.push(run_to_end(&api).await);
        // The run finishes in the background: its end is committed with what follows.
        rt.flush_store();
        stop(rt, handle).await;
    }
    let (rt, handle) = open(&path).await;
    let api = Api::new(&handle);
    for run in &runs {
        let id = run["run_id"].as_str().unwrap();
        let (status, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
        assert_eq!(status, 200, "{detail}");
        assert_eq!(&detail, run, "a finished run reads as it did");
    }
    let (status, document) = api.get("/v1/evals/suites/confirm").await;
    assert_eq!(status, 200, "{document}");
    let (_, summary) = api.get("/v1/evals/summary").await;
    let suite = &summary["suites"][0];
    assert_eq!(
        suite["runs"],
        json!(3),
        "three runs over three runtimes: {summary}"
    );
    assert_eq!(suite["pass_rate"], json!(0.5));
    let cases = suite["cases"].as_array().unwrap();
    let pass = cases.iter().find(|c| c["case"] == "pass").unwrap();
    assert_eq!((&pass["passed"], &pass["failed"]), (&json!(3), &json!(0)));
    assert!(
        rt.budget_stats().eval_bytes > 0,
        "restored evals are counted"
    );
    stop(rt, handle).await;
}

/// Migration 1 as shipped: a store written by the version before the state tables.
const SCHEMA_1: &str = "
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE events (
        ord INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        seq INTEGER NOT NULL,
        frame TEXT NOT NULL,
        UNIQUE (tenant, seq)
    );
    CREATE TABLE tenants (tenant TEXT PRIMARY KEY, next_seq INTEGER NOT NULL);
    PRAGMA user_version = 1;
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_of_schema_version_1_opens_migrates_and_keeps_its_stream() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(SCHEMA_1).unwrap();
        conn.execute_batch(
            r#"INSERT INTO meta VALUES ('epoch', 'ep_00000000000000aa');
               INSERT INTO tenants VALUES ('default', 3);
               INSERT INTO events (tenant, seq, frame) VALUES
                 ('default', 1, '{"kind":"session.closed","seq":1,"ts":"2026-11-20T10:00:00.000Z","sessionId":"ses_old"}'),
                 ('default', 2, '{"kind":"session.closed","seq":2,"ts":"2026-11-20T10:00:01.000Z","sessionId":"ses_old"}');"#,
        )
        .unwrap();
    }
    let (rt, handle) = open(&path).await;
    let api = Api::new(&handle);
    let (_, page) = api.get("/v1/events?since=0").await;
    assert_eq!(page["epoch"], "ep_00000000000000aa", "{page}");
    assert_eq!(page["events"].as_array().unwrap().len(), 2);
    let id = api
        .session(json!({"asaas/get_balance": {"balance": 1}}))
        .await;
    let (_, page) = api.get("/v1/events?since=2").await;
    assert_eq!(page["events"][0]["seq"], 3, "the old seqs go on: {page}");
    stop(rt, handle).await;
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, spyglass::store::sqlite::SCHEMA_VERSION);
    assert!(version >= 2);
    // The migrated store keeps state: the session made on it comes back.
    let (rt, handle) = open(&path).await;
    let (status, _) = Api::new(&handle).get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(status, 200);
    stop(rt, handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_of_schema_version_2_opens_migrates_and_serves_the_next_entry() {
    // Version 3 changes no table (it marks the journal's call records), so a store of
    // version 2 is one written by this build with its version set back.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.db");
    let (rt, handle) = open(&path).await;
    let api = Api::new(&handle);
    let id = api
        .session(json!({"asaas/list_charges": [{"n": 1}, {"n": 2}, {"n": 3}]}))
        .await;
    let (status, first) = api.execute(&id, "asaas/list_charges", json!({})).await;
    assert_eq!((status, &first["data"]), (200, &json!({"n": 1})), "{first}");
    handle.shutdown().await;
    rt.flush_store();
    drop(rt);
    let set_version = |version: i64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match rusqlite::Connection::open(&path)
                .and_then(|conn| conn.pragma_update(None, "user_version", version))
            {
                Ok(()) => return,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(err) => panic!("{err}"),
            }
        }
    };
    set_version(2);
    let (rt, handle) = open(&path).await;
    let (status, next) = Api::new(&handle)
        .execute(&id, "asaas/list_charges", json!({}))
        .await;
    assert_eq!((status, &next["data"]), (200, &json!({"n": 2})), "{next}");
    stop(rt, handle).await;
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, 3);
    assert_eq!(version, spyglass::store::sqlite::SCHEMA_VERSION);
}

/// Its own Tokio runtime, dropped at the end with every task still on it: a process
/// ending, as far as the store can tell.
fn in_a_process<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(work)
}

#[test]
fn a_run_going_when_the_runtime_stops_comes_back_interrupted_not_running_forever() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let id = in_a_process(async {
        let (rt, handle) = open(&path).await;
        let api = Api::new(&handle);
        let slow = json!({
            "suite": "slow",
            "cases": [{"id": "waits", "input": "x",
                       "model": {"sequence": [{"text": "late", "delay_ms": 60_000}]},
                       "assert": {"contains": "late"}}]
        });
        let (status, created) = api.post("/v1/evals/runs", json!({"suites": [slow]})).await;
        assert_eq!(status, 202, "{created}");
        stop(rt, handle).await;
        created["run_id"].as_str().unwrap().to_owned()
    });
    // The run's task died with its runtime; give the writer thread a moment to close.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let rt = loop {
        match spyglass::store::open_runtime(config(), &path) {
            Ok(rt) => break rt,
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(err) => panic!("{err}"),
        }
    };
    in_a_process(async {
        let handle = rt.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let api = Api::new(&handle);
        let (status, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
        assert_eq!(status, 200, "{detail}");
        assert_eq!(detail["status"], "interrupted", "{detail}");
        // Waiting on it ends at once: nothing will finish it.
        let waited = tokio::time::timeout(Duration::from_secs(5), rt.wait_eval_run("default", &id))
            .await
            .expect("a restored run is not waited on forever")
            .unwrap();
        assert_eq!(waited.status, "interrupted");
        stop(rt, handle).await;
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_last_run_and_its_cost_come_back_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let (rt, handle) = open(&path).await;
    let api = Api::new(&handle);
    let id = api.session(json!({})).await;
    for message in ["one", "two"] {
        let (status, body) = api
            .post(
                &format!("/v1/sessions/{id}/send"),
                json!({"message": message}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let (_, before) = api.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(before["runs"]["runs"], 2, "{before:#}");
    assert_eq!(before["last_run"]["cost"], json!(0.0), "{before:#}");
    stop(rt, handle).await;

    let (rt, handle) = open(&path).await;
    let api = Api::new(&handle);
    let (_, after) = api.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(after["last_run"], before["last_run"]);
    assert_eq!(after["runs"], before["runs"]);
    stop(rt, handle).await;
}

/// `/health` names the store's state to anyone, but its file and its disk's words only on
/// a runtime that asks for no key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_tells_the_store_state_and_keeps_its_path_from_a_keyed_runtimes_public() {
    let dir = tempfile::tempdir().unwrap();
    let open_with = async |keys: Vec<String>, name: &str| {
        let config = RuntimeConfig {
            api_keys: keys,
            ..config()
        };
        let rt = spyglass::store::open_runtime(config, &dir.path().join(name)).unwrap();
        let handle = rt.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let health: Value = reqwest::get(format!("{}/health", handle.url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        stop(rt, handle).await;
        health["store"].clone()
    };
    let open_store = open_with(Vec::new(), "open.db").await;
    assert_eq!(open_store["state"], "ok", "{open_store}");
    assert!(
        open_store["path"].as_str().unwrap().ends_with("open.db"),
        "{open_store}"
    );
    let keyed = open_with(vec!["sk_test".into()], "keyed.db").await;
    assert_eq!(keyed["state"], "ok", "{keyed}");
    assert!(keyed.get("path").is_none(), "{keyed}");
    let memory = reqwest::get(format!("{}/health", test_server().await.url()))
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert!(memory["store"].is_null(), "{memory}");
}
