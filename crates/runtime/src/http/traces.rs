//! `POST /v1/traces`: OTLP/HTTP trace export (protobuf or JSON, gzip or not), its spans
//! assembled by `crate::otel` into the events of sessions, steps and calls, and emitted.

use super::state::{AppState, Tenant, discard_body};
use crate::otel::decode::{self, Encoding};
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use spyglass_protocol::sanitize::sanitize;

/// An OTLP/HTTP answer: the body in the request's encoding, with its type.
fn answer(status: u16, body: Vec<u8>, encoding: Encoding) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, encoding.content_type())],
        body,
    )
        .into_response()
}

/// A failure as OTLP/HTTP says: a `google.rpc.Status` body.
fn failure(status: u16, message: &str, encoding: Encoding) -> Response {
    answer(
        status,
        decode::encode_status(status, message, encoding),
        encoding,
    )
}

/// Decodes, assembles and emits; every failure answers in the request's encoding (JSON
/// when the type itself is what was wrong).
pub(super) async fn export(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    req: Request,
) -> Response {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or("(not text)").to_owned());
    let Some(encoding) = content_type
        .as_deref()
        .and_then(Encoding::from_content_type)
    else {
        let what = content_type.map_or_else(
            || "no Content-Type".to_owned(),
            |t| sanitize(&decode::clip(&t, decode::MAX_NAME_BYTES)).into_owned(),
        );
        discard_body(req, &state).await;
        return failure(
            415,
            &format!(
                "POST /v1/traces takes Content-Type application/x-protobuf or application/json, not {what}"
            ),
            Encoding::Json,
        );
    };
    let content_encoding = req
        .headers()
        .get(header::CONTENT_ENCODING)
        .map(|v| v.to_str().unwrap_or("(not text)").to_owned());
    let limit = state.rt.inner.config.max_body_bytes;
    let bytes = match Bytes::from_request(req, &state).await {
        Ok(bytes) => bytes,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return failure(
                413,
                &format!("request body is over the {limit}-byte limit"),
                encoding,
            );
        }
        Err(rejection) => {
            return failure(
                400,
                &format!("could not read the request body: {rejection}"),
                encoding,
            );
        }
    };
    let (spans, rejected) = match decode::decompress(&bytes, content_encoding.as_deref(), limit)
        .and_then(|body| decode::decode_spans(&body, encoding))
    {
        Ok(read) => read,
        Err(err) => return failure(err.http_status(), &err.to_string(), encoding),
    };
    let stats = state.rt.ingest_spans(&tenant, spans);
    tracing::debug!(?stats, rejected = rejected.len(), "otlp export");
    if let Err(err) = state.rt.committed().await {
        return failure(err.status, &err.error.message, encoding);
    }
    answer(200, decode::encode_response(&rejected, encoding), encoding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otel::decode::RpcStatus;
    use crate::{Runtime, RuntimeConfig};
    use axum::body::Body;
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message;
    use tower_service::Service;

    fn runtime(max_body_bytes: usize) -> Runtime {
        Runtime::new(RuntimeConfig {
            max_body_bytes,
            ..RuntimeConfig::default()
        })
    }

    async fn post(
        rt: &Runtime,
        content_type: Option<&str>,
        encoding: Option<&str>,
        body: Vec<u8>,
    ) -> (u16, String, Vec<u8>) {
        let (_tx, stop) = tokio::sync::watch::channel(false);
        let mut router = super::super::router(rt.clone(), stop);
        let mut req = Request::post("/v1/traces");
        if let Some(t) = content_type {
            req = req.header(header::CONTENT_TYPE, t);
        }
        if let Some(e) = encoding {
            req = req.header(header::CONTENT_ENCODING, e);
        }
        let res = router
            .call(req.body(Body::from(body)).unwrap())
            .await
            .unwrap();
        let status = res.status().as_u16();
        let ct = res
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, ct, bytes.to_vec())
    }

    fn kv(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.to_owned())),
            }),
            ..KeyValue::default()
        }
    }

    fn export_request(trace_ids: &[Vec<u8>]) -> ExportTraceServiceRequest {
        let spans = trace_ids
            .iter()
            .enumerate()
            .map(|(i, trace_id)| Span {
                trace_id: trace_id.clone(),
                span_id: vec![0, 0, 0, 0, 0, 0, 0, i as u8 + 1],
                name: "execute_tool lookup".to_owned(),
                start_time_unix_nano: 1_000_000,
                end_time_unix_nano: 3_500_000,
                attributes: vec![
                    kv("gen_ai.operation.name", "execute_tool"),
                    kv("gen_ai.tool.name", "lookup"),
                ],
                ..Span::default()
            })
            .collect();
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", "svc")],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        }
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, bytes).unwrap();
        gz.finish().unwrap()
    }

    fn status_pb(body: &[u8]) -> RpcStatus {
        RpcStatus::decode(body).unwrap()
    }

    fn status_json(body: &[u8]) -> serde_json::Value {
        serde_json::from_slice(body).unwrap()
    }

    #[tokio::test]
    async fn protobuf_gzip_export_is_emitted_and_rejected_spans_are_named() {
        let rt = runtime(1 << 20);
        let body = export_request(&[vec![7; 16], vec![1, 2, 3]]).encode_to_vec();
        let (status, ct, out) = post(
            &rt,
            Some("application/x-protobuf"),
            Some("gzip"),
            gzip(&body),
        )
        .await;
        assert_eq!((status, ct.as_str()), (200, "application/x-protobuf"));
        let response = ExportTraceServiceResponse::decode(out.as_slice()).unwrap();
        let partial = response.partial_success.unwrap();
        assert_eq!(partial.rejected_spans, 1);
        assert!(
            partial.error_message.contains("span 1: trace id"),
            "{}",
            partial.error_message
        );
        let frames = rt.events_since(0, 100);
        let kinds: Vec<_> = frames.iter().map(|f| f.event.kind()).collect();
        assert_eq!(kinds, ["session.created", "tool.called"]);
        assert_eq!(
            frames[1].session_id.as_deref(),
            Some("07".repeat(16).as_str())
        );
    }

    #[tokio::test]
    async fn a_chunked_body_without_length_is_read_whole() {
        let rt = runtime(1 << 20);
        let body = gzip(&export_request(&[vec![5; 16]]).encode_to_vec());
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            body.chunks(7).map(|c| Ok(c.to_vec())).collect();
        let (_tx, stop) = tokio::sync::watch::channel(false);
        let mut router = super::super::router(rt.clone(), stop);
        let req = Request::post("/v1/traces")
            .header(header::CONTENT_TYPE, "application/x-protobuf")
            .header(header::CONTENT_ENCODING, "gzip")
            .body(Body::from_stream(futures_util::stream::iter(chunks)))
            .unwrap();
        assert!(req.headers().get(header::CONTENT_LENGTH).is_none());
        let res = router.call(req).await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(rt.events_since(0, 10).len(), 2, "session and call");
    }

    #[tokio::test]
    async fn a_whole_success_has_no_partial_success() {
        let rt = runtime(1 << 20);
        let body = serde_json::to_vec(&export_request(&[vec![9; 16]])).unwrap();
        let (status, ct, out) = post(&rt, Some("application/json"), None, body).await;
        assert_eq!((status, ct.as_str()), (200, "application/json"));
        assert_eq!(out, b"{}");
    }

    #[tokio::test]
    async fn bad_protobuf_is_400_with_a_protobuf_status() {
        let rt = runtime(1 << 20);
        let (status, ct, out) =
            post(&rt, Some("application/x-protobuf"), None, vec![0xff; 9]).await;
        assert_eq!((status, ct.as_str()), (400, "application/x-protobuf"));
        let s = status_pb(&out);
        assert_eq!(s.code, 3);
        assert!(
            s.message
                .contains("not an OTLP ExportTraceServiceRequest in protobuf")
        );
        assert!(rt.events_since(0, 10).is_empty(), "nothing emitted");
    }

    #[tokio::test]
    async fn bad_json_is_400_with_a_json_status() {
        let rt = runtime(1 << 20);
        let (status, ct, out) = post(
            &rt,
            Some("application/json; charset=utf-8"),
            None,
            b"{\"resourceSpans\": [".to_vec(),
        )
        .await;
        assert_eq!((status, ct.as_str()), (400, "application/json"));
        let s = status_json(&out);
        assert_eq!(s["code"], 3);
        assert!(s["message"].as_str().unwrap().contains("in JSON"), "{s}");
    }

    #[tokio::test]
    async fn bad_gzip_is_400() {
        let rt = runtime(1 << 20);
        let (status, _, out) = post(
            &rt,
            Some("application/x-protobuf"),
            Some("gzip"),
            b"definitely not gzip".to_vec(),
        )
        .await;
        assert_eq!(status, 400);
        assert!(status_pb(&out).message.contains("not valid gzip"));
    }

    #[tokio::test]
    async fn too_large_is_413_before_and_after_decompression() {
        let rt = runtime(4096);
        let (status, _, out) = post(&rt, Some("application/json"), None, vec![b' '; 10_000]).await;
        assert_eq!(status, 413);
        let s = status_json(&out);
        assert_eq!(s["code"], 8);
        assert!(s["message"].as_str().unwrap().contains("4096-byte limit"));
        // A small gzip body that inflates past the limit.
        let (status, _, out) = post(
            &rt,
            Some("application/x-protobuf"),
            Some("gzip"),
            gzip(&vec![0; 100_000]),
        )
        .await;
        assert_eq!(status, 413);
        assert!(status_pb(&out).message.contains("once decompressed"));
    }

    #[tokio::test]
    async fn wrong_content_type_or_encoding_is_415() {
        let rt = runtime(1 << 20);
        let (status, ct, out) = post(&rt, Some("text/plain"), None, b"x".to_vec()).await;
        assert_eq!((status, ct.as_str()), (415, "application/json"));
        let s = status_json(&out);
        assert!(
            s["message"].as_str().unwrap().contains("not text/plain"),
            "{s}"
        );
        let (status, _, out) = post(&rt, None, None, b"x".to_vec()).await;
        assert_eq!(status, 415);
        assert!(
            status_json(&out)["message"]
                .as_str()
                .unwrap()
                .contains("no Content-Type")
        );
        let (status, ct, out) = post(
            &rt,
            Some("application/x-protobuf"),
            Some("br"),
            b"x".to_vec(),
        )
        .await;
        assert_eq!((status, ct.as_str()), (415, "application/x-protobuf"));
        assert!(status_pb(&out).message.contains("Content-Encoding br"));
    }
}
