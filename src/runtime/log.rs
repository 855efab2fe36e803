//! The event log: stamps every event with the next `seq` and a `ts`, keeps the newest
//! `retained_events` in a ring within the runtime's byte budget, and broadcasts each to
//! live subscribers. Stamping and broadcasting happen under one lock (seq order).

use crate::protocol::{Event, Frame, encode, now_rfc3339};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::broadcast;

/// A stamped event as the log keeps it: the frame, its wire text once someone has asked
/// for it, and the tenant whose stream shows it.
#[derive(Debug)]
pub struct Logged {
    pub frame: Frame,
    text: OnceLock<String>,
    pub tenant: String,
    /// What the budget counts for it (`Event::approx_bytes`), fixed at append.
    pub bytes: usize,
}

/// The runtime's byte budget, shared by the event log and the session map: what each
/// holds (approximate, see `Event::approx_bytes`) and what was evicted to stay within it.
#[derive(Debug)]
pub struct Budget {
    pub max: usize,
    log: AtomicUsize,
    sessions: AtomicUsize,
    evicted_events: AtomicU64,
    evicted_event_bytes: AtomicU64,
    evicted_sessions: AtomicU64,
    evicted_session_bytes: AtomicU64,
}

/// A snapshot of the budget (`Runtime::budget_stats`, `/health`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct BudgetStats {
    pub max_bytes: usize,
    /// Log plus sessions: never above `max_bytes` for long (one event may overshoot).
    pub retained_bytes: usize,
    pub log_bytes: usize,
    pub session_bytes: usize,
    /// Events dropped from the log because of bytes, not count.
    pub evicted_events: u64,
    pub evicted_event_bytes: u64,
    /// Closed sessions dropped to make room.
    pub evicted_sessions: u64,
    pub evicted_session_bytes: u64,
}

impl Budget {
    pub fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            log: AtomicUsize::new(0),
            sessions: AtomicUsize::new(0),
            evicted_events: AtomicU64::new(0),
            evicted_event_bytes: AtomicU64::new(0),
            evicted_sessions: AtomicU64::new(0),
            evicted_session_bytes: AtomicU64::new(0),
        }
    }

    pub fn retained(&self) -> usize {
        self.log.load(Ordering::Relaxed) + self.sessions.load(Ordering::Relaxed)
    }

    pub fn add_session(&self, bytes: usize) {
        self.sessions.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A session left the map: evicted by the budget when `evicted`.
    pub fn remove_session(&self, bytes: usize, evicted: bool) {
        self.sessions.fetch_sub(bytes, Ordering::Relaxed);
        if evicted {
            self.evicted_sessions.fetch_add(1, Ordering::Relaxed);
            self.evicted_session_bytes
                .fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    pub fn stats(&self) -> BudgetStats {
        let log_bytes = self.log.load(Ordering::Relaxed);
        let session_bytes = self.sessions.load(Ordering::Relaxed);
        BudgetStats {
            max_bytes: self.max,
            retained_bytes: log_bytes + session_bytes,
            log_bytes,
            session_bytes,
            evicted_events: self.evicted_events.load(Ordering::Relaxed),
            evicted_event_bytes: self.evicted_event_bytes.load(Ordering::Relaxed),
            evicted_sessions: self.evicted_sessions.load(Ordering::Relaxed),
            evicted_session_bytes: self.evicted_session_bytes.load(Ordering::Relaxed),
        }
    }
}

impl Logged {
    /// The frame's wire text, encoded by the first reader and shared by the rest. A call
    /// nobody watches never pays for it, and one that is watched pays on the subscriber's
    /// task, not on the request's: encoding was a tenth of a mocked execute.
    pub fn text(&self) -> &str {
        self.text.get_or_init(|| encode(&self.frame))
    }
}

struct Ring {
    next_seq: u64,
    events: VecDeque<Arc<Logged>>,
    /// Sum of the retained events' `bytes`.
    bytes: usize,
}

/// What a read of the log returned: the events, and the range it no longer holds.
#[derive(Debug, Default)]
pub struct Slice {
    /// `(from, to)` inclusive: seqs after `since` that were dropped from the ring.
    pub gap: Option<(u64, u64)>,
    pub events: Vec<Arc<Logged>>,
}

/// A snapshot of the log's memory bounds (`Runtime::stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogStats {
    /// Events stamped so far (the last seq).
    pub emitted: u64,
    pub retained: usize,
    pub capacity: usize,
    pub subscribers: usize,
    pub longest_queue: usize,
}

pub struct EventLog {
    ring: Mutex<Ring>,
    capacity: usize,
    live: broadcast::Sender<Arc<Logged>>,
    budget: Arc<Budget>,
}

impl EventLog {
    pub fn new(capacity: usize, subscriber_queue: usize, budget: Arc<Budget>) -> Self {
        let (live, _) = broadcast::channel(subscriber_queue.max(1));
        Self {
            ring: Mutex::new(Ring {
                next_seq: 1,
                events: VecDeque::new(),
                bytes: 0,
            }),
            capacity: capacity.max(1),
            live,
            budget,
        }
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // A poisoned lock only means another thread panicked mid-push; the ring is still
        // a valid deque, so keep serving rather than take the runtime down.
        self.ring
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Stamps, retains and broadcasts one event. Under the lock only the stamp is written:
    /// nothing is serialised there (see `Logged::text`).
    ///
    /// The frame moves into the log and comes back shared, never copied: under many
    /// concurrent calls a deep copy here (input, output, ids) was most of the time the
    /// lock was held.
    pub fn append(&self, tenant: String, session_id: Option<String>, event: Event) -> Arc<Logged> {
        // Allocated before the lock; only its stamp is written under it.
        let bytes = event.approx_bytes();
        let mut logged = Arc::new(Logged {
            frame: Frame {
                seq: 0,
                ts: String::new(),
                session_id,
                event,
            },
            text: OnceLock::new(),
            tenant,
            bytes,
        });
        let mut ring = self.ring();
        // Always unshared here: the Arc was made just above and not yet handed out.
        if let Some(unshared) = Arc::get_mut(&mut logged) {
            unshared.frame.seq = ring.next_seq;
            unshared.frame.ts = now_rfc3339();
        }
        ring.next_seq += 1;
        // The oldest event is freed after the lock is released, not under it.
        let evicted = if ring.events.len() >= self.capacity {
            ring.events.pop_front()
        } else {
            None
        };
        if let Some(old) = &evicted {
            ring.bytes -= old.bytes;
        }
        ring.bytes += bytes;
        ring.events.push_back(logged.clone());
        // Past the byte budget (sessions count against it too) the oldest events go, all
        // but the one just appended. Rare, so its Vec costs the common path nothing.
        let mut over_budget = Vec::new();
        let sessions = self.budget.sessions.load(Ordering::Relaxed);
        while ring.bytes + sessions > self.budget.max && ring.events.len() > 1 {
            let Some(old) = ring.events.pop_front() else {
                break;
            };
            ring.bytes -= old.bytes;
            over_budget.push(old);
        }
        self.budget.log.store(ring.bytes, Ordering::Relaxed);
        // No receivers is not an error for the log: nobody is watching yet.
        let _ = self.live.send(logged.clone());
        drop(ring);
        drop(evicted);
        if !over_budget.is_empty() {
            self.note_evicted(&over_budget);
        }
        logged
    }

    /// Counts events dropped for bytes, and says so in the log at the first and then at
    /// every power of two, so a flood is visible without a line per event.
    fn note_evicted(&self, evicted: &[Arc<Logged>]) {
        let bytes: usize = evicted.iter().map(|e| e.bytes).sum();
        let before = self
            .budget
            .evicted_events
            .fetch_add(evicted.len() as u64, Ordering::Relaxed);
        self.budget
            .evicted_event_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        let after = before + evicted.len() as u64;
        if before == 0 || (after.ilog2() > before.ilog2()) {
            tracing::warn!(
                evicted_events = after,
                max_bytes = self.budget.max,
                "event log over its byte budget: oldest events evicted"
            );
        }
    }

    /// A receiver of every event appended from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Logged>> {
        self.live.subscribe()
    }

    /// How much the log holds right now: retained events, live subscribers and the
    /// longest live queue (what the slowest subscriber has not taken yet).
    pub fn stats(&self) -> LogStats {
        let (retained, emitted) = {
            let ring = self.ring();
            (ring.events.len(), ring.next_seq.saturating_sub(1))
        };
        LogStats {
            emitted,
            retained,
            capacity: self.capacity,
            subscribers: self.live.receiver_count(),
            longest_queue: self.live.len(),
        }
    }

    /// The seq the next event will get.
    pub fn next_seq(&self) -> u64 {
        self.ring().next_seq
    }

    /// Up to `limit` retained events with seq > `since`, and the gap when the ring no
    /// longer holds `since + 1`.
    pub fn since(&self, since: u64, limit: usize) -> Slice {
        let ring = self.ring();
        let mut slice = Slice::default();
        let newest = ring.next_seq.saturating_sub(1);
        if since >= newest {
            return slice;
        }
        let oldest = ring.events.front().map_or(ring.next_seq, |e| e.frame.seq);
        if since + 1 < oldest {
            slice.gap = Some((since + 1, oldest - 1));
        }
        // Seqs in the ring are contiguous, so the start index is arithmetic.
        let skip =
            usize::try_from(since.saturating_add(1).saturating_sub(oldest)).unwrap_or(usize::MAX);
        slice.events = ring.events.iter().skip(skip).take(limit).cloned().collect();
        slice
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::events::SessionClosed;

    fn closed() -> Event {
        Event::SessionClosed(SessionClosed::default())
    }

    #[test]
    fn text_is_the_encoded_stamped_frame_and_is_made_once() {
        let log = EventLog::new(4, 4, Arc::new(Budget::new(usize::MAX)));
        let logged = log.append("default".into(), Some("ses_1".into()), closed());
        let read = log.since(0, 1).events[0].clone();
        assert_eq!(read.text(), encode(&logged.frame));
        assert!(read.text().contains("\"seq\":1,"), "{}", read.text());
        // A second reader gets the same text, not a second encoding.
        assert!(std::ptr::eq(read.text(), logged.text()));
    }

    #[test]
    fn ring_drops_oldest_and_reports_gap() {
        let log = EventLog::new(3, 8, Arc::new(Budget::new(usize::MAX)));
        for _ in 0..5 {
            log.append("default".into(), None, closed());
        }
        let slice = log.since(0, 10);
        assert_eq!(slice.gap, Some((1, 2)));
        let seqs: Vec<u64> = slice.events.iter().map(|e| e.frame.seq).collect();
        assert_eq!(seqs, vec![3, 4, 5]);
        let slice = log.since(3, 10);
        assert_eq!(slice.gap, None);
        assert_eq!(slice.events.len(), 2);
        assert!(log.since(5, 10).events.is_empty());
        assert_eq!(log.since(2, 1).events[0].frame.seq, 3);
    }

    fn big(bytes: usize) -> Event {
        Event::Unknown {
            kind: "x.big".into(),
            raw: crate::protocol::RawJson::from_value(&"a".repeat(bytes)),
        }
    }

    #[test]
    fn bytes_past_the_budget_evict_the_oldest_events_and_are_counted() {
        let budget = Arc::new(Budget::new(10_000));
        let log = EventLog::new(1000, 8, budget.clone());
        for _ in 0..10 {
            log.append("default".into(), None, big(3_000));
        }
        let stats = budget.stats();
        assert!(stats.retained_bytes <= 10_000, "{stats:?}");
        assert_eq!(log.stats().retained, 3, "{stats:?}");
        assert_eq!(stats.evicted_events, 7);
        assert!(stats.evicted_event_bytes >= 7 * 3_000);
        assert_eq!(log.since(0, 10).gap, Some((1, 7)));
        // Sessions count against the same budget: the log yields to them.
        budget.add_session(8_000);
        log.append("default".into(), None, big(10));
        assert_eq!(log.stats().retained, 1);
        // One event larger than the whole budget is still kept: the newest always is.
        budget.remove_session(8_000, false);
        log.append("default".into(), None, big(50_000));
        assert_eq!(log.stats().retained, 1);
    }
}
