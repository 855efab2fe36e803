//! End to end: the in-process runtime with an approval policy, a session created and a
//! call queued over HTTP, the App fed by the real observer client and sending through the
//! real REST outbox. The keys `2` `a` `n` (a note) `y` approve it; the rendered buffer
//! then shows the replay's result and the Sessions view's counter advanced. A second
//! reviewer deciding first makes the app's own decision a 409, shown in the status line.
//! Then what a reviewer sees is what a key acts on: a decided approval open in the pane is
//! not swapped for another, the bulk prompt names each call and its value, Space moves on
//! as the help says, and the filter finds the value the INPUT column shows.

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

/// The sizes every approvals screen below is checked at.
const SMALL: (u16, u16) = (80, 24);
const LARGE: (u16, u16) = (200, 50);

/// The screen at 80×24 and at 200×50.
fn screens(app: &mut App) -> [String; 2] {
    [
        ui::screen(app, SMALL.0, SMALL.1),
        ui::screen(app, LARGE.0, LARGE.1),
    ]
}

/// A runtime holding `*/create_payment` above 1000 for a human, an acting app watching
/// it, and one held call per value (oldest first), all shown pending.
async fn held(values: &[u32]) -> (spyglass::runtime::ServerHandle, Live, Vec<String>) {
    let handle = policy_server(
        "[[rule]]\nid = \"big_payments\"\ntool = \"*/create_payment\"\naction = \"approval\"\nwhen = \"input.value > 1000\"\n",
    )
    .await;
    let url = handle.url();
    let http = reqwest::Client::new();
    let mut live = Live::acting(&url);
    until(&mut live.app, &mut live.rx, LARGE, "connected", |s| {
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
    let mut ids = vec![];
    for value in values {
        let (status, queued) = post(
            &http,
            format!("{url}/v1/sessions/{sid}/execute"),
            json!({"tool": "asaas/create_payment", "input": {"value": value}}),
        )
        .await;
        assert_eq!(status, 202, "{queued}");
        ids.push(queued["approval_id"].as_str().unwrap().to_owned());
    }
    let pending = format!("2 Approvals ({})", values.len());
    until(
        &mut live.app,
        &mut live.rx,
        LARGE,
        "every call pending",
        |s| s.contains(&pending),
    )
    .await;
    key(&mut live.app, '2');
    (handle, live, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_key_acts_on_the_approval_shown_and_only_while_it_is_pending() {
    let (handle, mut live, ids) = held(&[5000, 6000]).await;
    let app = &mut live.app;
    // Enter opens the first (oldest) approval; `a` `y` approves it.
    ui::press(app, KeyCode::Enter);
    for text in screens(app) {
        assert!(text.contains(&ids[0]), "the first is open:\n{text}");
    }
    key(app, 'a');
    key(app, 'y');
    let first = ids[0].clone();
    until_app(app, &mut live.rx, LARGE, "the decision", |app, text| {
        app.model
            .approvals
            .get(&first)
            .is_some_and(|a| a.status == ApprovalStatus::Approved)
            && text.contains("approved · session")
    })
    .await;
    // The pane still shows the decided call: `a` again says so and prompts for nothing,
    // not for the second call, which is not on screen.
    key(app, 'a');
    assert_eq!(app.approvals.prompt, None, "no prompt for a call not shown");
    for text in screens(app) {
        assert!(
            text.contains(&format!("{first} is already approved")),
            "the status line says why:\n{text}"
        );
        assert!(!text.contains(&ids[1]), "the second is not shown:\n{text}");
        assert!(!text.contains("Approve asaas"), "no prompt:\n{text}");
    }
    assert_eq!(
        app.model.approvals.get(&ids[1]).unwrap().status,
        ApprovalStatus::Pending
    );
    // Back in the list the cursor is on the pending one, shown: `a` prompts for it.
    ui::press(app, KeyCode::Esc);
    key(app, 'a');
    for text in screens(app) {
        assert!(
            text.contains(&ids[1]),
            "the prompt names the second:\n{text}"
        );
        assert!(text.contains("Approve asaas/create_payment"), "{text}");
        assert!(text.contains("input.value = 6000"), "{text}");
    }
    live.observer.abort();
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bulk_prompt_names_each_marked_call_with_the_value_the_rule_saw() {
    let (handle, mut live, ids) = held(&[5000, 6000]).await;
    let app = &mut live.app;
    key(app, ' ');
    key(app, ' ');
    key(app, 'd');
    for text in screens(app) {
        assert!(text.contains("Deny all 2 marked calls?"), "{text}");
        for (id, value) in ids.iter().zip([5000, 6000]) {
            let line = ui::row(&text, &format!("{id}:"));
            assert!(
                line.contains(&format!("asaas/create_payment value={value}")),
                "{id} with its tool and value:\n{text}"
            );
        }
    }
    key(app, 'y');
    let text = until(app, &mut live.rx, LARGE, "both denied", |s| {
        !s.contains("2 Approvals (")
    })
    .await;
    for id in &ids {
        let approval = app.model.approvals.get(id).unwrap();
        assert_eq!(approval.status, ApprovalStatus::Denied, "{id}: {text}");
    }
    live.observer.abort();
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn space_marks_and_moves_to_the_next_call_as_the_help_says() {
    let (handle, mut live, ids) = held(&[5000, 6000]).await;
    let app = &mut live.app;
    key(app, '?');
    let help = ui::screen(app, LARGE.0, LARGE.1);
    assert!(
        help.contains("mark a call and move to the next"),
        "the help says the cursor moves:\n{help}"
    );
    ui::press(app, KeyCode::Esc);
    key(app, ' ');
    assert_eq!(app.approvals.marked, [ids[0].clone()]);
    assert_eq!(
        app.approvals.list.selected.as_deref(),
        Some(ids[1].as_str())
    );
    for text in screens(app) {
        assert!(text.contains("· 1 marked"), "{text}");
        let row = ui::row(&text, "value=6000");
        assert!(row.contains('›'), "the cursor moved on:\n{text}");
        let row = ui::row(&text, "value=5000");
        assert!(row.contains('●') && !row.contains('›'), "{text}");
    }
    live.observer.abort();
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filter_finds_an_approval_by_the_value_its_input_shows() {
    let (handle, mut live, ids) = held(&[5000, 6000]).await;
    let app = &mut live.app;
    key(app, '/');
    for c in "6000".chars() {
        key(app, c);
    }
    ui::press(app, KeyCode::Enter);
    assert_eq!(
        app.approvals.list.selected.as_deref(),
        Some(ids[1].as_str())
    );
    for text in screens(app) {
        assert!(text.contains("/6000"), "the filter in the title:\n{text}");
        assert!(text.contains("value=6000"), "{text}");
        assert!(!text.contains("value=5000"), "{text}");
        assert!(!text.contains("No approval matches"), "{text}");
    }
    live.observer.abort();
    handle.shutdown().await;
}
