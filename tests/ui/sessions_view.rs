//! Golden screens of the Sessions view (`TestBackend` + insta), driven through the App with
//! scripted frames, key presses and a fixed clock; plus the behaviours a user would notice:
//! selection kept by id, Enter on an empty list, and frame cost independent of history size.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use spyglass::client::ClientMsg;
use spyglass::model::Limits;
use spyglass::protocol::decode;
use spyglass::ui::render::draw;
use spyglass::ui::{App, Conn, FakeClock, Watching};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::frames::{session_created, tool_called, with};
use crate::support::ui::{self, NOW, URL, app, feed, press as key, screen};
use serde_json::{Value, json};

fn created(seq: u64, id: &str, user: &str, ts: &str) -> Value {
    let mocks = json!([
        {"tool": "nuvem-fiscal/create_nfe", "mode": "stateful", "entries": 2},
        {"tool": "asaas/create_payment", "mode": "static", "entries": 1},
    ]);
    session_created(seq, ts, id, user, &["nuvem-fiscal", "asaas"], &mocks)
}

/// A call of `tool` with input `{"value":5}`; `extra` holds more fields (a counter).
#[allow(clippy::too_many_arguments)] // a frame literal: every field is a knob the tests turn
fn called(
    seq: u64,
    sid: &str,
    call: &str,
    tool: &str,
    outcome: Value,
    extra: Value,
    start: &str,
    dur: f64,
) -> Value {
    let called = tool_called(seq, start, sid, call, tool)
        .input(json!({"value": 5}))
        .outcome(outcome)
        .duration(dur);
    with(called.build(), extra)
}

fn nfe(seq: u64, call: &str, consumed: u32, start: &str) -> Value {
    called(
        seq,
        "ses_01",
        call,
        "nuvem-fiscal/create_nfe",
        json!({"result": {"id": format!("nfe_{consumed}")}}),
        json!({"counter": {"consumed": consumed, "total": 2}}),
        start,
        4.0,
    )
}

#[test]
fn an_embedded_runtime_says_where_it_listens_and_what_to_export() {
    let (mut app, _) = app();
    app.watching = Watching::Embedded;
    app.conn = Conn::Connected;
    let text = screen(&mut app, 200, 10);
    let url = "http://127.0.0.1:8000";
    let status = text.lines().last().unwrap_or_default();
    assert!(
        status.contains(&format!(
            "embedded runtime {url} · export CODESPAR_BASE_URL={url}"
        )),
        "{text}"
    );
    assert!(
        text.contains("An empty test-mode runtime is listening"),
        "the empty list says what to do: {text}"
    );
}

#[test]
fn empty() {
    let (mut app, _) = app();
    insta::assert_snapshot!(screen(&mut app, 110, 14));
    // Enter, arrows and the filter on an empty list change nothing and do not crash.
    for code in [
        KeyCode::Enter,
        KeyCode::Down,
        KeyCode::Right,
        KeyCode::Enter,
        KeyCode::Char('s'),
    ] {
        key(&mut app, code);
    }
    assert!(app.sessions.detail.is_none());
    assert!(screen(&mut app, 110, 14).contains("No sessions yet. Waiting for"));
}

/// After `stream.reset` the old runtime's session stays listed as `gone`, and its detail
/// says whose word it is and when that runtime went.
#[test]
fn a_session_of_the_runtime_before_a_restart() {
    let (mut app, _) = app();
    feed(
        &mut app,
        &created(1, "ses_01", "user_test", "2026-11-22T21:43:30.000Z"),
    );
    feed(&mut app, &nfe(2, "call_01", 1, "2026-11-22T21:43:31.000Z"));
    feed(
        &mut app,
        &json!({"kind": "stream.reset", "seq": 0, "ts": "2026-11-22T21:46:00.000Z",
                "epoch": "ep_9b1c22e07f3d6a10",
                "reason": "since 2 is beyond the newest seq 0: the runtime restarted without that history"}),
    );
    let text = screen(&mut app, 110, 16);
    assert!(
        text.contains("from the runtime before the restart at 21:46:00"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn first_session() {
    let (mut app, _) = app();
    feed(
        &mut app,
        &created(1, "ses_01", "user_test", "2026-11-22T21:43:30.000Z"),
    );
    feed(&mut app, &nfe(2, "call_01", 1, "2026-11-22T21:43:31.000Z"));
    insta::assert_snapshot!(screen(&mut app, 110, 16));
}

fn exhausted_session(app: &mut App) {
    feed(
        app,
        &created(1, "ses_01", "user_test", "2026-11-22T21:43:30.000Z"),
    );
    feed(app, &nfe(2, "call_01", 1, "2026-11-22T21:43:31.000Z"));
    feed(app, &nfe(3, "call_02", 2, "2026-11-22T21:43:31.010Z"));
    feed(
        app,
        &called(
            4,
            "ses_01",
            "call_03",
            "nuvem-fiscal/create_nfe",
            json!({"envelope": {"code": "mocks_exhausted", "message": "all 2 entries consumed"}}),
            json!({"counter": {"consumed": 2, "total": 2}}),
            "2026-11-22T21:43:31.020Z",
            1.0,
        ),
    );
    feed(
        app,
        &called(
            5,
            "ses_01",
            "call_04",
            "asaas/create_paymet",
            json!({"envelope": {"code": "tool_not_mocked", "tool_name": "asaas/create_paymet",
                                "message": "no mock declared for asaas/create_paymet"}}),
            json!({}),
            "2026-11-22T21:43:31.030Z",
            0.5,
        ),
    );
}

#[test]
fn stateful_mock_exhausted() {
    let (mut app, _) = app();
    exhausted_session(&mut app);
    key(&mut app, KeyCode::Right);
    key(&mut app, KeyCode::Down);
    let text = screen(&mut app, 120, 18);
    assert!(text.contains("2/2") && text.contains("exhausted") && text.contains("never called"));
    insta::assert_snapshot!(text);
    // The exhausted mock's row is in the theme's error colour.
    let mut terminal = Terminal::new(TestBackend::new(120, 18)).unwrap();
    terminal.draw(|f| draw(f, &mut app)).unwrap();
    let buf = terminal.backend().buffer();
    let (x, y) = (0..18)
        .flat_map(|y| (0..120).map(move |x| (x, y)))
        .find(|&(x, y)| {
            buf[(x, y)].symbol() == "e"
                && buf[(x + 1, y)].symbol() == "x"
                && buf[(x + 2, y)].symbol() == "h"
        })
        .unwrap();
    assert_eq!(buf[(x, y)].fg, app.theme.error);
    // Sorting by duration puts the longest call first.
    key(&mut app, KeyCode::Char('s'));
    let sorted = screen(&mut app, 120, 18);
    assert!(sorted.contains("by duration"));
}

#[test]
fn long_json_in_the_detail_pane() {
    let (mut app, _) = app();
    feed(
        &mut app,
        &created(1, "ses_01", "user_test", "2026-11-22T21:43:30.000Z"),
    );
    let items: Vec<String> = (1..=12)
        .map(|i| format!(r#"{{"sku":"item-{i:02}","description":"a rather long line item description number {i} that will not fit","qty":{i}}}"#))
        .collect();
    let json = format!(
        r#"{{"kind":"tool.called","seq":2,"ts":"2026-11-22T21:43:31.000Z","sessionId":"ses_01","callId":"call_big","tool":"asaas/create_payment","input":{{"customer":"cus_42","items":[{}]}},"outcome":{{"result":{{"id":"pay_1","status":"PENDING"}}}},"startedAt":"2026-11-22T21:43:31.000Z","duration":12.5,"counter":{{"consumed":1}},"source":"execute"}}"#,
        items.join(",")
    );
    feed(&mut app, &json);
    key(&mut app, KeyCode::Enter); // list -> timeline
    key(&mut app, KeyCode::Enter); // call -> detail
    assert!(app.sessions.detail.is_some());
    for _ in 0..3 {
        key(&mut app, KeyCode::Down);
    }
    let first = screen(&mut app, 110, 20);
    // A long line runs past the edge, unbroken; the border says there is more.
    assert!(!first.contains("will not fit"), "{first}");
    assert!(first.contains(" ▶ "), "{first}");
    insta::assert_snapshot!(first);
    // `l` scrolls sideways to the line's end, and the border says from which column.
    key(&mut app, KeyCode::Char('l'));
    key(&mut app, KeyCode::Char('l'));
    let right = screen(&mut app, 110, 20);
    assert!(right.contains("will not fit\","), "{right}");
    assert!(right.contains("◀ col 26"), "{right}");
    // A frame arriving for the session leaves the pane where it was.
    let next = r#"{"kind":"tool.called","seq":3,"ts":"2026-11-22T21:43:32.000Z","sessionId":"ses_01","callId":"call_next","tool":"asaas/create_payment","input":{},"outcome":{"result":{}},"startedAt":"2026-11-22T21:43:32.000Z","duration":1.0,"source":"execute"}"#;
    feed(&mut app, next);
    let after = screen(&mut app, 110, 20);
    let pane = |text: &str| -> Vec<String> {
        text.lines()
            .skip(1)
            .map(|l| l.chars().skip(46).collect())
            .collect()
    };
    assert_eq!(pane(&after), pane(&right), "{after}");
    // `h` (←) goes back to the first column.
    key(&mut app, KeyCode::Left);
    key(&mut app, KeyCode::Char('h'));
    let back = screen(&mut app, 110, 20);
    assert!(!back.contains("◀ col"), "{back}");
    key(&mut app, KeyCode::End);
    let end = screen(&mut app, 110, 20);
    assert!(
        end.contains("PENDING"),
        "the output is reachable by scrolling"
    );
    key(&mut app, KeyCode::Esc);
    assert!(app.sessions.detail.is_none());
}

#[test]
fn filtered() {
    let (mut app, _) = app();
    feed(
        &mut app,
        &created(1, "ses_01", "ana", "2026-11-22T21:40:00.000Z"),
    );
    feed(
        &mut app,
        &created(2, "ses_02", "bruno", "2026-11-22T21:41:00.000Z"),
    );
    feed(
        &mut app,
        &created(3, "ses_03", "ana", "2026-11-22T21:43:00.000Z"),
    );
    key(&mut app, KeyCode::Char('/'));
    for c in "ana".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    // A matching session arriving later joins the filtered list; others stay out.
    feed(
        &mut app,
        &created(4, "ses_04", "bruno", "2026-11-22T21:43:10.000Z"),
    );
    feed(
        &mut app,
        &created(5, "ses_05", "ana", "2026-11-22T21:43:20.000Z"),
    );
    let text = screen(&mut app, 110, 12);
    assert!(!text.contains("bruno"));
    insta::assert_snapshot!(text);
    key(&mut app, KeyCode::Esc);
    assert!(screen(&mut app, 110, 12).contains("bruno"));
}

#[test]
fn disconnected() {
    let (mut app, clock) = app();
    exhausted_session(&mut app);
    app.on_client(ClientMsg::ParseError("not JSON".into()));
    app.on_client(ClientMsg::Disconnected {
        attempt: 3,
        retry_in: Duration::from_millis(3_600),
        reason: "stream closed".into(),
    });
    clock.advance(Duration::from_millis(600));
    insta::assert_snapshot!(screen(&mut app, 120, 12));
    app.on_client_closed();
    assert_eq!(app.conn, Conn::Offline);
    assert!(screen(&mut app, 120, 12).contains("○ offline"));
}

#[test]
fn a_refused_dial_says_why_in_the_status_bar() {
    let (mut app, _) = app();
    app.on_client(ClientMsg::Disconnected {
        attempt: 5,
        retry_in: Duration::from_secs(3),
        reason: "connection refused by 127.0.0.1:8000".into(),
    });
    let text = screen(&mut app, 120, 12);
    let bar = text.lines().last().unwrap();
    assert!(
        bar.starts_with(" ◌ connection refused by 127.0.0.1:8000; reconnecting in 3 s (attempt 5)"),
        "{bar}"
    );
}

#[test]
fn a_rejected_key_stops_and_names_the_fix() {
    let (mut app, _) = app();
    app.on_client(ClientMsg::Rejected { status: 401 });
    // The observer ends after a refusal; the bar keeps the reason, not "offline".
    app.on_client_closed();
    assert_eq!(app.conn, Conn::Rejected { status: 401 });
    let text = screen(&mut app, 120, 12);
    let bar = text.lines().last().unwrap();
    assert!(
        bar.starts_with(" ✕ 401 unauthorized: pass --api-key KEY or set CODESPAR_API_KEY │"),
        "{bar}"
    );
    app.on_client(ClientMsg::Rejected { status: 403 });
    assert!(screen(&mut app, 120, 12).contains("✕ 403 forbidden: pass --api-key KEY"));
}

#[test]
fn help_is_generated_from_the_keymap() {
    let (mut app, _) = app();
    key(&mut app, KeyCode::Char('?'));
    let text = screen(&mut app, 110, 50);
    // Help lists the global keys and the tab in view's, not the other tabs'.
    ui::assert_help_lists_the_keys_of(&text, spyglass::ui::Tab::Sessions);
    assert!(!text.contains("approve the selected call"), "{text}");
    assert!(!text.contains("rerun the selected suite"), "{text}");
    insta::assert_snapshot!(text);
    key(&mut app, KeyCode::Char('x'));
    assert!(!app.show_help);
}

#[test]
fn tabs_switch_by_number_tab_and_shift_tab() {
    let (mut app, _) = app();
    key(&mut app, KeyCode::Char('3'));
    assert!(screen(&mut app, 110, 8).contains("No eval results yet"));
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.tab, spyglass::ui::Tab::Events);
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.tab, spyglass::ui::Tab::Sessions);
    key(&mut app, KeyCode::BackTab);
    assert_eq!(app.tab, spyglass::ui::Tab::Events);
    app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.quit);
}

#[test]
fn selection_stays_on_the_same_session_when_rows_arrive() {
    let (mut app, _) = app();
    feed(
        &mut app,
        &created(1, "ses_01", "a", "2026-11-22T21:40:00.000Z"),
    );
    feed(
        &mut app,
        &created(2, "ses_02", "b", "2026-11-22T21:41:00.000Z"),
    );
    assert_eq!(
        app.sessions.list.selected.as_deref(),
        Some("ses_01"),
        "the first session was selected on arrival"
    );
    key(&mut app, KeyCode::Up); // newest first: ses_02 is row 0
    assert_eq!(app.sessions.list.selected.as_deref(), Some("ses_02"));
    feed(
        &mut app,
        &created(3, "ses_03", "c", "2026-11-22T21:42:00.000Z"),
    );
    feed(
        &mut app,
        &created(4, "ses_04", "d", "2026-11-22T21:43:00.000Z"),
    );
    assert_eq!(app.sessions.list.selected.as_deref(), Some("ses_02"));
    let text = screen(&mut app, 110, 10);
    let rows: Vec<&str> = text.lines().filter(|l| l.contains("ses_0")).collect();
    assert!(
        rows[0].contains("ses_04") && rows[2].contains("ses_02"),
        "{text}"
    );
}

/// Build a model with `sessions` sessions of `calls_each` calls, select one, time renders.
fn frame_cost(sessions: usize, calls_each: usize) -> Duration {
    let clock = Arc::new(FakeClock::at(NOW));
    let mut app = App::new(URL, Limits::default(), clock);
    let mut seq = 0;
    for s in 0..sessions {
        seq += 1;
        let id = format!("ses_{s:05}");
        app.model.apply(
            &decode(&created(seq, &id, "u", "2026-11-22T21:40:00.000Z").to_string()).unwrap(),
        );
        for c in 0..calls_each {
            seq += 1;
            let f = called(
                seq,
                &id,
                &format!("c{s}_{c}"),
                "nuvem-fiscal/create_nfe",
                json!({"result": 1}),
                json!({}),
                "2026-11-22T21:40:01.000Z",
                1.0,
            );
            app.model.apply(&decode(&f.to_string()).unwrap());
        }
    }
    app.sessions.after_model_change(&app.model);
    let mut terminal = Terminal::new(TestBackend::new(160, 50)).unwrap();
    key(&mut app, KeyCode::Right);
    terminal.draw(|f| draw(f, &mut app)).unwrap(); // builds the timeline cache once
    let start = Instant::now();
    for _ in 0..50 {
        app.mark_dirty();
        terminal.draw(|f| draw(f, &mut app)).unwrap();
    }
    start.elapsed() / 50
}

#[test]
fn a_frame_costs_about_the_same_at_ten_thousand_sessions_as_at_ten() {
    let small = frame_cost(10, 10);
    let large = frame_cost(10_000, 10);
    assert_eq!(
        {
            let clock = Arc::new(FakeClock::at(NOW));
            App::new(URL, Limits::default(), clock).model.sessions_len()
        },
        0
    );
    // Generous: the machine is shared; an O(n) pass over 100,000 calls would be ~100x.
    assert!(
        large < small * 5 + Duration::from_millis(2),
        "10 sessions: {small:?}/frame, 10,000 sessions with 100,000 calls: {large:?}/frame"
    );
}

/// A recording may claim any duration: a huge, a negative or an overflowing one shows as
/// a bounded mark in the DUR column and the OUTCOME beside it stays where it belongs.
#[test]
fn extreme_durations_stay_inside_the_dur_column() {
    let (mut app, _) = app();
    feed(
        &mut app,
        &created(1, "ses_01", "u", "2026-11-22T21:43:30.000Z"),
    );
    let durations = [
        ("a/huge", 1e308),
        ("a/neg", -5.0),
        ("a/negmax", -1e308),
        ("a/ok", 4.0),
    ];
    for (i, (tool, dur)) in durations.iter().enumerate() {
        let seq = i as u64 + 2;
        feed(
            &mut app,
            &called(
                seq,
                "ses_01",
                &format!("call_{seq}"),
                tool,
                json!({"result": {"id": "x"}}),
                json!({}),
                "2026-11-22T21:43:31.000Z",
                *dur,
            ),
        );
    }
    let text = screen(&mut app, 80, 24);
    assert!(!text.contains("inf"), "{text}");
    let column = |line: &str, needle: &str| {
        let at = line
            .find(needle)
            .unwrap_or_else(|| panic!("no {needle} in {line}\n{text}"));
        line[..at].chars().count()
    };
    let outcome_at = column(ui::row(&text, "OUTCOME"), "OUTCOME");
    for (tool, shown) in [
        ("a/huge", ">999h"),
        ("a/neg", "—"),
        ("a/negmax", "—"),
        ("a/ok", "4.0ms"),
    ] {
        let line = ui::row(&text, &format!(" {tool} "));
        assert!(
            line.contains(&format!(" {shown} ok ")),
            "{tool}: {line}\n{text}"
        );
        // The outcome starts under its header, and the row ends at the pane's border.
        assert_eq!(column(line, " ok ") + 1, outcome_at, "{line}\n{text}");
        assert!(line.chars().count() <= 80 && line.ends_with('│'), "{line}");
    }
}
