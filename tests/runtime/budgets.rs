//! Byte budgets and caps of the runtime: retained bytes and RSS stay bounded under the
//! workloads that used to exhaust memory; pagination, the per-tenant cap and send caps.

use crate::support::runtime::{Api, server, test_config};
use serde_json::{Value, json};
use spyglass::client::rest::RestClient;
use spyglass::runtime::RuntimeConfig;
use tokio::sync::Mutex;

const MIB: usize = 1024 * 1024;
const BUDGET: usize = 16 * MIB;
/// What RSS may grow beyond the budget: allocator slack, the HTTP client's and server's
/// buffers for ~1 MiB bodies, and the other (small) tests of this binary running alongside.
const OVERHEAD: usize = 64 * MIB;

/// The RSS-measuring workloads run one at a time so each sees only its own growth.
static MEASURED: Mutex<()> = Mutex::const_new(());

fn budget_config() -> RuntimeConfig {
    RuntimeConfig {
        max_retained_bytes: BUDGET,
        ..test_config()
    }
}

fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

async fn create(api: &Api, body: Value) -> String {
    let (status, body) = api.post("/v1/sessions", body).await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_owned()
}

/// A mock fixture of about `bytes` bytes of JSON.
fn fixture(bytes: usize) -> Value {
    json!({"blob": "m".repeat(bytes)})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executes_with_large_inputs_stay_within_the_byte_budget() {
    let _one = MEASURED.lock().await;
    let handle = server(budget_config()).await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"t/big": {"ok": true}})).await;
    let before = rss_bytes();
    // 150 × 900 KB = 135 MB of input, eight times the budget.
    let input = json!({"blob": "a".repeat(900_000)});
    for _ in 0..150 {
        let (status, body) = api.execute(&sid, "t/big", input.clone()).await;
        assert!(
            status == 200 || status == 409 || status == 404,
            "{status} {body}"
        );
    }
    let stats = handle.runtime().budget_stats();
    assert!(stats.retained_bytes <= BUDGET, "{stats:?}");
    assert!(stats.evicted_events > 100, "{stats:?}");
    let grown = rss_bytes().saturating_sub(before);
    eprintln!("RSS grew {} MiB; {stats:?}", grown / MIB);
    assert!(
        grown < BUDGET + OVERHEAD,
        "RSS grew {} MiB for a {} MiB budget",
        grown / MIB,
        BUDGET / MIB
    );
    // /health shows the same figures.
    let (status, health) = api.get("/health").await;
    assert_eq!(status, 200);
    assert_eq!(health["memory"]["max_bytes"], BUDGET);
    assert!(health["memory"]["evicted_events"].as_u64().unwrap() > 100);
    // The session's detail lists only the calls the log still holds.
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    let listed = detail["calls"].as_array().unwrap().len();
    assert!((1..150).contains(&listed), "{listed} calls listed");
    assert_eq!(detail["calls"][listed - 1]["input"], input);
    assert_eq!(detail["calls"].as_array().unwrap().len(), listed);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_and_deleted_sessions_give_their_memory_back() {
    let _one = MEASURED.lock().await;
    let handle = server(RuntimeConfig {
        max_sessions_per_tenant: 50,
        ..budget_config()
    })
    .await;
    let api = Api::new(&handle);
    let before = rss_bytes();
    // 300 × 60 KB mocks = 18 MB, past the budget; each is deleted at once.
    for i in 0..300 {
        let sid = create(
            &api,
            json!({"servers": [], "user_id": format!("u{i}"), "mocks": {"t/a": fixture(60_000)}}),
        )
        .await;
        let (status, _) = api.delete(&format!("/v1/sessions/{sid}")).await;
        assert_eq!(status, 204);
    }
    let stats = handle.runtime().budget_stats();
    assert!(stats.retained_bytes <= BUDGET, "{stats:?}");
    assert!(
        stats.evicted_sessions >= 250,
        "closed sessions past the per-tenant cap of 50 are dropped: {stats:?}"
    );
    let grown = rss_bytes().saturating_sub(before);
    eprintln!("RSS grew {} MiB; {stats:?}", grown / MIB);
    assert!(grown < BUDGET + OVERHEAD, "RSS grew {} MiB", grown / MIB);
    let (_, list) = api.get("/v1/sessions?limit=1000").await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 50);
    handle.shutdown().await;
}

#[tokio::test]
async fn string_fields_past_the_cap_are_refused_with_a_field_pointer() {
    let handle = server(budget_config()).await;
    let api = Api::new(&handle);
    for (body, field) in [
        (
            json!({"servers": [], "user_id": "u".repeat(1025)}),
            "/user_id",
        ),
        (
            json!({"servers": ["ok", "s".repeat(2000)], "user_id": "u"}),
            "/servers/1",
        ),
        (
            json!({"servers": [], "user_id": "u", "metadata": {"a/b": "v".repeat(5000)}}),
            "/metadata/a~1b",
        ),
    ] {
        let (status, err) = api.post("/v1/sessions", body).await;
        assert_eq!(status, 400, "{err}");
        assert_eq!(err["code"], "field_too_large", "{err}");
        assert_eq!(err["field"], field, "{err}");
    }
    // At the cap exactly is fine.
    create(&api, json!({"servers": [], "user_id": "u".repeat(1024)})).await;
    handle.shutdown().await;
}

fn calls(n: usize) -> Value {
    let call = json!({"name": "t/big", "arguments": {}});
    json!({"sequence": [{"tool_calls": vec![call; n]}, {"text": "done"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_past_the_cap_is_refused_and_a_large_answer_is_cut() {
    let _one = MEASURED.lock().await;
    let handle = server(budget_config()).await;
    let api = Api::new(&handle);
    let mocks = json!({"t/big": fixture(60_000)});
    let (status, err) = api
        .post(
            "/v1/sessions",
            json!({"servers": [], "user_id": "u", "mocks": mocks, "model": calls(2000)}),
        )
        .await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["code"], "model_script_too_large", "{err}");
    assert_eq!(err["field"], "/model/sequence");
    let script = serde_json::to_string(&calls(257)).unwrap();
    let (status, err) = api
        .post(
            "/v1/sessions",
            json!({"servers": [], "user_id": "u", "metadata": {"model_script": script}}),
        )
        .await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["field"], "/metadata/model_script");

    // 256 calls of a 60 KB fixture would answer 15 MB: the run is cut at 8 MiB.
    let before = rss_bytes();
    let sid = create(
        &api,
        json!({"servers": [], "user_id": "u", "mocks": mocks, "model": calls(256)}),
    )
    .await;
    let (status, err) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "sixteen bytes!!!"}),
        )
        .await;
    assert_eq!(status, 413, "{err}");
    assert_eq!(err["code"], "response_too_large", "{err}");
    let stats = handle.runtime().budget_stats();
    assert!(stats.retained_bytes <= BUDGET, "{stats:?}");
    let grown = rss_bytes().saturating_sub(before);
    eprintln!("RSS grew {} MiB; {stats:?}", grown / MIB);
    assert!(grown < BUDGET + OVERHEAD, "RSS grew {} MiB", grown / MIB);
    handle.shutdown().await;
}

#[tokio::test]
async fn sessions_list_in_pages_and_the_client_follows_the_cursor() {
    let handle = server(RuntimeConfig {
        max_sessions_per_tenant: 2000,
        ..budget_config()
    })
    .await;
    let api = Api::new(&handle).with_tenant("pages");
    let mut ids = Vec::new();
    for i in 0..130 {
        ids.push(create(&api, json!({"servers": [], "user_id": format!("u{i}")})).await);
    }
    // Another tenant's sessions are neither listed nor counted in a page.
    create(&Api::new(&handle), json!({"servers": [], "user_id": "x"})).await;
    let (status, first) = api.get("/v1/sessions").await;
    assert_eq!(status, 200);
    assert_eq!(first["sessions"].as_array().unwrap().len(), 100);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let (_, second) = api.get(&format!("/v1/sessions?cursor={cursor}")).await;
    assert_eq!(second["sessions"].as_array().unwrap().len(), 30);
    assert!(second.get("next_cursor").is_none(), "{second}");
    let listed: Vec<String> = first["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["sessions"].as_array().unwrap())
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, ids);
    let (_, small) = api.get("/v1/sessions?limit=7").await;
    assert_eq!(small["sessions"].as_array().unwrap().len(), 7);
    let (status, err) = api.get("/v1/sessions?cursor=nope").await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["code"], "invalid_query");
    let (status, _) = api.get("/v1/sessions?limit=-1").await;
    assert_eq!(status, 400);

    // The inspector's re-read walks every page (of the default tenant here).
    for i in 0..1005 {
        create(
            &Api::new(&handle),
            json!({"servers": [], "user_id": format!("d{i}")}),
        )
        .await;
    }
    let rest = RestClient::new(&handle.url(), None).unwrap();
    let all = rest.sessions().await.unwrap();
    assert_eq!(all.sessions.len(), 1006);
    assert!(all.next_cursor.is_none());
    handle.shutdown().await;
}

#[tokio::test]
async fn a_tenant_past_its_open_sessions_gets_429() {
    let handle = server(RuntimeConfig {
        max_sessions_per_tenant: 3,
        ..budget_config()
    })
    .await;
    let api = Api::new(&handle).with_tenant("acme");
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(create(&api, json!({"servers": [], "user_id": "u"})).await);
    }
    let (status, err) = api
        .post("/v1/sessions", json!({"servers": [], "user_id": "u"}))
        .await;
    assert_eq!(status, 429, "{err}");
    assert_eq!(err["code"], "too_many_sessions", "{err}");
    // Other tenants are not held back by this one.
    create(
        &Api::new(&handle).with_tenant("other"),
        json!({"servers": [], "user_id": "u"}),
    )
    .await;
    // Closing one makes room; the closed one is then dropped to keep the cap.
    api.delete(&format!("/v1/sessions/{}", ids[0])).await;
    create(&api, json!({"servers": [], "user_id": "u"})).await;
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 3);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_sessions_make_room_before_an_open_sessions_events_are_dropped() {
    let _one = MEASURED.lock().await;
    let budget = 4 * MIB;
    let handle = server(RuntimeConfig {
        max_retained_bytes: budget,
        max_sessions_per_tenant: 1000,
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    // The open session is the oldest: the log alone would drop its events first.
    let open = api.session(json!({"t/a": {"ok": true}})).await;
    let input = json!({"blob": "o".repeat(20_000)});
    let (status, body) = api.execute(&open, "t/a", input.clone()).await;
    assert_eq!(status, 200, "{body}");
    // 60 closed sessions holding 40 KB of mocks each: 2.4 MB of closed data.
    for i in 0..60 {
        let sid = create(
            &api,
            json!({"servers": [], "user_id": format!("c{i}"), "mocks": {"t/a": fixture(40_000)}}),
        )
        .await;
        assert_eq!(api.delete(&format!("/v1/sessions/{sid}")).await.0, 204);
    }
    assert_eq!(handle.runtime().budget_stats().evicted_sessions, 0);
    // 100 more 20 KB calls on the open one: 2 MB of events and 1 MiB of its record.
    for _ in 0..100 {
        let (status, body) = api.execute(&open, "t/a", input.clone()).await;
        assert_eq!(status, 200, "{body}");
    }
    let stats = handle.runtime().budget_stats();
    eprintln!("{stats:?}");
    assert!(stats.retained_bytes <= budget, "{stats:?}");
    assert!(stats.evicted_sessions > 0, "{stats:?}");
    assert!(
        stats.evicted_sessions < 60,
        "only what was needed goes: {stats:?}"
    );
    assert_eq!(stats.evicted_events, 0, "{stats:?}");
    // Every call of the open session is still on the log, its first one included.
    let (status, page) = api.get("/v1/events?since=0&limit=10000").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.get("gap").is_none(), "{page}");
    let calls = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["sessionId"] == open.as_str() && e["kind"] == "tool.called")
        .count();
    assert_eq!(calls, 101);
    let (_, list) = api.get("/v1/sessions?limit=1000").await;
    assert_eq!(
        list["sessions"].as_array().unwrap().len(),
        61 - stats.evicted_sessions as usize
    );
    assert_eq!(list["sessions"][0]["id"], open.as_str());
    handle.shutdown().await;
}

/// A suite of one skipped case whose input makes its document about `bytes` long.
fn large_suite(name: &str, bytes: usize) -> Value {
    json!({"suite": name, "cases": [{"id": "c", "input": "s".repeat(bytes), "skip": "large"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_documents_and_eval_runs_count_against_the_budget() {
    let _one = MEASURED.lock().await;
    let budget = 2 * MIB;
    let handle = server(RuntimeConfig {
        max_retained_bytes: budget,
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    // 40 × 200 KB suites = 8 MB of documents, four times the budget.
    for i in 0..40 {
        let (status, created) = api
            .post(
                "/v1/evals/runs",
                json!({"suites": [large_suite(&format!("s{i}"), 200_000)]}),
            )
            .await;
        assert_eq!(status, 202, "{created}");
        let id = created["run_id"].as_str().unwrap().to_owned();
        handle
            .runtime()
            .wait_eval_run("default", &id)
            .await
            .unwrap();
    }
    let stats = handle.runtime().budget_stats();
    eprintln!("{stats:?}");
    assert!(stats.retained_bytes <= budget, "{stats:?}");
    assert!(stats.eval_bytes > 1_000_000, "{stats:?}");
    assert!(stats.evicted_evals >= 30, "{stats:?}");
    assert!(stats.evicted_eval_bytes >= 30 * 200_000, "{stats:?}");
    // The newest suite is still there for a rerun by name; the oldest made room.
    let (status, doc) = api.get("/v1/evals/suites/s39").await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["document"]["suite"], "s39");
    let (status, _) = api.get("/v1/evals/suites/s0").await;
    assert_eq!(status, 404);
    let (_, health) = api.get("/health").await;
    assert_eq!(health["memory"]["evicted_evals"], stats.evicted_evals);
    assert!(health["memory"]["eval_bytes"].as_u64().unwrap() > 0);
    handle.shutdown().await;
}

#[tokio::test]
async fn approvals_list_in_pages_and_the_client_follows_the_cursor() {
    let handle = server(RuntimeConfig {
        max_sessions_per_tenant: 2000,
        max_pending_approvals: 2000,
        ..crate::support::runtime::policy_config(
            r#"
            [[rule]]
            id = "all"
            tool = "t/gated"
            action = "approval"
            "#,
        )
    })
    .await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"t/gated": {"ok": true}})).await;
    let mut ids = Vec::new();
    for i in 0..130 {
        let (status, body) = api.execute(&sid, "t/gated", json!({"n": i})).await;
        assert_eq!(status, 202, "{body}");
        ids.push(body["approval_id"].as_str().unwrap().to_owned());
    }
    // Another tenant's approvals are neither listed nor counted in a page.
    let other = Api::new(&handle).with_tenant("other");
    let theirs = other.session(json!({"t/gated": {"ok": true}})).await;
    assert_eq!(other.execute(&theirs, "t/gated", json!({})).await.0, 202);
    let (status, first) = api.get("/v1/approvals").await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["approvals"].as_array().unwrap().len(), 100);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let (_, second) = api.get(&format!("/v1/approvals?cursor={cursor}")).await;
    assert_eq!(second["approvals"].as_array().unwrap().len(), 30);
    assert!(second.get("next_cursor").is_none(), "{second}");
    let listed: Vec<String> = first["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["approvals"].as_array().unwrap())
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, ids);
    // A decided row leaves the pending pages but not `status=all`'s.
    let (status, _) = api
        .post(&format!("/v1/approvals/{}/deny", ids[0]), json!({}))
        .await;
    assert_eq!(status, 200);
    let (_, small) = api.get("/v1/approvals?limit=7").await;
    assert_eq!(small["approvals"].as_array().unwrap().len(), 7);
    assert_eq!(small["approvals"][0]["id"], ids[1].as_str());
    let (_, all) = api.get("/v1/approvals?status=all&limit=7").await;
    assert_eq!(all["approvals"][0]["id"], ids[0].as_str());
    let cursor = all["next_cursor"].as_str().unwrap();
    let (_, next) = api
        .get(&format!("/v1/approvals?status=all&limit=7&cursor={cursor}"))
        .await;
    assert_eq!(next["approvals"][0]["id"], ids[7].as_str());
    let (status, err) = api.get("/v1/approvals?cursor=nope").await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["code"], "invalid_query");
    let (status, _) = api.get("/v1/approvals?limit=-1").await;
    assert_eq!(status, 400);

    // The inspector's re-read walks every page: 1,130 rows past the 1,000 a page holds.
    for i in 0..1000 {
        assert_eq!(api.execute(&sid, "t/gated", json!({"m": i})).await.0, 202);
    }
    let rest = RestClient::new(&handle.url(), None).unwrap();
    let all = rest.approvals().await.unwrap();
    assert_eq!(all.approvals.len(), 1130);
    assert_eq!(all.approvals[0].id, ids[0]);
    assert!(all.next_cursor.is_none());
    handle.shutdown().await;
}

/// Every count a client sends is checked before anything is sized by it: a billion
/// attempts, or a billion rows a page, is a 400 at once, not a plan built in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_billion_of_anything_a_client_counts_is_refused_before_it_is_allocated() {
    let _one = MEASURED.lock().await;
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let suite = json!({"suite": "s", "cases": [
        {"id": "a", "input": "x", "skip": "counted only"},
        {"id": "b", "input": "x", "skip": "counted only"}
    ]});
    let before = rss_bytes();
    for repeat in [1_000_000_000_u64, u64::from(u32::MAX)] {
        let clock = std::time::Instant::now();
        let (status, error) = api
            .post(
                "/v1/evals/runs",
                json!({"suites": [suite.clone()], "repeat": repeat}),
            )
            .await;
        let took = clock.elapsed();
        assert_eq!(status, 400, "{error}");
        assert_eq!(error["field"], "/repeat", "{error}");
        let attempts = 2 * repeat;
        assert_eq!(
            error["message"],
            format!("the run plans {attempts} case attempts; the limit is 10000")
        );
        // Building the plan took minutes and gigabytes; the count takes nothing.
        assert!(took < std::time::Duration::from_secs(1), "{took:?}");
    }
    for path in ["/v1/sessions", "/v1/approvals", "/v1/events"] {
        for limit in ["1000000000", "0"] {
            let (status, error) = api.get(&format!("{path}?limit={limit}")).await;
            assert_eq!(status, 400, "{path}?limit={limit}: {error}");
            assert_eq!(error["code"], "invalid_query", "{error}");
            let message = error["message"].as_str().unwrap();
            assert!(
                message.starts_with(&format!(
                    "limit {limit} is out of range: a page holds 1 to "
                )),
                "{message}"
            );
        }
    }
    let (status, page) = api.get("/v1/events?limit=10000").await;
    assert_eq!(status, 200, "the largest page is still served: {page}");
    let grown = rss_bytes().saturating_sub(before);
    assert!(grown < OVERHEAD, "RSS grew {grown} bytes");
    handle.shutdown().await;
}

/// The count cap evicts too, and `/health` says so: events gone past `retained_events`
/// are counted as the byte budget's are.
#[tokio::test]
async fn health_counts_events_the_count_cap_evicted() {
    let handle = server(RuntimeConfig {
        retained_events: 5,
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    for _ in 0..12 {
        create(&api, json!({"servers": [], "user_id": "u"})).await;
    }
    let (_, page) = api.get("/v1/events?since=0").await;
    let kept = page["events"].as_array().unwrap().len();
    assert_eq!(kept, 5, "{page}");
    let (_, health) = api.get("/health").await;
    assert_eq!(health["memory"]["evicted_events"], 12 - 5, "{health}");
    assert!(
        health["memory"]["evicted_event_bytes"].as_u64().unwrap() > 0,
        "{health}"
    );
    handle.shutdown().await;
}
