//! Results built for tests, shared with the crates that draw them (the `test-support`
//! feature): one place, so a change to a result's shape is made once.

use serde_json::json;
use spyglass_protocol::RawJson;
use spyglass_protocol::events::{AssertionResult, AssertionStatus};

/// `all` that failed at its second child (an `any` whose children failed and
/// errored), its third skipped; one message carries a terminal escape.
pub fn composite() -> AssertionResult {
    let leaf = |kind: &str, pass: bool, message: Option<&str>, status| AssertionResult {
        kind: kind.into(),
        pass,
        expected: RawJson::from(json!("pay_1")),
        actual: RawJson::from(json!("Charged pay_2")),
        message: message.map(str::to_owned),
        status,
        children: Vec::new(),
    };
    let any = AssertionResult {
        kind: "any".into(),
        pass: false,
        expected: RawJson::from(json!("at least one of 2 holds")),
        actual: RawJson::from(json!({"passed": 0, "failed": 1, "errored": 1, "skipped": 0})),
        message: Some("any: none of 2 held".into()),
        status: Some(AssertionStatus::Errored),
        children: vec![
            leaf("equals", false, Some("equals: the output differs"), None),
            leaf(
                "command",
                false,
                Some("command: exited with status 2; stderr: \u{1b}[31mboom"),
                Some(AssertionStatus::Errored),
            ),
        ],
    };
    AssertionResult {
        kind: "all".into(),
        pass: false,
        expected: RawJson::from(json!("all 3 hold")),
        actual: RawJson::from(json!({"passed": 1, "failed": 0, "errored": 1, "skipped": 1})),
        message: Some("all[1]: any: none of 2 held".into()),
        status: Some(AssertionStatus::Errored),
        children: vec![
            leaf("contains", true, None, None),
            any,
            leaf("regex", false, None, Some(AssertionStatus::Skipped)),
        ],
    }
}
