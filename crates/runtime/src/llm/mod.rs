//! Real models behind `send`: which provider a session names, the conversation one run
//! holds with it, and one exchange over HTTP (retries, SSE) or from a cassette.
//! The agent loop asks `Live::answer` for each step; the tools stay the session's mocks.

pub mod anthropic;
pub mod cassette;
pub mod judge;
pub mod openai;
pub mod settings;

use super::sessions::Session;
use crate::llm::settings::{ANTHROPIC_DEFAULT_URL, OPENAI_DEFAULT_URL, ProviderSettings};
use backon::{ExponentialBuilder, Retryable};
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use spyglass_protocol::events::Tokens;
use spyglass_protocol::rest::{ScriptStep, ScriptToolCall, SendFrame};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// What create answers (400) for a model the settings do not allow.
pub const MODEL_UNAVAILABLE: &str = "model_unavailable";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    OpenAi,
    Anthropic,
}

impl Provider {
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }
}

/// A session's real model: provider and model name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub provider: Provider,
    pub model: String,
}

fn glob_match(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.len() >= head.len() + tail.len() && text.starts_with(head) && text.ends_with(tail)
        }
    }
}

/// Reads `scripted`, `openai`, `openai:MODEL`, `anthropic[:MODEL]`: `None` is the
/// scripted model. Refused: an unknown provider, one with no route configured (and no
/// cassette to replay), a model outside `allowed_models`.
pub fn choose(spec: &str, settings: &ProviderSettings) -> Result<Option<Choice>, String> {
    let spec = spec.trim();
    let (provider, model) = spec.split_once(':').unwrap_or((spec, ""));
    let (provider, route, default) = match provider {
        "" | "scripted" | "fake" => return Ok(None),
        "openai" => (Provider::OpenAi, &settings.openai, &settings.openai_model),
        "anthropic" => (
            Provider::Anthropic,
            &settings.anthropic,
            &settings.anthropic_model,
        ),
        other => {
            return Err(format!(
                "unknown model provider `{other}`; use scripted, openai[:MODEL] or anthropic[:MODEL]"
            ));
        }
    };
    if !route.configured() && settings.replay_dir.is_none() {
        let var = match provider {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
        };
        return Err(format!(
            "the runtime has no {} route: start it with --model-base-url {}=URL, {var}, or --model-replay DIR",
            provider.name(),
            provider.name()
        ));
    }
    let model = if model.is_empty() {
        default.clone()
    } else {
        model.to_owned()
    };
    if !settings.allowed_models.is_empty()
        && !settings
            .allowed_models
            .iter()
            .any(|p| glob_match(p, &model))
    {
        return Err(format!(
            "model `{model}` is not among the runtime's allowed models ({})",
            settings.allowed_models.join(", ")
        ));
    }
    Ok(Some(Choice { provider, model }))
}

/// At create: the model a session names (`model` as a string or `model.provider`, else
/// `metadata.model`), checked against the settings; 400 `model_unavailable` when refused.
/// The scripted model leaves `provider` empty.
pub(crate) fn pick(
    script: &mut spyglass_protocol::rest::ModelScript,
    metadata: Option<&serde_json::Map<String, Value>>,
    settings: &ProviderSettings,
) -> Result<(), super::ApiErrorWithStatus> {
    let (spec, field) = match (&script.provider, metadata.and_then(|m| m.get("model"))) {
        (Some(spec), _) => (spec.clone(), "/model"),
        (None, Some(Value::String(spec))) => (spec.clone(), "/metadata/model"),
        _ => return Ok(()),
    };
    match choose(&spec, settings) {
        Ok(Some(choice)) => {
            script.provider = Some(format!("{}:{}", choice.provider.name(), choice.model));
            Ok(())
        }
        Ok(None) => {
            script.provider = None;
            Ok(())
        }
        Err(message) => Err(super::ApiErrorWithStatus {
            status: 400,
            error: spyglass_protocol::ApiError::new(MODEL_UNAVAILABLE, message).with_field(field),
        }),
    }
}

/// A declared mock as the provider sees it: its name in the provider's character set.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub wire: String,
    pub description: String,
}

/// `server/tool` becomes `server__tool`; anything outside `[A-Za-z0-9_-]` becomes `_`,
/// at most 64 characters (both providers' rule); a clash gets a numeric suffix.
pub fn tool_specs<'a>(names: impl IntoIterator<Item = &'a String>) -> Vec<ToolSpec> {
    let mut specs: Vec<ToolSpec> = Vec::new();
    for name in names {
        let mut wire: String = name
            .replace('/', "__")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let mut n = 2;
        while specs.iter().any(|s| s.wire == wire) {
            let suffix = format!("_{n}");
            wire.truncate(64 - suffix.len());
            wire.push_str(&suffix);
            n += 1;
        }
        specs.push(ToolSpec {
            name: name.clone(),
            wire,
            description: format!("Mocked tool {name}"),
        });
    }
    specs
}

/// The canonical name of a tool the model called: a declared one, else its wire name
/// read back (`a__b` as `a/b`) so the mock store answers `tool_not_mocked` for it.
pub fn tool_name(specs: &[ToolSpec], wire: &str) -> String {
    specs
        .iter()
        .find(|s| s.wire == wire)
        .map_or_else(|| wire.replacen("__", "/", 1), |s| s.name.clone())
}

/// The conversation, provider-neutral.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Msg {
    User(String),
    Assistant {
        text: String,
        calls: Vec<WireCall>,
    },
    /// Per call id, the dispatch's output (a result, or the envelope whole).
    ToolResults(Vec<(String, Value)>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// One model answer, whatever the provider and whether it streamed: what a cassette keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub text: String,
    #[serde(default)]
    pub calls: Vec<WireCall>,
    #[serde(default)]
    pub usage: Option<Tokens>,
    #[serde(default)]
    pub finish: String,
}

pub(crate) fn malformed(what: &str) -> String {
    format!("malformed answer: {what}")
}

/// One run's conversation with a real model.
pub struct Live {
    choice: Choice,
    settings: ProviderSettings,
    client: reqwest::Client,
    tools: Vec<ToolSpec>,
    messages: Vec<Msg>,
    /// Calls of the last answer awaiting their results.
    pending: Vec<WireCall>,
    /// Usage of the last answer, when the provider reported it.
    pub usage: Option<Tokens>,
    /// The last answer's text already went out as deltas.
    pub streamed: bool,
    /// The last answer came from a cassette.
    pub from_cassette: bool,
}

impl Live {
    /// The run's model when its session names a real one; `None` runs the script.
    pub(crate) fn start(
        settings: &ProviderSettings,
        session: &Arc<Mutex<Session>>,
        message: &str,
    ) -> Result<Option<Live>, String> {
        let (spec, tools) = {
            let s = super::lock(session);
            (s.model.provider.clone(), tool_specs(s.mocks.slots.keys()))
        };
        let Some(choice) = spec
            .map(|spec| choose(&spec, settings))
            .transpose()?
            .flatten()
        else {
            return Ok(None);
        };
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .map_err(|e| format!("cannot build the model client: {e}"))?;
        Ok(Some(Live {
            choice,
            settings: settings.clone(),
            client,
            tools,
            messages: vec![Msg::User(message.to_owned())],
            pending: Vec::new(),
            usage: None,
            streamed: false,
            from_cassette: false,
        }))
    }

    /// A one-message conversation with no tools (the judge's).
    pub fn for_prompt(
        settings: &ProviderSettings,
        choice: Choice,
        prompt: &str,
    ) -> Result<Live, String> {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .map_err(|e| format!("cannot build the model client: {e}"))?;
        Ok(Live {
            choice,
            settings: settings.clone(),
            client,
            tools: Vec::new(),
            messages: vec![Msg::User(prompt.to_owned())],
            pending: Vec::new(),
            usage: None,
            streamed: false,
            from_cassette: false,
        })
    }

    pub fn provider(&self) -> &'static str {
        self.choice.provider.name()
    }

    pub fn model(&self) -> &str {
        &self.choice.model
    }

    fn request(&self, stream: bool) -> Value {
        match self.choice.provider {
            Provider::OpenAi => {
                openai::request(&self.choice.model, &self.messages, &self.tools, stream)
            }
            Provider::Anthropic => anthropic::request(
                &self.choice.model,
                &self.messages,
                &self.tools,
                stream,
                self.settings.max_output_tokens,
            ),
        }
    }

    /// The model's next step: its text and the tools it calls (named canonically).
    /// Text deltas go to `frames` as they stream. `Err` is the run's error message.
    pub async fn answer(
        &mut self,
        iteration: u32,
        frames: Option<&mpsc::Sender<SendFrame>>,
    ) -> Result<ScriptStep, String> {
        self.streamed = false;
        self.from_cassette = false;
        let request = self.request(frames.is_some());
        let provider = self.provider();
        let reply = if let Some(dir) = &self.settings.replay_dir {
            let reply = cassette::replay(dir, provider, &request)
                .map_err(|e| format!("step {iteration}: {e}"))?;
            self.from_cassette = true;
            reply
        } else {
            let (reply, streamed) = self.exchange(&request, iteration, frames).await?;
            self.streamed = streamed;
            if let Some(dir) = &self.settings.record_dir {
                cassette::record(dir, provider, iteration, &request, &reply)
                    .map_err(|e| format!("step {iteration}: {e}"))?;
            }
            reply
        };
        self.usage = reply.usage;
        self.pending.clone_from(&reply.calls);
        self.messages.push(Msg::Assistant {
            text: reply.text.clone(),
            calls: reply.calls.clone(),
        });
        Ok(ScriptStep {
            tool_calls: reply
                .calls
                .iter()
                .map(|c| ScriptToolCall {
                    name: tool_name(&self.tools, &c.name),
                    arguments: c.arguments.clone(),
                    id: Some(c.id.clone()),
                    ..ScriptToolCall::default()
                })
                .collect(),
            text: (!reply.text.is_empty()).then_some(reply.text),
            ..ScriptStep::default()
        })
    }

    /// The dispatches' outputs for the last answer's calls, in its order: they go back
    /// to the model as tool results on the next step.
    pub fn tool_results(&mut self, outputs: Vec<Value>) {
        let results = self
            .pending
            .drain(..)
            .zip(outputs)
            .map(|(call, output)| (call.id, output))
            .collect::<Vec<_>>();
        if !results.is_empty() {
            self.messages.push(Msg::ToolResults(results));
        }
    }

    fn route(&self) -> (String, Vec<(&'static str, String)>) {
        match self.choice.provider {
            Provider::OpenAi => {
                let mut headers = Vec::new();
                if let Some(key) = &self.settings.openai.key {
                    headers.push(("authorization", format!("Bearer {}", key.expose())));
                }
                (
                    openai::endpoint(&self.settings.openai.url(OPENAI_DEFAULT_URL)),
                    headers,
                )
            }
            Provider::Anthropic => {
                let mut headers = vec![("anthropic-version", anthropic::VERSION.to_owned())];
                if let Some(key) = &self.settings.anthropic.key {
                    headers.push(("x-api-key", key.expose().to_owned()));
                }
                (
                    anthropic::endpoint(&self.settings.anthropic.url(ANTHROPIC_DEFAULT_URL)),
                    headers,
                )
            }
        }
    }

    /// One request with bounded retries on 429 (after `retry-after`), 5xx and a refused
    /// connection; any other failure ends the run with the provider's own message.
    async fn exchange(
        &self,
        request: &Value,
        iteration: u32,
        frames: Option<&mpsc::Sender<SendFrame>>,
    ) -> Result<(Reply, bool), String> {
        let provider = self.provider();
        let (url, headers) = self.route();
        let max_wait = self.settings.max_retry_wait;
        let tries = AtomicU32::new(0);
        let once = || {
            tries.fetch_add(1, Ordering::Relaxed);
            self.exchange_once(&url, &headers, request, iteration, frames)
        };
        once.retry(retries(self.settings.max_retries))
            .sleep(tokio::time::sleep)
            .when(Failure::retryable)
            .adjust(|failure, delay| delay.map(|delay| failure.wait(delay, max_wait)))
            .notify(|failure, wait| {
                tracing::debug!("{provider}: {}; retrying in {wait:?}", failure.note());
            })
            .await
            .map_err(|failure| failure.message(provider, &url, tries.load(Ordering::Relaxed)))
    }

    /// One request and its answer, or how it failed.
    async fn exchange_once(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        request: &Value,
        iteration: u32,
        frames: Option<&mpsc::Sender<SendFrame>>,
    ) -> Result<(Reply, bool), Failure> {
        let provider = self.provider();
        let mut req = self.client.post(url).json(request);
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        if frames.is_some() {
            req = req.header("accept", "text/event-stream");
        }
        let timed_out = || {
            Failure::Fatal(format!(
                "{provider} did not answer within {}s",
                self.settings.timeout.as_secs_f64()
            ))
        };
        let response = match req.send().await {
            Ok(response) => response,
            Err(e) if e.is_timeout() => return Err(timed_out()),
            Err(e) => return Err(Failure::Unreachable(e.to_string())),
        };
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            if let Some(frames) = frames {
                return match self.read_stream(response, iteration, frames).await {
                    Ok(reply) => Ok((reply, true)),
                    Err(broken) => Err(Failure::Stream(broken)),
                };
            }
            let bytes = match response.bytes().await {
                Ok(bytes) => bytes,
                Err(e) if e.is_timeout() => return Err(timed_out()),
                Err(e) => return Err(Failure::BrokeOff(error_chain(&e))),
            };
            let body: Value = serde_json::from_slice(&bytes).map_err(|e| {
                Failure::Fatal(format!(
                    "{provider}: {}",
                    malformed(&format!("not JSON ({e})"))
                ))
            })?;
            return match self.choice.provider {
                Provider::OpenAi => openai::parse(&body),
                Provider::Anthropic => anthropic::parse(&body),
            }
            .map(|r| (r, false))
            .map_err(|e| Failure::Fatal(format!("{provider}: {e}")));
        }
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        let text = response.text().await.unwrap_or_default();
        Err(Failure::Status {
            status,
            message: provider_message(&text),
            retry_after,
        })
    }

    /// One streamed answer, its text deltas forwarded as they come. A stream that breaks
    /// says how many deltas the client already got, and whether the break was a cut or
    /// the provider's own failure (worth another try) or a malformed answer or timeout.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        iteration: u32,
        frames: &mpsc::Sender<SendFrame>,
    ) -> Result<Reply, Broken> {
        let provider = self.provider();
        let mut openai = openai::Stream::default();
        let mut anthropic = anthropic::Stream::default();
        let mut forwarded = 0;
        let fatal = |reason: String, forwarded| Broken {
            reason,
            forwarded,
            transient: false,
        };
        let unparsed = AtomicUsize::new(0);
        let mut events = std::pin::pin!(sse_events(response.bytes_stream(), &unparsed));
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(EventStreamError::Transport(SseRead::Transport(e))) if e.is_timeout() => {
                    return Err(fatal(
                        format!(
                            "{provider} did not finish its stream within {}s",
                            self.settings.timeout.as_secs_f64()
                        ),
                        forwarded,
                    ));
                }
                Err(EventStreamError::Transport(SseRead::Transport(e))) => {
                    return Err(Broken {
                        reason: error_chain(&e),
                        forwarded,
                        transient: true,
                    });
                }
                Err(EventStreamError::Transport(SseRead::TooLong)) => {
                    let reason = malformed("a stream event past 4 MiB");
                    return Err(fatal(format!("{provider}: {reason}"), forwarded));
                }
                Err(e @ (EventStreamError::Utf8(_) | EventStreamError::Parser(_))) => {
                    // A parser error quotes the input it stopped at: the first 300
                    // characters of it, as other answers' texts are cut.
                    let why: String = e.to_string().chars().take(300).collect();
                    let reason = malformed(&format!("not a server-sent event stream ({why})"));
                    return Err(fatal(format!("{provider}: {reason}"), forwarded));
                }
            };
            unparsed.store(0, Ordering::Relaxed);
            let (fed, provider_error) = match self.choice.provider {
                Provider::OpenAi => (
                    openai.feed(&event.event, &event.data),
                    openai.provider_error,
                ),
                Provider::Anthropic => (
                    anthropic.feed(&event.event, &event.data),
                    anthropic.provider_error,
                ),
            };
            let delta = match fed {
                Ok(delta) => delta,
                // The provider failed mid-stream (its 5xx after a 200): a break.
                Err(reason) if provider_error => {
                    let reason: String = reason.chars().take(300).collect();
                    return Err(Broken {
                        reason: spyglass_protocol::mask::mask(&reason).into_owned(),
                        forwarded,
                        transient: true,
                    });
                }
                Err(e) => return Err(fatal(format!("{provider}: {e}"), forwarded)),
            };
            if let Some(content) = delta {
                forwarded += 1;
                let _ = frames
                    .send(SendFrame::AssistantText { content, iteration })
                    .await;
            }
        }
        let (ended, end) = match self.choice.provider {
            Provider::OpenAi => (openai.ended(), "a finish_reason or [DONE]"),
            Provider::Anthropic => (anthropic.ended(), "message_stop"),
        };
        if !ended {
            return Err(Broken {
                reason: format!("it ended before {end}"),
                forwarded,
                transient: true,
            });
        }
        match self.choice.provider {
            Provider::OpenAi => openai.finish(),
            Provider::Anthropic => anthropic.finish(),
        }
        .map_err(|e| fatal(format!("{provider}: {e}"), forwarded))
    }
}

/// A streamed answer that did not arrive whole.
struct Broken {
    /// Why: the transport's or the provider's words for a break, else the run's whole
    /// error message.
    reason: String,
    /// Text deltas the client already got from this answer.
    forwarded: usize,
    /// A cut connection, an early end, or the provider's own mid-stream failure: asked
    /// again when nothing was forwarded. Not so a malformed answer or a timeout.
    transient: bool,
}

impl Broken {
    /// The run's error after `tries` requests.
    fn message(&self, provider: &str, tries: u32) -> String {
        if !self.transient {
            return self.reason.clone();
        }
        match self.forwarded {
            0 if tries > 1 => format!(
                "{provider}: the stream broke (after {tries} tries): {}",
                self.reason
            ),
            0 => format!("{provider}: the stream broke: {}", self.reason),
            1 => format!(
                "{provider}: the stream broke after 1 text delta: {}",
                self.reason
            ),
            n => format!(
                "{provider}: the stream broke after {n} text deltas: {}",
                self.reason
            ),
        }
    }
}

/// How one request to a provider failed: what the run's error says if no try follows,
/// and whether another try may help.
enum Failure {
    /// A timeout or a malformed answer: the run's error as it stands, never retried.
    Fatal(String),
    /// The request did not reach the provider (refused, reset, DNS).
    Unreachable(String),
    /// A streamed answer that did not arrive whole.
    Stream(Broken),
    /// A whole answer cut off while its body was read.
    BrokeOff(String),
    /// The provider answered with an error status.
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
}

impl Failure {
    /// A refused connection, a cut answer, a stream broken before it forwarded anything,
    /// a 429 or a 5xx.
    fn retryable(&self) -> bool {
        match self {
            Failure::Fatal(_) => false,
            Failure::Unreachable(_) | Failure::BrokeOff(_) => true,
            Failure::Stream(broken) => broken.transient && broken.forwarded == 0,
            Failure::Status { status, .. } => *status == 429 || *status >= 500,
        }
    }

    /// How long to wait before the next try, given the schedule's `delay`: a 429's
    /// `retry-after` when it sent one; a status's wait is capped at `max_wait`.
    fn wait(&self, delay: Duration, max_wait: Duration) -> Duration {
        match self {
            Failure::Status {
                status: 429,
                retry_after: Some(wait),
                ..
            } => (*wait).min(max_wait),
            Failure::Status { .. } => delay.min(max_wait),
            _ => delay,
        }
    }

    /// What went wrong, for the log line before a retry.
    fn note(&self) -> String {
        match self {
            Failure::Fatal(reason) => reason.clone(),
            Failure::Unreachable(e) => format!("unreachable ({e})"),
            Failure::Stream(broken) => format!("the stream broke ({})", broken.reason),
            Failure::BrokeOff(e) => format!("the answer broke off ({e})"),
            Failure::Status { status, .. } => format!("answered {status}"),
        }
    }

    /// The run's error after `tries` requests to `url`.
    fn message(&self, provider: &str, url: &str, tries: u32) -> String {
        match self {
            Failure::Fatal(reason) => reason.clone(),
            Failure::Unreachable(e) => format!("cannot reach {provider} at {url}: {e}"),
            Failure::Stream(broken) => broken.message(provider, tries),
            Failure::BrokeOff(e) => {
                format!("{provider}: the answer broke off (after {tries} tries): {e}")
            }
            Failure::Status {
                status, message, ..
            } => {
                let tries = if self.retryable() {
                    format!(" (after {tries} tries)")
                } else {
                    String::new()
                };
                format!("{provider} answered {status}{tries}: {message}")
            }
        }
    }
}

/// The retry schedule of a request to a provider: 250 ms doubling to 16 s, at most
/// `max_retries` retries.
fn retries(max_retries: u32) -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(250))
        .with_factor(2.0)
        .with_max_delay(Duration::from_secs(16))
        .with_max_times(max_retries as usize)
}

/// Why the byte stream under the SSE parser ended early.
#[derive(Debug, thiserror::Error)]
enum SseRead {
    #[error(transparent)]
    Transport(reqwest::Error),
    #[error("a stream event past 4 MiB")]
    TooLong,
}

/// An error with its causes, `outer: inner: innermost` (reqwest's own text alone says
/// only "error decoding response body").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    spyglass_protocol::mask::mask(&text).into_owned()
}

/// A run's model: `Ok(None)` runs the script, `Err` is why the named one cannot run.
pub type RunModel = Result<Option<Live>, String>;

/// The agent loop's seam: the next step of a real model, or `None` for the script.
/// A session closed meanwhile ends the wait for the provider at once.
pub async fn step(
    live: &mut RunModel,
    iteration: u32,
    frames: Option<&mpsc::Sender<SendFrame>>,
    closing: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<Result<ScriptStep, String>> {
    match live {
        Err(error) => Some(Err(error.clone())),
        Ok(None) => None,
        Ok(Some(live)) => Some(tokio::select! {
            answer = live.answer(iteration, frames) => answer,
            _ = closing.wait_for(|closed| *closed) => Err(super::agent::SESSION_CLOSED.to_owned()),
        }),
    }
}

/// The last step's text already went out as stream deltas.
pub fn streamed(live: &RunModel) -> bool {
    matches!(live, Ok(Some(l)) if l.streamed)
}

/// The last step's usage as the provider reported it.
pub fn usage(live: &RunModel) -> Option<Tokens> {
    match live {
        Ok(Some(l)) => l.usage,
        _ => None,
    }
}

/// The run names a real model (it may have failed to start).
pub fn is_real(live: &RunModel) -> bool {
    !matches!(live, Ok(None))
}

/// A run's cost in dollars by the settings' price table and, when it has none, why.
/// The scripted model is free. `unreported` is the first step whose usage the provider
/// did not report: the tokens then hold a guess, and a guess is not priced.
pub fn run_cost(
    live: &RunModel,
    settings: &ProviderSettings,
    tokens: Tokens,
    steps: usize,
    unreported: Option<u32>,
) -> (Option<f64>, Option<String>) {
    let model = match live {
        Ok(None) => return (Some(0.0), None),
        Ok(Some(l)) if steps > 0 => l.model(),
        _ => {
            return (
                None,
                Some("the run ended before the provider reported any token usage".to_owned()),
            );
        }
    };
    if let Some(step) = unreported {
        return (
            None,
            Some(format!(
                "the provider reported no token usage for step {step}"
            )),
        );
    }
    match settings.priced(model, tokens.prompt, tokens.completion) {
        Some(cost) => (Some(cost), None),
        None => (None, Some(ProviderSettings::unpriced(model))),
    }
}

/// The last step was served from a cassette.
pub fn from_cassette(live: &RunModel) -> bool {
    matches!(live, Ok(Some(l)) if l.from_cassette)
}

/// Provider and model names for the run's events (`scripted` ones otherwise).
pub fn names(live: &RunModel, provider: &str, model: &str) -> (String, String) {
    match live {
        Ok(Some(l)) => (l.provider().to_owned(), l.model().to_owned()),
        _ => (provider.to_owned(), model.to_owned()),
    }
}

/// Hands the step's dispatch outputs back to a real model.
pub fn tool_results(live: &mut RunModel, calls: &[spyglass_protocol::events::StepToolCall]) {
    if let Ok(Some(l)) = live {
        l.tool_results(calls.iter().map(|c| c.result.to_value()).collect());
    }
}

/// The provider's own words from an error body: `error.message`, else `message`, else
/// the text (cut to 300 characters), with any secret masked.
fn provider_message(text: &str) -> String {
    let from_json = serde_json::from_str::<Value>(text).ok().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error").filter(|e| e.is_string()))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let message = from_json.unwrap_or_else(|| text.chars().take(300).collect());
    let message = if message.trim().is_empty() {
        "(no message)".to_owned()
    } else {
        message
    };
    spyglass_protocol::mask::mask(&message).into_owned()
}

/// A stream event past this many bytes is refused: no provider sends one.
const MAX_SSE_EVENT: usize = 4 * 1024 * 1024;

/// The server-sent events in a byte stream. `unparsed` counts the bytes read since the
/// caller last set it to 0 (as it does for each event): past `MAX_SSE_EVENT` the stream
/// ends with `SseRead::TooLong` before the parser holds more of it.
fn sse_events<'a, B: AsRef<[u8]> + 'a>(
    bytes: impl Stream<Item = Result<B, reqwest::Error>> + 'a,
    unparsed: &'a AtomicUsize,
) -> impl Stream<Item = Result<eventsource_stream::Event, EventStreamError<SseRead>>> + 'a {
    bytes
        .map(move |chunk| {
            let chunk = chunk.map_err(SseRead::Transport)?;
            let len = chunk.as_ref().len();
            if unparsed.fetch_add(len, Ordering::Relaxed) + len > MAX_SSE_EVENT {
                return Err(SseRead::TooLong);
            }
            Ok(chunk)
        })
        .eventsource()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_map_to_the_provider_charset_and_back() {
        let names = [
            "asaas/create_payment".to_owned(),
            "a.b/c d".to_owned(),
            "a_b/c_d".to_owned(),
        ];
        let specs = tool_specs(names.iter());
        assert_eq!(specs[0].wire, "asaas__create_payment");
        assert_eq!(specs[1].wire, "a_b__c_d");
        assert_eq!(specs[2].wire, "a_b__c_d_2");
        for spec in &specs {
            assert_eq!(tool_name(&specs, &spec.wire), spec.name);
        }
        assert_eq!(tool_name(&specs, "other__tool"), "other/tool");
    }

    #[test]
    fn choose_reads_the_spec_within_the_settings() {
        let mut settings = ProviderSettings::default();
        assert_eq!(choose("scripted", &settings), Ok(None));
        assert!(
            choose("openai", &settings)
                .unwrap_err()
                .contains("no openai route")
        );
        settings.openai.base_url = Some("http://127.0.0.1:1/v1".to_owned());
        assert_eq!(
            choose("openai:llama3.2", &settings).unwrap(),
            Some(Choice {
                provider: Provider::OpenAi,
                model: "llama3.2".to_owned()
            })
        );
        assert!(
            choose("gemini:x", &settings)
                .unwrap_err()
                .contains("unknown")
        );
        settings.allowed_models = vec!["gpt-4o*".to_owned()];
        assert!(choose("openai:o1", &settings).is_err());
        assert!(choose("openai:gpt-4o-mini", &settings).is_ok());
    }

    /// The events `sse_events` reads from `chunks`, each as (name, data), or the error.
    async fn read_events(chunks: Vec<Vec<u8>>) -> Vec<Result<(String, String), String>> {
        let unparsed = AtomicUsize::new(0);
        let bytes = futures_util::stream::iter(chunks.into_iter().map(Ok));
        let events = sse_events(bytes, &unparsed).map(|event| {
            unparsed.store(0, Ordering::Relaxed);
            event.map(|e| (e.event, e.data)).map_err(|e| e.to_string())
        });
        events.collect().await
    }

    #[tokio::test]
    async fn sse_events_split_across_chunks() {
        let events = read_events(vec![
            b"event: a\r\ndata: {\"x\"".to_vec(),
            b":1}\r\n\r\n: ping\n\ndata: [DONE]\n\n".to_vec(),
        ])
        .await;
        assert_eq!(
            events,
            vec![
                Ok(("a".to_owned(), "{\"x\":1}".to_owned())),
                Ok(("message".to_owned(), "[DONE]".to_owned()))
            ]
        );
    }

    #[tokio::test]
    async fn an_sse_event_past_4_mib_is_refused() {
        let mut chunks = vec![b"data: short\n\n".to_vec()];
        chunks.extend((0..5).map(|_| vec![b'x'; 1024 * 1024]));
        chunks.push(b"\n\n".to_vec());
        let events = read_events(chunks).await;
        assert_eq!(events[0], Ok(("message".to_owned(), "short".to_owned())));
        assert!(
            events[1]
                .as_ref()
                .is_err_and(|e| e.contains("a stream event past 4 MiB")),
            "{events:?}"
        );
    }

    #[test]
    fn provider_messages_are_read_and_masked() {
        assert_eq!(
            provider_message(
                r#"{"error":{"message":"Incorrect API key sk-abc123def456ghi789jkl012"}}"#
            ),
            "Incorrect API key sk-****"
        );
        assert_eq!(provider_message("upstream down"), "upstream down");
        assert_eq!(provider_message(""), "(no message)");
    }
}
