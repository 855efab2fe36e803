//! Finding things fast: the filter language on Sessions, Approvals and Evals (`key:value`,
//! `-` negating, every word kept), the toggle that hides closed eval sessions, and a filter kept
//! while the user visits other tabs.

use crossterm::event::KeyCode;
use serde_json::json;
use spyglass::ui::{App, Tab};

use crate::support::frames::{frame, session_created, tool_called};
use crate::support::ui::{self, feed, press, screen};

const TS: &str = "2026-11-22T21:43:30.000Z";
const EXPIRES: &str = "2026-11-22T21:59:00.000Z";

fn keys(app: &mut App, text: &str) {
    for c in text.chars() {
        press(app, KeyCode::Char(c));
    }
}

fn created(app: &mut App, seq: u64, id: &str, user: &str) {
    feed(
        app,
        &session_created(seq, TS, id, user, &["asaas"], &json!([])),
    );
}

fn closed(app: &mut App, seq: u64, id: &str) {
    feed(app, &frame("session.closed", seq, TS, id, json!({})));
}

fn failed(app: &mut App, seq: u64, id: &str) {
    let run = json!({"agentName": "billing", "model": "m", "provider": "p", "input": "go",
                     "output": null, "steps": [], "tokens": {"prompt": 1, "completion": 1,
                     "total": 2}, "duration": 5.0, "finishReason": "error", "streaming": false,
                     "failoverAttempts": 0, "error": "boom"});
    feed(app, &frame("agent.failed", seq, TS, id, run));
}

/// ana's active `ses_ana`, bo's failed `ses_bo`, and three closed eval sessions `ses_ev1`…3.
fn sessions() -> App {
    let (mut app, _) = ui::app();
    created(&mut app, 1, "ses_ana", "ana");
    created(&mut app, 2, "ses_bo", "bo");
    failed(&mut app, 3, "ses_bo");
    for i in 1..=3u64 {
        let id = format!("ses_ev{i}");
        created(&mut app, 3 + i * 2, &id, "spyglass-eval");
        closed(&mut app, 4 + i * 2, &id);
    }
    app
}

/// The session ids listed on the Sessions tab, top to bottom.
fn listed(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let start = l.find("ses_")?;
            let id: String = l[start..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // Only the list's rows (the left pane), not the detail's heading.
            (start < 40).then_some(id)
        })
        .collect()
}

fn title(text: &str) -> &str {
    text.lines()
        .find(|l| l.starts_with("┌ Sessions"))
        .unwrap_or("")
}

fn filtered(app: &mut App, filter: &str) -> String {
    press(app, KeyCode::Char('/'));
    keys(app, filter);
    press(app, KeyCode::Enter);
    screen(app, 120, 20)
}

#[test]
fn the_session_filter_reads_status_user_source_and_negation() {
    let mut app = sessions();
    let text = filtered(&mut app, "status:failed");
    assert_eq!(listed(&text), ["ses_bo"], "{text}");
    assert!(title(&text).contains("1/5 /status:failed"), "{text}");
    insta::assert_snapshot!("status_failed", text);

    press(&mut app, KeyCode::Esc);
    let text = filtered(&mut app, "-user:spyglass-eval");
    assert_eq!(listed(&text), ["ses_bo", "ses_ana"], "{text}");
    assert!(title(&text).contains("2/5"), "{text}");

    // Words are ANDed: eval sessions that are closed and whose id holds 2.
    press(&mut app, KeyCode::Esc);
    let text = filtered(&mut app, "user:spyglass status:closed ev2");
    assert_eq!(listed(&text), ["ses_ev2"], "{text}");

    // The runtime's own sessions are `sdk`; none came from an OTLP exporter here.
    press(&mut app, KeyCode::Esc);
    let text = filtered(&mut app, "source:sdk -status:closed");
    assert_eq!(listed(&text), ["ses_bo", "ses_ana"], "{text}");
    press(&mut app, KeyCode::Esc);
    let text = filtered(&mut app, "source:otel");
    assert!(listed(&text).is_empty(), "{text}");
    assert!(text.contains("No session matches “source:otel”"), "{text}");
    assert!(title(&text).contains("0/5"), "{text}");

    // Esc clears it: every session again.
    press(&mut app, KeyCode::Esc);
    let text = screen(&mut app, 120, 20);
    assert_eq!(listed(&text).len(), 5, "{text}");
    assert!(title(&text).contains("Sessions 5"), "{text}");
}

#[test]
fn a_key_hides_the_closed_eval_sessions_and_shows_them_again() {
    let mut app = sessions();
    keys(&mut app, "e");
    let text = screen(&mut app, 120, 20);
    assert_eq!(listed(&text), ["ses_bo", "ses_ana"], "{text}");
    assert!(title(&text).contains("2/5 · no closed evals"), "{text}");
    insta::assert_snapshot!("evals_hidden", text);
    // A filter narrows what is left; an eval session still running stays listed.
    created(&mut app, 20, "ses_ev9", "spyglass-eval");
    let text = filtered(&mut app, "ev");
    assert_eq!(listed(&text), ["ses_ev9"], "{text}");
    press(&mut app, KeyCode::Esc);
    keys(&mut app, "e");
    let text = screen(&mut app, 120, 20);
    assert_eq!(listed(&text).len(), 6, "{text}");
    assert!(!text.contains("no closed evals"), "{text}");
}

#[test]
fn filters_stay_while_other_tabs_are_visited() {
    let mut app = sessions();
    filtered(&mut app, "status:failed");
    keys(&mut app, "e");
    keys(&mut app, "2");
    press(&mut app, KeyCode::Char('/'));
    keys(&mut app, "zzz");
    press(&mut app, KeyCode::Enter);
    keys(&mut app, "341");
    assert_eq!(app.tab, Tab::Sessions);
    let text = screen(&mut app, 120, 20);
    assert_eq!(listed(&text), ["ses_bo"], "{text}");
    assert!(
        title(&text).contains("/status:failed · no closed evals"),
        "{text}"
    );
    keys(&mut app, "2");
    let text = screen(&mut app, 120, 20);
    assert!(text.contains("/zzz"), "{text}");
}

/// Three approvals: `apr_01` and `apr_02` pending on two tools, `apr_03` denied.
fn approvals() -> App {
    let (mut app, _) = ui::app();
    created(&mut app, 1, "ses_1", "ana");
    let tools = ["asaas/create_payment", "nuvem/emit_nfe", "asaas/refund"];
    for (i, tool) in tools.iter().enumerate() {
        let seq = 2 + i as u64 * 2;
        let (call, apr) = (format!("call_{i}"), format!("apr_0{}", i + 1));
        let envelope = json!({"code": "approval_required", "approval_id": apr,
                              "expires_at": EXPIRES, "message": "held"});
        feed(
            &mut app,
            &tool_called(seq, TS, "ses_1", &call, tool)
                .input(json!({"value": i}))
                .outcome(json!({"envelope": envelope}))
                .build(),
        );
        let requested = json!({"approvalId": apr, "callId": call, "tool": tool,
                               "input": {"value": i}, "ruleId": format!("rule_{i}"),
                               "expiresAt": EXPIRES, "message": "held"});
        feed(
            &mut app,
            &frame("approval.requested", seq + 1, TS, "ses_1", requested),
        );
    }
    let resolved = json!({"approvalId": "apr_03", "decision": "denied", "by": "ana"});
    feed(
        &mut app,
        &frame("approval.resolved", 9, TS, "ses_1", resolved),
    );
    app
}

#[test]
fn approvals_filter_by_status_tool_and_text() {
    let mut app = approvals();
    keys(&mut app, "2");
    let text = filtered(&mut app, "tool:asaas -status:denied");
    assert!(text.contains("1/3 /tool:asaas -status:denied"), "{text}");
    assert!(text.contains("create_payment"), "{text}");
    assert!(!text.contains("emit_nfe"), "{text}");
    assert!(!text.contains("asaas/refund"), "{text}");
    insta::assert_snapshot!("approvals_filtered", text);
    press(&mut app, KeyCode::Esc);
    let text = filtered(&mut app, "status:denied");
    assert!(text.contains("asaas/refund"), "{text}");
    assert!(!text.contains("create_payment"), "{text}");
    // `a` on what is left answers for the row shown, not a hidden one.
    keys(&mut app, "a");
    let text = screen(&mut app, 120, 20);
    assert!(text.contains("apr_03 is already denied"), "{text}");
    press(&mut app, KeyCode::Esc);
    let text = filtered(&mut app, "nothing-like-this");
    assert!(
        text.contains("No approval matches “nothing-like-this”"),
        "{text}"
    );
}

fn eval(seq: u64, case: &str, status: &str) -> String {
    format!(
        r#"{{"kind":"agent.eval.completed","seq":{seq},"ts":"2026-11-22T21:43:{seq:02}.000Z","sessionId":"ses_e{seq}","suite":"payments","case":"{case}","status":"{status}","pass":{},"tokens":{{"prompt":1,"completion":1,"total":2}},"cost":0,"duration":12,"runId":"run_1","attempt":1,"assertions":[]}}"#,
        status == "passed"
    )
}

#[test]
fn the_evals_filter_narrows_the_suites_cases_and_keeps_the_selection_inside() {
    let (mut app, _) = ui::app();
    feed(&mut app, &eval(1, "charge small amount", "passed"));
    feed(&mut app, &eval(2, "refund twice", "failed"));
    feed(&mut app, &eval(3, "charge in dollars", "failed"));
    keys(&mut app, "3");
    let text = filtered(&mut app, "status:failed charge");
    assert!(text.contains("1/3 /status:failed charge"), "{text}");
    assert!(text.contains("charge in dollars"), "{text}");
    assert!(!text.contains("refund twice"), "{text}");
    assert!(!text.contains("charge small amount"), "{text}");
    // The cursor is on the one case left: Enter opens it.
    assert_eq!(
        app.evals.cases.selected.as_deref(),
        Some("charge in dollars")
    );
    insta::assert_snapshot!("evals_filtered", text);
    press(&mut app, KeyCode::Esc);
    let text = filtered(&mut app, "-status:passed");
    assert!(
        text.contains("refund twice") && text.contains("charge in dollars"),
        "{text}"
    );
    assert!(!text.contains("charge small amount"), "{text}");
    keys(&mut app, "j");
    assert_eq!(
        app.evals.cases.selected.as_deref(),
        Some("charge in dollars")
    );
    // Esc clears the filter before it moves the focus back to the suites.
    press(&mut app, KeyCode::Esc);
    let text = screen(&mut app, 120, 20);
    assert!(text.contains("charge small amount"), "{text}");
}

fn call(app: &mut App, seq: u64, sid: &str) {
    let called = tool_called(seq, TS, sid, &format!("call_{seq}"), "asaas/create_payment")
        .input(json!({"value": 5}))
        .outcome(json!({"result": {"id": "pay"}}))
        .duration(3.0);
    feed(app, &called.build());
}

#[test]
fn the_session_list_orders_by_any_column_and_the_selection_stays_on_its_session() {
    let (mut app, _) = ui::app();
    created(&mut app, 1, "ses_b", "zoe");
    created(&mut app, 2, "ses_c", "ana");
    created(&mut app, 3, "ses_a", "max");
    for seq in 4..7 {
        call(&mut app, seq, "ses_b");
    }
    call(&mut app, 7, "ses_a");
    // Newest first, as always, until a column is picked.
    let text = screen(&mut app, 120, 20);
    assert_eq!(listed(&text), ["ses_a", "ses_c", "ses_b"], "{text}");
    keys(&mut app, "gj");
    assert_eq!(app.sessions.list.selected.as_deref(), Some("ses_c"));
    // `o` orders by ID, then USER, STATUS, CALLS …
    keys(&mut app, "o");
    let text = screen(&mut app, 120, 20);
    assert_eq!(listed(&text), ["ses_a", "ses_b", "ses_c"], "{text}");
    assert!(text.contains(" ID▲"), "{text}");
    assert_eq!(app.sessions.list.selected.as_deref(), Some("ses_c"));
    keys(&mut app, "o");
    let text = screen(&mut app, 120, 20);
    assert_eq!(listed(&text), ["ses_c", "ses_a", "ses_b"], "{text}");
    assert!(text.contains("USER▲"), "{text}");
    keys(&mut app, "ooO");
    let text = screen(&mut app, 120, 20);
    assert_eq!(listed(&text), ["ses_b", "ses_a", "ses_c"], "{text}");
    assert!(text.contains("CALLS▼"), "{text}");
    assert_eq!(app.sessions.list.selected.as_deref(), Some("ses_c"));
    insta::assert_snapshot!("by_calls_descending", text);
    // Rows arriving take their place in the order; the selection stays on ses_c.
    for seq in 10..14 {
        call(&mut app, seq, "ses_c");
    }
    created(&mut app, 20, "ses_d", "bo");
    let text = screen(&mut app, 120, 20);
    assert_eq!(
        listed(&text),
        ["ses_c", "ses_b", "ses_a", "ses_d"],
        "{text}"
    );
    assert_eq!(app.sessions.list.selected.as_deref(), Some("ses_c"));
    assert!(row_of(&text, "ses_c").contains('›'), "{text}");
    // A filter orders what it keeps.
    let text = filtered(&mut app, "-user:zoe");
    assert_eq!(listed(&text), ["ses_c", "ses_a", "ses_d"], "{text}");
    press(&mut app, KeyCode::Esc);
    // Past the last column: newest first again, no arrow.
    keys(&mut app, "ooo");
    let text = screen(&mut app, 120, 20);
    assert_eq!(
        listed(&text),
        ["ses_d", "ses_a", "ses_c", "ses_b"],
        "{text}"
    );
    assert!(!text.contains('▲') && !text.contains('▼'), "{text}");
}

fn row_of<'a>(text: &'a str, id: &str) -> &'a str {
    text.lines().find(|l| l.contains(id)).unwrap_or("")
}

fn jump(app: &mut App, wanted: &str) -> String {
    keys(app, ":");
    keys(app, wanted);
    press(app, KeyCode::Enter);
    screen(app, 120, 20)
}

#[test]
fn colon_jumps_to_a_session_an_approval_or_a_case_by_id_or_prefix() {
    let mut app = approvals();
    created(&mut app, 20, "ses_zeta", "bo");
    feed(&mut app, &eval(21, "refund twice", "failed"));
    // The prompt shows in the status bar as it is typed.
    keys(&mut app, ":");
    keys(&mut app, "apr_0");
    let text = screen(&mut app, 120, 20);
    let status = text.lines().last().unwrap_or("");
    assert!(status.contains("jump to: apr_0▏"), "{text}");
    insta::assert_snapshot!("jump_prompt", text);
    press(&mut app, KeyCode::Char('2'));
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.tab, Tab::Approvals);
    assert_eq!(app.approvals.list.selected.as_deref(), Some("apr_02"));
    // A filter hiding the approval gives way.
    filtered(&mut app, "status:denied");
    jump(&mut app, "apr_01");
    assert_eq!(app.approvals.list.selected.as_deref(), Some("apr_01"));
    assert!(app.approvals.filter.is_empty());
    // A session by its prefix, from another tab.
    let text = jump(&mut app, "ses_z");
    assert_eq!(app.tab, Tab::Sessions);
    assert_eq!(app.sessions.list.selected.as_deref(), Some("ses_zeta"));
    assert!(!text.contains("matches for"), "{text}");
    // A case by the start of its name, any case.
    jump(&mut app, "REFUND");
    assert_eq!(app.tab, Tab::Evals);
    assert_eq!(app.evals.cases.selected.as_deref(), Some("refund twice"));
    // Several start alike: the first is shown, and the bar says there were more.
    let text = jump(&mut app, "apr_");
    assert_eq!(app.approvals.list.selected.as_deref(), Some("apr_01"));
    assert!(
        text.contains("3 matches for “apr_”: showing approval apr_01"),
        "{text}"
    );
    // Unknown: a clear message, and nothing moves.
    let text = jump(&mut app, "nope");
    assert_eq!(app.tab, Tab::Approvals);
    assert!(
        text.contains("nothing to jump to: no session, approval or eval case starts with “nope”"),
        "{text}"
    );
    // Esc closes the prompt without going anywhere; the next key acts as usual.
    keys(&mut app, ":ses");
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.jump, None);
    assert_eq!(app.tab, Tab::Approvals);
    keys(&mut app, "1");
    assert_eq!(app.tab, Tab::Sessions);
}

#[test]
fn marked_approvals_are_decided_together_after_one_confirmation_naming_the_count() {
    let mut app = approvals();
    keys(&mut app, "2");
    // Space marks the row and moves on; the title counts the marks.
    press(&mut app, KeyCode::Char(' '));
    press(&mut app, KeyCode::Char(' '));
    let text = screen(&mut app, 120, 20);
    assert!(text.contains("· 2 marked"), "{text}");
    assert!(row_of(&text, "create_payment").contains("●"), "{text}");
    assert!(row_of(&text, "emit_nfe").contains("●"), "{text}");
    assert!(!row_of(&text, "asaas/refund").contains("●"), "{text}");
    // Marked twice is unmarked; the denied one marked is left out of the decision.
    press(&mut app, KeyCode::Char(' '));
    keys(&mut app, "m");
    assert_eq!(app.approvals.marked, ["apr_01", "apr_02"]);
    keys(&mut app, "m");
    assert_eq!(app.approvals.marked, ["apr_01", "apr_02", "apr_03"]);
    keys(&mut app, "d");
    let text = screen(&mut app, 120, 20);
    assert!(text.contains("Deny all 2 marked calls?"), "{text}");
    assert!(text.contains("apr_01, apr_02"), "{text}");
    assert!(text.contains("y confirm all 2"), "{text}");
    assert!(
        text.contains("1 marked call was already decided: left out"),
        "{text}"
    );
    insta::assert_snapshot!("deny_marked", text);
    // Confirmed: one request per call (here there is no runtime, and the bar says so once).
    keys(&mut app, "y");
    let text = screen(&mut app, 120, 20);
    assert!(
        text.contains("cannot deny 2 calls: no runtime to send it to; nothing sent"),
        "{text}"
    );
    assert!(
        app.approvals.marked.is_empty(),
        "confirming clears the marks"
    );
    // Esc clears marks without deciding anything.
    keys(&mut app, "gm");
    press(&mut app, KeyCode::Esc);
    assert!(app.approvals.marked.is_empty());
    assert!(app.approvals.prompt.is_none());
}

#[test]
fn slash_searches_an_open_call_and_n_goes_to_the_next_match() {
    let (mut app, _) = ui::app();
    created(&mut app, 1, "ses_1", "ana");
    let big: serde_json::Map<String, serde_json::Value> = (0..40)
        .map(|i| (format!("field_{i:02}"), json!(i)))
        .collect();
    let called = tool_called(2, TS, "ses_1", "call_1", "asaas/create_payment")
        .input(serde_json::Value::Object(big))
        .outcome(json!({"result": {"id": "pay_1", "field_07": "again"}}))
        .duration(3.0);
    feed(&mut app, &called.build());
    keys(&mut app, "l");
    press(&mut app, KeyCode::Enter);
    assert!(app.sessions.detail.is_some());
    keys(&mut app, "/field_07");
    let text = screen(&mut app, 100, 16);
    assert!(text.contains("/field_07▏ 1/2"), "{text}");
    assert!(
        text.contains("\"field_07\": 7"),
        "the first match is in view: {text}"
    );
    press(&mut app, KeyCode::Enter);
    keys(&mut app, "n");
    let text = screen(&mut app, 100, 16);
    assert!(text.contains("/field_07 2/2"), "{text}");
    assert!(text.contains("\"field_07\": \"again\""), "{text}");
    insta::assert_snapshot!("call_search", text);
    keys(&mut app, "N");
    let text = screen(&mut app, 100, 16);
    assert!(text.contains("/field_07 1/2"), "{text}");
    // No match says so; Esc while typing drops the search, the call stays open.
    keys(&mut app, "/nothing");
    let text = screen(&mut app, 100, 16);
    assert!(text.contains("/nothing▏ no match"), "{text}");
    press(&mut app, KeyCode::Esc);
    assert!(app.sessions.detail.is_some());
    let text = screen(&mut app, 100, 16);
    assert!(!text.contains("/nothing"), "{text}");
}

#[test]
fn times_show_as_ages_or_clock_times_with_the_date_in_a_replay() {
    let (mut app, _) = ui::app();
    created(&mut app, 1, "ses_1", "ana");
    call(&mut app, 2, "ses_1");
    let text = screen(&mut app, 120, 20);
    assert!(row_of(&text, "ses_1").contains(" 30s│"), "{text}");
    assert!(text.contains("+0ms"), "{text}");
    keys(&mut app, "T");
    let text = screen(&mut app, 120, 20);
    assert!(row_of(&text, "ses_1").contains("21:43:30│"), "{text}");
    assert!(
        text.contains("21:43:30.000"),
        "the timeline's start: {text}"
    );
    assert!(!text.contains("+0ms"), "{text}");
    insta::assert_snapshot!("clock_times", text);
    // A replay is of another day: the date comes first.
    app.watching = spyglass::ui::Watching::Replay {
        file: "old.jsonl".into(),
    };
    let text = screen(&mut app, 160, 20);
    assert!(text.contains("2026-11-22 21:43:30"), "{text}");
    keys(&mut app, "T");
    let text = screen(&mut app, 160, 20);
    assert!(
        text.contains("+0ms") && !text.contains("2026-11-22"),
        "{text}"
    );
}
