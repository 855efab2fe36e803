//! Tests of judging assertions against a case's run: each kind's verdict, its expected
//! and actual values, and the messages a failing kind reports.

use super::*;
use crate::suite::parse_suite;

fn case(assert: &str) -> Case {
    let text =
        format!("suite = \"s\"\n[[case]]\nid = \"c\"\ninput = \"x\"\n[case.assert]\n{assert}");
    parse_suite("s.toml", &text).unwrap().cases.remove(0)
}

fn call(name: &str, code: Option<&str>) -> ToolCallRecord {
    ToolCallRecord {
        id: "call_1".into(),
        tool_name: name.into(),
        server_id: "asaas".into(),
        status: if code.is_some() { "error" } else { "success" }.into(),
        duration_ms: 1,
        input: json!({}),
        output: json!({}),
        error_code: code.map(str::to_owned),
    }
}

fn run(output: &str, calls: Vec<ToolCallRecord>, total: u64) -> CaseRun {
    CaseRun {
        output: Some(output.to_owned()),
        tool_calls: calls,
        tokens: Tokens {
            prompt: total / 2,
            completion: total - total / 2,
            total,
        },
        error: None,
        duration_ms: 12.0,
        prompts: Vec::new(),
        steps: Vec::new(),
        cost: Some(0.0),
        cost_missing: None,
    }
}

/// Judges and returns (status, [(pass, expected, actual)]).
fn judge(assert: &str, run: &CaseRun) -> (EvalStatus, Vec<(bool, Value, Value)>) {
    let result = evaluate(&case(assert), run);
    let rows = result
        .assertions
        .iter()
        .map(|a| (a.pass, a.expected.to_value(), a.actual.to_value()))
        .collect();
    (result.status, rows)
}

fn call_with(name: &str, input: Value) -> ToolCallRecord {
    ToolCallRecord {
        input,
        ..call(name, None)
    }
}

#[test]
fn operation_called_with_args_counts_only_the_calls_whose_arguments_hold() {
    let calls = vec![
        call_with(
            "asaas/create_payment",
            json!({"value": 5, "customer": {"id": "cus_1", "name": "Ana"}}),
        ),
        call_with(
            "asaas/create_payment",
            json!({"value": 7, "customer": {"id": "cus_2"}}),
        ),
    ];
    let r = run("done", calls, 10);
    let (status, rows) = judge(
        "operation_called = [ { name = \"asaas/create_payment\", args = { value = 5 } },\n\
         { name = \"create_payment\", args = { \"$.customer.id\" = \"cus_2\" }, times = 1 },\n\
         { name = \"asaas/create_payment\", args = { customer = { id = \"cus_1\" } } } ]",
        &r,
    );
    assert_eq!(status, EvalStatus::Passed, "{rows:?}");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].1["args"]["value"], 5);
    // The sent arguments are the actual, so a failure shows what was sent.
    let (status, rows) = judge(
        "operation_called = { name = \"asaas/create_payment\", args = { value = 9 } }",
        &r,
    );
    assert_eq!(status, EvalStatus::Failed);
    assert!(!rows[0].0);
    assert_eq!(rows[0].2["calls with their arguments"][1]["value"], 7);
    let result = evaluate(
        &case("operation_called = { name = \"asaas/create_payment\", args = { value = 9 } }"),
        &r,
    );
    assert_eq!(
        result.reason.as_deref(),
        Some("operation_called: no call of asaas/create_payment had those arguments (2 call(s))")
    );
    // A subset, not equality: a number matches by value, a missing key does not.
    let (status, _) = judge(
        "operation_called = { name = \"create_payment\", args = { value = 5.0, customer = { id = \"cus_1\" } }, times = 1 }",
        &r,
    );
    assert_eq!(status, EvalStatus::Passed);
    let (status, _) = judge(
        "operation_called = { name = \"create_payment\", args = { currency = \"BRL\" } }",
        &r,
    );
    assert_eq!(status, EvalStatus::Failed);
}

#[test]
fn sequence_and_not_called_read_the_calls_in_order() {
    let calls = vec![
        call("asaas/create_customer", None),
        call("asaas/get_balance", None),
        call("asaas/create_payment", None),
    ];
    let r = run("done", calls, 10);
    let (status, rows) = judge(
        "sequence = [\"asaas/create_customer\", \"create_payment\"]",
        &r,
    );
    assert_eq!(status, EvalStatus::Passed);
    assert_eq!(
        rows[0].2,
        json!([
            "asaas/create_customer",
            "asaas/get_balance",
            "asaas/create_payment"
        ])
    );
    let (status, _) = judge(
        "sequence = { tools = [\"asaas/create_customer\", \"asaas/create_payment\"], gaps = false }",
        &r,
    );
    assert_eq!(status, EvalStatus::Failed, "a call sits between them");
    let (status, _) = judge(
        "sequence = { tools = [\"asaas/get_balance\", \"asaas/create_payment\"], gaps = false }",
        &r,
    );
    assert_eq!(status, EvalStatus::Passed);
    let (status, _) = judge(
        "sequence = [\"asaas/create_payment\", \"asaas/create_customer\"]",
        &r,
    );
    assert_eq!(status, EvalStatus::Failed, "the wrong order");
    let (status, _) = judge("not_called = \"asaas/refund\"", &r);
    assert_eq!(status, EvalStatus::Passed);
    let result = evaluate(&case("not_called = [\"refund\", \"get_balance\"]"), &r);
    assert_eq!(result.status, EvalStatus::Failed);
    assert_eq!(
        result.reason.as_deref(),
        Some("not_called: get_balance was called 1 time(s)")
    );
}

#[test]
fn json_schema_on_the_output_and_on_a_tools_arguments() {
    let schema = "{ type = \"object\", required = [\"id\", \"status\"], properties = { status = { enum = [\"PENDING\", \"PAID\"] } } }";
    let good = run(r#"{"id": "pay_1", "status": "PENDING"}"#, vec![], 10);
    let (status, _) = judge(&format!("json_schema = {{ schema = {schema} }}"), &good);
    assert_eq!(status, EvalStatus::Passed);
    let bad = run(r#"{"id": "pay_1", "status": "LOST"}"#, vec![], 10);
    let result = evaluate(
        &case(&format!("json_schema = {{ schema = {schema} }}")),
        &bad,
    );
    assert_eq!(result.status, EvalStatus::Failed);
    let reason = result.reason.unwrap_or_default();
    assert!(reason.starts_with("json_schema: /status:"), "{reason}");
    let text = run("Charged!", vec![], 10);
    let result = evaluate(
        &case(&format!("json_schema = {{ schema = {schema} }}")),
        &text,
    );
    assert!(
        result
            .reason
            .unwrap_or_default()
            .contains("the output is not JSON"),
        "not JSON fails, never passes"
    );
    let calls = vec![
        call_with("asaas/create_payment", json!({"value": 5})),
        call_with("asaas/create_payment", json!({"value": "five"})),
    ];
    let args = "json_schema = { tool = \"asaas/create_payment\", schema = { type = \"object\", properties = { value = { type = \"number\" } } } }";
    let result = evaluate(&case(args), &run("ok", calls, 10));
    assert_eq!(result.status, EvalStatus::Failed);
    assert!(
        result
            .reason
            .unwrap_or_default()
            .starts_with("json_schema: call 2: /value:"),
    );
    let result = evaluate(&case(args), &run("ok", vec![], 10));
    assert_eq!(
        result.reason.as_deref(),
        Some("json_schema: asaas/create_payment was not called")
    );
}

#[test]
fn a_call_held_for_approval_is_no_pass() {
    let calls = vec![
        call("asaas/create_payment", None),
        call("asaas/create_payment", Some("approval_required")),
    ];
    let result = evaluate(
        &case("contains = \"pay_1\""),
        &run("Charged pay_1", calls, 10),
    );
    assert_eq!(result.status, EvalStatus::Error);
    assert_eq!(result.reason.as_deref(), Some(HELD));
    assert!(!result.to_event("s", "c").pass);
    // Other envelopes are the agent's to handle: judged as usual.
    let calls = vec![call("asaas/refund", Some("policy_denied"))];
    let result = evaluate(&case("contains = \"pay_1\""), &run("pay_1", calls, 10));
    assert_eq!(result.status, EvalStatus::Passed);
}

#[test]
fn contains_passes_and_fails_per_item() {
    let r = run("Charged: pay_1", vec![], 10);
    let (status, rows) = judge("contains = [\"pay_1\", \"pay_2\"]", &r);
    assert_eq!(status, EvalStatus::Failed);
    assert_eq!(
        rows,
        vec![
            (true, json!("pay_1"), json!("Charged: pay_1")),
            (false, json!("pay_2"), json!("Charged: pay_1")),
        ]
    );
    let result = evaluate(&case("contains = \"pay_2\""), &r);
    assert_eq!(
        result.reason.as_deref(),
        Some("contains: \"pay_2\" not found")
    );
    assert_eq!(judge("contains = \"pay_1\"", &r).0, EvalStatus::Passed);
}

#[test]
fn equals_is_exact() {
    let r = run("Charged: pay_1", vec![], 10);
    assert_eq!(
        judge("equals = \"Charged: pay_1\"", &r),
        (
            EvalStatus::Passed,
            vec![(true, json!("Charged: pay_1"), json!("Charged: pay_1"))]
        )
    );
    assert_eq!(
        judge("equals = \"Charged: pay_1 \"", &r),
        (
            EvalStatus::Failed,
            vec![(false, json!("Charged: pay_1 "), json!("Charged: pay_1"))]
        )
    );
}

#[test]
fn regex_matches_the_output() {
    let r = run("Charged: pay_17", vec![], 10);
    assert_eq!(
        judge(r"regex = '^Charged: pay_\d+$'", &r),
        (
            EvalStatus::Passed,
            vec![(true, json!(r"^Charged: pay_\d+$"), json!("Charged: pay_17"))]
        )
    );
    assert_eq!(
        judge(r"regex = '^Refunded'", &r),
        (
            EvalStatus::Failed,
            vec![(false, json!("^Refunded"), json!("Charged: pay_17"))]
        )
    );
}

#[test]
fn operation_called_counts_calls() {
    let r = run(
        "ok",
        vec![
            call("create_payment", None),
            call("asaas/create_payment", None),
            call("get_payment", None),
        ],
        10,
    );
    let counts = json!({"asaas/create_payment": 2, "asaas/get_payment": 1});
    let (status, rows) = judge(
        "operation_called = [\"asaas/create_payment\", \"get_payment\", { name = \"asaas/create_payment\", times = 2 }]",
        &r,
    );
    assert_eq!(status, EvalStatus::Passed);
    assert_eq!(
        rows[0],
        (true, json!("asaas/create_payment"), counts.clone())
    );
    assert_eq!(
        rows[2],
        (
            true,
            json!({"name": "asaas/create_payment", "times": 2}),
            counts.clone()
        )
    );
    let (status, rows) = judge(
        "operation_called = [\"asaas/refund_payment\", { name = \"asaas/get_payment\", times = 2 }]",
        &r,
    );
    assert_eq!(status, EvalStatus::Failed);
    assert_eq!(
        rows[0],
        (false, json!("asaas/refund_payment"), counts.clone())
    );
    assert_eq!(
        rows[1],
        (
            false,
            json!({"name": "asaas/get_payment", "times": 2}),
            counts
        )
    );
    let result = evaluate(
        &case("operation_called = { name = \"asaas/get_payment\", times = 2 }"),
        &r,
    );
    assert_eq!(
        result.reason.as_deref(),
        Some("operation_called: asaas/get_payment called 1 time(s), expected 2")
    );
}

#[test]
fn envelope_and_no_envelope_look_at_codes() {
    let r = run(
        "ok",
        vec![
            call("a", Some("tool_not_mocked")),
            call("b", None),
            call("c", Some("mocks_exhausted")),
        ],
        10,
    );
    let seen = json!(["tool_not_mocked", "mocks_exhausted"]);
    assert_eq!(
        judge("envelope = \"tool_not_mocked\"", &r),
        (
            EvalStatus::Passed,
            vec![(true, json!("tool_not_mocked"), seen.clone())]
        )
    );
    assert_eq!(
        judge("envelope = \"policy_denied\"", &r),
        (
            EvalStatus::Failed,
            vec![(false, json!("policy_denied"), seen.clone())]
        )
    );
    assert_eq!(
        judge("no_envelope = true", &r),
        (
            EvalStatus::Failed,
            vec![(false, json!("no envelope"), seen.clone())]
        )
    );
    assert_eq!(
        judge("no_envelope = [\"policy_denied\"]", &r),
        (
            EvalStatus::Passed,
            vec![(true, json!(["policy_denied"]), seen.clone())]
        )
    );
    assert_eq!(
        judge("no_envelope = \"mocks_exhausted\"", &r),
        (
            EvalStatus::Failed,
            vec![(false, json!(["mocks_exhausted"]), seen)]
        )
    );
    let clean = run("ok", vec![call("b", None)], 10);
    assert_eq!(
        judge("no_envelope = true", &clean),
        (
            EvalStatus::Passed,
            vec![(true, json!("no envelope"), json!([]))]
        )
    );
}

#[test]
fn json_path_reads_the_output() {
    let r = run(
        "```json\n{\"id\": \"pay_1\", \"value\": 5.0, \"items\": [{\"sku\": \"a\"}]}\n```",
        vec![],
        10,
    );
    let (status, rows) = judge(
        "json_path = [{ path = \"$.id\", equals = \"pay_1\" }, { path = \"$.value\", equals = 5 }, { path = \"$.items[0].sku\", equals = \"a\" }]",
        &r,
    );
    assert_eq!(status, EvalStatus::Passed, "{rows:?}");
    assert_eq!(
        rows[0],
        (
            true,
            json!({"path": "$.id", "equals": "pay_1"}),
            json!("pay_1")
        )
    );
    assert_eq!(rows[2].2, json!("a"));

    let (status, rows) = judge(
        "json_path = [{ path = \"$.id\", equals = \"pay_2\" }, { path = \"$.items[3]\", equals = 1 }]",
        &r,
    );
    assert_eq!(status, EvalStatus::Failed);
    assert_eq!(
        rows[0],
        (
            false,
            json!({"path": "$.id", "equals": "pay_2"}),
            json!("pay_1")
        )
    );
    assert_eq!(
        rows[1],
        (
            false,
            json!({"path": "$.items[3]", "equals": 1}),
            Value::Null
        )
    );

    let prose = run("Charged pay_1", vec![], 10);
    let result = evaluate(
        &case("json_path = { path = \"$.id\", equals = \"pay_1\" }"),
        &prose,
    );
    assert_eq!(result.status, EvalStatus::Failed);
    assert_eq!(
        result.assertions[0].actual.to_value(),
        json!("Charged pay_1")
    );
    assert!(
        result
            .reason
            .unwrap()
            .starts_with("json_path: the output is not JSON")
    );
}

#[test]
fn max_tokens_compares_the_total() {
    let r = run("ok", vec![], 46);
    assert_eq!(
        judge("max_tokens = 46", &r),
        (EvalStatus::Passed, vec![(true, json!(46), json!(46))])
    );
    assert_eq!(
        judge("max_tokens = 45", &r),
        (EvalStatus::Failed, vec![(false, json!(45), json!(46))])
    );
}

#[test]
fn max_cost_compares_dollars_and_errors_when_the_cost_is_unknown() {
    let mut r = run("ok", vec![], 46);
    r.cost = Some(0.004);
    assert_eq!(
        judge("max_cost = 0.01", &r),
        (EvalStatus::Passed, vec![(true, json!(0.01), json!(0.004))])
    );
    let failed = evaluate(&case("max_cost = 0.001"), &r);
    assert_eq!(failed.status, EvalStatus::Failed);
    assert_eq!(
        failed.reason.as_deref(),
        Some("max_cost: cost $0.004, limit $0.001")
    );
    assert_eq!(dollars(0.1 + 0.2), "$0.3");
    assert_eq!(dollars(0.003_6), "$0.0036");
    assert_eq!(dollars(12.5), "$12.5");
    assert_eq!(dollars(0.0), "$0");
    // No price: not a pass, not a fail on a made-up 0, but an error naming why.
    r.cost = None;
    r.cost_missing = Some("no price for model `o3-mini` (--model-prices)".into());
    let errored = evaluate(&case("contains = \"ok\"\nmax_cost = 0.01"), &r);
    assert_eq!(errored.status, EvalStatus::Error);
    assert_eq!(
        errored.reason.as_deref(),
        Some("max_cost: cannot be checked: no price for model `o3-mini` (--model-prices)")
    );
    let a = &errored.assertions[1];
    assert!(
        a.status == Some(AssertionStatus::Errored) && !a.pass,
        "{a:?}"
    );
    assert_eq!(a.actual.to_value(), Value::Null);
    assert!(errored.assertions[0].pass && errored.assertions[0].status.is_none());
    assert_eq!(errored.to_event("s", "c").status, EvalStatus::Error);
}

#[test]
fn no_result_is_an_error_not_a_failure() {
    let c = case("contains = \"pay_1\"");
    let failed = CaseRun {
        error: Some("model failed on step 0: Rate limited".into()),
        ..CaseRun::default()
    };
    let result = evaluate(&c, &failed);
    assert_eq!(result.status, EvalStatus::Error);
    assert_eq!(
        result.reason.as_deref(),
        Some("model failed on step 0: Rate limited")
    );
    assert!(
        result.assertions.is_empty(),
        "nothing is judged without a result"
    );
    let silent = evaluate(&c, &CaseRun::default());
    assert_eq!(silent.status, EvalStatus::Error);
    // With a result that misses, it is a failure instead.
    let missed = evaluate(&c, &run("nothing", vec![], 1));
    assert_eq!(missed.status, EvalStatus::Failed);
}

#[test]
fn skipped_and_assertion_free_cases() {
    let suite = parse_suite(
        "s.toml",
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\nskip = \"later\"\n[[case]]\nid = \"b\"\ninput = \"x\"",
    )
    .unwrap();
    let result = evaluate(&suite.cases[0], &run("ok", vec![], 1));
    assert_eq!(
        (result.status, result.reason.as_deref()),
        (EvalStatus::Skipped, Some("later"))
    );
    assert_eq!(
        evaluate(&suite.cases[1], &run("ok", vec![], 1)).status,
        EvalStatus::Passed
    );
}

#[test]
fn event_carries_status_score_and_assertions() {
    let result = evaluate(&case("contains = [\"a\", \"b\"]"), &run("a", vec![], 7));
    let event = result.to_event("payments", "c");
    assert_eq!(event.status, EvalStatus::Failed);
    assert!(!event.pass);
    assert_eq!(event.score, Some(0.5));
    assert_eq!(event.tokens.total, 7);
    assert_eq!(event.duration, 12.0);
    assert_eq!(event.assertions.len(), 2);
    assert_eq!(
        result.first_failure().map(|a| a.expected.to_value()),
        Some(json!("b"))
    );
}

#[test]
fn json_paths_parse_and_print() {
    let path = JsonPath::parse("$.a.b[0][\"c d\"]['e']").unwrap();
    assert_eq!(
        path.segments,
        vec![
            PathSegment::Key("a".into()),
            PathSegment::Key("b".into()),
            PathSegment::Index(0),
            PathSegment::Key("c d".into()),
            PathSegment::Key("e".into()),
        ]
    );
    assert_eq!(path.to_string(), "$.a.b[0][\"c d\"].e");
    let doc = json!({"a": {"b": [{"c d": {"e": 3}}]}});
    assert_eq!(path.lookup(&doc), Some(&json!(3)));
    assert_eq!(JsonPath::parse("$").unwrap().lookup(&doc), Some(&doc));
    for bad in ["a.b", "$.", "$[x]", "$[0", "$a", "$..a"] {
        assert!(JsonPath::parse(bad).is_err(), "{bad}");
    }
}
