//! The inspector at 80×24, 100×30 and 200×50: names that differ at their end stay apart,
//! wide (CJK) names leave DUR and OUTCOME on their row, a cut column's header says so,
//! `? help` stays on the status bar and the help overlay never cuts a description.

use crate::support::frames::{frame, session_created, tool_called};
use crate::support::ui::{app, feed, key, screen};
use serde_json::{Value, json};
use spyglass::ui::App;

const SIZES: [(u16, u16); 3] = [(80, 24), (100, 30), (200, 50)];

fn call(seq: u64, call: &str, tool: &str, start: &str) -> Value {
    tool_called(seq, start, "ses_01", call, tool)
        .input(json!({"value": 5}))
        .outcome(json!({"result": {"ok": true}}))
        .duration(4.0)
        .build()
}

/// The demo's session: a misspelt tool called next to the real one.
fn demo_like(app: &mut App) {
    let mocks = json!([
        {"tool": "asaas/create_payment", "mode": "static", "entries": 1},
        {"tool": "asaas/create_paymet", "mode": "static", "entries": 1},
    ]);
    feed(
        app,
        &session_created(
            1,
            "2026-11-22T21:43:30.000Z",
            "ses_01",
            "shopping-assistant",
            &["asaas"],
            &mocks,
        ),
    );
    feed(
        app,
        &call(
            2,
            "call_01",
            "asaas/create_payment",
            "2026-11-22T21:43:31.000Z",
        ),
    );
    feed(
        app,
        &call(
            3,
            "call_02",
            "asaas/create_paymet",
            "2026-11-22T21:43:31.010Z",
        ),
    );
}

/// The timeline's row of the `n`th call (its bar is `█`), from the label to the border.
fn timeline_rows(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains('█') && l.contains("ok"))
        .map(|l| {
            let pane = l.rsplit("││").next().unwrap_or(l);
            pane.split('█').next().unwrap_or(pane).trim().to_owned()
        })
        .collect()
}

#[test]
fn names_that_differ_at_their_end_stay_apart_at_every_size() {
    let (mut app, _) = app();
    demo_like(&mut app);
    for (w, h) in SIZES {
        let text = screen(&mut app, w, h);
        let labels = timeline_rows(&text);
        assert_eq!(labels.len(), 2, "{w}x{h}:\n{text}");
        assert_ne!(labels[0], labels[1], "{w}x{h}:\n{text}");
        assert!(
            labels[0].ends_with("payment") && labels[1].ends_with("paymet"),
            "{w}x{h}: {labels:?}\n{text}"
        );
        // A column narrower than its names says so in its header.
        if w == 80 {
            assert!(
                text.contains("USER…") && text.contains("shoppi…"),
                "{w}x{h}:\n{text}"
            );
        } else if w == 200 {
            assert!(!text.contains('…'), "{w}x{h}: nothing is cut\n{text}");
        }
        // The status bar keeps the way to help, whatever else it has to cut.
        let status = text.lines().last().unwrap_or_default();
        assert!(status.contains("? help"), "{w}x{h}: {status}");
    }
}

#[test]
fn a_wide_name_never_pushes_dur_and_outcome_off_its_row() {
    let (mut app, _) = app();
    let mocks = json!([]);
    feed(
        &mut app,
        &session_created(
            1,
            "2026-11-22T21:43:30.000Z",
            "ses_01",
            "user_test",
            &["店铺"],
            &mocks,
        ),
    );
    feed(
        &mut app,
        &call(
            2,
            "call_01",
            "店铺服务/创建订单并且通知买家和卖家",
            "2026-11-22T21:43:31.000Z",
        ),
    );
    for (w, h) in SIZES {
        let text = screen(&mut app, w, h);
        let row = text
            .lines()
            .find(|l| l.contains('█'))
            .unwrap_or_else(|| panic!("{w}x{h}: a call row\n{text}"));
        assert!(
            row.contains("4.0ms") && row.trim_end().ends_with("ok     │"),
            "{w}x{h}: {row}\n{text}"
        );
    }
}

#[test]
fn the_help_overlay_never_cuts_a_description() {
    for (w, h) in [(80, 24), (100, 30), (160, 45), (200, 50)] {
        let (mut app, _) = app();
        key(&mut app, '?');
        let mut seen = String::new();
        // Scroll through the whole overlay: every description shows whole somewhere.
        for _ in 0..8 {
            seen.push_str(&screen(&mut app, w, h));
            crate::support::ui::press(&mut app, crossterm::event::KeyCode::PageDown);
        }
        for text in [
            "filter the list, or search an open pane",
            "focus the right pane (timeline, then mocks; cases)",
            "active, completed, failed, closed, gone (restarted)",
        ] {
            let words: Vec<&str> = text.split(' ').collect();
            // Whole on a line, or wrapped at a space onto the next line.
            let whole = seen.contains(text)
                || (1..words.len()).any(|cut| {
                    let (a, b) = words.split_at(cut);
                    let (a, b) = (a.join(" "), b.join(" "));
                    seen.lines().zip(seen.lines().skip(1)).any(|(l1, l2)| {
                        (l1.contains(&format!("{a} ")) || l1.contains(&format!("{a}│")))
                            && l2.contains(&format!("  {b}"))
                    })
                });
            assert!(whole, "{w}x{h}: {text}\n{seen}");
        }
    }
}

/// A table too narrow for all its columns says so: a cut column's header reads `NAME…`
/// and a dropped column leaves `…` at the header's end (Events and Approvals here; the
/// Evals tab's at 80 columns is in `evals_view`); a mark that would cost a column is left out.
#[test]
fn a_cut_or_dropped_column_is_marked_in_the_header() {
    let (mut app, _) = app();
    demo_like(&mut app);
    let expires = "2026-11-22T21:48:30.000Z";
    let envelope = json!({"code": "approval_required", "approval_id": "apr_01",
                          "expires_at": expires, "message": "held"});
    feed(
        &mut app,
        &tool_called(
            4,
            "2026-11-22T21:43:32.000Z",
            "ses_01",
            "call_03",
            "asaas/create_payment",
        )
        .input(json!({"value": 5}))
        .outcome(json!({"envelope": envelope}))
        .build(),
    );
    let requested = json!({"approvalId": "apr_01", "callId": "call_03",
                           "tool": "asaas/create_payment", "input": {"value": 5},
                           "ruleId": "payments-over-limit-need-a-human", "expiresAt": expires,
                           "message": "held"});
    feed(
        &mut app,
        &frame(
            "approval.requested",
            5,
            "2026-11-22T21:43:32.000Z",
            "ses_01",
            requested,
        ),
    );

    key(&mut app, '4');
    let header = |text: &str| text.lines().nth(2).unwrap_or_default().to_owned();
    // 44 columns: KIND cut, SESSION dropped.
    let text = screen(&mut app, 44, 12);
    let head = header(&text);
    assert!(head.contains("KIND…"), "{text}");
    assert!(!head.contains("SESSION") && head.ends_with("…│"), "{text}");
    // 60 columns: every column whole, no mark.
    let text = screen(&mut app, 60, 12);
    let head = header(&text);
    assert!(head.contains("KIND ") && head.contains("SESSION"), "{text}");
    assert!(!head.contains('…'), "{text}");
    // 36 columns: TIME gives way, but two columns for the mark would cost SESSION too.
    let text = screen(&mut app, 36, 12);
    assert!(header(&text).contains("SESSION"), "{text}");

    key(&mut app, '2');
    let text = screen(&mut app, 80, 12);
    let head = header(&text);
    assert!(head.contains("RULE…"), "the long rule id is cut: {text}");
    let text = screen(&mut app, 50, 12);
    let head = header(&text);
    assert!(head.ends_with("…│") && !head.contains("RULE"), "{text}");
}
