//! The approval queue: calls a policy rule held for a human, their expiry, and the
//! decision. Approving replays the recorded call through the mock gate only (the policy
//! already spoke); a replay whose mock or session is gone is `mocks_engine_error`.

use super::policy::{Literal, Op};
use super::sessions::{DEFAULT_SESSIONS_PAGE, MAX_SESSIONS_PAGE, Page, new_id};
use super::{ApiErrorWithStatus, Runtime, lock, persist};
use crate::protocol::envelope::codes;
use crate::protocol::events::{
    ApprovalReplayed, ApprovalRequested, ApprovalResolved, Decision, Outcome,
};
use crate::protocol::rest::{ApprovalList, ApprovalStatus, ApprovalView};
use crate::protocol::{Envelope, Event, RawJson, now_rfc3339};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::time::Instant;

struct Row {
    view: ApprovalView,
    tenant: String,
    expires: DateTime<Utc>,
}

#[derive(Default)]
pub(crate) struct ApprovalQueue {
    rows: HashMap<String, Row>,
    order: Vec<String>,
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
    ) -> Queued {
        let now = Utc::now();
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
            condition: self.condition_of(rule_id),
            view: view.clone(),
        };
        self.persist(persist::APPROVAL, tenant, &view.id, &view);
        let mut queue = lock(&self.inner.approvals);
        queue.order.push(view.id.clone());
        queue.rows.insert(
            view.id.clone(),
            Row {
                view,
                tenant: tenant.to_owned(),
                expires,
            },
        );
        queued
    }

    /// The `when` of the rule named `rule_id` as written in a policy file.
    fn condition_of(&self, rule_id: &str) -> Option<String> {
        let rule = self
            .inner
            .config
            .policy
            .rules
            .iter()
            .find(|r| r.id == rule_id)?;
        let when = rule.when.as_ref()?;
        let op = match when.op {
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        };
        let value = match &when.value {
            Literal::Number(n) => n.to_string(),
            Literal::Text(t) => serde_json::to_string(t).unwrap_or_else(|_| t.clone()),
            Literal::Bool(b) => b.to_string(),
        };
        Some(format!("input.{} {op} {value}", when.path.join(".")))
    }

    pub(crate) fn announce_approval(&self, tenant: &str, session_id: &str, queued: Queued) {
        self.emit_for(
            tenant,
            Some(session_id.to_owned()),
            Event::ApprovalRequested(ApprovalRequested {
                approval_id: queued.approval_id,
                call_id: queued.view.call_id,
                tool: queued.view.tool,
                input: queued.view.input,
                rule_id: queued.view.rule_id,
                expires_at: queued.expires_at,
                message: queued.message,
                condition: queued.condition,
            }),
        );
    }

    /// Marks every pending approval past its `expires_at` as expired, announcing each.
    pub fn expire_due_approvals(&self) {
        let now = Utc::now();
        let expired: Vec<(String, String, String)> = {
            let mut queue = lock(&self.inner.approvals);
            queue
                .rows
                .values_mut()
                .filter(|row| row.view.status == ApprovalStatus::Pending && now >= row.expires)
                .map(|row| {
                    row.view.status = ApprovalStatus::Expired;
                    self.persist(persist::APPROVAL, &row.tenant, &row.view.id, &row.view);
                    (
                        row.tenant.clone(),
                        row.view.session_id.clone(),
                        row.view.id.clone(),
                    )
                })
                .collect()
        };
        for (tenant, session_id, approval_id) in expired {
            self.emit_for(
                &tenant,
                Some(session_id),
                Event::ApprovalResolved(ApprovalResolved {
                    approval_id,
                    decision: Decision::Expired,
                    by: None,
                    note: None,
                }),
            );
        }
    }

    /// Expires every pending approval of a session being closed, announcing each. The
    /// caller holds the session's lock, so no new approval of it can be queued meanwhile.
    pub(crate) fn expire_session_approvals(&self, tenant: &str, session_id: &str) {
        let expired: Vec<String> = {
            let mut guard = lock(&self.inner.approvals);
            let queue = &mut *guard;
            // In queue order, so the stream announces them oldest first.
            let mut expired = Vec::new();
            for id in &queue.order {
                if let Some(row) = queue.rows.get_mut(id)
                    && row.view.status == ApprovalStatus::Pending
                    && row.tenant == tenant
                    && row.view.session_id == session_id
                {
                    row.view.status = ApprovalStatus::Expired;
                    self.persist(persist::APPROVAL, tenant, id, &row.view);
                    expired.push(id.clone());
                }
            }
            expired
        };
        for approval_id in expired {
            self.emit_for(
                tenant,
                Some(session_id.to_owned()),
                Event::ApprovalResolved(ApprovalResolved {
                    approval_id,
                    decision: Decision::Expired,
                    by: None,
                    note: Some("session closed".to_owned()),
                }),
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
        let limit = page
            .limit
            .unwrap_or(DEFAULT_SESSIONS_PAGE)
            .clamp(1, MAX_SESSIONS_PAGE);
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
        let queue = lock(&self.inner.approvals);
        let mut approvals = Vec::new();
        let mut next_cursor = None;
        let rows = queue
            .order
            .iter()
            .enumerate()
            .skip(start)
            .filter_map(|(at, id)| queue.rows.get(id).map(|row| (at, row)))
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
        Ok(ApprovalList {
            approvals,
            next_cursor,
        })
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
            match row.view.status {
                ApprovalStatus::Pending => {}
                ApprovalStatus::Expired => {
                    return Err(ApiErrorWithStatus::new(
                        410,
                        codes::EXPIRED,
                        format!("approval {approval_id} expired at {}", row.view.expires_at),
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
            self.persist(persist::APPROVAL, tenant, approval_id, &row.view);
            row.view.clone()
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
            return Ok(view);
        }
        let outcome = self.replay(tenant, &view);
        let mut queue = lock(&self.inner.approvals);
        let row = if let Some(row) = queue.rows.get_mut(approval_id) {
            row.view.replay = Some(outcome);
            self.persist(persist::APPROVAL, tenant, approval_id, &row.view);
            row.view.clone()
        } else {
            ApprovalView {
                replay: Some(outcome),
                ..view
            }
        };
        Ok(row)
    }

    /// Runs an approved call again through the mock gate and announces the outcome,
    /// under the session lock so its counter is ordered with the session's calls.
    fn replay(&self, tenant: &str, view: &ApprovalView) -> Outcome {
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
                return Outcome::Envelope(Envelope::MocksEngineError {
                    message: format!(
                        "replay of {}: session {} is closed",
                        view.tool, view.session_id
                    ),
                });
            }
            Some(s) => {
                let result = s.mocks.consume(&view.tool, true);
                s.last_activity = now_rfc3339();
                (result, s.mocks.note_call(&view.tool))
            }
        };
        let outcome = match result {
            Ok(value) => Outcome::Result(value),
            Err(envelope) => Outcome::Envelope(envelope),
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
            self.persist_counters(s);
        }
        drop(guard);
        outcome
    }
}

impl Runtime {
    /// Puts stored approvals back in the order they were queued. A pending one is
    /// approvable until its `expires_at`, and approving it replays its recorded call.
    pub(crate) fn restore_approvals(&self, records: &[crate::store::StoredRecord]) {
        let mut rows: Vec<(String, ApprovalView)> = records
            .iter()
            .filter_map(|r| persist::decode(r).map(|view| (r.tenant.clone(), view)))
            .collect();
        rows.sort_by(|(_, a), (_, b)| (&a.requested_at, &a.id).cmp(&(&b.requested_at, &b.id)));
        let mut queue = lock(&self.inner.approvals);
        for (tenant, view) in rows {
            let Ok(expires) = DateTime::parse_from_rfc3339(&view.expires_at) else {
                tracing::warn!(approval = %view.id, "stored approval has no readable expiry; skipped");
                continue;
            };
            queue.order.push(view.id.clone());
            queue.rows.insert(
                view.id.clone(),
                Row {
                    view,
                    tenant,
                    expires: expires.with_timezone(&Utc),
                },
            );
        }
    }
}
