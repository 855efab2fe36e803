//! Eval results as the inspector holds them: a thin wrapper over `eval::EvalHistory` (pass
//! rates, flakiness, trends, each case's latest assertions and session) with a per-suite
//! summary cached for drawing, plus the recent runs the stream announced.

use crate::eval::history::{EvalHistory, HistorySettings};
use crate::protocol::Frame;
use crate::protocol::events::{EvalRunCompleted, Event};
use crate::protocol::rest::{CaseSummary, SuiteSummary};
use std::collections::{BTreeMap, VecDeque};

/// An eval run the stream announced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalRun {
    pub run_id: String,
    pub suites: Vec<String>,
    pub cases: u32,
    pub completed: Option<EvalRunCompleted>,
}

#[derive(Debug, Clone)]
pub struct Evals {
    history: EvalHistory,
    /// One summary per suite, by name; refreshed only for the suite an event touched, so
    /// folding costs one suite's cases and drawing costs nothing extra.
    summaries: BTreeMap<String, SuiteSummary>,
    /// Oldest first, bounded by `Limits::eval_runs`.
    pub runs: VecDeque<EvalRun>,
    /// Bumped whenever anything here changes; views rebuild prepared text on a change.
    pub rev: u64,
}

impl Default for Evals {
    fn default() -> Self {
        Self::new(HistorySettings::default().window)
    }
}

impl Evals {
    /// `window`: runs per suite the rates look back over.
    pub fn new(window: usize) -> Self {
        Self {
            history: EvalHistory::new(HistorySettings {
                window,
                ..HistorySettings::default()
            }),
            summaries: BTreeMap::new(),
            runs: VecDeque::new(),
            rev: 0,
        }
    }

    pub fn window(&self) -> usize {
        self.history.settings().window
    }

    pub fn suites_len(&self) -> usize {
        self.summaries.len()
    }

    /// Suites by name.
    pub fn suites(&self) -> impl Iterator<Item = &SuiteSummary> {
        self.summaries.values()
    }

    pub fn suite(&self, name: &str) -> Option<&SuiteSummary> {
        self.summaries.get(name)
    }

    /// Where a suite sits in the by-name list.
    pub fn suite_row(&self, name: &str) -> Option<usize> {
        self.summaries.keys().position(|n| n == name)
    }

    pub fn suite_at(&self, row: usize) -> Option<&SuiteSummary> {
        self.summaries.values().nth(row)
    }

    pub fn case(&self, suite: &str, case: &str) -> Option<&CaseSummary> {
        self.suite(suite)?.cases.iter().find(|c| c.case == case)
    }

    /// The newest run that has not reported completion.
    pub fn running(&self) -> Option<&EvalRun> {
        self.runs.iter().rev().find(|r| r.completed.is_none())
    }

    /// Folds an `agent.eval.completed` frame; returns how many old outcomes fell out of
    /// the window.
    pub(crate) fn record(&mut self, frame: &Frame) -> u64 {
        let Event::AgentEvalCompleted(result) = &frame.event else {
            return 0;
        };
        let before = self.history.dropped();
        if !self.history.apply_frame(frame) {
            return 0;
        }
        if let Some(summary) = self.history.suite(&result.suite) {
            self.summaries.insert(result.suite.clone(), summary);
        }
        self.rev += 1;
        self.history.dropped() - before
    }

    pub(crate) fn run_started(&mut self, run: EvalRun, max: usize) -> u64 {
        self.runs.push_back(run);
        self.rev += 1;
        let mut dropped = 0;
        while self.runs.len() > max.max(1) {
            self.runs.pop_front();
            dropped += 1;
        }
        dropped
    }

    /// Runs are few and the one completing is almost always the newest: search from the back.
    pub(crate) fn run_completed(&mut self, done: &EvalRunCompleted) {
        self.rev += 1;
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
