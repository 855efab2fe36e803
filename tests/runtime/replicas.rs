//! Two runtimes on one Postgres database, each served over real HTTP: stateful entries
//! served once across both, an approval decided once, one stream in one seq order that
//! an observer of either sees whole and can resume on the other.

use crate::support::postgres::fresh_database;
use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{Policy, RuntimeConfig, ServerHandle, open_shared};
use spyglass::store::postgres::{PgSettings, PgStore};
use std::sync::Arc;
use std::time::Duration;

/// A runtime on the database at `url`, served on a loopback port.
async fn replica(url: &str, name: &str, config: RuntimeConfig) -> ServerHandle {
    let settings = PgSettings {
        pool_size: 8,
        replica: name.to_owned(),
    };
    let store = PgStore::connect(url, settings, &|_| {}).await.unwrap();
    let rt = open_shared(config, Arc::new(store)).await.unwrap();
    rt.serve("127.0.0.1:0".parse().unwrap()).await.unwrap()
}

async fn two_replicas(database: &str, config: RuntimeConfig) -> (ServerHandle, ServerHandle) {
    let url = fresh_database(database);
    let a = replica(&url, "a", config.clone()).await;
    let b = replica(&url, "b", config).await;
    (a, b)
}

/// Polls `check` on a GET of `path` until it holds (5 s at most): what one replica did
/// reaches the other within milliseconds, not at once.
async fn eventually(api: &Api, path: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (status, body) = api.get(path).await;
        if status == 200 && check(&body) {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} never held: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The events of `kind` in a `GET /v1/events` page.
fn of_kind<'a>(page: &'a Value, kind: &str) -> Vec<&'a Value> {
    page["events"]
        .as_array()
        .map(|events| events.iter().filter(|e| e["kind"] == kind).collect())
        .unwrap_or_default()
}

fn consumed(detail: &Value, tool: &str) -> Option<u64> {
    detail["mocks"]
        .as_array()?
        .iter()
        .find(|m| m["tool"] == tool)?["counter"]["consumed"]
        .as_u64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_calls_over_two_replicas_serve_each_stateful_entry_once() {
    let (a, b) = two_replicas("exactness", test_config()).await;
    let (api_a, api_b) = (Api::new(&a), Api::new(&b));
    let entries: Vec<Value> = (0..10).map(|n| json!({"n": n})).collect();
    let sid = api_a
        .session(json!({"asaas/create_payment": entries}))
        .await;
    let calls = (0..64).map(|i| {
        let api = if i % 2 == 0 { &api_a } else { &api_b };
        let sid = sid.clone();
        async move {
            api.execute(&sid, "asaas/create_payment", json!({"i": i}))
                .await
        }
    });
    let answers = futures_util::future::join_all(calls).await;
    let mut served: Vec<u64> = answers
        .iter()
        .filter(|(status, _)| *status == 200)
        .map(|(_, body)| body["data"]["n"].as_u64().unwrap())
        .collect();
    served.sort_unstable();
    assert_eq!(served, (0..10).collect::<Vec<_>>(), "each entry once");
    let exhausted = answers
        .iter()
        .filter(|(_, body)| body["code"] == "mocks_exhausted")
        .count();
    assert_eq!(exhausted, 54, "{answers:?}");
    // Both replicas come to show the mock used up and every call.
    for api in [&api_a, &api_b] {
        let detail = eventually(api, &format!("/v1/sessions/{sid}"), |d| {
            consumed(d, "asaas/create_payment") == Some(10) && d["calls_total"] == 64
        })
        .await;
        assert_eq!(detail["status"], "active", "{detail}");
    }
}

fn approval_policy() -> RuntimeConfig {
    RuntimeConfig {
        policy: Policy::from_toml(
            "[[rule]]\nid = \"hold\"\ntool = \"*/create_payment\"\naction = \"approval\"\n\n[[rule]]\nid = \"never\"\ntool = \"*/delete_customer\"\naction = \"deny\"\n",
        )
        .unwrap(),
        ..test_config()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approval_decided_on_both_replicas_at_once_stands_once_and_replays_once() {
    let (a, b) = two_replicas("approvals", approval_policy()).await;
    let (api_a, api_b) = (Api::new(&a), Api::new(&b));
    let sid = api_a
        .session(json!({"asaas/create_payment": [{"id": "pay_1"}, {"id": "pay_2"}]}))
        .await;
    let (status, held) = api_a
        .execute(&sid, "asaas/create_payment", json!({"value": 10}))
        .await;
    assert_eq!(status, 202, "{held}");
    let id = held["approval_id"].as_str().unwrap().to_owned();
    let path = format!("/v1/approvals/{id}/approve");
    let (first, second) = tokio::join!(
        api_a.post(&path, json!({"by": "ana"})),
        api_b.post(&path, json!({"by": "bo"}))
    );
    let mut statuses = [first.0, second.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{first:?} {second:?}");
    let won = if first.0 == 200 { &first.1 } else { &second.1 };
    assert_eq!(won["replay"]["result"]["id"], "pay_1", "{won}");
    let lost = if first.0 == 409 { &first.1 } else { &second.1 };
    assert_eq!(lost["code"], "approval_already_decided");
    // Final everywhere: a deny on either replica afterwards is 409 too.
    for api in [&api_a, &api_b] {
        let (status, body) = api
            .post(&format!("/v1/approvals/{id}/deny"), json!({}))
            .await;
        assert_eq!(status, 409, "{body}");
    }
    // One replay in the one stream, whichever replica is asked, and the next entry is
    // the second: the replay took the first exactly once.
    for api in [&api_a, &api_b] {
        let page = eventually(api, "/v1/events?since=0", |page| {
            page["events"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e["kind"] == "approval.replayed"))
        })
        .await;
        assert_eq!(of_kind(&page, "approval.replayed").len(), 1, "{page}");
    }
    let (status, next) = api_b
        .execute(&sid, "asaas/create_payment", json!({"value": 11}))
        .await;
    assert_eq!(status, 202, "held again: {next}");
    let second_id = next["approval_id"].as_str().unwrap();
    let (status, body) = api_b
        .post(&format!("/v1/approvals/{second_id}/approve"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["replay"]["result"]["id"], "pay_2", "{body}");
    // The deny-list holds on both.
    for api in [&api_a, &api_b] {
        let (status, body) = api.execute(&sid, "asaas/delete_customer", json!({})).await;
        assert_eq!(body["code"], "policy_denied", "{status} {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approval_past_its_expiry_is_410_on_every_replica_and_expires_once() {
    let config = RuntimeConfig {
        approval_ttl: Duration::from_millis(300),
        ..approval_policy()
    };
    let (a, b) = two_replicas("expiry", config).await;
    let (api_a, api_b) = (Api::new(&a), Api::new(&b));
    let sid = api_a
        .session(json!({"asaas/create_payment": {"id": "pay_1"}}))
        .await;
    let (_, held) = api_a.execute(&sid, "asaas/create_payment", json!({})).await;
    let id = held["approval_id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for api in [&api_b, &api_a] {
        let (status, body) = api
            .post(&format!("/v1/approvals/{id}/approve"), json!({}))
            .await;
        assert_eq!(status, 410, "{body}");
        assert_eq!(body["code"], "approval_expired");
    }
    let page = eventually(&api_b, "/v1/events?since=0", |page| {
        page["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["decision"] == "expired"))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (_, page_later) = api_a.get("/v1/events?since=0").await;
    for page in [&page, &page_later] {
        assert_eq!(
            of_kind(page, "approval.resolved").len(),
            1,
            "expired once, by one replica: {page}"
        );
    }
}

/// A session, ten calls and its close.
async fn work(api: &Api) {
    let sid = api
        .session(json!({"asaas/get_balance": {"ok": true}}))
        .await;
    for _ in 0..10 {
        let (status, _) = api.execute(&sid, "asaas/get_balance", json!({})).await;
        assert_eq!(status, 200);
    }
    api.delete(&format!("/v1/sessions/{sid}")).await;
}

fn stamps(frames: &[Value]) -> Vec<(u64, String, String)> {
    frames
        .iter()
        .map(|f| {
            (
                f["seq"].as_u64().unwrap(),
                f["kind"].as_str().unwrap().to_owned(),
                f["sessionId"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn observers_of_either_replica_see_one_stream_and_resume_on_the_other() {
    let (a, b) = two_replicas("stream", test_config()).await;
    let (api_a, api_b) = (Api::new(&a), Api::new(&b));
    let mut on_a = observe(&a, "?since=0").await;
    let mut on_b = observe(&b, "?since=0").await;
    // Both replicas write at once: sessions and calls on each, more events than a
    // follower reads in one page.
    tokio::join!(
        work(&api_a),
        work(&api_b),
        work(&api_a),
        work(&api_b),
        work(&api_a),
        work(&api_b)
    );
    // 6 sessions × (created + 10 calls + closed).
    let total = 6 * 12;
    let seen_a = frames(&mut on_a, total).await;
    let seen_b = frames(&mut on_b, total).await;
    let seqs: Vec<u64> = seen_a.iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (1..=total as u64).collect::<Vec<_>>(),
        "one order, no gap"
    );
    assert_eq!(stamps(&seen_a), stamps(&seen_b), "the same stream on both");
    assert!(
        next_frame(&mut on_b, Duration::from_millis(300))
            .await
            .is_none(),
        "nothing twice"
    );
    // Resume on the other replica: same epoch, same seqs.
    let (_, page) = api_a.get("/v1/events?since=0&limit=1").await;
    let epoch = page["epoch"].as_str().unwrap().to_owned();
    let mut resumed = observe(&b, &format!("?since=20&epoch={epoch}")).await;
    let hello = next_frame(&mut resumed, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(hello["kind"], "stream.hello", "{hello}");
    let rest = frames(&mut resumed, total - 20).await;
    assert_eq!(stamps(&rest), stamps(&seen_a[20..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_started_later_holds_what_the_first_did_and_goes_on_from_it() {
    let url = fresh_database("later");
    let a = replica(&url, "a", test_config()).await;
    let api_a = Api::new(&a);
    let entries: Vec<Value> = (0..10).map(|n| json!({"n": n})).collect();
    let sid = api_a.session(json!({"asaas/list": entries})).await;
    for n in 0..5 {
        let (status, body) = api_a.execute(&sid, "asaas/list", json!({})).await;
        assert_eq!((status, body["data"]["n"].as_u64()), (200, Some(n)));
    }
    let (_, before) = api_a.get("/v1/events?since=0").await;
    a.shutdown().await;
    // A replica that was not there when any of it happened.
    let c = replica(&url, "c", test_config()).await;
    let api_c = Api::new(&c);
    let (status, detail) = api_c.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(consumed(&detail, "asaas/list"), Some(5), "{detail}");
    assert_eq!(detail["calls_total"], 5, "counted once: {detail}");
    let (_, after) = api_c.get("/v1/events?since=0").await;
    assert_eq!(after["epoch"], before["epoch"], "one stream");
    assert_eq!(after["events"], before["events"]);
    let (status, body) = api_c.execute(&sid, "asaas/list", json!({})).await;
    assert_eq!(
        (status, body["data"]["n"].as_u64()),
        (200, Some(5)),
        "{body}"
    );
    let (_, page) = api_c.get("/v1/events?since=0").await;
    let seqs: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=7).collect::<Vec<_>>(), "the seqs go on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_whose_database_goes_away_answers_503_and_recovers_when_it_returns() {
    // A cluster of its own, to stop and start again.
    let mut cluster = crate::support::postgres::Cluster::start_new();
    let url = cluster.fresh_database("away");
    let a = replica(&url, "a", test_config()).await;
    let api = Api::new(&a);
    let sid = api
        .session(json!({"asaas/get_balance": {"ok": true}}))
        .await;
    let (status, _) = api.execute(&sid, "asaas/get_balance", json!({})).await;
    assert_eq!(status, 200);
    let (_, health) = api.get("/health").await;
    assert_eq!(health["store"]["state"], "ok", "{health}");

    cluster.stop();
    let (status, body) = api.execute(&sid, "asaas/get_balance", json!({})).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "store_unavailable", "{body}");
    let (_, health) = api.get("/health").await;
    assert_eq!(health["store"]["state"], "failing", "{health}");

    cluster.start();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut calls = 2;
    loop {
        let (status, body) = api.execute(&sid, "asaas/get_balance", json!({})).await;
        calls += 1;
        if status == 200 {
            break;
        }
        assert_eq!(body["code"], "store_unavailable", "{body}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "never recovered: {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, health) = api.get("/health").await;
    assert_eq!(health["store"]["state"], "ok", "{health}");
    // The stream holds the calls answered 200 alone, in order and gapless: each one
    // answered 503 while the database was away was taken back, not kept for later.
    let (_, page) = api.get("/v1/events?since=0").await;
    let kinds: Vec<&str> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["session.created", "tool.called", "tool.called"],
        "{page}"
    );
    let seqs: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3]);
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert!(calls > 2, "{calls} calls");
    assert_eq!(detail["calls_total"], 2, "{detail}");
}

/// A SQL statement on its own connection, as an operator would.
async fn exec(url: &str, sql: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(conn);
    client.batch_execute(sql).await.unwrap();
    drop(client);
    let _ = driver.await;
}

/// Every insert into the events table fails while this trigger is there: a commit with
/// an event in it fails, the rest of the database (the claims) answers.
const REFUSE_EVENTS: &str = "
    CREATE FUNCTION refuse_events() RETURNS trigger LANGUAGE plpgsql
        AS $$ BEGIN RAISE EXCEPTION 'events refused for the test'; END $$;
    CREATE TRIGGER refuse_events BEFORE INSERT ON spyglass_events
        FOR EACH ROW EXECUTE FUNCTION refuse_events();";
const ACCEPT_EVENTS: &str = "
    DROP TRIGGER refuse_events ON spyglass_events; DROP FUNCTION refuse_events();";

/// The outcome of each `tool.called` in a `GET /v1/events` page.
fn served(page: &Value) -> Vec<Value> {
    of_kind(page, "tool.called")
        .iter()
        .map(|e| e["outcome"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_whose_commit_fails_is_taken_back_and_its_retry_gets_the_same_entry() {
    let url = fresh_database("taken_back");
    let a = replica(&url, "a", test_config()).await;
    let api = Api::new(&a);
    let entries: Vec<Value> = (0..3).map(|n| json!({"n": n})).collect();
    let sid = api
        .session(json!({
            "asaas/create_payment": entries,
            "asaas/get_balance": {"ok": true},
        }))
        .await;
    let (status, body) = api.execute(&sid, "asaas/create_payment", json!({})).await;
    assert_eq!((status, &body["data"]["n"]), (200, &json!(0)), "{body}");
    let (status, body) = api.execute(&sid, "asaas/get_balance", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let detail_path = format!("/v1/sessions/{sid}");
    let (_, before) = api.get(&detail_path).await;
    let (_, page_before) = api.get("/v1/events?since=0").await;
    assert_eq!(served(&page_before).len(), 2, "{page_before}");

    exec(&url, REFUSE_EVENTS).await;
    for tool in ["asaas/create_payment", "asaas/get_balance"] {
        let (status, body) = api.execute(&sid, tool, json!({})).await;
        assert_eq!(status, 503, "{tool}: {body}");
        assert_eq!(body["code"], "store_unavailable", "{body}");
    }
    // Both commits failed and `/health` counts them; its `state` may already read `ok`
    // again, since the take-back's counters document (no event) commits past the trigger.
    let (_, health) = api.get("/health").await;
    assert!(
        health["store"]["failed_commits"].as_u64().unwrap() >= 2,
        "{health}"
    );
    // Nothing of either call is left: not its entry, its counters, its record in the
    // session nor an event.
    let (_, after) = api.get(&detail_path).await;
    assert_eq!(after, before, "the session as before the refused calls");
    let (_, page) = api.get("/v1/events?since=0").await;
    assert_eq!(page["events"], page_before["events"], "{page}");

    exec(&url, ACCEPT_EVENTS).await;
    let (status, body) = api.execute(&sid, "asaas/create_payment", json!({})).await;
    assert_eq!((status, &body["data"]["n"]), (200, &json!(1)), "{body}");
    let (status, body) = api.execute(&sid, "asaas/get_balance", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (_, health) = api.get("/health").await;
    assert_eq!(health["store"]["state"], "ok", "{health}");
    let (_, detail) = api.get(&detail_path).await;
    assert_eq!(
        consumed(&detail, "asaas/create_payment"),
        Some(2),
        "{detail}"
    );
    assert_eq!(detail["calls_total"], 4, "{detail}");
    let (_, page) = api.get("/v1/events?since=0").await;
    let seqs: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5], "{page}");
    assert_eq!(
        served(&page),
        [
            json!({"result": {"n": 0}}),
            json!({"result": {"ok": true}}),
            json!({"result": {"n": 1}}),
            json!({"result": {"ok": true}}),
        ],
        "{page}"
    );
    // What the database holds agrees: a runtime started on it now counts four calls and
    // two entries taken, and serves the third next.
    let b = replica(&url, "b", test_config()).await;
    let api_b = Api::new(&b);
    let detail = eventually(&api_b, &detail_path, |d| d["calls_total"] == 4).await;
    assert_eq!(
        consumed(&detail, "asaas/create_payment"),
        Some(2),
        "{detail}"
    );
    let (status, body) = api_b.execute(&sid, "asaas/create_payment", json!({})).await;
    assert_eq!((status, &body["data"]["n"]), (200, &json!(2)), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_held_call_whose_commit_fails_leaves_no_approval_behind() {
    let url = fresh_database("held_taken_back");
    let a = replica(&url, "a", approval_policy()).await;
    let api = Api::new(&a);
    let sid = api
        .session(json!({"asaas/create_payment": [{"id": "pay_1"}, {"id": "pay_2"}]}))
        .await;
    let pending = "/v1/approvals?status=pending";
    exec(&url, REFUSE_EVENTS).await;
    let (status, body) = api
        .execute(&sid, "asaas/create_payment", json!({"value": 10}))
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "store_unavailable", "{body}");
    let (_, approvals) = api.get(pending).await;
    assert_eq!(approvals["approvals"], json!([]), "{approvals}");
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(detail["calls_total"], 0, "{detail}");

    exec(&url, ACCEPT_EVENTS).await;
    let (status, held) = api
        .execute(&sid, "asaas/create_payment", json!({"value": 10}))
        .await;
    assert_eq!(status, 202, "{held}");
    let id = held["approval_id"].as_str().unwrap();
    let (_, approvals) = api.get(pending).await;
    assert_eq!(
        approvals["approvals"].as_array().map(Vec::len),
        Some(1),
        "{approvals}"
    );
    let (status, body) = api
        .post(&format!("/v1/approvals/{id}/approve"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["replay"]["result"]["id"], "pay_1", "{body}");
    let page = eventually(&api, "/v1/events?since=0", |page| {
        !of_kind(page, "approval.replayed").is_empty()
    })
    .await;
    assert_eq!(of_kind(&page, "tool.called").len(), 1, "{page}");
    assert_eq!(of_kind(&page, "approval.requested").len(), 1, "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_eval_run_on_one_replica_is_read_and_counted_on_the_other() {
    let (a, b) = two_replicas("evals", test_config()).await;
    let (api_a, api_b) = (Api::new(&a), Api::new(&b));
    let model = json!({"sequence": [
        {"tool_calls": [{"name": "asaas/create_payment", "arguments": {"value": 5}}]},
        {"text": "Charged pay_1"}
    ]});
    let suite = json!({
        "suite": "shared",
        "defaults": {"mocks": {"asaas/create_payment": {"id": "pay_1"}}},
        "cases": [
            {"id": "passes", "input": "Charge", "model": model, "assert": {"contains": "pay_1"}},
            {"id": "fails", "input": "Charge", "model": model, "assert": {"contains": "pay_9"}}
        ]
    });
    let (status, created) = api_a
        .post("/v1/evals/runs", json!({"suites": [suite]}))
        .await;
    assert_eq!(status, 202, "{created}");
    let id = created["run_id"].as_str().unwrap();
    let done = eventually(&api_a, &format!("/v1/evals/runs/{id}"), |d| {
        d["status"] == "completed"
    })
    .await;
    // The other replica reads the run from the database, as it ended.
    let there = eventually(&api_b, &format!("/v1/evals/runs/{id}"), |d| {
        d["status"] == "completed"
    })
    .await;
    assert_eq!(
        (done["passed"].as_u64(), done["failed"].as_u64()),
        (Some(1), Some(1)),
        "{done}"
    );
    assert_eq!(there["cases"].as_array().map(Vec::len), Some(2), "{there}");
    assert_eq!(there["cases"], done["cases"]);
    // And its pass rates count the results that reached it over the stream.
    let summary = eventually(&api_b, "/v1/evals/summary", |s| {
        s.to_string().contains("\"shared\"")
    })
    .await;
    assert!(summary.to_string().contains("passes"), "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn closing_a_session_on_one_replica_ends_its_approvals_for_every_replica() {
    let (a, b) = two_replicas("close", approval_policy()).await;
    let (api_a, api_b) = (Api::new(&a), Api::new(&b));
    let sid = api_a
        .session(json!({"asaas/create_payment": {"id": "pay_1"}}))
        .await;
    let (_, held) = api_a.execute(&sid, "asaas/create_payment", json!({})).await;
    let id = held["approval_id"].as_str().unwrap().to_owned();
    let (status, _) = api_b.delete(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(status, 204);
    // Decided in the database: an approve on the replica that queued it is too late.
    let (status, body) = api_a
        .post(&format!("/v1/approvals/{id}/approve"), json!({}))
        .await;
    assert_eq!(status, 410, "{body}");
    let page = eventually(&api_a, "/v1/events?since=0", |page| {
        page["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["kind"] == "session.closed"))
    })
    .await;
    let resolved = of_kind(&page, "approval.resolved");
    assert_eq!(resolved.len(), 1, "{page}");
    assert_eq!(resolved[0]["decision"], "cancelled");
    assert_eq!(resolved[0]["note"], "session closed");
    let (_, all) = api_a.get("/v1/approvals?status=all").await;
    assert_eq!(all["approvals"][0]["status"], "cancelled", "{all}");
    // And the session is closed on both.
    for api in [&api_a, &api_b] {
        eventually(api, &format!("/v1/sessions/{sid}"), |d| {
            d["status"] == "closed"
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counters_past_their_checkpoint_survive_the_eviction_of_their_events() {
    // Counters are written every 32 calls on a shared store; the calls after the last
    // checkpoint are rolled forward from the stream at start. Here the stream no longer
    // holds them: a busier session pushed them out of the retained window.
    let url = fresh_database("evicted_tail");
    let config = RuntimeConfig {
        retained_events: 20,
        ..test_config()
    };
    let a = replica(&url, "a", config.clone()).await;
    let api_a = Api::new(&a);
    let entries: Vec<Value> = (0..50).map(|n| json!({"n": n})).collect();
    let sid = api_a.session(json!({"asaas/list": entries})).await;
    for n in 0..40 {
        let (status, body) = api_a.execute(&sid, "asaas/list", json!({})).await;
        assert_eq!((status, body["data"]["n"].as_u64()), (200, Some(n)));
    }
    let busy = api_a.session(json!({"asaas/get": {"ok": true}})).await;
    for _ in 0..30 {
        let (status, _) = api_a.execute(&busy, "asaas/get", json!({})).await;
        assert_eq!(status, 200);
    }
    a.shutdown().await;
    let c = replica(&url, "c", config).await;
    let api_c = Api::new(&c);
    let (status, detail) = api_c.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(consumed(&detail, "asaas/list"), Some(40), "{detail}");
    assert_eq!(detail["calls_total"], 40, "{detail}");
    let (status, body) = api_c.execute(&sid, "asaas/list", json!({})).await;
    assert_eq!(
        (status, body["data"]["n"].as_u64()),
        (200, Some(40)),
        "{body}"
    );
}
