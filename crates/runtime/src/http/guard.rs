//! What keeps web pages out of the runtime: the `Host` check (DNS rebinding), the `Origin`
//! check (cross-site pages and WebSocket upgrades) and the JSON content type on state changes.
//!
//! A page can send a "simple" cross-origin POST (`text/plain`, form types, no type) without
//! a preflight and the runtime answers no CORS, so requiring JSON on POST, refusing any
//! `Origin` not allowed, and answering a loopback bind only for loopback names closes the
//! ways a page reaches a key-less runtime. Non-browser clients send no `Origin`.

use crate::{ApiErrorWithStatus, RuntimeConfig};
use axum::http::{HeaderMap, Method, header};
use spyglass_protocol::envelope::codes;
use std::net::{IpAddr, SocketAddr};

/// Who a request acts for (key, bound projects, project id), for listeners that are not
/// the axum router: OTLP/gRPC holds its requests to the HTTP routes' rules through this.
#[cfg(feature = "otlp-grpc")]
pub(crate) use super::state::acting_tenant;

pub const HOST_NOT_ALLOWED: &str = "host_not_allowed";
pub const ORIGIN_NOT_ALLOWED: &str = "origin_not_allowed";
pub const UNSUPPORTED_MEDIA_TYPE: &str = "unsupported_media_type";

/// The checks of one server, built from its config and bound address.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    /// Only loopback `Host` names (plus `hosts`) are answered.
    loopback: bool,
    hosts: Vec<String>,
    origins: Vec<String>,
}

/// The `host` part of a `Host` value or an origin's authority, as sent (compare it with
/// `eq_ignore_ascii_case`): `[::1]`, not `[::1]:8000`. Borrowed: it runs on every request.
fn host_part(authority: &str) -> &str {
    let authority = authority.trim();
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

fn is_loopback_name(host: &str) -> bool {
    if host == "127.0.0.1" {
        return true;
    }
    let ends_localhost = host.len() > ".localhost".len()
        && host.as_bytes()[host.len() - ".localhost".len()..].eq_ignore_ascii_case(b".localhost");
    if host.eq_ignore_ascii_case("localhost") || ends_localhost || host == "[::1]" {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn normalise_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

impl Guard {
    pub(crate) fn new(config: &RuntimeConfig, bound: SocketAddr) -> Guard {
        Guard {
            loopback: bound.ip().is_loopback(),
            hosts: config
                .allowed_hosts
                .iter()
                .map(|h| host_part(h).to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect(),
            origins: config
                .allowed_origins
                .iter()
                .map(|o| normalise_origin(o))
                .filter(|o| !o.is_empty())
                .collect(),
        }
    }

    /// Refuses a request a browser page could have sent against the developer's will.
    pub(crate) fn check(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<(), ApiErrorWithStatus> {
        let host = headers
            .get(header::HOST)
            .map(|h| h.to_str().map(host_part).unwrap_or_default());
        // HTTP/1.0 may leave Host out; read as "no name to check" it would pass the
        // loopback check below, so a request must say which host it is for.
        if host.is_none_or(str::is_empty) {
            return Err(ApiErrorWithStatus::new(
                400,
                codes::INVALID_HEADER,
                "a request needs a Host header naming this runtime (e.g. Host: 127.0.0.1)",
            ));
        }
        if self.loopback
            && let Some(host) = host
            && !is_loopback_name(host)
            && !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
        {
            return Err(ApiErrorWithStatus::new(
                403,
                HOST_NOT_ALLOWED,
                "this runtime answers loopback host names only (localhost, 127.0.0.1, [::1]); add others with --allow-host",
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = normalise_origin(origin.to_str().unwrap_or("null"));
            let allowed = self.origins.iter().any(|o| o == "*" || *o == origin);
            if !allowed {
                return Err(ApiErrorWithStatus::new(
                    403,
                    ORIGIN_NOT_ALLOWED,
                    format!(
                        "requests from web origin {origin} are refused; allow it with --allow-origin"
                    ),
                ));
            }
        }
        if path.starts_with("/v1/") {
            check_content_type(method, path, headers)?;
        }
        Ok(())
    }
}

/// POST needs a JSON type (`POST /v1/events` also takes JSON lines); DELETE may carry no
/// type, since no page can send one cross-site without a preflight the runtime never grants.
/// `POST /v1/traces` is OTLP's: protobuf too, and its handler answers any other type 415
/// with the `Status` body exporters read, having changed nothing.
fn check_content_type(
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Result<(), ApiErrorWithStatus> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or_default());
    // Compared without case and without a lowered copy: this runs on every request.
    let essence = content_type.map(|t| t.split(';').next().unwrap_or_default().trim());
    let json = |t: &str| {
        t.eq_ignore_ascii_case("application/json")
            || (t.len() >= "application/".len() + "+json".len()
                && t.as_bytes()[.."application/".len()].eq_ignore_ascii_case(b"application/")
                && t.as_bytes()[t.len() - "+json".len()..].eq_ignore_ascii_case(b"+json"))
    };
    let lines = |t: &str| {
        [
            "application/x-ndjson",
            "application/jsonl",
            "application/json-seq",
        ]
        .iter()
        .any(|l| t.eq_ignore_ascii_case(l))
    };
    let ok = match *method {
        Method::POST if path == "/v1/traces" => true,
        Method::POST => essence.is_some_and(|t| json(t) || (path == "/v1/events" && lines(t))),
        Method::DELETE => essence.is_none_or(json),
        _ => true,
    };
    if ok {
        return Ok(());
    }
    let what = content_type.unwrap_or("no Content-Type");
    Err(ApiErrorWithStatus::new(
        415,
        UNSUPPORTED_MEDIA_TYPE,
        format!("{method} {path} takes Content-Type: application/json, not {what}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pairs`, with `host: 127.0.0.1` unless they name a host.
    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert("host", "127.0.0.1".parse().unwrap());
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    fn guard(origins: &[&str], hosts: &[&str]) -> Guard {
        let config = RuntimeConfig {
            allowed_origins: origins
                .iter()
                .map(std::string::ToString::to_string)
                .collect(),
            allowed_hosts: hosts.iter().map(std::string::ToString::to_string).collect(),
            ..RuntimeConfig::default()
        };
        Guard::new(&config, "127.0.0.1:8000".parse().unwrap())
    }

    #[test]
    fn a_request_without_a_host_is_refused_whatever_the_binding() {
        for bound in ["127.0.0.1:8000", "0.0.0.0:8000"] {
            let g = Guard::new(&RuntimeConfig::default(), bound.parse().unwrap());
            for host in [None, Some("")] {
                let mut map = HeaderMap::new();
                if let Some(host) = host {
                    map.insert("host", host.parse().unwrap());
                }
                let err = g.check(&Method::GET, "/health", &map).unwrap_err();
                assert_eq!(
                    (err.status, err.error.code.as_str()),
                    (400, "invalid_header")
                );
            }
        }
    }

    #[test]
    fn loopback_hosts_with_any_port_pass_others_need_allowing() {
        let g = guard(&[], &["devbox.lan"]);
        for host in [
            "localhost",
            "localhost:8000",
            "127.0.0.1:1",
            "[::1]:8000",
            "[::1]",
            "devbox.lan:8000",
            "LOCALHOST",
        ] {
            assert!(
                g.check(&Method::GET, "/health", &headers(&[("host", host)]))
                    .is_ok(),
                "{host}"
            );
        }
        for host in [
            "evil.example",
            "evil.example:8000",
            "127.0.0.1.evil.example",
            "10.0.0.1:8000",
        ] {
            let err = g
                .check(&Method::GET, "/health", &headers(&[("host", host)]))
                .unwrap_err();
            assert_eq!(
                (err.status, err.error.code.as_str()),
                (403, "host_not_allowed"),
                "{host}"
            );
        }
        let open = Guard::new(&RuntimeConfig::default(), "0.0.0.0:8000".parse().unwrap());
        assert!(
            open.check(
                &Method::GET,
                "/health",
                &headers(&[("host", "evil.example")])
            )
            .is_ok()
        );
    }

    #[test]
    fn origins_need_allowing() {
        let g = guard(&["http://localhost:3000/"], &[]);
        assert!(
            g.check(
                &Method::GET,
                "/v1/sessions",
                &headers(&[("origin", "http://LOCALHOST:3000")])
            )
            .is_ok()
        );
        for origin in ["https://evil.example", "null", "http://localhost:3001"] {
            let err = g
                .check(
                    &Method::GET,
                    "/v1/sessions",
                    &headers(&[("origin", origin)]),
                )
                .unwrap_err();
            assert_eq!(err.error.code, "origin_not_allowed", "{origin}");
        }
        assert!(
            guard(&["*"], &[])
                .check(
                    &Method::GET,
                    "/",
                    &headers(&[("origin", "https://x.example")])
                )
                .is_ok()
        );
    }

    #[test]
    fn state_changes_take_json() {
        let g = guard(&[], &[]);
        let ok =
            |m: Method, p: &str, h: &[(&'static str, &str)]| g.check(&m, p, &headers(h)).is_ok();
        assert!(ok(
            Method::POST,
            "/v1/sessions",
            &[("content-type", "application/json; charset=utf-8")]
        ));
        assert!(ok(
            Method::POST,
            "/v1/events",
            &[("content-type", "application/x-ndjson")]
        ));
        assert!(!ok(
            Method::POST,
            "/v1/sessions",
            &[("content-type", "application/x-ndjson")]
        ));
        // Types compare without case (RFC 9110 §8.3.1).
        for t in [
            "Application/JSON",
            "application/vnd.api+JSON; charset=utf-8",
            "application/+json",
        ] {
            assert!(
                ok(Method::POST, "/v1/sessions", &[("content-type", t)]),
                "{t}"
            );
        }
        for t in ["application/json+x", "text/+json", "application/jsonl"] {
            assert!(
                !ok(Method::POST, "/v1/sessions", &[("content-type", t)]),
                "{t}"
            );
        }
        assert!(ok(
            Method::POST,
            "/v1/events",
            &[("content-type", "APPLICATION/X-NDJSON")]
        ));
        assert!(!ok(
            Method::POST,
            "/v1/sessions",
            &[("content-type", "text/plain")]
        ));
        assert!(!ok(Method::POST, "/v1/approvals/a/approve", &[]));
        assert!(ok(Method::DELETE, "/v1/sessions/s", &[]));
        assert!(ok(
            Method::DELETE,
            "/v1/sessions/s",
            &[("content-type", "application/json")]
        ));
        assert!(!ok(
            Method::DELETE,
            "/v1/sessions/s",
            &[("content-type", "text/plain")]
        ));
        assert!(ok(
            Method::GET,
            "/v1/sessions",
            &[("content-type", "text/plain")]
        ));
        // OTLP exporters post protobuf; the handler refuses other types itself.
        assert!(ok(
            Method::POST,
            "/v1/traces",
            &[("content-type", "application/x-protobuf")]
        ));
        assert!(!ok(
            Method::POST,
            "/v1/events",
            &[("content-type", "application/x-protobuf")]
        ));
    }
}
