//! The event log: stamps every event with its tenant's next `seq` and a `ts`, keeps the
//! newest `retained_events` across tenants in per-tenant rings, and broadcasts each to live
//! subscribers. Stamping and broadcasting happen under one lock so the broadcast order is
//! the seq order. It also carries the runtime's state documents to the store, ordered
//! with the events (`persist`, `unpersist`).
//!
//! Seqs count per tenant, so a tenant's `seq`, `next` and `stream.gap` say nothing of how
//! much other tenants log. When the log is full the event evicted is the oldest of the
//! appending tenant if it holds its fair share (capacity / tenants holding events) or
//! more, else the oldest of the tenant holding the most: one tenant's flood evicts its own
//! history, never a quieter tenant's. Within the runtime's byte budget (shared with the
//! sessions) the tenant holding the most bytes loses its oldest events first.
//!
//! The log's `epoch` names its stream, one per runtime: seqs compare only within one
//! epoch. With a store (`crate::store`) every append and eviction goes to its writer
//! thread in order (through the journal, for `SQLite`), so the file holds what the rings
//! hold.

use crate::store::journal::Journal;
use crate::store::{StateWrite, StoredRecord};
use foldhash::HashMap;
use foldhash::HashMapExt as _;
use spyglass_protocol::{Event, Frame, decode, encode, now_rfc3339};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::broadcast;

mod durable;
mod writer;

use writer::Write;
pub use writer::{BeforeCommit, Committed, StoreHealth, StoreStatus, StoreWriter};

/// A stamped event as the log keeps it: the frame, its wire text once someone has asked
/// for it, and the tenant whose stream shows it.
///
/// Its shared block (`Arc<Logged>`) is 384 bytes, one of mimalloc's size classes (a test
/// keeps it there): the tenant's name is shared (an ingest path that knows it,
/// `Runtime::emit_shared`, gives every event the same one), the text is a boxed `str`, and
/// the budget's bytes are counted from the frame when asked.
#[derive(Debug)]
pub struct Logged {
    pub frame: Frame,
    text: OnceLock<Box<str>>,
    pub tenant: Arc<str>,
    /// Stamping order across tenants (seqs are per tenant): the all-projects stream's seq.
    pub ord: u64,
}

/// The runtime's byte budget, shared by the event log and the session map: what each
/// holds (approximate, see `Event::approx_bytes`) and what was evicted to stay within it.
#[derive(Debug)]
pub struct Budget {
    pub max: usize,
    log: AtomicUsize,
    sessions: AtomicUsize,
    evals: AtomicUsize,
    approvals: AtomicUsize,
    evicted_events: AtomicU64,
    evicted_event_bytes: AtomicU64,
    evicted_sessions: AtomicU64,
    evicted_session_bytes: AtomicU64,
    evicted_evals: AtomicU64,
    evicted_eval_bytes: AtomicU64,
    evicted_approvals: AtomicU64,
    evicted_approval_bytes: AtomicU64,
}

/// A snapshot of the budget (`Runtime::budget_stats`, `/health`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct BudgetStats {
    pub max_bytes: usize,
    /// Log, sessions, evals and approvals: never above `max_bytes` for long (one event may
    /// overshoot).
    pub retained_bytes: usize,
    pub log_bytes: usize,
    pub session_bytes: usize,
    /// Eval runs and the suite documents kept for reruns (their JSON text).
    pub eval_bytes: usize,
    /// Events dropped from the log because of bytes, not count.
    pub evicted_events: u64,
    pub evicted_event_bytes: u64,
    /// Closed sessions dropped to make room.
    pub evicted_sessions: u64,
    pub evicted_session_bytes: u64,
    /// Finished eval runs and suite documents dropped to make room.
    pub evicted_evals: u64,
    pub evicted_eval_bytes: u64,
    /// Approval rows (resolved ones; pending rows are never dropped).
    pub approval_bytes: usize,
    /// Resolved approvals dropped, past `max_resolved_approvals` or the budget.
    pub evicted_approvals: u64,
    pub evicted_approval_bytes: u64,
}

impl Budget {
    pub fn new(max: usize) -> Self {
        Self {
            max: max.max(1),
            log: AtomicUsize::new(0),
            sessions: AtomicUsize::new(0),
            evals: AtomicUsize::new(0),
            approvals: AtomicUsize::new(0),
            evicted_events: AtomicU64::new(0),
            evicted_event_bytes: AtomicU64::new(0),
            evicted_sessions: AtomicU64::new(0),
            evicted_session_bytes: AtomicU64::new(0),
            evicted_evals: AtomicU64::new(0),
            evicted_eval_bytes: AtomicU64::new(0),
            evicted_approvals: AtomicU64::new(0),
            evicted_approval_bytes: AtomicU64::new(0),
        }
    }

    pub fn retained(&self) -> usize {
        self.log.load(Ordering::Relaxed)
            + self.sessions.load(Ordering::Relaxed)
            + self.evals.load(Ordering::Relaxed)
            + self.approvals.load(Ordering::Relaxed)
    }

    /// What the budget holds besides the log: the log keeps within what this leaves.
    fn besides_log(&self) -> usize {
        self.sessions.load(Ordering::Relaxed)
            + self.evals.load(Ordering::Relaxed)
            + self.approvals.load(Ordering::Relaxed)
    }

    /// `bytes` leave the figure `held`; when evicted, one more item and its bytes are
    /// counted in `evicted`'s (count, bytes).
    fn take(held: &AtomicUsize, bytes: usize, evicted: Option<(&AtomicU64, &AtomicU64)>) {
        held.fetch_sub(bytes, Ordering::Relaxed);
        if let Some((count, total)) = evicted {
            count.fetch_add(1, Ordering::Relaxed);
            total.fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    pub fn add_approvals(&self, bytes: usize) {
        self.approvals.fetch_add(bytes, Ordering::Relaxed);
    }

    /// An approval row left the table, dropped to stay bounded when `evicted`.
    pub fn remove_approvals(&self, bytes: usize, evicted: bool) {
        Self::take(
            &self.approvals,
            bytes,
            evicted.then_some((&self.evicted_approvals, &self.evicted_approval_bytes)),
        );
    }

    pub fn add_evals(&self, bytes: usize) {
        self.evals.fetch_add(bytes, Ordering::Relaxed);
    }

    /// An eval run or suite document left the runtime: evicted by the budget when `evicted`.
    pub fn remove_evals(&self, bytes: usize, evicted: bool) {
        Self::take(
            &self.evals,
            bytes,
            evicted.then_some((&self.evicted_evals, &self.evicted_eval_bytes)),
        );
    }

    pub fn add_session(&self, bytes: usize) {
        self.sessions.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A session left the map: evicted by the budget when `evicted`.
    pub fn remove_session(&self, bytes: usize, evicted: bool) {
        Self::take(
            &self.sessions,
            bytes,
            evicted.then_some((&self.evicted_sessions, &self.evicted_session_bytes)),
        );
    }

    pub fn stats(&self) -> BudgetStats {
        let log_bytes = self.log.load(Ordering::Relaxed);
        let session_bytes = self.sessions.load(Ordering::Relaxed);
        let eval_bytes = self.evals.load(Ordering::Relaxed);
        let approval_bytes = self.approvals.load(Ordering::Relaxed);
        BudgetStats {
            max_bytes: self.max,
            retained_bytes: log_bytes + session_bytes + eval_bytes + approval_bytes,
            log_bytes,
            session_bytes,
            eval_bytes,
            evicted_events: self.evicted_events.load(Ordering::Relaxed),
            evicted_event_bytes: self.evicted_event_bytes.load(Ordering::Relaxed),
            evicted_sessions: self.evicted_sessions.load(Ordering::Relaxed),
            evicted_session_bytes: self.evicted_session_bytes.load(Ordering::Relaxed),
            evicted_evals: self.evicted_evals.load(Ordering::Relaxed),
            evicted_eval_bytes: self.evicted_eval_bytes.load(Ordering::Relaxed),
            approval_bytes,
            evicted_approvals: self.evicted_approvals.load(Ordering::Relaxed),
            evicted_approval_bytes: self.evicted_approval_bytes.load(Ordering::Relaxed),
        }
    }
}

impl Logged {
    /// An event read back from a store, its stored text kept as its wire text; `None`
    /// for a text that no longer decodes (skipped: the rest of the history still loads).
    /// Its budget bytes are counted again from the decoded event, as at append.
    pub fn restore(text: &str, tenant: String) -> Option<Logged> {
        let frame = decode(text).ok()?;
        Some(Logged {
            frame,
            text: OnceLock::from(Box::from(text)),
            tenant: tenant.into(),
            ord: 0,
        })
    }

    /// A copy of an event the log sent unstamped, with the seq its store gave it.
    #[must_use]
    pub fn stamped(&self, seq: u64) -> Logged {
        Logged {
            frame: Frame {
                seq,
                ..self.frame.clone()
            },
            text: OnceLock::new(),
            tenant: self.tenant.clone(),
            ord: 0,
        }
    }

    /// What the budget counts for it (`Event::approx_bytes`): the frame never changes
    /// once logged, so this is what was counted at append.
    pub fn bytes(&self) -> usize {
        self.frame.event.approx_bytes()
    }

    /// The frame's wire text, encoded by the first reader and shared by the rest. A call
    /// nobody watches never pays for it, and one that is watched pays on the subscriber's
    /// task, not on the request's: encoding was a tenth of a mocked execute.
    pub fn text(&self) -> &str {
        self.text
            .get_or_init(|| encode(&self.frame).into_boxed_str())
    }
}

/// Events let go of (evicted from the log, or out of a session's history), released a
/// batch at a time.
pub type Retired = spyglass_protocol::retire::Retired<Arc<Logged>>;

impl spyglass_protocol::retire::Warm for Logged {
    /// The fields its drop reads.
    fn warm(&self) -> usize {
        self.bytes()
    }
}

/// One tenant's part of the log; its seqs are contiguous from the front.
struct TenantRing {
    next_seq: u64,
    events: VecDeque<Arc<Logged>>,
    /// Each retained event's `bytes`, `ord` and seq, beside it (`push`, `pop_oldest`): the
    /// oldest event is a `retained_events` appends old when it goes, far out of the
    /// cache, and reading them from the event was a cache miss under the ring's lock on
    /// every full-log append.
    sizes: VecDeque<Kept>,
    /// Sum of the retained events' `bytes`.
    bytes: usize,
    /// With a journal: its newest evicted seq, which the store's writer reads
    /// (`Evictions`), registered at its first eviction.
    evicted: Option<Arc<AtomicU64>>,
}

impl Default for TenantRing {
    fn default() -> Self {
        Self {
            next_seq: 1,
            events: VecDeque::new(),
            sizes: VecDeque::new(),
            bytes: 0,
            evicted: None,
        }
    }
}

/// What the ring keeps beside a retained event (`TenantRing::sizes`).
#[derive(Debug, Clone, Copy)]
struct Kept {
    bytes: usize,
    ord: u64,
    seq: u64,
}

impl TenantRing {
    /// Retains `logged`, newest, counting its `bytes`.
    fn push(&mut self, logged: Arc<Logged>, bytes: usize) {
        self.sizes.push_back(Kept {
            bytes,
            ord: logged.ord,
            seq: logged.frame.seq,
        });
        self.events.push_back(logged);
        self.bytes += bytes;
    }

    /// The seq after the newest event readable (stamped at or before `readable`).
    fn next_readable(&self, readable: u64) -> u64 {
        let mut next = self.next_seq;
        for kept in self.sizes.iter().rev() {
            if kept.ord <= readable {
                break;
            }
            next = kept.seq;
        }
        next
    }

    /// The oldest event and what was kept beside it, no longer retained; the event
    /// itself is not read.
    fn pop_oldest(&mut self) -> Option<(Arc<Logged>, Kept)> {
        let old = self.events.pop_front()?;
        let kept = self.sizes.pop_front().unwrap_or_else(|| Kept {
            bytes: old.bytes(),
            ord: old.ord,
            seq: old.frame.seq,
        });
        self.bytes -= kept.bytes;
        Some((old, kept))
    }
}

struct Ring {
    /// Events stamped so far, every tenant's, those restored from a store included (the
    /// last `ord` given).
    emitted: u64,
    retained: usize,
    /// Sum of every tenant's `bytes`.
    bytes: usize,
    /// Tenants holding at least one event.
    holding: usize,
    tenants: HashMap<String, TenantRing>,
    /// Events appends evicted, let go of in batches (`Retired`).
    retired: Retired,
}

impl Ring {
    /// The tenant whose oldest event goes to make room for one of `appending`'s.
    fn victim(&mut self, appending: &str, capacity: usize) -> Option<&mut TenantRing> {
        let own = self.tenants.get(appending).map_or(0, |t| t.events.len());
        let holders = self.holding + usize::from(own == 0);
        if own > 0 && own >= capacity / holders.max(1) {
            return self.tenants.get_mut(appending);
        }
        // Only reached when a tenant under its share appends to a full log, so the scan
        // (over tenants holding events) is not on a lone tenant's path.
        self.tenants
            .values_mut()
            .max_by_key(|t| t.events.len())
            .filter(|t| !t.events.is_empty())
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
    /// Events stamped so far, every tenant's, those restored from a store included.
    pub emitted: u64,
    pub retained: usize,
    pub capacity: usize,
    pub subscribers: usize,
    pub longest_queue: usize,
}

pub struct EventLog {
    epoch: String,
    /// The all-projects stream's id: stamping order (`ord`) is counted afresh by each
    /// process, so this one is new at every start even when `epoch` goes on.
    all_epoch: String,
    ring: Mutex<Ring>,
    capacity: usize,
    live: broadcast::Sender<Arc<Logged>>,
    budget: Arc<Budget>,
    /// The store's writer thread, fed in seq order under the ring's lock.
    writer: Option<StoreWriter>,
    /// A `SQLite` store's journal: appends, evictions and documents go there, in the
    /// same order, and the writer thread takes them from it once written.
    journal: Option<Arc<Journal>>,
    /// The oldest `ord` of a call whose counters wait for their document (`u64::MAX`:
    /// none), and whether an event at or past it was evicted: the runtime's moved
    /// counters are then written at once (`MovedCounters::note`).
    undocumented: AtomicU64,
    counters_due: AtomicBool,
    /// With a journal: the newest `ord` written to it. Only events up to it are
    /// broadcast or read (`durable.rs`): a write that fails takes back the rest.
    durable: AtomicU64,
    /// How many times a failed journal write took events back (`EventLog::kept`).
    rollbacks: AtomicU64,
}

impl EventLog {
    /// A log with a fresh epoch: a history that continues none before it.
    pub fn new(capacity: usize, subscriber_queue: usize, budget: Arc<Budget>) -> Self {
        let (live, _) = broadcast::channel(subscriber_queue.max(1));
        Self {
            epoch: new_epoch(),
            all_epoch: format!("all_{}", new_epoch()),
            ring: Mutex::new(Ring {
                emitted: 0,
                retained: 0,
                bytes: 0,
                holding: 0,
                tenants: HashMap::new(),
                retired: Retired::default(),
            }),
            capacity: capacity.max(1),
            live,
            budget,
            writer: None,
            journal: None,
            undocumented: AtomicU64::new(u64::MAX),
            counters_due: AtomicBool::new(false),
            durable: AtomicU64::new(0),
            rollbacks: AtomicU64::new(0),
        }
    }

    /// The log goes on with stream `epoch`, each tenant from its `next_seqs` seq (a
    /// history reopened).
    #[must_use]
    pub fn continuing(mut self, epoch: String, next_seqs: Vec<(String, u64)>) -> Self {
        self.epoch = epoch;
        {
            let mut ring = self.ring();
            for (tenant, next_seq) in next_seqs {
                ring.tenants.entry(tenant).or_default().next_seq = next_seq.max(1);
            }
        }
        self
    }

    /// Whether a store's writer takes what the log appends.
    pub(crate) fn has_store(&self) -> bool {
        self.writer.is_some()
    }

    /// How the store's commits are going; `None` without a store.
    pub fn store_health(&self) -> Option<&StoreHealth> {
        self.writer.as_ref().map(|writer| &*writer.health)
    }

    /// Sends a state document's put or delete to the store's writer, after every event
    /// appended before it; nothing without a store.
    pub(crate) fn write_state(&self, write: StateWrite) {
        if let Some(journal) = &self.journal {
            journal.push(crate::store::journal::Record::State(write));
        } else if let Some(writer) = &self.writer {
            writer.send(Write::State(write));
        }
    }

    /// Puts a document (serialized only when there is a store), ordered after every
    /// event and document sent before it.
    pub(crate) fn persist<T: serde::Serialize + ?Sized>(
        &self,
        kind: &str,
        tenant: &str,
        key: &str,
        value: &T,
    ) {
        if !self.has_store() {
            return;
        }
        match serde_json::to_string(value) {
            Ok(value) => self.write_state(StateWrite::Put(StoredRecord {
                kind: kind.to_owned(),
                tenant: tenant.to_owned(),
                key: key.to_owned(),
                value,
            })),
            Err(err) => tracing::error!(%err, kind, key, "state not serializable; not stored"),
        }
    }

    /// Deletes a document (an evicted session, run or suite).
    pub(crate) fn unpersist(&self, kind: &str, tenant: &str, key: &str) {
        if !self.has_store() {
            return;
        }
        self.write_state(StateWrite::Delete(StoredRecord {
            kind: kind.to_owned(),
            tenant: tenant.to_owned(),
            key: key.to_owned(),
            value: String::new(),
        }));
    }

    /// A receiver answered once everything sent to the store so far is committed (an
    /// error when that commit failed); `None` without a store. `call`: the event of the
    /// `execute` this answers, which on a store that stamps decides it alone: answered
    /// once that event is committed, an error once a failed commit refused it
    /// (`EventLog::refused`).
    pub(crate) fn commit_ack(
        &self,
        call: Option<&Arc<Logged>>,
    ) -> Option<tokio::sync::oneshot::Receiver<()>> {
        let writer = self.writer.as_ref()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        writer.send(Write::Ack(tx, call.filter(|_| writer.stamps).cloned()));
        Some(rx)
    }

    /// Whether a failed commit of a store that stamps refused this `execute`'s event: it
    /// never reaches the store or the stream, and its call is taken back.
    pub(crate) fn refused(&self, call: &Arc<Logged>) -> bool {
        self.writer
            .as_ref()
            .is_some_and(|writer| writer.stamps && writer.refused.holds(call))
    }

    /// Whether a call the store refused is taken back (`Runtime::take_back_call`): with a
    /// journal, or on a store that stamps.
    pub(crate) fn takes_back(&self) -> bool {
        self.journal.is_some() || self.writer.as_ref().is_some_and(|writer| writer.stamps)
    }

    /// Sends every event appended (and evicted) from now on to the store's writer.
    #[must_use]
    pub fn with_writer(mut self, writer: StoreWriter) -> Self {
        self.writer = Some(writer);
        self
    }

    /// Puts every event appended (and evicted) and every document from now on in
    /// `journal`, which the writer (`StoreWriter::spawn_journaled`) commits from.
    #[must_use]
    pub fn with_journal(mut self, journal: Arc<Journal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// A call's counters wait for their document since the event at `ord`.
    pub(crate) fn undocumented_from(&self, ord: u64) {
        self.undocumented.fetch_min(ord, Ordering::Relaxed);
    }

    /// Whether an event whose call's counters wait for their document was evicted.
    pub(crate) fn counters_due(&self) -> bool {
        self.counters_due.load(Ordering::Relaxed)
    }

    /// The counters waiting for their document are being written: none waits now.
    pub(crate) fn documented(&self) {
        self.undocumented.store(u64::MAX, Ordering::Relaxed);
        self.counters_due.store(false, Ordering::Relaxed);
    }

    /// What a journaled writer runs before each commit (once; `None` without a writer).
    pub(crate) fn before_commit(&self) -> Option<&BeforeCommit> {
        self.writer.as_ref().map(|writer| &writer.before_commit)
    }

    /// Whether answers wait for a journal (a `SQLite` store) rather than a commit.
    pub(crate) fn journaled(&self) -> bool {
        self.journal.is_some()
    }

    /// Puts events read back from a store into the rings, oldest first, as appends would:
    /// within the capacity and the byte budget, each tenant's run contiguous and ending
    /// at its newest seq (a stored text that no longer decodes breaks it: the older part
    /// is a gap). Call after `continuing`, which says where each tenant's seqs stand.
    #[must_use]
    pub fn with_history(self, events: Vec<Logged>) -> Self {
        // Per tenant, keep only the contiguous run ending just below its next seq.
        let mut expected: HashMap<String, u64> = {
            let ring = self.ring();
            ring.tenants
                .iter()
                .map(|(name, t)| (name.clone(), t.next_seq))
                .collect()
        };
        let mut kept = Vec::with_capacity(events.len());
        for logged in events.into_iter().rev() {
            let Some(next) = expected.get_mut(&*logged.tenant) else {
                continue;
            };
            if logged.frame.seq + 1 != *next {
                // Older events of this tenant no longer join on: stop taking any.
                *next = 0;
                continue;
            }
            *next = logged.frame.seq;
            kept.push(logged);
        }
        kept.reverse();
        let mut evicted = Vec::new();
        let mut over_budget = Vec::new();
        {
            let mut guard = self.ring();
            let ring = &mut *guard;
            for logged in kept {
                ring.emitted += 1;
                let mut logged = Arc::new(logged);
                if let Some(unshared) = Arc::get_mut(&mut logged) {
                    unshared.ord = ring.emitted;
                }
                if ring.retained >= self.capacity {
                    evicted.extend(self.evict(ring, &logged.tenant));
                }
                let Some(own) = ring.tenants.get_mut(&*logged.tenant) else {
                    continue;
                };
                if own.events.is_empty() {
                    ring.holding += 1;
                }
                let bytes = logged.bytes();
                own.push(logged.clone(), bytes);
                ring.bytes += bytes;
                ring.retained += 1;
                over_budget.extend(self.within_budget(ring, &logged));
            }
            self.budget.log.store(ring.bytes, Ordering::Relaxed);
            // What a store gave back is written.
            self.durable.store(ring.emitted, Ordering::Relaxed);
        }
        drop(evicted);
        if !over_budget.is_empty() {
            self.note_evicted(&over_budget);
        }
        self
    }

    /// Tells the store's writer, if any, that `old` left the ring, from what was kept
    /// beside it (the event itself, long out of the cache, is read only for its tenant's
    /// name at its first eviction, or for a store without a journal);
    /// `evicted` is the tenant's newest evicted seq, for a journal's writer.
    fn send_evicted(&self, evicted: &mut Option<Arc<AtomicU64>>, old: &Logged, kept: Kept) {
        let Some(writer) = &self.writer else {
            return;
        };
        if kept.ord >= self.undocumented.load(Ordering::Relaxed)
            && !self.counters_due.swap(true, Ordering::Relaxed)
        {
            writer.send(Write::CountersDue);
        }
        if let Some(journal) = &self.journal {
            // One store, not a record per eviction: the writer reads it at each commit.
            evicted
                .get_or_insert_with(|| {
                    journal
                        .evictions()
                        .register(Arc::clone(&old.tenant), kept.seq)
                })
                .store(kept.seq, Ordering::Relaxed);
        } else {
            writer.send(Write::Evicted(old.tenant.to_string(), kept.seq));
        }
    }

    /// A clean stop: waits until every event appended so far is committed and the store
    /// is closed (`Store::close`); the writer then ends, so nothing may be appended after.
    pub fn close_store(&self) {
        let Some(writer) = &self.writer else { return };
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        if writer.tx.send(Write::Close(done)).is_ok() {
            let _ = wait.recv();
        }
    }

    /// Waits until every event appended so far is committed to the store (none: at once).
    pub fn flush(&self) {
        let Some(writer) = &self.writer else { return };
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        if writer.tx.send(Write::Flush(done)).is_ok() {
            let _ = wait.recv();
        }
    }

    /// The stream's id, one per runtime: a resume from another epoch is answered with
    /// `stream.reset`.
    pub fn epoch(&self) -> &str {
        &self.epoch
    }

    /// The all-projects stream's id (its seqs are stamping order, this process's own).
    pub fn all_epoch(&self) -> &str {
        &self.all_epoch
    }

    /// The newest stamping order given (every tenant's events counted); with a journal,
    /// the newest written.
    pub fn newest_ord(&self) -> u64 {
        self.ring().emitted.min(self.readable())
    }

    /// Up to `limit` retained events of every tenant stamped after `ord`, in stamping order.
    pub fn all_after(&self, ord: u64, limit: usize) -> Vec<Arc<Logged>> {
        let readable = self.readable();
        let ring = self.ring();
        let mut all: Vec<Arc<Logged>> = ring
            .tenants
            .values()
            .flat_map(|t| {
                // Each tenant's ring is in stamping order: skip what is not after `ord`.
                let from = t.events.partition_point(|e| e.ord <= ord);
                t.events
                    .range(from..)
                    .take_while(|e| e.ord <= readable)
                    .cloned()
            })
            .collect();
        drop(ring);
        all.sort_by_key(|e| e.ord);
        all.truncate(limit);
        all
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // A poisoned lock only means another thread panicked mid-push; the ring is still
        // a valid deque, so keep serving rather than take the runtime down.
        self.ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stamps, retains and broadcasts one event. Under the lock only the stamp is written:
    /// nothing is serialised there (see `Logged::text`).
    ///
    /// The frame moves into the log and comes back shared, never copied: under many
    /// concurrent calls a deep copy here (input, output, ids) was most of the time the
    /// lock was held.
    pub fn append(
        &self,
        tenant: Arc<str>,
        session_id: Option<String>,
        event: Event,
    ) -> Arc<Logged> {
        let bytes = event.approx_bytes();
        // Allocated before the lock; only its stamp is written under it.
        let mut logged = Arc::new(Logged {
            frame: Frame {
                seq: 0,
                ts: compact_str::CompactString::default(),
                session_id: session_id.map(Into::into),
                event,
            },
            text: OnceLock::new(),
            tenant,
            ord: 0,
        });
        if let Some(writer) = self.writer.as_ref().filter(|w| w.stamps) {
            if let Some(unshared) = Arc::get_mut(&mut logged) {
                unshared.frame.ts = now_rfc3339().into();
            }
            writer.send(Write::Event(logged.clone()));
            return logged;
        }
        let mut guard = self.ring();
        let ring = &mut *guard;
        // The oldest event is freed after the lock is released, not under it, with the
        // others of its batch (`Retired`).
        let evicted = if ring.retained >= self.capacity {
            self.evict(ring, &logged.tenant)
                .and_then(|old| ring.retired.push(old))
        } else {
            None
        };
        ring.emitted += 1;
        let ord = ring.emitted;
        // One lookup on the common path; the tenant's name is copied only on its first event.
        let own = match ring.tenants.get_mut(&*logged.tenant) {
            Some(own) => own,
            None => ring.tenants.entry(logged.tenant.to_string()).or_default(),
        };
        // Always unshared here: the Arc was made just above and not yet handed out.
        if let Some(unshared) = Arc::get_mut(&mut logged) {
            unshared.frame.seq = own.next_seq;
            unshared.frame.ts = now_rfc3339().into();
            unshared.ord = ord;
        }
        own.next_seq += 1;
        if own.events.is_empty() {
            ring.holding += 1;
        }
        own.push(logged.clone(), bytes);
        ring.retained += 1;
        ring.bytes += bytes;
        let over_budget = self.within_budget(ring, &logged);
        if let Some(journal) = &self.journal {
            // Broadcast once written (`EventLog::write_journal`): a write that fails
            // takes it back, and nobody must have seen it.
            journal.push(crate::store::journal::Record::Event(logged.clone()));
        } else {
            if let Some(writer) = &self.writer {
                writer.send(Write::Event(logged.clone()));
            }
            // No receivers is not an error for the log: nobody is watching yet.
            let _ = self.live.send(logged.clone());
        }
        drop(guard);
        if let Some(batch) = evicted {
            spyglass_protocol::retire::release(batch);
        }
        if !over_budget.is_empty() {
            self.note_evicted(&over_budget);
        }
        logged
    }

    /// Takes an event its store stamped into the rings and broadcasts it, when it is its
    /// tenant's next seq; an older one is left out, a newer one is a gap the caller fills
    /// from the store first.
    pub fn ingest(&self, mut logged: Arc<Logged>) -> Ingest {
        let mut guard = self.ring();
        let ring = &mut *guard;
        let next = ring.tenants.get(&*logged.tenant).map_or(1, |t| t.next_seq);
        if logged.frame.seq < next {
            return Ingest::Old;
        }
        if logged.frame.seq > next {
            return Ingest::Gap(next);
        }
        let evicted = if ring.retained >= self.capacity {
            self.evict(ring, &logged.tenant)
        } else {
            None
        };
        ring.emitted += 1;
        let ord = ring.emitted;
        if let Some(unshared) = Arc::get_mut(&mut logged) {
            unshared.ord = ord;
        } else {
            let mut copy = logged.stamped(logged.frame.seq);
            copy.ord = ord;
            logged = Arc::new(copy);
        }
        let bytes = logged.bytes();
        let own = match ring.tenants.get_mut(&*logged.tenant) {
            Some(own) => own,
            None => ring.tenants.entry(logged.tenant.to_string()).or_default(),
        };
        own.next_seq = logged.frame.seq + 1;
        if own.events.is_empty() {
            ring.holding += 1;
        }
        own.push(logged.clone(), bytes);
        ring.retained += 1;
        ring.bytes += bytes;
        let over_budget = self.within_budget(ring, &logged);
        let _ = self.live.send(logged.clone());
        drop(guard);
        drop(evicted);
        if !over_budget.is_empty() {
            self.note_evicted(&over_budget);
        }
        Ingest::Appended(logged)
    }

    /// Past the byte budget (sessions count against it too) the tenant holding the most
    /// bytes loses its oldest events, all but `keep` (the one just put in); returns them,
    /// to be freed and counted after the lock. Rare, so its Vec costs the common path
    /// nothing.
    fn within_budget(&self, ring: &mut Ring, keep: &Arc<Logged>) -> Vec<Arc<Logged>> {
        let mut over_budget = Vec::new();
        let sessions = self.budget.besides_log();
        while ring.bytes + sessions > self.budget.max && ring.retained > 1 {
            let Some(old) = self.evict_heaviest(ring, keep) else {
                break;
            };
            over_budget.push(old);
        }
        self.budget.log.store(ring.bytes, Ordering::Relaxed);
        over_budget
    }

    /// Moves a tenant's next seq up to `next` when the store no longer holds the events
    /// before it (evicted there while this log had not read them): the tenant's retained
    /// events go too, as its seqs must run on from the front; a resume from before them
    /// is told the gap.
    pub fn skip_to(&self, tenant: &str, next: u64) {
        let mut guard = self.ring();
        let ring = &mut *guard;
        let Some(own) = ring.tenants.get_mut(tenant) else {
            ring.tenants.entry(tenant.to_owned()).or_default().next_seq = next;
            return;
        };
        if own.next_seq >= next {
            return;
        }
        own.next_seq = next;
        let dropped: Vec<Arc<Logged>> = own.events.drain(..).collect();
        own.sizes.clear();
        let bytes = std::mem::take(&mut own.bytes);
        if !dropped.is_empty() {
            ring.holding -= 1;
        }
        ring.retained -= dropped.len();
        ring.bytes -= bytes;
        self.budget.log.store(ring.bytes, Ordering::Relaxed);
        drop(guard);
        drop(dropped);
    }

    /// The oldest event of the tenant holding the most bytes, never `keep` (the event just
    /// appended).
    fn evict_heaviest(&self, ring: &mut Ring, keep: &Arc<Logged>) -> Option<Arc<Logged>> {
        let tenant = ring
            .tenants
            .values_mut()
            .filter(|t| t.events.front().is_some_and(|e| !Arc::ptr_eq(e, keep)))
            .max_by_key(|t| t.bytes)?;
        let (old, kept) = tenant.pop_oldest()?;
        self.send_evicted(&mut tenant.evicted, &old, kept);
        if tenant.events.is_empty() {
            ring.holding -= 1;
        }
        ring.retained -= 1;
        ring.bytes -= kept.bytes;
        Some(old)
    }

    fn evict(&self, ring: &mut Ring, appending: &str) -> Option<Arc<Logged>> {
        let tenant = ring.victim(appending, self.capacity)?;
        let (old, kept) = tenant.pop_oldest()?;
        let emptied = tenant.events.is_empty();
        self.send_evicted(&mut tenant.evicted, &old, kept);
        // Counted with the budget's evictions: `/health` says how many events are gone,
        // whichever bound (count or bytes) let them go.
        self.budget.evicted_events.fetch_add(1, Ordering::Relaxed);
        self.budget
            .evicted_event_bytes
            .fetch_add(old.bytes() as u64, Ordering::Relaxed);
        ring.retained -= 1;
        ring.bytes -= kept.bytes;
        if emptied {
            ring.holding -= 1;
        }
        Some(old)
    }

    /// Counts events dropped for bytes, and says so in the log at the first and then at
    /// every power of two, so a flood is visible without a line per event.
    fn note_evicted(&self, evicted: &[Arc<Logged>]) {
        let bytes: usize = evicted.iter().map(|e| e.bytes()).sum();
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

    /// The seq `tenant`'s next event will get; with a journal, the seq after its newest
    /// written.
    pub fn next_seq(&self, tenant: &str) -> u64 {
        let readable = self.readable();
        self.ring()
            .tenants
            .get(tenant)
            .map_or(1, |t| t.next_readable(readable))
    }

    /// Up to `limit` retained events of every tenant, oldest first, whose seq (in their
    /// tenant) is over `since`.
    pub fn all_since(&self, since: u64, limit: usize) -> Vec<Arc<Logged>> {
        let readable = self.readable();
        let ring = self.ring();
        let mut all: Vec<Arc<Logged>> = ring
            .tenants
            .values()
            .flat_map(|t| {
                t.events
                    .iter()
                    .filter(|e| e.frame.seq > since && e.ord <= readable)
                    .cloned()
            })
            .collect();
        drop(ring);
        all.sort_by_key(|e| e.ord);
        all.truncate(limit);
        all
    }

    /// Up to `limit` of `tenant`'s retained events with seq > `since`, and the gap when
    /// the log no longer holds its `since + 1`.
    pub fn since(&self, tenant: &str, since: u64, limit: usize) -> Slice {
        let readable = self.readable();
        let ring = self.ring();
        let mut slice = Slice::default();
        let Some(ring) = ring.tenants.get(tenant) else {
            return slice;
        };
        let newest = ring.next_readable(readable).saturating_sub(1);
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
        slice.events = ring
            .events
            .iter()
            .skip(skip)
            .take(limit)
            .take_while(|e| e.ord <= readable)
            .cloned()
            .collect();
        slice
    }
}

/// What `EventLog::ingest` did with an event.
#[derive(Debug)]
pub enum Ingest {
    /// In the log and broadcast, as stored there.
    Appended(Arc<Logged>),
    /// Its seq is already in the log.
    Old,
    /// The log's next seq for its tenant is this, below the event's: fetch those first.
    Gap(u64),
}

/// A new stream id: `ep_` and 16 hex digits, random, so two runtimes started in the same
/// instant still differ.
pub fn new_epoch() -> String {
    format!("ep_{:016x}", fastrand::u64(..))
}

#[cfg(test)]
mod tests;
