//! The observer client against a scripted WebSocket server on loopback: broken frames are
//! counted not fatal, a dropped stream is redialled with `since` = the last seq seen, the
//! Bearer key is sent, and a `stream.gap` triggers the REST re-read.

use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use spyglass::client::{ClientMsg, ObserverConfig, RestClient, spawn_observer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Default)]
struct Seen {
    since: Vec<String>,
    auth: Vec<String>,
}

type Shared = Arc<Mutex<Seen>>;

async fn observe(
    ws: WebSocketUpgrade,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    State(seen): State<Shared>,
) -> impl IntoResponse {
    let since = q.get("since").cloned().unwrap_or_default();
    {
        let mut seen = seen.lock().unwrap();
        seen.since.push(since.clone());
        seen.auth.push(
            headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned(),
        );
    }
    ws.on_upgrade(move |mut socket| async move {
        let frames: Vec<String> = if since == "0" {
            vec![
                "{not json".into(),
                r#"{"kind":"session.closed","ts":"x"}"#.into(),
                r#"{"kind":"session.closed","seq":1,"ts":"2026-11-22T21:43:31.000Z","sessionId":"s"}"#.into(),
                r#"{"kind":"session.closed","seq":2,"ts":"2026-11-22T21:43:31.000Z","sessionId":"s"}"#.into(),
            ]
        } else {
            vec![r#"{"kind":"stream.gap","seq":10,"ts":"2026-11-22T21:43:31.000Z","from":3,"to":10}"#.into()]
        };
        for f in frames {
            if socket.send(Message::Text(f.into())).await.is_err() {
                return;
            }
        }
        if since == "0" {
            // Drop the connection: the client must come back with since=2.
            let _ = socket.send(Message::Close(None)).await;
        } else {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    })
}

async fn sessions() -> Json<serde_json::Value> {
    Json(
        serde_json::json!({"sessions": [{"id":"ses_r","user_id":"u","servers":[],"status":"active","created_at":"2026-11-22T21:43:31.000Z","last_activity":"2026-11-22T21:43:31.000Z","calls":7,"envelopes":1,"mocks":[]}]}),
    )
}

async fn approvals() -> Json<serde_json::Value> {
    Json(serde_json::json!({"approvals": []}))
}

async fn next(rx: &mut mpsc::Receiver<ClientMsg>) -> ClientMsg {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a client message within 10 s")
        .expect("channel open")
}

/// The seqs of the next `n` frames, however they were batched; anything else between
/// them fails the test.
async fn frame_seqs(rx: &mut mpsc::Receiver<ClientMsg>, n: usize) -> Vec<u64> {
    let mut seqs = vec![];
    while seqs.len() < n {
        match next(rx).await {
            ClientMsg::Frames(frames) => seqs.extend(frames.iter().map(|f| f.seq)),
            other => panic!("expected frames, got {other:?} after {seqs:?}"),
        }
    }
    seqs
}

#[tokio::test]
async fn broken_frames_are_reported_and_the_stream_resumes_from_the_last_seq() {
    let seen: Shared = Arc::default();
    let app = Router::new()
        .route("/v1/observe", get(observe))
        .route("/v1/sessions", get(sessions))
        .route("/v1/approvals", get(approvals))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let (tx, mut rx) = mpsc::channel(64);
    let rest = RestClient::new(&url, Some("csk_test_k")).unwrap();
    let task = spawn_observer(ObserverConfig::new(&url, Some("csk_test_k")), rest, tx);

    assert!(matches!(
        next(&mut rx).await,
        ClientMsg::Connecting { attempt: 0 }
    ));
    assert!(matches!(next(&mut rx).await, ClientMsg::Connected));
    assert!(matches!(next(&mut rx).await, ClientMsg::ParseError(e) if e.contains("JSON")));
    assert!(matches!(next(&mut rx).await, ClientMsg::ParseError(e) if e.contains("seq")));
    assert_eq!(frame_seqs(&mut rx, 2).await, [1, 2]);
    match next(&mut rx).await {
        ClientMsg::Disconnected {
            attempt, retry_in, ..
        } => {
            assert_eq!(attempt, 1);
            assert!(retry_in <= Duration::from_millis(250));
        }
        other => panic!("expected Disconnected, got {other:?}"),
    }
    assert!(matches!(
        next(&mut rx).await,
        ClientMsg::Connecting { attempt: 1 }
    ));
    assert!(matches!(next(&mut rx).await, ClientMsg::Connected));
    assert_eq!(frame_seqs(&mut rx, 1).await, [10]);
    match next(&mut rx).await {
        ClientMsg::Hydrated { sessions, .. } => assert_eq!(sessions.sessions[0].calls, 7),
        other => panic!("expected Hydrated, got {other:?}"),
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.since, ["0", "2"]);
    assert!(seen.auth.iter().all(|a| a == "Bearer csk_test_k"));
    task.abort();
}

#[tokio::test]
async fn an_unreachable_runtime_is_retried_with_growing_attempt_numbers() {
    // Bind then drop, so the port is (almost certainly) closed.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let (tx, mut rx) = mpsc::channel(64);
    let rest = RestClient::new(&url, None).unwrap();
    let task = spawn_observer(ObserverConfig::new(&url, None), rest, tx);
    let mut attempts = vec![];
    while attempts.len() < 2 {
        if let ClientMsg::Disconnected { attempt, .. } = next(&mut rx).await {
            attempts.push(attempt);
        }
    }
    assert_eq!(attempts, [1, 2]);
    task.abort();
}

#[tokio::test]
async fn rest_errors_carry_the_runtimes_code() {
    let app = Router::new().route(
        "/v1/approvals/{id}/approve",
        axum::routing::post(|| async {
            (
                axum::http::StatusCode::CONFLICT,
                Json(serde_json::json!({"code":"approval_already_decided","message":"already approved"})),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let rest = RestClient::new(&url, None).unwrap();
    let err = rest
        .decide(
            "apr_1",
            true,
            &spyglass::protocol::rest::DecisionRequest::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, spyglass::client::ClientError::Api { status: 409, code, .. } if code == "approval_already_decided"),
        "{err}"
    );
    assert!(RestClient::new("localhost:1", None).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_arrives_whole_and_in_order_however_it_is_batched() {
    use spyglass::protocol::Event;
    use spyglass::protocol::events::SessionClosed;
    use spyglass::runtime::{RuntimeConfig, start};
    let handle = start(RuntimeConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let rt = handle.runtime();
    for _ in 0..3000 {
        rt.emit(None, Event::SessionClosed(SessionClosed::default()));
    }
    let url = handle.url();
    let (tx, mut rx) = mpsc::channel(64);
    let task = spawn_observer(
        ObserverConfig::new(&url, None),
        RestClient::new(&url, None).unwrap(),
        tx,
    );
    let mut seqs = vec![];
    // A batch waiting in the channel holds room for about its own frames, never a
    // burst's room for the single frame that came after it.
    let mut receive = async |seqs: &mut Vec<u64>, until: usize| {
        while seqs.len() < until {
            match next(&mut rx).await {
                ClientMsg::Frames(frames) => {
                    assert!(
                        frames.capacity() <= 2 * frames.len().max(2),
                        "a batch of {} frames holds room for {}",
                        frames.len(),
                        frames.capacity()
                    );
                    seqs.extend(frames.iter().map(|f| f.seq));
                }
                ClientMsg::Connecting { .. } | ClientMsg::Connected => {}
                other => panic!("unexpected {other:?} after {} frames", seqs.len()),
            }
        }
    };
    receive(&mut seqs, 3000).await;
    // Then a trickle: one frame at a time, each read alone.
    for n in 3001..=3005 {
        rt.emit(None, Event::SessionClosed(SessionClosed::default()));
        receive(&mut seqs, n).await;
    }
    task.abort();
    assert_eq!(
        seqs,
        (1..=3005).collect::<Vec<u64>>(),
        "none lost, none reordered"
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn a_closed_port_is_named_as_refused_in_the_reason() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let url = format!("http://{addr}");
    let (tx, mut rx) = mpsc::channel(64);
    let rest = RestClient::new(&url, None).unwrap();
    let task = spawn_observer(ObserverConfig::new(&url, None), rest, tx);
    loop {
        if let ClientMsg::Disconnected { reason, .. } = next(&mut rx).await {
            assert_eq!(reason, format!("connection refused by {addr}"));
            break;
        }
    }
    task.abort();
}

#[tokio::test]
async fn a_runtime_refusing_the_key_is_not_retried() {
    for (given, status) in [(None, 401), (Some("csk_wrong"), 401)] {
        let rt = crate::support::runtime::server(spyglass::runtime::RuntimeConfig {
            api_keys: vec!["csk_right".to_owned()],
            ..crate::support::runtime::test_config()
        })
        .await;
        let url = rt.url();
        let (tx, mut rx) = mpsc::channel(64);
        let rest = RestClient::new(&url, given).unwrap();
        let _task = spawn_observer(ObserverConfig::new(&url, given), rest, tx);
        let mut seen = vec![];
        // The task ends after the refusal: the channel closes instead of a redial.
        while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
            seen.push(format!("{msg:?}"));
        }
        assert_eq!(
            seen,
            [
                "Connecting { attempt: 0 }".to_owned(),
                format!("Rejected {{ status: {status} }}")
            ],
            "key {given:?}"
        );
        rt.shutdown().await;
    }
}
