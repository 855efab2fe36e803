//! Every frame the runtime really sends on `/v1/observe` — its own kinds, a gap, and
//! seed-001 fixtures posted to `POST /v1/events` — validates against
//! docs/protocol-v1.schema.json.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{Policy, RuntimeConfig};
use std::collections::BTreeSet;
use std::path::Path;

fn validator() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol-v1.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seed001")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn real_frames_validate_against_the_schema() {
    let handle = server(RuntimeConfig {
        retained_events: 1000,
        policy: Policy::from_toml(
            "[[rule]]\nid = \"no\"\ntool = \"*/refund\"\naction = \"deny\"\n\
             [[rule]]\nid = \"hold\"\ntool = \"*/pay\"\naction = \"approval\"\n",
        )
        .unwrap(),
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let (_, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u", "metadata": {"suite": "s"},
                   "mocks": {"asaas/pay": {"id": "p"}, "asaas/nfe": [{"id": "n"}], "asaas/refund": {}},
                   "model": {"sequence": [
                       {"tool_calls": [{"name": "asaas/nfe", "arguments": {"v": 1}, "latency_ms": 5},
                                       {"name": "asaas/pay", "arguments": {}}]},
                       {"text": "done"}],
                     "fail_on_step": [{"step": 2, "error": "Rate limited"}]}}),
        )
        .await;
    let sid = created["id"].as_str().unwrap().to_owned();
    api.execute(&sid, "asaas/nfe", json!({})).await;
    api.execute(&sid, "asaas/missing", json!({})).await;
    api.execute(&sid, "asaas/refund", json!({})).await;
    let (_, held) = api.execute(&sid, "asaas/pay", json!({"value": 1})).await;
    let (_, second) = api.execute(&sid, "asaas/pay", json!({"value": 2})).await;
    api.post(
        &format!(
            "/v1/approvals/{}/approve",
            held["approval_id"].as_str().unwrap()
        ),
        json!({"by": "ana", "note": "ok"}),
    )
    .await;
    api.post(
        &format!(
            "/v1/approvals/{}/deny",
            second["approval_id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await;
    api.post(
        &format!("/v1/sessions/{sid}/send"),
        json!({"message": "go"}),
    )
    .await;
    api.post(
        &format!("/v1/sessions/{sid}/send"),
        json!({"message": "again"}),
    )
    .await;
    let fixtures: Vec<Value> = [
        "step_completed.json",
        "completed.json",
        "failed.json",
        "eval_completed.json",
    ]
    .iter()
    .map(|name| fixture(name))
    .collect();
    let (status, body) = api.post("/v1/events", Value::Array(fixtures)).await;
    assert_eq!(status, 200, "{body}");
    api.delete(&format!("/v1/sessions/{sid}")).await;

    let total = handle.runtime().events_since(0, 1000).len();
    let validator = validator();
    let mut ws = observe(&handle, "?since=0").await;
    let mut kinds = BTreeSet::new();
    for frame in frames(&mut ws, total).await {
        let errors: Vec<String> = validator
            .iter_errors(&frame)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{} fails the schema: {errors:?}\n{frame}",
            frame["kind"]
        );
        kinds.insert(frame["kind"].as_str().unwrap().to_owned());
    }
    let want: BTreeSet<String> = [
        "session.created",
        "session.closed",
        "tool.called",
        "approval.requested",
        "approval.resolved",
        "approval.replayed",
        "agent.step.completed",
        "agent.completed",
        "agent.failed",
        "agent.eval.completed",
    ]
    .iter()
    .map(std::string::ToString::to_string)
    .collect();
    assert_eq!(kinds, want);

    // And a gap frame, from a runtime whose log is tiny.
    let small = server(RuntimeConfig {
        retained_events: 2,
        ..test_config()
    })
    .await;
    let api = Api::new(&small);
    for _ in 0..4 {
        api.session(json!({})).await;
    }
    let mut ws = observe(&small, "?since=0").await;
    let gap = frames(&mut ws, 1).await.remove(0);
    assert_eq!(gap["kind"], "stream.gap");
    let errors: Vec<String> = validator.iter_errors(&gap).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}\n{gap}");
}
