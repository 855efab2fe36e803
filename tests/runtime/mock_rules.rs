//! Mocks that answer by input (`$rules` with an optional `$fallback`) over real HTTP: the
//! rule that matches answers and is named in the call's event and the session's counters,
//! a miss names the closest rule, bad rules are refused at create, counters survive a restart.

use crate::support::runtime::*;
use serde_json::{Value, json};
use std::time::Duration;

const PAY: &str = "asaas/create_payment";

fn rules_mock() -> Value {
    json!({
        PAY: {
            "$rules": [
                {"match": {"value": 5}, "output": {"id": "pay_small"}},
                {"match": {"$.customer.id": "cus_vip", "value": 100}, "output": {"id": "pay_vip"}},
                {"match": {"customer": {"tier": "gold"}}, "output": {"id": "pay_gold"}}
            ]
        },
        "asaas/get_balance": {"balance": 10}
    })
}

fn mock_state<'a>(summary: &'a Value, tool: &str) -> &'a Value {
    summary["mocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool"] == tool)
        .unwrap_or_else(|| panic!("no mock {tool} in {summary}"))
}

#[tokio::test]
async fn the_first_matching_rule_answers_and_its_index_is_in_the_event_and_the_counters() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    let mut ws = observe(&handle, "?since=0").await;
    let id = api.session(rules_mock()).await;
    let created = frames(&mut ws, 1).await.remove(0);
    assert_eq!(
        created["mocks"][0],
        json!({"tool": PAY, "mode": "rules", "entries": 3, "payload": rules_mock()[PAY]}),
        "{created}"
    );
    let cases = [
        (
            json!({"value": 5, "note": "extra keys are fine"}),
            "pay_small",
            0,
        ),
        (json!({"value": 5.0}), "pay_small", 0),
        (
            json!({"value": 100, "customer": {"id": "cus_vip"}}),
            "pay_vip",
            1,
        ),
        (
            json!({"value": 7, "customer": {"tier": "gold", "id": "c"}}),
            "pay_gold",
            2,
        ),
    ];
    for (input, answer, rule) in &cases {
        let (status, body) = api.execute(&id, PAY, input.clone()).await;
        assert_eq!(
            (status, &body["data"]["id"]),
            (200, &json!(answer)),
            "{input}: {body}"
        );
        let event = frames(&mut ws, 1).await.remove(0);
        assert_eq!(event["kind"], "tool.called");
        assert_eq!(event["counter"]["rule"], json!(rule), "{event}");
        assert!(event["counter"].get("fallback").is_none(), "{event}");
    }
    // No rule matches and there is no fallback: tool_not_mocked naming the closest rule
    // (rule 1 holds `value`, misses the customer) and what it missed.
    let (status, body) = api
        .execute(
            &id,
            PAY,
            json!({"value": 100, "customer": {"id": "cus_other"}}),
        )
        .await;
    assert_eq!(
        (status, &body["code"]),
        (422, &json!("tool_not_mocked")),
        "{body}"
    );
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("closest is rule 1"), "{message}");
    assert!(
        message.contains("`$.customer.id` is \"cus_other\", expected \"cus_vip\""),
        "{message}"
    );
    let missed = frames(&mut ws, 1).await.remove(0);
    assert!(missed["counter"].get("rule").is_none(), "{missed}");
    // A static mock of the same session is untouched by the rules.
    let (status, body) = api
        .execute(&id, "asaas/get_balance", json!({"value": 5}))
        .await;
    assert_eq!((status, &body["data"]), (200, &json!({"balance": 10})));

    let (_, read) = api.get(&format!("/v1/sessions/{id}")).await;
    let state = mock_state(&read, PAY);
    assert_eq!(state["mode"], "rules");
    assert_eq!(state["rule_hits"], json!([2, 1, 1]), "{state}");
    assert_eq!(state["counter"]["consumed"], json!(4));
    assert_eq!(state["calls"], json!(5));
    assert!(state.get("fallback_hits").is_none(), "{state}");
    let (_, tools) = api.execute(&id, "codespar_list_tools", json!({})).await;
    assert!(tools.to_string().contains("by input, 3 rules"), "{tools}");
}

#[tokio::test]
async fn the_fallback_answers_what_no_rule_matches_and_is_counted_apart() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    let mut ws = observe(&handle, "?since=0").await;
    let id = api
        .session(json!({PAY: {
            "$rules": [{"match": {"value": 5}, "output": {"id": "pay_5"}}],
            "$fallback": {"id": "pay_other"}
        }}))
        .await;
    let created = frames(&mut ws, 1).await.remove(0);
    assert_eq!(created["mocks"][0]["fallback"], json!(true), "{created}");
    let (status, body) = api.execute(&id, PAY, json!({"value": 6})).await;
    assert_eq!((status, &body["data"]["id"]), (200, &json!("pay_other")));
    let event = frames(&mut ws, 1).await.remove(0);
    assert_eq!(event["counter"]["fallback"], json!(true), "{event}");
    assert!(event["counter"].get("rule").is_none(), "{event}");
    // An input without the key a rule reads falls back too.
    let (status, body) = api.execute(&id, PAY, json!({})).await;
    assert_eq!(
        (status, &body["data"]["id"]),
        (200, &json!("pay_other")),
        "{body}"
    );
    let (status, _) = api.execute(&id, PAY, json!({"value": 5})).await;
    assert_eq!(status, 200);
    let (_, read) = api.get(&format!("/v1/sessions/{id}")).await;
    let state = mock_state(&read, PAY);
    assert_eq!(
        (&state["rule_hits"], &state["fallback_hits"]),
        (&json!([1]), &json!(2)),
        "{state}"
    );
}

#[tokio::test]
async fn bad_rules_are_refused_at_create_naming_the_field() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    let cases = [
        (
            json!({"$rules": {}}),
            "/mocks/asaas~1create_payment/$rules",
            "array",
        ),
        (
            json!({"$rules": []}),
            "/mocks/asaas~1create_payment/$rules",
            "empty",
        ),
        (
            json!({"$rules": [3]}),
            "/mocks/asaas~1create_payment/$rules/0",
            "must be an object",
        ),
        (
            json!({"$rules": [{"match": {}, "output": {}}, {"output": {}}]}),
            "/mocks/asaas~1create_payment/$rules/1/match",
            "needs `match`",
        ),
        (
            json!({"$rules": [{"match": {}, "output": "x"}]}),
            "/mocks/asaas~1create_payment/$rules/0/output",
            "found a string",
        ),
        (
            json!({"$rules": [{"match": {}}]}),
            "/mocks/asaas~1create_payment/$rules/0/output",
            "needs `output`",
        ),
        (
            json!({"$rules": [{"match": {}, "output": {}, "when": 1}]}),
            "/mocks/asaas~1create_payment/$rules/0/when",
            "unknown field `when`",
        ),
        (
            json!({"$rules": [{"match": {"$.a[": 1}, "output": {}}]}),
            "/mocks/asaas~1create_payment/$rules/0/match/$.a[",
            "invalid JSON path",
        ),
        (
            json!({"$rules": [{"match": {}, "output": {}}], "$fallback": [1]}),
            "/mocks/asaas~1create_payment/$fallback",
            "must be an object",
        ),
        (
            json!({"$rules": [{"match": {}, "output": {}}], "id": "pay_1"}),
            "/mocks/asaas~1create_payment/id",
            "only `$rules` and `$fallback`",
        ),
    ];
    for (mock, field, says) in cases {
        let (status, body) = api
            .post(
                "/v1/sessions",
                json!({"servers": ["asaas"], "user_id": "u", "mocks": {PAY: mock}}),
            )
            .await;
        assert_eq!(status, 400, "{mock}: {body}");
        assert_eq!(body["code"], "mocks_invalid", "{body}");
        assert_eq!(body["field"], field, "{mock}: {body}");
        assert!(
            body["message"].as_str().unwrap().contains(says),
            "{mock}: {body}"
        );
    }
    // The size gate runs first on rules as on the other forms.
    let big = "x".repeat(70_000);
    let (status, body) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u", "mocks": {PAY: {
                "$rules": [{"match": {}, "output": {"pad": big}}]
            }}}),
        )
        .await;
    assert_eq!(
        (status, &body["code"]),
        (413, &json!("mocks_payload_too_large"))
    );
    // `CodeSpar` test mode's forms are as they were: an object without `$rules` is static, even with
    // keys named like a rule's.
    let id = api
        .session(json!({PAY: {"match": {"value": 5}, "output": {"id": "x"}}}))
        .await;
    let (status, body) = api.execute(&id, PAY, json!({"value": 1})).await;
    assert_eq!(
        (status, &body["data"]),
        (200, &json!({"match": {"value": 5}, "output": {"id": "x"}}))
    );
}

#[tokio::test]
async fn an_approved_replay_is_answered_by_the_rule_its_input_matches() {
    let handle = policy_server(
        "[[rule]]\nid = \"big\"\ntool = \"*/create_payment\"\naction = \"approval\"\nwhen = \"input.value > 50\"\n",
    )
    .await;
    let api = Api::new(&handle);
    let id = api.session(rules_mock()).await;
    let (status, held) = api
        .execute(
            &id,
            PAY,
            json!({"value": 100, "customer": {"id": "cus_vip"}}),
        )
        .await;
    assert_eq!(status, 202, "{held}");
    let approval = held["approval_id"].as_str().unwrap().to_owned();
    let mut ws = observe(&handle, "").await;
    let (status, decided) = api
        .post(&format!("/v1/approvals/{approval}/approve"), json!({}))
        .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(
        decided["replay"]["result"],
        json!({"id": "pay_vip"}),
        "{decided}"
    );
    let replayed = loop {
        let frame = next_frame(&mut ws, Duration::from_secs(5)).await.unwrap();
        if frame["kind"] == "approval.replayed" {
            break frame;
        }
    };
    assert_eq!(replayed["counter"]["rule"], json!(1), "{replayed}");
    let (_, read) = api.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(mock_state(&read, PAY)["rule_hits"], json!([0, 1, 0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_counters_survive_a_restart_on_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let rt = spyglass::store::open_runtime(test_config(), &path).unwrap();
    let handle = rt.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let api = Api::new(&handle);
    let id = api
        .session(json!({PAY: {
            "$rules": [{"match": {"value": 5}, "output": {"id": "pay_5"}},
                       {"match": {"value": 6}, "output": {"id": "pay_6"}}],
            "$fallback": {"id": "pay_other"}
        }}))
        .await;
    for value in [6, 6, 9] {
        assert_eq!(api.execute(&id, PAY, json!({"value": value})).await.0, 200);
    }
    let (_, before) = api.get(&format!("/v1/sessions/{id}")).await;
    handle.shutdown().await;
    drop(rt);

    let rt = spyglass::store::open_runtime(test_config(), &path).unwrap();
    let handle = rt.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let api = Api::new(&handle);
    let (_, after) = api.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(after, before);
    let state = mock_state(&after, PAY);
    assert_eq!(
        (&state["rule_hits"], &state["fallback_hits"]),
        (&json!([0, 2]), &json!(1)),
        "{state}"
    );
    assert_eq!(api.execute(&id, PAY, json!({"value": 5})).await.0, 200);
    let (_, again) = api.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(mock_state(&again, PAY)["rule_hits"], json!([1, 2]));
    handle.shutdown().await;
}

#[tokio::test]
async fn an_eval_case_with_bad_rules_errors_naming_the_field() {
    let handle = test_server().await;
    let api = Api::new(&handle);
    let suite = r#"
suite = "s"
[[case]]
id = "bad rules"
input = "x"
mocks = { "asaas/pay" = { "$rules" = [ { match = { value = 5 } } ] } }
"#;
    let (status, created) = api
        .post(
            "/v1/evals/runs",
            json!({"suites": [{"file": "s.toml", "text": suite}]}),
        )
        .await;
    assert_eq!(status, 202, "{created}");
    let run = created["run_id"].as_str().unwrap().to_owned();
    let detail = loop {
        let (_, detail) = api.get(&format!("/v1/evals/runs/{run}")).await;
        if detail["status"] == "completed" {
            break detail;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let case = &detail["cases"][0];
    assert_eq!(case["status"], "error", "{detail}");
    let reason = case["reason"].as_str().unwrap();
    assert!(
        reason.contains("(mocks_invalid at /mocks/asaas~1pay/$rules/0/output)"),
        "{reason}"
    );
}
