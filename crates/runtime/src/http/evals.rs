//! Handlers of `/v1/evals`: start a run, read one, the pass-rate summary and a suite by
//! name; the runner and its history are `runtime::evals`.

use super::state::{AppState, Id, JsonBody, Q, Tenant};
use crate::ApiErrorWithStatus;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use spyglass_protocol::envelope::codes;
use spyglass_protocol::rest::{EvalRunCreated, EvalRunRequest, EvalSuiteDocument};

/// `POST /v1/evals/runs` → 202 `{run_id}`.
pub(super) async fn create_run(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    JsonBody(request): JsonBody<EvalRunRequest>,
) -> Result<Response, ApiErrorWithStatus> {
    let run_id = state.rt.run_evals(&tenant, request)?;
    state.rt.committed().await?;
    Ok((StatusCode::ACCEPTED, Json(EvalRunCreated { run_id })).into_response())
}

/// `GET /v1/evals/runs/:id`.
pub(super) async fn run_detail(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
) -> Result<Response, ApiErrorWithStatus> {
    let detail = match state.rt.eval_run(&tenant, &id) {
        Ok(detail) => detail,
        // Another replica's run, as its document was last written (start and end).
        Err(err) if err.status == 404 => state
            .rt
            .inner
            .shared
            .eval_run(&tenant, &id)
            .await?
            .ok_or(err)?,
        Err(err) => return Err(err),
    };
    Ok(Json(detail).into_response())
}

/// `GET /v1/evals/suites/:name`: a suite as its latest run request gave it.
pub(super) async fn suite_document(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(name): Id,
) -> Result<Response, ApiErrorWithStatus> {
    match state.rt.inner.evals.document(&tenant, &name) {
        Some(document) => Ok(Json(EvalSuiteDocument {
            suite: name,
            document,
        })
        .into_response()),
        None => Err(ApiErrorWithStatus::not_found(format!(
            "no suite named {name:?} has run on this runtime; run it once with POST /v1/evals/runs or `spyglass eval`"
        ))),
    }
}

#[derive(Deserialize)]
pub(super) struct SummaryQuery {
    window: Option<usize>,
}

/// `GET /v1/evals/summary?window=N`.
pub(super) async fn summary(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Q(query): Q<SummaryQuery>,
) -> Result<Response, ApiErrorWithStatus> {
    if query.window == Some(0) {
        return Err(ApiErrorWithStatus::new(
            400,
            codes::INVALID_QUERY,
            "window must be at least 1",
        ));
    }
    Ok(Json(state.rt.eval_summary(&tenant, query.window)).into_response())
}
