//! The `OpenAI` Chat Completions wire (also Ollama, vLLM, LM Studio, `LiteLLM`, `OpenRouter`):
//! the request a conversation becomes, and its answer, whole or as SSE chunks, read back.

use super::{Msg, Reply, ToolSpec, WireCall, malformed};
use serde_json::{Value, json};
use spyglass_protocol::events::Tokens;

pub fn endpoint(base: &str) -> String {
    format!("{base}/chat/completions")
}

pub fn request(model: &str, messages: &[Msg], tools: &[ToolSpec], stream: bool) -> Value {
    let mut wire = Vec::new();
    for msg in messages {
        match msg {
            Msg::User(text) => wire.push(json!({"role": "user", "content": text})),
            Msg::Assistant { text, calls } => {
                let mut m = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                if !calls.is_empty() {
                    m["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments.to_string()},
                            })
                        })
                        .collect();
                }
                wire.push(m);
            }
            Msg::ToolResults(results) => {
                for (id, output) in results {
                    wire.push(
                        json!({"role": "tool", "tool_call_id": id, "content": output.to_string()}),
                    );
                }
            }
        }
    }
    let mut body = json!({"model": model, "messages": wire});
    if !tools.is_empty() {
        body["tools"] = tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.wire, "description": t.description, "parameters": {"type": "object"},
                }})
            })
            .collect();
    }
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn arguments(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(text).map_err(|e| malformed(&format!("tool arguments are not JSON: {e}")))
}

fn usage(body: &Value) -> Option<Tokens> {
    let u = body.get("usage").filter(|u| u.is_object())?;
    let prompt = u["prompt_tokens"].as_u64().unwrap_or(0);
    let completion = u["completion_tokens"].as_u64().unwrap_or(0);
    Some(Tokens {
        prompt,
        completion,
        total: u["total_tokens"].as_u64().unwrap_or(prompt + completion),
    })
}

/// A whole (non-streamed) answer.
pub fn parse(body: &Value) -> Result<Reply, String> {
    let choice = body
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| malformed("no choices[0]"))?;
    let message = choice
        .get("message")
        .ok_or_else(|| malformed("no choices[0].message"))?;
    let mut calls = Vec::new();
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let function = &call["function"];
        let name = function["name"]
            .as_str()
            .ok_or_else(|| malformed("a tool call has no function.name"))?;
        calls.push(WireCall {
            id: call["id"].as_str().unwrap_or_default().to_owned(),
            name: name.to_owned(),
            arguments: arguments(function["arguments"].as_str().unwrap_or_default())?,
        });
    }
    Ok(Reply {
        text: message["content"].as_str().unwrap_or_default().to_owned(),
        calls,
        usage: usage(body),
        finish: choice["finish_reason"]
            .as_str()
            .unwrap_or("stop")
            .to_owned(),
    })
}

/// A streamed answer being gathered, chunk by chunk.
#[derive(Default)]
pub struct Stream {
    text: String,
    /// By the chunk's `index`: id, name, argument text so far.
    calls: Vec<(String, String, String)>,
    usage: Option<Tokens>,
    finish: Option<String>,
    done: bool,
    /// The last `Err` of `feed` was the provider's own error chunk (a failure it sent
    /// mid-stream, the 5xx of a stream already answered 200), not a malformed chunk.
    pub provider_error: bool,
}

impl Stream {
    /// The stream told its end (`[DONE]` or a `finish_reason`): what is missing after
    /// this is not a cut.
    pub fn ended(&self) -> bool {
        self.done || self.finish.is_some()
    }

    /// One `data:` payload; returns the text delta it carried, if any.
    pub fn feed(&mut self, _event: &str, data: &str) -> Result<Option<String>, String> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| malformed(&format!("a stream chunk is not JSON: {e}")))?;
        if let Some(error) = chunk.get("error") {
            self.provider_error = true;
            return Err(error["message"]
                .as_str()
                .map_or_else(|| error.to_string(), str::to_owned));
        }
        if let Some(u) = usage(&chunk) {
            self.usage = Some(u);
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else {
            return Ok(None);
        };
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish = Some(reason.to_owned());
        }
        let delta = &choice["delta"];
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = usize::try_from(call["index"].as_u64().unwrap_or(0)).unwrap_or(0);
            if index > 256 {
                return Err(malformed("a tool call index past 256"));
            }
            while self.calls.len() <= index {
                self.calls.push(Default::default());
            }
            let slot = &mut self.calls[index];
            if let Some(id) = call["id"].as_str() {
                id.clone_into(&mut slot.0);
            }
            if let Some(name) = call["function"]["name"].as_str() {
                slot.1.push_str(name);
            }
            if let Some(args) = call["function"]["arguments"].as_str() {
                slot.2.push_str(args);
            }
        }
        match delta["content"].as_str() {
            Some(text) if !text.is_empty() => {
                self.text.push_str(text);
                Ok(Some(text.to_owned()))
            }
            _ => Ok(None),
        }
    }

    pub fn finish(self) -> Result<Reply, String> {
        if !self.done && self.finish.is_none() {
            return Err(malformed(
                "the stream ended before a finish_reason or [DONE]",
            ));
        }
        let calls = self
            .calls
            .into_iter()
            .map(|(id, name, args)| {
                Ok(WireCall {
                    id,
                    name,
                    arguments: arguments(&args)?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Reply {
            text: self.text,
            calls,
            usage: self.usage,
            finish: self.finish.unwrap_or_else(|| "stop".to_owned()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_chunks_gather_text_and_split_tool_arguments() {
        let mut s = Stream::default();
        let chunks = [
            r#"{"choices":[{"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"a__b","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}"#,
            "[DONE]",
        ];
        let deltas: Vec<_> = chunks
            .iter()
            .filter_map(|c| s.feed("", c).unwrap())
            .collect();
        assert_eq!(deltas, ["Hel", "lo"]);
        let reply = s.finish().unwrap();
        assert_eq!(reply.text, "Hello");
        assert_eq!(reply.calls[0].arguments, json!({"x": 1}));
        assert_eq!(reply.usage.unwrap().total, 8);
        assert_eq!(reply.finish, "tool_calls");
    }

    #[test]
    fn broken_answers_are_malformed() {
        assert!(parse(&json!({"choices": []})).is_err());
        let bad_args = json!({"choices": [{"message": {"tool_calls": [
            {"id": "c", "function": {"name": "x", "arguments": "{nope"}}
        ]}}]});
        assert!(parse(&bad_args).unwrap_err().contains("not JSON"));
        let mut s = Stream::default();
        assert!(s.feed("", "{not json").is_err());
        assert!(Stream::default().finish().is_err());
    }
}
