//! The runtime as the tests drive it: an in-process server on a loopback port, JSON
//! requests that return status and body, and an observer-stream reader.

use futures_util::StreamExt;
use serde_json::{Value, json};
use spyglass::runtime::{Policy, RuntimeConfig, ServerHandle, start};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

pub fn test_config() -> RuntimeConfig {
    RuntimeConfig {
        test_mode: true,
        ..RuntimeConfig::default()
    }
}

pub async fn server(config: RuntimeConfig) -> ServerHandle {
    start(config, "127.0.0.1:0".parse().unwrap()).await.unwrap()
}

/// A loopback address free now, below the kernel's ephemeral ports (32768 on), for a
/// runtime a test stops and serves again on the same address: a port from the ephemeral
/// range can become an outgoing connection's local port between the two binds, and the
/// second bind then fails. Each call in a process gets a port of its own.
pub fn rebindable_addr() -> std::net::SocketAddr {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let seed = u64::from(std::process::id()) * 7919;
    for _ in 0..12_000 {
        let port = 20_000 + (seed + NEXT.fetch_add(1, Ordering::Relaxed)) % 12_000;
        let port = u16::try_from(port).expect("under 32000");
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return listener.local_addr().expect("a bound address");
        }
    }
    panic!("no free loopback port in 20000..32000")
}

/// A test-mode runtime on `rebindable_addr`.
pub async fn rebindable_server(config: RuntimeConfig) -> ServerHandle {
    start(config, rebindable_addr()).await.unwrap()
}

/// A test-mode runtime with the default settings otherwise.
pub async fn test_server() -> ServerHandle {
    server(test_config()).await
}

/// Test mode with `policy` (TOML rules) as the approval policy.
pub fn policy_config(policy: &str) -> RuntimeConfig {
    RuntimeConfig {
        policy: Policy::from_toml(policy).unwrap(),
        ..test_config()
    }
}

/// A test-mode runtime whose policy is `policy` (TOML rules).
pub async fn policy_server(policy: &str) -> ServerHandle {
    server(policy_config(policy)).await
}

/// One JSON POST with a plain client: the status and the body (`null` when not JSON).
pub async fn post(http: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let response = http.post(url).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

pub struct Api {
    pub base: String,
    pub client: reqwest::Client,
    pub key: Option<String>,
    pub tenant: Option<String>,
}

impl Api {
    pub fn new(handle: &ServerHandle) -> Api {
        Api {
            base: handle.url(),
            client: reqwest::Client::new(),
            key: None,
            tenant: None,
        }
    }

    /// The API of a runtime known by its URL only (a `serve` process).
    pub fn at(url: &str) -> Api {
        Api {
            base: url.trim_end_matches('/').to_owned(),
            client: reqwest::Client::new(),
            key: None,
            tenant: None,
        }
    }

    pub fn with_key(mut self, key: &str) -> Api {
        self.key = Some(key.to_owned());
        self
    }

    pub fn with_tenant(mut self, tenant: &str) -> Api {
        self.tenant = Some(tenant.to_owned());
        self
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .request(method, format!("{}{}", self.base, path))
            .header("content-type", "application/json");
        if let Some(key) = &self.key {
            req = req.bearer_auth(key);
        }
        if let Some(tenant) = &self.tenant {
            req = req.header("x-codespar-project", tenant);
        }
        req
    }

    async fn finish(req: reqwest::RequestBuilder) -> (u16, Value) {
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"))
        };
        (status, body)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        Self::finish(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        Self::finish(self.request(reqwest::Method::DELETE, path)).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        Self::finish(
            self.request(reqwest::Method::POST, path)
                .body(body.to_string()),
        )
        .await
    }

    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
        Self::finish(self.request(reqwest::Method::POST, path).body(body)).await
    }

    /// Creates a session listing `asaas` and every server its mocks name, and returns
    /// its id, asserting 201.
    pub async fn session(&self, mocks: Value) -> String {
        let mut servers = vec!["asaas".to_owned()];
        for tool in mocks.as_object().into_iter().flat_map(|m| m.keys()) {
            if let Some((server, _)) = tool.split_once('/')
                && !servers.iter().any(|s| s == server)
            {
                servers.push(server.to_owned());
            }
        }
        let (status, body) = self
            .post(
                "/v1/sessions",
                json!({"servers": servers, "user_id": "user_test", "mocks": mocks}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    pub async fn execute(&self, session: &str, tool: &str, input: Value) -> (u16, Value) {
        self.post(
            &format!("/v1/sessions/{session}/execute"),
            json!({"tool": tool, "input": input}),
        )
        .await
    }

    /// `POST /v1/sessions/:id/send` with `message` (JSON, not streamed).
    pub async fn send(&self, session: &str, message: &str) -> (u16, Value) {
        self.post(
            &format!("/v1/sessions/{session}/send"),
            json!({"message": message}),
        )
        .await
    }
}

/// The sorted key set of a JSON object, to assert an exact field set.
pub fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub async fn observe(handle: &ServerHandle, query: &str) -> Ws {
    let url = format!("{}{}", handle.observe_url(), query);
    let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    ws
}

/// The next text frame as JSON, or None if nothing arrives within `wait` (pings skipped).
pub async fn next_frame(ws: &mut Ws, wait: Duration) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let msg = tokio::time::timeout_at(deadline, ws.next())
            .await
            .ok()??
            .ok()?;
        match msg {
            Message::Text(text) => return Some(serde_json::from_str(&text).unwrap()),
            Message::Close(_) => return None,
            _ => {}
        }
    }
}

/// Reads frames until `n` arrived (panics after 5 s without one).
pub async fn frames(ws: &mut Ws, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    while out.len() < n {
        match next_frame(ws, Duration::from_secs(5)).await {
            Some(frame) => out.push(frame),
            None => panic!("stream ended after {} of {n} frames: {out:?}", out.len()),
        }
    }
    out
}

/// The `data:` payloads of an SSE `send`, in order, read within 10 s (a hang fails).
pub async fn sse_frames(api: &Api, sid: &str, message: &str) -> Vec<Value> {
    let response = api
        .client
        .post(format!("{}/v1/sessions/{sid}/send", api.base))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(json!({"message": message}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = tokio::time::timeout(Duration::from_secs(10), response.text())
        .await
        .expect("the stream ended")
        .unwrap();
    let frames: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    // Every frame is also named on its `event:` line (the TypeScript reader's).
    let named = text.lines().filter(|l| l.starts_with("event: ")).count();
    assert_eq!(named, frames.len(), "{text}");
    frames
}

/// The case records of an eval run detail by `case` (the last attempt wins).
pub fn by_case(detail: &Value) -> std::collections::BTreeMap<String, Value> {
    detail["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["case"].as_str().unwrap().to_owned(), c.clone()))
        .collect()
}
