//! Golden screens of the Approvals tab (`TestBackend` + insta, fixed clock): pending calls
//! with a countdown and a locally expired row greyed, an approved call with its replay's
//! outcome, and a 409 in the status line; plus the prompt's behaviour (any other key
//! cancels, nothing is sent without a runtime), the pending count on the tab title from
//! every tab, copy, and mouse clicks.

use crossterm::event::{KeyCode, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use spyglass::client::{ClientError, ClientMsg, decision_error};
use spyglass::clipboard::CopyOutcome;
use spyglass::protocol::rest::ApprovalStatus;
use spyglass::ui::render::draw;
use spyglass::ui::{App, Tab};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::frames::{frame, session_created, tool_called};
use crate::support::ui::{app, feed, press as key, screen};
use serde_json::json;

fn session(app: &mut App, seq: u64, sid: &str) {
    let mocks = json!([{"tool": "asaas/create_payment", "mode": "stateful", "entries": 2}]);
    let ts = "2026-11-22T21:43:30.000Z";
    feed(
        app,
        &session_created(seq, ts, sid, "user_test", &["asaas"], &mocks),
    );
}

/// The held call (`approval_required`) and its approval request.
fn held(app: &mut App, seq: u64, sid: &str, n: u32, value: u32, expires: &str) {
    let (ts, tool) = ("2026-11-22T21:43:31.000Z", "asaas/create_payment");
    let (call, approval) = (format!("call_0{n}"), format!("apr_0{n}"));
    let envelope = json!({"code": "approval_required", "approval_id": approval,
                          "expires_at": expires, "message": "held for approval"});
    let called = tool_called(seq, ts, sid, &call, tool)
        .input(json!({"value": value}))
        .outcome(json!({"envelope": envelope}))
        .duration(0.4);
    feed(app, &called.build());
    let requested = json!({"approvalId": approval, "callId": call, "tool": tool,
                           "input": {"value": value}, "ruleId": "payments_approval",
                           "expiresAt": expires, "message": "held for approval"});
    feed(
        app,
        &frame("approval.requested", seq + 1, ts, sid, requested),
    );
}

fn approved_and_replayed(app: &mut App, seq: u64, sid: &str, n: u32) {
    let ts = "2026-11-22T21:44:01.000Z";
    let (call, approval) = (format!("call_0{n}"), format!("apr_0{n}"));
    let resolved = json!({"approvalId": approval, "decision": "approved", "by": "ana",
                          "note": "checked the amount"});
    feed(app, &frame("approval.resolved", seq, ts, sid, resolved));
    let replayed = json!({"approvalId": approval, "callId": call, "tool": "asaas/create_payment",
                          "outcome": {"result": {"id": "pay_1", "status": "PENDING"}},
                          "duration": 0.8, "counter": {"consumed": 1, "total": 2}});
    feed(app, &frame("approval.replayed", seq + 1, ts, sid, replayed));
}

#[test]
fn pending_with_countdown() {
    let (mut app, clock) = app();
    session(&mut app, 1, "ses_01");
    held(&mut app, 2, "ses_01", 1, 5, "2026-11-22T21:49:00.000Z");
    // Already past its expiry by our clock, though the runtime has not said so yet.
    held(&mut app, 4, "ses_01", 2, 7, "2026-11-22T21:43:50.000Z");
    key(&mut app, KeyCode::Char('2'));
    clock.advance(Duration::from_secs(1));
    let text = screen(&mut app, 120, 14);
    assert!(text.contains("4m 59s"), "{text}");
    insta::assert_snapshot!(text);
    clock.advance(Duration::from_mins(1));
    assert!(screen(&mut app, 120, 14).contains("3m 59s"), "counts down");

    // The expired row is greyed (muted), the live one is not.
    let mut terminal = Terminal::new(TestBackend::new(120, 14)).unwrap();
    terminal.draw(|f| draw(f, &mut app)).unwrap();
    let buf = terminal.backend().buffer();
    let row_of = |needle: &str| {
        (0..14)
            .find(|&y| {
                let line: String = (0..120).map(|x| buf[(x, y)].symbol()).collect();
                line.contains(needle)
            })
            .unwrap()
    };
    let expired_y = row_of("{\"value\":7}");
    let tool_x = 18;
    assert_eq!(buf[(tool_x, expired_y)].fg, app.theme.muted);
    let live_y = row_of("{\"value\":5}");
    assert_ne!(buf[(tool_x, live_y)].fg, app.theme.muted);
}

#[test]
fn approved_with_its_replay_outcome() {
    let (mut app, _) = app();
    session(&mut app, 1, "ses_01");
    held(&mut app, 2, "ses_01", 1, 5, "2026-11-22T21:49:00.000Z");
    held(&mut app, 4, "ses_01", 2, 9, "2026-11-22T21:49:30.000Z");
    approved_and_replayed(&mut app, 6, "ses_01", 1);
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Down); // the decided one, below the pending one
    let text = screen(&mut app, 130, 14);
    assert!(
        text.contains(r#"→ {"id":"pay_1","status":"PENDING"}"#)
            || text.contains("→ {\"id\":\"pay_1\""),
        "{text}"
    );
    assert!(
        text.contains("checked the amount"),
        "the note shows: {text}"
    );
    assert!(text.contains("2 Approvals (1)"));
    insta::assert_snapshot!(text);
    // The replay shows in the Sessions view too, and the counter moved.
    let session = app.model.session("ses_01").unwrap();
    assert_eq!(session.mocks[0].consumed, 1);
}

#[test]
fn a_409_appears_in_the_status_line_and_changes_nothing_else() {
    let (mut app, _) = app();
    session(&mut app, 1, "ses_01");
    held(&mut app, 2, "ses_01", 1, 5, "2026-11-22T21:49:00.000Z");
    key(&mut app, KeyCode::Char('2'));
    let before = app.model.approvals.get("apr_01").cloned();
    let err = ClientError::Api {
        status: 409,
        code: "approval_already_decided".into(),
        message: "approval apr_01 is already approved".into(),
    };
    app.on_client(ClientMsg::RestError(decision_error("apr_01", true, &err)));
    let text = screen(&mut app, 150, 12);
    assert!(
        text.contains("approve apr_01: already decided (409"),
        "{text}"
    );
    insta::assert_snapshot!(text);
    assert_eq!(app.model.approvals.get("apr_01").cloned(), before);
    assert_eq!(app.model.approvals.pending_count(), 1);
}

#[test]
fn the_prompt_confirms_with_y_and_any_other_key_cancels() {
    let (mut app, _) = app();
    session(&mut app, 1, "ses_01");
    held(&mut app, 2, "ses_01", 1, 5, "2026-11-22T21:49:00.000Z");
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('a'));
    let prompt = app.approvals.prompt.clone().unwrap();
    assert!(prompt.approve && prompt.approval_id == "apr_01");
    assert!(screen(&mut app, 120, 14).contains("y confirm · n add a note · any other key cancels"));
    key(&mut app, KeyCode::Char('x'));
    assert!(app.approvals.prompt.is_none());
    assert!(screen(&mut app, 120, 14).contains("cancelled: nothing sent"));

    // `n` opens a note; typed keys are text (even `q` and `y`), Enter keeps it.
    key(&mut app, KeyCode::Char('d'));
    key(&mut app, KeyCode::Char('n'));
    for c in "too big, ask".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    assert!(!app.quit);
    let prompt = app.approvals.prompt.clone().unwrap();
    assert_eq!(
        (prompt.approve, prompt.note.as_str()),
        (false, "too big, ask")
    );
    assert!(screen(&mut app, 120, 14).contains("note: too big, ask"));
    // No runtime attached: confirming says so and sends nothing; the model is untouched.
    key(&mut app, KeyCode::Char('y'));
    assert!(app.approvals.prompt.is_none());
    assert!(screen(&mut app, 150, 14).contains("no runtime to send it to"));
    assert_eq!(
        app.model.approvals.get("apr_01").unwrap().status,
        ApprovalStatus::Pending
    );
}

#[test]
fn pending_count_on_the_tab_title_from_every_tab() {
    let (mut app, _) = app();
    session(&mut app, 1, "ses_01");
    held(&mut app, 2, "ses_01", 1, 5, "2026-11-22T21:49:00.000Z");
    held(&mut app, 4, "ses_01", 2, 6, "2026-11-22T21:49:00.000Z");
    for tab in ['1', '2', '3', '4'] {
        key(&mut app, KeyCode::Char(tab));
        assert!(screen(&mut app, 100, 10).contains("2 Approvals (2)"));
    }
    approved_and_replayed(&mut app, 6, "ses_01", 1);
    assert!(screen(&mut app, 100, 10).contains("2 Approvals (1)"));
}

#[test]
fn deciding_a_decided_call_is_refused_locally() {
    let (mut app, _) = app();
    session(&mut app, 1, "ses_01");
    held(&mut app, 2, "ses_01", 1, 5, "2026-11-22T21:49:00.000Z");
    approved_and_replayed(&mut app, 4, "ses_01", 1);
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('a'));
    assert!(app.approvals.prompt.is_none());
    assert!(screen(&mut app, 140, 10).contains("apr_01 is already approved"));
}

#[test]
fn copy_puts_the_approval_as_masked_json_and_says_how() {
    let (mut app, _) = app();
    let copied = Arc::new(Mutex::new(String::new()));
    let sink = copied.clone();
    app.copier = Box::new(move |text| {
        *sink.lock().unwrap() = text.to_owned();
        CopyOutcome::Osc52 {
            why: "no display".into(),
        }
    });
    session(&mut app, 1, "ses_01");
    held(&mut app, 2, "ses_01", 1, 5, "2026-11-22T21:49:00.000Z");
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('y'));
    let json: serde_json::Value = serde_json::from_str(&copied.lock().unwrap()).unwrap();
    assert_eq!(json["id"], "apr_01");
    assert_eq!(json["input"]["value"], 5);
    assert_eq!(json["status"], "pending");
    assert!(screen(&mut app, 150, 10).contains("approval apr_01: copied (OSC 52)"));
}

#[test]
fn clicks_select_tabs_and_rows() {
    let (mut app, _) = app();
    session(&mut app, 1, "ses_01");
    held(&mut app, 2, "ses_01", 1, 5, "2026-11-22T21:49:00.000Z");
    held(&mut app, 4, "ses_01", 2, 6, "2026-11-22T21:49:00.000Z");
    let text = screen(&mut app, 120, 14);
    let x = text.lines().next().unwrap().find("2 Approvals").unwrap() as u16;
    let click = |column, row| MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    };
    app.on_mouse(click(x + 2, 0));
    assert_eq!(app.tab, Tab::Approvals);
    let text = screen(&mut app, 120, 14);
    let y = text
        .lines()
        .position(|l| l.contains("{\"value\":6}"))
        .unwrap() as u16;
    app.on_mouse(click(10, y));
    assert_eq!(app.approvals.list.selected.as_deref(), Some("apr_02"));
}

#[test]
fn the_config_rebinds_keys_by_action_name_for_dispatch_and_help() {
    use spyglass::config::{CliOverrides, Config, Env, Paths};
    use std::path::Path;
    let file = Config::parse(
        "theme = \"light\"\nmouse = false\n[history]\nevents = 7\n[keys]\napprove = \"A\"\nconfirm = \"enter\"\n",
        Path::new("config.toml"),
    )
    .unwrap();
    let env = Env::default();
    let resolved = file
        .resolve_with(&CliOverrides::default(), Paths::from_env(&env), true)
        .unwrap();
    let config = spyglass::ui::inspector_config("http://127.0.0.1:8000".into(), &resolved);
    assert_eq!(config.limits.events, 7);
    assert!(!config.mouse);
    let (mut app, _) = app();
    app.keymap = config.keys;
    app.theme = config.theme;
    session(&mut app, 1, "ses_01");
    held(&mut app, 2, "ses_01", 1, 5, "2026-11-22T21:49:00.000Z");
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('a'));
    assert!(app.approvals.prompt.is_none(), "`a` no longer approves");
    key(&mut app, KeyCode::Char('A'));
    assert!(app.approvals.prompt.is_some(), "`A` does");
    let text = screen(&mut app, 120, 14);
    assert!(
        text.contains("A approve") && text.contains("enter confirm"),
        "{text}"
    );
    key(&mut app, KeyCode::Esc); // cancels the prompt
    key(&mut app, KeyCode::Char('?'));
    let help = screen(&mut app, 110, 44);
    assert!(
        help.contains("A               approve the selected call"),
        "{help}"
    );
    assert_eq!(app.theme.name, "light");
}

#[test]
fn help_on_the_approvals_tab_lists_its_keys_and_the_prompts() {
    let (mut app, _) = app();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('?'));
    let text = screen(&mut app, 100, 40);
    for shown in [
        "approve the selected call",
        "deny the selected call",
        "confirm an approve or deny",
        "add a note before confirming",
        "Typing a filter or a note",
        "copy the selected item as JSON",
    ] {
        assert!(text.contains(shown), "{shown} missing: {text}");
    }
    for other in [
        "rerun the selected suite",
        "sort calls by start",
        "follow the stream",
    ] {
        assert!(
            !text.contains(other),
            "{other} belongs to another tab: {text}"
        );
    }
}

#[test]
fn help_on_the_approvals_tab_says_what_its_columns_mean() {
    let (mut app, _) = app();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('?'));
    let text = screen(&mut app, 120, 50);
    assert!(text.contains("Columns"), "{text}");
    assert!(
        text.contains("STATE") && text.contains("pending (time left), approved, denied, expired"),
        "{text}"
    );
    assert!(
        text.contains("REPLAY") && text.contains("replay answered"),
        "{text}"
    );
}
