//! Hardening of the runtime's edges: header-read timeout and connection caps (slow and idle
//! sockets), browsers kept out (content type, Origin, Host), and tenancy (keys bound to
//! projects, per-tenant retention and seqs).

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{RuntimeConfig, ServerHandle};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Whether the server closed `socket` within `wait` (EOF or reset on read).
async fn closed_within(socket: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match tokio::time::timeout(wait, socket.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // A 408 or similar before the close is fine; keep reading to the close.
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn slow_header_sockets_are_closed_after_the_header_timeout() {
    let handle = server(RuntimeConfig {
        header_timeout: Duration::from_millis(300),
        ..test_config()
    })
    .await;
    let mut sockets = Vec::new();
    for _ in 0..20 {
        let mut socket = TcpStream::connect(handle.addr).await.unwrap();
        socket.write_all(b"GET /health HT").await.unwrap();
        sockets.push(socket);
    }
    let started = Instant::now();
    for socket in &mut sockets {
        assert!(
            closed_within(socket, Duration::from_secs(3)).await,
            "a socket stalled mid request line was still open after {:?}",
            started.elapsed()
        );
    }
    // A socket that sends nothing at all is closed the same way (the idle timeout).
    let mut idle = TcpStream::connect(handle.addr).await.unwrap();
    assert!(closed_within(&mut idle, Duration::from_secs(3)).await);
    // And the server still answers.
    let (status, _) = Api::new(&handle).get("/health").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_kept_alive_connection_in_use_outlives_the_header_timeout() {
    let handle = server(RuntimeConfig {
        header_timeout: Duration::from_millis(300),
        ..test_config()
    })
    .await;
    let mut socket = TcpStream::connect(handle.addr).await.unwrap();
    let request = format!(
        "GET /health HTTP/1.1\r\nhost: 127.0.0.1:{}\r\n\r\n",
        handle.addr.port()
    );
    let started = Instant::now();
    let mut answered = 0;
    // Twelve requests 100 ms apart: four header timeouts long, never 300 ms idle.
    while answered < 12 {
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&head).contains("\"status\"") {
            let n = tokio::time::timeout(Duration::from_secs(2), socket.read(&mut buf))
                .await
                .expect("an answer within 2 s")
                .unwrap();
            assert!(
                n > 0,
                "closed after {answered} answers and {:?}",
                started.elapsed()
            );
            head.extend_from_slice(&buf[..n]);
        }
        answered += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Left alone, the same connection is then closed.
    assert!(closed_within(&mut socket, Duration::from_secs(3)).await);
}

#[tokio::test]
async fn idle_sockets_over_the_cap_are_closed_oldest_first_and_health_still_answers() {
    let handle = server(RuntimeConfig {
        max_connections: 32,
        max_connections_per_ip: 32,
        header_timeout: Duration::from_mins(1),
        ..test_config()
    })
    .await;
    let mut sockets = Vec::new();
    for _ in 0..64 {
        sockets.push(TcpStream::connect(handle.addr).await.unwrap());
    }
    // Let the accept loop take all 64.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let (status, body) = Api::new(&handle).get("/health").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let mut closed = 0;
    for socket in &mut sockets {
        if closed_within(socket, Duration::from_millis(50)).await {
            closed += 1;
        }
    }
    // 64 idle sockets and one /health against a cap of 32: at least 33 were closed.
    assert!(closed >= 33, "only {closed} of 64 idle sockets closed");
    // The oldest went first: the first socket opened is gone.
    assert!(closed_within(&mut sockets[0], Duration::from_millis(50)).await);
}

#[tokio::test]
async fn with_every_slot_busy_a_new_connection_is_refused_fast_with_a_code() {
    let handle = server(RuntimeConfig {
        max_connections: 8,
        max_connections_per_ip: 8,
        ..test_config()
    })
    .await;
    let mut streams = Vec::new();
    for _ in 0..8 {
        streams.push(observe(&handle, "").await);
    }
    let started = Instant::now();
    let (status, body) = Api::new(&handle).get("/health").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("too_many_connections"))
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    // A slot freed is a slot taken.
    drop(streams.pop());
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (status, _) = Api::new(&handle).get("/health").await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "health still {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn pages_cannot_post_text_plain_or_send_a_cross_site_origin_or_a_foreign_host() {
    let handle = server(test_config()).await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/sessions", handle.url());
    let session = json!({"servers": ["asaas"], "user_id": "u"}).to_string();

    let res = http
        .post(&url)
        .header("content-type", "text/plain")
        .body(session.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 415);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "unsupported_media_type", "{body}");
    let res = http.post(&url).body(session.clone()).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 415, "no content type at all");

    let res = http
        .post(&url)
        .header("content-type", "application/json")
        .header("origin", "https://evil.example")
        .body(session.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 403);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "origin_not_allowed", "{body}");

    // DNS rebinding: evil.example resolving to 127.0.0.1.
    let res = http
        .get(&url)
        .header("host", format!("evil.example:{}", handle.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 403);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "host_not_allowed", "{body}");

    // Nothing was created; the SDK's way (JSON, even on GET/DELETE) still works.
    let api = Api::new(&handle);
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(0), "{list}");
    api.session(json!({})).await;
    // JSON lines on the ingest route.
    let res = http
        .post(format!("{}/v1/events", handle.url()))
        .header("content-type", "application/x-ndjson")
        .body("{\"kind\":\"session.closed\"}\n")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);

    // A WebSocket upgrade from a page is refused the same way.
    let mut req = handle.observe_url().into_client_request().unwrap();
    req.headers_mut()
        .insert("origin", "https://evil.example".parse().unwrap());
    let err = tokio_tungstenite::connect_async(req).await.unwrap_err();
    assert!(err.to_string().contains("403"), "{err}");
}

#[tokio::test]
async fn an_allowed_origin_and_host_get_through() {
    let handle = server(RuntimeConfig {
        allowed_origins: vec!["http://localhost:3000".into()],
        allowed_hosts: vec!["devbox.lan".into()],
        ..test_config()
    })
    .await;
    let res = reqwest::Client::new()
        .get(format!("{}/v1/sessions", handle.url()))
        .header("origin", "http://localhost:3000")
        .header("host", "devbox.lan:8000")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let mut req = handle.observe_url().into_client_request().unwrap();
    req.headers_mut()
        .insert("origin", "http://localhost:3000".parse().unwrap());
    assert!(tokio_tungstenite::connect_async(req).await.is_ok());
}

#[tokio::test]
async fn a_key_bound_to_a_project_sees_only_that_project() {
    let handle = server(RuntimeConfig {
        api_keys: vec!["k_admin".into()],
        key_projects: vec![("k_a".into(), vec!["prj_a".into()])],
        ..test_config()
    })
    .await;
    let admin_b = Api::new(&handle).with_key("k_admin").with_tenant("prj_b");
    let sid_b = admin_b.session(json!({})).await;
    // k_a with no project header acts for its only project.
    let a = Api::new(&handle).with_key("k_a");
    let sid_a = a.session(json!({})).await;
    let (_, list) = Api::new(&handle)
        .with_key("k_admin")
        .with_tenant("prj_a")
        .get("/v1/sessions")
        .await;
    assert_eq!(list["sessions"][0]["id"], sid_a, "{list}");

    let a_in_b = Api::new(&handle).with_key("k_a").with_tenant("prj_b");
    for path in [
        "/v1/sessions".to_owned(),
        format!("/v1/sessions/{sid_b}"),
        "/v1/events?since=0".to_owned(),
        "/v1/approvals".to_owned(),
    ] {
        let (status, body) = a_in_b.get(&path).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (404, Some("not_found")),
            "{path}: {body}"
        );
    }
    let (status, _) = a_in_b
        .post("/v1/events", json!([{"kind": "session.closed"}]))
        .await;
    assert_eq!(status, 404);
    let mut req = handle.observe_url().into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", "Bearer k_a".parse().unwrap());
    req.headers_mut()
        .insert("x-codespar-project", "prj_b".parse().unwrap());
    let err = tokio_tungstenite::connect_async(req).await.unwrap_err();
    assert!(err.to_string().contains("404"), "{err}");
    // The admin key still reads prj_b, and k_a its own.
    let (status, _) = admin_b.get(&format!("/v1/sessions/{sid_b}")).await;
    assert_eq!(status, 200);
    let (status, _) = a.get(&format!("/v1/sessions/{sid_a}")).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn one_tenants_flood_does_not_evict_anothers_history_or_show_in_its_seqs() {
    let handle = server(RuntimeConfig {
        retained_events: 200,
        ..test_config()
    })
    .await;
    let quiet = Api::new(&handle).with_tenant("quiet");
    let loud = Api::new(&handle).with_tenant("loud");
    let tiny = json!({"kind": "session.closed"});
    let (status, _) = quiet.post("/v1/events", json!([tiny, tiny, tiny])).await;
    assert_eq!(status, 200);
    let batch: Vec<Value> = (0..500).map(|_| tiny.clone()).collect();
    for _ in 0..4 {
        let (status, _) = loud.post("/v1/events", json!(batch)).await;
        assert_eq!(status, 200);
    }
    let (_, page) = quiet.get("/v1/events?since=0").await;
    assert_eq!(page["events"].as_array().map(Vec::len), Some(3), "{page}");
    assert_eq!(page["next"], 3, "{page}");
    assert!(page.get("gap").is_none(), "{page}");
    let (_, page) = loud.get("/v1/events?since=0&limit=1").await;
    assert_eq!(page["gap"], json!({"from": 1, "to": 1803}), "{page}");
    // Quiet's next seq is its own count plus one, whatever loud logged.
    let (_, accepted) = quiet.post("/v1/events", json!([tiny])).await;
    assert_eq!(accepted["first_seq"], 4, "{accepted}");
    let mut ws = observe_as(&handle, "?since=0", "quiet").await;
    let seen = frames(&mut ws, 4).await;
    let seqs: Vec<u64> = seen.iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
}

async fn observe_as(handle: &spyglass::runtime::ServerHandle, query: &str, tenant: &str) -> Ws {
    let mut req = format!("{}{query}", handle.observe_url())
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("x-codespar-project", tenant.parse().unwrap());
    tokio_tungstenite::connect_async(req).await.unwrap().0
}

/// `x-codespar-project: *` on `/v1/observe`: every project's events on one stream, seq'd
/// by the runtime's stamping order so it can be resumed; only a key bound to no project
/// may ask (403 `forbidden` otherwise), and no other route takes `*`.
#[tokio::test]
async fn every_project_on_one_stream_takes_a_key_bound_to_none() {
    let (handle, in_a, in_b) = keyed_two_projects().await;
    let sid_a = in_a.session(json!({"asaas/x": {"n": 1}})).await;
    let sid_b = in_b.session(json!({})).await;
    let request = |key: &str, query: &str| {
        let mut req = format!("{}{query}", handle.observe_url())
            .into_client_request()
            .unwrap();
        let headers = req.headers_mut();
        headers.insert("authorization", format!("Bearer {key}").parse().unwrap());
        headers.insert("x-codespar-project", "*".parse().unwrap());
        req
    };
    let (mut ws, _) = tokio_tungstenite::connect_async(request("k_admin", "?since=0"))
        .await
        .unwrap();
    let got = frames(&mut ws, 2).await;
    let seen: Vec<(Value, Value, Value)> = got
        .iter()
        .map(|f| {
            (
                f["seq"].clone(),
                f["sessionId"].clone(),
                f["project"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (json!(1), json!(sid_a), json!("prj_a")),
            (json!(2), json!(sid_b), json!("prj_b"))
        ]
    );
    // Live, and on from the newest seq across projects (each project's own seq is 2).
    let (status, _) = in_a.execute(&sid_a, "asaas/x", json!({})).await;
    assert_eq!(status, 200);
    let live = frames(&mut ws, 1).await;
    assert_eq!(
        (live[0]["kind"].as_str(), live[0]["seq"].as_u64()),
        (Some("tool.called"), Some(3))
    );
    // A resume from seq 2 of this stream sends only what came after.
    let (mut again, _) = tokio_tungstenite::connect_async(request("k_admin", "?since=2"))
        .await
        .unwrap();
    let resumed = frames(&mut again, 1).await;
    assert_eq!(resumed[0]["seq"], 3);
    assert!(
        next_frame(&mut again, Duration::from_millis(200))
            .await
            .is_none()
    );

    // A key bound to a project may not watch every project.
    let http = reqwest::Client::new();
    let res = http
        .get(handle.observe_url().replacen("ws", "http", 1))
        .header("authorization", "Bearer k_a")
        .header("x-codespar-project", "*")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 403);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "forbidden", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("prj_a"),
        "{body}"
    );
    // `*` names no project anywhere else.
    let all = Api::new(&handle).with_key("k_admin").with_tenant("*");
    let (status, body) = all.get("/v1/sessions").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_header")),
        "{body}"
    );
    let (status, _) = all
        .post("/v1/sessions", json!({"servers": [], "user_id": "u"}))
        .await;
    assert_eq!(status, 400);
}

/// `?project=` on the observer stream names the project as the header does (a browser's
/// WebSocket cannot set headers): the stream is that project's, a bound key is held to its
/// projects either way, and a query and a header that disagree, or a name that cannot be
/// a project id, are refused with 400.
#[tokio::test]
async fn the_observer_takes_its_project_from_the_query_too() {
    let (handle, in_a, in_b) = keyed_two_projects().await;
    let sid_a = in_a.session(json!({})).await;
    let sid_b = in_b.session(json!({})).await;
    let connect = async |key: &str, query: &str| {
        let mut req = format!("{}{query}", handle.observe_url())
            .into_client_request()
            .unwrap();
        req.headers_mut()
            .insert("authorization", format!("Bearer {key}").parse().unwrap());
        tokio_tungstenite::connect_async(req)
            .await
            .map(|(ws, _)| ws)
    };
    let mut ws = connect("k_admin", "?since=0&project=prj_b").await.unwrap();
    let got = frames(&mut ws, 1).await;
    assert_eq!(got[0]["sessionId"], sid_b.as_str(), "{got:?}");
    assert!(
        next_frame(&mut ws, Duration::from_millis(200))
            .await
            .is_none()
    );
    let mut ws = connect("k_a", "?since=0&project=prj_a").await.unwrap();
    assert_eq!(frames(&mut ws, 1).await[0]["sessionId"], sid_a.as_str());

    let http = reqwest::Client::new();
    let get = async |key: &str, query: &str, header: Option<&str>| {
        let mut req = http
            .get(format!(
                "{}{query}",
                handle.observe_url().replacen("ws", "http", 1)
            ))
            .header("authorization", format!("Bearer {key}"));
        if let Some(project) = header {
            req = req.header("x-codespar-project", project);
        }
        let res = req.send().await.unwrap();
        (res.status().as_u16(), res.json::<Value>().await.unwrap())
    };
    // A bound key naming another project in the query is refused as with the header.
    let (status, body) = get("k_a", "?project=prj_b", None).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = get("k_a", "?project=*", None).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
    let (status, body) = get("k_admin", "?project=prj_a", Some("prj_b")).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_query")),
        "{body}"
    );
    let (status, body) = get("k_admin", "?project=%1B%5B2J", None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_query")),
        "{body}"
    );
    // Named twice, the query cannot say which project: refused, not streamed as the
    // default project's. Spaces, tabs and over-long names are not project ids.
    let long = "p".repeat(300);
    for query in [
        "?project=prj_a&project=prj_b".to_owned(),
        "?project=prj_b&project=prj_b".to_owned(),
        "?project=my%20project".to_owned(),
        "?project=a%09b".to_owned(),
        format!("?project={long}"),
    ] {
        let (status, body) = get("k_admin", &query, None).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("invalid_query")),
            "{query}: {body}"
        );
    }
    let (status, body) = get("k_admin", &format!("?project={}", "p".repeat(128)), None).await;
    assert_eq!(
        status, 426,
        "a 128-byte id is an id; only the upgrade is missing: {body}"
    );
    for header in ["my project", "a\tb", long.as_str()] {
        let (status, body) = Api::new(&handle)
            .with_key("k_admin")
            .with_tenant(header)
            .get("/v1/sessions")
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("invalid_header")),
            "{header:?}: {body}"
        );
    }
    let (status, body) = Api::new(&handle)
        .with_key("k_admin")
        .with_tenant(&"p".repeat(128))
        .get("/v1/sessions")
        .await;
    assert_eq!(status, 200, "{body}");
    // Other routes read the header only; their queries refuse a `project` they do not
    // know rather than act on the default project.
    let (status, body) = Api::new(&handle)
        .with_key("k_admin")
        .get("/v1/sessions?project=prj_b")
        .await;
    assert_eq!(status, 400, "{body}");
}

/// A runtime with a plain key `k_admin` and `k_a` bound to `prj_a`, and the plain key's
/// clients in `prj_a` and `prj_b`.
async fn keyed_two_projects() -> (ServerHandle, Api, Api) {
    let handle = server(RuntimeConfig {
        api_keys: vec!["k_admin".into()],
        key_projects: vec![("k_a".into(), vec!["prj_a".into()])],
        ..test_config()
    })
    .await;
    let in_a = Api::new(&handle).with_key("k_admin").with_tenant("prj_a");
    let in_b = Api::new(&handle).with_key("k_admin").with_tenant("prj_b");
    (handle, in_a, in_b)
}
