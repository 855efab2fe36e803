//! End to end: the in-process runtime, the real observer WebSocket client, sessions and
//! calls made over HTTP, and the App rendered to a `TestBackend` buffer after every message:
//! the session appears, its stateful mock goes 1/2 then 2/2, an unmocked call shows
//! `tool_not_mocked`; then the server stops and restarts on the same port, the status bar
//! says reconnecting, and the stream resumes with no call shown twice.

use serde_json::json;

use crate::support::runtime::{post, rebindable_server, test_config};
use crate::support::ui::{self, Live, until};

const SIZE: (u16, u16) = (140, 24);

fn mock_row(text: &str) -> String {
    ui::mock_row(text, "nuvem-fiscal/create_nfe")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sessions_counters_envelopes_and_resume_across_a_restart() {
    let handle = rebindable_server(test_config()).await;
    let (addr, url) = (handle.addr, handle.url());
    let http = reqwest::Client::new();

    let Live {
        mut app,
        mut rx,
        observer,
    } = Live::watching(&url);
    until(&mut app, &mut rx, SIZE, "connected", |s| {
        s.contains("● connected")
    })
    .await;

    let (status, created) = post(
        &http,
        format!("{url}/v1/sessions"),
        json!({"servers": ["nuvem-fiscal", "asaas"], "user_id": "user_e2e",
               "mocks": {"nuvem-fiscal/create_nfe": [{"id": "nfe_1"}, {"id": "nfe_2"}]}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let sid = created["id"].as_str().unwrap().to_owned();
    // Ids are long; the list shows as much as its column holds.
    let shown = &sid[..sid.len().min(16)];
    let text = until(&mut app, &mut rx, SIZE, "the session", |s| {
        s.contains(shown)
    })
    .await;
    assert!(text.contains("user_e2e"));

    let execute = |tool: &str| {
        post(
            &http,
            format!("{url}/v1/sessions/{sid}/execute"),
            json!({"tool": tool, "input": {"value": 5}}),
        )
    };
    let (status, _) = execute("nuvem-fiscal/create_nfe").await;
    assert_eq!(status, 200);
    let text = until(&mut app, &mut rx, SIZE, "1/2", |s| {
        mock_row(s).contains("1/2")
    })
    .await;
    assert!(!mock_row(&text).contains("exhausted"));
    let (status, _) = execute("nuvem-fiscal/create_nfe").await;
    assert_eq!(status, 200);
    let text = until(&mut app, &mut rx, SIZE, "2/2", |s| {
        mock_row(s).contains("2/2")
    })
    .await;
    assert!(mock_row(&text).contains("exhausted"), "{text}");
    let (status, body) = execute("asaas/create_paymet").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("tool_not_mocked"))
    );
    until(&mut app, &mut rx, SIZE, "tool_not_mocked", |s| {
        s.contains("tool_not_mocked")
    })
    .await;

    // Stop the server; the client notices and counts down to its next attempt.
    let runtime = handle.runtime();
    handle.shutdown().await;
    let text = until(&mut app, &mut rx, SIZE, "reconnecting", |s| {
        s.contains("reconnecting in")
    })
    .await;
    assert!(text.contains("(attempt 1)"), "{text}");

    // Same state, same port: the client resumes from the last seq it saw.
    let handle = runtime.serve(addr).await.unwrap();
    until(&mut app, &mut rx, SIZE, "connected again", |s| {
        s.contains("● connected")
    })
    .await;
    let (status, body) = execute("nuvem-fiscal/create_nfe").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("mocks_exhausted"))
    );
    let text = until(&mut app, &mut rx, SIZE, "mocks_exhausted", |s| {
        s.contains("mocks_exhausted")
    })
    .await;

    let session = app.model.session(&sid).unwrap();
    assert_eq!(session.calls, 4, "four calls made, four counted");
    assert_eq!(session.timeline.calls().len(), 4);
    let mut ids: Vec<&str> = session
        .timeline
        .calls()
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 4, "no call twice");
    let rows = text
        .lines()
        .filter(|l| l.contains("nuvem-fiscal/create_n") && !l.contains("stateful"))
        .count();
    assert_eq!(
        rows, 3,
        "three timeline rows for the three create_nfe calls:\n{text}"
    );
    assert_eq!(app.model.counters.parse_errors, 0);

    observer.abort();
    handle.shutdown().await;
}
