//! The real `CodeSpar` Python SDK's `send` and `send_stream` against a session backed by
//! a real-model provider: a fake OpenAI-compatible server on loopback scripts the model,
//! tests/sdk/models.py checks what the SDK reads, this test what the provider was sent.

use crate::support::fake_llm::{self, FakeLlm};
use crate::support::venv;
use serde_json::json;
use spyglass::runtime::llm::settings::ProviderSettings;
use spyglass::runtime::{RuntimeConfig, start};
use std::path::Path;

const KEY: &str = "csk_test_spyglass_models";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_sends_and_streams_through_a_real_model_provider() {
    let python = tokio::task::spawn_blocking(venv::sdk_python).await.unwrap();
    let call = [("call_1", "asaas__create_payment", json!({"value": 5}))];
    let fake = FakeLlm::start(vec![
        fake_llm::openai(None, &call, (20, 5)),
        fake_llm::openai(Some("Charged pay_1"), &[], (30, 3)),
        fake_llm::openai_sse(&["Let me ", "charge"], &call, (20, 4)),
        fake_llm::openai_sse(&["Charged ", "pay_1"], &[], (30, 2)),
        fake_llm::broken(
            fake_llm::openai_sse(&["Charging", " now"], &[], (20, 2)),
            1,
            fake_llm::Break::Reset,
        ),
    ])
    .await;
    let mut models = ProviderSettings::default();
    models.openai.base_url = Some(fake.url.clone());
    let handle = start(
        RuntimeConfig {
            test_mode: true,
            api_keys: vec![KEY.to_owned()],
            models,
            ..RuntimeConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/models.py");
    let output = venv::run_script(python, script, handle.url(), KEY).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tests/sdk/models.py failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("checks passed"), "{stdout}\n{stderr}");
    let seen = fake.seen();
    // The cut stream was not asked again: the SDK had its first delta.
    assert_eq!(seen.len(), 5);
    // The plain send asked for whole answers, the stream for SSE; no key was configured,
    // so none was sent (a local server such as Ollama needs none).
    assert!(seen[0].body.get("stream").is_none());
    assert_eq!(seen[2].body["stream"], true);
    assert!(seen.iter().all(|s| s.header("authorization").is_none()));
    // The second run's conversation starts afresh with its own message.
    assert_eq!(
        seen[2].body["messages"],
        json!([{"role": "user", "content": "Charge R$5 again"}])
    );
    handle.shutdown().await;
}
