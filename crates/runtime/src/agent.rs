//! The scripted model loop behind `send` (`@gemstack/ai-sdk`'s fake provider): the session's Nth
//! model call answers `sequence[N]` (a branching step by the last tool outcome),
//! `fail_on_step` throws on that call and the loop retries up to the script's `retries`,
//! past the end the default text (or, `strict`, a failed run). Tool calls go through the
//! same dispatch as `execute`; what the fake received at each call is recorded.

use super::approvals::Verdict as ApprovalVerdict;
use super::policy::Verdict;
use super::sessions::{CallStart, Dispatched, Session, server_of};
use super::{ApiErrorWithStatus, Runtime, lock};
use spyglass_eval::script::{Conversation, LastOutcome, Picked, PromptRecord, pick};
use spyglass_protocol::events::{
    AgentRun, AgentStepCompleted, CallSource, FailedAttempt, Outcome, Step, StepToolCall, Tokens,
};
use spyglass_protocol::rest::{LastRun, ScriptStep, SendFrame, SendResult, ToolCallRecord};
use spyglass_protocol::{Envelope, Event, RawJson, now_rfc3339};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

pub const AGENT_NAME: &str = "spyglass-fake";
pub const PROVIDER: &str = "fake";
pub const MODEL: &str = "fake";
const DEFAULT_TEXT: &str = "fake response";
/// The error of a run whose session was closed while it ran.
pub const SESSION_CLOSED: &str = "session closed";
/// What `send` answers (413) when a run's tool inputs and outputs pass
/// `max_send_response_bytes`: the run is cut there and ends as failed.
pub const RESPONSE_TOO_LARGE: &str = "response_too_large";

/// How one `send` ended: the final text, every tool call, usage, and the error if the
/// run failed (a scripted failure, or the iteration cap).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRunResult {
    pub message: String,
    pub tool_calls: Vec<ToolCallRecord>,
    pub tokens: Tokens,
    pub iterations: u32,
    pub steps: Vec<Step>,
    pub duration_ms: f64,
    pub error: Option<String>,
    /// The run was cut at `max_send_response_bytes` (its `error` says so).
    pub too_large: bool,
    /// What the scripted model received at each model call, bounded by bytes (empty for
    /// a real model).
    pub prompts: Vec<PromptRecord>,
    /// What `tokens` cost in dollars by the price table; `None` with `cost_missing`
    /// saying why.
    pub cost: Option<f64>,
    pub cost_missing: Option<String>,
}

impl AgentRunResult {
    pub fn send_result(&self) -> SendResult {
        SendResult {
            message: self.message.clone(),
            tool_calls: self.tool_calls.clone(),
            iterations: self.iterations,
        }
    }
}

/// What the fake model answers for one call.
enum Answer {
    Step(ScriptStep),
    /// The call threw (`fail_on_step`): the loop may retry it.
    Throw {
        call: u32,
        error: String,
    },
    /// The run ends with this error, no retry (a stray call under `strict`, a real
    /// model's failure, a closed session).
    Fail(String),
}

/// The last call's outcome, kept for the next step's `when` branches.
struct Last {
    tool: String,
    output: serde_json::Value,
    code: Option<String>,
}

impl Last {
    fn view(&self) -> LastOutcome<'_> {
        LastOutcome {
            tool: &self.tool,
            output: &self.output,
            code: self.code.as_deref(),
        }
    }
}

fn approx_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

fn record(dispatched: &Dispatched) -> ToolCallRecord {
    let call = dispatched.call();
    let envelope = dispatched.envelope();
    ToolCallRecord {
        id: call.call_id.as_str().into(),
        tool_name: call.tool.as_str().into(),
        server_id: server_of(&call.tool).to_owned(),
        status: if envelope.is_none() {
            "success"
        } else {
            "error"
        }
        .to_owned(),
        duration_ms: call.duration.round() as u64,
        input: call.input.to_value(),
        output: dispatched.output(),
        error_code: envelope.map(|e| e.code().to_owned()),
    }
}

/// Puts a decided call's outcome in its record: the replayed result (or envelope) of an
/// approved call, the denial envelope of a denied one.
fn answer(rec: &mut ToolCallRecord, outcome: Outcome) {
    match outcome {
        Outcome::Result(raw) => {
            "success".clone_into(&mut rec.status);
            rec.output = raw.to_value();
            rec.error_code = None;
        }
        Outcome::Envelope(envelope) => {
            "error".clone_into(&mut rec.status);
            rec.output = serde_json::to_value(&envelope).unwrap_or(serde_json::Value::Null);
            rec.error_code = Some(envelope.code().to_owned());
        }
    }
}

/// Sleeps `wait`, or less when the session closes meanwhile (the caller then checks).
async fn wait_unless_closed(closing: &mut watch::Receiver<bool>, wait: Duration) {
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        _ = closing.wait_for(|closed| *closed) => {}
    }
}

/// The script's answer to model call `call`: a `fail_on_step` throw, the step (a
/// branching one by `last`), or past the end `default_text` — or, `strict`, the run's end.
fn scripted_answer(
    script: &spyglass_protocol::rest::ModelScript,
    call: u32,
    last: Option<&Last>,
) -> Answer {
    if let Some(fail) = script.fail_on_step.iter().find(|f| f.step == call) {
        return Answer::Throw {
            call,
            error: fail.error.clone(),
        };
    }
    let fallback = || {
        Answer::Step(ScriptStep {
            text: Some(
                script
                    .default_text
                    .clone()
                    .unwrap_or_else(|| DEFAULT_TEXT.to_owned()),
            ),
            ..ScriptStep::default()
        })
    };
    let Some(step) = script.sequence.get(call as usize) else {
        if script.strict {
            return Answer::Fail(format!(
                "unscripted model call {call}: the script has {} step(s) and is strict",
                script.sequence.len()
            ));
        }
        return fallback();
    };
    let last = last.map(Last::view);
    match pick(step, last.as_ref()) {
        Picked::Step(step) | Picked::Branch(_, step) | Picked::Else(step) => {
            Answer::Step(step.clone())
        }
        Picked::Nothing if script.strict => Answer::Fail(format!(
            "unscripted model call {call}: no `when` branch of sequence[{call}] held and it has no `else`"
        )),
        Picked::Nothing => fallback(),
    }
}

impl super::sessions::Session {
    /// Keeps a finished run's model, usage and cost on the session (`GET
    /// /v1/sessions/:id`), in the store too (`shared`: on a store shared with others).
    fn note_run(&mut self, run: &AgentRun, log: &super::log::EventLog, shared: bool) {
        let last = LastRun {
            provider: run.provider.clone(),
            model: run.model.clone(),
            tokens: run.tokens,
            cost: run.cost,
            cost_missing: run.cost_missing.as_deref().map(str::to_owned),
            finish_reason: run.finish_reason.clone(),
            failed: run.error.is_some(),
        };
        self.runs.add(&last);
        self.last_run = Some(last);
        self.persist_counters(log, shared);
    }
}

impl Runtime {
    /// A call a policy rule held, decided as the session's eval case declares for that
    /// rule, through the same path a human's decision takes (`approval.resolved`, and the
    /// replay of an approved call): its outcome, or `None` when the case decides nothing
    /// for that rule (or the decision could not be made) and the call stays held.
    async fn decide_held(
        &self,
        tenant: &str,
        session: &std::sync::Arc<std::sync::Mutex<Session>>,
        dispatched: &Dispatched,
    ) -> Option<Outcome> {
        let decisions = lock(session).decisions.clone()?;
        let Some(Envelope::ApprovalRequired { approval_id, .. }) = dispatched.envelope() else {
            return None;
        };
        let call = dispatched.call();
        let Ok(Verdict::Approval { rule_id, .. }) = self
            .inner
            .config
            .policy
            .evaluate_raw(&call.tool, &call.input)
        else {
            return None;
        };
        let verdict = *decisions.rules.get(&rule_id)?;
        let decided = self
            .decide_any(
                tenant,
                approval_id,
                verdict,
                Some(decisions.by.clone()),
                None,
            )
            .await;
        match (verdict, decided) {
            (_, Err(err)) => {
                tracing::warn!(approval = %approval_id, error = %err.error.message, "an eval case's decision could not be applied; the call stays held");
                None
            }
            (ApprovalVerdict::Approve, Ok(view)) => view.replay,
            (ApprovalVerdict::Deny, Ok(_)) => {
                Some(Outcome::Envelope(Box::new(Envelope::PolicyDenied {
                    message: format!(
                        "{} denied this call, held for approval by rule {rule_id}",
                        decisions.by
                    ),
                    rule_id,
                })))
            }
        }
    }

    /// `POST /v1/sessions/:id/send` without streaming.
    pub async fn send(
        &self,
        tenant: &str,
        session_id: &str,
        message: &str,
    ) -> Result<AgentRunResult, ApiErrorWithStatus> {
        self.run_agent(tenant, session_id, message, None).await
    }

    /// The model loop. Frames for an SSE answer go to `frames` as they happen; a gone
    /// receiver does not stop the run (its events still reach the stream).
    pub async fn run_agent(
        &self,
        tenant: &str,
        session_id: &str,
        message: &str,
        frames: Option<mpsc::Sender<SendFrame>>,
    ) -> Result<AgentRunResult, ApiErrorWithStatus> {
        self.adopt_if_missing(tenant, session_id).await?;
        let session = crate::read(&self.inner.sessions).get_open(tenant, session_id)?;
        let mut closing = lock(&session).closing.subscribe();
        let out = |frame: SendFrame| {
            let frames = frames.clone();
            let rt = self.clone();
            async move {
                let Some(frames) = frames else { return };
                // A tool's result and the run's end are answers: as with execute, one
                // leaves only once what it reports is in the store.
                let answer = matches!(
                    frame,
                    SendFrame::ToolResult(_) | SendFrame::Done(_) | SendFrame::Error { .. }
                );
                let frame = match if answer { rt.committed().await } else { Ok(()) } {
                    Err(err) => SendFrame::Error {
                        error: err.error.code,
                        message: err.error.message,
                    },
                    Ok(()) => frame,
                };
                let _ = frames.send(frame).await;
            }
        };
        out(SendFrame::UserMessage {
            content: message.to_owned(),
        })
        .await;
        let clock = Instant::now();
        let max = self.inner.config.max_iterations.max(1);
        let mut result = AgentRunResult {
            message: String::new(),
            tool_calls: Vec::new(),
            tokens: Tokens::default(),
            iterations: 0,
            steps: Vec::new(),
            duration_ms: 0.0,
            error: None,
            too_large: false,
            prompts: Vec::new(),
            cost: None,
            cost_missing: None,
        };
        let mut failover_attempts = 0u32;
        let max_bytes = self.inner.config.max_send_response_bytes;
        // Bytes of the calls' inputs and outputs so far, read off the text already made.
        let mut answer_bytes = message.len();
        let mut prompt_tokens = approx_tokens(message) + 8;
        let mut finished = false;
        // A session naming a real model runs it instead of the script.
        let mut live = super::llm::Live::start(&self.inner.config.models, &session, message);
        let (provider, model) = super::llm::names(&live, PROVIDER, MODEL);
        let scripted = matches!(live, Ok(None));
        let mut conversation = Conversation::new(message);
        let mut last: Option<Last> = None;
        let retries = lock(&session).model.retries;
        // The first step of a real model whose usage the provider did not report.
        let mut unreported: Option<u32> = None;
        'run: for iteration in 0..max {
            let step_started = now_rfc3339();
            let mut failed_attempts: Vec<FailedAttempt> = Vec::new();
            let step = loop {
                let answer = if let Some(real) =
                    super::llm::step(&mut live, iteration, frames.as_ref(), &mut closing).await
                {
                    real.map_or_else(Answer::Fail, Answer::Step)
                } else {
                    let called = {
                        let mut s = lock(&session);
                        if s.closed {
                            None
                        } else {
                            let call = s.model_calls;
                            s.model_calls = s.model_calls.saturating_add(1);
                            s.persist_counters(&self.inner.log, self.inner.shared.is_shared());
                            Some((call, scripted_answer(&s.model, call, last.as_ref())))
                        }
                    };
                    match called {
                        None => Answer::Fail(SESSION_CLOSED.to_owned()),
                        Some((call, answer)) => {
                            // Measured outside the session's lock: it copies the messages.
                            conversation.record(call, iteration);
                            answer
                        }
                    }
                };
                result.iterations = iteration + 1;
                match answer {
                    Answer::Step(step) => break step,
                    Answer::Throw { call, error } => {
                        let used = u32::try_from(failed_attempts.len()).unwrap_or(u32::MAX);
                        if used < retries {
                            failed_attempts.push(FailedAttempt { call, error });
                            continue;
                        }
                        // No step event carries them: the run's count still does.
                        failover_attempts = failover_attempts.saturating_add(used);
                        result.error = Some(if retries == 0 {
                            error
                        } else {
                            format!(
                                "{error} (model call {call}, after {used} {})",
                                if used == 1 { "retry" } else { "retries" }
                            )
                        });
                        break 'run;
                    }
                    Answer::Fail(error) => {
                        result.error = Some(error);
                        break 'run;
                    }
                }
            };
            failover_attempts = failover_attempts
                .saturating_add(u32::try_from(failed_attempts.len()).unwrap_or(u32::MAX));
            if let Some(delay) = step.delay_ms {
                wait_unless_closed(&mut closing, Duration::from_millis(delay)).await;
                if lock(&session).closed {
                    result.error = Some(SESSION_CLOSED.to_owned());
                    break;
                }
            }
            let text = step.text.clone().unwrap_or_default();
            if !text.is_empty() && !super::llm::streamed(&live) {
                out(SendFrame::AssistantText {
                    content: text.clone(),
                    iteration,
                })
                .await;
            }
            let mut step_calls = Vec::new();
            let mut answered = Vec::with_capacity(step.tool_calls.len());
            for call in &step.tool_calls {
                let start = CallStart::now();
                if let Some(latency) = call.latency_ms {
                    wait_unless_closed(&mut closing, Duration::from_millis(latency)).await;
                }
                let input = RawJson::from_value(&call.arguments);
                let claimed = match self.claim_for(&session, &call.name, &input).await {
                    Ok(claimed) => claimed,
                    Err(err) => {
                        result.error = Some(err.error.message);
                        break 'run;
                    }
                };
                let dispatched = match self.dispatch(
                    &session,
                    &call.name,
                    input,
                    CallSource::Send,
                    Some(iteration),
                    start,
                    claimed,
                ) {
                    Ok(dispatched) => dispatched,
                    // Closed mid-run (or input no policy can read): the run stops here,
                    // nothing more is dispatched, and it ends as failed.
                    Err(err) => {
                        result.error = Some(if lock(&session).closed {
                            SESSION_CLOSED.to_owned()
                        } else {
                            err.error.message
                        });
                        break 'run;
                    }
                };
                let made = dispatched.call();
                out(SendFrame::ToolUse {
                    id: made.call_id.as_str().into(),
                    name: made.tool.as_str().into(),
                    input: made.input.to_value(),
                })
                .await;
                answer_bytes += made.input.get().len()
                    + match &made.outcome {
                        Outcome::Result(raw) => raw.get().len(),
                        Outcome::Envelope(_) => 256,
                    };
                if answer_bytes > max_bytes {
                    result.too_large = true;
                    result.error = Some(format!(
                        "the run's tool inputs and outputs passed {max_bytes} bytes at call {}; the run was cut there",
                        result.tool_calls.len() + 1
                    ));
                    break 'run;
                }
                let held = matches!(
                    dispatched.envelope(),
                    Some(Envelope::ApprovalRequired { .. })
                );
                let mut rec = record(&dispatched);
                if held && let Some(outcome) = self.decide_held(tenant, &session, &dispatched).await
                {
                    answer(&mut rec, outcome);
                }
                if scripted {
                    answered.push((
                        (rec.id.clone(), rec.tool_name.clone(), rec.input.clone()),
                        rec.output.clone(),
                    ));
                    last = Some(Last {
                        tool: rec.tool_name.clone(),
                        output: rec.output.clone(),
                        code: rec.error_code.clone(),
                    });
                }
                out(SendFrame::ToolResult(rec.clone())).await;
                step_calls.push(StepToolCall {
                    id: made.call_id.clone(),
                    name: made.tool.clone(),
                    args: made.input.clone(),
                    result: RawJson::from_value(&rec.output),
                    duration: made.duration,
                    needs_approval: held,
                });
                result.tool_calls.push(rec);
            }
            super::llm::tool_results(&mut live, &step_calls);
            if scripted {
                let (calls, outputs): (Vec<_>, Vec<_>) = answered.into_iter().unzip();
                conversation.answered(&text, &calls);
                for ((id, name, _), output) in calls.iter().zip(&outputs) {
                    conversation.tool_result(id, name, output);
                }
            }
            let completion = approx_tokens(&text) + 8 * step.tool_calls.len() as u64;
            let step_tokens = Tokens {
                prompt: prompt_tokens,
                completion,
                total: prompt_tokens + completion,
            };
            let reported = super::llm::usage(&live);
            if reported.is_none() && super::llm::is_real(&live) && unreported.is_none() {
                unreported = Some(iteration);
            }
            let step_tokens = reported.unwrap_or(step_tokens);
            result.tokens.prompt += step_tokens.prompt;
            result.tokens.completion += step_tokens.completion;
            result.tokens.total += step_tokens.total;
            prompt_tokens += completion + 4 * step_calls.len() as u64;
            let done = step.tool_calls.is_empty();
            let step_event = Step {
                iteration,
                model: model.as_str().into(),
                tokens: step_tokens,
                finish_reason: if done { "stop" } else { "tool_calls" }.into(),
                tool_calls: step_calls,
                cassette: super::llm::from_cassette(&live),
                failed_attempts: failed_attempts.into(),
            };
            result.steps.push(step_event.clone());
            self.emit(
                Some(session_id.to_owned()),
                Event::AgentStepCompleted(AgentStepCompleted {
                    agent_name: AGENT_NAME.into(),
                    model: model.as_str().into(),
                    provider: provider.as_str().into(),
                    iteration,
                    step: step_event,
                    tokens: result.tokens,
                    duration: clock.elapsed().as_secs_f64() * 1000.0,
                    streaming: frames.is_some(),
                    conversation_id: Some(session_id.into()),
                    started_at: Some(step_started.into()),
                }),
            );
            if !text.is_empty() {
                result.message = text;
            }
            if done {
                finished = true;
                break;
            }
        }
        if !finished && result.error.is_none() {
            result.error = Some(format!(
                "the model was still calling tools after {max} iterations"
            ));
        }
        result.duration_ms = clock.elapsed().as_secs_f64() * 1000.0;
        result.prompts = conversation.records;
        let (cost, cost_missing) = super::llm::run_cost(
            &live,
            &self.inner.config.models,
            result.tokens,
            result.steps.len(),
            unreported,
        );
        result.cost = cost;
        result.cost_missing.clone_from(&cost_missing);
        let run = AgentRun {
            agent_name: AGENT_NAME.to_owned(),
            model: model.clone(),
            provider: provider.clone(),
            input: RawJson::from_value(message),
            output: RawJson::from_value(&result.message),
            steps: result.steps.clone().into(),
            tokens: result.tokens,
            duration: result.duration_ms,
            finish_reason: match (&result.error, result.steps.last()) {
                (Some(_), _) => "error".to_owned(),
                (None, Some(step)) => step.finish_reason.to_string(),
                (None, None) => "stop".to_owned(),
            },
            streaming: frames.is_some(),
            conversation_id: Some(session_id.into()),
            failover_attempts,
            error: result.error.as_ref().map(RawJson::from_value),
            cost,
            cost_missing: cost_missing.map(String::into_boxed_str),
        };
        lock(&session).note_run(&run, &self.inner.log, self.inner.shared.is_shared());
        let event = match result.error {
            Some(_) => Event::AgentFailed(run),
            None => Event::AgentCompleted(run),
        };
        self.emit(Some(session_id.to_owned()), event);
        match &result.error {
            Some(error) => {
                out(SendFrame::Error {
                    error: "agent_failed".to_owned(),
                    message: error.clone(),
                })
                .await;
            }
            None => out(SendFrame::Done(result.send_result())).await,
        }
        Ok(result)
    }
}
