//! Model cassettes: a run recorded against a (fake) provider replays with no network and
//! the same events, its steps marked as served from the cassette; a request with no
//! recording fails the run naming the step and how it differs from the nearest one.

use crate::model_openai::{events, model_config, of_kind, openai_session};
use crate::support::fake_llm::{self, FakeLlm};
use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::RuntimeConfig;
use spyglass::runtime::llm::settings::ProviderSettings;
use std::path::{Path, PathBuf};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "spyglass-cassettes-{name}-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn replay_config(dir: &Path) -> RuntimeConfig {
    // No route at all: a replaying runtime needs none, and reaches nothing.
    RuntimeConfig {
        models: ProviderSettings {
            replay_dir: Some(dir.to_owned()),
            ..ProviderSettings::default()
        },
        policy: spyglass::runtime::Policy::from_toml("deny_list = [\"asaas/delete_*\"]").unwrap(),
        ..test_config()
    }
}

/// Events with what differs between any two runs taken out: ids, stamps, durations.
fn normalized(events: &[Value]) -> Vec<Value> {
    fn strip(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| {
                        !matches!(
                            k.as_str(),
                            "ts" | "seq"
                                | "id"
                                | "callId"
                                | "sessionId"
                                | "conversationId"
                                | "startedAt"
                                | "duration"
                                | "cassette"
                                | "approvalId"
                        )
                    })
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    events.iter().map(strip).collect()
}

async fn run(config: RuntimeConfig, message: &str) -> (u16, Value, Vec<Value>) {
    let handle = server(config).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai:gpt-4o-mini")).await;
    let (status, body) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": message}),
        )
        .await;
    (status, body, events(&handle))
}

#[tokio::test]
async fn a_recorded_run_replays_with_identical_events_and_no_network() {
    let dir = temp_dir("roundtrip");
    let fake = FakeLlm::start(vec![
        fake_llm::openai(
            Some("Charging"),
            &[
                ("call_a", "asaas__create_payment", json!({"value": 5})),
                ("call_b", "asaas__delete_customer", json!({})),
            ],
            (40, 12),
        ),
        fake_llm::openai(Some("Charged pay_1"), &[], (90, 6)),
    ])
    .await;
    let mut config = model_config(&fake);
    config.models.record_dir = Some(dir.clone());
    let (status, recorded_body, recorded) = run(config, "Charge R$5").await;
    assert_eq!(status, 200, "{recorded_body}");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(
        files
            .iter()
            .all(|f| f.starts_with("openai-")
                && Path::new(f).extension().is_some_and(|e| e == "json"))
    );
    let entry: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(&files[0])).unwrap()).unwrap();
    assert_eq!(entry["version"], 1);
    assert!(entry["request"]["messages"].is_array());
    assert!(
        !entry.to_string().contains("0123456789abcdef"),
        "a key was recorded"
    );

    let (status, replayed_body, replayed) = run(replay_config(&dir), "Charge R$5").await;
    assert_eq!(status, 200, "{replayed_body}");
    assert_eq!(fake.seen().len(), 2, "replay reached the provider");
    assert_eq!(normalized(&replayed), normalized(&recorded));
    assert_eq!(replayed_body["message"], recorded_body["message"]);
    let steps = of_kind(&replayed, "agent.step.completed");
    assert_eq!(steps.len(), 2);
    assert!(steps.iter().all(|s| s["step"]["cassette"] == true));
    let live = of_kind(&recorded, "agent.step.completed");
    assert!(live.iter().all(|s| s["step"].get("cassette").is_none()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_request_with_no_recording_fails_naming_the_step_and_the_difference() {
    let dir = temp_dir("miss");
    let fake = FakeLlm::start(vec![fake_llm::openai(Some("hi"), &[], (3, 1))]).await;
    let mut config = model_config(&fake);
    config.models.record_dir = Some(dir.clone());
    let (status, _, _) = run(config, "Charge R$5").await;
    assert_eq!(status, 200);
    let (status, body, events) = run(replay_config(&dir), "Refund R$5").await;
    assert_eq!(status, 503, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with("step 0: no openai recording for this request"),
        "{message}"
    );
    assert!(
        message.contains(r#"first /messages/0/content: recorded "Charge R$5", now "Refund R$5""#),
        "{message}"
    );
    assert_eq!(of_kind(&events, "agent.failed")[0]["error"], message);
    let (_, body, _) = run(replay_config(&temp_dir("empty")), "x").await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("cannot read the cassette directory"),
        "{body}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
