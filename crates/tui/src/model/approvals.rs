//! Approvals as the stream tells them: requested, resolved, replayed, each kept by id in a
//! bounded insertion-ordered store with the pending count maintained as events arrive.

use foldhash::HashMap;
use spyglass_protocol::RawJson;
use spyglass_protocol::events::{Counter, Outcome};
use spyglass_protocol::rest::ApprovalStatus;
use std::collections::VecDeque;

/// One approval and, once approved, what its replay returned.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub id: String,
    pub session_id: String,
    pub call_id: String,
    pub tool: String,
    pub input: RawJson,
    pub rule_id: String,
    /// The rule's message and its `when` as written, from `approval.requested` (a REST
    /// re-read has neither).
    pub message: String,
    pub condition: Option<String>,
    pub status: ApprovalStatus,
    pub requested_at: String,
    pub expires_at: String,
    /// Epoch milliseconds of `expires_at`, for countdowns.
    pub expires_ms: Option<f64>,
    pub decided_by: Option<String>,
    pub note: Option<String>,
    pub replay: Option<Outcome>,
    pub replay_counter: Option<Counter>,
}

/// Approvals by id, oldest dropped first past the bound.
#[derive(Debug, Clone, Default)]
pub struct Approvals {
    by_id: HashMap<String, Approval>,
    order: VecDeque<String>,
    pending: usize,
    /// Bumped on every change, so a view can rebuild its rows only when needed.
    rev: u64,
}

impl Approvals {
    pub fn get(&self, id: &str) -> Option<&Approval> {
        self.by_id.get(id)
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn pending_count(&self) -> usize {
        self.pending
    }

    /// Changes whenever any approval does.
    pub fn rev(&self) -> u64 {
        self.rev
    }

    /// Oldest first; views take only the window they show.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Approval> {
        self.order.iter().filter_map(|id| self.by_id.get(id))
    }

    /// The approval at insertion position `index` (0 = oldest).
    pub fn at(&self, index: usize) -> Option<&Approval> {
        self.order.get(index).and_then(|id| self.by_id.get(id))
    }

    /// Inserts or replaces; returns how many old approvals were dropped to stay in bound.
    pub(crate) fn upsert(&mut self, approval: Approval, max: usize) -> u64 {
        self.rev += 1;
        if approval.status == ApprovalStatus::Pending {
            self.pending += 1;
        }
        let id = approval.id.clone();
        match self.by_id.insert(id.clone(), approval) {
            Some(old) if old.status == ApprovalStatus::Pending => self.pending -= 1,
            Some(_) => {}
            None => self.order.push_back(id),
        }
        self.trim(max)
    }

    fn trim(&mut self, max: usize) -> u64 {
        let mut dropped = 0;
        while self.order.len() > max.max(1) {
            if let Some(id) = self.order.pop_front()
                && let Some(old) = self.by_id.remove(&id)
                && old.status == ApprovalStatus::Pending
            {
                self.pending -= 1;
            }
            dropped += 1;
        }
        dropped
    }

    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut Approval> {
        self.rev += 1;
        self.by_id.get_mut(id)
    }

    /// Changes an approval's status, keeping the pending count true.
    pub(crate) fn set_status(&mut self, id: &str, status: ApprovalStatus) -> bool {
        let Some(approval) = self.by_id.get_mut(id) else {
            return false;
        };
        self.rev += 1;
        if approval.status == ApprovalStatus::Pending && status != ApprovalStatus::Pending {
            self.pending -= 1;
        } else if approval.status != ApprovalStatus::Pending && status == ApprovalStatus::Pending {
            self.pending += 1;
        }
        approval.status = status;
        true
    }
}
