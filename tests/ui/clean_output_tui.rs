//! The inspector never hands terminal controls from the wire to the screen: bidi
//! overrides and escape sequences in frames are drawn escaped (`\u{202e}`, `\e`).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use spyglass::client::ClientMsg;
use spyglass::model::Limits;
use spyglass::protocol::decode;
use spyglass::ui::{App, FakeClock};
use std::sync::Arc;

use crate::support::ui::screen;

fn app() -> App {
    let clock = Arc::new(FakeClock::at("2026-11-22T21:44:00.000Z"));
    let mut app = App::new("http://127.0.0.1:8000", Limits::default(), clock);
    app.on_client(ClientMsg::Connected);
    app
}

fn feed(app: &mut App, json: &str) {
    app.on_client(ClientMsg::Frames(vec![decode(json).unwrap()]));
}

fn key(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

/// Characters a terminal acts on instead of drawing.
fn hostile(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

fn created() -> String {
    serde_json::json!({
        "kind": "session.created", "seq": 1, "ts": "2026-11-22T21:43:30.000Z",
        "sessionId": "ses_rlo", "userId": "u\u{202e}gnp.exe", "servers": [],
        "project": "default",
        "mocks": [{"tool": "pay\u{202e}/x", "mode": "static", "entries": 1}]
    })
    .to_string()
}

fn called() -> String {
    serde_json::json!({
        "kind": "tool.called", "seq": 2, "ts": "2026-11-22T21:43:31.000Z",
        "sessionId": "ses_rlo", "callId": "call_1", "tool": "pay\u{202e}/x",
        "input": {"note": "abc\u{202e}def\u{2066}x\u{9b}2J\u{7f}"},
        "outcome": {"result": {"ok": "\u{1b}]0;HACKED\u{7}"}},
        "startedAt": "2026-11-22T21:43:31.000Z", "duration": 1.0, "source": "execute"
    })
    .to_string()
}

/// The first character a terminal would act on, for the failure message.
fn first_hostile(text: &str) -> Option<(usize, char)> {
    text.chars().enumerate().find(|(_, c)| hostile(*c))
}

#[test]
fn the_events_tab_shows_a_right_to_left_override_escaped() {
    let mut app = app();
    feed(&mut app, &created());
    feed(&mut app, &called());
    key(&mut app, KeyCode::Char('4'));
    // A row says what happened (the tail's words); the input is in the frame's detail.
    let list = screen(&mut app, 220, 12);
    assert!(list.contains("pay\\u{202e}/x -> ok"), "{list}");
    assert!(list.contains("u\\u{202e}gnp.exe"), "{list}");
    key(&mut app, KeyCode::Enter);
    let detail = screen(&mut app, 120, 40);
    assert!(
        detail.contains("abc\\u{202e}def\\u{2066}x\\u{9b}2J\\x7f"),
        "{detail}"
    );
    for text in [&list, &detail] {
        assert_eq!(
            first_hostile(text),
            None,
            "a control reached the screen:\n{text}"
        );
    }
}

#[test]
fn every_tab_keeps_controls_off_the_screen() {
    let mut app = app();
    feed(&mut app, &created());
    feed(&mut app, &called());
    for tab in ['1', '2', '3', '4'] {
        key(&mut app, KeyCode::Char(tab));
        let text = screen(&mut app, 220, 30);
        assert_eq!(first_hostile(&text), None, "tab {tab}:\n{text}");
        key(&mut app, KeyCode::Enter);
        let text = screen(&mut app, 220, 30);
        assert_eq!(first_hostile(&text), None, "tab {tab}, opened:\n{text}");
        key(&mut app, KeyCode::Enter);
        let text = screen(&mut app, 220, 30);
        assert_eq!(
            first_hostile(&text),
            None,
            "tab {tab}, opened twice:\n{text}"
        );
        key(&mut app, KeyCode::Esc);
        key(&mut app, KeyCode::Esc);
    }
}
