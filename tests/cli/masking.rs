//! Secrets under any common name, a name written with JSON escapes, and values shaped
//! like keys never leave spyglass unmasked: not in `tail --json`, not in a `record` file,
//! not on the inspector's screen.

use crate::support::cli::{interrupt, spyglass, wait_exit, wait_for_lines};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use spyglass::client::ClientMsg;
use spyglass::model::Limits;
use spyglass::protocol::decode;
use spyglass::runtime::{RuntimeConfig, ServerHandle, start};
use spyglass::ui::{App, FakeClock};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// The secret parts: none may appear in any output.
const SECRETS: &[&str] = &[
    "wJalrXUtnFEMI-K7MDENG",
    "BEGIN-PRIVATE-abc123",
    "hunter2-pwd",
    "escaped-pass-777",
    "IOSFODNN7EXAMPLE",
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "dozjgNryP4J3jVmNHl0w5N",
];

/// A call input holding each form; `pass\u0077ord` is written escaped in the JSON text.
const INPUT: &str = r#"{"aws_secret_access_key":"wJalrXUtnFEMI-K7MDENG","private_key":"BEGIN-PRIVATE-abc123","credentials":{"user":"bob","pwd":"hunter2-pwd"},"pass\u0077ord":"escaped-pass-777","note":"id AKIAIOSFODNN7EXAMPLE gh ghp_16C7e42F292c6912E7710c838347Ae178B4a jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dozjgNryP4J3jVmNHl0w5N","token_count":3}"#;

fn assert_masked(text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{secret} leaked:\n{text}");
    }
    assert!(text.contains("****"), "nothing was masked:\n{text}");
    assert!(text.contains("token_count"), "{text}");
}

async fn runtime() -> ServerHandle {
    let config = RuntimeConfig {
        test_mode: true,
        ..RuntimeConfig::default()
    };
    start(config, "127.0.0.1:0".parse().unwrap()).await.unwrap()
}

/// A session and one call whose input is [`INPUT`], sent as that exact text.
async fn secret_call(url: &str) {
    let http = reqwest::Client::new();
    let created: serde_json::Value = http
        .post(format!("{url}/v1/sessions"))
        .json(&json!({"servers": ["vault"], "user_id": "u",
                      "mocks": {"vault/login": [{"ok": true}]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap();
    let body = format!(r#"{{"tool":"vault/login","input":{INPUT}}}"#);
    let res = http
        .post(format!("{url}/v1/sessions/{id}/execute"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_json_masks_every_secret_form_and_stays_json() {
    let rt = runtime().await;
    secret_call(&rt.url()).await;
    let mut child = spyglass(&["tail", "--json", "--url", &rt.url()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout).lines();
        (0..2)
            .map(|_| lines.next().unwrap().unwrap())
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    interrupt(&child);
    wait_exit(&mut child, Duration::from_secs(10));
    assert_masked(&lines[1]);
    let call: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    let input = &call["input"];
    assert_eq!(input["aws_secret_access_key"], "****");
    assert_eq!(input["private_key"], "****");
    assert_eq!(input["credentials"]["pwd"], "****");
    assert_eq!(input["credentials"]["user"], "bob");
    assert_eq!(input["password"], "****");
    assert_eq!(input["token_count"], 3);
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_files_hold_masked_frames() {
    let rt = runtime().await;
    secret_call(&rt.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let mut child = spyglass(&["record", "-o", path.to_str().unwrap(), "--url", &rt.url()])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_lines(&path, 2).await;
    interrupt(&child);
    wait_exit(&mut child, Duration::from_secs(10));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_masked(&text);
    // Still frames `replay` can read.
    for line in text.lines() {
        decode(line).unwrap();
    }
    rt.shutdown().await;
}

#[test]
fn the_inspector_shows_every_secret_form_masked() {
    let clock = Arc::new(FakeClock::at("2026-11-22T21:44:00.000Z"));
    let mut app = App::new("http://127.0.0.1:8000", Limits::default(), clock);
    app.on_client(ClientMsg::Connected);
    let frames = [
        r#"{"kind":"session.created","seq":1,"ts":"2026-11-22T21:43:30.000Z","sessionId":"ses_s","userId":"u","servers":[],"project":"default","mocks":[]}"#.to_owned(),
        format!(
            r#"{{"kind":"tool.called","seq":2,"ts":"2026-11-22T21:43:31.000Z","sessionId":"ses_s","callId":"call_s","tool":"vault/login","input":{INPUT},"outcome":{{"result":{{"ok":true}}}},"startedAt":"2026-11-22T21:43:31.000Z","duration":1.0,"source":"execute"}}"#
        ),
    ];
    for frame in &frames {
        app.on_client(ClientMsg::Frames(vec![decode(frame).unwrap()]));
    }
    let key = |app: &mut App, code| app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
    // The Events list, the frame opened, and the Sessions call pane.
    key(&mut app, KeyCode::Char('4'));
    let list = crate::support::ui::screen(&mut app, 400, 8);
    // A row says what happened (no input); the input is in the frame opened below.
    for secret in SECRETS {
        assert!(!list.contains(secret), "{secret} leaked:\n{list}");
    }
    assert!(list.contains("vault/login -> ok"), "{list}");
    key(&mut app, KeyCode::Enter);
    let detail = crate::support::ui::screen(&mut app, 160, 40);
    assert_masked(&detail);
    assert!(detail.contains(r#""private_key": "****""#), "{detail}");
    assert!(detail.contains(r#""pwd": "****""#), "{detail}");
    assert!(detail.contains(r#""password": "****""#), "{detail}");
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('1'));
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Enter);
    assert!(app.sessions.detail.is_some());
    let call = crate::support::ui::screen(&mut app, 160, 40);
    assert_masked(&call);
    assert!(
        call.contains(r#""aws_secret_access_key": "****""#),
        "{call}"
    );
}
