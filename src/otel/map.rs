//! What one span is, read through the conventions producers emit: the `GenAI` semantic
//! conventions first, then the Vercel AI SDK's `ai.*`, `OpenInference` and `OpenLLMetry`.

use super::decode::{SpanIn, line, text};
use crate::protocol::RawJson;
use serde_json::Value;

/// The part a span plays in an agent run.
#[derive(Debug, Clone, PartialEq)]
pub enum Role {
    Agent(AgentSpan),
    Model(ModelSpan),
    Tool(ToolSpan),
    /// No convention matched: shown as it came, counted.
    Other,
}

/// An agent invocation (a run): `invoke_agent`, `ai.generateText`, an `OpenInference` AGENT.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentSpan {
    pub name: String,
    pub model: String,
    pub provider: String,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub finish_reason: String,
    pub input: Option<RawJson>,
    pub output: Option<RawJson>,
    pub error: Option<Failure>,
}

/// One model call: a step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelSpan {
    pub model: String,
    pub provider: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub finish_reason: String,
    pub error: Option<Failure>,
    /// The first user text it was sent (`gen_ai.input.messages`), the run's prompt when
    /// the agent span names none.
    pub prompt: Option<String>,
}

/// One tool execution: a call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSpan {
    pub name: String,
    pub call_id: Option<String>,
    pub args: RawJson,
    pub result: RawJson,
    pub error: Option<Failure>,
}

/// A span's failure: `error.type` (else the exception's type) and a message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failure {
    pub kind: String,
    pub message: String,
}

/// The conversation a span names (`gen_ai.conversation.id`, `OpenInference` `session.id`).
pub fn conversation_id(span: &SpanIn) -> Option<String> {
    [
        "gen_ai.conversation.id",
        "session.id",
        "ai.telemetry.metadata.sessionId",
    ]
    .iter()
    .find_map(|k| string(span, k))
    .filter(|s| !s.is_empty())
}

pub fn classify(span: &SpanIn) -> Role {
    if let Some(op) = string(span, "gen_ai.operation.name") {
        match op.as_str() {
            "invoke_agent" | "create_agent" => return Role::Agent(agent(span)),
            "chat" | "generate_content" | "text_completion" => return Role::Model(model(span)),
            "execute_tool" => return Role::Tool(tool(span)),
            _ => {}
        }
    }
    if let Some(op) = string(span, "ai.operationId").or_else(|| string(span, "operation.name")) {
        let op = op.split(' ').next().unwrap_or_default().to_owned();
        match op.as_str() {
            "ai.generateText" | "ai.streamText" | "ai.generateObject" | "ai.streamObject" => {
                return Role::Agent(agent(span));
            }
            "ai.generateText.doGenerate"
            | "ai.streamText.doStream"
            | "ai.generateObject.doGenerate"
            | "ai.streamObject.doStream" => return Role::Model(model(span)),
            "ai.toolCall" => return Role::Tool(tool(span)),
            _ => {}
        }
    }
    if let Some(kind) = string(span, "openinference.span.kind") {
        match kind.to_ascii_uppercase().as_str() {
            "AGENT" => return Role::Agent(agent(span)),
            "LLM" => return Role::Model(model(span)),
            "TOOL" => return Role::Tool(tool(span)),
            _ => {}
        }
    }
    if let Some(kind) = string(span, "traceloop.span.kind") {
        match kind.as_str() {
            "agent" | "workflow" => return Role::Agent(agent(span)),
            "tool" => return Role::Tool(tool(span)),
            _ => {}
        }
    }
    // `OpenLLMetry`'s model spans carry `llm.request.type` and the `GenAI` usage keys.
    if string(span, "llm.request.type").is_some() {
        return Role::Model(model(span));
    }
    // Pydantic AI before the `execute_tool` operation name: a tool span names its tool.
    if string(span, "gen_ai.tool.name").is_some() {
        return Role::Tool(tool(span));
    }
    Role::Other
}

fn agent(span: &SpanIn) -> AgentSpan {
    AgentSpan {
        name: first_string(
            span,
            &[
                "gen_ai.agent.name",
                "agent_name",
                "ai.telemetry.functionId",
                "traceloop.entity.name",
                "agent.name",
            ],
        )
        .unwrap_or_else(|| span.name.clone()),
        model: model_name(span),
        provider: provider(span),
        input_tokens: input_tokens(span),
        output_tokens: output_tokens(span),
        finish_reason: finish_reason(span),
        input: first_json(
            span,
            &[
                "input.value",
                "ai.prompt",
                "traceloop.entity.input",
                "gen_ai.input.messages",
            ],
        )
        .map(unwrap_prompt),
        output: first_json(
            span,
            &[
                "output.value",
                "final_result",
                "ai.response.text",
                "traceloop.entity.output",
                "gen_ai.output.messages",
            ],
        ),
        error: failure(span),
    }
}

/// The Vercel AI SDK's `ai.prompt` is `{"prompt": "..."}` for a plain prompt: its text.
fn unwrap_prompt(input: RawJson) -> RawJson {
    match input.to_value() {
        Value::Object(map) if map.len() == 1 && map.get("prompt").is_some_and(Value::is_string) => {
            RawJson::from_value(&map["prompt"])
        }
        _ => input,
    }
}

fn model(span: &SpanIn) -> ModelSpan {
    ModelSpan {
        model: model_name(span),
        provider: provider(span),
        input_tokens: input_tokens(span).unwrap_or(0),
        output_tokens: output_tokens(span).unwrap_or(0),
        finish_reason: finish_reason(span),
        error: failure(span),
        prompt: first_user_text(span),
    }
}

/// The text of the first user message in `gen_ai.input.messages` (parts with `content`, or
/// a plain `content` string).
fn first_user_text(span: &SpanIn) -> Option<String> {
    let Value::String(messages) = span.attributes.get("gen_ai.input.messages")? else {
        return None;
    };
    let messages: Vec<Value> = serde_json::from_str(messages).ok()?;
    let user = messages.iter().find(|m| m["role"] == "user")?;
    let content = match &user["content"] {
        Value::String(s) => s.clone(),
        _ => user["parts"]
            .as_array()?
            .iter()
            .filter_map(|p| p["content"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
    };
    (!content.is_empty()).then(|| text(&content))
}

fn tool(span: &SpanIn) -> ToolSpan {
    let name = first_string(
        span,
        &[
            "gen_ai.tool.name",
            "ai.toolCall.name",
            "tool.name",
            "traceloop.entity.name",
        ],
    )
    .unwrap_or_else(|| span.name.clone());
    ToolSpan {
        name,
        call_id: first_string(
            span,
            &[
                "gen_ai.tool.call.id",
                "ai.toolCall.id",
                "tool_call.id",
                "tool.call.id",
            ],
        ),
        args: first_json(
            span,
            &[
                "gen_ai.tool.call.arguments",
                "tool_arguments",
                "ai.toolCall.args",
                "input.value",
                "tool.parameters",
                "traceloop.entity.input",
            ],
        )
        .unwrap_or_default(),
        result: first_json(
            span,
            &[
                "gen_ai.tool.call.result",
                "tool_response",
                "ai.toolCall.result",
                "output.value",
                "traceloop.entity.output",
            ],
        )
        .unwrap_or_default(),
        error: failure(span),
    }
}

fn model_name(span: &SpanIn) -> String {
    first_string(
        span,
        &[
            "gen_ai.response.model",
            "gen_ai.request.model",
            "ai.response.model",
            "ai.model.id",
            "llm.model_name",
            "model_name",
        ],
    )
    .unwrap_or_default()
}

fn provider(span: &SpanIn) -> String {
    first_string(
        span,
        &[
            "gen_ai.provider.name",
            "gen_ai.system",
            "ai.model.provider",
            "llm.provider",
            "llm.system",
        ],
    )
    .unwrap_or_default()
}

fn input_tokens(span: &SpanIn) -> Option<u64> {
    first_u64(
        span,
        &[
            "gen_ai.usage.input_tokens",
            "gen_ai.aggregated_usage.input_tokens",
            "gen_ai.usage.prompt_tokens",
            "ai.usage.inputTokens",
            "ai.usage.promptTokens",
            "llm.token_count.prompt",
            "llm.usage.prompt_tokens",
        ],
    )
}

fn output_tokens(span: &SpanIn) -> Option<u64> {
    first_u64(
        span,
        &[
            "gen_ai.usage.output_tokens",
            "gen_ai.aggregated_usage.output_tokens",
            "gen_ai.usage.completion_tokens",
            "ai.usage.outputTokens",
            "ai.usage.completionTokens",
            "llm.token_count.completion",
            "llm.usage.completion_tokens",
        ],
    )
}

fn finish_reason(span: &SpanIn) -> String {
    match span
        .attributes
        .get("gen_ai.response.finish_reasons")
        .or_else(|| span.attributes.get("ai.response.finishReason"))
        .or_else(|| span.attributes.get("llm.finish_reason"))
    {
        Some(Value::String(s)) => line(s),
        Some(Value::Array(items)) => line(
            &items
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => String::new(),
    }
}

/// ERROR status, `error.type` or an exception event make a failure.
fn failure(span: &SpanIn) -> Option<Failure> {
    let error_type = string(span, "error.type");
    if span.error.is_none() && error_type.is_none() {
        return None;
    }
    let (exc_type, exc_message) = span.exception.clone().unwrap_or_default();
    let kind = error_type
        .or_else(|| (!exc_type.is_empty()).then_some(exc_type))
        .unwrap_or_else(|| "error".to_owned());
    let message = span
        .error
        .clone()
        .filter(|m| !m.is_empty())
        .or_else(|| (!exc_message.is_empty()).then_some(exc_message))
        .unwrap_or_default();
    Some(Failure { kind, message })
}

fn string(span: &SpanIn, key: &str) -> Option<String> {
    match span.attributes.get(key)? {
        Value::String(s) => Some(line(s)),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn first_string(span: &SpanIn, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| string(span, k))
        .filter(|s| !s.is_empty())
}

fn first_u64(span: &SpanIn, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| match span.attributes.get(*k)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

/// A value that is JSON text (tool arguments usually are) is read as JSON; other text
/// stays a string.
fn first_json(span: &SpanIn, keys: &[&str]) -> Option<RawJson> {
    keys.iter().find_map(|k| {
        let value = span.attributes.get(*k)?;
        Some(match value {
            Value::String(s) => {
                let trimmed = s.trim_start();
                let parsed = (trimmed.starts_with('{') || trimmed.starts_with('['))
                    .then(|| serde_json::from_str::<Value>(s).ok())
                    .flatten();
                RawJson::from_value(&parsed.map_or_else(|| Value::String(text(s)), clean))
            }
            other => RawJson::from_value(other),
        })
    })
}

/// Strings inside parsed JSON text are client input too: JSON escapes (`\u001b`) decode
/// to the control characters the attribute's text had shown harmlessly.
fn clean(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(text(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(clean).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (line(&k), clean(v))).collect())
        }
        other => other,
    }
}
