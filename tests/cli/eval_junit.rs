//! The eval report's `JUnit` XML read back by the `JUnit` importer: what `spyglass eval
//! --junit` writes is a file `spyglass import` takes, every case and status intact.

use spyglass::eval::report::junit_xml;
use spyglass::import::junit;
use spyglass::protocol::RawJson;
use spyglass::protocol::events::{AgentEvalCompleted, AssertionResult, EvalStatus};
use spyglass::protocol::rest::EvalCaseRecord;

fn record(suite: &str, case: &str, status: EvalStatus, reason: Option<&str>) -> EvalCaseRecord {
    let assertions = if status == EvalStatus::Failed {
        vec![AssertionResult {
            kind: "contains".into(),
            pass: false,
            expected: RawJson::from(serde_json::json!("pay_1")),
            actual: RawJson::from(serde_json::json!("Charged <pay_2> & \"more\"\nline two")),
            message: Some("contains: \"pay_1\" not found".into()),
            ..AssertionResult::default()
        }]
    } else {
        Vec::new()
    };
    EvalCaseRecord {
        session_id: None,
        output: None,
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

#[test]
fn the_junit_report_reads_back_through_the_importer() {
    let records = vec![
        record("payments", "charge small amount", EvalStatus::Passed, None),
        record("payments", "refund <b>&'x'", EvalStatus::Failed, None),
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
        record(
            "billing \"ops\"",
            "invoice\u{1}\nsecond line",
            EvalStatus::Passed,
            None,
        ),
    ];
    let xml = junit_xml(&records);
    junit::sniff(&xml).unwrap();
    let parsed = junit::read(xml.as_bytes()).unwrap();
    assert_eq!(parsed.skipped, 0, "{:?}", parsed.notes);
    let read: Vec<(&str, &str, EvalStatus)> = parsed
        .results
        .iter()
        .map(|r| (r.suite.as_str(), r.case.as_str(), r.status))
        .collect();
    assert_eq!(
        read,
        // The importer names a case `classname::name`; the report's classname is the suite.
        [
            (
                "payments",
                "payments::charge small amount",
                EvalStatus::Passed
            ),
            ("payments", "payments::refund <b>&'x'", EvalStatus::Failed),
            ("payments", "payments::outage", EvalStatus::Error),
            ("payments", "payments::qr", EvalStatus::Skipped),
            // A control character XML cannot carry is U+FFFD; the line break survives.
            (
                "billing \"ops\"",
                "billing \"ops\"::invoice\u{FFFD}\nsecond line",
                EvalStatus::Passed
            ),
        ]
    );
    let failed = &parsed.results[1];
    let reason = failed.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("pay_1"), "{reason}");
    let error = &parsed.results[2];
    assert!(
        error
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("Rate limited")),
        "{:?}",
        error.reason
    );
    assert_eq!(parsed.summary.map(|s| s.total()), Some(5));
}
