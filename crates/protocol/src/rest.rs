//! REST bodies: the `CodeSpar` session wire (what the `codespar` SDK sends and reads) and
//! spyglass's own read routes (sessions, approvals). `Snake_case`, as the SDK reads them.

use super::events::{
    AgentEvalCompleted, AssertionResult, Counter, Decision, DeclaredMock, EvalScope, EvalStatus,
    Outcome, Tokens,
};
use super::json::RawJson;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST /v1/sessions`. `mocks` stays a raw value: the runtime validates its shape and
/// names the bad field by JSON pointer. `model` is spyglass's scripted-model extension.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CreateSession {
    #[serde(default)]
    pub servers: Vec<String>,
    #[serde(default)]
    pub user_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mocks: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "script_or_provider"
    )]
    pub model: Option<ModelScript>,
}

/// `model` is a script, or a string naming a real model (`openai:gpt-4o-mini`).
fn script_or_provider<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> Result<Option<ModelScript>, D::Error> {
    match Option::<Value>::deserialize(de)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(spec)) => Ok(Some(ModelScript {
            provider: Some(spec),
            ..ModelScript::default()
        })),
        // Says where in the script a wrong type or an unknown key sits (`model.strict`).
        Some(other) => serde_path_to_error::deserialize(other)
            .map(Some)
            .map_err(|err| {
                let at = err.path().to_string();
                let inner = err.into_inner();
                if at == "." {
                    serde::de::Error::custom(format!("model: {inner}"))
                } else {
                    serde::de::Error::custom(format!("model.{at}: {inner}"))
                }
            }),
    }
}

/// A scripted fake model (`@gemstack/ai-sdk`'s semantics): the Nth model call gets `sequence[N]`;
/// past the end it answers `default_text` (with `strict`, the run fails instead); a
/// `fail_on_step` entry throws on that call, and the loop retries up to `retries` times
/// per iteration. `spyglass_eval::script` checks a script and picks a branching step's answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelScript {
    #[serde(default)]
    pub sequence: Vec<ScriptStep>,
    #[serde(default)]
    pub fail_on_step: Vec<FailOnStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_text: Option<String>,
    /// `@gemstack/ai-sdk`'s `preventStrayPrompts`: a model call past `sequence` fails the run
    /// ("unscripted model call N") instead of answering `default_text`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
    /// How many times the agent loop retries a model call that threw (`fail_on_step`)
    /// within one iteration; each retry is the next model call. At most
    /// `spyglass_eval::script::MAX_RETRIES`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// A real model instead of the script (`openai[:MODEL]`, `anthropic[:MODEL]`):
    /// `spyglass_runtime::llm`. Also `metadata.model` for the SDK.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// One scripted model answer: tool calls, text, or both. A branching step instead holds
/// `when` (the first branch whose conditions hold on the last tool outcome answers with
/// its `then`) and `else` (the answer when none holds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptStep {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Simulated model latency, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<ScriptBranch>,
    #[serde(default, rename = "else", skip_serializing_if = "Option::is_none")]
    pub otherwise: Option<Box<ScriptStep>>,
}

/// One `when` branch: every condition given must hold on the run's last tool outcome
/// (the output of the last call dispatched before this model call).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptBranch {
    /// The last call returned this envelope code (`tool_not_mocked`, a mock's own code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<String>,
    /// The last call was of this operation (a bare tool name matches any server's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// A JSON path into the last call's output (`$.status`), with `equals` its value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    /// The step answered when the conditions hold.
    pub then: ScriptStep,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Simulated time the tool takes, milliseconds (the runtime waits this long before
    /// answering), so test timelines can show a realistic spread of durations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

fn empty_object_raw() -> RawJson {
    RawJson::from_value(&empty_object())
}

/// Throw `error` on this model call: zero-based, counted per session across sends,
/// failed calls included (so a retry is the next `step`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailOnStep {
    pub step: u32,
    pub error: String,
}

/// 201 answer of `POST /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionCreatedBody {
    pub id: String,
    pub user_id: String,
    pub servers: Vec<String>,
    pub status: String,
    pub created_at: String,
}

/// `POST /v1/sessions/:id/execute`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExecuteRequest {
    pub tool: String,
    /// Kept as received: the call's record and event carry this text, and a tree is built
    /// only for a policy rule that looks inside it.
    #[serde(default = "empty_object_raw")]
    pub input: RawJson,
}

/// 200 answer of a successful execute, as the SDK reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub success: bool,
    /// The mock entry as stored: written into the answer as it is, not re-encoded.
    pub data: RawJson,
    pub error: Option<String>,
    pub duration: u64,
    pub server: String,
    pub tool: String,
    pub tool_call_id: String,
    pub called_at: String,
}

/// One tool call of a `send` loop, as the SDK reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub id: String,
    pub tool_name: String,
    pub server_id: String,
    pub status: String,
    pub duration_ms: u64,
    pub input: Value,
    pub output: Value,
    pub error_code: Option<String>,
}

/// `POST /v1/sessions/:id/send`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SendRequest {
    pub message: String,
}

/// JSON answer of `send`, and the `result` of its stream's `done` frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendResult {
    pub message: String,
    pub tool_calls: Vec<ToolCallRecord>,
    pub iterations: u32,
}

/// `GET /v1/sessions/:id/connections`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Connections {
    pub servers: Vec<ServerInfo>,
    pub tools: Vec<ToolInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub id: String,
    pub name: String,
    pub category: String,
    pub country: String,
    pub auth_type: String,
    pub connected: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub server: String,
}

/// A mock with its live counter, in session reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MockState {
    #[serde(flatten)]
    pub declared: DeclaredMock,
    pub counter: Counter,
    pub calls: u32,
    /// Answers the mock served (a static mock's object, a stateful mock's entries, a rules
    /// mock's rules and fallback), replays included; a miss or a held call serves none.
    #[serde(default)]
    pub served: u32,
    /// A rules mock: calls each rule answered, by index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule_hits: Vec<u32>,
    /// A rules mock: calls its `$fallback` answered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fallback_hits: u32,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A row of `GET /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub id: String,
    pub user_id: String,
    pub servers: Vec<String>,
    pub status: String,
    pub created_at: String,
    pub last_activity: String,
    pub calls: u32,
    pub envelopes: u32,
    pub mocks: Vec<MockState>,
    /// The seq of this session's last event that the row already reflects. A client
    /// merging the row skips the session's frames up to it, so none is counted twice.
    #[serde(default)]
    pub last_seq: u64,
}

/// A call in `GET /v1/sessions/:id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallView {
    pub call_id: String,
    pub tool: String,
    pub input: RawJson,
    pub outcome: Outcome,
    pub started_at: String,
    pub duration: f64,
}

/// A session's last `send` run in `GET /v1/sessions/:id`: its model, usage and cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    pub provider: String,
    pub model: String,
    pub tokens: Tokens,
    /// Dollars by the runtime's price table; absent (with `cost_missing`) when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_missing: Option<String>,
    pub finish_reason: String,
    pub failed: bool,
}

/// Every `send` run of a session added up, in `GET /v1/sessions/:id`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTotals {
    pub runs: u32,
    pub tokens: Tokens,
    /// The runs' costs summed; absent when one of them has none (`cost_missing` names
    /// the first and why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_missing: Option<String>,
}

impl RunTotals {
    /// Adds one run.
    pub fn add(&mut self, run: &LastRun) {
        self.runs = self.runs.saturating_add(1);
        self.tokens.prompt = self.tokens.prompt.saturating_add(run.tokens.prompt);
        self.tokens.completion = self.tokens.completion.saturating_add(run.tokens.completion);
        self.tokens.total = self.tokens.total.saturating_add(run.tokens.total);
        if self.cost_missing.is_some() {
            return;
        }
        if let Some(cost) = run.cost {
            self.cost = Some(self.cost.unwrap_or(0.0) + cost);
        } else {
            self.cost = None;
            self.cost_missing = Some(format!(
                "run {}: {}",
                self.runs,
                run.cost_missing.as_deref().unwrap_or("no cost")
            ));
        }
    }
}

/// `GET /v1/sessions/:id`: the summary's fields with its call count as `calls_total`, and
/// `calls`, the calls retained. (The summary's own `calls` is the count; written beside the
/// list it would name one key twice, which readers keep differently.) After a `send`,
/// `last_run` and `runs` tell the model, usage and cost.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionDetail {
    pub summary: SessionSummary,
    pub calls: Vec<CallView>,
    pub last_run: Option<LastRun>,
    pub runs: Option<RunTotals>,
}

/// One value of a session detail's object: the summary's own, or a part kept as it is so
/// each call's input is written as it arrived (a tree would refuse `1e400`).
#[derive(Serialize)]
#[serde(untagged)]
enum DetailField<'a> {
    Value(Value),
    Calls(&'a [CallView]),
    LastRun(&'a LastRun),
    Runs(&'a RunTotals),
}

impl Serialize for SessionDetail {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let Value::Object(map) = serde_json::to_value(&self.summary).map_err(S::Error::custom)?
        else {
            return Err(S::Error::custom("a session summary is an object"));
        };
        // Keys in order, as a JSON object of the summary and the parts would have them.
        let mut fields: std::collections::BTreeMap<String, DetailField<'_>> = map
            .into_iter()
            .map(|(key, value)| {
                let key = if key == "calls" {
                    "calls_total".to_owned()
                } else {
                    key
                };
                (key, DetailField::Value(value))
            })
            .collect();
        fields.insert("calls".to_owned(), DetailField::Calls(&self.calls));
        if let Some(run) = &self.last_run {
            fields.insert("last_run".to_owned(), DetailField::LastRun(run));
        }
        if let Some(runs) = &self.runs {
            fields.insert("runs".to_owned(), DetailField::Runs(runs));
        }
        fields.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SessionDetail {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut map = Map::<String, Value>::deserialize(deserializer)?;
        let calls = map.remove("calls").unwrap_or(Value::Array(Vec::new()));
        let last_run = map.remove("last_run").filter(|v| !v.is_null());
        let runs = map.remove("runs").filter(|v| !v.is_null());
        if let Some(count) = map.remove("calls_total") {
            map.insert("calls".to_owned(), count);
        }
        Ok(Self {
            summary: serde_json::from_value(Value::Object(map)).map_err(D::Error::custom)?,
            calls: serde_json::from_value(calls).map_err(D::Error::custom)?,
            last_run: last_run
                .map(serde_json::from_value)
                .transpose()
                .map_err(D::Error::custom)?,
            runs: runs
                .map(serde_json::from_value)
                .transpose()
                .map_err(D::Error::custom)?,
        })
    }
}

/// Wrapper of list answers: `{"sessions": [...]}` and the like.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
    /// `GET /v1/sessions`: pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Status of an approval row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
    Expired,
    /// Its session closed while the call waited: nobody can decide it any more.
    Cancelled,
}

impl From<Decision> for ApprovalStatus {
    fn from(decision: Decision) -> Self {
        match decision {
            Decision::Approved => Self::Approved,
            Decision::Denied => Self::Denied,
            Decision::Expired => Self::Expired,
            Decision::Cancelled => Self::Cancelled,
        }
    }
}

/// A row of `GET /v1/approvals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalView {
    pub id: String,
    pub session_id: String,
    pub call_id: String,
    pub tool: String,
    pub input: RawJson,
    pub rule_id: String,
    pub status: ApprovalStatus,
    pub requested_at: String,
    pub expires_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Outcome>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalList {
    pub approvals: Vec<ApprovalView>,
    /// `GET /v1/approvals`: pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Optional body of `POST /v1/approvals/:id/approve` and `/deny`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    #[serde(default)]
    pub by: Option<String>,
    #[serde(default)]
    pub note: Option<String>,
}

/// One frame of `send` as a server-sent event stream.
#[derive(Debug, Clone, PartialEq)]
pub enum SendFrame {
    UserMessage {
        content: String,
    },
    AssistantText {
        content: String,
        iteration: u32,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult(ToolCallRecord),
    Done(SendResult),
    Error {
        error: String,
        message: String,
    },
}

impl SendFrame {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UserMessage { .. } => "user_message",
            Self::AssistantText { .. } => "assistant_text",
            Self::ToolUse { .. } => "tool_use",
            Self::ToolResult(_) => "tool_result",
            Self::Done(_) => "done",
            Self::Error { .. } => "error",
        }
    }

    /// The `data:` JSON: `type` plus the frame's fields. `tool_result` and `done` repeat
    /// their nested record at top level so both SDKs' readers find what they look for.
    pub fn data(&self) -> Value {
        let mut map = Map::new();
        map.insert("type".into(), self.kind().into());
        let extend = |map: &mut Map<String, Value>, value: Value| {
            if let Value::Object(fields) = value {
                map.extend(fields);
            }
        };
        match self {
            Self::UserMessage { content } => {
                map.insert("content".into(), content.clone().into());
            }
            Self::AssistantText { content, iteration } => {
                map.insert("content".into(), content.clone().into());
                map.insert("iteration".into(), (*iteration).into());
            }
            Self::ToolUse { id, name, input } => {
                map.insert("id".into(), id.clone().into());
                map.insert("name".into(), name.clone().into());
                map.insert("input".into(), input.clone());
            }
            Self::ToolResult(record) => {
                let value = serde_json::to_value(record).unwrap_or(Value::Null);
                extend(&mut map, value.clone());
                map.insert("toolCall".into(), value);
            }
            Self::Done(result) => {
                let value = serde_json::to_value(result).unwrap_or(Value::Null);
                extend(&mut map, value.clone());
                map.insert("result".into(), value);
            }
            Self::Error { error, message } => {
                map.insert("error".into(), error.clone().into());
                map.insert("message".into(), message.clone().into());
            }
        }
        Value::Object(map)
    }

    /// The frame as SSE text: `event: <type>` and `data: <json>`, blank-line terminated.
    pub fn to_sse(&self) -> String {
        format!("event: {}\ndata: {}\n\n", self.kind(), self.data())
    }
}

/// One judged attempt of an eval case: the `agent.eval.completed` body plus the session
/// it ran in (`sessionId` beside the event's fields), the agent's final text and the calls
/// the case made. Items of `GET /v1/evals/runs/:id` and of `spyglass eval --json`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalCaseRecord {
    pub session_id: Option<String>,
    pub result: AgentEvalCompleted,
    /// The agent's final text (`output` beside the event's fields); absent when the run
    /// produced none (an error, a skip).
    pub output: Option<String>,
    /// The calls the case's session made, in call order (`calls` beside the event's
    /// fields, the `CodeSpar` spec's `operation_calls`): at most the calls a session
    /// retains; empty for a skipped case or one whose session was never made.
    pub calls: Vec<EvalCall>,
    /// Calls the session made before the ones it retained (`callsOmitted`, absent when 0).
    pub calls_omitted: u64,
}

/// One call an eval case made: the tool, its arguments as they arrived, what it answered
/// (the result, or the envelope with its code) and how long it took in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalCall {
    pub tool: String,
    pub arguments: RawJson,
    pub outcome: Outcome,
    pub duration_ms: f64,
}

/// One value of a case record's object: the event's own, or the calls, kept as they are
/// so each call's arguments are written as they arrived (a tree would refuse `1e400`).
#[derive(Serialize)]
#[serde(untagged)]
enum RecordField<'a> {
    Value(Value),
    Calls(&'a [EvalCall]),
}

// By hand rather than `#[serde(flatten)]`: flatten buffers the fields, and the buffered
// form cannot rebuild the `RawJson` values inside the assertions.
impl Serialize for EvalCaseRecord {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let Value::Object(map) = serde_json::to_value(&self.result).map_err(S::Error::custom)?
        else {
            return Err(S::Error::custom("an eval result is an object"));
        };
        // Keys in order, as one JSON object of the event and the rest would have them.
        let mut fields: std::collections::BTreeMap<String, RecordField<'_>> = map
            .into_iter()
            .map(|(key, value)| (key, RecordField::Value(value)))
            .collect();
        if let Some(id) = &self.session_id {
            fields.insert("sessionId".into(), RecordField::Value(id.clone().into()));
        }
        if let Some(output) = &self.output {
            fields.insert("output".into(), RecordField::Value(output.clone().into()));
        }
        fields.insert("calls".into(), RecordField::Calls(&self.calls));
        if self.calls_omitted > 0 {
            fields.insert(
                "callsOmitted".into(),
                RecordField::Value(self.calls_omitted.into()),
            );
        }
        fields.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for EvalCaseRecord {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut value = Value::deserialize(deserializer)?;
        let mut take = |key: &str| {
            value
                .as_object_mut()
                .and_then(|map| map.remove(key))
                .filter(|v| !v.is_null())
        };
        let session_id = match take("sessionId") {
            None => None,
            Some(Value::String(id)) => Some(id),
            Some(_) => return Err(D::Error::custom("`sessionId` must be a string")),
        };
        let output = match take("output") {
            None => None,
            Some(Value::String(text)) => Some(text),
            Some(_) => return Err(D::Error::custom("`output` must be a string")),
        };
        // Absent in records written before calls were listed.
        let calls = match take("calls") {
            None => Vec::new(),
            Some(calls) => serde_json::from_value(calls)
                .map_err(|err| D::Error::custom(format!("`calls`: {err}")))?,
        };
        let calls_omitted = match take("callsOmitted") {
            None => 0,
            Some(n) => n
                .as_u64()
                .ok_or_else(|| D::Error::custom("`callsOmitted` must be a non-negative integer"))?,
        };
        let result = serde_json::from_value(value).map_err(D::Error::custom)?;
        Ok(Self {
            session_id,
            result,
            output,
            calls,
            calls_omitted,
        })
    }
}

/// `GET /v1/evals/runs/:id`, and the file `spyglass eval --json` writes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalRunDetail {
    pub run_id: String,
    /// `running` or `completed`.
    pub status: String,
    pub suites: Vec<String>,
    pub repeat: u32,
    /// `case` when the run ran one case again on its own; absent for a suite run.
    #[serde(default, skip_serializing_if = "EvalScope::is_suite")]
    pub scope: EvalScope,
    pub passed: u32,
    pub failed: u32,
    pub errored: u32,
    pub skipped: u32,
    pub duration_ms: f64,
    pub cases: Vec<EvalCaseRecord>,
}

/// `GET /v1/evals/summary`: pass rates over the last `window` runs, per suite and case.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    /// How many runs per suite (and per case) the rates look back over.
    pub window: u32,
    /// Outcomes no longer held (older than the window or past the per-case bound).
    pub dropped: u64,
    pub suites: Vec<SuiteSummary>,
}

/// One suite's pass rate over its last runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SuiteSummary {
    pub suite: String,
    /// Runs held (at most the window).
    pub runs: u32,
    /// passed / (passed + failed + errored) over the held runs; `None` when nothing ran.
    pub pass_rate: Option<f64>,
    pub passed: u32,
    pub failed: u32,
    pub errored: u32,
    pub skipped: u32,
    /// Pass rate of each held run, oldest first (a sparkline's series); `None` for a run
    /// whose cases were all skipped.
    pub trend: Vec<Option<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_id: Option<String>,
    pub cases: Vec<CaseSummary>,
}

/// One case's pass rate over its last runs, with its latest outcome in full.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseSummary {
    pub case: String,
    pub runs: u32,
    pub pass_rate: Option<f64>,
    pub passed: u32,
    pub failed: u32,
    pub errored: u32,
    pub skipped: u32,
    /// Both passed and did not (failed or errored) within the window.
    pub flaky: bool,
    pub last_status: EvalStatus,
    pub last_duration: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_assertions: Vec<AssertionResult>,
    /// The latest outcome came from running this case again on its own (a `scope: case`
    /// run): it is the case's newest result but no point of the suite's runs or rates.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_rerun: bool,
}

/// `POST /v1/evals/runs`. Each suite is a suite document (an object with `suite`), suite
/// file text (TOML or JSON), or `{ "file": "payments.toml", "text": "…" }` so errors can
/// name the file. `case` is a glob on case ids; `repeat` runs every case that many times.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalRunRequest {
    pub suites: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    /// `case`: run the one case `case` names again on its own (the inspector's `r`), as
    /// that case's newest result and no run of its suite. Absent: a suite run.
    #[serde(default, skip_serializing_if = "EvalScope::is_suite")]
    pub scope: EvalScope,
}

/// 202 answer of `POST /v1/evals/runs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalRunCreated {
    pub run_id: String,
}

/// `GET /v1/evals/suites/:name`: the suite as the last run request that named it gave it
/// (document, file text, or `{file, text}`), so a client can run it again as it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSuiteDocument {
    pub suite: String,
    pub document: Value,
}
