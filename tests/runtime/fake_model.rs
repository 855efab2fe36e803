//! The faithful fake model over real HTTP `send`: `strict` scripts, `fail_on_step` with
//! `retries`, `when` branches on the last tool outcome — as the SDK sends them (a JSON
//! string in `metadata.model_script`) and as `model` — and every broken script's 400.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::ServerHandle;

async fn session_with(api: &Api, body: Value) -> String {
    let (status, created) = api.post("/v1/sessions", body).await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

/// A session scripted the SDK's way: the script as a JSON string in metadata.
async fn sdk_session(api: &Api, mocks: Value, script: &Value) -> String {
    session_with(
        api,
        json!({"servers": ["asaas"], "user_id": "u", "mocks": mocks,
               "metadata": {"model_script": script.to_string()}}),
    )
    .await
}

fn session_events(handle: &ServerHandle, sid: &str) -> Vec<Value> {
    handle
        .runtime()
        .events_since(0, 10_000)
        .iter()
        .map(|f| serde_json::from_str::<Value>(&spyglass::protocol::encode(f)).unwrap())
        .filter(|e| e["sessionId"] == sid)
        .collect()
}

#[tokio::test]
async fn a_strict_script_fails_the_run_at_an_unscripted_model_call() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let script = json!({"strict": true, "sequence": [
        {"tool_calls": [{"name": "asaas/get_payment", "arguments": {"id": "pay_1"}}]}
    ]});
    let mocks = json!({"asaas/get_payment": {"status": "PAID"}});
    let sid = sdk_session(&api, mocks.clone(), &script).await;
    let (status, body) = api.send(&sid, "Is pay_1 paid?").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "agent_failed");
    assert_eq!(
        body["message"],
        "unscripted model call 1: the script has 1 step(s) and is strict"
    );
    let events = session_events(&handle, &sid);
    let failed = events.last().unwrap();
    assert_eq!(failed["kind"], "agent.failed");
    assert_eq!(failed["error"], body["message"]);
    // The scripted step ran: its call and its step are on the stream.
    assert_eq!(failed["steps"].as_array().unwrap().len(), 1);
    assert!(events.iter().any(|e| e["kind"] == "tool.called"));

    // The same script without `strict` answers the default text past its end.
    let mut lenient = script.clone();
    lenient.as_object_mut().unwrap().remove("strict");
    let sid = sdk_session(&api, mocks, &lenient).await;
    let (status, body) = api.send(&sid, "Is pay_1 paid?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message"], "fake response");
}

#[tokio::test]
async fn first_call_throws_and_the_retry_gets_the_next_scripted_step() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    // `@gemstack/ai-sdk`'s example: failOnStep(0) over [toolCalls, 'recovered'].
    let script = json!({
        "sequence": [
            {"tool_calls": [{"name": "asaas/get_payment", "arguments": {}}]},
            {"text": "recovered"}
        ],
        "fail_on_step": [{"step": 0, "error": "Rate limited"}],
        "retries": 1
    });
    let sid = sdk_session(&api, json!({}), &script).await;
    let (status, body) = api.send(&sid, "go").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message"], "recovered");
    assert_eq!(body["iterations"], 1);
    assert_eq!(body["tool_calls"], json!([]));
    let events = session_events(&handle, &sid);
    let step = events
        .iter()
        .find(|e| e["kind"] == "agent.step.completed")
        .unwrap();
    assert_eq!(
        step["step"]["failedAttempts"],
        json!([{"call": 0, "error": "Rate limited"}])
    );
    // The frames as sent validate against the protocol schema, which knows the field.
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol-v1.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for event in &events {
        assert!(validator.is_valid(event), "{event}");
    }
    let mut wrong = step.clone();
    wrong["step"]["failedAttempts"] = json!([{"call": -1, "error": 5}]);
    assert!(!validator.is_valid(&wrong));
    let done = events.last().unwrap();
    assert_eq!(done["kind"], "agent.completed");
    assert_eq!(done["failoverAttempts"], 1);
    assert_eq!(
        done["steps"][0]["failedAttempts"][0]["error"],
        "Rate limited"
    );
}

#[tokio::test]
async fn with_no_retries_left_the_run_fails_with_the_reason() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let script = json!({
        "sequence": [{"text": "a"}, {"text": "b"}, {"text": "c"}],
        "fail_on_step": [{"step": 0, "error": "Rate limited"},
                         {"step": 1, "error": "Overloaded"}],
        "retries": 1
    });
    let sid = session_with(
        &api,
        json!({"servers": [], "user_id": "u", "model": script}),
    )
    .await;
    let (status, body) = api.send(&sid, "go").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "agent_failed");
    assert_eq!(body["message"], "Overloaded (model call 1, after 1 retry)");
    let events = session_events(&handle, &sid);
    let failed = events.last().unwrap();
    assert_eq!(failed["kind"], "agent.failed");
    assert_eq!(failed["error"], "Overloaded (model call 1, after 1 retry)");
    // No step completed, but the run counts the retry it made.
    assert_eq!(failed["failoverAttempts"], 1);
    assert_eq!(failed["steps"], json!([]));
    // The next send is model call 2: the script goes on from there.
    let (status, body) = api.send(&sid, "again").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message"], "c");
}

fn branching_script() -> Value {
    json!({"strict": true, "sequence": [
        {"tool_calls": [{"name": "asaas/get_payment", "arguments": {"id": "pay_1"}}]},
        {"when": [
            {"envelope": "tool_not_mocked", "then": {"text": "I cannot look payments up."}},
            {"tool": "get_payment", "path": "$.status", "equals": "PAID",
             "then": {"text": "pay_1 is paid."}}
         ],
         "else": {"text": "pay_1 is not paid yet."}}
    ]})
}

#[tokio::test]
async fn a_step_branches_on_the_last_tool_outcome() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    for (mocks, expected) in [
        (
            json!({"asaas/get_payment": {"status": "PAID"}}),
            "pay_1 is paid.",
        ),
        (
            json!({"asaas/get_payment": {"status": "PENDING"}}),
            "pay_1 is not paid yet.",
        ),
        (json!({}), "I cannot look payments up."),
    ] {
        let sid = sdk_session(&api, mocks.clone(), &branching_script()).await;
        let (status, body) = api.send(&sid, "Is pay_1 paid?").await;
        assert_eq!(status, 200, "{mocks}: {body}");
        assert_eq!(body["message"], expected, "{mocks}");
    }
    // The same as `model` on the body.
    let sid = session_with(
        &api,
        json!({"servers": ["asaas"], "user_id": "u",
               "mocks": {"asaas/get_payment": {"status": "PAID"}},
               "model": branching_script()}),
    )
    .await;
    let (_, body) = api.send(&sid, "Is pay_1 paid?").await;
    assert_eq!(body["message"], "pay_1 is paid.");

    // No branch holds and no `else`: a strict script fails, a lenient one answers the
    // default text.
    let no_else = |strict: bool| {
        json!({"strict": strict, "sequence": [
            {"tool_calls": [{"name": "asaas/get_payment", "arguments": {}}]},
            {"when": [{"envelope": "rate_limited", "then": {"text": "later"}}]}
        ]})
    };
    let mocks = json!({"asaas/get_payment": {"status": "PAID"}});
    let sid = sdk_session(&api, mocks.clone(), &no_else(true)).await;
    let (status, body) = api.send(&sid, "go").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body["message"],
        "unscripted model call 1: no `when` branch of sequence[1] held and it has no `else`"
    );
    let sid = sdk_session(&api, mocks, &no_else(false)).await;
    let (_, body) = api.send(&sid, "go").await;
    assert_eq!(body["message"], "fake response");
}

#[tokio::test]
async fn broken_scripts_answer_400_naming_the_field() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let cases = [
        (
            json!({"retries": 11}),
            "/metadata/model_script/retries",
            "retries is 11; the most is 10",
        ),
        (
            json!({"strict": "yes"}),
            "/metadata/model_script/strict",
            "expected a boolean",
        ),
        (
            json!({"sequence": [{"text": "a"},
                {"when": [{"path": "status", "equals": "PAID", "then": {"text": "x"}}]}]}),
            "/metadata/model_script/sequence/1/when/0/path",
            "must start with `$`",
        ),
        (
            json!({"sequence": [{"when": [{"path": "$.status", "then": {}}]}]}),
            "/metadata/model_script/sequence/0/when/0/equals",
            "missing: the value expected at `path`",
        ),
        (
            json!({"sequence": [{"when": [{"then": {"text": "x"}}]}]}),
            "/metadata/model_script/sequence/0/when/0",
            "a branch needs a condition",
        ),
        (
            json!({"sequence": [{"else": {"text": "x"}}]}),
            "/metadata/model_script/sequence/0/else",
            "`else` needs `when` branches",
        ),
        (
            json!({"sequence": [{"text": "t", "when": [{"tool": "a", "then": {}}]}]}),
            "/metadata/model_script/sequence/0/text",
            "move this into `else`",
        ),
        (
            json!({"sequence": [{"when": [{"tool": "a", "then": {"when": [{"tool": "b", "then": {}}]}}]}]}),
            "/metadata/model_script/sequence/0/when/0/then/when",
            "cannot branch again",
        ),
        (
            json!({"sequence": [{"when": [{"tool": "a", "then": {}, "unless": 1}]}]}),
            "/metadata/model_script/sequence/0/when/0/unless",
            "unknown field `unless`",
        ),
        (
            json!({"sequence": [{"when": [{"tool": "a"}]}]}),
            "/metadata/model_script/sequence/0/when/0",
            "missing field `then`",
        ),
    ];
    for (script, field, words) in cases {
        let (status, body) = api
            .post(
                "/v1/sessions",
                json!({"servers": [], "user_id": "u",
                       "metadata": {"model_script": script.to_string()}}),
            )
            .await;
        assert_eq!(status, 400, "{script}: {body}");
        assert_eq!(body["code"], "invalid_body", "{script}: {body}");
        assert_eq!(body["field"], field, "{script}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains(words),
            "{script}: {body}"
        );
    }
    // On the body's `model` the field is under `/model`.
    let (status, body) = api
        .post(
            "/v1/sessions",
            json!({"servers": [], "user_id": "u", "model": {"retries": 99}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["field"], "/model/retries");
    // A wrong type in the body's `model` is named by where it sits.
    let (status, body) = api
        .post(
            "/v1/sessions",
            json!({"servers": [], "user_id": "u",
                   "model": {"sequence": [{"when": [{"tool": 5, "then": {}}]}]}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "invalid_body");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("model.sequence[0].when[0].tool: invalid type: integer `5`"),
        "{body}"
    );
    // Branch tool calls count toward the script's call cap.
    let many: Vec<Value> = (0..300)
        .map(|_| json!({"name": "a/b", "arguments": {}}))
        .collect();
    let (status, body) = api
        .post(
            "/v1/sessions",
            json!({"servers": [], "user_id": "u", "model": {"sequence": [
                {"when": [{"tool": "a", "then": {"tool_calls": many}}]}
            ]}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "model_script_too_large");
}
