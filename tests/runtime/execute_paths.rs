//! `POST /v1/sessions/{id}/execute` over raw HTTP: each kind of bad request gets its status and
//! code, an encoded session id reaches the same session, and a chunked body is read whole.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::RuntimeConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request on its own connection, raw: the answer's status line and its JSON body,
/// with a `content-length` matching the body.
async fn raw(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> (String, Value) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "{head}host: 127.0.0.1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    stream.write_all(&request).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8(answer).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().to_owned();
    let length = format!("content-length: {}", body.len());
    assert!(
        lines.any(|l| l == length),
        "{head} for a body of {}",
        body.len()
    );
    (status, serde_json::from_str(body).unwrap())
}

#[tokio::test]
async fn execute_answers_each_kind_of_request_with_its_status_and_code() {
    let handle = server(RuntimeConfig {
        max_body_bytes: 4096,
        ..test_config()
    })
    .await;
    let mocks = json!({"asaas/x": {"ok": 1, "note": "línea \u{202e}"}});
    let sid = Api::new(&handle).session(mocks.clone()).await;
    let good = json!({"tool": "asaas/x", "input": {"a": 1}}).to_string();
    let cases: Vec<(&str, Option<&str>, Vec<u8>, &str)> = vec![
        ("a call", None, good.clone().into_bytes(), "{sid}"),
        (
            "no such session",
            None,
            good.clone().into_bytes(),
            "ses_nosuchsession",
        ),
        ("an empty body", None, b"  ".to_vec(), "{sid}"),
        ("broken JSON", None, b"{\"tool\": ".to_vec(), "{sid}"),
        (
            "input not an object",
            None,
            br#"{"tool":"asaas/x","input":[1]}"#.to_vec(),
            "{sid}",
        ),
        ("no tool", None, br#"{"input":{}}"#.to_vec(), "{sid}"),
        ("a body over the cap", None, vec![b' '; 5000], "{sid}"),
        (
            "a tool not mocked",
            None,
            br#"{"tool":"asaas/y","input":{}}"#.to_vec(),
            "{sid}",
        ),
        (
            "another tenant",
            Some("other"),
            good.clone().into_bytes(),
            "{sid}",
        ),
        (
            "every tenant",
            Some("*"),
            good.clone().into_bytes(),
            "{sid}",
        ),
        (
            "a tenant not ASCII",
            Some("t\u{e9}"),
            good.clone().into_bytes(),
            "{sid}",
        ),
    ];
    let mut codes = Vec::new();
    for (what, tenant, body, session) in &cases {
        let tenant = tenant.map_or(String::new(), |t| format!("x-codespar-project: {t}\r\n"));
        let head = format!(
            "POST /v1/sessions/{}/execute HTTP/1.1\r\ncontent-type: application/json\r\n{tenant}",
            session.replace("{sid}", &sid)
        );
        let (status, body) = raw(handle.addr, &head, body).await;
        if status.starts_with("HTTP/1.1 200") {
            assert_eq!(body["data"], mocks["asaas/x"], "{what}: {body}");
        } else {
            assert!(
                body["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{what}: {body}"
            );
        }
        codes.push((status, body["code"].clone()));
    }
    // The cases reach what they mean to: a 200 and each refusal.
    let statuses: Vec<&str> = codes.iter().map(|(s, _)| &s[9..12]).collect();
    assert_eq!(
        statuses,
        [
            "200", "404", "400", "400", "400", "400", "413", "422", "404", "400", "400"
        ],
        "{codes:?}"
    );
    assert_eq!(codes[6].1, "payload_too_large");
    assert_eq!(codes[4].1, "invalid_body");
}

#[tokio::test]
async fn an_encoded_session_id_goes_through_the_router_to_the_same_session() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"asaas/x": {"ok": 1}})).await;
    let encoded = sid.replacen('_', "%5F", 1);
    let (status, body) = api
        .post(
            &format!("/v1/sessions/{encoded}/execute"),
            json!({"tool": "asaas/x", "input": {}}),
        )
        .await;
    assert_eq!((status, &body["data"]), (200, &json!({"ok": 1})), "{body}");
    let (status, body) = api.execute(&sid, "asaas/x", json!({})).await;
    assert_eq!((status, &body["data"]), (200, &json!({"ok": 1})), "{body}");
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(detail["calls"].as_array().unwrap().len(), 2, "{detail}");
    // A path the route does not take is not answered as an execute.
    for path in [
        "/v1/sessions//execute".to_owned(),
        format!("/v1/sessions/{sid}/execute/"),
        format!("/v1/sessions/{sid}/x/execute"),
    ] {
        let (status, body) = api
            .post(&path, json!({"tool": "asaas/x", "input": {}}))
            .await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    let (status, _) = api.get(&format!("/v1/sessions/{sid}/execute")).await;
    assert_eq!(status, 405);
}

/// `body` sent chunked, `pieces` bytes a chunk, on its own connection (in one send when
/// one chunk): the status line and the JSON body of the answer.
async fn chunked(
    addr: std::net::SocketAddr,
    path: &str,
    body: &[u8],
    pieces: usize,
) -> (String, Value) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
    .into_bytes();
    for piece in body.chunks(pieces) {
        request.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        request.extend_from_slice(piece);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    if pieces >= body.len() {
        stream.write_all(&request).await.unwrap();
    } else {
        // Written in several sends, so the server reads the body as several frames.
        for part in request.chunks(40) {
            stream.write_all(part).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8(answer).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.lines().next().unwrap().to_owned();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_body_in_many_pieces_is_read_whole_and_held_to_the_cap() {
    let handle = server(RuntimeConfig {
        max_body_bytes: 4096,
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"asaas/x": {"ok": 1}})).await;
    let path = format!("/v1/sessions/{sid}/execute");
    let input = json!({"tool": "asaas/x", "input": {"pad": "p".repeat(3000)}}).to_string();
    let (status, body) = chunked(handle.addr, &path, input.as_bytes(), 700).await;
    assert_eq!(
        (&status[9..12], &body["data"]),
        ("200", &json!({"ok": 1})),
        "{body}"
    );
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(
        detail["calls"][0]["input"]["pad"].as_str().map(str::len),
        Some(3000),
        "the input arrived whole: {detail}"
    );
    let over = json!({"tool": "asaas/x", "input": {"pad": "p".repeat(5000)}}).to_string();
    // In one send: the 413 goes before the body is read to its end, and a peer still
    // sending then would see the connection reset rather than the answer.
    let (status, body) = chunked(handle.addr, &path, over.as_bytes(), 6000).await;
    assert_eq!(
        (&status[9..12], body["code"].as_str()),
        ("413", Some("payload_too_large")),
        "{body}"
    );
}
