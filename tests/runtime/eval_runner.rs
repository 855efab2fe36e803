//! The eval runner over real HTTP and WebSocket: every assertion kind passing and failing,
//! error versus failed, skips and timeouts, the event sequence on the stream, repeat and
//! flaky cases in the summary, ingested results, tenancy and every bad request.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::client::{ClientError, RestClient};
use spyglass::protocol::rest::EvalRunRequest;
use spyglass::runtime::{RuntimeConfig, ServerHandle};
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

/// Posts a run, asserts 202, and polls it until completed.
async fn run(api: &Api, body: Value) -> Value {
    let (status, created) = api.post("/v1/evals/runs", body).await;
    assert_eq!(status, 202, "{created}");
    let id = created["run_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("run_"), "{id}");
    wait(api, &id).await
}

async fn wait(api: &Api, id: &str) -> Value {
    for _ in 0..200 {
        let (status, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
        assert_eq!(status, 200, "{detail}");
        if detail["status"] == "completed" {
            return detail;
        }
        assert_eq!(detail["status"], "running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {id} did not complete in 10 s");
}

fn charge_model(text: &str) -> Value {
    json!({"sequence": [
        {"tool_calls": [{"name": "asaas/create_payment", "arguments": {"value": 5}}]},
        {"text": text}
    ]})
}

fn case(id: &str, model: &Value, assert: &Value) -> Value {
    json!({"id": id, "input": "Charge R$5", "model": model, "assert": assert})
}

fn assertion_suite() -> Value {
    let charge = charge_model("Charged pay_1");
    let json_text =
        json!({"sequence": [{"text": "{\"id\": \"pay_1\", \"items\": [{\"price\": 5}]}"}]});
    let misspelled = json!({"sequence": [
        {"tool_calls": [{"name": "asaas/create_paymnt", "arguments": {}}]},
        {"text": "The tool is unavailable"}
    ]});
    json!({
        "suite": "kinds",
        "defaults": {"mocks": {"asaas/create_payment": {"id": "pay_1", "status": "PENDING"}}},
        "cases": [
            case("contains pass", &charge, &json!({"contains": "pay_1"})),
            case("contains fail", &charge, &json!({"contains": ["pay_1", "pay_2"]})),
            case("equals pass", &charge, &json!({"equals": "Charged pay_1"})),
            case("equals fail", &charge, &json!({"equals": "Charged pay_9"})),
            case("regex pass", &charge, &json!({"regex": "^Charged pay_\\d+$"})),
            case("regex fail", &charge, &json!({"regex": "^Refunded"})),
            case("called pass", &charge,
                 &json!({"operation_called": {"name": "asaas/create_payment", "times": 1}})),
            case("called fail", &charge,
                 &json!({"operation_called": {"name": "asaas/create_payment", "times": 2}})),
            case("envelope pass", &misspelled, &json!({"envelope": "tool_not_mocked"})),
            case("envelope fail", &charge, &json!({"envelope": "tool_not_mocked"})),
            case("no envelope pass", &charge, &json!({"no_envelope": true})),
            case("no envelope fail", &misspelled, &json!({"no_envelope": true})),
            case("json path pass", &json_text,
                 &json!({"json_path": {"path": "$.items[0].price", "equals": 5}})),
            case("json path fail", &json_text,
                 &json!({"json_path": {"path": "$.id", "equals": "pay_2"}})),
            case("max tokens pass", &charge, &json!({"max_tokens": 10000})),
            case("max tokens fail", &charge, &json!({"max_tokens": 1})),
        ]
    })
}

#[tokio::test]
async fn every_assertion_kind_passes_and_fails_with_expected_and_actual() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let detail = run(&api, json!({"suites": [assertion_suite()]})).await;
    assert_eq!(detail["suites"], json!(["kinds"]));
    assert_eq!(
        (
            &detail["passed"],
            &detail["failed"],
            &detail["errored"],
            &detail["skipped"]
        ),
        (&json!(8), &json!(8), &json!(0), &json!(0)),
        "{detail:#}"
    );
    let cases = by_case(&detail);
    assert_eq!(cases.len(), 16);
    for (name, record) in &cases {
        let want = if name.ends_with("pass") {
            "passed"
        } else {
            "failed"
        };
        assert_eq!(record["status"], want, "{name}: {record:#}");
        assert_eq!(record["pass"], want == "passed", "{name}");
        assert_eq!(record["runId"], detail["run_id"], "{name}");
        assert!(record["sessionId"].as_str().unwrap().starts_with("ses_"));
        let assertions = record["assertions"].as_array().unwrap();
        assert!(!assertions.is_empty(), "{name}");
        let failing: Vec<&Value> = assertions.iter().filter(|a| a["pass"] == false).collect();
        if want == "failed" {
            assert!(record["reason"].is_string(), "{name}");
            for failure in failing {
                assert!(failure.get("expected").is_some() && failure.get("actual").is_some());
            }
        } else {
            assert!(failing.is_empty(), "{name}: {record:#}");
        }
    }
    let first_failure = |name: &str| -> Value {
        cases[name]["assertions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["pass"] == false)
            .cloned()
            .unwrap()
    };
    let contains = first_failure("contains fail");
    assert_eq!(contains["kind"], "contains");
    assert_eq!(contains["expected"], "pay_2");
    assert_eq!(contains["actual"], "Charged pay_1");
    // The list gives one result per item: pay_1 held.
    assert_eq!(
        cases["contains fail"]["assertions"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let equals = first_failure("equals fail");
    assert_eq!(
        (&equals["expected"], &equals["actual"]),
        (&json!("Charged pay_9"), &json!("Charged pay_1"))
    );
    assert_eq!(first_failure("regex fail")["actual"], "Charged pay_1");
    let called = first_failure("called fail");
    assert_eq!(called["kind"], "operation_called");
    assert!(
        called["actual"]
            .to_string()
            .contains("asaas/create_payment"),
        "{called}"
    );
    assert!(called["actual"].to_string().contains('1'), "{called}");
    assert_eq!(first_failure("envelope fail")["actual"], json!([]));
    assert_eq!(
        first_failure("no envelope fail")["actual"],
        json!(["tool_not_mocked"])
    );
    let path = first_failure("json path fail");
    assert_eq!(path["expected"], json!({"path": "$.id", "equals": "pay_2"}));
    assert_eq!(path["actual"], "pay_1");
    let tokens = first_failure("max tokens fail");
    assert_eq!(tokens["expected"], 1);
    assert!(tokens["actual"].as_u64().unwrap() > 1, "{tokens}");
    assert_eq!(
        tokens["actual"].as_u64(),
        cases["max tokens fail"]["tokens"]["total"].as_u64()
    );
    handle.shutdown().await;
}

/// What the agent sent, judged over HTTP: arguments by subset and JSON path, call order,
/// calls that must not happen, and JSON Schema on the final text and on the arguments.
#[tokio::test]
async fn assertions_on_what_the_agent_sent_pass_and_fail_over_http() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let two_calls = json!({"sequence": [
        {"tool_calls": [{"name": "asaas/create_customer", "arguments": {"name": "Ana"}}]},
        {"tool_calls": [{"name": "asaas/create_payment",
                         "arguments": {"value": 5, "customer": {"id": "cus_1"}}}]},
        {"text": "{\"id\": \"pay_1\", \"status\": \"PENDING\"}"}
    ]});
    let mocks = json!({"asaas/create_customer": {"id": "cus_1"},
                       "asaas/create_payment": {"id": "pay_1"}});
    let schema = json!({"type": "object", "required": ["id", "status"],
                        "properties": {"status": {"enum": ["PENDING", "PAID"]}}});
    let arg_schema = json!({"type": "object", "required": ["value"],
                            "properties": {"value": {"type": "number", "maximum": 100}}});
    let cases = [
        (
            "args pass",
            json!({"operation_called": {"name": "asaas/create_payment",
            "args": {"value": 5, "$.customer.id": "cus_1"}, "times": 1}}),
        ),
        (
            "args fail",
            json!({"operation_called": {"name": "asaas/create_payment",
            "args": {"value": 500}}}),
        ),
        (
            "sequence pass",
            json!({"sequence": ["asaas/create_customer", "asaas/create_payment"]}),
        ),
        (
            "sequence fail",
            json!({"sequence": ["asaas/create_payment", "asaas/create_customer"]}),
        ),
        ("not called pass", json!({"not_called": "asaas/refund"})),
        (
            "not called fail",
            json!({"not_called": ["asaas/create_customer"]}),
        ),
        (
            "schema pass",
            json!({"json_schema": [{"schema": schema},
            {"tool": "asaas/create_payment", "schema": arg_schema}]}),
        ),
        (
            "schema fail",
            json!({"json_schema": {"tool": "asaas/create_customer",
            "schema": {"type": "object", "required": ["email"]}}}),
        ),
    ];
    let suite = json!({"suite": "sent", "defaults": {"mocks": mocks, "model": two_calls},
        "cases": cases.iter().map(|(id, assert)| json!({"id": id, "input": "Charge Ana R$5",
            "assert": assert})).collect::<Vec<_>>()});
    let detail = run(&api, json!({"suites": [suite]})).await;
    let records = by_case(&detail);
    for (id, _) in &cases {
        let want = if id.ends_with("pass") {
            "passed"
        } else {
            "failed"
        };
        assert_eq!(records[*id]["status"], want, "{id}: {:#}", records[*id]);
    }
    let reason = |id: &str| {
        records[id]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        reason("args fail"),
        "operation_called: no call of asaas/create_payment had those arguments (1 call(s))"
    );
    let sent = &records["args fail"]["assertions"][0]["actual"]["calls with their arguments"];
    assert_eq!(sent[0]["customer"]["id"], "cus_1", "{sent}");
    assert!(
        reason("sequence fail")
            .starts_with("sequence: asaas/create_payment → asaas/create_customer")
    );
    assert_eq!(
        reason("not called fail"),
        "not_called: asaas/create_customer was called 1 time(s)"
    );
    assert!(
        reason("schema fail").contains("email"),
        "{}",
        reason("schema fail")
    );

    // A broken new assertion is the suite's error, named, and nothing runs.
    let broken = json!({"suite": "broken", "cases": [{"id": "c", "input": "x",
        "assert": {"sequence": {"tools": ["a/b", "a/c"], "gaps": "sometimes"}}}]});
    let (status, body) = api
        .post("/v1/evals/runs", json!({"suites": [broken]}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("assert.sequence.gaps"),
        "{body}"
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn a_case_with_no_result_is_error_not_failed_and_skips_are_skipped() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let suite = r#"
suite = "outcomes"

[[case]]
id = "provider outage"
input = "Charge"
model = { fail_on_step = [ { step = 0, error = "Rate limited" } ] }
[case.assert]
contains = "pay_1"

[[case]]
id = "slow model"
input = "Charge"
timeout_ms = 100
model = { sequence = [ { text = "too late", delay_ms = 3000 } ] }

[[case]]
id = "wrong answer"
input = "Charge"
model = { sequence = [ { text = "pay_2" } ] }
[case.assert]
contains = "pay_1"

[[case]]
id = "bad mocks"
input = "Charge"
mocks = { "no-slash" = 5 }

[[case]]
id = "later"
input = "Charge"
skip = "not mocked yet"
"#;
    let started = std::time::Instant::now();
    let detail = run(
        &api,
        json!({"suites": [{"file": "outcomes.toml", "text": suite}]}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the timeout did not cut the slow case"
    );
    let cases = by_case(&detail);
    let outage = &cases["provider outage"];
    assert_eq!(outage["status"], "error");
    assert_eq!(outage["pass"], false);
    assert_eq!(outage["reason"], "Rate limited");
    assert!(
        outage.get("assertions").is_none(),
        "nothing is judged: {outage}"
    );
    let slow = &cases["slow model"];
    assert_eq!(slow["status"], "error");
    assert!(
        slow["reason"]
            .as_str()
            .unwrap()
            .contains("timed out after 100 ms"),
        "{slow}"
    );
    assert_eq!(cases["wrong answer"]["status"], "failed");
    let bad = &cases["bad mocks"];
    assert_eq!(bad["status"], "error");
    assert!(
        bad["reason"].as_str().unwrap().contains("mocks_invalid"),
        "{bad}"
    );
    assert!(bad.get("sessionId").is_none());
    let later = &cases["later"];
    assert_eq!(later["status"], "skipped");
    assert_eq!(later["reason"], "not mocked yet");
    assert!(
        later.get("sessionId").is_none(),
        "a skipped case gets no session"
    );
    assert_eq!(
        (
            &detail["passed"],
            &detail["failed"],
            &detail["errored"],
            &detail["skipped"]
        ),
        (&json!(0), &json!(1), &json!(3), &json!(1))
    );
    // The case's session is a real one, closed once judged.
    let sid = outage["sessionId"].as_str().unwrap();
    let (status, session) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(status, 200);
    assert_eq!(session["status"], "closed");
    assert_eq!(session["user_id"], "spyglass-eval");
    handle.shutdown().await;
}

fn schema() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol-v1.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

#[tokio::test]
async fn the_stream_shows_the_run_its_sessions_and_one_result_per_attempt() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let mut ws = observe(&handle, "").await;
    let suite = json!({
        "suite": "stream",
        "defaults": {"mocks": {"asaas/create_payment": {"id": "pay_1"}}},
        "cases": [
            case("charges", &charge_model("Charged pay_1"), &json!({"contains": "pay_1"})),
            case("forgets", &charge_model("Done"), &json!({"contains": "pay_1"})),
        ]
    });
    let (status, created) = api
        .post("/v1/evals/runs", json!({"suites": [suite], "repeat": 2}))
        .await;
    assert_eq!(status, 202);
    let run_id = created["run_id"].clone();
    let mut frames = Vec::new();
    loop {
        let frame = next_frame(&mut ws, Duration::from_secs(5))
            .await
            .expect("stream ended");
        let last = frame["kind"] == "eval.run.completed";
        frames.push(frame);
        if last {
            break;
        }
    }
    let validator = schema();
    for frame in &frames {
        let errors: Vec<String> = validator
            .iter_errors(frame)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}\n{frame}");
    }
    let kinds: Vec<&str> = frames.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "eval.run.started", "{kinds:?}");
    let started = &frames[0];
    assert_eq!(started["runId"], run_id);
    assert_eq!(started["suites"], json!(["stream"]));
    assert_eq!(
        (&started["cases"], &started["repeat"]),
        (&json!(4), &json!(2))
    );
    let results: Vec<&Value> = frames
        .iter()
        .filter(|f| f["kind"] == "agent.eval.completed")
        .collect();
    assert_eq!(results.len(), 4);
    let order: Vec<(String, u64)> = results
        .iter()
        .map(|r| {
            (
                r["case"].as_str().unwrap().to_owned(),
                r["attempt"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        vec![
            ("charges".into(), 1),
            ("charges".into(), 2),
            ("forgets".into(), 1),
            ("forgets".into(), 2)
        ]
    );
    let mut sessions = HashSet::new();
    for result in &results {
        assert_eq!(result["runId"], run_id);
        assert_eq!(result["suite"], "stream");
        assert!(!result["assertions"].as_array().unwrap().is_empty());
        let sid = result["sessionId"].as_str().unwrap();
        assert!(
            sessions.insert(sid.to_owned()),
            "every attempt gets a fresh session"
        );
        let at = frames
            .iter()
            .position(|f| std::ptr::eq(f, *result))
            .unwrap();
        let before: Vec<&str> = frames[..at]
            .iter()
            .filter(|f| f["sessionId"] == sid)
            .map(|f| f["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            before,
            vec![
                "session.created",
                "tool.called",
                "agent.step.completed",
                "agent.step.completed",
                "agent.completed"
            ],
            "the attempt ran through the send loop"
        );
        assert_eq!(frames[at + 1]["kind"], "session.closed");
        assert_eq!(frames[at + 1]["sessionId"], sid);
    }
    assert_eq!(results[0]["status"], "passed");
    assert_eq!(results[3]["status"], "failed");
    let completed = frames.last().unwrap();
    assert_eq!(completed["runId"], run_id);
    assert_eq!(
        (
            &completed["passed"],
            &completed["failed"],
            &completed["errored"],
            &completed["skipped"]
        ),
        (&json!(2), &json!(2), &json!(0), &json!(0))
    );
    handle.shutdown().await;
}

fn flaky_suite() -> Value {
    json!({
        "suite": "confirm",
        "cases": [
            {"id": "flaky", "input": "Confirm", "assert": {"contains": "pay_1"},
             "model_variants": [
                {"sequence": [{"text": "Confirmed pay_1"}]},
                {"sequence": [{"text": "Which charge?"}]}
             ]},
            {"id": "steady", "input": "Confirm", "assert": {"contains": "ok"},
             "model": {"default_text": "ok"}}
        ]
    })
}

fn summary_case<'a>(summary: &'a Value, suite: &str, case: &str) -> &'a Value {
    summary["suites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["suite"] == suite)
        .and_then(|s| {
            s["cases"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["case"] == case)
        })
        .unwrap_or_else(|| panic!("no {suite}/{case} in {summary:#}"))
}

#[tokio::test]
async fn repeat_with_model_variants_shows_a_flaky_case_in_the_summary() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let detail = run(&api, json!({"suites": [flaky_suite()], "repeat": 4})).await;
    let statuses: Vec<(&str, &str)> = detail["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["case"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        &statuses[..4],
        &[
            ("flaky", "passed"),
            ("flaky", "failed"),
            ("flaky", "passed"),
            ("flaky", "failed")
        ]
    );
    let (status, summary) = api.get("/v1/evals/summary").await;
    assert_eq!(status, 200);
    assert_eq!(summary["window"], 20);
    let flaky = summary_case(&summary, "confirm", "flaky");
    assert_eq!(flaky["flaky"], true);
    assert_eq!(flaky["pass_rate"], 0.5);
    assert_eq!((&flaky["passed"], &flaky["failed"]), (&json!(2), &json!(2)));
    assert_eq!(flaky["last_run_id"], detail["run_id"]);
    let steady = summary_case(&summary, "confirm", "steady");
    assert_eq!(
        (&steady["flaky"], &steady["pass_rate"]),
        (&json!(false), &json!(1.0))
    );
    let suite = &summary["suites"][0];
    assert_eq!(
        (&suite["runs"], &suite["pass_rate"]),
        (&json!(1), &json!(0.75))
    );

    // A second run of only the steady case: a window of one run sees no flakiness.
    let second = run(&api, json!({"suites": [flaky_suite()], "case": "st*"})).await;
    assert_eq!(second["cases"].as_array().unwrap().len(), 1);
    let (_, last) = api.get("/v1/evals/summary?window=1").await;
    assert_eq!(last["window"], 1);
    assert_eq!(last["suites"][0]["runs"], 1);
    assert_eq!(last["suites"][0]["trend"], json!([1.0]));
    let flaky = summary_case(&last, "confirm", "flaky");
    assert_eq!(
        (&flaky["runs"], &flaky["flaky"]),
        (&json!(0), &json!(false))
    );
    let (_, both) = api.get("/v1/evals/summary?window=2").await;
    assert_eq!(both["suites"][0]["trend"], json!([0.75, 1.0]));
    assert_eq!(summary_case(&both, "confirm", "flaky")["flaky"], true);
    handle.shutdown().await;
}

#[tokio::test]
async fn ingested_results_without_a_run_id_count_in_the_same_rates() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    run(&api, json!({"suites": [flaky_suite()], "case": "steady"})).await;
    let events = json!([
        {"kind": "agent.eval.completed", "suite": "confirm", "case": "steady",
         "status": "failed", "pass": false, "reason": "said no", "duration": 4},
        {"kind": "agent.eval.completed", "suite": "support", "case": "greets",
         "status": "passed", "pass": true, "duration": 3},
    ]);
    let (status, body) = api.post("/v1/events", events).await;
    assert_eq!(status, 200, "{body}");
    let (_, summary) = api.get("/v1/evals/summary").await;
    let steady = summary_case(&summary, "confirm", "steady");
    assert_eq!(
        (&steady["passed"], &steady["failed"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(steady["flaky"], true);
    assert_eq!(steady["last_reason"], "said no");
    assert!(
        steady.get("last_run_id").is_none(),
        "the latest outcome had no run id"
    );
    let confirm = &summary["suites"][0];
    assert_eq!(confirm["suite"], "confirm");
    assert_eq!(confirm["runs"], 2, "the external batch is a run of its own");
    let greets = summary_case(&summary, "support", "greets");
    assert_eq!(
        (&greets["passed"], &greets["pass_rate"]),
        (&json!(1), &json!(1.0))
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn eval_runs_and_rates_belong_to_their_tenant() {
    let handle = server(test_config()).await;
    let a = Api::new(&handle).with_tenant("team-a");
    let b = Api::new(&handle).with_tenant("team-b");
    let detail = run(&a, json!({"suites": [flaky_suite()]})).await;
    let id = detail["run_id"].as_str().unwrap();
    let (status, body) = b.get(&format!("/v1/evals/runs/{id}")).await;
    assert_eq!((status, &body["code"]), (404, &json!("not_found")));
    let (_, summary) = b.get("/v1/evals/summary").await;
    assert_eq!(summary["suites"], json!([]));
    let (_, summary) = a.get("/v1/evals/summary").await;
    assert_eq!(summary["suites"][0]["suite"], "confirm");
    let sid = detail["cases"][0]["sessionId"].as_str().unwrap();
    assert_eq!(b.get(&format!("/v1/sessions/{sid}")).await.0, 404);
    assert_eq!(a.get(&format!("/v1/sessions/{sid}")).await.0, 200);
    handle.shutdown().await;
}

#[tokio::test]
async fn bad_run_requests_answer_4xx_with_a_code_and_lose_nothing() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let broken = "suite = \"payments\"\n[[case]]\nid = \"charge\"\ninput = \"x\"\n[case.assert]\nregex = \"pay_(\"\n";
    let (status, body) = api
        .post(
            "/v1/evals/runs",
            json!({"suites": [flaky_suite(), {"file": "payments.toml", "text": broken}]}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "invalid_suite");
    assert_eq!(
        (&body["index"], &body["field"]),
        (&json!(1), &json!("/suites/1"))
    );
    let message = body["message"].as_str().unwrap();
    for part in ["payments.toml", "case \"charge\"", "assert.regex"] {
        assert!(message.contains(part), "{message} lacks {part}");
    }
    let (status, body) = api
        .post("/v1/evals/runs", json!({"suites": [{"suite": "s", "cases": [{"id": "a", "input": "x", "assert": {"contain": "x"}}]}]}))
        .await;
    assert_eq!((status, &body["code"]), (400, &json!("invalid_suite")));
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("suites[0]: case \"a\": assert.contain"),
        "{body}"
    );

    let cases = [
        (json!({"suites": []}), "invalid_body", "/suites"),
        (
            json!({"suites": [flaky_suite()], "repeat": 0}),
            "invalid_body",
            "/repeat",
        ),
        (
            json!({"suites": [flaky_suite()], "case": "nothing*"}),
            "invalid_body",
            "/case",
        ),
        (
            json!({"suites": [flaky_suite()], "repeat": 20000}),
            "invalid_body",
            "/repeat",
        ),
    ];
    for (request, code, field) in cases {
        let (status, body) = api.post("/v1/evals/runs", request.clone()).await;
        assert_eq!(status, 400, "{request}: {body}");
        assert_eq!(
            (&body["code"], &body["field"]),
            (&json!(code), &json!(field)),
            "{request}"
        );
        assert!(!body["message"].as_str().unwrap().is_empty());
    }
    for raw in [
        "",
        "not json",
        "{\"suites\": [], \"extra\": 1}",
        "{\"suites\": \"x\"}",
        "[]",
    ] {
        let (status, body) = api.post_raw("/v1/evals/runs", raw).await;
        assert_eq!(
            (status, &body["code"]),
            (400, &json!("invalid_body")),
            "{raw:?}: {body}"
        );
    }
    let (status, body) = api.get("/v1/evals/runs/run_nope").await;
    assert_eq!((status, &body["code"]), (404, &json!("not_found")));
    for query in ["window=0", "window=abc", "window=-1"] {
        let (status, body) = api.get(&format!("/v1/evals/summary?{query}")).await;
        assert_eq!(
            (status, &body["code"]),
            (400, &json!("invalid_query")),
            "{query}"
        );
    }
    // Nothing of a refused request ran.
    let (_, summary) = api.get("/v1/evals/summary").await;
    assert_eq!(summary["suites"], json!([]));
    assert_eq!(api.get("/v1/sessions").await.1["sessions"], json!([]));
    handle.shutdown().await;
}

#[tokio::test]
async fn mocks_need_test_mode_but_mock_free_suites_run_without_it() {
    let handle = server(RuntimeConfig::default()).await;
    let api = Api::new(&handle);
    let (status, body) = api
        .post("/v1/evals/runs", json!({"suites": [assertion_suite()]}))
        .await;
    assert_eq!(
        (status, &body["code"]),
        (501, &json!("mocks_not_permitted")),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("contains pass"),
        "{body}"
    );
    let detail = run(&api, json!({"suites": [flaky_suite()], "case": "steady"})).await;
    assert_eq!(detail["passed"], 1);
    handle.shutdown().await;
}

#[tokio::test]
async fn finished_runs_beyond_the_setting_are_dropped_oldest_first() {
    let config = RuntimeConfig {
        retained_eval_runs: 2,
        ..test_config()
    };
    let handle = server(config).await;
    let api = Api::new(&handle);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let detail = run(&api, json!({"suites": [flaky_suite()], "case": "steady"})).await;
        ids.push(detail["run_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(api.get(&format!("/v1/evals/runs/{}", ids[0])).await.0, 404);
    assert_eq!(api.get(&format!("/v1/evals/runs/{}", ids[1])).await.0, 200);
    assert_eq!(api.get(&format!("/v1/evals/runs/{}", ids[2])).await.0, 200);
    // The history is bounded by its own setting, not by the run table.
    let (_, summary) = api.get("/v1/evals/summary").await;
    assert_eq!(summary["suites"][0]["runs"], 3);
    handle.shutdown().await;
}

#[tokio::test]
async fn the_in_process_api_starts_a_run_and_awaits_it() {
    let handle: ServerHandle = server(test_config()).await;
    let rt = handle.runtime();
    let request = EvalRunRequest {
        suites: vec![flaky_suite()],
        repeat: Some(2),
        case: None,
        scope: spyglass::protocol::events::EvalScope::default(),
    };
    let id = rt.run_evals("default", request).unwrap();
    let detail = rt.wait_eval_run("default", &id).await.unwrap();
    assert_eq!(detail.status, "completed");
    assert_eq!((detail.passed, detail.failed), (3, 1));
    assert_eq!(detail.cases.len(), 4);
    assert!(detail.duration_ms > 0.0);
    assert_eq!(
        rt.wait_eval_run("other", &id).await.unwrap_err().status,
        404
    );
    // The same run through the REST client the CLI and the inspector use.
    let client = RestClient::new(&handle.url(), None).unwrap();
    let over_http = client.eval_run(&id).await.unwrap();
    assert_eq!(over_http.cases, detail.cases);
    assert_eq!((over_http.passed, over_http.failed), (3, 1));
    let summary = client.eval_summary(Some(1)).await.unwrap();
    assert_eq!(summary, rt.eval_summary("default", Some(1)));
    assert_eq!(summary.suites[0].cases[0].case, "flaky");
    assert!(summary.suites[0].cases[0].flaky);
    match client.eval_run("run_nope").await {
        Err(ClientError::Api { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (404, "not_found"));
        }
        other => panic!("{other:?}"),
    }
    handle.shutdown().await;
}

/// The 95 % Wilson score interval, from its formula (z = 1.959964).
fn wilson_bounds(passed: f64, n: f64) -> (f64, f64) {
    let z: f64 = 1.959_964;
    let p = passed / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    (centre - half, centre + half)
}

#[tokio::test]
async fn a_seeded_flaky_run_has_the_statistics_its_attempts_give() {
    use spyglass::eval::stats::RunStats;
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let detail = run(&api, json!({"suites": [flaky_suite()], "repeat": 6})).await;
    let detail: spyglass::protocol::rest::EvalRunDetail = serde_json::from_value(detail).unwrap();
    let stats = RunStats::of(detail.cases.iter().map(|c| &c.result));
    let flaky = stats.case("confirm", "flaky").unwrap();
    // The two variants alternate: pass, fail, pass, fail, ...
    assert_eq!(flaky.strip, "PFPFPF");
    assert_eq!((flaky.passed, flaky.judged, flaky.flips), (3, 6, 5));
    assert_eq!(flaky.flip_rate, Some(1.0));
    assert!(flaky.flaky && flaky.pass_at_k && !flaky.pass_all_k);
    let [lo, hi] = flaky.wilson_95.unwrap();
    let (want_lo, want_hi) = wilson_bounds(3.0, 6.0);
    assert!(
        (lo - want_lo).abs() < 1e-5 && (hi - want_hi).abs() < 1e-5,
        "{lo} {hi}"
    );
    let steady = stats.case("confirm", "steady").unwrap();
    assert_eq!(steady.strip, "PPPPPP");
    assert!(!steady.flaky && steady.pass_all_k);
    let suite = &stats.suites[0];
    assert_eq!((suite.passed, suite.judged, suite.flaky), (9, 12, 1));
    assert_eq!(suite.pass_all_k, Some(0.5));
    assert_eq!(suite.flip_rate, Some(0.5));
    assert_eq!(
        stats.flaky_line(),
        "1 flaky: confirm/flaky (3/6, 50 % [19–81 %])"
    );
    handle.shutdown().await;
}
