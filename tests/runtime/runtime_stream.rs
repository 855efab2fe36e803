//! The observer stream over a real WebSocket: replay then live with no loss and no
//! duplicate, resume across a server restart, gaps, filters, pings; and the REST twins
//! `GET /v1/events` and `POST /v1/events` (ingest of seed-001 agent events).

use crate::support::runtime::*;
use futures_util::StreamExt;
use serde_json::{Value, json};
use spyglass::protocol::Event;
use spyglass::protocol::events::SessionClosed;
use spyglass::runtime::RuntimeConfig;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

fn seqs(frames: &[Value]) -> Vec<u64> {
    frames.iter().map(|f| f["seq"].as_u64().unwrap()).collect()
}

fn closed() -> Event {
    Event::SessionClosed(SessionClosed { reason: None })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_then_live_has_no_loss_and_no_duplicate() {
    let handle = server(test_config()).await;
    let rt = handle.runtime();
    for _ in 0..50 {
        rt.emit(None, closed());
    }
    // A producer keeps emitting while subscribers join at different points.
    let producer = {
        let rt = rt.clone();
        tokio::spawn(async move {
            for i in 0..400 {
                rt.emit(None, closed());
                if i % 20 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    let mut from_start = observe(&handle, "?since=0").await;
    let mut from_middle = observe(&handle, "?since=25").await;
    producer.await.unwrap();
    let all = frames(&mut from_start, 450).await;
    assert_eq!(seqs(&all), (1..=450).collect::<Vec<_>>());
    let tail = frames(&mut from_middle, 425).await;
    assert_eq!(seqs(&tail), (26..=450).collect::<Vec<_>>());
    // And nothing more (no duplicate at the end).
    assert!(
        next_frame(&mut from_start, Duration::from_millis(200))
            .await
            .is_none()
    );
    assert_eq!(all[0]["kind"], "session.closed");
    assert!(all[0]["ts"].is_string());
}

#[tokio::test]
async fn live_only_without_since() {
    let handle = server(test_config()).await;
    let rt = handle.runtime();
    rt.emit(None, closed());
    let mut ws = observe(&handle, "").await;
    rt.emit(None, closed());
    let frame = next_frame(&mut ws, Duration::from_secs(5)).await.unwrap();
    assert_eq!(frame["seq"], 2);
}

#[tokio::test]
async fn restart_resumes_from_the_same_log() {
    let handle = crate::support::runtime::rebindable_server(test_config()).await;
    let addr = handle.addr;
    let api = Api::new(&handle);
    let sid = api.session(json!({"asaas/x": {"ok": 1}})).await;
    api.execute(&sid, "asaas/x", json!({})).await;
    let mut ws = observe(&handle, "?since=0").await;
    let before = frames(&mut ws, 2).await;
    assert_eq!(seqs(&before), [1, 2]);

    let rt = handle.runtime();
    handle.shutdown().await;
    // The open WebSocket is closed by the shutdown, not left hanging.
    assert!(next_frame(&mut ws, Duration::from_secs(5)).await.is_none());
    rt.emit(Some(sid.clone()), closed());

    let handle = rt.serve(addr).await.unwrap();
    assert_eq!(handle.addr, addr);
    let api = Api::new(&handle);
    // Sessions and counters survived the restart.
    let (status, _) = api.execute(&sid, "asaas/x", json!({})).await;
    assert_eq!(status, 200);
    let (_, detail) = api.get(&format!("/v1/sessions/{sid}")).await;
    assert_eq!(detail["mocks"][0]["counter"]["consumed"], 2);
    let mut ws = observe(&handle, "?since=2").await;
    let after = frames(&mut ws, 2).await;
    assert_eq!(seqs(&after), [3, 4]);
    assert_eq!(after[0]["sessionId"], sid.as_str());
    assert_eq!(after[1]["kind"], "tool.called");
    handle.shutdown().await;
}

#[tokio::test]
async fn gap_when_the_log_no_longer_holds_since() {
    let handle = server(RuntimeConfig {
        retained_events: 5,
        ..test_config()
    })
    .await;
    let rt = handle.runtime();
    for _ in 0..20 {
        rt.emit(None, closed());
    }
    let mut ws = observe(&handle, "?since=0").await;
    let got = frames(&mut ws, 6).await;
    assert_eq!(got[0]["kind"], "stream.gap");
    assert_eq!(
        (got[0]["from"].as_u64(), got[0]["to"].as_u64()),
        (Some(1), Some(15))
    );
    assert_eq!(got[0]["seq"], 15);
    assert_eq!(seqs(&got[1..]), [16, 17, 18, 19, 20]);
    // Inside the retained window there is no gap.
    let mut ws = observe(&handle, "?since=17").await;
    assert_eq!(seqs(&frames(&mut ws, 3).await), [18, 19, 20]);

    let api = Api::new(&handle);
    let (status, page) = api.get("/v1/events?since=3&limit=2").await;
    assert_eq!(status, 200);
    assert_eq!(page["gap"], json!({"from": 4, "to": 15}));
    assert_eq!(seqs(page["events"].as_array().unwrap()), [16, 17]);
    assert_eq!(page["next"], 17);
    let (_, page) = api.get("/v1/events?since=17").await;
    assert_eq!(seqs(page["events"].as_array().unwrap()), [18, 19, 20]);
    assert!(page.get("gap").is_none());
    let (_, mut page) = api.get("/v1/events?since=20").await;
    // Every page names its stream (the epoch: see tests/restart.rs).
    let epoch = page.as_object_mut().unwrap().remove("epoch").unwrap();
    assert!(epoch.as_str().unwrap().starts_with("ep_"), "{epoch}");
    assert_eq!(page, json!({"events": [], "next": 20}));
}

#[tokio::test]
async fn a_lagging_subscriber_gets_a_gap_and_continues() {
    let handle = server(RuntimeConfig {
        retained_events: 50,
        subscriber_queue: 4,
        ..test_config()
    })
    .await;
    let rt = handle.runtime();
    let mut ws = observe(&handle, "").await;
    // On this single-threaded test runtime the subscriber cannot run while we emit, so
    // it falls far behind its 4-event queue and the 50-event log.
    for _ in 0..5000 {
        rt.emit(None, closed());
    }
    let mut covered = 0u64;
    let mut last = 0u64;
    let mut gaps = 0;
    while last < 5000 {
        let frame = next_frame(&mut ws, Duration::from_secs(5)).await.unwrap();
        if frame["kind"] == "stream.gap" {
            gaps += 1;
            assert_eq!(frame["from"].as_u64().unwrap(), last + 1);
            covered += frame["to"].as_u64().unwrap() - last;
            last = frame["to"].as_u64().unwrap();
        } else {
            let seq = frame["seq"].as_u64().unwrap();
            assert_eq!(seq, last + 1, "no silent loss, no duplicate");
            covered += 1;
            last = seq;
        }
    }
    assert!(gaps >= 1);
    assert_eq!(covered, 5000, "every seq is an event or inside a gap");
    // Still live afterwards.
    rt.emit(None, closed());
    let frame = next_frame(&mut ws, Duration::from_secs(5)).await.unwrap();
    assert_eq!(frame["seq"], 5001);
}

#[tokio::test]
async fn filters_by_session_and_kind() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let a = api.session(json!({"asaas/x": {"ok": 1}})).await;
    let b = api.session(json!({"asaas/x": {"ok": 2}})).await;
    api.execute(&a, "asaas/x", json!({})).await;
    api.execute(&b, "asaas/x", json!({})).await;
    api.delete(&format!("/v1/sessions/{b}")).await;
    let mut ws = observe(&handle, &format!("?since=0&session={b}")).await;
    let got = frames(&mut ws, 3).await;
    assert!(got.iter().all(|f| f["sessionId"] == b.as_str()));
    let kinds: Vec<&str> = got.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["session.created", "tool.called", "session.closed"]);
    let mut ws = observe(&handle, "?since=0&kinds=tool.called,session.closed").await;
    let got = frames(&mut ws, 3).await;
    let kinds: Vec<&str> = got.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tool.called", "tool.called", "session.closed"]);
    assert!(
        next_frame(&mut ws, Duration::from_millis(200))
            .await
            .is_none()
    );
}

#[tokio::test]
async fn pings_keep_the_stream_alive() {
    let handle = server(RuntimeConfig {
        ping_interval: Duration::from_millis(100),
        ..test_config()
    })
    .await;
    let mut ws = observe(&handle, "").await;
    let msg = tokio::time::timeout(Duration::from_secs(3), ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(msg, Message::Ping(_)), "{msg:?}");
}

#[tokio::test]
async fn observe_without_upgrade_is_a_json_error() {
    let handle = server(test_config()).await;
    let (status, body) = Api::new(&handle).get("/v1/observe").await;
    assert_eq!(status, 426);
    assert_eq!(body["code"], "websocket_required");
    let (status, body) = Api::new(&handle).get("/v1/observe?since=x").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_query"))
    );
}

/// JSON equality with numbers compared by value (`12` and `12.0` are the same duration).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Seed-001 agent events exactly as that SDK's observer hands them out: no seq, no ts.
fn seed_001_events() -> Vec<Value> {
    let tool_call = json!({"id": "t1", "name": "lookup", "args": {"id": 42},
                           "result": {"answer": 42}, "duration": 12, "needsApproval": false});
    let step = json!({"iteration": 0, "model": "gpt-4o-mini",
                      "tokens": {"prompt": 20, "completion": 5, "total": 25},
                      "finishReason": "tool_calls", "toolCalls": [tool_call]});
    vec![
        json!({"kind": "agent.step.completed", "agentName": "SupportAgent", "model": "gpt-4o-mini",
               "provider": "openai", "iteration": 0, "step": step,
               "tokens": {"prompt": 20, "completion": 5, "total": 25}, "duration": 340,
               "streaming": false, "conversationId": "conv_1"}),
        json!({"kind": "agent.completed", "agentName": "SupportAgent", "model": "gpt-4o-mini",
               "provider": "openai", "input": "What is 42?", "output": "The answer is 42.",
               "steps": [step], "tokens": {"prompt": 40, "completion": 12, "total": 52},
               "duration": 800, "finishReason": "stop", "streaming": false,
               "conversationId": "conv_1", "failoverAttempts": 0}),
        json!({"kind": "agent.failed", "agentName": "SupportAgent", "model": "gpt-4o-mini",
               "provider": "openai", "input": "hi", "output": null, "steps": [],
               "tokens": {"prompt": 0, "completion": 0, "total": 0}, "duration": 3,
               "finishReason": "error", "streaming": true, "conversationId": "conv_2",
               "failoverAttempts": 1, "error": {"name": "Error", "message": "Rate limited"}}),
        json!({"kind": "agent.eval.completed", "suite": "SupportAgent", "case": "price",
               "status": "failed", "pass": false, "score": 0.2, "reason": "expected $99/month",
               "tokens": {"prompt": 10, "completion": 4, "total": 14}, "cost": 0.0001,
               "duration": 120}),
        json!({"kind": "agent.eval.completed", "suite": "SupportAgent", "case": "skip-me",
               "status": "skipped", "pass": false, "tokens": {"prompt": 0, "completion": 0, "total": 0},
               "cost": 0, "duration": 0, "someFutureField": true}),
    ]
}

#[tokio::test]
async fn ingest_accepts_seed_001_events_as_array_and_json_lines() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let events = seed_001_events();
    let (status, body) = api.post("/v1/events", Value::Array(events.clone())).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"accepted": 5, "duplicates": 0, "first_seq": 1, "last_seq": 5})
    );

    let lines: String = events.iter().map(|e| format!("{e}\n\n")).collect();
    let (status, body) = api.post_raw("/v1/events", lines).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["accepted"], 5);

    let mut ws = observe(&handle, "?since=0").await;
    let got = frames(&mut ws, 10).await;
    assert_eq!(seqs(&got), (1..=10).collect::<Vec<_>>());
    for (sent, frame) in events.iter().chain(events.iter()).zip(&got) {
        // Every field the SDK sent comes back out, values intact (numbers compared as f64).
        for (key, value) in sent.as_object().unwrap() {
            if key == "someFutureField" {
                // Fields this build does not know are accepted and ignored.
                continue;
            }
            assert!(
                same_json(value, &frame[key]),
                "{key} in {}: {}",
                sent["kind"],
                frame[key]
            );
        }
        assert!(frame["ts"].is_string());
    }
    assert_eq!(got[0]["step"]["toolCalls"][0]["id"], "t1");
}

#[tokio::test]
async fn an_eval_result_posted_again_is_left_out_and_counted_as_a_duplicate() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let result = |case: &str, attempt: u32| {
        json!({"kind": "agent.eval.completed", "suite": "imported", "case": case,
               "status": "passed", "runId": "junit-20261120T100000-0badcafe",
               "attempt": attempt})
    };
    let batch = json!([result("a", 1), result("b", 1)]);
    let (status, body) = api.post("/v1/events", batch.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["accepted"].as_u64(), body["duplicates"].as_u64()),
        (Some(2), Some(0))
    );
    // The same batch again (a re-import, or a retry after a lost answer), plus a new attempt.
    let again = json!([result("a", 1), result("b", 1), result("a", 2)]);
    let (status, body) = api.post("/v1/events", again).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["accepted"].as_u64(), body["duplicates"].as_u64()),
        (Some(1), Some(2)),
        "{body}"
    );
    assert_eq!(
        body["first_seq"], body["last_seq"],
        "one event logged: {body}"
    );
    let summary = handle.runtime().eval_summary("default", None);
    let suite = &summary.suites[0];
    assert_eq!((suite.runs, suite.passed), (1, 3), "{suite:?}");
    assert_eq!(handle.runtime().events_since(0, 100).len(), 3);
}

#[tokio::test]
async fn a_bad_batch_is_refused_whole_with_the_index() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let mut events = seed_001_events();
    events.insert(2, json!({"agentName": "no kind here"}));
    let (status, body) = api.post("/v1/events", Value::Array(events)).await;
    assert_eq!(status, 400);
    assert_eq!(body["code"], "invalid_event");
    assert_eq!(body["index"], 2);
    assert_eq!(keys(&body), ["code", "index", "message"]);

    let cases: Vec<(String, &str, Option<u64>)> = vec![
        (
            r#"[{"kind": "agent.completed", "tokens": "lots"}]"#.into(),
            "invalid_event",
            Some(0),
        ),
        (
            r#"[{"kind": "tool.called"}, 7]"#.into(),
            "invalid_event",
            Some(1),
        ),
        (
            r#"[{"kind": "stream.gap", "from": 1, "to": 2}]"#.into(),
            "invalid_event",
            Some(0),
        ),
        (
            "{\"kind\": \"x.y\"}\n{oops\n".into(),
            "invalid_event",
            Some(1),
        ),
        ("[{\"kind\": \"x.y\"}".into(), "invalid_body", None),
        (String::new(), "invalid_body", None),
        ("  \n ".into(), "invalid_body", None),
    ];
    for (body, code, index) in cases {
        let (status, reply) = api.post_raw("/v1/events", body.clone()).await;
        assert_eq!(status, 400, "{body:?}");
        assert_eq!(reply["code"], code, "{body:?}");
        assert_eq!(reply["index"].as_u64(), index, "{body:?}");
    }
    // Nothing of any refused batch was applied.
    assert!(handle.runtime().events_since(0, 100).is_empty());
    let (status, body) = api.post_raw("/v1/events", "[]").await;
    assert_eq!((status, body["accepted"].as_u64()), (200, Some(0)));
}
