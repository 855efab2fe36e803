//! The `otel` figure: OTLP/protobuf export requests decoded and folded into sessions
//! (decode, map, assemble, emit into a runtime's event log), against decoding the same
//! bytes alone in the same run; and the bytes the runtime retains per span. The requests
//! are the ones real producers sent (`Workload::Captured`); `Workload::Minimal` is a
//! smaller synthetic set, measured beside it.

use super::{Figure, median};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use spyglass::otel::decode::{self, Encoding};
use spyglass::runtime::{Runtime, RuntimeConfig};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Spans per trace of `minimal`: an agent run with two model calls and a tool call
/// between them.
pub const SPANS_PER_TRACE: usize = 4;

pub struct OtelResult {
    pub spans: usize,
    /// Export requests folded per round.
    pub requests: usize,
    /// Spans/s decoded and folded into sessions (median of the rounds).
    pub rate: f64,
    /// Spans/s of `ExportTraceServiceRequest` decoding alone.
    pub baseline: f64,
    /// Events the spans made in the runtime's log, last round.
    pub events: usize,
    /// Bytes the runtime's budget counts per span, last round.
    pub bytes_per_span: f64,
    /// How much the process's resident size grew a span while a round's runtime took its
    /// spans, the most of any round (0 where `/proc` has none); a process's first round
    /// grows it, later ones reuse what the round before freed.
    pub resident_per_span: f64,
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

/// The requests a figure folds: built a batch at a time, just before the batch is timed,
/// so each side reads bodies the size of a few exports from cache, as a server reads a
/// body it has just received (not hundreds of MiB from memory, which would slow decoding
/// alone as much as the fold and flatter the ratio).
pub enum Workload {
    /// The agent runs real producers exported, as captured in `tests/fixtures/otel` (see
    /// its README): a Pydantic AI agent over OTLP/protobuf (5 spans in 3 requests) and a
    /// Vercel AI SDK agent (6 spans in 3 requests, sent as JSON, written here as the
    /// protobuf the SDK's protobuf exporter sends for the same spans). Each copy of each
    /// run has its own trace ids and conversation ids, so it is sessions of its own, as
    /// another agent's run would be; attributes, messages, tool arguments and exceptions
    /// are as the producers sent them.
    Captured(Vec<Vec<ExportTraceServiceRequest>>),
    /// One synthetic request per trace (`minimal_request`).
    Minimal,
}

impl Workload {
    pub fn captured() -> anyhow::Result<Workload> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/otel");
        let mut runs = Vec::new();
        for (producer, files, encoding) in [
            ("pydantic", ["01.pb", "02.pb", "03.pb"], Encoding::Protobuf),
            ("vercel", ["01.json", "02.json", "03.json"], Encoding::Json),
        ] {
            let mut run = Vec::new();
            for file in files {
                let path = dir.join(producer).join(file);
                let body =
                    std::fs::read(&path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                run.push(decode::decode_request(&body, encoding)?);
            }
            runs.push(run);
        }
        Ok(Workload::Captured(runs))
    }

    /// Copies a batch: a captured copy is both producers' runs, a minimal one a trace.
    pub fn batch_copies(&self) -> usize {
        match self {
            Workload::Captured(_) => 32,
            Workload::Minimal => 1_000,
        }
    }

    /// Copies `first..first + count`, and the spans they hold.
    pub fn batch(&self, first: usize, count: usize) -> (Vec<Vec<u8>>, usize) {
        match self {
            Workload::Captured(runs) => {
                let mut bodies = Vec::new();
                let mut spans = 0;
                for copy in first..first + count {
                    for request in runs.iter().flatten() {
                        let mut request = request.clone();
                        for span in request
                            .resource_spans
                            .iter_mut()
                            .flat_map(|r| &mut r.scope_spans)
                            .flat_map(|s| &mut s.spans)
                        {
                            renumber(span, copy);
                            spans += 1;
                        }
                        bodies.push(request.encode_to_vec());
                    }
                }
                (bodies, spans)
            }
            Workload::Minimal => (
                (first..first + count).map(minimal_request).collect(),
                count * SPANS_PER_TRACE,
            ),
        }
    }

    /// All copies `0..count` in one list (the criterion comparison).
    pub fn all(&self, count: usize) -> (Vec<Vec<u8>>, usize) {
        self.batch(0, count)
    }
}

/// Gives `span` the trace id and conversation id of copy `copy` of its run.
fn renumber(span: &mut Span, copy: usize) {
    let tail = span.trace_id.len().saturating_sub(8);
    for (byte, with) in span.trace_id[tail..]
        .iter_mut()
        .zip((copy as u64 + 1).to_be_bytes())
    {
        *byte ^= with;
    }
    for kv in &mut span.attributes {
        if kv.key == "gen_ai.conversation.id"
            && let Some(AnyValue {
                value: Some(Value::StringValue(id)),
            }) = &mut kv.value
        {
            id.push_str(&format!("-{copy}"));
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

/// Trace `t` as one request, children first and the root last, as GenAI-convention
/// spans with the attributes Pydantic AI sends but for its messages, tool definitions and
/// exceptions: a few hundred bytes a span where the captured runs hold several thousand.
pub fn minimal_request(t: usize) -> Vec<u8> {
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
/// (`decode::decode_spans`: prost into the generated types, flattened, read through the
/// conventions).
pub fn decode_and_fold(rt: &Runtime, bodies: &[Vec<u8>]) -> anyhow::Result<usize> {
    let mut spans = 0;
    for body in bodies {
        let (flat, rejected) = decode::decode_spans(body, Encoding::Protobuf)?;
        anyhow::ensure!(rejected.is_empty(), "rejected spans: {rejected:?}");
        spans += rt.ingest_spans("default", flat).spans;
    }
    Ok(spans)
}

/// Decode alone and decode + fold of `copies` copies of `workload`, `rounds` pairs back to
/// back, each fold into a fresh runtime that retains every event (no eviction). A round
/// builds its requests a batch at a time and times each side on the batch just built.
pub fn run(workload: &Workload, copies: usize, rounds: usize) -> anyhow::Result<OtelResult> {
    let epoch = Instant::now();
    run_timed(workload, copies, rounds, &|| epoch.elapsed())
}

/// `run`, each side timed by `clock` (the wall clock, or this thread's CPU time).
pub fn run_timed(
    workload: &Workload,
    copies: usize,
    rounds: usize,
    clock: &dyn Fn() -> Duration,
) -> anyhow::Result<OtelResult> {
    rounds_of(workload, copies, rounds, clock, None)
}

/// `run` in a runtime that has reached its default bounds: one runtime with the default
/// settings first takes `warm` copies, then every round folds copies it has not seen, so
/// each event it keeps evicts one and each new session one the assembler forgets.
pub fn run_steady(
    workload: &Workload,
    warm: usize,
    copies: usize,
    rounds: usize,
) -> anyhow::Result<OtelResult> {
    let rt = Runtime::new(RuntimeConfig::default());
    let mut first = 0;
    while first < warm {
        let count = workload.batch_copies().min(warm - first);
        let (bodies, _) = workload.batch(first, count);
        decode_and_fold(&rt, &bodies)?;
        first += count;
    }
    let epoch = Instant::now();
    rounds_of(
        workload,
        copies,
        rounds,
        &|| epoch.elapsed(),
        Some((&rt, warm)),
    )
}

/// The rounds of `run_timed`, each into a fresh runtime that keeps every event, or into
/// `steady`'s runtime from its copy number on.
fn rounds_of(
    workload: &Workload,
    copies: usize,
    rounds: usize,
    clock: &dyn Fn() -> Duration,
    steady: Option<(&Runtime, usize)>,
) -> anyhow::Result<OtelResult> {
    let (mut base, mut full, mut paired) = (Vec::new(), Vec::new(), Vec::new());
    let (mut spans, mut requests, mut events) = (0, 0, 0);
    let (mut bytes_per_span, mut resident_per_span) = (0.0, 0.0);
    for round in 0..rounds.max(1) {
        let before = resident();
        let (rt, from) = match steady {
            Some((rt, warm)) => (rt.clone(), warm + round * copies),
            None => (
                Runtime::new(RuntimeConfig {
                    retained_events: copies * 64 + 10,
                    ..RuntimeConfig::default()
                }),
                0,
            ),
        };
        let (mut decoding, mut folding) = (Duration::ZERO, Duration::ZERO);
        (spans, requests) = (0, 0);
        let mut first = 0;
        while first < copies {
            let count = workload.batch_copies().min(copies - first);
            let (bodies, batch_spans) = workload.batch(from + first, count);
            first += count;
            let started = clock();
            anyhow::ensure!(decode_only(&bodies)? == batch_spans, "decoded every span");
            decoding += clock().saturating_sub(started);
            let started = clock();
            anyhow::ensure!(
                decode_and_fold(&rt, &bodies)? == batch_spans,
                "folded every span"
            );
            folding += clock().saturating_sub(started);
            spans += batch_spans;
            requests += bodies.len();
        }
        let (b, f) = (
            spans as f64 / decoding.as_secs_f64(),
            spans as f64 / folding.as_secs_f64(),
        );
        base.push(b);
        full.push(f);
        paired.push(f / b);
        events = rt.stats().retained;
        bytes_per_span = rt.budget_stats().retained_bytes as f64 / spans as f64;
        // The first round's: later ones reuse what the one before freed.
        resident_per_span = f64::max(
            resident_per_span,
            resident().saturating_sub(before) as f64 / spans as f64,
        );
    }
    Ok(OtelResult {
        spans,
        requests,
        resident_per_span,
        rate: median(&mut full),
        baseline: median(&mut base),
        paired,
        events,
        bytes_per_span,
    })
}

/// The process's resident size in bytes (`VmRSS`), 0 where `/proc` has none.
fn resident() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}
