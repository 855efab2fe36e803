//! Every frame the runtime really sends on `/v1/observe` — its own kinds, a gap, and
//! seed-001 fixtures posted to `POST /v1/events` — and every REST request and answer body
//! validates against docs/protocol-v1.schema.json.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{Policy, RuntimeConfig};
use std::collections::BTreeSet;
use std::path::Path;

fn schema() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol-v1.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&schema()).unwrap()
}

/// Validates `body` against the schema's `$defs/<name>`, naming every error.
struct Rest(Value);

impl Rest {
    fn new() -> Rest {
        Rest(schema())
    }

    #[track_caller]
    fn check(&self, name: &str, body: &Value) {
        assert!(self.0["$defs"][name].is_object(), "no $defs/{name}");
        let schema = json!({
            "$schema": self.0["$schema"],
            "$defs": self.0["$defs"],
            "$ref": format!("#/$defs/{name}"),
        });
        let validator = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:?}\n{body:#}");
    }

    #[track_caller]
    fn refuses(&self, name: &str, body: &Value) {
        let schema = json!({
            "$schema": self.0["$schema"],
            "$defs": self.0["$defs"],
            "$ref": format!("#/$defs/{name}"),
        });
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert!(!validator.is_valid(body), "{name} accepts {body}");
    }
}

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seed001")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn real_frames_validate_against_the_schema() {
    let handle = server(RuntimeConfig {
        retained_events: 1000,
        policy: Policy::from_toml(
            "[[rule]]\nid = \"no\"\ntool = \"*/refund\"\naction = \"deny\"\n\
             [[rule]]\nid = \"hold\"\ntool = \"*/pay\"\naction = \"approval\"\n",
        )
        .unwrap(),
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let (_, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u", "metadata": {"suite": "s"},
                   "mocks": {"asaas/pay": {"id": "p"}, "asaas/nfe": [{"id": "n"}], "asaas/refund": {}},
                   "model": {"sequence": [
                       {"tool_calls": [{"name": "asaas/nfe", "arguments": {"v": 1}, "latency_ms": 5},
                                       {"name": "asaas/pay", "arguments": {}}]},
                       {"text": "done"}],
                     "fail_on_step": [{"step": 2, "error": "Rate limited"}]}}),
        )
        .await;
    let sid = created["id"].as_str().unwrap().to_owned();
    api.execute(&sid, "asaas/nfe", json!({})).await;
    api.execute(&sid, "asaas/missing", json!({})).await;
    api.execute(&sid, "asaas/refund", json!({})).await;
    let (_, held) = api.execute(&sid, "asaas/pay", json!({"value": 1})).await;
    let (_, second) = api.execute(&sid, "asaas/pay", json!({"value": 2})).await;
    api.post(
        &format!(
            "/v1/approvals/{}/approve",
            held["approval_id"].as_str().unwrap()
        ),
        json!({"by": "ana", "note": "ok"}),
    )
    .await;
    api.post(
        &format!(
            "/v1/approvals/{}/deny",
            second["approval_id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await;
    api.post(
        &format!("/v1/sessions/{sid}/send"),
        json!({"message": "go"}),
    )
    .await;
    api.post(
        &format!("/v1/sessions/{sid}/send"),
        json!({"message": "again"}),
    )
    .await;
    let fixtures: Vec<Value> = [
        "step_completed.json",
        "completed.json",
        "failed.json",
        "eval_completed.json",
    ]
    .iter()
    .map(|name| fixture(name))
    .collect();
    let (status, body) = api.post("/v1/events", Value::Array(fixtures)).await;
    assert_eq!(status, 200, "{body}");
    api.delete(&format!("/v1/sessions/{sid}")).await;

    let total = handle.runtime().events_since(0, 1000).len();
    let validator = validator();
    let mut ws = observe(&handle, "?since=0").await;
    let mut kinds = BTreeSet::new();
    for frame in frames(&mut ws, total).await {
        let errors: Vec<String> = validator
            .iter_errors(&frame)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{} fails the schema: {errors:?}\n{frame}",
            frame["kind"]
        );
        kinds.insert(frame["kind"].as_str().unwrap().to_owned());
    }
    let want: BTreeSet<String> = [
        "session.created",
        "session.closed",
        "tool.called",
        "approval.requested",
        "approval.resolved",
        "approval.replayed",
        "agent.step.completed",
        "agent.completed",
        "agent.failed",
        "agent.eval.completed",
    ]
    .iter()
    .map(std::string::ToString::to_string)
    .collect();
    assert_eq!(kinds, want);

    // And a gap frame, from a runtime whose log is tiny.
    let small = server(RuntimeConfig {
        retained_events: 2,
        ..test_config()
    })
    .await;
    let api = Api::new(&small);
    for _ in 0..4 {
        api.session(json!({})).await;
    }
    let mut ws = observe(&small, "?since=0").await;
    let gap = frames(&mut ws, 1).await.remove(0);
    assert_eq!(gap["kind"], "stream.gap");
    let errors: Vec<String> = validator.iter_errors(&gap).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}\n{gap}");
}

#[tokio::test]
async fn real_rest_bodies_validate_against_the_schema() {
    let handle = server(RuntimeConfig {
        policy: Policy::from_toml(
            "[[rule]]\nid = \"no\"\ntool = \"*/refund\"\naction = \"deny\"\n\
             [[rule]]\nid = \"hold\"\ntool = \"*/pay\"\naction = \"approval\"\n",
        )
        .unwrap(),
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let rest = Rest::new();

    let create = json!({"servers": ["asaas"], "user_id": "u", "metadata": {"suite": "s"},
        "mocks": {"asaas/pay": {"id": "p"}, "asaas/nfe": [{"id": "n"}], "asaas/refund": {},
                  "asaas/find": {"$rules": [{"match": {"id": 1}, "output": {"id": 1}}],
                                 "$fallback": {"id": 0}}},
        "model": {"sequence": [
            {"tool_calls": [{"name": "asaas/nfe", "arguments": {"v": 1}}]},
            {"text": "done"}]}});
    rest.check("createSessionRequest", &create);
    let (status, created) = api.post("/v1/sessions", create).await;
    assert_eq!(status, 201, "{created}");
    rest.check("sessionCreated", &created);
    let sid = created["id"].as_str().unwrap().to_owned();

    // Every execute outcome: 200, 202, 403, 422 (three envelopes).
    let mut statuses = BTreeSet::new();
    let mut held = Vec::new();
    for (tool, input) in [
        ("asaas/nfe", json!({})),
        ("asaas/find", json!({"id": 1})),
        ("asaas/find", json!({"id": 2})),
        ("asaas/pay", json!({"value": 1})),
        ("asaas/pay", json!({"value": 2})),
        ("asaas/refund", json!({})),
        ("asaas/nfe", json!({})),
        ("asaas/missing", json!({})),
    ] {
        let request = json!({"tool": tool, "input": input});
        rest.check("executeRequest", &request);
        let (status, body) = api
            .post(&format!("/v1/sessions/{sid}/execute"), request)
            .await;
        rest.check("executeAnswer", &body);
        match status {
            200 => rest.check("toolResult", &body),
            202 => {
                rest.check("heldResult", &body);
                held.push(body["approval_id"].as_str().unwrap().to_owned());
            }
            _ => rest.check("envelope", &body),
        }
        statuses.insert(status);
    }
    assert_eq!(statuses, BTreeSet::from([200, 202, 403, 422]));
    // On a session of its own: its call's input is no JSON number a reader here can hold.
    let other = api
        .session(json!({"asaas/find": {"$rules": [], "$fallback": {"id": 0}}}))
        .await;
    let (status, engine) = api
        .post_raw(
            &format!("/v1/sessions/{other}/execute"),
            r#"{"tool":"asaas/find","input":{"id":1e400}}"#,
        )
        .await;
    assert_eq!(
        (status, &engine["code"]),
        (422, &json!("mocks_engine_error"))
    );
    rest.check("executeAnswer", &engine);

    let (_, pending) = api.get("/v1/approvals").await;
    rest.check("approvalList", &pending);
    assert_eq!(pending["approvals"].as_array().unwrap().len(), 2);
    let decision = json!({"by": "ana", "note": "ok"});
    rest.check("decisionRequest", &decision);
    rest.check("decisionRequest", &json!({}));
    let (status, approved) = api
        .post(&format!("/v1/approvals/{}/approve", held[0]), decision)
        .await;
    assert_eq!(status, 200, "{approved}");
    rest.check("approvalView", &approved);
    let (status, denied) = api
        .post(&format!("/v1/approvals/{}/deny", held[1]), json!({}))
        .await;
    assert_eq!(status, 200, "{denied}");
    rest.check("approvalView", &denied);

    let send = json!({"message": "go"});
    rest.check("sendRequest", &send);
    let (status, sent) = api.post(&format!("/v1/sessions/{sid}/send"), send).await;
    assert_eq!(status, 200, "{sent}");
    rest.check("sendResult", &sent);
    assert!(!sent["tool_calls"].as_array().unwrap().is_empty(), "{sent}");

    let (_, list) = api.get("/v1/sessions").await;
    rest.check("sessionList", &list);
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    rest.check("sessionDetail", &detail);
    assert!(detail["last_run"].is_object(), "{detail}");

    // Errors, whatever route gives them.
    let (status, refused) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u", "mocks": {"asaas/x": []}}),
        )
        .await;
    assert_eq!(status, 400);
    rest.check("apiError", &refused);
    let (status, bad) = api.post("/v1/events", json!([{"seq": 1}])).await;
    assert_eq!(status, 400);
    rest.check("apiError", &bad);

    // A cancelled approval reads as the schema says.
    let (_, held) = api.execute(&sid, "asaas/pay", json!({"value": 3})).await;
    assert_eq!(held["code"], "approval_required");
    api.delete(&format!("/v1/sessions/{sid}")).await;
    let (_, all) = api.get("/v1/approvals?status=all").await;
    rest.check("approvalList", &all);
    let statuses: BTreeSet<&str> = all["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        BTreeSet::from(["approved", "denied", "cancelled"])
    );

    // An eval run, accepted and then complete.
    let suite = json!({"suite": "schema", "cases": [
        {"id": "c", "input": "go", "assert": {"contains": "ok"}, "model": {"default_text": "ok"}}]});
    let run = json!({"suites": [suite], "repeat": 1});
    rest.check("evalRunRequest", &run);
    let (status, accepted) = api.post("/v1/evals/runs", run).await;
    assert_eq!(status, 202, "{accepted}");
    rest.check("evalRunAccepted", &accepted);
    let id = accepted["run_id"].as_str().unwrap();
    handle.runtime().wait_eval_run("default", id).await.unwrap();
    let (status, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
    assert_eq!(
        (status, &detail["status"]),
        (200, &json!("completed")),
        "{detail}"
    );
    rest.check("evalRun", &detail);
    assert_eq!(detail["cases"].as_array().unwrap().len(), 1, "{detail}");

    // The definitions are not vacuous: wrong shapes are refused.
    rest.refuses("sessionCreated", &json!({"id": "ses_1"}));
    rest.refuses("toolResult", &refused);
    rest.refuses("approvalView", &json!({"id": "apr_1", "status": "gone"}));
    rest.refuses("executeRequest", &json!({"tool": "a/b", "input": []}));
}
