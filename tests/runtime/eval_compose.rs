//! `all` / `any` compositions and `command` checkers over real HTTP: a runtime refuses
//! suites with checker programs unless it was started allowing them, an allowing one runs
//! them and reports each child, and bad compositions and hanging checkers are named.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::RuntimeConfig;
use std::time::{Duration, Instant};

async fn run(api: &Api, body: Value) -> Value {
    let (status, created) = api.post("/v1/evals/runs", body).await;
    assert_eq!(status, 202, "{created}");
    let id = created["run_id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        let (status, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
        assert_eq!(status, 200, "{detail}");
        if detail["status"] == "completed" {
            return detail;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {id} did not complete in 10 s");
}

fn suite(assert: &Value) -> Value {
    json!({
        "suite": "checks",
        "defaults": {"mocks": {"asaas/create_payment": {"id": "pay_1"}}},
        "cases": [{
            "id": "charge",
            "input": "Charge R$5",
            "model": {"sequence": [
                {"tool_calls": [{"name": "asaas/create_payment", "arguments": {"value": 5}}]},
                {"text": "Charged pay_1"}
            ]},
            "assert": assert
        }]
    })
}

/// A checker that passes when the observations on its stdin show the R$5 charge.
fn checker() -> Value {
    json!([
        "sh",
        "-c",
        "if grep -q '\"value\":5'; then echo '{\"pass\": true, \"score\": 1}'; else echo '{\"pass\": false}'; fi"
    ])
}

fn allowing() -> RuntimeConfig {
    RuntimeConfig {
        allow_command_assertions: true,
        ..test_config()
    }
}

#[tokio::test]
async fn a_runtime_refuses_checker_programs_unless_started_allowing_them() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    // Nested in a composition is refused the same.
    let nested = suite(&json!({"any": [{"contains": "nope"}, {"command": checker()}]}));
    for body in [suite(&json!({"command": checker()})), nested] {
        let (status, error) = api.post("/v1/evals/runs", json!({"suites": [body]})).await;
        assert_eq!(status, 403, "{error}");
        assert_eq!(error["code"], "command_assertions_disabled");
        assert_eq!(error["field"], "/suites/0");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains("case \"charge\""), "{message}");
        assert!(
            message.contains("spyglass serve --allow-command-assertions"),
            "{message}"
        );
    }
    // Nothing ran: no run, no result in the rates.
    let (_, summary) = api.get("/v1/evals/summary").await;
    assert_eq!(summary["suites"], json!([]), "{summary}");
    // A suite without one runs as before.
    let detail = run(
        &api,
        json!({"suites": [suite(&json!({"contains": "pay_1"}))]}),
    )
    .await;
    assert_eq!(detail["passed"], 1, "{detail}");
    handle.shutdown().await;
}

#[tokio::test]
async fn an_allowing_runtime_runs_checkers_and_reports_every_child() {
    let handle = server(allowing()).await;
    let api = Api::new(&handle);
    let mut ws = observe(&handle, "").await;
    let assert = json!({
        "all": [
            {"command": checker()},
            {"any": [{"contains": "Refunded"}, {"contains": "pay_1"}, {"regex": "never"}]},
            {"contains": "pay_9"},
            {"not_called": "asaas/refund_payment"}
        ]
    });
    let detail = run(&api, json!({"suites": [suite(&assert)]})).await;
    let case = &detail["cases"][0];
    assert_eq!(case["status"], "failed", "{case}");
    assert_eq!(case["reason"], "all[2]: contains: \"pay_9\" not found");
    let all = &case["assertions"][0];
    assert_eq!(all["kind"], "all");
    let outcome = |a: &Value| {
        let judged = if a["pass"] == true {
            "passed"
        } else {
            "failed"
        };
        a.get("status")
            .and_then(Value::as_str)
            .unwrap_or(judged)
            .to_owned()
    };
    let top: Vec<(String, String)> = all["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["kind"].as_str().unwrap().to_owned(), outcome(c)))
        .collect();
    assert_eq!(
        top,
        [
            ("command".to_owned(), "passed".to_owned()),
            ("any".to_owned(), "passed".to_owned()),
            ("contains".to_owned(), "failed".to_owned()),
            ("not_called".to_owned(), "skipped".to_owned()),
        ]
    );
    // The checker's verdict is its actual; `any` stopped at its second child.
    assert_eq!(
        all["children"][0]["actual"],
        json!({"pass": true, "score": 1.0})
    );
    let any: Vec<String> = all["children"][1]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(outcome)
        .collect();
    assert_eq!(any, ["failed", "passed", "skipped"]);
    // A passing result carries no `status`: `pass` says it.
    assert!(all["children"][0].get("status").is_none(), "{all}");
    // The event on the stream carries the same tree, valid against the protocol schema,
    // whose `children` and `status` are checked (a made-up status is refused).
    let event = loop {
        let frame = next_frame(&mut ws, Duration::from_secs(5))
            .await
            .expect("an agent.eval.completed frame");
        if frame["kind"] == "agent.eval.completed" {
            break frame;
        }
    };
    assert_eq!(event["assertions"][0]["children"][3]["status"], "skipped");
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol-v1.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&event)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{event}");
    let mut bent = event.clone();
    bent["assertions"][0]["children"][1]["children"][0]["status"] = json!("maybe");
    assert!(
        !validator.is_valid(&bent),
        "the schema reads nested children"
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn a_hanging_checker_is_killed_and_the_case_is_an_error_saying_why() {
    let handle = server(allowing()).await;
    let api = Api::new(&handle);
    let assert =
        json!({"command": {"argv": ["sh", "-c", "echo waiting >&2; sleep 30"], "timeout_ms": 300}});
    let clock = Instant::now();
    let detail = run(&api, json!({"suites": [suite(&assert)]})).await;
    assert!(clock.elapsed() < Duration::from_secs(8), "never a hang");
    let case = &detail["cases"][0];
    assert_eq!(case["status"], "error", "{case}");
    assert_eq!(detail["errored"], 1);
    assert_eq!(
        case["reason"],
        "command: gave no verdict within 300 ms (killed); stderr: waiting"
    );
    assert_eq!(case["assertions"][0]["status"], "errored");
    handle.shutdown().await;
}

#[tokio::test]
async fn bad_compositions_and_commands_are_refused_naming_case_and_field() {
    let handle = server(allowing()).await;
    let api = Api::new(&handle);
    let mut deep = json!({"contains": "a"});
    for _ in 0..40 {
        deep = json!({"all": [deep]});
    }
    for (assert, says) in [
        (deep, "`all` / `any` nest 33 deep here; the limit is 32"),
        (json!({"any": []}), "assert.any: the list is empty"),
        (
            json!({"all": [{"contains": "a", "regex": "b"}]}),
            "assert.all[0]: a child is one assertion kind, this has 2",
        ),
        (
            json!({"command": {"argv": ["sh"], "timeout_ms": 999_999}}),
            "assert.command.timeout_ms: 999999 is out of range",
        ),
        (json!({"command": []}), "assert.command: the list is empty"),
    ] {
        let (status, error) = api
            .post("/v1/evals/runs", json!({"suites": [suite(&assert)]}))
            .await;
        assert_eq!(status, 400, "{error}");
        assert_eq!(error["code"], "invalid_suite");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.starts_with("suites[0]: case \"charge\": assert."),
            "{message}"
        );
        assert!(message.contains(says), "{message}");
    }
    handle.shutdown().await;
}
