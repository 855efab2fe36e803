//! OTLP trace export requests off the wire: gzip, protobuf or the proto3 JSON mapping into
//! the generated types, then flattened to bounded, sanitised `SpanIn`s; and the answers.

use super::map::ReadSpans;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use prost::Message;
use spyglass_protocol::sanitize::{sanitize, sanitize_text};
use std::borrow::Cow;
use std::io::Read;
use std::sync::Arc;
use thiserror::Error;

/// Bytes of one attribute's string value (a tool's arguments, a prompt) kept; longer ones
/// are cut on a character boundary and marked.
pub const MAX_VALUE_BYTES: usize = 16 * 1024;
/// Bytes of a name, id or key kept.
pub const MAX_NAME_BYTES: usize = 256;
/// Attributes kept per span; the rest are counted in `dropped_attributes`.
pub const MAX_ATTRIBUTES: usize = 128;
/// Nesting kept inside one attribute value (arrays, key-value lists).
pub(crate) const MAX_DEPTH: usize = 8;

/// The two OTLP/HTTP bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    /// The encoding a `Content-Type` names, `None` for any other type.
    pub fn from_content_type(content_type: &str) -> Option<Encoding> {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            "application/x-protobuf" | "application/protobuf" => Some(Encoding::Protobuf),
            "application/json" => Some(Encoding::Json),
            _ => None,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// Why a body could not be read as an export request.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("Content-Encoding {0} is not supported; send identity or gzip")]
    UnsupportedEncoding(String),
    #[error("body is not valid gzip: {0}")]
    Gzip(String),
    #[error("body is over the {limit}-byte limit once decompressed")]
    TooLarge { limit: usize },
    #[error("body is not an OTLP ExportTraceServiceRequest in protobuf: {0}")]
    Protobuf(String),
    #[error("body is not an OTLP ExportTraceServiceRequest in JSON: {0}")]
    Json(String),
}

impl DecodeError {
    /// The HTTP status this failure is answered with.
    pub fn http_status(&self) -> u16 {
        match self {
            DecodeError::UnsupportedEncoding(_) => 415,
            DecodeError::TooLarge { .. } => 413,
            DecodeError::Gzip(_) | DecodeError::Protobuf(_) | DecodeError::Json(_) => 400,
        }
    }
}

/// The body with its `Content-Encoding` undone; at most `limit` bytes come out, so a small
/// gzip bomb costs no more memory than a large plain body.
pub fn decompress<'a>(
    body: &'a [u8],
    content_encoding: Option<&str>,
    limit: usize,
) -> Result<Cow<'a, [u8]>, DecodeError> {
    match content_encoding
        .map(|e| e.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("" | "identity") => Ok(Cow::Borrowed(body)),
        Some("gzip" | "x-gzip") => {
            let mut out = Vec::new();
            let mut reader = flate2::read::GzDecoder::new(body).take(limit as u64 + 1);
            reader
                .read_to_end(&mut out)
                .map_err(|err| DecodeError::Gzip(err.to_string()))?;
            if out.len() > limit {
                return Err(DecodeError::TooLarge { limit });
            }
            Ok(Cow::Owned(out))
        }
        Some(other) => Err(DecodeError::UnsupportedEncoding(
            sanitize(&clip(other, MAX_NAME_BYTES)).into_owned(),
        )),
    }
}

/// An export request in either encoding.
pub fn decode_request(
    body: &[u8],
    encoding: Encoding,
) -> Result<ExportTraceServiceRequest, DecodeError> {
    match encoding {
        Encoding::Protobuf => ExportTraceServiceRequest::decode(body)
            .map_err(|err| DecodeError::Protobuf(err.to_string())),
        Encoding::Json => serde_json::from_slice(body)
            .map_err(|err| DecodeError::Json(sanitize(&err.to_string()).into_owned())),
    }
}

/// Every span of a body in either encoding, read through the conventions, and the ones
/// refused with why: prost (protobuf) or serde (JSON) into the generated types, then
/// `flatten`.
pub fn decode_spans(
    body: &[u8],
    encoding: Encoding,
) -> Result<(ReadSpans, Vec<Rejected>), DecodeError> {
    let (spans, rejected) = flatten(decode_request(body, encoding)?);
    Ok((spans.into(), rejected))
}

/// One span as the mapping reads it: ids as numbers (their big-endian bytes; `*_hex` gives
/// the lowercase hex OTLP's JSON mapping writes), times in nanoseconds since the epoch,
/// attributes (span's own) as JSON values, every string bounded and terminal-safe.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanIn {
    pub trace_id: u128,
    pub span_id: u64,
    /// `None` for a root (absent, empty or all-zero `parentSpanId`).
    pub parent_id: Option<u64>,
    pub name: String,
    /// The resource's `service.name`, else empty; shared by the resource's spans.
    pub service: Arc<str>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The status message when the span's status is ERROR (possibly empty).
    pub error: Option<String>,
    /// The first `exception` event's type and message, when there is one.
    pub exception: Option<(String, String)>,
    pub attributes: Attributes,
    /// Attributes beyond `MAX_ATTRIBUTES`, and what the sender said it dropped.
    pub dropped_attributes: u32,
}

impl SpanIn {
    pub fn duration_ms(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e6
    }

    /// The trace id in lowercase hex (32 digits).
    pub fn trace_hex(&self) -> String {
        hex(&self.trace_id.to_be_bytes())
    }

    /// The span id in lowercase hex (16 digits).
    pub fn span_hex(&self) -> String {
        span_hex(self.span_id)
    }
}

/// A span's attributes in the order sent. A key sent twice reads as its last value, as a
/// map would keep it; they are kept as a list because a span's few attributes are read
/// once each, and inserting them into a map (compare by compare) cost more than the read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attributes(pub(crate) Vec<(String, serde_json::Value)>);

impl Attributes {
    /// The value of `key`, its last if sent twice.
    pub fn get(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Every attribute in the order sent, a key sent twice twice.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &serde_json::Value)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As a JSON object (keys sorted, each once with its last value).
    pub fn to_map(&self) -> serde_json::Map<String, serde_json::Value> {
        self.0.iter().cloned().collect()
    }
}

impl std::ops::Index<&str> for Attributes {
    type Output = serde_json::Value;

    /// `null` for a key not sent, as `serde_json::Value` indexes.
    fn index(&self, key: &str) -> &serde_json::Value {
        static NULL: serde_json::Value = serde_json::Value::Null;
        self.get(key).unwrap_or(&NULL)
    }
}

/// A span id in lowercase hex (16 digits).
pub fn span_hex(id: u64) -> String {
    hex(&id.to_be_bytes())
}

/// A span the request carried that cannot be placed (its ids are not OTLP ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub index: usize,
    pub reason: String,
}

/// Every span of the request in the order sent, and the ones refused with why. The
/// request's strings move into the spans: one that is already bounded and terminal-safe
/// (nearly all) is kept as decoded, not copied.
pub fn flatten(request: ExportTraceServiceRequest) -> (Vec<SpanIn>, Vec<Rejected>) {
    let mut spans = Vec::with_capacity(
        request
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum(),
    );
    let mut rejected = Vec::new();
    let mut index = 0;
    for resource_spans in request.resource_spans {
        let service: Arc<str> = resource_spans
            .resource
            .as_ref()
            .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
            .and_then(|kv| kv.value.as_ref())
            .and_then(|v| match &v.value {
                Some(Value::StringValue(s)) => Some(line(s)),
                _ => None,
            })
            .unwrap_or_default()
            .into();
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                let at = index;
                index += 1;
                match one_span(span, &service, at) {
                    Ok(span) => spans.push(span),
                    Err(refused) => rejected.push(refused),
                }
            }
        }
    }
    (spans, rejected)
}

fn one_span(span: Span, service: &Arc<str>, at: usize) -> Result<SpanIn, Rejected> {
    let Span {
        trace_id,
        span_id,
        parent_span_id,
        name,
        start_time_unix_nano,
        end_time_unix_nano,
        attributes: kvs,
        dropped_attributes_count,
        events,
        status,
        ..
    } = span;
    let trace_id = match <[u8; 16]>::try_from(trace_id.as_slice()) {
        Ok(id) if id != [0; 16] => u128::from_be_bytes(id),
        _ => {
            return Err(Rejected {
                index: at,
                reason: format!(
                    "span {at}: trace id must be 16 bytes, not all zero (got {})",
                    trace_id.len()
                ),
            });
        }
    };
    let span_id = match <[u8; 8]>::try_from(span_id.as_slice()) {
        Ok(id) if id != [0; 8] => u64::from_be_bytes(id),
        _ => {
            return Err(Rejected {
                index: at,
                reason: format!(
                    "span {at}: span id must be 8 bytes, not all zero (got {})",
                    span_id.len()
                ),
            });
        }
    };
    let parent_id = <[u8; 8]>::try_from(parent_span_id.as_slice())
        .ok()
        .map(u64::from_be_bytes)
        .filter(|id| *id != 0);
    let error =
        status.and_then(|s| (s.code == StatusCode::Error as i32).then(|| text_owned(s.message)));
    let exception = events.iter().find(|e| e.name == "exception").map(|e| {
        let get = |key: &str| {
            e.attributes
                .iter()
                .find(|kv| kv.key == key)
                .and_then(|kv| kv.value.as_ref())
                .map(|v| match any_to_json(v.clone(), 0) {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                })
                .unwrap_or_default()
        };
        (
            line(&get("exception.type")),
            text(&get("exception.message")),
        )
    });
    let (attributes, dropped) = attributes(kvs);
    Ok(SpanIn {
        trace_id,
        span_id,
        parent_id,
        name: line_owned(name),
        service: service.clone(),
        start_ns: start_time_unix_nano,
        end_ns: end_time_unix_nano.max(start_time_unix_nano),
        error,
        exception,
        attributes,
        dropped_attributes: dropped.saturating_add(dropped_attributes_count),
    })
}

/// Lower-case hex, as OTLP's JSON mapping writes ids.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const_hex::encode(bytes)
}

fn attributes(kvs: Vec<KeyValue>) -> (Attributes, u32) {
    let dropped = kvs.len().saturating_sub(MAX_ATTRIBUTES);
    let out = kvs
        .into_iter()
        .take(MAX_ATTRIBUTES)
        .map(|kv| {
            let value = kv
                .value
                .map_or(serde_json::Value::Null, |v| any_to_json(v, 0));
            (line_owned(kv.key), value)
        })
        .collect();
    (Attributes(out), u32::try_from(dropped).unwrap_or(u32::MAX))
}

/// An attribute value as JSON, every string bounded and made terminal-safe.
fn any_to_json(value: AnyValue, depth: usize) -> serde_json::Value {
    use serde_json::Value as J;
    match value.value {
        // An empty value, or an index into a profile's string table (meaningless here).
        None | Some(Value::StringValueStrindex(_)) => J::Null,
        Some(Value::StringValue(s)) => J::String(text_owned(s)),
        Some(Value::BoolValue(b)) => J::Bool(b),
        Some(Value::IntValue(i)) => J::from(i),
        Some(Value::DoubleValue(d)) => serde_json::Number::from_f64(d).map_or(J::Null, J::Number),
        Some(Value::BytesValue(b)) => J::String(hex(&b[..b.len().min(MAX_VALUE_BYTES / 2)])),
        Some(_) if depth >= MAX_DEPTH => J::String("…".to_owned()),
        Some(Value::ArrayValue(a)) => J::Array(
            a.values
                .into_iter()
                .take(MAX_ATTRIBUTES)
                .map(|v| any_to_json(v, depth + 1))
                .collect(),
        ),
        Some(Value::KvlistValue(kv)) => J::Object(
            kv.values
                .into_iter()
                .take(MAX_ATTRIBUTES)
                .map(|kv| {
                    let v = kv.value.map_or(J::Null, |v| any_to_json(v, depth + 1));
                    (line_owned(kv.key), v)
                })
                .collect(),
        ),
    }
}

/// Text cut to `max` bytes on a character boundary, marked when cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A value's text: bounded, control characters shown (line breaks kept).
pub(crate) fn text(s: &str) -> String {
    sanitize_text(&clip(s, MAX_VALUE_BYTES)).into_owned()
}

/// A name or id: one bounded terminal line.
pub(crate) fn line(s: &str) -> String {
    sanitize(&clip(s, MAX_NAME_BYTES)).into_owned()
}

/// `line` without a copy when the text is already one bounded, terminal-safe line.
pub(crate) fn line_cow(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_NAME_BYTES {
        sanitize(s)
    } else {
        Cow::Owned(line(s))
    }
}

/// `text` without a copy when the text is already bounded and terminal-safe.
pub(crate) fn text_cow(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_VALUE_BYTES {
        sanitize_text(s)
    } else {
        Cow::Owned(text(s))
    }
}

/// `line` of an owned string: the same string back when nothing changes.
pub(crate) fn line_owned(s: String) -> String {
    let changed = match line_cow(&s) {
        Cow::Owned(changed) => Some(changed),
        Cow::Borrowed(_) => None,
    };
    changed.unwrap_or(s)
}

/// `text` of an owned string: the same string back when nothing changes.
pub(crate) fn text_owned(s: String) -> String {
    let changed = match text_cow(&s) {
        Cow::Owned(changed) => Some(changed),
        Cow::Borrowed(_) => None,
    };
    changed.unwrap_or(s)
}

/// The answer to an export: `partial_success` only when some spans were refused.
pub fn response(rejected: &[Rejected]) -> ExportTraceServiceResponse {
    let partial_success = (!rejected.is_empty()).then(|| ExportTracePartialSuccess {
        rejected_spans: i64::try_from(rejected.len()).unwrap_or(i64::MAX),
        error_message: rejected
            .iter()
            .take(8)
            .map(|r| r.reason.as_str())
            .collect::<Vec<_>>()
            .join("; "),
    });
    ExportTraceServiceResponse { partial_success }
}

/// The 200 answer in the request's encoding.
pub fn encode_response(rejected: &[Rejected], encoding: Encoding) -> Vec<u8> {
    let ExportTraceServiceResponse { partial_success } = response(rejected);
    match encoding {
        Encoding::Protobuf => ExportTraceServiceResponse { partial_success }.encode_to_vec(),
        // Written by hand: the derive writes an absent field as `null`, and int64 as a
        // number where the JSON mapping says string.
        Encoding::Json => {
            let body = match partial_success {
                Some(p) => serde_json::json!({"partialSuccess": {
                    "rejectedSpans": p.rejected_spans.to_string(),
                    "errorMessage": p.error_message,
                }}),
                None => serde_json::json!({}),
            };
            body.to_string().into_bytes()
        }
    }
}

/// `google.rpc.Status`, the body OTLP/HTTP failures carry (field numbers from its proto;
/// `details` is never sent).
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
}

/// gRPC code for an HTTP failure status: 3 `INVALID_ARGUMENT`, 8 `RESOURCE_EXHAUSTED`,
/// 16 `UNAUTHENTICATED`, 7 `PERMISSION_DENIED`, else 2 `UNKNOWN`.
pub fn rpc_code(http_status: u16) -> i32 {
    match http_status {
        400 | 415 => 3,
        413 | 429 => 8,
        401 => 16,
        403 => 7,
        _ => 2,
    }
}

/// A failure answer's body in the request's encoding.
pub fn encode_status(http_status: u16, message: &str, encoding: Encoding) -> Vec<u8> {
    let status = RpcStatus {
        code: rpc_code(http_status),
        message: message.to_owned(),
    };
    match encoding {
        Encoding::Protobuf => status.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(&serde_json::json!({
            "code": status.code,
            "message": status.message,
        }))
        .unwrap_or_default(),
    }
}
