//! The OTLP decoder, mapper and assembler on hand-built requests and on the captured
//! fixtures of real exporters. Compiled only under `#[cfg(test)]` (see `otel/mod.rs`).

use super::decode::{self, Encoding};
use super::*;
use serde_json::json;

const TRACE: &str = "5b8efff798038103d269b633813fc60c";

fn attr(key: &str, value: serde_json::Value) -> serde_json::Value {
    let any = match value {
        serde_json::Value::String(s) => json!({"stringValue": s}),
        serde_json::Value::Bool(b) => json!({"boolValue": b}),
        // Real exporters send int64 as a string (proto3 JSON) or as a number.
        serde_json::Value::Number(n) if n.is_i64() => json!({"intValue": n.to_string()}),
        serde_json::Value::Number(n) => json!({"doubleValue": n}),
        serde_json::Value::Array(items) => json!({"arrayValue": {"values":
            items.into_iter().map(|s| json!({"stringValue": s})).collect::<Vec<_>>()}}),
        other => other,
    };
    json!({"key": key, "value": any})
}

fn span(
    id: &str,
    parent: Option<&str>,
    name: &str,
    start_ms: u64,
    end_ms: u64,
    attrs: &[(&str, serde_json::Value)],
) -> serde_json::Value {
    let mut s = json!({
        "traceId": TRACE,
        "spanId": id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": (start_ms * 1_000_000).to_string(),
        "endTimeUnixNano": end_ms * 1_000_000,
        "attributes": attrs.iter().map(|(k, v)| attr(k, v.clone())).collect::<Vec<_>>(),
        "status": {},
    });
    if let Some(parent) = parent {
        s["parentSpanId"] = json!(parent);
    }
    s
}

fn request(spans: Vec<serde_json::Value>) -> Vec<u8> {
    let spans = serde_json::Value::Array(spans);
    serde_json::to_vec(&json!({"resourceSpans": [{
        "resource": {"attributes": [attr("service.name", json!("weather-bot"))]},
        "scopeSpans": [{"scope": {"name": "ai"}, "spans": spans}],
    }]}))
    .unwrap()
}

fn spans_of(body: &[u8]) -> Vec<SpanIn> {
    let req = decode::decode_request(body, Encoding::Json).unwrap();
    let (spans, rejected) = decode::flatten(req);
    assert!(rejected.is_empty(), "{rejected:?}");
    spans
}

fn kinds(emits: &[Emit]) -> Vec<&str> {
    emits.iter().map(|e| e.event.kind()).collect()
}

/// A Vercel AI SDK run: two model calls, a tool between them, the root last.
fn vercel_children() -> Vec<serde_json::Value> {
    vec![
        span(
            "00f067aa0ba902b1",
            Some("00f067aa0ba902b0"),
            "ai.generateText.doGenerate",
            1000,
            1010,
            &[
                ("ai.operationId", json!("ai.generateText.doGenerate")),
                ("ai.model.id", json!("mock-model-id")),
                ("ai.model.provider", json!("mock-provider")),
                ("ai.usage.inputTokens", json!(10)),
                ("ai.usage.outputTokens", json!(5)),
                ("ai.response.finishReason", json!("tool-calls")),
            ],
        ),
        span(
            "00f067aa0ba902b2",
            Some("00f067aa0ba902b0"),
            "ai.toolCall",
            1010,
            1013,
            &[
                ("ai.operationId", json!("ai.toolCall")),
                ("ai.toolCall.name", json!("weather")),
                ("ai.toolCall.id", json!("call-1")),
                ("ai.toolCall.args", json!("{\"city\":\"Oslo\"}")),
                ("ai.toolCall.result", json!("{\"temp\":21}")),
            ],
        ),
        span(
            "00f067aa0ba902b3",
            Some("00f067aa0ba902b0"),
            "ai.generateText.doGenerate",
            1013,
            1020,
            &[
                ("ai.operationId", json!("ai.generateText.doGenerate")),
                ("ai.model.id", json!("mock-model-id")),
                ("ai.usage.inputTokens", json!(20)),
                ("ai.usage.outputTokens", json!(7)),
                ("ai.response.finishReason", json!("stop")),
            ],
        ),
    ]
}

fn vercel_root() -> serde_json::Value {
    span(
        "00f067aa0ba902b0",
        None,
        "ai.generateText",
        1000,
        1020,
        &[
            ("ai.operationId", json!("ai.generateText")),
            ("ai.model.id", json!("mock-model-id")),
            ("ai.telemetry.functionId", json!("weather-agent")),
            ("ai.usage.inputTokens", json!(30)),
            ("ai.usage.outputTokens", json!(12)),
        ],
    )
}

#[test]
fn a_trace_across_two_requests_is_one_session_shown_from_its_first_span() {
    let mut asm = Assembler::new(1 << 20);
    let (first, stats) = asm.ingest("default", spans_of(&request(vercel_children())));
    assert_eq!(
        kinds(&first),
        [
            "session.created",
            "agent.step.completed",
            "tool.called",
            "agent.step.completed"
        ]
    );
    assert_eq!((stats.steps, stats.calls, stats.runs), (2, 1, 0));
    assert!(first.iter().all(|e| e.session_id == TRACE));
    let Event::SessionCreated(created) = &first[0].event else {
        panic!()
    };
    assert_eq!(created.metadata["source"], "opentelemetry");
    assert_eq!(created.metadata["service"], "weather-bot");
    let Event::ToolCalled(call) = &first[2].event else {
        panic!()
    };
    assert_eq!(call.call_id, "call-1");
    assert_eq!(call.tool, "weather");
    assert_eq!(call.input.get(), r#"{"city":"Oslo"}"#);
    assert_eq!(
        call.outcome,
        Outcome::Result(RawJson::from_text(r#"{"temp":21}"#).unwrap())
    );
    assert_eq!(call.duration, 3.0);
    assert_eq!(call.iteration, Some(1));
    let Event::AgentStepCompleted(step) = &first[3].event else {
        panic!()
    };
    assert_eq!(step.iteration, 2);
    assert_eq!(step.step.tokens.total, 27);
    assert_eq!(step.tokens.total, 42, "cumulative over the session");
    assert_eq!(step.step.finish_reason, "stop");
    assert_eq!(asm.stats().pending_traces, 1);

    // The root comes alone, later: the run ends, no second session.
    let (second, _) = asm.ingest("default", spans_of(&request(vec![vercel_root()])));
    assert_eq!(kinds(&second), ["agent.completed"]);
    let Event::AgentCompleted(run) = &second[0].event else {
        panic!()
    };
    assert_eq!(run.agent_name, "weather-agent");
    assert_eq!(run.model, "mock-model-id");
    assert_eq!(run.provider, "mock-provider");
    assert_eq!(run.tokens.prompt, 30);
    assert_eq!(run.tokens.completion, 12);
    assert_eq!(run.duration, 20.0);

    // A model call that comes after its root (batches flushed at once) is placed after
    // the run, whose total then counts it.
    let late = span(
        "00f067aa0ba902b9",
        Some("00f067aa0ba902b0"),
        "ai.generateText.doGenerate",
        1015,
        1019,
        &[
            ("ai.operationId", json!("ai.generateText.doGenerate")),
            ("ai.usage.inputTokens", json!(1)),
            ("ai.usage.outputTokens", json!(1)),
        ],
    );
    let (third, _) = asm.ingest("default", spans_of(&request(vec![late])));
    assert_eq!(kinds(&third), ["agent.step.completed", "agent.completed"]);
    assert!(
        third.iter().all(|e| e.session_id == TRACE),
        "the same session"
    );
    let Event::AgentCompleted(run) = &third[1].event else {
        panic!()
    };
    assert_eq!((run.tokens.prompt, run.tokens.completion), (31, 13));
    assert_eq!(run.agent_name, "weather-agent");
}

#[test]
fn a_tool_under_its_model_call_is_claimed_by_that_step_even_arriving_first() {
    let spans = vec![
        span(
            "0000000000000002",
            Some("0000000000000001"),
            "execute_tool lookup",
            5,
            6,
            &[
                ("gen_ai.operation.name", json!("execute_tool")),
                ("gen_ai.tool.name", json!("lookup")),
                ("gen_ai.tool.call.id", json!("t1")),
                ("gen_ai.tool.call.arguments", json!("{\"q\":1}")),
            ],
        ),
        span(
            "0000000000000001",
            Some("0000000000000000"),
            "chat gpt",
            1,
            7,
            &[
                ("gen_ai.operation.name", json!("chat")),
                ("gen_ai.request.model", json!("gpt-x")),
                ("gen_ai.conversation.id", json!("conv-9")),
                ("gen_ai.usage.input_tokens", json!(3)),
                ("gen_ai.usage.output_tokens", json!(4)),
                ("gen_ai.response.finish_reasons", json!(["tool_calls"])),
            ],
        ),
    ];
    let mut asm = Assembler::new(1 << 20);
    let (emits, _) = asm.ingest("t", spans_of(&request(spans)));
    assert_eq!(
        kinds(&emits),
        ["session.created", "tool.called", "agent.step.completed"]
    );
    assert!(
        emits.iter().all(|e| e.session_id == "conv-9"),
        "the conversation is the session"
    );
    let Event::AgentStepCompleted(step) = &emits[2].event else {
        panic!()
    };
    assert_eq!(step.step.tool_calls.len(), 1);
    assert_eq!(step.step.tool_calls[0].id, "t1");
    assert_eq!(step.step.finish_reason, "tool_calls");
    assert_eq!(step.model, "gpt-x");
}

#[test]
fn failures_and_unmatched_spans_are_kept_and_counted() {
    let mut failing = span(
        "0000000000000003",
        Some("0000000000000009"),
        "running tool",
        1,
        2,
        &[
            ("gen_ai.tool.name", json!("explode")),
            ("gen_ai.tool.call.id", json!("c2")),
        ],
    );
    failing["status"] = json!({"code": 2, "message": "boom"});
    failing["events"] = json!([{"name": "exception", "timeUnixNano": "2000000",
        "attributes": [attr("exception.type", json!("RuntimeError"))]}]);
    let plain = span(
        "0000000000000004",
        None,
        "http get",
        0,
        1,
        &[("http.method", json!("GET"))],
    );
    let mut asm = Assembler::new(1 << 20);
    let (emits, stats) = asm.ingest("default", spans_of(&request(vec![failing, plain])));
    assert_eq!(kinds(&emits), ["session.created", "tool.called", SPAN_KIND]);
    let Event::ToolCalled(call) = &emits[1].event else {
        panic!()
    };
    let envelope = call.outcome.envelope().unwrap();
    assert_eq!(envelope.code(), "RuntimeError");
    assert_eq!(envelope.message(), "boom");
    assert_eq!(stats.unmatched, 1);
    assert_eq!(asm.stats().unmatched_spans, 1);
    let Event::Unknown { raw, .. } = &emits[2].event else {
        panic!()
    };
    let raw = raw.to_value();
    assert_eq!(raw["name"], "http get");
    assert_eq!(raw["spanAttributes"]["http.method"], "GET");
}

#[test]
fn pending_traces_stay_within_the_byte_bound() {
    let mut asm = Assembler::new(0);
    let max = asm.max_bytes;
    for i in 0..200u32 {
        let mut s = span(
            &format!("{:016x}", u64::from(i) + 1),
            Some("00000000000000ff"),
            "x",
            0,
            1,
            &[],
        );
        s["traceId"] = json!(format!("{:032x}", u64::from(i) + 1));
        asm.ingest("default", spans_of(&request(vec![s])));
        assert!(asm.stats().pending_bytes <= max);
    }
    assert!(asm.stats().evicted_traces > 0);
}

#[test]
fn strings_from_spans_are_bounded_and_terminal_safe() {
    let long = "a".repeat(decode::MAX_VALUE_BYTES * 2);
    let s = span(
        "0000000000000005",
        None,
        "evil\u{1b}[2Jname",
        0,
        1,
        &[
            ("note", json!(long)),
            ("gen_ai.tool.name", json!("t\u{202e}x")),
        ],
    );
    let spans = spans_of(&request(vec![s]));
    assert_eq!(spans[0].name, "evil\\e[2Jname");
    assert!(spans[0].attributes["note"].as_str().unwrap().len() <= decode::MAX_VALUE_BYTES + 3);
    let mut asm = Assembler::new(1 << 20);
    let (emits, _) = asm.ingest("default", spans);
    let Event::ToolCalled(call) = &emits[1].event else {
        panic!()
    };
    assert!(!call.tool.contains('\u{202e}'));
}

#[test]
fn ids_that_are_not_otlp_ids_are_rejected_by_index() {
    let mut bad = span("0000000000000001", None, "x", 0, 1, &[]);
    bad["traceId"] = json!("");
    let good = span("0000000000000002", None, "y", 0, 1, &[]);
    let req = decode::decode_request(&request(vec![bad, good]), Encoding::Json).unwrap();
    let (spans, rejected) = decode::flatten(req);
    assert_eq!(spans.len(), 1);
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0].reason.starts_with("span 0: trace id"),
        "{rejected:?}"
    );
}

#[test]
fn broken_bodies_say_what_is_wrong() {
    assert!(matches!(
        decode::decode_request(b"\xff\xff\xff", Encoding::Protobuf),
        Err(DecodeError::Protobuf(_))
    ));
    assert!(matches!(
        decode::decode_request(b"{\"resourceSpans\": 3}", Encoding::Json),
        Err(DecodeError::Json(_))
    ));
    assert!(matches!(
        decode::decompress(b"not gzip", Some("gzip"), 100),
        Err(DecodeError::Gzip(_))
    ));
    assert!(matches!(
        decode::decompress(b"x", Some("br"), 100),
        Err(DecodeError::UnsupportedEncoding(_))
    ));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &[b' '; 10_000]).unwrap();
    let bomb = gz.finish().unwrap();
    assert_eq!(
        decode::decompress(&bomb, Some("gzip"), 1000),
        Err(DecodeError::TooLarge { limit: 1000 })
    );
}

fn fixture_requests(dir: &str) -> Vec<Vec<u8>> {
    // The fixtures are the workspace's, shared with the integration tests.
    let dir = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/otel"
    ))
    .join(dir);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x == "pb" || x == "json" || x == "gz")
        })
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn pydantic_ai_export_requests_fold_into_one_failed_run() {
    let mut asm = Assembler::new(1 << 20);
    let mut all = Vec::new();
    for body in fixture_requests("pydantic") {
        let req = decode::decode_request(&body, Encoding::Protobuf).unwrap();
        let (spans, rejected) = decode::flatten(req);
        assert!(rejected.is_empty());
        all.extend(asm.ingest("default", spans).0);
    }
    assert_eq!(
        kinds(&all),
        [
            "session.created",
            "agent.step.completed",
            "tool.called",
            "agent.step.completed",
            "tool.called",
            "agent.failed"
        ]
    );
    let session = &all[0].session_id;
    assert!(
        all.iter().all(|e| &e.session_id == session),
        "the conversation id"
    );
    let Event::ToolCalled(weather) = &all[2].event else {
        panic!()
    };
    assert_eq!(
        (weather.tool.as_str(), weather.iteration),
        ("get_weather", Some(1))
    );
    assert_eq!(weather.input.get(), r#"{"city":"Oslo"}"#);
    let Event::ToolCalled(explode) = &all[4].event else {
        panic!()
    };
    assert_eq!(explode.iteration, Some(2));
    assert_eq!(explode.outcome.envelope().unwrap().code(), "RuntimeError");
    let Event::AgentFailed(run) = &all[5].event else {
        panic!()
    };
    assert_eq!(run.agent_name, "weather_agent");
    assert_eq!((run.tokens.prompt, run.tokens.completion), (23, 14));
    assert_eq!(run.input.to_value(), json!("What is the weather in Oslo?"));
    assert!(
        run.error
            .as_ref()
            .unwrap()
            .get()
            .contains("the explode tool failed")
    );
}

#[test]
fn vercel_ai_sdk_export_requests_fold_into_one_completed_run() {
    let mut asm = Assembler::new(1 << 20);
    let mut all = Vec::new();
    for body in fixture_requests("vercel") {
        let req = decode::decode_request(&body, Encoding::Json).unwrap();
        let (spans, rejected) = decode::flatten(req);
        assert!(rejected.is_empty());
        all.extend(asm.ingest("default", spans).0);
    }
    assert_eq!(
        kinds(&all),
        [
            "session.created",
            "agent.step.completed",
            "tool.called",
            "agent.step.completed",
            "tool.called",
            "agent.step.completed",
            "agent.completed"
        ]
    );
    let Event::ToolCalled(explode) = &all[4].event else {
        panic!()
    };
    assert_eq!(explode.iteration, Some(2));
    assert_eq!(explode.outcome.envelope().unwrap().code(), "Error");
    assert_eq!(
        explode.outcome.envelope().unwrap().message(),
        "the explode tool failed: test"
    );
    let Event::AgentCompleted(run) = &all[6].event else {
        panic!()
    };
    assert_eq!(run.agent_name, "weather-agent");
    assert_eq!((run.tokens.prompt, run.tokens.completion), (60, 18));
    assert_eq!(run.input.to_value(), json!("What is the weather in Oslo?"));
    assert_eq!(run.output.to_value(), json!("It is 21 C in Oslo."));
}

// Spans as OpenInference (OpenAI Agents, LlamaIndex) and OpenLLMetry (LangChain via
// traceloop) send them: the same session, step, call and run.
#[test]
fn openinference_and_openllmetry_spans_map_like_genai_ones() {
    let openinference = vec![
        span(
            "0000000000000012",
            Some("0000000000000011"),
            "ChatCompletion",
            1,
            4,
            &[
                ("openinference.span.kind", json!("LLM")),
                ("llm.model_name", json!("gpt-4o-mini")),
                ("llm.token_count.prompt", json!(40)),
                ("llm.token_count.completion", json!(9)),
                ("session.id", json!("oi-session")),
            ],
        ),
        span(
            "0000000000000013",
            Some("0000000000000011"),
            "search",
            4,
            6,
            &[
                ("openinference.span.kind", json!("TOOL")),
                ("tool.name", json!("search")),
                ("input.value", json!("{\"q\":\"otel\"}")),
                ("output.value", json!("found it")),
            ],
        ),
        span(
            "0000000000000011",
            None,
            "Agent workflow",
            0,
            7,
            &[
                ("openinference.span.kind", json!("AGENT")),
                ("agent.name", json!("researcher")),
                ("input.value", json!("find otel")),
                ("output.value", json!("done")),
            ],
        ),
    ];
    let mut asm = Assembler::new(1 << 20);
    let (emits, stats) = asm.ingest("default", spans_of(&request(openinference)));
    assert_eq!(
        kinds(&emits),
        [
            "session.created",
            "agent.step.completed",
            "tool.called",
            "agent.completed"
        ]
    );
    assert_eq!(stats.unmatched, 0);
    assert!(emits.iter().all(|e| e.session_id == "oi-session"));
    let Event::AgentStepCompleted(step) = &emits[1].event else {
        panic!()
    };
    assert_eq!(
        (step.model.as_str(), step.step.tokens.total),
        ("gpt-4o-mini", 49)
    );
    let Event::ToolCalled(call) = &emits[2].event else {
        panic!()
    };
    assert_eq!(call.tool, "search");
    assert_eq!(call.input.get(), r#"{"q":"otel"}"#);
    assert_eq!(
        call.outcome,
        Outcome::Result(RawJson::from_value("found it"))
    );
    assert_eq!(call.duration, 2.0);
    let Event::AgentCompleted(run) = &emits[3].event else {
        panic!()
    };
    assert_eq!(run.agent_name, "researcher");
    assert_eq!(run.output.to_value(), json!("done"));

    let mut openllmetry: Vec<_> = [
        span(
            "0000000000000022",
            Some("0000000000000021"),
            "openai.chat",
            1,
            3,
            &[
                ("llm.request.type", json!("chat")),
                ("gen_ai.system", json!("openai")),
                ("gen_ai.request.model", json!("gpt-4o")),
                ("gen_ai.usage.prompt_tokens", json!(12)),
                ("gen_ai.usage.completion_tokens", json!(3)),
            ],
        ),
        span(
            "0000000000000023",
            Some("0000000000000021"),
            "get_time.tool",
            3,
            5,
            &[
                ("traceloop.span.kind", json!("tool")),
                ("traceloop.entity.name", json!("get_time")),
                ("traceloop.entity.input", json!("{\"tz\":\"UTC\"}")),
                ("traceloop.entity.output", json!("{\"time\":\"12:00\"}")),
            ],
        ),
        span(
            "0000000000000024",
            Some("0000000000000021"),
            "format.task",
            5,
            6,
            &[("traceloop.span.kind", json!("task"))],
        ),
        span(
            "0000000000000021",
            None,
            "clock.workflow",
            0,
            7,
            &[
                ("traceloop.span.kind", json!("workflow")),
                ("traceloop.entity.name", json!("clock")),
            ],
        ),
    ]
    .into_iter()
    .collect();
    for s in &mut openllmetry {
        s["traceId"] = json!("0af7651916cd43dd8448eb211c80319c");
    }
    let (emits, stats) = asm.ingest("default", spans_of(&request(openllmetry)));
    assert_eq!(
        kinds(&emits),
        [
            "session.created",
            "agent.step.completed",
            "tool.called",
            SPAN_KIND,
            "agent.completed"
        ]
    );
    assert_eq!(stats.unmatched, 1, "the task span is shown, not dropped");
    let Event::AgentStepCompleted(step) = &emits[1].event else {
        panic!()
    };
    assert_eq!(
        (step.provider.as_str(), step.step.tokens.total),
        ("openai", 15)
    );
    let Event::ToolCalled(call) = &emits[2].event else {
        panic!()
    };
    assert_eq!(call.tool, "get_time");
    assert_eq!(call.input.get(), r#"{"tz":"UTC"}"#);
    let Event::AgentCompleted(run) = &emits[4].event else {
        panic!()
    };
    assert_eq!(run.agent_name, "clock");
    assert_eq!(run.model, "gpt-4o");
    assert_eq!(run.tokens.total, 15);
}

/// A protobuf request of one span under `service.name` `bounds`, with `attributes`.
fn protobuf_request(
    attributes: Vec<opentelemetry_proto::tonic::common::v1::KeyValue>,
    sent_dropped: u32,
) -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message;
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: vec![7; 16],
                    span_id: vec![7; 8],
                    name: "work".to_owned(),
                    start_time_unix_nano: 1_000,
                    end_time_unix_nano: 2_000,
                    attributes,
                    dropped_attributes_count: sent_dropped,
                    ..Span::default()
                }],
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    }
    .encode_to_vec()
}

/// `value` inside `levels` arrays of one item each.
fn nested(levels: usize, value: &str) -> opentelemetry_proto::tonic::common::v1::AnyValue {
    use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, any_value::Value};
    let mut any = AnyValue {
        value: Some(Value::StringValue(value.to_owned())),
    };
    for _ in 0..levels {
        any = AnyValue {
            value: Some(Value::ArrayValue(ArrayValue { values: vec![any] })),
        };
    }
    any
}

#[test]
fn attributes_past_the_count_and_depth_bounds_are_cut_and_counted() {
    use opentelemetry_proto::tonic::common::v1::KeyValue;
    let mut attributes: Vec<KeyValue> = (0..decode::MAX_ATTRIBUTES + 5)
        .map(|i| KeyValue {
            key: format!("k{i}"),
            value: Some(nested(0, "v")),
            ..KeyValue::default()
        })
        .collect();
    attributes[0].value = Some(nested(decode::MAX_DEPTH + 3, "deep"));
    let body = protobuf_request(attributes, 2);
    let (spans, rejected) = decode::decode_spans(&body, Encoding::Protobuf).unwrap();
    assert!(rejected.is_empty());
    let mut asm = Assembler::new(1 << 20);
    let (emits, _) = asm.ingest("default", spans);
    let Event::Unknown { kind, raw } = &emits[1].event else {
        panic!("{emits:?}")
    };
    assert_eq!(kind, SPAN_KIND);
    let raw = raw.to_value();
    let shown = raw["spanAttributes"].as_object().unwrap();
    assert_eq!(shown.len(), decode::MAX_ATTRIBUTES);
    assert!(shown.contains_key("k127") && !shown.contains_key("k128"));
    assert_eq!(raw["spanDroppedAttributes"], 5 + 2);
    // Eight levels of arrays are kept, the ninth shown as cut.
    let mut deep = &shown["k0"];
    for _ in 0..decode::MAX_DEPTH {
        deep = &deep[0];
    }
    assert_eq!(deep, "…");
}

#[test]
fn a_body_nested_past_the_decoders_limit_is_refused_not_followed() {
    use opentelemetry_proto::tonic::common::v1::KeyValue;
    let body = protobuf_request(
        vec![KeyValue {
            key: "k".to_owned(),
            value: Some(nested(200, "deep")),
            ..KeyValue::default()
        }],
        0,
    );
    let err = decode::decode_spans(&body, Encoding::Protobuf).unwrap_err();
    assert!(matches!(err, DecodeError::Protobuf(_)), "{err:?}");
    assert_eq!(err.http_status(), 400);
    assert!(err.to_string().contains("recursion limit"), "{err}");
}
