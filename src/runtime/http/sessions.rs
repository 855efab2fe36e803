//! Handlers of `/v1/sessions` and `/v1/sessions/{id}` (create, list, detail, connections,
//! close); the session logic itself is `runtime::sessions`.

use super::state::{AppState, Id, JsonBody, Tenant};
use crate::protocol::rest::CreateSession;
use crate::runtime::ApiErrorWithStatus;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

pub(super) async fn create_session(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    JsonBody(req): JsonBody<CreateSession>,
) -> Result<Response, ApiErrorWithStatus> {
    let body = state.rt.create_session(&tenant, req)?;
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

pub(super) async fn list_sessions(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
) -> Response {
    Json(state.rt.list_sessions(&tenant)).into_response()
}

pub(super) async fn session_detail(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
) -> Result<Response, ApiErrorWithStatus> {
    Ok(Json(state.rt.session_detail(&tenant, &id)?).into_response())
}

pub(super) async fn connections(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
) -> Result<Response, ApiErrorWithStatus> {
    Ok(Json(state.rt.connections(&tenant, &id)?).into_response())
}

pub(super) async fn close_session(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
) -> Result<Response, ApiErrorWithStatus> {
    state.rt.close_session(&tenant, &id)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
