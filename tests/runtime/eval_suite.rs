//! Eval suites from files to printout: the shipped example parses and, run through a
//! stand-in for the scripted loop, gives the outcomes its comments promise; broken files
//! on disk are rejected naming file, case and field; the `JUnit` and JSON writers agree
//! with the table.

use serde_json::{Value, json};
use spyglass::eval::assert::{CaseRun, evaluate};
use spyglass::eval::report::{Counts, junit_xml, render_table};
use spyglass::eval::suite::{Case, CaseRef, SuiteErrorKind, load_suite};
use spyglass::eval::{EvalHistory, HistorySettings};
use spyglass::protocol::events::{EvalStatus, Tokens};
use spyglass::protocol::rest::{EvalCaseRecord, ToolCallRecord};
use std::path::Path;

fn example() -> spyglass::eval::Suite {
    load_suite(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/evals/payments.toml")).unwrap()
}

/// A stand-in for the runtime's scripted loop, enough to judge the example: each step's
/// tool calls hit the case's mocks (a missing mock is `tool_not_mocked`, a consumed
/// stateful one `mocks_exhausted`), a `fail_on_step` ends the case without a result.
fn simulate(case: &Case, attempt: u32) -> CaseRun {
    let Some(model) = case.model_for_attempt(attempt) else {
        return CaseRun {
            output: Some("fake response".into()),
            ..CaseRun::default()
        };
    };
    let mocks = case.mocks.clone().unwrap_or(Value::Null);
    let mut consumed: std::collections::HashMap<String, usize> =
        std::collections::HashMap::default();
    let mut calls = Vec::new();
    for (step, script) in model.sequence.iter().enumerate() {
        if let Some(fail) = model.fail_on_step.iter().find(|f| f.step as usize == step) {
            return CaseRun {
                error: Some(format!("model failed on step {step}: {}", fail.error)),
                ..CaseRun::default()
            };
        }
        for call in &script.tool_calls {
            let (output, code) = match &mocks[&call.name] {
                Value::Null => (Value::Null, Some("tool_not_mocked")),
                Value::Array(entries) => {
                    let at = consumed.entry(call.name.clone()).or_default();
                    *at += 1;
                    match entries.get(*at - 1) {
                        Some(entry) => (entry.clone(), None),
                        None => (Value::Null, Some("mocks_exhausted")),
                    }
                }
                object => (object.clone(), None),
            };
            calls.push(ToolCallRecord {
                id: format!("call_{}", calls.len()),
                tool_name: call.name.clone(),
                server_id: call.name.split('/').next().unwrap_or("").into(),
                status: if code.is_some() { "error" } else { "success" }.into(),
                duration_ms: 1,
                input: call.arguments.clone(),
                output,
                error_code: code.map(str::to_owned),
            });
        }
        if let Some(text) = &script.text {
            return CaseRun {
                output: Some(text.clone()),
                tool_calls: calls,
                tokens: Tokens {
                    prompt: 20,
                    completion: 10,
                    total: 30,
                },
                error: None,
                duration_ms: 3.0,
                ..CaseRun::default()
            };
        }
    }
    if let Some(fail) = model.fail_on_step.first() {
        return CaseRun {
            error: Some(format!(
                "model failed on step {}: {}",
                fail.step, fail.error
            )),
            ..CaseRun::default()
        };
    }
    CaseRun {
        output: model.default_text.clone(),
        tool_calls: calls,
        ..CaseRun::default()
    }
}

fn run_suite(suite: &spyglass::eval::Suite, repeat: u32) -> Vec<EvalCaseRecord> {
    let mut records = Vec::new();
    for case in &suite.cases {
        for attempt in 1..=repeat {
            let result = evaluate(case, &simulate(case, attempt));
            let mut event = result.to_event(&suite.name, &case.id);
            event.run_id = Some("run_1".into());
            event.attempt = Some(attempt);
            records.push(EvalCaseRecord {
                output: None,
                session_id: Some(format!("ses_{}", records.len())),
                result: event,
                ..EvalCaseRecord::default()
            });
        }
    }
    records
}

fn status_of(records: &[EvalCaseRecord], case: &str) -> Vec<EvalStatus> {
    records
        .iter()
        .filter(|r| r.result.case == case)
        .map(|r| r.result.status)
        .collect()
}

#[test]
fn example_suite_parses_with_every_kind_of_case() {
    let suite = example();
    assert_eq!(suite.name, "payments");
    let ids: Vec<&str> = suite.cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "charge small amount",
            "status as json",
            "two charges in a row",
            "misspelled tool is reported",
            "refund a payment",
            "provider outage",
            "flaky confirmation",
            "pix qr code"
        ]
    );
    assert!(suite.cases.iter().all(|c| c.servers == ["asaas"]));
    let flaky = &suite.cases[6];
    assert_eq!(flaky.models.len(), 2);
    assert_ne!(flaky.model_for_attempt(1), flaky.model_for_attempt(2));
    assert_eq!(flaky.model_for_attempt(1), flaky.model_for_attempt(3));
    assert!(suite.cases[7].skip.is_some());
    // The stateful override replaces the default for that tool only.
    let two = &suite.cases[2];
    let mocks = two.mocks.as_ref().unwrap();
    assert!(mocks["asaas/create_payment"].is_array());
    assert_eq!(mocks["asaas/get_payment"]["status"], "RECEIVED");
}

#[test]
fn example_suite_gives_the_promised_outcomes() {
    let suite = example();
    let records = run_suite(&suite, 1);
    let counts = Counts::of(&records);
    assert_eq!(
        counts.summary_line(),
        "5 passed, 1 failed, 1 errored, 1 skipped"
    );
    assert!(!counts.success());
    assert_eq!(
        status_of(&records, "refund a payment"),
        [EvalStatus::Failed]
    );
    assert_eq!(status_of(&records, "provider outage"), [EvalStatus::Error]);
    let refund = records
        .iter()
        .find(|r| r.result.case == "refund a payment")
        .unwrap();
    let failing = refund.result.assertions.iter().find(|a| !a.pass).unwrap();
    assert_eq!(failing.kind, "no_envelope");
    assert_eq!(failing.actual.to_value(), json!(["tool_not_mocked"]));
    let table = render_table(&records);
    assert!(
        table.ends_with("5 passed, 1 failed, 1 errored, 1 skipped\n"),
        "{table}"
    );
    assert!(
        table.contains("no_envelope: expected \"no envelope\", actual [\"tool_not_mocked\"]"),
        "{table}"
    );
}

#[test]
fn repeating_the_example_shows_the_flaky_case() {
    let suite = example();
    let records = run_suite(&suite, 2);
    assert_eq!(
        status_of(&records, "flaky confirmation"),
        [EvalStatus::Passed, EvalStatus::Failed]
    );
    let xml = junit_xml(&records);
    let open = &xml[xml.find("<testsuite ").unwrap()..];
    let open = &open[..open.find('>').unwrap()];
    assert!(
        open.contains("tests=\"16\" failures=\"3\" errors=\"2\" skipped=\"2\""),
        "{open}"
    );
    let mut history = EvalHistory::new(HistorySettings::default());
    for record in &records {
        history.record(0, record.session_id.as_deref(), &record.result);
    }
    let summary = history.summary();
    let flaky: Vec<&str> = summary.suites[0]
        .cases
        .iter()
        .filter(|c| c.flaky)
        .map(|c| c.case.as_str())
        .collect();
    assert_eq!(flaky, ["flaky confirmation"]);
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn json_suite_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        &dir,
        "support.json",
        r#"{"suite": "support", "defaults": {"model": {"default_text": "{\"ok\": true}"}},
            "case": [{"id": "a", "input": "hi", "assert": {"json_path": {"path": "$.ok", "equals": true}}}]}"#,
    );
    let suite = load_suite(&path).unwrap();
    assert_eq!(suite.name, "support");
    let records = run_suite(&suite, 1);
    assert_eq!(status_of(&records, "a"), [EvalStatus::Passed]);
}

#[test]
fn broken_files_name_file_case_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "not_toml.toml",
            "suite = \"s\"\n[[case]\n",
            SuiteErrorKind::Syntax,
            None,
            None,
        ),
        (
            "no_suite.toml",
            "[[case]]\nid = \"a\"\ninput = \"x\"\n",
            SuiteErrorKind::Missing,
            None,
            Some("suite"),
        ),
        (
            "bad_type.toml",
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\ntimeout_ms = \"soon\"\n",
            SuiteErrorKind::Invalid,
            Some(CaseRef::Id("a".into())),
            Some("timeout_ms"),
        ),
        (
            "unknown_assertion.toml",
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\nresembles = \"x\"\n",
            SuiteErrorKind::Unknown,
            Some(CaseRef::Id("a".into())),
            Some("assert.resembles"),
        ),
        (
            "bad_regex.toml",
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\nregex = [\"ok\", \"[z-a]\"]\n",
            SuiteErrorKind::Invalid,
            Some(CaseRef::Id("a".into())),
            Some("assert.regex"),
        ),
        (
            "duplicate.toml",
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[[case]]\nid = \"a\"\ninput = \"y\"\n",
            SuiteErrorKind::Duplicate,
            Some(CaseRef::Id("a".into())),
            Some("id"),
        ),
        (
            "no_id.json",
            r#"{"suite": "s", "case": [{"id": "a", "input": "x"}, {"input": "y"}]}"#,
            SuiteErrorKind::Missing,
            Some(CaseRef::Index(2)),
            Some("id"),
        ),
    ];
    for (name, text, kind, case, field) in cases {
        let path = write(&dir, name, text);
        let err = load_suite(&path).unwrap_err();
        assert_eq!(err.kind, kind, "{name}: {err}");
        assert_eq!(err.case, case, "{name}: {err}");
        assert_eq!(err.field.as_deref(), field, "{name}: {err}");
        let shown = err.to_string();
        assert!(shown.starts_with(&path.display().to_string()), "{shown}");
        if let Some(field) = field {
            assert!(shown.contains(&format!(": {field}: ")), "{shown}");
        }
    }
}
