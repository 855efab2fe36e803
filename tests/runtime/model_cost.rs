//! What a run cost: `agent.completed` / `agent.failed` carry `cost` from the runtime's
//! price table (absent, with `costMissing` saying why, when the model has no price or
//! the provider reported no usage), and `GET /v1/sessions/:id` carries the last run and
//! the runs added up. A fake OpenAI-compatible provider on loopback plays the model.

use super::model_openai::{events, model_config, of_kind, openai_session};
use crate::support::fake_llm::{self, FakeLlm};
use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::RuntimeConfig;
use spyglass::runtime::llm::settings::Price;

fn priced(config: &mut RuntimeConfig) {
    config.models.prices.insert(
        "gpt-4o-mini".to_owned(),
        Price {
            input: 0.15,
            output: 0.6,
        },
    );
}

fn close(actual: &Value, expected: f64) -> bool {
    actual
        .as_f64()
        .is_some_and(|a| (a - expected).abs() < 1e-12)
}

#[tokio::test]
async fn a_priced_model_run_says_what_it_cost_on_the_event_and_the_session() {
    let call = [("call_1", "asaas__create_payment", json!({"value": 5}))];
    let fake = FakeLlm::start(vec![
        fake_llm::openai(None, &call, (1200, 40)),
        fake_llm::openai(Some("Charged pay_1"), &[], (1300, 20)),
        fake_llm::openai(Some("Again"), &[], (2000, 100)),
    ])
    .await;
    let mut config = model_config(&fake);
    priced(&mut config);
    let handle = server(config).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai:gpt-4o-mini")).await;
    let (status, body) = api.send(&sid, "Charge R$5").await;
    assert_eq!(status, 200, "{body}");

    let all = events(&handle);
    let done = of_kind(&all, "agent.completed");
    assert_eq!(
        done[0]["tokens"],
        json!({"prompt": 2500, "completion": 60, "total": 2560})
    );
    // 2500 × $0.15/M + 60 × $0.60/M
    let first = (2500.0 * 0.15 + 60.0 * 0.6) / 1e6;
    assert!(close(&done[0]["cost"], first), "{}", done[0]);
    assert!(done[0].get("costMissing").is_none(), "{}", done[0]);

    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    let last = &detail["last_run"];
    assert_eq!(
        (&last["provider"], &last["model"], &last["failed"]),
        (&json!("openai"), &json!("gpt-4o-mini"), &json!(false)),
        "{detail:#}"
    );
    assert_eq!(last["tokens"]["total"], 2560);
    assert!(close(&last["cost"], first), "{detail:#}");
    assert_eq!(detail["runs"]["runs"], 1);

    let (status, _) = api.send(&sid, "Again").await;
    assert_eq!(status, 200);
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    let second = (2000.0 * 0.15 + 100.0 * 0.6) / 1e6;
    assert!(close(&detail["last_run"]["cost"], second), "{detail:#}");
    assert_eq!(detail["runs"]["runs"], 2);
    assert_eq!(detail["runs"]["tokens"]["total"], 2560 + 2100);
    assert!(close(&detail["runs"]["cost"], first + second), "{detail:#}");
    // The typed reader the inspector uses reads it back.
    let typed: spyglass::protocol::rest::SessionDetail =
        serde_json::from_value(detail.clone()).unwrap();
    assert_eq!(typed.runs.map(|r| r.runs), Some(2));
}

#[tokio::test]
async fn a_model_with_no_price_has_no_cost_and_says_so_never_zero() {
    let fake = FakeLlm::start(vec![
        fake_llm::openai(Some("Hi"), &[], (10, 2)),
        fake_llm::openai(Some("Hi"), &[], (10, 2)),
    ])
    .await;
    let mut config = model_config(&fake);
    priced(&mut config);
    let handle = server(config).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai:o3-mini")).await;
    assert_eq!(api.send(&sid, "hi").await.0, 200);
    let all = events(&handle);
    let done = of_kind(&all, "agent.completed");
    assert!(done[0].get("cost").is_none(), "{}", done[0]);
    assert_eq!(
        done[0]["costMissing"],
        "no price for model `o3-mini` (--model-prices)"
    );
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert!(detail["last_run"].get("cost").is_none(), "{detail:#}");
    assert!(detail["runs"].get("cost").is_none(), "{detail:#}");
    assert_eq!(
        detail["runs"]["cost_missing"],
        "run 1: no price for model `o3-mini` (--model-prices)"
    );
}

#[tokio::test]
async fn a_failed_run_is_priced_for_the_steps_the_provider_reported() {
    let call = [("call_1", "asaas__create_payment", json!({"value": 5}))];
    let fake = FakeLlm::start(vec![
        fake_llm::openai(None, &call, (1000, 10)),
        fake_llm::error(400, "context_length_exceeded"),
    ])
    .await;
    let mut config = model_config(&fake);
    priced(&mut config);
    let handle = server(config).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai")).await;
    assert_eq!(api.send(&sid, "go").await.0, 503);
    let all = events(&handle);
    let failed = of_kind(&all, "agent.failed");
    assert_eq!(failed[0]["tokens"]["total"], 1010);
    assert!(
        close(&failed[0]["cost"], (1000.0 * 0.15 + 10.0 * 0.6) / 1e6),
        "{}",
        failed[0]
    );
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(detail["last_run"]["failed"], true);

    // Failing before any answer: no usage was reported, so there is no cost to tell.
    let fake = FakeLlm::start(vec![fake_llm::error(401, "bad key")]).await;
    let mut config = model_config(&fake);
    priced(&mut config);
    let handle = server(config).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai")).await;
    assert_eq!(api.send(&sid, "go").await.0, 503);
    let all = events(&handle);
    let failed = of_kind(&all, "agent.failed");
    assert!(failed[0].get("cost").is_none(), "{}", failed[0]);
    assert_eq!(
        failed[0]["costMissing"],
        "the run ended before the provider reported any token usage"
    );
}

#[tokio::test]
async fn usage_the_provider_did_not_report_is_not_priced_from_a_guess() {
    let mut answer = fake_llm::openai(Some("Hi"), &[], (10, 2));
    if let fake_llm::Answer::Json { body, .. } = &mut answer {
        body.as_object_mut().unwrap().remove("usage");
    }
    let fake = FakeLlm::start(vec![answer]).await;
    let mut config = model_config(&fake);
    priced(&mut config);
    let handle = server(config).await;
    let api = Api::new(&handle);
    let sid = openai_session(&api, json!("openai")).await;
    assert_eq!(api.send(&sid, "hi").await.0, 200);
    let all = events(&handle);
    let done = of_kind(&all, "agent.completed");
    assert!(done[0].get("cost").is_none(), "{}", done[0]);
    assert_eq!(
        done[0]["costMissing"],
        "the provider reported no token usage for step 0"
    );
}

#[tokio::test]
async fn the_scripted_model_costs_nothing() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u"}),
        )
        .await;
    assert_eq!(status, 201);
    let sid = created["id"].as_str().unwrap();
    assert_eq!(api.send(sid, "hi").await.0, 200);
    let all = events(&handle);
    let done = of_kind(&all, "agent.completed");
    assert_eq!(done[0]["cost"], json!(0.0));
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(detail["last_run"]["provider"], "fake");
    assert_eq!(detail["last_run"]["cost"], json!(0.0));
}

/// Runs `suites` through `POST /v1/evals/runs` and returns every case record.
async fn eval_cases(api: &Api, suites: Value) -> Vec<Value> {
    let (status, created) = api.post("/v1/evals/runs", json!({"suites": suites})).await;
    assert_eq!(status, 202, "{created}");
    let id = created["run_id"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        let (_, detail) = api.get(&format!("/v1/evals/runs/{id}")).await;
        if detail["status"] == "completed" {
            return detail["cases"].as_array().unwrap().clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("run {id} did not complete");
}

fn max_cost_case(id: &str, model: &str, max_cost: f64) -> Value {
    json!({"id": id, "input": "hi", "model": {"provider": model},
           "assert": {"contains": "Hi", "max_cost": max_cost}})
}

#[tokio::test]
async fn max_cost_holds_fails_with_expected_and_actual_and_errors_without_a_price() {
    let fake = FakeLlm::start(vec![
        fake_llm::openai(Some("Hi"), &[], (20_000, 1_000)),
        fake_llm::openai(Some("Hi"), &[], (20_000, 1_000)),
        fake_llm::openai(Some("Hi"), &[], (20_000, 1_000)),
    ])
    .await;
    let mut config = model_config(&fake);
    priced(&mut config);
    let handle = server(config).await;
    let api = Api::new(&handle);
    let cases = eval_cases(
        &api,
        json!([{"suite": "budget", "cases": [
            max_cost_case("within", "openai:gpt-4o-mini", 0.01),
            max_cost_case("over", "openai:gpt-4o-mini", 0.001),
            max_cost_case("unpriced", "openai:o3-mini", 0.01),
        ]}]),
    )
    .await;
    let by_id = |id: &str| {
        cases
            .iter()
            .find(|c| c["case"] == id)
            .unwrap_or_else(|| panic!("{id} in {cases:#?}"))
            .clone()
    };
    // 20k in × $0.15/M + 1k out × $0.60/M = $0.0036
    let cost = (20_000.0 * 0.15 + 1_000.0 * 0.6) / 1e6;
    let within = by_id("within");
    assert_eq!(within["status"], "passed", "{within:#}");
    let check = &within["assertions"][1];
    assert_eq!(
        (&check["kind"], &check["expected"]),
        (&json!("max_cost"), &json!(0.01))
    );
    assert!(close(&check["actual"], cost), "{check}");
    assert!(close(&within["cost"], cost), "{within:#}");

    let over = by_id("over");
    assert_eq!(over["status"], "failed", "{over:#}");
    assert_eq!(over["reason"], "max_cost: cost $0.0036, limit $0.001");
    assert!(close(&over["assertions"][1]["actual"], cost));

    let unpriced = by_id("unpriced");
    assert_eq!(unpriced["status"], "error", "{unpriced:#}");
    let why = "max_cost: cannot be checked: no price for model `o3-mini` (--model-prices)";
    assert_eq!(unpriced["reason"], why);
    let check = &unpriced["assertions"][1];
    assert_eq!(check["status"], "errored", "{check}");
    assert_eq!(check["pass"], false);
    assert_eq!(check["message"], why);
    assert!(check["actual"].is_null(), "{check}");
}

#[tokio::test]
async fn a_broken_max_cost_is_refused_naming_the_file_case_and_field() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    for (value, found) in [
        (json!(-0.01), "found -0.01"),
        (json!("0.01"), "found a string"),
        (json!(null), "found null (nan and inf are not amounts)"),
    ] {
        let (status, body) = api
            .post(
                "/v1/evals/runs",
                json!({"suites": [{"suite": "budget", "cases": [
                    {"id": "c", "input": "hi", "assert": {"max_cost": value}}]}]}),
            )
            .await;
        assert_eq!(status, 400, "{value}: {body}");
        assert_eq!(body["code"], "invalid_suite", "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("case \"c\": assert.max_cost: expected US dollars as a number, 0 or more (like 0.01)")
                && message.ends_with(found),
            "{value}: {message}"
        );
    }
}
