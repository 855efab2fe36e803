//! Auth and tenancy over real HTTP and WebSocket: Bearer keys on every /v1 route, tenant
//! isolation of sessions, approvals and the stream.

use crate::support::runtime::*;
use serde_json::json;
use spyglass::runtime::RuntimeConfig;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const KEY: &str = "csk_test_one";

fn config() -> RuntimeConfig {
    RuntimeConfig {
        api_keys: vec![KEY.to_owned(), "csk_test_two".to_owned()],
        ..policy_config("[[rule]]\nid = \"hold\"\ntool = \"*/pay\"\naction = \"approval\"\n")
    }
}

#[tokio::test]
async fn every_v1_route_needs_a_known_key() {
    let handle = server(config()).await;
    let anonymous = Api::new(&handle);
    let wrong = Api::new(&handle).with_key("csk_test_nope");
    let routes = [
        ("POST", "/v1/sessions"),
        ("GET", "/v1/sessions"),
        ("GET", "/v1/sessions/ses_x"),
        ("DELETE", "/v1/sessions/ses_x"),
        ("GET", "/v1/sessions/ses_x/connections"),
        ("POST", "/v1/sessions/ses_x/execute"),
        ("POST", "/v1/sessions/ses_x/send"),
        ("GET", "/v1/approvals"),
        ("POST", "/v1/approvals/apr_x/approve"),
        ("POST", "/v1/approvals/apr_x/deny"),
        ("GET", "/v1/events"),
        ("POST", "/v1/events"),
        ("GET", "/v1/observe"),
    ];
    for api in [&anonymous, &wrong] {
        for (method, path) in routes {
            let (status, body) = match method {
                "GET" => api.get(path).await,
                "DELETE" => api.delete(path).await,
                _ => api.post(path, json!({})).await,
            };
            assert_eq!(status, 401, "{method} {path}");
            assert_eq!(body["code"], "unauthorized");
        }
    }
    // The WebSocket upgrade is refused without a key, accepted with one.
    assert!(
        tokio_tungstenite::connect_async(handle.observe_url())
            .await
            .is_err()
    );
    let mut req = handle.observe_url().into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();

    // Either key works; nothing the refused requests sent was applied.
    let api = Api::new(&handle).with_key("csk_test_two");
    let sid = api.session(json!({"asaas/x": {"ok": 1}})).await;
    let (status, _) = api.execute(&sid, "asaas/x", json!({})).await;
    assert_eq!(status, 200);
    let frames = frames(&mut ws, 2).await;
    assert_eq!(frames[0]["kind"], "session.created");
    assert_eq!(frames[0]["seq"], 1);
    // Health stays open for readiness probes.
    let (status, _) = anonymous.get("/health").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn tenants_do_not_see_each_other() {
    let handle = server(config()).await;
    let a = Api::new(&handle)
        .with_key(KEY)
        .with_tenant("prj_AAAAAAAAAAAAAAAA");
    let b = Api::new(&handle)
        .with_key(KEY)
        .with_tenant("prj_BBBBBBBBBBBBBBBB");
    let mut ws_b = {
        let mut req = format!("{}?since=0", handle.observe_url())
            .into_client_request()
            .unwrap();
        let headers = req.headers_mut();
        headers.insert("authorization", format!("Bearer {KEY}").parse().unwrap());
        headers.insert(
            "x-codespar-project",
            "prj_BBBBBBBBBBBBBBBB".parse().unwrap(),
        );
        tokio_tungstenite::connect_async(req).await.unwrap().0
    };
    let sid = a
        .session(json!({"asaas/pay": {"id": "p"}, "asaas/x": [{"n": 1}]}))
        .await;
    let (status, held) = a.execute(&sid, "asaas/pay", json!({})).await;
    assert_eq!(status, 202);
    let approval = held["approval_id"].as_str().unwrap();

    for path in [
        format!("/v1/sessions/{sid}"),
        format!("/v1/sessions/{sid}/connections"),
    ] {
        let (status, body) = b.get(&path).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (404, Some("not_found")),
            "{path}"
        );
    }
    let (status, _) = b.execute(&sid, "asaas/x", json!({})).await;
    assert_eq!(status, 404);
    // As for an unknown id: 204, and the session stays open (checked below).
    let (status, _) = b.delete(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(status, 204);
    let (status, _) = b
        .post(
            &format!("/v1/sessions/{sid}/send"),
            json!({"message": "hi"}),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = b
        .post(&format!("/v1/approvals/{approval}/approve"), json!({}))
        .await;
    assert_eq!(status, 404);
    let (_, list) = b.get("/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 0);
    let (_, list) = b.get("/v1/approvals?status=all").await;
    assert_eq!(list["approvals"].as_array().unwrap().len(), 0);
    let (_, page) = b.get("/v1/events?since=0").await;
    assert_eq!(page["events"].as_array().unwrap().len(), 0);
    // The default tenant (no header) is a tenant of its own.
    let (_, list) = Api::new(&handle).with_key(KEY).get("/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 0);

    // B's stream only shows B's events.
    let own = b.session(json!({"asaas/x": {"ok": 1}})).await;
    let frame = next_frame(&mut ws_b, Duration::from_secs(5)).await.unwrap();
    assert_eq!(frame["sessionId"], own.as_str());
    assert_eq!(frame["project"], "prj_BBBBBBBBBBBBBBBB");

    // A still owns everything B could not touch.
    let (status, _) = a.execute(&sid, "asaas/x", json!({})).await;
    assert_eq!(status, 200);
    let (status, view) = a
        .post(&format!("/v1/approvals/{approval}/approve"), json!({}))
        .await;
    assert_eq!((status, view["status"].as_str()), (200, Some("approved")));
    let (_, page) = a.get("/v1/events?since=0").await;
    assert!(
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["sessionId"] == sid.as_str())
    );
}
