//! Eval results that tell the truth, over real HTTP: a seed-001 `MetricResult` without
//! `status` counts by `pass`, a contradicting `status` is refused, a one-case rerun is no
//! suite run, a call held for approval is no pass, the case JSON carries the final text,
//! and execute's 202 and `codespar_*` mocks read right for the SDK.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{Policy, RuntimeConfig};
use std::time::Duration;

async fn run(api: &Api, body: Value) -> Value {
    let (status, created) = api.post("/v1/evals/runs", body).await;
    assert_eq!(status, 202, "{created}");
    run_detail(api, created["run_id"].as_str().unwrap()).await
}

/// Polls a run until it completed.
async fn run_detail(api: &Api, id: &str) -> Value {
    for _ in 0..200 {
        let (status, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
        assert_eq!(status, 200, "{detail}");
        if detail["status"] == "completed" {
            return detail;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {id} did not complete in 10 s");
}

fn held_config() -> RuntimeConfig {
    RuntimeConfig {
        test_mode: true,
        policy: Policy::from_toml(
            r#"
            [[rule]]
            id = "big_payments"
            tool = "*/create_payment"
            action = "approval"
            when = "input.value > 1000"
            "#,
        )
        .unwrap(),
        ..RuntimeConfig::default()
    }
}

fn suite() -> Value {
    let charge = |value: u32, text: &str| {
        json!({"sequence": [
            {"tool_calls": [{"name": "asaas/create_payment", "arguments": {"value": value}}]},
            {"text": text}
        ]})
    };
    json!({
        "suite": "truth",
        "defaults": {"mocks": {"asaas/create_payment": {"id": "pay_1"}}},
        "cases": [
            {"id": "small", "input": "Charge R$5", "model": charge(5, "Charged pay_1"),
             "assert": {"contains": "pay_1"}},
            {"id": "big", "input": "Charge R$5000", "model": charge(5000, "Charged pay_1"),
             "assert": {"contains": "pay_1"}},
        ]
    })
}

fn suite_summary(summary: &Value, name: &str) -> Value {
    summary["suites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s.get("suite").and_then(Value::as_str) == Some(name))
        .cloned()
        .unwrap_or_else(|| panic!("no suite {name} in {summary:#}"))
}

fn case_summary(suite: &Value, name: &str) -> Value {
    suite["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["case"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no case {name} in {suite:#}"))
}

#[tokio::test]
async fn a_failing_metric_without_status_is_counted_as_failed() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let events = json!([
        {"kind": "agent.eval.completed", "suite": "ext", "case": "reset", "pass": false,
         "reason": "no reset link", "tokens": {"prompt": 1, "completion": 1, "total": 2},
         "cost": 0, "duration": 5},
        {"kind": "agent.eval.completed", "suite": "ext", "case": "price", "pass": true,
         "score": 1.0, "tokens": {"prompt": 1, "completion": 1, "total": 2},
         "cost": 0, "duration": 5},
    ]);
    let (status, body) = api.post("/v1/events", events).await;
    assert_eq!(status, 200, "{body}");
    let (_, summary) = api.get("/v1/evals/summary").await;
    let ext = suite_summary(&summary, "ext");
    assert_eq!(
        (&ext["passed"], &ext["failed"]),
        (&json!(1), &json!(1)),
        "{ext:#}"
    );
    assert_eq!(ext["pass_rate"], json!(0.5));
    assert_eq!(case_summary(&ext, "reset")["last_status"], "failed");

    // On the stream it reads as failed too, with `pass` as sent.
    let frames: Vec<Value> = handle
        .runtime()
        .events_since(0, 100)
        .iter()
        .map(|f| serde_json::from_str(&spyglass::protocol::encode(f)).unwrap())
        .collect();
    let reset = frames.iter().find(|f| f["case"] == "reset").unwrap();
    assert_eq!(
        (&reset["status"], &reset["pass"]),
        (&json!("failed"), &json!(false))
    );
}

#[tokio::test]
async fn a_status_that_contradicts_pass_is_refused_naming_the_field() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    for (status, pass) in [("passed", false), ("failed", true), ("error", true)] {
        let events = json!([
            {"kind": "agent.eval.completed", "suite": "ext", "case": "ok", "pass": true},
            {"kind": "agent.eval.completed", "suite": "ext", "case": "c",
             "status": status, "pass": pass},
        ]);
        let (code, body) = api.post("/v1/events", events).await;
        assert_eq!(code, 400, "{status}/{pass}: {body}");
        assert_eq!(body["code"], "invalid_event");
        assert_eq!(body["field"], "/status", "{body}");
        assert_eq!(body["index"], 1, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("disagrees"),
            "{body}"
        );
    }
    // Nothing of a refused batch counts.
    let (_, summary) = api.get("/v1/evals/summary").await;
    assert_eq!(summary["suites"], json!([]), "{summary:#}");
    // Agreeing fields, and a skip with either `pass`, are taken.
    let events = json!([
        {"kind": "agent.eval.completed", "suite": "ext", "case": "a", "status": "failed", "pass": false},
        {"kind": "agent.eval.completed", "suite": "ext", "case": "b", "status": "skipped", "pass": true},
    ]);
    let (code, body) = api.post("/v1/events", events).await;
    assert_eq!(code, 200, "{body}");
}

#[tokio::test]
async fn a_one_case_rerun_is_no_suite_run() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let first = run(&api, json!({"suites": [suite()]})).await;
    assert!(first.get("scope").is_none(), "{first:#}");
    let (_, before) = api.get("/v1/evals/summary").await;
    let before = suite_summary(&before, "truth");
    assert_eq!(before["runs"], 1);

    // The inspector's `r`: the suite as last run, one case, as a case run.
    let (_, document) = api.get("/v1/evals/suites/truth").await;
    let rerun = run(
        &api,
        json!({"suites": [document["document"]], "case": "small", "scope": "case"}),
    )
    .await;
    assert_eq!(rerun["scope"], "case", "{rerun:#}");
    assert_eq!(rerun["cases"][0]["scope"], "case");

    let (_, after) = api.get("/v1/evals/summary").await;
    let after = suite_summary(&after, "truth");
    assert_eq!(after["runs"], 1, "no new run: {after:#}");
    assert_eq!(after["trend"], before["trend"], "no new trend point");
    assert_eq!(after["passed"], before["passed"]);
    let small = case_summary(&after, "small");
    assert_eq!(small["last_rerun"], true, "{small:#}");
    assert_eq!(small["last_run_id"], rerun["run_id"]);
    assert!(case_summary(&after, "big").get("last_rerun").is_none());

    // The stream says so on every frame of the rerun.
    let frames = handle.runtime().events_since(0, 1000);
    let of_rerun: Vec<Value> = frames
        .iter()
        .map(|f| serde_json::from_str::<Value>(&spyglass::protocol::encode(f)).unwrap())
        .filter(|f| f["runId"] == rerun["run_id"])
        .collect();
    let kinds: Vec<&str> = of_rerun
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "eval.run.started",
            "agent.eval.completed",
            "eval.run.completed"
        ]
    );
    assert!(
        of_rerun.iter().all(|f| f["scope"] == "case"),
        "{of_rerun:#?}"
    );

    // A case run names one case; anything else is refused and runs nothing.
    for body in [
        json!({"suites": [suite()], "case": "*", "scope": "case"}),
        json!({"suites": [suite()], "scope": "case"}),
    ] {
        let (status, err) = api.post("/v1/evals/runs", body).await;
        assert_eq!(status, 400, "{err}");
        assert_eq!(err["field"], "/scope", "{err}");
    }
    // A `case` filter without the scope (`spyglass eval --case`) is a suite run.
    let again = run(&api, json!({"suites": [suite()], "case": "small"})).await;
    assert!(again.get("scope").is_none(), "{again:#}");
    let (_, last) = api.get("/v1/evals/summary").await;
    let last = suite_summary(&last, "truth");
    assert_eq!(last["runs"], 2);
    assert!(case_summary(&last, "small").get("last_rerun").is_none());
}

#[tokio::test]
async fn the_inspectors_rerun_of_one_case_is_a_case_run() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    run(&api, json!({"suites": [suite()]})).await;
    let client = spyglass::client::RestClient::new(&handle.url(), None).unwrap();
    let created = client.rerun_by_name("truth", Some("big")).await.unwrap();
    let detail = run_detail(&api, &created.run_id).await;
    assert_eq!(detail["scope"], "case", "{detail:#}");
    let suite_run = client.rerun_by_name("truth", None).await.unwrap();
    let detail = run_detail(&api, &suite_run.run_id).await;
    assert!(detail.get("scope").is_none(), "{detail:#}");
    let (_, summary) = api.get("/v1/evals/summary").await;
    assert_eq!(suite_summary(&summary, "truth")["runs"], 2, "{summary:#}");
}

#[tokio::test]
async fn a_call_held_for_approval_is_no_pass_and_leaves_no_live_approval() {
    let handle = server(held_config()).await;
    let api = Api::new(&handle);
    let detail = run(&api, json!({"suites": [suite()]})).await;
    let cases = detail["cases"].as_array().unwrap();
    let big = cases.iter().find(|c| c["case"] == "big").unwrap();
    assert_eq!(big["status"], "error", "{big:#}");
    assert_eq!(big["pass"], false);
    assert_eq!(big["reason"], "held for approval");
    let small = cases.iter().find(|c| c["case"] == "small").unwrap();
    assert_eq!(small["status"], "passed", "{small:#}");
    assert_eq!(
        (&detail["passed"], &detail["errored"]),
        (&json!(1), &json!(1))
    );

    // The case's session is closed, so its approval was cancelled with it: approving it
    // now says so instead of replaying into a session that is gone.
    let (_, approvals) = api.get("/v1/approvals?status=all").await;
    let rows = approvals["approvals"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{approvals:#}");
    assert_eq!(rows[0]["status"], "cancelled", "{approvals:#}");
    let id = rows[0]["id"].as_str().unwrap();
    let (status, body) = api
        .post(&format!("/v1/approvals/{id}/approve"), json!({}))
        .await;
    assert_eq!(status, 410, "{body}");
    assert_eq!(body["code"], "approval_expired");
    let (_, pending) = api.get("/v1/approvals?status=pending").await;
    assert_eq!(pending["approvals"], json!([]));
}

#[tokio::test]
async fn the_case_json_carries_the_final_text() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let detail = run(&api, json!({"suites": [suite()]})).await;
    for case in detail["cases"].as_array().unwrap() {
        assert_eq!(case["output"], "Charged pay_1", "{case:#}");
    }
    // A case that produced no text has no output.
    let failing = json!({"suite": "f", "cases": [{"id": "boom", "input": "x",
        "model": {"fail_on_step": [{"step": 0, "error": "Rate limited"}]},
        "assert": {"contains": "x"}}]});
    let detail = run(&api, json!({"suites": [failing]})).await;
    let case = &detail["cases"][0];
    assert_eq!(case["status"], "error", "{case:#}");
    assert!(case.get("output").is_none(), "{case:#}");
}

#[tokio::test]
async fn a_held_execute_answers_the_envelope_at_the_top_and_in_data() {
    let handle = server(held_config()).await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({"asaas/create_payment": {"id": "pay_1"}}))
        .await;
    let (status, body) = api
        .execute(&sid, "asaas/create_payment", json!({"value": 5000}))
        .await;
    assert_eq!(status, 202, "{body}");
    // curl readers: the envelope at the top level.
    assert_eq!(body["code"], "approval_required");
    let id = body["approval_id"].as_str().unwrap();
    assert!(id.starts_with("apr_"), "{body}");
    assert!(body["expires_at"].is_string() && body["message"].is_string());
    // SDK readers: a ToolResult whose data is the envelope.
    assert_eq!(body["success"], false);
    assert_eq!(body["data"]["code"], "approval_required");
    assert_eq!(body["data"]["approval_id"], id);
    assert_eq!(body["data"]["expires_at"], body["expires_at"]);
    assert_eq!(body["data"]["message"], body["message"]);
    assert_eq!(body["tool"], "asaas/create_payment");
    assert_eq!(body["server"], "asaas");
    // Other envelopes are unchanged: the bare envelope.
    let (status, body) = api.execute(&sid, "asaas/other", json!({})).await;
    assert_eq!(status, 422);
    assert!(body.get("data").is_none(), "{body}");
}

#[tokio::test]
async fn codespar_builtins_are_mocked_like_any_tool() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let charge = json!({"id": "chg_1", "status": "PENDING", "amount": 125.0});
    let sid = api
        .session(json!({
            "codespar_charge": charge,
            "codespar_ship": [{"id": "shp_1"}],
        }))
        .await;
    let (status, body) = api
        .execute(&sid, "codespar_charge", json!({"amount": 125}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], charge);
    assert_eq!(body["server"], "codespar");
    assert_eq!(body["tool"], "codespar_charge");
    let (status, body) = api.execute(&sid, "codespar_ship", json!({})).await;
    assert_eq!((status, &body["data"]["id"]), (200, &json!("shp_1")));
    let (status, body) = api.execute(&sid, "codespar_ship", json!({})).await;
    assert_eq!((status, &body["code"]), (422, &json!("mocks_exhausted")));
    // An undeclared built-in is not mocked, like any tool.
    let (status, body) = api.execute(&sid, "codespar_issue", json!({})).await;
    assert_eq!(
        (status, &body["code"]),
        (422, &json!("tool_not_mocked")),
        "{body}"
    );
    // codespar_list_tools stays built in: it bypasses the gate and lists the mocks.
    let (status, body) = api.execute(&sid, "codespar_list_tools", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let names: Vec<&str> = body["data"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["codespar_charge", "codespar_ship", "codespar_list_tools"]
    );

    // It cannot be mocked, and malformed built-in names are refused by pointer.
    for name in ["codespar_list_tools", "codespar_", "codespar_Charge"] {
        let (status, body) = api
            .post(
                "/v1/sessions",
                json!({"servers": [], "user_id": "u", "mocks": {name: {}}}),
            )
            .await;
        assert_eq!(status, 400, "{name}: {body}");
        assert_eq!(body["code"], "mocks_invalid");
        assert_eq!(body["field"], format!("/mocks/{name}"));
    }
}
