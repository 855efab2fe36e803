//! The observer stream: one WebSocket subscriber's `since=` replay then live events, gaps,
//! pings and filters. Its routes (`/v1/observe`, `/v1/events`) are `runtime::http::events`.
//!
//! A `stream.gap` frame is never stored in the log; its `seq` is the gap's own `to`, the
//! last seq it stands for, so a client that resumes from "the last seq seen" goes on past it.
//! Nor are `stream.hello` (first frame when the client sent `epoch=`) and `stream.reset`
//! (first frame when its `since`/`epoch` name a history this log does not continue).
//! Seqs, gaps and `since=` are the subscriber's tenant's own (see `runtime::log`); the
//! epoch is the log's, one per runtime.

use super::Runtime;
use super::log::Logged;
use axum::extract::ws::{Message, WebSocket};
use spyglass_protocol::events::{StreamGap, StreamHello, StreamReset};
use spyglass_protocol::glob::glob_match;
use spyglass_protocol::{Event, Frame, encode, now_rfc3339};
use std::sync::Arc;
use tokio::sync::{broadcast, watch};

/// Which events one subscriber sees: its tenant's (or, `all`, every tenant's), optionally
/// one session and some kinds.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    pub(crate) tenant: String,
    /// Every project's events (`x-codespar-project: *`), seq'd by stamping order.
    pub(crate) all: bool,
    pub(crate) session: Option<String>,
    pub(crate) kinds: Vec<String>,
}

impl Filter {
    fn shows(&self, logged: &Logged) -> bool {
        self.session
            .as_ref()
            .is_none_or(|s| logged.frame.session_id.as_deref() == Some(s.as_str()))
            && (self.kinds.is_empty()
                || self
                    .kinds
                    .iter()
                    .any(|k| glob_match(k, logged.frame.event.kind())))
    }
}

/// The largest WebSocket message the runtime reads from an observer.
pub const MAX_INCOMING_WS_BYTES: usize = 64 * 1024;

/// Resolves when the server is told to stop; a dropped handle never stops it.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn gap_text(from: u64, to: u64) -> String {
    encode(&Frame {
        seq: to,
        ts: now_rfc3339().into(),
        session_id: None,
        event: Event::StreamGap(StreamGap { from, to }),
    })
}

/// Why a resume at `since` from stream `epoch` cannot go on in this log, if it cannot:
/// another epoch, or a seq this log never reached (a runtime restarted without its store).
pub(crate) fn reset_reason(
    log_epoch: &str,
    newest: u64,
    since: Option<u64>,
    epoch: Option<&str>,
) -> Option<String> {
    let since = since?;
    match epoch.filter(|e| !e.is_empty()) {
        Some(theirs) if theirs != log_epoch => Some(format!(
            "stream {theirs} is not this runtime's ({log_epoch}): it restarted without that history"
        )),
        _ if since > newest => Some(format!(
            "since {since} is beyond the newest seq {newest}: the runtime restarted without that history"
        )),
        _ => None,
    }
}

/// The wire text of a `stream.reset` (seq 0: the whole retained history follows).
pub(crate) fn reset_text(epoch: &str, reason: String) -> String {
    encode(&Frame {
        seq: 0,
        ts: now_rfc3339().into(),
        session_id: None,
        event: Event::StreamReset(StreamReset {
            epoch: epoch.to_owned(),
            reason,
        }),
    })
}

fn hello_text(epoch: &str, seq: u64) -> String {
    encode(&Frame {
        seq,
        ts: now_rfc3339().into(),
        session_id: None,
        event: Event::StreamHello(StreamHello {
            epoch: epoch.to_owned(),
        }),
    })
}

struct Subscriber {
    socket: WebSocket,
    rt: Runtime,
    filter: Filter,
    /// Every seq up to this one has been sent or judged not for this subscriber.
    last: u64,
}

impl Subscriber {
    async fn send_text(&mut self, text: &str) -> Result<(), ()> {
        self.send(text.to_owned()).await
    }

    async fn send(&mut self, text: String) -> Result<(), ()> {
        self.socket
            .send(Message::Text(text.into()))
            .await
            .map_err(|_| ())
    }

    /// The seq this subscriber knows an event by: its tenant's, or on the all-projects
    /// stream the stamping order.
    fn seq_of(&self, logged: &Logged) -> u64 {
        if self.filter.all {
            logged.ord
        } else {
            logged.frame.seq
        }
    }

    /// Sends everything the log holds after `last`, announcing what it no longer holds
    /// (the all-projects stream sends what is retained, with no `stream.gap`: its order
    /// runs across tenants whose rings are evicted apart).
    async fn catch_up(&mut self) -> Result<(), ()> {
        if self.filter.all {
            loop {
                let events = self.rt.inner.log.all_after(self.last, 512);
                if events.is_empty() {
                    return Ok(());
                }
                for logged in events {
                    self.deliver(&logged).await?;
                }
            }
        }
        loop {
            let slice = self.rt.inner.log.since(&self.filter.tenant, self.last, 512);
            if let Some((from, to)) = slice.gap {
                self.send_text(&gap_text(from, to)).await?;
                self.last = to;
            }
            if slice.events.is_empty() {
                return Ok(());
            }
            for logged in slice.events {
                self.deliver(&logged).await?;
            }
        }
    }

    async fn deliver(&mut self, logged: &Arc<Logged>) -> Result<(), ()> {
        let seq = self.seq_of(logged);
        if (!self.filter.all && *logged.tenant != *self.filter.tenant) || seq <= self.last {
            return Ok(());
        }
        if self.filter.shows(logged) {
            let text = if self.filter.all {
                // Re-stamped with the order across projects: one seq space to resume in.
                encode(&Frame {
                    seq,
                    ..logged.frame.clone()
                })
            } else {
                logged.text().to_owned()
            };
            self.send(text).await?;
        }
        self.last = seq;
        Ok(())
    }
}

pub(crate) async fn stream(
    socket: WebSocket,
    rt: Runtime,
    filter: Filter,
    since: Option<u64>,
    epoch: Option<String>,
    mut stop: watch::Receiver<bool>,
) {
    // Read where "now" is before subscribing and catch up from the log after: nothing
    // appended in between is lost, and `deliver` skips what the live queue repeats.
    let now = if filter.all {
        rt.inner.log.newest_ord()
    } else {
        rt.inner.log.next_seq(&filter.tenant).saturating_sub(1)
    };
    let mut live = rt.inner.log.subscribe();
    let ping_every = rt.inner.config.ping_interval;
    let log_epoch = if filter.all {
        rt.inner.log.all_epoch().to_owned()
    } else {
        rt.inner.log.epoch().to_owned()
    };
    let reset = reset_reason(&log_epoch, now, since, epoch.as_deref());
    let mut sub = Subscriber {
        socket,
        rt,
        filter,
        last: if reset.is_some() {
            0
        } else {
            since.unwrap_or(now)
        },
    };
    let first = match reset {
        Some(reason) => Some(reset_text(&log_epoch, reason)),
        None => epoch.map(|_| hello_text(&log_epoch, sub.last)),
    };
    if let Some(first) = first
        && sub.send(first).await.is_err()
    {
        return;
    }
    if sub.catch_up().await.is_err() {
        return;
    }
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    loop {
        tokio::select! {
            () = stopped(&mut stop) => {
                let _ = sub.socket.send(Message::Close(None)).await;
                return;
            }
            received = live.recv() => {
                let result = match received {
                    // Seqs count per tenant: another tenant's event is no news of ours.
                    Ok(logged) if !sub.filter.all && *logged.tenant != *sub.filter.tenant => Ok(()),
                    Ok(logged) if sub.seq_of(&logged) > sub.last + 1 => sub.catch_up().await,
                    Ok(logged) => sub.deliver(&logged).await,
                    // Fell behind the live queue: the log still holds what was missed
                    // (or says it does not, with a gap); the queue never grows for us.
                    Err(broadcast::error::RecvError::Lagged(_)) => sub.catch_up().await,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                if result.is_err() {
                    return;
                }
            }
            _ = ping.tick() => {
                if sub.socket.send(Message::Ping(Vec::new().into())).await.is_err() {
                    return;
                }
            }
            incoming = sub.socket.recv() => match incoming {
                None | Some(Err(_) | Ok(Message::Close(_))) => return,
                Some(Ok(_)) => {}
            }
        }
    }
}
