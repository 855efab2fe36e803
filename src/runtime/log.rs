//! The event log: stamps every event with its tenant's next `seq` and a `ts`, keeps the
//! newest `retained_events` across tenants in per-tenant rings, and broadcasts each to live
//! subscribers. Stamping and broadcasting happen under one lock so the broadcast order is
//! the seq order.
//!
//! Seqs count per tenant, so a tenant's `seq`, `next` and `stream.gap` say nothing of how
//! much other tenants log. When the log is full the event evicted is the oldest of the
//! appending tenant if it holds its fair share (capacity / tenants holding events) or
//! more, else the oldest of the tenant holding the most: one tenant's flood evicts its own
//! history, never a quieter tenant's.

use crate::protocol::{Event, Frame, encode, now_rfc3339};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::broadcast;

/// A stamped event as the log keeps it: the frame, its wire text once someone has asked
/// for it, and the tenant whose stream shows it.
#[derive(Debug)]
pub struct Logged {
    pub frame: Frame,
    text: OnceLock<String>,
    pub tenant: String,
    /// Stamping order across tenants (seqs are per tenant).
    ord: u64,
}

impl Logged {
    /// The frame's wire text, encoded by the first reader and shared by the rest. A call
    /// nobody watches never pays for it, and one that is watched pays on the subscriber's
    /// task, not on the request's: encoding was a tenth of a mocked execute.
    pub fn text(&self) -> &str {
        self.text.get_or_init(|| encode(&self.frame))
    }
}

/// One tenant's part of the log; its seqs are contiguous from the front.
struct TenantRing {
    next_seq: u64,
    events: VecDeque<Arc<Logged>>,
}

impl Default for TenantRing {
    fn default() -> Self {
        Self {
            next_seq: 1,
            events: VecDeque::new(),
        }
    }
}

struct Ring {
    /// Events stamped so far, every tenant's.
    emitted: u64,
    retained: usize,
    /// Tenants holding at least one event.
    holding: usize,
    tenants: HashMap<String, TenantRing>,
}

impl Ring {
    /// The tenant whose oldest event goes to make room for one of `appending`'s.
    fn victim(&self, appending: &str, capacity: usize) -> Option<String> {
        let own = self.tenants.get(appending).map_or(0, |t| t.events.len());
        let holders = self.holding + usize::from(own == 0);
        if own > 0 && own >= capacity / holders.max(1) {
            return Some(appending.to_owned());
        }
        // Only reached when a tenant under its share appends to a full log, so the scan
        // (over tenants holding events) is not on a lone tenant's path.
        self.tenants
            .iter()
            .max_by_key(|(_, t)| t.events.len())
            .filter(|(_, t)| !t.events.is_empty())
            .map(|(name, _)| name.clone())
    }
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
    /// Events stamped so far, every tenant's.
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
}

impl EventLog {
    pub fn new(capacity: usize, subscriber_queue: usize) -> Self {
        let (live, _) = broadcast::channel(subscriber_queue.max(1));
        Self {
            ring: Mutex::new(Ring {
                emitted: 0,
                retained: 0,
                holding: 0,
                tenants: HashMap::new(),
            }),
            capacity: capacity.max(1),
            live,
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
        let mut logged = Arc::new(Logged {
            frame: Frame {
                seq: 0,
                ts: String::new(),
                session_id,
                event,
            },
            text: OnceLock::new(),
            tenant,
            ord: 0,
        });
        let mut guard = self.ring();
        let ring = &mut *guard;
        // The oldest event is freed after the lock is released, not under it.
        let evicted = if ring.retained >= self.capacity {
            self.evict(ring, &logged.tenant)
        } else {
            None
        };
        ring.emitted += 1;
        let ord = ring.emitted;
        if !ring.tenants.contains_key(&logged.tenant) {
            ring.tenants
                .insert(logged.tenant.clone(), TenantRing::default());
        }
        let Some(own) = ring.tenants.get_mut(&logged.tenant) else {
            return logged;
        };
        // Always unshared here: the Arc was made just above and not yet handed out.
        if let Some(unshared) = Arc::get_mut(&mut logged) {
            unshared.frame.seq = own.next_seq;
            unshared.frame.ts = now_rfc3339();
            unshared.ord = ord;
        }
        own.next_seq += 1;
        if own.events.is_empty() {
            ring.holding += 1;
        }
        own.events.push_back(logged.clone());
        ring.retained += 1;
        // No receivers is not an error for the log: nobody is watching yet.
        let _ = self.live.send(logged.clone());
        drop(guard);
        drop(evicted);
        logged
    }

    fn evict(&self, ring: &mut Ring, appending: &str) -> Option<Arc<Logged>> {
        let victim = ring.victim(appending, self.capacity)?;
        let tenant = ring.tenants.get_mut(&victim)?;
        let evicted = tenant.events.pop_front();
        if evicted.is_some() {
            ring.retained -= 1;
            if tenant.events.is_empty() {
                ring.holding -= 1;
            }
        }
        evicted
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
            (ring.retained, ring.emitted)
        };
        LogStats {
            emitted,
            retained,
            capacity: self.capacity,
            subscribers: self.live.receiver_count(),
            longest_queue: self.live.len(),
        }
    }

    /// The seq `tenant`'s next event will get.
    pub fn next_seq(&self, tenant: &str) -> u64 {
        self.ring().tenants.get(tenant).map_or(1, |t| t.next_seq)
    }

    /// Up to `limit` retained events of every tenant, oldest first, whose seq (in their
    /// tenant) is over `since`.
    pub fn all_since(&self, since: u64, limit: usize) -> Vec<Arc<Logged>> {
        let ring = self.ring();
        let mut all: Vec<Arc<Logged>> = ring
            .tenants
            .values()
            .flat_map(|t| t.events.iter().filter(|e| e.frame.seq > since).cloned())
            .collect();
        drop(ring);
        all.sort_by_key(|e| e.ord);
        all.truncate(limit);
        all
    }

    /// Up to `limit` of `tenant`'s retained events with seq > `since`, and the gap when
    /// the log no longer holds its `since + 1`.
    pub fn since(&self, tenant: &str, since: u64, limit: usize) -> Slice {
        let ring = self.ring();
        let mut slice = Slice::default();
        let Some(ring) = ring.tenants.get(tenant) else {
            return slice;
        };
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
        let log = EventLog::new(4, 4);
        let logged = log.append("default".into(), Some("ses_1".into()), closed());
        let read = log.since("default", 0, 1).events[0].clone();
        assert_eq!(read.text(), encode(&logged.frame));
        assert!(read.text().contains("\"seq\":1,"), "{}", read.text());
        // A second reader gets the same text, not a second encoding.
        assert!(std::ptr::eq(read.text(), logged.text()));
    }

    #[test]
    fn ring_drops_oldest_and_reports_gap() {
        let log = EventLog::new(3, 8);
        for _ in 0..5 {
            log.append("default".into(), None, closed());
        }
        let slice = log.since("default", 0, 10);
        assert_eq!(slice.gap, Some((1, 2)));
        let seqs: Vec<u64> = slice.events.iter().map(|e| e.frame.seq).collect();
        assert_eq!(seqs, vec![3, 4, 5]);
        let slice = log.since("default", 3, 10);
        assert_eq!(slice.gap, None);
        assert_eq!(slice.events.len(), 2);
        assert!(log.since("default", 5, 10).events.is_empty());
        assert_eq!(log.since("default", 2, 1).events[0].frame.seq, 3);
    }

    #[test]
    fn a_flood_evicts_its_own_history_not_a_quieter_tenants() {
        let log = EventLog::new(10, 8);
        for _ in 0..3 {
            log.append("quiet".into(), None, closed());
        }
        for _ in 0..100 {
            log.append("loud".into(), None, closed());
        }
        let quiet = log.since("quiet", 0, 100);
        assert_eq!(quiet.gap, None);
        assert_eq!(quiet.events.len(), 3);
        let loud = log.since("loud", 0, 100);
        assert_eq!(loud.events.len(), 7);
        assert_eq!(loud.gap, Some((1, 93)));
        assert_eq!(log.stats().retained, 10);
        // Seqs count per tenant: quiet's next is 4 whatever loud logged.
        assert_eq!(log.append("quiet".into(), None, closed()).frame.seq, 4);
        // Quiet over its share now pays for its own events.
        for _ in 0..10 {
            log.append("quiet".into(), None, closed());
        }
        assert_eq!(log.since("quiet", 0, 100).events.len(), 5);
        assert_eq!(log.since("loud", 0, 100).events.len(), 5);
    }
}
