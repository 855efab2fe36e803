//! Approvals over real HTTP: queue, approve (replay through the mock gate), deny, 409 on
//! a second decision, 410 after expiry, and the events each step emits.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{Clock, RuntimeConfig};
use std::time::Duration;

fn config() -> RuntimeConfig {
    policy_config(
        "[[rule]]\nid = \"payments_require_approval\"\ntool = \"*/create_payment\"\naction = \"approval\"\n",
    )
}

fn counter(list: &Value, tool: &str) -> Value {
    list["sessions"][0]["mocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool"] == tool)
        .map(|m| m["counter"].clone())
        .unwrap()
}

fn kinds(handle: &spyglass::runtime::ServerHandle) -> Vec<String> {
    handle
        .runtime()
        .events_since(0, 1000)
        .iter()
        .map(|f| f.event.kind().to_owned())
        .collect()
}

async fn queue(api: &Api, sid: &str) -> String {
    let (status, body) = api
        .execute(sid, "asaas/create_payment", json!({"value": 5}))
        .await;
    assert_eq!(status, 202, "{body}");
    body["approval_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn approve_replays_and_advances_the_counter_by_one() {
    let handle = server(config()).await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({"asaas/create_payment": [{"id": "pay_1"}, {"id": "pay_2"}]}))
        .await;
    let first = queue(&api, &sid).await;
    let second = queue(&api, &sid).await;
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(
        counter(&list, "asaas/create_payment"),
        json!({"consumed": 0, "total": 2})
    );

    let (status, pending) = api.get("/v1/approvals?status=pending").await;
    assert_eq!(status, 200);
    let rows = pending["approvals"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["id"], first.as_str());
    assert_eq!(rows[0]["status"], "pending");
    assert_eq!(rows[0]["session_id"], sid.as_str());
    assert_eq!(rows[0]["tool"], "asaas/create_payment");
    assert_eq!(rows[0]["input"], json!({"value": 5}));
    assert_eq!(rows[0]["rule_id"], "payments_require_approval");

    // Empty body (as the SDK sends it) is accepted.
    let (status, view) = api
        .post_raw(&format!("/v1/approvals/{first}/approve"), "")
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "approved");
    assert_eq!(view["replay"], json!({"result": {"id": "pay_1"}}));
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(
        counter(&list, "asaas/create_payment"),
        json!({"consumed": 1, "total": 2})
    );

    let (status, view) = api
        .post(
            &format!("/v1/approvals/{second}/deny"),
            json!({"by": "ana", "note": "too big"}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(view["status"], "denied");
    assert_eq!(view["decided_by"], "ana");
    assert_eq!(view["note"], "too big");
    assert!(view.get("replay").is_none());
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(
        counter(&list, "asaas/create_payment"),
        json!({"consumed": 1, "total": 2})
    );

    // A second decision either way is 409.
    for (id, verb) in [(&first, "deny"), (&second, "approve")] {
        let (status, body) = api
            .post(&format!("/v1/approvals/{id}/{verb}"), json!({}))
            .await;
        assert_eq!(status, 409);
        assert_eq!(body["code"], "approval_already_decided");
    }
    let (_, pending) = api.get("/v1/approvals").await;
    assert_eq!(pending["approvals"].as_array().unwrap().len(), 0);
    let (_, all) = api.get("/v1/approvals?status=all").await;
    assert_eq!(all["approvals"].as_array().unwrap().len(), 2);

    let kinds = kinds(&handle);
    let tail: Vec<&str> = kinds.iter().skip(1).map(String::as_str).collect();
    assert_eq!(
        tail,
        [
            "tool.called",
            "approval.requested",
            "tool.called",
            "approval.requested",
            "approval.resolved",
            "approval.replayed",
            "approval.resolved",
        ]
    );
    let frames = handle.runtime().events_since(0, 100);
    let replayed: Value = serde_json::from_str(&spyglass::protocol::encode(&frames[6])).unwrap();
    assert_eq!(replayed["approvalId"], first.as_str());
    assert_eq!(replayed["counter"], json!({"consumed": 1, "total": 2}));
    assert_eq!(replayed["outcome"], json!({"result": {"id": "pay_1"}}));
    let requested: Value = serde_json::from_str(&spyglass::protocol::encode(&frames[2])).unwrap();
    let called: Value = serde_json::from_str(&spyglass::protocol::encode(&frames[1])).unwrap();
    assert_eq!(requested["callId"], called["callId"]);
    assert_eq!(replayed["callId"], called["callId"]);
}

#[tokio::test]
async fn replay_whose_mock_is_gone_is_an_engine_error() {
    let handle = server(config()).await;
    let api = Api::new(&handle);
    // Held by policy though never mocked: the replay finds nothing to serve.
    let sid = api.session(json!({"asaas/other": {}})).await;
    let id = queue(&api, &sid).await;
    let (status, view) = api
        .post(&format!("/v1/approvals/{id}/approve"), json!({}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(view["replay"]["envelope"]["code"], "mocks_engine_error");

    // A closed session: closing expired its approvals, so nothing is replayed.
    let sid = api
        .session(json!({"asaas/create_payment": [{"id": "p"}]}))
        .await;
    let id = queue(&api, &sid).await;
    api.delete(&format!("/v1/sessions/{sid}")).await;
    let (status, view) = api
        .post(&format!("/v1/approvals/{id}/approve"), json!({}))
        .await;
    assert_eq!(
        (status, view["code"].as_str()),
        (410, Some("approval_expired"))
    );

    // A stateful mock consumed while the call waited: the replay is exhausted.
    let sid = api
        .session(json!({"asaas/create_payment": [{"id": "p"}], "asaas/refund": {}}))
        .await;
    let id = queue(&api, &sid).await;
    // Approve another held call first so the single entry is used up.
    let other = queue(&api, &sid).await;
    api.post(&format!("/v1/approvals/{other}/approve"), json!({}))
        .await;
    let (_, view) = api
        .post(&format!("/v1/approvals/{id}/approve"), json!({}))
        .await;
    assert_eq!(view["replay"]["envelope"]["code"], "mocks_exhausted");
}

#[tokio::test]
async fn decisions_after_expiry_are_410_and_the_row_expires() {
    let clock = Clock::manual();
    let handle = server(RuntimeConfig {
        approval_ttl: Duration::from_mins(1),
        clock: clock.clone(),
        ..config()
    })
    .await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({"asaas/create_payment": {"id": "p"}}))
        .await;
    let id = queue(&api, &sid).await;
    let other = queue(&api, &sid).await;
    clock.advance(Duration::from_mins(2)).unwrap();
    let (status, body) = api
        .post(&format!("/v1/approvals/{id}/approve"), json!({}))
        .await;
    assert_eq!(status, 410);
    assert_eq!(body["code"], "approval_expired");
    let (status, _) = api
        .post(&format!("/v1/approvals/{id}/deny"), json!({}))
        .await;
    assert_eq!(status, 410);
    let (_, pending) = api.get("/v1/approvals?status=pending").await;
    assert_eq!(pending["approvals"].as_array().unwrap().len(), 0);
    let (_, all) = api.get("/v1/approvals?status=all").await;
    assert!(
        all["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["status"] == "expired")
    );
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(
        counter(&list, "asaas/create_payment"),
        json!({"consumed": 0})
    );
    // Each expiry was announced once.
    let expired = handle
        .runtime()
        .events_since(0, 100)
        .iter()
        .filter(|f| {
            matches!(&f.event, spyglass::protocol::Event::ApprovalResolved(r)
                if r.decision == spyglass::protocol::events::Decision::Expired)
        })
        .count();
    assert_eq!(expired, 2);
    assert!(!other.is_empty());
}

#[tokio::test]
async fn bad_decisions_and_unknown_ids() {
    let handle = server(config()).await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({"asaas/create_payment": {"id": "p"}}))
        .await;
    let id = queue(&api, &sid).await;
    let (status, body) = api.post("/v1/approvals/apr_nope/approve", json!({})).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
    for bad in ["{oops", "[1]", r#"{"by": 5}"#, r#"{"whom": "x"}"#] {
        let (status, body) = api
            .post_raw(&format!("/v1/approvals/{id}/approve"), bad)
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("invalid_body")),
            "{bad}"
        );
    }
    // The bad bodies decided nothing.
    let (_, pending) = api.get("/v1/approvals").await;
    assert_eq!(pending["approvals"][0]["status"], "pending");
}

#[tokio::test]
async fn expiry_is_announced_on_the_stream_without_a_read() {
    let clock = Clock::manual();
    let handle = server(RuntimeConfig {
        approval_ttl: Duration::from_mins(1),
        clock: clock.clone(),
        ..config()
    })
    .await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({"asaas/create_payment": {"id": "p"}}))
        .await;
    let mut ws = observe(&handle, "?kinds=approval.*").await;
    let id = queue(&api, &sid).await;
    let requested = next_frame(&mut ws, Duration::from_secs(5)).await.unwrap();
    assert_eq!(requested["kind"], "approval.requested");
    clock.advance(Duration::from_mins(2)).unwrap();
    // Nobody lists or decides: the runtime's own sweep expires the row.
    let resolved = next_frame(&mut ws, Duration::from_secs(5)).await.unwrap();
    assert_eq!(resolved["kind"], "approval.resolved");
    assert_eq!(resolved["decision"], "expired");
    assert_eq!(resolved["approvalId"], id.as_str());
}
