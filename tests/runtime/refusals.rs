//! Oversized and malformed requests are refused (the runtime's 414 with its JSON body, hyper's
//! own 431 and 400), and a WebSocket whose peer stops reading gives its slot back.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{RuntimeConfig, ServerHandle};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Sends `request` on a fresh socket and reads the answer to the close: status and body.
async fn exchange(handle: &ServerHandle, request: &[u8]) -> (String, Value) {
    let mut socket = TcpStream::connect(handle.addr).await.unwrap();
    let _ = socket.write_all(request).await;
    read_answer(&mut socket).await
}

async fn read_answer(socket: &mut TcpStream) -> (String, Value) {
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer head: {answer:?}"));
    let status = head.lines().next().unwrap_or_default().to_owned();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    let body: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    (status, body)
}

fn assert_error(status: &str, body: &Value, want_status: &str, code: &str) {
    assert!(status.starts_with(want_status), "{status}");
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert_eq!(
        body.as_object().map(serde_json::Map::len),
        Some(2),
        "{body}"
    );
}

/// Sends `request` on a fresh socket and reads to the close: the status line, or None
/// when the server did not close the connection within 5 s.
async fn refused(handle: &ServerHandle, request: &[u8]) -> Option<String> {
    let mut socket = TcpStream::connect(handle.addr).await.unwrap();
    let _ = socket.write_all(request).await;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer))
        .await
        .ok()?
        .ok()?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    Some(answer.lines().next().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn oversized_and_malformed_requests_are_refused_and_the_server_answers_on() {
    let handle = server(test_config()).await;

    // A 16 KiB request line: read by hyper, refused by the runtime with its JSON body.
    let line = format!(
        "GET /v1/sessions?x={} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
        "a".repeat(16 * 1024)
    );
    let (status, body) = exchange(&handle, line.as_bytes()).await;
    assert_error(&status, &body, "HTTP/1.1 414", "uri_too_long");

    // What hyper refuses itself (its answer has no body; the connection is closed after
    // it): 64 KiB of headers and a 70,000-byte target, past the 32 KiB head bound...
    let mut head = String::from("GET /health HTTP/1.1\r\nhost: localhost\r\n");
    for i in 0..64 {
        head.push_str(&format!("x-pad-{i}: {}\r\n", "b".repeat(1000)));
    }
    head.push_str("\r\n");
    let status = refused(&handle, head.as_bytes()).await;
    assert!(
        status
            .as_deref()
            .is_some_and(|s| s.starts_with("HTTP/1.1 431")),
        "{status:?}"
    );
    let long = format!(
        "GET /v1/{} HTTP/1.1\r\nhost: localhost\r\n\r\n",
        "a".repeat(70_000)
    );
    let status = refused(&handle, long.as_bytes()).await;
    assert!(
        status
            .as_deref()
            .is_some_and(|s| s.starts_with("HTTP/1.1 431")),
        "{status:?}"
    );

    // ...garbage, and a header without its colon.
    for request in [
        &b"\x16\x03\x01\x02\x00garbage\xff\xfe\r\n\r\n"[..],
        b"GET /v1/sessions HTTP/1.1\r\nhost x\r\n\r\n",
    ] {
        let status = refused(&handle, request).await;
        assert!(
            status
                .as_deref()
                .is_some_and(|s| s.starts_with("HTTP/1.1 400")),
            "{status:?}"
        );
    }

    // Second request of a kept-alive connection: the first answered whole, then the 400.
    let mut socket = TcpStream::connect(handle.addr).await.unwrap();
    socket
        .write_all(b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\nBROKEN\x01 / HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"status\":\"ok\""), "{answer}");
    assert!(
        answer.contains("HTTP/1.1 400"),
        "no 400 after the 200: {answer}"
    );

    // The server still answers.
    let (status, _) = Api::new(&handle).get("/health").await;
    assert_eq!(status, 200);
    // And a target at the bound is routed, not refused.
    let path = format!("/health?x={}", "a".repeat(8 * 1024 - 10));
    assert_eq!(path.len(), 8 * 1024);
    let (status, _) = Api::new(&handle).get(&path).await;
    assert_eq!(status, 200);
}

/// Reads everything `socket` gives until the server closes it; None if it is still open
/// (nothing read) after `quiet`.
async fn drained_to_close(socket: &mut TcpStream, quiet: Duration) -> Option<usize> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        match tokio::time::timeout(quiet, socket.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(total),
            Ok(Ok(n)) => total += n,
        }
    }
}

#[tokio::test]
async fn a_websocket_whose_peer_stops_reading_is_closed_after_the_header_timeout() {
    let handle = server(RuntimeConfig {
        header_timeout: Duration::from_millis(300),
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"t/big": {"ok": true}})).await;

    // A small receive window, so the server's writes stall soon.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut ws = socket.connect(handle.addr).await.unwrap();
    ws.write_all(
        b"GET /v1/observe HTTP/1.1\r\nhost: localhost\r\nconnection: upgrade\r\nupgrade: websocket\r\n\
          sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await
    .unwrap();
    // Never read: 400 calls of ~40 KB each (16 MB) queue towards it.
    let pad = "p".repeat(40_000);
    for _ in 0..400 {
        let (status, body) = api.execute(&sid, "t/big", json!({"pad": pad})).await;
        assert_eq!(status, 200, "{body}");
    }
    let stalled = Instant::now();
    // Well past the 300 ms timeout its stalled writes are given.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let read = drained_to_close(&mut ws, Duration::from_secs(3)).await;
    let read = read.unwrap_or_else(|| {
        panic!(
            "the stalled WebSocket was still open {:?} after its writes stalled",
            stalled.elapsed()
        )
    });
    assert!(read >= 129, "not even the 101 was read: {read} bytes");
    assert!(
        read < 16_000_000,
        "the whole stream arrived ({read} bytes): nothing stalled"
    );

    // A reading observer is not touched by the same timeout.
    let mut live = observe(&handle, "").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (status, _) = api.execute(&sid, "t/big", json!({"n": 1})).await;
    assert_eq!(status, 200);
    let mut seen = false;
    while let Some(frame) = next_frame(&mut live, Duration::from_secs(2)).await {
        if frame["kind"] == "tool.called" && frame["input"]["n"] == 1 {
            seen = true;
            break;
        }
    }
    assert!(seen, "a reading observer lost its stream");
    let (status, _) = api.get("/health").await;
    assert_eq!(status, 200);
}
