//! Eval results folded from `agent.eval.completed` and the run events: per suite and per
//! case, the statuses of the last `window` results (pass rates, flakiness) and recent runs.

use crate::protocol::events::{AgentEvalCompleted, EvalRunCompleted, EvalStatus};
use std::collections::{BTreeMap, VecDeque};

/// One case's recent history.
#[derive(Debug, Clone, Default)]
pub struct CaseStats {
    /// Oldest first, at most `Limits::eval_window` long.
    pub recent: VecDeque<EvalStatus>,
    pub last: Option<AgentEvalCompleted>,
    pub last_session: Option<String>,
    pub results: u64,
}

/// Passed over decided (passed + failed + error) results; skipped results do not count.
fn rate<'a>(statuses: impl Iterator<Item = &'a EvalStatus>) -> Option<f64> {
    let (mut passed, mut decided) = (0u32, 0u32);
    for status in statuses {
        match status {
            EvalStatus::Passed => {
                passed += 1;
                decided += 1;
            }
            EvalStatus::Failed | EvalStatus::Error => decided += 1,
            EvalStatus::Skipped => {}
        }
    }
    (decided > 0).then(|| f64::from(passed) / f64::from(decided))
}

impl CaseStats {
    pub fn pass_rate(&self) -> Option<f64> {
        rate(self.recent.iter())
    }

    /// Both passed and failed within the window.
    pub fn flaky(&self) -> bool {
        self.recent.contains(&EvalStatus::Passed) && self.recent.contains(&EvalStatus::Failed)
    }
}

#[derive(Debug, Clone, Default)]
pub struct SuiteStats {
    pub cases: BTreeMap<String, CaseStats>,
}

impl SuiteStats {
    /// Over every case's window (computed on read; folding stays O(log cases)).
    pub fn pass_rate(&self) -> Option<f64> {
        rate(self.cases.values().flat_map(|c| c.recent.iter()))
    }
}

/// An eval run the stream announced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalRun {
    pub run_id: String,
    pub suites: Vec<String>,
    pub cases: u32,
    pub completed: Option<EvalRunCompleted>,
}

#[derive(Debug, Clone, Default)]
pub struct Evals {
    pub suites: BTreeMap<String, SuiteStats>,
    /// Oldest first, bounded by `Limits::eval_runs`.
    pub runs: VecDeque<EvalRun>,
}

impl Evals {
    /// Returns how many old statuses fell out of the window.
    pub(crate) fn record(
        &mut self,
        result: &AgentEvalCompleted,
        session_id: Option<&str>,
        window: usize,
    ) -> u64 {
        let case = self
            .suites
            .entry(result.suite.clone())
            .or_default()
            .cases
            .entry(result.case.clone())
            .or_default();
        case.recent.push_back(result.status);
        case.results += 1;
        case.last = Some(result.clone());
        case.last_session = session_id.map(str::to_owned);
        let mut dropped = 0;
        while case.recent.len() > window.max(1) {
            case.recent.pop_front();
            dropped += 1;
        }
        dropped
    }

    pub(crate) fn run_started(&mut self, run: EvalRun, max: usize) -> u64 {
        self.runs.push_back(run);
        let mut dropped = 0;
        while self.runs.len() > max.max(1) {
            self.runs.pop_front();
            dropped += 1;
        }
        dropped
    }

    /// Runs are few and the one completing is almost always the newest: search from the back.
    pub(crate) fn run_completed(&mut self, done: &EvalRunCompleted) {
        match self.runs.iter_mut().rev().find(|r| r.run_id == done.run_id) {
            Some(run) => run.completed = Some(done.clone()),
            None => self.runs.push_back(EvalRun {
                run_id: done.run_id.clone(),
                completed: Some(done.clone()),
                ..EvalRun::default()
            }),
        }
    }
}
