//! Eval results as the inspector holds them: a thin wrapper over `eval::EvalHistory` (pass
//! rates, flakiness, trends, each case's latest assertions and session) with a per-suite
//! summary cached for drawing, the recent runs the stream announced, and each suite's
//! newest run as attempts with the eval crate's statistics of them (`stats::…`).

use spyglass_eval::history::{EvalHistory, HistorySettings};
use spyglass_eval::stats::{CaseStats, SuiteStats};
use spyglass_protocol::Frame;
use spyglass_protocol::events::{
    AgentEvalCompleted, EvalRunCompleted, EvalRunStarted, EvalScope, Event,
};
use spyglass_protocol::rest::{CaseSummary, SuiteSummary};
use std::collections::{BTreeMap, VecDeque};

/// An eval run the stream announced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvalRun {
    pub run_id: String,
    pub suites: Vec<String>,
    pub cases: u32,
    pub completed: Option<EvalRunCompleted>,
    /// Its results without assertions (suite, case, status), so a pinned run can be
    /// compared with later ones; at most `cases` of them (the count the run announced).
    pub results: Vec<AgentEvalCompleted>,
}

/// One suite's newest suite run: each case's attempts in it (without assertions) and
/// the eval crate's statistics of them, refreshed for the case a result touched.
#[derive(Debug, Clone)]
pub struct LatestRun {
    pub run_id: String,
    attempts: BTreeMap<String, Vec<AgentEvalCompleted>>,
    /// Per case: its attempt strip, pass rate with interval, pass@k, pass^k, flip rate.
    pub cases: BTreeMap<String, CaseStats>,
    /// The suite over this run's cases.
    pub suite: SuiteStats,
}

impl LatestRun {
    fn new(run_id: &str, suite: &str) -> Self {
        Self {
            run_id: run_id.to_owned(),
            attempts: BTreeMap::new(),
            cases: BTreeMap::new(),
            suite: SuiteStats::of(suite, &[]),
        }
    }

    fn add(&mut self, result: &AgentEvalCompleted) {
        let attempts = self.attempts.entry(result.case.clone()).or_default();
        attempts.push(AgentEvalCompleted {
            assertions: Vec::new(),
            reason: None,
            ..result.clone()
        });
        let records: Vec<&AgentEvalCompleted> = attempts.iter().collect();
        if let Some(stats) = CaseStats::of(&records) {
            self.cases.insert(result.case.clone(), stats);
        }
        let cases: Vec<&CaseStats> = self.cases.values().collect();
        self.suite = SuiteStats::of(&result.suite, &cases);
    }

    /// Whether some case ran more than once in this run (`--repeat`).
    pub fn repeated(&self) -> bool {
        self.cases.values().any(|c| c.strip.chars().count() > 1)
    }
}

#[derive(Debug, Clone)]
pub struct Evals {
    history: EvalHistory,
    /// One summary per suite, by name; refreshed only for the suite an event touched, so
    /// folding costs one suite's cases and drawing costs nothing extra.
    summaries: BTreeMap<String, SuiteSummary>,
    /// Per suite, its newest suite run's attempts and their statistics.
    latest: BTreeMap<String, LatestRun>,
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
            latest: BTreeMap::new(),
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

    /// The suite's newest suite run, as attempts and their statistics.
    pub fn latest(&self, suite: &str) -> Option<&LatestRun> {
        self.latest.get(suite)
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
        if result.scope == EvalScope::Suite
            && let Some(id) = &result.run_id
        {
            let latest = self
                .latest
                .entry(result.suite.clone())
                .or_insert_with(|| LatestRun::new(id, &result.suite));
            if &latest.run_id != id {
                *latest = LatestRun::new(id, &result.suite);
            }
            latest.add(result);
        }
        if result.scope == EvalScope::Suite
            && let Some(id) = &result.run_id
            && let Some(run) = self.runs.iter_mut().rev().find(|r| &r.run_id == id)
            && run.results.len() < run.cases as usize
        {
            run.results.push(AgentEvalCompleted {
                assertions: Vec::new(),
                reason: None,
                ..result.clone()
            });
        }
        self.rev += 1;
        self.history.dropped() - before
    }

    /// A case run (one case run again on its own) is not a run of its suite: RUNS lists
    /// suite runs only.
    pub(crate) fn run_started(&mut self, started: &EvalRunStarted, max: usize) -> u64 {
        if started.scope == EvalScope::Case {
            return 0;
        }
        self.runs.push_back(EvalRun {
            run_id: started.run_id.clone(),
            suites: started.suites.clone(),
            cases: started.cases,
            completed: None,
            results: Vec::new(),
        });
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
        if done.scope == EvalScope::Case {
            return;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use spyglass_protocol::decode;
    use spyglass_protocol::events::EvalStatus;

    fn frame(seq: u64, text: &str) -> Frame {
        let with_seq = text.replacen('{', &format!("{{\"seq\":{seq},"), 1);
        decode(&with_seq).unwrap()
    }

    fn fold(evals: &mut Evals, frame: &Frame) {
        match &frame.event {
            Event::EvalRunStarted(run) => {
                evals.run_started(run, 10);
            }
            Event::EvalRunCompleted(done) => evals.run_completed(done),
            _ => {
                evals.record(frame);
            }
        }
    }

    #[test]
    fn a_failing_metric_without_status_counts_as_a_failure() {
        let mut evals = Evals::default();
        let text = r#"{"kind":"agent.eval.completed","suite":"s","case":"c","pass":false,"reason":"no link","tokens":{"prompt":1,"completion":1,"total":2},"cost":0,"duration":3}"#;
        fold(&mut evals, &frame(1, text));
        let suite = evals.suite("s").unwrap();
        assert_eq!((suite.passed, suite.failed), (0, 1));
        assert_eq!(suite.pass_rate, Some(0.0));
        assert_eq!(
            evals.case("s", "c").unwrap().last_status,
            EvalStatus::Failed
        );
        let text = r#"{"kind":"agent.eval.completed","suite":"s","case":"d","pass":true}"#;
        fold(&mut evals, &frame(2, text));
        assert_eq!(
            evals.case("s", "d").unwrap().last_status,
            EvalStatus::Passed
        );
    }

    #[test]
    fn a_status_that_contradicts_pass_does_not_decode() {
        let text = r#"{"seq":1,"kind":"agent.eval.completed","suite":"s","case":"c","status":"passed","pass":false}"#;
        let err = decode(text).unwrap_err();
        assert_eq!(err.field(), Some("/status"));
        assert!(err.to_string().contains("disagrees"), "{err}");
    }

    #[test]
    fn a_case_rerun_adds_no_run_and_no_trend_point() {
        let mut evals = Evals::default();
        let frames = [
            r#"{"kind":"eval.run.started","runId":"run_1","suites":["s"],"cases":2,"repeat":1}"#,
            r#"{"kind":"agent.eval.completed","suite":"s","case":"a","status":"failed","pass":false,"runId":"run_1"}"#,
            r#"{"kind":"agent.eval.completed","suite":"s","case":"b","status":"passed","pass":true,"runId":"run_1"}"#,
            r#"{"kind":"eval.run.completed","runId":"run_1","passed":1,"failed":1}"#,
            r#"{"kind":"eval.run.started","runId":"run_2","suites":["s"],"cases":1,"repeat":1,"scope":"case"}"#,
            r#"{"kind":"agent.eval.completed","suite":"s","case":"a","status":"passed","pass":true,"runId":"run_2","scope":"case"}"#,
            r#"{"kind":"eval.run.completed","runId":"run_2","passed":1,"scope":"case"}"#,
        ];
        for (seq, text) in frames.iter().enumerate() {
            fold(&mut evals, &frame(seq as u64 + 1, text));
        }
        let ids: Vec<&str> = evals.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["run_1"], "RUNS lists suite runs only");
        let suite = evals.suite("s").unwrap();
        assert_eq!(suite.runs, 1);
        assert_eq!(suite.trend, vec![Some(0.5)]);
        assert_eq!((suite.passed, suite.failed), (1, 1));
        let a = evals.case("s", "a").unwrap();
        assert_eq!(
            a.last_status,
            EvalStatus::Passed,
            "the rerun is the newest result"
        );
        assert!(a.last_rerun, "and shows as a rerun of that case");
        assert_eq!((a.passed, a.failed, a.runs), (0, 1, 1));
        assert!(!evals.case("s", "b").unwrap().last_rerun);

        // The next suite run's outcome is no rerun again.
        let text = r#"{"kind":"agent.eval.completed","suite":"s","case":"a","status":"passed","pass":true,"runId":"run_3"}"#;
        fold(&mut evals, &frame(10, text));
        assert!(!evals.case("s", "a").unwrap().last_rerun);
        assert_eq!(evals.suite("s").unwrap().runs, 2);
    }
}
