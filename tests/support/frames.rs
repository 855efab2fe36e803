//! Observer-stream frames for the screen tests, built as JSON values (`serde_json::json!`)
//! rather than `format!`ed text, then fed through the real decoder like a wire frame.

use serde_json::{Value, json};

/// A frame of `kind`: the envelope (`seq`, `ts`, `sessionId`) with the fields of `body`.
pub fn frame(kind: &str, seq: u64, ts: &str, session: &str, body: Value) -> Value {
    let mut frame = json!({"kind": kind, "seq": seq, "ts": ts, "sessionId": session});
    merge(&mut frame, body);
    frame
}

/// `frame` with the fields of `more` added or replaced (a counter, a duration …).
pub fn with(mut frame: Value, more: Value) -> Value {
    merge(&mut frame, more);
    frame
}

fn merge(frame: &mut Value, more: Value) {
    let (Some(frame), Value::Object(more)) = (frame.as_object_mut(), more) else {
        panic!("frames and their fields are JSON objects");
    };
    frame.extend(more);
}

/// `session.created` in the `default` project.
pub fn session_created(
    seq: u64,
    ts: &str,
    session: &str,
    user: &str,
    servers: &[&str],
    mocks: &Value,
) -> Value {
    frame(
        "session.created",
        seq,
        ts,
        session,
        json!({"userId": user, "servers": servers, "project": "default", "mocks": mocks}),
    )
}

/// `tool.called` from `execute`, started at `ts`; input, outcome and duration follow.
pub fn tool_called(seq: u64, ts: &str, session: &str, call: &str, tool: &str) -> ToolCall {
    ToolCall {
        frame: frame(
            "tool.called",
            seq,
            ts,
            session,
            json!({"callId": call, "tool": tool, "startedAt": ts, "source": "execute"}),
        ),
    }
}

/// A `tool.called` frame under construction: input, outcome and duration to set.
pub struct ToolCall {
    frame: Value,
}

impl ToolCall {
    pub fn input(self, input: Value) -> ToolCall {
        self.set("input", input)
    }

    pub fn outcome(self, outcome: Value) -> ToolCall {
        self.set("outcome", outcome)
    }

    pub fn duration(self, seconds: f64) -> ToolCall {
        self.set("duration", json!(seconds))
    }

    /// Any further field (`counter`, `approval` …).
    pub fn set(mut self, field: &str, value: Value) -> ToolCall {
        self.frame[field] = value;
        self
    }

    pub fn build(self) -> Value {
        self.frame
    }
}
