//! Observer events (protocol v1): every kind on `GET /v1/observe`, its fields, and the
//! frame codec. Decoding is tolerant: unknown kinds become `Event::Unknown` with their raw
//! JSON, unknown fields are ignored, and malformed text is a `DecodeError`, never a panic.

use super::envelope::Envelope;
use super::json::RawJson;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// One event with its stream stamp. `seq` and `ts` are given by the runtime; events posted
/// to `POST /v1/events` may arrive without them and are stamped on ingest.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub seq: u64,
    pub ts: CompactString,
    pub session_id: Option<CompactString>,
    pub event: Event,
}

/// Token usage, as `@gemstack/ai-sdk`'s SDK reports it (cumulative on step and run events).
/// Read also as the SDK's `usage` object (`promptTokens`, `completionTokens`,
/// `totalTokens`), which agents forward to `POST /v1/events` as they have it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Tokens {
    #[serde(alias = "promptTokens")]
    pub prompt: u64,
    #[serde(alias = "completionTokens")]
    pub completion: u64,
    #[serde(alias = "totalTokens")]
    pub total: u64,
}

/// A tool call inside an agent step (as `@gemstack/ai-sdk` has it). `duration` is milliseconds spent in the
/// tool (fractional: the runtime writes microsecond precision); there is no start time, so
/// timelines lay a step's calls one after another, in this list's order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StepToolCall {
    pub id: CompactString,
    pub name: CompactString,
    /// Read also as `arguments` (the SDK's tool-call field), written as `args`.
    #[serde(alias = "arguments")]
    pub args: RawJson,
    pub result: RawJson,
    pub duration: f64,
    pub needs_approval: bool,
}

/// One loop iteration of an agent (as `@gemstack/ai-sdk` has it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Step {
    pub iteration: u32,
    pub model: CompactString,
    /// Read also as `usage`, written as `tokens`.
    #[serde(alias = "usage")]
    pub tokens: Tokens,
    pub finish_reason: CompactString,
    pub tool_calls: Vec<StepToolCall>,
    /// The model's answer came from a recorded cassette, not a live provider (spyglass's
    /// own; absent when false).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cassette: bool,
    /// Model calls of this iteration that threw and were retried before the answer
    /// (spyglass's own: a script's `fail_on_step` with `retries`; absent when none).
    #[serde(skip_serializing_if = "<[FailedAttempt]>::is_empty")]
    pub failed_attempts: Box<[FailedAttempt]>,
}

/// One model call that threw and was retried: which call (zero-based, per session, as
/// `fail_on_step` counts) and the provider-style error it threw.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FailedAttempt {
    pub call: u32,
    pub error: String,
}

/// `agent.step.completed`: fired after each loop iteration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentStepCompleted {
    pub agent_name: CompactString,
    pub model: CompactString,
    pub provider: CompactString,
    pub iteration: u32,
    pub step: Step,
    #[serde(alias = "usage")]
    pub tokens: Tokens,
    /// Cumulative milliseconds since the run began (as `@gemstack/ai-sdk` has it), fractional.
    pub duration: f64,
    pub streaming: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<Box<str>>,
    /// RFC 3339 instant this iteration began (spyglass's own; `@gemstack/ai-sdk` has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Box<str>>,
}

/// `agent.completed`, and with `error` set, `agent.failed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AgentRun {
    pub agent_name: String,
    pub model: String,
    pub provider: String,
    /// Read also as `prompt` (what the agent was prompted with), written as `input`.
    #[serde(alias = "prompt")]
    pub input: RawJson,
    pub output: RawJson,
    pub steps: Box<[Step]>,
    #[serde(alias = "usage")]
    pub tokens: Tokens,
    pub duration: f64,
    pub finish_reason: String,
    pub streaming: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<Box<str>>,
    pub failover_attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<RawJson>,
    /// What the run's `tokens` cost in US dollars, by the runtime's price table
    /// (spyglass's own; absent when unknown, never a made-up 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Why `cost` is absent: the model has no price, or the provider reported no usage
    /// (spyglass's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_missing: Option<Box<str>>,
}

/// Outcome of one eval case. `@gemstack/ai-sdk` knows passed / failed / skipped; agent test harnesses add
/// error: the case produced no result at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvalStatus {
    #[default]
    Passed,
    Failed,
    Error,
    Skipped,
}

impl EvalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Error => "error",
            Self::Skipped => "skipped",
        }
    }
}

/// One assertion of an eval case with what it expected and what it saw. A composition
/// (`all`, `any`) carries its children's results, in order, under `children`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AssertionResult {
    pub kind: String,
    pub pass: bool,
    pub expected: RawJson,
    pub actual: RawJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `errored` (it could not be judged: a checker program that timed out, a judge model
    /// that did not answer) or `skipped` (a composition decided before reaching it);
    /// absent when `pass` says it all (spyglass's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<AssertionStatus>,
    /// A composition's children, in the order they were written (spyglass's own).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<AssertionResult>,
}

impl AssertionResult {
    /// What became of it: `status` when given, else `pass` decides.
    pub fn outcome(&self) -> AssertionStatus {
        match (self.status, self.pass) {
            (Some(status), _) => status,
            (None, true) => AssertionStatus::Passed,
            (None, false) => AssertionStatus::Failed,
        }
    }
}

/// What became of one assertion: it held, it did not, it could not be judged, or it was
/// never looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AssertionStatus {
    Passed,
    Failed,
    Errored,
    Skipped,
}

impl AssertionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Errored => "errored",
            Self::Skipped => "skipped",
        }
    }
}

/// What an eval run covered. A suite run (the default, written as no field) is a point
/// on the suite's trend; a case run is one case run again on its own (the inspector's
/// `r`), which updates that case's latest result and nothing the suite counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvalScope {
    #[default]
    Suite,
    Case,
}

impl EvalScope {
    /// Absent on the wire means a suite run.
    pub fn is_suite(scope: &Self) -> bool {
        *scope == Self::Suite
    }
}

/// `agent.eval.completed`: one per case (`@gemstack/ai-sdk`'s fields, plus spyglass's own). Read
/// through `EvalCompletedWire`, so an absent `status` follows `pass` (`@gemstack/ai-sdk`'s
/// `MetricResult` is `{pass, score?, reason?}`) and a `status` that contradicts `pass` is
/// refused rather than counted either way.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase", try_from = "EvalCompletedWire")]
pub struct AgentEvalCompleted {
    pub suite: String,
    pub case: String,
    pub status: EvalStatus,
    pub pass: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub tokens: Tokens,
    pub cost: f64,
    pub duration: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<AssertionResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    #[serde(skip_serializing_if = "EvalScope::is_suite")]
    pub scope: EvalScope,
}

/// `agent.eval.completed` as sent: `status` and `pass` may each be absent.
#[derive(Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct EvalCompletedWire {
    suite: String,
    case: String,
    status: Option<EvalStatus>,
    pass: Option<bool>,
    score: Option<f64>,
    reason: Option<String>,
    tokens: Tokens,
    cost: f64,
    duration: f64,
    run_id: Option<String>,
    assertions: Vec<AssertionResult>,
    attempt: Option<u32>,
    scope: EvalScope,
}

impl Default for EvalCompletedWire {
    fn default() -> Self {
        Self {
            suite: String::new(),
            case: String::new(),
            status: None,
            pass: None,
            score: None,
            reason: None,
            tokens: Tokens::default(),
            cost: 0.0,
            duration: 0.0,
            run_id: None,
            assertions: Vec::new(),
            attempt: None,
            scope: EvalScope::Suite,
        }
    }
}

/// A `status` and `pass` that say different things; names the field to fix.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "`status` {status:?} disagrees with `pass` {pass}: send `pass` alone, or a `status` that agrees with it"
)]
pub struct EvalVerdictConflict {
    pub status: &'static str,
    pub pass: bool,
}

impl EvalVerdictConflict {
    /// The JSON pointer of the field the conflict is reported on.
    pub const FIELD: &'static str = "/status";
}

/// The status an event counts as: `status` when given, else `pass` decides (neither
/// given reads as failed, never as a pass nobody claimed). Skipped cases were never
/// judged, so any `pass` agrees with `skipped`.
pub fn eval_verdict(
    status: Option<EvalStatus>,
    pass: Option<bool>,
) -> Result<(EvalStatus, bool), EvalVerdictConflict> {
    match (status, pass) {
        (None, pass) => {
            let pass = pass.unwrap_or(false);
            let status = if pass {
                EvalStatus::Passed
            } else {
                EvalStatus::Failed
            };
            Ok((status, pass))
        }
        (Some(status), None) => Ok((status, status == EvalStatus::Passed)),
        (Some(EvalStatus::Skipped), Some(pass)) => Ok((EvalStatus::Skipped, pass)),
        (Some(status), Some(pass)) if pass == (status == EvalStatus::Passed) => Ok((status, pass)),
        (Some(status), Some(pass)) => Err(EvalVerdictConflict {
            status: status.as_str(),
            pass,
        }),
    }
}

impl TryFrom<EvalCompletedWire> for AgentEvalCompleted {
    type Error = EvalVerdictConflict;

    fn try_from(wire: EvalCompletedWire) -> Result<Self, Self::Error> {
        let (status, pass) = eval_verdict(wire.status, wire.pass)?;
        Ok(Self {
            suite: wire.suite,
            case: wire.case,
            status,
            pass,
            score: wire.score,
            reason: wire.reason,
            tokens: wire.tokens,
            cost: wire.cost,
            duration: wire.duration,
            run_id: wire.run_id,
            assertions: wire.assertions,
            attempt: wire.attempt,
            scope: wire.scope,
        })
    }
}

/// Static mocks return one object on every call; stateful ones are consumed in order;
/// rules mocks answer by the call's input (`{"$rules": [{match, output}], "$fallback"}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MockMode {
    #[default]
    Static,
    Stateful,
    Rules,
}

/// A mock a session declared at create time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DeclaredMock {
    pub tool: String,
    pub mode: MockMode,
    /// Entries in a stateful array; rules of a rules mock; 1 for a static mock.
    pub entries: u32,
    /// A rules mock with a `$fallback`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fallback: bool,
    /// The mock as the session declared it (the static object, the stateful array, the
    /// `{"$rules", "$fallback"}` object), on `session.created` only: the inspector shows
    /// each entry and which call it answered. Absent from older runtimes and session reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<crate::RawJson>,
    /// Instead of `payload`, when the mock's JSON text is over the
    /// [`MAX_STREAMED_PAYLOAD_BYTES`] the stream carries: its size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_bytes: Option<u32>,
}

/// The largest mock payload (JSON text) `session.created` carries; a larger one is
/// named by its size only, so the event log does not hold every fixture twice.
pub const MAX_STREAMED_PAYLOAD_BYTES: usize = 16 * 1024;

/// A mock's consume counter after a call: `consumed` successful returns; `total` is the
/// entry count of a stateful mock and absent for a static one. After a call a rules mock
/// answered, `rule` is the index of the rule that did, or `fallback` is true.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counter {
    pub consumed: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<u32>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fallback: bool,
}

/// `session.created`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionCreated {
    pub user_id: CompactString,
    pub servers: Vec<String>,
    pub project: CompactString,
    pub mocks: Vec<DeclaredMock>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// `session.closed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SessionClosed {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a tool call returned: the result, or an envelope (`{"envelope": {"code": …}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Result(RawJson),
    /// Boxed: most calls have a result, and an inline envelope (up to three strings) made
    /// every `tool.called` event and every call row the inspector keeps 64 bytes larger.
    Envelope(Box<Envelope>),
}

impl Default for Outcome {
    fn default() -> Self {
        Self::Result(RawJson::null())
    }
}

impl Outcome {
    pub fn envelope(&self) -> Option<&Envelope> {
        match self {
            Self::Envelope(envelope) => Some(envelope),
            Self::Result(_) => None,
        }
    }
}

/// Where a runtime tool call came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallSource {
    #[default]
    Execute,
    Send,
}

/// `tool.called`: one dispatch through the gates, with its outcome and the counter after.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ToolCalled {
    pub call_id: CompactString,
    pub tool: CompactString,
    pub input: RawJson,
    pub outcome: Outcome,
    /// RFC 3339 instant the call started (microseconds from this runtime).
    pub started_at: CompactString,
    /// Milliseconds, fractional: microsecond precision.
    pub duration: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter: Option<Counter>,
    pub source: CallSource,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u32>,
}

/// `approval.requested`: a call held for a human decision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApprovalRequested {
    pub approval_id: String,
    pub call_id: String,
    pub tool: String,
    pub input: RawJson,
    pub rule_id: String,
    pub expires_at: String,
    pub message: String,
    /// The rule's `when` as written (`input.value > 1000`), so an approver sees what the
    /// policy looked at; absent for a rule without one, and from older runtimes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    #[default]
    Approved,
    Denied,
    Expired,
    /// The call's session closed while it waited (`note`: `session closed`).
    Cancelled,
}

/// `approval.resolved`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApprovalResolved {
    pub approval_id: String,
    pub decision: Decision,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `approval.replayed`: the approved call run again through the mock gate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ApprovalReplayed {
    pub approval_id: String,
    pub call_id: String,
    pub tool: String,
    pub outcome: Outcome,
    pub duration: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter: Option<Counter>,
}

/// `eval.run.started`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EvalRunStarted {
    pub run_id: String,
    pub suites: Vec<String>,
    pub cases: u32,
    pub repeat: u32,
    #[serde(skip_serializing_if = "EvalScope::is_suite")]
    pub scope: EvalScope,
}

/// `eval.run.completed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EvalRunCompleted {
    pub run_id: String,
    pub passed: u32,
    pub failed: u32,
    pub errored: u32,
    pub skipped: u32,
    pub duration: f64,
    #[serde(skip_serializing_if = "EvalScope::is_suite")]
    pub scope: EvalScope,
}

/// `stream.gap`: events `from..=to` are no longer held; re-read state over REST.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamGap {
    pub from: u64,
    pub to: u64,
}

/// `stream.hello`: the first frame of a connection that sent `epoch=` (empty when it has
/// none yet): which stream this is. Its `seq` is where the stream starts: every seq up to
/// it was asked to be skipped. Never stored in the log.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamHello {
    pub epoch: String,
}

/// `stream.reset`: the stream the client resumed is not this one (another epoch, or a
/// `since` beyond the newest seq: the runtime restarted without its history). Its `seq`
/// is 0 and the whole retained history follows; forget what the old stream said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamReset {
    pub epoch: String,
    pub reason: String,
}

/// Every event kind of protocol v1.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    SessionCreated(SessionCreated),
    SessionClosed(SessionClosed),
    ToolCalled(ToolCalled),
    ApprovalRequested(ApprovalRequested),
    ApprovalResolved(ApprovalResolved),
    ApprovalReplayed(ApprovalReplayed),
    EvalRunStarted(EvalRunStarted),
    EvalRunCompleted(EvalRunCompleted),
    StreamGap(StreamGap),
    StreamHello(StreamHello),
    StreamReset(StreamReset),
    AgentStepCompleted(AgentStepCompleted),
    AgentCompleted(AgentRun),
    AgentFailed(AgentRun),
    AgentEvalCompleted(AgentEvalCompleted),
    /// A kind this build does not know, kept whole.
    Unknown {
        kind: String,
        raw: RawJson,
    },
}

/// Every kind this build knows, as written on the wire.
pub const KINDS: &[&str] = &[
    "session.created",
    "session.closed",
    "tool.called",
    "approval.requested",
    "approval.resolved",
    "approval.replayed",
    "eval.run.started",
    "eval.run.completed",
    "stream.gap",
    "stream.hello",
    "stream.reset",
    "agent.step.completed",
    "agent.completed",
    "agent.failed",
    "agent.eval.completed",
];

/// What a frame costs to hold beyond its fixed fields: a flat overhead for the stamp,
/// ids and names. Budgets add this to the lengths of the variable text.
const FRAME_OVERHEAD: usize = 256;

fn step_bytes(step: &Step) -> usize {
    step.tool_calls
        .iter()
        .map(|c| 96 + c.id.len() + c.name.len() + c.args.get().len() + c.result.get().len())
        .sum()
}

fn run_bytes(run: &AgentRun) -> usize {
    run.input.get().len()
        + run.output.get().len()
        + run.error.as_ref().map_or(0, |e| e.get().len())
        + run.steps.iter().map(step_bytes).sum::<usize>()
}

impl Event {
    /// Roughly the bytes this event holds: the lengths of the JSON text and strings it
    /// keeps, read off what is already there (nothing is serialised), plus a flat overhead.
    /// Byte budgets (runtime log, inspector model) count with it.
    pub fn approx_bytes(&self) -> usize {
        FRAME_OVERHEAD
            + match self {
                Self::SessionCreated(e) => {
                    e.user_id.len()
                        + e.project.len()
                        + e.servers.iter().map(|s| s.len() + 24).sum::<usize>()
                        + e.mocks
                            .iter()
                            .map(|m| 96 + m.payload.as_ref().map_or(0, |p| p.get().len()))
                            .sum::<usize>()
                        + e.metadata
                            .iter()
                            .map(|(k, v)| k.len() + v.len() + 48)
                            .sum::<usize>()
                }
                Self::ToolCalled(e) => {
                    e.call_id.len()
                        + e.tool.len()
                        + e.input.get().len()
                        + match &e.outcome {
                            Outcome::Result(raw) => raw.get().len(),
                            Outcome::Envelope(_) => 256,
                        }
                }
                Self::ApprovalRequested(e) => e.input.get().len() + e.message.len() + e.tool.len(),
                Self::AgentStepCompleted(e) => step_bytes(&e.step),
                Self::AgentCompleted(run) | Self::AgentFailed(run) => run_bytes(run),
                Self::Unknown { kind, raw } => kind.len() + raw.get().len(),
                Self::AgentEvalCompleted(e) => {
                    e.suite.len()
                        + e.case.len()
                        + e.reason.as_ref().map_or(0, String::len)
                        + e.run_id.as_ref().map_or(0, String::len)
                        + e.assertions
                            .iter()
                            .map(|a| {
                                a.kind.len()
                                    + a.expected.get().len()
                                    + a.actual.get().len()
                                    + a.message.as_ref().map_or(0, String::len)
                            })
                            .sum::<usize>()
                }
                _ => 0,
            }
    }
}

impl Event {
    pub fn kind(&self) -> &str {
        match self {
            Self::SessionCreated(_) => "session.created",
            Self::SessionClosed(_) => "session.closed",
            Self::ToolCalled(_) => "tool.called",
            Self::ApprovalRequested(_) => "approval.requested",
            Self::ApprovalResolved(_) => "approval.resolved",
            Self::ApprovalReplayed(_) => "approval.replayed",
            Self::EvalRunStarted(_) => "eval.run.started",
            Self::EvalRunCompleted(_) => "eval.run.completed",
            Self::StreamGap(_) => "stream.gap",
            Self::StreamHello(_) => "stream.hello",
            Self::StreamReset(_) => "stream.reset",
            Self::AgentStepCompleted(_) => "agent.step.completed",
            Self::AgentCompleted(_) => "agent.completed",
            Self::AgentFailed(_) => "agent.failed",
            Self::AgentEvalCompleted(_) => "agent.eval.completed",
            Self::Unknown { kind, .. } => kind,
        }
    }

    /// The conversation an external agent event belongs to, if it names one.
    pub fn conversation_id(&self) -> Option<&str> {
        match self {
            Self::AgentStepCompleted(e) => e.conversation_id.as_deref(),
            Self::AgentCompleted(e) | Self::AgentFailed(e) => e.conversation_id.as_deref(),
            _ => None,
        }
    }

    /// The agent an external agent event belongs to, if it names one.
    pub fn agent_name(&self) -> Option<&str> {
        let name = match self {
            Self::AgentStepCompleted(e) => e.agent_name.as_str(),
            Self::AgentCompleted(e) | Self::AgentFailed(e) => e.agent_name.as_str(),
            _ => return None,
        };
        (!name.is_empty()).then_some(name)
    }
}

/// Why a frame could not be decoded.
#[derive(Debug, Error)]
pub enum DecodeError {
    #[error("not a JSON object: {0}")]
    Syntax(serde_json::Error),
    #[error("frame has no `kind`")]
    MissingKind,
    #[error("frame has no `seq`")]
    MissingSeq,
    #[error("bad `{kind}` event: {source}")]
    Fields {
        kind: String,
        source: serde_json::Error,
    },
    #[error("bad `agent.eval.completed` event: {0}")]
    Verdict(EvalVerdictConflict),
}

impl DecodeError {
    /// The JSON pointer of the field at fault, when one field is.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::Verdict(_) => Some(EvalVerdictConflict::FIELD),
            _ => None,
        }
    }
}

/// The stamp and kind of a frame, read without building the rest.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    seq: Option<u64>,
    ts: Option<CompactString>,
    #[serde(rename = "sessionId")]
    session_id: Option<CompactString>,
}

/// An event read from text that may lack a stamp (ingest), with what stamp it had.
#[derive(Debug, Clone, PartialEq)]
pub struct Unstamped {
    pub seq: Option<u64>,
    pub ts: Option<CompactString>,
    pub session_id: Option<CompactString>,
    pub event: Event,
}

/// Decodes one event from JSON text; `seq` and `ts` may be absent.
pub fn decode_event(text: &str) -> Result<Unstamped, DecodeError> {
    let head: Head = serde_json::from_str(text).map_err(DecodeError::Syntax)?;
    let kind = head.kind.ok_or(DecodeError::MissingKind)?;
    let fields = |source| DecodeError::Fields {
        kind: kind.to_string(),
        source,
    };
    let event = match kind.as_ref() {
        "session.created" => Event::SessionCreated(serde_json::from_str(text).map_err(fields)?),
        "session.closed" => Event::SessionClosed(serde_json::from_str(text).map_err(fields)?),
        "tool.called" => Event::ToolCalled(serde_json::from_str(text).map_err(fields)?),
        "approval.requested" => {
            Event::ApprovalRequested(serde_json::from_str(text).map_err(fields)?)
        }
        "approval.resolved" => Event::ApprovalResolved(serde_json::from_str(text).map_err(fields)?),
        "approval.replayed" => Event::ApprovalReplayed(serde_json::from_str(text).map_err(fields)?),
        "eval.run.started" => Event::EvalRunStarted(serde_json::from_str(text).map_err(fields)?),
        "eval.run.completed" => {
            Event::EvalRunCompleted(serde_json::from_str(text).map_err(fields)?)
        }
        "stream.gap" => Event::StreamGap(serde_json::from_str(text).map_err(fields)?),
        "stream.hello" => Event::StreamHello(serde_json::from_str(text).map_err(fields)?),
        "stream.reset" => Event::StreamReset(serde_json::from_str(text).map_err(fields)?),
        "agent.step.completed" => {
            Event::AgentStepCompleted(serde_json::from_str(text).map_err(fields)?)
        }
        "agent.completed" => Event::AgentCompleted(serde_json::from_str(text).map_err(fields)?),
        "agent.failed" => Event::AgentFailed(serde_json::from_str(text).map_err(fields)?),
        "agent.eval.completed" => {
            let wire: EvalCompletedWire = serde_json::from_str(text).map_err(fields)?;
            Event::AgentEvalCompleted(wire.try_into().map_err(DecodeError::Verdict)?)
        }
        other => {
            // `encode` rebuilds an unknown frame through a JSON tree to restamp it, so it
            // must parse as one: a number beyond f64 (`1e999`) is refused here rather than
            // relayed as `null`.
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
                .map_err(DecodeError::Syntax)?;
            Event::Unknown {
                kind: other.to_owned(),
                raw: RawJson::from_text(text).map_err(DecodeError::Syntax)?,
            }
        }
    };
    Ok(Unstamped {
        seq: head.seq,
        ts: head.ts,
        session_id: head.session_id,
        event,
    })
}

/// Decodes one frame of the observer stream: an event that must carry its `seq`.
pub fn decode(text: &str) -> Result<Frame, DecodeError> {
    let un = decode_event(text)?;
    Ok(Frame {
        seq: un.seq.ok_or(DecodeError::MissingSeq)?,
        ts: un.ts.unwrap_or_default(),
        session_id: un.session_id,
        event: un.event,
    })
}

#[derive(Serialize)]
struct Out<'a, T: Serialize> {
    kind: &'a str,
    seq: u64,
    ts: &'a str,
    #[serde(rename = "sessionId", skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    #[serde(flatten)]
    body: &'a T,
}

fn write<T: Serialize>(frame: &Frame, seq: u64, body: &T) -> String {
    let out = Out {
        kind: frame.event.kind(),
        seq,
        ts: &frame.ts,
        session_id: frame.session_id.as_deref(),
        body,
    };
    // Serialising these plain structs into a String cannot fail.
    serde_json::to_string(&out).unwrap_or_default()
}

/// An event's own fields as one JSON object, without the stream stamp (`kind`, `seq`,
/// `ts`, `sessionId`): what a view shows beside columns that already hold the stamp. An
/// unknown kind is shown as it arrived.
pub fn encode_fields(event: &Event) -> String {
    match (encode_body(event), event) {
        (Some(body), _) => body.0,
        (None, Event::Unknown { raw, .. }) => raw.get().to_owned(),
        (None, _) => "{}".to_owned(),
    }
}

/// An event's own fields as wire text, without the stamp; `Unknown` has no typed body
/// (`None`).
#[derive(Debug, Clone)]
pub struct EncodedBody(String);

fn body_text<T: Serialize>(body: &T) -> String {
    serde_json::to_string(body).unwrap_or_else(|_| "{}".to_owned())
}

/// Everything `encode` writes but `kind`, `seq`, `ts` and `sessionId`.
pub fn encode_body(event: &Event) -> Option<EncodedBody> {
    let text = match event {
        Event::SessionCreated(e) => body_text(e),
        Event::SessionClosed(e) => body_text(e),
        Event::ToolCalled(e) => body_text(e),
        Event::ApprovalRequested(e) => body_text(e),
        Event::ApprovalResolved(e) => body_text(e),
        Event::ApprovalReplayed(e) => body_text(e),
        Event::EvalRunStarted(e) => body_text(e),
        Event::EvalRunCompleted(e) => body_text(e),
        Event::StreamGap(e) => body_text(e),
        Event::StreamHello(e) => body_text(e),
        Event::StreamReset(e) => body_text(e),
        Event::AgentStepCompleted(e) => body_text(e),
        Event::AgentCompleted(e) | Event::AgentFailed(e) => body_text(e),
        Event::AgentEvalCompleted(e) => body_text(e),
        Event::Unknown { .. } => return None,
    };
    Some(EncodedBody(text))
}

/// Encodes a frame as one JSON object: its fields plus `kind`, `seq`, `ts`, `sessionId`.
pub fn encode(frame: &Frame) -> String {
    encode_with_seq(frame, frame.seq)
}

/// `encode` for a frame whose seq is not known yet: its text with seq `0`, and where that
/// one-byte `0` is (`None`: the text holds no seq). Whoever learns the seq writes
/// `text[..at]`, the seq, then `text[at + 1..]` (the Postgres store, in the statement that
/// takes the seq).
pub fn encode_around_seq(frame: &Frame) -> (String, Option<usize>) {
    let zero = encode_with_seq(frame, 0);
    if !matches!(frame.event, Event::Unknown { .. }) {
        // `Out` writes `{"kind":"<kind>","seq":` first; a kind is plain ASCII.
        let at = r#"{"kind":"","seq":"#.len() + frame.event.kind().len();
        if zero.as_bytes().get(at) == Some(&b'0') && zero[..at].ends_with(r#"","seq":"#) {
            return (zero, Some(at));
        }
    }
    // Anything else: the only byte that differs from the text with seq 1.
    let one = encode_with_seq(frame, 1);
    let at = zero.bytes().zip(one.bytes()).position(|(a, b)| a != b);
    (zero, at)
}

/// `encode` with `seq` in place of the frame's own: a store shared by several runtimes
/// gives an event its seq when it commits it.
pub fn encode_with_seq(frame: &Frame, seq: u64) -> String {
    match &frame.event {
        Event::SessionCreated(e) => write(frame, seq, e),
        Event::SessionClosed(e) => write(frame, seq, e),
        Event::ToolCalled(e) => write(frame, seq, e),
        Event::ApprovalRequested(e) => write(frame, seq, e),
        Event::ApprovalResolved(e) => write(frame, seq, e),
        Event::ApprovalReplayed(e) => write(frame, seq, e),
        Event::EvalRunStarted(e) => write(frame, seq, e),
        Event::EvalRunCompleted(e) => write(frame, seq, e),
        Event::StreamGap(e) => write(frame, seq, e),
        Event::StreamHello(e) => write(frame, seq, e),
        Event::StreamReset(e) => write(frame, seq, e),
        Event::AgentStepCompleted(e) => write(frame, seq, e),
        Event::AgentCompleted(e) | Event::AgentFailed(e) => write(frame, seq, e),
        Event::AgentEvalCompleted(e) => write(frame, seq, e),
        Event::Unknown { raw, .. } => {
            // Keep every original field; the stamp fields are replaced by this frame's.
            let mut value = raw.to_value();
            if let Some(map) = value.as_object_mut() {
                map.insert("seq".into(), seq.into());
                map.insert("ts".into(), frame.ts.as_str().into());
                match &frame.session_id {
                    Some(id) => map.insert("sessionId".into(), id.as_str().into()),
                    None => map.remove("sessionId"),
                };
            }
            value.to_string()
        }
    }
}
