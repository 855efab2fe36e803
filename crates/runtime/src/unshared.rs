//! A runtime built without the `postgres` feature: no store is ever shared (`SharedLink`
//! is never set), so each shared-store path answers as a runtime alone does (`shared`
//! when the feature is on).

use super::approvals::Verdict;
use super::mocks::Claim;
use super::sessions::Session;
use super::{ApiErrorWithStatus, Runtime};
use spyglass_protocol::RawJson;
use spyglass_protocol::rest::ApprovalView;
use std::sync::{Arc, Mutex};

/// No store is shared in this build: the link is never set.
pub(crate) struct SharedLink;

impl SharedLink {
    pub(crate) fn new() -> Self {
        SharedLink
    }

    /// Never: no store is shared in this build.
    #[expect(
        clippy::unused_self,
        reason = "the shared build's signature, which reads the link"
    )]
    pub(crate) fn is_shared(&self) -> bool {
        false
    }

    /// Never called: no entry is claimed in this build.
    #[expect(
        clippy::unused_self,
        reason = "the shared build's signature, which keeps the entry"
    )]
    pub(crate) fn give_back(&self, _session: &Arc<Mutex<Session>>, _tool: &str, _entry: u32) {}

    /// No other runtime starts eval runs.
    #[expect(
        clippy::unused_async,
        reason = "the shared build's signature, which awaits the store"
    )]
    pub(crate) async fn eval_run(
        &self,
        _tenant: &str,
        _run_id: &str,
    ) -> Result<Option<spyglass_protocol::rest::EvalRunDetail>, ApiErrorWithStatus> {
        Ok(None)
    }
}

impl Runtime {
    /// Every call dispatches its stateful entries here.
    #[expect(
        clippy::unused_async,
        reason = "the shared build's signature, which awaits the store"
    )]
    pub(crate) async fn claim_for(
        &self,
        _session: &Arc<Mutex<Session>>,
        _tool: &str,
        _input: &RawJson,
    ) -> Result<Claim, ApiErrorWithStatus> {
        Ok(Claim::Local)
    }

    /// Every session is here or nowhere.
    #[expect(
        clippy::unused_async,
        reason = "the shared build's signature, which awaits the store"
    )]
    pub(crate) async fn adopt_if_missing(
        &self,
        _tenant: &str,
        _id: &str,
    ) -> Result<(), ApiErrorWithStatus> {
        Ok(())
    }

    /// `DELETE /v1/sessions/:id`: closed here.
    #[expect(
        clippy::unused_async,
        reason = "the shared build's signature, which awaits the store"
    )]
    pub async fn close_any(&self, tenant: &str, id: &str) -> Result<(), ApiErrorWithStatus> {
        self.close_session(tenant, id)
    }

    /// `POST /v1/approvals/:id/approve|deny`: decided here alone.
    #[expect(
        clippy::unused_async,
        reason = "the shared build's signature, which awaits the store"
    )]
    pub async fn decide_any(
        &self,
        tenant: &str,
        approval_id: &str,
        verdict: Verdict,
        by: Option<String>,
        note: Option<String>,
    ) -> Result<ApprovalView, ApiErrorWithStatus> {
        self.decide(tenant, approval_id, verdict, by, note)
    }
}
