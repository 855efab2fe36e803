//! Glob patterns over their length bound are refused where they enter the runtime (the eval
//! run's `case` filter, the observer's `kinds=`), and a hostile pattern at the bound answers
//! at once. The matcher itself is tested in `src/glob.rs`.

use crate::support::runtime::*;
use serde_json::json;
use spyglass::glob::MAX_PATTERN_LEN;
use std::time::{Duration, Instant};

fn suite() -> serde_json::Value {
    json!({
        "suite": "limits",
        "cases": [{"id": "charge small amount", "input": "Charge", "model": {"default_text": "ok"}}]
    })
}

#[tokio::test]
async fn an_eval_case_filter_over_the_bound_is_refused_with_the_field() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let long = "*a".repeat(MAX_PATTERN_LEN / 2) + "*";
    let (status, body) = api
        .post("/v1/evals/runs", json!({"suites": [suite()], "case": long}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["field"], "/case", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("1025 bytes") && message.contains("limit is 1024"),
        "{message}"
    );
}

#[tokio::test]
async fn a_hostile_case_filter_at_the_bound_is_answered_at_once() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    // Stars and near-misses at the bound, against a long case id.
    let id = "a".repeat(spyglass::glob::MAX_ID_LEN);
    let suite = json!({
        "suite": "limits",
        "cases": [{"id": id, "input": "Charge", "model": {"default_text": "ok"}}]
    });
    let pattern = "*".to_owned() + &"a".repeat(MAX_PATTERN_LEN - 2) + "b";
    assert_eq!(pattern.len(), MAX_PATTERN_LEN);
    let started = Instant::now();
    let (status, body) = api
        .post(
            "/v1/evals/runs",
            json!({"suites": [suite], "case": pattern}),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("no case id matches"),
        "{body}"
    );
    assert!(took < Duration::from_secs(1), "took {took:?}");
}

#[tokio::test]
async fn an_observer_kinds_filter_over_the_bound_is_refused() {
    let handle = server(test_config()).await;
    let api = Api::new(&handle);
    let long = "x".repeat(MAX_PATTERN_LEN + 1);
    let (status, body) = api
        .get(&format!("/v1/observe?kinds=tool.called,{long}"))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "invalid_query", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("limit is 1024"),
        "{body}"
    );

    // A WebSocket handshake with it is refused too, before any upgrade.
    let url = format!("{}?kinds={long}", handle.observe_url());
    let err = tokio_tungstenite::connect_async(url).await.unwrap_err();
    assert!(err.to_string().contains("400"), "{err}");

    // A filter at the bound still subscribes.
    let ok = "*".repeat(MAX_PATTERN_LEN);
    let _ws = observe(&handle, &format!("?kinds={ok}")).await;
}

#[test]
fn the_cli_case_filter_over_the_bound_is_refused_before_anything_is_read_or_sent() {
    use spyglass::client::eval::{EvalArgs, EvalCliError, prepare};
    let args = EvalArgs {
        // Not even read: the filter is checked first.
        paths: vec!["/nonexistent/suite.toml".into()],
        repeat: 1,
        case: Some("?".repeat(MAX_PATTERN_LEN + 1)),
        ..EvalArgs::default()
    };
    match prepare(&args) {
        Err(EvalCliError::Usage(message)) => {
            assert!(
                message.starts_with("--case: ") && message.contains("limit is 1024"),
                "{message}"
            );
        }
        other => panic!("expected a usage error, got {other:?}"),
    }
}
