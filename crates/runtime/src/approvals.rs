//! The approval queue: calls a policy rule held for a human, their expiry, and the
//! decision. `ApprovalQueue` owns the rows, their queue order, marking them expired (or
//! cancelled, when their session closes),
//! trimming the resolved ones, paging and restoring; Runtime queues, decides and announces.
//! Approving replays the recorded call through the mock gate only (the policy already
//! spoke); a replay whose mock or session is gone is `mocks_engine_error`.

use super::log::{Budget, EventLog};
use super::mocks::Claim;
use super::sessions::{DEFAULT_SESSIONS_PAGE, MAX_SESSIONS_PAGE, Page, new_id};
use super::{ApiErrorWithStatus, Runtime, lock, persist};
use chrono::{DateTime, Utc};
use spyglass_protocol::envelope::codes;
use spyglass_protocol::events::{
    ApprovalReplayed, ApprovalRequested, ApprovalResolved, Decision, Outcome,
};
use spyglass_protocol::rest::{ApprovalList, ApprovalStatus, ApprovalView};
use spyglass_protocol::{Envelope, Event, RawJson, now_rfc3339};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

struct Row {
    view: ApprovalView,
    tenant: String,
    expires: DateTime<Utc>,
    /// What the byte budget counts for it (`row_bytes`).
    bytes: usize,
}

/// The table of approvals, pending and resolved. Resolved rows are bounded by count
/// (`max_resolved_approvals`) and bytes (a quarter of the budget, and `make_room`),
/// oldest first; pending rows only by the per-tenant cap at queueing.
pub(crate) struct ApprovalQueue {
    /// `max_resolved_approvals`.
    max_resolved: usize,
    /// The runtime's byte budget, which counts every row.
    budget: Arc<Budget>,
    rows: HashMap<String, Row>,
    /// Ids by queue position, which only grows: a `GET /v1/approvals` cursor is one, so
    /// rows dropped between pages shift nothing.
    order: BTreeMap<u64, String>,
    next_at: u64,
    /// Rows no longer pending (decided or expired).
    resolved: usize,
    /// Sum of the resolved rows' `bytes`.
    resolved_bytes: usize,
}

/// What 429 answers when a tenant already has `max_pending_approvals` waiting.
pub const TOO_MANY_PENDING_APPROVALS: &str = "too_many_pending_approvals";

/// What the budget counts for an approval row: its strings and input as text, the replay's
/// JSON, and a fixed share for the map entries and timestamps.
fn row_bytes(view: &ApprovalView, tenant: &str) -> usize {
    let replay = view
        .replay
        .as_ref()
        .map_or(0, |r| serde_json::to_vec(r).map_or(0, |t| t.len()));
    2 * view.id.len()
        + view.session_id.len()
        + view.call_id.len()
        + view.tool.len()
        + view.input.get().len()
        + view.rule_id.len()
        + view.decided_by.as_ref().map_or(0, String::len)
        + view.note.as_ref().map_or(0, String::len)
        + tenant.len()
        + replay
        + 192
}

impl ApprovalQueue {
    pub(crate) fn new(max_resolved: usize, budget: Arc<Budget>) -> Self {
        Self {
            max_resolved,
            budget,
            rows: HashMap::new(),
            order: BTreeMap::new(),
            next_at: 0,
            resolved: 0,
            resolved_bytes: 0,
        }
    }

    /// Keeps the resolved rows within `max_resolved_approvals` and a quarter of the byte
    /// budget, the oldest going first (their documents leave the store through `log`).
    pub(crate) fn trim_resolved(&mut self, log: &EventLog) {
        let dropped = self.trim(self.max_resolved, self.budget.max / 4);
        self.forget(&dropped, log);
    }

    /// Drops the oldest resolved row, for `make_room`; false when none is left.
    pub(crate) fn evict_oldest(&mut self, log: &EventLog) -> bool {
        let Some(max) = self.resolved.checked_sub(1) else {
            return false;
        };
        let dropped = self.trim(max, usize::MAX);
        self.forget(&dropped, log);
        !dropped.is_empty()
    }

    /// Dropped rows leave the budget and the store.
    fn forget(&self, dropped: &[(usize, String, String)], log: &EventLog) {
        for (bytes, tenant, id) in dropped {
            self.budget.remove_approvals(*bytes, true);
            log.unpersist(persist::APPROVAL, tenant, id);
        }
    }

    /// A row just left `Pending`: it now counts among the resolved.
    fn resolve(&mut self, id: &str) {
        if let Some(row) = self.rows.get(id) {
            self.resolved += 1;
            self.resolved_bytes += row.bytes;
        }
    }

    /// Drops the oldest resolved rows while more than `max` are kept or they hold more
    /// than `max_bytes`; returns each dropped row's bytes, tenant and id (its stored
    /// document goes too).
    fn trim(&mut self, max: usize, max_bytes: usize) -> Vec<(usize, String, String)> {
        let mut dropped = Vec::new();
        if self.resolved <= max && self.resolved_bytes <= max_bytes {
            return dropped;
        }
        let mut gone = Vec::new();
        let mut freed = 0;
        for (at, id) in &self.order {
            if self.resolved - gone.len() <= max && self.resolved_bytes - freed <= max_bytes {
                break;
            }
            if let Some(row) = self.rows.get(id)
                && row.view.status != ApprovalStatus::Pending
            {
                gone.push(*at);
                freed += row.bytes;
            }
        }
        for at in gone {
            if let Some(id) = self.order.remove(&at)
                && let Some(row) = self.rows.remove(&id)
            {
                self.resolved -= 1;
                self.resolved_bytes -= row.bytes;
                dropped.push((row.bytes, row.tenant, id));
            }
        }
        dropped
    }

    /// Puts stored approvals back in the order they were queued, their bytes counted in
    /// `budget`. A pending one is approvable until its `expires_at`, and approving it
    /// replays its recorded call. The caller trims the resolved ones afterwards
    /// (`ApprovalQueue::trim_resolved`): a store written under larger bounds comes back
    /// within today's.
    pub(crate) fn restore(&mut self, records: &[crate::store::StoredRecord], budget: &Budget) {
        let mut rows: Vec<(String, ApprovalView)> = records
            .iter()
            .filter_map(|r| persist::decode(r).map(|view| (r.tenant.clone(), view)))
            .collect();
        rows.sort_by(|(_, a), (_, b)| (&a.requested_at, &a.id).cmp(&(&b.requested_at, &b.id)));
        for (tenant, view) in rows {
            let Ok(expires) = DateTime::parse_from_rfc3339(&view.expires_at) else {
                tracing::warn!(approval = %view.id, "stored approval has no readable expiry; skipped");
                continue;
            };
            let bytes = row_bytes(&view, &tenant);
            let pending = view.status == ApprovalStatus::Pending;
            let id = view.id.clone();
            budget.add_approvals(bytes);
            self.push(view, tenant, expires.with_timezone(&Utc), bytes);
            if !pending {
                self.resolve(&id);
            }
        }
    }

    /// Adds a row at the next queue position.
    /// Drops the pending row `id` of a call its store refused, from the budget and the
    /// store too: as if it had never been queued.
    pub(crate) fn take_back(&mut self, tenant: &str, id: &str, log: &EventLog) {
        let pending = self
            .rows
            .get(id)
            .is_some_and(|row| row.tenant == tenant && row.view.status == ApprovalStatus::Pending);
        if !pending {
            return;
        }
        if let Some(row) = self.rows.remove(id) {
            self.order.retain(|_, held| held != id);
            self.budget.remove_approvals(row.bytes, false);
            log.unpersist(persist::APPROVAL, tenant, id);
        }
    }

    fn push(&mut self, view: ApprovalView, tenant: String, expires: DateTime<Utc>, bytes: usize) {
        let at = self.next_at;
        self.next_at += 1;
        self.order.insert(at, view.id.clone());
        self.rows.insert(
            view.id.clone(),
            Row {
                view,
                tenant,
                expires,
                bytes,
            },
        );
    }

    /// The records whose approval this queue does not hold yet.
    #[cfg(feature = "postgres")]
    pub(crate) fn unknown(
        &self,
        records: &[crate::store::StoredRecord],
    ) -> Vec<crate::store::StoredRecord> {
        records
            .iter()
            .filter(|r| !self.rows.contains_key(&r.key))
            .cloned()
            .collect()
    }

    /// A pending approval's expiry (Unix ms), its session, tool and input: what deciding
    /// it in a shared store needs. `None`: no such approval of this tenant here.
    #[cfg(feature = "postgres")]
    pub(crate) fn facts(
        &self,
        tenant: &str,
        approval_id: &str,
    ) -> Option<(i64, String, String, RawJson)> {
        let row = self.rows.get(approval_id).filter(|r| r.tenant == tenant)?;
        Some((
            row.expires.timestamp_millis(),
            row.view.session_id.clone(),
            row.view.tool.clone(),
            row.view.input.clone(),
        ))
    }

    /// The pending approvals past their expiry at `now`: what shared.rs's `expire` task
    /// asks the store about.
    #[cfg(feature = "postgres")]
    pub(crate) fn overdue(&self, now: DateTime<Utc>) -> Vec<(String, String)> {
        self.rows
            .values()
            .filter(|row| row.view.status == ApprovalStatus::Pending && now >= row.expires)
            .map(|row| (row.tenant.clone(), row.view.id.clone()))
            .collect()
    }

    /// A session's pending approvals, oldest first.
    #[cfg(feature = "postgres")]
    pub(crate) fn pending_of_session(&self, tenant: &str, session_id: &str) -> Vec<String> {
        self.order
            .values()
            .filter(|id| {
                self.rows.get(*id).is_some_and(|row| {
                    row.view.status == ApprovalStatus::Pending
                        && row.tenant == tenant
                        && row.view.session_id == session_id
                })
            })
            .cloned()
            .collect()
    }

    /// Applies another runtime's `approval.resolved` or `approval.replayed` to a row
    /// this queue holds.
    #[cfg(feature = "postgres")]
    pub(crate) fn follow(&mut self, event: &Event) {
        match event {
            Event::ApprovalResolved(resolved) => {
                let Some(row) = self.rows.get_mut(&resolved.approval_id) else {
                    return;
                };
                if row.view.status != ApprovalStatus::Pending {
                    return;
                }
                row.view.status = match resolved.decision {
                    Decision::Approved => ApprovalStatus::Approved,
                    Decision::Denied => ApprovalStatus::Denied,
                    Decision::Expired => ApprovalStatus::Expired,
                    Decision::Cancelled => ApprovalStatus::Cancelled,
                };
                row.view.decided_by.clone_from(&resolved.by);
                row.view.note.clone_from(&resolved.note);
                self.resolve(&resolved.approval_id);
            }
            Event::ApprovalReplayed(replayed) => {
                if let Some(row) = self.rows.get_mut(&replayed.approval_id) {
                    row.view.replay = Some(replayed.outcome.clone());
                }
            }
            _ => {}
        }
    }

    /// One page of this tenant's rows from queue position `start`, at most `limit`, and
    /// the cursor of the next page while there is one.
    fn page(&self, tenant: &str, filter: StatusFilter, start: u64, limit: usize) -> ApprovalList {
        let mut approvals = Vec::new();
        let mut next_cursor = None;
        let rows = self
            .order
            .range(start..)
            .filter_map(|(at, id)| self.rows.get(id).map(|row| (*at, row)))
            .filter(|(_, row)| row.tenant == tenant)
            .filter(|(_, row)| {
                filter == StatusFilter::All || row.view.status == ApprovalStatus::Pending
            });
        for (at, row) in rows {
            if approvals.len() == limit {
                // One more row exists: the page ends at the last one returned.
                next_cursor = Some(at.saturating_sub(1).to_string());
                break;
            }
            approvals.push(row.view.clone());
        }
        ApprovalList {
            approvals,
            next_cursor,
        }
    }

    /// Marks every pending row past its expiry at `now` expired (its document rewritten
    /// through `log`), then trims; answers each one's tenant, session and id.
    fn expire_due(&mut self, now: DateTime<Utc>, log: &EventLog) -> Vec<(String, String, String)> {
        let expired = self
            .rows
            .values_mut()
            .filter(|row| row.view.status == ApprovalStatus::Pending && now >= row.expires)
            .map(|row| {
                row.view.status = ApprovalStatus::Expired;
                log.persist(persist::APPROVAL, &row.tenant, &row.view.id, &row.view);
                (
                    row.tenant.clone(),
                    row.view.session_id.clone(),
                    row.view.id.clone(),
                )
            })
            .collect::<Vec<_>>();
        for (_, _, id) in &expired {
            self.resolve(id);
        }
        if !expired.is_empty() {
            self.trim_resolved(log);
        }
        expired
    }

    /// Marks a session's pending rows cancelled (the session closed under them), in queue
    /// order (so the stream announces them oldest first), then trims; answers their ids.
    fn cancel_session(&mut self, tenant: &str, session_id: &str, log: &EventLog) -> Vec<String> {
        let mut expired = Vec::new();
        for id in self.order.values() {
            if let Some(row) = self.rows.get_mut(id)
                && row.view.status == ApprovalStatus::Pending
                && row.tenant == tenant
                && row.view.session_id == session_id
            {
                row.view.status = ApprovalStatus::Cancelled;
                row.view.note = Some(SESSION_CLOSED.to_owned());
                let grown = row_bytes(&row.view, &row.tenant).saturating_sub(row.bytes);
                row.bytes += grown;
                self.budget.add_approvals(grown);
                log.persist(persist::APPROVAL, tenant, id, &row.view);
                expired.push(id.clone());
            }
        }
        for id in &expired {
            self.resolve(id);
        }
        if !expired.is_empty() {
            self.trim_resolved(log);
        }
        expired
    }

    /// Marks one row expired (`cancel`: cancelled, its session closed) if it is still
    /// pending, then trims; answers its session.
    #[cfg(feature = "postgres")]
    fn expire(
        &mut self,
        tenant: &str,
        approval_id: &str,
        cancel: bool,
        log: &EventLog,
    ) -> Option<String> {
        let row = self.rows.get_mut(approval_id)?;
        if row.view.status != ApprovalStatus::Pending {
            return None;
        }
        if cancel {
            row.view.status = ApprovalStatus::Cancelled;
            row.view.note = Some(SESSION_CLOSED.to_owned());
            let grown = row_bytes(&row.view, &row.tenant).saturating_sub(row.bytes);
            row.bytes += grown;
            self.budget.add_approvals(grown);
        } else {
            row.view.status = ApprovalStatus::Expired;
        }
        log.persist(persist::APPROVAL, tenant, approval_id, &row.view);
        let session_id = row.view.session_id.clone();
        self.resolve(approval_id);
        self.trim_resolved(log);
        Some(session_id)
    }

    fn pending_of(&self, tenant: &str) -> usize {
        self.rows
            .values()
            .filter(|row| row.tenant == tenant && row.view.status == ApprovalStatus::Pending)
            .count()
    }
}

/// What `dispatch` needs back from queueing a call.
pub(crate) struct Queued {
    pub approval_id: String,
    pub expires_at: String,
    message: String,
    /// The rule's `when` as text, for the approver (`approval.requested`'s `condition`).
    condition: Option<String>,
    view: ApprovalView,
}

/// Which way a human decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    Deny,
}

/// Which approvals `GET /v1/approvals` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatusFilter {
    #[default]
    Pending,
    All,
}

impl Queued {
    /// The `approval.requested` that announces this row.
    pub(crate) fn requested(self) -> Event {
        Event::ApprovalRequested(ApprovalRequested {
            approval_id: self.approval_id,
            call_id: self.view.call_id,
            tool: self.view.tool,
            input: self.view.input,
            rule_id: self.view.rule_id,
            expires_at: self.expires_at,
            message: self.message,
            condition: self.condition,
        })
    }
}

/// Why a held call was cancelled: its session closed while it waited.
const SESSION_CLOSED: &str = "session closed";

/// The `approval.resolved` that announces a cancellation: the session closed under it.
fn cancelled_event(approval_id: String) -> Event {
    Event::ApprovalResolved(ApprovalResolved {
        approval_id,
        decision: Decision::Cancelled,
        by: None,
        note: Some(SESSION_CLOSED.to_owned()),
    })
}

/// The `approval.resolved` that announces an expiry (`note`: why, when not its age).
fn expired_event(approval_id: String, note: Option<String>) -> Event {
    Event::ApprovalResolved(ApprovalResolved {
        approval_id,
        decision: Decision::Expired,
        by: None,
        note,
    })
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Runtime {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn queue_approval(
        &self,
        tenant: &str,
        session_id: &str,
        call_id: &str,
        tool: &str,
        input: &RawJson,
        rule_id: &str,
        message: &str,
    ) -> Result<Queued, ApiErrorWithStatus> {
        let cap = self.inner.config.max_pending_approvals.max(1);
        let over_cap = |queue: &ApprovalQueue| {
            // Every row pending is a bound on this tenant's: count only when it could be over.
            queue.rows.len() - queue.resolved >= cap && queue.pending_of(tenant) >= cap
        };
        if over_cap(&lock(&self.inner.approvals)) {
            // Expired ones no longer wait: they leave room.
            self.expire_due_approvals();
        }
        let now = self.inner.config.clock.now();
        let ttl = chrono::Duration::from_std(self.inner.config.approval_ttl)
            .unwrap_or(chrono::Duration::minutes(15));
        let expires = now + ttl;
        let view = ApprovalView {
            id: new_id("apr_"),
            session_id: session_id.to_owned(),
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            input: input.clone(),
            rule_id: rule_id.to_owned(),
            status: ApprovalStatus::Pending,
            requested_at: rfc3339(now),
            expires_at: rfc3339(expires),
            decided_by: None,
            note: None,
            replay: None,
        };
        let queued = Queued {
            approval_id: view.id.clone(),
            expires_at: view.expires_at.clone(),
            message: message.to_owned(),
            condition: self.inner.config.policy.condition_of(rule_id),
            view: view.clone(),
        };
        let bytes = row_bytes(&view, tenant);
        // Checked again under the lock the row is added with, so racing calls cannot
        // pass the cap together.
        let mut queue = lock(&self.inner.approvals);
        if over_cap(&queue) {
            return Err(ApiErrorWithStatus::new(
                429,
                TOO_MANY_PENDING_APPROVALS,
                format!(
                    "{cap} approvals of this project are waiting for a decision; decide some before more calls are held"
                ),
            ));
        }
        self.inner
            .log
            .persist(persist::APPROVAL, tenant, &view.id, &view);
        self.inner.budget.add_approvals(bytes);
        queue.push(view, tenant.to_owned(), expires, bytes);
        drop(queue);
        lock(&self.inner.approvals).trim_resolved(&self.inner.log);
        Ok(queued)
    }

    /// Marks every pending approval past its `expires_at` as expired, announcing each.
    pub fn expire_due_approvals(&self) {
        if self.inner.shared.is_shared() {
            // Expiry is decided in the shared store, once (the `expire` task in shared.rs).
            return;
        }
        let now = self.inner.config.clock.now();
        let expired = lock(&self.inner.approvals).expire_due(now, &self.inner.log);
        for (tenant, session_id, approval_id) in expired {
            self.emit_for(&tenant, Some(session_id), expired_event(approval_id, None));
        }
    }

    /// Cancels every pending approval of a session being closed, announcing each. The
    /// caller holds the session's lock, so no new approval of it can be queued meanwhile.
    pub(crate) fn expire_session_approvals(&self, tenant: &str, session_id: &str) {
        let cancelled =
            lock(&self.inner.approvals).cancel_session(tenant, session_id, &self.inner.log);
        for approval_id in cancelled {
            self.emit_for(
                tenant,
                Some(session_id.to_owned()),
                cancelled_event(approval_id),
            );
        }
    }

    /// `GET /v1/approvals`: this tenant's approvals, oldest first.
    /// One page of this tenant's approvals, oldest first, paged like `GET /v1/sessions`
    /// (`limit`, `cursor`, `next_cursor`). A cursor is a position in the queue, which only
    /// grows, so rows queued between pages neither repeat nor shift the rest.
    pub fn list_approvals(
        &self,
        tenant: &str,
        filter: StatusFilter,
        page: &Page,
    ) -> Result<ApprovalList, ApiErrorWithStatus> {
        let limit =
            crate::sessions::page_limit(page.limit, DEFAULT_SESSIONS_PAGE, MAX_SESSIONS_PAGE)?;
        let start = match page.cursor.as_deref() {
            None | Some("") => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| {
                    ApiErrorWithStatus::new(
                        400,
                        codes::INVALID_QUERY,
                        format!("cursor `{cursor}` is not one a page of /v1/approvals gave"),
                    )
                })?
                .saturating_add(1),
        };
        self.expire_due_approvals();
        let start = u64::try_from(start).unwrap_or(u64::MAX);
        Ok(lock(&self.inner.approvals).page(tenant, filter, start, limit))
    }

    /// `POST /v1/approvals/:id/approve|deny`. A second decision is 409; a decision after
    /// `expires_at` is 410 and leaves the row expired.
    pub fn decide(
        &self,
        tenant: &str,
        approval_id: &str,
        verdict: Verdict,
        by: Option<String>,
        note: Option<String>,
    ) -> Result<ApprovalView, ApiErrorWithStatus> {
        self.expire_due_approvals();
        self.apply_decision(tenant, approval_id, verdict, by, note, None)
    }

    /// Applies a decision here: checked against the row's status, or, `won` (a store
    /// shared by several runtimes decided it for this one, `Runtime::decide_any`),
    /// taken whatever this runtime last heard, with the replay's stateful entry claimed.
    pub(crate) fn apply_decision(
        &self,
        tenant: &str,
        approval_id: &str,
        verdict: Verdict,
        by: Option<String>,
        note: Option<String>,
        won: Option<Claim>,
    ) -> Result<ApprovalView, ApiErrorWithStatus> {
        let view = {
            let mut queue = lock(&self.inner.approvals);
            let row = match queue.rows.get_mut(approval_id) {
                Some(row) if row.tenant == tenant => row,
                _ => {
                    return Err(ApiErrorWithStatus::not_found(format!(
                        "no approval {approval_id}"
                    )));
                }
            };
            let was_pending = row.view.status == ApprovalStatus::Pending;
            match row.view.status {
                _ if won.is_some() => {}
                ApprovalStatus::Pending => {}
                ApprovalStatus::Expired => {
                    return Err(ApiErrorWithStatus::new(
                        410,
                        codes::EXPIRED,
                        format!("approval {approval_id} expired at {}", row.view.expires_at),
                    ));
                }
                ApprovalStatus::Cancelled => {
                    return Err(ApiErrorWithStatus::new(
                        410,
                        codes::EXPIRED,
                        format!("approval {approval_id} was cancelled: its session closed"),
                    ));
                }
                decided => {
                    return Err(ApiErrorWithStatus::new(
                        409,
                        codes::ALREADY_DECIDED,
                        format!(
                            "approval {approval_id} was already {}",
                            serde_json::to_value(decided)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_owned))
                                .unwrap_or_default()
                        ),
                    ));
                }
            }
            row.view.status = match verdict {
                Verdict::Approve => ApprovalStatus::Approved,
                Verdict::Deny => ApprovalStatus::Denied,
            };
            row.view.decided_by.clone_from(&by);
            row.view.note.clone_from(&note);
            self.inner
                .log
                .persist(persist::APPROVAL, tenant, approval_id, &row.view);
            let view = row.view.clone();
            let grown = row_bytes(&row.view, &row.tenant).saturating_sub(row.bytes);
            row.bytes += grown;
            self.inner.budget.add_approvals(grown);
            if was_pending {
                queue.resolve(approval_id);
            }
            view
        };
        self.emit_for(
            tenant,
            Some(view.session_id.clone()),
            Event::ApprovalResolved(ApprovalResolved {
                approval_id: view.id.clone(),
                decision: match verdict {
                    Verdict::Approve => Decision::Approved,
                    Verdict::Deny => Decision::Denied,
                },
                by,
                note,
            }),
        );
        if verdict == Verdict::Deny {
            lock(&self.inner.approvals).trim_resolved(&self.inner.log);
            return Ok(view);
        }
        let outcome = self.replay(tenant, &view, won.unwrap_or_default());
        let mut queue = lock(&self.inner.approvals);
        let row = if let Some(row) = queue.rows.get_mut(approval_id) {
            row.view.replay = Some(outcome);
            self.inner
                .log
                .persist(persist::APPROVAL, tenant, approval_id, &row.view);
            // The decision and replay grow the row: the budget counts it again.
            let bytes = row_bytes(&row.view, &row.tenant);
            let grown = bytes.saturating_sub(row.bytes);
            row.bytes += grown;
            let view = row.view.clone();
            queue.resolved_bytes += grown;
            self.inner.budget.add_approvals(grown);
            view
        } else {
            ApprovalView {
                replay: Some(outcome),
                ..view
            }
        };
        drop(queue);
        lock(&self.inner.approvals).trim_resolved(&self.inner.log);
        Ok(row)
    }

    /// Runs an approved call again through the mock gate and announces the outcome,
    /// under the session lock so its counter is ordered with the session's calls.
    fn replay(&self, tenant: &str, view: &ApprovalView, claim: Claim) -> Outcome {
        let clock = Instant::now();
        let session = self.session(tenant, &view.session_id).ok();
        let mut guard = session.as_ref().map(|session| lock(session));
        let (result, counter) = match guard.as_mut() {
            None => (
                Err(Envelope::MocksEngineError {
                    message: format!("replay of {}: its session is gone", view.tool),
                }),
                None,
            ),
            // Closed after the approval was decided: the replay reaches no mock, counts
            // nothing and is not announced (every observer's fold of `approval.replayed`
            // counts a call), so nothing of the session follows its `session.closed`.
            Some(s) if s.closed => {
                return Outcome::Envelope(Box::new(Envelope::MocksEngineError {
                    message: format!(
                        "replay of {}: session {} is closed",
                        view.tool, view.session_id
                    ),
                }));
            }
            Some(s) => {
                let result = s.mocks.consume(&view.tool, &view.input, true, claim);
                s.last_activity = now_rfc3339();
                (result, s.mocks.note_call(&view.tool))
            }
        };
        let outcome = match result {
            Ok(value) => Outcome::Result(value),
            Err(envelope) => Outcome::Envelope(Box::new(envelope)),
        };
        let logged = self.emit_for(
            tenant,
            Some(view.session_id.clone()),
            Event::ApprovalReplayed(ApprovalReplayed {
                approval_id: view.id.clone(),
                call_id: view.call_id.clone(),
                tool: view.tool.clone(),
                outcome: outcome.clone(),
                duration: clock.elapsed().as_secs_f64() * 1000.0,
                counter,
            }),
        );
        if let Some(s) = guard.as_mut() {
            s.last_seq = logged.frame.seq;
            if self.inner.shared.is_shared() {
                s.unfollowed += 1;
            }
            s.persist_counters(&self.inner.log, self.inner.shared.is_shared());
        }
        drop(guard);
        outcome
    }
}

/// What another runtime on a shared store decided, and what this one asks the store.
#[cfg(feature = "postgres")]
impl Runtime {
    /// Puts approvals another runtime queued into this one's queue (their documents);
    /// an id already here is left as it is.
    pub(crate) fn adopt_approvals(&self, records: &[crate::store::StoredRecord]) {
        let mut queue = lock(&self.inner.approvals);
        let fresh = queue.unknown(records);
        if fresh.is_empty() {
            return;
        }
        queue.restore(&fresh, &self.inner.budget);
        drop(queue);
        lock(&self.inner.approvals).trim_resolved(&self.inner.log);
    }

    /// Expires one approval here and announces it (`note`: why, when not its age): the
    /// shared store said this runtime's expiry came first. With the note `session closed`
    /// its session closed under it: it is cancelled, as on a runtime of its own.
    pub(crate) fn expire_one(&self, tenant: &str, approval_id: &str, note: Option<&str>) {
        let cancel = note == Some(SESSION_CLOSED);
        let ended =
            lock(&self.inner.approvals).expire(tenant, approval_id, cancel, &self.inner.log);
        if let Some(session_id) = ended {
            let event = if cancel {
                cancelled_event(approval_id.to_owned())
            } else {
                expired_event(approval_id.to_owned(), note.map(str::to_owned))
            };
            self.emit_for(tenant, Some(session_id), event);
        }
    }
}
