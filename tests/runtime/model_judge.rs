//! Judge assertions through the configured provider (a fake OpenAI-compatible server):
//! `llm_judge` reports the model's verdict and reason as `actual`, `semantic_match` the
//! embedding similarity; a failing verdict fails the case, a judge that cannot answer
//! makes it an error, and a runtime with no provider refuses such a suite up front.

use crate::model_openai::model_config;
use crate::support::fake_llm::{self, FakeLlm};
use crate::support::runtime::*;
use serde_json::{Value, json};
use std::time::Duration;

fn suite(judge: &Value, semantic: &Value) -> Value {
    json!({
        "suite": "judged",
        "defaults": {"mocks": {"asaas/create_payment": {"id": "pay_1"}}},
        "cases": [{
            "id": "charge",
            "input": "Charge R$5",
            "model": {"sequence": [
                {"tool_calls": [{"name": "asaas/create_payment", "arguments": {"value": 5}}]},
                {"text": "Charged pay_1"}
            ]},
            "assert": {"contains": "pay_1", "llm_judge": judge, "semantic_match": semantic}
        }]
    })
}

async fn run(api: &Api, body: Value) -> Value {
    let (status, created) = api.post("/v1/evals/runs", body).await;
    assert_eq!(status, 202, "{created}");
    let id = created["run_id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        let (_, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
        if detail["status"] == "completed" {
            return detail["cases"][0].clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("run {id} did not complete");
}

fn embeddings(a: [f64; 2], b: [f64; 2]) -> fake_llm::Answer {
    fake_llm::ok(json!({"object": "list", "data": [
        {"index": 0, "embedding": a}, {"index": 1, "embedding": b}]}))
}

#[tokio::test]
async fn judges_pass_with_the_models_verdict_and_similarity_as_actual() {
    let fake = FakeLlm::start(vec![
        fake_llm::openai(
            Some(r#"{"pass": true, "reason": "it names the payment"}"#),
            &[],
            (50, 9),
        ),
        embeddings([1.0, 0.0], [0.96, 0.28]),
    ])
    .await;
    let handle = server(model_config(&fake)).await;
    let api = Api::new(&handle);
    let record = run(
        &api,
        json!({"suites": [suite(&json!("The answer confirms the payment id"),
                                &json!({"expected": "Payment pay_1 was created", "threshold": 0.9}))]}),
    )
    .await;
    assert_eq!(record["status"], "passed", "{record:#}");
    let assertions = record["assertions"].as_array().unwrap();
    let kinds: Vec<&str> = assertions
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["contains", "llm_judge", "semantic_match"]);
    assert_eq!(
        assertions[1]["expected"],
        "The answer confirms the payment id"
    );
    assert_eq!(
        assertions[1]["actual"],
        json!({"pass": true, "reason": "it names the payment"})
    );
    assert_eq!(assertions[2]["actual"], json!({"similarity": 0.96}));
    assert_eq!(assertions[2]["expected"]["threshold"], 0.9);

    let seen = fake.seen();
    assert_eq!(seen[0].path, "/v1/chat/completions");
    let prompt = seen[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        prompt.contains("Rubric: The answer confirms the payment id"),
        "{prompt}"
    );
    assert!(prompt.contains("Agent answer: Charged pay_1"), "{prompt}");
    assert!(prompt.contains("asaas/create_payment"), "{prompt}");
    assert!(seen[0].body.get("tools").is_none());
    assert_eq!(seen[1].path, "/v1/embeddings");
    assert_eq!(
        seen[1].body,
        json!({"model": "text-embedding-3-small",
               "input": ["Payment pay_1 was created", "Charged pay_1"]})
    );
}

#[tokio::test]
async fn a_failing_verdict_fails_the_case_and_a_judge_outage_errors_it() {
    let fake = FakeLlm::start(vec![
        fake_llm::openai(Some("FAIL: it never says the amount"), &[], (50, 9)),
        embeddings([1.0, 0.0], [0.0, 1.0]),
        fake_llm::error(401, "Incorrect API key provided"),
    ])
    .await;
    let handle = server(model_config(&fake)).await;
    let api = Api::new(&handle);
    let body =
        json!({"suites": [suite(&json!({"rubric": "States the amount"}), &json!("R$5 charged"))]});
    let record = run(&api, body.clone()).await;
    assert_eq!(record["status"], "failed", "{record:#}");
    assert_eq!(record["reason"], "llm_judge: it never says the amount");
    let assertions = record["assertions"].as_array().unwrap();
    assert_eq!(
        assertions[1]["actual"],
        json!({"pass": false, "reason": "it never says the amount"})
    );
    assert_eq!(assertions[2]["pass"], false);
    assert_eq!(
        assertions[2]["message"],
        "semantic_match: similarity 0.000 is under 0.85"
    );
    let record = run(&api, body).await;
    assert_eq!(record["status"], "error", "{record:#}");
    assert_eq!(
        record["reason"],
        "the judge model failed: openai answered 401: Incorrect API key provided"
    );
}

#[tokio::test]
async fn with_no_provider_a_suite_using_judges_is_refused_with_what_to_configure() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let (status, body) = api
        .post(
            "/v1/evals/runs",
            json!({"suites": [suite(&json!("polite"), &json!("hi"))]}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "invalid_suite");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "suite `judged` case `charge` uses llm_judge, which this runtime cannot answer"
        ),
        "{message}"
    );
    assert!(message.contains("--model-base-url"), "{message}");
    // A bad judge spec is a suite error like any other.
    let mut bad = suite(&json!("x"), &json!("y"));
    bad["cases"][0]["assert"]["semantic_match"] = json!({"expected": "y", "threshold": 2});
    let (status, body) = api.post("/v1/evals/runs", json!({"suites": [bad]})).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("threshold 2 is not in (0, 1]"),
        "{body}"
    );
}

#[tokio::test]
async fn judges_replay_from_a_cassette_with_no_provider() {
    let dir = std::env::temp_dir().join(format!(
        "spyglass-judge-cassette-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    let fake = FakeLlm::start(vec![
        fake_llm::openai(Some(r#"{"pass": true, "reason": "ok"}"#), &[], (5, 5)),
        embeddings([1.0, 0.0], [1.0, 0.0]),
    ])
    .await;
    let mut config = model_config(&fake);
    config.models.record_dir = Some(dir.clone());
    let body = json!({"suites": [suite(&json!("polite"), &json!("Charged pay_1"))]});
    let handle = server(config).await;
    let recorded = run(&Api::new(&handle), body.clone()).await;
    assert_eq!(recorded["status"], "passed", "{recorded:#}");
    let mut replay = test_config();
    replay.models.replay_dir = Some(dir.clone());
    let handle = server(replay).await;
    let replayed = run(&Api::new(&handle), body).await;
    assert_eq!(replayed["status"], "passed", "{replayed:#}");
    assert_eq!(replayed["assertions"], recorded["assertions"]);
    assert_eq!(fake.seen().len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_real_model_case_is_priced_from_the_settings_table() {
    let fake = FakeLlm::start(vec![fake_llm::openai(
        Some("Charged pay_1"),
        &[],
        (1_000_000, 500_000),
    )])
    .await;
    let mut config = model_config(&fake);
    config.models.prices.insert(
        "gpt-4o-mini".to_owned(),
        spyglass::runtime::llm::settings::Price {
            input: 0.15,
            output: 0.6,
        },
    );
    let handle = server(config).await;
    let api = Api::new(&handle);
    let record = run(
        &api,
        json!({"suites": [{"suite": "priced", "cases": [{"id": "c", "input": "hi",
            "model": {"provider": "openai"}, "assert": {"contains": "pay_1"}}]}]}),
    )
    .await;
    assert_eq!(record["status"], "passed", "{record:#}");
    assert!(
        (record["cost"].as_f64().unwrap() - 0.45).abs() < 1e-9,
        "{record:#}"
    );
    assert_eq!(record["tokens"]["total"], 1_500_000);
}
