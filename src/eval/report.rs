//! What `spyglass eval` prints and writes: a table of cases per suite with one summary
//! line, the exit rule, JUnit XML (failures and errors apart) and the JSON results.

use crate::protocol::events::{AssertionResult, EvalStatus};
use crate::protocol::rest::{EvalCaseRecord, EvalRunDetail};
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

/// Milliseconds for people: `12ms`, `1.5s`.
pub fn human_duration(ms: f64) -> String {
    if ms < 1000.0 {
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

/// The detail column: first failing assertion, error reason or skip reason.
fn detail(record: &EvalCaseRecord) -> String {
    let result = &record.result;
    match result.status {
        EvalStatus::Passed => String::new(),
        EvalStatus::Failed => match result.assertions.iter().find(|a| !a.pass) {
            Some(first) => describe_assertion(first, 60),
            None => result.reason.clone().unwrap_or_default(),
        },
        EvalStatus::Error => format!("error: {}", result.reason.as_deref().unwrap_or("no result")),
        EvalStatus::Skipped => result.reason.clone().unwrap_or_default(),
    }
}

/// Per suite a table of cases (status, duration, case, first failure), then exactly one
/// summary line for the whole run.
pub fn render_table(records: &[EvalCaseRecord]) -> String {
    let mut out = String::new();
    for suite in group(records) {
        let counts = Counts::of(suite.cases.iter().copied());
        let _ = writeln!(out, "{}  ({})", suite.suite, counts.summary_line());
        let repeated = suite
            .cases
            .iter()
            .any(|r| r.result.attempt.is_some_and(|a| a > 1));
        let label = |record: &EvalCaseRecord| match (repeated, record.result.attempt) {
            (true, Some(attempt)) => format!("{} #{attempt}", record.result.case),
            _ => record.result.case.clone(),
        };
        let width = suite
            .cases
            .iter()
            .map(|r| label(r).chars().count())
            .max()
            .unwrap_or(0)
            .min(40);
        for record in &suite.cases {
            let duration = if record.result.status == EvalStatus::Skipped {
                "-".to_owned()
            } else {
                human_duration(record.result.duration)
            };
            let line = format!(
                "  {:<7}  {:>7}  {:<width$}  {}",
                record.result.status.as_str(),
                duration,
                clip(&label(record), 40),
                detail(record),
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out.push('\n');
    }
    out.push_str(&Counts::of(records).summary_line());
    out.push('\n');
    out
}

/// Text safe inside an XML attribute or element. Characters XML 1.0 cannot carry at all
/// become U+FFFD; line breaks in attributes are kept as character references.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn seconds(ms: f64) -> String {
    format!("{:.3}", ms.max(0.0) / 1000.0)
}

/// JUnit XML: one `<testsuite>` per suite; failed cases get `<failure>`, errored ones
/// `<error>`, skipped ones `<skipped>`; messages carry expected and actual.
pub fn junit_xml(records: &[EvalCaseRecord]) -> String {
    let all = Counts::of(records);
    let total_ms: f64 = records.iter().map(|r| r.result.duration).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"spyglass eval\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\">",
        all.total(),
        all.failed,
        all.errored,
        all.skipped,
        seconds(total_ms)
    );
    for suite in group(records) {
        let counts = Counts::of(suite.cases.iter().copied());
        let suite_ms: f64 = suite.cases.iter().map(|r| r.result.duration).sum();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\">",
            xml_escape(suite.suite),
            counts.total(),
            counts.failed,
            counts.errored,
            counts.skipped,
            seconds(suite_ms)
        );
        for record in &suite.cases {
            let result = &record.result;
            let name = match result.attempt {
                Some(attempt) if attempt > 1 => format!("{} #{attempt}", result.case),
                _ => result.case.clone(),
            };
            let open = format!(
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
                xml_escape(&name),
                xml_escape(suite.suite),
                seconds(result.duration)
            );
            match result.status {
                EvalStatus::Passed => {
                    let _ = writeln!(out, "{open}/>");
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
                            format!(
                                "{}\nexpected: {}\nactual: {}",
                                a.message.as_deref().unwrap_or(&a.kind),
                                a.expected,
                                a.actual
                            )
                        })
                        .collect();
                    let _ = writeln!(
                        out,
                        "{open}>\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                        xml_escape(&message),
                        xml_escape(kind),
                        xml_escape(&body.join("\n\n"))
                    );
                }
                EvalStatus::Error => {
                    let reason = result.reason.as_deref().unwrap_or("no result");
                    let _ = writeln!(
                        out,
                        "{open}>\n      <error message=\"{}\" type=\"error\">{}</error>\n    </testcase>",
                        xml_escape(reason),
                        xml_escape(reason)
                    );
                }
                EvalStatus::Skipped => {
                    let _ = writeln!(
                        out,
                        "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>",
                        xml_escape(result.reason.as_deref().unwrap_or(""))
                    );
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// The JSON results file: the run detail, pretty-printed.
pub fn json_results(detail: &EvalRunDetail) -> String {
    serde_json::to_string_pretty(detail).unwrap_or_else(|_| "{}".to_owned())
}
