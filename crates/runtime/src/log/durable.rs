//! What a journaled log shows: only events its journal has written. They are broadcast
//! once written, and a write that fails takes back every event not written yet.
//!
//! An answer waits for the journal's write (`Runtime::committed`); an event is stamped
//! before it. Were it shown at once, a call answered 503 `store_unavailable` would still
//! be on the stream. So with a journal the log's readers (`since`, `all_since`,
//! `all_after`, `next_seq`, `newest_ord`) stop at the newest event written (`durable`),
//! the broadcast happens as a group is written, in file order, and a failed write takes
//! the group's events and every newer one out of the rings, each tenant's next seq back
//! to its first one taken: seqs stay contiguous, and the next event takes the seq the
//! refused one had. The calls those events belong to learn it from `EventLog::kept`;
//! the other events taken are stamped again at once, for the next write.

use super::{EventLog, Logged, Ordering};
use crate::store::journal::{Journal, Record};
use foldhash::{HashMap, HashMapExt as _};
use spyglass_protocol::Event;
use spyglass_protocol::events::CallSource;
use std::sync::Arc;

impl EventLog {
    /// The newest `ord` a reader may see: with a journal, the newest written.
    pub(super) fn readable(&self) -> u64 {
        if self.journal.is_some() {
            self.durable.load(Ordering::Acquire)
        } else {
            u64::MAX
        }
    }

    /// Writes what the journal holds (`Journal::write_out_with`), which an answer waits
    /// for, telling the store's health how it went; `None` without a journal. What it
    /// wrote is broadcast; when it fails, every event not written is taken back.
    pub(crate) fn write_journal(&self) -> Option<Result<(), String>> {
        let journal = self.journal.as_ref()?;
        let result = journal.write_out_with(&|group| self.publish(group), &|refused| {
            self.take_back(journal, refused);
        });
        if let Some(writer) = &self.writer {
            match &result {
                Ok(()) => writer.health.recovered(),
                Err(reason) => writer.health.failed(reason.clone()),
            }
        }
        Some(result)
    }

    /// How many times a failed write took events back: a call that read this before its
    /// event was stamped asks `kept` only when it moved.
    pub(crate) fn rollbacks(&self) -> u64 {
        self.rollbacks.load(Ordering::Acquire)
    }

    /// Whether `logged` is written and still the event of its seq: false once a failed
    /// write took it back (an event evicted since counts as kept: only what was written
    /// leaves the ring's front).
    pub(crate) fn kept(&self, logged: &Arc<Logged>) -> bool {
        let readable = self.readable();
        let ring = self.ring();
        let Some(own) = ring.tenants.get(&*logged.tenant) else {
            return false;
        };
        let seq = logged.frame.seq;
        let Some(oldest) = own.sizes.front().map(|k| k.seq) else {
            return seq < own.next_seq && logged.ord <= readable;
        };
        if seq < oldest {
            return logged.ord <= readable;
        }
        usize::try_from(seq - oldest)
            .ok()
            .and_then(|at| own.events.get(at))
            .is_some_and(|held| Arc::ptr_eq(held, logged) && held.ord <= readable)
    }

    /// A group is written: its events are now readable and go to live subscribers, in
    /// the order they were stamped.
    fn publish(&self, group: &[Record]) {
        for record in group {
            if let Record::Event(logged) = record {
                self.durable.fetch_max(logged.ord, Ordering::Release);
                // No receivers is not an error for the log: nobody is watching yet.
                let _ = self.live.send(Arc::clone(logged));
            }
        }
    }

    /// A write failed: `refused` (its group's events) and every event pushed since leave
    /// the journal and the rings, each tenant's seqs back to its first one refused.
    fn take_back(&self, journal: &Journal, mut refused: Vec<Arc<Logged>>) {
        let mut guard = self.ring();
        // Under the ring's lock, so no event is stamped between these and the rewind.
        refused.extend(journal.take_pending_events());
        if refused.is_empty() {
            return;
        }
        self.rollbacks.fetch_add(1, Ordering::AcqRel);
        let durable = self.durable.load(Ordering::Acquire);
        let ring = &mut *guard;
        let mut first: HashMap<Arc<str>, u64> = HashMap::new();
        for logged in &refused {
            let seq = first.entry(Arc::clone(&logged.tenant)).or_insert(u64::MAX);
            *seq = (*seq).min(logged.frame.seq);
        }
        let mut dropped = Vec::new();
        for (tenant, seq) in first {
            let Some(own) = ring.tenants.get_mut(&*tenant) else {
                continue;
            };
            let held = !own.events.is_empty();
            while own.sizes.back().is_some_and(|k| k.ord > durable) {
                let (Some(kept), Some(event)) = (own.sizes.pop_back(), own.events.pop_back())
                else {
                    break;
                };
                own.bytes -= kept.bytes;
                ring.bytes -= kept.bytes;
                ring.retained -= 1;
                dropped.push(event);
            }
            if held && own.events.is_empty() {
                ring.holding -= 1;
            }
            own.next_seq = own.next_seq.min(seq);
        }
        ring.emitted = ring.emitted.min(durable);
        self.budget.log.store(ring.bytes, Ordering::Relaxed);
        drop(guard);
        // An `execute`'s call (and the approval it asked for) goes with its answer, a 503
        // (`Runtime::take_back_call`); the rest was done whatever its answer said (a
        // session created or closed, an approval decided, an agent's step) and is
        // stamped again, next, for the next write.
        let executes: Vec<&str> = refused
            .iter()
            .filter_map(|logged| match &logged.frame.event {
                Event::ToolCalled(call) if call.source == CallSource::Execute => {
                    Some(call.call_id.as_str())
                }
                _ => None,
            })
            .collect();
        let again: Vec<&Arc<Logged>> = refused
            .iter()
            .filter(|logged| match &logged.frame.event {
                Event::ToolCalled(call) => call.source != CallSource::Execute,
                Event::ApprovalRequested(held) => !executes.contains(&held.call_id.as_str()),
                _ => true,
            })
            .collect();
        tracing::warn!(
            events = refused.len(),
            calls = executes.len(),
            "store write failed: the calls it held were refused and taken back"
        );
        for logged in again {
            self.append(
                Arc::clone(&logged.tenant),
                logged.frame.session_id.as_ref().map(ToString::to_string),
                logged.frame.event.clone(),
            );
        }
        drop(dropped);
    }
}
