//! Every theme keeps every cell readable: on the selected row, the active tab and the
//! status bar, a role's colour (an `active` in green, an envelope count in yellow) meets a
//! background it was not chosen for; each text cell drawn with both colours set must reach
//! WCAG AA's 4.5:1 in every built-in theme, on every tab.

use crossterm::event::KeyCode;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::{Color, Modifier};
use spyglass::config::theme::{BUILTIN_NAMES, MIN_CONTRAST, Theme, contrast};
use spyglass::ui::App;
use spyglass::ui::render::draw;

use crate::support::frames::{frame, session_created, tool_called};
use crate::support::ui::{app, feed, press as key};
use serde_json::json;

/// An active session with an envelope (ENV 1) and a call held for approval, plus an eval
/// result: every tab has a selected row in a role's colour.
fn busy_app(theme: &str) -> App {
    let (mut app, _) = app();
    app.theme = Theme::named(theme).unwrap();
    app.project = Some("prj_contrast".into());
    let ts = "2026-11-22T21:43:31.000Z";
    let mocks = json!([{"tool": "asaas/create_payment", "mode": "stateful", "entries": 2}]);
    feed(
        &mut app,
        &session_created(1, ts, "ses_01", "ana", &["asaas"], &mocks),
    );
    let envelope = json!({"code": "approval_required", "approval_id": "apr_01",
                          "expires_at": "2026-11-22T21:49:00.000Z", "message": "held"});
    let call = tool_called(2, ts, "ses_01", "call_01", "asaas/create_payment")
        .input(json!({"value": 5}))
        .outcome(json!({"envelope": envelope}))
        .duration(0.4);
    feed(&mut app, &call.build());
    let requested = json!({"approvalId": "apr_01", "callId": "call_01",
                           "tool": "asaas/create_payment", "input": {"value": 5},
                           "ruleId": "hold", "expiresAt": "2026-11-22T21:49:00.000Z"});
    feed(
        &mut app,
        &frame("approval.requested", 3, ts, "ses_01", requested),
    );
    let result = json!({"suite": "payments", "case": "refund", "status": "passed",
                        "pass": true, "runId": "r1", "duration": 12});
    feed(
        &mut app,
        &frame("agent.eval.completed", 4, ts, "ses_01", result),
    );
    app
}

/// Text cells whose two colours read under 4.5:1, as (x, y, symbol, fg, bg).
fn unreadable(app: &mut App, width: u16, height: u16) -> Vec<(u16, u16, String, Color, Color)> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| draw(f, app)).unwrap();
    let buf = terminal.backend().buffer();
    let mut bad = Vec::new();
    for y in 0..height {
        for x in 0..width {
            let cell = &buf[(x, y)];
            let text = cell
                .symbol()
                .chars()
                .any(|c| !c.is_whitespace() && !('\u{2500}'..='\u{259f}').contains(&c));
            if !text || cell.modifier.contains(Modifier::REVERSED) {
                continue;
            }
            if let Some(ratio) = contrast(cell.fg, cell.bg)
                && ratio < MIN_CONTRAST
            {
                bad.push((x, y, cell.symbol().to_owned(), cell.fg, cell.bg));
            }
        }
    }
    bad
}

#[test]
fn every_text_cell_reads_at_wcag_aa_in_every_theme_and_tab() {
    for name in BUILTIN_NAMES {
        for (tab, size) in [
            ('1', (80, 24)),
            ('2', (80, 24)),
            ('3', (120, 30)),
            ('4', (200, 50)),
        ] {
            let mut app = busy_app(name);
            key(&mut app, KeyCode::Char(tab));
            let bad = unreadable(&mut app, size.0, size.1);
            assert!(
                bad.is_empty(),
                "theme {name}, tab {tab}: {} unreadable cells, first {:?}",
                bad.len(),
                bad.first()
            );
        }
    }
}

/// The case this guards: in the high-contrast theme `active` (light green) on the selected
/// row's white is 1.4:1; the row must not show it in that colour.
#[test]
fn a_selected_active_session_is_not_green_on_white() {
    let theme = Theme::named("high-contrast").unwrap();
    assert!(contrast(theme.ok, theme.selection_bg).unwrap() < MIN_CONTRAST);
    let mut app = busy_app("high-contrast");
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    terminal.draw(|f| draw(f, &mut app)).unwrap();
    let buf = terminal.backend().buffer();
    let (x, y) = (0..24)
        .flat_map(|y| (0..80).map(move |x| (x, y)))
        .find(|&(x, y)| {
            ["a", "c", "t", "i", "v", "e"]
                .iter()
                .enumerate()
                .all(|(i, c)| x + (i as u16) < 80 && buf[(x + i as u16, y)].symbol() == *c)
        })
        .expect("an active session on screen");
    assert_eq!(buf[(x, y)].bg, theme.selection_bg, "the row is selected");
    assert_eq!(buf[(x, y)].fg, theme.selection_fg);
}
