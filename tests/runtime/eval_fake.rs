//! Eval suites with the faithful fake over real HTTP: `strict`, `retries` and `when`
//! in a case's `model`, `prompted` assertions passing and failing with expected and
//! actual, and every broken new key named by file, case and field.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::eval::parse_suite;
use spyglass::eval::suite::{CaseRef, SuiteErrorKind};
use std::time::Duration;

async fn run(api: &Api, suite: Value) -> Value {
    let (status, created) = api.post("/v1/evals/runs", json!({"suites": [suite]})).await;
    assert_eq!(status, 202, "{created}");
    let id = created["run_id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        let (_, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
        if detail["status"] == "completed" {
            return detail;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {id} did not complete");
}

fn lookup_then_answer() -> Value {
    json!({"retries": 2, "fail_on_step": [{"step": 0, "error": "Rate limited"}], "sequence": [
        {"text": "never answered"},
        {"tool_calls": [{"name": "asaas/get_payment", "arguments": {"id": "pay_1"}}]},
        {"when": [{"path": "$.status", "equals": "PAID", "then": {"text": "paid"}}],
         "else": {"text": "not yet"}}
    ]})
}

#[tokio::test]
async fn prompted_assertions_pass_and_fail_with_expected_and_actual() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let case = |id: &str, assert: Value| json!({"id": id, "input": "Is pay_1 paid?", "model": lookup_then_answer(), "assert": assert});
    let suite = json!({
        "suite": "prompts",
        "defaults": {"mocks": {"asaas/get_payment": {"id": "pay_1", "status": "PAID"}}},
        "cases": [
            case("all hold", json!({"equals": "paid", "prompted": [
                {"step": 1, "contains": "Is pay_1 paid?"},
                {"step": 2, "path": "$[1].tool_calls[0].arguments.id", "equals": "pay_1"},
                {"step": 2, "path": "$[2].content", "equals": {"id": "pay_1", "status": "PAID"}},
                {"step": 2, "matches": "^Is pay_1 paid\\?\\nasaas/get_payment"}
            ]})),
            case("contains fails", json!({"prompted": {"step": 1, "contains": "pay_2"}})),
            case("path differs", json!({"prompted": {"step": 2, "path": "$[2].content.status", "equals": "PENDING"}})),
            case("no such call", json!({"prompted": {"step": 7, "contains": "x"}})),
            // The call that threw was prompted too: the fake received the ask.
            case("the failed call was prompted", json!({"prompted": {"step": 0, "contains": "pay_1"}})),
        ]
    });
    let mut suite = suite;
    // A 40 KB output is kept cut in the prompt, and a failure on it says so.
    let big = format!("{}END", "x".repeat(40_000));
    suite["cases"].as_array_mut().unwrap().push(json!({
        "id": "cut prompt", "input": "Is pay_1 paid?", "model": lookup_then_answer(),
        "mocks": {"asaas/get_payment": {"id": "pay_1", "status": "PAID", "note": big}},
        "assert": {"prompted": [{"step": 2, "contains": "xxxx"}, {"step": 2, "contains": "END"}]}
    }));
    let detail = run(&api, suite).await;
    let cases = by_case(&detail);
    let status = |name: &str| cases[name]["status"].as_str().unwrap().to_owned();
    assert_eq!(status("all hold"), "passed", "{:#}", cases["all hold"]);
    assert_eq!(status("the failed call was prompted"), "passed");
    let failure = |name: &str| -> Value {
        assert_eq!(status(name), "failed", "{name}: {:#}", cases[name]);
        cases[name]["assertions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["pass"] == false)
            .cloned()
            .unwrap()
    };
    let contains = failure("contains fails");
    assert_eq!(contains["kind"], "prompted");
    assert_eq!(
        contains["expected"],
        json!({"step": 1, "contains": "pay_2"})
    );
    assert_eq!(contains["actual"], "Is pay_1 paid?");
    assert_eq!(
        contains["message"],
        "prompted: model call 1's prompt lacks \"pay_2\""
    );
    let path = failure("path differs");
    assert_eq!(path["actual"], "PAID");
    assert_eq!(
        path["message"],
        "prompted: $[2].content.status of model call 2's messages is \"PAID\", expected \"PENDING\""
    );
    let cut = failure("cut prompt");
    assert_eq!(
        cut["message"],
        "prompted: model call 2's prompt lacks \"END\" (the recorded prompt was cut: a long text keeps 4 KiB, a prompt 32 KiB)"
    );
    let shown = cut["actual"].as_str().unwrap();
    assert!(shown.len() < 6_000, "{}", shown.len());
    assert!(shown.contains("bytes cut]"), "{shown}");
    let missing = failure("no such call");
    assert_eq!(missing["actual"], Value::Null);
    assert_eq!(
        missing["message"],
        "prompted: the model was called 3 time(s); there is no model call 7"
    );
}

#[tokio::test]
async fn strict_retries_and_branches_decide_a_cases_outcome() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let mut no_retry = lookup_then_answer();
    no_retry["retries"] = json!(0);
    let mut strict_short = lookup_then_answer();
    strict_short["strict"] = json!(true);
    strict_short["sequence"].as_array_mut().unwrap().pop();
    let suite = json!({
        "suite": "fake",
        "defaults": {"mocks": {"asaas/get_payment": {"id": "pay_1", "status": "PENDING"}}},
        "cases": [
            {"id": "retried", "input": "x", "model": lookup_then_answer(), "assert": {"equals": "not yet"}},
            {"id": "no retry", "input": "x", "model": no_retry, "assert": {"equals": "not yet"}},
            {"id": "stray", "input": "x", "model": strict_short, "assert": {"equals": "not yet"}}
        ]
    });
    let detail = run(&api, suite).await;
    let cases = by_case(&detail);
    assert_eq!(
        cases["retried"]["status"], "passed",
        "{:#}",
        cases["retried"]
    );
    assert_eq!(cases["no retry"]["status"], "error");
    assert_eq!(cases["no retry"]["reason"], "Rate limited");
    assert_eq!(cases["stray"]["status"], "error");
    assert_eq!(
        cases["stray"]["reason"],
        "unscripted model call 2: the script has 2 step(s) and is strict"
    );
}

#[test]
fn broken_fake_keys_name_file_case_and_field() {
    let case = |model: &str, assert: &str| {
        format!(
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\nmodel = {model}\n[case.assert]\n{assert}\n"
        )
    };
    let ok_model = "{ sequence = [ { text = \"hi\" } ] }";
    let cases = [
        (
            case("{ retries = 50 }", "contains = \"x\""),
            SuiteErrorKind::Invalid,
            "model.retries",
            "retries is 50; the most is 10",
        ),
        (
            case("{ strict = 1 }", "contains = \"x\""),
            SuiteErrorKind::Invalid,
            "model.strict",
            "expected a boolean",
        ),
        (
            case(
                "{ sequence = [ { when = [ { path = \"status\", equals = 1, then = { text = \"x\" } } ] } ] }",
                "contains = \"x\"",
            ),
            SuiteErrorKind::Invalid,
            "model.sequence[0].when[0].path",
            "must start with `$`",
        ),
        (
            case(
                "{ sequence = [ { when = [ { envelope = \"x\", then = { text = \"x\" }, also = 1 } ] } ] }",
                "contains = \"x\"",
            ),
            SuiteErrorKind::Unknown,
            "model.sequence[0].when[0].also",
            "unknown field `also`",
        ),
        (
            case(
                "{ sequence = [ { else = { text = \"x\" } } ] }",
                "contains = \"x\"",
            ),
            SuiteErrorKind::Invalid,
            "model.sequence[0].else",
            "`else` needs `when`",
        ),
        (
            case(ok_model, "prompted = { contains = \"x\" }"),
            SuiteErrorKind::Missing,
            "assert.prompted.step",
            "missing: the model call",
        ),
        (
            case(ok_model, "prompted = { step = -1, contains = \"x\" }"),
            SuiteErrorKind::Invalid,
            "assert.prompted.step",
            "expected a non-negative integer",
        ),
        (
            case(
                ok_model,
                "prompted = { step = 0, contains = \"x\", matches = \"y\" }",
            ),
            SuiteErrorKind::Invalid,
            "assert.prompted",
            "give one of `contains`, `matches` or `path`",
        ),
        (
            case(
                ok_model,
                "prompted = [ { step = 0, contains = \"x\" }, { step = 1, matches = \"[z-a]\" } ]",
            ),
            SuiteErrorKind::Invalid,
            "assert.prompted[1].matches",
            "invalid regex",
        ),
        (
            case(ok_model, "prompted = { step = 0, path = \"$[0]\" }"),
            SuiteErrorKind::Missing,
            "assert.prompted.equals",
            "missing: the value expected",
        ),
        (
            case(
                ok_model,
                "prompted = { step = 0, path = \"0\", equals = 1 }",
            ),
            SuiteErrorKind::Invalid,
            "assert.prompted.path",
            "must start with `$`",
        ),
        (
            case(
                ok_model,
                "prompted = { step = 0, contains = \"x\", equals = 1 }",
            ),
            SuiteErrorKind::Invalid,
            "assert.prompted.equals",
            "`equals` goes with `path`",
        ),
        (
            case(ok_model, "prompted = { step = 0, contain = \"x\" }"),
            SuiteErrorKind::Unknown,
            "assert.prompted.contain",
            "unknown key",
        ),
    ];
    for (text, kind, field, words) in cases {
        let err = parse_suite("fake.toml", &text).unwrap_err();
        assert_eq!(err.kind, kind, "{text}: {err}");
        assert_eq!(err.case, Some(CaseRef::Id("a".into())), "{err}");
        assert_eq!(err.field.as_deref(), Some(field), "{text}: {err}");
        let shown = err.to_string();
        assert!(
            shown.starts_with(&format!("fake.toml: case \"a\": {field}: ")),
            "{shown}"
        );
        assert!(shown.contains(words), "{shown} lacks {words}");
    }
    // In `[defaults]` too, without a case.
    let err = parse_suite(
        "fake.toml",
        "suite = \"s\"\n[defaults]\nmodel = { retries = 11 }\n[[case]]\nid = \"a\"\ninput = \"x\"\n",
    )
    .unwrap_err();
    assert_eq!(
        err.field.as_deref(),
        Some("defaults.model.retries"),
        "{err}"
    );
}
