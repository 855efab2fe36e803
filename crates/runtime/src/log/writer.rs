//! The store's writer thread: the log's appends, evictions and state writes sent in order,
//! grouped into commits (through the journal for `SQLite`), and the answers waiting on them.

use super::Logged;
use crate::store::journal::{Journal, JournaledStore};
#[cfg(feature = "postgres")]
use crate::store::postgres::PgStore;
use crate::store::{StateWrite, Store, StoredEvent};
use foldhash::{HashMap, HashMapExt as _};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

/// What the store's writer thread is told.
pub(super) enum Write {
    Event(Arc<Logged>),
    /// The tenant's events up to this seq left the ring.
    Evicted(String, u64),
    /// Answered once everything sent before it is committed.
    Flush(std::sync::mpsc::SyncSender<()>),
    /// A state document put or deleted, ordered with the events around it.
    State(StateWrite),
    /// `Flush` for a task: what an answer waits on before it is sent. With the event of
    /// the `execute` it answers, on a store that stamps: refused (its sender dropped)
    /// exactly when a failed commit refused that event (`Refused`).
    Ack(tokio::sync::oneshot::Sender<()>, Option<Arc<Logged>>),
    /// Nothing came for `EVICT_EVERY`: the writer's own wake-up to drop evictions.
    Tick,
    /// An event whose call's counters wait for their document was evicted: a journaled
    /// writer writes the moved counters now rather than at its next commit.
    CountersDue,
    /// A clean stop: everything sent before it is committed (a journal's segments moved
    /// into the database), the store closed (`Store::close`), then this is answered and
    /// the writer ends. The last thing a runtime asks of its store.
    Close(std::sync::mpsc::SyncSender<()>),
}

/// What a journaled writer runs before each commit: the runtime writing its moved
/// counters (`Runtime::write_moved_counters`) and its log the journal
/// (`EventLog::write_journal`), set once the runtime exists.
/// It says whether it wrote the journal (false once the runtime is gone: the writer
/// then writes it itself).
pub type BeforeCommit = Arc<OnceLock<Box<dyn Fn() -> bool + Send + Sync>>>;

/// How often a journaled store's writer commits what the journal wrote: answers wait for
/// the journal, so this sets only how much a reopen replays.
pub(super) const COMMIT_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// How often evicted events leave the file: at most this much later than the rings.
pub(super) const EVICT_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Events, and their bytes, a failed commit keeps for the next one at most (the oldest
/// go past either).
pub(super) const MAX_PENDING: usize = 65_536;
pub(super) const MAX_PENDING_BYTES: usize = 64 * 1024 * 1024;

/// How many of the oldest of these waiting events (their sizes, oldest first) must go to
/// keep the rest within `MAX_PENDING` and `MAX_PENDING_BYTES`.
pub(super) fn excess(sizes: impl DoubleEndedIterator<Item = usize> + ExactSizeIterator) -> usize {
    let total = sizes.len();
    let (mut kept, mut bytes) = (0, 0usize);
    for size in sizes.rev() {
        if kept == MAX_PENDING || bytes + size > MAX_PENDING_BYTES {
            break;
        }
        kept += 1;
        bytes += size;
    }
    total - kept
}

/// The most events one transaction takes; more wait for the next.
pub(super) const MAX_BATCH: usize = 4096;

/// The sending end of a store's writer thread (`StoreWriter::spawn`).
pub struct StoreWriter {
    pub(super) tx: std::sync::mpsc::Sender<Write>,
    pub(super) health: Arc<StoreHealth>,
    /// The store gives events their seqs (Postgres): the log sends them unstamped.
    pub(super) stamps: bool,
    /// Run by a journaled writer before each commit.
    pub(super) before_commit: BeforeCommit,
    /// The `execute` calls a stamping store's failed commits refused.
    pub(super) refused: Arc<Refused>,
}

/// The `execute` calls (their `tool.called` events) a failed commit of a store that
/// stamps refused: never committed, never on the stream, their answers 503, and each
/// taken back by its answer (`Runtime::take_back_call`). Only the answer's task still
/// holds such an event, so each is held weakly: one whose answer is gone goes with the
/// next refusal.
#[derive(Debug, Default)]
pub(super) struct Refused(Mutex<Vec<Weak<Logged>>>);

impl Refused {
    fn calls(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Logged>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a failed commit refused `logged`.
    pub(super) fn holds(&self, logged: &Arc<Logged>) -> bool {
        let calls = self.calls();
        !calls.is_empty()
            && calls
                .iter()
                .any(|held| held.as_ptr() == Arc::as_ptr(logged))
    }

    /// Whether `logged` is the `approval.requested` of a call a failed commit refused
    /// (stamped after it, so possibly in the next commit): it goes with its call.
    fn holds_approval_of(&self, logged: &Logged) -> bool {
        let spyglass_protocol::Event::ApprovalRequested(held) = &logged.frame.event else {
            return false;
        };
        self.calls().iter().filter_map(Weak::upgrade).any(|call| {
            matches!(&call.frame.event, spyglass_protocol::Event::ToolCalled(c) if c.call_id == held.call_id)
        })
    }

    /// A failed commit's `execute` calls, and the approvals they asked for, leave
    /// `unstamped` and are refused; the rest stays for the next commit.
    fn refuse(&self, unstamped: &mut Vec<Arc<Logged>>) {
        use spyglass_protocol::Event;
        use spyglass_protocol::events::CallSource;
        let executes: Vec<String> = unstamped
            .iter()
            .filter_map(|logged| match &logged.frame.event {
                Event::ToolCalled(call) if call.source == CallSource::Execute => {
                    Some(call.call_id.to_string())
                }
                _ => None,
            })
            .collect();
        if executes.is_empty() {
            return;
        }
        let refused = |logged: &Arc<Logged>| match &logged.frame.event {
            Event::ToolCalled(call) => call.source == CallSource::Execute,
            Event::ApprovalRequested(held) => executes.iter().any(|id| *id == *held.call_id),
            _ => false,
        };
        let (gone, kept): (Vec<_>, Vec<_>) = unstamped.drain(..).partition(refused);
        *unstamped = kept;
        let mut calls = self.calls();
        calls.retain(|held| held.strong_count() > 0);
        calls.extend(
            gone.iter()
                .filter(|logged| matches!(logged.frame.event, Event::ToolCalled(_)))
                .map(Arc::downgrade),
        );
        drop(calls);
        tracing::warn!(
            calls = gone.len(),
            "store write failed: the calls it held were refused and taken back"
        );
    }
}

/// What a store that stamps committed: the events with their seqs, for the runtime's
/// follower to take into the log, and the answers waiting on that commit, which the
/// follower lets go once the events are in (a client reads its own writes).
pub struct Committed {
    pub events: Vec<Arc<Logged>>,
    pub acks: Vec<tokio::sync::oneshot::Sender<()>>,
}

/// How the store's commits are going, for `/health` and for the answer a failed commit
/// gets: where it lives, commits made and failed, and the newest failure's reason.
#[derive(Debug, Default)]
pub struct StoreHealth {
    pub path: String,
    commits: AtomicU64,
    failures: AtomicU64,
    /// Whether `last_error` is set: an answer's journal write checks this, not the lock.
    failing: std::sync::atomic::AtomicBool,
    last_error: Mutex<Option<String>>,
}

/// `StoreHealth` as `/health` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoreStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `ok`, or `failing` while the newest commit failed.
    pub state: &'static str,
    pub commits: u64,
    pub failed_commits: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl StoreHealth {
    pub(super) fn committed(&self) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.failing.store(false, Ordering::Relaxed);
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// A write went through after a failure: the store is no longer failing. Every answer
    /// calls this, so it only reads the flag unless it is set (a swap would write the
    /// shared line from every worker at every answer).
    pub(super) fn recovered(&self) {
        if self.failing.load(Ordering::Relaxed) && self.failing.swap(false, Ordering::Relaxed) {
            *self
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = None;
        }
    }

    pub(super) fn failed(&self, reason: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.failing.store(true, Ordering::Relaxed);
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(reason);
    }

    /// Whether the newest write failed.
    pub fn failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }

    /// The newest commit's failure, while it is the newest commit.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn status(&self) -> StoreStatus {
        let last_error = self.last_error();
        StoreStatus {
            path: Some(self.path.clone()),
            state: if last_error.is_some() {
                "failing"
            } else {
                "ok"
            },
            commits: self.commits.load(Ordering::Relaxed),
            failed_commits: self.failures.load(Ordering::Relaxed),
            last_error,
        }
    }
}

/// The engine a writer thread commits to, as what it writes with.
pub(super) enum Engine {
    /// A store given events the log stamped (`Store::append`).
    Stamped(Arc<dyn Store>),
    /// Postgres, which stamps each event in the commit (`PgStore::append_stamping`); what
    /// each commit stamped goes to the runtime's follower.
    #[cfg(feature = "postgres")]
    Stamping(Arc<PgStore>, tokio::sync::mpsc::UnboundedSender<Committed>),
}

impl Engine {
    /// `Store::close` of the engine's store, its failure logged: a clean stop goes on.
    fn close(&self) {
        let closed = match self {
            Engine::Stamped(store) => store.close(),
            #[cfg(feature = "postgres")]
            Engine::Stamping(store, _) => store.close(),
        };
        if let Err(err) = closed {
            tracing::error!(%err, "store close failed");
        }
    }

    /// Whether the store gives events their seqs: the log then sends them unstamped.
    fn stamps(&self) -> bool {
        match self {
            Engine::Stamped(_) => false,
            #[cfg(feature = "postgres")]
            Engine::Stamping(..) => true,
        }
    }

    fn describe(&self) -> String {
        match self {
            Engine::Stamped(store) => store.describe(),
            #[cfg(feature = "postgres")]
            Engine::Stamping(store, _) => store.describe(),
        }
    }
}

impl StoreWriter {
    /// Starts the thread that commits to `store` what the log sends it.
    pub fn spawn(store: Arc<dyn Store>) -> std::io::Result<StoreWriter> {
        Self::spawn_engine(Engine::Stamped(store))
    }

    /// `spawn`, for Postgres, which stamps: what each commit stamped goes to `committed`.
    #[cfg(feature = "postgres")]
    pub fn spawn_stamping(
        store: Arc<PgStore>,
        committed: tokio::sync::mpsc::UnboundedSender<Committed>,
    ) -> std::io::Result<StoreWriter> {
        Self::spawn_engine(Engine::Stamping(store, committed))
    }

    fn spawn_engine(engine: Engine) -> std::io::Result<StoreWriter> {
        let (tx, rx) = std::sync::mpsc::channel();
        let health = Arc::new(StoreHealth {
            path: engine.describe(),
            ..StoreHealth::default()
        });
        let stamps = engine.stamps();
        let writing = Arc::clone(&health);
        let refused = Arc::new(Refused::default());
        let refusing = Arc::clone(&refused);
        std::thread::Builder::new()
            .name("spyglass-store".into())
            .spawn(move || write_loop(rx, &engine, &writing, &refusing))?;
        Ok(StoreWriter {
            tx,
            health,
            stamps,
            before_commit: BeforeCommit::default(),
            refused,
        })
    }

    /// Starts the thread that commits to `store` what `journal` has written, every
    /// `COMMIT_EVERY` and at each flush; nothing waits on it but flushes.
    pub fn spawn_journaled(
        store: Arc<dyn JournaledStore>,
        journal: Arc<Journal>,
    ) -> std::io::Result<StoreWriter> {
        let (tx, rx) = std::sync::mpsc::channel();
        let health = Arc::new(StoreHealth {
            path: store.describe(),
            ..StoreHealth::default()
        });
        let writing = Arc::clone(&health);
        let before_commit = BeforeCommit::default();
        let before = Arc::clone(&before_commit);
        std::thread::Builder::new()
            .name("spyglass-store".into())
            .spawn(move || journal_loop(&rx, &*store, &journal, &writing, &before))?;
        Ok(StoreWriter {
            tx,
            health,
            stamps: false,
            before_commit,
            refused: Arc::default(),
        })
    }

    pub(super) fn send(&self, write: Write) {
        // A writer gone (its thread ended) has logged why; the log goes on in memory.
        let _ = self.tx.send(write);
    }
}

/// A failed commit's documents and evictions, put back for the next one; a document
/// written again since keeps its newer write.
pub(super) fn keep_for_next(
    state: &mut HashMap<(String, String, String), StateWrite>,
    evicted: &mut HashMap<String, u64>,
    writes: Vec<StateWrite>,
    evicted_upto: Vec<(String, u64)>,
) {
    for write in writes {
        let (StateWrite::Put(r) | StateWrite::Delete(r)) = &write;
        state
            .entry((r.kind.clone(), r.tenant.clone(), r.key.clone()))
            .or_insert(write);
    }
    for (tenant, seq) in evicted_upto {
        let upto = evicted.entry(tenant).or_default();
        *upto = (*upto).max(seq);
    }
}

/// Commits events as they come, grouped: whatever queued while the last transaction ran
/// goes in the next one, so a burst of calls costs one commit, not one each.
// Runs on its own thread, which owns the receiver for its whole life.
#[expect(clippy::needless_pass_by_value)]
pub(super) fn write_loop(
    rx: std::sync::mpsc::Receiver<Write>,
    engine: &Engine,
    health: &StoreHealth,
    refused: &Refused,
) {
    let stamps = engine.stamps();
    let mut batch = Vec::new();
    // A stamping store's events, as the log sent them (seq 0).
    let mut unstamped: Vec<Arc<Logged>> = Vec::new();
    let mut evicted: HashMap<String, u64> = HashMap::new();
    let mut flushes = Vec::new();
    let mut acks = Vec::new();
    // The last write of each document in the batch: a burst of calls on one session
    // commits its counters once.
    let mut state: HashMap<(String, String, String), StateWrite> = HashMap::new();
    // Evictions leave the file in ranges, every `EVICT_EVERY`, not with each batch: a
    // delete per commit rewrote the oldest pages (and the free list) on every call.
    let mut last_evicted = std::time::Instant::now();
    loop {
        let first = if evicted.is_empty() {
            rx.recv().map_err(|_| ())
        } else {
            // Evictions waiting: a quiet runtime still drops them from the file soon.
            match rx.recv_timeout(EVICT_EVERY.saturating_sub(last_evicted.elapsed())) {
                Ok(msg) => Ok(Some(msg)),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Ok(None),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(()),
            }
            .map(|msg| msg.unwrap_or(Write::Tick))
        };
        let Ok(first) = first else { break };
        let mut closing = false;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                // An approval its refused call asked for goes with it.
                Write::Event(logged) if stamps && refused.holds_approval_of(&logged) => {}
                Write::Event(logged) if stamps => unstamped.push(logged),
                Write::Event(logged) => batch.push(StoredEvent {
                    tenant: logged.tenant.to_string(),
                    seq: logged.frame.seq,
                    text: logged.text().to_owned(),
                }),
                Write::Evicted(tenant, seq) => {
                    let upto = evicted.entry(tenant).or_default();
                    *upto = (*upto).max(seq);
                }
                Write::Flush(done) => flushes.push(done),
                Write::Close(done) => {
                    flushes.push(done);
                    closing = true;
                }
                Write::Tick | Write::CountersDue => {}
                // The answer of a call an earlier commit refused is refused too.
                Write::Ack(done, Some(call)) if stamps && refused.holds(&call) => drop(done),
                Write::Ack(done, call) => acks.push((done, call)),
                Write::State(write) => {
                    let (StateWrite::Put(r) | StateWrite::Delete(r)) = &write;
                    state.insert((r.kind.clone(), r.tenant.clone(), r.key.clone()), write);
                }
            }
            if !closing && batch.len().max(unstamped.len()) < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        let evicted_upto: Vec<(String, u64)> =
            if !flushes.is_empty() || last_evicted.elapsed() >= EVICT_EVERY {
                last_evicted = std::time::Instant::now();
                evicted.drain().collect()
            } else {
                Vec::new()
            };
        let writes: Vec<StateWrite> = state.drain().map(|(_, write)| write).collect();
        let result = match engine {
            Engine::Stamped(store) => store.append(&batch, &evicted_upto, &writes),
            #[cfg(feature = "postgres")]
            Engine::Stamping(store, follower) => store
                .append_stamping(&unstamped, &evicted_upto, &writes)
                .map(|seqs| {
                    let events = unstamped
                        .drain(..)
                        .zip(seqs)
                        .map(|(logged, seq)| Arc::new(logged.stamped(seq)))
                        .collect();
                    let acks = acks.drain(..).map(|(done, _)| done).collect();
                    if let Err(lost) = follower.send(Committed { events, acks }) {
                        // No follower (the runtime is going): nobody reads the log.
                        for done in lost.0.acks {
                            let _ = done.send(());
                        }
                    }
                }),
        };
        match result {
            Ok(()) => {
                health.committed();
                for (done, _) in acks.drain(..) {
                    let _ = done.send(());
                }
                batch.clear();
                unstamped.clear();
            }
            // An answer waiting on this commit is refused (its sender dropped): what
            // was not kept is never acknowledged as kept. The writes stay for the next
            // commit, so an answer after this one is acknowledged only once they are in
            // too (before, a lone acknowledgement in the next batch committed nothing
            // and was answered as if the lost writes were kept).
            Err(err) => {
                tracing::error!(%err, events = batch.len() + unstamped.len(), "store write failed; retried with the next commit");
                health.failed(err.to_string());
                // On a store that stamps, an `execute` is refused whole: its event is not
                // kept for the next commit, and its answer takes it back. The rest stays.
                if stamps {
                    refused.refuse(&mut unstamped);
                    settle_acks(engine, &mut acks, refused);
                }
                acks.clear();
                keep_for_next(&mut state, &mut evicted, writes, evicted_upto);
                // Bounded while the store stays away, by count and by bytes (a client
                // sends the events' text): the oldest events waiting go.
                let over = excess(batch.iter().map(|e| e.text.len()));
                let over_unstamped = excess(unstamped.iter().map(|e| e.bytes()));
                if over + over_unstamped > 0 {
                    tracing::warn!(
                        dropped = over + over_unstamped,
                        "store away: oldest events waiting for it dropped"
                    );
                    batch.drain(..over);
                    unstamped.drain(..over_unstamped);
                }
            }
        }
        if closing {
            engine.close();
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
        if closing {
            break;
        }
    }
}

/// A failed commit's answers on a store that stamps: the one of a call an earlier commit
/// took is let go once the follower has that commit in the log (a client reads its own
/// writes); the rest are refused, by the caller.
fn settle_acks(
    engine: &Engine,
    acks: &mut Vec<(tokio::sync::oneshot::Sender<()>, Option<Arc<Logged>>)>,
    refused: &Refused,
) {
    #[cfg(feature = "postgres")]
    if let Engine::Stamping(_, follower) = engine {
        let (taken, _): (Vec<_>, Vec<_>) = acks
            .drain(..)
            .partition(|(_, call)| call.as_ref().is_some_and(|call| !refused.holds(call)));
        let acks = taken.into_iter().map(|(done, _)| done).collect();
        if let Err(lost) = follower.send(Committed {
            events: Vec::new(),
            acks,
        }) {
            for done in lost.0.acks {
                let _ = done.send(());
            }
        }
    }
    #[cfg(not(feature = "postgres"))]
    let _ = (engine, acks, refused);
}

/// Raises `tenant`'s value in `map` to at least `value`; its name is copied only on its
/// first entry (this runs for every event and every eviction).
pub(super) fn raise(map: &mut HashMap<String, u64>, tenant: &str, value: u64) {
    match map.get_mut(tenant) {
        Some(have) => *have = (*have).max(value),
        None => {
            map.insert(tenant.to_owned(), value);
        }
    }
}

/// Commits to the store what the journal wrote, every `COMMIT_EVERY` and at each flush:
/// the documents, each tenant's next seq and the evictions. Events stay in the journal
/// while the rings may hold them: a closed segment none of whose events is retained any
/// more is deleted; past the journal's bound (`Journal::keep_closed`), the oldest closed
/// segment's retained events move into the database first, and at a clean close all of
/// them do. What a failed commit held goes with the next one; its segments stay until
/// then.
pub(super) fn journal_loop(
    rx: &std::sync::mpsc::Receiver<Write>,
    store: &dyn JournaledStore,
    journal: &Journal,
    health: &StoreHealth,
    before_commit: &BeforeCommit,
) {
    use crate::store::journal::Record;
    let mut state: HashMap<(String, String, String), StateWrite> = HashMap::new();
    // Evictions not yet committed (the database holds only moved events), and all of
    // them so far: an event is retained while its seq is past its tenant's.
    let mut evicted: HashMap<String, u64> = HashMap::new();
    let mut evicted_total: HashMap<String, u64> = HashMap::new();
    let mut next_seqs: HashMap<String, u64> = HashMap::new();
    // Each tenant's newest seq in the segment being written, and in each closed one.
    let mut writing: HashMap<String, u64> = HashMap::new();
    let mut closed: VecDeque<(u64, HashMap<String, u64>)> = VecDeque::new();
    // Events moved out of segments, and those segments, until their commit.
    let mut moved: Vec<StoredEvent> = Vec::new();
    let mut moving: Vec<u64> = Vec::new();
    let mut flushes = Vec::new();
    let mut records = Vec::new();
    let mut last_evicted = std::time::Instant::now();
    let mut deadline = std::time::Instant::now() + COMMIT_EVERY;
    loop {
        let closing =
            match rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
                Ok(Write::Flush(done)) => {
                    flushes.push(done);
                    false
                }
                Ok(Write::Ack(done, _)) => {
                    let _ = done.send(());
                    continue;
                }
                Ok(Write::Close(done)) => {
                    flushes.push(done);
                    true
                }
                Ok(Write::CountersDue) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => false,
                Ok(_) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => true,
            };
        deadline = std::time::Instant::now() + COMMIT_EVERY;
        // The counters calls moved, after the events they count: written with them, and
        // what no answer waited for (a sweep's evictions, an expiry) is written now, by
        // the runtime's log (which broadcasts what was written and takes back what was
        // not); a journal without one writes it itself.
        let written = before_commit.get().is_some_and(|write| write());
        if !written && let Err(err) = journal.write_out() {
            tracing::error!(%err, "store journal write failed; retried with the next");
            health.failed(err);
        }
        journal.take_written(&mut records);
        // What left the rings up to now (an event evicted before it was written is in no
        // closed segment yet, so this never deletes one still holding a retained event).
        journal.evictions().each(|tenant, upto| {
            if evicted_total.get(tenant).is_none_or(|have| upto > *have) {
                raise(&mut evicted, tenant, upto);
                raise(&mut evicted_total, tenant, upto);
            }
        });
        for record in records.drain(..) {
            match record {
                Record::Event(logged) => {
                    let seq = logged.frame.seq;
                    raise(&mut writing, &logged.tenant, seq);
                    raise(&mut next_seqs, &logged.tenant, seq + 1);
                }
                Record::State(write) => {
                    let (StateWrite::Put(r) | StateWrite::Delete(r)) = &write;
                    state.insert((r.kind.clone(), r.tenant.clone(), r.key.clone()), write);
                }
                Record::SegmentEnd(number) => {
                    closed.push_back((number, std::mem::take(&mut writing)));
                }
            }
        }
        let retained = |tenant: &str, seq: u64| evicted_total.get(tenant).is_none_or(|e| seq > *e);
        // Past the bound, the oldest closed segments' retained events move; at a clean
        // close, every segment's do. Segments move oldest first (a replay skips what the table has by its newest
        // seq): one that cannot be read back stays with every newer one, for the next
        // commit or the next open.
        let mut unread = false;
        while closed.len() > journal.keep_closed() || (closing && !closed.is_empty()) {
            let Some((number, newest)) = closed.pop_front() else {
                break;
            };
            if let Some(events) = journal.retained_events(number, retained) {
                moved.extend(events);
                moving.push(number);
            } else {
                unread = true;
                closed.push_front((number, newest));
                break;
            }
        }
        if closing && !unread {
            match journal.retained_events(journal.current(), retained) {
                Some(events) => moved.extend(events),
                None => unread = true,
            }
        }
        let evicted_upto: Vec<(String, u64)> =
            if closing || !flushes.is_empty() || last_evicted.elapsed() >= EVICT_EVERY {
                last_evicted = std::time::Instant::now();
                evicted.drain().collect()
            } else {
                Vec::new()
            };
        let writes: Vec<StateWrite> = state.drain().map(|(_, write)| write).collect();
        let seqs: Vec<(String, u64)> = next_seqs.iter().map(|(t, n)| (t.clone(), *n)).collect();
        let nothing =
            moved.is_empty() && seqs.is_empty() && evicted_upto.is_empty() && writes.is_empty();
        match store.append_journaled(&moved, &seqs, &evicted_upto, &writes) {
            Ok(()) => {
                if !nothing {
                    health.committed();
                }
                moved.clear();
                next_seqs.clear();
                for number in moving.drain(..) {
                    journal.remove(number);
                }
                // Closed segments whose events have all left the rings go.
                closed.retain(|(number, newest)| {
                    let holds = newest.iter().any(|(t, s)| retained(t, *s));
                    if !holds {
                        journal.remove(*number);
                    }
                    holds
                });
                if closing && !unread {
                    journal.clear();
                }
            }
            Err(err) => {
                tracing::error!(%err, moved = moved.len(), "store write failed; retried with the next commit");
                health.failed(err.to_string());
                keep_for_next(&mut state, &mut evicted, writes, evicted_upto);
            }
        }
        if closing && let Err(err) = store.close() {
            tracing::error!(%err, "store close failed");
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
        if closing {
            break;
        }
    }
}
