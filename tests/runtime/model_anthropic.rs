//! `send` backed by an Anthropic Messages model (a fake one on loopback): tool uses go
//! through the mock store, results go back as `tool_result` blocks, text streams as
//! deltas, and the provider's errors end the run with its own words.

use crate::model_openai::{events, of_kind};
use crate::support::fake_llm::{self, Answer, FakeLlm};
use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::RuntimeConfig;
use spyglass::runtime::llm::settings::{ApiKey, ProviderSettings};
use std::time::Duration;

const KEY: &str = "sk-ant-fake0123456789abcdefghijkl";

fn config(fake: &FakeLlm) -> RuntimeConfig {
    let mut models = ProviderSettings::default();
    models.anthropic.base_url = Some(fake.url.clone());
    models.anthropic.key = Some(ApiKey::new(KEY));
    models.max_retry_wait = Duration::from_millis(20);
    RuntimeConfig {
        models,
        ..test_config()
    }
}

async fn session(api: &Api) -> String {
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u", "model": "anthropic:claude-test",
                   "mocks": {"asaas/create_payment": [{"id": "pay_1"}]}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_model_uses_tools_and_reads_tool_result_blocks() {
    let calls = [
        ("toolu_1", "asaas__create_payment", json!({"value": 5})),
        ("toolu_2", "asaas__create_payment", json!({"value": 6})),
    ];
    let fake = FakeLlm::start(vec![
        fake_llm::anthropic(Some("Charging twice"), &calls, (50, 20)),
        fake_llm::anthropic(Some("One went through"), &[], (80, 5)),
    ])
    .await;
    let handle = server(config(&fake)).await;
    let api = Api::new(&handle);
    let sid = session(&api).await;
    let (status, result) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "Charge"}),
        )
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["message"], "One went through");
    assert_eq!(result["tool_calls"][0]["output"], json!({"id": "pay_1"}));
    // A one-entry stateful mock: the second call finds it used up.
    assert_eq!(result["tool_calls"][1]["error_code"], "mocks_exhausted");

    let seen = fake.seen();
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(seen[0].header("x-api-key"), Some(KEY));
    assert_eq!(seen[0].header("anthropic-version"), Some("2023-06-01"));
    assert!(seen[0].header("authorization").is_none());
    assert_eq!(seen[0].body["model"], "claude-test");
    assert_eq!(seen[0].body["max_tokens"], 1024);
    assert_eq!(
        seen[0].body["tools"],
        json!([{"name": "asaas__create_payment", "description": "Mocked tool asaas/create_payment",
                "input_schema": {"type": "object"}}])
    );
    let messages = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"][0],
        json!({"type": "text", "text": "Charging twice"})
    );
    assert_eq!(messages[1]["content"][2]["id"], "toolu_2");
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], "toolu_1");
    let second: Value = serde_json::from_str(results[1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(second["code"], "mocks_exhausted");

    let events = events(&handle);
    let done = of_kind(&events, "agent.completed");
    assert_eq!(done[0]["provider"], "anthropic");
    assert_eq!(
        done[0]["tokens"],
        json!({"prompt": 130, "completion": 25, "total": 155})
    );
}

#[tokio::test]
async fn streamed_text_deltas_reach_the_client_and_overload_is_retried() {
    let call = [("toolu_1", "asaas__create_payment", json!({"value": 5}))];
    let fake = FakeLlm::start(vec![
        fake_llm::error(529, "Overloaded"),
        fake_llm::anthropic_sse(&["On ", "it"], &call, (10, 3)),
        fake_llm::anthropic_sse(&["Done"], &[], (20, 1)),
    ])
    .await;
    let handle = server(config(&fake)).await;
    let api = Api::new(&handle);
    let sid = session(&api).await;
    let response = api
        .client
        .post(format!("{}/v1/sessions/{sid}/send", api.base))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(json!({"message": "go"}).to_string())
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    let frames: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let summary: Vec<String> = frames
        .iter()
        .map(|f| match f["type"].as_str().unwrap() {
            "assistant_text" => format!("text:{}", f["content"].as_str().unwrap()),
            other => other.to_owned(),
        })
        .collect();
    assert_eq!(
        summary,
        [
            "user_message",
            "text:On ",
            "text:it",
            "tool_use",
            "tool_result",
            "text:Done",
            "done"
        ]
    );
    assert_eq!(frames[4]["toolCall"]["output"], json!({"id": "pay_1"}));
    assert_eq!(fake.seen().len(), 3);
    assert_eq!(fake.seen()[1].body["stream"], true);
}

#[tokio::test]
async fn an_error_event_mid_stream_and_a_bad_request_fail_the_run() {
    let fake = FakeLlm::start(vec![
        // After a text delta went out, so not asked again (tests/runtime/model_stream_break.rs).
        Answer::Sse(vec![
            (
                Some("content_block_delta".to_owned()),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "On it"}}).to_string(),
            ),
            (
                Some("error".to_owned()),
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded mid-stream"}}).to_string(),
            ),
        ]),
        fake_llm::error(400, "messages: roles must alternate"),
    ])
    .await;
    let handle = server(config(&fake)).await;
    let api = Api::new(&handle);
    let sid = session(&api).await;
    let response = api
        .client
        .post(format!("{}/v1/sessions/{sid}/send", api.base))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(json!({"message": "go"}).to_string())
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    assert!(
        text.contains("anthropic: the stream broke after 1 text delta: Overloaded mid-stream"),
        "{text}"
    );
    let (status, body) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "go"}),
        )
        .await;
    assert_eq!(status, 503);
    assert_eq!(
        body["message"],
        "anthropic answered 400: messages: roles must alternate"
    );
    let events = events(&handle);
    assert_eq!(of_kind(&events, "agent.failed").len(), 2);
}
