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
    //! The OTLP/gRPC `TraceService` server on its own port (tonic): the HTTP server's
    //! connection caps and header timeout, and its auth and tenancy rules.

    use super::super::Runtime;
    use crate::ApiErrorWithStatus;
    use crate::http::guard::acting_tenant;
    use crate::otel::decode;
    use crate::server::MAX_HEAD_BYTES;
    use crate::server::listen::{self, Admission, Busy, Conn, ConnLimits, Socket};
    use axum::http;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
        TraceService, TraceServiceServer,
    };
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    use std::convert::Infallible;
    use std::future::Future;
    use std::net::SocketAddr;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};
    use std::time::Duration;
    use tokio::net::TcpListener;
    use tokio::sync::oneshot;
    use tokio::task::JoinHandle;
    use tonic::codec::CompressionEncoding;
    use tonic::transport::server::Connected;
    use tonic::{Code, Request, Response, Status};

    impl Runtime {
        /// Serves OTLP/gRPC `TraceService/Export` on `addr` until the handle is shut down,
        /// its connections capped and timed out as the HTTP server's are.
        pub async fn serve_otlp_grpc(&self, addr: SocketAddr) -> std::io::Result<GrpcHandle> {
            let listener = TcpListener::bind(addr).await?;
            let addr = listener.local_addr()?;
            let limits = ConnLimits::of(&self.inner.config);
            let service = TraceServiceServer::new(Traces { rt: self.clone() })
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(limits.max_body_bytes);
            let gate = Gate {
                rt: self.clone(),
                inner: service,
            };
            let (stop, stopped) = oneshot::channel::<()>();
            let admission = Admission::new(limits);
            let incoming = admitted(listener, admission.clone(), limits.header_timeout);
            let task = tokio::spawn(async move {
                let served = tonic::transport::Server::builder()
                    .http2_max_header_list_size(u32::try_from(MAX_HEAD_BYTES).unwrap_or(u32::MAX))
                    .serve_with_incoming_shutdown(gate, incoming, async {
                        let _ = stopped.await;
                    })
                    .await;
                if let Err(err) = served {
                    tracing::error!(%err, "otlp grpc server stopped");
                }
            });
            Ok(GrpcHandle {
                addr,
                admission,
                stop,
                task,
            })
        }
    }

    /// The sockets `listener` accepts that `admission`'s caps admit (a newcomer closing the
    /// idlest when one is reached), each closed once idle for `header_timeout`; one with
    /// every slot busy is closed at once.
    fn admitted(
        listener: TcpListener,
        admission: Arc<Admission>,
        header_timeout: Duration,
    ) -> impl futures_util::Stream<Item = Result<Socket, Infallible>> {
        futures_util::stream::unfold(
            (listener, admission),
            move |(listener, admission)| async move {
                loop {
                    let (stream, remote) = listen::accept(&listener).await;
                    let Some(admitted) = admission.admit(remote.ip()) else {
                        tracing::debug!(%remote, "otlp grpc connection refused: every slot busy");
                        continue;
                    };
                    let socket = Socket::new(stream, admitted, header_timeout).closing_when_idle();
                    return Some((Ok(socket), (listener, admission)));
                }
            },
        )
    }

    /// The connection a request came on, as the caps' table sees it.
    #[derive(Clone)]
    pub(crate) struct Peer(Arc<Conn>);

    impl Connected for Socket {
        type ConnectInfo = Peer;

        fn connect_info(&self) -> Peer {
            Peer(self.conn().clone())
        }
    }

    /// The tenant a request was let in for.
    #[derive(Clone)]
    struct Acting(String);

    /// In front of the generated server: every request busies its connection, passes the
    /// HTTP routes' auth and tenancy before its message is read, and has tonic's answers to
    /// an unreadable or oversized message made `INVALID_ARGUMENT`, which exporters do not
    /// retry (tonic answers `INTERNAL` and `OUT_OF_RANGE`, which they do).
    #[derive(Clone)]
    struct Gate {
        rt: Runtime,
        inner: TraceServiceServer<Traces>,
    }

    type Answer = http::Response<tonic::body::Body>;

    impl tower_service::Service<http::Request<tonic::body::Body>> for Gate {
        type Response = Answer;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            tower_service::Service::<http::Request<tonic::body::Body>>::poll_ready(
                &mut self.inner,
                cx,
            )
        }

        fn call(&mut self, mut req: http::Request<tonic::body::Body>) -> Self::Future {
            let busy = req
                .extensions()
                .get::<Peer>()
                .map(|p| Busy::new(p.0.clone()));
            let acting = acting_tenant(&self.rt.inner.config, req.headers());
            let limit = self.rt.inner.config.max_body_bytes;
            // The service made ready is the one called; a clone waits for the next.
            let ready = self.inner.clone();
            let mut inner = std::mem::replace(&mut self.inner, ready);
            Box::pin(async move {
                let _busy = busy;
                match acting {
                    Ok(tenant) => {
                        req.extensions_mut().insert(Acting(tenant));
                    }
                    Err(refusal) => return Ok(refused(refusal).into_http()),
                }
                let answer = tower_service::Service::call(&mut inner, req).await?;
                Ok(unreadable_is_invalid(answer, limit))
            })
        }
    }

    /// An HTTP route's refusal in gRPC's codes: 400 `INVALID_ARGUMENT`, 401
    /// `UNAUTHENTICATED`, 403 and 404 (a bound key naming another project)
    /// `PERMISSION_DENIED`.
    fn refused(refusal: ApiErrorWithStatus) -> Status {
        let message = refusal.error.message;
        match refusal.status {
            401 => Status::unauthenticated(message),
            403 | 404 => Status::permission_denied(message),
            _ => Status::invalid_argument(message),
        }
    }

    /// `answer`, or `INVALID_ARGUMENT` saying what was wrong when tonic refused the message
    /// before the handler saw it: `INTERNAL` (not protobuf, not an export request, bad
    /// framing or gzip), `OUT_OF_RANGE` or `RESOURCE_EXHAUSTED` (over `limit` bytes, as sent
    /// or unzipped). The handler itself answers none of these codes.
    fn unreadable_is_invalid(answer: Answer, limit: usize) -> Answer {
        let Some(status) = Status::from_header_map(answer.headers()) else {
            return answer;
        };
        let message = match status.code() {
            Code::Internal => format!(
                "the request is not an OTLP ExportTraceServiceRequest: {}",
                status.message()
            ),
            Code::OutOfRange | Code::ResourceExhausted => format!(
                "the export request is over the runtime's {limit}-byte limit (--max-body-bytes): {}",
                status.message()
            ),
            _ => return answer,
        };
        Status::invalid_argument(message).into_http()
    }

    /// A running OTLP/gRPC server.
    pub struct GrpcHandle {
        addr: SocketAddr,
        admission: Arc<Admission>,
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

        /// Stops accepting, closes the connections with no export in flight and waits for
        /// the others to finish theirs.
        pub async fn shutdown(self) {
            let _ = self.stop.send(());
            self.admission.close_idle();
            let _ = self.task.await;
        }
    }

    struct Traces {
        rt: Runtime,
    }

    #[tonic::async_trait]
    impl TraceService for Traces {
        async fn export(
            &self,
            request: Request<ExportTraceServiceRequest>,
        ) -> Result<Response<ExportTraceServiceResponse>, Status> {
            // `Gate` let the request in for its tenant; without it, the same rules here.
            let tenant = match request.extensions().get::<Acting>() {
                Some(Acting(tenant)) => tenant.clone(),
                None => acting_tenant(&self.rt.inner.config, request.metadata().as_ref())
                    .map_err(refused)?,
            };
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
