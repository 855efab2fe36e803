//! End to end: three calls held by a policy on the in-process runtime, marked in the App
//! and denied with one confirmation; every one reaches the runtime (its events say denied).

use serde_json::json;
use spyglass::protocol::rest::ApprovalStatus;

use crate::support::runtime::{policy_server, post};
use crate::support::ui::{Live, key, until};

const SIZE: (u16, u16) = (170, 24);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marked_approvals_are_all_denied_with_one_confirmation() {
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
    until(&mut app, &mut rx, SIZE, "connected", |s| {
        s.contains("● connected")
    })
    .await;
    let (status, created) = post(
        &http,
        format!("{url}/v1/sessions"),
        json!({"servers": ["asaas"], "user_id": "user_e2e"}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let sid = created["id"].as_str().unwrap().to_owned();
    let mut held = vec![];
    for value in [5, 6, 7] {
        let (status, queued) = post(
            &http,
            format!("{url}/v1/sessions/{sid}/execute"),
            json!({"tool": "asaas/create_payment", "input": {"value": value}}),
        )
        .await;
        assert_eq!(status, 202, "{queued}");
        held.push(queued["approval_id"].as_str().unwrap().to_owned());
    }
    until(&mut app, &mut rx, SIZE, "three pending", |s| {
        s.contains("2 Approvals (3)")
    })
    .await;
    // 2, then space three times (each marks and moves on), d, y.
    key(&mut app, '2');
    for _ in 0..3 {
        key(&mut app, ' ');
    }
    key(&mut app, 'd');
    let text = crate::support::ui::screen(&mut app, SIZE.0, SIZE.1);
    assert!(text.contains("Deny all 3 marked calls?"), "{text}");
    key(&mut app, 'y');
    let text = until(&mut app, &mut rx, SIZE, "all three denied", |s| {
        !s.contains("2 Approvals (")
    })
    .await;
    for id in &held {
        let approval = app.model.approvals.get(id).unwrap();
        assert_eq!(approval.status, ApprovalStatus::Denied, "{id}: {text}");
    }
    observer.abort();
    handle.shutdown().await;
}
