//! A session's timeline in the order things happened: a scripted three-step `send` on a
//! real runtime, every call mocked, observed over the stream and drawn by the Sessions view.
//! Each call stands under the step that made it, whatever the clock says; stamps carry
//! microseconds; a recording stamped in milliseconds only still plays back the same.

use crate::support::runtime::*;
use crate::support::ui::{screen, until};
use serde_json::{Value, json};
use spyglass::client::ClientMsg;
use spyglass::client::replay::spawn_replay;
use spyglass::model::Limits;
use spyglass::protocol::decode;
use spyglass::ui::views::fmt_ms;
use spyglass::ui::{App, FakeClock, Watching};
use std::sync::Arc;
use tokio::sync::mpsc;

const NOW: &str = "2026-11-23T17:01:05.000Z";
/// Every stamp of the ms-only recording: one millisecond, as a mocked run looked before.
const ONE_MS: &str = "2026-11-23T17:01:02.123Z";
const SESSION: &str = "ses_timeline";

fn script() -> Value {
    json!({
        "sequence": [
            {"tool_calls": [{"name": "asaas/create_payment", "arguments": {"value": 5}},
                            {"name": "asaas/refund_payment", "arguments": {"id": "pay_1"}}]},
            {"tool_calls": [{"name": "nuvem-fiscal/create_nfe", "arguments": {"value": 5}}]},
            {"text": "Charged, refunded and invoiced"}
        ]
    })
}

/// Every frame a three-step `send` put on the stream, as the observer received them.
async fn three_step_send() -> Vec<Value> {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let mut ws = observe(&handle, "").await;
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas", "nuvem-fiscal"], "user_id": "ana",
                   "mocks": {"asaas/create_payment": {"id": "pay_1"},
                             "asaas/refund_payment": {"refunded": true},
                             "nuvem-fiscal/create_nfe": [{"id": "nfe_1"}]},
                   "model": script()}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let sid = created["id"].as_str().unwrap().to_owned();
    let (status, result) = api
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "charge, refund, invoice"}),
        )
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["iterations"], 3, "{result}");
    // session.created, 3 × tool.called, 3 × agent.step.completed, agent.completed.
    let frames = frames(&mut ws, 8).await;
    let kinds: Vec<&str> = frames.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "session.created",
            "tool.called",
            "tool.called",
            "agent.step.completed",
            "tool.called",
            "agent.step.completed",
            "agent.step.completed",
            "agent.completed"
        ]
    );
    frames
}

fn app() -> App {
    let mut app = App::new(
        "http://127.0.0.1:8000",
        Limits::default(),
        Arc::new(FakeClock::at(NOW)),
    );
    app.on_client(ClientMsg::Connected);
    app
}

fn feed(app: &mut App, frames: &[Value]) {
    let frames = frames
        .iter()
        .map(|f| decode(&f.to_string()).unwrap())
        .collect();
    app.on_client(ClientMsg::Frames(frames));
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ`, exactly six fraction digits.
fn has_micros(ts: &str) -> bool {
    let fraction = ts
        .strip_suffix('Z')
        .and_then(|t| t.rsplit_once('.'))
        .map(|(_, f)| f);
    ts.len() == "2026-11-23T17:01:02.123456Z".len()
        && fraction.is_some_and(|f| f.len() == 6 && f.bytes().all(|b| b.is_ascii_digit()))
        && chrono::DateTime::parse_from_rfc3339(ts).is_ok()
}

/// The frames as an older runtime would have written them: every stamp the same
/// millisecond, the session id fixed, and call and step durations set to known values.
fn ms_only(frames: &[Value]) -> Vec<Value> {
    let sid = frames[0]["sessionId"].as_str().unwrap().to_owned();
    let call_ms = [0.042, 1.3, 0.0875];
    let mut calls = 0;
    let mut steps = 0;
    frames
        .iter()
        .map(|f| {
            let text = f.to_string().replace(&sid, SESSION);
            let mut f: Value = serde_json::from_str(&text).unwrap();
            f["ts"] = json!(ONE_MS);
            match f["kind"].as_str().unwrap() {
                "tool.called" => {
                    f["startedAt"] = json!(ONE_MS);
                    f["duration"] = json!(call_ms[calls]);
                    calls += 1;
                }
                "agent.step.completed" => {
                    // Older runtimes told no start of a step.
                    f.as_object_mut().unwrap().remove("startedAt");
                    steps += 1;
                    f["duration"] = json!([1.5, 2.0, 2.1][steps - 1]);
                    for call in f["step"]["toolCalls"].as_array_mut().unwrap() {
                        call["duration"] = json!(0.01);
                    }
                }
                // The run's own duration shows in the session's summary.
                "agent.completed" => f["duration"] = json!(2.1),
                _ => {}
            }
            f
        })
        .collect()
}

/// Line numbers of each needle on the screen, first match after the previous one; a
/// needle `a*b` is a line holding both `a` and `b`.
fn in_order(screen: &str, needles: &[&str]) {
    let lines: Vec<&str> = screen.lines().collect();
    let mut from = 0;
    for needle in needles {
        let at = lines[from..]
            .iter()
            .position(|l| needle.split('*').all(|part| l.contains(part)))
            .unwrap_or_else(|| panic!("{needle:?} not after line {from}:\n{screen}"));
        from += at + 1;
    }
}

/// The rows a three-step run must show, top to bottom: each call indented under its
/// step (at 80 columns the server's name is cut, the tool's end is kept).
const ORDER: &[&str] = &[
    "▾ step 0",
    "│   as*/create_payment",
    "│   as*/refund_payment",
    "▾ step 1",
    "│   nu*/create_nfe",
    "▾ step 2",
];

#[tokio::test]
async fn a_mocked_three_step_send_draws_each_call_under_its_step() {
    let frames = three_step_send().await;
    for f in &frames {
        let ts = f["ts"].as_str().unwrap();
        assert!(has_micros(ts), "ts without microseconds: {f}");
        match f["kind"].as_str().unwrap() {
            "tool.called" => {
                assert!(has_micros(f["startedAt"].as_str().unwrap()), "{f}");
                let ms = f["duration"].as_f64().unwrap();
                assert!(ms > 0.0 && ms.fract() != 0.0, "whole ms: {f}");
            }
            "agent.step.completed" => {
                assert!(has_micros(f["startedAt"].as_str().unwrap()), "{f}");
            }
            _ => {}
        }
    }
    // The frames as they came, real microsecond stamps and all.
    let mut live = app();
    feed(&mut live, &frames);
    let text = screen(&mut live, 200, 50);
    in_order(&text, ORDER);
    // The DUR column shows each call's own duration, never a whole-millisecond 0.
    for f in frames.iter().filter(|f| f["kind"] == "tool.called") {
        let tool = f["tool"].as_str().unwrap();
        let dur = fmt_ms(f["duration"].as_f64().unwrap());
        let line = text
            .lines()
            .find(|l| l.contains(&format!("  {tool}")))
            .unwrap();
        assert!(line.contains(&format!(" {dur} ")), "{dur} not in {line}");
        assert!(!line.contains(" 0ms "), "{line}");
    }

    // The same run, every stamp in one millisecond: only ids and seq can order it.
    let recorded = ms_only(&frames);
    for (width, height) in [(80, 24), (200, 50)] {
        let mut app = app();
        feed(&mut app, &recorded);
        let text = screen(&mut app, width, height);
        in_order(&text, ORDER);
        // An exhausted mock says so whole, however narrow the Mocks pane.
        assert!(text.contains("1/1 exhausted"), "{text}");
        insta::assert_snapshot!(format!("ms_only_{width}x{height}"), text);
    }
}

#[tokio::test]
async fn a_millisecond_recording_replays_with_calls_under_their_steps() {
    let recorded = ms_only(&three_step_send().await);
    let lines: String = recorded.iter().map(|f| format!("{f}\n")).collect();
    let mut app = app();
    app.watching = Watching::Replay {
        file: "old.jsonl".into(),
    };
    let (tx, mut rx) = mpsc::channel::<ClientMsg>(64);
    spawn_replay(lines, 0.0, tx);
    let shown = until(&mut app, &mut rx, (200, 50), "the replayed run", |s| {
        s.contains("step 2 · stop")
    })
    .await;
    in_order(&shown, ORDER);
    assert_eq!(app.model.counters.parse_errors, 0);
}

#[tokio::test]
async fn steps_fold_and_unfold_one_at_a_time_or_all_together() {
    use crate::support::ui::{key, press};
    use crossterm::event::KeyCode;
    let recorded = ms_only(&three_step_send().await);
    let mut app = app();
    feed(&mut app, &recorded);
    // The timeline focused, its first row (step 0) selected: Enter folds it.
    key(&mut app, 'l');
    press(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 80, 24);
    assert!(text.contains("▸ step 0"), "{text}");
    assert!(
        !text.contains("/create_payment"),
        "step 0's calls are folded: {text}"
    );
    in_order(
        &text,
        &["▸ step 0", "▾ step 1", "│   nu*/create_nfe", "▾ step 2"],
    );
    insta::assert_snapshot!("step_0_folded", text);
    // Enter again unfolds it; nothing was opened.
    press(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 80, 24);
    in_order(&text, ORDER);
    assert!(app.sessions.detail.is_none());
    // `z` folds every step, the cursor going from a folded call to its step.
    key(&mut app, 'j');
    key(&mut app, 'j');
    key(&mut app, 'z');
    let text = screen(&mut app, 80, 24);
    in_order(&text, &["▸ step 0", "▸ step 1", "▸ step 2"]);
    assert!(
        !text.contains("│   as") && !text.contains("│   nu"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("▸ step 0") && l.contains('›')),
        "the cursor is on the folded call's step: {text}"
    );
    // `z` again unfolds them all.
    key(&mut app, 'z');
    in_order(&screen(&mut app, 80, 24), ORDER);
}
