//! The handler of `POST /v1/sessions/{id}/execute`: checks the input's shape, dispatches
//! through `Runtime::execute` and writes the `ToolResult` or the envelope with its status.

use super::state::{AppState, Id, JsonBody, Tenant};
use crate::ApiErrorWithStatus;
use crate::sessions::server_of;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use spyglass_protocol::Envelope;
use spyglass_protocol::RawJson;
use spyglass_protocol::envelope::codes;
use spyglass_protocol::events::Outcome;
use spyglass_protocol::rest::ExecuteRequest;

pub(super) async fn execute(
    State(state): State<AppState>,
    Tenant(tenant): Tenant,
    Id(id): Id,
    JsonBody(req): JsonBody<ExecuteRequest>,
) -> Result<Response, ApiErrorWithStatus> {
    answer(&state, &tenant, &id, req).await
}

async fn answer(
    state: &AppState,
    tenant: &str,
    id: &str,
    req: ExecuteRequest,
) -> Result<Response, ApiErrorWithStatus> {
    if !req.input.is_object() {
        return Err(ApiErrorWithStatus {
            status: 400,
            error: spyglass_protocol::ApiError::new(
                codes::INVALID_BODY,
                format!("input must be an object, found {}", req.input.type_name()),
            )
            .with_field("/input"),
        });
    }
    let dispatched = state
        .rt
        .execute_call(tenant, id, &req.tool, req.input)
        .await?;
    let call = dispatched.call();
    Ok(match &call.outcome {
        Outcome::Result(data) => tool_result_response(&ToolResultRef {
            success: true,
            data,
            error: None,
            duration: call.duration.round() as u64,
            server: server_of(&call.tool),
            tool: &call.tool,
            tool_call_id: &call.call_id,
            called_at: &call.started_at,
        }),
        Outcome::Envelope(envelope) => {
            let status = StatusCode::from_u16(envelope.http_status())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            if status == StatusCode::ACCEPTED {
                (status, Json(held_body(envelope, &req.tool))).into_response()
            } else {
                (status, Json(envelope)).into_response()
            }
        }
    })
}

/// `ToolResult` (the 200 answer, as the SDK reads it) borrowed from the call's event: the
/// same fields in the same order, so the same bytes (`tests::borrowed_answer_is_tool_result`).
#[derive(serde::Serialize)]
struct ToolResultRef<'a> {
    success: bool,
    data: &'a RawJson,
    error: Option<&'a str>,
    duration: u64,
    server: &'a str,
    tool: &'a str,
    tool_call_id: &'a str,
    called_at: &'a str,
}

/// The 202 of a call held for approval. A 2xx is read by the SDK as a `ToolResult` (it
/// takes `success`, `data`, `error`), so the envelope goes in `data` too, where
/// `is_approval_required(result.data)` finds it; its fields stay at the top level for
/// clients that read the envelope itself.
fn held_body(envelope: &Envelope, tool: &str) -> Value {
    let mut body = match serde_json::to_value(envelope) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let data = Value::Object(body.clone());
    body.insert("success".into(), Value::Bool(false));
    body.insert("data".into(), data);
    body.insert("error".into(), Value::String(envelope.code().to_owned()));
    body.insert("server".into(), Value::String(server_of(tool).to_owned()));
    body.insert("tool".into(), Value::String(tool.to_owned()));
    Value::Object(body)
}

impl ToolResultRef<'_> {
    /// The length `write` gives when no string needs escaping (the usual answer): a
    /// buffer of exactly this capacity becomes the body's bytes without another
    /// allocation, where `Bytes` takes one with room to spare as shared.
    fn unescaped_len(&self) -> usize {
        let text = |t: &str| t.len() + 2;
        let digits = self.duration.checked_ilog10().map_or(1, |d| d as usize + 1);
        let keys = r#"{"success":,"data":,"error":,"duration":,"server":,"tool":,"tool_call_id":,"called_at":}"#;
        keys.len()
            + if self.success { 4 } else { 5 }
            + self.data.get().len()
            + self.error.map_or(4, text)
            + digits
            + text(self.server)
            + text(self.tool)
            + text(self.tool_call_id)
            + text(self.called_at)
    }

    /// The answer as `serde_json::to_writer` writes it, byte for byte, without its
    /// per-byte escaping of the eight keys and of strings that need none (ids, names,
    /// stamps): a fifth of a mocked execute's server-side instructions went there.
    fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(if self.success {
            b"{\"success\":true,\"data\":"
        } else {
            b"{\"success\":false,\"data\":"
        });
        out.extend_from_slice(self.data.get().as_bytes());
        out.extend_from_slice(b",\"error\":");
        match self.error {
            Some(error) => json_str(out, error)?,
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"duration\":");
        serde_json::to_writer(&mut *out, &self.duration)?;
        out.extend_from_slice(b",\"server\":");
        json_str(out, self.server)?;
        out.extend_from_slice(b",\"tool\":");
        json_str(out, self.tool)?;
        out.extend_from_slice(b",\"tool_call_id\":");
        json_str(out, self.tool_call_id)?;
        out.extend_from_slice(b",\"called_at\":");
        json_str(out, self.called_at)?;
        out.push(b'}');
        Ok(())
    }
}

/// `text` as a JSON string, as `serde_json` writes it: copied when no byte needs escaping
/// (`serde_json` escapes only `"`, `\` and bytes below 0x20), else by `serde_json`.
fn json_str(out: &mut Vec<u8>, text: &str) -> serde_json::Result<()> {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        Ok(())
    } else {
        serde_json::to_writer(out, text)
    }
}

/// An execute's answer, written into a buffer of its size: axum's `Json` starts at 128
/// bytes and grows, and an answer is the mock entry plus about 200 bytes.
fn tool_result_response(result: &ToolResultRef<'_>) -> Response {
    let mut body = Vec::with_capacity(result.unescaped_len());
    match result.write(&mut body) {
        Ok(()) => {
            // What `(status, [content-type], body).into_response()` builds, without the
            // header array and the octet-stream type it replaces.
            let mut response = Response::new(axum::body::Body::from(body));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        }
        // Cannot happen for these field types; axum's own path answers as it always did.
        Err(_) => Json(result).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::ToolResultRef;
    use spyglass_protocol::RawJson;
    use spyglass_protocol::rest::ToolResult;

    #[test]
    fn borrowed_answer_is_tool_result() {
        let data = RawJson::from_value(&serde_json::json!({"id": "pay_1", "n": [1, 2.5, null]}));
        let owned = ToolResult {
            success: true,
            data: data.clone(),
            error: None,
            duration: 3,
            server: "asaas".into(),
            tool: "asaas/x\u{202e}\"q".into(),
            tool_call_id: "call_abc".into(),
            called_at: "2026-11-25T21:00:00.000001Z".into(),
        };
        let borrowed = ToolResultRef {
            success: true,
            data: &data,
            error: None,
            duration: 3,
            server: &owned.server,
            tool: &owned.tool,
            tool_call_id: &owned.tool_call_id,
            called_at: &owned.called_at,
        };
        assert_eq!(
            serde_json::to_string(&borrowed).unwrap(),
            serde_json::to_string(&owned).unwrap()
        );
    }

    /// A string of `n` characters drawn from what needs escaping and what does not.
    fn hostile(n: usize) -> String {
        const PIECES: &[&str] = &[
            "a", "Z", "0", "_", "-", ":", ".", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{0}",
            "\u{1f}", "\u{7f}", "\u{80}", "é", "\u{202e}", "\u{2028}", "😀", "\u{feff}", "{", "}",
            "\\u0041",
        ];
        (0..n)
            .map(|_| PIECES[fastrand::usize(..PIECES.len())])
            .collect()
    }

    #[test]
    fn written_answer_is_serde_jsons() {
        fastrand::seed(13);
        for i in 0..5000 {
            let data = RawJson::from_value(&serde_json::json!({"s": hostile(i % 7), "n": i}));
            let owned = ToolResult {
                success: i % 3 != 0,
                data: data.clone(),
                error: (i % 4 == 0).then(|| hostile(i % 5)),
                duration: fastrand::u64(..) >> (i % 64),
                server: hostile(i % 9),
                tool: hostile(i % 11),
                tool_call_id: hostile(i % 23),
                called_at: hostile(i % 31),
            };
            let borrowed = ToolResultRef {
                success: owned.success,
                data: &data,
                error: owned.error.as_deref(),
                duration: owned.duration,
                server: &owned.server,
                tool: &owned.tool,
                tool_call_id: &owned.tool_call_id,
                called_at: &owned.called_at,
            };
            let mut written = Vec::new();
            borrowed.write(&mut written).unwrap();
            let plain = [
                owned.error.as_deref().unwrap_or(""),
                &owned.server,
                &owned.tool,
                &owned.tool_call_id,
                &owned.called_at,
            ]
            .iter()
            .all(|t| t.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'));
            if plain {
                assert_eq!(written.len(), borrowed.unescaped_len(), "case {i}");
            }
            assert_eq!(
                String::from_utf8(written).unwrap(),
                serde_json::to_string(&owned).unwrap(),
                "case {i}"
            );
        }
    }
}
