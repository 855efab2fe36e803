//! The event log: stamps every event with the next `seq` and a `ts`, keeps the newest
//! `retained_events` in a ring, and broadcasts each to live subscribers. Stamping and
//! broadcasting happen under one lock so the broadcast order is the seq order. The log's
//! `epoch` names its stream: seqs compare only within one epoch.

use crate::protocol::{Event, Frame, decode, encode, now_rfc3339};
use crate::store::{Store, StoredEvent};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::broadcast;

/// A stamped event as the log keeps it: the frame, its wire text once someone has asked
/// for it, and the tenant whose stream shows it.
#[derive(Debug)]
pub struct Logged {
    pub frame: Frame,
    text: OnceLock<String>,
    pub tenant: String,
}

impl Logged {
    /// An event read back from a store, its stored text kept as its wire text; `None`
    /// for a text that no longer decodes (skipped: the rest of the history still loads).
    pub fn restore(text: &str, tenant: String) -> Option<Logged> {
        let frame = decode(text).ok()?;
        Some(Logged {
            frame,
            text: OnceLock::from(text.to_owned()),
            tenant,
        })
    }

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
    epoch: String,
    ring: Mutex<Ring>,
    capacity: usize,
    live: broadcast::Sender<Arc<Logged>>,
    /// The store's writer thread, fed in seq order under the ring's lock.
    writer: Option<std::sync::mpsc::Sender<Write>>,
}

/// What the store's writer thread is told.
enum Write {
    Event(Arc<Logged>),
    /// Answered once everything sent before it is committed.
    Flush(std::sync::mpsc::SyncSender<()>),
}

/// The most events one transaction takes; more wait for the next.
const MAX_BATCH: usize = 4096;

/// Commits events as they come, grouped: whatever queued while the last transaction ran
/// goes in the next one, so a burst of calls costs one commit, not one each.
fn write_loop(rx: std::sync::mpsc::Receiver<Write>, store: Arc<dyn Store>, retained: usize) {
    let mut batch = Vec::new();
    let mut flushes = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Write::Event(logged) => batch.push(StoredEvent {
                    seq: logged.frame.seq,
                    tenant: logged.tenant.clone(),
                    text: logged.text().to_owned(),
                }),
                Write::Flush(done) => flushes.push(done),
            }
            if batch.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if let Err(err) = store.append(&batch, retained) {
            tracing::error!(%err, events = batch.len(), "store write failed");
        }
        batch.clear();
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

impl EventLog {
    /// A log with a fresh epoch: a history that continues none before it.
    pub fn new(capacity: usize, subscriber_queue: usize) -> Self {
        Self::continuing(new_epoch(), 1, capacity, subscriber_queue)
    }

    /// A log that goes on with stream `epoch` from `next_seq` (a history reopened).
    pub fn continuing(
        epoch: String,
        next_seq: u64,
        capacity: usize,
        subscriber_queue: usize,
    ) -> Self {
        let (live, _) = broadcast::channel(subscriber_queue.max(1));
        Self {
            epoch,
            ring: Mutex::new(Ring {
                next_seq: next_seq.max(1),
                events: VecDeque::new(),
            }),
            capacity: capacity.max(1),
            live,
            writer: None,
        }
    }

    /// Puts events read back from a store into the ring (oldest first, at most the
    /// capacity, the newest kept).
    pub fn with_history(self, events: Vec<Logged>) -> Self {
        {
            let mut ring = self.ring();
            // `since` counts on contiguous seqs ending at the newest: keep only that run
            // (a stored text that no longer decodes breaks it, and the rest is a gap).
            let mut expected = ring.next_seq;
            let mut kept = std::collections::VecDeque::new();
            for logged in events.into_iter().rev() {
                if kept.len() >= self.capacity || logged.frame.seq + 1 != expected {
                    break;
                }
                expected = logged.frame.seq;
                kept.push_front(Arc::new(logged));
            }
            ring.events = kept;
        }
        self
    }

    /// Sends every event appended from now on to `store`, on a thread of its own.
    pub fn with_writer(mut self, store: Arc<dyn Store>, retained: usize) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("spyglass-store".into())
            .spawn(move || write_loop(rx, store, retained))?;
        self.writer = Some(tx);
        Ok(self)
    }

    /// Waits until every event appended so far is committed to the store (none: at once).
    pub fn flush(&self) {
        let Some(writer) = &self.writer else { return };
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        if writer.send(Write::Flush(done)).is_ok() {
            let _ = wait.recv();
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
        ring.events.push_back(logged.clone());
        if let Some(writer) = &self.writer {
            // A writer gone (its thread ended) has logged why; the log goes on in memory.
            let _ = writer.send(Write::Event(logged.clone()));
        }
        // No receivers is not an error for the log: nobody is watching yet.
        let _ = self.live.send(logged.clone());
        drop(ring);
        drop(evicted);
        logged
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

    /// The stream's id: a resume from another epoch is answered with `stream.reset`.
    pub fn epoch(&self) -> &str {
        &self.epoch
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

/// A new stream id: `ep_` and 16 hex digits, random, so two runtimes started in the same
/// instant still differ.
pub fn new_epoch() -> String {
    format!("ep_{:016x}", fastrand::u64(..))
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
        let read = log.since(0, 1).events[0].clone();
        assert_eq!(read.text(), encode(&logged.frame));
        assert!(read.text().contains("\"seq\":1,"), "{}", read.text());
        // A second reader gets the same text, not a second encoding.
        assert!(std::ptr::eq(read.text(), logged.text()));
    }

    #[test]
    fn a_fresh_log_has_its_own_epoch_and_a_continued_one_keeps_it() {
        let a = EventLog::new(4, 4);
        let b = EventLog::new(4, 4);
        assert_ne!(a.epoch(), b.epoch());
        assert!(a.epoch().starts_with("ep_") && a.epoch().len() == 19);
        let c = EventLog::continuing(a.epoch().to_owned(), 8, 4, 4);
        assert_eq!(c.epoch(), a.epoch());
        assert_eq!(c.append("default".into(), None, closed()).frame.seq, 8);
    }

    #[test]
    fn ring_drops_oldest_and_reports_gap() {
        let log = EventLog::new(3, 8);
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
}
