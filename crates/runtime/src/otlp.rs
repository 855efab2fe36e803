//! OpenTelemetry spans into the runtime: the one ingest path `POST /v1/traces` and OTLP/gRPC
//! share, and the gRPC server on its own port (`serve --otlp-grpc-addr`, tonic).

use super::{DEFAULT_TENANT, Runtime, lock};
use crate::otel::decode;
use crate::otel::map::ReadSpans;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use std::net::SocketAddr;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::codec::CompressionEncoding;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

impl Runtime {
    /// Emits what `spans` (one export request's) make on `tenant`'s stream; their strings
    /// move into the events. The assembler is held while emitting, so two exporters'
    /// requests keep each trace's order.
    pub fn ingest_spans(
        &self,
        tenant: &str,
        spans: impl Into<ReadSpans>,
    ) -> crate::otel::IngestStats {
        let mut assembler = lock(&self.inner.otel);
        let (tenant, emits, stats) = assembler.ingest_named(tenant, spans);
        for emit in emits {
            self.emit_shared(tenant.clone(), Some(emit.session_id), emit.event);
        }
        stats
    }

    /// Serves OTLP/gRPC `TraceService/Export` on `addr` until the handle is shut down.
    pub async fn serve_otlp_grpc(&self, addr: SocketAddr) -> std::io::Result<GrpcHandle> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let limit = self.inner.config.max_body_bytes;
        let service = TraceServiceServer::new(Traces { rt: self.clone() })
            .accept_compressed(CompressionEncoding::Gzip)
            .max_decoding_message_size(limit);
        let (stop, stopped) = oneshot::channel::<()>();
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let task = tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .serve_with_incoming_shutdown(service, incoming, async {
                    let _ = stopped.await;
                })
                .await;
            if let Err(err) = served {
                tracing::error!(%err, "otlp grpc server stopped");
            }
        });
        Ok(GrpcHandle { addr, stop, task })
    }
}

/// A running OTLP/gRPC server.
pub struct GrpcHandle {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl GrpcHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint an exporter is given (`http://ADDR`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

struct Traces {
    rt: Runtime,
}

/// Auth and tenancy as the HTTP routes: `authorization: Bearer KEY` when the runtime has
/// keys, a key bound to projects acting only for them; `x-codespar-project` the tenant.
fn tenant_of(rt: &Runtime, metadata: &MetadataMap) -> Result<String, Status> {
    let tenant = match metadata.get("x-codespar-project") {
        None => DEFAULT_TENANT.to_owned(),
        Some(value) => {
            let text = value
                .to_str()
                .map_err(|_| Status::invalid_argument("x-codespar-project is not visible ASCII"))?;
            let text = text.trim();
            if text.is_empty() {
                DEFAULT_TENANT.to_owned()
            } else {
                text.to_owned()
            }
        }
    };
    let config = &rt.inner.config;
    if config.api_keys.is_empty() {
        return Ok(tenant);
    }
    let key = metadata
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .ok_or_else(|| Status::unauthenticated("send authorization: Bearer <key>"))?;
    if !config.api_keys.iter().any(|k| k == key) {
        return Err(Status::unauthenticated(
            "the key is not one this runtime accepts",
        ));
    }
    if let Some((_, projects)) = config.key_projects.iter().find(|(k, _)| k == key)
        && !projects.contains(&tenant)
    {
        return Err(Status::permission_denied(format!(
            "this key acts for {} only",
            projects.join(", ")
        )));
    }
    Ok(tenant)
}

#[tonic::async_trait]
impl TraceService for Traces {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let tenant = tenant_of(&self.rt, request.metadata())?;
        let (spans, rejected) = decode::flatten(request.into_inner());
        self.rt.ingest_spans(&tenant, spans);
        self.rt
            .committed()
            .await
            .map_err(|err| Status::unavailable(err.error.message))?;
        Ok(Response::new(decode::response(&rejected)))
    }
}
