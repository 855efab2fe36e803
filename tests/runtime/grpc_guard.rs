//! The OTLP/gRPC listener held to the HTTP server's rules, over a real tonic client: the
//! connection caps and header timeout, keys and projects, and refusals exporters do not retry.

use crate::support::runtime::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::bytes::{Buf, BufMut};
use spyglass::runtime::otlp::GrpcHandle;
use spyglass::runtime::{RuntimeConfig, ServerHandle};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Code, Status};

/// A runtime with `config` and its OTLP/gRPC server.
async fn grpc_server(config: RuntimeConfig) -> (ServerHandle, GrpcHandle) {
    let handle = server(config).await;
    let grpc = handle
        .runtime()
        .serve_otlp_grpc("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (handle, grpc)
}

/// Whether the server closed `socket` within `wait` (EOF or reset on read); the HTTP/2
/// settings the server opens with are read past.
async fn closed_within(socket: &mut TcpStream, wait: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + wait;
    let mut buf = [0u8; 512];
    loop {
        match tokio::time::timeout_at(deadline, socket.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// One agent run of one span, on trace `t`.
fn export(t: u8) -> ExportTraceServiceRequest {
    let kv = |key: &str, value: &str| KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.to_owned())),
        }),
        ..KeyValue::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: [t; 16].to_vec(),
                    span_id: [t; 8].to_vec(),
                    name: "invoke_agent grpc_agent".to_owned(),
                    start_time_unix_nano: 1_700_000_000_000_000_000,
                    end_time_unix_nano: 1_700_000_000_500_000_000,
                    attributes: vec![
                        kv("gen_ai.operation.name", "invoke_agent"),
                        kv("gen_ai.agent.name", "grpc_agent"),
                    ],
                    ..Span::default()
                }],
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
}

/// Exports `request` over a new connection with `headers` as metadata.
async fn send(
    grpc: &GrpcHandle,
    request: ExportTraceServiceRequest,
    headers: &[(&'static str, &str)],
) -> Result<(), Status> {
    let mut client = TraceServiceClient::connect(grpc.url()).await.unwrap();
    let mut request = tonic::Request::new(request);
    for (name, value) in headers {
        request.metadata_mut().insert(*name, value.parse().unwrap());
    }
    client.export(request).await.map(|_| ())
}

/// The runtime's events in `tenant`, as the admin key reads them over HTTP.
async fn events_in(handle: &ServerHandle, tenant: &str) -> Vec<serde_json::Value> {
    let (status, page) = Api::new(handle)
        .with_key("k_admin")
        .with_tenant(tenant)
        .get("/v1/events?since=0")
        .await;
    assert_eq!(status, 200, "{page}");
    page["events"].as_array().cloned().unwrap_or_default()
}

fn keyed() -> RuntimeConfig {
    RuntimeConfig {
        api_keys: vec!["k_admin".into(), "k_a".into()],
        key_projects: vec![("k_a".into(), vec!["prj_a".into()])],
        ..test_config()
    }
}

#[tokio::test]
async fn idle_grpc_sockets_over_a_cap_are_closed_oldest_first_and_exports_still_land() {
    for (total, per_ip) in [(3, 100), (100, 3)] {
        let (handle, grpc) = grpc_server(RuntimeConfig {
            max_connections: total,
            max_connections_per_ip: per_ip,
            header_timeout: Duration::from_mins(1),
            ..test_config()
        })
        .await;
        // Three sockets that never send the HTTP/2 preface fill the cap of three...
        let mut sockets = Vec::new();
        for _ in 0..3 {
            sockets.push(TcpStream::connect(grpc.addr()).await.unwrap());
        }
        // ...and the fourth connection, an exporter's, is served: the oldest idle one went.
        send(&grpc, export(1), &[]).await.unwrap();
        assert!(
            closed_within(&mut sockets[0], Duration::from_secs(3)).await,
            "cap ({total}, {per_ip}): the oldest idle socket is still open"
        );
        for socket in &mut sockets[1..] {
            assert!(
                !closed_within(socket, Duration::from_millis(50)).await,
                "cap ({total}, {per_ip}): more than the one socket needed was closed"
            );
        }
        let (status, body) = Api::new(&handle).get("/health").await;
        assert_eq!(status, 200, "{body}");
        // Stopping does not wait on the sockets still open and idle.
        tokio::time::timeout(Duration::from_secs(5), grpc.shutdown())
            .await
            .expect("the gRPC server stopped with idle sockets open");
        handle.shutdown().await;
    }
}

#[tokio::test]
async fn a_grpc_socket_that_never_sends_the_preface_is_closed_after_the_header_timeout() {
    let (handle, grpc) = grpc_server(RuntimeConfig {
        header_timeout: Duration::from_millis(300),
        ..test_config()
    })
    .await;
    let mut sockets = Vec::new();
    for _ in 0..10 {
        sockets.push(TcpStream::connect(grpc.addr()).await.unwrap());
    }
    let started = Instant::now();
    for socket in &mut sockets {
        assert!(
            closed_within(socket, Duration::from_secs(3)).await,
            "a silent socket was still open after {:?}",
            started.elapsed()
        );
    }
    // An exporter that sends is served, twice on one connection.
    let mut client = TraceServiceClient::connect(grpc.url()).await.unwrap();
    client.export(export(2)).await.unwrap();
    client.export(export(3)).await.unwrap();
    let (status, body) = Api::new(&handle).get("/health").await;
    assert_eq!(status, 200, "{body}");
    grpc.shutdown().await;
    handle.shutdown().await;
}

#[tokio::test]
async fn a_key_bound_to_one_project_exports_into_it_without_naming_it() {
    let (handle, grpc) = grpc_server(keyed()).await;
    send(&grpc, export(4), &[("authorization", "Bearer k_a")])
        .await
        .unwrap();
    let created = |events: &[serde_json::Value]| {
        events
            .iter()
            .filter(|e| e["kind"] == "session.created")
            .count()
    };
    assert_eq!(created(&events_in(&handle, "prj_a").await), 1);
    assert_eq!(created(&events_in(&handle, "default").await), 0);

    // Naming its project works too; another project is refused, as over HTTP.
    send(
        &grpc,
        export(5),
        &[
            ("authorization", "Bearer k_a"),
            ("x-codespar-project", "prj_a"),
        ],
    )
    .await
    .unwrap();
    let refused = send(
        &grpc,
        export(6),
        &[
            ("authorization", "Bearer k_a"),
            ("x-codespar-project", "prj_b"),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().contains("prj_b"), "{refused:?}");
    let refused = send(&grpc, export(7), &[("authorization", "Bearer wrong")])
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert_eq!(created(&events_in(&handle, "prj_a").await), 2);
    assert!(events_in(&handle, "prj_b").await.is_empty());
    grpc.shutdown().await;
    handle.shutdown().await;
}

#[tokio::test]
async fn every_project_and_overlong_project_ids_are_refused_as_invalid() {
    let (handle, grpc) = grpc_server(test_config()).await;
    let long = "p".repeat(300);
    for (project, says) in [("*", "GET /v1/observe"), (long.as_str(), "128")] {
        let refused = send(&grpc, export(8), &[("x-codespar-project", project)])
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().contains(says), "{refused:?}");
    }
    // With a key bound to no project, `*` is refused the same way.
    let (keyed_handle, keyed_grpc) = grpc_server(keyed()).await;
    let refused = send(
        &keyed_grpc,
        export(9),
        &[
            ("authorization", "Bearer k_admin"),
            ("x-codespar-project", "*"),
        ],
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(handle.runtime().events_since(0, 100).is_empty());
    assert!(keyed_handle.runtime().events_since(0, 100).is_empty());
    for (grpc, handle) in [(grpc, handle), (keyed_grpc, keyed_handle)] {
        grpc.shutdown().await;
        handle.shutdown().await;
    }
}

/// Bytes sent as a gRPC message as they are (not an encoded message of any type).
#[derive(Default)]
struct RawBytes;

impl Codec for RawBytes {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawBytes;
    type Decoder = RawBytes;

    fn encoder(&mut self) -> RawBytes {
        RawBytes
    }

    fn decoder(&mut self) -> RawBytes {
        RawBytes
    }
}

impl Encoder for RawBytes {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawBytes {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let bytes = src.chunk().to_vec();
        src.advance(bytes.len());
        Ok(Some(bytes))
    }
}

#[tokio::test]
async fn malformed_and_oversized_exports_are_invalid_argument_which_exporters_do_not_retry() {
    let (handle, grpc) = grpc_server(RuntimeConfig {
        max_body_bytes: 4096,
        ..test_config()
    })
    .await;
    let channel = tonic::transport::Endpoint::from_shared(grpc.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = tonic::client::Grpc::new(channel);
    raw.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    );
    let refused = raw
        .unary(tonic::Request::new(vec![0xff; 32]), path, RawBytes)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("not an OTLP ExportTraceServiceRequest"),
        "{refused:?}"
    );

    let mut big = export(10);
    big.resource_spans[0].scope_spans[0].spans[0].name = "x".repeat(8192);
    let refused = send(&grpc, big, &[]).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("4096-byte limit"), "{refused:?}");
    assert!(handle.runtime().events_since(0, 100).is_empty());

    // A good export is still taken.
    send(&grpc, export(11), &[]).await.unwrap();
    assert!(!handle.runtime().events_since(0, 100).is_empty());
    grpc.shutdown().await;
    handle.shutdown().await;
}
