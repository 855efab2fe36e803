//! `spyglass replay`: a stream recorded from a real runtime (through `tail`'s JSON-lines
//! writer, as `spyglass record` writes it) played back into the App offline. The screens
//! show what was recorded; approving and rerunning say why they cannot; a line that does not
//! decode is counted, not fatal; and the command refuses a missing file or a bad speed.

use crate::support::runtime::{policy_server, post};
use crate::support::ui::{key, screen, until};
use serde_json::json;
use spyglass::client::ClientMsg;
use spyglass::client::replay::spawn_replay;
use spyglass::client::tail::{Format, tail};
use spyglass::model::Limits;
use spyglass::ui::{App, FakeClock, Watching};
use std::process::Command;
use std::sync::Arc;
use tokio::sync::mpsc;

const SIZE: (u16, u16) = (150, 24);

/// A session with a stateful mock used up and a payment held for approval, recorded as
/// JSON lines: every frame the runtime emitted, in order.
async fn recording() -> String {
    let handle = policy_server(
        "[[rule]]\nid = \"big_payments\"\ntool = \"*/create_payment\"\naction = \"approval\"\nwhen = \"input.value > 1000\"\n",
    )
    .await;
    let url = handle.url();
    let http = reqwest::Client::new();
    let (_, created) = post(
        &http,
        format!("{url}/v1/sessions"),
        json!({"servers": ["asaas", "nuvem-fiscal"], "user_id": "rec_user",
               "mocks": {"asaas/create_payment": {"id": "pay_1"},
                         "nuvem-fiscal/create_nfe": [{"id": "nfe_1"}]}}),
    )
    .await;
    let sid = created["id"].as_str().unwrap().to_owned();
    for (tool, value) in [
        ("nuvem-fiscal/create_nfe", 1),
        ("nuvem-fiscal/create_nfe", 2),
        ("asaas/create_payment", 5000),
    ] {
        post(
            &http,
            format!("{url}/v1/sessions/{sid}/execute"),
            json!({"tool": tool, "input": {"value": value}}),
        )
        .await;
    }
    let last_seq = handle.runtime().stats().emitted;
    let mut out = Vec::new();
    tail(
        &spyglass::client::Endpoint::new(&url),
        Format::JsonLines,
        Some(last_seq),
        || Ok(&mut out),
        std::io::sink(),
        std::future::pending(),
        std::future::pending(),
    )
    .await
    .unwrap();
    handle.shutdown().await;
    String::from_utf8(out).unwrap()
}

fn offline_app(file: &str) -> App {
    let clock = Arc::new(FakeClock::at("2026-11-23T03:00:00.000Z"));
    let mut app = App::new(file, Limits::default(), clock);
    app.watching = Watching::Replay {
        file: file.to_owned(),
    };
    app
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_plays_back_offline_and_says_why_nothing_can_be_sent() {
    let mut text = recording().await;
    assert!(text.contains("approval.requested"), "{text}");
    // A line damaged in the file: counted and shown, the rest still plays.
    text.push_str("{\"kind\":\"tool.called\",\"seq\":\n");

    let mut app = offline_app("run.jsonl");
    let (tx, mut rx) = mpsc::channel::<ClientMsg>(1024);
    spawn_replay(text, 0.0, tx);
    let shown = until(&mut app, &mut rx, SIZE, "the recorded session", |s| {
        s.contains("rec_user") && s.contains("2 Approvals (1)")
    })
    .await;
    assert!(shown.contains("▶ replay"), "{shown}");
    assert!(shown.contains("replay run.jsonl · offline"), "{shown}");
    let nfe = shown
        .lines()
        .find(|l| l.contains("nuvem-fiscal/create_nfe") && l.contains("stateful"))
        .unwrap_or_default();
    assert!(nfe.contains("1/1"), "the recorded counter: {nfe}\n{shown}");

    // The player is done once the file is: the channel closes and the bar says so.
    while let Some(msg) = rx.recv().await {
        app.on_client(msg);
    }
    app.on_client_closed();
    let shown = screen(&mut app, SIZE.0, SIZE.1);
    assert!(shown.contains("■ replay ended"), "{shown}");
    assert!(shown.contains("parse errors 1"), "{shown}");

    // Approving a recorded call: refused at the key, with the reason.
    key(&mut app, '2');
    key(&mut app, 'a');
    let shown = screen(&mut app, SIZE.0, SIZE.1);
    assert!(
        shown.contains("cannot approve: this is a replay of run.jsonl"),
        "{shown}"
    );
    assert!(app.approvals.prompt.is_none(), "no confirm prompt opens");
}

#[test]
fn replay_refuses_a_missing_file_and_a_bad_speed() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
            .arg("replay")
            .args(args)
            .env("XDG_STATE_HOME", std::env::temp_dir())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["/nonexistent/run.jsonl"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("cannot read the recording /nonexistent/run.jsonl"),
        "{err}"
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_str().unwrap();
    let (code, err) = run(&[path, "--speed=-1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--speed must be a number of 0 or more"),
        "{err}"
    );
}
