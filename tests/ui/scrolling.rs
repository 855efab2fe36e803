//! Lists keep what fits on screen: no stale scroll offset hiding rows after a resize or a
//! filter, a scroll indicator when rows are hidden, the cursor kept in place by a decision
//! or a re-sort, and a help overlay that scrolls.

use crossterm::event::KeyCode;
use spyglass::ui::App;

use crate::support::frames::{frame, session_created, tool_called};
use crate::support::ui::{self, feed, press, screen};
use serde_json::json;

const TS: &str = "2026-11-22T21:43:31.000Z";
const EXPIRES: &str = "2026-11-22T21:49:00.000Z";

fn keys(app: &mut App, text: &str) {
    for c in text.chars() {
        press(app, KeyCode::Char(c));
    }
}

/// `n` pending approvals `apr_01`… in session `ses_1`, seqs from 2.
fn pending(app: &mut App, n: u32) {
    feed(
        app,
        &session_created(1, TS, "ses_1", "u", &["asaas"], &json!([])),
    );
    for i in 1..=n {
        let seq = u64::from(i) * 2;
        let (call, apr) = (format!("call_{i:02}"), format!("apr_{i:02}"));
        let envelope = json!({"code": "approval_required", "approval_id": apr,
                              "expires_at": EXPIRES, "message": "held"});
        feed(
            app,
            &tool_called(seq, TS, "ses_1", &call, "asaas/create_payment")
                .input(json!({"value": i}))
                .outcome(json!({"envelope": envelope}))
                .build(),
        );
        let requested = json!({"approvalId": apr, "callId": call, "tool": "asaas/create_payment",
                               "input": {"value": i}, "ruleId": "r", "expiresAt": EXPIRES,
                               "message": "held"});
        feed(
            app,
            &frame("approval.requested", seq + 1, TS, "ses_1", requested),
        );
    }
}

fn rows_with(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn approvals_show_every_row_again_after_shrinking_and_growing() {
    let (mut app, _) = ui::app();
    pending(&mut app, 11);
    keys(&mut app, "2G");
    let tall = screen(&mut app, 120, 30);
    assert_eq!(rows_with(&tall, "asaas/create_payment"), 11, "{tall}");
    let short = screen(&mut app, 100, 10);
    assert!(short.contains("apr_11"), "the selection shows: {short}");
    // Rows are hidden above: the list's bottom border says how many.
    let border = short.lines().find(|l| l.starts_with('└')).unwrap();
    assert!(border.ends_with(" ↑10 above ─┘"), "{short}");
    let again = screen(&mut app, 120, 30);
    assert_eq!(rows_with(&again, "asaas/create_payment"), 11, "{again}");
    assert!(
        !again.contains(" above "),
        "nothing hidden, no marker: {again}"
    );
}

#[test]
fn a_held_filtered_event_list_fills_its_pane() {
    let (mut app, _) = ui::app();
    pending(&mut app, 8);
    for seq in 100..400 {
        feed(
            &mut app,
            &tool_called(
                seq,
                TS,
                "ses_1",
                &format!("c{seq}"),
                "nuvem-fiscal/create_nfe",
            )
            .outcome(json!({"result": {}}))
            .build(),
        );
    }
    keys(&mut app, "4");
    // Held near the end, then filtered down to the few approval events.
    keys(&mut app, "kk");
    keys(&mut app, "/kind:approval");
    press(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 120, 30);
    assert_eq!(rows_with(&text, "approval.requested"), 8, "{text}");
}

#[test]
fn help_scrolls_when_taller_than_the_screen() {
    let (mut app, _) = ui::app();
    keys(&mut app, "?");
    let top = screen(&mut app, 80, 24);
    assert!(
        top.contains("Keys · ↑↓ PgUp PgDn scroll · any other key closes"),
        "{top}"
    );
    assert!(top.contains(" below ─┘"), "{top}");
    assert!(!top.contains("type (backspace deletes)"), "{top}");
    press(&mut app, KeyCode::End);
    assert!(app.show_help, "a scroll key keeps help open");
    let bottom = screen(&mut app, 80, 24);
    assert!(bottom.contains("type (backspace deletes)"), "{bottom}");
    assert!(bottom.contains("Sessions"), "{bottom}");
    insta::assert_snapshot!(bottom);
    keys(&mut app, "x");
    assert!(!app.show_help);
    // Opened again, it starts at the top.
    keys(&mut app, "?");
    assert_eq!(screen(&mut app, 80, 24), top);
    // When it fits, the scroll keys close it like any other key.
    let tall = screen(&mut app, 80, 60);
    assert!(tall.contains("Keys · any key closes"), "{tall}");
    keys(&mut app, "j");
    assert!(!app.show_help);
}

#[test]
fn a_decision_leaves_the_cursor_at_its_place_in_the_pending_list() {
    let (mut app, _) = ui::app();
    pending(&mut app, 4);
    keys(&mut app, "2j");
    assert_eq!(app.approvals.list.selected.as_deref(), Some("apr_02"));
    let resolved = json!({"approvalId": "apr_02", "decision": "approved", "by": "ana"});
    feed(
        &mut app,
        &frame("approval.resolved", 50, TS, "ses_1", resolved),
    );
    // apr_02 went down to the decided rows; the cursor is on the row now second.
    assert_eq!(app.approvals.list.selected.as_deref(), Some("apr_03"));
    let text = screen(&mut app, 120, 16);
    let selected = text.lines().find(|l| l.contains('›')).unwrap();
    assert!(selected.contains(r#"{"value":3}"#), "{text}");
    // The last pending one decided: the cursor goes to the one before it.
    keys(&mut app, "j");
    assert_eq!(app.approvals.list.selected.as_deref(), Some("apr_04"));
    let resolved = json!({"approvalId": "apr_04", "decision": "denied", "by": "ana"});
    feed(
        &mut app,
        &frame("approval.resolved", 51, TS, "ses_1", resolved),
    );
    assert_eq!(app.approvals.list.selected.as_deref(), Some("apr_03"));
    // A decided row selected stays selected when another decision lands.
    keys(&mut app, "G");
    let last = app.approvals.list.selected.clone();
    let resolved = json!({"approvalId": "apr_01", "decision": "approved", "by": "ana"});
    feed(
        &mut app,
        &frame("approval.resolved", 52, TS, "ses_1", resolved),
    );
    assert_eq!(app.approvals.list.selected, last);
}

#[test]
fn sorting_the_timeline_keeps_the_selected_call() {
    let (mut app, _) = ui::app();
    feed(
        &mut app,
        &session_created(1, TS, "ses_1", "u", &["asaas"], &json!([])),
    );
    for (i, dur) in [(1, 0.5), (2, 3.0), (3, 1.0), (4, 2.0)] {
        feed(
            &mut app,
            &tool_called(
                i + 1,
                TS,
                "ses_1",
                &format!("call_{i}"),
                &format!("t/tool_{i}"),
            )
            .outcome(json!({"result": {}}))
            .duration(dur)
            .build(),
        );
    }
    // Into the timeline, onto the third call (tool_3, 1.0 s).
    press(&mut app, KeyCode::Enter);
    keys(&mut app, "l");
    keys(&mut app, "jj");
    let selected = |app: &mut App| {
        let text = screen(app, 140, 20);
        let line = text.lines().find(|l| l.contains("›t/tool"));
        let line = line.unwrap_or_else(|| panic!("no selected call: {text}"));
        line.split('›').nth(1).unwrap()[..8].to_owned()
    };
    assert_eq!(selected(&mut app), "t/tool_3");
    keys(&mut app, "s");
    let text = screen(&mut app, 140, 20);
    assert!(text.contains("by duration"), "{text}");
    assert_eq!(selected(&mut app), "t/tool_3", "{text}");
    keys(&mut app, "s");
    assert_eq!(selected(&mut app), "t/tool_3");
}

#[test]
fn narrow_screens_keep_every_tab_and_whole_values() {
    let (mut app, _) = ui::app();
    feed(
        &mut app,
        &session_created(
            1,
            TS,
            "ses_kOYND1yf5OeCVd4eqPlj",
            "spyglass-eval",
            &[],
            &json!([]),
        ),
    );
    pending(&mut app, 4);
    for (width, height) in [(40, 12), (50, 12), (80, 24)] {
        let text = screen(&mut app, width, height);
        let tabs = text.lines().next().unwrap();
        for n in ["1", "2", "3", "4"] {
            assert!(
                tabs.contains(&format!("{n} ")) || tabs.ends_with(n),
                "{tabs}"
            );
        }
        assert!(tabs.contains("(4)"), "the pending count stays: {tabs}");
    }
    let at_40 = screen(&mut app, 40, 12);
    assert!(
        at_40.lines().next().unwrap().contains("4 Events"),
        "{at_40}"
    );
    // At 80x24 a status is never cut, and a cut id says so.
    let at_80 = screen(&mut app, 80, 24);
    let row = at_80.lines().find(|l| l.contains("ses_kOYND")).unwrap();
    assert!(
        row.contains("active") || row.contains("spyglass-eval"),
        "{at_80}"
    );
    assert!(
        row.contains("ses_kOYND1yf5OeCVd4eqPlj") || row.contains('…'),
        "{at_80}"
    );
    for cut in ["acti ", "comp ", "clos "] {
        assert!(!at_80.contains(cut), "{at_80}");
    }
    // Events at 40 columns: a time whole or not at all, a cut session id says so.
    keys(&mut app, "4g");
    let events = screen(&mut app, 40, 12);
    assert!(
        events.contains("21:43:31.000") || !events.contains("21:43"),
        "{events}"
    );
    let row = events.lines().find(|l| l.contains("ses_kOYND")).unwrap();
    assert!(row.contains('…'), "{events}");
    keys(&mut app, "1");
    // Approvals at 40 columns: the tool cut in its middle with an ellipsis (its end
    // kept), the countdown whole.
    keys(&mut app, "2");
    let approvals = screen(&mut app, 40, 12);
    let row = approvals.lines().find(|l| l.contains('›')).unwrap();
    assert!(
        row.contains("/creat") && row.contains("yment") && row.contains('…'),
        "{approvals}"
    );
    assert!(
        row.contains("5m 00s") || row.contains("4m 59s"),
        "{approvals}"
    );
    keys(&mut app, "1");
    // Clicks land on the shortened tabs too.
    let tabs = screen(&mut app, 40, 12);
    let bar = tabs.lines().next().unwrap();
    let x = bar[..bar.find("4 Events").unwrap()].chars().count();
    app.on_mouse(crossterm::event::MouseEvent {
        kind: crossterm::event::MouseEventKind::Down(crossterm::event::MouseButton::Left),
        column: x as u16,
        row: 0,
        modifiers: crossterm::event::KeyModifiers::NONE,
    });
    assert_eq!(app.tab, spyglass::ui::Tab::Events, "{bar}");
}
