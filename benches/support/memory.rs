//! `memory`: resident bytes the model holds per retained event after a million events,
//! against the raw JSON size of those events; then two more workloads of the same size
//! push the first one out past the session bound, and resident memory must stay flat.
//! Sessions arrive in waves of 100 live at once, as test runs do, not 10 k all at once.

use super::Figure;
use super::workload::Workload;
use anyhow::Context;
use spyglass::model::{Limits, Model};
use spyglass::protocol::decode;

/// Resident set size of this process, bytes (`VmRSS` in /proc/self/status).
pub fn rss_bytes() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS in /proc/self/status")?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .context("VmRSS has no value")?
        .parse()?;
    Ok(kb * 1024)
}

#[derive(Debug, Clone)]
pub struct MemoryResult {
    pub limits: Limits,
    pub events: u64,
    /// Resident growth over the first workload, per event.
    pub per_event: f64,
    /// Mean JSON text size of those events.
    pub raw_per_event: f64,
    pub rss_start: u64,
    /// After the first workload, when the bound is just reached.
    pub rss_full: u64,
    /// After one and two more workloads, each replacing every retained session.
    pub rss_next: u64,
    pub rss_last: u64,
    pub sessions: usize,
    pub calls: usize,
    pub dropped_sessions: u64,
}

impl MemoryResult {
    pub fn figure(&self) -> Figure {
        Figure {
            name: "memory",
            value: self.per_event,
            baseline: self.raw_per_event,
            unit: "B/event",
            paired: Vec::new(),
        }
    }

    /// Growth after the bound was reached, as a fraction of what the first workload took.
    pub fn growth_after_bound(&self) -> f64 {
        let first = self.rss_full.saturating_sub(self.rss_start).max(1) as f64;
        self.rss_last.saturating_sub(self.rss_full) as f64 / first
    }
}

/// The limits the figure is taken with: exactly the first workload's sessions are kept,
/// and none of their calls or steps fall off.
pub fn limits(sessions: usize) -> Limits {
    Limits {
        sessions,
        calls_per_session: 1_000,
        steps_per_session: 1_000,
        ..Limits::default()
    }
}

/// Sessions live at the same time.
pub const WAVE: usize = 100;

fn fold(model: &mut Model, workload: &Workload) -> anyhow::Result<u64> {
    let mut raw = 0u64;
    for i in 0..workload.len() {
        let text = workload.text(i);
        raw += text.len() as u64;
        model.apply(&decode(&text)?);
    }
    Ok(raw)
}

/// `sessions` sessions with `per_session` payload frames each, then the same twice more.
pub fn run(sessions: usize, per_session: usize) -> anyhow::Result<MemoryResult> {
    let limits = limits(sessions);
    let first = Workload {
        wave: WAVE.min(sessions),
        ..Workload::even(sessions, per_session)
    };
    let mut model = Model::new(limits);
    let rss_start = rss_bytes()?;
    let raw = fold(&mut model, &first)?;
    let rss_full = rss_bytes()?;
    let events = first.len() as u64;
    let sessions_kept = model.sessions_len();
    let calls: usize = (0..sessions_kept)
        .filter_map(|row| model.session_newest(row))
        .map(|s| s.timeline.calls().len())
        .sum();
    let second = first.next();
    fold(&mut model, &second)?;
    let rss_next = rss_bytes()?;
    fold(&mut model, &second.next())?;
    let rss_last = rss_bytes()?;
    Ok(MemoryResult {
        limits,
        events,
        per_event: rss_full.saturating_sub(rss_start) as f64 / events as f64,
        raw_per_event: raw as f64 / events as f64,
        rss_start,
        rss_full,
        rss_next,
        rss_last,
        sessions: sessions_kept,
        calls,
        dropped_sessions: model.counters.dropped.sessions,
    })
}
