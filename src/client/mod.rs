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

use crate::protocol::Frame;
use crate::protocol::rest::{ApprovalList, SessionList};
use std::time::Duration;
use thiserror::Error;

/// Everything the network side tells the UI loop.
#[derive(Debug)]
pub enum ClientMsg {
    /// Dialling; `attempt` is 0 for the first try after a success.
    Connecting {
        attempt: u32,
    },
    Connected,
    Frame(Box<Frame>),
    /// A frame that could not be decoded: counted and shown, never fatal.
    ParseError(String),
    /// The stream is down; the next try is `retry_in` from now.
    Disconnected {
        attempt: u32,
        retry_in: Duration,
        reason: String,
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

/// Delay before reconnect attempt `attempt` (1-based): 250 ms doubling, capped at 10 s,
/// with jitter (`jitter` in 0..1) taking up to half off so clients do not stampede.
pub fn backoff(attempt: u32, jitter: f64) -> Duration {
    backoff_from(BACKOFF_BASE, attempt, jitter)
}

/// `backoff` from another first delay (same doubling, cap and jitter).
pub fn backoff_from(base: Duration, attempt: u32, jitter: f64) -> Duration {
    const CAP_MS: f64 = 10_000.0;
    let exp = base.as_secs_f64() * 1000.0 * 2f64.powi(attempt.saturating_sub(1).min(16) as i32);
    let ceiling = exp.min(CAP_MS);
    let jitter = jitter.clamp(0.0, 1.0);
    Duration::from_millis((ceiling * (1.0 - 0.5 * jitter)) as u64)
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
