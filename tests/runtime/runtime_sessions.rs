//! Sessions, create-time gates, execute envelopes and counters, over real HTTP.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::{Policy, RuntimeConfig};

fn policy() -> Policy {
    Policy::from_toml(
        r#"
        [[rule]]
        id = "payments_require_approval"
        tool = "*/create_payment"
        action = "approval"
        when = "input.value > 1000"
        [[rule]]
        id = "no_refunds"
        tool = "*/refund_*"
        action = "deny"
        "#,
    )
    .unwrap()
}

#[tokio::test]
async fn create_gates_run_in_order() {
    let off = server(RuntimeConfig::default()).await;
    let api = Api::new(&off);
    // Gate 1 wins even over an oversized, malformed payload.
    let huge = "x".repeat(70_000);
    let (status, body) = api
        .post(
            "/v1/sessions",
            json!({"servers": [], "user_id": "u", "mocks": {"BAD": huge}}),
        )
        .await;
    assert_eq!(status, 501);
    assert_eq!(body["code"], "mocks_not_permitted");
    assert_eq!(keys(&body), ["code", "message"]);
    // Without mocks a live-mode runtime still creates sessions.
    let (status, _) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "user_id": "u"}),
        )
        .await;
    assert_eq!(status, 201);

    let on = server(test_config()).await;
    let api = Api::new(&on);
    let (status, body) = api
        .post(
            "/v1/sessions",
            json!({"servers": [], "user_id": "u", "mocks": {"BAD": huge}}),
        )
        .await;
    assert_eq!(status, 413);
    assert_eq!(body["code"], "mocks_payload_too_large");

    let cases = [
        (json!({"asaas/x": [{}, 3]}), "/mocks/asaas~1x/1"),
        (
            json!({"asaas__create_payment": {}}),
            "/mocks/asaas__create_payment",
        ),
        (json!({"Asaas/x": {}}), "/mocks/Asaas~1x"),
        (json!({"asaas/x": "text"}), "/mocks/asaas~1x"),
        (json!({"a~b/x": 1}), "/mocks/a~0b~1x"),
        (json!([{"a/b": {}}]), "/mocks"),
        (json!("asaas/x"), "/mocks"),
    ];
    for (mocks, field) in cases {
        let (status, body) = api
            .post(
                "/v1/sessions",
                json!({"servers": [], "user_id": "u", "mocks": mocks}),
            )
            .await;
        assert_eq!(status, 400, "{mocks}");
        assert_eq!(body["code"], "mocks_invalid");
        assert_eq!(body["field"], field, "{mocks}");
        assert_eq!(keys(&body), ["code", "field", "message"]);
    }
    // No session was created by any refused request.
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn broken_bodies_get_json_errors() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let sid = api.session(json!({"asaas/x": {"ok": true}})).await;
    let exec = format!("/v1/sessions/{sid}/execute");
    let cases: Vec<(&str, String)> = vec![
        ("/v1/sessions", "{not json".into()),
        ("/v1/sessions", String::new()),
        ("/v1/sessions", "[1,2]".into()),
        (
            "/v1/sessions",
            r#"{"servers": "asaas", "user_id": "u"}"#.into(),
        ),
        ("/v1/sessions", r#"{"servers": [], "user_id": 5}"#.into()),
        (
            "/v1/sessions",
            r#"{"servers": [], "model": {"sequence": 3}}"#.into(),
        ),
        (&exec, String::new()),
        (&exec, r#"{"input": {}}"#.into()),
        (&exec, r#"{"tool": 7}"#.into()),
        (&exec, r#"{"tool": "asaas/x", "input": "str"}"#.into()),
        (&exec, "\u{0}\u{1}".into()),
    ];
    for (path, body) in cases {
        let (status, reply) = api.post_raw(path, body.clone()).await;
        assert_eq!(status, 400, "{path} {body:?}: {reply}");
        assert_eq!(reply["code"], "invalid_body", "{body:?}");
        assert!(!reply["message"].as_str().unwrap().is_empty());
    }
    let (status, reply) = api
        .post(
            "/v1/sessions",
            json!({"servers": [], "metadata": {"model_script": "{nope"}}),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(reply["field"], "/metadata/model_script");
    // Unknown routes and methods answer in the same JSON shape.
    let (status, reply) = api.get("/v1/nothing").await;
    assert_eq!((status, reply["code"].as_str()), (404, Some("not_found")));
    let (status, reply) = api.post("/v1/approvals", json!({})).await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (405, Some("method_not_allowed"))
    );
    let (status, reply) = api.get("/v1/approvals?status=maybe").await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (400, Some("invalid_query"))
    );
    let (status, reply) = api.get("/v1/events?since=abc").await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (400, Some("invalid_query"))
    );
    // Over 1 MiB: 413 with the JSON shape, not a text rejection.
    let big = format!(
        r#"{{"servers": [], "user_id": "{}"}}"#,
        "u".repeat(1_100_000)
    );
    let (status, reply) = api.post_raw("/v1/sessions", big).await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (413, Some("payload_too_large"))
    );
    // Nothing of the above touched the session.
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(detail["calls"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn session_reads_and_idempotent_close() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas", "zoop", "nuvem-fiscal"], "user_id": "user_test",
                   "metadata": {"suite": "checkout"},
                   "mocks": {"asaas/create_payment": {"id": "pay_1"},
                             "nuvem-fiscal/create_nfe": [{"id": "nfe_1"}, {"id": "nfe_2"}]}}),
        )
        .await;
    assert_eq!(status, 201);
    assert_eq!(
        keys(&created),
        ["created_at", "id", "servers", "status", "user_id"]
    );
    assert_eq!(created["status"], "active");
    assert_eq!(created["servers"], json!(["asaas", "zoop", "nuvem-fiscal"]));
    let sid = created["id"].as_str().unwrap();

    api.execute(sid, "nuvem-fiscal/create_nfe", json!({})).await;
    api.execute(sid, "asaas/missing", json!({})).await;

    let (status, list) = api.get("/v1/sessions").await;
    assert_eq!(status, 200);
    let row = &list["sessions"][0];
    assert_eq!(row["calls"], 2);
    assert_eq!(row["envelopes"], 1);
    let nfe = row["mocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool"] == "nuvem-fiscal/create_nfe")
        .unwrap();
    assert_eq!(nfe["mode"], "stateful");
    assert_eq!(nfe["entries"], 2);
    assert_eq!(nfe["counter"], json!({"consumed": 1, "total": 2}));

    let (status, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(status, 200);
    let calls = detail["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1]["outcome"]["envelope"]["code"], "tool_not_mocked");
    assert_eq!(detail["calls_total"], 2, "{detail}");
    // One top-level `calls` key in the text: a reader that keeps the first of a repeated
    // key (as some do) would otherwise read the count where the list should be.
    let text = reqwest::get(format!("{}/v1/sessions/{sid}", handle.url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mocks = detail["mocks"].as_array().unwrap().len();
    assert_eq!(
        text.matches("\"calls\":").count(),
        1 + mocks,
        "one top-level `calls`, besides each mock's: {text}"
    );
    let typed: spyglass::protocol::rest::SessionDetail = serde_json::from_str(&text).unwrap();
    assert_eq!((typed.summary.calls, typed.calls.len()), (2, 2));

    let (status, conns) = api.get(&format!("/v1/sessions/{sid}/connections")).await;
    assert_eq!(status, 200);
    let servers: Vec<&str> = conns["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(servers, ["asaas", "zoop", "nuvem-fiscal"]);
    assert_eq!(
        keys(&conns["servers"][0]),
        [
            "auth_type",
            "category",
            "connected",
            "country",
            "id",
            "name"
        ]
    );
    let tools: Vec<&str> = conns["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "asaas/create_payment",
            "nuvem-fiscal/create_nfe",
            "codespar_list_tools"
        ]
    );
    assert_eq!(
        keys(&conns["tools"][0]),
        ["description", "input_schema", "name", "server"]
    );
    assert_eq!(conns["tools"][1]["server"], "nuvem-fiscal");

    // DELETE with the SDK's empty JSON body, twice: 204 both times, one session.closed.
    for _ in 0..2 {
        let (status, body) = api.delete(&format!("/v1/sessions/{sid}")).await;
        assert_eq!((status, body), (204, Value::Null));
    }
    let closed = handle
        .runtime()
        .events_since(0, 100)
        .into_iter()
        .filter(|f| f.event.kind() == "session.closed")
        .count();
    assert_eq!(closed, 1);
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(list["sessions"][0]["status"], "closed");
    let (status, body) = api.execute(sid, "asaas/create_payment", json!({})).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
    let (status, body) = api.get("/v1/sessions/ses_nope").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
    let (status, _) = api.delete("/v1/sessions/ses_nope").await;
    assert_eq!(status, 204, "DELETE is idempotent, unknown ids included");
}

#[tokio::test]
async fn session_created_event_declares_mocks() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({"asaas/create_payment": {"id": "p"}, "a/b": [{}, {}, {}]}))
        .await;
    let frames = handle.runtime().events_since(0, 10);
    let created = spyglass::protocol::encode(&frames[0]);
    let created: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(created["kind"], "session.created");
    assert_eq!(created["sessionId"], sid.as_str());
    assert_eq!(created["seq"], 1);
    assert_eq!(created["project"], "default");
    // Each mock carries its payload as declared, for the inspector's Mocks pane.
    assert_eq!(
        created["mocks"],
        json!([{"tool": "a/b", "mode": "stateful", "entries": 3, "payload": [{}, {}, {}]},
               {"tool": "asaas/create_payment", "mode": "static", "entries": 1,
                "payload": {"id": "p"}}])
    );
    // A payload over 16 KiB is named by its size only.
    let big = "b".repeat(20_000);
    api.session(json!({"asaas/big": {"blob": big}})).await;
    let frames = handle.runtime().events_since(0, 10);
    let created: Value =
        serde_json::from_str(&spyglass::protocol::encode(frames.last().unwrap())).unwrap();
    assert_eq!(
        created["mocks"][0],
        json!({"tool": "asaas/big", "mode": "static", "entries": 1, "payloadBytes": 20_011}),
        "{created}"
    );
    // Session reads stay as they were: counters, no payloads.
    let (_, read) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert!(
        read["mocks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m.get("payload").is_none()),
        "{read}"
    );
}

#[tokio::test]
async fn execute_paths_and_envelopes() {
    let handle = server(RuntimeConfig {
        policy: policy(),
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let sid = api
        .session(json!({
            "asaas/create_payment": {"id": "pay_test_42", "status": "PENDING"},
            "nuvem-fiscal/create_nfe": [{"id": "nfe_1"}, {"id": "nfe_2"}],
            "asaas/refund_payment": {"id": "ref_1"},
        }))
        .await;

    // Static: the same object on every call.
    for _ in 0..3 {
        let (status, body) = api
            .execute(&sid, "asaas/create_payment", json!({"value": 100}))
            .await;
        assert_eq!(status, 200);
        assert_eq!(
            keys(&body),
            [
                "called_at",
                "data",
                "duration",
                "error",
                "server",
                "success",
                "tool",
                "tool_call_id"
            ]
        );
        assert_eq!(body["success"], true);
        assert_eq!(
            body["data"],
            json!({"id": "pay_test_42", "status": "PENDING"})
        );
        assert_eq!(body["server"], "asaas");
        assert_eq!(body["tool"], "asaas/create_payment");
        assert_eq!(body["error"], Value::Null);
        assert!(body["tool_call_id"].as_str().unwrap().starts_with("call_"));
    }
    // Stateful: entry N on call N, then exhausted.
    for want in ["nfe_1", "nfe_2"] {
        let (status, body) = api
            .execute(&sid, "nuvem-fiscal/create_nfe", json!({}))
            .await;
        assert_eq!(status, 200);
        assert_eq!(body["data"]["id"], want);
    }
    let (status, body) = api
        .execute(&sid, "nuvem-fiscal/create_nfe", json!({}))
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["code"], "mocks_exhausted");
    assert_eq!(keys(&body), ["code", "message"]);

    // Not mocked: a miss, the server__tool form and an unknown server.
    for tool in [
        "asaas/create_refund",
        "asaas__create_payment",
        "nowhere/create_payment",
    ] {
        let (status, body) = api.execute(&sid, tool, json!({})).await;
        assert_eq!(status, 422, "{tool}");
        assert_eq!(body["code"], "tool_not_mocked");
        assert_eq!(body["tool_name"], tool);
        assert_eq!(keys(&body), ["code", "message", "tool_name"]);
    }
    // `mocks_engine_error` (422) is tested in wire_spec.rs: an empty array, which gave it
    // here, is refused at create now.

    // Policy deny precedes the mock store: 403 even though the tool is mocked.
    let (status, body) = api.execute(&sid, "asaas/refund_payment", json!({})).await;
    assert_eq!(status, 403);
    assert_eq!(body["code"], "policy_denied");
    assert_eq!(body["rule_id"], "no_refunds");
    assert_eq!(keys(&body), ["code", "message", "rule_id"]);

    // Approval: 202, counter untouched.
    let (status, body) = api
        .execute(&sid, "asaas/create_payment", json!({"value": 5000}))
        .await;
    assert_eq!(status, 202);
    assert_eq!(body["code"], "approval_required");
    assert!(body["approval_id"].as_str().unwrap().starts_with("apr_"));
    assert!(chrono::DateTime::parse_from_rfc3339(body["expires_at"].as_str().unwrap()).is_ok());
    // The envelope at the top level, and again as the ToolResult's data for the SDK.
    assert_eq!(
        keys(&body),
        [
            "approval_id",
            "code",
            "data",
            "error",
            "expires_at",
            "message",
            "server",
            "success",
            "tool"
        ]
    );
    assert_eq!(
        keys(&body["data"]),
        ["approval_id", "code", "expires_at", "message"]
    );

    // The built-in bypasses policy and the mock store.
    let (status, body) = api.execute(&sid, "codespar_list_tools", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(body["success"], true);
    assert_eq!(body["data"]["tools"].as_array().unwrap().len(), 4);

    let (_, list) = api.get("/v1/sessions").await;
    let mocks = list["sessions"][0]["mocks"].as_array().unwrap().clone();
    let counter = |tool: &str| {
        mocks
            .iter()
            .find(|m| m["tool"] == tool)
            .map(|m| m["counter"].clone())
            .unwrap()
    };
    // Three served; the approval-held call did not count.
    assert_eq!(counter("asaas/create_payment"), json!({"consumed": 3}));
    assert_eq!(
        counter("nuvem-fiscal/create_nfe"),
        json!({"consumed": 2, "total": 2})
    );
    // The denied call did not advance the refund mock.
    assert_eq!(counter("asaas/refund_payment"), json!({"consumed": 0}));

    // Every call became a tool.called event with its outcome and counter.
    let called: Vec<_> = handle
        .runtime()
        .events_since(0, 1000)
        .into_iter()
        .filter(|f| f.event.kind() == "tool.called")
        .map(|f| serde_json::from_str::<Value>(&spyglass::protocol::encode(&f)).unwrap())
        .collect();
    assert_eq!(called.len(), 12);
    let exhausted = &called[5];
    assert_eq!(exhausted["outcome"]["envelope"]["code"], "mocks_exhausted");
    assert_eq!(exhausted["counter"], json!({"consumed": 2, "total": 2}));
    assert_eq!(exhausted["source"], "execute");
    assert!(exhausted["startedAt"].is_string());
    assert!(exhausted["callId"].as_str().unwrap().starts_with("call_"));
}

#[tokio::test]
async fn no_mocks_at_all_means_tool_not_mocked() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    for mocks in [Value::Null, json!({})] {
        let sid = api.session(mocks).await;
        let (status, body) = api
            .execute(&sid, "asaas/create_payment", json!({"value": 1}))
            .await;
        assert_eq!(status, 422);
        assert_eq!(body["code"], "tool_not_mocked");
        assert_eq!(body["tool_name"], "asaas/create_payment");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_consume_is_exact() {
    const K: usize = 10;
    let handle = server(test_config()).await;
    let api = std::sync::Arc::new(Api::new(&handle));
    let entries: Vec<Value> = (0..K).map(|i| json!({"n": i})).collect();
    let sid = api.session(json!({"asaas/create_nfe": entries})).await;
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let api = api.clone();
        let sid = sid.clone();
        tasks.push(tokio::spawn(async move {
            api.execute(&sid, "asaas/create_nfe", json!({})).await
        }));
    }
    let mut served = Vec::new();
    let mut exhausted = 0;
    for task in tasks {
        let (status, body) = task.await.unwrap();
        match status {
            200 => served.push(body["data"]["n"].as_u64().unwrap()),
            422 => {
                assert_eq!(body["code"], "mocks_exhausted");
                exhausted += 1;
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    served.sort_unstable();
    assert_eq!(
        served,
        (0..K as u64).collect::<Vec<_>>(),
        "each entry exactly once"
    );
    assert_eq!(exhausted, 64 - K);
}

/// A session's call history keeps the newest `retained_calls` calls whole, each as its
/// execute answered it, even once the event log's smaller ring has let those events go.
#[tokio::test]
async fn call_history_keeps_the_newest_calls_past_the_event_ring() {
    let handle = server(RuntimeConfig {
        retained_calls: 3,
        retained_events: 2,
        ..test_config()
    })
    .await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"],
                   "mocks": {"asaas/create_customer": {"id": "cus_1", "name": "Ana"}}}),
        )
        .await;
    assert_eq!(status, 201);
    let sid = created["id"].as_str().unwrap();
    let mut answers = vec![];
    for n in 0..5 {
        let (status, answer) = api
            .execute(
                sid,
                "asaas/create_customer",
                json!({"n": n, "note": "é \"q\""}),
            )
            .await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["data"], json!({"id": "cus_1", "name": "Ana"}));
        answers.push(answer);
    }

    let (status, list) = api.get("/v1/sessions").await;
    assert_eq!(status, 200);
    assert_eq!(
        list["sessions"][0]["calls"], 5,
        "the count is every call made"
    );

    let (status, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(status, 200);
    let calls = detail["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3, "{detail}");
    for (call, (n, answer)) in calls.iter().zip(answers.iter().enumerate().skip(2)) {
        assert_eq!(call["call_id"], answer["tool_call_id"]);
        assert_eq!(call["tool"], "asaas/create_customer");
        assert_eq!(call["input"], json!({"n": n, "note": "é \"q\""}));
        assert_eq!(
            call["outcome"],
            json!({"result": {"id": "cus_1", "name": "Ana"}})
        );
        assert_eq!(call["started_at"], answer["called_at"]);
    }
    // The log kept only its last two events; the history did not depend on them.
    let (status, events) = api.get("/v1/events?since=0").await;
    assert_eq!(status, 200);
    assert_eq!(events["events"].as_array().unwrap().len(), 2, "{events}");
}

/// An execute whose input is not an object is refused with the kind it was and the
/// field, and leaves the session as it was: no call counted, no entry consumed.
#[tokio::test]
async fn execute_names_the_kind_of_a_non_object_input_and_changes_nothing() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let (status, created) = api
        .post(
            "/v1/sessions",
            json!({"servers": ["asaas"], "mocks": {"asaas/x": [{"n": 1}]}}),
        )
        .await;
    assert_eq!(status, 201);
    let sid = created["id"].as_str().unwrap();
    let path = format!("/v1/sessions/{sid}/execute");
    let cases = [
        (
            r#"{"tool": "asaas/x", "input":   [1, {"a": 2}] }"#,
            "an array",
        ),
        (r#"{"tool": "asaas/x", "input": "str"}"#, "a string"),
        (r#"{"tool": "asaas/x", "input": -1.5e3}"#, "a number"),
        (r#"{"tool": "asaas/x", "input": false}"#, "a boolean"),
        (r#"{"tool": "asaas/x", "input": null}"#, "null"),
    ];
    for (body, kind) in cases {
        let (status, reply) = api.post_raw(&path, body.to_owned()).await;
        assert_eq!(status, 400, "{body}: {reply}");
        assert_eq!(reply["code"], "invalid_body");
        assert_eq!(reply["field"], "/input");
        assert_eq!(
            reply["message"],
            format!("input must be an object, found {kind}"),
            "{body}"
        );
    }
    // Broken JSON inside the input is a broken body, not a kind.
    let (status, reply) = api
        .post_raw(&path, r#"{"tool": "asaas/x", "input": {"a": }"#.to_owned())
        .await;
    assert_eq!(
        (status, reply["code"].as_str()),
        (400, Some("invalid_body"))
    );

    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(detail["calls"], json!([]));
    assert_eq!(
        detail["mocks"][0]["counter"],
        json!({"consumed": 0, "total": 1})
    );
    let (_, list) = api.get("/v1/sessions").await;
    assert_eq!(list["sessions"][0]["calls"], 0);
    // The one entry is still there to be served, to an input sent with spacing.
    let (status, reply) = api
        .post_raw(
            &path,
            r#"{"tool": "asaas/x", "input":  { "k" : 1 } }"#.to_owned(),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["data"], json!({"n": 1}));
}
