//! The runtime's state as a store keeps it: the documents (sessions, their counters,
//! approvals, eval runs, suite documents, eval outcomes), the sessions whose counters
//! wait to be written (`MovedCounters`), the commit an answer waits for, and putting
//! them back when a runtime opens on a store.

use super::log::{EventLog, Logged};
use super::sessions::Session;
use super::{ApiErrorWithStatus, Runtime, lock};
use crate::store::StoredRecord;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A session as created: id, user, servers, metadata, its mocks payload and script.
pub(crate) const SESSION: &str = "session";
/// What a session's calls move: per-tool counters, call and envelope counts, last
/// activity, the closed flag. Its own row so a call does not rewrite the mock table.
pub(crate) const COUNTERS: &str = "counters";
/// An approval with the call it holds, pending or resolved.
pub(crate) const APPROVAL: &str = "approval";
/// An eval run's detail, written when it starts and when it ends.
pub(crate) const EVAL_RUN: &str = "eval.run";
/// A suite document kept for reruns.
pub(crate) const SUITE: &str = "eval.suite";
/// One `agent.eval.completed` folded into the pass-rate history, per case a ring of
/// `max_outcomes_per_case` slots.
pub(crate) const OUTCOME: &str = "eval.outcome";

/// What an answer gets when the commit it waits for failed.
pub const STORE_UNAVAILABLE: &str = "store_unavailable";

/// Sessions whose counters calls moved since their document was last written, on a
/// store with a journal: a call's answer waits for its `tool.called` event, not for its
/// counters, which a restart rolls forward from the events past the last document's
/// checkpoint (`Runtime::restore_sessions`). Their documents are written together: every
/// `COMMIT_EVERY` by the store's thread, at a flush, once `due_after`
/// calls moved them, and as soon as the log evicts an event they do not count yet (by
/// the next answer's write, or the store's thread woken for it), so a reopened log holds
/// the events a restart rolls them forward from.
pub(crate) struct MovedCounters {
    sessions: Mutex<Vec<Arc<Mutex<Session>>>>,
    calls: AtomicUsize,
    /// Calls that make the moved counters due: an eighth of the log's capacity
    /// (`retained_events`), so the events a restart rolls them forward from are still
    /// held, and at most 1024.
    due_after: usize,
}

impl MovedCounters {
    pub(crate) fn new(retained_events: usize) -> Self {
        Self {
            sessions: Mutex::new(Vec::new()),
            calls: AtomicUsize::new(0),
            due_after: (retained_events / 8).clamp(1, 1024),
        }
    }

    /// A call moved `s`'s counters (held locked, after its event `ord` was logged):
    /// written now without a journal (or on a `shared` store), else with the next group
    /// of moved counters. True when that group is due now
    /// (`Runtime::write_moved_counters`, once the lock is let go).
    pub(crate) fn note(
        &self,
        log: &EventLog,
        shared: bool,
        session: &Arc<Mutex<Session>>,
        s: &mut Session,
        ord: u64,
    ) -> bool {
        if !log.journaled() || shared {
            s.persist_counters(log, shared);
            return false;
        }
        if !s.counters_due {
            s.counters_due = true;
            lock(&self.sessions).push(Arc::clone(session));
        }
        log.undocumented_from(ord);
        let calls = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        calls >= self.due_after || log.counters_due()
    }
}

impl MovedCounters {
    /// `s`'s counters changed without a call (one taken back): written with the next
    /// group of moved counters, as they then stand.
    pub(crate) fn again(&self, session: &Arc<Mutex<Session>>, s: &mut Session) {
        if !s.counters_due {
            s.counters_due = true;
            lock(&self.sessions).push(Arc::clone(session));
        }
    }
}

/// The 503 an answer gets when the write it waits for failed, with why.
pub(crate) fn unavailable(reason: &str) -> ApiErrorWithStatus {
    ApiErrorWithStatus::new(
        503,
        STORE_UNAVAILABLE,
        format!("the runtime could not commit this to its store: {reason}"),
    )
}

impl Runtime {
    /// `committed`, for a call whose event is `logged` (stamped after the log's
    /// `rollbacks` read `rollbacks`): `Ok` exactly when that event was written, though
    /// the write this answer made failed (an earlier one took it) or went through (a
    /// failed one took the event back before). On a store that stamps, likewise by that
    /// event's commit (`EventLog::commit_ack`); a failed commit that refused it says so
    /// in `EventLog::refused`.
    pub(crate) async fn committed_call(
        &self,
        logged: &Arc<Logged>,
        rollbacks: u64,
    ) -> Result<(), ApiErrorWithStatus> {
        let log = &self.inner.log;
        if !log.journaled() {
            // On a store that stamps, the answer waits for its own event's commit.
            return self.committed_for(Some(logged)).await;
        }
        let result = self.committed().await;
        if result.is_ok() && log.rollbacks() == rollbacks {
            return result;
        }
        if log.kept(logged) {
            return Ok(());
        }
        result?;
        let reason = log
            .store_health()
            .and_then(crate::log::StoreHealth::last_error)
            .unwrap_or_else(|| "an earlier write failed".to_owned());
        Err(unavailable(&reason))
    }

    /// Writes the counters of every session a call moved since the last time, each under
    /// its session's lock (so after every event it counts).
    pub(crate) fn write_moved_counters(&self) {
        let moved = &self.inner.moved;
        // Cleared first: whatever moves from here on is written by the next group.
        self.inner.log.documented();
        moved.calls.store(0, Ordering::Relaxed);
        let sessions = std::mem::take(&mut *lock(&moved.sessions));
        for session in sessions {
            let mut s = lock(&session);
            if s.counters_due {
                s.counters_due = false;
                s.write_counters(&self.inner.log, self.inner.shared.is_shared());
            }
        }
    }

    /// Waits until everything this runtime has sent to its store so far is committed:
    /// an answer awaits this before it is sent, so what a client was told survives a
    /// `kill -9`. On a `SQLite` store that is the journal's write (one for the answers
    /// ready together); elsewhere the writer groups the waiting answers into one
    /// transaction. Without a store it returns at once. A failed write is 503
    /// `store_unavailable`.
    pub async fn committed(&self) -> Result<(), ApiErrorWithStatus> {
        self.committed_for(None).await
    }

    /// `committed`; `call`: the event of the `execute` this answers, on a store that
    /// stamps answered by that event's commit (`EventLog::commit_ack`).
    async fn committed_for(&self, call: Option<&Arc<Logged>>) -> Result<(), ApiErrorWithStatus> {
        if self.inner.log.journaled() {
            // The answers ready on this worker run first and queue their writes too, so
            // one `write` covers them all.
            tokio::task::yield_now().await;
            // The log evicted an event whose call's counters are not written yet: they go
            // in this write, with the events that evicted it.
            if self.inner.log.counters_due() {
                self.write_moved_counters();
            }
            let written = self.inner.log.write_journal().unwrap_or(Ok(()));
            return written.map_err(|reason| unavailable(&reason));
        }
        let Some(ack) = self.inner.log.commit_ack(call) else {
            return Ok(());
        };
        ack.await.map_err(|_| {
            let reason = self
                .inner
                .log
                .store_health()
                .and_then(crate::log::StoreHealth::last_error)
                .unwrap_or_else(|| "see its log".to_owned());
            unavailable(&reason)
        })
    }

    /// Puts a store's documents back: sessions with their counters (and their calls
    /// from the restored `tool.called` events), approvals, eval runs, suite documents
    /// and history. A document that no longer decodes is skipped with a warning.
    pub(crate) fn restore_state(&self, records: Vec<StoredRecord>) {
        let mut sessions = Vec::new();
        let mut counters = std::collections::HashMap::new();
        let mut approvals = Vec::new();
        let mut runs = Vec::new();
        let mut suites = Vec::new();
        let mut outcomes = Vec::new();
        for record in records {
            match record.kind.as_str() {
                SESSION => sessions.push(record),
                COUNTERS => {
                    counters.insert((record.tenant.clone(), record.key.clone()), record);
                }
                APPROVAL => approvals.push(record),
                EVAL_RUN => runs.push(record),
                SUITE => suites.push(record),
                OUTCOME => outcomes.push(record),
                other => tracing::warn!(kind = other, "unknown state kind in the store; skipped"),
            }
        }
        self.restore_sessions(&sessions, &mut counters, false);
        lock(&self.inner.approvals).restore(&approvals, &self.inner.budget);
        // A store written under larger bounds comes back within today's.
        lock(&self.inner.approvals).trim_resolved(&self.inner.log);
        let interrupted = self
            .inner
            .evals
            .restore(&self.inner.log, &runs, &suites, &outcomes);
        // The sessions those runs' cases were going in will never finish: closed.
        let orphaned = crate::read(&self.inner.sessions)
            .open_of_user(&interrupted, crate::evals::EVAL_USER_ID);
        for (tenant, id) in orphaned {
            let _ = self.close_session(&tenant, &id);
        }
        // What aged past its retention while no runtime was running goes now.
        self.evict_aged_sessions();
    }
}

/// Decodes a stored document, warning (not failing) on one that no longer decodes: the
/// rest of the state still comes back.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(record: &StoredRecord) -> Option<T> {
    match serde_json::from_str(&record.value) {
        Ok(value) => Some(value),
        Err(err) => {
            tracing::warn!(%err, kind = %record.kind, key = %record.key, "stored state unreadable; skipped");
            None
        }
    }
}
