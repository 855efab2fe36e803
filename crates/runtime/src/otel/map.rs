//! What one span is, read through the conventions producers emit: the `GenAI` semantic
//! conventions first, then the Vercel AI SDK's `ai.*`, `OpenInference` and `OpenLLMetry`.

use super::decode::{Attributes, SpanIn, line, line_cow, text, text_cow};
use super::decode::{MAX_NAME_BYTES as MAX_KEY_BYTES, MAX_VALUE_BYTES as MAX_STRING_BYTES};
use serde_json::Value;
use serde_json::value::RawValue;
use spyglass_protocol::RawJson;
use std::borrow::Cow;
use std::sync::LazyLock;

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

/// Declares the attribute keys the mapping reads: a `Key` per key, and `KEYS` naming each.
macro_rules! keys {
    ($($name:ident = $key:literal,)*) => {
        /// An attribute key some convention reads.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[allow(non_camel_case_types)]
        enum Key { $($name,)* }

        /// Every key, in `Key` order.
        const KEYS: &[(&str, Key)] = &[$(($key, Key::$name),)*];
    };
}

keys! {
    ConversationId = "gen_ai.conversation.id",
    SessionId = "session.id",
    AiSessionId = "ai.telemetry.metadata.sessionId",
    OperationName = "gen_ai.operation.name",
    AiOperationId = "ai.operationId",
    PlainOperationName = "operation.name",
    OpenInferenceKind = "openinference.span.kind",
    TraceloopKind = "traceloop.span.kind",
    LlmRequestType = "llm.request.type",
    ToolName = "gen_ai.tool.name",
    AgentName = "gen_ai.agent.name",
    AgentNamePlain = "agent_name",
    AiFunctionId = "ai.telemetry.functionId",
    TraceloopName = "traceloop.entity.name",
    AgentNameDotted = "agent.name",
    InputValue = "input.value",
    AiPrompt = "ai.prompt",
    TraceloopInput = "traceloop.entity.input",
    InputMessages = "gen_ai.input.messages",
    OutputValue = "output.value",
    FinalResult = "final_result",
    AiResponseText = "ai.response.text",
    TraceloopOutput = "traceloop.entity.output",
    OutputMessages = "gen_ai.output.messages",
    AiToolName = "ai.toolCall.name",
    ToolNamePlain = "tool.name",
    ToolCallId = "gen_ai.tool.call.id",
    AiToolCallId = "ai.toolCall.id",
    ToolCallIdUnderscore = "tool_call.id",
    ToolCallIdDotted = "tool.call.id",
    ToolArguments = "gen_ai.tool.call.arguments",
    ToolArgumentsPlain = "tool_arguments",
    AiToolArgs = "ai.toolCall.args",
    ToolParameters = "tool.parameters",
    ToolResult = "gen_ai.tool.call.result",
    ToolResponse = "tool_response",
    AiToolResult = "ai.toolCall.result",
    ResponseModel = "gen_ai.response.model",
    RequestModel = "gen_ai.request.model",
    AiResponseModel = "ai.response.model",
    AiModelId = "ai.model.id",
    LlmModelName = "llm.model_name",
    ModelName = "model_name",
    ProviderName = "gen_ai.provider.name",
    System = "gen_ai.system",
    AiModelProvider = "ai.model.provider",
    LlmProvider = "llm.provider",
    LlmSystem = "llm.system",
    InputTokens = "gen_ai.usage.input_tokens",
    AggregatedInputTokens = "gen_ai.aggregated_usage.input_tokens",
    PromptTokens = "gen_ai.usage.prompt_tokens",
    AiInputTokens = "ai.usage.inputTokens",
    AiPromptTokens = "ai.usage.promptTokens",
    LlmTokenPrompt = "llm.token_count.prompt",
    LlmUsagePrompt = "llm.usage.prompt_tokens",
    OutputTokens = "gen_ai.usage.output_tokens",
    AggregatedOutputTokens = "gen_ai.aggregated_usage.output_tokens",
    CompletionTokens = "gen_ai.usage.completion_tokens",
    AiOutputTokens = "ai.usage.outputTokens",
    AiCompletionTokens = "ai.usage.completionTokens",
    LlmTokenCompletion = "llm.token_count.completion",
    LlmUsageCompletion = "llm.usage.completion_tokens",
    FinishReasons = "gen_ai.response.finish_reasons",
    AiFinishReason = "ai.response.finishReason",
    LlmFinishReason = "llm.finish_reason",
    ErrorType = "error.type",
}

/// The key a name is: one slot of `KeyTable` picked from its length and three of its
/// bytes, then one comparison.
fn key_of(name: &str) -> Option<Key> {
    static TABLE: LazyLock<KeyTable> = LazyLock::new(KeyTable::new);
    TABLE.get(name)
}

/// The conventions' keys by `KeyTable::slot`: each slot holds the keys that land in it
/// (rarely more than one), so a name the conventions do not read (most of what real
/// producers send) costs a few byte reads and at most a comparison or two, not a hash of
/// the whole name.
struct KeyTable {
    slots: Vec<Vec<(&'static str, Key)>>,
}

impl KeyTable {
    const SLOTS: usize = 512;

    fn new() -> KeyTable {
        let mut slots = vec![Vec::new(); Self::SLOTS];
        for (name, key) in KEYS {
            slots[Self::slot(name.as_bytes())].push((*name, *key));
        }
        KeyTable { slots }
    }

    fn slot(name: &[u8]) -> usize {
        let (Some(first), Some(last)) = (name.first(), name.last()) else {
            return 0;
        };
        let middle = name[name.len() / 2];
        let mixed = name
            .len()
            .wrapping_mul(31)
            .wrapping_add(usize::from(*first).wrapping_mul(7))
            .wrapping_add(usize::from(middle).wrapping_mul(131))
            .wrapping_add(usize::from(*last).wrapping_mul(17));
        mixed % Self::SLOTS
    }

    fn get(&self, name: &str) -> Option<Key> {
        self.slots[Self::slot(name.as_bytes())]
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, key)| *key)
    }
}

/// The part a span plays, before its fields are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Agent,
    Model,
    Tool,
    Other,
}

/// A span's attributes that some convention reads, found in one pass over them: each
/// lookup after that is an index, not a search of the span's map per convention. It holds
/// the span's attribute list (`flatten`'s: keys and strings bounded and cleaned) while it
/// reads it, so a role's strings move out of it.
pub struct Attrs<'a> {
    span: &'a SpanIn,
    list: Vec<(String, Value)>,
    values: [Option<u16>; KEYS.len()],
}

impl<'a> Attrs<'a> {
    /// Reads `list`, the attributes taken out of `span` (given back by `classify` when no
    /// convention matched).
    pub fn with(span: &'a SpanIn, list: Attributes) -> Attrs<'a> {
        let list = list.0;
        let mut values = [None; KEYS.len()];
        // In the order sent: a key sent twice reads as its last value.
        for (at, (name, _)) in list.iter().enumerate() {
            if let Some(key) = key_of(name)
                && let Ok(at) = u16::try_from(at)
            {
                values[key as usize] = Some(at);
            }
        }
        Attrs { span, list, values }
    }

    fn get(&self, key: Key) -> Option<&Value> {
        self.values[key as usize].map(|at| &self.list[usize::from(at)].1)
    }

    fn get_mut(&mut self, key: Key) -> Option<&mut Value> {
        self.values[key as usize].map(|at| &mut self.list[usize::from(at)].1)
    }

    /// A string (one bounded line) or a number's text.
    fn string(&self, key: Key) -> Option<Cow<'_, str>> {
        match self.get(key)? {
            Value::String(s) => Some(line_cow(s)),
            Value::Number(n) => Some(Cow::Owned(n.to_string())),
            _ => None,
        }
    }

    /// A string value's text as `flatten` keeps it (bounded, cleaned); `None` for others.
    fn text(&self, key: Key) -> Option<&str> {
        self.get(key)?.as_str()
    }

    /// The first of `keys` that is a string or number, unless that one is empty.
    fn first_string(&self, keys: &[Key]) -> Option<Cow<'_, str>> {
        let key = self.first_present(keys)?;
        self.string(key).filter(|s| !s.is_empty())
    }

    /// The first of `keys` whose value is a string or a number.
    fn first_present(&self, keys: &[Key]) -> Option<Key> {
        keys.iter()
            .copied()
            .find(|k| matches!(self.get(*k), Some(Value::String(_) | Value::Number(_))))
    }

    /// `first_string`, owned: a string cleaning leaves as it is moves out of the list
    /// rather than being copied (a role reads each of its keys once).
    fn take_first_string(&mut self, keys: &[Key]) -> Option<String> {
        let key = self.first_present(keys)?;
        self.take_string(key).filter(|s| !s.is_empty())
    }

    /// `string`, owned, moved out of the list when cleaning leaves it as it is.
    fn take_string(&mut self, key: Key) -> Option<String> {
        let changed = match self.string(key)? {
            Cow::Borrowed(_) => None,
            Cow::Owned(changed) => Some(changed),
        };
        changed.or_else(|| match self.get_mut(key) {
            Some(Value::String(s)) => Some(std::mem::take(s)),
            _ => None,
        })
    }

    fn first_u64(&self, keys: &[Key]) -> Option<u64> {
        keys.iter().find_map(|k| match self.get(*k)? {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        })
    }

    /// A value that is JSON text (tool arguments usually are) is read as JSON; other text
    /// stays a string.
    fn first_json(&self, keys: &[Key]) -> Option<RawJson> {
        keys.iter().find_map(|k| {
            Some(match self.get(*k)? {
                Value::String(s) => json_text(s),
                other => RawJson::from_value(other),
            })
        })
    }

    /// The conversation the span names (`gen_ai.conversation.id`, `OpenInference`
    /// `session.id`).
    pub fn conversation_id(&self) -> Option<String> {
        self.first_string(&[Key::ConversationId, Key::SessionId, Key::AiSessionId])
            .map(Cow::into_owned)
    }

    /// The span's role, its strings moved out of the list; the list back, untouched, when
    /// no convention matched (the span is then shown with every attribute).
    pub fn classify(mut self) -> (Role, Option<Attributes>) {
        let role = match self.kind() {
            Kind::Agent => Role::Agent(self.agent()),
            Kind::Model => Role::Model(self.model()),
            Kind::Tool => Role::Tool(self.tool()),
            Kind::Other => {
                return (Role::Other, Some(Attributes(self.list)));
            }
        };
        (role, None)
    }

    fn kind(&self) -> Kind {
        if let Some(op) = self.string(Key::OperationName) {
            match &*op {
                "invoke_agent" | "create_agent" => return Kind::Agent,
                "chat" | "generate_content" | "text_completion" => {
                    return Kind::Model;
                }
                "execute_tool" => return Kind::Tool,
                _ => {}
            }
        }
        if let Some(op) = self
            .string(Key::AiOperationId)
            .or_else(|| self.string(Key::PlainOperationName))
        {
            match op.split(' ').next().unwrap_or_default() {
                "ai.generateText" | "ai.streamText" | "ai.generateObject" | "ai.streamObject" => {
                    return Kind::Agent;
                }
                "ai.generateText.doGenerate"
                | "ai.streamText.doStream"
                | "ai.generateObject.doGenerate"
                | "ai.streamObject.doStream" => return Kind::Model,
                "ai.toolCall" => return Kind::Tool,
                _ => {}
            }
        }
        if let Some(kind) = self.string(Key::OpenInferenceKind) {
            match kind.to_ascii_uppercase().as_str() {
                "AGENT" => return Kind::Agent,
                "LLM" => return Kind::Model,
                "TOOL" => return Kind::Tool,
                _ => {}
            }
        }
        if let Some(kind) = self.string(Key::TraceloopKind) {
            match &*kind {
                "agent" | "workflow" => return Kind::Agent,
                "tool" => return Kind::Tool,
                _ => {}
            }
        }
        // `OpenLLMetry`'s model spans carry `llm.request.type` and the `GenAI` usage keys.
        if self.string(Key::LlmRequestType).is_some() {
            return Kind::Model;
        }
        // Pydantic AI before the `execute_tool` operation name: a tool span names its tool.
        if self.string(Key::ToolName).is_some() {
            return Kind::Tool;
        }
        Kind::Other
    }

    fn agent(&mut self) -> AgentSpan {
        AgentSpan {
            name: self
                .take_first_string(&[
                    Key::AgentName,
                    Key::AgentNamePlain,
                    Key::AiFunctionId,
                    Key::TraceloopName,
                    Key::AgentNameDotted,
                ])
                .unwrap_or_else(|| self.span.name.clone()),
            model: self.model_name(),
            provider: self.provider(),
            input_tokens: self.input_tokens(),
            output_tokens: self.output_tokens(),
            finish_reason: self.finish_reason(),
            input: self
                .first_json(&[
                    Key::InputValue,
                    Key::AiPrompt,
                    Key::TraceloopInput,
                    Key::InputMessages,
                ])
                .map(unwrap_prompt),
            output: self.first_json(&[
                Key::OutputValue,
                Key::FinalResult,
                Key::AiResponseText,
                Key::TraceloopOutput,
                Key::OutputMessages,
            ]),
            error: self.failure(),
        }
    }

    fn model(&mut self) -> ModelSpan {
        ModelSpan {
            model: self.model_name(),
            provider: self.provider(),
            input_tokens: self.input_tokens().unwrap_or(0),
            output_tokens: self.output_tokens().unwrap_or(0),
            finish_reason: self.finish_reason(),
            error: self.failure(),
            prompt: self.first_user_text(),
        }
    }

    /// The text of the first user message in `gen_ai.input.messages` (parts with `content`,
    /// or a plain `content` string).
    fn first_user_text(&self) -> Option<String> {
        first_user_text(self.text(Key::InputMessages)?)
    }

    fn tool(&mut self) -> ToolSpan {
        let name = self
            .take_first_string(&[
                Key::ToolName,
                Key::AiToolName,
                Key::ToolNamePlain,
                Key::TraceloopName,
            ])
            .unwrap_or_else(|| self.span.name.clone());
        ToolSpan {
            name,
            call_id: self.take_first_string(&[
                Key::ToolCallId,
                Key::AiToolCallId,
                Key::ToolCallIdUnderscore,
                Key::ToolCallIdDotted,
            ]),
            args: self
                .first_json(&[
                    Key::ToolArguments,
                    Key::ToolArgumentsPlain,
                    Key::AiToolArgs,
                    Key::InputValue,
                    Key::ToolParameters,
                    Key::TraceloopInput,
                ])
                .unwrap_or_default(),
            result: self
                .first_json(&[
                    Key::ToolResult,
                    Key::ToolResponse,
                    Key::AiToolResult,
                    Key::OutputValue,
                    Key::TraceloopOutput,
                ])
                .unwrap_or_default(),
            error: self.failure(),
        }
    }

    fn model_name(&mut self) -> String {
        self.take_first_string(&[
            Key::ResponseModel,
            Key::RequestModel,
            Key::AiResponseModel,
            Key::AiModelId,
            Key::LlmModelName,
            Key::ModelName,
        ])
        .unwrap_or_default()
    }

    fn provider(&mut self) -> String {
        self.take_first_string(&[
            Key::ProviderName,
            Key::System,
            Key::AiModelProvider,
            Key::LlmProvider,
            Key::LlmSystem,
        ])
        .unwrap_or_default()
    }

    fn input_tokens(&self) -> Option<u64> {
        self.first_u64(&[
            Key::InputTokens,
            Key::AggregatedInputTokens,
            Key::PromptTokens,
            Key::AiInputTokens,
            Key::AiPromptTokens,
            Key::LlmTokenPrompt,
            Key::LlmUsagePrompt,
        ])
    }

    fn output_tokens(&self) -> Option<u64> {
        self.first_u64(&[
            Key::OutputTokens,
            Key::AggregatedOutputTokens,
            Key::CompletionTokens,
            Key::AiOutputTokens,
            Key::AiCompletionTokens,
            Key::LlmTokenCompletion,
            Key::LlmUsageCompletion,
        ])
    }

    fn finish_reason(&mut self) -> String {
        let Some(key) = [
            Key::FinishReasons,
            Key::AiFinishReason,
            Key::LlmFinishReason,
        ]
        .into_iter()
        .find(|k| self.get(*k).is_some()) else {
            return String::new();
        };
        if matches!(self.get(key), Some(Value::String(_))) {
            return self.take_string(key).unwrap_or_default();
        }
        match self.get(key) {
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
    fn failure(&self) -> Option<Failure> {
        let span = self.span;
        let error_type = self.string(Key::ErrorType).map(Cow::into_owned);
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
}

/// The conversation a span names (`gen_ai.conversation.id`, `OpenInference` `session.id`).
pub fn conversation_id(span: &SpanIn) -> Option<String> {
    Attrs::with(span, span.attributes.clone()).conversation_id()
}

/// What part `span` plays.
pub fn classify(span: &SpanIn) -> Role {
    Attrs::with(span, span.attributes.clone()).classify().0
}

/// One span as the mapping read it: its role, and the conversation it names.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub role: Role,
    pub conversation: Option<String>,
}

/// A request's spans, each read once through the conventions: a role's strings moved out
/// of its span, a span no convention matched keeping its attributes (to be shown).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadSpans {
    pub spans: Vec<SpanIn>,
    /// One per span, in the same order.
    pub reads: Vec<Read>,
}

impl From<Vec<SpanIn>> for ReadSpans {
    fn from(mut spans: Vec<SpanIn>) -> ReadSpans {
        let reads = spans
            .iter_mut()
            .map(|span| {
                let list = std::mem::take(&mut span.attributes);
                let attrs = Attrs::with(span, list);
                let conversation = attrs.conversation_id();
                let (role, unread) = attrs.classify();
                if let Some(list) = unread {
                    span.attributes = list;
                }
                Read { role, conversation }
            })
            .collect();
        ReadSpans { spans, reads }
    }
}

/// An attribute's text as a value: JSON text (an object or array) as the value it spells,
/// its strings cleaned; any other text as a string.
fn json_text(s: &str) -> RawJson {
    let trimmed = s.trim_start();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return RawJson::from_value(&*text_cow(s));
    }
    if let Some(canonical) = canonical_json(s)
        && let Ok(raw) = RawJson::from_string(canonical)
    {
        return raw;
    }
    match serde_json::from_str::<Value>(s) {
        Ok(parsed) if is_clean(&parsed) => RawJson::from_value(&parsed),
        Ok(parsed) => RawJson::from_value(&clean(parsed)),
        Err(_) => RawJson::from_value(&*text_cow(s)),
    }
}

/// Nesting `canonical_json` follows before it leaves the text to the parser.
const CANONICAL_DEPTH: usize = 64;

/// The text `serde_json` writes for the value `text` spells, once cleaned (compact, keys
/// in order), when that can be seen in one pass without building the value: the text is
/// copied without its whitespace when it has no escapes, no fractions or exponents, each
/// key once, and strings that cleaning leaves as they are; an object's members are put in
/// key order when they came in another (`json.dumps` keeps a dict's insertion order).
/// `None` leaves it to the parser; tool arguments as producers send them (`json.dumps`,
/// `JSON.stringify`) nearly always pass.
fn canonical_json(text: &str) -> Option<String> {
    let mut canon = Canon {
        text,
        at: 0,
        out: String::with_capacity(text.len()),
        members: Vec::new(),
    };
    canon.value(0)?;
    canon.space();
    (canon.at == text.len()).then_some(canon.out)
}

struct Canon<'a> {
    text: &'a str,
    at: usize,
    out: String,
    /// The members of the objects being copied, innermost last: each one's key and where
    /// its `"key":value` text lies in `out`.
    members: Vec<(&'a str, usize, usize)>,
}

impl<'a> Canon<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// Copies `byte` if it comes next (after whitespace).
    fn take(&mut self, byte: u8) -> Option<()> {
        self.space();
        (self.peek()? == byte).then(|| {
            self.at += 1;
            self.out.push(char::from(byte));
        })
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        self.space();
        match self.peek()? {
            b'{' if depth < CANONICAL_DEPTH => {
                self.take(b'{')?;
                self.space();
                if self.take(b'}').is_some() {
                    return Some(());
                }
                let base = self.members.len();
                let mut sorted = true;
                loop {
                    self.space();
                    let start = self.out.len();
                    let key = self.string(MAX_KEY_BYTES, true)?;
                    if let Some((last, ..)) = self.members[base..].last() {
                        match (*last).cmp(key) {
                            std::cmp::Ordering::Less => {}
                            // A key named twice: the parser says which value stays.
                            std::cmp::Ordering::Equal => return None,
                            std::cmp::Ordering::Greater => sorted = false,
                        }
                    }
                    self.take(b':')?;
                    self.value(depth + 1)?;
                    self.members.push((key, start, self.out.len()));
                    self.space();
                    match self.peek()? {
                        b',' => self.take(b',')?,
                        b'}' => {
                            if !sorted {
                                self.sort_members(base)?;
                            }
                            self.members.truncate(base);
                            return self.take(b'}');
                        }
                        _ => return None,
                    }
                }
            }
            b'[' if depth < CANONICAL_DEPTH => {
                self.take(b'[')?;
                self.space();
                if self.take(b']').is_some() {
                    return Some(());
                }
                loop {
                    self.value(depth + 1)?;
                    self.space();
                    match self.peek()? {
                        b',' => self.take(b',')?,
                        b']' => return self.take(b']'),
                        _ => return None,
                    }
                }
            }
            b'"' => self.string(MAX_STRING_BYTES, false).map(drop),
            b'-' | b'0'..=b'9' => self.integer(),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            _ => None,
        }
    }

    /// Rewrites the members from `base` on (the innermost object's, copied in the order
    /// sent) in key order, as `serde_json`'s map writes them; `None` for a key named twice.
    fn sort_members(&mut self, base: usize) -> Option<()> {
        let members = &mut self.members[base..];
        let first = members.first()?.1;
        members.sort_unstable_by(|a, b| a.0.cmp(b.0));
        if members.windows(2).any(|pair| pair[0].0 == pair[1].0) {
            return None;
        }
        let mut sorted = String::with_capacity(self.out.len() - first);
        for (at, (_, start, end)) in members.iter().enumerate() {
            if at > 0 {
                sorted.push(',');
            }
            sorted.push_str(self.out.get(*start..*end)?);
        }
        self.out.truncate(first);
        self.out.push_str(&sorted);
        Some(())
    }

    /// A string without escapes that cleaning (`line` for a key, `text` for a value)
    /// leaves as it is: its content.
    fn string(&mut self, max: usize, key: bool) -> Option<&'a str> {
        let text: &'a str = self.text;
        let rest = text.as_bytes().get(self.at + 1..)?;
        if text.as_bytes().get(self.at) != Some(&b'"') {
            return None;
        }
        let len = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[len] != b'"' || len > max {
            return None;
        }
        let start = self.at + 1;
        let content = text.get(start..start + len)?;
        // Raw control characters make the text invalid JSON, and the parser's business.
        if content.bytes().any(|b| b < 0x20) {
            return None;
        }
        let clean = if key {
            matches!(line_cow(content), Cow::Borrowed(_))
        } else {
            matches!(text_cow(content), Cow::Borrowed(_))
        };
        if !clean {
            return None;
        }
        self.out.push_str(text.get(self.at..=start + len)?);
        self.at = start + len + 1;
        Some(content)
    }

    /// An integer `serde_json` reads as `u64` or `i64` and writes back digit for digit.
    fn integer(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        let mut at = start;
        if bytes.get(at) == Some(&b'-') {
            at += 1;
        }
        let digits = bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let first = *bytes.get(at)?;
        // No digits, a leading zero before more digits, `-0`, a number that might not
        // fit 64 bits, or a fraction or exponent after it: the parser's to read.
        if digits == 0
            || digits > 18
            || (first == b'0' && (digits > 1 || at > start))
            || matches!(bytes.get(at + digits), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        self.at = at + digits;
        self.out.push_str(self.text.get(start..self.at)?);
        Some(())
    }

    fn literal(&mut self, word: &str) -> Option<()> {
        self.text.get(self.at..)?.starts_with(word).then(|| {
            self.at += word.len();
            self.out.push_str(word);
        })
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

/// Whether `clean` would leave `value` as it is (the common case: no rebuild).
fn is_clean(value: &Value) -> bool {
    match value {
        Value::String(s) => matches!(text_cow(s), Cow::Borrowed(_)),
        Value::Array(items) => items.iter().all(is_clean),
        Value::Object(map) => map
            .iter()
            .all(|(k, v)| matches!(line_cow(k), Cow::Borrowed(_)) && is_clean(v)),
        _ => true,
    }
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

/// A message's role and content, every other member skipped: the user's message read
/// without building its tree, where it reads plainly (an object naming each of these
/// once, its role a string).
#[derive(serde::Deserialize)]
struct PlainMessage<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    parts: Option<&'a RawValue>,
}

/// A message part's content, every other member skipped.
#[derive(serde::Deserialize)]
struct PlainPart<'a> {
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// The user's message, read plainly or, where it does not read so, as a tree.
enum UserMessage<'a> {
    Plain(PlainMessage<'a>),
    Tree(Value),
}

/// The text of the first user message in `messages` (`gen_ai.input.messages`' JSON text):
/// its `content` string, else its parts' `content` strings joined by spaces.
fn first_user_text(messages: &str) -> Option<String> {
    // Each message is only scanned; the one that may be the user's is read. Its text
    // names `user` unless an escape spells it.
    let messages: Vec<&RawValue> = serde_json::from_str(messages).ok()?;
    let user = messages.iter().find_map(|m| {
        let raw = m.get();
        if !raw.contains("user") && !raw.contains("\\u") {
            return None;
        }
        // An array would read as a struct too, member by member: only an object is plain.
        let plain = raw
            .trim_start()
            .starts_with('{')
            .then(|| serde_json::from_str::<PlainMessage<'_>>(raw));
        if let Some(Ok(message)) = plain {
            (message.role.as_deref() == Some("user")).then_some(UserMessage::Plain(message))
        } else {
            let message: Value = serde_json::from_str(raw).ok()?;
            (message["role"] == "user").then_some(UserMessage::Tree(message))
        }
    })?;
    let content = match user {
        UserMessage::Plain(message) => {
            if let Some(content) = message
                .content
                .and_then(|c| serde_json::from_str::<String>(c.get()).ok())
            {
                content
            } else {
                let parts: Vec<&RawValue> = serde_json::from_str(message.parts?.get()).ok()?;
                parts
                    .iter()
                    .filter_map(|p| part_text(p))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        }
        UserMessage::Tree(message) => tree_content(&message)?,
    };
    (!content.is_empty()).then(|| text(&content))
}

/// A message tree's `content` string, else its parts' `content` strings joined by spaces.
fn tree_content(message: &Value) -> Option<String> {
    Some(match &message["content"] {
        Value::String(s) => s.clone(),
        _ => message["parts"]
            .as_array()?
            .iter()
            .filter_map(|p| p["content"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
    })
}

/// A part's `content` when it is a string.
fn part_text(part: &RawValue) -> Option<String> {
    let plain = part
        .get()
        .trim_start()
        .starts_with('{')
        .then(|| serde_json::from_str::<PlainPart<'_>>(part.get()));
    match plain {
        Some(Ok(part)) => serde_json::from_str(part.content?.get()).ok(),
        _ => serde_json::from_str::<Value>(part.get())
            .ok()?
            .get("content")?
            .as_str()
            .map(str::to_owned),
    }
}

#[cfg(test)]
mod tests;
