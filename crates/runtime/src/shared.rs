//! A runtime on a store shared with other runtimes (Postgres): opening on it, the link to
//! the store (`SharedLink`), the follower (`Replica`) that takes every runtime's committed
//! events into this one's log, and the decisions asked of the store.
//!
//! Every runtime on the database is a replica of the same state. The store assigns seqs
//! (so there is one stream), and decides what must happen once: which stateful entry a
//! call gets (`claim_for`), which decision on an approval stands (`decide_any`), which
//! expiry. Each runtime keeps its own copy of the rest, brought up to date by the events
//! the others commit: a session another created is read from its document on its
//! `session.created` (or on first use here), and its calls, replays and close are applied
//! as their events arrive.

use super::approvals::Verdict;
use super::log::{Committed, Ingest, Logged};
use super::mocks::{Claim, LIST_TOOLS};
use super::sessions::Session;
use super::{ApiErrorWithStatus, Inner, Runtime, RuntimeConfig, STORE_UNAVAILABLE, lock, persist};
use crate::store::postgres::{Decided, PgStore};
use crate::store::{Store, StoreError};
use spyglass_protocol::envelope::codes;
use spyglass_protocol::rest::ApprovalView;
use spyglass_protocol::{Event, RawJson};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// How often the follower asks the store for each tenant's newest seq, besides the
/// notifications: a notification lost with a dropped connection is caught within this.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// After a notification (another replica commits at most one in
/// `postgres::NOTIFY_EVERY` with one), the follower reads every tenant's head this often
/// for `FOLLOW_HOT`, so the commits between notifications are seen as soon.
const FOLLOW_EVERY: Duration = Duration::from_millis(20);
const FOLLOW_HOT: Duration = Duration::from_millis(250);

/// How often pending approvals past their expiry are expired (once, by the store).
const EXPIRE_EVERY: Duration = Duration::from_millis(250);

/// Events read from the store in one go while catching up: a page is held whole, and a
/// client decides how big each event is (up to the body limit, 1 MiB by default), so a
/// page stays small; a long catch-up reads page after page.
const CATCH_UP_PAGE: usize = 64;

/// A store error as a request's answer.
pub(crate) fn unavailable(err: &StoreError) -> ApiErrorWithStatus {
    ApiErrorWithStatus::new(
        503,
        STORE_UNAVAILABLE,
        format!("the runtime could not reach its store: {err}"),
    )
}

/// Opens a runtime on a shared store: the stream and state as stored, a writer whose
/// commits the store stamps, and the follower and expiry tasks (on the current tokio
/// runtime; they end when the runtime is dropped).
pub async fn open_shared(
    config: RuntimeConfig,
    store: Arc<PgStore>,
) -> Result<Runtime, StoreError> {
    let retained = config.retained_events.max(1);
    let stream = store
        .open_stream(&super::log::new_epoch(), retained)
        .await?;
    let restored: Vec<Logged> = stream
        .events
        .into_iter()
        .filter_map(|e| Logged::restore(&e.text, e.tenant))
        .collect();
    let state = store.open_state().await?;
    let (committed_tx, committed_rx) = mpsc::unbounded_channel();
    let path = store.describe();
    let writer = super::log::StoreWriter::spawn_stamping(Arc::clone(&store), committed_tx)
        .map_err(|source| StoreError::Thread { path, source })?;
    let runtime = Runtime::with_log(config, move |config, budget| {
        super::log::EventLog::new(config.retained_events, config.subscriber_queue, budget)
            .continuing(stream.epoch, stream.next_seqs)
            .with_writer(writer)
            .with_history(restored)
    });
    runtime.restore_state(state);
    let _ = runtime.inner.shared.0.set(store.clone());
    let notified = store.listen().await?;
    let weak = Arc::downgrade(&runtime.inner);
    tokio::spawn(follow(weak.clone(), store, committed_rx, notified));
    tokio::spawn(expire(weak));
    Ok(runtime)
}

/// The store this runtime shares with others, set once when it opens on one, and the
/// stateful entries it claimed there for calls the store then refused (`give_back`).
pub(crate) struct SharedLink(std::sync::OnceLock<Arc<PgStore>>, Mutex<GivenBack>);

/// Entries claimed for calls taken back, by tenant, session and tool, lowest first.
type GivenBack = HashMap<(String, String, String), Vec<u32>>;

impl SharedLink {
    pub(crate) fn new() -> Self {
        SharedLink(std::sync::OnceLock::new(), Mutex::new(HashMap::new()))
    }

    /// A call served stateful `entry` of `tool`, claimed in the store, was taken back: the
    /// store still counts the entry taken (a commit that failed cannot be trusted to give
    /// it back), so it waits here for this session's next call of the tool on this
    /// runtime (`take_given_back`), which is served it as the refused call was.
    pub(crate) fn give_back(&self, session: &Arc<Mutex<Session>>, tool: &str, entry: u32) {
        let key = {
            let s = lock(session);
            (s.tenant.to_string(), s.id.clone(), tool.to_owned())
        };
        let mut given = lock(&self.1);
        let entries = given.entry(key).or_default();
        let at = entries.partition_point(|held| *held < entry);
        entries.insert(at, entry);
    }

    /// The lowest entry given back for this session's `tool`, now this call's.
    fn take_given_back(&self, tenant: &str, session: &str, tool: &str) -> Option<u32> {
        let mut given = lock(&self.1);
        if given.is_empty() {
            return None;
        }
        let key = (tenant.to_owned(), session.to_owned(), tool.to_owned());
        let entries = given.get_mut(&key)?;
        let entry = (!entries.is_empty()).then(|| entries.remove(0));
        if entries.is_empty() {
            given.remove(&key);
        }
        entry
    }

    /// A closed session's entries given back go with it.
    pub(crate) fn forget_given_back(&self, tenant: &str, session: &str) {
        let mut given = lock(&self.1);
        if !given.is_empty() {
            given.retain(|(t, s, _), _| t != tenant || s != session);
        }
    }

    /// The store shared with other runtimes, if this runtime is on one.
    pub(crate) fn store(&self) -> Option<&Arc<PgStore>> {
        self.0.get()
    }

    /// Whether this runtime is on a store shared with other runtimes.
    pub(crate) fn is_shared(&self) -> bool {
        self.0.get().is_some()
    }

    /// An eval run another runtime on the shared store started, as its document was last
    /// written (at its start and its end); `None` without a shared store or such a run.
    pub(crate) async fn eval_run(
        &self,
        tenant: &str,
        run_id: &str,
    ) -> Result<Option<spyglass_protocol::rest::EvalRunDetail>, ApiErrorWithStatus> {
        let Some(store) = self.store() else {
            return Ok(None);
        };
        let record = store
            .record(persist::EVAL_RUN, tenant, run_id)
            .await
            .map_err(|err| unavailable(&err))?;
        Ok(record.as_ref().and_then(persist::decode))
    }
}

impl Runtime {
    /// The entry of a stateful mock a store shared by several runtimes gives this call,
    /// taken before the call is dispatched: `None` without such a store, or when the call
    /// reaches no stateful mock (another tool, a policy that holds or denies it, a closed
    /// session). A store that cannot be reached is 503 `store_unavailable`.
    pub(crate) async fn claim_for(
        &self,
        session: &Arc<Mutex<Session>>,
        tool: &str,
        input: &RawJson,
    ) -> Result<Claim, ApiErrorWithStatus> {
        let Some(store) = self.inner.shared.store() else {
            return Ok(Claim::Local);
        };
        if tool == LIST_TOOLS || !self.inner.config.test_mode {
            return Ok(Claim::Local);
        }
        if !matches!(
            self.inner.config.policy.evaluate_raw(tool, input),
            Ok(crate::policy::Verdict::Allow)
        ) {
            return Ok(Claim::Local);
        }
        let (tenant, id, total) = {
            let s = lock(session);
            if s.closed {
                return Ok(Claim::Local);
            }
            match s.mocks.slots.get(tool).map(|slot| &slot.fixture) {
                Some(crate::mocks::Fixture::Stateful(entries)) if !entries.is_empty() => {
                    (s.tenant.clone(), s.id.clone(), entries.len())
                }
                _ => return Ok(Claim::Local),
            }
        };
        if let Some(entry) = self.inner.shared.take_given_back(&tenant, &id, tool) {
            return Ok(Claim::Entry(entry));
        }
        let total = u32::try_from(total).unwrap_or(u32::MAX);
        store
            .claim(&tenant, &id, tool, total)
            .await
            .map(|entry| entry.map_or(Claim::Exhausted, Claim::Entry))
            .map_err(|err| unavailable(&err))
    }

    /// Makes sure a session another runtime created is here before it is used: read from
    /// its documents when it is not. Without a shared store, or when it is here, nothing.
    pub(crate) async fn adopt_if_missing(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<(), ApiErrorWithStatus> {
        let Some(store) = self.inner.shared.store() else {
            return Ok(());
        };
        if self.session(tenant, id).is_ok() {
            return Ok(());
        }
        Replica { rt: self, store }
            .adopt_session(tenant, id)
            .await
            .map_err(|err| unavailable(&err))
    }

    /// `DELETE /v1/sessions/:id` on any runtime. On a shared store the session's pending
    /// approvals are expired there first, each only where no decision came before it
    /// (one approved on another runtime at the same moment stays approved: its replay
    /// then finds the session closed).
    pub async fn close_any(&self, tenant: &str, id: &str) -> Result<(), ApiErrorWithStatus> {
        if let Some(store) = self.inner.shared.store() {
            self.adopt_if_missing(tenant, id).await?;
            // Every approval committed before this request is known here first, wherever
            // it was queued.
            {
                let _applying = self.inner.following.lock().await;
                Replica { rt: self, store }.catch_up(tenant).await;
            }
            let pending = lock(&self.inner.approvals).pending_of_session(tenant, id);
            for approval in pending {
                let decided = store
                    .decide(tenant, &approval, "expired", i64::MAX)
                    .await
                    .map_err(|err| unavailable(&err))?;
                if decided == Decided::Won {
                    self.expire_one(tenant, &approval, Some("session closed"));
                }
            }
            self.inner.shared.forget_given_back(tenant, id);
        }
        self.close_session(tenant, id)
    }

    /// `POST /v1/approvals/:id/approve|deny` on any runtime: decided here alone, or, on a
    /// shared store, by the store once for every runtime: the first decision before the
    /// expiry stands, a second anywhere is 409, one after the expiry 410; the runtime
    /// whose decision stood replays an approved call, exactly once.
    pub async fn decide_any(
        &self,
        tenant: &str,
        approval_id: &str,
        verdict: Verdict,
        by: Option<String>,
        note: Option<String>,
    ) -> Result<ApprovalView, ApiErrorWithStatus> {
        let Some(store) = self.inner.shared.store() else {
            return self.decide(tenant, approval_id, verdict, by, note);
        };
        let known = lock(&self.inner.approvals)
            .facts(tenant, approval_id)
            .is_some();
        if !known {
            Replica { rt: self, store }
                .adopt_approval(tenant, approval_id)
                .await
                .map_err(|err| unavailable(&err))?;
        }
        let facts = lock(&self.inner.approvals).facts(tenant, approval_id);
        let Some((expires_ms, session_id, tool, input)) = facts else {
            return Err(ApiErrorWithStatus::not_found(format!(
                "no approval {approval_id}"
            )));
        };
        let decision = match verdict {
            Verdict::Approve => "approved",
            Verdict::Deny => "denied",
        };
        let decided = store
            .decide(tenant, approval_id, decision, expires_ms)
            .await
            .map_err(|err| unavailable(&err))?;
        match decided {
            Decided::Won => {}
            Decided::Expired => {
                return Err(ApiErrorWithStatus::new(
                    410,
                    codes::EXPIRED,
                    format!("approval {approval_id} expired"),
                ));
            }
            Decided::Already(earlier) if earlier == "expired" => {
                return Err(ApiErrorWithStatus::new(
                    410,
                    codes::EXPIRED,
                    format!("approval {approval_id} expired"),
                ));
            }
            Decided::Already(earlier) => {
                return Err(ApiErrorWithStatus::new(
                    409,
                    codes::ALREADY_DECIDED,
                    format!("approval {approval_id} was already {earlier}"),
                ));
            }
        }
        let claim = if verdict == Verdict::Approve {
            self.adopt_if_missing(tenant, &session_id).await?;
            match self.session(tenant, &session_id) {
                Ok(session) => self.claim_for(&session, &tool, &input).await?,
                Err(_) => Claim::Local,
            }
        } else {
            Claim::Local
        };
        self.apply_decision(tenant, approval_id, verdict, by, note, Some(claim))
    }
}

/// The follower: takes this runtime's commits (with the answers waiting on them) and
/// every tenant another runtime notifies of into the log, in the store's seq order,
/// fetching from the store what it has not seen; applies what others did.
async fn follow(
    rt: Weak<Inner>,
    store: Arc<PgStore>,
    mut committed: mpsc::UnboundedReceiver<Committed>,
    mut notified: mpsc::UnboundedReceiver<Option<String>>,
) {
    let mut poll = tokio::time::interval(FOLLOW_EVERY);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Until when the heads are read every tick (after a notification); else every
    // `POLL_EVERY`.
    let mut hot_until = tokio::time::Instant::now();
    let mut last_poll = tokio::time::Instant::now();
    loop {
        tokio::select! {
            commit = committed.recv() => {
                let Some(commit) = commit else { return };
                let Some(rt) = upgrade(&rt) else { return };
                let _applying = rt.inner.following.lock().await;
                let replica = Replica { rt: &rt, store: &store };
                for logged in commit.events {
                    replica.take_in(logged).await;
                }
                for done in commit.acks {
                    let _ = done.send(());
                }
            }
            tenant = notified.recv() => {
                let Some(rt) = upgrade(&rt) else { return };
                let _applying = rt.inner.following.lock().await;
                hot_until = tokio::time::Instant::now() + FOLLOW_HOT;
                let replica = Replica { rt: &rt, store: &store };
                match tenant {
                    Some(Some(tenant)) => replica.catch_up(&tenant).await,
                    // Reconnected, or the listener is gone: look at every tenant.
                    Some(None) | None => replica.catch_up_all().await,
                }
            }
            now = poll.tick() => {
                if now > hot_until && now.duration_since(last_poll) < POLL_EVERY {
                    continue;
                }
                last_poll = now;
                let Some(rt) = upgrade(&rt) else { return };
                let _applying = rt.inner.following.lock().await;
                Replica { rt: &rt, store: &store }.catch_up_all().await;
            }
        }
    }
}

fn upgrade(rt: &Weak<Inner>) -> Option<Runtime> {
    rt.upgrade().map(|inner| Runtime { inner })
}

/// Expires pending approvals past their expiry, each decided once in the store: the
/// runtime whose expiry stood announces it, the others follow its event.
async fn expire(rt: Weak<Inner>) {
    let mut tick = tokio::time::interval(EXPIRE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(rt) = upgrade(&rt) else { return };
        let Some(store) = rt.inner.shared.store().cloned() else {
            return;
        };
        let overdue = lock(&rt.inner.approvals).overdue(rt.inner.config.clock.now());
        for (tenant, id) in overdue {
            match store.decide(&tenant, &id, "expired", i64::MAX).await {
                Ok(Decided::Won) => rt.expire_one(&tenant, &id, None),
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(%err, approval = %id, "expiry not decided: store unreachable");
                    break;
                }
            }
        }
    }
}

/// What a runtime on a shared store takes in from it: its own commits in seq order,
/// other runtimes' events, and the sessions and approvals their documents hold.
struct Replica<'a> {
    rt: &'a Runtime,
    store: &'a PgStore,
}

impl Replica<'_> {
    /// One event this runtime committed: into the log when it is next, after what the
    /// store holds before it.
    async fn take_in(&self, logged: Arc<Logged>) {
        loop {
            match self.rt.inner.log.ingest(logged.clone()) {
                Ingest::Appended(logged) => {
                    self.rt.follow_session_event(&logged, false);
                    return;
                }
                Ingest::Old => return,
                Ingest::Gap(_) => {
                    let tenant = logged.tenant.clone();
                    if !self.catch_up_to(&tenant, logged.frame.seq - 1).await {
                        return;
                    }
                }
            }
        }
    }

    async fn catch_up_all(&self) {
        match self.store.heads().await {
            Ok(heads) => {
                for (tenant, newest) in heads {
                    if self.rt.inner.log.next_seq(&tenant) <= newest {
                        self.catch_up_to(&tenant, newest).await;
                    }
                }
            }
            Err(err) => tracing::warn!(%err, "cannot read the shared stream's heads"),
        }
    }

    async fn catch_up(&self, tenant: &str) {
        self.catch_up_to(tenant, u64::MAX).await;
    }

    /// Reads a tenant's events from the store into the log up to `upto` (or its newest);
    /// false when the store could not be read.
    async fn catch_up_to(&self, tenant: &str, upto: u64) -> bool {
        loop {
            let after = self.rt.inner.log.next_seq(tenant).saturating_sub(1);
            if after >= upto {
                return true;
            }
            let rows = match self.store.events_after(tenant, after, CATCH_UP_PAGE).await {
                Ok(rows) => rows,
                Err(err) => {
                    tracing::warn!(%err, tenant, "cannot read the shared stream");
                    return false;
                }
            };
            let Some(first) = rows.first().map(|(e, _)| e.seq) else {
                return true;
            };
            if first > after + 1 {
                tracing::warn!(
                    tenant,
                    from = after + 1,
                    to = first - 1,
                    "events gone from the store before this runtime read them"
                );
                self.rt.inner.log.skip_to(tenant, first);
            }
            for (stored, origin) in rows {
                let remote = origin != self.store.replica();
                let Some(logged) = Logged::restore(&stored.text, stored.tenant) else {
                    tracing::warn!(tenant, seq = stored.seq, "stored event unreadable; skipped");
                    continue;
                };
                match self.rt.inner.log.ingest(Arc::new(logged)) {
                    Ingest::Appended(logged) => {
                        if remote {
                            self.follow_remote(&logged).await;
                        }
                        self.rt.follow_session_event(&logged, remote);
                    }
                    Ingest::Old => {}
                    Ingest::Gap(_) => return true,
                }
            }
        }
    }

    /// What another runtime's event brings that this one does not hold yet: a session
    /// or an approval read from its document, the eval history.
    async fn follow_remote(&self, logged: &Arc<Logged>) {
        let tenant = &logged.tenant;
        let result = match &logged.frame.event {
            Event::SessionCreated(_) => match logged.frame.session_id.as_deref() {
                Some(id) if self.rt.session(tenant, id).is_err() => {
                    self.adopt_session(tenant, id).await
                }
                _ => Ok(()),
            },
            Event::ApprovalRequested(requested) => {
                let known = lock(&self.rt.inner.approvals)
                    .facts(tenant, &requested.approval_id)
                    .is_some();
                if known {
                    Ok(())
                } else {
                    self.adopt_approval(tenant, &requested.approval_id).await
                }
            }
            event @ (Event::ApprovalResolved(_) | Event::ApprovalReplayed(_)) => {
                lock(&self.rt.inner.approvals).follow(event);
                Ok(())
            }
            Event::AgentEvalCompleted(_) => {
                self.rt.inner.evals.observe(tenant, &logged.frame);
                Ok(())
            }
            _ => Ok(()),
        };
        if let Err(err) = result {
            tracing::warn!(%err, kind = logged.frame.event.kind(), "another runtime's state not read");
        }
    }

    async fn adopt_session(&self, tenant: &str, id: &str) -> Result<(), StoreError> {
        let Some(doc) = self.store.record(persist::SESSION, tenant, id).await? else {
            return Ok(());
        };
        let mut counters = HashMap::new();
        if let Some(counts) = self.store.record(persist::COUNTERS, tenant, id).await? {
            counters.insert((tenant.to_owned(), id.to_owned()), counts);
        }
        self.rt.restore_sessions(&[doc], &mut counters, true);
        Ok(())
    }

    async fn adopt_approval(&self, tenant: &str, id: &str) -> Result<(), StoreError> {
        if let Some(doc) = self.store.record(persist::APPROVAL, tenant, id).await? {
            self.rt.adopt_approvals(&[doc]);
        }
        Ok(())
    }
}
