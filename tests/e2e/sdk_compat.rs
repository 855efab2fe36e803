//! Compatibility with the real `CodeSpar` Python SDK: builds (or reuses) a venv under
//! target/sdk-venv with codespar==0.14.0 from `PyPI`, starts the runtime in-process and runs
//! tests/sdk/compat.py against it. Missing python3/venv/pip fail with what to install.

use crate::support::venv;
use spyglass::runtime::{Policy, RuntimeConfig, start};

use std::path::Path;
use venv::sdk_python;

const KEY: &str = "csk_test_spyglass_compat";

fn policy() -> Policy {
    Policy::from_toml(
        r#"
        [[rule]]
        id = "no_refunds"
        tool = "*/refund_*"
        action = "deny"

        [[rule]]
        id = "payments_require_approval"
        tool = "*/create_payment"
        action = "approval"
        when = "input.value > 1000"
        "#,
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_drives_every_path() {
    let python = tokio::task::spawn_blocking(sdk_python).await.unwrap();
    let handle = start(
        RuntimeConfig {
            test_mode: true,
            policy: policy(),
            api_keys: vec![KEY.to_owned()],
            ..RuntimeConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/compat.py");
    let url = handle.url();
    let output = venv::run_script(python, script, url, KEY).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tests/sdk/compat.py failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("checks passed"), "{stdout}\n{stderr}");

    // What the SDK did is on the observer stream too.
    let frames = handle.runtime().events_since(0, 10_000);
    let count = |kind: &str| frames.iter().filter(|f| f.event.kind() == kind).count();
    assert!(count("session.created") >= 5);
    assert!(count("agent.completed") >= 2);
    assert_eq!(count("approval.replayed"), 1);
    handle.shutdown().await;
}
