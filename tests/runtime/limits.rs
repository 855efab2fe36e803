//! Size limits at every door: the request body cap on every POST route, the mocks cap at
//! its exact boundary, and the WebSocket message caps of the runtime (what observers may
//! send it) and of the client (what a runtime may send the inspector).

use crate::support::runtime::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use spyglass::client::observer::MAX_FRAME_BYTES;
use spyglass::client::{ClientMsg, ObserverConfig, RestClient, spawn_observer};
use spyglass::runtime::RuntimeConfig;
use spyglass::runtime::mocks::MAX_MOCKS_BYTES;
use spyglass::runtime::observe::MAX_INCOMING_WS_BYTES;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn every_post_route_refuses_a_body_over_the_cap() {
    let handle = server(RuntimeConfig {
        max_body_bytes: 4096,
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"asaas/x": {"ok": 1}})).await;
    let pad = "p".repeat(5000);
    for path in [
        "/v1/sessions".to_owned(),
        format!("/v1/sessions/{sid}/execute"),
        format!("/v1/sessions/{sid}/send"),
        "/v1/approvals/apr_x/approve".to_owned(),
        "/v1/approvals/apr_x/deny".to_owned(),
        "/v1/events".to_owned(),
    ] {
        let (status, body) = api.post(&path, json!({"pad": pad})).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (413, Some("payload_too_large")),
            "{path}: {body}"
        );
        assert!(
            body["message"].as_str().unwrap().contains("4096"),
            "{path}: {body}"
        );
    }
    // Under the cap the same routes read the body (and answer on its content).
    let (status, _) = api
        .execute(&sid, "asaas/x", json!({"pad": "p".repeat(3000)}))
        .await;
    assert_eq!(status, 200);
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(
        detail["calls"].as_array().unwrap().len(),
        1,
        "refused bodies did nothing"
    );
}

/// Mocks whose serialized form is exactly `len` bytes.
fn mocks_of(len: usize) -> Value {
    let frame = json!({"asaas/x": {"pad": ""}}).to_string().len();
    json!({"asaas/x": {"pad": "m".repeat(len - frame)}})
}

#[tokio::test]
async fn the_mocks_cap_is_exact() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let at_cap = mocks_of(MAX_MOCKS_BYTES);
    assert_eq!(at_cap.to_string().len(), MAX_MOCKS_BYTES);
    api.session(at_cap).await;
    let (status, body) = api
        .post(
            "/v1/sessions",
            json!({"user_id": "u", "mocks": mocks_of(MAX_MOCKS_BYTES + 1)}),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("mocks_payload_too_large"))
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{}", MAX_MOCKS_BYTES + 1)),
        "{body}"
    );
}

#[tokio::test]
async fn an_observer_sending_a_huge_message_is_dropped_alone() {
    let handle = server(test_config()).await;
    let rt = handle.runtime();
    let mut polite = observe(&handle, "").await;
    let mut rude = observe(&handle, "").await;
    // Small messages from an observer are read and ignored.
    rude.send(Message::text("hello")).await.unwrap();
    rude.send(Message::text("x".repeat(MAX_INCOMING_WS_BYTES * 2)))
        .await
        .unwrap();
    // The runtime fails that connection rather than buffer the message...
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match rude.next().await {
                None | Some(Err(_) | Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the oversized sender was not disconnected");
    // ...and everyone else streams on.
    rt.emit(
        None,
        spyglass::protocol::Event::SessionClosed(
            spyglass::protocol::events::SessionClosed::default(),
        ),
    );
    let frame = next_frame(&mut polite, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(frame["seq"], 1);
}

/// A fake runtime whose observer stream sends one message over the client's cap.
async fn oversized_runtime() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                let huge = format!(
                    r#"{{"kind":"session.closed","seq":1,"pad":"{}"}}"#,
                    "z".repeat(MAX_FRAME_BYTES)
                );
                let _ = ws.send(Message::text(huge)).await;
                let _ = ws.next().await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn the_client_refuses_a_message_over_its_cap() {
    let url = oversized_runtime().await;
    let (tx, mut rx) = mpsc::channel(64);
    let mut config = ObserverConfig::new(&url, None);
    config.backoff_base = Duration::from_millis(5);
    let task = spawn_observer(config, RestClient::new(&url, None).unwrap(), tx);
    let mut reason = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while reason.is_none() {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(ClientMsg::Disconnected { reason: why, .. })) => reason = Some(why),
            Ok(Some(ClientMsg::Frames(frames))) => {
                panic!("an oversized frame got through: seq {}", frames[0].seq)
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => panic!("the client never dropped the oversized stream"),
        }
    }
    task.abort();
    let reason = reason.unwrap();
    assert!(
        reason.to_lowercase().contains("size")
            || reason.contains("too long")
            || reason.contains("too big"),
        "{reason}"
    );
}
