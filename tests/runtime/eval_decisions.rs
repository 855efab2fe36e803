//! An eval case deciding, as a human would, the calls a policy rule holds: approved ones
//! are replayed through the mock and the agent goes on with the result, denied ones give
//! it the denial; a rule id the policy does not have is refused at run start.

use crate::support::runtime::*;
use serde_json::{Value, json};

const POLICY: &str = "[[rule]]\nid = \"big_payments\"\ntool = \"*/create_payment\"\naction = \"approval\"\nwhen = \"input.value > 1000\"\n";

/// Two cases charging R$5000 (held by `big_payments`), one approving, one denying; the
/// agent answers by what its call came back with.
fn suite(decisions: &[(&str, Value)]) -> Value {
    let cases: Vec<Value> = decisions
        .iter()
        .map(|(id, decision)| {
            json!({
                "id": id,
                "input": "Charge R$5000",
                "decisions": {"big_payments": decision},
                "assert": {"contains": if *id == "approve" { "pay_1" } else { "denied" }}
            })
        })
        .collect();
    json!({
        "suite": "payments",
        "defaults": {
            "mocks": {"asaas/create_payment": [{"id": "pay_1", "status": "PENDING"}]},
            "model": {"strict": true, "sequence": [
                {"tool_calls": [{"name": "asaas/create_payment", "arguments": {"value": 5000}}]},
                {"when": [
                    {"envelope": "policy_denied", "then": {"text": "The payment was denied."}},
                    {"path": "$.id", "equals": "pay_1", "then": {"text": "Created pay_1."}}
                ], "else": {"text": "The payment is waiting for approval."}}
            ]}
        },
        "cases": cases
    })
}

#[tokio::test]
async fn a_case_approves_or_denies_a_held_call_and_the_agent_goes_on() {
    let handle = policy_server(POLICY).await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post(
            "/v1/evals/runs",
            json!({"suites": [suite(&[("approve", json!("approve")), ("deny", json!("deny"))])]}),
        )
        .await;
    assert_eq!(status, 202, "{created}");
    let id = created["run_id"].as_str().unwrap().to_owned();
    handle
        .runtime()
        .wait_eval_run("default", &id)
        .await
        .unwrap();
    let (status, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
    assert_eq!(status, 200, "{detail}");
    let cases = by_case(&detail);

    let approved = &cases["approve"];
    assert_eq!(approved["status"], "passed", "{approved:#}");
    assert_eq!(approved["output"], "Created pay_1.", "{approved:#}");
    let denied = &cases["deny"];
    assert_eq!(denied["status"], "passed", "{denied:#}");
    assert_eq!(denied["output"], "The payment was denied.", "{denied:#}");

    // Each held call reads decided, by the case, and the approved one carries its replay.
    let (status, list) = api.get("/v1/approvals?status=all").await;
    assert_eq!(status, 200, "{list}");
    let rows = list["approvals"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{list:#}");
    let row = |by: &str| {
        rows.iter()
            .find(|r| r["decided_by"] == by)
            .unwrap_or_else(|| panic!("no approval decided by {by} in {list:#}"))
    };
    let yes = row("eval:payments/approve");
    assert_eq!(yes["status"], "approved", "{yes:#}");
    assert_eq!(yes["rule_id"], "big_payments");
    assert_eq!(
        yes["replay"],
        json!({"result": {"id": "pay_1", "status": "PENDING"}}),
        "{yes:#}"
    );
    let no = row("eval:payments/deny");
    assert_eq!(no["status"], "denied", "{no:#}");
    assert!(no["replay"].is_null(), "{no:#}");

    // The stream tells it as a human's decisions: two resolved, one replayed.
    let kinds: Vec<String> = handle
        .runtime()
        .events_since(0, 1000)
        .iter()
        .map(|f| f.event.kind().to_owned())
        .collect();
    let count = |kind: &str| kinds.iter().filter(|k| *k == kind).count();
    assert_eq!(count("approval.requested"), 2, "{kinds:?}");
    assert_eq!(count("approval.resolved"), 2, "{kinds:?}");
    assert_eq!(count("approval.replayed"), 1, "{kinds:?}");
    handle.shutdown().await;
}

#[tokio::test]
async fn a_rule_the_policy_does_not_have_is_refused_at_run_start() {
    let handle = policy_server(POLICY).await;
    let api = Api::new(&handle);
    let mut document = suite(&[("approve", json!("approve"))]);
    document["cases"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "typo", "input": "x", "decisions": {"big_paymnets": "approve"}}));
    let (status, body) = api
        .post("/v1/evals/runs", json!({"suites": [document]}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "invalid_suite", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("\"typo\"") && message.contains("\"big_paymnets\""),
        "{message}"
    );
    // Nothing ran.
    let (_, runs) = api.get("/v1/approvals?status=all").await;
    assert_eq!(runs["approvals"], json!([]), "{runs}");
    handle.shutdown().await;
}

#[tokio::test]
async fn a_decision_other_than_approve_or_deny_is_the_suites_error() {
    let handle = policy_server(POLICY).await;
    let api = Api::new(&handle);
    let (status, body) = api
        .post(
            "/v1/evals/runs",
            json!({"suites": [suite(&[("approve", json!("maybe"))])]}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "invalid_suite", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("decisions")
            && message.contains("expected \"approve\" or \"deny\", found \"maybe\""),
        "{message}"
    );
    handle.shutdown().await;
}
