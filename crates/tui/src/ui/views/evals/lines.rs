//! Text the Evals tab builds from the model: pass rates, gauges and sparklines, attempt
//! strips, and one case's latest result with its statistics and expected vs actual diffs.

use crate::ui::theme::Theme;
use crate::ui::views::diff::{LineDiff, PathDiff, json_diff, line_diff};
use crate::ui::views::{fit, fmt_ms, plural};
use ratatui::style::Style;
use serde_json::Value;
use spyglass_eval::stats::{CaseStats, percent, rate_with_interval};
use spyglass_protocol::events::{AssertionResult, AssertionStatus, EvalStatus};
use spyglass_protocol::rest::CaseSummary;
use spyglass_protocol::sanitize::sanitize;

/// How a detail line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tone {
    Heading,
    Plain,
    Muted,
    Pass,
    Fail,
    /// Only in the expected value.
    Removed,
    /// Only in the actual value.
    Added,
    /// In both, different.
    Changed,
}

/// A case's duration, to the microsecond; an exact 0 comes from a runtime that reported
/// whole milliseconds (older history), where it meant under one.
pub(super) fn case_ms(ms: f64) -> String {
    if ms <= 0.0 {
        "<1ms".to_owned()
    } else {
        fmt_ms(ms)
    }
}

/// Moves a cursor in a list of `len` rows.
pub(super) fn pct(rate: Option<f64>) -> String {
    match rate {
        Some(rate) => format!("{:>3.0}%", rate * 100.0),
        None => "   —".into(),
    }
}

pub(super) fn gauge(rate: Option<f64>, width: usize) -> String {
    let filled = rate.map_or(0, |r| (r.clamp(0.0, 1.0) * width as f64).round() as usize);
    format!("{}{}", "█".repeat(filled), "░".repeat(width - filled))
}

/// The last `width` runs as block heights; `·` for a run whose cases were all skipped.
pub(super) fn sparkline(trend: &[Option<f64>], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let skip = trend.len().saturating_sub(width);
    trend[skip..]
        .iter()
        .map(|r| match r {
            Some(r) => BARS[(r.clamp(0.0, 1.0) * 7.0).round() as usize],
            None => '·',
        })
        .collect()
}

pub(super) fn status_label(status: EvalStatus) -> &'static str {
    match status {
        EvalStatus::Passed => "✓ passed",
        EvalStatus::Failed => "✗ failed",
        EvalStatus::Error => "! error",
        EvalStatus::Skipped => "- skipped",
    }
}

pub(super) fn status_style(status: EvalStatus, theme: &Theme) -> Style {
    match status {
        EvalStatus::Passed => theme.ok(),
        EvalStatus::Failed | EvalStatus::Error => theme.error(),
        EvalStatus::Skipped => theme.muted(),
    }
}

/// Most attempts a case row's strip shows; more show as `…` then the newest ones.
const STRIP_MAX: usize = 10;

/// A case row's attempts in its suite's newest run: `PPFPF 3/5`, `…PFPPPFPPPP 16/20`.
pub(super) fn attempts_text(stats: &CaseStats) -> String {
    let marks = stats.strip.chars().count();
    let strip: String = if marks > STRIP_MAX {
        let newest: String = stats.strip.chars().skip(marks - STRIP_MAX).collect();
        format!("…{newest}")
    } else {
        stats.strip.clone()
    };
    format!("{strip} {}/{}", stats.passed, stats.judged)
}

/// A case's statistics over its attempts in run `run`: the strip, the pass rate with its
/// 95 % Wilson interval, pass@k, pass^k and the flip rate, as the eval crate has them.
pub(super) fn stats_lines(run: &str, stats: &CaseStats) -> Vec<(Tone, String)> {
    let yes = |b: bool| if b { "yes" } else { "no" };
    let flip = stats.flip_rate.map_or_else(|| "—".to_owned(), percent);
    vec![
        (
            Tone::Plain,
            sanitize(&format!("attempts {} in run {run}", attempts_text(stats))).into_owned(),
        ),
        (
            Tone::Plain,
            format!(
                "pass rate {} (95 % interval)",
                rate_with_interval(stats.passed, stats.judged)
            ),
        ),
        (
            Tone::Muted,
            format!(
                "pass@{k} {} · pass^{k} {} · flip rate {flip}",
                yes(stats.pass_at_k),
                yes(stats.pass_all_k),
                k = stats.k
            ),
        ),
    ]
}

pub(super) fn judged(c: &CaseSummary) -> u32 {
    c.passed + c.failed + c.errored
}

fn compact(value: &Value) -> String {
    fit(&value.to_string(), 120)
}

/// A value as lines: a string's own lines, anything else pretty-printed.
fn value_lines(value: &Value) -> Vec<String> {
    match value {
        Value::String(text) if text.is_empty() => vec!["\"\"".into()],
        Value::String(text) => text.lines().map(str::to_owned).collect(),
        other => serde_json::to_string_pretty(other)
            .unwrap_or_else(|_| other.to_string())
            .lines()
            .map(str::to_owned)
            .collect(),
    }
}

/// A case's latest result, prepared for the detail pane, with its statistics in its
/// suite's newest run (`run`) when it has one.
pub(super) fn case_lines(
    suite: &str,
    case: &CaseSummary,
    run: Option<(&str, &CaseStats)>,
) -> Vec<(Tone, String)> {
    let status_tone = match case.last_status {
        EvalStatus::Passed => Tone::Pass,
        EvalStatus::Failed | EvalStatus::Error => Tone::Fail,
        EvalStatus::Skipped => Tone::Muted,
    };
    let mut lines = vec![(
        Tone::Heading,
        sanitize(&format!("{suite} · {}", case.case)).into_owned(),
    )];
    let flaky = if case.flaky { " · flaky" } else { "" };
    // The latest result may come from running this case alone, which no rate counts.
    let rerun = if case.last_rerun {
        " (rerun of this case)"
    } else {
        ""
    };
    lines.push((
        status_tone,
        format!(
            "{}{rerun} · {} · pass {} {}/{} over {}{flaky}",
            status_label(case.last_status),
            case_ms(case.last_duration),
            pct(case.pass_rate).trim_start(),
            case.passed,
            judged(case),
            plural(case.runs, "run"),
        ),
    ));
    lines.push((
        Tone::Muted,
        format!(
            "session {} · run {}",
            case.last_session_id.as_deref().unwrap_or("-"),
            case.last_run_id.as_deref().unwrap_or("-"),
        ),
    ));
    if let Some((run, stats)) = run {
        lines.extend(stats_lines(run, stats));
    }
    if let Some(reason) = &case.last_reason {
        lines.push((Tone::Fail, format!("reason: {}", sanitize(reason))));
    }
    lines.push((Tone::Plain, String::new()));
    if case.last_assertions.is_empty() {
        lines.push((
            Tone::Muted,
            "No assertions in the latest result.".to_owned(),
        ));
    }
    for assertion in &case.last_assertions {
        if !assertion.children.is_empty() {
            tree_lines(assertion, &mut lines);
            lines.push((Tone::Plain, String::new()));
            continue;
        }
        if assertion.outcome() == AssertionStatus::Errored {
            lines.push((
                Tone::Fail,
                sanitize(&spyglass_eval::report::tree_line(assertion, 120)).into_owned(),
            ));
            lines.push((Tone::Plain, String::new()));
            continue;
        }
        if assertion.pass {
            lines.push((
                Tone::Pass,
                format!(
                    "✓ {}  expected {}",
                    assertion.kind,
                    compact(&assertion.expected.to_value())
                ),
            ));
            continue;
        }
        // Runner messages already start with the kind (`equals: the output differs`). An
        // assertion that could not be judged is marked `!`: it did not fail, it errored.
        let errored = assertion.outcome() == spyglass_protocol::events::AssertionStatus::Errored;
        let mark = if errored { "!" } else { "✗" };
        let headline = match assertion.message.as_deref() {
            Some(m) if m.starts_with(&format!("{}:", assertion.kind)) => format!("{mark} {m}"),
            Some(m) => format!("{mark} {} — {m}", assertion.kind),
            None => format!("{mark} {}", assertion.kind),
        };
        lines.push((Tone::Fail, headline));
        if errored {
            lines.push((
                Tone::Muted,
                format!("  expected {}", compact(&assertion.expected.to_value())),
            ));
            lines.push((Tone::Plain, String::new()));
            continue;
        }
        assertion_diff(assertion, &mut lines);
        lines.push((Tone::Plain, String::new()));
    }
    if lines.last().is_some_and(|(_, text)| text.is_empty()) {
        lines.pop();
    }
    lines
}

/// A composition and its children, one a line, indented by depth; a failed leaf is
/// followed by its expected vs actual, indented under it.
fn tree_lines(top: &AssertionResult, lines: &mut Vec<(Tone, String)>) {
    for (depth, node) in spyglass_eval::report::flatten(top) {
        let indent = "  ".repeat(depth);
        let status = node.outcome();
        let tone = match status {
            AssertionStatus::Passed => Tone::Pass,
            AssertionStatus::Failed | AssertionStatus::Errored => Tone::Fail,
            AssertionStatus::Skipped => Tone::Muted,
        };
        let line = spyglass_eval::report::tree_line(node, 60);
        lines.push((tone, format!("{indent}{}", sanitize(&line))));
        if status == AssertionStatus::Failed && node.children.is_empty() {
            let mut diff = Vec::new();
            assertion_diff(node, &mut diff);
            lines.extend(
                diff.into_iter()
                    .map(|(tone, text)| (tone, format!("{indent}{text}"))),
            );
        }
    }
}

/// Expected vs actual of a failed assertion: a path diff when both are JSON objects or
/// arrays, a line diff when both are texts to compare whole, else both values in full.
fn assertion_diff(assertion: &AssertionResult, lines: &mut Vec<(Tone, String)>) {
    let mut expected = assertion.expected.to_value();
    let actual = assertion.actual.to_value();
    // A checker expects nothing to compare with: what ran, and what it answered.
    if assertion.kind == "command" {
        let argv: Vec<&str> = expected["argv"]
            .as_array()
            .map(|argv| argv.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        lines.push((
            Tone::Muted,
            format!("  program: {}", sanitize(&argv.join(" "))),
        ));
        lines.push((Tone::Added, format!("  verdict: {}", compact(&actual))));
        return;
    }
    let mut root = "$".to_owned();
    // json_path expects `{path, equals}`; what it saw is the value at that path.
    if assertion.kind == "json_path"
        && let Value::Object(map) = &expected
        && let (Some(Value::String(path)), Some(equals)) = (map.get("path"), map.get("equals"))
    {
        root.clone_from(path);
        expected = equals.clone();
    }
    let composite = |v: &Value| matches!(v, Value::Object(_) | Value::Array(_));
    // `contains` and `regex` expect a part of the text: a whole-text diff would say nothing.
    let whole_text = !matches!(assertion.kind.as_str(), "contains" | "regex");
    match (&expected, &actual) {
        (e, a) if composite(e) && composite(a) => {
            lines.push((
                Tone::Muted,
                "  JSON diff by path (- missing, + not expected, ~ changed):".into(),
            ));
            let diff = json_diff(&root, e, a);
            if diff.is_empty() {
                lines.push((Tone::Muted, "  the values are equal".into()));
            }
            for d in diff {
                lines.push(match d {
                    PathDiff::Changed {
                        path,
                        expected,
                        actual,
                    } => (
                        Tone::Changed,
                        format!("  ~ {path}: {} → {}", compact(&expected), compact(&actual)),
                    ),
                    PathDiff::Missing { path, expected } => {
                        (Tone::Removed, format!("  - {path}: {}", compact(&expected)))
                    }
                    PathDiff::Added { path, actual } => {
                        (Tone::Added, format!("  + {path}: {}", compact(&actual)))
                    }
                });
            }
        }
        (Value::String(e), Value::String(a)) if whole_text => {
            lines.push((Tone::Muted, "  line diff (- expected, + actual):".into()));
            for d in line_diff(e, a) {
                lines.push(match d {
                    LineDiff::Same(l) => (Tone::Plain, format!("    {l}")),
                    LineDiff::Removed(l) => (Tone::Removed, format!("  - {l}")),
                    LineDiff::Added(l) => (Tone::Added, format!("  + {l}")),
                });
            }
        }
        (e, a) => {
            let label = if root == "$" {
                "  expected:".to_owned()
            } else {
                format!("  expected at {root}:")
            };
            lines.push((Tone::Muted, label));
            lines.extend(
                value_lines(e)
                    .into_iter()
                    .map(|l| (Tone::Removed, format!("    {l}"))),
            );
            lines.push((Tone::Muted, "  actual:".into()));
            lines.extend(
                value_lines(a)
                    .into_iter()
                    .map(|l| (Tone::Added, format!("    {l}"))),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_case_under_a_millisecond_reads_as_such_not_as_zero() {
        assert_eq!(case_ms(0.0), "<1ms");
        assert_eq!(case_ms(0.042), "42µs");
        assert_eq!(case_ms(1.3), "1.3ms");
        assert_eq!(case_ms(12.0), "12.0ms");
        assert_eq!(case_ms(1500.0), "1.5s");
    }

    #[test]
    fn gauges_and_sparklines() {
        assert_eq!(gauge(Some(0.5), 4), "██░░");
        assert_eq!(gauge(None, 3), "░░░");
        assert_eq!(pct(Some(2.0 / 3.0)), " 67%");
        assert_eq!(pct(None), "   —");
        assert_eq!(sparkline(&[Some(0.0), None, Some(1.0)], 8), "▁·█");
        assert_eq!(sparkline(&[Some(0.0), Some(0.5), Some(1.0)], 2), "▅█");
    }

    fn failed(kind: &str, expected: Value, actual: Value) -> Vec<(Tone, String)> {
        let assertion = AssertionResult {
            kind: kind.into(),
            pass: false,
            expected: expected.into(),
            actual: actual.into(),
            message: None,
            ..AssertionResult::default()
        };
        let mut lines = vec![];
        assertion_diff(&assertion, &mut lines);
        lines
    }

    fn texts(lines: &[(Tone, String)]) -> Vec<&str> {
        lines.iter().map(|(_, t)| t.as_str()).collect()
    }

    #[test]
    fn a_partial_match_shows_both_values_not_a_whole_text_diff() {
        let lines = failed("contains", json!("pay_2"), json!("Charged pay_1\nbye"));
        assert_eq!(
            texts(&lines),
            [
                "  expected:",
                "    pay_2",
                "  actual:",
                "    Charged pay_1",
                "    bye"
            ]
        );
        assert_eq!(lines[1].0, Tone::Removed);
        assert_eq!(lines[3].0, Tone::Added);
    }

    #[test]
    fn odd_shapes_never_fail_the_view() {
        // json_path whose expectation lacks `equals`: shown whole, rooted at `$`.
        let lines = failed("json_path", json!({"path": "$.id"}), Value::Null);
        assert_eq!(lines[0].1, "  expected:");
        assert!(texts(&lines).contains(&"  actual:"));
        // json_path on a scalar: both values, named by the path.
        let lines = failed(
            "json_path",
            json!({"path": "$.total", "equals": 5}),
            json!(6),
        );
        assert_eq!(
            texts(&lines),
            ["  expected at $.total:", "    5", "  actual:", "    6"]
        );
        // Equal composite values (a judge that disagrees with us): said plainly.
        let lines = failed("equals", json!([1]), json!([1.0]));
        assert_eq!(lines[1].1, "  the values are equal");
        // An empty expected text is still visible.
        let lines = failed("regex", json!(""), json!("x"));
        assert_eq!(lines[1].1, "    \"\"");
    }

    #[test]
    fn a_case_without_a_message_or_session_still_reads_well() {
        let case = CaseSummary {
            case: "c".into(),
            runs: 1,
            failed: 1,
            pass_rate: Some(0.0),
            last_status: EvalStatus::Failed,
            last_assertions: vec![AssertionResult {
                kind: "equals".into(),
                pass: false,
                expected: json!("a").into(),
                actual: json!("b").into(),
                message: None,
                ..AssertionResult::default()
            }],
            ..CaseSummary::default()
        };
        let lines = case_lines("s", &case, None);
        let texts = texts(&lines);
        assert_eq!(texts[2], "session - · run -");
        let rerun = CaseSummary {
            last_rerun: true,
            last_run_id: Some("run_2".into()),
            ..case.clone()
        };
        let rerun_lines = case_lines("s", &rerun, None);
        assert_eq!(
            rerun_lines[1].1,
            "✗ failed (rerun of this case) · <1ms · pass 0% 0/1 over 1 run"
        );
        assert!(texts.contains(&"✗ equals"));
        assert!(texts.contains(&"  - a") && texts.contains(&"  + b"));
    }

    #[test]
    fn a_composition_reads_as_an_indented_tree_with_its_failing_leaf_diffed() {
        let case = CaseSummary {
            case: "c".into(),
            runs: 1,
            errored: 1,
            last_status: EvalStatus::Error,
            last_reason: Some("all[1]: any: none of 2 held".into()),
            last_assertions: vec![spyglass_eval::fixtures::composite()],
            ..CaseSummary::default()
        };
        let lines = case_lines("s", &case, None);
        let tree: Vec<(Tone, &str)> = lines
            .iter()
            .skip_while(|(_, text)| !text.starts_with("! all"))
            .map(|(tone, text)| (*tone, text.as_str()))
            .collect();
        assert_eq!(
            tree,
            [
                (Tone::Fail, "! all (1 passed, 1 errored, 1 skipped)"),
                (Tone::Pass, "  ✓ contains: expected \"pay_1\""),
                (Tone::Fail, "  ! any (1 failed, 1 errored)"),
                (Tone::Fail, "    ✗ equals: the output differs"),
                (Tone::Muted, "      line diff (- expected, + actual):"),
                (Tone::Removed, "      - pay_1"),
                (Tone::Added, "      + Charged pay_2"),
                (
                    Tone::Fail,
                    "    ! command: exited with status 2; stderr:  [31mboom"
                ),
                (Tone::Muted, "  - regex (skipped)"),
            ]
        );
    }

    #[test]
    fn a_failed_checker_shows_what_ran_and_its_verdict_not_a_diff() {
        let lines = failed(
            "command",
            json!({"argv": ["python3", "check.py", "100"], "timeout_ms": 10000}),
            json!({"pass": false, "reason": "over the limit"}),
        );
        assert_eq!(
            texts(&lines),
            [
                "  program: python3 check.py 100",
                "  verdict: {\"pass\":false,\"reason\":\"over the limit\"}"
            ]
        );
    }
}
