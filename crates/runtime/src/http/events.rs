//! Handlers of the observer stream's routes: `GET /v1/observe` (the WebSocket upgrade),
//! `GET /v1/events` (polling) and `POST /v1/events` (ingest); the stream is `runtime::observe`.

use super::state::{ALL_PROJECTS, AppState, Q, RawBody, Tenant};
use crate::ApiErrorWithStatus;
use crate::observe::{Filter, MAX_INCOMING_WS_BYTES, reset_reason, stream};
use axum::extract::State;
use axum::extract::ws::{WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::value::RawValue;
use spyglass_protocol::envelope::codes;
use spyglass_protocol::events::{DecodeError, decode_event};
use spyglass_protocol::glob::check_pattern;
use spyglass_protocol::{ApiError, Event};

#[derive(Deserialize)]
pub(super) struct ObserveQuery {
    since: Option<u64>,
    epoch: Option<String>,
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

pub(super) async fn observe(
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
        all: tenant == ALL_PROJECTS,
        tenant,
        session: query.session,
        kinds,
    };
    let AppState { rt, stop } = state;
    // Observers only ever send close and pong frames; anything large is refused (the
    // connection fails) before it is buffered.
    ws.max_message_size(MAX_INCOMING_WS_BYTES)
        .max_frame_size(MAX_INCOMING_WS_BYTES)
        .on_upgrade(move |socket| stream(socket, rt, filter, query.since, query.epoch, stop))
}

#[derive(Deserialize)]
pub(super) struct EventsQuery {
    since: Option<u64>,
    epoch: Option<String>,
    limit: Option<usize>,
}

const MAX_EVENTS_PAGE: usize = 10_000;

/// `GET /v1/events?since=&epoch=&limit=`: `{epoch, events, next}` (+ `gap` when the log
/// lost some, + `reset` when `since`/`epoch` name a history this log does not continue:
/// then the page starts from the oldest retained event); poll again with `since=next`.
pub(super) async fn list_events(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Q(query): Q<EventsQuery>,
) -> Result<Response, ApiErrorWithStatus> {
    let limit = crate::sessions::page_limit(query.limit, 1000, MAX_EVENTS_PAGE)?;
    let log = &state.rt.inner.log;
    // Seqs are the tenant's own: "beyond the newest" is judged against its newest.
    let newest = log.next_seq(&tenant).saturating_sub(1);
    let reset = reset_reason(log.epoch(), newest, query.since, query.epoch.as_deref());
    let since = if reset.is_some() {
        0
    } else {
        query.since.unwrap_or(0)
    };
    let slice = log.since(&tenant, since, limit);
    let next = slice
        .events
        .last()
        .map(|e| e.frame.seq)
        .or(slice.gap.map(|(_, to)| to))
        .unwrap_or(since);
    // Written by hand so each event keeps its stored wire text, field order included.
    let mut body = format!(
        "{{\"epoch\":{},\"events\":[",
        serde_json::Value::from(log.epoch())
    );
    let mut first = true;
    for logged in &slice.events {
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
    if let Some(reason) = reset {
        let reset = serde_json::json!({"epoch": log.epoch(), "seq": 0, "reason": reason});
        body.push_str(&format!(",\"reset\":{reset}"));
    }
    body.push('}');
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

fn invalid_event(index: usize, message: &str) -> ApiErrorWithStatus {
    ApiErrorWithStatus {
        status: 400,
        error: ApiError::new(codes::INVALID_EVENT, format!("event {index}: {message}"))
            .with_index(index),
    }
}

/// A decode failure; a failure of one field (a `status` contradicting `pass`) names it.
fn undecodable(index: usize, err: &DecodeError) -> ApiErrorWithStatus {
    let mut out = invalid_event(index, &err.to_string());
    if let Some(field) = err.field() {
        out.error = out.error.with_field(field);
    }
    out
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
/// its `index` and nothing of the batch is applied. Then each is stamped and emitted,
/// except an `agent.eval.completed` the history already holds (counted as `duplicates`).
pub(super) async fn ingest_events(
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
        let event = decode_event(item).map_err(|err| undecodable(index, &err))?;
        if matches!(
            event.event,
            Event::StreamGap(_) | Event::StreamHello(_) | Event::StreamReset(_)
        ) {
            return Err(invalid_event(
                index,
                &format!("{} is written by the runtime only", event.event.kind()),
            ));
        }
        events.push(event);
    }
    let mut first = None;
    let mut last = None;
    let mut duplicates = 0usize;
    for event in events {
        if let Event::AgentEvalCompleted(result) = &event.event
            && state.rt.inner.evals.holds(&tenant, result)
        {
            // The same file imported again, or a batch retried after a lost answer.
            duplicates += 1;
            continue;
        }
        let logged = state
            .rt
            .emit_for(&tenant, event.session_id.map(String::from), event.event);
        first.get_or_insert(logged.frame.seq);
        last = Some(logged.frame.seq);
    }
    state.rt.committed().await?;
    Ok(axum::Json(serde_json::json!({
        "accepted": items.len() - duplicates,
        "duplicates": duplicates,
        "first_seq": first,
        "last_seq": last,
    }))
    .into_response())
}
