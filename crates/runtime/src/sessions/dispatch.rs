//! The dispatch path: every tool call of a session (`execute`, and the agent loop's) through
//! the deny-list, the policy and the mock store, with its `tool.called` event and counters.

use super::{
    CallStart, Dispatched, ExecuteReply, LIST_TOOLS, Session, closed_error, new_short_id, server_of,
};
use crate::mocks::Claim;
use crate::policy::Verdict;
use crate::{ApiErrorWithStatus, Runtime, lock};
use serde_json::json;
use spyglass_protocol::envelope::codes;
use spyglass_protocol::events::{CallSource, Outcome, ToolCalled};
use spyglass_protocol::rest::ToolResult;
use spyglass_protocol::{ApiError, Envelope, Event, RawJson};
use std::sync::{Arc, Mutex};

impl Runtime {
    /// `POST /v1/sessions/:id/execute`.
    pub async fn execute(
        &self,
        tenant: &str,
        session_id: &str,
        tool: &str,
        input: RawJson,
    ) -> Result<ExecuteReply, ApiErrorWithStatus> {
        let dispatched = self.execute_call(tenant, session_id, tool, input).await?;
        let call = dispatched.call();
        Ok(match &call.outcome {
            Outcome::Result(data) => ExecuteReply::Ok(ToolResult {
                success: true,
                data: data.clone(),
                error: None,
                duration: call.duration.round() as u64,
                server: server_of(&call.tool).to_owned(),
                tool: call.tool.as_str().into(),
                tool_call_id: call.call_id.as_str().into(),
                called_at: call.started_at.as_str().into(),
            }),
            Outcome::Envelope(envelope) => ExecuteReply::Envelope((**envelope).clone()),
        })
    }

    /// `execute`, answered with the call's event (the HTTP handler writes its answer from
    /// the event's strings instead of copies of them).
    pub(crate) async fn execute_call(
        &self,
        tenant: &str,
        session_id: &str,
        tool: &str,
        input: RawJson,
    ) -> Result<Dispatched, ApiErrorWithStatus> {
        let start = CallStart::now();
        // A shared store's futures are boxed: they are kilobytes, and held inline every
        // execute's future (2.5 KB) was copied about as hyper took it, on every call.
        let shared = self.inner.shared.is_shared();
        if shared {
            Box::pin(self.adopt_if_missing(tenant, session_id)).await?;
        }
        let session = crate::read(&self.inner.sessions).get_open(tenant, session_id)?;
        let log = &self.inner.log;
        // A store known to be failing refuses the call before anything of it is applied,
        // unless what waits for it can be written now.
        if log.journaled()
            && log
                .store_health()
                .is_some_and(crate::log::StoreHealth::failing)
            && let Some(Err(reason)) = log.write_journal()
        {
            return Err(crate::persist::unavailable(&reason));
        }
        let rollbacks = log.rollbacks();
        let claimed = if shared {
            Box::pin(self.claim_for(&session, tool, &input)).await?
        } else {
            Claim::Local
        };
        let call = self.dispatch(
            &session,
            tool,
            input,
            CallSource::Execute,
            None,
            start,
            claimed,
        )?;
        // The answer leaves only once its counter and its event are in the store; a call
        // the store refused leaves nothing behind.
        if let Err(err) = self.committed_call(&call.logged, rollbacks).await {
            // On a store that stamps, an answer refused for another reason (the writer
            // gone) leaves its call as it is.
            if log.journaled() || log.refused(&call.logged) {
                self.take_back_call(&session, &call);
                // The entry a shared store gave it waits here for this session's next
                // call of the tool.
                if let Claim::Entry(entry) = claimed
                    && matches!(call.call().outcome, Outcome::Result(_))
                {
                    self.inner.shared.give_back(&session, tool, entry);
                }
            }
            return Err(err);
        }
        Ok(call)
    }

    /// Takes back a call whose store refused it (its event already taken out of the log,
    /// `EventLog::write_journal`, or never committed, on a store that stamps): the entry
    /// it was served goes back to the mock, its counters and the session's record drop
    /// it, and its counters document is written again as they now stand.
    pub(crate) fn take_back_call(&self, session: &Arc<Mutex<Session>>, call: &Dispatched) {
        let Some(before) = &call.before else {
            return;
        };
        let event = call.call();
        let served = matches!(event.outcome, Outcome::Result(_)) && event.tool != LIST_TOOLS;
        let mut s = lock(session);
        if let Some(counter) = &event.counter {
            s.mocks.unnote_call(&event.tool, counter, served);
        }
        let envelope = !matches!(event.outcome, Outcome::Result(_));
        s.unrecord(
            &call.logged,
            envelope,
            (**before).clone(),
            &self.inner.budget,
        );
        if self.inner.shared.is_shared() {
            // Its event never comes back stamped: the follower would write the counters
            // once none of this session's calls is on its way back (`follow_session_event`).
            s.unfollowed = s.unfollowed.saturating_sub(1);
            if s.unfollowed == 0 {
                s.write_counters(&self.inner.log, true);
            }
        } else {
            self.inner.moved.again(session, &mut s);
        }
        let tenant = s.tenant.clone();
        drop(s);
        // A held call's approval goes with it (its `approval.requested` went with its event).
        if let Outcome::Envelope(envelope) = &event.outcome
            && let Envelope::ApprovalRequired { approval_id, .. } = &**envelope
        {
            lock(&self.inner.approvals).take_back(&tenant, approval_id, &self.inner.log);
        }
    }

    /// One call through deny-list, policy and mock store, recorded and emitted as
    /// `tool.called`. The counter moves only on a returned entry, under the session lock.
    /// Refused (nothing queued, counted or emitted): a closed session, 404, and input a
    /// policy rule cannot read, 400 `input_unreadable`. `claim`: the stateful entry a
    /// shared store gave this call (`Runtime::claim_for`).
    #[expect(clippy::too_many_arguments)]
    pub(crate) fn dispatch(
        &self,
        session: &Arc<Mutex<Session>>,
        tool: &str,
        input: RawJson,
        source: CallSource,
        iteration: Option<u32>,
        start: CallStart,
        claim: Claim,
    ) -> Result<Dispatched, ApiErrorWithStatus> {
        let CallStart {
            at: started_at,
            clock,
        } = start;
        let verdict = if tool == LIST_TOOLS {
            Verdict::Allow
        } else {
            self.inner
                .config
                .policy
                .evaluate_raw(tool, &input)
                .map_err(|err| ApiErrorWithStatus {
                    status: 400,
                    error: ApiError::new(codes::INPUT_UNREADABLE, err.to_string())
                        .with_field("/input"),
                })?
        };
        let mut s = lock(session);
        // Checked under the lock `close_session` takes: nothing of this session is queued,
        // counted or emitted after its `session.closed`.
        if s.closed {
            return Err(closed_error(&s.id));
        }
        // Only a journal or a store that stamps takes a call back; the runtime in memory
        // copies nothing.
        let before = self
            .inner
            .log
            .takes_back()
            .then(|| Box::new((s.last_activity.clone(), s.last_seq)));
        let call_id = new_short_id("call_");
        let mut approval = None;
        let gated: Option<Envelope> = match verdict {
            Verdict::Allow => None,
            Verdict::Deny { rule_id, message } => Some(Envelope::PolicyDenied { rule_id, message }),
            Verdict::Approval { rule_id, message } => {
                let row = self
                    .queue_approval(&s.tenant, &s.id, &call_id, tool, &input, &rule_id, &message)?;
                let envelope = Envelope::ApprovalRequired {
                    approval_id: row.approval_id.clone(),
                    expires_at: row.expires_at.clone(),
                    message,
                };
                approval = Some(row);
                Some(envelope)
            }
        };
        let outcome = match gated {
            Some(envelope) => Err(envelope),
            None if tool == LIST_TOOLS => Ok(RawJson::from_value(&json!({ "tools": s.tools() }))),
            // Not in test mode a session has no mocks: nothing to name about test mode.
            None if !self.inner.config.test_mode => Err(crate::mocks::not_mocked_live(tool)),
            None => s.mocks.consume(tool, &input, false, claim),
        };
        let counter = s.mocks.note_call(tool);
        let duration_ms = clock.elapsed().as_secs_f64() * 1000.0;
        let envelope = outcome.is_err();
        // Emitted under the session lock so the counters in this session's `tool.called`
        // events rise in seq order. Its input, outcome, id and start move into the event
        // (the caller reads them there) and it shares the session's tenant name.
        let logged = self.emit_shared(
            s.tenant.clone(),
            Some(s.id.clone()),
            Event::ToolCalled(ToolCalled {
                call_id,
                tool: tool.into(),
                input,
                outcome: match outcome {
                    Ok(value) => Outcome::Result(value),
                    Err(envelope) => Outcome::Envelope(Box::new(envelope)),
                },
                started_at: started_at.into(),
                duration: duration_ms,
                counter,
                source,
                iteration,
            }),
        );
        s.last_seq = logged.frame.seq;
        s.record(
            &logged,
            envelope,
            self.inner.config.retained_calls,
            &self.inner.budget,
        );
        if self.inner.shared.is_shared() {
            s.unfollowed += 1;
        }
        let counters_due = self.inner.moved.note(
            &self.inner.log,
            self.inner.shared.is_shared(),
            session,
            &mut s,
            logged.ord,
        );
        let announce = approval.map(|row| (s.tenant.clone(), s.id.clone(), row));
        drop(s);
        if counters_due {
            self.write_moved_counters();
        }
        // The record grew the session's bytes: closed data makes room before the log must.
        self.make_room();
        if let Some((tenant, session_id, row)) = announce {
            self.emit_for(&tenant, Some(session_id), row.requested());
        }
        Ok(Dispatched { logged, before })
    }
}
