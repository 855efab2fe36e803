//! `spyglass tail` and `spyglass record`: the observer stream as lines, for pipes, CI logs
//! and files. Readable lines or raw JSON lines; a closed pipe or Ctrl-C ends it cleanly.

use super::{ClientMsg, Endpoint, spawn_observer};
use spyglass_protocol::events::{Counter, Event, Outcome};
use spyglass_protocol::mask::mask;
use spyglass_protocol::sanitize::{sanitize, shown};
use spyglass_protocol::{Frame, encode};
use std::io::{ErrorKind, Write};
use tokio::sync::mpsc;

/// How a tail run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailEnd {
    /// The reader closed the pipe (e.g. `| head`).
    PipeClosed,
    /// Ctrl-C, or the stop future resolved.
    Stopped,
    /// `--count` frames were written.
    Count,
}

/// Line format of the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Readable,
    JsonLines,
}

fn counter_text(counter: Option<&Counter>) -> String {
    let Some(counter) = counter else {
        return String::new();
    };
    let consumed = counter.consumed;
    let answered = match (counter.rule, counter.fallback) {
        (Some(rule), _) => format!(" rule {rule}"),
        (None, true) => " fallback".to_owned(),
        (None, false) => String::new(),
    };
    match counter.total {
        Some(total) => format!(" [{consumed}/{total}{answered}]"),
        None => format!(" [{consumed}{answered}]"),
    }
}

fn outcome_text(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Result(value) => {
            let text = value.get();
            if text.len() > 80 {
                format!("ok {}…", &text[..text.floor_char_boundary(79)])
            } else {
                format!("ok {text}")
            }
        }
        Outcome::Envelope(envelope) => envelope.code().to_owned(),
    }
}

/// One readable line: seq, time, kind, session, and what happened.
pub fn readable(frame: &Frame) -> String {
    let time = frame.ts.get(11..23).unwrap_or(&frame.ts);
    if let Event::StreamReset(e) = &frame.event {
        // A marker line, not an event line: seqs before it belong to another stream.
        let line = format!(
            "──── runtime restarted at {time}: stream {} starts over ({}) ────",
            e.epoch, e.reason
        );
        return shown(&line).into_owned();
    }
    let session = frame.session_id.as_deref().unwrap_or("-");
    let what = what_happened(&frame.event);
    let line = format!(
        "#{:<6} {time} {:<20} {session:<14} {what}",
        frame.seq,
        frame.event.kind()
    );
    shown(&line).into_owned()
}

/// What an event says, in a few words (the end of a `readable` line; the inspector's
/// Events tab shows it too). Not yet masked or sanitised.
pub fn what_happened(event: &Event) -> String {
    match event {
        Event::SessionCreated(e) => {
            let mocks: Vec<String> = e
                .mocks
                .iter()
                .map(|m| match m.mode {
                    spyglass_protocol::events::MockMode::Static => m.tool.clone(),
                    spyglass_protocol::events::MockMode::Stateful => {
                        format!("{}×{}", m.tool, m.entries)
                    }
                    spyglass_protocol::events::MockMode::Rules => {
                        format!("{} rules×{}", m.tool, m.entries)
                    }
                })
                .collect();
            format!("user={} mocks=[{}]", e.user_id, mocks.join(", "))
        }
        Event::SessionClosed(_) => "closed".to_owned(),
        Event::ToolCalled(e) => format!(
            "{} -> {} ({}){}",
            e.tool,
            outcome_text(&e.outcome),
            crate::units::fmt_ms(e.duration),
            counter_text(e.counter.as_ref())
        ),
        Event::ApprovalRequested(e) => format!(
            "{} {} waits for approval (rule {}, until {})",
            e.approval_id, e.tool, e.rule_id, e.expires_at
        ),
        // Only the decision is lowercased: ids are case-sensitive.
        Event::ApprovalResolved(e) => format!(
            "{} {}",
            e.approval_id,
            format!("{:?}", e.decision).to_lowercase()
        ),
        Event::ApprovalReplayed(e) => format!(
            "{} replayed {} -> {}{}",
            e.approval_id,
            e.tool,
            outcome_text(&e.outcome),
            counter_text(e.counter.as_ref())
        ),
        Event::EvalRunStarted(e) => format!(
            "{} suites=[{}] cases={} repeat={}",
            e.run_id,
            e.suites.join(", "),
            e.cases,
            e.repeat
        ),
        Event::EvalRunCompleted(e) => format!(
            "{} {} passed, {} failed, {} errored, {} skipped",
            e.run_id, e.passed, e.failed, e.errored, e.skipped
        ),
        Event::StreamGap(e) => format!("events {}..={} are no longer held", e.from, e.to),
        Event::StreamHello(e) => format!("stream {}", e.epoch),
        Event::StreamReset(e) => format!("stream {} starts over ({})", e.epoch, e.reason),
        Event::AgentStepCompleted(e) => {
            let tools: Vec<&str> = e.step.tool_calls.iter().map(|c| c.name.as_str()).collect();
            format!(
                "{} step {} {} tools=[{}]",
                e.agent_name,
                e.iteration,
                e.step.finish_reason,
                tools.join(", ")
            )
        }
        Event::AgentCompleted(e) => format!(
            "{} done in {:.0} ms: {}",
            e.agent_name,
            e.duration,
            e.output.as_text()
        ),
        Event::AgentFailed(e) => format!(
            "{} failed: {}",
            e.agent_name,
            e.error
                .as_ref()
                .map(spyglass_protocol::json::RawJson::as_text)
                .unwrap_or_default()
        ),
        Event::AgentEvalCompleted(e) => format!(
            "{} / {} {}{}",
            e.suite,
            e.case,
            e.status.as_str(),
            e.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        Event::Unknown { raw, .. } => raw.get().to_owned(),
    }
}

/// The frame as written to a JSON-lines file (what `replay` reads back).
pub fn json_line(frame: &Frame) -> String {
    mask(&encode(frame)).into_owned()
}

/// Consecutive failed dials after which `tail` gives up on a runtime it never reached: a
/// wrong URL or a runtime not started says so within seconds (about 4-8 s of backoff).
pub const GIVE_UP_NEVER_CONNECTED: u32 = 5;
/// The same once it had been connected: a runtime restarting gets about two minutes.
pub const GIVE_UP_AFTER_CONNECTED: u32 = 16;

/// Why a tail stopped short.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    #[error(transparent)]
    Client(#[from] super::ClientError),
    /// The output could not be opened once the stream was up.
    #[error("{0}")]
    Open(std::io::Error),
}

/// Streams frames from `url` into the writer `open` makes until the pipe closes (a write
/// fails or `hangup` resolves), `stop` resolves, or `count` frames were written. `open`
/// runs once the stream is connected, so an unreachable runtime leaves no file behind.
/// Connection news goes to `status` (stderr), never the output. A 401/403 ends it with
/// `ClientError::Rejected`; a runtime unreachable for `GIVE_UP_*` dials in a row with
/// `ClientError::Unreachable`.
pub async fn tail<W: Write, S: Write>(
    endpoint: &Endpoint,
    format: Format,
    count: Option<u64>,
    open: impl FnOnce() -> std::io::Result<W>,
    status: S,
    stop: impl std::future::Future<Output = ()>,
    hangup: impl std::future::Future<Output = ()>,
) -> Result<TailEnd, TailError> {
    let lines = Lines {
        format,
        count,
        since: 0,
    };
    follow(endpoint, lines, open, status, stop, hangup).await
}

/// What `follow` writes: the line format, how many frames at most, and from where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lines {
    pub format: Format,
    /// Stop after this many frames; None: until stopped.
    pub count: Option<u64>,
    /// Only frames after this seq (0: the whole retained history).
    pub since: u64,
}

/// `tail` from `lines.since`: the stream resumes after that seq, as a reconnect would.
pub async fn follow<W: Write, S: Write>(
    endpoint: &Endpoint,
    lines: Lines,
    open: impl FnOnce() -> std::io::Result<W>,
    mut status: S,
    stop: impl std::future::Future<Output = ()>,
    hangup: impl std::future::Future<Output = ()>,
) -> Result<TailEnd, TailError> {
    let Lines {
        format,
        count,
        since,
    } = lines;
    let rest = endpoint.rest()?;
    let (tx, mut rx) = mpsc::channel(1024);
    let config = super::ObserverConfig {
        since,
        ..endpoint.observer()
    };
    let observer = spawn_observer(config, rest, tx);
    tokio::pin!(stop);
    tokio::pin!(hangup);
    let mut open = Some(open);
    let mut out: Option<W> = None;
    let mut connected_once = false;
    let mut written = 0u64;
    let end = 'stream: loop {
        let msg = tokio::select! {
            msg = rx.recv() => msg,
            () = &mut stop => break TailEnd::Stopped,
            () = &mut hangup => break TailEnd::PipeClosed,
        };
        let Some(msg) = msg else {
            break TailEnd::Stopped;
        };
        let frames = match msg {
            ClientMsg::Frames(frames) => frames,
            ClientMsg::Connected => {
                connected_once = true;
                if let Some(open) = open.take() {
                    match open() {
                        Ok(w) => out = Some(w),
                        Err(e) => {
                            observer.abort();
                            return Err(TailError::Open(e));
                        }
                    }
                }
                let _ = match &endpoint.project {
                    Some(project) => writeln!(
                        status,
                        "spyglass: connected to {} (project {})",
                        endpoint.url,
                        sanitize(project)
                    ),
                    None => writeln!(status, "spyglass: connected to {}", endpoint.url),
                };
                continue;
            }
            ClientMsg::Rejected { status: code } => {
                observer.abort();
                return Err(super::ClientError::Rejected { status: code }.into());
            }
            ClientMsg::Disconnected {
                attempt,
                retry_in,
                reason,
            } => {
                let limit = if connected_once {
                    GIVE_UP_AFTER_CONNECTED
                } else {
                    GIVE_UP_NEVER_CONNECTED
                };
                if attempt >= limit {
                    observer.abort();
                    if let Some(out) = out.as_mut() {
                        let _ = out.flush();
                    }
                    let reason = sanitize(&reason).into_owned();
                    return Err(super::ClientError::Unreachable {
                        attempts: attempt,
                        reason,
                    }
                    .into());
                }
                let _ = writeln!(
                    status,
                    "spyglass: {}; retrying in {:.1} s (attempt {attempt} of {limit})",
                    sanitize(&reason),
                    retry_in.as_secs_f64()
                );
                continue;
            }
            ClientMsg::ParseError(error) => {
                let _ = writeln!(
                    status,
                    "spyglass: unreadable frame skipped: {}",
                    sanitize(&error)
                );
                continue;
            }
            ClientMsg::RestError(error) => {
                let _ = writeln!(status, "spyglass: {}", sanitize(&error));
                continue;
            }
            ClientMsg::Connecting { .. } | ClientMsg::Hydrated { .. } => continue,
        };
        // Frames only come on a connected stream, so the output is open.
        let Some(out) = out.as_mut() else { continue };
        for frame in &frames {
            let line = match format {
                Format::Readable => readable(frame),
                Format::JsonLines => json_line(frame),
            };
            if let Err(e) = writeln!(out, "{line}") {
                break 'stream write_failed(&e, &mut status);
            }
            written += 1;
            if count.is_some_and(|n| written >= n) {
                break 'stream TailEnd::Count;
            }
        }
        // Flush only when the reader is waiting on the channel, so a pipe sees each line at
        // once without a syscall per frame under load.
        if rx.is_empty()
            && let Err(e) = out.flush()
        {
            break 'stream write_failed(&e, &mut status);
        }
    };
    observer.abort();
    if let Some(mut out) = out {
        let _ = out.flush();
    }
    Ok(end)
}

/// Resolves when stdout is a pipe whose reader has gone (`| head -2` done), so a tail
/// waiting for the next event ends at once instead of at its next write. Never resolves
/// for a terminal or a file, whose writes tell soon enough.
pub async fn stdout_hangup() {
    use std::os::fd::AsFd;
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;
    // A duplicate the watcher owns, so the descriptor it registers outlives it: the I/O
    // safety `with_interest` was deprecated over (its replacement is `unsafe`).
    let Ok(owned) = std::io::stdout().as_fd().try_clone_to_owned() else {
        return std::future::pending().await;
    };
    // epoll refuses regular files; then only a failed write ends the stream.
    #[expect(
        deprecated,
        reason = "the fd is owned by the AsyncFd, so it is I/O safe"
    )]
    let Ok(fd) = AsyncFd::with_interest(owned, Interest::ERROR) else {
        return std::future::pending().await;
    };
    loop {
        match fd.ready(Interest::ERROR).await {
            Ok(guard) if guard.ready().is_error() => return,
            Ok(mut guard) => guard.clear_ready(),
            Err(_) => return std::future::pending().await,
        }
    }
}

/// How a failed write ends the stream: a closed pipe is the reader leaving, quietly;
/// anything else is said on stderr.
fn write_failed<S: Write>(e: &std::io::Error, status: &mut S) -> TailEnd {
    if e.kind() != ErrorKind::BrokenPipe {
        let _ = writeln!(status, "spyglass: cannot write: {e}");
    }
    TailEnd::PipeClosed
}

#[cfg(test)]
mod tests {
    use super::*;
    use spyglass_protocol::RawJson;
    use spyglass_protocol::envelope::Envelope;
    use spyglass_protocol::events::{CallSource, ToolCalled};

    fn called(outcome: Outcome, counter: Option<Counter>) -> Frame {
        Frame {
            seq: 42,
            ts: "2026-11-22T21:43:31.123Z".into(),
            session_id: Some("ses_1".into()),
            event: Event::ToolCalled(ToolCalled {
                call_id: "call_1".into(),
                tool: "asaas/create_payment".into(),
                input: RawJson::from(serde_json::json!({"key": "csk_test_abcdef123456"})),
                outcome,
                started_at: "".into(),
                duration: 1.25,
                counter,
                source: CallSource::Execute,
                iteration: None,
            }),
        }
    }

    #[test]
    fn a_readable_line_says_what_happened() {
        let ok = called(
            Outcome::Result(RawJson::from(serde_json::json!({"id": "nfe_1"}))),
            Some(Counter {
                consumed: 1,
                total: Some(2),
                ..Counter::default()
            }),
        );
        let line = readable(&ok);
        assert!(
            line.starts_with("#42     21:43:31.123 tool.called"),
            "{line}"
        );
        assert!(line.contains("ses_1"));
        assert!(
            line.ends_with(r#"asaas/create_payment -> ok {"id":"nfe_1"} (1.2ms) [1/2]"#),
            "{line}"
        );

        let denied = called(
            Outcome::Envelope(Box::new(Envelope::ToolNotMocked {
                tool_name: "asaas/create_payment".into(),
                message: "m".into(),
            })),
            None,
        );
        assert!(readable(&denied).ends_with("asaas/create_payment -> tool_not_mocked (1.2ms)"));
    }

    #[test]
    fn json_lines_are_frames_with_secrets_masked() {
        let frame = called(Outcome::Result(RawJson::null()), None);
        let line = json_line(&frame);
        assert!(!line.contains("csk_test_abcdef123456"), "{line}");
        let back = spyglass_protocol::decode(&line).unwrap();
        assert_eq!(back.seq, 42);
        assert_eq!(back.event.kind(), "tool.called");
    }

    #[test]
    fn a_reset_is_a_marker_line_and_its_json_line_decodes_back() {
        let reset = Frame {
            seq: 0,
            ts: "2026-11-22T21:43:31.123Z".into(),
            session_id: None,
            event: Event::StreamReset(spyglass_protocol::events::StreamReset {
                epoch: "ep_b".into(),
                reason: "since 21 is beyond the newest seq 0".into(),
            }),
        };
        assert_eq!(
            readable(&reset),
            "──── runtime restarted at 21:43:31.123: stream ep_b starts over \
             (since 21 is beyond the newest seq 0) ────"
        );
        let back = spyglass_protocol::decode(&json_line(&reset)).unwrap();
        assert_eq!(
            back, reset,
            "record keeps it so replay clears at the same point"
        );
    }

    #[test]
    fn a_long_result_is_cut_on_a_char_boundary() {
        let long = "é".repeat(100);
        let frame = called(
            Outcome::Result(RawJson::from(serde_json::json!(long))),
            None,
        );
        let line = readable(&frame);
        assert!(line.contains("…"));
    }
}
