//! Comparing two eval runs case by case: what a baseline run (a `spyglass eval --json`
//! file) and a later one disagree on, and which of those changes are regressions.
//!
//! Pure: both runs come in as values (or JSON text with the file it came from), the
//! comparison and its printout come out. `eval --baseline`, `eval compare` and the
//! inspector's pinned run all read it the same way.

use spyglass_protocol::events::{AgentEvalCompleted, EvalStatus};
use spyglass_protocol::rest::EvalRunDetail;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use thiserror::Error;

/// Why a results file cannot be compared.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CompareError {
    #[error("{file}: cannot read the file: {reason}")]
    Read { file: String, reason: String },
    #[error("{file}: not a `spyglass eval --json` results file: {reason}")]
    NotResults { file: String, reason: String },
    #[error("{file}: the run {run_id} is still running; compare a completed run")]
    Unfinished { file: String, run_id: String },
    #[error("{baseline} and {current} share no suite ({baseline} has {had}; {current} has {has})")]
    NoSharedSuite {
        baseline: String,
        current: String,
        had: String,
        has: String,
    },
}

/// Parses a results file's text; `file` names it in every error.
pub fn parse_results(file: &str, text: &str) -> Result<EvalRunDetail, CompareError> {
    let detail: EvalRunDetail =
        serde_json::from_str(text).map_err(|err| CompareError::NotResults {
            file: file.to_owned(),
            reason: err.to_string(),
        })?;
    if detail.status != "completed" {
        return Err(CompareError::Unfinished {
            file: file.to_owned(),
            run_id: detail.run_id,
        });
    }
    Ok(detail)
}

/// A case's standing in one run, over all its attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Every judged attempt passed.
    Passed,
    /// No attempt passed; at least one failed or errored.
    Failed,
    /// Some attempts passed and some failed or errored.
    Flaky { passed: u32, judged: u32 },
    /// Every attempt was skipped.
    Skipped,
}

impl Standing {
    fn of<'a>(results: impl IntoIterator<Item = &'a AgentEvalCompleted>) -> Self {
        let (mut passed, mut judged) = (0u32, 0u32);
        for result in results {
            match result.status {
                EvalStatus::Passed => {
                    passed += 1;
                    judged += 1;
                }
                EvalStatus::Failed | EvalStatus::Error => judged += 1,
                EvalStatus::Skipped => {}
            }
        }
        match (passed, judged) {
            (_, 0) => Self::Skipped,
            (p, j) if p == j => Self::Passed,
            (0, _) => Self::Failed,
            (passed, judged) => Self::Flaky { passed, judged },
        }
    }

    pub fn label(self) -> String {
        match self {
            Self::Passed => "passed".to_owned(),
            Self::Failed => "failed".to_owned(),
            Self::Flaky { passed, judged } => format!("flaky ({passed}/{judged} passed)"),
            Self::Skipped => "skipped".to_owned(),
        }
    }
}

/// What happened to one case between the baseline and the current run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// Fails now and did not before (passed, was flaky, skipped).
    NewlyFailing,
    /// Flaky now, passed before.
    NewlyFlaky,
    /// Passes now (or is flaky), failed before; or passes now, was flaky before.
    Fixed,
    /// Only in the current run.
    New,
    /// Only in the baseline.
    Removed,
    /// Skipped now, judged before.
    NowSkipped,
    /// Failed in both.
    StillFailing,
    Unchanged,
}

impl Change {
    /// Whether this change fails `--fail-on regression`.
    pub fn is_regression(self) -> bool {
        matches!(self, Self::NewlyFailing | Self::NewlyFlaky)
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::NewlyFailing => "newly failing",
            Self::NewlyFlaky => "newly flaky",
            Self::Fixed => "fixed",
            Self::New => "new",
            Self::Removed => "removed",
            Self::NowSkipped => "now skipped",
            Self::StillFailing => "still failing",
            Self::Unchanged => "unchanged",
        }
    }

    fn between(before: Option<Standing>, after: Option<Standing>) -> Self {
        use Standing::{Failed, Flaky, Passed, Skipped};
        match (before, after) {
            (None, _) => Self::New,
            (_, None) => Self::Removed,
            (Some(Failed), Some(Failed)) => Self::StillFailing,
            (Some(_), Some(Failed)) => Self::NewlyFailing,
            (Some(Passed), Some(Flaky { .. })) => Self::NewlyFlaky,
            (Some(Failed | Flaky { .. }), Some(Passed)) | (Some(Failed), Some(Flaky { .. })) => {
                Self::Fixed
            }
            (Some(Passed | Flaky { .. } | Failed), Some(Skipped)) => Self::NowSkipped,
            _ => Self::Unchanged,
        }
    }
}

/// One case's line of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseChange {
    pub suite: String,
    pub case: String,
    pub change: Change,
    pub before: Option<Standing>,
    pub after: Option<Standing>,
    /// The current run's first failing assertion's message (or reason), for a failing case.
    pub why: Option<String>,
}

/// Every case of either run, ordered by change (regressions first), then suite and case.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Comparison {
    pub cases: Vec<CaseChange>,
}

impl Comparison {
    pub fn regressions(&self) -> usize {
        self.cases
            .iter()
            .filter(|c| c.change.is_regression())
            .count()
    }

    pub fn count(&self, change: Change) -> usize {
        self.cases.iter().filter(|c| c.change == change).count()
    }

    /// The cases that changed (neither unchanged nor still failing).
    pub fn changed(&self) -> impl Iterator<Item = &CaseChange> {
        self.cases
            .iter()
            .filter(|c| !matches!(c.change, Change::Unchanged | Change::StillFailing))
    }
}

/// Compares the case records of two runs (a run's `cases`, or any records of results).
pub fn compare_records(
    baseline: &[AgentEvalCompleted],
    current: &[AgentEvalCompleted],
) -> Comparison {
    let (before, after) = (group(baseline), group(current));
    let mut keys: Vec<&Key> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut cases: Vec<CaseChange> = keys
        .into_iter()
        .map(|key| {
            let was = before.get(key).map(|r| Standing::of(r.iter().copied()));
            let now = after.get(key).map(|r| Standing::of(r.iter().copied()));
            let why = after.get(key).and_then(|records| failure_of(records));
            CaseChange {
                suite: key.0.clone(),
                case: key.1.clone(),
                change: Change::between(was, now),
                before: was,
                after: now,
                why,
            }
        })
        .collect();
    cases.sort_by(|a, b| (a.change, &a.suite, &a.case).cmp(&(b.change, &b.suite, &b.case)));
    Comparison { cases }
}

/// Compares two completed runs; they must share a suite (else they are not the same
/// suites run twice, and every case would read as new or removed).
pub fn compare_runs(
    baseline_file: &str,
    baseline: &EvalRunDetail,
    current_file: &str,
    current: &EvalRunDetail,
) -> Result<Comparison, CompareError> {
    let suites = |detail: &EvalRunDetail| {
        let mut names: Vec<String> = detail
            .suites
            .iter()
            .cloned()
            .chain(detail.cases.iter().map(|c| c.result.suite.clone()))
            .collect();
        names.sort();
        names.dedup();
        names
    };
    let (had, has) = (suites(baseline), suites(current));
    if !had.is_empty() && !has.is_empty() && !had.iter().any(|s| has.contains(s)) {
        return Err(CompareError::NoSharedSuite {
            baseline: baseline_file.to_owned(),
            current: current_file.to_owned(),
            had: had.join(", "),
            has: has.join(", "),
        });
    }
    let records = |detail: &EvalRunDetail| -> Vec<AgentEvalCompleted> {
        detail.cases.iter().map(|c| c.result.clone()).collect()
    };
    Ok(compare_records(&records(baseline), &records(current)))
}

type Key = (String, String);

fn group(records: &[AgentEvalCompleted]) -> BTreeMap<Key, Vec<&AgentEvalCompleted>> {
    let mut by_case: BTreeMap<Key, Vec<&AgentEvalCompleted>> = BTreeMap::new();
    for record in records {
        by_case
            .entry((record.suite.clone(), record.case.clone()))
            .or_default()
            .push(record);
    }
    by_case
}

fn failure_of(records: &[&AgentEvalCompleted]) -> Option<String> {
    records
        .iter()
        .filter(|r| matches!(r.status, EvalStatus::Failed | EvalStatus::Error))
        .find_map(|r| {
            r.assertions
                .iter()
                .find(|a| !a.pass)
                .and_then(|a| a.message.clone())
                .or_else(|| r.reason.clone())
        })
}

/// The printout: one line per changed case, then the counts. `against` names the
/// baseline (its file).
pub fn render(comparison: &Comparison, against: &str) -> String {
    let clean = |text: &str| spyglass_protocol::sanitize::sanitize(text).into_owned();
    let mut out = format!("Compared with {}:\n", clean(against));
    let changed: Vec<&CaseChange> = comparison.changed().collect();
    let width = changed
        .iter()
        .map(|c| c.suite.chars().count() + c.case.chars().count() + 3)
        .max()
        .unwrap_or(0);
    for c in &changed {
        let name = clean(&format!("{} / {}", c.suite, c.case));
        let states = match (c.before, c.after) {
            (Some(before), Some(after)) => format!("{} → {}", before.label(), after.label()),
            (None, Some(after)) => after.label(),
            (Some(before), None) => format!("was {}", before.label()),
            (None, None) => String::new(),
        };
        let _ = write!(out, "  {:<13}  {name:<width$}  {states}", c.change.label());
        if let (Some(why), true) = (
            &c.why,
            c.change == Change::NewlyFailing || c.change == Change::NewlyFlaky,
        ) {
            let _ = write!(out, ": {}", clean(why));
        }
        out.push('\n');
    }
    if changed.is_empty() {
        out.push_str("  no case changed\n");
    }
    let still = comparison.count(Change::StillFailing);
    let _ = writeln!(
        out,
        "{} regression(s), {} fixed, {} new, {} removed, {} unchanged{}",
        comparison.regressions(),
        comparison.count(Change::Fixed),
        comparison.count(Change::New),
        comparison.count(Change::Removed),
        comparison.count(Change::Unchanged),
        if still > 0 {
            format!(", {still} still failing")
        } else {
            String::new()
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use spyglass_protocol::RawJson;
    use spyglass_protocol::events::AssertionResult;

    fn rec(case: &str, status: EvalStatus) -> AgentEvalCompleted {
        let assertions = if status == EvalStatus::Failed {
            vec![AssertionResult {
                kind: "contains".into(),
                pass: false,
                expected: RawJson::from(json!("pay_1")),
                actual: RawJson::from(json!("pay_2")),
                message: Some(format!("contains: {case} missed pay_1")),
                ..AssertionResult::default()
            }]
        } else {
            Vec::new()
        };
        AgentEvalCompleted {
            suite: "payments".into(),
            case: case.into(),
            pass: status == EvalStatus::Passed,
            status,
            assertions,
            ..AgentEvalCompleted::default()
        }
    }

    use EvalStatus::{Error, Failed, Passed, Skipped};

    #[test]
    fn each_kind_of_change_is_named_and_only_two_are_regressions() {
        let baseline = [
            rec("breaks", Passed),
            rec("wobbles", Passed),
            rec("heals", Failed),
            rec("settles", Passed),
            rec("settles", Error),
            rec("gone", Passed),
            rec("stays red", Failed),
            rec("same", Passed),
            rec("paused", Passed),
        ];
        let current = [
            rec("breaks", Error),
            rec("wobbles", Passed),
            rec("wobbles", Failed),
            rec("heals", Passed),
            rec("settles", Passed),
            rec("settles", Passed),
            rec("fresh", Passed),
            rec("stays red", Failed),
            rec("same", Passed),
            rec("paused", Skipped),
        ];
        let cmp = compare_records(&baseline, &current);
        let of = |case: &str| cmp.cases.iter().find(|c| c.case == case).unwrap().change;
        assert_eq!(of("breaks"), Change::NewlyFailing);
        assert_eq!(of("wobbles"), Change::NewlyFlaky);
        assert_eq!(of("heals"), Change::Fixed);
        assert_eq!(of("settles"), Change::Fixed);
        assert_eq!(of("fresh"), Change::New);
        assert_eq!(of("gone"), Change::Removed);
        assert_eq!(of("stays red"), Change::StillFailing);
        assert_eq!(of("same"), Change::Unchanged);
        assert_eq!(of("paused"), Change::NowSkipped);
        assert_eq!(cmp.regressions(), 2);
        // Regressions come first.
        assert_eq!(cmp.cases[0].case, "breaks");
        assert_eq!(cmp.cases[1].case, "wobbles");
        let text = render(&cmp, "base.json");
        assert!(text.starts_with("Compared with base.json:\n"), "{text}");
        assert!(
            text.contains("newly flaky    payments / wobbles  passed → flaky (1/2 passed): contains: wobbles missed pay_1"),
            "{text}"
        );
        assert!(
            text.contains("removed        payments / gone     was passed"),
            "{text}"
        );
        assert!(!text.contains("payments / same"), "{text}");
        assert!(
            text.ends_with(
                "2 regression(s), 2 fixed, 1 new, 1 removed, 1 unchanged, 1 still failing\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn identical_runs_have_no_change() {
        let run = [rec("a", Passed), rec("b", Failed)];
        let cmp = compare_records(&run, &run);
        assert_eq!(cmp.regressions(), 0);
        assert!(render(&cmp, "x").contains("  no case changed\n"));
    }

    #[test]
    fn broken_or_unfinished_files_are_named() {
        let err = parse_results("old.json", "{\"cases\": 3").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("old.json: not a `spyglass eval --json` results file"),
            "{err}"
        );
        let err = parse_results("list.json", "[1, 2]").unwrap_err();
        assert!(err.to_string().starts_with("list.json: not a"), "{err}");
        let running = json!({"run_id": "ev_1", "status": "running", "suites": [], "repeat": 1,
            "passed": 0, "failed": 0, "errored": 0, "skipped": 0, "duration_ms": 0.0, "cases": []});
        let err = parse_results("live.json", &running.to_string()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "live.json: the run ev_1 is still running; compare a completed run"
        );
    }

    #[test]
    fn runs_of_different_suites_are_refused() {
        let detail = |suite: &str| EvalRunDetail {
            run_id: "ev".into(),
            status: "completed".into(),
            suites: vec![suite.into()],
            repeat: 1,
            scope: spyglass_protocol::events::EvalScope::Suite,
            passed: 0,
            failed: 0,
            errored: 0,
            skipped: 0,
            duration_ms: 0.0,
            cases: Vec::new(),
        };
        let err =
            compare_runs("a.json", &detail("payments"), "b.json", &detail("refunds")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a.json and b.json share no suite (a.json has payments; b.json has refunds)"
        );
        assert!(compare_runs("a.json", &detail("p"), "b.json", &detail("p")).is_ok());
    }
}
