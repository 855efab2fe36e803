//! The demo as a new user meets it, headless: the demo's runtime and policy in-process, its
//! first round of workload over real HTTP, the App fed by the real observer client and
//! drawn into a `TestBackend` on a scripted clock. Every tab has content; approving the
//! pending payment sends it through the runtime and its replay shows beside it; the one
//! left alone expires when the clock passes its deadline.

use crate::support::ui::{key, press, row, screen, until};
use crossterm::event::KeyCode;
use spyglass::demo::{self, Pace};
use spyglass::protocol::now_rfc3339;
use spyglass::protocol::rest::ApprovalStatus;
use spyglass::runtime::start;
use spyglass::ui::{FakeClock, InspectorConfig, Source, Watching, Wired, wire};
use std::sync::Arc;
use std::time::Duration;

const SIZE: (u16, u16) = (160, 32);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_fills_every_tab_and_an_approved_call_replays() {
    let handle = start(
        demo::runtime_config().unwrap(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let url = handle.url();

    // Scripted time: the clock moves only when the test says so.
    let clock = Arc::new(FakeClock::at(&now_rfc3339()));
    let config = InspectorConfig {
        watching: Watching::Demo,
        ..InspectorConfig::new(&url)
    };
    let Wired {
        mut app, mut rx, ..
    } = wire(config, clock.clone(), Source::Live).unwrap();

    // The demo's first round, which runs without pauses: what the user sees at start.
    let first_round = Pace {
        step: Duration::ZERO,
        round: Duration::ZERO,
        rounds: Some(1),
        eval_every: 1,
    };
    let workload = tokio::spawn({
        let url = url.clone();
        async move { demo::drive(&url, None, first_round).await }
    });

    // Status bar: it is a demo, and where its runtime listens.
    let text = until(&mut app, &mut rx, SIZE, "the demo banner", |s| {
        s.contains("● connected")
    })
    .await;
    assert!(
        text.contains(&format!("demo · runtime {url}")),
        "the status bar names the demo and its URL:\n{text}"
    );

    // Sessions: the checkout session, its stateful mock exhausted, the misspelled tool and
    // the policy deny in its timeline. Both pending payments arrive before the round ends.
    let text = until(&mut app, &mut rx, SIZE, "two pending approvals", |s| {
        s.contains("2 Approvals (2)") && s.contains("shopper_000") && s.contains("agent_000")
    })
    .await;
    assert!(text.contains("1 Sessions"), "{text}");
    key(&mut app, '/');
    for c in "shopper".chars() {
        key(&mut app, c);
    }
    press(&mut app, KeyCode::Enter);
    let text = screen(&mut app, SIZE.0, SIZE.1);
    let nfe = row(&text, "nuvem-fiscal/create_nfe");
    assert!(
        nfe.contains("stateful") && nfe.contains("2/2"),
        "the two-entry NF-e mock is used up: {nfe}\n{text}"
    );
    let never = row(&text, "asaas/refund_payment");
    assert!(
        never.contains("never called"),
        "declared, never called: {never}\n{text}"
    );
    for code in [
        "mocks_exhausted",
        "tool_not_mocked",
        "policy_denied",
        // A held call says how its hold stands, not the envelope's code.
        "pending",
    ] {
        assert!(text.contains(code), "{code} in the timeline:\n{text}");
    }
    press(&mut app, KeyCode::Esc);

    // Evals: the example suite's pass rate, once its run has completed.
    key(&mut app, '3');
    let text = until(
        &mut app,
        &mut rx,
        SIZE,
        "the suite's run to complete",
        |s| s.contains("last run:"),
    )
    .await;
    assert!(
        text.contains("payments") && text.contains('%'),
        "the suite with its pass rate:\n{text}"
    );
    assert!(
        text.contains("flaky"),
        "two attempts per case show the flaky case:\n{text}"
    );

    // Events: the stream itself, newest at the bottom; the filter finds each kind however
    // far it has scrolled.
    key(&mut app, '4');
    let text = screen(&mut app, SIZE.0, SIZE.1);
    assert!(text.contains("session.closed"), "{text}");
    for kind in ["session.created", "tool.called", "approval.requested"] {
        key(&mut app, '/');
        for c in kind.chars() {
            key(&mut app, c);
        }
        press(&mut app, KeyCode::Enter);
        let text = screen(&mut app, SIZE.0, SIZE.1);
        assert!(
            text.lines().filter(|l| l.contains(kind)).count() >= 2,
            "{kind} in the events log (the filter line and a row):\n{text}"
        );
        press(&mut app, KeyCode::Esc);
    }

    workload.await.unwrap().unwrap();

    // Approvals: both payments wait; approve the selected one (a, then y to confirm).
    key(&mut app, '2');
    let text = screen(&mut app, SIZE.0, SIZE.1);
    assert!(text.contains("asaas/create_payment"), "{text}");
    let pending: Vec<_> = app
        .model
        .approvals
        .iter()
        .filter(|a| a.status == ApprovalStatus::Pending)
        .map(|a| a.id.clone())
        .collect();
    assert_eq!(pending.len(), 2, "{text}");
    key(&mut app, 'a');
    key(&mut app, 'y');
    let text = until(&mut app, &mut rx, SIZE, "the approved call's replay", |s| {
        s.contains("2 Approvals (1)") && s.contains(r#"→ {"id":"pay_0","status":"PENDING"}"#)
    })
    .await;
    assert!(text.contains("approved"), "{text}");
    let approved: Vec<_> = pending
        .iter()
        .filter(|id| app.model.approvals.get(id).unwrap().status == ApprovalStatus::Approved)
        .collect();
    assert_eq!(approved.len(), 1, "exactly the selected call was approved");

    // The other is left alone: two minutes later by the clock, it shows as expired.
    assert!(!text.contains("expired"), "not yet:\n{text}");
    clock.advance(Duration::from_secs(121));
    app.on_tick();
    let text = screen(&mut app, SIZE.0, SIZE.1);
    assert!(
        text.contains("expired"),
        "the unanswered call ran out:\n{text}"
    );

    handle.shutdown().await;
}
