//! Where the runtime's wire follows `CodeSpar` test mode over real HTTP: mock-store error
//! status, create-time mock gates, cancelled approvals, forwarded SDK events, served counts.

use crate::support::runtime::*;
use serde_json::{Value, json};

const APPROVAL_POLICY: &str = "[[rule]]\nid = \"big_payments\"\ntool = \"*/create_payment\"\naction = \"approval\"\nwhen = \"input.value > 1000\"\n";

/// Every event of the tenant, as `GET /v1/events` serves them.
async fn events(api: &Api) -> Vec<Value> {
    let (status, page) = api.get("/v1/events?since=0").await;
    assert_eq!(status, 200, "{page}");
    page["events"].as_array().unwrap().clone()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

#[tokio::test]
async fn a_mock_store_engine_error_is_422_not_a_retryable_503() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({"asaas/get_payment": {"$rules": [], "$fallback": {"id": "pay_1"}}}))
        .await;
    // A rules mock cannot read a number beyond f64: the mock store fails, and would again.
    let path = format!("/v1/sessions/{sid}/execute");
    for _ in 0..2 {
        let (status, body) = api
            .post_raw(
                &path,
                r#"{"tool":"asaas/get_payment","input":{"id":1e400}}"#,
            )
            .await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["code"], "mocks_engine_error");
        assert_eq!(keys(&body), ["code", "message"]);
    }
    // The same mock still answers a call it can read.
    let (status, body) = api
        .execute(&sid, "asaas/get_payment", json!({"id": 1}))
        .await;
    assert_eq!((status, &body["data"]), (200, &json!({"id": "pay_1"})));
    // The session's detail shows the failed calls' input as it was sent.
    let detail = api
        .client
        .get(format!("{}/v1/sessions/{sid}", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(detail.status(), 200);
    let text = detail.text().await.unwrap();
    assert_eq!(text.matches(r#""input":{"id":1e400}"#).count(), 2, "{text}");
}

#[tokio::test]
async fn an_empty_stateful_array_is_refused_at_create() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    let (status, body) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u",
                   "mocks": {"asaas/create_payment": {"id": "pay_1"}, "asaas/list_payments": []}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "mocks_invalid");
    assert_eq!(body["field"], "/mocks/asaas~1list_payments");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("asaas/list_payments"), "{message}");
    assert!(message.contains("empty array"), "{message}");
    // Nothing was created.
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(list["sessions"], json!([]), "{list}");
}

#[tokio::test]
async fn a_mock_for_a_server_the_session_does_not_list_is_refused_at_create() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    let (status, body) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas", "zoop"], "user_id": "u",
                   "mocks": {"asaas/create_payment": {"id": "pay_1"}, "stripe/charge": {"id": "ch_1"}}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "mocks_invalid");
    assert_eq!(body["field"], "/mocks/stripe~1charge");
    let message = body["message"].as_str().unwrap();
    for part in ["stripe/charge", "`stripe`", "`asaas`, `zoop`"] {
        assert!(message.contains(part), "{part}: {message}");
    }
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(list["sessions"], json!([]), "{list}");

    // A built-in belongs to every session; listing the server makes the mock welcome; a
    // session that lists no server takes its servers from its mocks.
    for (servers, mocks) in [
        (
            json!(["asaas"]),
            json!({"codespar_charge": {"id": "chg_1"}}),
        ),
        (
            json!(["asaas", "stripe"]),
            json!({"stripe/charge": {"id": "ch_1"}}),
        ),
        (json!([]), json!({"stripe/charge": {"id": "ch_1"}})),
    ] {
        let (status, body) = api
            .post(
                "/v1/sessions",
                json!({"servers": servers, "user_id": "u", "mocks": mocks}),
            )
            .await;
        assert_eq!(status, 201, "{servers} {mocks}: {body}");
    }
}

#[tokio::test]
async fn a_held_call_whose_session_closed_reads_cancelled() {
    let handle = policy_server(APPROVAL_POLICY).await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({"asaas/create_payment": {"id": "pay_1"}}))
        .await;
    let (status, held) = api
        .execute(&sid, "asaas/create_payment", json!({"value": 5000}))
        .await;
    assert_eq!(status, 202, "{held}");
    let approval = held["approval_id"].as_str().unwrap().to_owned();
    let (status, _) = api.delete(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(status, 204);

    let (_, list) = api.get("/v1/approvals?status=all").await;
    let row = &list["approvals"][0];
    assert_eq!(row["id"], approval.as_str());
    assert_eq!(row["status"], "cancelled", "{list}");
    assert_eq!(row["note"], "session closed", "{list}");
    let (_, pending) = api.get("/v1/approvals").await;
    assert_eq!(pending["approvals"], json!([]));

    let events = events(&api).await;
    let resolved = of_kind(&events, "approval.resolved");
    assert_eq!(resolved.len(), 1, "{events:?}");
    assert_eq!(resolved[0]["approvalId"], approval.as_str());
    assert_eq!(resolved[0]["decision"], "cancelled");
    assert_eq!(resolved[0]["note"], "session closed");

    // Nobody can decide it any more, and the answer says why.
    let (status, body) = api
        .post(&format!("/v1/approvals/{approval}/approve"), json!({}))
        .await;
    assert_eq!(status, 410, "{body}");
    assert_eq!(body["code"], "approval_expired");
    assert!(
        body["message"].as_str().unwrap().contains("session closed"),
        "{body}"
    );
}

#[tokio::test]
async fn forwarded_sdk_events_keep_arguments_usage_and_prompt() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    let usage = json!({"promptTokens": 412, "completionTokens": 37, "totalTokens": 449});
    let step = json!({
        "iteration": 0, "model": "gpt-4o-mini", "finishReason": "tool_calls", "usage": usage,
        "toolCalls": [{"id": "t1", "name": "lookup_order", "arguments": {"order": "o_9"},
                       "result": {"status": "shipped"}, "duration": 118, "needsApproval": false}]
    });
    let common = json!({"agentName": "SupportAgent", "model": "gpt-4o-mini",
                        "provider": "openai", "streaming": false, "conversationId": "conv_1"});
    let mut stepped = common.clone();
    stepped.as_object_mut().unwrap().extend(
        json!({"kind": "agent.step.completed", "iteration": 0, "step": step,
               "usage": usage, "duration": 840})
        .as_object()
        .unwrap()
        .clone(),
    );
    let mut done = common;
    done.as_object_mut().unwrap().extend(
        json!({"kind": "agent.completed", "prompt": "Where is my order?",
               "output": "It shipped yesterday.", "steps": [step], "usage": usage,
               "duration": 1530, "finishReason": "stop", "failoverAttempts": 0})
        .as_object()
        .unwrap()
        .clone(),
    );
    let (status, body) = api.post("/v1/events", json!([stepped, done])).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"], 2);

    let tokens = json!({"prompt": 412, "completion": 37, "total": 449});
    let events = events(&api).await;
    let stepped = of_kind(&events, "agent.step.completed");
    assert_eq!(stepped.len(), 1, "{events:?}");
    let call = &stepped[0]["step"]["toolCalls"][0];
    assert_eq!(call["args"], json!({"order": "o_9"}), "{call}");
    assert_eq!(stepped[0]["step"]["tokens"], tokens);
    assert_eq!(stepped[0]["tokens"], tokens);
    let done = of_kind(&events, "agent.completed");
    assert_eq!(done.len(), 1, "{events:?}");
    assert_eq!(done[0]["input"], "Where is my order?");
    assert_eq!(done[0]["tokens"], tokens);
    assert_eq!(done[0]["steps"][0]["toolCalls"][0]["args"]["order"], "o_9");
    assert_eq!(done[0]["steps"][0]["tokens"], tokens);
}

#[tokio::test]
async fn a_static_mock_reports_the_answers_it_served() {
    let handle = policy_server(APPROVAL_POLICY).await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({
            "asaas/create_payment": {"id": "pay_1"},
            "asaas/create_customer": {"id": "cus_1"},
            "asaas/list_payments": [{"page": 1}, {"page": 2}],
        }))
        .await;
    for value in [5, 10] {
        let (status, _) = api
            .execute(&sid, "asaas/create_payment", json!({"value": value}))
            .await;
        assert_eq!(status, 200);
    }
    // Held for approval: a call, not an answer.
    let (status, _) = api
        .execute(&sid, "asaas/create_payment", json!({"value": 5000}))
        .await;
    assert_eq!(status, 202);
    let (status, _) = api.execute(&sid, "asaas/list_payments", json!({})).await;
    assert_eq!(status, 200);

    let served = |mocks: &Value, tool: &str| {
        let mock = mocks
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["tool"] == tool)
            .unwrap();
        (mock["served"].as_u64(), mock["calls"].as_u64())
    };
    let (_, list) = api.get("/v1/sessions").await;
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    for mocks in [&list["sessions"][0]["mocks"], &detail["mocks"]] {
        assert_eq!(served(mocks, "asaas/create_payment"), (Some(2), Some(3)));
        assert_eq!(served(mocks, "asaas/create_customer"), (Some(0), Some(0)));
        assert_eq!(served(mocks, "asaas/list_payments"), (Some(1), Some(1)));
    }
}
