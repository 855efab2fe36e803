//! End to end: the in-process runtime with an approval policy, a session created and a
//! call queued over HTTP, the App fed by the real observer client and sending through the
//! real REST outbox. The keys `2` `a` `n` (a note) `y` approve it; the rendered buffer
//! then shows the replay's result and the Sessions view's counter advanced. A second
//! reviewer deciding first makes the app's own decision a 409, shown in the status line.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use spyglass::protocol::rest::ApprovalStatus;
use spyglass::ui::App;

use crate::support::ui;

use crate::support::runtime::{policy_server, post};
use crate::support::ui::{Live, key, until, until_app};

const SIZE: (u16, u16) = (170, 24);

fn screen(app: &mut App) -> String {
    ui::screen(app, SIZE.0, SIZE.1)
}

fn mock_row(text: &str) -> String {
    ui::mock_row(text, "asaas/create_payment")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_from_the_app_replays_and_a_second_decision_is_a_409() {
    let handle = policy_server(
        "[[rule]]\nid = \"payments_need_a_human\"\ntool = \"*/create_payment\"\naction = \"approval\"\n",
    )
    .await;
    let url = handle.url();
    let http = reqwest::Client::new();

    let Live {
        mut app,
        mut rx,
        observer,
    } = Live::acting(&url);
    app.user = "e2e_reviewer".into();
    until(&mut app, &mut rx, SIZE, "connected", |s| {
        s.contains("● connected")
    })
    .await;

    let (status, created) = post(
        &http,
        format!("{url}/v1/sessions"),
        json!({"servers": ["asaas"], "user_id": "user_e2e",
               "mocks": {"asaas/create_payment": [{"id": "pay_1"}, {"id": "pay_2"}]}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let sid = created["id"].as_str().unwrap().to_owned();
    let execute = || {
        post(
            &http,
            format!("{url}/v1/sessions/{sid}/execute"),
            json!({"tool": "asaas/create_payment", "input": {"value": 5}}),
        )
    };
    let (status, queued) = execute().await;
    assert_eq!(status, 202, "{queued}");
    let first = queued["approval_id"].as_str().unwrap().to_owned();
    let text = until(&mut app, &mut rx, SIZE, "the pending count", |s| {
        s.contains("2 Approvals (1)")
    })
    .await;
    assert!(
        mock_row(&text).contains("0/2"),
        "nothing consumed yet:\n{text}"
    );

    // 2 (Approvals), a (approve), n + text + Enter (a note), y (confirm).
    key(&mut app, '2');
    key(&mut app, 'a');
    key(&mut app, 'n');
    for c in "amount checked".chars() {
        key(&mut app, c);
    }
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    key(&mut app, 'y');
    assert_eq!(
        app.model.approvals.get(&first).unwrap().status,
        ApprovalStatus::Pending,
        "the app does not change the model itself: the runtime's events do"
    );
    let text = until(&mut app, &mut rx, SIZE, "the replay's result", |s| {
        s.contains(r#"→ {"id":"pay_1"}"#)
    })
    .await;
    assert!(text.contains("approved"), "{text}");
    assert!(
        !text.contains("sent; waiting for the runtime"),
        "the decision landed, so the notice went: {text}"
    );
    assert!(
        !text.contains("2 Approvals ("),
        "nothing pending any more: {text}"
    );
    let approval = app.model.approvals.get(&first).unwrap();
    assert_eq!(approval.decided_by.as_deref(), Some("e2e_reviewer"));
    assert_eq!(approval.note.as_deref(), Some("amount checked"));

    // The Sessions view's counter moved with the replay.
    key(&mut app, '1');
    let text = screen(&mut app);
    assert!(mock_row(&text).contains("1/2"), "{text}");

    // A second call; another reviewer approves it over HTTP before the app has heard.
    let (status, queued) = execute().await;
    assert_eq!(status, 202);
    let second = queued["approval_id"].as_str().unwrap().to_owned();
    until(&mut app, &mut rx, SIZE, "the second approval", |s| {
        s.contains("2 Approvals (1)")
    })
    .await;
    let (status, _) = post(
        &http,
        format!("{url}/v1/approvals/{second}/approve"),
        json!({"by": "someone_else"}),
    )
    .await;
    assert_eq!(status, 200);
    key(&mut app, '2');
    key(&mut app, 'k'); // the pending one is first
    assert_eq!(
        app.approvals.list.selected.as_deref(),
        Some(second.as_str())
    );
    key(&mut app, 'a');
    key(&mut app, 'y');
    let text = until(&mut app, &mut rx, SIZE, "the 409", |s| {
        s.contains("already decided (409")
    })
    .await;
    assert!(text.contains(&format!("approve {second}")), "{text}");
    // The other decision's `approval.resolved` may still be on its way when the 409 lands.
    until_app(&mut app, &mut rx, SIZE, "the other decision", |app, _| {
        app.model
            .approvals
            .get(&second)
            .is_some_and(|a| a.decided_by.is_some())
    })
    .await;
    let approval = app.model.approvals.get(&second).unwrap();
    assert_eq!(
        approval.decided_by.as_deref(),
        Some("someone_else"),
        "the refused decision changed nothing"
    );
    assert_eq!(app.model.counters.parse_errors, 0);

    observer.abort();
    handle.shutdown().await;
}
