//! Security over real HTTP and WebSocket: every route of the router's own list needs a
//! key (so a new route without auth fails here), tenants cannot reach each other's
//! approvals or stream by id, and the log file never holds a key.

use crate::support::runtime::*;
use serde_json::json;
use spyglass::runtime::RuntimeConfig;
use spyglass::runtime::http::V1_ROUTES;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const KEY: &str = "csk_test_walker";

fn config() -> RuntimeConfig {
    RuntimeConfig {
        api_keys: vec![KEY.to_owned()],
        ..policy_config("[[rule]]\nid = \"hold\"\ntool = \"*/pay\"\naction = \"approval\"\n")
    }
}

async fn call(api: &Api, method: &str, path: &str) -> (u16, serde_json::Value) {
    match method {
        "GET" => api.get(path).await,
        "DELETE" => api.delete(path).await,
        "POST" => api.post(path, json!({})).await,
        other => panic!("V1_ROUTES names a method this test does not know: {other}"),
    }
}

#[tokio::test]
async fn every_listed_route_is_behind_auth() {
    let handle = server(config()).await;
    let anonymous = Api::new(&handle);
    let keyed = Api::new(&handle).with_key(KEY);
    let sid = keyed.session(json!({"asaas/x": {"ok": 1}})).await;
    let mut walked = 0;
    for (route, methods) in V1_ROUTES {
        let path = route.replace("{id}", &sid).replace("{name}", "payments");
        for method in *methods {
            walked += 1;
            let (status, body) = call(&anonymous, method, &path).await;
            assert_eq!(
                (status, body["code"].as_str()),
                (401, Some("unauthorized")),
                "{method} {route} answered without a key: {body}"
            );
            // With the key the route is really there: neither refused nor unrouted.
            let (status, body) = call(&keyed, method, &path).await;
            let unrouted = status == 405
                || status == 404
                    && body["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("no route"));
            assert!(
                status != 401 && !unrouted,
                "{method} {route} with a key: {status} {body}"
            );
        }
    }
    assert!(walked >= 17, "the route list shrank to {walked}");
    // Outside the list only /health answers without a key; unknown paths are JSON 404s.
    let (status, _) = anonymous.get("/health").await;
    assert_eq!(status, 200);
    let (status, body) = anonymous.get("/v1/not-a-route").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
}

fn ws_request(
    url: &str,
    tenant: &str,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let mut req = url.into_client_request().unwrap();
    let headers = req.headers_mut();
    headers.insert("authorization", format!("Bearer {KEY}").parse().unwrap());
    headers.insert("x-codespar-project", tenant.parse().unwrap());
    req
}

#[tokio::test]
async fn another_tenant_cannot_decide_or_watch_by_id() {
    let handle = server(config()).await;
    let a = Api::new(&handle).with_key(KEY).with_tenant("prj_a");
    let b = Api::new(&handle).with_key(KEY).with_tenant("prj_b");
    let sid = a.session(json!({"asaas/pay": [{"id": "p1"}]})).await;
    let (status, held) = a.execute(&sid, "asaas/pay", json!({"value": 1})).await;
    assert_eq!(status, 202);
    let approval = held["approval_id"].as_str().unwrap().to_owned();

    // B knows both ids and still gets 404 for every way in, and changes nothing.
    let (status, body) = b
        .post(&format!("/v1/approvals/{approval}/deny"), json!({}))
        .await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
    let (_, pending) = a.get("/v1/approvals").await;
    assert_eq!(pending["approvals"][0]["status"], "pending");

    // B subscribing to A's session by id, from the start, sees nothing of it.
    let url = format!("{}?since=0&session={sid}", handle.observe_url());
    let (mut ws_b, _) = tokio_tungstenite::connect_async(ws_request(&url, "prj_b"))
        .await
        .unwrap();
    // B ingesting an event that names A's session lands in B's stream only.
    let event = json!({"kind": "session.closed", "sessionId": sid});
    let (status, _) = b.post("/v1/events", json!([event])).await;
    assert_eq!(status, 200);
    let (mut ws_a, _) = tokio_tungstenite::connect_async(ws_request(&url, "prj_a"))
        .await
        .unwrap();
    let seen_by_a = frames(&mut ws_a, 3).await;
    let kinds: Vec<&str> = seen_by_a
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["session.created", "tool.called", "approval.requested"]
    );
    assert!(
        next_frame(&mut ws_a, Duration::from_millis(300))
            .await
            .is_none()
    );
    // B's own ingested event is the only thing B sees.
    let only = next_frame(&mut ws_b, Duration::from_secs(5)).await.unwrap();
    assert_eq!(only["kind"], "session.closed");
    assert!(
        next_frame(&mut ws_b, Duration::from_millis(300))
            .await
            .is_none()
    );
    // A's session is still open: B's event was B's, not a close of A's session.
    let (_, detail) = a.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(detail["status"], "active");
}

#[test]
fn the_log_file_masks_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spyglass.log");
    let file = std::fs::File::create(&path).unwrap();
    let subscriber =
        spyglass::ui::logfile::file_subscriber(file, tracing_subscriber::EnvFilter::new("info"));
    tracing::subscriber::with_default(subscriber, || {
        tracing::info!(
            api_key = "csk_live_0123456789abcdef",
            header = "Authorization: Bearer csk_test_fedcba9876543210",
            "connecting with key csk_test_zyxwvu"
        );
        tracing::warn!(url = "http://x/v1/events?api_key=hunter2", "retrying");
    });
    let log = std::fs::read_to_string(&path).unwrap();
    for secret in ["0123456789abcdef", "fedcba9876543210", "zyxwvu", "hunter2"] {
        assert!(
            !log.contains(secret),
            "{secret} reached the log file:\n{log}"
        );
    }
    assert!(log.contains("csk_live_****"), "{log}");
    assert!(
        log.contains("retrying"),
        "the events themselves are kept:\n{log}"
    );
}

#[test]
fn serve_binds_loopback_unless_told_otherwise() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("[default: 127.0.0.1:8000]"), "{help}");
    // And the warning rule for when it is told otherwise.
    let open: std::net::SocketAddr = "0.0.0.0:8000".parse().unwrap();
    assert!(spyglass::runtime::should_warn(&open, &[]));
    assert!(!spyglass::runtime::should_warn(&open, &[KEY.to_owned()]));
}
