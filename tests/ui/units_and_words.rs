//! Units and words at 80×24, 100×30 and 200×50: one duration format in the timeline and
//! in Events (`13µs`, never `0.0 ms`), counted nouns (`1 step`), a failed run's timeline
//! ending with its failure, and a forwarded run's session named in Events.

use crate::support::frames::{session_created, tool_called};
use crate::support::ui::{app, feed, key, screen};
use serde_json::json;
use spyglass::ui::App;

const SIZES: [(u16, u16); 3] = [(80, 24), (100, 30), (200, 50)];

/// A session whose one call took 13 µs, then its agent run failed after one step.
fn failed_after_a_quick_call(app: &mut App) {
    feed(
        app,
        &session_created(
            1,
            "2026-11-22T21:43:30.000Z",
            "ses_01",
            "ana",
            &["asaas"],
            &json!([]),
        ),
    );
    feed(
        app,
        &tool_called(
            2,
            "2026-11-22T21:43:31.000Z",
            "ses_01",
            "call_01",
            "asaas/ping",
        )
        .input(json!({}))
        .outcome(json!({"result": {"ok": true}}))
        .duration(0.013)
        .build(),
    );
    feed(
        app,
        &json!({"kind": "agent.failed", "seq": 3, "ts": "2026-11-22T21:43:32.000Z",
                "sessionId": "ses_01", "agentName": "billing", "model": "gpt-4o-mini",
                "provider": "openai", "input": "Charge", "output": null,
                "steps": [{"iteration": 0, "finishReason": "tool_calls",
                           "tokens": {"prompt": 1, "completion": 1, "total": 2}}],
                "tokens": {"prompt": 1, "completion": 1, "total": 2}, "duration": 1200.0,
                "finishReason": "error", "streaming": false, "failoverAttempts": 0,
                "error": "Rate limited by provider"}),
    );
}

#[test]
fn the_timeline_and_events_say_a_13_microsecond_call_the_same_way() {
    let (mut app, _) = app();
    failed_after_a_quick_call(&mut app);
    for (w, h) in SIZES {
        key(&mut app, '1');
        let sessions = screen(&mut app, w, h);
        let row = sessions
            .lines()
            .find(|l| l.contains("/ping") && l.contains('█'))
            .unwrap_or_else(|| panic!("{w}x{h}: the call's row\n{sessions}"));
        assert!(row.contains(" 13µs "), "{w}x{h}: {row}");
        key(&mut app, '4');
        let events = screen(&mut app, w, h);
        if w >= 100 {
            assert!(events.contains("(13µs)"), "{w}x{h}:\n{events}");
        }
        assert!(!events.contains("0.0 ms"), "{w}x{h}:\n{events}");
    }
}

#[test]
fn counted_nouns_and_a_failed_run_ends_its_timeline_with_the_failure() {
    let (mut app, _) = app();
    failed_after_a_quick_call(&mut app);
    for (w, h) in SIZES {
        let text = screen(&mut app, w, h);
        assert!(
            text.contains("1 step ") || text.contains("1 step│"),
            "{w}x{h}:\n{text}"
        );
        assert!(!text.contains("1 steps"), "{w}x{h}:\n{text}");
        // The timeline ends with the failure, with the run's duration and its error.
        let lines: Vec<&str> = text.lines().collect();
        let at = |needle: &str| lines.iter().rposition(|l| l.contains(needle));
        let failure = at("✕ failed").unwrap_or_else(|| panic!("{w}x{h}:\n{text}"));
        assert!(
            at("/ping").is_some_and(|call| call < failure),
            "{w}x{h}:\n{text}"
        );
        assert!(
            at("▾ step 0").is_some_and(|s| s < failure),
            "{w}x{h}:\n{text}"
        );
        let row = lines[failure];
        assert!(
            row.contains("1.2s") && row.contains("Rate limited"),
            "{w}x{h}: {row}"
        );
    }
}

#[test]
fn events_name_the_session_of_a_forwarded_run() {
    let (mut app, _) = app();
    feed(
        &mut app,
        &json!({"kind": "agent.completed", "seq": 1, "ts": "2026-11-22T21:43:32.000Z",
                "agentName": "support-bot", "conversationId": "conv_fwd",
                "model": "gpt-4o-mini", "provider": "openai", "input": "Hi",
                "output": "Hello", "steps": [],
                "tokens": {"prompt": 1, "completion": 1, "total": 2}, "duration": 30.0,
                "finishReason": "stop", "streaming": false, "failoverAttempts": 0}),
    );
    key(&mut app, '4');
    for (w, h) in SIZES {
        let text = screen(&mut app, w, h);
        let row = text
            .lines()
            .find(|l| l.contains("agent.completed"))
            .unwrap_or_else(|| panic!("{w}x{h}: the run's row\n{text}"));
        if w >= 100 {
            assert!(row.contains("↗conv_fwd"), "{w}x{h}: {row}\n{text}");
        }
        assert!(!row.contains(" - "), "{w}x{h}: {row}");
    }
}
