//! `send` backed by an OpenAI-compatible model (a fake one on loopback): the model's tool
//! calls go through deny-list, policy and mock store, results go back to it, its usage
//! reaches the run, and its failures end the run as `agent.failed` with its own words.

use crate::support::fake_llm::{self, Answer, FakeLlm};
use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::llm::settings::{ApiKey, ProviderSettings};
use spyglass::runtime::{Policy, RuntimeConfig, ServerHandle};
use std::time::Duration;

const KEY: &str = "sk-fake0123456789abcdefghijkl";

pub fn model_config(fake: &FakeLlm) -> RuntimeConfig {
    let mut models = ProviderSettings::default();
    models.openai.base_url = Some(fake.url.clone());
    models.openai.key = Some(ApiKey::new(KEY));
    models.max_retry_wait = Duration::from_millis(50);
    RuntimeConfig {
        models,
        policy: Policy::from_toml("deny_list = [\"asaas/delete_*\"]").unwrap(),
        ..test_config()
    }
}

pub fn events(handle: &ServerHandle) -> Vec<Value> {
    handle
        .runtime()
        .events_since(0, 1000)
        .iter()
        .map(|f| serde_json::from_str(&spyglass::protocol::encode(f)).unwrap())
        .collect()
}

pub fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

pub async fn openai_session(api: &Api, model: Value) -> String {
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u", "model": model,
                   "mocks": {"asaas/create_payment": {"id": "pay_1", "status": "PENDING"},
                             "asaas/delete_customer": {"ok": true}}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_model_picks_mocked_tools_and_reads_their_results() {
    let fake = FakeLlm::start(vec![
        fake_llm::openai(
            None,
            &[
                ("call_a", "asaas__create_payment", json!({"value": 5})),
                ("call_b", "asaas__delete_customer", json!({"id": "c1"})),
                ("call_c", "asaas__refund", json!({})),
            ],
            (40, 12),
        ),
        fake_llm::openai(Some("Charged pay_1"), &[], (90, 6)),
    ])
    .await;
    let handle = server(model_config(&fake)).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai:gpt-4o-mini")).await;
    let (status, result) = api.send(&sid, "Charge R$5").await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["message"], "Charged pay_1");
    assert_eq!(result["iterations"], 2);
    let calls = result["tool_calls"].as_array().unwrap();
    let names: Vec<&str> = calls
        .iter()
        .map(|c| c["tool_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "asaas/create_payment",
            "asaas/delete_customer",
            "asaas/refund"
        ]
    );
    assert_eq!(calls[0]["output"]["id"], "pay_1");
    assert_eq!(calls[1]["error_code"], "policy_denied");
    assert_eq!(calls[2]["error_code"], "tool_not_mocked");

    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    let first = &seen[0];
    assert_eq!(
        (first.method.as_str(), first.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        first.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(first.body["model"], "gpt-4o-mini");
    assert_eq!(
        first.body["messages"],
        json!([{"role": "user", "content": "Charge R$5"}])
    );
    let mut tools: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    tools.sort_unstable();
    assert_eq!(tools, ["asaas__create_payment", "asaas__delete_customer"]);
    assert!(first.body.get("stream").is_none());
    // The second request carries the assistant's calls and one tool message each, the
    // envelopes whole.
    let messages = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5);
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["tool_calls"][0]["function"]["name"],
        "asaas__create_payment"
    );
    let results: Vec<(String, Value)> = messages[2..]
        .iter()
        .map(|m| {
            assert_eq!(m["role"], "tool");
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                serde_json::from_str(m["content"].as_str().unwrap()).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        results[0],
        (
            "call_a".to_owned(),
            json!({"id": "pay_1", "status": "PENDING"})
        )
    );
    assert_eq!(results[1].1["code"], "policy_denied");
    assert_eq!(results[2].1["code"], "tool_not_mocked");

    let events = events(&handle);
    let done = of_kind(&events, "agent.completed");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["provider"], "openai");
    assert_eq!(done[0]["model"], "gpt-4o-mini");
    assert_eq!(
        done[0]["tokens"],
        json!({"prompt": 130, "completion": 18, "total": 148})
    );
    let steps = of_kind(&events, "agent.step.completed");
    assert_eq!(
        steps[0]["step"]["tokens"],
        json!({"prompt": 40, "completion": 12, "total": 52})
    );
    assert_eq!(of_kind(&events, "tool.called").len(), 3);
    // The stateful counters moved as for execute: one call of the mocked tool.
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    let text = format!("{detail}{}", Value::Array(events.clone()));
    assert!(!text.contains("0123456789abcdef"), "the key leaked");
}

#[tokio::test]
async fn the_sdk_names_the_model_in_metadata() {
    let fake = FakeLlm::start(vec![fake_llm::openai(Some("hi"), &[], (3, 1))]).await;
    let handle = server(model_config(&fake)).await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": [], "user_id": "u", "metadata": {"model": "openai"}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let sid = created["id"].as_str().unwrap();
    let (status, result) = api.send(sid, "hello").await;
    assert_eq!((status, result["message"].as_str()), (200, Some("hi")));
    // No mocks, no tools offered.
    assert!(fake.seen()[0].body.get("tools").is_none());
    assert_eq!(fake.seen()[0].body["model"], "gpt-4o-mini");
}

#[tokio::test]
async fn a_model_the_settings_do_not_allow_is_refused_at_create() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    for (body, field) in [
        (json!({"user_id": "u", "model": "openai:gpt-4o"}), "/model"),
        (
            json!({"user_id": "u", "metadata": {"model": "anthropic"}}),
            "/metadata/model",
        ),
        (json!({"user_id": "u", "model": "gemini:pro"}), "/model"),
    ] {
        let (status, body) = api.post("/v1/sessions", body).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["code"], "model_unavailable");
        assert_eq!(body["field"], field);
    }
    // A session body cannot bring its own route or key.
    let (status, body) = api
        .post(
            "/v1/sessions",
            json!({"user_id": "u", "model": {"provider": "openai", "base_url": "http://evil"}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
}

async fn failed_run(
    script: Vec<Answer>,
    tune: impl FnOnce(&mut RuntimeConfig),
) -> (Value, Value, usize) {
    let fake = FakeLlm::start(script).await;
    let mut config = model_config(&fake);
    tune(&mut config);
    let handle = server(config).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai")).await;
    let (status, body) = api.send(&sid, "go").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "agent_failed");
    let events = events(&handle);
    let failed = of_kind(&events, "agent.failed");
    assert_eq!(failed.len(), 1);
    (body, failed[0].clone(), fake.seen().len())
}

#[tokio::test]
async fn a_refused_key_fails_the_run_with_the_providers_message_and_no_retry() {
    let (body, failed, requests) = failed_run(
        vec![fake_llm::error(
            401,
            "Incorrect API key provided: sk-fake0123456789abcdefghijkl",
        )],
        |_| {},
    )
    .await;
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with("openai answered 401: Incorrect API key provided"),
        "{message}"
    );
    assert!(!message.contains("0123456789abcdef"), "{message}");
    assert_eq!(failed["error"], message);
    assert_eq!(failed["provider"], "openai");
    assert_eq!(requests, 1);
}

#[tokio::test]
async fn rate_limits_are_retried_after_retry_after() {
    let fake = FakeLlm::start(vec![
        fake_llm::rate_limited("0"),
        fake_llm::error(503, "overloaded"),
        fake_llm::openai(Some("done"), &[], (1, 1)),
    ])
    .await;
    let handle = server(model_config(&fake)).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai")).await;
    let (status, result) = api.send(&sid, "go").await;
    assert_eq!(
        (status, result["message"].as_str()),
        (200, Some("done")),
        "{result}"
    );
    assert_eq!(fake.seen().len(), 3);
}

#[tokio::test]
async fn retries_are_bounded() {
    let (body, _, requests) = failed_run(
        vec![
            fake_llm::rate_limited("0.01"),
            fake_llm::rate_limited("3600"),
            fake_llm::rate_limited("0"),
            fake_llm::openai(Some("never asked"), &[], (1, 1)),
        ],
        |_| {},
    )
    .await;
    assert_eq!(requests, 3);
    assert_eq!(
        body["message"],
        "openai answered 429 (after 3 tries): Rate limit reached"
    );
    let (body, _, requests) = failed_run(
        vec![
            fake_llm::error(500, "boom"),
            fake_llm::error(502, "bad gateway"),
        ],
        |c| c.models.max_retries = 1,
    )
    .await;
    assert_eq!(requests, 2);
    assert_eq!(
        body["message"],
        "openai answered 502 (after 2 tries): bad gateway"
    );
}

#[tokio::test]
async fn malformed_answers_and_timeouts_fail_the_run() {
    let (body, _, _) = failed_run(
        vec![Answer::Text {
            status: 200,
            body: "<html>proxy</html>".to_owned(),
        }],
        |_| {},
    )
    .await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("malformed answer"),
        "{body}"
    );
    let (body, _, _) = failed_run(vec![fake_llm::ok(json!({"choices": []}))], |_| {}).await;
    assert_eq!(body["message"], "openai: malformed answer: no choices[0]");
    let (body, _, _) = failed_run(vec![Answer::Hang(Duration::from_secs(5))], |c| {
        c.models.timeout = Duration::from_millis(300);
    })
    .await;
    assert_eq!(body["message"], "openai did not answer within 0.3s");
}

#[tokio::test]
async fn send_stream_forwards_the_providers_text_deltas() {
    let call = [("call_1", "asaas__create_payment", json!({"value": 5}))];
    let fake = FakeLlm::start(vec![
        fake_llm::openai_sse(&["Let me ", "charge"], &call, (20, 4)),
        fake_llm::openai_sse(&["Charged ", "pay_1"], &[], (30, 2)),
    ])
    .await;
    let handle = server(model_config(&fake)).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai")).await;
    let frames = sse_frames(&api, &sid, "Charge R$5").await;
    let types: Vec<&str> = frames.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "user_message",
            "assistant_text",
            "assistant_text",
            "tool_use",
            "tool_result",
            "assistant_text",
            "assistant_text",
            "done"
        ]
    );
    let texts: Vec<(&str, u64)> = frames
        .iter()
        .filter(|f| f["type"] == "assistant_text")
        .map(|f| {
            (
                f["content"].as_str().unwrap(),
                f["iteration"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        texts,
        [("Let me ", 0), ("charge", 0), ("Charged ", 1), ("pay_1", 1)]
    );
    assert_eq!(frames[3]["name"], "asaas/create_payment");
    assert_eq!(frames[4]["toolCall"]["output"]["id"], "pay_1");
    assert_eq!(frames[7]["result"]["message"], "Charged pay_1");
    let seen = fake.seen();
    assert_eq!(seen[0].body["stream"], true);
    assert_eq!(seen[0].header("accept"), Some("text/event-stream"));
    assert_eq!(seen[1].body["messages"][2]["tool_call_id"], "call_1");
    let events = events(&handle);
    let done = of_kind(&events, "agent.completed");
    assert_eq!(done[0]["streaming"], true);
    assert_eq!(done[0]["tokens"]["total"], 56);
}

#[tokio::test]
async fn a_stream_that_breaks_off_ends_in_an_error_frame() {
    let fake = FakeLlm::start(vec![Answer::Sse(vec![(
        None,
        json!({"choices": [{"index": 0, "delta": {"content": "half"}}]}).to_string(),
    )])])
    .await;
    let handle = server(model_config(&fake)).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai")).await;
    let frames = sse_frames(&api, &sid, "go").await;
    let last = frames.last().unwrap();
    assert_eq!(last["type"], "error");
    assert_eq!(
        last["message"],
        "openai: the stream broke after 1 text delta: it ended before a finish_reason or [DONE]"
    );
}

#[tokio::test]
async fn closing_the_session_ends_a_run_waiting_on_the_provider() {
    let fake = FakeLlm::start(vec![Answer::Hang(Duration::from_secs(20))]).await;
    let handle = server(model_config(&fake)).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai")).await;
    let started = std::time::Instant::now();
    let sending = {
        let api = Api::new(&handle);
        let sid = sid.clone();
        tokio::spawn(async move { api.send(&sid, "go").await })
    };
    while fake.seen().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, _) = api.delete(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(status, 204);
    let (status, body) = sending.await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["message"], "session closed");
}
