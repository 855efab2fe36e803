//! Golden screens of the Events tab (`TestBackend` + insta, fixed clock): following the
//! stream, held still while frames keep folding, filtered; Enter shows a frame as pretty
//! JSON; and secrets (`csk_test_…` keys, Bearer values) never reach the rendered buffer,
//! the copied text, or the Sessions detail pane.

use crossterm::event::KeyCode;
use spyglass::clipboard::CopyOutcome;
use spyglass::ui::App;
use std::sync::{Arc, Mutex};

use crate::support::frames::{session_created, tool_called};
use crate::support::ui::{self, feed, press as key, screen};
use serde_json::{Value, json};

const KEY: &str = "csk_test_9f8e7d6c5b4a";

fn app() -> App {
    ui::app().0
}

fn keys(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}
/// Frame `seq`: sessions `ses_a` / `ses_b` alternate; every third is a session creation.
fn frame(seq: u64) -> Value {
    let sid = if seq.is_multiple_of(2) {
        "ses_a"
    } else {
        "ses_b"
    };
    let ts = format!("2026-11-22T21:43:{:02}.{:03}Z", seq / 10, (seq % 10) * 100);
    if seq.is_multiple_of(3) {
        session_created(seq, &ts, sid, &format!("u{seq}"), &[], &json!([]))
    } else {
        tool_called(
            seq,
            &ts,
            sid,
            &format!("call_{seq}"),
            "asaas/create_payment",
        )
        .input(json!({"value": seq}))
        .outcome(json!({"result": {"id": format!("pay_{seq}")}}))
        .duration(1.5)
        .build()
    }
}

fn fed(app: &mut App, seqs: std::ops::RangeInclusive<u64>) {
    for seq in seqs {
        feed(app, &frame(seq));
    }
}

#[test]
fn following() {
    let mut app = app();
    fed(&mut app, 1..=30);
    key(&mut app, KeyCode::Char('4'));
    let text = screen(&mut app, 120, 12);
    assert!(text.contains("following"));
    assert!(
        text.contains("30 "),
        "the newest frame is at the bottom: {text}"
    );
    insta::assert_snapshot!(text);
    fed(&mut app, 31..=32);
    let text = screen(&mut app, 120, 12);
    let last_row = text.lines().rev().nth(2).unwrap();
    assert!(last_row.contains("32"), "still following: {text}");
}

#[test]
fn paused() {
    let mut app = app();
    fed(&mut app, 1..=30);
    key(&mut app, KeyCode::Char('4'));
    screen(&mut app, 120, 12);
    key(&mut app, KeyCode::Char('f'));
    key(&mut app, KeyCode::Up);
    let before = screen(&mut app, 120, 12);
    // The stream keeps being folded into the model; the view holds still.
    fed(&mut app, 31..=40);
    assert_eq!(app.model.counters.last_seq, 40);
    let text = screen(&mut app, 120, 12);
    let rows = |t: &str| -> Vec<String> {
        t.lines()
            .skip(3)
            .take(7)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(rows(&before), rows(&text), "rows did not move");
    assert!(text.contains("held, 10 more below"), "{text}");
    insta::assert_snapshot!(text);
    // `f` follows again: the newest is at the bottom.
    key(&mut app, KeyCode::Char('f'));
    assert!(
        screen(&mut app, 120, 12)
            .lines()
            .rev()
            .nth(2)
            .unwrap()
            .contains("40")
    );
}

#[test]
fn filtered() {
    let mut app = app();
    fed(&mut app, 1..=30);
    key(&mut app, KeyCode::Char('4'));
    key(&mut app, KeyCode::Char('/'));
    keys(&mut app, "kind:session");
    key(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 120, 16);
    assert!(!text.contains("tool.called"), "{text}");
    assert!(text.contains("10/30"), "{text}");
    insta::assert_snapshot!(text);
    // A matching frame arriving later joins; others stay out.
    fed(&mut app, 31..=33);
    let text = screen(&mut app, 120, 16);
    assert!(
        text.contains("11/33") && !text.contains("tool.called"),
        "{text}"
    );
    // Session and free text filters.
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('/'));
    keys(&mut app, "session:ses_a");
    key(&mut app, KeyCode::Enter);
    assert!(!screen(&mut app, 120, 16).contains("ses_b"));
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('/'));
    keys(&mut app, "pay_17");
    key(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 120, 16);
    // The row says what happened (the result), the call id is in the frame's detail.
    assert!(
        text.contains("1/33") && text.contains(r#"-> ok {"id":"pay_17"}"#),
        "{text}"
    );
    key(&mut app, KeyCode::Esc);
    assert!(screen(&mut app, 120, 16).contains("33 "));
}

#[test]
fn enter_shows_the_frame_as_pretty_json() {
    let mut app = app();
    fed(&mut app, 1..=5);
    key(&mut app, KeyCode::Char('4'));
    screen(&mut app, 100, 30);
    key(&mut app, KeyCode::Up); // seq 4
    key(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 100, 30);
    assert!(text.contains("Event seq 4"), "{text}");
    assert!(text.contains(r#""kind": "tool.called","#), "{text}");
    assert!(
        text.contains(r#"    "value": 4"#),
        "pretty, indented: {text}"
    );
    key(&mut app, KeyCode::Esc);
    assert!(!screen(&mut app, 100, 30).contains("Event seq 4"));
    // An empty log: Enter, arrows and copy do nothing and do not crash.
    let mut empty = self::app();
    key(&mut empty, KeyCode::Char('4'));
    for code in [
        KeyCode::Enter,
        KeyCode::Up,
        KeyCode::Char('f'),
        KeyCode::Char('y'),
    ] {
        key(&mut empty, code);
    }
    assert!(screen(&mut empty, 100, 10).contains("No events yet."));
}

fn secret_call(seq: u64) -> Value {
    let input = json!({"api_key": KEY, "header": "Authorization: Bearer tok_abcdef123456",
                       "note": format!("use {KEY} please")});
    tool_called(
        seq,
        "2026-11-22T21:43:31.000Z",
        "ses_s",
        "call_s",
        "vault/login",
    )
    .input(input)
    .outcome(json!({"result": {"echo": KEY}}))
    .duration(1.0)
    .build()
}

#[test]
fn secrets_are_masked_in_every_rendered_pane_and_in_copies() {
    let mut app = app();
    let copied = Arc::new(Mutex::new(String::new()));
    let sink = copied.clone();
    app.copier = Box::new(move |text| {
        // The real clipboard masks; this stand-in records what it was handed.
        *sink.lock().unwrap() = spyglass::mask::mask(text).into_owned();
        CopyOutcome::Clipboard
    });
    feed(
        &mut app,
        &session_created(1, "2026-11-22T21:43:30.000Z", "ses_s", "u", &[], &json!([])),
    );
    feed(&mut app, &secret_call(2));
    let mut shown = vec![];
    // Events: the list, then the pretty JSON.
    key(&mut app, KeyCode::Char('4'));
    shown.push(screen(&mut app, 200, 12));
    key(&mut app, KeyCode::Enter);
    shown.push(screen(&mut app, 200, 40));
    key(&mut app, KeyCode::Char('y'));
    let text = screen(&mut app, 200, 40);
    assert!(text.contains("event seq 2: copied │"), "{text}");
    assert!(copied.lock().unwrap().contains("csk_test_****"));
    // Sessions: the call's detail pane.
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('1'));
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Enter);
    assert!(app.sessions.detail.is_some());
    shown.push(screen(&mut app, 200, 40));
    for text in &shown {
        assert!(
            !text.contains("9f8e7d6c5b4a"),
            "a key reached the screen:\n{text}"
        );
        assert!(
            !text.contains("tok_abcdef123456"),
            "a bearer token reached the screen:\n{text}"
        );
    }
    // `y` on an open call copies its input and output.
    key(&mut app, KeyCode::Char('y'));
    let call: serde_json::Value = serde_json::from_str(&copied.lock().unwrap()).unwrap();
    assert_eq!(call["callId"], "call_s");
    assert_eq!(call["input"]["api_key"], "csk_test_****");
    assert_eq!(call["output"]["result"]["echo"], "csk_test_****");
    assert!(shown[1].contains("csk_test_****"), "{}", shown[1]);
    assert!(shown[2].contains("csk_test_****"), "{}", shown[2]);
    assert!(!copied.lock().unwrap().contains("9f8e7d6c5b4a"));
}
