//! Golden screens of the Evals tab (`TestBackend` + insta, fixed clock): no results, the
//! suite list, a case list with a flaky case, a case with a JSON path diff, one with a
//! text line diff and one with an all/any tree; plus what a user would notice: selection kept by name, `t` landing on
//! the case's session, reruns without a runtime saying so, empty lists, and the help.

use crossterm::event::{KeyCode, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use spyglass::clipboard::CopyOutcome;
use spyglass::ui::{App, Tab};
use std::sync::{Arc, Mutex};

use crate::support::ui::{self, feed, press as key, row, screen};

fn app() -> App {
    let (mut app, _) = ui::app();
    key(&mut app, KeyCode::Char('3'));
    assert_eq!(app.tab, Tab::Evals);
    app
}
/// One `agent.eval.completed` frame; `extra` holds more fields (`,"reason":"…"`).
#[allow(clippy::too_many_arguments)] // a frame literal: every field is a knob the tests turn
fn eval(
    seq: u64,
    sid: &str,
    suite: &str,
    case: &str,
    status: &str,
    run: &str,
    duration: f64,
    assertions: &str,
) -> String {
    format!(
        r#"{{"kind":"agent.eval.completed","seq":{seq},"ts":"2026-11-22T21:43:{:02}.000Z","sessionId":"{sid}","suite":"{suite}","case":"{case}","status":"{status}","pass":{},"tokens":{{"prompt":10,"completion":5,"total":15}},"cost":0,"duration":{duration},"runId":"{run}","attempt":1,"assertions":{assertions}}}"#,
        seq % 60,
        status == "passed"
    )
}

const CONTAINS_OK: &str =
    r#"[{"kind":"contains","pass":true,"expected":"pay_1","actual":"Charged: pay_1"}]"#;

const TEXT_FAIL: &str = r#"[{"kind":"contains","pass":true,"expected":"Charged","actual":"Charged: pay_2\nstatus: PENDING\nthanks"},{"kind":"equals","pass":false,"expected":"Charged: pay_1\nstatus: PENDING","actual":"Charged: pay_2\nstatus: PENDING\nthanks","message":"equals: the output differs"}]"#;

const JSON_FAIL: &str = r#"[{"kind":"json_path","pass":false,"expected":{"path":"$.order","equals":{"id":"o_1","status":"paid","items":[{"sku":"a","qty":1}]}},"actual":{"id":"o_1","status":"pending","items":[{"sku":"a","qty":2}],"note":"gift"},"message":"json_path: $.order differs"},{"kind":"max_tokens","pass":true,"expected":100,"actual":15}]"#;

/// Two runs of `payments` and two of `support`: `confirm payment` passes then fails
/// (flaky), `refund` errors, `order lookup` fails a JSON check.
fn history(app: &mut App) {
    let frames = [
        eval(
            1,
            "ses_01",
            "payments",
            "charge small amount",
            "passed",
            "run_1",
            12.0,
            CONTAINS_OK,
        ),
        eval(
            2,
            "ses_02",
            "payments",
            "confirm payment",
            "passed",
            "run_1",
            30.5,
            CONTAINS_OK,
        ),
        eval(
            3,
            "ses_03",
            "support",
            "greets",
            "passed",
            "run_2",
            4.0,
            CONTAINS_OK,
        ),
        eval(
            4,
            "ses_04",
            "support",
            "order lookup",
            "passed",
            "run_2",
            8.0,
            CONTAINS_OK,
        ),
        eval(
            5,
            "ses_05",
            "payments",
            "charge small amount",
            "passed",
            "run_3",
            11.0,
            CONTAINS_OK,
        ),
        eval(
            6,
            "ses_06",
            "payments",
            "confirm payment",
            "failed",
            "run_3",
            41.0,
            TEXT_FAIL,
        ),
        eval(
            7, "ses_07", "payments", "refund", "error", "run_3", 2000.0, "[]",
        )
        .replace(
            r#""attempt":1"#,
            r#""attempt":1,"reason":"timed out after 2000 ms""#,
        ),
        eval(
            8,
            "ses_08",
            "support",
            "greets",
            "passed",
            "run_4",
            3.0,
            CONTAINS_OK,
        ),
        eval(
            9,
            "ses_09",
            "support",
            "order lookup",
            "failed",
            "run_4",
            9.0,
            JSON_FAIL,
        ),
    ];
    for frame in &frames {
        feed(app, frame);
    }
}

#[test]
fn no_results_yet() {
    let mut app = app();
    let text = screen(&mut app, 100, 8);
    assert!(text.contains("No eval results yet"), "{text}");
    insta::assert_snapshot!(text);
    // Enter and the rerun keys on an empty tab do nothing harmful and say why.
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char('R'));
    assert_eq!(app.notice.as_deref(), Some("no suite to rerun yet"));
    key(&mut app, KeyCode::Char('t'));
    assert!(
        app.notice
            .as_deref()
            .unwrap()
            .starts_with("pick a case first")
    );
}

#[test]
fn suite_list_with_gauges_and_trends() {
    let mut app = app();
    history(&mut app);
    let text = screen(&mut app, 110, 12);
    // payments: run_1 2/2, run_3 2/3 judged (1 failed, 1 error) -> 3 of 5.
    let payments = text.lines().find(|l| l.contains("›payments")).unwrap();
    assert!(payments.contains(" 60%"), "{payments}");
    insta::assert_snapshot!(text);
}

#[test]
fn case_list_with_a_flaky_badge() {
    let mut app = app();
    history(&mut app);
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Down);
    let text = screen(&mut app, 110, 12);
    let confirm = text
        .lines()
        .find(|l| l.contains("confirm payment"))
        .unwrap();
    assert!(
        confirm.contains("flaky") && confirm.contains("50% 1/2"),
        "{confirm}"
    );
    let charge = text
        .lines()
        .find(|l| l.contains("charge small amount"))
        .unwrap();
    assert!(!charge.contains("flaky"), "{charge}");
    let refund = text.lines().find(|l| l.contains("refund")).unwrap();
    assert!(
        refund.contains("error") && !refund.contains("flaky"),
        "{refund}"
    );
    insta::assert_snapshot!(text);
}

#[test]
fn case_detail_with_a_json_path_diff() {
    let mut app = app();
    history(&mut app);
    key(&mut app, KeyCode::Down); // support
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Down); // order lookup
    key(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 120, 20);
    assert!(text.contains("~ $.order.items[0].qty: 1 → 2"), "{text}");
    assert!(text.contains("~ $.order.status: \"paid\" → \"pending\""));
    assert!(text.contains("+ $.order.note: \"gift\""));
    assert!(!text.contains("$.order.id"), "equal paths are not listed");
    insta::assert_snapshot!(text);
    key(&mut app, KeyCode::Esc);
    assert!(app.evals.detail.is_none());
}

#[test]
fn case_detail_with_a_text_line_diff() {
    let mut app = app();
    history(&mut app);
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Down); // confirm payment
    key(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 110, 18);
    for want in [
        "- Charged: pay_1",
        "+ Charged: pay_2",
        "    status: PENDING",
        "+ thanks",
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
    insta::assert_snapshot!(text);
}

#[test]
fn an_errored_case_shows_its_reason_and_a_skipped_detail_scrolls_nowhere() {
    let mut app = app();
    history(&mut app);
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::End); // refund
    key(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 110, 12);
    assert!(text.contains("reason: timed out after 2000 ms"), "{text}");
    assert!(text.contains("No assertions in the latest result."));
    key(&mut app, KeyCode::PageDown);
    assert_eq!(app.evals.detail.as_ref().unwrap().pane.scroll, 0);
}

#[test]
fn selection_stays_on_the_same_suite_and_case_as_results_arrive() {
    let mut app = app();
    history(&mut app);
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Down);
    assert_eq!(app.evals.cases.selected.as_deref(), Some("confirm payment"));
    // A suite sorting first and a new case of the same suite arrive.
    feed(
        &mut app,
        &eval(
            10, "ses_10", "accounts", "login", "passed", "run_5", 5.0, "[]",
        ),
    );
    feed(
        &mut app,
        &eval(
            11, "ses_11", "payments", "another", "passed", "run_6", 5.0, "[]",
        ),
    );
    assert_eq!(app.evals.suites.selected.as_deref(), Some("payments"));
    assert_eq!(app.evals.cases.selected.as_deref(), Some("confirm payment"));
    let text = screen(&mut app, 110, 14);
    let selected = text.lines().find(|l| l.contains('›')).unwrap_or_default();
    assert!(selected.contains("payments"), "{text}");
}

#[test]
fn t_shows_the_cases_session_timeline() {
    let mut app = app();
    feed(
        &mut app,
        r#"{"kind":"session.created","seq":1,"ts":"2026-11-22T21:43:05.000Z","sessionId":"ses_06","userId":"spyglass-eval","servers":["asaas"],"project":"default","mocks":[]}"#,
    );
    for seq in 2..=3 {
        feed(
            &mut app,
            &format!(
                r#"{{"kind":"session.created","seq":{seq},"ts":"2026-11-22T21:43:0{seq}.000Z","sessionId":"ses_other_{seq}","userId":"u","servers":[],"project":"default","mocks":[]}}"#
            ),
        );
    }
    feed(
        &mut app,
        &eval(
            4,
            "ses_06",
            "payments",
            "confirm payment",
            "failed",
            "run_3",
            41.0,
            TEXT_FAIL,
        ),
    );
    feed(
        &mut app,
        &eval(
            5, "ses_gone", "payments", "refund", "failed", "run_3", 1.0, TEXT_FAIL,
        ),
    );
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char('t'));
    assert_eq!(app.tab, Tab::Sessions);
    assert_eq!(app.sessions.list.selected.as_deref(), Some("ses_06"));
    let text = screen(&mut app, 110, 12);
    assert!(
        text.lines()
            .any(|l| l.contains("›ses_06") && l.contains("spyglass")),
        "{text}"
    );
    // A case whose session the inspector never saw says so and stays on the tab.
    key(&mut app, KeyCode::Char('3'));
    assert!(
        app.evals.detail.is_some(),
        "the case stayed open behind the jump"
    );
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Down); // refund
    key(&mut app, KeyCode::Char('t'));
    assert_eq!(app.tab, Tab::Evals);
    assert!(
        app.notice
            .as_deref()
            .unwrap()
            .contains("session ses_gone is no longer held"),
        "{:?}",
        app.notice
    );
}

#[test]
fn rerun_without_a_runtime_says_so_in_the_status_line() {
    let mut app = app();
    history(&mut app);
    key(&mut app, KeyCode::Char('r'));
    assert!(
        app.notice
            .as_deref()
            .unwrap()
            .starts_with("pick a case first"),
        "r on the suite list asks for a case"
    );
    key(&mut app, KeyCode::Char('R'));
    assert_eq!(
        app.notice.as_deref(),
        Some("cannot rerun suite payments: no runtime to send it to")
    );
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char('r'));
    let text = screen(&mut app, 200, 10);
    assert!(
        text.contains("cannot rerun payments / charge small amount: no runtime to send it to"),
        "{text}"
    );
}

#[test]
fn help_on_the_evals_tab_lists_its_keys() {
    let mut app = app();
    key(&mut app, KeyCode::Char('?'));
    let text = screen(&mut app, 110, 50);
    ui::assert_help_lists_the_keys_of(&text, Tab::Evals);
    // The other tabs' keys are not listed; typing is (the cases can be filtered).
    assert!(!text.contains("approve the selected call"), "{text}");
    assert!(!text.contains("sort calls by start"), "{text}");
    assert!(text.contains("Typing a filter"), "{text}");
    assert!(text.contains("filter the list"), "{text}");
    assert!(text.contains('r') && text.contains("rerun the selected eval case"));
    insta::assert_snapshot!(text);
}

#[test]
fn a_long_case_list_keeps_the_selection_on_screen() {
    let mut app = app();
    for i in 0..500u64 {
        feed(
            &mut app,
            &eval(
                i + 1,
                "ses_x",
                "big",
                &format!("case {i:03}"),
                "passed",
                "run_1",
                1.0,
                "[]",
            ),
        );
    }
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::End);
    assert_eq!(app.evals.cases.selected.as_deref(), Some("case 499"));
    let text = screen(&mut app, 110, 12);
    assert!(row(&text, "›✓").contains("case 499"), "{text}");
    assert!(
        !text.contains("case 000"),
        "rows above the window are not drawn"
    );
    key(&mut app, KeyCode::PageUp);
    let text = screen(&mut app, 110, 12);
    let selected = row(&text, "›✓");
    assert!(selected.contains("case 49"), "{text}");
    assert_ne!(app.evals.cases.selected.as_deref(), Some("case 499"));
}

#[test]
fn clicks_pick_a_suite_and_a_case_and_copy_takes_what_is_selected() {
    let mut app = app();
    history(&mut app);
    let copied = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = copied.clone();
    app.copier = Box::new(move |text| {
        sink.lock().unwrap().push(text.to_owned());
        CopyOutcome::Clipboard
    });
    let text = screen(&mut app, 110, 12);
    let click = |column, row| MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column,
        row,
        modifiers: KeyModifiers::NONE,
    };
    let support = text.lines().position(|l| l.contains(" support")).unwrap() as u16;
    app.on_mouse(click(5, support));
    assert_eq!(app.evals.suites.selected.as_deref(), Some("support"));
    key(&mut app, KeyCode::Char('y'));
    let suite: serde_json::Value =
        serde_json::from_str(copied.lock().unwrap().last().unwrap()).unwrap();
    assert_eq!(suite["suite"], "support");
    assert!(app.notice.as_deref().unwrap().starts_with("suite support"));

    let text = screen(&mut app, 110, 12);
    let lookup = text
        .lines()
        .position(|l| l.contains("order lookup"))
        .unwrap() as u16;
    app.on_mouse(click(70, lookup));
    assert_eq!(
        app.evals.focus,
        spyglass::ui::views::evals::EvalFocus::Cases
    );
    assert_eq!(app.evals.cases.selected.as_deref(), Some("order lookup"));
    key(&mut app, KeyCode::Char('y'));
    let copied_case: serde_json::Value =
        serde_json::from_str(copied.lock().unwrap().last().unwrap()).unwrap();
    assert_eq!(copied_case["case"], "order lookup");
    assert!(
        app.notice
            .as_deref()
            .unwrap()
            .starts_with("case support / order lookup")
    );
}

/// An `all` that stopped at its second child (an `any` none of whose children held, one
/// of them a checker that errored); its third child skipped.
const COMPOSED: &str = r#"[{"kind":"all","pass":false,"expected":"all 3 hold","actual":{"passed":1,"failed":0,"errored":1,"skipped":1},"message":"all[1]: any: none of 2 held and 1 could not be judged","status":"errored","children":[{"kind":"contains","pass":true,"expected":"pay_1","actual":"Charged pay_1"},{"kind":"any","pass":false,"expected":"at least one of 2 holds","actual":{"passed":0,"failed":1,"errored":1,"skipped":0},"message":"any: none of 2 held and 1 could not be judged","status":"errored","children":[{"kind":"equals","pass":false,"expected":"Charged pay_1\nthanks","actual":"Charged pay_1","message":"equals: the output differs"},{"kind":"command","pass":false,"expected":{"argv":["python3","check.py"],"timeout_ms":10000},"actual":{"error":"exited with status 2","stderr":"Traceback"},"message":"command: exited with status 2; stderr: Traceback","status":"errored"}]},{"kind":"not_called","pass":false,"expected":null,"actual":null,"status":"skipped"}]}]"#;

#[test]
fn case_detail_with_a_composition_tree() {
    let mut app = app();
    feed(
        &mut app,
        eval(
            1, "ses_01", "checks", "composed", "error", "run_1", 3.0, COMPOSED,
        )
        .as_str(),
    );
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 80, 24);
    for want in [
        "! all (1 passed, 1 errored, 1 skipped)",
        "  ✓ contains: expected \"pay_1\"",
        "  ! any (1 failed, 1 errored)",
        "    ✗ equals: the output differs",
        "      - thanks",
        "    ! command: exited with status 2; stderr: T",
        "  - not_called (skipped)",
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
    insta::assert_snapshot!(text);
}

#[test]
fn a_max_cost_that_cannot_be_checked_is_marked_errored_with_its_reason() {
    let mut app = app();
    let assertions = r#"[{"kind":"contains","pass":true,"expected":"pay_1","actual":"Charged pay_1"},{"kind":"max_cost","pass":false,"expected":0.01,"actual":null,"message":"max_cost: cannot be checked: no price for model `o3-mini` (--model-prices)","status":"errored"}]"#;
    let frame = eval(1, "ses_01", "billing", "charge", "error", "run_1", 8.0, assertions)
        .replace(
            r#""runId""#,
            r#""reason":"max_cost: cannot be checked: no price for model `o3-mini` (--model-prices)","runId""#,
        );
    feed(&mut app, &frame);
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Enter);
    let text = screen(&mut app, 160, 14);
    assert!(
        text.contains(
            "! max_cost: cannot be checked: no price for model `o3-mini` (--model-prices)"
        ),
        "{text}"
    );
    assert!(text.contains("✓ contains"), "{text}");
    assert!(!text.contains("✗ max_cost"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn slash_searches_an_open_case_and_n_steps_through_the_matches() {
    let mut app = app();
    history(&mut app);
    key(&mut app, KeyCode::Down); // support
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Down); // order lookup
    key(&mut app, KeyCode::Enter);
    for c in "/$.order".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    let text = screen(&mut app, 120, 20);
    assert!(text.contains("/$.order▏ 1/4"), "{text}");
    key(&mut app, KeyCode::Enter); // keep the search; the case stays open
    key(&mut app, KeyCode::Char('n'));
    let text = screen(&mut app, 120, 20);
    assert!(text.contains("/$.order 2/4"), "{text}");
    key(&mut app, KeyCode::Char('N'));
    key(&mut app, KeyCode::Char('N'));
    let text = screen(&mut app, 120, 20);
    assert!(text.contains("/$.order 4/4"), "wraps to the last: {text}");
    // The case's own keys still work in the pane.
    key(&mut app, KeyCode::Char('r'));
    assert!(app.evals.detail.is_some());
    key(&mut app, KeyCode::Esc);
    assert!(app.evals.detail.is_none());
}

/// A suite run of `payments` repeating each case five times: `charge` passes its 1st, 2nd
/// and 4th attempts, `refund` every one (or, `refund_fails`, none).
fn repeated_run(app: &mut App, seq: u64, run: &str, charge: &str, refund_fails: bool) {
    feed(
        app,
        &format!(
            r#"{{"kind":"eval.run.started","seq":{seq},"ts":"2026-11-22T21:43:00.000Z","runId":"{run}","suites":["payments"],"cases":10,"repeat":5}}"#
        ),
    );
    let refund = if refund_fails { "FFFFF" } else { "PPPPP" };
    let mut at = seq;
    for (case, strip) in [("charge", charge), ("refund", refund)] {
        for (i, mark) in strip.chars().enumerate() {
            at += 1;
            let status = if mark == 'P' { "passed" } else { "failed" };
            let frame = eval(at, "ses_r", "payments", case, status, run, 5.0, CONTAINS_OK)
                .replace(r#""attempt":1"#, &format!(r#""attempt":{}"#, i + 1));
            feed(app, &frame);
        }
    }
    feed(
        app,
        &format!(
            r#"{{"kind":"eval.run.completed","seq":{},"ts":"2026-11-22T21:44:00.000Z","runId":"{run}","passed":8,"failed":2}}"#,
            at + 1
        ),
    );
}

/// A run that repeated its cases: each case row shows its attempts (`PPFPF 3/5`), the
/// suite header the run's pass rate with its 95 % interval, pass@k, pass^k and flip rate,
/// and the case detail the case's own, at 80×24 and at 200×50.
#[test]
fn a_repeated_run_shows_attempt_strips_and_statistics() {
    for (width, height) in [(80, 24), (200, 50)] {
        let mut app = app();
        repeated_run(&mut app, 1, "run_1", "PPFPF", false);
        key(&mut app, KeyCode::Enter);
        let text = screen(&mut app, width, height);
        assert!(row(&text, " charge").contains("PPFPF 3/5"), "{text}");
        assert!(row(&text, " refund").contains("PPPPP 5/5"), "{text}");
        assert!(text.contains("pass rate 80 % [49–94 %]"), "{text}");
        if width == 200 {
            assert!(
                text.contains(
                    "run run_1: pass rate 80 % [49–94 %], pass@k 100 %, pass^k 50 %, flip rate 38 %, 1 flaky"
                ),
                "{text}"
            );
        }
        insta::assert_snapshot!(format!("repeated_run_cases_{width}x{height}"), text);
        key(&mut app, KeyCode::Enter);
        let text = screen(&mut app, width, height);
        assert!(text.contains("attempts PPFPF 3/5 in run run_1"), "{text}");
        assert!(
            text.contains("pass rate 60 % [23–88 %] (95 % interval)"),
            "{text}"
        );
        assert!(
            text.contains("pass@5 yes · pass^5 no · flip rate 75 %"),
            "{text}"
        );
        insta::assert_snapshot!(format!("repeated_run_case_{width}x{height}"), text);
    }
}

/// Pinned against a repeated run, a later run's drops say their p-value and the rule that
/// decided them: 3/5 → 2/5 is within noise (inconclusive), 5/5 → 0/5 a significant drop.
#[test]
fn a_pinned_comparison_says_each_drops_p_value_and_rule() {
    let mut app = app();
    repeated_run(&mut app, 1, "run_1", "PPFPF", false);
    key(&mut app, KeyCode::Char('p'));
    repeated_run(&mut app, 20, "run_2", "PFPFF", true);
    let text = screen(&mut app, 200, 50);
    let pinned = text
        .lines()
        .map(|l| l.split('│').nth(1).unwrap_or_default().trim_end())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        pinned
            .contains("inconclusive  payments / charge — 3/5 → 2/5: p = 0.5 > 0.05, within noise"),
        "{text}"
    );
    assert!(
        pinned.contains(
            "newly failing payments / refund — 5/5 → 0/5: p = 0.004 ≤ 0.05, a significant drop"
        ),
        "{text}"
    );
    insta::assert_snapshot!(text);
}
