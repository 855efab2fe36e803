//! `spyglass replay`: a recorded JSON-lines file played into the same channel the live
//! observer feeds, paced by the frames' own timestamps (scaled by `speed`). Offline: a
//! line that does not decode is reported as a parse error and playback goes on.

use super::ClientMsg;
use spyglass_protocol::decode;
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Longest pause between two frames, whatever the recording says: a recording left
/// running overnight should not make the viewer wait overnight.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Reads the whole file first so a missing or unreadable file is an error before the
/// inspector opens, not a blank screen.
pub fn load(path: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

fn millis(ts: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// The pause before a frame stamped `ts`, after one stamped `prev`, at `speed`.
pub fn pause(prev: Option<&str>, ts: &str, speed: f64) -> Duration {
    let (Some(prev), Some(now)) = (prev.and_then(millis), millis(ts)) else {
        return Duration::ZERO;
    };
    if !(speed.is_finite() && speed > 0.0) || now <= prev {
        return Duration::ZERO;
    }
    Duration::from_secs_f64((now - prev) as f64 / 1000.0 / speed).min(MAX_PAUSE)
}

/// Plays `text` (JSON lines) into `tx`. `speed` 0 or less plays as fast as possible.
pub fn spawn_replay(text: String, speed: f64, tx: mpsc::Sender<ClientMsg>) -> JoinHandle<()> {
    tokio::spawn(async move {
        if tx.send(ClientMsg::Connected).await.is_err() {
            return;
        }
        let mut prev: Option<String> = None;
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let msg = match decode(line) {
                Ok(frame) => {
                    let wait = if speed > 0.0 {
                        pause(prev.as_deref(), &frame.ts, speed)
                    } else {
                        Duration::ZERO
                    };
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    prev = Some(frame.ts.to_string());
                    ClientMsg::Frames(vec![frame])
                }
                Err(e) => ClientMsg::ParseError(format!("line {}: {e}", number + 1)),
            };
            if tx.send(msg).await.is_err() {
                return;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_follow_the_recording_scaled_and_capped() {
        let a = "2026-11-22T21:43:31.000Z";
        let b = "2026-11-22T21:43:31.500Z";
        assert_eq!(pause(Some(a), b, 1.0), Duration::from_millis(500));
        assert_eq!(pause(Some(a), b, 2.0), Duration::from_millis(250));
        assert_eq!(pause(None, b, 1.0), Duration::ZERO);
        assert_eq!(pause(Some(b), a, 1.0), Duration::ZERO, "never backwards");
        assert_eq!(pause(Some(a), "garbage", 1.0), Duration::ZERO);
        assert_eq!(pause(Some(a), b, 0.0), Duration::ZERO);
        let later = "2026-11-23T08:00:00.000Z";
        assert_eq!(pause(Some(a), later, 1.0), MAX_PAUSE);
    }

    #[tokio::test]
    async fn bad_lines_are_reported_and_playback_goes_on() {
        let text = [
            r#"{"kind":"session.created","seq":1,"ts":"2026-11-22T21:43:31.000Z","sessionId":"s","userId":"u","servers":[],"mocks":[]}"#,
            "not json at all",
            "",
            r#"{"kind":"session.closed","seq":2,"ts":"2026-11-22T21:43:31.001Z","sessionId":"s"}"#,
        ]
        .join("\n");
        let (tx, mut rx) = mpsc::channel(16);
        spawn_replay(text, 0.0, tx).await.unwrap();
        let mut got = Vec::new();
        while let Ok(msg) = rx.try_recv() {
            got.push(match msg {
                ClientMsg::Connected => "connected".to_owned(),
                ClientMsg::Frames(f) => f[0].event.kind().to_owned(),
                ClientMsg::ParseError(e) => format!("error {e}"),
                other => format!("{other:?}"),
            });
        }
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0], "connected");
        assert_eq!(got[1], "session.created");
        assert!(got[2].starts_with("error line 2:"), "{got:?}");
        assert_eq!(got[3], "session.closed");
    }
}
