//! The `otel` figure: OTLP/protobuf export requests decoded and folded into sessions
//! (decode, map, assemble, emit into a runtime's event log), against decoding the same
//! bytes alone in the same run; and the bytes the runtime retains per span.

use super::{Figure, median};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use spyglass::otel::decode::{self, Encoding};
use spyglass::runtime::{Runtime, RuntimeConfig};
use std::hint::black_box;
use std::time::Instant;

/// Spans per trace: an agent run with two model calls and a tool call between them.
pub const SPANS_PER_TRACE: usize = 4;

pub struct OtelResult {
    pub spans: usize,
    /// Spans/s decoded and folded into sessions (median of the rounds).
    pub rate: f64,
    /// Spans/s of `ExportTraceServiceRequest` decoding alone.
    pub baseline: f64,
    /// Events the spans made in the runtime's log, last round.
    pub events: usize,
    /// Bytes the runtime's budget counts per span, last round.
    pub bytes_per_span: f64,
    /// Decode-and-fold rate over decode-alone rate, per round (each pair back to back).
    pub paired: Vec<f64>,
}

impl OtelResult {
    pub fn figure(&self) -> Figure {
        Figure {
            name: "otel",
            value: self.rate,
            baseline: self.baseline,
            unit: "spans/s",
            paired: self.paired.clone(),
        }
    }
}

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

fn s(text: &str) -> Value {
    Value::StringValue(text.to_owned())
}

/// One request per trace, children first and the root last, as GenAI-convention spans
/// with the attributes Pydantic AI sends (messages left out: they dominate neither side).
pub fn requests(traces: usize) -> Vec<Vec<u8>> {
    (0..traces)
        .map(|t| {
            let trace_id = (t as u128 + 1).to_be_bytes().to_vec();
            let id = |n: u64| (t as u64 * 8 + n).to_be_bytes().to_vec();
            let span = |n: u64, parent: Option<u64>, name: &str, attributes: Vec<KeyValue>| Span {
                trace_id: trace_id.clone(),
                span_id: id(n),
                parent_span_id: parent.map(id).unwrap_or_default(),
                name: name.to_owned(),
                start_time_unix_nano: 1_700_000_000_000_000_000 + n * 1_000_000,
                end_time_unix_nano: 1_700_000_000_000_000_000 + n * 1_000_000 + 500_000,
                attributes,
                ..Span::default()
            };
            let chat = |n: u64| {
                span(
                    n,
                    Some(1),
                    "chat gpt-test",
                    vec![
                        kv("gen_ai.operation.name", s("chat")),
                        kv("gen_ai.agent.name", s("bench_agent")),
                        kv("gen_ai.provider.name", s("openai")),
                        kv("gen_ai.request.model", s("gpt-test")),
                        kv("gen_ai.response.model", s("gpt-test")),
                        kv("gen_ai.usage.input_tokens", Value::IntValue(120)),
                        kv("gen_ai.usage.output_tokens", Value::IntValue(30)),
                        kv("gen_ai.response.finish_reasons", s("tool_calls")),
                    ],
                )
            };
            let spans = vec![
                chat(2),
                span(
                    3,
                    Some(1),
                    "execute_tool lookup",
                    vec![
                        kv("gen_ai.operation.name", s("execute_tool")),
                        kv("gen_ai.tool.name", s("lookup")),
                        kv("gen_ai.tool.call.id", s(&format!("call_{t}"))),
                        kv(
                            "gen_ai.tool.call.arguments",
                            s(r#"{"city":"Oslo","units":"C"}"#),
                        ),
                        kv("gen_ai.tool.call.result", s(r#"{"temp":21,"sky":"clear"}"#)),
                    ],
                ),
                chat(4),
                span(
                    1,
                    None,
                    "invoke_agent bench_agent",
                    vec![
                        kv("gen_ai.operation.name", s("invoke_agent")),
                        kv("gen_ai.agent.name", s("bench_agent")),
                    ],
                ),
            ];
            ExportTraceServiceRequest {
                resource_spans: vec![ResourceSpans {
                    resource: Some(Resource {
                        attributes: vec![kv("service.name", s("bench"))],
                        ..Resource::default()
                    }),
                    scope_spans: vec![ScopeSpans {
                        spans,
                        ..ScopeSpans::default()
                    }],
                    ..ResourceSpans::default()
                }],
            }
            .encode_to_vec()
        })
        .collect()
}

/// Decoding alone: the generated types off the bytes.
pub fn decode_only(bodies: &[Vec<u8>]) -> anyhow::Result<usize> {
    let mut spans = 0;
    for body in bodies {
        let request = decode::decode_request(body, Encoding::Protobuf)?;
        spans += request
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum::<usize>();
        black_box(request);
    }
    Ok(spans)
}

/// Reading the spans off the bytes and folding them into `rt`, as `POST /v1/traces` does
/// (`decode::decode_spans`: protobuf straight into spans, read through the conventions).
pub fn decode_and_fold(rt: &Runtime, bodies: &[Vec<u8>]) -> anyhow::Result<usize> {
    let mut spans = 0;
    for body in bodies {
        let (flat, rejected) = decode::decode_spans(body, Encoding::Protobuf)?;
        anyhow::ensure!(rejected.is_empty(), "rejected spans: {rejected:?}");
        spans += rt.ingest_spans("default", flat).spans;
    }
    Ok(spans)
}

pub fn run(traces: usize, rounds: usize) -> anyhow::Result<OtelResult> {
    let bodies = requests(traces);
    let spans = traces * SPANS_PER_TRACE;
    let (mut base, mut full, mut paired) = (Vec::new(), Vec::new(), Vec::new());
    let mut events = 0;
    let mut bytes_per_span = 0.0;
    for _ in 0..rounds.max(1) {
        let started = Instant::now();
        anyhow::ensure!(decode_only(&bodies)? == spans, "decoded every span");
        base.push(spans as f64 / started.elapsed().as_secs_f64());
        let rt = Runtime::new(RuntimeConfig {
            retained_events: spans * 2 + 10,
            ..RuntimeConfig::default()
        });
        let started = Instant::now();
        anyhow::ensure!(decode_and_fold(&rt, &bodies)? == spans, "folded every span");
        full.push(spans as f64 / started.elapsed().as_secs_f64());
        if let (Some(b), Some(f)) = (base.last(), full.last())
            && *b > 0.0
        {
            paired.push(f / b);
        }
        events = rt.stats().retained;
        bytes_per_span = rt.budget_stats().retained_bytes as f64 / spans as f64;
    }
    Ok(OtelResult {
        spans,
        rate: median(&mut full),
        baseline: median(&mut base),
        paired,
        events,
        bytes_per_span,
    })
}
