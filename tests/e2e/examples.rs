//! The examples in examples/ run as written: the Python quickstart through the real SDK
//! (in the shared venv) against an in-process runtime, and the JavaScript observer
//! forwarder with node when node is installed.

use crate::support::runtime::policy_server;
use crate::support::venv;

use spyglass::runtime::ServerHandle;
use std::path::Path;
use std::process::Command;

async fn runtime() -> ServerHandle {
    policy_server(spyglass::demo::POLICY).await
}

fn example(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn kinds(handle: &ServerHandle) -> Vec<String> {
    handle
        .runtime()
        .events_since(0, 10_000)
        .iter()
        .map(|f| f.event.kind().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_quickstart_runs_against_spyglass_serve() {
    let python = tokio::task::spawn_blocking(venv::sdk_python).await.unwrap();
    let handle = runtime().await;
    let url = handle.url();
    let script = example("examples/python/quickstart.py");
    let output = venv::run_script(python, script, url, "csk_test_local").await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "quickstart failed:\n{stdout}\n{stderr}"
    );
    let line = |prefix: &str| {
        stdout
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{stdout}"))
            .to_owned()
    };
    assert_eq!(line("payment"), "payment pay_test_42 PENDING");
    assert!(
        line("misspelled tool:").contains("tool_not_mocked"),
        "{stdout}"
    );
    assert!(
        line("large payment:").starts_with("large payment: held for approval apr_"),
        "{stdout}"
    );
    assert_eq!(
        line("agent said:"),
        "agent said: Issued the NF-e for pay_test_42."
    );
    assert_eq!(
        line("nuvem-fiscal/create_nfe"),
        "nuvem-fiscal/create_nfe success nfe_1"
    );
    assert_eq!(line("closed"), "closed");

    let kinds = kinds(&handle);
    for kind in [
        "session.created",
        "tool.called",
        "approval.requested",
        "agent.step.completed",
        "agent.completed",
        "session.closed",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "{kind} missing from {kinds:?}"
        );
    }
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_forwarder_posts_seed_events_to_the_runtime() {
    assert!(
        Command::new("node").arg("--version").output().is_ok(),
        "the JavaScript example needs Node.js 18+: install it (apt-get install nodejs)"
    );
    let handle = runtime().await;
    let url = handle.url();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(example("examples/js/forward-observer.mjs"))
            .env("SPYGLASS_URL", url)
            .env_remove("CODESPAR_API_KEY")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "node failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("forwarded 3 events"), "{stdout}\n{stderr}");
    assert!(stderr.is_empty(), "the runtime refused something: {stderr}");
    let frames = handle.runtime().events_since(0, 100);
    let kinds: Vec<&str> = frames.iter().map(|f| f.event.kind()).collect();
    assert_eq!(
        kinds,
        [
            "agent.step.completed",
            "agent.completed",
            "agent.eval.completed"
        ]
    );
    assert!(frames.iter().all(|f| f.session_id.is_none() && f.seq > 0));
    assert_eq!(frames[1].event.conversation_id(), Some("conv_js_1"));
    handle.shutdown().await;
}

/// The README's curl walkthrough, run as written (bash, curl, jq) against a runtime: the
/// newcomer's first minutes must work, its comments must say what happens, and each answer
/// reads as one line a person follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_curl_walkthrough_runs_as_written() {
    for tool in ["bash", "curl", "jq"] {
        assert!(
            Command::new(tool).arg("--version").output().is_ok(),
            "the README walkthrough test runs {tool}: install it (apt-get install {tool})"
        );
    }
    let readme = std::fs::read_to_string(example("README.md")).unwrap();
    let block = readme
        .split("<!-- walkthrough:start -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- walkthrough:end -->").next())
        .expect("README.md marks its walkthrough");
    let script = block
        .trim()
        .trim_start_matches("```sh")
        .trim_end_matches("```")
        .to_owned();
    assert!(script.contains("URL=http://127.0.0.1:8000"), "{script}");
    let handle = crate::support::runtime::test_server().await;
    let script = script.replace(
        "URL=http://127.0.0.1:8000",
        &format!("URL={}", handle.url()),
    );
    let output = tokio::task::spawn_blocking(move || {
        Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "walkthrough failed:\n{stdout}\n{stderr}"
    );
    let sessions = handle.runtime().events_since(0, 100);
    let session_id = sessions
        .first()
        .and_then(|f| f.session_id.clone())
        .unwrap_or_default();
    assert!(session_id.starts_with("ses_"), "{session_id:?}");
    // What the comments promise, one line per answer: two payments, then exhausted, then
    // not mocked, then the session closed with its four calls.
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "one line per answer:\n{stdout}");
    assert_eq!(
        lines[0], r#"asaas/create_payment: {"id":"pay_1"}"#,
        "{stdout}"
    );
    assert_eq!(
        lines[1], r#"asaas/create_payment: {"id":"pay_2"}"#,
        "{stdout}"
    );
    assert!(lines[2].starts_with("mocks_exhausted: "), "{stdout}");
    assert!(lines[2].contains("asaas/create_payment"), "{stdout}");
    assert!(lines[3].starts_with("tool_not_mocked: "), "{stdout}");
    assert!(lines[3].contains("asaas/refund_payment"), "{stdout}");
    assert_eq!(
        lines[4],
        format!("{session_id} closed after 4 calls"),
        "{stdout}"
    );
    let kinds: Vec<&str> = sessions.iter().map(|f| f.event.kind()).collect();
    assert_eq!(kinds.first(), Some(&"session.created"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"session.closed"), "{kinds:?}");
    assert_eq!(
        kinds.iter().filter(|k| **k == "tool.called").count(),
        4,
        "{kinds:?}"
    );
}
