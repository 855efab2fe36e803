//! The observer stream and its REST twins: `GET /v1/observe` (WebSocket: `since=` replay
//! then live, gaps, pings, filters), `GET /v1/events` (polling) and `POST /v1/events`
//! (ingest from other processes: all events validated before any is applied).
//!
//! A `stream.gap` frame is never stored in the log; its `seq` is the gap's own `to`, the
//! last seq it stands for, so a client that resumes from "the last seq seen" goes on past it.

use super::http::{AppState, Q, RawBody, Tenant};
use super::log::Logged;
use super::{ApiErrorWithStatus, Runtime};
use crate::glob::{check_pattern, glob_match};
use crate::protocol::envelope::codes;
use crate::protocol::events::{StreamGap, decode_event};
use crate::protocol::{ApiError, Event, Frame, encode, now_rfc3339};
use axum::extract::State;
use axum::extract::ws::{
    Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection,
};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::sync::Arc;
use tokio::sync::{broadcast, watch};

/// Which events one subscriber sees: its tenant's, optionally one session and some kinds.
#[derive(Debug, Clone)]
struct Filter {
    tenant: String,
    session: Option<String>,
    kinds: Vec<String>,
}

impl Filter {
    fn shows(&self, logged: &Logged) -> bool {
        logged.tenant == self.tenant
            && self
                .session
                .as_ref()
                .is_none_or(|s| logged.frame.session_id.as_ref() == Some(s))
            && (self.kinds.is_empty()
                || self
                    .kinds
                    .iter()
                    .any(|k| glob_match(k, logged.frame.event.kind())))
    }
}

#[derive(Deserialize)]
pub struct ObserveQuery {
    since: Option<u64>,
    session: Option<String>,
    kinds: Option<String>,
}

fn kinds_list(kinds: Option<&str>) -> Vec<String> {
    kinds
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect()
}

pub async fn observe(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Q(query): Q<ObserveQuery>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let kinds = kinds_list(query.kinds.as_deref());
    // Checked before the upgrade so a plain GET learns why, too.
    if let Some(err) = kinds.iter().find_map(|k| check_pattern(k).err()) {
        return ApiErrorWithStatus::new(400, codes::INVALID_QUERY, format!("kinds: {err}"))
            .into_response();
    }
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => {
            return ApiErrorWithStatus::new(
                426,
                "websocket_required",
                format!("GET /v1/observe is a WebSocket: {rejection}"),
            )
            .into_response();
        }
    };
    let filter = Filter {
        tenant,
        session: query.session,
        kinds,
    };
    let AppState { rt, stop } = state;
    // Observers only ever send close and pong frames; anything large is refused (the
    // connection fails) before it is buffered.
    ws.max_message_size(MAX_INCOMING_WS_BYTES)
        .max_frame_size(MAX_INCOMING_WS_BYTES)
        .on_upgrade(move |socket| stream(socket, rt, filter, query.since, stop))
}

/// The largest WebSocket message the runtime reads from an observer.
pub const MAX_INCOMING_WS_BYTES: usize = 64 * 1024;

/// Resolves when the server is told to stop; a dropped handle never stops it.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn gap_text(from: u64, to: u64) -> String {
    encode(&Frame {
        seq: to,
        ts: now_rfc3339(),
        session_id: None,
        event: Event::StreamGap(StreamGap { from, to }),
    })
}

struct Subscriber {
    socket: WebSocket,
    rt: Runtime,
    filter: Filter,
    /// Every seq up to this one has been sent or judged not for this subscriber.
    last: u64,
}

impl Subscriber {
    async fn send_text(&mut self, text: &str) -> Result<(), ()> {
        self.send(text.to_owned()).await
    }

    async fn send(&mut self, text: String) -> Result<(), ()> {
        self.socket
            .send(Message::Text(text.into()))
            .await
            .map_err(|_| ())
    }

    /// Sends everything the log holds after `last`, announcing what it no longer holds.
    async fn catch_up(&mut self) -> Result<(), ()> {
        loop {
            let slice = self.rt.inner.log.since(self.last, 512);
            if let Some((from, to)) = slice.gap {
                self.send_text(&gap_text(from, to)).await?;
                self.last = to;
            }
            if slice.events.is_empty() {
                return Ok(());
            }
            for logged in slice.events {
                self.deliver(&logged).await?;
            }
        }
    }

    async fn deliver(&mut self, logged: &Arc<Logged>) -> Result<(), ()> {
        if logged.frame.seq <= self.last {
            return Ok(());
        }
        if self.filter.shows(logged) {
            self.send(logged.text().to_owned()).await?;
        }
        self.last = logged.frame.seq;
        Ok(())
    }
}

async fn stream(
    socket: WebSocket,
    rt: Runtime,
    filter: Filter,
    since: Option<u64>,
    mut stop: watch::Receiver<bool>,
) {
    // Read where "now" is before subscribing and catch up from the log after: nothing
    // appended in between is lost, and `deliver` skips what the live queue repeats.
    let now = rt.inner.log.next_seq().saturating_sub(1);
    let mut live = rt.inner.log.subscribe();
    let ping_every = rt.inner.config.ping_interval;
    let mut sub = Subscriber {
        socket,
        rt,
        filter,
        last: since.unwrap_or(now),
    };
    if sub.catch_up().await.is_err() {
        return;
    }
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => {
                let _ = sub.socket.send(Message::Close(None)).await;
                return;
            }
            received = live.recv() => {
                let result = match received {
                    Ok(logged) if logged.frame.seq > sub.last + 1 => sub.catch_up().await,
                    Ok(logged) => sub.deliver(&logged).await,
                    // Fell behind the live queue: the log still holds what was missed
                    // (or says it does not, with a gap); the queue never grows for us.
                    Err(broadcast::error::RecvError::Lagged(_)) => sub.catch_up().await,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if result.is_err() {
                    return;
                }
            }
            _ = ping.tick() => {
                if sub.socket.send(Message::Ping(Vec::new().into())).await.is_err() {
                    return;
                }
            }
            incoming = sub.socket.recv() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    }
}

#[derive(Deserialize)]
pub struct EventsQuery {
    since: Option<u64>,
    limit: Option<usize>,
}

const MAX_EVENTS_PAGE: usize = 10_000;

/// `GET /v1/events?since=&limit=`: `{events, next}` (+ `gap` when the log lost some);
/// poll again with `since=next`.
pub async fn list_events(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Q(query): Q<EventsQuery>,
) -> Response {
    let since = query.since.unwrap_or(0);
    let limit = query.limit.unwrap_or(1000).clamp(1, MAX_EVENTS_PAGE);
    let slice = state.rt.inner.log.since(since, limit);
    let next = slice
        .events
        .last()
        .map(|e| e.frame.seq)
        .or(slice.gap.map(|(_, to)| to))
        .unwrap_or(since);
    // Written by hand so each event keeps its stored wire text, field order included.
    let mut body = String::from("{\"events\":[");
    let mut first = true;
    for logged in slice.events.iter().filter(|e| e.tenant == tenant) {
        if !first {
            body.push(',');
        }
        first = false;
        body.push_str(logged.text());
    }
    body.push_str(&format!("],\"next\":{next}"));
    if let Some((from, to)) = slice.gap {
        body.push_str(&format!(",\"gap\":{{\"from\":{from},\"to\":{to}}}"));
    }
    body.push('}');
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn invalid_event(index: usize, message: String) -> ApiErrorWithStatus {
    ApiErrorWithStatus {
        status: 400,
        error: ApiError::new(codes::INVALID_EVENT, format!("event {index}: {message}"))
            .with_index(index),
    }
}

/// Splits a batch into event texts: a JSON array, or JSON lines (blank lines skipped).
fn batch_items(text: &str) -> Result<Vec<String>, ApiErrorWithStatus> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        let items: Vec<Box<RawValue>> = serde_json::from_str(trimmed).map_err(|err| {
            ApiErrorWithStatus::invalid_body(format!("body is not a JSON array of events: {err}"))
        })?;
        return Ok(items.into_iter().map(|raw| raw.get().to_owned()).collect());
    }
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect())
}

/// `POST /v1/events`: validates every event first; the first bad one answers 400 with
/// its `index` and nothing of the batch is applied. Then each is stamped and emitted.
pub async fn ingest_events(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    RawBody(bytes): RawBody,
) -> Result<Response, ApiErrorWithStatus> {
    let text = std::str::from_utf8(&bytes)
        .map_err(|err| ApiErrorWithStatus::invalid_body(format!("body is not UTF-8: {err}")))?;
    if text.trim().is_empty() {
        return Err(ApiErrorWithStatus::invalid_body(
            "body is empty; send a JSON array of events or JSON lines",
        ));
    }
    let items = batch_items(text)?;
    let mut events = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let event = decode_event(item).map_err(|err| invalid_event(index, err.to_string()))?;
        if matches!(event.event, Event::StreamGap(_)) {
            return Err(invalid_event(
                index,
                "stream.gap is written by the runtime only".to_owned(),
            ));
        }
        events.push(event);
    }
    let mut first = None;
    let mut last = None;
    for event in events {
        let logged = state.rt.emit_for(&tenant, event.session_id, event.event);
        first.get_or_insert(logged.frame.seq);
        last = Some(logged.frame.seq);
    }
    Ok(axum::Json(serde_json::json!({
        "accepted": items.len(),
        "first_seq": first,
        "last_seq": last,
    }))
    .into_response())
}
