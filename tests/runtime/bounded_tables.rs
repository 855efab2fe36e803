//! Tables that grew without bound: resolved approvals (count, bytes, pending cap) and the
//! eval pass-rate history (bytes), each kept within the runtime's byte budget.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{Clock, RuntimeConfig};

const MIB: usize = 1024 * 1024;

fn gated(config: RuntimeConfig) -> RuntimeConfig {
    RuntimeConfig {
        policy: policy_config(
            r#"
            [[rule]]
            id = "all"
            tool = "t/gated"
            action = "approval"
            "#,
        )
        .policy,
        ..config
    }
}

async fn memory(api: &Api) -> Value {
    let (status, health) = api.get("/health").await;
    assert_eq!(status, 200, "{health}");
    health["memory"].clone()
}

/// Every row of `GET /v1/approvals?status=all`, page by page.
async fn all_approvals(api: &Api) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, page) = api
            .get(&format!(
                "/v1/approvals?status=all&limit=1000&cursor={cursor}"
            ))
            .await;
        assert_eq!(status, 200, "{page}");
        rows.extend(page["approvals"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => next.clone_into(&mut cursor),
            None => return rows,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_decided_approvals_keep_the_table_bounded() {
    // Room for the whole log (~20 MB), so the count bound is what drops rows.
    let budget = 64 * MIB;
    let handle = server(gated(RuntimeConfig {
        max_retained_bytes: budget,
        max_resolved_approvals: 500,
        ..test_config()
    }))
    .await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"t/gated": {"ok": true}})).await;
    let pad = "x".repeat(4_000);
    let mut ids = Vec::new();
    // 2,000 approvals of ~4 KB each (8 MB), decided one by one.
    for i in 0..2000 {
        let (status, body) = api
            .execute(&sid, "t/gated", json!({"n": i, "pad": pad}))
            .await;
        assert_eq!(status, 202, "{body}");
        let id = body["approval_id"].as_str().unwrap().to_owned();
        let verdict = if i % 2 == 0 { "approve" } else { "deny" };
        let (status, decided) = api
            .post(
                &format!("/v1/approvals/{id}/{verdict}"),
                json!({"by": "qa"}),
            )
            .await;
        assert_eq!(status, 200, "{decided}");
        ids.push(id);
    }
    let rows = all_approvals(&api).await;
    let listed: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    // 500 kept, the newest, in order.
    assert_eq!(listed.len(), 500);
    let newest: Vec<&str> = ids[ids.len() - listed.len()..]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(listed, newest);
    let stats = memory(&api).await;
    let approval_bytes = stats["approval_bytes"].as_u64().unwrap() as usize;
    assert!(approval_bytes <= budget / 4, "{stats}");
    assert!(
        stats["retained_bytes"].as_u64().unwrap() as usize <= budget,
        "{stats}"
    );
    assert_eq!(
        stats["evicted_approvals"].as_u64().unwrap() as usize,
        2000 - listed.len(),
        "{stats}"
    );
    println!(
        "approvals: 2000 decided, {} kept, {approval_bytes} bytes, {stats}",
        listed.len()
    );
    // An evicted approval is gone; deciding it again is 404, a kept one 409.
    let (status, _) = api
        .post(&format!("/v1/approvals/{}/approve", ids[0]), json!({}))
        .await;
    assert_eq!(status, 404);
    let (status, _) = api
        .post(&format!("/v1/approvals/{}/approve", ids[1999]), json!({}))
        .await;
    assert_eq!(status, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decided_approvals_stay_within_a_quarter_of_the_budget() {
    let budget = 8 * MIB;
    let handle = server(gated(RuntimeConfig {
        max_retained_bytes: budget,
        ..test_config()
    }))
    .await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"t/gated": {"ok": true}})).await;
    let pad = "y".repeat(40_000);
    let mut peak = 0;
    // 300 × 40 KB = 12 MB of decided approvals, 1.5 times the whole budget.
    for i in 0..300 {
        let (status, body) = api
            .execute(&sid, "t/gated", json!({"n": i, "pad": pad}))
            .await;
        assert_eq!(status, 202, "{body}");
        let id = body["approval_id"].as_str().unwrap();
        let (status, _) = api
            .post(&format!("/v1/approvals/{id}/deny"), json!({}))
            .await;
        assert_eq!(status, 200);
        if i % 50 == 49 {
            let stats = memory(&api).await;
            let bytes = stats["approval_bytes"].as_u64().unwrap() as usize;
            assert!(bytes <= budget / 4, "{stats}");
            peak = peak.max(bytes);
        }
    }
    let stats = memory(&api).await;
    let kept = all_approvals(&api).await.len();
    assert!(kept < 300 && kept > 0, "{kept}");
    assert!(
        stats["evicted_approval_bytes"].as_u64().unwrap() > 6_000_000,
        "{stats}"
    );
    // The log may overshoot by one event; approvals never add past the budget.
    assert!(
        stats["retained_bytes"].as_u64().unwrap() as usize <= budget + 100_000,
        "{stats}"
    );
    println!("approvals by bytes: 300 × 40 KB denied, {kept} kept, peak {peak} bytes, {stats}");
}

#[tokio::test]
async fn pending_approvals_past_the_cap_are_refused_never_evicted() {
    let handle = server(gated(RuntimeConfig {
        max_pending_approvals: 20,
        max_resolved_approvals: 5,
        ..test_config()
    }))
    .await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"t/gated": {"ok": true}})).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let (status, body) = api.execute(&sid, "t/gated", json!({"n": i})).await;
        assert_eq!(status, 202, "{body}");
        ids.push(body["approval_id"].as_str().unwrap().to_owned());
    }
    let (status, body) = api.execute(&sid, "t/gated", json!({"n": 20})).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["code"], "too_many_pending_approvals", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("20 approvals"),
        "{body}"
    );
    // Nothing of the refused call was counted or emitted.
    let (_, events) = api.get(&format!("/v1/events?session={sid}")).await;
    let called = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool.called")
        .count();
    assert_eq!(called, 20, "{events}");
    // Another tenant has its own cap.
    let other = Api::new(&handle).with_tenant("other");
    let theirs = other.session(json!({"t/gated": {"ok": true}})).await;
    assert_eq!(other.execute(&theirs, "t/gated", json!({})).await.0, 202);
    // Every pending row is still listed: the resolved bound of 5 never touches them.
    let (_, pending) = api.get("/v1/approvals").await;
    assert_eq!(pending["approvals"].as_array().unwrap().len(), 20);
    // Deciding one makes room for one more.
    let (status, _) = api
        .post(&format!("/v1/approvals/{}/deny", ids[0]), json!({}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(api.execute(&sid, "t/gated", json!({"n": 21})).await.0, 202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eval_history_with_long_names_stays_within_its_share_of_the_budget() {
    let budget = 8 * MIB;
    let handle = server(RuntimeConfig {
        max_retained_bytes: budget,
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let suites: Vec<String> = (0..3)
        .map(|k| format!("suite-{k}-{}", "s".repeat(1000)))
        .collect();
    let case = |i: usize| format!("case-{i:05}-{}", "c".repeat(4000));
    let reason = "r".repeat(2000);
    // 1,500 results of distinct 4 KB cases in three 1 KB-named suites, over 30 runs:
    // ~16 MB of history kept before, twice the whole budget.
    for batch in 0..30 {
        let events: Vec<Value> = (0..50)
            .map(|j| {
                let i = batch * 50 + j;
                json!({"kind": "agent.eval.completed", "suite": suites[i % 3], "case": case(i),
                       "status": "failed", "pass": false, "reason": reason, "duration": 1,
                       "run_id": format!("run-{batch}")})
            })
            .collect();
        let (status, body) = api.post("/v1/events", json!(events)).await;
        assert_eq!(status, 200, "{body}");
        let stats = memory(&api).await;
        assert!(
            stats["eval_bytes"].as_u64().unwrap() as usize <= budget / 4,
            "after batch {batch}: {stats}"
        );
    }
    let stats = memory(&api).await;
    assert!(stats["evicted_evals"].as_u64().unwrap() > 1000, "{stats}");
    assert!(
        stats["retained_bytes"].as_u64().unwrap() as usize <= budget + 100_000,
        "{stats}"
    );
    let (status, summary) = api.get("/v1/evals/summary").await;
    assert_eq!(status, 200);
    let cases: Vec<&str> = summary["suites"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["cases"].as_array().unwrap())
        .map(|c| c["case"].as_str().unwrap())
        .collect();
    // The newest results are kept, the oldest went first.
    assert!(
        cases.contains(&case(1499).as_str()),
        "{} cases",
        cases.len()
    );
    assert!(!cases.contains(&case(0).as_str()));
    assert!(
        cases.len() > 50 && cases.len() < 1500,
        "{} cases",
        cases.len()
    );
    println!(
        "eval history: 1500 results, {} cases kept, {} summary bytes, {stats}",
        cases.len(),
        summary.to_string().len()
    );
}

#[tokio::test]
async fn expired_approvals_are_resolved_rows_and_go_the_same_way() {
    let clock = Clock::manual();
    let handle = server(gated(RuntimeConfig {
        approval_ttl: std::time::Duration::from_mins(1),
        clock: clock.clone(),
        max_resolved_approvals: 3,
        ..test_config()
    }))
    .await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"t/gated": {"ok": true}})).await;
    let mut ids = Vec::new();
    for i in 0..10 {
        let (status, body) = api.execute(&sid, "t/gated", json!({"n": i})).await;
        assert_eq!(status, 202, "{body}");
        ids.push(body["approval_id"].as_str().unwrap().to_owned());
    }
    clock.advance(std::time::Duration::from_mins(2)).unwrap();
    let rows = all_approvals(&api).await;
    let kept: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        kept,
        ids[7..].iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert!(rows.iter().all(|r| r["status"] == "expired"), "{rows:?}");
    let stats = memory(&api).await;
    assert_eq!(stats["evicted_approvals"], 7, "{stats}");
}
