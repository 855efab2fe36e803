//! OTLP/protobuf export requests read straight off the body into spans and their roles,
//! attribute strings borrowed from the bytes until a span keeps them; the rest to prost.

// prost's generated types allocate every id, key and value (a `Vec<u8>` or `String` each,
// in vectors grown as they come), `decode::flatten` turns every attribute into a
// `serde_json::Value`, and the mapping then reads a few. This reader makes the spans in
// one pass, with the same bounds and cleaning (the same `decode::line`/`text`, the same
// `MAX_*`), hands the mapping each attribute string where it lies in the body, and
// validates everything else prost would (UTF-8 of every string, wire types of known
// fields, lengths) without keeping it. Its contract: whenever it returns spans, prost
// decodes the body and `flatten` plus the mapping make the same spans, roles and
// refusals. Anything it does not read exactly as prost would (groups, a message field
// sent twice that prost merges, nesting past `MAX_NESTING`) or any error is `Unread`:
// the caller then decodes with prost, whose answer (spans or the 400's message) stands.

use super::decode::{
    Attributes, MAX_ATTRIBUTES, MAX_DEPTH, MAX_VALUE_BYTES, Rejected, SpanIn, hex, line, line_cow,
    text_cow,
};
use super::map::{AttrList, AttrValue, ReadSpans};
use std::borrow::Cow;
use std::sync::Arc;

/// The body is not read here: decode it with prost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unread;

type Read<T> = Result<T, Unread>;

/// Attribute values nested deeper than this are left to prost: it refuses 100 nested
/// messages, and a key-value list's level is three (`AnyValue`, `KeyValueList`,
/// `KeyValue`), so 24 levels under the request's own 7 stay well inside.
const MAX_NESTING: usize = 24;

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// `StatusCode::Error`.
const STATUS_ERROR: i32 = 2;

/// A protobuf message's bytes, read field by field.
struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Fields<'a> {
        Fields { buf }
    }

    /// prost's varint: at most ten bytes, the tenth at most 1.
    fn varint(&mut self) -> Read<u64> {
        let mut value = 0u64;
        for (at, &byte) in self.buf.iter().take(10).enumerate() {
            value |= u64::from(byte & 0x7f) << (7 * at);
            if byte < 0x80 {
                if at == 9 && byte > 1 {
                    return Err(Unread);
                }
                self.buf = &self.buf[at + 1..];
                return Ok(value);
            }
        }
        Err(Unread)
    }

    /// The next field's number and wire type, `None` at the end. Groups (wire types 3 and
    /// 4) and invalid keys are `Unread`.
    fn next(&mut self) -> Read<Option<(u32, u8)>> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let key = u32::try_from(key).map_err(|_| Unread)?;
        let wire = (key & 7) as u8;
        let field = key >> 3;
        if field == 0 || !matches!(wire, VARINT | FIXED64 | LEN | FIXED32) {
            return Err(Unread);
        }
        Ok(Some((field, wire)))
    }

    fn take(&mut self, n: usize) -> Read<&'a [u8]> {
        if n > self.buf.len() {
            return Err(Unread);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn bytes(&mut self, wire: u8) -> Read<&'a [u8]> {
        want(wire, LEN)?;
        let len = self.varint()?;
        let len = usize::try_from(len).map_err(|_| Unread)?;
        self.take(len)
    }

    fn str(&mut self, wire: u8) -> Read<&'a str> {
        std::str::from_utf8(self.bytes(wire)?).map_err(|_| Unread)
    }

    fn uint(&mut self, wire: u8) -> Read<u64> {
        want(wire, VARINT)?;
        self.varint()
    }

    fn fixed64(&mut self, wire: u8) -> Read<u64> {
        want(wire, FIXED64)?;
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| Unread)?))
    }

    fn fixed32(&mut self, wire: u8) -> Read<u32> {
        want(wire, FIXED32)?;
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes(bytes.try_into().map_err(|_| Unread)?))
    }

    /// A field no message here knows: skipped, as prost skips it.
    fn skip(&mut self, wire: u8) -> Read<()> {
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.take(8).map(drop),
            LEN => self.bytes(LEN).map(drop),
            FIXED32 => self.take(4).map(drop),
            _ => Err(Unread),
        }
    }
}

/// A known field sent with another wire type: prost refuses it.
fn want(wire: u8, expected: u8) -> Read<()> {
    if wire == expected {
        Ok(())
    } else {
        Err(Unread)
    }
}

/// Every span of the request in the order sent, read through the conventions, and the
/// ones refused: as `ReadSpans::from(decode::flatten(ExportTraceServiceRequest::decode(
/// body)?))` makes them. Attribute strings are read where they lie in the body; only what
/// a span keeps is copied.
pub fn read(body: &[u8]) -> Read<(ReadSpans, Vec<Rejected>)> {
    let mut out = Out {
        spans: ReadSpans::default(),
        rejected: Vec::new(),
        index: 0,
    };
    let mut fields = Fields::new(body);
    while let Some((field, wire)) = fields.next()? {
        match field {
            1 => resource_spans(fields.bytes(wire)?, &mut out)?,
            _ => fields.skip(wire)?,
        }
    }
    Ok((out.spans, out.rejected))
}

struct Out {
    spans: ReadSpans,
    rejected: Vec<Rejected>,
    /// Spans seen so far, refused ones too: a refusal names its span by it.
    index: usize,
}

/// `ResourceSpans`: its resource (which may come after its spans) first, then its spans.
fn resource_spans(buf: &[u8], out: &mut Out) -> Read<()> {
    let mut resource = None;
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            1 => {
                // A second resource merges into the first: prost's to read.
                if resource.is_some() {
                    return Err(Unread);
                }
                resource = Some(fields.bytes(wire)?);
            }
            2 => drop(fields.bytes(wire)?),
            3 => drop(fields.str(wire)?),
            _ => fields.skip(wire)?,
        }
    }
    let service: Arc<str> = match resource {
        Some(resource) => service_name(resource)?.into(),
        None => Arc::from(""),
    };
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            2 => scope_spans(fields.bytes(wire)?, &service, out)?,
            _ => fields.skip(wire)?,
        }
    }
    Ok(())
}

/// `Resource`: the first `service.name` attribute's string, cleaned as a line; the rest
/// validated.
fn service_name(buf: &[u8]) -> Read<String> {
    let mut service = None;
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            1 => {
                let kv = key_value(fields.bytes(wire)?)?;
                if service.is_none() && kv.key == "service.name" {
                    service = Some(match kv.value {
                        Some(value) => match any_string(value)? {
                            Some(s) => line(s),
                            None => String::new(),
                        },
                        None => String::new(),
                    });
                }
                validate_kv(kv)?;
            }
            2 => drop(fields.uint(wire)?),
            3 => entity_ref(fields.bytes(wire)?)?,
            _ => fields.skip(wire)?,
        }
    }
    Ok(service.unwrap_or_default())
}

fn entity_ref(buf: &[u8]) -> Read<()> {
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            1..=4 => drop(fields.str(wire)?),
            _ => fields.skip(wire)?,
        }
    }
    Ok(())
}

fn scope_spans(buf: &[u8], service: &Arc<str>, out: &mut Out) -> Read<()> {
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            1 => scope(fields.bytes(wire)?)?,
            2 => {
                let at = out.index;
                out.index += 1;
                match span(fields.bytes(wire)?, service, at)? {
                    Ok((span, list)) => out.spans.push(span, list),
                    Err(refused) => out.rejected.push(refused),
                }
            }
            3 => drop(fields.str(wire)?),
            _ => fields.skip(wire)?,
        }
    }
    Ok(())
}

/// `InstrumentationScope`: validated, not kept.
fn scope(buf: &[u8]) -> Read<()> {
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            1 | 2 => drop(fields.str(wire)?),
            3 => validate_kv(key_value(fields.bytes(wire)?)?)?,
            4 => drop(fields.uint(wire)?),
            _ => fields.skip(wire)?,
        }
    }
    Ok(())
}

/// One `Span` as `decode::flatten` makes it but for its attributes, which come apart as
/// the mapping reads them (`Err` inside: refused, with why).
fn span<'a>(
    buf: &'a [u8],
    service: &Arc<str>,
    at: usize,
) -> Read<Result<(SpanIn, AttrList<'a>), Rejected>> {
    let (mut trace_id, mut span_id, mut parent): (&[u8], &[u8], &[u8]) = (&[], &[], &[]);
    let mut name = "";
    let (mut start, mut end) = (0u64, 0u64);
    let mut sent_dropped = 0u32;
    let mut status: Option<Option<String>> = None;
    let mut exception: Option<&[u8]> = None;
    let mut attributes: AttrList<'a> = Vec::with_capacity(8);
    let mut count = 0usize;
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            1 => trace_id = fields.bytes(wire)?,
            2 => span_id = fields.bytes(wire)?,
            3 => drop(fields.str(wire)?),
            4 => parent = fields.bytes(wire)?,
            5 => name = fields.str(wire)?,
            7 => start = fields.fixed64(wire)?,
            8 => end = fields.fixed64(wire)?,
            9 => {
                let kv = key_value(fields.bytes(wire)?)?;
                count += 1;
                if count <= MAX_ATTRIBUTES {
                    let value = match kv.value {
                        Some(value) => attr_value(value)?,
                        None => AttrValue::Json(serde_json::Value::Null),
                    };
                    attributes.push((Cow::Borrowed(kv.key), value));
                } else {
                    validate_kv(kv)?;
                }
            }
            // prost reads a uint32 as the varint's low 32 bits.
            10 => sent_dropped = fields.uint(wire)? as u32,
            11 => {
                let event = fields.bytes(wire)?;
                if event_name(event)? == "exception" && exception.is_none() {
                    exception = Some(event);
                }
            }
            6 | 12 | 14 => drop(fields.uint(wire)?),
            13 => link(fields.bytes(wire)?)?,
            15 => {
                // A second status merges into the first: prost's to read.
                if status.is_some() {
                    return Err(Unread);
                }
                status = Some(status_error(fields.bytes(wire)?)?);
            }
            16 => drop(fields.fixed32(wire)?),
            _ => fields.skip(wire)?,
        }
    }
    let trace_id = match <[u8; 16]>::try_from(trace_id) {
        Ok(id) if id != [0; 16] => u128::from_be_bytes(id),
        _ => {
            return Ok(Err(Rejected {
                index: at,
                reason: format!(
                    "span {at}: trace id must be 16 bytes, not all zero (got {})",
                    trace_id.len()
                ),
            }));
        }
    };
    let span_id = match <[u8; 8]>::try_from(span_id) {
        Ok(id) if id != [0; 8] => u64::from_be_bytes(id),
        _ => {
            return Ok(Err(Rejected {
                index: at,
                reason: format!(
                    "span {at}: span id must be 8 bytes, not all zero (got {})",
                    span_id.len()
                ),
            }));
        }
    };
    let parent_id = <[u8; 8]>::try_from(parent)
        .ok()
        .map(u64::from_be_bytes)
        .filter(|id| *id != 0);
    let error = status.flatten();
    let exception = match exception {
        Some(event) => Some(exception_of(event)?),
        None => None,
    };
    let dropped = u32::try_from(count.saturating_sub(MAX_ATTRIBUTES)).unwrap_or(u32::MAX);
    let span = SpanIn {
        trace_id,
        span_id,
        parent_id,
        name: line_cow(name).into_owned(),
        service: service.clone(),
        start_ns: start,
        end_ns: end.max(start),
        error,
        exception,
        attributes: Attributes::default(),
        dropped_attributes: dropped.saturating_add(sent_dropped),
    };
    Ok(Ok((span, attributes)))
}

/// `Status`: its message, cleaned as text, when its code is ERROR.
fn status_error(buf: &[u8]) -> Read<Option<String>> {
    let (mut message, mut code) = ("", 0i32);
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            2 => message = fields.str(wire)?,
            // prost reads an enum (int32) as the varint's low 32 bits.
            3 => code = fields.uint(wire)? as i32,
            _ => fields.skip(wire)?,
        }
    }
    Ok((code == STATUS_ERROR).then(|| text_cow(message).into_owned()))
}

/// An `Event`'s name (the last sent), the event validated.
fn event_name(buf: &[u8]) -> Read<&str> {
    let mut name = "";
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            1 => drop(fields.fixed64(wire)?),
            2 => name = fields.str(wire)?,
            3 => validate_kv(key_value(fields.bytes(wire)?)?)?,
            4 => drop(fields.uint(wire)?),
            _ => fields.skip(wire)?,
        }
    }
    Ok(name)
}

/// The exception event's `exception.type` (a line) and `exception.message` (text): each
/// the first attribute of that key, its value's text (a string as it is, other values as
/// JSON), empty when absent.
fn exception_of(buf: &[u8]) -> Read<(String, String)> {
    let (mut kind, mut message) = (None, None);
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match (field, wire) {
            (3, LEN) => {
                let kv = key_value(fields.bytes(wire)?)?;
                let slot = match kv.key {
                    "exception.type" => &mut kind,
                    "exception.message" => &mut message,
                    _ => continue,
                };
                if slot.is_none() {
                    *slot = Some(match kv.value {
                        Some(value) => match any_value(value, 0, 0)? {
                            serde_json::Value::String(s) => s,
                            other => other.to_string(),
                        },
                        None => String::new(),
                    });
                }
            }
            _ => fields.skip(wire)?,
        }
    }
    Ok((
        line(&kind.unwrap_or_default()),
        super::decode::text(&message.unwrap_or_default()),
    ))
}

fn link(buf: &[u8]) -> Read<()> {
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            1 | 2 => drop(fields.bytes(wire)?),
            3 => drop(fields.str(wire)?),
            4 => validate_kv(key_value(fields.bytes(wire)?)?)?,
            5 => drop(fields.uint(wire)?),
            6 => drop(fields.fixed32(wire)?),
            _ => fields.skip(wire)?,
        }
    }
    Ok(())
}

/// A `KeyValue`, its value's bytes not yet read.
#[derive(Clone, Copy)]
struct Kv<'a> {
    key: &'a str,
    /// The `AnyValue` message's bytes; `None` when the field was not sent.
    value: Option<&'a [u8]>,
}

fn key_value(buf: &[u8]) -> Read<Kv<'_>> {
    let mut kv = Kv {
        key: "",
        value: None,
    };
    let mut fields = Fields::new(buf);
    while let Some((field, wire)) = fields.next()? {
        match field {
            1 => kv.key = fields.str(wire)?,
            2 => {
                // A second value merges into the first: prost's to read.
                if kv.value.is_some() {
                    return Err(Unread);
                }
                kv.value = Some(fields.bytes(wire)?);
            }
            3 => drop(fields.uint(wire)?),
            _ => fields.skip(wire)?,
        }
    }
    Ok(kv)
}

fn validate_kv(kv: Kv<'_>) -> Read<()> {
    match kv.value {
        Some(value) => validate_any(value, 0),
        None => Ok(()),
    }
}

/// The one field an `AnyValue` sets, `None` for none; two are prost's to read (a later
/// one replaces or merges into an earlier).
fn any_field(buf: &[u8]) -> Read<Option<(u32, u8, Fields<'_>)>> {
    let mut found = None;
    let mut fields = Fields::new(buf);
    loop {
        let before = Fields { buf: fields.buf };
        let Some((field, wire)) = fields.next()? else {
            break;
        };
        if (1..=8).contains(&field) {
            if found.is_some() {
                return Err(Unread);
            }
            // Positioned after the key: the caller reads the value.
            let mut at = before;
            at.next()?;
            found = Some((field, wire, at));
        }
        fields.skip(wire)?;
    }
    Ok(found)
}

/// An `AnyValue` that is a string: `Some(text)`; other values (validated) `None`.
fn any_string(buf: &[u8]) -> Read<Option<&str>> {
    match any_field(buf)? {
        Some((1, wire, mut at)) => at.str(wire).map(Some),
        Some(_) => validate_any(buf, 0).map(|()| None),
        None => Ok(None),
    }
}

/// An attribute value as JSON, as `decode::any_to_json` makes it at `depth`: strings
/// bounded and cleaned, arrays and lists cut at `MAX_ATTRIBUTES` items and `MAX_DEPTH`
/// levels (what is cut still validated). `nesting` counts every level, cut or not.
fn any_value(buf: &[u8], depth: usize, nesting: usize) -> Read<serde_json::Value> {
    use serde_json::Value as J;
    if nesting > MAX_NESTING {
        return Err(Unread);
    }
    match any_field(buf)? {
        Some(found) => any_value_of(found, buf, depth, nesting),
        None => Ok(J::Null),
    }
}

/// A span attribute's value: a string as it lies in the body (cleaned when read), any
/// other value as `decode::any_to_json` makes it.
fn attr_value(buf: &[u8]) -> Read<AttrValue<'_>> {
    Ok(match any_field(buf)? {
        Some((1, wire, mut at)) => AttrValue::Raw(at.str(wire)?),
        Some(found) => AttrValue::Json(any_value_of(found, buf, 0, 0)?),
        None => AttrValue::Json(serde_json::Value::Null),
    })
}

/// `any_value` of the field `any_field` found in `buf`.
fn any_value_of(
    (field, wire, mut at): (u32, u8, Fields<'_>),
    buf: &[u8],
    depth: usize,
    nesting: usize,
) -> Read<serde_json::Value> {
    use serde_json::Value as J;
    Ok(match field {
        1 => J::String(text_cow(at.str(wire)?).into_owned()),
        2 => J::Bool(at.uint(wire)? != 0),
        // prost reads an int64 as the varint's 64 bits.
        3 => J::from(at.uint(wire)?.cast_signed()),
        4 => serde_json::Number::from_f64(f64::from_bits(at.fixed64(wire)?))
            .map_or(J::Null, J::Number),
        7 => {
            let bytes = at.bytes(wire)?;
            J::String(hex(&bytes[..bytes.len().min(MAX_VALUE_BYTES / 2)]))
        }
        8 => {
            at.uint(wire)?;
            J::Null
        }
        5 | 6 if depth >= MAX_DEPTH => {
            validate_any(buf, nesting)?;
            J::String("…".to_owned())
        }
        5 => {
            let mut items = Vec::new();
            let mut fields = Fields::new(at.bytes(wire)?);
            while let Some((field, wire)) = fields.next()? {
                match field {
                    1 => {
                        let item = fields.bytes(wire)?;
                        if items.len() < MAX_ATTRIBUTES {
                            items.push(any_value(item, depth + 1, nesting + 1)?);
                        } else {
                            validate_any(item, nesting + 1)?;
                        }
                    }
                    _ => fields.skip(wire)?,
                }
            }
            J::Array(items)
        }
        6 => {
            let mut taken = 0;
            let mut pairs = Vec::new();
            let mut fields = Fields::new(at.bytes(wire)?);
            while let Some((field, wire)) = fields.next()? {
                match field {
                    1 => {
                        let kv = key_value(fields.bytes(wire)?)?;
                        if taken < MAX_ATTRIBUTES {
                            taken += 1;
                            let value = match kv.value {
                                Some(value) => any_value(value, depth + 1, nesting + 1)?,
                                None => J::Null,
                            };
                            pairs.push((line_cow(kv.key).into_owned(), value));
                        } else if let Some(value) = kv.value {
                            validate_any(value, nesting + 1)?;
                        }
                    }
                    _ => fields.skip(wire)?,
                }
            }
            J::Object(pairs.into_iter().collect())
        }
        _ => return Err(Unread),
    })
}

/// An `AnyValue` read for validity only (every string UTF-8, every known field its wire
/// type), nothing kept.
fn validate_any(buf: &[u8], nesting: usize) -> Read<()> {
    if nesting > MAX_NESTING {
        return Err(Unread);
    }
    let Some((field, wire, mut at)) = any_field(buf)? else {
        return Ok(());
    };
    match field {
        1 => drop(at.str(wire)?),
        2 | 3 | 8 => drop(at.uint(wire)?),
        4 => drop(at.fixed64(wire)?),
        7 => drop(at.bytes(wire)?),
        5 => {
            let mut fields = Fields::new(at.bytes(wire)?);
            while let Some((field, wire)) = fields.next()? {
                match field {
                    1 => validate_any(fields.bytes(wire)?, nesting + 1)?,
                    _ => fields.skip(wire)?,
                }
            }
        }
        6 => {
            let mut fields = Fields::new(at.bytes(wire)?);
            while let Some((field, wire)) = fields.next()? {
                match field {
                    1 => {
                        if let Some(value) = key_value(fields.bytes(wire)?)?.value {
                            validate_any(value, nesting + 1)?;
                        }
                    }
                    _ => fields.skip(wire)?,
                }
            }
        }
        _ => return Err(Unread),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The reader against prost and `flatten` on the captures of real exporters and on
    //! random requests, well-formed and broken, written field by field.
    use super::*;
    use crate::otel::Assembler;
    use crate::otel::decode::{self, Encoding};
    use prost::Message;
    use spyglass_protocol::events::{Frame, encode};

    /// What the prost path makes of `body`: the spans read and the refusals, or its error.
    fn by_prost(body: &[u8]) -> Result<(ReadSpans, Vec<Rejected>), decode::DecodeError> {
        let (spans, rejected) = decode::flatten(decode::decode_request(body, Encoding::Protobuf)?);
        Ok((spans.into(), rejected))
    }

    /// The events a fresh assembler makes of `spans`, as the wire carries them.
    fn events(spans: ReadSpans) -> Vec<String> {
        let mut asm = Assembler::new(1 << 20);
        let (emits, _) = asm.ingest("default", spans);
        emits
            .into_iter()
            .map(|emit| {
                encode(&Frame {
                    seq: 0,
                    ts: compact_str::CompactString::default(),
                    session_id: Some(emit.session_id.into()),
                    event: emit.event,
                })
            })
            .collect()
    }

    /// Whenever the reader reads `body`, prost reads it to the same spans, reads and
    /// refusals; whatever it leaves, `decode_spans` answers as prost does. `true` when the
    /// reader read it.
    fn check(body: &[u8]) -> bool {
        let fast = read(body);
        let slow = by_prost(body);
        let answer = decode::decode_spans(body, Encoding::Protobuf);
        match (&fast, &slow) {
            (Ok(fast), Ok(slow)) => {
                assert_eq!(fast, slow, "body {body:02x?}");
                assert_eq!(events(fast.0.clone()), events(slow.0.clone()));
            }
            (Ok(_), Err(err)) => panic!("read a body prost refuses ({err}): {body:02x?}"),
            (Err(Unread), _) => {}
        }
        assert_eq!(answer, slow);
        fast.is_ok()
    }

    fn fixtures(dir: &str) -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/otel")
            .join(dir);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files.iter().map(|p| std::fs::read(p).unwrap()).collect()
    }

    #[test]
    fn real_exporters_requests_read_as_prost_reads_them() {
        let mut bodies = fixtures("pydantic");
        // The Vercel captures are JSON: the same requests in protobuf.
        for json in fixtures("vercel") {
            let request = decode::decode_request(&json, Encoding::Json).unwrap();
            bodies.push(request.encode_to_vec());
        }
        assert_eq!(bodies.len(), 6);
        for body in &bodies {
            assert!(check(body), "the reader reads a real exporter's request");
        }
    }

    /// A protobuf message written field by field, any field in any order or twice.
    #[derive(Default, Clone)]
    struct Msg(Vec<u8>);

    impl Msg {
        fn varint(&mut self, mut v: u64) {
            while v >= 0x80 {
                self.0.push((v as u8) | 0x80);
                v >>= 7;
            }
            self.0.push(v as u8);
        }
        fn key(&mut self, field: u32, wire: u8) {
            self.varint(u64::from(field) << 3 | u64::from(wire));
        }
        fn uint(&mut self, field: u32, v: u64) -> &mut Self {
            self.key(field, VARINT);
            self.varint(v);
            self
        }
        fn bytes(&mut self, field: u32, bytes: &[u8]) -> &mut Self {
            self.key(field, LEN);
            self.varint(bytes.len() as u64);
            self.0.extend_from_slice(bytes);
            self
        }
        fn msg(&mut self, field: u32, msg: &Msg) -> &mut Self {
            self.bytes(field, &msg.0)
        }
        fn fixed64(&mut self, field: u32, v: u64) -> &mut Self {
            self.key(field, FIXED64);
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn fixed32(&mut self, field: u32, v: u32) -> &mut Self {
            self.key(field, FIXED32);
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
    }

    const TEXTS: &[&str] = &[
        "",
        "chat",
        "execute_tool",
        "invoke_agent",
        "create_agent",
        "text_completion",
        "ai.generateText",
        "ai.streamText.doStream",
        "ai.toolCall",
        "ai.generateText.doGenerate x",
        "LLM",
        "tool",
        "TOOL",
        "agent",
        "workflow",
        "gpt-4o",
        "openai",
        "bench_agent",
        "lookup",
        "call_1",
        "12",
        " 42 ",
        "42\u{b}",
        "-3",
        "stop",
        r#"{"city":"Oslo","units":"C"}"#,
        r#"{"units":"C","city":"Oslo"}"#,
        r#"{"prompt":"hi"}"#,
        r#"[{"role":"user","content":"what is up"}]"#,
        r#"[{"role":"user","parts":[{"type":"text","content":"a"},{"content":"b"}]}]"#,
        r#"{"s":"\u001b[31m"}"#,
        "[1, 2",
        "\u{1b}[31mred",
        "line\nbreak\ttab",
        "bidi \u{202e} override",
        "c1 \u{85} and del \u{7f}",
        "é日本🦀",
        "RuntimeError",
        "exception",
        "conv-1",
    ];

    const KEYS_SENT: &[&str] = &[
        "gen_ai.operation.name",
        "gen_ai.operation.name",
        "gen_ai.conversation.id",
        "session.id",
        "ai.operationId",
        "operation.name",
        "openinference.span.kind",
        "traceloop.span.kind",
        "llm.request.type",
        "gen_ai.tool.name",
        "gen_ai.agent.name",
        "gen_ai.tool.call.id",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "ai.toolCall.args",
        "input.value",
        "output.value",
        "ai.prompt",
        "gen_ai.input.messages",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "gen_ai.provider.name",
        "gen_ai.system",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "llm.token_count.prompt",
        "gen_ai.response.finish_reasons",
        "ai.response.finishReason",
        "error.type",
        "service.name",
        "http.method",
        "note\u{7}",
        "",
    ];

    fn text(rng: &mut fastrand::Rng) -> String {
        match rng.u16(0..400) {
            0..=19 => "x".repeat(rng.usize(250..300)),
            20 => "é".repeat(rng.usize(8_180..8_200)),
            _ => TEXTS[rng.usize(..TEXTS.len())].to_owned(),
        }
    }

    fn any(rng: &mut fastrand::Rng, depth: usize) -> Msg {
        let mut m = Msg::default();
        // Lists branch only near the top (past it a list holds at most one item), and stop
        // past twelve levels: enough to pass `MAX_DEPTH`, never a tree of millions.
        let items = |rng: &mut fastrand::Rng| match depth {
            0 => [0, 1, 3, 1, 3, 130][rng.usize(..6)],
            1 | 2 => rng.usize(0..3),
            _ => rng.usize(0..2),
        };
        match rng.u8(0..if depth > 12 { 9 } else { 13 }) {
            0..=3 => drop(m.bytes(1, text(rng).as_bytes())),
            4 => drop(m.uint(2, rng.u64(0..3))),
            5 => drop(m.uint(3, [0, 7, 120, u64::MAX, 1 << 63][rng.usize(..5)])),
            6 => {
                let d = [0.5, -0.0, f64::NAN, f64::INFINITY, 1e300, 3.0][rng.usize(..6)];
                m.fixed64(4, d.to_bits());
            }
            7 => drop(m.bytes(7, &vec![0xab; [0, 3, 3, 3, 3, 9_000][rng.usize(..6)]])),
            8 => {
                if rng.bool() {
                    m.uint(8, 3);
                }
            }
            9 | 10 => {
                let mut array = Msg::default();
                let n = items(rng);
                for _ in 0..n {
                    array.msg(1, &any(rng, if n > 3 { 13 } else { depth + 1 }));
                }
                m.msg(5, &array);
            }
            _ => {
                let mut list = Msg::default();
                let n = items(rng);
                for _ in 0..n {
                    list.msg(1, &kv(rng, if n > 3 { 13 } else { depth + 1 }));
                }
                m.msg(6, &list);
            }
        }
        m
    }

    fn kv(rng: &mut fastrand::Rng, depth: usize) -> Msg {
        let mut m = Msg::default();
        let key = if rng.u8(0..10) == 0 {
            text(rng)
        } else {
            KEYS_SENT[rng.usize(..KEYS_SENT.len())].to_owned()
        };
        m.bytes(1, key.as_bytes());
        if rng.u8(0..12) > 0 {
            m.msg(2, &any(rng, depth));
        }
        if rng.u8(0..20) == 0 {
            m.uint(3, 5);
        }
        m
    }

    fn id(rng: &mut fastrand::Rng, len: usize, pool: u64) -> Vec<u8> {
        let n = rng.u64(0..pool);
        let mut id = vec![0; len];
        for (at, b) in id.iter_mut().rev().enumerate().take(8) {
            *b = (n >> (8 * at)) as u8;
        }
        match rng.u8(0..40) {
            0 => vec![0; len],
            1 => id[..len / 2].to_vec(),
            _ => id,
        }
    }

    fn span(rng: &mut fastrand::Rng) -> Msg {
        let mut m = Msg::default();
        let mut fields: Vec<u8> = (1..=16).collect();
        rng.shuffle(&mut fields);
        for field in fields {
            if rng.u8(0..6) == 0 {
                continue;
            }
            match field {
                1 => m.bytes(1, &id(rng, 16, 4)),
                2 => m.bytes(2, &id(rng, 8, 6)),
                3 => m.bytes(3, b"rojo=00f067aa0ba902b7"),
                4 => m.bytes(4, &id(rng, 8, 6)),
                5 => m.bytes(5, text(rng).as_bytes()),
                6 => m.uint(6, rng.u64(0..6)),
                7 => m.fixed64(7, 1_700_000_000_000_000_000 + rng.u64(0..5_000_000_000)),
                8 => m.fixed64(8, 1_700_000_000_000_000_000 + rng.u64(0..5_000_000_000)),
                9 => {
                    for _ in 0..[1, 4, 8, 1, 4, 8, 140][rng.usize(..7)] {
                        m.msg(9, &kv(rng, 0));
                    }
                    &mut m
                }
                10 => m.uint(10, [0, 3, u64::from(u32::MAX) + 5][rng.usize(..3)]),
                11 => {
                    for _ in 0..rng.usize(0..3) {
                        let mut event = Msg::default();
                        event.fixed64(1, 5);
                        let name: &[u8] = [b"exception" as &[u8], b"log", b""][rng.usize(..3)];
                        event.bytes(2, name);
                        for _ in 0..rng.usize(0..4) {
                            let mut a = Msg::default();
                            let key: &[u8] = [
                                b"exception.type" as &[u8],
                                b"exception.message",
                                b"exception.stacktrace",
                            ][rng.usize(..3)];
                            a.bytes(1, key);
                            if rng.u8(0..5) > 0 {
                                a.msg(2, &any(rng, 0));
                            }
                            event.msg(3, &a);
                        }
                        m.msg(11, &event);
                    }
                    &mut m
                }
                12 | 14 => m.uint(u32::from(field), 1),
                13 => {
                    let mut link = Msg::default();
                    link.bytes(1, &id(rng, 16, 4)).bytes(2, &id(rng, 8, 4));
                    link.bytes(3, b"k=v")
                        .msg(4, &kv(rng, 0))
                        .uint(5, 1)
                        .fixed32(6, 1);
                    m.msg(13, &link)
                }
                15 => {
                    let mut status = Msg::default();
                    if rng.bool() {
                        status.bytes(2, text(rng).as_bytes());
                    }
                    status.uint(3, [0, 1, 2, 2, 2 + (1 << 32)][rng.usize(..5)]);
                    m.msg(15, &status)
                }
                _ => m.fixed32(16, 0x301),
            };
        }
        if rng.u8(0..10) == 0 {
            // A field no version of the proto has, and a name sent twice (the last wins).
            m.uint(99, 7).bytes(5, b"second name");
        }
        m
    }

    fn request(rng: &mut fastrand::Rng) -> Vec<u8> {
        let mut req = Msg::default();
        for _ in 0..rng.usize(1..3) {
            let mut rs = Msg::default();
            let mut scopes = Msg::default();
            for _ in 0..rng.usize(1..3) {
                let mut ss = Msg::default();
                if rng.bool() {
                    let mut scope = Msg::default();
                    scope
                        .bytes(1, b"ai")
                        .bytes(2, b"1.0")
                        .msg(3, &kv(rng, 0))
                        .uint(4, 0);
                    ss.msg(1, &scope);
                }
                for _ in 0..rng.usize(0..6) {
                    ss.msg(2, &span(rng));
                }
                ss.bytes(3, b"https://opentelemetry.io/schemas/1.0");
                scopes.msg(2, &ss);
            }
            let mut resource = Msg::default();
            for _ in 0..rng.usize(0..3) {
                let mut a = Msg::default();
                a.bytes(1, b"service.name");
                if rng.u8(0..5) > 0 {
                    a.msg(2, &any(rng, 0));
                }
                resource.msg(1, &a);
                resource.msg(1, &kv(rng, 0));
            }
            if rng.bool() {
                let mut entity = Msg::default();
                entity
                    .bytes(1, b"s")
                    .bytes(2, b"service")
                    .bytes(3, b"service.name");
                resource.msg(3, &entity).uint(2, 1);
            }
            // The resource before or after its spans.
            if rng.bool() {
                rs.msg(1, &resource);
                rs.0.extend_from_slice(&scopes.0);
            } else {
                rs.0.extend_from_slice(&scopes.0);
                if rng.u8(0..4) > 0 {
                    rs.msg(1, &resource);
                }
            }
            req.msg(1, &rs);
        }
        req.0
    }

    #[test]
    fn random_requests_read_as_prost_reads_them() {
        let mut rng = fastrand::Rng::with_seed(0x07e1);
        let mut read = 0;
        for _ in 0..1_500 {
            let body = request(&mut rng);
            if check(&body) {
                read += 1;
            }
        }
        // Every one of them: the shapes left to prost are the hand-written ones below.
        assert_eq!(read, 1_500, "the reader read {read} of 1,500");
    }

    #[test]
    fn broken_and_hostile_bodies_answer_as_prost_answers() {
        let mut rng = fastrand::Rng::with_seed(0xbad);
        for _ in 0..1_500 {
            let body = request(&mut rng);
            let mut broken = body.clone();
            match rng.u8(0..4) {
                0 => broken.truncate(rng.usize(..body.len().max(1))),
                1 => {
                    let at = rng.usize(..body.len().max(1));
                    if let Some(b) = broken.get_mut(at) {
                        *b ^= 1 << rng.u8(0..8);
                    }
                }
                2 => broken.insert(rng.usize(..=body.len()), rng.u8(..)),
                _ => {
                    let at = rng.usize(..=body.len());
                    broken.splice(at..at, [0xff; 10]);
                }
            }
            check(&broken);
        }
        for _ in 0..1_000 {
            let len = rng.usize(0..64);
            check(&(0..len).map(|_| rng.u8(..)).collect::<Vec<_>>());
        }
        // Huge lengths, groups, wrong wire types, a bad varint, invalid UTF-8, fields
        // sent twice that prost merges, nesting past what the reader follows.
        let mut nested = Msg::default();
        nested.bytes(1, b"deep");
        for _ in 0..60 {
            let mut array = Msg::default();
            array.msg(1, &nested);
            nested = Msg::default();
            nested.msg(5, &array);
        }
        let mut deep_kv = Msg::default();
        deep_kv.bytes(1, b"k").msg(2, &nested);
        let mut deep = Msg::default();
        deep.bytes(1, &[7; 16]).bytes(2, &[7; 8]).msg(9, &deep_kv);
        let mut two_values = Msg::default();
        two_values
            .bytes(1, b"x")
            .msg(2, Msg::default().bytes(1, b"a"))
            .msg(2, Msg::default().uint(2, 1));
        let mut two_fields = Msg::default();
        two_fields.bytes(1, b"gen_ai.operation.name");
        two_fields.msg(2, Msg::default().uint(2, 1).bytes(1, b"chat"));
        let mut two_status = Msg::default();
        two_status.bytes(1, &[7; 16]).bytes(2, &[7; 8]);
        two_status
            .msg(15, Msg::default().uint(3, 2))
            .msg(15, Msg::default().bytes(2, b"boom"));
        let spans = [
            deep,
            Msg(vec![0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]),
            Msg(vec![0x0b, 0x08, 0x01, 0x0c]),
            Msg(vec![0x0c]),
            Msg(vec![0x09, 1, 2, 3]),
            Msg(vec![0x2a, 2, 0xc3, 0x28]),
            Msg(vec![
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
            ]),
            Msg(vec![
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ]),
            Msg(vec![0x00, 0x01]),
            Msg(vec![0x3a, 0x00]),
            Msg(vec![0x39, 0, 0, 0, 0, 0, 0, 0, 0]),
            Msg(vec![0x82, 0x01, 0x01, 0x01]),
            Msg::default()
                .bytes(1, &[7; 16])
                .bytes(2, &[7; 8])
                .msg(9, &two_values)
                .clone(),
            Msg::default()
                .bytes(1, &[7; 16])
                .bytes(2, &[7; 8])
                .msg(9, &two_fields)
                .clone(),
            two_status,
        ];
        for span in spans {
            let mut ss = Msg::default();
            ss.msg(2, &span);
            let mut rs = Msg::default();
            rs.msg(2, &ss);
            let mut req = Msg::default();
            req.msg(1, &rs);
            check(&req.0);
            check(&span.0);
        }
        let mut two_resources = Msg::default();
        two_resources.msg(1, Msg::default().msg(1, &kv(&mut rng, 0)));
        two_resources.msg(1, Msg::default().uint(2, 1));
        assert!(
            !check(&Msg::default().msg(1, &two_resources).0),
            "prost merges the two"
        );
        assert!(
            !check(&[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]),
            "a length past the end"
        );
    }
}
