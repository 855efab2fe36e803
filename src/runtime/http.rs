//! The HTTP face of the runtime (axum): routes, auth and tenancy, and extractors that turn
//! every malformed request (bad JSON, wrong types, oversize, bad path or query) into the
//! JSON error shape `{code, message}` with a 4xx status, never a bare text rejection.

use super::approvals::{StatusFilter, Verdict};
use super::{ApiErrorWithStatus, DEFAULT_TENANT, Runtime, evals, observe};
use crate::protocol::envelope::codes;
use crate::protocol::rest::{
    CreateSession, DecisionRequest, ExecuteRequest, SendFrame, SendRequest,
};
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::convert::Infallible;
use tokio::sync::{mpsc, watch};

/// What every handler gets: the runtime, and the stop signal of the server it runs in.
#[derive(Clone)]
pub struct AppState {
    pub rt: Runtime,
    pub stop: watch::Receiver<bool>,
}

impl IntoResponse for ApiErrorWithStatus {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(self.error)).into_response()
    }
}

/// The tenant a request acts for: `x-codespar-project`, else the default tenant.
pub struct Tenant(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let tenant = parts
            .headers
            .get("x-codespar-project")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .unwrap_or(DEFAULT_TENANT);
        Ok(Tenant(tenant.to_owned()))
    }
}

/// The raw body, with an oversize body answered 413 `payload_too_large`.
pub struct RawBody(pub Bytes);

impl FromRequest<AppState> for RawBody {
    type Rejection = ApiErrorWithStatus;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let limit = state.rt.inner.config.max_body_bytes;
        Bytes::from_request(req, state)
            .await
            .map(RawBody)
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiErrorWithStatus::new(
                        413,
                        codes::PAYLOAD_TOO_LARGE,
                        format!("request body is over the {limit}-byte limit"),
                    )
                } else {
                    ApiErrorWithStatus::invalid_body(format!(
                        "could not read the request body: {rejection}"
                    ))
                }
            })
    }
}

/// A JSON body of type `T`; empty, malformed or mistyped bodies are 400 `invalid_body`.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiErrorWithStatus;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiErrorWithStatus::invalid_body(
                "request body is empty; expected a JSON object",
            ));
        }
        serde_json::from_slice(&bytes).map(JsonBody).map_err(|err| {
            ApiErrorWithStatus::invalid_body(format!("request body is not valid: {err}"))
        })
    }
}

/// Like `JsonBody`, but an empty body means `T::default()` (decisions, GET/DELETE).
pub struct OptionalJsonBody<T>(pub T);

impl<T: DeserializeOwned + Default> FromRequest<AppState> for OptionalJsonBody<T> {
    type Rejection = ApiErrorWithStatus;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(T::default()));
        }
        serde_json::from_slice(&bytes)
            .map(OptionalJsonBody)
            .map_err(|err| {
                ApiErrorWithStatus::invalid_body(format!("request body is not valid: {err}"))
            })
    }
}

/// One path parameter, with a bad one answered as JSON.
pub struct Id(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Id {
    type Rejection = ApiErrorWithStatus;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(id)| Id(id))
            .map_err(|err| ApiErrorWithStatus::new(400, "invalid_path", err.body_text()))
    }
}

/// A query string of type `T`, with a bad one answered 400 `invalid_query`.
pub struct Q<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Q<T> {
    type Rejection = ApiErrorWithStatus;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(q)| Q(q))
            .map_err(|err| ApiErrorWithStatus::new(400, codes::INVALID_QUERY, err.body_text()))
    }
}

/// Byte-wise comparison whose time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn auth(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let keys = &state.rt.inner.config.api_keys;
    if keys.is_empty() {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or_default();
    // Compare against every key so the time taken does not say which one was close.
    let ok = keys.iter().fold(false, |ok, key| {
        constant_time_eq(presented.as_bytes(), key.as_bytes()) | ok
    });
    if ok {
        next.run(req).await
    } else {
        ApiErrorWithStatus::new(
            401,
            codes::UNAUTHORIZED,
            "missing or unknown API key; send Authorization: Bearer <key>",
        )
        .into_response()
    }
}

/// Every /v1 route with its methods. The router is built from this list alone, each route
/// behind auth, and the auth test walks it: a route added here without a handler, or a
/// handler reachable some other way, fails that test.
pub const V1_ROUTES: &[(&str, &[&str])] = &[
    ("/v1/sessions", &["GET", "POST"]),
    ("/v1/sessions/{id}", &["GET", "DELETE"]),
    ("/v1/sessions/{id}/connections", &["GET"]),
    ("/v1/sessions/{id}/execute", &["POST"]),
    ("/v1/sessions/{id}/send", &["POST"]),
    ("/v1/approvals", &["GET"]),
    ("/v1/approvals/{id}/approve", &["POST"]),
    ("/v1/approvals/{id}/deny", &["POST"]),
    ("/v1/evals/runs", &["POST"]),
    ("/v1/evals/runs/{id}", &["GET"]),
    ("/v1/evals/summary", &["GET"]),
    ("/v1/evals/suites/{name}", &["GET"]),
    ("/v1/observe", &["GET"]),
    ("/v1/events", &["GET", "POST"]),
];

/// The handler of one listed route and method.
fn handler(path: &str, method: &str) -> Option<MethodRouter<AppState>> {
    Some(match (path, method) {
        ("/v1/sessions", "GET") => get(list_sessions),
        ("/v1/sessions", "POST") => post(create_session),
        ("/v1/sessions/{id}", "GET") => get(session_detail),
        ("/v1/sessions/{id}", "DELETE") => delete(close_session),
        ("/v1/sessions/{id}/connections", "GET") => get(connections),
        ("/v1/sessions/{id}/execute", "POST") => post(execute),
        ("/v1/sessions/{id}/send", "POST") => post(send),
        ("/v1/approvals", "GET") => get(list_approvals),
        ("/v1/approvals/{id}/approve", "POST") => post(approve),
        ("/v1/approvals/{id}/deny", "POST") => post(deny),
        ("/v1/evals/runs", "POST") => post(evals::create_run),
        ("/v1/evals/runs/{id}", "GET") => get(evals::run_detail),
        ("/v1/evals/summary", "GET") => get(evals::summary),
        ("/v1/evals/suites/{name}", "GET") => get(evals::suite_document),
        ("/v1/observe", "GET") => get(observe::observe),
        ("/v1/events", "GET") => get(observe::list_events),
        ("/v1/events", "POST") => post(observe::ingest_events),
        _ => return None,
    })
}

/// Every route, behind auth and the body limit.
pub fn router(rt: Runtime, stop: watch::Receiver<bool>) -> Router {
    let limit = rt.inner.config.max_body_bytes;
    let state = AppState { rt, stop };
    let mut v1 = Router::new();
    for (path, methods) in V1_ROUTES {
        let mut route: MethodRouter<AppState> = MethodRouter::new();
        for method in *methods {
            match handler(path, method) {
                Some(h) => route = route.merge(h),
                // Left unrouted (a JSON 404/405), which the route-list test catches.
                None => tracing::error!(path, method, "listed route has no handler"),
            }
        }
        v1 = v1.route(path, route);
    }
    // Without keys every request is let in, and the layer would only cost each one a
    // clone of the route and a boxed future (a tenth of a mocked execute's CPU).
    if !state.rt.inner.config.api_keys.is_empty() {
        v1 = v1.route_layer(middleware::from_fn_with_state(state.clone(), auth));
    }
    Router::new()
        .route("/health", get(health))
        .merge(v1)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok", "protocol": crate::protocol::PROTOCOL_VERSION}))
}

async fn not_found(method: Method, uri: Uri) -> ApiErrorWithStatus {
    ApiErrorWithStatus::not_found(format!("no route {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiErrorWithStatus {
    ApiErrorWithStatus::new(
        405,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

async fn create_session(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    JsonBody(req): JsonBody<CreateSession>,
) -> Result<Response, ApiErrorWithStatus> {
    let body = state.rt.create_session(&tenant, req)?;
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

async fn list_sessions(State(state): State<AppState>, Tenant(tenant): Tenant) -> Response {
    Json(state.rt.list_sessions(&tenant)).into_response()
}

async fn session_detail(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
) -> Result<Response, ApiErrorWithStatus> {
    Ok(Json(state.rt.session_detail(&tenant, &id)?).into_response())
}

async fn connections(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
) -> Result<Response, ApiErrorWithStatus> {
    Ok(Json(state.rt.connections(&tenant, &id)?).into_response())
}

async fn close_session(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
) -> Result<Response, ApiErrorWithStatus> {
    state.rt.close_session(&tenant, &id)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn execute(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
    JsonBody(req): JsonBody<ExecuteRequest>,
) -> Result<Response, ApiErrorWithStatus> {
    if !req.input.is_object() {
        return Err(ApiErrorWithStatus {
            status: 400,
            error: crate::protocol::ApiError::new(
                codes::INVALID_BODY,
                format!(
                    "input must be an object, found {}",
                    crate::protocol::json::json_type(&req.input.to_value())
                ),
            )
            .with_field("/input"),
        });
    }
    let reply = state.rt.execute(&tenant, &id, &req.tool, req.input).await?;
    let status = StatusCode::from_u16(reply.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Ok(match reply {
        super::ExecuteReply::Ok(result) => tool_result_response(status, &result),
        super::ExecuteReply::Envelope(envelope) => (status, Json(envelope)).into_response(),
    })
}

/// An execute's answer, written into a buffer sized for it at once: axum's `Json` starts
/// at 128 bytes and grows, and an answer is the mock entry plus about 200 bytes.
fn tool_result_response(
    status: StatusCode,
    result: &crate::protocol::rest::ToolResult,
) -> Response {
    let mut body = Vec::with_capacity(256 + result.data.get().len());
    match serde_json::to_writer(&mut body, result) {
        Ok(()) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        // Cannot happen for these field types; axum's own path answers as it always did.
        Err(_) => (status, Json(result)).into_response(),
    }
}

fn wants_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

async fn send(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
    headers: HeaderMap,
    JsonBody(req): JsonBody<SendRequest>,
) -> Result<Response, ApiErrorWithStatus> {
    if !wants_sse(&headers) {
        let result = state.rt.send(&tenant, &id, &req.message).await?;
        // A failed model call is the provider being unavailable, as a real runtime would
        // answer when its LLM is rate limited: 503 with the model's error as message.
        return Ok(match &result.error {
            Some(error) => {
                ApiErrorWithStatus::new(503, "agent_failed", error.clone()).into_response()
            }
            None => Json(result.send_result()).into_response(),
        });
    }
    // Refuse a missing session before the stream starts, as a plain JSON error.
    state.rt.open_session(&tenant, &id)?;
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

#[derive(Deserialize, Default)]
struct ApprovalQuery {
    status: Option<String>,
}

async fn list_approvals(
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
    Ok(Json(state.rt.list_approvals(&tenant, filter)).into_response())
}

async fn approve(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
    OptionalJsonBody(body): OptionalJsonBody<DecisionRequest>,
) -> Result<Response, ApiErrorWithStatus> {
    let view = state
        .rt
        .decide(&tenant, &id, Verdict::Approve, body.by, body.note)?;
    Ok(Json(view).into_response())
}

async fn deny(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
    OptionalJsonBody(body): OptionalJsonBody<DecisionRequest>,
) -> Result<Response, ApiErrorWithStatus> {
    let view = state
        .rt
        .decide(&tenant, &id, Verdict::Deny, body.by, body.note)?;
    Ok(Json(view).into_response())
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn key_compare() {
        assert!(constant_time_eq(b"csk_a", b"csk_a"));
        assert!(!constant_time_eq(b"csk_a", b"csk_b"));
        assert!(!constant_time_eq(b"csk_a", b"csk_ab"));
    }
}
