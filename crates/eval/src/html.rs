//! The `spyglass eval --html` report: one self-contained HTML page (inline CSS and SVG, no
//! script, no address outside the page) with the suite table, the pass-rate trend, each
//! case's assertions with expected against actual, and the call timeline of failing cases.
//!
//! Pure: the run, the trends and the failing cases' calls come in, the page text comes
//! out. Every string from a run (agent output, tool names, messages) is escaped, so a
//! hostile answer reads as text and never becomes markup.

use crate::stats::{RunStats, percent, rate_with_interval};
use similar::{Algorithm, DiffOp};
use spyglass_protocol::RawJson;
use spyglass_protocol::events::{
    AgentEvalCompleted, AssertionResult, AssertionStatus, EvalStatus, Outcome,
};
use spyglass_protocol::rest::{CallView, EvalRunDetail};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Lines each side past which a diff is not computed and both values are shown whole.
const MAX_DIFF_LINES: usize = 400;
/// Characters of a value shown before it is cut (the JSON file has it whole).
const MAX_VALUE_CHARS: usize = 20_000;

/// What the page is built from.
#[derive(Debug, Clone, Default)]
pub struct ReportInput {
    pub detail: EvalRunDetail,
    /// Per suite, its pass rate per run, oldest first (`GET /v1/evals/summary`).
    pub trends: BTreeMap<String, Vec<Option<f64>>>,
    /// Per session id of a failing case: its calls, or why they could not be read.
    pub timelines: BTreeMap<String, Result<Vec<CallView>, String>>,
    /// When the report was made (RFC 3339).
    pub generated_at: String,
}

/// Escapes text for HTML element content and quoted attribute values (quick-xml's
/// `escape`: `& < > " '`). Control characters other than newline and tab are shown as
/// `\u{..}`, not passed on.
pub fn escape(text: &str) -> String {
    let shown_control = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.contains(shown_control) {
        return quick_xml::escape::escape(text).into_owned();
    }
    let mut shown = String::with_capacity(text.len());
    for c in text.chars() {
        if shown_control(c) {
            let _ = write!(shown, "\\u{{{:x}}}", c as u32);
        } else {
            shown.push(c);
        }
    }
    quick_xml::escape::escape(shown).into_owned()
}

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1d2430;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px}h3{font-size:15px;margin:0}
.meta{color:#5b6472;margin-bottom:16px}
table{border-collapse:collapse;margin:8px 0}th,td{padding:4px 10px;border-bottom:1px solid #e3e6ea;text-align:left;vertical-align:top}
th{color:#5b6472;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.passed{color:#146c2e}.failed{color:#b3261e}.error{color:#9a4d00}.skipped{color:#5b6472}
.badge{display:inline-block;padding:0 8px;border-radius:9px;font-size:12px;font-weight:600;border:1px solid currentColor}
.case{border:1px solid #e3e6ea;border-radius:6px;margin:10px 0;padding:8px 12px}
.case summary{cursor:pointer}
pre{background:#f6f8fa;padding:8px;border-radius:4px;white-space:pre-wrap;word-break:break-word;margin:4px 0;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
.diff .del{background:#ffebe9;color:#82071e;display:block}.diff .add{background:#dafbe1;color:#116329;display:block}.diff .same{display:block;color:#57606a}
.bar{height:12px;background:#0969da;border-radius:2px;min-width:2px}.bar.bad{background:#cf222e}
.track{position:relative;height:12px;background:#f0f2f4;border-radius:2px;width:360px}
.track .bar{position:absolute;top:0}
.trend svg{background:#fafbfc;border:1px solid #e3e6ea;border-radius:4px}
.muted{color:#5b6472}
";

/// The whole page.
pub fn html_report(input: &ReportInput) -> String {
    let detail = &input.detail;
    let mut out = String::with_capacity(16 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    // Nothing from outside the page may load, even if escaping ever failed.
    out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">");
    let _ = write!(
        out,
        "<title>spyglass eval · {}</title><style>{STYLE}</style></head><body>",
        escape(&detail.suites.join(", "))
    );
    let _ = write!(
        out,
        "<h1>Eval run {}</h1><div class=\"meta\">{} · {} passed, {} failed, {} errored, {} skipped · {:.1} s · generated {}</div>",
        escape(&detail.run_id),
        escape(&detail.suites.join(", ")),
        detail.passed,
        detail.failed,
        detail.errored,
        detail.skipped,
        detail.duration_ms / 1000.0,
        escape(&input.generated_at)
    );
    suite_table(&mut out, detail);
    stats_table(&mut out, detail);
    trends(&mut out, &input.trends);
    out.push_str("<h2>Cases</h2>");
    for record in &detail.cases {
        case_section(
            &mut out,
            &record.result,
            record.output.as_deref(),
            record.session_id.as_deref(),
            input,
        );
    }
    out.push_str("</body></html>\n");
    out
}

fn status_class(status: EvalStatus) -> &'static str {
    match status {
        EvalStatus::Passed => "passed",
        EvalStatus::Failed => "failed",
        EvalStatus::Error => "error",
        EvalStatus::Skipped => "skipped",
    }
}

fn suite_table(out: &mut String, detail: &EvalRunDetail) {
    #[derive(Default)]
    struct Row {
        passed: u32,
        failed: u32,
        errored: u32,
        skipped: u32,
        duration: f64,
    }
    let mut rows: BTreeMap<&str, Row> = BTreeMap::new();
    for record in &detail.cases {
        let r = &record.result;
        let row = rows.entry(r.suite.as_str()).or_default();
        match r.status {
            EvalStatus::Passed => row.passed += 1,
            EvalStatus::Failed => row.failed += 1,
            EvalStatus::Error => row.errored += 1,
            EvalStatus::Skipped => row.skipped += 1,
        }
        row.duration += r.duration;
    }
    out.push_str("<h2>Suites</h2><table id=\"suites\"><thead><tr><th>Suite</th><th>Passed</th><th>Failed</th><th>Errored</th><th>Skipped</th><th>Pass rate</th><th>Time</th></tr></thead><tbody>");
    for (suite, row) in rows {
        let judged = row.passed + row.failed + row.errored;
        let rate = if judged == 0 {
            "—".to_owned()
        } else {
            format!("{:.0}%", f64::from(row.passed) * 100.0 / f64::from(judged))
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"n passed\">{}</td><td class=\"n failed\">{}</td><td class=\"n error\">{}</td><td class=\"n skipped\">{}</td><td class=\"n\">{rate}</td><td class=\"n\">{}</td></tr>",
            escape(suite),
            row.passed,
            row.failed,
            row.errored,
            row.skipped,
            duration(row.duration)
        );
    }
    out.push_str("</tbody></table>");
}

/// Per case over its attempts: the strip, the pass rate with its 95 % Wilson interval,
/// `pass@k`, `pass^k` and the flip rate; flaky cases marked. Per suite the same, summed.
fn stats_table(out: &mut String, detail: &EvalRunDetail) {
    let stats = RunStats::of(detail.cases.iter().map(|r| &r.result));
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let flip = |f: Option<f64>| f.map_or_else(|| "—".to_owned(), percent);
    out.push_str("<h2>Flakiness</h2><table id=\"stats\"><thead><tr><th>Case</th><th>Attempts</th><th>Passed</th><th>Pass rate [95 % Wilson]</th><th>pass@k</th><th>pass^k</th><th>Flip rate</th><th></th></tr></thead><tbody>");
    for case in &stats.cases {
        let _ = write!(
            out,
            "<tr><td>{}</td><td><code>{}</code></td><td class=\"n\">{}/{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            escape(&case.id),
            escape(&case.strip),
            case.passed,
            case.judged,
            rate_with_interval(case.passed, case.judged),
            yes_no(case.pass_at_k),
            yes_no(case.pass_all_k),
            flip(case.flip_rate),
            if case.flaky {
                "<span class=\"badge error\">flaky</span>"
            } else {
                ""
            }
        );
    }
    for suite in &stats.suites {
        let share = |f: Option<f64>| f.map_or_else(|| "—".to_owned(), percent);
        let _ = write!(
            out,
            "<tr class=\"suite\"><th>{} (suite)</th><td>{} flaky</td><td class=\"n\">{}/{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td></td></tr>",
            escape(&suite.suite),
            suite.flaky,
            suite.passed,
            suite.judged,
            rate_with_interval(suite.passed, suite.judged),
            share(suite.pass_at_k),
            share(suite.pass_all_k),
            flip(suite.flip_rate),
        );
    }
    out.push_str("</tbody></table>");
}

/// One inline SVG line chart per suite: pass rate (0–100 %) per run, oldest left.
fn trends(out: &mut String, trends: &BTreeMap<String, Vec<Option<f64>>>) {
    const W: f64 = 360.0;
    const H: f64 = 80.0;
    const PAD: f64 = 6.0;
    if trends.is_empty() {
        return;
    }
    out.push_str("<h2>Pass-rate trend</h2><div class=\"trend\">");
    for (suite, rates) in trends {
        let _ = write!(out, "<h3>{}</h3>", escape(suite));
        let n = rates.len().max(1);
        let x = |i: usize| {
            if n == 1 {
                W / 2.0
            } else {
                PAD + (W - 2.0 * PAD) * i as f64 / (n - 1) as f64
            }
        };
        let y = |rate: f64| PAD + (H - 2.0 * PAD) * (1.0 - rate.clamp(0.0, 1.0));
        let _ = write!(
            out,
            "<svg role=\"img\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\"><title>{} pass rate per run, oldest first</title>",
            escape(suite)
        );
        let _ = write!(
            out,
            "<line x1=\"0\" y1=\"{PAD}\" x2=\"{W}\" y2=\"{PAD}\" stroke=\"#d0d7de\" stroke-dasharray=\"3 3\"/>"
        );
        let points: Vec<String> = rates
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.map(|r| format!("{:.1},{:.1}", x(i), y(r))))
            .collect();
        if points.len() > 1 {
            let _ = write!(
                out,
                "<polyline fill=\"none\" stroke=\"#0969da\" stroke-width=\"2\" points=\"{}\"/>",
                points.join(" ")
            );
        }
        for (i, rate) in rates.iter().enumerate() {
            if let Some(rate) = rate {
                let colour = if *rate >= 1.0 { "#1a7f37" } else { "#cf222e" };
                let _ = write!(
                    out,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{colour}\"><title>run {}: {:.0}%</title></circle>",
                    x(i),
                    y(*rate),
                    i + 1,
                    rate * 100.0
                );
            }
        }
        out.push_str("</svg>");
        let shown: Vec<String> = rates
            .iter()
            .map(|r| r.map_or("—".to_owned(), |r| format!("{:.0}%", r * 100.0)))
            .collect();
        let _ = write!(
            out,
            "<div class=\"muted\">{}</div>",
            escape(&shown.join(" → "))
        );
    }
    out.push_str("</div>");
}

fn case_section(
    out: &mut String,
    result: &AgentEvalCompleted,
    output: Option<&str>,
    session: Option<&str>,
    input: &ReportInput,
) {
    let class = status_class(result.status);
    let failing = matches!(result.status, EvalStatus::Failed | EvalStatus::Error);
    let attempt = result
        .attempt
        .map(|a| format!(" · attempt {a}"))
        .unwrap_or_default();
    let _ = write!(
        out,
        "<details class=\"case {class}-case\"{}><summary><span class=\"badge {class}\">{class}</span> <strong>{}</strong> / {}{} <span class=\"muted\">· {}</span></summary>",
        if failing { " open" } else { "" },
        escape(&result.suite),
        escape(&result.case),
        escape(&attempt),
        duration(result.duration)
    );
    if let Some(reason) = &result.reason {
        let _ = write!(out, "<p class=\"{class}\">{}</p>", escape(reason));
    }
    if !result.assertions.is_empty() {
        out.push_str("<table class=\"assertions\"><thead><tr><th></th><th>Assertion</th><th>Expected vs actual</th></tr></thead><tbody>");
        for assertion in &result.assertions {
            // A composition's children follow it, indented by depth.
            for (depth, node) in super::report::flatten(assertion) {
                assertion_row(out, node, depth);
            }
        }
        out.push_str("</tbody></table>");
    }
    if let Some(text) = output {
        let _ = write!(
            out,
            "<div class=\"muted\">Final output</div><pre class=\"output\">{}</pre>",
            escape(&cut(text))
        );
    }
    if failing && let Some(id) = session {
        timeline(out, id, input.timelines.get(id));
    }
    out.push_str("</details>");
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_VALUE_CHARS) {
        Some((at, _)) => format!("{}… (cut; the --json file has it whole)", &text[..at]),
        None => text.to_owned(),
    }
}

/// A value as text: a string as itself, anything else as pretty JSON.
fn shown(raw: &RawJson) -> String {
    match raw.to_value() {
        serde_json::Value::String(text) => text,
        other => serde_json::to_string_pretty(&other).unwrap_or_else(|_| raw.get().to_owned()),
    }
}

fn assertion_row(out: &mut String, a: &AssertionResult, depth: usize) {
    let status = a.outcome();
    let class = match status {
        AssertionStatus::Passed => "passed",
        AssertionStatus::Failed => "failed",
        AssertionStatus::Errored => "error",
        AssertionStatus::Skipped => "skipped",
    };
    let mark = super::report::outcome_mark(status);
    let _ = write!(
        out,
        "<tr class=\"depth-{depth}\"><td class=\"{class}\" title=\"{}\">{mark}</td><td style=\"padding-left:{}px\"><code>{}</code>",
        status.as_str(),
        10 + 20 * depth,
        escape(&a.kind)
    );
    if status == AssertionStatus::Skipped {
        out.push_str(" <span class=\"skipped\">skipped</span>");
    }
    // Another runner's verdict has only its text: shown whole in the value cell below.
    let verdict_only = super::report::compares_nothing(a);
    if let Some(message) = a.message.as_ref().filter(|_| !verdict_only) {
        let _ = write!(out, "<div class=\"{class}\">{}</div>", escape(message));
    }
    out.push_str("</td><td>");
    let (expected, actual) = (cut(&shown(&a.expected)), cut(&shown(&a.actual)));
    match status {
        AssertionStatus::Skipped => out.push_str("<span class=\"muted\">not judged</span>"),
        // A composition's own values are counts; its children carry the diffs.
        _ if !a.children.is_empty() => {
            let _ = write!(out, "<pre>{}\n{}</pre>", escape(&expected), escape(&actual));
        }
        AssertionStatus::Passed => {
            let _ = write!(out, "<pre>{}</pre>", escape(&expected));
        }
        // A checker's argv and its verdict are not two versions of one value.
        AssertionStatus::Failed | AssertionStatus::Errored if a.kind == "command" => {
            let _ = write!(
                out,
                "<pre>program: {}\nverdict: {}</pre>",
                escape(&expected),
                escape(&actual)
            );
        }
        // Another runner's verdict (a JUnit failure's text): line breaks kept.
        _ if verdict_only => {
            let message = a.message.as_deref().unwrap_or_default();
            let _ = write!(out, "<pre>{}</pre>", escape(&cut(message)));
        }
        AssertionStatus::Failed | AssertionStatus::Errored => diff(out, &expected, &actual),
    }
    out.push_str("</td></tr>");
}

/// A line diff, `-` expected and `+` actual, minimal (`similar`'s Myers); past
/// `MAX_DIFF_LINES` both values are shown whole.
fn diff(out: &mut String, expected: &str, actual: &str) {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    out.push_str("<pre class=\"diff\">");
    if a.len() > MAX_DIFF_LINES || b.len() > MAX_DIFF_LINES {
        let _ = write!(
            out,
            "<span class=\"del\">expected:\n{}</span><span class=\"add\">actual:\n{}</span></pre>",
            escape(expected),
            escape(actual)
        );
        return;
    }
    let line = |out: &mut String, class: &str, sign: char, text: &str| {
        let _ = write!(
            out,
            "<span class=\"{class}\">{sign} {}</span>",
            escape(text)
        );
    };
    for op in similar::capture_diff_slices(Algorithm::Myers, &a, &b) {
        if let DiffOp::Equal { .. } = op {
            for text in &a[op.old_range()] {
                line(out, "same", ' ', text);
            }
        } else {
            for text in &a[op.old_range()] {
                line(out, "del", '-', text);
            }
            for text in &b[op.new_range()] {
                line(out, "add", '+', text);
            }
        }
    }
    if a.is_empty() && b.is_empty() {
        line(out, "same", ' ', "(both empty)");
    }
    out.push_str("</pre>");
}

/// A duration in milliseconds as people read it: `850 µs`, `12.3 ms`, `1.52 s`.
fn duration(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.0} µs", ms * 1000.0)
    } else if ms < 1000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

fn millis(ts: &str) -> Option<f64> {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.timestamp_micros() as f64 / 1000.0)
}

/// The failing case's calls on one time axis: offset from the first call, a bar for its
/// duration, its outcome (`ok` or the envelope's code).
fn timeline(out: &mut String, session: &str, calls: Option<&Result<Vec<CallView>, String>>) {
    let _ = write!(
        out,
        "<div class=\"muted\">Timeline of session <code>{}</code></div>",
        escape(session)
    );
    let calls = match calls {
        None => {
            out.push_str("<p class=\"muted\">Not read.</p>");
            return;
        }
        Some(Err(reason)) => {
            let _ = write!(
                out,
                "<p class=\"muted\">Could not be read: {}</p>",
                escape(reason)
            );
            return;
        }
        Some(Ok(calls)) if calls.is_empty() => {
            out.push_str("<p class=\"muted\">No tool calls.</p>");
            return;
        }
        Some(Ok(calls)) => calls,
    };
    let starts: Vec<Option<f64>> = calls.iter().map(|c| millis(&c.started_at)).collect();
    let origin = starts
        .iter()
        .flatten()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let origin = if origin.is_finite() { origin } else { 0.0 };
    let end = calls
        .iter()
        .zip(&starts)
        .map(|(c, s)| s.unwrap_or(origin) - origin + c.duration)
        .fold(0.0_f64, f64::max)
        .max(0.001);
    out.push_str("<table class=\"timeline\"><thead><tr><th>Call</th><th>Start</th><th></th><th>Duration</th><th>Outcome</th></tr></thead><tbody>");
    for (call, start) in calls.iter().zip(&starts) {
        let offset = start.unwrap_or(origin) - origin;
        let (outcome, bad) = match &call.outcome {
            Outcome::Result(_) => ("ok".to_owned(), false),
            Outcome::Envelope(envelope) => (envelope.code().to_owned(), true),
        };
        let left = offset / end * 100.0;
        let width = (call.duration / end * 100.0).max(0.5);
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td class=\"n\">+{}</td><td><div class=\"track\"><div class=\"bar{}\" style=\"left:{left:.2}%;width:{width:.2}%\"></div></div></td><td class=\"n\">{}</td><td class=\"{}\">{}</td></tr>",
            escape(&call.tool),
            duration(offset),
            if bad { " bad" } else { "" },
            duration(call.duration),
            if bad { "failed" } else { "passed" },
            escape(&outcome)
        );
    }
    out.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use spyglass_protocol::Envelope;
    use spyglass_protocol::rest::EvalCaseRecord;

    const HOSTILE: &str = "</pre></td><script>alert('x')</script><img src=\"https://evil.example/p.png\" onerror=alert(1)>&amp;";

    fn input() -> ReportInput {
        let failed = AgentEvalCompleted {
            suite: "pay<ments>".into(),
            case: "charge \"small\"".into(),
            status: EvalStatus::Failed,
            duration: 12.0,
            assertions: vec![
                AssertionResult {
                    kind: "equals".into(),
                    pass: false,
                    expected: RawJson::from(json!("line one\nline two\nline three")),
                    actual: RawJson::from(json!(format!("line one\n{HOSTILE}\nline three"))),
                    message: Some(format!("equals: got {HOSTILE}")),
                    ..AssertionResult::default()
                },
                AssertionResult {
                    kind: "contains".into(),
                    pass: true,
                    expected: RawJson::from(json!("pay_1")),
                    actual: RawJson::from(json!("pay_1")),
                    message: None,
                    ..AssertionResult::default()
                },
            ],
            ..AgentEvalCompleted::default()
        };
        let passed = AgentEvalCompleted {
            suite: "pay<ments>".into(),
            case: "refund".into(),
            status: EvalStatus::Passed,
            pass: true,
            ..AgentEvalCompleted::default()
        };
        let call = |tool: &str, at: &str, outcome: Outcome| CallView {
            call_id: "call_1".into(),
            tool: tool.into(),
            input: RawJson::from(json!({})),
            outcome,
            started_at: at.into(),
            duration: 40.0,
        };
        ReportInput {
            detail: EvalRunDetail {
                run_id: "ev_1".into(),
                status: "completed".into(),
                suites: vec!["pay<ments>".into()],
                repeat: 1,
                scope: spyglass_protocol::events::EvalScope::Suite,
                passed: 1,
                failed: 1,
                errored: 0,
                skipped: 0,
                duration_ms: 1500.0,
                cases: vec![
                    EvalCaseRecord {
                        session_id: Some("ses_1".into()),
                        result: failed,
                        output: Some(HOSTILE.into()),
                        ..EvalCaseRecord::default()
                    },
                    EvalCaseRecord {
                        session_id: Some("ses_2".into()),
                        result: passed,
                        output: Some("done".into()),
                        ..EvalCaseRecord::default()
                    },
                ],
            },
            trends: BTreeMap::from([("pay<ments>".into(), vec![Some(1.0), None, Some(0.5)])]),
            timelines: BTreeMap::from([(
                "ses_1".into(),
                Ok(vec![
                    call(
                        "asaas/create_payment",
                        "2026-11-22T21:43:31.000Z",
                        Outcome::Result(RawJson::from(json!({"id": 1}))),
                    ),
                    call(
                        "asaas/<b>x</b>",
                        "2026-11-22T21:43:31.100Z",
                        Outcome::Envelope(Box::new(Envelope::ToolNotMocked {
                            tool_name: "asaas/x".into(),
                            message: "no".into(),
                        })),
                    ),
                ]),
            )]),
            generated_at: "2026-11-23T00:00:00Z".into(),
        }
    }

    #[test]
    fn another_runners_failure_text_is_shown_whole_not_as_null_values() {
        let mut out = String::new();
        assertion_row(
            &mut out,
            &AssertionResult {
                kind: "failure".into(),
                pass: false,
                message: Some("Error: expected paid\n    at checkout.test.js:12".into()),
                ..AssertionResult::default()
            },
            0,
        );
        assert!(
            out.contains("<pre>Error: expected paid\n    at checkout.test.js:12</pre>"),
            "{out}"
        );
        assert!(!out.contains("null"), "{out}");
    }

    #[test]
    fn an_assertion_that_could_not_be_judged_is_marked_as_an_error() {
        let mut out = String::new();
        assertion_row(
            &mut out,
            &AssertionResult {
                kind: "max_cost".into(),
                pass: false,
                expected: RawJson::from(json!(0.01)),
                actual: RawJson::null(),
                message: Some("max_cost: cannot be checked: no price for model `o3`".into()),
                status: Some(AssertionStatus::Errored),
                ..AssertionResult::default()
            },
            0,
        );
        assert!(
            out.contains("<td class=\"error\" title=\"errored\">!</td>"),
            "{out}"
        );
        assert!(!out.contains('✗'), "{out}");
    }

    #[test]
    fn hostile_text_is_escaped_everywhere_and_nothing_loads_from_outside() {
        let page = html_report(&input());
        assert!(!page.contains("<script"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains("<b>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(&apos;x&apos;)&lt;/script&gt;"));
        assert!(
            page.contains("&amp;amp;"),
            "an entity in the text stays text"
        );
        assert!(page.contains("pay&lt;ments&gt;"));
        // No attribute names an address: no src, href, url(, @import.
        for banned in [
            "src=\"", "href=\"", "src='", "href='", "url(", "@import", "<link", "<iframe",
            "<object",
        ] {
            assert!(!page.contains(banned), "{banned} in {page}");
        }
        // The only `http` in the page is inside escaped text of the run.
        for (at, _) in page.match_indices("https://") {
            assert!(
                page[..at].ends_with("src=&quot;"),
                "an address outside text at {at}"
            );
        }
    }

    #[test]
    fn a_composition_is_a_row_per_child_indented_by_depth() {
        let mut report = input();
        report.detail.cases[0].result.assertions = vec![crate::fixtures::composite()];
        let page = html_report(&report);
        let rows: Vec<&str> = page.split("<tr class=\"depth-").skip(1).collect();
        let depths: Vec<&str> = rows.iter().map(|r| &r[..1]).collect();
        assert_eq!(depths, ["0", "1", "1", "2", "2", "1"]);
        assert!(
            rows[0].contains(
                "title=\"errored\">!</td><td style=\"padding-left:10px\"><code>all</code>"
            )
        );
        assert!(rows[3].contains("style=\"padding-left:50px\"><code>equals</code>"));
        assert!(
            rows[3].contains("<pre class=\"diff\">"),
            "a failed leaf is diffed"
        );
        assert!(rows[5].contains("<code>regex</code> <span class=\"skipped\">skipped</span>"));
        assert!(rows[5].contains("not judged"));
        // The checker's stderr is shown, its control characters not passed on.
        assert!(rows[4].contains("\\u{1b}[31mboom"), "{}", rows[4]);
        assert!(!page.contains('\u{1b}'));
    }

    #[test]
    fn the_page_has_the_table_the_diff_the_timeline_and_the_trend() {
        let page = html_report(&input());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<table id=\"suites\">"));
        assert!(page.contains("<td class=\"n passed\">1</td><td class=\"n failed\">1</td>"));
        assert!(page.contains("<span class=\"same\">  line one</span>"));
        assert!(page.contains("<span class=\"del\">- line two</span>"));
        assert!(page.contains("<span class=\"add\">+ &lt;/pre&gt;"));
        assert!(page.contains("<span class=\"same\">  line three</span>"));
        // The failing case is open with its timeline; the passing one is closed, without.
        assert_eq!(
            page.matches("<details class=\"case failed-case\" open>")
                .count(),
            1
        );
        assert_eq!(
            page.matches("<details class=\"case passed-case\">").count(),
            1
        );
        assert_eq!(page.matches("<table class=\"timeline\">").count(), 1);
        assert!(page.contains("+100.0 ms"));
        assert!(page.find("- line two").unwrap() < page.find("+ &lt;/pre&gt;").unwrap());
        assert!(page.contains("tool_not_mocked"));
        // Trend: two plotted runs and a gap.
        assert_eq!(page.matches("<circle").count(), 2);
        assert!(page.contains("100% → — → 50%"));
        assert!(page.contains("<polyline"));
        // Per case and per suite statistics.
        assert!(page.contains("<table id=\"stats\">"));
    }

    #[test]
    fn a_flaky_case_shows_its_strip_and_interval() {
        let mut report = input();
        let first = report.detail.cases[0].clone();
        let mut records = Vec::new();
        for (attempt, status) in [
            (1, EvalStatus::Passed),
            (2, EvalStatus::Failed),
            (3, EvalStatus::Passed),
        ] {
            let mut r = first.clone();
            r.result.case = "wobbles".into();
            r.result.status = status;
            r.result.attempt = Some(attempt);
            records.push(r);
        }
        report.detail.cases = records;
        let page = html_report(&report);
        let id = escape(&format!("{}/wobbles", first.result.suite));
        assert!(
            page.contains(&format!("<tr><td>{id}</td><td><code>PFP</code></td><td class=\"n\">2/3</td><td class=\"n\">67 % [21–94 %]</td><td class=\"n\">yes</td><td class=\"n\">no</td><td class=\"n\">100 %</td><td><span class=\"badge error\">flaky</span></td></tr>")),
            "{page}"
        );
    }

    #[test]
    fn long_values_are_shown_whole_not_diffed() {
        let long: String = (0..500).map(|i| format!("{i}\n")).collect();
        let mut out = String::new();
        diff(&mut out, &long, "x");
        assert!(out.starts_with("<pre class=\"diff\"><span class=\"del\">expected:\n0\n1\n"));
    }
}
