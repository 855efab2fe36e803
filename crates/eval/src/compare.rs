//! Comparing two eval runs case by case: what a baseline run (a `spyglass eval --json`
//! file) and a later one disagree on, and which of those changes are regressions: a drop
//! in a case's pass count is one only when a one-sided Fisher exact test finds it
//! significant, or when every attempt flipped from pass to fail.
//!
//! Pure: both runs come in as values (or JSON text with the file it came from), the
//! comparison and its printout come out. `eval --baseline`, `eval compare` and the
//! inspector's pinned run all read it the same way.

use crate::stats::{DEFAULT_SIGNIFICANCE, attempts_needed, fisher_drop, smallest_p};
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

/// Attempts passed and judged (passed, failed or errored) among a case's records.
fn tally<'a>(results: impl IntoIterator<Item = &'a AgentEvalCompleted>) -> (u32, u32) {
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
    (passed, judged)
}

impl Standing {
    fn of<'a>(results: impl IntoIterator<Item = &'a AgentEvalCompleted>) -> Self {
        match tally(results) {
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
    /// Fails now and did not before: a significant drop, every attempt flipped from pass
    /// to fail, or judged now and skipped before.
    NewlyFailing,
    /// Flaky now, passed before, and the drop is significant.
    NewlyFlaky,
    /// Flaky in both, and the drop in its pass count is significant.
    Worse,
    /// Its pass count dropped within noise: no regression (the p-value says how far).
    Inconclusive,
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
        matches!(self, Self::NewlyFailing | Self::NewlyFlaky | Self::Worse)
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::NewlyFailing => "newly failing",
            Self::NewlyFlaky => "newly flaky",
            Self::Worse => "worse",
            Self::Inconclusive => "inconclusive",
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
    /// Attempts passed and judged in the baseline and now (when the case is in both).
    pub counts: Option<[u32; 4]>,
    /// The one-sided Fisher exact p-value of a drop in the pass count.
    pub p_value: Option<f64>,
    /// Which rule decided a drop: significant, within noise, or every attempt flipped.
    pub rule: Option<String>,
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

    /// The regressions among the cases `counted` keeps (a quarantine leaves some out).
    pub fn regressions_where(&self, counted: impl Fn(&CaseChange) -> bool) -> usize {
        self.cases
            .iter()
            .filter(|c| c.change.is_regression() && counted(c))
            .count()
    }

    /// The cases that changed (neither unchanged nor still failing).
    pub fn changed(&self) -> impl Iterator<Item = &CaseChange> {
        self.cases
            .iter()
            .filter(|c| !matches!(c.change, Change::Unchanged | Change::StillFailing))
    }
}

/// `p = 0.167`, `p < 0.001`.
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p < 0.001".to_owned()
    } else {
        let text = format!("{p:.3}");
        format!("p = {}", text.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// What a drop from `a/n` to `b/m` passed attempts is, at significance `alpha`: the
/// change, the p-value and the rule that applied. `None` when the pass count did not drop.
fn judge_drop(a: u32, n: u32, b: u32, m: u32, alpha: f64) -> Option<(Change, f64, String)> {
    // Rates compared without division: b/m < a/n.
    if n == 0 || m == 0 || u64::from(b) * u64::from(n) >= u64::from(a) * u64::from(m) {
        return None;
    }
    let p_value = fisher_drop(a, n, b, m);
    let counts = format!("{a}/{n} → {b}/{m}");
    // A hair of tolerance: 1/20 summed in floating point must still meet 0.05.
    if p_value <= alpha + 1e-12 {
        let change = if b == 0 {
            Change::NewlyFailing
        } else if a == n {
            Change::NewlyFlaky
        } else {
            Change::Worse
        };
        return Some((
            change,
            p_value,
            format!(
                "{counts}: {} ≤ {alpha}, a significant drop",
                p_text(p_value)
            ),
        ));
    }
    let floor = smallest_p(n, m);
    let too_few = (floor > alpha).then(|| {
        format!(
            "too few attempts for a test ({} at best; {} attempts in each run could reach {alpha})",
            p_text(floor),
            attempts_needed(alpha)
        )
    });
    if a == n && b == 0 {
        let why = too_few.unwrap_or_else(|| format!("{} > {alpha}", p_text(p_value)));
        return Some((
            Change::NewlyFailing,
            p_value,
            format!("{counts}: {why}; counted as a regression because every attempt flipped"),
        ));
    }
    let mut rule = format!("{counts}: {} > {alpha}, within noise", p_text(p_value));
    if let Some(few) = too_few {
        rule.push_str("; ");
        rule.push_str(&few);
    }
    Some((Change::Inconclusive, p_value, rule))
}

/// Compares the case records of two runs (a run's `cases`, or any records of results) at
/// the default significance.
pub fn compare_records(
    baseline: &[AgentEvalCompleted],
    current: &[AgentEvalCompleted],
) -> Comparison {
    compare_records_at(baseline, current, DEFAULT_SIGNIFICANCE)
}

/// Compares the case records of two runs; a drop is a regression when its one-sided
/// Fisher p-value is at most `alpha` (or every attempt flipped from pass to fail).
pub fn compare_records_at(
    baseline: &[AgentEvalCompleted],
    current: &[AgentEvalCompleted],
    alpha: f64,
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
            let counts = match (before.get(key), after.get(key)) {
                (Some(was), Some(now)) => {
                    let (a, n) = tally(was.iter().copied());
                    let (b, m) = tally(now.iter().copied());
                    Some([a, n, b, m])
                }
                _ => None,
            };
            let dropped = counts.and_then(|[a, n, b, m]| judge_drop(a, n, b, m, alpha));
            let (change, p_value, rule) = match dropped {
                Some((change, p, rule)) => (change, Some(p), Some(rule)),
                None => (Change::between(was, now), None, None),
            };
            CaseChange {
                suite: key.0.clone(),
                case: key.1.clone(),
                change,
                before: was,
                after: now,
                why,
                counts,
                p_value,
                rule,
            }
        })
        .collect();
    cases.sort_by(|a, b| (a.change, &a.suite, &a.case).cmp(&(b.change, &b.suite, &b.case)));
    Comparison { cases }
}

/// Compares two completed runs; they must share a suite (else they are not the same
/// suites run twice, and every case would read as new or removed). `alpha` is the
/// significance a drop must reach to be a regression.
pub fn compare_runs(
    baseline_file: &str,
    baseline: &EvalRunDetail,
    current_file: &str,
    current: &EvalRunDetail,
    alpha: f64,
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
    Ok(compare_records_at(
        &records(baseline),
        &records(current),
        alpha,
    ))
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

/// The comparison as the `comparison` section of the JSON results: the baseline, the
/// significance, the regressions counted and per case in either run its change, the
/// counts, the p-value of a drop and the rule that decided it.
pub fn comparison_json(
    comparison: &Comparison,
    against: &str,
    alpha: f64,
    regressions: usize,
) -> serde_json::Value {
    let cases: Vec<serde_json::Value> = comparison
        .cases
        .iter()
        .map(|c| {
            let counts =
                |passed: u32, judged: u32| serde_json::json!({"passed": passed, "judged": judged});
            serde_json::json!({
                "suite": c.suite,
                "case": c.case,
                "change": c.change.label(),
                "regression": c.change.is_regression(),
                "before": c.counts.map(|[a, n, _, _]| counts(a, n)),
                "after": c.counts.map(|[_, _, b, m]| counts(b, m)),
                "p_value": c.p_value,
                "rule": c.rule,
            })
        })
        .collect();
    serde_json::json!({
        "baseline": against,
        "significance": alpha,
        "regressions": regressions,
        "cases": cases,
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
        if let (Some(why), true) = (&c.why, c.change.is_regression()) {
            let _ = write!(out, ": {}", clean(why));
        }
        if let Some(rule) = &c.rule {
            let _ = write!(out, " — {rule}");
        }
        out.push('\n');
    }
    if changed.is_empty() {
        out.push_str("  no case changed\n");
    }
    let still = comparison.count(Change::StillFailing);
    let _ = writeln!(
        out,
        "{} regression(s), {} fixed, {} new, {} removed, {} unchanged{}{}",
        comparison.regressions(),
        comparison.count(Change::Fixed),
        comparison.count(Change::New),
        comparison.count(Change::Removed),
        comparison.count(Change::Unchanged),
        match comparison.count(Change::Inconclusive) {
            0 => String::new(),
            n => format!(", {n} inconclusive"),
        },
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
    fn each_kind_of_change_is_named_and_only_significant_drops_are_regressions() {
        let mut baseline = vec![
            rec("breaks", Passed),
            rec("heals", Failed),
            rec("settles", Passed),
            rec("settles", Error),
            rec("gone", Passed),
            rec("stays red", Failed),
            rec("same", Passed),
            rec("paused", Passed),
        ];
        let mut current = vec![
            rec("breaks", Error),
            rec("heals", Passed),
            rec("settles", Passed),
            rec("settles", Passed),
            rec("fresh", Passed),
            rec("stays red", Failed),
            rec("same", Passed),
            rec("paused", Skipped),
        ];
        // 8/8 → 1/8: significant (p = 9/12870).
        baseline.extend((0..8).map(|_| rec("wobbles", Passed)));
        current.push(rec("wobbles", Passed));
        current.extend((0..7).map(|_| rec("wobbles", Failed)));
        // 3/5 → 2/5: within noise (p = 0.5).
        for (n, pass) in [(3, Passed), (2, Failed)] {
            baseline.extend((0..n).map(|_| rec("sways", pass)));
        }
        for (n, pass) in [(2, Passed), (3, Failed)] {
            current.extend((0..n).map(|_| rec("sways", pass)));
        }
        let cmp = compare_records(&baseline, &current);
        let of = |case: &str| cmp.cases.iter().find(|c| c.case == case).unwrap();
        assert_eq!(of("breaks").change, Change::NewlyFailing);
        assert_eq!(of("wobbles").change, Change::NewlyFlaky);
        assert_eq!(of("sways").change, Change::Inconclusive);
        assert_eq!(of("heals").change, Change::Fixed);
        assert_eq!(of("settles").change, Change::Fixed);
        assert_eq!(of("fresh").change, Change::New);
        assert_eq!(of("gone").change, Change::Removed);
        assert_eq!(of("stays red").change, Change::StillFailing);
        assert_eq!(of("same").change, Change::Unchanged);
        assert_eq!(of("paused").change, Change::NowSkipped);
        assert_eq!(cmp.regressions(), 2);
        let p = of("wobbles").p_value.unwrap();
        assert!((p - 9.0 / 12870.0).abs() < 1e-12, "{p}");
        assert!((of("sways").p_value.unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(of("sways").counts, Some([3, 5, 2, 5]));
        // Regressions come first.
        assert_eq!(cmp.cases[0].case, "breaks");
        assert_eq!(cmp.cases[1].case, "wobbles");
        assert_eq!(cmp.cases[2].case, "sways");
        let text = render(&cmp, "base.json");
        assert!(text.starts_with("Compared with base.json:\n"), "{text}");
        assert!(
            text.contains("newly flaky    payments / wobbles  passed → flaky (1/8 passed): contains: wobbles missed pay_1 — 8/8 → 1/8: p < 0.001 ≤ 0.05, a significant drop\n"),
            "{text}"
        );
        assert!(
            text.contains("newly failing  payments / breaks   passed → failed — 1/1 → 0/1: too few attempts for a test (p = 0.5 at best; 3 attempts in each run could reach 0.05); counted as a regression because every attempt flipped\n"),
            "{text}"
        );
        assert!(
            text.contains("inconclusive   payments / sways    flaky (3/5 passed) → flaky (2/5 passed) — 3/5 → 2/5: p = 0.5 > 0.05, within noise\n"),
            "{text}"
        );
        assert!(
            text.contains("removed        payments / gone     was passed"),
            "{text}"
        );
        assert!(!text.contains("payments / same"), "{text}");
        assert!(
            text.ends_with(
                "2 regression(s), 2 fixed, 1 new, 1 removed, 1 unchanged, 1 inconclusive, 1 still failing\n"
            ),
            "{text}"
        );
        // A stricter level turns the significant drop into noise.
        let strict = compare_records_at(&baseline, &current, 0.0001);
        assert_eq!(strict.regressions(), 1);
        assert_eq!(
            strict
                .cases
                .iter()
                .find(|c| c.case == "wobbles")
                .unwrap()
                .change,
            Change::Inconclusive
        );
        assert_eq!(cmp.regressions_where(|c| c.case != "breaks"), 1);
    }

    #[test]
    fn two_of_two_to_zero_of_two_is_a_flip_and_a_significant_flip_says_so() {
        let (base, now) = (
            [rec("a", Passed), rec("a", Passed)],
            [rec("a", Failed), rec("a", Failed)],
        );
        let cmp = compare_records(&base, &now);
        assert_eq!(cmp.cases[0].change, Change::NewlyFailing);
        assert!(
            cmp.cases[0]
                .rule
                .as_deref()
                .unwrap()
                .contains("every attempt flipped")
        );
        let base: Vec<_> = (0..3).map(|_| rec("a", Passed)).collect();
        let now: Vec<_> = (0..3).map(|_| rec("a", Failed)).collect();
        let cmp = compare_records(&base, &now);
        assert_eq!(cmp.cases[0].change, Change::NewlyFailing);
        assert_eq!(
            cmp.cases[0].rule.as_deref(),
            Some("3/3 → 0/3: p = 0.05 ≤ 0.05, a significant drop")
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
        let err = compare_runs(
            "a.json",
            &detail("payments"),
            "b.json",
            &detail("refunds"),
            0.05,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "a.json and b.json share no suite (a.json has payments; b.json has refunds)"
        );
        assert!(compare_runs("a.json", &detail("p"), "b.json", &detail("p"), 0.05).is_ok());
    }
}
