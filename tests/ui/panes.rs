//! The one text pane on every tab: `/` searches an open event or approval as it does a
//! call, `n`/`N` step through the matches, JSON keys and values wear the theme's JSON
//! colours, and a key a pane shares with its tab's pane-focus keys scrolls the pane.

use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;
use spyglass::ui::App;
use spyglass::ui::render::draw;

use crate::support::frames::{frame, session_created, tool_called};
use crate::support::ui::{self, feed, press, screen};

const TS: &str = "2026-11-22T21:43:30.000Z";

fn keys(app: &mut App, text: &str) {
    for c in text.chars() {
        press(app, KeyCode::Char(c));
    }
}

/// A session with one call held for approval.
fn held() -> App {
    let (mut app, _) = ui::app();
    let mocks = json!([{"tool": "asaas/create_payment", "mode": "static", "entries": 1}]);
    feed(
        &mut app,
        &session_created(1, TS, "ses_1", "ana", &["asaas"], &mocks),
    );
    let envelope = json!({"code": "approval_required", "approval_id": "apr_1",
                          "expires_at": "2026-11-22T21:59:00.000Z", "message": "held"});
    let call = tool_called(2, TS, "ses_1", "call_1", "asaas/create_payment")
        .input(json!({"customer": "cus_42", "value": 5000, "boleto": true, "note": null}))
        .outcome(json!({"envelope": envelope}))
        .duration(0.4);
    feed(&mut app, &call.build());
    let requested = json!({"approvalId": "apr_1", "callId": "call_1",
                           "tool": "asaas/create_payment",
                           "input": {"customer": "cus_42", "value": 5000, "boleto": true},
                           "ruleId": "big", "expiresAt": "2026-11-22T21:59:00.000Z",
                           "message": "held"});
    feed(
        &mut app,
        &frame("approval.requested", 3, TS, "ses_1", requested),
    );
    app
}

#[test]
fn slash_searches_an_open_event_and_n_steps_through_the_matches() {
    let mut app = held();
    keys(&mut app, "4");
    press(&mut app, KeyCode::Enter); // the newest frame: approval.requested
    assert!(app.events.detail.is_some());
    keys(&mut app, "/cus_42");
    let text = screen(&mut app, 100, 20);
    assert!(text.contains("/cus_42▏ 1/1"), "{text}");
    press(&mut app, KeyCode::Enter);
    assert!(app.events.detail.is_some(), "Enter keeps the search");
    keys(&mut app, "/apr_1");
    press(&mut app, KeyCode::Enter);
    keys(&mut app, "n");
    let text = screen(&mut app, 100, 20);
    assert!(text.contains("/apr_1 1/1"), "one line holds it: {text}");
    insta::assert_snapshot!("event_search", text);
    // Esc closes the pane; `n` then means nothing on the Events list.
    press(&mut app, KeyCode::Esc);
    assert!(app.events.detail.is_none());
}

#[test]
fn slash_searches_an_open_approval_and_its_keys_still_decide() {
    let mut app = held();
    keys(&mut app, "2");
    press(&mut app, KeyCode::Enter);
    assert!(app.approvals.detail.is_some());
    keys(&mut app, "/value");
    let text = screen(&mut app, 100, 24);
    assert!(text.contains("/value▏ 1/1"), "{text}");
    press(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 100, 24);
    assert!(text.contains("/value 1/1"), "{text}");
    insta::assert_snapshot!("approval_search", text);
    // `a` in the open approval still asks to approve it.
    keys(&mut app, "a");
    assert!(app.approvals.prompt.is_some());
}

#[test]
fn json_in_an_open_call_wears_the_themes_json_colours() {
    let mut app = held();
    keys(&mut app, "l");
    press(&mut app, KeyCode::Enter);
    assert!(app.sessions.detail.is_some());
    let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
    terminal.draw(|f| draw(f, &mut app)).unwrap();
    let buf = terminal.backend().buffer().clone();
    let theme = app.theme.clone();
    // The first cell of `needle` on screen, with the colour it was drawn in.
    let fg_of = |needle: &str| {
        let chars: Vec<char> = needle.chars().collect();
        for y in 0..30u16 {
            for x in 0..120u16 {
                let hit = chars.iter().enumerate().all(|(i, c)| {
                    x + (i as u16) < 120 && buf[(x + i as u16, y)].symbol() == c.to_string()
                });
                if hit {
                    return buf[(x, y)].fg;
                }
            }
        }
        panic!("{needle} not on screen");
    };
    assert_eq!(fg_of("\"customer\""), theme.json_key);
    assert_eq!(fg_of("\"cus_42\""), theme.json_string);
    assert_eq!(fg_of("5000"), theme.json_number);
    assert_eq!(fg_of("true"), theme.json_literal);
    assert_eq!(fg_of("null"), theme.json_literal);
    assert_eq!(fg_of("{"), theme.json_punct);
    // The pane's heading is not JSON: it keeps the title colour.
    assert_eq!(fg_of("Input"), theme.title);
}

/// The Mocks pane by keys alone: `l` twice (list → timeline → mocks), `j` to the stateful
/// mock, Enter opens it, `/` searches it, `l` scrolls it sideways, Esc goes back.
#[test]
fn the_mocks_pane_by_keys() {
    let (mut app, _) = ui::app();
    let long = "x".repeat(120);
    let mocks = json!([
        {"tool": "asaas/create_payment", "mode": "static", "entries": 1,
         "payload": {"id": "pay_1"}},
        {"tool": "nuvem-fiscal/create_nfe", "mode": "stateful", "entries": 2,
         "payload": [{"id": "nfe_1", "note": long}, {"id": "nfe_2"}]}
    ]);
    feed(
        &mut app,
        &session_created(1, TS, "ses_1", "ana", &["asaas"], &mocks),
    );
    let call = tool_called(2, TS, "ses_1", "call_1", "nuvem-fiscal/create_nfe")
        .outcome(json!({"result": {"id": "nfe_1"}}))
        .set("counter", json!({"consumed": 1, "total": 2}))
        .duration(0.4);
    feed(&mut app, &call.build());
    keys(&mut app, "ll");
    assert_eq!(
        app.sessions.focus,
        spyglass::ui::views::sessions::Focus::Mocks
    );
    keys(&mut app, "j");
    press(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 80, 24);
    assert!(text.contains("entry #0 · answered call_1"), "{text}");
    assert!(text.contains("entry #1 · ▶ next to be served"), "{text}");
    keys(&mut app, "/nfe_2");
    press(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 80, 24);
    assert!(text.contains("/nfe_2 1/1"), "{text}");
    // `l` in the pane scrolls it sideways rather than moving the focus.
    keys(&mut app, "l");
    let text = screen(&mut app, 80, 24);
    assert!(text.contains("◀ col"), "{text}");
    assert_eq!(
        app.sessions.focus,
        spyglass::ui::views::sessions::Focus::Mocks
    );
    insta::assert_snapshot!("mocks_by_keys_80", text);
    press(&mut app, KeyCode::Esc);
    assert_eq!(
        app.sessions.focus,
        spyglass::ui::views::sessions::Focus::Timeline
    );
}
