//! OpenTelemetry spans into the runtime: the one ingest path `POST /v1/traces` and OTLP/gRPC
//! share, and the gRPC server on its own port (`serve --otlp-grpc-addr`, tonic, `otlp-grpc`).

use super::{Runtime, lock};
use crate::otel::map::ReadSpans;
#[cfg(feature = "otlp-grpc")]
pub use grpc::GrpcHandle;
#[cfg(not(feature = "otlp-grpc"))]
use std::net::SocketAddr;
use thiserror::Error;

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
}

/// Why `serve_otlp_grpc` cannot serve in a build without the `otlp-grpc` feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error(
    "OTLP/gRPC is not in this build of spyglass (it was built without the `otlp-grpc` \
     feature); export to POST /v1/traces (OTLP/HTTP) on the runtime's address, or rebuild \
     with the feature"
)]
pub struct GrpcUnavailable;

/// No server in a build without `otlp-grpc`: `serve_otlp_grpc` refuses with
/// `GrpcUnavailable`, so no handle is ever made.
#[cfg(not(feature = "otlp-grpc"))]
pub struct GrpcHandle {
    never: std::convert::Infallible,
}

#[cfg(not(feature = "otlp-grpc"))]
impl GrpcHandle {
    pub fn addr(&self) -> SocketAddr {
        match self.never {}
    }

    /// The endpoint an exporter is given (`http://ADDR`).
    pub fn url(&self) -> String {
        match self.never {}
    }

    #[allow(
        clippy::unused_async,
        reason = "the server's handle is awaited the same way"
    )]
    pub async fn shutdown(self) {
        match self.never {}
    }
}

#[cfg(not(feature = "otlp-grpc"))]
impl Runtime {
    /// Refuses: this build has no OTLP/gRPC server (`GrpcUnavailable`, as an
    /// `ErrorKind::Unsupported` I/O error).
    #[allow(
        clippy::unused_async,
        clippy::unused_self,
        reason = "the same signature as the server's"
    )]
    pub async fn serve_otlp_grpc(&self, _addr: SocketAddr) -> std::io::Result<GrpcHandle> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            GrpcUnavailable,
        ))
    }
}

#[cfg(feature = "otlp-grpc")]
mod grpc {
    //! The OTLP/gRPC `TraceService` server on its own port (tonic), auth and tenancy as
    //! the HTTP routes.

    use super::super::{DEFAULT_TENANT, Runtime};
    use crate::otel::decode;
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
                let text = value.to_str().map_err(|_| {
                    Status::invalid_argument("x-codespar-project is not visible ASCII")
                })?;
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
}
