//! The calls an eval case made, in its run detail over HTTP: each tool, its arguments, what
//! it answered (a mock's result or an envelope's code) and its duration, in call order.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::protocol::rest::EvalRunDetail;
use spyglass::runtime::RuntimeConfig;

/// A case whose agent charges (mocked), then refunds (not mocked), then answers.
fn suite() -> Value {
    json!({
        "suite": "calls",
        "cases": [
            {
                "id": "charge then refund",
                "input": "Charge R$5, then refund it",
                "mocks": {"asaas/create_payment": {"id": "pay_1", "status": "PENDING"}},
                "model": {"sequence": [
                    {"tool_calls": [{"name": "asaas/create_payment", "arguments": {"value": 5}}]},
                    {"tool_calls": [{"name": "asaas/refund_payment", "arguments": {"id": "pay_1"}}]},
                    {"text": "Charged pay_1; the refund is unavailable"}
                ]},
                "assert": {"contains": "pay_1"}
            },
            {"id": "later", "input": "x", "skip": "not yet", "assert": {"contains": "x"}}
        ]
    })
}

/// Runs the suite over HTTP and answers the run detail as the route gives it.
async fn run_detail(config: RuntimeConfig) -> Value {
    let handle = server(config).await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post("/v1/evals/runs", json!({"suites": [suite()]}))
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
    handle.shutdown().await;
    detail
}

fn case<'a>(detail: &'a Value, id: &str) -> &'a Value {
    detail["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["case"] == id)
        .unwrap_or_else(|| panic!("no case {id} in {detail:#}"))
}

#[tokio::test]
async fn a_case_lists_its_calls_in_order_with_results_and_envelopes() {
    let detail = run_detail(test_config()).await;
    let charged = case(&detail, "charge then refund");
    assert_eq!(charged["status"], "passed", "{charged:#}");
    let calls = charged["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{charged:#}");
    assert_eq!(calls[0]["tool"], "asaas/create_payment");
    assert_eq!(calls[0]["arguments"], json!({"value": 5}));
    assert_eq!(
        calls[0]["outcome"],
        json!({"result": {"id": "pay_1", "status": "PENDING"}})
    );
    assert_eq!(calls[1]["tool"], "asaas/refund_payment");
    assert_eq!(calls[1]["arguments"], json!({"id": "pay_1"}));
    assert_eq!(
        calls[1]["outcome"]["envelope"]["code"], "tool_not_mocked",
        "{charged:#}"
    );
    for call in calls {
        assert!(call["duration_ms"].as_f64().unwrap() >= 0.0, "{call}");
    }
    assert!(charged.get("callsOmitted").is_none(), "{charged:#}");
    // A skipped case made no call.
    assert_eq!(case(&detail, "later")["calls"], json!([]));
    // The Rust client reads the detail back whole.
    let read: EvalRunDetail = serde_json::from_value(detail.clone()).unwrap();
    assert_eq!(read.cases[0].calls.len() + read.cases[1].calls.len(), 2);
    assert_eq!(serde_json::to_value(&read).unwrap(), detail);
}

#[tokio::test]
async fn a_case_past_the_sessions_retained_calls_says_how_many_it_left_out() {
    let detail = run_detail(RuntimeConfig {
        retained_calls: 1,
        ..test_config()
    })
    .await;
    let charged = case(&detail, "charge then refund");
    let calls = charged["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{charged:#}");
    assert_eq!(calls[0]["tool"], "asaas/refund_payment", "the newest stays");
    assert_eq!(charged["callsOmitted"], 1, "{charged:#}");
}
