//! A session as a store keeps it: its document and its counters' document, written under
//! the session's lock, and sessions put back (rolled forward past the checkpoint) at open.

use super::{Entry, SESSION_OVERHEAD, Session};
#[cfg(feature = "postgres")]
use crate::log::Logged;
use crate::log::{EventLog, Retired};
use crate::mocks::MockTable;
use crate::{Runtime, lock, persist};
use serde_json::{Map, Value};
use spyglass_protocol::Event;
use spyglass_protocol::events::{Counter, Outcome};
use spyglass_protocol::rest::{LastRun, ModelScript, RunTotals};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// A session as its store keeps it from create on (`persist::SESSION`); what its calls
/// change is in `CountersDoc`.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct SessionDoc {
    /// Its creation position: the list order and page cursors go on across a restart.
    pub(super) key: u64,
    pub(super) user_id: String,
    pub(super) servers: Vec<String>,
    pub(super) created_at: String,
    #[serde(default)]
    pub(super) mocks: Option<Value>,
    #[serde(default)]
    pub(super) model: ModelScript,
    #[serde(default)]
    pub(super) metadata: Map<String, Value>,
}

/// What a session's calls move (`persist::COUNTERS`), as read back; written as
/// `CountersOut`, which borrows the same fields from the session.
#[derive(serde::Deserialize, Default)]
pub(crate) struct CountersDoc {
    closed: bool,
    calls: u32,
    envelopes: u32,
    model_calls: u32,
    last_activity: String,
    last_seq: u64,
    /// Per mocked tool: entries served, dispatches naming it.
    mocks: BTreeMap<String, (u32, u32)>,
    /// Per rules mock: calls each rule answered, calls its fallback answered.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    rule_hits: BTreeMap<String, (Vec<u32>, u32)>,
    /// The last `send` run and the runs added up (`GET /v1/sessions/:id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_run: Option<LastRun>,
    #[serde(default, skip_serializing_if = "is_no_runs")]
    runs: RunTotals,
}

pub(super) fn is_no_runs(runs: &RunTotals) -> bool {
    runs.runs == 0
}

/// `CountersDoc` as it is written, borrowing from the session: written at every call, so
/// it copies no tool name, stamp or run to be encoded.
#[derive(serde::Serialize)]
pub(super) struct CountersOut<'a> {
    closed: bool,
    calls: u32,
    envelopes: u32,
    model_calls: u32,
    last_activity: &'a str,
    last_seq: u64,
    mocks: MockCounts<'a>,
    #[serde(skip_serializing_if = "RuleHits::is_empty")]
    rule_hits: RuleHits<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_run: Option<&'a LastRun>,
    #[serde(skip_serializing_if = "is_no_runs")]
    runs: &'a RunTotals,
}

/// `CountersDoc::mocks` read off the mock table.
pub(super) struct MockCounts<'a>(&'a MockTable);

impl serde::Serialize for MockCounts<'_> {
    fn serialize<S: serde::Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        out.collect_map(
            self.0
                .slots
                .iter()
                .map(|(tool, slot)| (tool, (slot.consumed, slot.calls))),
        )
    }
}

/// `CountersDoc::rule_hits` read off the mock table: its rules mocks that answered.
pub(super) struct RuleHits<'a>(&'a MockTable);

impl RuleHits<'_> {
    pub(super) fn hits(&self) -> impl Iterator<Item = (&String, (&Vec<u32>, u32))> {
        self.0
            .slots
            .iter()
            .filter(|(_, slot)| !slot.rule_hits.is_empty() || slot.fallback_hits > 0)
            .map(|(tool, slot)| (tool, (&slot.rule_hits, slot.fallback_hits)))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.hits().next().is_none()
    }
}

impl serde::Serialize for RuleHits<'_> {
    fn serialize<S: serde::Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        out.collect_map(self.hits())
    }
}

impl Session {
    /// Writes a session's counters to the store (nothing without one). Called under the
    /// session's lock, after the event that moved them, so the store never holds a
    /// counter ahead of or behind its events.
    pub(crate) fn persist_counters(&self, log: &EventLog, shared: bool) {
        // On a shared store the seq of what just happened is not known yet: the follower
        // writes the counters when the event comes back stamped (`follow_session_event`),
        // so their `last_seq` checkpoint is exact and a restart rolls forward only what
        // they do not count.
        if shared {
            return;
        }
        self.write_counters(log, shared);
    }

    /// Writes the counters document now (nothing without a store); `shared`: on a store
    /// shared with other runtimes.
    pub(crate) fn write_counters(&self, log: &EventLog, shared: bool) {
        if !log.has_store() {
            return;
        }
        let doc = CountersOut {
            closed: self.closed,
            calls: self.call_count,
            envelopes: self.envelope_count,
            model_calls: self.model_calls,
            last_activity: &self.last_activity,
            // A shared store's checkpoint is what the follower has counted; a local
            // store writes at dispatch, where the event's seq is known.
            last_seq: if shared {
                self.counted_to
            } else {
                self.last_seq
            },
            mocks: MockCounts(&self.mocks),
            rule_hits: RuleHits(&self.mocks),
            last_run: self.last_run.as_ref(),
            runs: &self.runs,
        };
        log.persist(persist::COUNTERS, &self.tenant, &self.id, &doc);
    }
}

/// Deletes evicted sessions' documents and counters from the store (nothing without one).
pub(super) fn unpersist_sessions(log: &EventLog, evicted: &[Entry]) {
    if !log.has_store() {
        return;
    }
    for entry in evicted {
        let id = {
            let mut s = lock(&entry.session);
            // Gone from the store: not written again with the moved counters.
            s.counters_due = false;
            s.id.clone()
        };
        log.unpersist(persist::SESSION, &entry.tenant, &id);
        log.unpersist(persist::COUNTERS, &entry.tenant, &id);
    }
}

impl Runtime {
    /// Puts stored sessions back in creation order, their counters applied to their
    /// mock tables (the next stateful entry served is the next one) and their calls
    /// taken from the restored `tool.called` events. Their bytes count in the budget.
    ///
    /// A call's event and its counters are two writes: a commit may hold the event and
    /// not yet the counters (never the reverse, they are sent in that order). So the
    /// counters are a checkpoint at their `last_seq`, and the session's newer events roll
    /// them forward: a call whose event is stored is counted, and its entry never served
    /// again.
    /// `adopting` (sessions another runtime on a shared store created): no history to
    /// read, and a session already here, or a creation position taken here, is not
    /// overwritten.
    pub(crate) fn restore_sessions(
        &self,
        records: &[crate::store::StoredRecord],
        counters: &mut HashMap<(String, String), crate::store::StoredRecord>,
        adopting: bool,
    ) {
        let mut docs: Vec<(String, String, SessionDoc)> = records
            .iter()
            .filter_map(|r| {
                persist::decode::<SessionDoc>(r).map(|d| (r.tenant.clone(), r.key.clone(), d))
            })
            .collect();
        docs.sort_by_key(|(_, _, d)| d.key);
        let mut restored: Vec<(u64, usize, Session)> = Vec::new();
        let mut by_id: HashMap<String, usize> = HashMap::new();
        for (tenant, id, doc) in docs {
            let counts: CountersDoc = counters
                .remove(&(tenant.clone(), id.clone()))
                .and_then(|r| persist::decode(&r))
                .unwrap_or_default();
            let mut mocks = match &doc.mocks {
                Some(payload) => {
                    let Ok(table) = MockTable::from_payload(payload) else {
                        tracing::warn!(session = %id, "stored mocks no longer pass the gates; session skipped");
                        continue;
                    };
                    table
                }
                None => MockTable::default(),
            };
            for (tool, (consumed, calls)) in &counts.mocks {
                if let Some(slot) = mocks.slots.get_mut(tool) {
                    slot.consumed = *consumed;
                    slot.calls = *calls;
                }
            }
            for (tool, (hits, fallback)) in &counts.rule_hits {
                if let Some(slot) = mocks.slots.get_mut(tool) {
                    for (have, stored) in slot.rule_hits.iter_mut().zip(hits) {
                        *have = *stored;
                    }
                    slot.fallback_hits = *fallback;
                }
            }
            let bytes = SESSION_OVERHEAD
                + doc.user_id.len()
                + doc.servers.iter().map(|s| s.len() + 24).sum::<usize>()
                + doc
                    .mocks
                    .as_ref()
                    .map_or(0, |m| serde_json::to_vec(m).map_or(0, |v| v.len()))
                + serde_json::to_vec(&doc.model).map_or(0, |v| v.len());
            by_id.insert(id.clone(), restored.len());
            restored.push((
                doc.key,
                bytes,
                Session {
                    id,
                    tenant: Arc::from(tenant),
                    user_id: doc.user_id,
                    servers: doc.servers,
                    created_at: doc.created_at.clone(),
                    last_activity: if counts.last_activity.is_empty() {
                        doc.created_at
                    } else {
                        counts.last_activity.clone()
                    },
                    closed: counts.closed,
                    closing: watch::Sender::new(counts.closed),
                    mocks,
                    calls: VecDeque::new(),
                    retired: Retired::default(),
                    calls_bytes: 0,
                    call_count: counts.calls,
                    envelope_count: counts.envelopes,
                    model: doc.model,
                    model_calls: counts.model_calls,
                    last_seq: counts.last_seq,
                    counted_to: counts.last_seq,
                    unfollowed: 0,
                    counters_due: false,
                    last_run: counts.last_run.clone(),
                    runs: counts.runs.clone(),
                    decisions: None,
                },
            ));
        }
        // The calls a session lists are its `tool.called` events the log still holds;
        // those past its counters' checkpoint are counted too.
        let retained = self.inner.config.retained_calls;
        let history = if adopting {
            Vec::new()
        } else {
            self.inner.log.all_since(0, usize::MAX)
        };
        for logged in history {
            let Some(&at) = logged
                .frame
                .session_id
                .as_deref()
                .and_then(|id| by_id.get(id))
            else {
                continue;
            };
            let s = &mut restored[at].2;
            let newer = logged.frame.seq > s.last_seq;
            // The events a live session's `last_seq` follows (emitted under its lock).
            let moves = matches!(
                logged.frame.event,
                Event::ToolCalled(_)
                    | Event::ApprovalReplayed(_)
                    | Event::SessionClosed(_)
                    | Event::SessionCreated(_)
            );
            match &logged.frame.event {
                Event::ToolCalled(call) => {
                    let envelope = matches!(call.outcome, Outcome::Envelope(_));
                    let (calls, envelopes, activity) =
                        (s.call_count, s.envelope_count, s.last_activity.clone());
                    s.record(&logged, envelope, retained, &self.inner.budget);
                    if newer {
                        roll_forward(&mut s.mocks, &call.tool, call.counter.as_ref());
                    } else {
                        // Counted in the checkpoint, which the log may not hold whole.
                        s.call_count = calls;
                        s.envelope_count = envelopes;
                        s.last_activity = activity;
                    }
                }
                Event::ApprovalReplayed(replay) if newer => {
                    roll_forward(&mut s.mocks, &replay.tool, replay.counter.as_ref());
                    s.last_activity.clear();
                    s.last_activity.push_str(&logged.frame.ts);
                }
                Event::SessionClosed(_) if newer => {
                    s.closed = true;
                    s.closing.send_replace(true);
                }
                _ => {}
            }
            if newer && moves {
                s.last_seq = logged.frame.seq;
                s.counted_to = logged.frame.seq;
            }
        }
        let mut sessions = self
            .inner
            .sessions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (key, bytes, mut session) in restored {
            if adopting && sessions.by_id.contains_key(&session.id) {
                continue;
            }
            // Each runtime numbers the sessions it creates: another's may be taken here.
            let key = if adopting && sessions.order.contains_key(&key) {
                sessions.next_key
            } else {
                key
            };
            if session.closed {
                // A closed session never runs its script again.
                session.model = ModelScript::default();
            }
            let (id, tenant, closed) = (
                session.id.clone(),
                session.tenant.to_string(),
                session.closed,
            );
            sessions.next_key = sessions.next_key.max(key + 1);
            sessions.order.insert(key, id.clone());
            let count = sessions.tenants.entry(tenant.clone()).or_default();
            if closed {
                count.closed += 1;
            } else {
                count.open += 1;
            }
            if closed {
                sessions.closed.insert(key, id.clone());
            }
            sessions.by_id.insert(
                id,
                Entry {
                    session: Arc::new(Mutex::new(session)),
                    tenant,
                    key,
                    bytes,
                },
            );
            self.inner.budget.add_session(bytes);
        }
    }
}

#[cfg(feature = "postgres")]
impl Runtime {
    /// An event of a session taken into the log from a shared store: the session's
    /// `last_seq` follows it, and when another runtime made it (`remote`) what it says
    /// (a call, a replay, the close) is applied to this runtime's copy of the session.
    pub(crate) fn follow_session_event(&self, logged: &Arc<Logged>, remote: bool) {
        let Some(id) = logged.frame.session_id.as_deref() else {
            return;
        };
        let Ok(session) = self.session(&logged.tenant, id) else {
            return;
        };
        let mut s = lock(&session);
        let seq = logged.frame.seq;
        s.last_seq = s.last_seq.max(seq);
        if !remote {
            // This runtime's own, counted at dispatch. Once none of its calls is still
            // on its way back, its copy counts everything up to this seq and nothing
            // after: a checkpoint a restart (or another runtime adopting the session)
            // goes on from. Written at every such event, calls too: a call past the
            // checkpoint is counted at a restart only while its event is still stored,
            // and a busier session can push it out of the retained window first (one
            // write in 32 calls left up to 31 uncounted). The writer keeps one document
            // a session per commit, whatever the calls in it.
            if matches!(
                logged.frame.event,
                Event::ToolCalled(_) | Event::ApprovalReplayed(_)
            ) {
                s.unfollowed = s.unfollowed.saturating_sub(1);
            }
            s.counted_to = s.counted_to.max(seq);
            if s.unfollowed == 0 {
                s.write_counters(&self.inner.log, self.inner.shared.is_shared());
            }
            return;
        }
        if seq <= s.counted_to {
            // Counted already: the document this session was adopted from counts it.
            return;
        }
        s.counted_to = seq;
        match &logged.frame.event {
            Event::ToolCalled(call) => {
                let envelope = matches!(call.outcome, Outcome::Envelope(_));
                s.record(
                    logged,
                    envelope,
                    self.inner.config.retained_calls,
                    &self.inner.budget,
                );
                roll_forward(&mut s.mocks, &call.tool, call.counter.as_ref());
            }
            Event::ApprovalReplayed(replay) => {
                roll_forward(&mut s.mocks, &replay.tool, replay.counter.as_ref());
                s.last_activity.clear();
                s.last_activity.push_str(&logged.frame.ts);
            }
            Event::SessionClosed(_) if !s.closed => {
                s.closed = true;
                s.closing.send_replace(true);
                s.model = ModelScript::default();
                s.last_activity.clear();
                s.last_activity.push_str(&logged.frame.ts);
                drop(s);
                crate::write(&self.inner.sessions).count_closed(&logged.tenant, id);
            }
            _ => {}
        }
    }
}

/// A dispatch or replay of `tool` the counters' checkpoint missed: one more call, and
/// the entries served as its event's counter says.
pub(super) fn roll_forward(mocks: &mut MockTable, tool: &str, counter: Option<&Counter>) {
    if let Some(slot) = mocks.slots.get_mut(tool) {
        slot.calls = slot.calls.saturating_add(1);
        if let Some(counter) = counter {
            slot.consumed = slot.consumed.max(counter.consumed);
            match (counter.rule, counter.fallback) {
                (Some(i), _) => slot.note_answer(crate::mocks::Answer::Rule(i)),
                (None, true) => slot.note_answer(crate::mocks::Answer::Fallback),
                (None, false) => {}
            }
        }
    }
}
#[cfg(test)]
mod future_size {
    /// hyper moves each request's future into place whole: an execute's future holding
    /// a shared store's futures inline was 2.5 KB copied per call. They are boxed.
    #[test]
    pub(super) fn an_execute_future_stays_small() {
        let rt = crate::Runtime::new(crate::RuntimeConfig::default());
        let call = rt.execute_call("t", "s", "x", spyglass_protocol::RawJson::null());
        assert!(
            std::mem::size_of_val(&call) <= 512,
            "{} bytes",
            std::mem::size_of_val(&call)
        );
    }
}
