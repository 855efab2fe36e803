//! Eval history: per (suite, case) outcomes of the last N runs, folded from
//! `agent.eval.completed` events, giving pass rates, flaky cases and a trend per suite.
//! Pure (no IO): the runtime serves its `summary()` and the inspector's model folds too.

use spyglass_protocol::Frame;
use spyglass_protocol::events::{AgentEvalCompleted, EvalScope, EvalStatus, Event};
use spyglass_protocol::rest::{CaseSummary, EvalSummary, SuiteSummary};
use std::collections::{HashSet, VecDeque};

/// Bounds of the history; both are settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistorySettings {
    /// Runs per suite the rates look back over; older runs are dropped.
    pub window: usize,
    /// Outcomes held per case at most (a run with `repeat` adds several).
    pub max_outcomes_per_case: usize,
}

impl Default for HistorySettings {
    fn default() -> Self {
        Self {
            window: 20,
            max_outcomes_per_case: 200,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    passed: u32,
    failed: u32,
    errored: u32,
    skipped: u32,
}

impl Tally {
    fn add(&mut self, status: EvalStatus) {
        match status {
            EvalStatus::Passed => self.passed += 1,
            EvalStatus::Failed => self.failed += 1,
            EvalStatus::Error => self.errored += 1,
            EvalStatus::Skipped => self.skipped += 1,
        }
    }

    /// Skipped cases say nothing about the agent, so they are left out of the rate.
    fn rate(&self) -> Option<f64> {
        let judged = self.passed + self.failed + self.errored;
        (judged > 0).then(|| f64::from(self.passed) / f64::from(judged))
    }
}

/// One run of a suite: a runner's run id, or a batch of external events.
#[derive(Debug, Clone)]
struct RunEntry {
    ordinal: u64,
    run_id: Option<String>,
    tally: Tally,
}

#[derive(Debug, Clone)]
struct Outcome {
    ordinal: u64,
    status: EvalStatus,
    /// The event's `attempt` and `duration`: with the run, case and status, what makes a
    /// result the same one (a file imported again), not a retry that says the same.
    attempt: Option<u32>,
    duration: f64,
}

#[derive(Debug, Clone)]
struct CaseHistory {
    name: String,
    outcomes: VecDeque<Outcome>,
    last: AgentEvalCompleted,
    last_session_id: Option<String>,
    /// `last` came from a case run (scope `case`).
    last_rerun: bool,
    /// `EvalHistory::clock` when a result last reached it, for dropping the oldest first.
    touched: u64,
}

/// External events (no run id) of one suite count as one run until a case repeats.
#[derive(Debug, Clone)]
struct ExternalBatch {
    ordinal: u64,
    seen: HashSet<String>,
}

#[derive(Debug, Clone)]
struct SuiteHistory {
    name: String,
    runs: VecDeque<RunEntry>,
    cases: Vec<CaseHistory>,
    next_ordinal: u64,
    external: Option<ExternalBatch>,
    /// `suite_bytes` as last counted.
    bytes: usize,
}

impl SuiteHistory {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            runs: VecDeque::new(),
            cases: Vec::new(),
            next_ordinal: 0,
            external: None,
            bytes: 0,
        }
    }

    /// The case's history, added (with no outcomes) if new.
    fn case_mut(&mut self, name: &str) -> &mut CaseHistory {
        let at = if let Some(at) = self.cases.iter().position(|c| c.name == name) {
            at
        } else {
            self.cases.push(CaseHistory {
                name: name.to_owned(),
                outcomes: VecDeque::new(),
                last: AgentEvalCompleted::default(),
                last_session_id: None,
                last_rerun: false,
                touched: 0,
            });
            self.cases.len() - 1
        };
        &mut self.cases[at]
    }

    fn open_run(&mut self, run_id: Option<String>) -> u64 {
        let ordinal = self.next_ordinal;
        self.next_ordinal += 1;
        self.runs.push_back(RunEntry {
            ordinal,
            run_id,
            tally: Tally::default(),
        });
        ordinal
    }

    /// Whether this exact result (its run id, case, attempt, status and duration) is
    /// already held: the same file imported twice, or a batch posted again, must not count
    /// twice; a retry that ends otherwise, or takes another time, is a result of its own.
    fn holds(&self, event: &AgentEvalCompleted) -> bool {
        let Some(id) = &event.run_id else {
            return false;
        };
        let Some(run) = self.runs.iter().find(|r| r.run_id.as_ref() == Some(id)) else {
            return false;
        };
        self.cases
            .iter()
            .find(|c| c.name == event.case)
            .is_some_and(|case| {
                case.outcomes.iter().any(|o| {
                    o.ordinal == run.ordinal
                        && o.attempt == event.attempt
                        && o.status == event.status
                        && o.duration.to_bits() == event.duration.to_bits()
                })
            })
    }

    /// The run this event belongs to, opened if new.
    fn run_for(&mut self, event: &AgentEvalCompleted) -> u64 {
        if let Some(id) = &event.run_id {
            match self.runs.iter().find(|r| r.run_id.as_ref() == Some(id)) {
                Some(run) => run.ordinal,
                None => self.open_run(Some(id.clone())),
            }
        } else {
            if let Some(batch) = &mut self.external
                && batch.seen.insert(event.case.clone())
                && self.runs.iter().any(|r| r.ordinal == batch.ordinal)
            {
                return batch.ordinal;
            }
            let ordinal = self.open_run(None);
            self.external = Some(ExternalBatch {
                ordinal,
                seen: HashSet::from([event.case.clone()]),
            });
            ordinal
        }
    }
}

/// Outcomes per (suite, case) over the last `window` runs.
#[derive(Debug, Clone, Default)]
pub struct EvalHistory {
    settings: HistorySettings,
    suites: Vec<SuiteHistory>,
    last_seq: u64,
    dropped: u64,
    /// Sum of the suites' `bytes`: what a byte budget counts for this history.
    bytes: usize,
    /// Counts results recorded, to order cases by their last one.
    clock: u64,
}

/// Fixed share of a case or suite entry (vectors, options, numbers).
const ENTRY_OVERHEAD: usize = 160;

/// What a byte budget counts for a case: its name and latest result (strings and
/// assertions) and its outcomes.
fn case_bytes(case: &CaseHistory) -> usize {
    let last = &case.last;
    let assertions: usize = last
        .assertions
        .iter()
        .map(|a| {
            a.kind.len()
                + a.expected.get().len()
                + a.actual.get().len()
                + a.message.as_ref().map_or(0, String::len)
                + 64
        })
        .sum();
    ENTRY_OVERHEAD
        + case.name.len()
        + last.suite.len()
        + last.case.len()
        + last.reason.as_ref().map_or(0, String::len)
        + last.run_id.as_ref().map_or(0, String::len)
        + case.last_session_id.as_ref().map_or(0, String::len)
        + assertions
        + case.outcomes.len() * std::mem::size_of::<Outcome>()
}

/// A suite's name, runs and the case names its external batch remembers, plus its cases.
fn suite_bytes(suite: &SuiteHistory) -> usize {
    let runs: usize = suite
        .runs
        .iter()
        .map(|r| std::mem::size_of::<RunEntry>() + r.run_id.as_ref().map_or(0, String::len))
        .sum();
    let external: usize = suite
        .external
        .as_ref()
        .map_or(0, |b| b.seen.iter().map(|c| c.len() + 32).sum());
    ENTRY_OVERHEAD
        + suite.name.len()
        + runs
        + external
        + suite.cases.iter().map(case_bytes).sum::<usize>()
}

impl EvalHistory {
    pub fn new(settings: HistorySettings) -> Self {
        Self {
            settings: HistorySettings {
                window: settings.window.max(1),
                max_outcomes_per_case: settings.max_outcomes_per_case.max(1),
            },
            ..Self::default()
        }
    }

    pub fn settings(&self) -> HistorySettings {
        self.settings
    }

    /// Outcomes no longer held, in total (the inspector shows it among its drops).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Folds a stream frame; only `agent.eval.completed` counts. Returns whether it did.
    pub fn apply_frame(&mut self, frame: &Frame) -> bool {
        match &frame.event {
            Event::AgentEvalCompleted(event) => {
                self.record(frame.seq, frame.session_id.as_deref(), event)
            }
            _ => false,
        }
    }

    /// Whether `event` is a result this history already holds (same suite, run id, case,
    /// attempt, status and duration); `record` ignores those.
    pub fn holds(&self, event: &AgentEvalCompleted) -> bool {
        event.scope != EvalScope::Case
            && self
                .suites
                .iter()
                .find(|s| s.name == event.suite)
                .is_some_and(|suite| suite.holds(event))
    }

    /// Folds one case outcome. `seq` is its stream sequence: a frame seen again (a
    /// replay after reconnecting) is ignored; 0 means "not from a stream", always taken.
    /// A result already held (`holds`) is ignored too.
    pub fn record(
        &mut self,
        seq: u64,
        session_id: Option<&str>,
        event: &AgentEvalCompleted,
    ) -> bool {
        if seq != 0 {
            if seq <= self.last_seq {
                return false;
            }
            self.last_seq = seq;
        }
        if self.holds(event) {
            return false;
        }
        let settings = self.settings;
        self.clock += 1;
        let clock = self.clock;
        let index = if let Some(index) = self.suites.iter().position(|s| s.name == event.suite) {
            index
        } else {
            self.suites.push(SuiteHistory::new(&event.suite));
            self.suites.len() - 1
        };
        let suite = &mut self.suites[index];
        if event.scope == EvalScope::Case {
            // A case run again on its own is that case's newest result, not a run of the
            // suite: no trend point, no run, no outcome in the rates.
            let case = suite.case_mut(&event.case);
            case.last = event.clone();
            case.last_session_id = session_id.map(str::to_owned);
            case.last_rerun = true;
            case.touched = clock;
            self.recount(index);
            return true;
        }
        let ordinal = suite.run_for(event);
        if let Some(run) = suite.runs.iter_mut().find(|r| r.ordinal == ordinal) {
            run.tally.add(event.status);
        }
        let case = suite.case_mut(&event.case);
        case.touched = clock;
        case.last_rerun = false;
        case.outcomes.push_back(Outcome {
            ordinal,
            status: event.status,
            attempt: event.attempt,
            duration: event.duration,
        });
        case.last = event.clone();
        case.last_session_id = session_id.map(str::to_owned);
        let mut dropped = 0;
        while case.outcomes.len() > settings.max_outcomes_per_case {
            case.outcomes.pop_front();
            dropped += 1;
        }
        while suite.runs.len() > settings.window {
            if let Some(old) = suite.runs.pop_front() {
                for case in &mut suite.cases {
                    while case
                        .outcomes
                        .front()
                        .is_some_and(|o| o.ordinal <= old.ordinal)
                    {
                        case.outcomes.pop_front();
                        dropped += 1;
                    }
                }
            }
        }
        self.dropped += dropped;
        self.recount(index);
        true
    }

    /// Bytes this history holds, as a byte budget counts them (names, latest results,
    /// outcomes, runs).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Counts the bytes of the suite at `index` again. One pass over its cases, as
    /// finding the case took.
    fn recount(&mut self, index: usize) {
        let suite = &mut self.suites[index];
        let bytes = suite_bytes(suite);
        self.bytes = self.bytes - suite.bytes + bytes;
        suite.bytes = bytes;
    }

    /// Drops the case whose latest result is the oldest (its suite too when it was the
    /// last), keeping at least `keep` cases; the bytes freed with the suite and case
    /// dropped, or None when nothing may go.
    pub fn drop_oldest_case(&mut self, keep: usize) -> Option<(usize, String, String)> {
        let cases: usize = self.suites.iter().map(|s| s.cases.len()).sum();
        if cases <= keep {
            return None;
        }
        let (si, ci) = self
            .suites
            .iter()
            .enumerate()
            .flat_map(|(si, s)| {
                s.cases
                    .iter()
                    .enumerate()
                    .map(move |(ci, c)| (c.touched, si, ci))
            })
            .min()
            .map(|(_, si, ci)| (si, ci))?;
        let before = self.bytes;
        let suite = &mut self.suites[si];
        let case = suite.cases.remove(ci);
        let names = (suite.name.clone(), case.name.clone());
        self.dropped += case.outcomes.len() as u64;
        if let Some(batch) = &mut suite.external {
            batch.seen.remove(&case.name);
        }
        if suite.cases.is_empty() {
            let gone = self.suites.remove(si);
            self.bytes -= gone.bytes;
        } else {
            let bytes = suite_bytes(suite);
            self.bytes = self.bytes - suite.bytes + bytes;
            suite.bytes = bytes;
        }
        Some((before - self.bytes, names.0, names.1))
    }

    /// Each case's outcomes the history holds, oldest first, per suite (by name) and
    /// case (in first-seen order): what `spyglass eval --history` prints.
    pub fn outcomes(&self) -> Vec<(String, String, Vec<EvalStatus>)> {
        let mut suites: Vec<&SuiteHistory> = self.suites.iter().collect();
        suites.sort_by(|a, b| a.name.cmp(&b.name));
        suites
            .into_iter()
            .flat_map(|suite| {
                suite.cases.iter().map(|case| {
                    (
                        suite.name.clone(),
                        case.name.clone(),
                        case.outcomes.iter().map(|o| o.status).collect(),
                    )
                })
            })
            .collect()
    }

    /// Pass rates per suite (by name) and per case (in first-seen order).
    pub fn summary(&self) -> EvalSummary {
        self.summary_over(self.settings.window)
    }

    /// Like `summary`, over only the last `window` runs of each suite (at most the
    /// configured window, at least one run).
    pub fn summary_over(&self, window: usize) -> EvalSummary {
        let window = window.clamp(1, self.settings.window);
        let mut suites: Vec<SuiteSummary> = self
            .suites
            .iter()
            .map(|suite| suite_summary(suite, window))
            .collect();
        suites.sort_by(|a, b| a.suite.cmp(&b.suite));
        EvalSummary {
            window: u32::try_from(window).unwrap_or(u32::MAX),
            dropped: self.dropped,
            suites,
        }
    }

    /// One suite's summary, if it has any outcome.
    pub fn suite(&self, name: &str) -> Option<SuiteSummary> {
        self.suites
            .iter()
            .find(|s| s.name == name)
            .map(|suite| suite_summary(suite, self.settings.window))
    }
}

fn suite_summary(suite: &SuiteHistory, window: usize) -> SuiteSummary {
    let skip = suite.runs.len().saturating_sub(window);
    // Outcomes of runs older than the last `window` are left out of the rates.
    let oldest = suite.runs.get(skip).map_or(u64::MAX, |run| run.ordinal);
    let runs: Vec<&RunEntry> = suite.runs.iter().skip(skip).collect();
    let mut total = Tally::default();
    for run in &runs {
        total.passed += run.tally.passed;
        total.failed += run.tally.failed;
        total.errored += run.tally.errored;
        total.skipped += run.tally.skipped;
    }
    SuiteSummary {
        suite: suite.name.clone(),
        runs: u32::try_from(runs.len()).unwrap_or(u32::MAX),
        pass_rate: total.rate(),
        passed: total.passed,
        failed: total.failed,
        errored: total.errored,
        skipped: total.skipped,
        trend: runs.iter().map(|run| run.tally.rate()).collect(),
        last_run_id: suite.runs.back().and_then(|run| run.run_id.clone()),
        cases: suite
            .cases
            .iter()
            .map(|case| case_summary(case, oldest))
            .collect(),
    }
}

fn case_summary(case: &CaseHistory, oldest: u64) -> CaseSummary {
    let mut tally = Tally::default();
    let mut runs = 0u32;
    let mut previous = None;
    for outcome in case.outcomes.iter().filter(|o| o.ordinal >= oldest) {
        tally.add(outcome.status);
        if previous != Some(outcome.ordinal) {
            runs += 1;
            previous = Some(outcome.ordinal);
        }
    }
    CaseSummary {
        case: case.name.clone(),
        runs,
        pass_rate: tally.rate(),
        passed: tally.passed,
        failed: tally.failed,
        errored: tally.errored,
        skipped: tally.skipped,
        flaky: tally.passed > 0 && tally.failed + tally.errored > 0,
        last_status: case.last.status,
        last_duration: case.last.duration,
        last_run_id: case.last.run_id.clone(),
        last_session_id: case.last_session_id.clone(),
        last_reason: case.last.reason.clone(),
        last_assertions: case.last.assertions.clone(),
        last_rerun: case.last_rerun,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(suite: &str, case: &str, status: EvalStatus, run: Option<&str>) -> AgentEvalCompleted {
        AgentEvalCompleted {
            suite: suite.into(),
            case: case.into(),
            status,
            pass: status == EvalStatus::Passed,
            run_id: run.map(str::to_owned),
            duration: 5.0,
            ..AgentEvalCompleted::default()
        }
    }

    fn case<'a>(summary: &'a EvalSummary, suite: &str, name: &str) -> &'a CaseSummary {
        summary
            .suites
            .iter()
            .find(|s| s.suite == suite)
            .and_then(|s| s.cases.iter().find(|c| c.case == name))
            .unwrap()
    }

    use EvalStatus::{Error, Failed, Passed, Skipped};

    #[test]
    fn pass_rates_per_suite_and_case() {
        let mut history = EvalHistory::new(HistorySettings::default());
        let mut seq = 0;
        let mut add = |h: &mut EvalHistory, case: &str, status, run: &str| {
            seq += 1;
            h.record(
                seq,
                Some("ses_x"),
                &event("payments", case, status, Some(run)),
            )
        };
        add(&mut history, "a", Passed, "r1");
        add(&mut history, "b", Failed, "r1");
        add(&mut history, "c", Skipped, "r1");
        add(&mut history, "a", Passed, "r2");
        add(&mut history, "b", Passed, "r2");
        add(&mut history, "c", Error, "r2");
        let summary = history.summary();
        let suite = &summary.suites[0];
        assert_eq!(suite.runs, 2);
        assert_eq!(
            (suite.passed, suite.failed, suite.errored, suite.skipped),
            (3, 1, 1, 1)
        );
        assert_eq!(suite.pass_rate, Some(0.6), "skips left out: 3 of 5");
        assert_eq!(suite.trend, vec![Some(0.5), Some(2.0 / 3.0)]);
        assert_eq!(suite.last_run_id.as_deref(), Some("r2"));
        let names: Vec<&str> = suite.cases.iter().map(|c| c.case.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"], "cases in first-seen order");
        assert_eq!(case(&summary, "payments", "a").pass_rate, Some(1.0));
        let b = case(&summary, "payments", "b");
        assert_eq!((b.pass_rate, b.runs, b.flaky), (Some(0.5), 2, true));
        assert_eq!(b.last_status, Passed);
        assert_eq!(b.last_session_id.as_deref(), Some("ses_x"));
        let c = case(&summary, "payments", "c");
        assert_eq!(c.pass_rate, Some(0.0));
        assert!(!c.flaky, "error and skip, never a pass: not flaky");
    }

    #[test]
    fn bytes_follow_long_names_and_the_oldest_case_drops_first() {
        let mut history = EvalHistory::new(HistorySettings::default());
        let long = "x".repeat(4000);
        for i in 0..10 {
            let name = format!("{i}{long}");
            history.record(0, None, &event("s", &name, EvalStatus::Passed, Some("r1")));
        }
        assert!(history.bytes() > 10 * 2 * 4000, "{}", history.bytes());
        let before = history.bytes();
        // Case 0 recorded again: case 1 is now the oldest.
        history.record(
            0,
            None,
            &event("s", &format!("0{long}"), EvalStatus::Failed, Some("r2")),
        );
        let freed = history.drop_oldest_case(1).unwrap().0;
        assert!(freed > 8000, "{freed}");
        assert!(history.bytes() < before);
        let summary = history.summary();
        let names: Vec<String> = summary.suites[0]
            .cases
            .iter()
            .map(|c| c.case[..1].to_owned())
            .collect();
        assert_eq!(names, ["0", "2", "3", "4", "5", "6", "7", "8", "9"]);
        while history.drop_oldest_case(1).is_some() {}
        assert_eq!(
            history.summary().suites[0].cases.len(),
            1,
            "the newest stays"
        );
        assert_eq!(history.drop_oldest_case(0).map(|f| f.0 > 0), Some(true));
        assert!(history.summary().suites.is_empty());
        assert_eq!(history.bytes(), 0);
    }

    #[test]
    fn window_bounds_runs_and_counts_what_it_drops() {
        let mut history = EvalHistory::new(HistorySettings {
            window: 3,
            max_outcomes_per_case: 100,
        });
        // Run 1 fails, runs 2..=5 pass: after the window slides past run 1, the case
        // is no longer flaky and its rate is 100%.
        for run in 1..=5u64 {
            let status = if run == 1 { Failed } else { Passed };
            history.record(
                run,
                None,
                &event("s", "a", status, Some(&format!("r{run}"))),
            );
            if run == 3 {
                let summary = history.summary();
                assert!(case(&summary, "s", "a").flaky);
                assert_eq!(case(&summary, "s", "a").pass_rate, Some(2.0 / 3.0));
            }
        }
        let summary = history.summary();
        assert_eq!(summary.window, 3);
        assert_eq!(summary.suites[0].runs, 3);
        assert_eq!(summary.suites[0].trend.len(), 3);
        let a = case(&summary, "s", "a");
        assert_eq!((a.runs, a.passed, a.failed, a.flaky), (3, 3, 0, false));
        assert_eq!(a.pass_rate, Some(1.0));
        assert_eq!(summary.dropped, 2);
    }

    #[test]
    fn the_same_result_again_is_not_counted_twice() {
        use EvalStatus::*;
        let mut history = EvalHistory::new(HistorySettings::default());
        let first = event("s", "a", Passed, Some("junit-1"));
        assert!(!history.holds(&first));
        assert!(history.record(0, None, &first));
        assert!(history.holds(&first));
        // The same file imported again: same run id, case and attempt.
        assert!(!history.record(0, None, &event("s", "a", Passed, Some("junit-1"))));
        let mut retry = event("s", "a", Failed, Some("junit-1"));
        retry.attempt = Some(2);
        assert!(
            history.record(0, None, &retry),
            "another attempt is another result"
        );
        assert!(history.record(0, None, &event("s", "a", Passed, Some("junit-2"))));
        // A retry without an attempt number that ends otherwise is a result of its own.
        assert!(history.record(0, None, &event("s", "c", Passed, Some("junit-2"))));
        assert!(history.record(0, None, &event("s", "c", Failed, Some("junit-2"))));
        // Without a run id nothing says two results are the same one.
        assert!(history.record(0, None, &event("s", "b", Passed, None)));
        assert!(!history.holds(&event("s", "b", Passed, None)));
        let summary = history.summary();
        let a = case(&summary, "s", "a");
        assert_eq!((a.passed, a.failed, a.runs), (2, 1, 2));
        let c = case(&summary, "s", "c");
        assert_eq!((c.passed, c.failed, c.flaky), (1, 1, true));
    }

    #[test]
    fn repeat_in_one_run_makes_a_case_flaky() {
        let mut history = EvalHistory::new(HistorySettings::default());
        for (attempt, status) in [(1, Passed), (2, Failed), (3, Passed), (4, Failed)] {
            let mut e = event("payments", "flaky confirmation", status, Some("r1"));
            e.attempt = Some(attempt);
            history.record(0, None, &e);
        }
        let summary = history.summary();
        let c = case(&summary, "payments", "flaky confirmation");
        assert_eq!((c.runs, c.passed, c.failed, c.flaky), (1, 2, 2, true));
        assert_eq!(c.pass_rate, Some(0.5));
        assert_eq!(summary.suites[0].runs, 1);
    }

    #[test]
    fn a_smaller_window_looks_at_the_latest_runs_only() {
        let mut history = EvalHistory::new(HistorySettings {
            window: 10,
            max_outcomes_per_case: 100,
        });
        let statuses = [EvalStatus::Failed, EvalStatus::Passed, EvalStatus::Passed];
        for (run, status) in statuses.into_iter().enumerate() {
            let id = format!("run_{run}");
            history.record(0, None, &event("s", "a", status, Some(&id)));
        }
        let all = history.summary();
        assert_eq!(case(&all, "s", "a").pass_rate, Some(2.0 / 3.0));
        assert!(case(&all, "s", "a").flaky);
        let last_two = history.summary_over(2);
        assert_eq!(last_two.window, 2);
        assert_eq!(last_two.suites[0].runs, 2);
        assert_eq!(last_two.suites[0].trend, vec![Some(1.0), Some(1.0)]);
        let a = case(&last_two, "s", "a");
        assert_eq!((a.passed, a.failed, a.runs), (2, 0, 2));
        assert!(!a.flaky);
        assert_eq!(history.summary_over(0).suites[0].runs, 1);
        assert_eq!(history.summary_over(99).window, 10);
    }

    #[test]
    fn per_case_bound_holds_memory() {
        let mut history = EvalHistory::new(HistorySettings {
            window: 10,
            max_outcomes_per_case: 4,
        });
        for attempt in 1..=10 {
            let mut e = event("s", "a", Passed, Some("r1"));
            e.attempt = Some(attempt);
            history.record(0, None, &e);
        }
        let summary = history.summary();
        assert_eq!(case(&summary, "s", "a").passed, 4);
        assert_eq!(summary.dropped, 6);
    }

    #[test]
    fn external_events_without_run_id_count_too() {
        let mut history = EvalHistory::new(HistorySettings::default());
        // Another runner reports one suite run (a, b), then a second (a, b).
        for (seq, (name, status)) in [("a", Passed), ("b", Failed), ("a", Passed), ("b", Passed)]
            .into_iter()
            .enumerate()
        {
            history.record(seq as u64 + 1, None, &event("support", name, status, None));
        }
        let summary = history.summary();
        let suite = &summary.suites[0];
        assert_eq!(
            suite.runs, 2,
            "a case repeating starts the next external run"
        );
        assert_eq!(suite.trend, vec![Some(0.5), Some(1.0)]);
        assert_eq!(suite.last_run_id, None);
        assert!(case(&summary, "support", "b").flaky);
        // A runner's run of the same suite counts in the same rates.
        history.record(10, None, &event("support", "a", Failed, Some("r9")));
        let summary = history.summary();
        assert_eq!(summary.suites[0].runs, 3);
        assert_eq!(case(&summary, "support", "a").pass_rate, Some(2.0 / 3.0));
    }

    #[test]
    fn frames_fold_once_and_other_kinds_are_ignored() {
        let mut history = EvalHistory::new(HistorySettings::default());
        let frame = |seq, event| Frame {
            seq,
            ts: "".into(),
            session_id: Some("ses_1".into()),
            event,
        };
        let eval = Event::AgentEvalCompleted(event("s", "a", Passed, Some("r1")));
        assert!(history.apply_frame(&frame(1, eval.clone())));
        assert!(
            !history.apply_frame(&frame(1, eval)),
            "a replayed frame is not counted twice"
        );
        assert!(!history.apply_frame(&frame(
            2,
            Event::SessionClosed(spyglass_protocol::events::SessionClosed::default())
        )));
        let summary = history.summary();
        assert_eq!(case(&summary, "s", "a").passed, 1);
        assert_eq!(
            case(&summary, "s", "a").last_session_id.as_deref(),
            Some("ses_1")
        );
        assert!(history.suite("s").is_some() && history.suite("t").is_none());
    }

    #[test]
    fn summary_serialises_as_the_rest_body() {
        let mut history = EvalHistory::new(HistorySettings::default());
        history.record(0, None, &event("b", "x", Skipped, Some("r1")));
        history.record(0, None, &event("a", "y", Passed, Some("r1")));
        let value = serde_json::to_value(history.summary()).unwrap();
        assert_eq!(value["window"], 20);
        assert_eq!(value["suites"][0]["suite"], "a", "suites sorted by name");
        assert_eq!(value["suites"][1]["pass_rate"], serde_json::Value::Null);
        assert_eq!(value["suites"][1]["trend"], serde_json::json!([null]));
        assert_eq!(value["suites"][0]["cases"][0]["last_status"], "passed");
        let back: EvalSummary = serde_json::from_value(value).unwrap();
        assert_eq!(back, history.summary());
    }
}
