//! Handlers of `/v1/sessions` and `/v1/sessions/{id}` (create, list, detail, connections,
//! close); the session logic itself is `runtime::sessions`.

use super::state::{AppState, Id, JsonBody, Q, Tenant};
use crate::ApiErrorWithStatus;
use crate::sessions::Page;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use spyglass_protocol::rest::CreateSession;

pub(super) async fn create_session(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    JsonBody(req): JsonBody<CreateSession>,
) -> Result<Response, ApiErrorWithStatus> {
    let body = state.rt.create_session(&tenant, req)?;
    state.rt.committed().await?;
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `?limit=N&cursor=C`: a page of the tenant's sessions (see `Runtime::list_sessions_page`).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PageQuery {
    limit: Option<usize>,
    cursor: Option<String>,
}

pub(super) async fn list_sessions(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Q(query): Q<PageQuery>,
) -> Result<Response, ApiErrorWithStatus> {
    let page = Page {
        limit: query.limit,
        cursor: query.cursor,
    };
    Ok(Json(state.rt.list_sessions_page(&tenant, &page)?).into_response())
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
    state.rt.close_any(&tenant, &id).await?;
    state.rt.committed().await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
