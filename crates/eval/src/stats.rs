//! Verdicts as statistics: per case and per suite over a run's attempts, the pass rate with
//! its 95 % Wilson score interval, `pass@k`, `pass^k`, the flip rate, and the one-sided
//! Fisher exact test that decides whether a drop against a baseline is more than noise.
//!
//! Pure arithmetic on outcome counts; the attempt strip (`PPFPP`) is built here too.

use serde::Serialize;
use spyglass_protocol::events::{AgentEvalCompleted, EvalStatus};
use std::fmt::Write as _;

/// The normal quantile of a two-sided 95 % interval.
pub const Z_95: f64 = 1.959_963_984_540_054;

/// The significance level `--significance` defaults to.
pub const DEFAULT_SIGNIFICANCE: f64 = 0.05;

/// The 95 % Wilson score interval of `passed` successes in `judged` trials, as fractions
/// (0–1); `None` with no trials.
pub fn wilson(passed: u32, judged: u32) -> Option<(f64, f64)> {
    if judged == 0 {
        return None;
    }
    let n = f64::from(judged);
    let p = f64::from(passed.min(judged)) / n;
    let z2 = Z_95 * Z_95;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z_95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// `ln(k!)` for `k` in `0..=n`, by summing logarithms (exact enough for any count a run
/// can hold, and no gamma function needed).
fn log_factorials(n: u32) -> Vec<f64> {
    let mut table = Vec::with_capacity(n as usize + 1);
    let mut sum = 0.0;
    table.push(0.0);
    for k in 1..=n {
        sum += f64::from(k).ln();
        table.push(sum);
    }
    table
}

/// The one-sided Fisher exact test of a drop: the probability, with the margins fixed
/// (hypergeometric), of the current run passing `current_passed` or fewer of its
/// `current_judged` attempts when both runs share one pass rate. Small means the drop
/// from `baseline_passed`/`baseline_judged` is unlikely to be noise.
pub fn fisher_drop(
    baseline_passed: u32,
    baseline_judged: u32,
    current_passed: u32,
    current_judged: u32,
) -> f64 {
    let (a, n) = (baseline_passed.min(baseline_judged), baseline_judged);
    let (b, m) = (current_passed.min(current_judged), current_judged);
    let total = n + m;
    if n == 0 || m == 0 {
        return 1.0;
    }
    let passes = a + b;
    let lf = log_factorials(total);
    let ln_choose = |x: u32, y: u32| lf[x as usize] - lf[y as usize] - lf[(x - y) as usize];
    let ln_all = ln_choose(total, m);
    // The current run's passes range over max(0, m - fails)..=min(m, passes).
    let fails = total - passes;
    let low = m.saturating_sub(fails);
    let tail: f64 = (low..=b.min(passes))
        .map(|x| (ln_choose(passes, x) + ln_choose(fails, m - x) - ln_all).exp())
        .sum();
    tail.min(1.0)
}

/// The smallest p-value [`fisher_drop`] can give at these attempt counts: every baseline
/// attempt passed and every current one failed.
pub fn smallest_p(baseline_judged: u32, current_judged: u32) -> f64 {
    fisher_drop(baseline_judged, baseline_judged, 0, current_judged)
}

/// The fewest attempts per run (the same in both) at which a drop could reach `alpha`
/// (1,024 at most: `1 / C(2048, 1024)` is far below any level a CI uses).
pub fn attempts_needed(alpha: f64) -> u32 {
    (1..=1024)
        .find(|&k| smallest_p(k, k) <= alpha)
        .unwrap_or(1024)
}

/// The mark of one attempt in a strip: `P` passed, `F` failed, `E` errored, `S` skipped.
pub fn mark(status: EvalStatus) -> char {
    match status {
        EvalStatus::Passed => 'P',
        EvalStatus::Failed => 'F',
        EvalStatus::Error => 'E',
        EvalStatus::Skipped => 'S',
    }
}

/// A percentage for people: `60 %`.
pub fn percent(fraction: f64) -> String {
    format!("{:.0} %", fraction * 100.0)
}

/// `60 % [23–88 %]`: a pass rate and its Wilson interval.
pub fn rate_with_interval(passed: u32, judged: u32) -> String {
    match wilson(passed, judged) {
        Some((lo, hi)) => format!(
            "{} [{:.0}–{:.0} %]",
            percent(f64::from(passed) / f64::from(judged)),
            lo * 100.0,
            hi * 100.0
        ),
        None => "—".to_owned(),
    }
}

/// One case over its attempts in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseStats {
    pub suite: String,
    pub case: String,
    /// `suite/case`, as a quarantine file names it.
    pub id: String,
    /// Every attempt in attempt order, one mark each (`PPFPP`).
    pub strip: String,
    /// Attempts that passed.
    pub passed: u32,
    /// Attempts judged (passed, failed or errored; skips are not).
    pub judged: u32,
    /// `passed / judged`; absent when nothing was judged.
    pub pass_rate: Option<f64>,
    /// The 95 % Wilson score interval of the pass rate, `[low, high]`.
    pub wilson_95: Option<[f64; 2]>,
    /// `k`: the judged attempts `pass_at_k` and `pass_all_k` look at.
    pub k: u32,
    /// Any of the k attempts passed (`pass@k`).
    pub pass_at_k: bool,
    /// All k attempts passed (`pass^k`).
    pub pass_all_k: bool,
    /// Consecutive judged attempts that disagree.
    pub flips: u32,
    /// `flips / (k - 1)`; absent below two judged attempts.
    pub flip_rate: Option<f64>,
    /// Some judged attempts passed and some did not.
    pub flaky: bool,
}

impl CaseStats {
    /// The stats of one case's records (any order; sorted by attempt here).
    pub fn of(records: &[&AgentEvalCompleted]) -> Option<Self> {
        let first = records.first()?;
        let mut ordered: Vec<&AgentEvalCompleted> = records.to_vec();
        ordered.sort_by_key(|r| r.attempt.unwrap_or(0));
        let strip: String = ordered.iter().map(|r| mark(r.status)).collect();
        let judged_marks: Vec<bool> = ordered
            .iter()
            .filter(|r| r.status != EvalStatus::Skipped)
            .map(|r| r.status == EvalStatus::Passed)
            .collect();
        let judged = u32::try_from(judged_marks.len()).unwrap_or(u32::MAX);
        let passed = u32::try_from(judged_marks.iter().filter(|p| **p).count()).unwrap_or(0);
        let flips =
            u32::try_from(judged_marks.windows(2).filter(|w| w[0] != w[1]).count()).unwrap_or(0);
        Some(Self {
            suite: first.suite.clone(),
            case: first.case.clone(),
            id: format!("{}/{}", first.suite, first.case),
            strip,
            passed,
            judged,
            pass_rate: (judged > 0).then(|| f64::from(passed) / f64::from(judged)),
            wilson_95: wilson(passed, judged).map(|(lo, hi)| [lo, hi]),
            k: judged,
            pass_at_k: passed > 0,
            pass_all_k: judged > 0 && passed == judged,
            flips,
            flip_rate: (judged > 1).then(|| f64::from(flips) / f64::from(judged - 1)),
            flaky: passed > 0 && passed < judged,
        })
    }

    /// `payments/charge (3/5, 60 % [23–88 %])`.
    pub fn brief(&self) -> String {
        format!(
            "{} ({}/{}, {})",
            self.id,
            self.passed,
            self.judged,
            rate_with_interval(self.passed, self.judged)
        )
    }
}

/// A suite aggregated over its cases.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuiteStats {
    pub suite: String,
    pub cases: u32,
    /// Attempts passed and judged over every case.
    pub passed: u32,
    pub judged: u32,
    pub pass_rate: Option<f64>,
    pub wilson_95: Option<[f64; 2]>,
    /// Share of judged cases with any attempt passed (`pass@k`, k each case's attempts).
    pub pass_at_k: Option<f64>,
    /// Share of judged cases with every attempt passed (`pass^k`).
    pub pass_all_k: Option<f64>,
    /// Flips over all consecutive pairs of judged attempts.
    pub flip_rate: Option<f64>,
    pub flaky: u32,
}

impl SuiteStats {
    pub fn of(suite: &str, cases: &[&CaseStats]) -> Self {
        let judged_cases: Vec<&&CaseStats> = cases.iter().filter(|c| c.judged > 0).collect();
        let count = |f: &dyn Fn(&CaseStats) -> bool| {
            u32::try_from(judged_cases.iter().filter(|c| f(c)).count()).unwrap_or(0)
        };
        let judged_n = u32::try_from(judged_cases.len()).unwrap_or(0);
        let share = |n: u32| (judged_n > 0).then(|| f64::from(n) / f64::from(judged_n));
        let passed: u32 = cases.iter().map(|c| c.passed).sum();
        let judged: u32 = cases.iter().map(|c| c.judged).sum();
        let flips: u32 = cases.iter().map(|c| c.flips).sum();
        let pairs: u32 = cases.iter().map(|c| c.judged.saturating_sub(1)).sum();
        Self {
            suite: suite.to_owned(),
            cases: u32::try_from(cases.len()).unwrap_or(u32::MAX),
            passed,
            judged,
            pass_rate: (judged > 0).then(|| f64::from(passed) / f64::from(judged)),
            wilson_95: wilson(passed, judged).map(|(lo, hi)| [lo, hi]),
            pass_at_k: share(count(&|c| c.pass_at_k)),
            pass_all_k: share(count(&|c| c.pass_all_k)),
            flip_rate: (pairs > 0).then(|| f64::from(flips) / f64::from(pairs)),
            flaky: count(&|c| c.flaky),
        }
    }

    /// `pass rate 60 % [23–88 %], pass@k 100 %, pass^k 0 %, flip rate 50 %, 1 flaky`.
    pub fn line(&self) -> String {
        let mut out = format!("pass rate {}", rate_with_interval(self.passed, self.judged));
        if let (Some(any), Some(all)) = (self.pass_at_k, self.pass_all_k) {
            let _ = write!(out, ", pass@k {}, pass^k {}", percent(any), percent(all));
        }
        if let Some(flip) = self.flip_rate {
            let _ = write!(out, ", flip rate {}", percent(flip));
        }
        let _ = write!(out, ", {} flaky", self.flaky);
        out
    }
}

/// A run's statistics: per case (in the order cases first ran) and per suite.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct RunStats {
    pub cases: Vec<CaseStats>,
    pub suites: Vec<SuiteStats>,
}

impl RunStats {
    pub fn of<'a>(records: impl IntoIterator<Item = &'a AgentEvalCompleted>) -> Self {
        let mut order: Vec<(&str, &str)> = Vec::new();
        let mut by_case: std::collections::HashMap<(&str, &str), Vec<&AgentEvalCompleted>> =
            std::collections::HashMap::new();
        for record in records {
            let key = (record.suite.as_str(), record.case.as_str());
            let entry = by_case.entry(key).or_default();
            if entry.is_empty() {
                order.push(key);
            }
            entry.push(record);
        }
        let cases: Vec<CaseStats> = order
            .iter()
            .filter_map(|key| by_case.get(key).and_then(|r| CaseStats::of(r)))
            .collect();
        let mut suite_names: Vec<&str> = Vec::new();
        for case in &cases {
            if !suite_names.contains(&case.suite.as_str()) {
                suite_names.push(&case.suite);
            }
        }
        let suites = suite_names
            .iter()
            .map(|name| {
                let of: Vec<&CaseStats> = cases.iter().filter(|c| c.suite == *name).collect();
                SuiteStats::of(name, &of)
            })
            .collect();
        Self { cases, suites }
    }

    pub fn case(&self, suite: &str, case: &str) -> Option<&CaseStats> {
        self.cases
            .iter()
            .find(|c| c.suite == suite && c.case == case)
    }

    pub fn flaky(&self) -> impl Iterator<Item = &CaseStats> {
        self.cases.iter().filter(|c| c.flaky)
    }

    /// Whether any case was judged more than once (the run repeated its cases).
    pub fn repeated(&self) -> bool {
        self.cases.iter().any(|c| c.strip.chars().count() > 1)
    }

    /// `2 flaky: payments/charge (3/5, 60 % [23–88 %]), …` or `0 flaky`.
    pub fn flaky_line(&self) -> String {
        let flaky: Vec<String> = self.flaky().map(CaseStats::brief).collect();
        if flaky.is_empty() {
            "0 flaky".to_owned()
        } else {
            format!("{} flaky: {}", flaky.len(), flaky.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `C(n, k)` exactly, in integers: an independent route to the hypergeometric terms.
    fn choose(n: u128, k: u128) -> u128 {
        (0..k).fold(1, |acc, i| acc * (n - i) / (i + 1))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn wilson_bounds_match_the_formula_and_the_known_three_of_five() {
        // 3 of 5 at z = 1.96: the interval usually quoted is 23.1 %–88.2 %.
        let (lo, hi) = wilson(3, 5).unwrap();
        assert!((lo - 0.2307).abs() < 5e-4, "{lo}");
        assert!((hi - 0.8824).abs() < 5e-4, "{hi}");
        assert_eq!(rate_with_interval(3, 5), "60 % [23–88 %]");
        // The edges stay inside [0, 1]; all-pass of 10 has the known 72.2 % lower bound.
        let (lo, hi) = wilson(10, 10).unwrap();
        assert!((lo - 0.7225).abs() < 5e-4, "{lo}");
        assert!(close(hi, 1.0));
        let (lo, _) = wilson(0, 4).unwrap();
        assert!(close(lo, 0.0));
        assert_eq!(wilson(0, 0), None);
        assert_eq!(rate_with_interval(0, 0), "—");
    }

    #[test]
    fn fisher_matches_known_tables_and_exact_integer_arithmetic() {
        // Fisher's lady tasting tea, [[3, 1], [1, 3]]: one-sided p = 17/70.
        assert!(close(fisher_drop(3, 4, 1, 4), 17.0 / 70.0));
        // [[8, 2], [1, 5]] (scipy's documented example): one-sided p = 196/8008 = 0.02448.
        assert!(close(fisher_drop(8, 10, 1, 6), 196.0 / 8008.0));
        // 3/5 → 2/5 is within noise: p = 0.5 exactly.
        assert!(close(fisher_drop(3, 5, 2, 5), 0.5));
        // Every term summed from exact binomials over a grid of small tables.
        for n in 1..=8u32 {
            for m in 1..=8u32 {
                for a in 0..=n {
                    for b in 0..=m {
                        let (passes, total) = (u128::from(a + b), u128::from(n + m));
                        let fails = total - passes;
                        let all = choose(total, u128::from(m));
                        let mut hits = 0u128;
                        for x in 0..=u128::from(b) {
                            if x <= passes && u128::from(m) - x <= fails {
                                hits += choose(passes, x) * choose(fails, u128::from(m) - x);
                            }
                        }
                        #[expect(clippy::cast_precision_loss)]
                        let exact = hits as f64 / all as f64;
                        let got = fisher_drop(a, n, b, m);
                        assert!(
                            (got - exact).abs() < 1e-9,
                            "{a}/{n} → {b}/{m}: {got} vs {exact}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn too_few_attempts_never_reach_significance() {
        assert!(close(smallest_p(1, 1), 0.5));
        assert!(close(smallest_p(2, 2), 1.0 / 6.0));
        assert!(close(smallest_p(3, 3), 1.0 / 20.0));
        assert_eq!(attempts_needed(0.05), 3);
        assert_eq!(attempts_needed(0.01), 5);
        // 1/C(2k, k) first drops below 1e-40 at k = 69 (exact integers).
        assert_eq!(attempts_needed(1e-40), 69);
    }

    fn rec(attempt: u32, status: EvalStatus) -> AgentEvalCompleted {
        AgentEvalCompleted {
            suite: "payments".into(),
            case: "charge".into(),
            status,
            pass: status == EvalStatus::Passed,
            attempt: Some(attempt),
            ..AgentEvalCompleted::default()
        }
    }

    #[test]
    fn a_case_over_its_attempts() {
        use EvalStatus::{Error, Failed, Passed, Skipped};
        let records = [
            rec(3, Failed),
            rec(1, Passed),
            rec(2, Passed),
            rec(4, Passed),
            rec(5, Passed),
        ];
        let refs: Vec<&AgentEvalCompleted> = records.iter().collect();
        let stats = CaseStats::of(&refs).unwrap();
        assert_eq!(stats.strip, "PPFPP");
        assert_eq!((stats.passed, stats.judged, stats.flips), (4, 5, 2));
        assert_eq!(stats.flip_rate, Some(0.5));
        assert!(stats.flaky && stats.pass_at_k && !stats.pass_all_k);
        assert_eq!(stats.brief(), "payments/charge (4/5, 80 % [38–96 %])");
        let records = [rec(1, Error), rec(2, Skipped), rec(3, Failed)];
        let refs: Vec<&AgentEvalCompleted> = records.iter().collect();
        let stats = CaseStats::of(&refs).unwrap();
        assert_eq!(stats.strip, "ESF");
        assert_eq!((stats.passed, stats.judged, stats.flips), (0, 2, 0));
        assert!(!stats.flaky && !stats.pass_at_k);
        let run = RunStats::of(&records);
        assert_eq!(
            run.suites[0].line(),
            "pass rate 0 % [0–66 %], pass@k 0 %, pass^k 0 %, flip rate 0 %, 0 flaky"
        );
        assert_eq!(run.flaky_line(), "0 flaky");
    }
}
