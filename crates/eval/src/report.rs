//! What `spyglass eval` prints and writes: a table of cases per suite with one summary
//! line, the exit rule, `JUnit` XML (failures and errors apart) and the JSON results.

use crate::stats::RunStats;
use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event};
use quick_xml::writer::ElementWriter;
use spyglass_protocol::events::{AssertionResult, AssertionStatus, EvalStatus};
use spyglass_protocol::rest::{EvalCaseRecord, EvalRunDetail};
use spyglass_protocol::sanitize::{sanitize, sanitize_text};
use std::borrow::Cow;
use std::fmt::Write as _;

/// Outcome counts of a run or a suite.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub passed: u32,
    pub failed: u32,
    pub errored: u32,
    pub skipped: u32,
}

impl Counts {
    pub fn of<'a>(records: impl IntoIterator<Item = &'a EvalCaseRecord>) -> Self {
        let mut counts = Self::default();
        for record in records {
            counts.add(record.result.status);
        }
        counts
    }

    pub fn add(&mut self, status: EvalStatus) {
        match status {
            EvalStatus::Passed => self.passed += 1,
            EvalStatus::Failed => self.failed += 1,
            EvalStatus::Error => self.errored += 1,
            EvalStatus::Skipped => self.skipped += 1,
        }
    }

    pub fn total(&self) -> u32 {
        self.passed + self.failed + self.errored + self.skipped
    }

    /// The run succeeds only when nothing failed or errored (skips do not count against it).
    pub fn success(&self) -> bool {
        self.failed == 0 && self.errored == 0
    }

    /// `N passed, N failed, N errored, N skipped`.
    pub fn summary_line(&self) -> String {
        format!(
            "{} passed, {} failed, {} errored, {} skipped",
            self.passed, self.failed, self.errored, self.skipped
        )
    }
}

/// A suite's records, in the order they ran.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteResults<'a> {
    pub suite: &'a str,
    pub cases: Vec<&'a EvalCaseRecord>,
}

/// Groups records by suite, suites in order of first appearance.
pub fn group(records: &[EvalCaseRecord]) -> Vec<SuiteResults<'_>> {
    let mut suites: Vec<SuiteResults<'_>> = Vec::new();
    for record in records {
        let name = record.result.suite.as_str();
        match suites.iter_mut().find(|s| s.suite == name) {
            Some(suite) => suite.cases.push(record),
            None => suites.push(SuiteResults {
                suite: name,
                cases: vec![record],
            }),
        }
    }
    suites
}

/// Milliseconds for people: `42µs`, `1.3ms`, `12ms`, `1.5s`. A mocked case runs in
/// microseconds, so whole milliseconds would call it `0ms`.
pub fn human_duration(ms: f64) -> String {
    if ms < 0.9995 {
        format!("{}µs", (ms.max(0.0) * 1000.0).round() as u64)
    } else if ms < 9.95 {
        format!("{ms:.1}ms")
    } else if ms < 1000.0 {
        format!("{}ms", ms.round() as u64)
    } else {
        format!("{:.1}s", ms / 1000.0)
    }
}

/// Text cut to `max` characters with an ellipsis, on one line.
fn clip(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// `contains: expected "pay_1", actual "Charged pay_2"` (values as JSON, clipped).
pub fn describe_assertion(assertion: &AssertionResult, max_value: usize) -> String {
    format!(
        "{}: expected {}, actual {}",
        assertion.kind,
        clip(assertion.expected.get(), max_value),
        clip(assertion.actual.get(), max_value)
    )
}

/// How deep a shown assertion tree goes; deeper children (only events other runners
/// sent can nest past what a suite file may) are summed up in one line.
pub const MAX_SHOWN_DEPTH: usize = 32;

/// An assertion and everything under it, depth first: `(depth, assertion)`, the top at 0.
/// Past [`MAX_SHOWN_DEPTH`] a node's children are left out (its `children` still says how
/// many).
pub fn flatten(top: &AssertionResult) -> Vec<(usize, &AssertionResult)> {
    let mut out = Vec::new();
    let mut stack = vec![(0, top)];
    while let Some((depth, node)) = stack.pop() {
        out.push((depth, node));
        if depth < MAX_SHOWN_DEPTH {
            stack.extend(node.children.iter().rev().map(|child| (depth + 1, child)));
        }
    }
    out
}

/// The mark of an outcome: `✓` passed, `✗` failed, `!` errored, `-` skipped.
pub fn outcome_mark(status: AssertionStatus) -> &'static str {
    match status {
        AssertionStatus::Passed => "✓",
        AssertionStatus::Failed => "✗",
        AssertionStatus::Errored => "!",
        AssertionStatus::Skipped => "-",
    }
}

/// One line of an assertion tree: `✓ contains: expected "pay_1"`, `✗ contains: "x" not
/// found`, `! command: exited with status 2`, `- regex (skipped)`; not yet escaped.
pub fn tree_line(node: &AssertionResult, max_value: usize) -> String {
    let status = node.outcome();
    let mark = outcome_mark(status);
    if status == AssertionStatus::Skipped {
        return format!("{mark} {} (skipped)", node.kind);
    }
    // A node with children: what became of them (the lines under it say the rest).
    if !node.children.is_empty() {
        let counts: Vec<String> = [
            AssertionStatus::Passed,
            AssertionStatus::Failed,
            AssertionStatus::Errored,
            AssertionStatus::Skipped,
        ]
        .iter()
        .filter_map(|&s| {
            let n = node.children.iter().filter(|c| c.outcome() == s).count();
            (n > 0).then(|| format!("{n} {}", s.as_str()))
        })
        .collect();
        return format!("{mark} {} ({})", node.kind, counts.join(", "));
    }
    match (status, &node.message) {
        // A checker's verdict says more than the argv it ran.
        (AssertionStatus::Passed, _) if node.kind == "command" => {
            format!("{mark} command: {}", clip(node.actual.get(), max_value))
        }
        (AssertionStatus::Passed, _) => format!(
            "{mark} {}: expected {}",
            node.kind,
            clip(node.expected.get(), max_value)
        ),
        (_, Some(message)) if message.starts_with(&format!("{}:", node.kind)) => {
            format!("{mark} {}", clip(message, max_value * 2))
        }
        (_, Some(message)) => format!("{mark} {}: {}", node.kind, clip(message, max_value * 2)),
        (_, None) => format!("{mark} {}", describe_assertion(node, max_value)),
    }
}

/// A composition's tree as indented lines (two spaces a level), escaped for the terminal.
pub fn tree_text(top: &AssertionResult, indent: usize, max_value: usize) -> Vec<String> {
    flatten(top)
        .into_iter()
        .map(|(depth, node)| {
            format!(
                "{}{}",
                " ".repeat(indent + 2 * depth),
                sanitize(&tree_line(node, max_value))
            )
        })
        .collect()
}

/// How much of an assertion's expected and actual values the detail column shows; a row
/// whose values were cut has its whole detail on the line under it.
const DETAIL_VALUE_CHARS: usize = 60;

/// The detail column: first failing assertion (its values cut to `max_value` characters),
/// error reason or skip reason.
fn detail(record: &EvalCaseRecord, max_value: usize) -> String {
    let result = &record.result;
    match result.status {
        EvalStatus::Passed => String::new(),
        EvalStatus::Failed => match result.assertions.iter().find(|a| !a.pass) {
            // A composition says which child decided it.
            Some(first) if !first.children.is_empty() => first
                .message
                .clone()
                .unwrap_or_else(|| describe_assertion(first, max_value)),
            // Another runner's failure (a JUnit `<failure>` text) compares no values.
            Some(first) if compares_nothing(first) => {
                format!(
                    "{}: {}",
                    first.kind,
                    first.message.as_deref().unwrap_or_default()
                )
            }
            Some(first) => describe_assertion(first, max_value),
            None => result.reason.clone().unwrap_or_default(),
        },
        EvalStatus::Error => format!("error: {}", result.reason.as_deref().unwrap_or("no result")),
        EvalStatus::Skipped => result.reason.clone().unwrap_or_default(),
    }
}

/// Per suite a table of cases (status, duration, case, first failure), then exactly one
/// summary line for the whole run. A repeated run (`--repeat K`, `model_variants`) has one
/// row per case with its attempts as a strip (`PPFPP`) and pass count, its suites' header
/// lines carry the statistics, and a line before the summary names the flaky cases.
pub fn render_table(records: &[EvalCaseRecord]) -> String {
    let stats = RunStats::of(records.iter().map(|r| &r.result));
    let mut out = String::new();
    for suite in group(records) {
        let counts = Counts::of(suite.cases.iter().copied());
        let by_case = cases_of(&suite.cases);
        let repeated = by_case.iter().any(|(_, attempts)| attempts.len() > 1);
        let statistics = stats
            .suites
            .iter()
            .find(|s| s.suite == suite.suite)
            .filter(|_| repeated)
            .map(|s| format!("; {}", s.line()))
            .unwrap_or_default();
        // Names, reasons and values come from suite files and agents: escaped for the
        // terminal here, where the table is printed.
        let _ = writeln!(
            out,
            "{}  ({}{statistics})",
            sanitize(suite.suite),
            counts.summary_line()
        );
        if repeated {
            case_rows(&mut out, &by_case, &stats);
        } else {
            attempt_rows(&mut out, &suite.cases);
        }
        out.push('\n');
    }
    if stats.repeated() {
        let _ = writeln!(out, "{}", sanitize(&stats.flaky_line()));
    }
    out.push_str(&Counts::of(records).summary_line());
    out.push('\n');
    out
}

/// A suite's records by case, cases in order of first appearance.
fn cases_of<'a>(records: &[&'a EvalCaseRecord]) -> Vec<(&'a str, Vec<&'a EvalCaseRecord>)> {
    let mut cases: Vec<(&str, Vec<&EvalCaseRecord>)> = Vec::new();
    for record in records {
        let name = record.result.case.as_str();
        match cases.iter_mut().find(|(case, _)| *case == name) {
            Some((_, attempts)) => attempts.push(record),
            None => cases.push((name, vec![record])),
        }
    }
    for (_, attempts) in &mut cases {
        attempts.sort_by_key(|r| r.result.attempt.unwrap_or(0));
    }
    cases
}

/// What a row's detail column shows: the detail's first line.
fn first_line(detail: &str) -> &str {
    detail.lines().next().unwrap_or_default()
}

/// When the row's detail column cut the detail (an assertion's values shortened, or a
/// text of several lines), the whole detail under the row, its line breaks kept: the
/// table never cuts what a case said.
fn whole_detail_under(out: &mut String, shown: &str, whole: &str) {
    if first_line(shown) != whole {
        for line in sanitize_text(whole).lines() {
            let _ = writeln!(out, "{}", format!("           {line}").trim_end());
        }
    }
}

/// Whether an assertion holds a message and no values: another runner's verdict (a
/// `JUnit` `<failure>` text), shown as its message rather than `null` against `null`.
pub fn compares_nothing(assertion: &AssertionResult) -> bool {
    assertion.message.is_some()
        && assertion.children.is_empty()
        && assertion.expected.get() == "null"
        && assertion.actual.get() == "null"
}

/// A failed or errored attempt's compositions, whole, one child a line.
fn trees_under(out: &mut String, record: &EvalCaseRecord) {
    if matches!(record.result.status, EvalStatus::Failed | EvalStatus::Error) {
        for top in record
            .result
            .assertions
            .iter()
            .filter(|a| !a.pass && !a.children.is_empty())
        {
            for tree_line in tree_text(top, 11, 60) {
                let _ = writeln!(out, "{tree_line}");
            }
        }
    }
}

/// One row per attempt: a run that judged each case once.
fn attempt_rows(out: &mut String, records: &[&EvalCaseRecord]) {
    let label = |record: &EvalCaseRecord| sanitize(&record.result.case).into_owned();
    let width = records
        .iter()
        .map(|r| label(r).chars().count())
        .max()
        .unwrap_or(0)
        .min(40);
    for record in records {
        let duration = if record.result.status == EvalStatus::Skipped {
            "-".to_owned()
        } else {
            human_duration(record.result.duration)
        };
        let shown = detail(record, DETAIL_VALUE_CHARS);
        // A name longer than the column is printed whole: the row runs past the others.
        let line = format!(
            "  {:<7}  {:>7}  {:<width$}  {}",
            record.result.status.as_str(),
            duration,
            label(record),
            sanitize(first_line(&shown)),
        );
        let _ = writeln!(out, "{}", line.trim_end());
        whole_detail_under(out, &shown, &detail(record, usize::MAX));
        // A composition that did not hold is shown whole, one child a line.
        trees_under(out, record);
    }
}

/// One row per case over its attempts: `flaky  12ms  charge  PPFPP  4/5  detail`, the
/// status `flaky` when some attempts passed and some did not, the duration a mean.
fn case_rows(out: &mut String, cases: &[(&str, Vec<&EvalCaseRecord>)], stats: &RunStats) {
    let width = cases
        .iter()
        .map(|(case, _)| sanitize(case).chars().count())
        .max()
        .unwrap_or(0)
        .min(40);
    let strip_width = cases.iter().map(|(_, a)| a.len()).max().unwrap_or(0);
    for (case, attempts) in cases {
        let Some(first) = attempts.first() else {
            continue;
        };
        let found = stats.case(&first.result.suite, case);
        let (passed, judged) = found.map_or((0, 0), |c| (c.passed, c.judged));
        let strip = found.map(|c| c.strip.clone()).unwrap_or_default();
        let failing = attempts
            .iter()
            .find(|r| matches!(r.result.status, EvalStatus::Failed | EvalStatus::Error));
        let status = if judged == 0 {
            "skipped"
        } else if passed == judged {
            "passed"
        } else if passed > 0 {
            "flaky"
        } else if attempts
            .iter()
            .any(|r| r.result.status == EvalStatus::Failed)
        {
            "failed"
        } else {
            "error"
        };
        let durations: Vec<f64> = attempts
            .iter()
            .filter(|r| r.result.status != EvalStatus::Skipped)
            .map(|r| r.result.duration)
            .collect();
        let duration = if durations.is_empty() {
            "-".to_owned()
        } else {
            #[expect(clippy::cast_precision_loss, reason = "a count of attempts")]
            let mean = durations.iter().sum::<f64>() / durations.len() as f64;
            human_duration(mean)
        };
        let said = |max_value: usize| match failing {
            Some(record) => {
                let attempt = record.result.attempt.unwrap_or(1);
                format!("#{attempt}: {}", detail(record, max_value))
            }
            None => attempts
                .iter()
                .map(|r| detail(r, max_value))
                .find(|d| !d.is_empty())
                .unwrap_or_default(),
        };
        let shown = said(DETAIL_VALUE_CHARS);
        let line = format!(
            "  {status:<7}  {duration:>7}  {:<width$}  {strip:<strip_width$}  {:>5}  {}",
            sanitize(case),
            format!("{passed}/{judged}"),
            sanitize(first_line(&shown)),
        );
        let _ = writeln!(out, "{}", line.trim_end());
        whole_detail_under(out, &shown, &said(usize::MAX));
        if let Some(record) = failing {
            trees_under(out, record);
        }
    }
}

/// Text XML 1.0 can carry: the characters it has no place for at all (control characters
/// other than tab, newline and carriage return; U+FFFE, U+FFFF) become U+FFFD. Escaping
/// is quick-xml's, done as the writer writes.
fn xml_chars(text: &str) -> Cow<'_, str> {
    let bad = |c: char| {
        ((c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r'))
            || c == '\u{FFFE}'
            || c == '\u{FFFF}'
    };
    if text.contains(bad) {
        Cow::Owned(
            text.chars()
                .map(|c| if bad(c) { '\u{FFFD}' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(text)
    }
}

/// Decimal seconds with at least three places and up to six: `0.012`, `0.000042`.
fn seconds(ms: f64) -> String {
    let text = format!("{:.6}", ms.max(0.0) / 1000.0);
    let keep = text.trim_end_matches('0').len().max(text.len() - 3);
    text[..keep].to_owned()
}

/// `JUnit` XML: one `<testsuite>` per suite; failed cases get `<failure>`, errored ones
/// `<error>`, skipped ones `<skipped>`; messages carry expected and actual.
pub fn junit_xml(records: &[EvalCaseRecord]) -> String {
    let mut writer = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing into a `Vec` cannot fail.
    let _ = write_junit(&mut writer, records);
    let mut out = String::from_utf8_lossy(&writer.into_inner()).into_owned();
    out.push('\n');
    out
}

fn write_junit(writer: &mut Writer<Vec<u8>>, records: &[EvalCaseRecord]) -> std::io::Result<()> {
    let all = Counts::of(records);
    let total_ms: f64 = records.iter().map(|r| r.result.duration).sum();
    writer.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    counted(writer, "testsuites", "spyglass eval", all, total_ms).write_inner_content(
        |writer| {
            for suite in group(records) {
                let counts = Counts::of(suite.cases.iter().copied());
                let suite_ms: f64 = suite.cases.iter().map(|r| r.result.duration).sum();
                counted(writer, "testsuite", suite.suite, counts, suite_ms).write_inner_content(
                    |writer| {
                        for record in &suite.cases {
                            write_case(writer, suite.suite, record)?;
                        }
                        Ok(())
                    },
                )?;
            }
            Ok(())
        },
    )?;
    Ok(())
}

/// `<testsuites>` or `<testsuite>` with its name, counts and time.
fn counted<'w>(
    writer: &'w mut Writer<Vec<u8>>,
    tag: &'static str,
    name: &str,
    counts: Counts,
    ms: f64,
) -> ElementWriter<'w, Vec<u8>> {
    writer
        .create_element(tag)
        .with_attribute(("name", xml_chars(name)))
        .with_attribute(("tests", counts.total().to_string().as_str()))
        .with_attribute(("failures", counts.failed.to_string().as_str()))
        .with_attribute(("errors", counts.errored.to_string().as_str()))
        .with_attribute(("skipped", counts.skipped.to_string().as_str()))
        .with_attribute(("time", seconds(ms).as_str()))
}

fn write_case(
    writer: &mut Writer<Vec<u8>>,
    suite: &str,
    record: &EvalCaseRecord,
) -> std::io::Result<()> {
    let result = &record.result;
    let name = match result.attempt {
        Some(attempt) if attempt > 1 => format!("{} #{attempt}", result.case),
        _ => result.case.clone(),
    };
    let case = writer
        .create_element("testcase")
        .with_attribute(("name", xml_chars(&name)))
        .with_attribute(("classname", xml_chars(suite)))
        .with_attribute(("time", seconds(result.duration).as_str()));
    let (tag, message, kind, body) = match result.status {
        EvalStatus::Passed => {
            case.write_empty()?;
            return Ok(());
        }
        EvalStatus::Failed => {
            let failing: Vec<&AssertionResult> =
                result.assertions.iter().filter(|a| !a.pass).collect();
            let (message, kind) = match failing.first() {
                Some(first) => (describe_assertion(first, 200), first.kind.as_str()),
                None => (result.reason.clone().unwrap_or_default(), "assertion"),
            };
            let body: Vec<String> = failing
                .iter()
                .map(|a| {
                    if a.children.is_empty() {
                        format!(
                            "{}\nexpected: {}\nactual: {}",
                            a.message.as_deref().unwrap_or(&a.kind),
                            a.expected,
                            a.actual
                        )
                    } else {
                        tree_text(a, 0, 200).join("\n")
                    }
                })
                .collect();
            ("failure", message, Some(kind), Some(body.join("\n\n")))
        }
        EvalStatus::Error => {
            let reason = result.reason.as_deref().unwrap_or("no result");
            (
                "error",
                reason.to_owned(),
                Some("error"),
                Some(reason.to_owned()),
            )
        }
        EvalStatus::Skipped => (
            "skipped",
            result.reason.clone().unwrap_or_default(),
            None,
            None,
        ),
    };
    case.write_inner_content(|writer| {
        let mut inner = writer
            .create_element(tag)
            .with_attribute(("message", xml_chars(&message)));
        if let Some(kind) = kind {
            inner = inner.with_attribute(("type", kind));
        }
        match body {
            Some(body) => inner.write_text_content(BytesText::new(&xml_chars(&body)))?,
            None => inner.write_empty()?,
        };
        Ok(())
    })?;
    Ok(())
}

/// The JSON results file: the run detail with its `stats` (per case and per suite),
/// pretty-printed.
pub fn json_results(detail: &EvalRunDetail) -> String {
    json_document(detail, serde_json::Map::new())
}

/// The JSON results file with further top-level sections (`comparison`, `quarantine`)
/// beside the run detail and its `stats`. A reader of the run detail ignores them.
pub fn json_document(
    detail: &EvalRunDetail,
    extra: serde_json::Map<String, serde_json::Value>,
) -> String {
    let mut value = serde_json::to_value(detail).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        let stats = RunStats::of(detail.cases.iter().map(|r| &r.result));
        map.insert(
            "stats".into(),
            serde_json::to_value(&stats).unwrap_or_default(),
        );
        map.extend(extra);
    }
    serde_json::to_string_pretty(&value).unwrap_or_else(|_| "{}".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use spyglass_protocol::RawJson;
    use spyglass_protocol::events::AgentEvalCompleted;

    #[test]
    fn a_failing_composition_is_printed_whole_under_its_row() {
        let mut failed = record(
            "s",
            "composed",
            EvalStatus::Error,
            Some("all[1]: any: none of 2 held"),
        );
        failed.result.assertions = vec![crate::fixtures::composite()];
        let table = render_table(&[failed]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            &lines[1..8],
            [
                "  error       12ms  composed  error: all[1]: any: none of 2 held",
                "           ! all (1 passed, 1 errored, 1 skipped)",
                "             ✓ contains: expected \"pay_1\"",
                "             ! any (1 failed, 1 errored)",
                "               ✗ equals: the output differs",
                // Control characters never reach the terminal (one line: a space).
                "               ! command: exited with status 2; stderr:  [31mboom",
                "             - regex (skipped)",
            ],
            "{table}"
        );
        assert!(!table.contains('\u{1b}'));
    }

    #[test]
    fn long_case_names_and_cut_values_are_printed_whole() {
        let name = "refunds a payment the customer disputed after the billing cycle closed";
        let said = format!("Charged pay_2 {}", "and then some more words ".repeat(6));
        let mut failed = record("s", name, EvalStatus::Failed, None);
        failed.result.assertions[1].actual = RawJson::from(json!(said));
        let short = record("s", "ok", EvalStatus::Skipped, Some("not mocked yet"));
        for table in [render_table(&[failed.clone(), short]), {
            let mut again = failed.clone();
            again.result.attempt = Some(2);
            failed.result.attempt = Some(1);
            render_table(&[failed.clone(), again])
        }] {
            let lines: Vec<&str> = table.lines().collect();
            let row = lines.iter().position(|l| l.contains(name)).expect(&table);
            assert!(
                lines[row].contains("contains: expected \"pay_1\""),
                "{table}"
            );
            assert!(
                !lines[row].contains(said.trim_end()),
                "the row keeps its width: {table}"
            );
            assert!(
                lines[row + 1]
                    .ends_with(&format!("contains: expected \"pay_1\", actual \"{said}\"")),
                "the whole detail under the row: {table}"
            );
        }
    }

    #[test]
    fn another_runners_failure_text_is_its_detail_not_null_values() {
        let text =
            "Error: expect(received).toBe(expected)\n\nExpected: \"paid\"\nReceived: \"pending\"";
        let mut failed = record("checkout", "charges", EvalStatus::Failed, None);
        failed.result.assertions = vec![AssertionResult {
            kind: "failure".into(),
            pass: false,
            message: Some(text.into()),
            ..AssertionResult::default()
        }];
        let table = render_table(&[failed]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[1],
            "  failed      12ms  charges  failure: Error: expect(received).toBe(expected)",
            "{table}"
        );
        assert_eq!(
            lines[2..6],
            [
                "           failure: Error: expect(received).toBe(expected)",
                "",
                "           Expected: \"paid\"",
                "           Received: \"pending\"",
            ],
            "{table}"
        );
        assert!(!table.contains("null"), "{table}");
    }

    #[test]
    fn trees_past_the_shown_depth_are_cut_not_walked() {
        let mut node = crate::fixtures::composite();
        for _ in 0..(MAX_SHOWN_DEPTH + 10) {
            node = AssertionResult {
                kind: "all".into(),
                children: vec![node],
                ..AssertionResult::default()
            };
        }
        let rows = flatten(&node);
        assert_eq!(rows.len(), MAX_SHOWN_DEPTH + 1);
        assert_eq!(rows.last().map(|(depth, _)| *depth), Some(MAX_SHOWN_DEPTH));
    }

    fn record(suite: &str, case: &str, status: EvalStatus, reason: Option<&str>) -> EvalCaseRecord {
        let assertions = if status == EvalStatus::Failed {
            vec![
                AssertionResult {
                    kind: "equals".into(),
                    pass: true,
                    expected: RawJson::from(json!("x")),
                    actual: RawJson::from(json!("x")),
                    message: None,
                    ..AssertionResult::default()
                },
                AssertionResult {
                    kind: "contains".into(),
                    pass: false,
                    expected: RawJson::from(json!("pay_1")),
                    actual: RawJson::from(json!("Charged pay_2")),
                    message: Some("contains: \"pay_1\" not found".into()),
                    ..AssertionResult::default()
                },
            ]
        } else {
            Vec::new()
        };
        EvalCaseRecord {
            output: None,
            session_id: Some("ses_1".into()),
            result: AgentEvalCompleted {
                suite: suite.into(),
                case: case.into(),
                status,
                pass: status == EvalStatus::Passed,
                reason: reason.map(str::to_owned),
                duration: 12.0,
                assertions,
                ..AgentEvalCompleted::default()
            },
            ..EvalCaseRecord::default()
        }
    }

    fn sample() -> Vec<EvalCaseRecord> {
        vec![
            record("payments", "charge small amount", EvalStatus::Passed, None),
            record("payments", "refund", EvalStatus::Failed, Some("contains")),
            record(
                "payments",
                "outage",
                EvalStatus::Error,
                Some("model failed on step 0: Rate limited"),
            ),
            record(
                "payments",
                "qr",
                EvalStatus::Skipped,
                Some("not mocked yet"),
            ),
            record("billing", "invoice", EvalStatus::Passed, None),
        ]
    }

    #[test]
    fn durations_keep_microseconds() {
        assert_eq!(human_duration(0.042), "42µs");
        assert_eq!(human_duration(1.3), "1.3ms");
        assert_eq!(human_duration(12.0), "12ms");
        assert_eq!(human_duration(1500.0), "1.5s");
        assert_eq!(seconds(12.0), "0.012");
        assert_eq!(seconds(0.042), "0.000042");
        assert_eq!(seconds(1500.0), "1.500");
    }

    #[test]
    fn summary_line_and_exit_rule() {
        let counts = Counts::of(&sample());
        assert_eq!(
            counts.summary_line(),
            "2 passed, 1 failed, 1 errored, 1 skipped"
        );
        assert!(!counts.success());
        let only_skips = Counts {
            passed: 3,
            skipped: 2,
            ..Counts::default()
        };
        assert!(only_skips.success(), "skips do not fail a run");
        let errored = Counts {
            passed: 3,
            errored: 1,
            ..Counts::default()
        };
        assert!(
            !errored.success(),
            "an error fails a run even with no failure"
        );
    }

    #[test]
    fn table_shows_each_suite_then_one_summary_line() {
        let table = render_table(&sample());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines.last(),
            Some(&"2 passed, 1 failed, 1 errored, 1 skipped")
        );
        assert_eq!(
            table.matches(" passed, ").count(),
            3,
            "one line per suite header plus the run's summary:\n{table}"
        );
        assert_eq!(
            lines[0],
            "payments  (1 passed, 1 failed, 1 errored, 1 skipped)"
        );
        let refund = lines.iter().find(|l| l.contains("refund")).unwrap();
        assert!(refund.trim_start().starts_with("failed"), "{refund}");
        assert!(refund.contains("12ms"), "{refund}");
        assert!(
            refund.contains("contains: expected \"pay_1\", actual \"Charged pay_2\""),
            "the first failing assertion, not the passing one before it: {refund}"
        );
        let outage = lines.iter().find(|l| l.contains("outage")).unwrap();
        assert!(
            outage.contains("error: model failed on step 0: Rate limited"),
            "{outage}"
        );
        let qr = lines.iter().find(|l| l.contains(" qr")).unwrap();
        assert!(qr.contains("not mocked yet"), "{qr}");
        assert!(lines.iter().any(|l| l.starts_with("billing  (1 passed")));
    }

    #[test]
    fn repeated_attempts_are_numbered() {
        let mut records = sample();
        records[0].result.attempt = Some(1);
        let mut again = records[0].clone();
        again.result.attempt = Some(2);
        records.push(again);
        let table = render_table(&records);
        // The table has one row per case with its attempts as a strip; JUnit one per
        // attempt.
        assert!(
            table.contains("  passed      12ms  charge small amount  PP    2/2\n"),
            "{table}"
        );
        assert!(!table.contains("#2"), "{table}");
        assert!(junit_xml(&records).contains("name=\"charge small amount #2\""));
    }

    #[test]
    fn a_flaky_case_is_one_row_with_its_strip_and_named_under_the_table() {
        let mut records = Vec::new();
        for (attempt, status) in [
            EvalStatus::Passed,
            EvalStatus::Passed,
            EvalStatus::Failed,
            EvalStatus::Passed,
            EvalStatus::Failed,
        ]
        .into_iter()
        .enumerate()
        {
            let mut r = record("payments", "charge", status, None);
            r.result.attempt = Some(u32::try_from(attempt).unwrap() + 1);
            records.push(r);
        }
        for attempt in 1..=5 {
            let mut r = record("payments", "refund", EvalStatus::Passed, None);
            r.result.attempt = Some(attempt);
            records.push(r);
        }
        let table = render_table(&records);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "payments  (8 passed, 2 failed, 0 errored, 0 skipped; pass rate 80 % [49–94 %], pass@k 100 %, pass^k 50 %, flip rate 38 %, 1 flaky)",
            "{table}"
        );
        assert_eq!(
            lines[1],
            "  flaky       12ms  charge  PPFPF    3/5  #3: contains: expected \"pay_1\", actual \"Charged pay_2\""
        );
        assert_eq!(lines[2], "  passed      12ms  refund  PPPPP    5/5");
        assert_eq!(lines[4], "1 flaky: payments/charge (3/5, 60 % [23–88 %])");
        assert_eq!(lines[5], "8 passed, 2 failed, 0 errored, 0 skipped");
        let detail = EvalRunDetail {
            run_id: "ev_1".into(),
            status: "completed".into(),
            cases: records,
            ..EvalRunDetail::default()
        };
        let json: serde_json::Value = serde_json::from_str(&json_results(&detail)).unwrap();
        let charge = &json["stats"]["cases"][0];
        assert_eq!(charge["id"], "payments/charge");
        assert_eq!(charge["strip"], "PPFPF");
        assert_eq!(charge["flips"], 3);
        assert_eq!(charge["flip_rate"], 0.75);
        assert_eq!(charge["flaky"], true);
        assert_eq!(json["stats"]["suites"][0]["flaky"], 1);
        // The file still reads as a run.
        assert!(crate::compare::parse_results("r.json", &json.to_string()).is_ok());
    }

    /// Attribute `name` of the first tag in `tag_text`.
    fn attr(tag_text: &str, name: &str) -> String {
        let needle = format!(" {name}=\"");
        let start = tag_text.find(&needle).unwrap() + needle.len();
        let end = tag_text[start..].find('"').unwrap() + start;
        tag_text[start..end].to_owned()
    }

    /// Each `<testsuite ...>` opening tag with the text up to its closing tag.
    fn suites(xml: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut rest = xml;
        while let Some(at) = rest.find("<testsuite ") {
            let tail = &rest[at..];
            let open_end = tail.find('>').unwrap();
            let close = tail.find("</testsuite>").unwrap();
            out.push((
                tail[..open_end].to_owned(),
                tail[open_end..close].to_owned(),
            ));
            rest = &tail[close..];
        }
        out
    }

    #[test]
    fn junit_counts_keep_failures_and_errors_apart() {
        let xml = junit_xml(&sample());
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
        let root_end = xml.find("<testsuites ").unwrap();
        let root = &xml[root_end..root_end + xml[root_end..].find('>').unwrap()];
        assert_eq!(
            (
                attr(root, "tests"),
                attr(root, "failures"),
                attr(root, "errors"),
                attr(root, "skipped")
            ),
            ("5".into(), "1".into(), "1".into(), "1".into())
        );
        let found = suites(&xml);
        assert_eq!(found.len(), 2);
        let (open, body) = &found[0];
        assert_eq!(attr(open, "name"), "payments");
        assert_eq!(
            (
                attr(open, "tests"),
                attr(open, "failures"),
                attr(open, "errors"),
                attr(open, "skipped")
            ),
            ("4".into(), "1".into(), "1".into(), "1".into())
        );
        assert_eq!(body.matches("<testcase ").count(), 4);
        assert_eq!(body.matches("<failure ").count(), 1);
        assert_eq!(body.matches("<error ").count(), 1);
        assert_eq!(body.matches("<skipped ").count(), 1);
        let failure = &body[body.find("<failure ").unwrap()..];
        assert_eq!(
            attr(failure, "message"),
            "contains: expected &quot;pay_1&quot;, actual &quot;Charged pay_2&quot;"
        );
        let error = &body[body.find("<error ").unwrap()..];
        assert_eq!(
            attr(error, "message"),
            "model failed on step 0: Rate limited"
        );
        let (open, body) = &found[1];
        assert_eq!(attr(open, "name"), "billing");
        assert_eq!(
            (attr(open, "tests"), attr(open, "failures")),
            ("1".into(), "0".into())
        );
        assert_eq!(body.matches("<testcase ").count(), 1);
        // Tags balance: every element opened is closed.
        assert_eq!(xml.matches("<testcase ").count(), 5);
        let self_closed = xml
            .lines()
            .filter(|l| l.trim_start().starts_with("<testcase ") && l.ends_with("/>"))
            .count();
        assert_eq!(self_closed, 2, "the two passed cases");
        assert_eq!(xml.matches("</testcase>").count() + self_closed, 5);
        assert_eq!(xml.matches("</testsuite>").count(), 2);
        assert_eq!(xml.matches("</testsuites>").count(), 1);
    }

    #[test]
    fn junit_escapes_everything() {
        let mut records = vec![record(
            "a<b>&\"c'",
            "x\u{1}y\nz",
            EvalStatus::Error,
            Some("<boom> & \"quotes\""),
        )];
        records[0].result.case.push_str("]]>");
        let xml = junit_xml(&records);
        let open = &xml[xml.find("<testsuite ").unwrap()..];
        assert_eq!(attr(open, "name"), "a&lt;b&gt;&amp;&quot;c&apos;");
        let case = &xml[xml.find("<testcase ").unwrap()..];
        assert_eq!(attr(case, "name"), "x\u{FFFD}y&#10;z]]&gt;");
        assert!(xml.contains("&lt;boom&gt; &amp; &quot;quotes&quot;"));
        // No raw markup from the data survived anywhere.
        assert!(!xml.contains("<boom>") && !xml.contains("a<b>") && !xml.contains('\u{1}'));
    }

    #[test]
    fn json_results_round_trip() {
        let detail = EvalRunDetail {
            run_id: "run_1".into(),
            status: "completed".into(),
            suites: vec!["payments".into()],
            repeat: 1,
            scope: spyglass_protocol::events::EvalScope::default(),
            passed: 2,
            failed: 1,
            errored: 1,
            skipped: 1,
            duration_ms: 60.0,
            cases: sample(),
        };
        let text = json_results(&detail);
        let back: EvalRunDetail = serde_json::from_str(&text).unwrap();
        assert_eq!(back, detail);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["cases"][1]["sessionId"], "ses_1");
        assert_eq!(value["cases"][1]["status"], "failed");
        assert_eq!(
            value["cases"][1]["assertions"][1]["actual"],
            "Charged pay_2"
        );
    }
}
