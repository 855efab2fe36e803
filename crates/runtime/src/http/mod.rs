//! The HTTP face of the runtime (axum): the route table, the router built from it, and the
//! fallbacks that answer unknown routes and methods as JSON. Handlers live one file per resource.

mod approvals;
mod evals;
mod events;
mod execute;
pub(crate) mod guard;
mod send;
mod sessions;
mod state;
mod traces;

pub use state::{AppState, Id, JsonBody, OptionalJsonBody, Q, RawBody, Tenant};

use crate::{ApiErrorWithStatus, Runtime};
use axum::Json;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware;
use axum::routing::{MethodRouter, delete, get, post};
use tokio::sync::watch;

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
    ("/v1/traces", &["POST"]),
];

/// The handler of one listed route and method.
fn handler(path: &str, method: &str) -> Option<MethodRouter<AppState>> {
    Some(match (path, method) {
        ("/v1/sessions", "GET") => get(sessions::list_sessions),
        ("/v1/sessions", "POST") => post(sessions::create_session),
        ("/v1/sessions/{id}", "GET") => get(sessions::session_detail),
        ("/v1/sessions/{id}", "DELETE") => delete(sessions::close_session),
        ("/v1/sessions/{id}/connections", "GET") => get(sessions::connections),
        ("/v1/sessions/{id}/execute", "POST") => post(execute::execute),
        ("/v1/sessions/{id}/send", "POST") => post(send::send),
        ("/v1/approvals", "GET") => get(approvals::list_approvals),
        ("/v1/approvals/{id}/approve", "POST") => post(approvals::approve),
        ("/v1/approvals/{id}/deny", "POST") => post(approvals::deny),
        ("/v1/evals/runs", "POST") => post(evals::create_run),
        ("/v1/evals/runs/{id}", "GET") => get(evals::run_detail),
        ("/v1/evals/summary", "GET") => get(evals::summary),
        ("/v1/evals/suites/{name}", "GET") => get(evals::suite_document),
        ("/v1/observe", "GET") => get(events::observe),
        ("/v1/events", "GET") => get(events::list_events),
        ("/v1/events", "POST") => post(events::ingest_events),
        ("/v1/traces", "POST") => post(traces::export),
        _ => return None,
    })
}

/// Every route, behind auth and the body limit. (The `Host`/`Origin`/content-type checks
/// of `guard` and the target bound run before the router, in each connection's service.)
pub fn router(rt: Runtime, stop: watch::Receiver<bool>) -> Router {
    let limit = rt.inner.config.max_body_bytes;
    let state = AppState { rt, stop };
    let mut v1 = Router::new();
    for (path, methods) in V1_ROUTES {
        let mut route: MethodRouter<AppState> = MethodRouter::new();
        for method in *methods {
            if let Some(h) = handler(path, method) {
                route = route.merge(h);
            } else {
                // Left unrouted (a JSON 404/405), which the route-list test catches.
                tracing::error!(path, method, "listed route has no handler");
            }
        }
        v1 = v1.route(path, route);
    }
    // Without keys every request is let in, and the layer would only cost each one a
    // clone of the route and a boxed future (a tenth of a mocked execute's CPU).
    if !state.rt.inner.config.api_keys.is_empty() {
        v1 = v1.route_layer(middleware::from_fn_with_state(state.clone(), state::auth));
    }
    Router::new()
        .route("/health", get(health))
        .merge(v1)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

async fn health(State(state): State<AppState>) -> Json<serde_json::Value> {
    let mut store = state
        .rt
        .inner
        .log
        .store_health()
        .map(crate::log::StoreHealth::status);
    // `/health` asks for no key: a runtime that wants one does not tell anyone where its
    // file lives or what its disk said (an authenticated write's 503 does).
    if let Some(status) = store
        .as_mut()
        .filter(|_| !state.rt.inner.config.api_keys.is_empty())
    {
        status.path = None;
        status.last_error = None;
    }
    Json(serde_json::json!({
        "status": "ok",
        "protocol": spyglass_protocol::PROTOCOL_VERSION,
        "memory": state.rt.budget_stats(),
        "store": store,
    }))
}

async fn not_found(State(state): State<AppState>, req: Request) -> ApiErrorWithStatus {
    let message = format!("no route {} {}", req.method(), req.uri().path());
    state::discard_body(req, &state).await;
    ApiErrorWithStatus::not_found(message)
}

async fn method_not_allowed(State(state): State<AppState>, req: Request) -> ApiErrorWithStatus {
    let message = format!("{} is not allowed on {}", req.method(), req.uri().path());
    state::discard_body(req, &state).await;
    ApiErrorWithStatus::new(405, "method_not_allowed", message)
}
