//! The inspector never hands terminal controls from the wire to the screen: bidi
//! overrides and escape sequences in frames are drawn escaped (`\u{202e}`, `\e`), in
//! every tab and pane, titles, prompts and the status line included.

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

/// ESC, a CSI and an OSC sequence, a C1 CSI and NEL, an override, an isolate pair and a
/// right-to-left mark: everything a terminal would act on, in one name.
const HOSTILE: &str = "\u{1b}[2J\u{9b}1m\u{1b}]0;T\u{7}\u{85}\u{202e}\u{2066}\u{2069}\u{200f}";
/// `HOSTILE` as the screen must show it.
const ESCAPED: &str = r"\e[2J\u{9b}1m\e]0;T\x07\u{85}\u{202e}\u{2066}\u{2069}\u{200f}";

/// A session, a held call and its approval, a suite's case with a failed assertion, every
/// name carrying `HOSTILE`.
fn hostile_frames() -> Vec<String> {
    let sid = format!("ses_{HOSTILE}");
    let tool = format!("pay{HOSTILE}/x");
    let approval = format!("apr{HOSTILE}");
    let ts = "2026-11-22T21:43:31.000Z";
    vec![
        serde_json::json!({
            "kind": "session.created", "seq": 1, "ts": ts, "sessionId": sid,
            "userId": format!("u{HOSTILE}"), "servers": [], "project": "default",
            "mocks": [{"tool": tool, "mode": "static", "entries": 1}]
        }),
        serde_json::json!({
            "kind": "tool.called", "seq": 2, "ts": ts, "sessionId": sid, "callId": "call_1",
            "tool": tool, "input": {"value": format!("v{HOSTILE}")},
            "outcome": {"envelope": {"code": "approval_required", "approval_id": approval,
                        "expires_at": "2026-11-22T21:49:00.000Z",
                        "message": format!("held{HOSTILE}")}},
            "startedAt": ts, "duration": 1.0, "source": "execute"
        }),
        serde_json::json!({
            "kind": "approval.requested", "seq": 3, "ts": ts, "sessionId": sid,
            "approvalId": approval, "callId": "call_1", "tool": tool,
            "input": {"value": format!("v{HOSTILE}")}, "ruleId": format!("rule{HOSTILE}"),
            "expiresAt": "2026-11-22T21:49:00.000Z", "message": format!("held{HOSTILE}")
        }),
        serde_json::json!({
            "kind": "agent.eval.completed", "seq": 4, "ts": ts, "sessionId": sid,
            "suite": format!("suite{HOSTILE}"), "case": format!("case{HOSTILE}"),
            "status": "failed", "pass": false,
            "tokens": {"prompt": 1, "completion": 1, "total": 2}, "cost": 0, "duration": 3.0,
            "runId": format!("run{HOSTILE}"), "attempt": 1,
            "reason": format!("reason{HOSTILE}"),
            "assertions": [{"kind": "contains", "pass": false,
                            "expected": format!("want{HOSTILE}"),
                            "actual": format!("got{HOSTILE}"),
                            "message": format!("assertion{HOSTILE}")}]
        }),
    ]
    .into_iter()
    .map(|f| f.to_string())
    .collect()
}

/// Every screen of one tab: its list, opened, opened twice, and the status line after
/// each key.
fn screens_of(app: &mut App, tab: char, size: (u16, u16)) -> Vec<String> {
    key(app, KeyCode::Char(tab));
    let mut screens = vec![screen(app, size.0, size.1)];
    for _ in 0..2 {
        key(app, KeyCode::Enter);
        screens.push(screen(app, size.0, size.1));
    }
    key(app, KeyCode::Esc);
    key(app, KeyCode::Esc);
    screens
}

#[test]
fn hostile_names_show_escaped_in_every_tab_pane_title_and_prompt() {
    let mut app = app();
    for json in hostile_frames() {
        feed(&mut app, &json);
    }
    let mut all: Vec<(String, String)> = vec![];
    for size in [(220, 40), (80, 24)] {
        for tab in ['1', '2', '3', '4'] {
            for text in screens_of(&mut app, tab, size) {
                all.push((format!("tab {tab} at {size:?}"), text));
            }
        }
    }
    // The Evals tab's panes: the suite list, and the case list titled by the suite.
    key(&mut app, KeyCode::Char('3'));
    key(&mut app, KeyCode::Char('l'));
    let cases = screen(&mut app, 220, 40);
    all.push(("the case list".into(), cases.clone()));
    key(&mut app, KeyCode::Enter);
    let case = screen(&mut app, 220, 40);
    all.push(("the case opened".into(), case.clone()));
    key(&mut app, KeyCode::Esc);
    // The approval's prompt, and the filter typed into the title.
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('a'));
    let prompt = screen(&mut app, 220, 40);
    all.push(("the approve prompt".into(), prompt.clone()));
    key(&mut app, KeyCode::Esc);
    for (what, text) in &all {
        assert_eq!(
            first_hostile(text),
            None,
            "{what}: a control reached the screen:\n{text}"
        );
    }
    let shown = |name: &str| format!("{name}{ESCAPED}");
    assert!(
        cases.contains(&format!(" {} ", shown("suite"))),
        "the cases pane's title:\n{cases}"
    );
    for name in ["suite", "case"] {
        assert!(cases.contains(&shown(name)[..12]), "{name}:\n{cases}");
    }
    for name in ["assertion", "got"] {
        assert!(case.contains(&shown(name)), "{name} in the case:\n{case}");
    }
    assert!(prompt.contains(&shown("pay")), "the prompt:\n{prompt}");
    assert!(prompt.contains(&shown("rule")), "the prompt:\n{prompt}");
    let approvals = &all
        .iter()
        .find(|(what, _)| what.starts_with("tab 2 at (220"))
        .expect("the approvals tab")
        .1;
    assert!(
        approvals.contains(r"pay\e[2J"),
        "the approvals list:\n{approvals}"
    );
    let events = &all
        .iter()
        .filter(|(what, _)| what.starts_with("tab 4 at (220"))
        .nth(1)
        .expect("an event opened")
        .1;
    // The event's JSON escapes ESC itself; what JSON leaves raw is escaped on screen.
    assert!(
        events.contains(r"\u001b[2J\u{9b}1m\u001b]0;T\u0007\u{85}\u{202e}"),
        "an event:\n{events}"
    );
}
