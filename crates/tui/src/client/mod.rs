//! What talks to a runtime: the observer WebSocket (reconnect, resume, heartbeat, REST
//! re-read after `stream.gap`) and the REST calls. Tasks here send `ClientMsg` values on a
//! channel and never touch UI state.

pub mod eval;
pub mod observer;
pub mod replay;
pub mod rest;
pub mod tail;

pub use observer::{ObserverConfig, spawn_observer};
pub use rest::RestClient;

/// The project name that watches every project (`--project '*'`): the stream only.
pub const ALL_PROJECTS: &str = "*";

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use spyglass_protocol::Frame;
use spyglass_protocol::rest::{ApprovalList, DecisionRequest, SessionList};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::mpsc;

/// A runtime as a client reaches it: its URL, the key sent as a Bearer token, and the
/// project (`x-codespar-project`) every request and the stream act for.
#[derive(Debug, Clone, Default)]
pub struct Endpoint {
    pub url: String,
    pub api_key: Option<String>,
    /// None: the runtime's default project (or the key's only one).
    pub project: Option<String>,
}

impl Endpoint {
    /// The runtime at `url`, no key, its default project.
    pub fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            ..Self::default()
        }
    }

    /// REST calls to it, every one carrying the key and the project.
    pub fn rest(&self) -> Result<RestClient, ClientError> {
        RestClient::scoped(&self.url, self.api_key.as_deref(), self.project.as_deref())
    }

    /// Its observer stream, for the same key and project.
    pub fn observer(&self) -> ObserverConfig {
        ObserverConfig {
            project: self.project.clone(),
            ..ObserverConfig::new(&self.url, self.api_key.as_deref())
        }
    }
}

/// Everything the network side tells the UI loop.
#[derive(Debug)]
pub enum ClientMsg {
    /// Dialling; `attempt` is 0 for the first try after a success.
    Connecting {
        attempt: u32,
    },
    Connected,
    /// Frames in seq order: as many as had arrived together, so a burst costs the UI one
    /// wake, not one per frame. Unboxed: the fold boxes each on its own thread, where the
    /// box is later freed, rather than the reading thread allocating what another frees.
    Frames(Vec<Frame>),
    /// A frame that could not be decoded: counted and shown, never fatal.
    ParseError(String),
    /// The stream is down; the next try is `retry_in` from now.
    Disconnected {
        attempt: u32,
        retry_in: Duration,
        reason: String,
    },
    /// The runtime refused the stream itself (401/403): retrying with the same key cannot
    /// help, so the observer has stopped. `rejected_hint` says what to change.
    Rejected {
        status: u16,
    },
    /// A REST re-read of the runtime's state (after `stream.gap`).
    Hydrated {
        sessions: SessionList,
        approvals: ApprovalList,
    },
    /// A REST call failed; the message says what to do.
    RestError(String),
}

#[derive(Debug, Error)]
pub enum ClientError {
    #[error("bad runtime URL `{0}`: expected http://, https://, ws:// or wss://")]
    Url(String),
    #[error("bad project `{0}`: a project id is visible ASCII (e.g. prj_0123456789abcdef)")]
    Project(String),
    #[error("runtime unreachable: {0}")]
    Http(#[from] reqwest::Error),
    #[error("runtime answered {status} {code}: {message}")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    #[error("websocket: {0}")]
    WebSocket(String),
    #[error("bad API key: {0}")]
    Key(String),
    #[error("{}", rejected_hint(*status))]
    Rejected { status: u16 },
    #[error("runtime unreachable after {attempts} attempts: {reason}")]
    Unreachable { attempts: u32, reason: String },
}

/// What to do about a runtime refusing the stream with `status` (401 or 403), naming the
/// flag and the variable that carry the key.
pub fn rejected_hint(status: u16) -> String {
    match status {
        401 => "the runtime refused the stream: 401 unauthorized (no API key or a wrong one); \
                pass --api-key KEY or set CODESPAR_API_KEY"
            .to_owned(),
        403 => "the runtime refused the stream: 403 forbidden (this API key may not watch it); \
                pass another with --api-key KEY or set CODESPAR_API_KEY"
            .to_owned(),
        other => format!("the runtime refused the stream: {other}"),
    }
}

/// Requests the UI sends without waiting for them: each runs in its own task and only a
/// failure comes back, as `ClientMsg::RestError`. Success shows up as stream events, so
/// the UI never changes its state on the answer itself.
#[derive(Debug, Clone)]
pub struct Outbox {
    rest: RestClient,
    tx: mpsc::Sender<ClientMsg>,
    runtime: tokio::runtime::Handle,
}

impl Outbox {
    /// An outbox spawning on the current tokio runtime; `None` outside one.
    pub fn new(rest: RestClient, tx: mpsc::Sender<ClientMsg>) -> Option<Self> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(Self { rest, tx, runtime })
    }

    /// `POST /v1/approvals/:id/approve|deny` in a task.
    pub fn decide(&self, approval_id: &str, approve: bool, body: DecisionRequest) {
        let (rest, tx, id) = (self.rest.clone(), self.tx.clone(), approval_id.to_owned());
        self.runtime.spawn(async move {
            if let Err(err) = rest.decide(&id, approve, &body).await {
                tracing::info!(%id, approve, %err, "decision refused");
                let _ = tx
                    .send(ClientMsg::RestError(decision_error(&id, approve, &err)))
                    .await;
            }
        });
    }

    /// Runs `suite` again as the runtime last ran it, one case of it or all, in a task.
    /// Results arrive as eval events on the stream.
    pub fn rerun(&self, suite: String, case: Option<String>) {
        let (rest, tx) = (self.rest.clone(), self.tx.clone());
        self.runtime.spawn(async move {
            if let Err(err) = rest.rerun_by_name(&suite, case.as_deref()).await {
                tracing::info!(%suite, ?case, %err, "rerun refused");
                let what = match &case {
                    Some(case) => format!("rerun of {suite} / {case} failed: {err}"),
                    None => format!("rerun of suite {suite} failed: {err}"),
                };
                // The UI may be gone already; then nobody needs the message.
                let _ = tx.send(ClientMsg::RestError(what)).await;
            }
        });
    }
}

/// What the status line says when a decision did not go through, and that nothing changed.
pub fn decision_error(approval_id: &str, approve: bool, err: &ClientError) -> String {
    let verb = if approve { "approve" } else { "deny" };
    match err {
        ClientError::Api {
            status,
            code,
            message,
        } => {
            let why = match (*status, code.as_str()) {
                (409, _) | (_, "approval_already_decided") => "already decided",
                (410, _) | (_, "approval_expired") => "expired",
                (404, _) => "no such approval",
                _ => "refused",
            };
            format!("{verb} {approval_id}: {why} ({status} {code}: {message}); nothing changed")
        }
        ClientError::Http(e) => {
            format!("{verb} {approval_id}: runtime unreachable ({e}); nothing changed")
        }
        other => format!("{verb} {approval_id}: {other}; nothing changed"),
    }
}

/// The observer URL for a runtime base URL: http -> ws, https -> wss, `since` appended.
pub fn observe_url(base: &str, since: u64) -> Result<String, ClientError> {
    let base = base.trim_end_matches('/');
    let (scheme, rest) = base
        .split_once("://")
        .ok_or_else(|| ClientError::Url(base.to_owned()))?;
    let ws = match scheme {
        "http" | "ws" => "ws",
        "https" | "wss" => "wss",
        _ => return Err(ClientError::Url(base.to_owned())),
    };
    if rest.is_empty() {
        return Err(ClientError::Url(base.to_owned()));
    }
    Ok(format!("{ws}://{rest}/v1/observe?since={since}"))
}

/// The first reconnect delay of `backoff`.
pub const BACKOFF_BASE: Duration = Duration::from_millis(250);

/// The longest reconnect delay, before jitter.
pub(crate) const BACKOFF_CAP: Duration = Duration::from_secs(10);

/// The reconnect schedule from a first delay: doubling per failed attempt, capped at 10 s,
/// never ending. Each delay it yields is the ceiling `jittered` takes up to half off.
pub fn reconnects(base: Duration) -> ExponentialBackoff {
    ExponentialBuilder::new()
        .with_min_delay(base)
        .with_factor(2.0)
        .with_max_delay(BACKOFF_CAP)
        .without_max_times()
        .build()
}

/// A delay of the schedule with jitter (`jitter` in 0..1) taking up to half off, so clients
/// do not stampede; whole milliseconds.
pub fn jittered(ceiling: Duration, jitter: f64) -> Duration {
    let ceiling_ms = (ceiling.as_secs_f64() * 1000.0).round();
    let jitter = jitter.clamp(0.0, 1.0);
    Duration::from_millis((ceiling_ms * (1.0 - 0.5 * jitter)) as u64)
}

/// Delay before reconnect attempt `attempt` (1-based): 250 ms doubling, capped at 10 s,
/// with jitter (`jitter` in 0..1) taking up to half off so clients do not stampede.
pub fn backoff(attempt: u32, jitter: f64) -> Duration {
    backoff_from(BACKOFF_BASE, attempt, jitter)
}

/// `backoff` from another first delay (same doubling, cap and jitter).
pub fn backoff_from(base: Duration, attempt: u32, jitter: f64) -> Duration {
    // Sixteen doublings pass the cap from any first delay worth having.
    let step = attempt.saturating_sub(1).min(16) as usize;
    let ceiling = reconnects(base).nth(step).unwrap_or(BACKOFF_CAP);
    jittered(ceiling, jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observe_url_swaps_the_scheme_and_resumes() {
        assert_eq!(
            observe_url("http://127.0.0.1:8000/", 42).unwrap(),
            "ws://127.0.0.1:8000/v1/observe?since=42"
        );
        assert_eq!(
            observe_url("https://rt.example", 0).unwrap(),
            "wss://rt.example/v1/observe?since=0"
        );
        assert!(matches!(
            observe_url("ftp://x", 0),
            Err(ClientError::Url(_))
        ));
        assert!(matches!(
            observe_url("localhost:8000", 0),
            Err(ClientError::Url(_))
        ));
        assert!(matches!(
            observe_url("http://", 0),
            Err(ClientError::Url(_))
        ));
    }

    #[test]
    fn decision_errors_say_why_and_that_nothing_changed() {
        let conflict = ClientError::Api {
            status: 409,
            code: "approval_already_decided".into(),
            message: "approval apr_1 is already approved".into(),
        };
        let text = decision_error("apr_1", true, &conflict);
        assert!(text.starts_with("approve apr_1: already decided (409 approval_already_decided"));
        assert!(text.ends_with("nothing changed"), "{text}");
        let gone = ClientError::Api {
            status: 410,
            code: "approval_expired".into(),
            message: "expired".into(),
        };
        assert!(decision_error("apr_2", false, &gone).starts_with("deny apr_2: expired (410"));
    }

    #[test]
    fn backoff_doubles_with_jitter_and_caps_at_ten_seconds() {
        assert_eq!(backoff(1, 0.0), Duration::from_millis(250));
        assert_eq!(backoff(2, 0.0), Duration::from_millis(500));
        assert_eq!(backoff(3, 1.0), Duration::from_millis(500));
        assert_eq!(backoff(7, 0.0), Duration::from_secs(10));
        assert_eq!(backoff(1000, 0.0), Duration::from_secs(10));
        assert!(backoff(1000, 0.7) < Duration::from_secs(10));
        assert!(backoff(1000, 1.0) >= Duration::from_secs(5));
        assert_eq!(
            backoff_from(Duration::from_millis(2), 3, 0.0),
            Duration::from_millis(8)
        );
    }
}
