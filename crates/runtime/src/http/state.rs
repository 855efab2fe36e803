//! What every handler shares: `AppState`, the auth layer, and the extractors that turn a
//! bad request (JSON body, path, query, tenant header) into the JSON error `{code, message}`.

use crate::{ApiErrorWithStatus, DEFAULT_TENANT, Runtime};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use spyglass_protocol::envelope::codes;
use std::time::Duration;
use tokio::sync::watch;

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

/// The tenant a request acts for: `x-codespar-project` (or `?project=` on the observer
/// stream), else (absent or blank) the default tenant. A header that is not visible ASCII is refused, 400 `invalid_header`: read as
/// absent it would act on the default tenant's sessions.
pub struct Tenant(pub String);

/// `?project=` on `GET /v1/observe`.
#[derive(serde::Deserialize)]
struct ObserveProject {
    project: Option<String>,
}

/// The project a request names: `x-codespar-project`, or on `GET /v1/observe` (a
/// browser's WebSocket cannot set headers) `?project=`; both naming different projects is
/// 400. `None`: neither, or blank. Read by the key check and the `Tenant` extractor alike,
/// so a bound key is held to its projects whichever way the project is named.
fn named_project(
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
) -> Result<Option<String>, ApiErrorWithStatus> {
    let header = headers
        .get("x-codespar-project")
        .map(|value| {
            let text = value.to_str().map_or("\u{7f}", str::trim);
            check_project(text).map(|()| text).map_err(|why| {
                ApiErrorWithStatus::new(
                    400,
                    codes::INVALID_HEADER,
                    format!("x-codespar-project {why}; send the project id as text"),
                )
            })
        })
        .transpose()?
        .filter(|v| !v.is_empty());
    let query = if uri.path() == "/v1/observe" && uri.query().is_some() {
        // A query that cannot be read (`?project=a&project=b`) is refused, not read as
        // naming no project: that would stream the default tenant.
        let named = Query::<ObserveProject>::try_from_uri(uri).map_err(|err| {
            ApiErrorWithStatus::new(
                400,
                codes::INVALID_QUERY,
                format!("the query cannot be read: {}", err.body_text()),
            )
        })?;
        named
            .0
            .project
            .map(|p| {
                let p = p.trim().to_owned();
                check_project(&p).map(|()| p).map_err(|why| {
                    ApiErrorWithStatus::new(
                        400,
                        codes::INVALID_QUERY,
                        format!("project {why}; send the project id as text"),
                    )
                })
            })
            .transpose()?
            .filter(|p| !p.is_empty())
    } else {
        None
    };
    match (header, query) {
        (Some(header), Some(query)) if header != query => Err(ApiErrorWithStatus::new(
            400,
            codes::INVALID_QUERY,
            "project and x-codespar-project name different projects; send one",
        )),
        (Some(header), _) => Ok(Some(header.to_owned())),
        (None, query) => Ok(query),
    }
}

/// The most bytes a project id holds.
pub const MAX_PROJECT_BYTES: usize = 128;

/// A project id is 1 to `MAX_PROJECT_BYTES` visible ASCII characters (empty reads as
/// none); what is wrong with `text` otherwise.
fn check_project(text: &str) -> Result<(), String> {
    if text.len() > MAX_PROJECT_BYTES {
        return Err(format!(
            "is {} bytes long; a project id has at most {MAX_PROJECT_BYTES}",
            text.len()
        ));
    }
    if text.chars().any(|c| !c.is_ascii_graphic()) {
        return Err("is not visible ASCII (no spaces, tabs or controls)".to_owned());
    }
    Ok(())
}

/// The project name that means every project, on `GET /v1/observe` only.
pub const ALL_PROJECTS: &str = "*";

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiErrorWithStatus;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let Some(text) = named_project(&parts.uri, &parts.headers)? else {
            return Ok(Tenant(DEFAULT_TENANT.to_owned()));
        };
        if text == ALL_PROJECTS && parts.uri.path() != "/v1/observe" {
            return Err(ApiErrorWithStatus::new(
                400,
                codes::INVALID_HEADER,
                "x-codespar-project: * (every project) is taken only by GET /v1/observe; name one project here",
            ));
        }
        Ok(Tenant(text))
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
                    too_large(limit)
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
        json_body(&bytes).map(JsonBody)
    }
}

/// A body as `JsonBody` reads it: empty, malformed or mistyped is 400 `invalid_body`.
fn json_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiErrorWithStatus> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiErrorWithStatus::invalid_body(
            "request body is empty; expected a JSON object",
        ));
    }
    serde_json::from_slice(bytes).map_err(|err| {
        ApiErrorWithStatus::invalid_body(format!("request body is not valid: {err}"))
    })
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

/// How long a refused request's body may take to arrive before the answer goes anyway.
const DISCARD_WAIT: Duration = Duration::from_secs(5);

/// Reads and drops a request's body, at most `max_body_bytes` of it and for at most
/// `DISCARD_WAIT`, before a refusal that did not need it (unknown route, bad method, no
/// key). Answering first and closing with the body unread makes the kernel reset the
/// connection, and a client still sending sees the reset instead of the JSON answer.
pub(crate) async fn discard_body(req: Request, state: &AppState) {
    let limit = state.rt.inner.config.max_body_bytes;
    let body = req.into_body();
    let _ = tokio::time::timeout(DISCARD_WAIT, axum::body::to_bytes(body, limit)).await;
}

/// Byte-wise comparison whose time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of `Bearer <token>`; the scheme is case-insensitive (RFC 9110 §11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// The projects a request's key may act for: None when the key is not bound.
fn key_projects<'a>(state: &'a AppState, key: &str) -> Option<&'a [String]> {
    state
        .rt
        .inner
        .config
        .key_projects
        .iter()
        .find(|(bound, _)| bound == key)
        .map(|(_, projects)| projects.as_slice())
}

/// Holds a bound key to its projects: a request naming no project acts for the key's only
/// project; one naming another project gets 404, as if nothing of it existed.
fn scope(req: &mut Request, projects: &[String]) -> Result<(), ApiErrorWithStatus> {
    let named = named_project(req.uri(), req.headers())?;
    let named = named.as_deref();
    if named == Some(ALL_PROJECTS) {
        return Err(ApiErrorWithStatus::new(
            403,
            codes::FORBIDDEN,
            format!(
                "x-codespar-project: * (every project) needs a key bound to no project; this key acts for {} only",
                projects.join(", ")
            ),
        ));
    }
    let tenant = match (named, projects) {
        (Some(named), _) => named.to_owned(),
        (None, [only]) => {
            if let Ok(value) = header::HeaderValue::from_str(only) {
                req.headers_mut().insert("x-codespar-project", value);
            }
            only.clone()
        }
        (None, _) => DEFAULT_TENANT.to_owned(),
    };
    if projects.contains(&tenant) {
        Ok(())
    } else {
        Err(ApiErrorWithStatus::not_found(format!(
            "no project {tenant} for this key"
        )))
    }
}

pub(crate) async fn auth(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let keys = &state.rt.inner.config.api_keys;
    if keys.is_empty() {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .unwrap_or_default();
    // Compare against every key so the time taken does not say which one was close.
    let ok = keys.iter().fold(false, |ok, key| {
        constant_time_eq(presented.as_bytes(), key.as_bytes()) | ok
    });
    if ok {
        // An unreadable header falls through to the `Tenant` extractor's 400.
        let presented = presented.to_owned();
        if let Some(projects) = key_projects(&state, &presented)
            && req
                .headers()
                .get("x-codespar-project")
                .is_none_or(|v| v.to_str().is_ok())
            && let Err(refusal) = scope(&mut req, projects)
        {
            discard_body(req, &state).await;
            return refusal.into_response();
        }
        next.run(req).await
    } else {
        discard_body(req, &state).await;
        ApiErrorWithStatus::new(
            401,
            codes::UNAUTHORIZED,
            "missing or unknown API key; send Authorization: Bearer <key>",
        )
        .into_response()
    }
}

/// The 413 of a body over `limit` bytes, whichever path read it.
fn too_large(limit: usize) -> ApiErrorWithStatus {
    ApiErrorWithStatus::new(
        413,
        codes::PAYLOAD_TOO_LARGE,
        format!("request body is over the {limit}-byte limit"),
    )
}

#[cfg(test)]
mod tests {
    use super::{bearer_token, constant_time_eq};

    #[test]
    fn bearer_scheme_in_any_case() {
        for value in ["Bearer k1", "bearer k1", "BEARER  k1 ", "bEaReR k1"] {
            assert_eq!(bearer_token(value), Some("k1"), "{value}");
        }
        assert_eq!(bearer_token("Basic k1"), None);
        assert_eq!(bearer_token("Bearerk1"), None);
    }

    #[test]
    fn key_compare() {
        assert!(constant_time_eq(b"csk_a", b"csk_a"));
        assert!(!constant_time_eq(b"csk_a", b"csk_b"));
        assert!(!constant_time_eq(b"csk_a", b"csk_ab"));
    }
}
