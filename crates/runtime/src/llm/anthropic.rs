//! The Anthropic Messages wire: the request a conversation becomes (tool uses and tool
//! results as content blocks), and its answer, whole or as streamed events, read back.

use super::{Msg, Reply, ToolSpec, WireCall, malformed};
use serde_json::{Value, json};
use spyglass_protocol::events::Tokens;

/// The `anthropic-version` header every request carries.
pub const VERSION: &str = "2023-06-01";

pub fn endpoint(base: &str) -> String {
    format!("{base}/messages")
}

pub fn request(
    model: &str,
    messages: &[Msg],
    tools: &[ToolSpec],
    stream: bool,
    max_tokens: u32,
) -> Value {
    let wire: Vec<Value> = messages
        .iter()
        .map(|msg| match msg {
            Msg::User(text) => json!({"role": "user", "content": text}),
            Msg::Assistant { text, calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in calls {
                    blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
                }
                json!({"role": "assistant", "content": blocks})
            }
            Msg::ToolResults(results) => json!({"role": "user", "content": results
                .iter()
                .map(|(id, output)| json!({"type": "tool_result", "tool_use_id": id, "content": output.to_string()}))
                .collect::<Vec<_>>()}),
        })
        .collect();
    let mut body = json!({"model": model, "max_tokens": max_tokens, "messages": wire});
    if !tools.is_empty() {
        body["tools"] = tools
            .iter()
            .map(|t| json!({"name": t.wire, "description": t.description, "input_schema": {"type": "object"}}))
            .collect();
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

fn tokens(input: u64, output: u64) -> Tokens {
    Tokens {
        prompt: input,
        completion: output,
        total: input + output,
    }
}

/// A whole (non-streamed) answer.
pub fn parse(body: &Value) -> Result<Reply, String> {
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("no content array"))?;
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in content {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => calls.push(WireCall {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"]
                    .as_str()
                    .ok_or_else(|| malformed("a tool_use block has no name"))?
                    .to_owned(),
                arguments: block.get("input").cloned().unwrap_or_else(|| json!({})),
            }),
            _ => {}
        }
    }
    let usage = body.get("usage").filter(|u| u.is_object()).map(|u| {
        tokens(
            u["input_tokens"].as_u64().unwrap_or(0),
            u["output_tokens"].as_u64().unwrap_or(0),
        )
    });
    Ok(Reply {
        text,
        calls,
        usage,
        finish: body["stop_reason"]
            .as_str()
            .unwrap_or("end_turn")
            .to_owned(),
    })
}

enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
}

/// A streamed answer being gathered, event by event.
#[derive(Default)]
pub struct Stream {
    text: String,
    blocks: Vec<(u64, Block)>,
    input_tokens: u64,
    output_tokens: u64,
    usage_seen: bool,
    finish: Option<String>,
    stopped: bool,
    /// The last `Err` of `feed` was the provider's own `error` event (`overloaded_error`
    /// mid-stream), not a malformed event.
    pub provider_error: bool,
}

impl Stream {
    /// The stream told its end (`message_stop`).
    pub fn ended(&self) -> bool {
        self.stopped
    }

    /// One event; returns the text delta it carried, if any.
    pub fn feed(&mut self, _event: &str, data: &str) -> Result<Option<String>, String> {
        let event: Value = serde_json::from_str(data)
            .map_err(|e| malformed(&format!("a stream event is not JSON: {e}")))?;
        match event["type"].as_str().unwrap_or_default() {
            "error" => {
                self.provider_error = true;
                return Err(event["error"]["message"]
                    .as_str()
                    .map_or_else(|| event.to_string(), str::to_owned));
            }
            "message_start" => {
                if let Some(n) = event["message"]["usage"]["input_tokens"].as_u64() {
                    self.input_tokens = n;
                    self.usage_seen = true;
                }
            }
            "content_block_start" => {
                let index = event["index"].as_u64().unwrap_or(0);
                let block = &event["content_block"];
                let block = match block["type"].as_str() {
                    Some("tool_use") => Block::Tool {
                        id: block["id"].as_str().unwrap_or_default().to_owned(),
                        name: block["name"].as_str().unwrap_or_default().to_owned(),
                        json: String::new(),
                    },
                    _ => Block::Text,
                };
                self.blocks.push((index, block));
            }
            "content_block_delta" => {
                let index = event["index"].as_u64().unwrap_or(0);
                let delta = &event["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        let text = delta["text"].as_str().unwrap_or_default();
                        if !text.is_empty() {
                            self.text.push_str(text);
                            return Ok(Some(text.to_owned()));
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some((_, Block::Tool { json, .. })) =
                            self.blocks.iter_mut().find(|(i, _)| *i == index)
                        {
                            json.push_str(delta["partial_json"].as_str().unwrap_or_default());
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    self.finish = Some(reason.to_owned());
                }
                if let Some(n) = event["usage"]["output_tokens"].as_u64() {
                    self.output_tokens = n;
                    self.usage_seen = true;
                }
            }
            "message_stop" => self.stopped = true,
            _ => {}
        }
        Ok(None)
    }

    pub fn finish(self) -> Result<Reply, String> {
        if !self.stopped {
            return Err(malformed("the stream ended before message_stop"));
        }
        let mut calls = Vec::new();
        for (_, block) in self.blocks {
            if let Block::Tool { id, name, json } = block {
                let arguments = if json.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&json)
                        .map_err(|e| malformed(&format!("tool input is not JSON: {e}")))?
                };
                calls.push(WireCall {
                    id,
                    name,
                    arguments,
                });
            }
        }
        Ok(Reply {
            text: self.text,
            calls,
            usage: self
                .usage_seen
                .then(|| tokens(self.input_tokens, self.output_tokens)),
            finish: self.finish.unwrap_or_else(|| "end_turn".to_owned()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_events_gather_text_tool_input_and_usage() {
        let mut s = Stream::default();
        let events = [
            r#"{"type":"message_start","message":{"usage":{"input_tokens":11}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"On it"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"a__b"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"n\":"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"2}"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}"#,
            r#"{"type":"message_stop"}"#,
        ];
        let deltas: Vec<_> = events
            .iter()
            .filter_map(|e| s.feed("", e).unwrap())
            .collect();
        assert_eq!(deltas, ["On it"]);
        let reply = s.finish().unwrap();
        assert_eq!(reply.calls[0].arguments, json!({"n": 2}));
        assert_eq!(reply.usage.unwrap().total, 18);
        assert_eq!(reply.finish, "tool_use");
    }

    #[test]
    fn errors_and_cut_streams_fail() {
        let mut s = Stream::default();
        let err = s
            .feed(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            )
            .unwrap_err();
        assert_eq!(err, "Overloaded");
        assert!(Stream::default().finish().is_err());
        assert!(parse(&json!({"id": "x"})).is_err());
    }
}
