//! `send` over real HTTP: the scripted model loop, JSON and SSE answers, agent events
//! that share call ids with `tool.called`, scripted failures and the iteration cap.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{Policy, RuntimeConfig, ServerHandle};

fn script() -> Value {
    json!({
        "sequence": [
            {"tool_calls": [{"name": "asaas/create_payment", "arguments": {"value": 5}},
                            {"name": "asaas/create_paymet", "arguments": {}}]},
            {"text": "Charged pay_1"}
        ],
        "default_text": "nothing more"
    })
}

async fn session_with(api: &Api, body: Value) -> String {
    let (status, created) = api.post("/v1/sessions", body).await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

fn events(handle: &ServerHandle) -> Vec<Value> {
    handle
        .runtime()
        .events_since(0, 1000)
        .iter()
        .map(|f| serde_json::from_str(&spyglass::protocol::encode(f)).unwrap())
        .collect()
}

#[tokio::test]
async fn json_send_runs_the_script_and_emits_agent_events() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let sid = session_with(
        &api,
        json!({"servers": ["asaas"], "user_id": "u",
               "mocks": {"asaas/create_payment": {"id": "pay_1"}}, "model": script()}),
    )
    .await;
    let (status, result) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "Charge R$5"}),
        )
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(keys(&result), ["iterations", "message", "tool_calls"]);
    assert_eq!(result["message"], "Charged pay_1");
    assert_eq!(result["iterations"], 2);
    let calls = result["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        keys(&calls[0]),
        [
            "duration_ms",
            "error_code",
            "id",
            "input",
            "output",
            "server_id",
            "status",
            "tool_name"
        ]
    );
    assert_eq!(calls[0]["status"], "success");
    assert_eq!(calls[0]["output"], json!({"id": "pay_1"}));
    assert_eq!(calls[0]["server_id"], "asaas");
    assert_eq!(calls[0]["input"], json!({"value": 5}));
    // The misspelled tool comes back as the whole envelope.
    assert_eq!(calls[1]["status"], "error");
    assert_eq!(calls[1]["error_code"], "tool_not_mocked");
    assert_eq!(
        calls[1]["output"],
        json!({"code": "tool_not_mocked", "tool_name": "asaas/create_paymet",
               "message": calls[1]["output"]["message"]})
    );

    let all = events(&handle);
    let called: Vec<&Value> = all.iter().filter(|e| e["kind"] == "tool.called").collect();
    let steps: Vec<&Value> = all
        .iter()
        .filter(|e| e["kind"] == "agent.step.completed")
        .collect();
    assert_eq!(called.len(), 2);
    assert_eq!(steps.len(), 2);
    assert_eq!(called[0]["source"], "send");
    assert_eq!(called[0]["iteration"], 0);
    let step_calls = steps[0]["step"]["toolCalls"].as_array().unwrap();
    // One id from start to end: tool.called, the step's toolCalls and the SDK record.
    assert_eq!(step_calls[0]["id"], called[0]["callId"]);
    assert_eq!(step_calls[1]["id"], called[1]["callId"]);
    assert_eq!(calls[0]["id"], called[0]["callId"]);
    assert_eq!(step_calls[1]["result"]["code"], "tool_not_mocked");
    assert!(step_calls[0]["duration"].as_f64().unwrap() >= 0.0);
    assert_eq!(steps[0]["sessionId"], sid.as_str());
    assert_eq!(steps[0]["conversationId"], sid.as_str());
    assert_eq!(steps[0]["agentName"], "spyglass-fake");
    assert_eq!(steps[0]["provider"], "fake");
    assert_eq!(steps[0]["step"]["finishReason"], "tool_calls");
    assert_eq!(steps[1]["step"]["finishReason"], "stop");
    assert!(steps[1]["tokens"]["total"].as_u64() > steps[0]["tokens"]["total"].as_u64());
    let done = all.last().unwrap();
    assert_eq!(done["kind"], "agent.completed");
    assert_eq!(done["output"], "Charged pay_1");
    assert_eq!(done["input"], "Charge R$5");
    assert_eq!(done["steps"].as_array().unwrap().len(), 2);

    // The script is consumed across sends: the next model call is past its end.
    let (_, again) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "more?"}),
        )
        .await;
    assert_eq!(again["message"], "nothing more");
    assert_eq!(again["iterations"], 1);
    assert_eq!(again["tool_calls"], json!([]));
}

#[tokio::test]
async fn model_script_in_metadata_and_default_text() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let sid = session_with(
        &api,
        json!({"servers": [], "user_id": "u",
               "metadata": {"model_script": json!({"sequence": [{"text": "hello"}]}).to_string()}}),
    )
    .await;
    let (_, result) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "hi"}),
        )
        .await;
    assert_eq!(result["message"], "hello");
    let plain = session_with(&api, json!({"servers": [], "user_id": "u"})).await;
    let (_, result) = api
        .post(
            &format!("/v1/sessions/{plain}/send"),
            json!({"message": "hi"}),
        )
        .await;
    assert_eq!(result["message"], "fake response");
}

#[tokio::test]
async fn fail_on_step_and_iteration_cap_fail_the_run() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let sid = session_with(
        &api,
        json!({"servers": [], "user_id": "u",
               "model": {"sequence": [{"tool_calls": [{"name": "a/b", "arguments": {}}]}, {"text": "ok"}],
                         "fail_on_step": [{"step": 1, "error": "Rate limited"}]}}),
    )
    .await;
    let (status, body) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "go"}),
        )
        .await;
    assert_eq!(status, 503);
    assert_eq!(body["code"], "agent_failed");
    assert_eq!(body["message"], "Rate limited");
    let all = events(&handle);
    let failed = all.last().unwrap();
    assert_eq!(failed["kind"], "agent.failed");
    assert_eq!(failed["error"], "Rate limited");
    assert_eq!(failed["finishReason"], "error");
    assert_eq!(failed["steps"].as_array().unwrap().len(), 1);

    let looping: Vec<Value> = (0..20)
        .map(|_| json!({"tool_calls": [{"name": "a/b", "arguments": {}}]}))
        .collect();
    let sid = session_with(
        &api,
        json!({"servers": [], "user_id": "u", "model": {"sequence": looping}}),
    )
    .await;
    let (status, body) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "go"}),
        )
        .await;
    assert_eq!(status, 503);
    assert!(
        body["message"].as_str().unwrap().contains("16 iterations"),
        "{body}"
    );
    let steps = events(&handle)
        .iter()
        .filter(|e| e["kind"] == "agent.step.completed" && e["sessionId"] == sid.as_str())
        .count();
    assert_eq!(steps, 16);
}

/// Splits an SSE body into (event line, data JSON) pairs.
fn sse_frames(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|f| !f.trim().is_empty() && !f.starts_with(':'))
        .map(|frame| {
            let mut event = String::new();
            let mut data = String::new();
            for line in frame.lines() {
                if let Some(rest) = line.strip_prefix("event:") {
                    rest.trim().clone_into(&mut event);
                } else if let Some(rest) = line.strip_prefix("data:") {
                    data.push_str(rest.trim());
                }
            }
            (event, serde_json::from_str(&data).unwrap())
        })
        .collect()
}

async fn stream(handle: &ServerHandle, sid: &str, message: &str) -> (u16, String, String) {
    let res = reqwest::Client::new()
        .post(format!("{}/v1/sessions/{sid}/send", handle.url()))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(json!({"message": message}).to_string())
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let ctype = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, ctype, res.text().await.unwrap())
}

#[tokio::test]
async fn sse_send_emits_every_frame_type_for_both_readers() {
    let handle = server(RuntimeConfig {
        policy: Policy::from_toml(
            "[[rule]]\nid = \"r\"\ntool = \"*/create_payment\"\naction = \"approval\"\n",
        )
        .unwrap(),
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let sid = session_with(
        &api,
        json!({"servers": ["asaas"], "user_id": "u",
               "mocks": {"asaas/create_payment": {"id": "pay_1"}}, "model": script()}),
    )
    .await;
    let (status, ctype, body) = stream(&handle, &sid, "Charge R$5").await;
    assert_eq!(status, 200);
    assert!(ctype.starts_with("text/event-stream"));
    let frames = sse_frames(&body);
    let types: Vec<&str> = frames.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        types,
        [
            "user_message",
            "tool_use",
            "tool_result",
            "tool_use",
            "tool_result",
            "assistant_text",
            "done"
        ]
    );
    for (event, data) in &frames {
        assert_eq!(
            data["type"],
            event.as_str(),
            "the event line and data.type agree"
        );
    }
    assert_eq!(frames[0].1["content"], "Charge R$5");
    assert_eq!(frames[1].1["name"], "asaas/create_payment");
    assert_eq!(frames[1].1["input"], json!({"value": 5}));
    let result = &frames[2].1;
    assert_eq!(result["toolCall"]["id"], frames[1].1["id"]);
    assert_eq!(result["toolCall"]["error_code"], "approval_required");
    assert!(
        result["toolCall"]["output"]["approval_id"]
            .as_str()
            .unwrap()
            .starts_with("apr_")
    );
    // The TypeScript reader finds the record's fields at top level too.
    assert_eq!(result["tool_name"], "asaas/create_payment");
    assert_eq!(frames[5].1["content"], "Charged pay_1");
    assert_eq!(frames[5].1["iteration"], 1);
    let done = &frames[6].1;
    assert_eq!(done["result"]["message"], "Charged pay_1");
    assert_eq!(done["message"], "Charged pay_1");
    assert_eq!(done["iterations"], 2);
    assert_eq!(done["result"]["tool_calls"].as_array().unwrap().len(), 2);

    // A failing run ends the stream with an error frame.
    let failing = session_with(
        &api,
        json!({"servers": [], "user_id": "u", "model": {"fail_on_step": [{"step": 0, "error": "boom"}]}}),
    )
    .await;
    let (_, _, body) = stream(&handle, &failing, "x").await;
    let frames = sse_frames(&body);
    let last = frames.last().unwrap();
    assert_eq!(last.0, "error");
    assert_eq!(last.1["error"], "agent_failed");
    assert_eq!(last.1["message"], "boom");

    // A missing session is a plain JSON 404 before any stream starts.
    let (status, ctype, body) = stream(&handle, "ses_nope", "x").await;
    assert_eq!(status, 404);
    assert!(ctype.starts_with("application/json"));
    assert!(body.contains("not_found"));
}

#[tokio::test]
async fn send_bodies_are_checked() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let sid = session_with(&api, json!({"servers": [], "user_id": "u"})).await;
    for bad in ["", "{}", r#"{"message": 5}"#, "nope"] {
        let (status, body) = api.post_raw(&format!("/v1/sessions/{sid}/send"), bad).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("invalid_body")),
            "{bad}"
        );
    }
    let (status, _) = api
        .post("/v1/sessions/ses_nope/send", json!({"message": "x"}))
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_demo_workload_runs_against_the_runtime() {
    let handle = server(RuntimeConfig {
        policy: Policy::from_toml(spyglass::demo::POLICY).unwrap(),
        ..test_config()
    })
    .await;
    let pace = spyglass::demo::Pace {
        step: std::time::Duration::ZERO,
        round: std::time::Duration::ZERO,
        rounds: Some(4),
        eval_every: 0,
    };
    spyglass::demo::drive(&handle.url(), None, pace)
        .await
        .unwrap();
    let all = events(&handle);
    let count = |kind: &str| all.iter().filter(|e| e["kind"] == kind).count();
    assert_eq!(count("session.created"), 8);
    // Three own runs completed plus two forwarded from the external agent.
    assert_eq!(count("agent.completed"), 5);
    assert_eq!(count("agent.failed"), 1);
    // One run's model call threw and was retried: its step carries the failed attempt.
    assert!(
        all.iter()
            .any(|e| e["step"]["failedAttempts"][0]["error"] == "Overloaded, retrying"),
        "no retried step"
    );
    // One a round, and a second in the first round: one to approve, one to let expire.
    assert_eq!(count("approval.requested"), 5);
    let codes: std::collections::BTreeSet<&str> = all
        .iter()
        .filter_map(|e| e["outcome"]["envelope"]["code"].as_str())
        .collect();
    for code in [
        "policy_denied",
        "approval_required",
        "tool_not_mocked",
        "mocks_exhausted",
    ] {
        assert!(codes.contains(code), "{code} missing from {codes:?}");
    }
    // The external agent's events arrived without a session.
    assert!(
        all.iter()
            .any(|e| e["agentName"] == "SupportAgent" && e.get("sessionId").is_none())
    );
}
