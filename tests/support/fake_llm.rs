//! A fake model provider on loopback (real HTTP, real chunked SSE): it answers each POST
//! with the next scripted answer and keeps every request it got, for OpenAI-compatible and
//! Anthropic tests alike (the test picks the answer shapes and asserts the paths).

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub enum Answer {
    Json {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: Value,
    },
    /// Any text body (a broken answer).
    Text { status: u16, body: String },
    /// SSE: each `(event name, data)` as its own chunk, a few ms apart.
    Sse(Vec<(Option<String>, String)>),
    /// SSE that stops after these frames: with `reset` the connection is cut (the body
    /// fails, no final chunk), else the body ends cleanly. Made by [`broken`].
    SseBroken {
        frames: Vec<(Option<String>, String)>,
        reset: bool,
    },
    /// Answers only after this long (a provider that hangs).
    Hang(Duration),
}

/// One request as the fake got it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub struct FakeLlm {
    /// Base URL, `/v1` included, as `--model-base-url` takes it.
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<VecDeque<Answer>>>,
}

impl FakeLlm {
    pub async fn start(script: Vec<Answer>) -> FakeLlm {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(script)));
        let (s, q) = (seen.clone(), queue.clone());
        let app = Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let (seen, queue) = (s.clone(), q.clone());
                async move {
                    seen.lock().unwrap().push(Seen {
                        method: method.to_string(),
                        path: uri.path().to_owned(),
                        headers,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    });
                    let next = queue.lock().unwrap().pop_front();
                    answer(next).await
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeLlm {
            url: format!("http://{addr}/v1"),
            seen,
            script: queue,
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn push(&self, answer: Answer) {
        self.script.lock().unwrap().push_back(answer);
    }
}

async fn answer(next: Option<Answer>) -> Response {
    match next {
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "fake provider: no more scripted answers",
        )
            .into_response(),
        Some(Answer::Json {
            status,
            headers,
            body,
        }) => {
            let mut response = (
                StatusCode::from_u16(status).unwrap(),
                [("content-type", "application/json")],
                body.to_string(),
            )
                .into_response();
            for (name, value) in headers {
                response.headers_mut().insert(name, value.parse().unwrap());
            }
            response
        }
        Some(Answer::Text { status, body }) => {
            (StatusCode::from_u16(status).unwrap(), body).into_response()
        }
        Some(Answer::Hang(wait)) => {
            tokio::time::sleep(wait).await;
            (StatusCode::OK, "{}").into_response()
        }
        Some(Answer::Sse(frames)) => sse(frames, false),
        Some(Answer::SseBroken { frames, reset }) => sse(frames, reset),
    }
}

/// The frames as SSE chunks a few ms apart; with `reset`, the body then fails, which
/// makes the server drop the connection mid-body.
fn sse(frames: Vec<(Option<String>, String)>, reset: bool) -> Response {
    let stream =
        futures_util::stream::unfold((frames.into_iter(), reset), |(mut it, reset)| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let Some((event, data)) = it.next() else {
                return reset.then(|| {
                    let cut = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "cut");
                    (Err(cut), (it, false))
                });
            };
            let mut chunk = String::new();
            if let Some(event) = event {
                chunk.push_str(&format!("event: {event}\n"));
            }
            chunk.push_str(&format!("data: {data}\n\n"));
            Some((Ok::<_, std::io::Error>(chunk), (it, reset)))
        });
    (
        [("content-type", "text/event-stream")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// How a streamed answer breaks off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Break {
    /// The connection is cut mid-body.
    Reset,
    /// The body ends cleanly, short of `[DONE]` / `message_stop`.
    Truncate,
    /// The provider sends its own error event and stops: its 5xx, once a 200 went out.
    ServerError,
}

/// The streamed `answer` (`openai_sse` / `anthropic_sse`) cut right after its `deltas`-th
/// text delta (0: before the first), broken off `how`.
pub fn broken(answer: Answer, deltas: usize, how: Break) -> Answer {
    let Answer::Sse(frames) = answer else {
        panic!("broken() takes a streamed answer");
    };
    let anthropic = frames.iter().any(|(event, _)| event.is_some());
    let is_delta = |data: &str| {
        let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
        v["choices"][0]["delta"]["content"].is_string() || v["delta"]["type"] == "text_delta"
    };
    let mut kept = Vec::new();
    let mut seen = 0;
    for (event, data) in frames {
        let delta = is_delta(&data);
        if seen == deltas && (deltas > 0 || delta) {
            break;
        }
        seen += usize::from(delta);
        kept.push((event, data));
    }
    assert_eq!(
        seen, deltas,
        "the answer has fewer text deltas than {deltas}"
    );
    if how == Break::ServerError {
        kept.push(if anthropic {
            (
                Some("error".to_owned()),
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
                    .to_string(),
            )
        } else {
            (
                None,
                json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}})
                    .to_string(),
            )
        });
    }
    Answer::SseBroken {
        frames: kept,
        reset: how == Break::Reset,
    }
}

pub fn ok(body: Value) -> Answer {
    Answer::Json {
        status: 200,
        headers: Vec::new(),
        body,
    }
}

pub fn error(status: u16, message: &str) -> Answer {
    Answer::Json {
        status,
        headers: Vec::new(),
        body: json!({"error": {"message": message, "type": "test_error"}}),
    }
}

pub fn rate_limited(retry_after: &str) -> Answer {
    Answer::Json {
        status: 429,
        headers: vec![("retry-after", retry_after.to_owned())],
        body: json!({"error": {"message": "Rate limit reached", "type": "requests"}}),
    }
}

/// A Chat Completions answer: text and `(id, wire name, arguments)` tool calls.
pub fn openai(text: Option<&str>, calls: &[(&str, &str, Value)], tokens: (u64, u64)) -> Answer {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !tool_calls.is_empty() {
        message["tool_calls"] = json!(tool_calls);
    }
    ok(json!({
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": tokens.0, "completion_tokens": tokens.1,
                  "total_tokens": tokens.0 + tokens.1},
    }))
}

/// A streamed Chat Completions answer: the text in `chunks`, then the tool calls (their
/// arguments split in two chunks), usage, `[DONE]`.
pub fn openai_sse(chunks: &[&str], calls: &[(&str, &str, Value)], tokens: (u64, u64)) -> Answer {
    let mut frames = Vec::new();
    for chunk in chunks {
        frames.push(json!({"choices": [{"index": 0, "delta": {"content": chunk}}]}));
    }
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let text = args.to_string();
        let (a, b) = text.split_at(text.len() / 2);
        frames.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": a}}]}}]}));
        frames.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": i, "function": {"arguments": b}}]}}]}));
    }
    frames.push(json!({"choices": [{"index": 0, "delta": {},
        "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" }}]}));
    frames.push(json!({"choices": [], "usage": {"prompt_tokens": tokens.0,
        "completion_tokens": tokens.1, "total_tokens": tokens.0 + tokens.1}}));
    let mut frames: Vec<(Option<String>, String)> =
        frames.into_iter().map(|f| (None, f.to_string())).collect();
    frames.push((None, "[DONE]".to_owned()));
    Answer::Sse(frames)
}

/// A Messages API answer: text and `(id, wire name, input)` tool uses.
pub fn anthropic(text: Option<&str>, calls: &[(&str, &str, Value)], tokens: (u64, u64)) -> Answer {
    let mut content = Vec::new();
    if let Some(text) = text {
        content.push(json!({"type": "text", "text": text}));
    }
    for (id, name, input) in calls {
        content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    ok(json!({
        "id": "msg_1", "type": "message", "role": "assistant", "content": content,
        "stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" },
        "usage": {"input_tokens": tokens.0, "output_tokens": tokens.1},
    }))
}

/// A streamed Messages API answer, event by event as Anthropic sends it.
pub fn anthropic_sse(chunks: &[&str], calls: &[(&str, &str, Value)], tokens: (u64, u64)) -> Answer {
    let mut events = vec![json!({"type": "message_start", "message": {"id": "msg_1",
        "usage": {"input_tokens": tokens.0, "output_tokens": 1}}})];
    let mut index = 0;
    if !chunks.is_empty() {
        events.push(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}));
        for chunk in chunks {
            events.push(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": chunk}}));
        }
        events.push(json!({"type": "content_block_stop", "index": 0}));
        index = 1;
    }
    for (id, name, input) in calls {
        let text = input.to_string();
        let (a, b) = text.split_at(text.len() / 2);
        events.push(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
        for part in [a, b] {
            events.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": part}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    events.push(json!({"type": "message_delta",
        "delta": {"stop_reason": if calls.is_empty() { "end_turn" } else { "tool_use" }},
        "usage": {"output_tokens": tokens.1}}));
    events.push(json!({"type": "message_stop"}));
    Answer::Sse(
        events
            .into_iter()
            .map(|e| (e["type"].as_str().map(str::to_owned), e.to_string()))
            .collect(),
    )
}
