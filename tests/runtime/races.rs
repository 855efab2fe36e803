//! Races over real HTTP on a multi-threaded runtime: 64 clients on a K-entry stateful
//! mock, approve against deny on one approval, and a replay against the session's close.
//! Each must end in one defined outcome, with the counters telling the same story.

use crate::support::runtime::*;
use serde_json::{Value, json};
use spyglass::runtime::RuntimeConfig;
use std::sync::Arc;

fn config() -> RuntimeConfig {
    policy_config("[[rule]]\nid = \"hold\"\ntool = \"*/create_payment\"\naction = \"approval\"\n")
}

fn mock_state(list: &Value, sid: &str, tool: &str) -> Value {
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == sid)
        .and_then(|s| {
            s["mocks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["tool"] == tool)
        })
        .cloned()
        .unwrap()
}

/// 64 clients, K entries, several K: exactly K successes, each entry served once, and
/// every other answer the full `mocks_exhausted` envelope (status, code, message).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_clients_on_k_entries() {
    let handle = server(config()).await;
    let api = Arc::new(Api::new(&handle));
    for k in [1usize, 7, 32, 63, 64] {
        let entries: Vec<Value> = (0..k).map(|i| json!({"n": i})).collect();
        let sid = api.session(json!({"asaas/create_nfe": entries})).await;
        let barrier = Arc::new(tokio::sync::Barrier::new(64));
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let (api, sid, barrier) = (api.clone(), sid.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    api.execute(&sid, "asaas/create_nfe", json!({})).await
                })
            })
            .collect();
        let mut served = Vec::new();
        let mut exhausted = 0;
        for task in tasks {
            let (status, body) = task.await.unwrap();
            match status {
                200 => served.push(body["data"]["n"].as_u64().unwrap()),
                422 => {
                    assert_eq!(keys(&body), ["code", "message"], "envelope shape: {body}");
                    assert_eq!(body["code"], "mocks_exhausted");
                    assert!(
                        body["message"]
                            .as_str()
                            .unwrap()
                            .contains(&format!("all {k} entries")),
                        "{body}"
                    );
                    exhausted += 1;
                }
                other => panic!("K={k}: unexpected {other}: {body}"),
            }
        }
        served.sort_unstable();
        assert_eq!(
            served,
            (0..k as u64).collect::<Vec<_>>(),
            "K={k}: each entry once"
        );
        assert_eq!(exhausted, 64 - k, "K={k}");
        let (_, list) = api.get("/v1/sessions").await;
        let mock = mock_state(&list, &sid, "asaas/create_nfe");
        assert_eq!(mock["counter"], json!({"consumed": k, "total": k}), "K={k}");
        assert_eq!(mock["calls"], 64, "K={k}: every call counted");
    }
}

/// Approve and deny sent together on one approval, 50 rounds: one 200, one 409, and the
/// row, the stream and the counter all agree on which won.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approve_and_deny_race_has_one_winner() {
    const ROUNDS: usize = 50;
    let handle = server(config()).await;
    let api = Arc::new(Api::new(&handle));
    let entries: Vec<Value> = (0..ROUNDS)
        .map(|i| json!({"id": format!("pay_{i}")}))
        .collect();
    let sid = api.session(json!({"asaas/create_payment": entries})).await;
    let mut approvals_won = 0;
    for round in 0..ROUNDS {
        let (status, held) = api
            .execute(&sid, "asaas/create_payment", json!({"round": round}))
            .await;
        assert_eq!(status, 202, "{held}");
        let id = held["approval_id"].as_str().unwrap().to_owned();
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let race = |verb: &'static str| {
            let (api, id, barrier) = (api.clone(), id.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                api.post(&format!("/v1/approvals/{id}/{verb}"), json!({"by": verb}))
                    .await
            })
        };
        let (approve, deny) = (race("approve"), race("deny"));
        let (approve, deny) = (approve.await.unwrap(), deny.await.unwrap());
        let (winner, loser) = match (approve.0, deny.0) {
            (200, 409) => {
                approvals_won += 1;
                (approve.1, deny.1)
            }
            (409, 200) => (deny.1, approve.1),
            other => panic!("round {round}: expected one 200 and one 409, got {other:?}"),
        };
        assert_eq!(loser["code"], "approval_already_decided", "round {round}");
        let (_, all) = api.get("/v1/approvals?status=all").await;
        let row = all["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id.as_str())
            .cloned()
            .unwrap();
        assert_eq!(row["status"], winner["status"], "round {round}");
        assert_eq!(row["decided_by"], winner["decided_by"], "round {round}");
    }
    // One resolution per approval on the stream, and the counter moved once per approval won.
    let resolved = handle
        .runtime()
        .events_since(0, usize::MAX)
        .iter()
        .filter(|f| f.event.kind() == "approval.resolved")
        .count();
    assert_eq!(resolved, ROUNDS);
    let (_, list) = api.get("/v1/sessions").await;
    let mock = mock_state(&list, &sid, "asaas/create_payment");
    assert_eq!(mock["counter"]["consumed"], approvals_won);
    println!("approve/deny race: {ROUNDS} rounds, approve won {approvals_won}");
}

/// A replay racing the session's DELETE, 50 rounds: the approval either replayed before
/// the close (an entry served, counter +1) or never reached the mock (cancelled by the close,
/// 410, or decided just before it, `mocks_engine_error`), with nothing announced after
/// `session.closed`. Never a panic, never a 5xx, never a counter out of step.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replay_racing_close_is_defined() {
    const ROUNDS: usize = 50;
    let handle = server(config()).await;
    let api = Arc::new(Api::new(&handle));
    let (mut replayed, mut refused) = (0, 0);
    for round in 0..ROUNDS {
        let sid = api
            .session(json!({"asaas/create_payment": [{"id": "p1"}, {"id": "p2"}]}))
            .await;
        let (status, held) = api.execute(&sid, "asaas/create_payment", json!({})).await;
        assert_eq!(status, 202);
        let id = held["approval_id"].as_str().unwrap().to_owned();
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let approve = {
            let (api, id, barrier) = (api.clone(), id.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                api.post(&format!("/v1/approvals/{id}/approve"), json!({}))
                    .await
            })
        };
        let close = {
            let (api, sid, barrier) = (api.clone(), sid.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                api.delete(&format!("/v1/sessions/{sid}")).await
            })
        };
        let (status, view) = approve.await.unwrap();
        assert_eq!(close.await.unwrap().0, 204, "round {round}");
        let (_, list) = api.get("/v1/sessions").await;
        let mock = mock_state(&list, &sid, "asaas/create_payment");
        let frames = handle.runtime().events_since(0, usize::MAX);
        let of_session: Vec<&str> = frames
            .iter()
            .filter(|f| f.session_id.as_deref() == Some(sid.as_str()))
            .map(|f| f.event.kind())
            .collect();
        let closed_at = of_session
            .iter()
            .position(|k| *k == "session.closed")
            .unwrap();
        let replayed_at = of_session.iter().position(|k| *k == "approval.replayed");
        if status == 200 && view["replay"].get("result").is_some() {
            // Replayed before the close: an entry served, announced before the close.
            assert_eq!(
                view["replay"]["result"],
                json!({"id": "p1"}),
                "round {round}"
            );
            assert_eq!(mock["counter"]["consumed"], 1, "round {round}");
            assert_eq!(mock["calls"], 2, "round {round}");
            assert!(
                replayed_at.unwrap() < closed_at,
                "round {round}: {of_session:?}"
            );
            replayed += 1;
        } else {
            // The close came first (the approval was cancelled with it, 410) or between the
            // decision and its replay (an engine error): nothing reached the mock.
            match status {
                410 => assert_eq!(view["code"], "approval_expired", "round {round}"),
                200 => assert_eq!(
                    view["replay"]["envelope"]["code"], "mocks_engine_error",
                    "round {round}: {view}"
                ),
                other => panic!("round {round}: {other} {view}"),
            }
            assert_eq!(mock["counter"]["consumed"], 0, "round {round}");
            assert_eq!(mock["calls"], 1, "round {round}");
            assert_eq!(replayed_at, None, "round {round}: {of_session:?}");
            refused += 1;
        }
    }
    println!("replay vs close: {ROUNDS} rounds, replayed {replayed}, refused {refused}");
    assert_eq!(replayed + refused, ROUNDS);
}
