//! Handlers of `/v1/approvals`: the queue listing and the approve / deny decisions; the
//! queue itself is `runtime::approvals`.

use super::state::{AppState, Id, OptionalJsonBody, Q, Tenant};
use crate::ApiErrorWithStatus;
use crate::approvals::{StatusFilter, Verdict};
use crate::sessions::Page;
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use spyglass_protocol::envelope::codes;
use spyglass_protocol::rest::DecisionRequest;

/// `?status=pending|all&limit=N&cursor=C` (paged like `GET /v1/sessions`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct ApprovalQuery {
    status: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

pub(super) async fn list_approvals(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Q(query): Q<ApprovalQuery>,
) -> Result<Response, ApiErrorWithStatus> {
    let filter = match query.status.as_deref() {
        None | Some("pending") => StatusFilter::Pending,
        Some("all") => StatusFilter::All,
        Some(other) => {
            return Err(ApiErrorWithStatus::new(
                400,
                codes::INVALID_QUERY,
                format!("status `{other}` is not pending or all"),
            ));
        }
    };
    let page = Page {
        limit: query.limit,
        cursor: query.cursor,
    };
    Ok(Json(state.rt.list_approvals(&tenant, filter, &page)?).into_response())
}

pub(super) async fn approve(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
    OptionalJsonBody(body): OptionalJsonBody<DecisionRequest>,
) -> Result<Response, ApiErrorWithStatus> {
    let view = state
        .rt
        .decide_any(&tenant, &id, Verdict::Approve, body.by, body.note)
        .await?;
    state.rt.committed().await?;
    Ok(Json(view).into_response())
}

pub(super) async fn deny(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
    OptionalJsonBody(body): OptionalJsonBody<DecisionRequest>,
) -> Result<Response, ApiErrorWithStatus> {
    let view = state
        .rt
        .decide_any(&tenant, &id, Verdict::Deny, body.by, body.note)
        .await?;
    state.rt.committed().await?;
    Ok(Json(view).into_response())
}
