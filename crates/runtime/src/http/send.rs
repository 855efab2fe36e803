//! The handler of `POST /v1/sessions/{id}/send`: one JSON answer, or the run's frames as
//! server-sent events when the client accepts `text/event-stream`.

use super::state::{AppState, Id, JsonBody, Tenant};
use crate::ApiErrorWithStatus;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use spyglass_protocol::rest::{SendFrame, SendRequest};
use std::convert::Infallible;
use tokio::sync::mpsc;

fn wants_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

pub(super) async fn send(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
    headers: HeaderMap,
    JsonBody(req): JsonBody<SendRequest>,
) -> Result<Response, ApiErrorWithStatus> {
    if !wants_sse(&headers) {
        let result = state.rt.send(&tenant, &id, &req.message).await?;
        state.rt.committed().await?;
        // A failed model call is the provider being unavailable, as a real runtime would
        // answer when its LLM is rate limited: 503 with the model's error as message.
        return Ok(match &result.error {
            Some(error) if result.too_large => {
                ApiErrorWithStatus::new(413, crate::agent::RESPONSE_TOO_LARGE, error.clone())
                    .into_response()
            }
            Some(error) => {
                ApiErrorWithStatus::new(503, "agent_failed", error.clone()).into_response()
            }
            None => Json(result.send_result()).into_response(),
        });
    }
    // Refuse a missing session before the stream starts, as a plain JSON error.
    state.rt.adopt_if_missing(&tenant, &id).await?;
    crate::read(&state.rt.inner.sessions).get_open(&tenant, &id)?;
    let (tx, rx) = mpsc::channel::<SendFrame>(64);
    let rt = state.rt.clone();
    tokio::spawn(async move {
        if let Err(err) = rt
            .run_agent(&tenant, &id, &req.message, Some(tx.clone()))
            .await
        {
            let _ = tx
                .send(SendFrame::Error {
                    error: err.error.code,
                    message: err.error.message,
                })
                .await;
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|frame| (Ok::<_, Infallible>(frame.to_sse()), rx))
    });
    let mut response = Body::from_stream(stream).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}
