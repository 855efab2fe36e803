//! `JUnit` XML from any runner (pytest, cargo-nextest, promptfoo, Maven Surefire) read as a
//! stream of `<testsuite>`/`<testcase>` elements: failure, error and skipped, time, message.

use super::{Parsed, StatusCounts, bounded, normalise_time};
use crate::protocol::events::{AgentEvalCompleted, AssertionResult, EvalStatus};
use quick_xml::XmlVersion;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use std::io::BufRead;

/// Deepest element nesting read; `JUnit` needs four levels, a hostile file may have
/// millions (the reader keeps no stack, but the check keeps it honest).
pub const MAX_DEPTH: usize = 256;

/// Whether the text (the file's first bytes, from `<`) starts a `JUnit` document: the
/// first element is `<testsuites>` or `<testsuite>`.
pub fn sniff(text: &str) -> Result<(), String> {
    let mut reader = quick_xml::Reader::from_str(text);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e) | Event::Empty(e)) => {
                let name = e.local_name().as_ref().to_owned();
                return if matches!(name.as_str(), "testsuites" | "testsuite") {
                    Ok(())
                } else {
                    Err(format!(
                        "XML whose first element is <{name}>, not <testsuites> or <testsuite>"
                    ))
                };
            }
            Ok(Event::Eof) => return Err("XML with no element in its first 64 KiB".into()),
            Ok(_) => {}
            // The sniff may end inside a long first tag: its name is enough then.
            Err(_) if text.contains("<testsuite") => return Ok(()),
            Err(err) => return Err(format!("text starting with `<` that is not XML: {err}")),
        }
    }
}

/// A testcase being read.
#[derive(Default)]
struct Case {
    name: Option<String>,
    classname: String,
    time: f64,
    status: EvalStatus,
    /// The outcome element (failure/error/skipped) it is inside, collecting its text.
    outcome: Option<Outcome>,
    assertions: Vec<AssertionResult>,
    reason: Option<String>,
}

/// A `<testsuite>` being read: its name and how often each case name came up in it, so a
/// name given twice is two cases (`name`, `name #2`), as the runner ran them.
struct Suite {
    name: String,
    seen: std::collections::HashMap<String, u32>,
}

struct Outcome {
    kind: String,
    message: String,
    text: String,
}

fn attr(e: &BytesStart<'_>, key: &str) -> Option<String> {
    e.attributes().flatten().find_map(|a| {
        (a.key.local_name().as_ref() == key).then(|| {
            a.normalized_value(XmlVersion::Implicit1_0).map_or_else(
                |_| a.value.clone().into_owned(),
                std::borrow::Cow::into_owned,
            )
        })
    })
}

fn count(e: &BytesStart<'_>, key: &str) -> u64 {
    attr(e, key)
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|n| n.is_finite() && *n >= 0.0)
        .map_or(0, |n| n as u64)
}

fn local(e: &BytesStart<'_>) -> String {
    e.local_name().as_ref().to_owned()
}

/// Reads the whole document; a document that breaks off or does not parse is `Err` with
/// where, a testcase without a name is skipped and counted.
pub fn read(input: impl BufRead) -> Result<Parsed, String> {
    let mut reader = quick_xml::Reader::from_reader(input);
    reader.config_mut().check_end_names = true;
    let mut parsed = Parsed::default();
    let mut summary = StatusCounts::default();
    let mut suites_seen = 0usize;
    let mut stack: Vec<String> = Vec::new();
    let mut suite_names: Vec<Suite> = Vec::new();
    let mut case: Option<Case> = None;
    let mut buf = Vec::new();
    loop {
        let event = reader.read_event_into(&mut buf).map_err(|err| {
            format!(
                "XML does not parse at byte {}: {err}",
                reader.error_position()
            )
        })?;
        match event {
            Event::Start(e) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(format!("elements nest deeper than {MAX_DEPTH}"));
                }
                let name = local(&e);
                open(
                    &name,
                    &e,
                    &mut case,
                    &mut suite_names,
                    &mut parsed,
                    &mut summary,
                    &mut suites_seen,
                );
                stack.push(name);
            }
            Event::Empty(e) => {
                let name = local(&e);
                open(
                    &name,
                    &e,
                    &mut case,
                    &mut suite_names,
                    &mut parsed,
                    &mut summary,
                    &mut suites_seen,
                );
                close(&name, &mut case, &mut suite_names, &mut parsed);
            }
            Event::End(_) => {
                if let Some(name) = stack.pop() {
                    close(&name, &mut case, &mut suite_names, &mut parsed);
                }
            }
            Event::Text(t) => append(&mut case, &t.xml10_content()),
            Event::CData(t) => append(&mut case, &t),
            Event::GeneralRef(r) => {
                let text = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => resolve_predefined_entity(&r.xml10_content())
                        .unwrap_or_default()
                        .to_owned(),
                };
                append(&mut case, &text);
            }
            Event::Eof => {
                if let Some(open) = stack.last() {
                    return Err(format!("the file ends inside <{open}> (truncated?)"));
                }
                break;
            }
            _ => {}
        }
        buf.clear();
    }
    if suites_seen == 0 {
        return Err("no <testsuite> element".into());
    }
    parsed.summary = Some(summary);
    Ok(parsed)
}

fn open(
    name: &str,
    e: &BytesStart<'_>,
    case: &mut Option<Case>,
    suite_names: &mut Vec<Suite>,
    parsed: &mut Parsed,
    summary: &mut StatusCounts,
    suites_seen: &mut usize,
) {
    match name {
        "testsuite" => {
            *suites_seen += 1;
            suite_names.push(Suite {
                name: attr(e, "name").unwrap_or_else(|| "junit".into()),
                seen: std::collections::HashMap::new(),
            });
            if parsed.started.is_none() {
                parsed.started = attr(e, "timestamp").and_then(|t| normalise_time(&t));
            }
            // The suite's own counts are the runner's summary; `tests` includes all.
            let tests = count(e, "tests");
            let failed = count(e, "failures");
            let errored = count(e, "errors");
            let skipped = count(e, "skipped").max(count(e, "disabled"));
            summary.failed += failed;
            summary.errored += errored;
            summary.skipped += skipped;
            summary.passed += tests.saturating_sub(failed + errored + skipped);
        }
        "testcase" => {
            *case = Some(Case {
                name: attr(e, "name"),
                classname: attr(e, "classname").unwrap_or_default(),
                time: attr(e, "time")
                    .and_then(|t| t.trim().parse::<f64>().ok())
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .unwrap_or(0.0),
                ..Case::default()
            });
        }
        "failure" | "error" | "skipped" => {
            let Some(case) = case else { return };
            let status = match name {
                "failure" => EvalStatus::Failed,
                "error" => EvalStatus::Error,
                _ => EvalStatus::Skipped,
            };
            // The worst outcome wins: an error after a failure (pytest's teardown) is
            // an error; a skip never hides either.
            let rank = |s: EvalStatus| match s {
                EvalStatus::Passed => 0,
                EvalStatus::Skipped => 1,
                EvalStatus::Failed => 2,
                EvalStatus::Error => 3,
            };
            if rank(status) > rank(case.status) {
                case.status = status;
            }
            let message = attr(e, "message");
            if case.reason.is_none() {
                case.reason = message
                    .as_deref()
                    .and_then(|m| m.lines().find(|l| !l.trim().is_empty()))
                    .map(|l| bounded(l.trim()));
            }
            let kind = attr(e, "type").unwrap_or_else(|| name.to_owned());
            case.outcome = Some(Outcome {
                kind,
                message: message.unwrap_or_default(),
                text: String::new(),
            });
        }
        _ => {}
    }
}

fn append(case: &mut Option<Case>, text: &str) {
    if let Some(Case {
        outcome: Some(outcome),
        ..
    }) = case
        && outcome.text.len() < super::MAX_TEXT_BYTES * 2
    {
        outcome.text.push_str(text);
    }
}

fn close(name: &str, case: &mut Option<Case>, suite_names: &mut Vec<Suite>, parsed: &mut Parsed) {
    match name {
        "testsuite" => {
            suite_names.pop();
        }
        "failure" | "error" | "skipped" => {
            if let Some(case) = case
                && let Some(outcome) = case.outcome.take()
            {
                // The element's text (a traceback, a diff) says more than its message.
                let text = if outcome.text.trim().is_empty() {
                    outcome.message.trim()
                } else {
                    outcome.text.trim()
                };
                // jest-junit writes no `message`: the text's first line is the reason.
                if case.reason.is_none() {
                    case.reason = text
                        .lines()
                        .find(|l| !l.trim().is_empty())
                        .map(|l| bounded(l.trim()));
                }
                case.assertions.push(AssertionResult {
                    kind: outcome.kind,
                    pass: false,
                    message: Some(bounded(text)).filter(|m| !m.is_empty()),
                    ..AssertionResult::default()
                });
            }
        }
        "testcase" => {
            let Some(case) = case.take() else { return };
            let Some(name) = case.name.filter(|n| !n.trim().is_empty()) else {
                parsed.skip("a <testcase> without a name");
                return;
            };
            let mut case_name = if case.classname.is_empty() {
                name
            } else {
                format!("{}::{name}", case.classname)
            };
            let suite = match suite_names.last_mut() {
                Some(suite) => {
                    let times = suite.seen.entry(case_name.clone()).or_insert(0);
                    *times += 1;
                    if *times > 1 {
                        case_name = format!("{case_name} #{times}");
                    }
                    suite.name.clone()
                }
                None => "junit".into(),
            };
            parsed.push(AgentEvalCompleted {
                suite,
                case: case_name,
                status: case.status,
                pass: case.status == EvalStatus::Passed,
                reason: case.reason,
                duration: case.time * 1000.0,
                assertions: case.assertions,
                ..AgentEvalCompleted::default()
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Parsed, String> {
        read(text.as_bytes())
    }

    #[test]
    fn pytest_fixture_counts_match_its_own_summary() {
        let text = include_str!("../../tests/fixtures/imports/pytest.xml");
        let parsed = parse(text).expect("parses");
        let counts = StatusCounts::of(&parsed.results);
        assert_eq!(Some(counts), parsed.summary);
        assert_eq!(
            counts,
            StatusCounts {
                passed: 2,
                failed: 2,
                errored: 1,
                skipped: 1
            }
        );
        let refund = parsed
            .results
            .iter()
            .find(|r| r.case == "test_sample::test_refund_amount")
            .expect("case");
        assert_eq!(refund.suite, "pytest");
        assert_eq!(
            refund.reason.as_deref(),
            Some("AssertionError: refund should be twice the charge")
        );
        assert!(
            refund.assertions[0]
                .message
                .as_deref()
                .is_some_and(|m| m.contains("assert 49.90 * 2 == 99.0"))
        );
        assert_eq!(
            parsed.started.as_deref(),
            Some("2026-11-23T20:21:10.452084Z")
        );
        let skipped = parsed
            .results
            .iter()
            .find(|r| r.status == EvalStatus::Skipped)
            .expect("skip");
        assert_eq!(skipped.reason.as_deref(), Some("needs a live gateway"));
    }

    #[test]
    fn jest_junit_repeated_titles_and_failure_text_read_as_jest_meant() {
        let parsed =
            parse(include_str!("../../tests/fixtures/imports/jest/jest.xml")).expect("parses");
        let names: Vec<(&str, EvalStatus)> = parsed
            .results
            .iter()
            .map(|r| (r.case.as_str(), r.status))
            .collect();
        let case = "checkout charges the card::checkout charges the card";
        assert_eq!(
            names,
            [
                (case, EvalStatus::Passed),
                (&*format!("{case} #2"), EvalStatus::Failed),
                (
                    "checkout refunds later::checkout refunds later",
                    EvalStatus::Skipped
                ),
            ]
        );
        assert_eq!(Some(StatusCounts::of(&parsed.results)), parsed.summary);
        let failed = &parsed.results[1];
        // No `message` attribute: the text's first line is the reason, the whole text
        // (line breaks kept) the assertion's message.
        assert_eq!(
            failed.reason.as_deref(),
            Some("Error: expect(received).toBe(expected) // Object.is equality")
        );
        let message = failed.assertions[0].message.as_deref().unwrap_or_default();
        assert!(
            message.starts_with(
                "Error: expect(received).toBe(expected) // Object.is equality\n\nExpected: \"paid\"\nReceived: \"pending\"\n    at "
            ),
            "{message}"
        );
        assert_eq!(parsed.results[2].reason, None);
        assert_eq!(
            parsed.started.as_deref(),
            Some("2026-11-22T10:00:00.000000Z")
        );
    }

    #[test]
    fn nextest_style_error_and_failure_with_cdata() {
        let text = r#"<?xml version="1.0"?>
<testsuites name="nextest-run" tests="3" failures="1" errors="1">
  <testsuite name="spyglass::lib" tests="3" failures="1" errors="1" timestamp="2026-01-02T03:04:05.000+01:00">
    <testcase name="a" classname="m" time="0.5"/>
    <testcase name="b" classname="m" time="1.25"><failure type="test failure" message="thread panicked"><![CDATA[left: 1
right: 2]]></failure></testcase>
    <testcase name="c"><error message="SIGSEGV &amp; more"/></testcase>
  </testsuite>
</testsuites>"#;
        let parsed = parse(text).expect("parses");
        assert_eq!(parsed.results.len(), 3);
        assert_eq!(parsed.results[0].duration, 500.0);
        assert_eq!(parsed.results[1].status, EvalStatus::Failed);
        assert_eq!(parsed.results[1].reason.as_deref(), Some("thread panicked"));
        assert_eq!(
            parsed.results[1].assertions[0].message.as_deref(),
            Some("left: 1\nright: 2")
        );
        assert_eq!(parsed.results[2].status, EvalStatus::Error);
        assert_eq!(parsed.results[2].case, "c");
        assert_eq!(parsed.results[2].reason.as_deref(), Some("SIGSEGV & more"));
        assert_eq!(
            parsed.started.as_deref(),
            Some("2026-01-02T02:04:05.000000Z")
        );
    }

    #[test]
    fn truncated_xml_is_an_error_naming_the_open_element() {
        let text = include_str!("../../tests/fixtures/imports/pytest.xml");
        let err = parse(&text[..text.len() / 2]).expect_err("truncated");
        assert!(
            err.contains("truncated") || err.contains("does not parse"),
            "{err}"
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_followed() {
        let text = format!("<testsuites>{}", "<x>".repeat(10_000));
        let err = parse(&text).expect_err("deep");
        assert!(err.contains("deeper than 256"), "{err}");
    }

    #[test]
    fn nameless_testcase_is_skipped_and_counted() {
        let text = r#"<testsuite name="s" tests="2"><testcase name="ok"/><testcase classname="x"/></testsuite>"#;
        let parsed = parse(text).expect("parses");
        assert_eq!(parsed.results.len(), 1);
        assert_eq!(parsed.skipped, 1);
        assert_eq!(parsed.notes, ["a <testcase> without a name"]);
    }

    #[test]
    fn sniff_tells_junit_from_other_xml() {
        assert!(sniff("<?xml version=\"1.0\"?><testsuites>").is_ok());
        assert!(sniff("<testsuite name=\"a\"").is_ok() || sniff("<testsuite name=\"a\">").is_ok());
        let err = sniff("<html><body>").expect_err("html");
        assert!(err.contains("<html>"), "{err}");
        let long = format!(
            "<?xml version=\"1.0\"?><testsuite name=\"{}",
            "x".repeat(70_000)
        );
        assert!(sniff(&long[..65_536]).is_ok());
    }
}
