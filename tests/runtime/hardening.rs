//! Hardening regressions over real HTTP: inputs a policy cannot read are refused, auth and
//! protocol edge cases, closing a session mid-run, and live-mode messages.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{Policy, RuntimeConfig, ServerHandle};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn policy_config() -> RuntimeConfig {
    RuntimeConfig {
        policy: Policy::from_toml(
            r#"
            [[rule]]
            id = "big"
            tool = "asaas/create_payment"
            action = "approval"
            when = "input.value > 1000"
            [[rule]]
            id = "no_big_refunds"
            tool = "asaas/refund"
            action = "deny"
            when = "input.value > 1000"
            "#,
        )
        .unwrap(),
        ..test_config()
    }
}

/// `{"value":5000,"pad":[[…]]}` with `arrays` nested arrays: 1 + arrays levels in all.
fn padded(arrays: usize) -> Value {
    let mut pad = json!([]);
    for _ in 1..arrays {
        pad = json!([pad]);
    }
    json!({"value": 5000, "pad": pad})
}

fn kinds(handle: &ServerHandle, sid: &str) -> Vec<String> {
    handle
        .runtime()
        .events_since(0, usize::MAX)
        .iter()
        .filter(|f| f.session_id.as_deref() == Some(sid))
        .map(|f| f.event.kind().to_owned())
        .collect()
}

#[tokio::test]
async fn input_a_rule_cannot_read_is_refused_not_let_through() {
    let handle = server(policy_config()).await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({"asaas/create_payment": {"id": "p"}, "asaas/refund": {"id": "r"}}))
        .await;
    // Shallow enough to read: the rules apply.
    let (status, _) = api.execute(&sid, "asaas/create_payment", padded(120)).await;
    assert_eq!(status, 202);
    let (status, _) = api.execute(&sid, "asaas/refund", padded(120)).await;
    assert_eq!(status, 403);
    // 128 levels: serde_json's recursion limit. Before, the input read as null, no rule
    // matched, and both calls answered 200.
    for tool in ["asaas/create_payment", "asaas/refund"] {
        let (status, body) = api.execute(&sid, tool, padded(127)).await;
        assert_eq!(status, 400, "{tool}: {body}");
        assert_eq!(body["code"], "input_unreadable");
        assert_eq!(body["field"], "/input");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(tool), "{message}");
        assert!(message.contains("recursion limit"), "{message}");
    }
    // A number out of f64 range is unreadable the same way (it was null too).
    let (status, body) = api
        .post_raw(
            &format!("/v1/sessions/{sid}/execute"),
            r#"{"tool":"asaas/refund","input":{"value":1e400}}"#,
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("input_unreadable"))
    );
    // Refused calls are not calls: nothing emitted, nothing counted.
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(detail["calls"].as_array().unwrap().len(), 2, "{detail}");
    // A non-object input too deep to parse is named by its kind, not as null.
    let (status, body) = api
        .execute(&sid, "other/tool", padded(200)["pad"].clone())
        .await;
    assert_eq!((status, body["code"].as_str()), (400, Some("invalid_body")));
    assert_eq!(body["message"], "input must be an object, found an array");
    // A tool no `when` rule reads is not refused: its input is passed on as sent.
    let sid = api.session(json!({"other/tool": {"ok": true}})).await;
    let (status, _) = api.execute(&sid, "other/tool", padded(127)).await;
    assert_eq!(status, 200);
}

/// Found by the `execute_policy` fuzz target's review: the rule read the last of two
/// `value`s, so `{"value":5000,"value":1}` passed a deny meant for 5000.
#[tokio::test]
async fn a_key_named_twice_is_refused_not_read_as_either() {
    let handle = server(policy_config()).await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"asaas/refund": {"id": "r"}})).await;
    for text in [
        r#"{"tool":"asaas/refund","input":{"value":5000,"value":1}}"#,
        r#"{"tool":"asaas/refund","input":{"value":1,"value":5000}}"#,
    ] {
        let (status, body) = api
            .post_raw(&format!("/v1/sessions/{sid}/execute"), text)
            .await;
        assert_eq!(status, 400, "{text}: {body}");
        assert_eq!(body["code"], "input_unreadable", "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(r#""value" appears twice"#), "{message}");
    }
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(detail["calls"].as_array().unwrap().len(), 0, "{detail}");
}

#[tokio::test]
async fn an_unparsable_input_on_the_stream_shows_as_sent_not_null() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"other/tool": {"ok": true}})).await;
    let (status, _) = api.execute(&sid, "other/tool", padded(127)).await;
    assert_eq!(status, 200);
    let frames = handle.runtime().events_since(0, usize::MAX);
    let called = frames
        .iter()
        .find_map(|f| match &f.event {
            spyglass::protocol::Event::ToolCalled(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    // What the inspector's Input pane prints.
    let shown = called.input.pretty();
    assert!(shown.starts_with("(not shown as a tree: "), "{shown}");
    assert!(
        shown.ends_with(&padded(127).to_string()),
        "the text as sent: {shown}"
    );
    assert!(!called.input.to_value().is_null());
}

#[tokio::test]
async fn bearer_scheme_is_case_insensitive() {
    let config = RuntimeConfig {
        api_keys: vec!["k1".to_owned()],
        ..test_config()
    };
    let handle = server(config).await;
    let client = reqwest::Client::new();
    for header in ["Bearer k1", "bearer k1", "BEARER k1"] {
        let res = client
            .get(format!("{}/v1/sessions", handle.url()))
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 200, "{header}");
    }
    let res = client
        .get(format!("{}/v1/sessions", handle.url()))
        .header("authorization", "bearer k2")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);
}

#[test]
fn a_condition_that_can_never_match_is_refused_at_load() {
    for literal in ["NaN", "inf", "-inf"] {
        let text = format!(
            "[[rule]]\nid = \"nan_rule\"\ntool = \"*\"\naction = \"deny\"\nwhen = \"input.a == {literal}\"\n"
        );
        let err = Policy::from_toml(&text).unwrap_err().to_string();
        assert!(err.contains("nan_rule"), "{err}");
        assert!(err.contains("not a finite number"), "{err}");
    }
}

#[tokio::test]
async fn delete_of_an_unknown_session_is_204() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let (status, body) = api.delete("/v1/sessions/ses_unknown").await;
    assert_eq!((status, body), (204, Value::Null));
    assert!(handle.runtime().events_since(0, 10).is_empty());
}

/// Sends a request head and a `len`-byte body in chunks over a raw socket, then reads the
/// whole answer; `Err` when the connection was cut first.
async fn raw_exchange(handle: &ServerHandle, head: &str, len: usize) -> std::io::Result<String> {
    let mut socket = tokio::net::TcpStream::connect(handle.addr).await?;
    socket.write_all(head.as_bytes()).await?;
    let chunk = vec![b'x'; 16 * 1024];
    let mut sent = 0;
    while sent < len {
        let n = chunk.len().min(len - sent);
        socket.write_all(&chunk[..n]).await?;
        sent += n;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).await?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

#[tokio::test]
async fn a_body_streamed_to_an_unknown_route_gets_the_404() {
    let handle = server(test_config()).await;
    let len = 512 * 1024;
    let head = format!(
        "POST /v1/nope HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n"
    );
    let answer = raw_exchange(&handle, &head, len)
        .await
        .expect("the connection was cut before the answer was read");
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(answer.contains(r#""code":"not_found""#), "{answer}");
}

/// A three-step run on a stateful mock with three entries, its second step waiting.
fn slow_script() -> Value {
    json!({
        "sequence": [
            {"tool_calls": [{"name": "a/pay", "arguments": {}}]},
            {"delay_ms": 30000, "tool_calls": [{"name": "a/pay", "arguments": {}}]},
            {"tool_calls": [{"name": "a/pay", "arguments": {}}]},
            {"text": "done"}
        ]
    })
}

async fn wait_for_kind(handle: &ServerHandle, sid: &str, kind: &str) {
    for _ in 0..200 {
        if kinds(handle, sid).iter().any(|k| k == kind) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("no {kind} for {sid}: {:?}", kinds(handle, sid));
}

#[tokio::test]
async fn closing_a_session_cancels_its_run() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["a"], "user_id": "u",
                   "mocks": {"a/pay": [{"n": 1}, {"n": 2}, {"n": 3}]}, "model": slow_script()}),
        )
        .await;
    assert_eq!(status, 201);
    let sid = created["id"].as_str().unwrap().to_owned();
    let run = {
        let api = Api::new(&handle);
        let sid = sid.clone();
        tokio::spawn(async move {
            api.post(
                &format!("/v1/sessions/{sid}/send"),
                json!({"message": "pay three times"}),
            )
            .await
        })
    };
    // Close while the second step waits.
    wait_for_kind(&handle, &sid, "agent.step.completed").await;
    let closed_at = std::time::Instant::now();
    let (status, _) = api.delete(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(status, 204);
    // The 30 s wait is cut short: the close cancels the run, it does not wait it out.
    let (status, body) = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the run outlived its session's close")
        .unwrap();
    println!(
        "run answered {:?} after the DELETE was sent",
        closed_at.elapsed()
    );
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["message"], "session closed");

    let kinds = kinds(&handle, &sid);
    let closed = kinds.iter().position(|k| k == "session.closed").unwrap();
    assert_eq!(
        &kinds[closed..],
        ["session.closed", "agent.failed"],
        "nothing dispatched after the close: {kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| *k == "tool.called").count(), 1);
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(list["sessions"][0]["mocks"][0]["counter"]["consumed"], 1);
    let failed = handle
        .runtime()
        .events_since(0, usize::MAX)
        .into_iter()
        .rev()
        .find(|f| f.event.kind() == "agent.failed")
        .unwrap();
    let failed: Value = serde_json::from_str(&spyglass::protocol::encode(&failed)).unwrap();
    assert_eq!(failed["error"], "session closed", "{failed}");
}

#[tokio::test]
async fn closing_a_session_cancels_its_pending_approvals() {
    let handle = server(policy_config()).await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({"asaas/create_payment": [{"id": "p"}]}))
        .await;
    let (status, held) = api
        .execute(&sid, "asaas/create_payment", json!({"value": 5000}))
        .await;
    assert_eq!(status, 202);
    let approval = held["approval_id"].as_str().unwrap();
    api.delete(&format!("/v1/sessions/{sid}")).await;
    let (status, body) = api
        .post(&format!("/v1/approvals/{approval}/approve"), json!({}))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (410, Some("approval_expired"))
    );
    let kinds = kinds(&handle, &sid);
    assert_eq!(
        &kinds[kinds.len() - 2..],
        ["approval.resolved", "session.closed"],
        "{kinds:?}"
    );
    let (_, list) = api.get("/v1/approvals?status=all").await;
    assert_eq!(list["approvals"][0]["status"], "cancelled");
    assert_eq!(list["approvals"][0]["note"], "session closed");
    let (_, sessions) = api.get("/v1/sessions").await;
    let mock = &sessions["sessions"][0]["mocks"][0];
    assert_eq!(
        (mock["calls"].as_u64(), mock["counter"]["consumed"].as_u64()),
        (Some(1), Some(0))
    );
}

#[tokio::test]
async fn live_mode_does_not_speak_of_test_mode() {
    let handle = server(RuntimeConfig::default()).await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u"}),
        )
        .await;
    assert_eq!(status, 201);
    let sid = created["id"].as_str().unwrap();
    let (status, body) = api.execute(sid, "asaas/create_payment", json!({})).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("tool_not_mocked")),
        "{body}"
    );
    let message = body["message"].as_str().unwrap().to_lowercase();
    assert!(
        !message.contains("test mode") && !message.contains("test-mode"),
        "{message}"
    );
}

#[tokio::test]
async fn a_project_header_that_is_not_text_is_refused_not_read_as_default() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    api.session(json!({"a/b": {}})).await;
    let res = reqwest::Client::new()
        .get(format!("{}/v1/sessions", handle.url()))
        .header(
            "x-codespar-project",
            reqwest::header::HeaderValue::from_bytes(b"prj_\xff").unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "invalid_header", "{body}");
}

/// HTTP/1.0 lets a client leave Host out; read as "nothing to check" that slipped past
/// the loopback host check, so every request must name its host.
#[tokio::test]
async fn a_request_without_a_host_header_is_refused_even_over_http_1_0() {
    let handle = server(test_config()).await;
    for head in [
        "GET /v1/sessions HTTP/1.0\r\n\r\n",
        "GET /health HTTP/1.0\r\n\r\n",
        "GET /v1/sessions HTTP/1.1\r\nconnection: close\r\n\r\n",
    ] {
        let answer = raw_exchange(&handle, head, 0).await.unwrap();
        assert!(answer.starts_with("HTTP/1."), "{head:?}: {answer}");
        assert!(answer[..12].ends_with("400"), "{head:?}: {answer}");
        assert!(answer.contains(r#""code":"invalid_header""#), "{answer}");
        assert!(answer.contains("Host header"), "{answer}");
    }
    let answer = raw_exchange(
        &handle,
        "GET /health HTTP/1.0\r\nhost: localhost\r\n\r\n",
        0,
    )
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
}
