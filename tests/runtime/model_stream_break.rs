//! A provider stream that breaks mid-way (connection cut, body ended early, the
//! provider's own error event after a 200): asked again within the bounded retries while
//! the client has seen nothing of that answer; once text deltas went out, the run ends
//! `agent.failed` with the reason and the client's stream ends in an `error` frame.
//! Never a hang, never a stream that just stops. Fake providers on loopback play the
//! model (real HTTP, real chunked SSE).

use super::model_openai::{events, model_config, of_kind, openai_session};
use crate::support::fake_llm::{self, Answer, Break, FakeLlm};
use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::ServerHandle;
use std::time::{Duration, Instant};

fn kinds(frames: &[Value]) -> Vec<&str> {
    frames.iter().map(|f| f["type"].as_str().unwrap()).collect()
}

fn texts(frames: &[Value]) -> Vec<&str> {
    frames
        .iter()
        .filter(|f| f["type"] == "assistant_text")
        .map(|f| f["content"].as_str().unwrap())
        .collect()
}

async fn openai_run(script: Vec<Answer>) -> (FakeLlm, ServerHandle, Vec<Value>) {
    let fake = FakeLlm::start(script).await;
    let handle = server(model_config(&fake)).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai")).await;
    let frames = sse_frames(&api, &sid, "Charge R$5").await;
    (fake, handle, frames)
}

#[tokio::test]
async fn a_break_before_any_delta_is_asked_again_and_the_client_sees_one_whole_answer() {
    for how in [Break::Reset, Break::Truncate, Break::ServerError] {
        let (fake, handle, frames) = openai_run(vec![
            fake_llm::broken(fake_llm::openai_sse(&["Hel", "lo"], &[], (9, 2)), 0, how),
            fake_llm::openai_sse(&["Charged ", "pay_1"], &[], (20, 3)),
        ])
        .await;
        assert_eq!(
            kinds(&frames),
            ["user_message", "assistant_text", "assistant_text", "done"],
            "{how:?}: {frames:#?}"
        );
        assert_eq!(texts(&frames), ["Charged ", "pay_1"], "{how:?}");
        assert_eq!(fake.seen().len(), 2, "{how:?}");
        let all = events(&handle);
        let done = of_kind(&all, "agent.completed");
        assert_eq!(done.len(), 1, "{how:?}");
        assert_eq!(done[0]["output"], "Charged pay_1");
        // The retried answer's usage is what the run counts: the broken one reported none.
        assert_eq!(done[0]["tokens"]["total"], 23);
    }
}

#[tokio::test]
async fn breaks_before_any_delta_are_retried_within_the_bound_then_fail() {
    let cut = || fake_llm::broken(fake_llm::openai_sse(&["x"], &[], (1, 1)), 0, Break::Reset);
    let (fake, handle, frames) = openai_run(vec![cut(), cut(), cut(), cut()]).await;
    assert_eq!(fake.seen().len(), 3, "one try and two retries");
    assert_eq!(kinds(&frames), ["user_message", "error"]);
    let message = frames[1]["message"].as_str().unwrap();
    assert!(
        message.starts_with("openai: the stream broke (after 3 tries): "),
        "{message}"
    );
    let all = events(&handle);
    assert_eq!(of_kind(&all, "agent.failed")[0]["error"], message);
}

#[tokio::test]
async fn a_cut_after_deltas_fails_the_run_with_an_error_frame_and_no_retry() {
    let started = Instant::now();
    let (fake, handle, frames) = openai_run(vec![
        fake_llm::broken(
            fake_llm::openai_sse(&["Let me ", "charge ", "that"], &[], (9, 2)),
            2,
            Break::Reset,
        ),
        fake_llm::openai_sse(&["never asked"], &[], (1, 1)),
    ])
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        kinds(&frames),
        ["user_message", "assistant_text", "assistant_text", "error"]
    );
    assert_eq!(texts(&frames), ["Let me ", "charge "]);
    let error = frames.last().unwrap();
    // The codespar SDK reads `error` (the code) and `message` off the frame.
    assert_eq!(error["error"], "agent_failed");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with("openai: the stream broke after 2 text deltas: "),
        "{message}"
    );
    assert_eq!(
        fake.seen().len(),
        1,
        "what the client saw cannot be taken back"
    );
    let all = events(&handle);
    let failed = of_kind(&all, "agent.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["error"], message);
    assert_eq!(failed[0]["provider"], "openai");
    assert!(of_kind(&all, "agent.completed").is_empty());
}

#[tokio::test]
async fn an_early_end_or_a_provider_error_after_deltas_names_its_reason() {
    let (_, _, frames) = openai_run(vec![fake_llm::broken(
        fake_llm::openai_sse(&["half", "way"], &[], (9, 2)),
        1,
        Break::Truncate,
    )])
    .await;
    assert_eq!(kinds(&frames), ["user_message", "assistant_text", "error"]);
    assert_eq!(
        frames[2]["message"],
        "openai: the stream broke after 1 text delta: it ended before a finish_reason or [DONE]"
    );
    let (_, _, frames) = openai_run(vec![fake_llm::broken(
        fake_llm::openai_sse(&["half", "way"], &[], (9, 2)),
        2,
        Break::ServerError,
    )])
    .await;
    assert_eq!(
        frames.last().unwrap()["message"],
        "openai: the stream broke after 2 text deltas: The server had an error while processing your request."
    );
    // The provider's own words are masked like any provider error.
    let (_, _, frames) = openai_run(vec![Answer::SseBroken {
        frames: vec![
            (
                None,
                json!({"choices": [{"index": 0, "delta": {"content": "hi"}}]}).to_string(),
            ),
            (
                None,
                json!({"error": {"message": "key sk-abc123def456ghi789jkl012 was revoked"}})
                    .to_string(),
            ),
        ],
        reset: false,
    }])
    .await;
    let message = frames.last().unwrap()["message"].as_str().unwrap();
    assert_eq!(
        message,
        "openai: the stream broke after 1 text delta: key sk-**** was revoked"
    );
}

#[tokio::test]
async fn an_anthropic_stream_overloaded_mid_way_fails_and_one_overloaded_at_once_is_retried() {
    let mut settings = spyglass::runtime::llm::settings::ProviderSettings::default();
    let fake = FakeLlm::start(vec![
        fake_llm::broken(
            fake_llm::anthropic_sse(&["On ", "it"], &[], (9, 2)),
            0,
            Break::ServerError,
        ),
        fake_llm::anthropic_sse(&["Done"], &[], (12, 1)),
        fake_llm::broken(
            fake_llm::anthropic_sse(&["On ", "it", "!"], &[], (9, 2)),
            2,
            Break::ServerError,
        ),
    ])
    .await;
    settings.anthropic.base_url = Some(fake.url.clone());
    settings.max_retry_wait = Duration::from_millis(50);
    let handle = server(spyglass::runtime::RuntimeConfig {
        models: settings,
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u", "model": "anthropic",
                   "mocks": {"asaas/create_payment": {"id": "pay_1"}}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let sid = created["id"].as_str().unwrap();
    let frames = sse_frames(&api, sid, "go").await;
    assert_eq!(kinds(&frames), ["user_message", "assistant_text", "done"]);
    assert_eq!(texts(&frames), ["Done"]);
    let frames = sse_frames(&api, sid, "again").await;
    assert_eq!(
        kinds(&frames),
        ["user_message", "assistant_text", "assistant_text", "error"]
    );
    assert_eq!(
        frames[3]["message"],
        "anthropic: the stream broke after 2 text deltas: Overloaded"
    );
    assert_eq!(fake.seen().len(), 3);
}

#[tokio::test]
async fn a_plain_send_whose_answer_is_cut_is_asked_again() {
    let fake = FakeLlm::start(vec![
        Answer::SseBroken {
            frames: vec![(None, "{\"choices\": [".to_owned())],
            reset: true,
        },
        fake_llm::openai(Some("Charged pay_1"), &[], (5, 2)),
    ])
    .await;
    let handle = server(model_config(&fake)).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai")).await;
    let (status, body) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "go"}),
        )
        .await;
    assert_eq!(
        (status, &body["message"]),
        (200, &json!("Charged pay_1")),
        "{body}"
    );
    assert_eq!(fake.seen().len(), 2);
}
