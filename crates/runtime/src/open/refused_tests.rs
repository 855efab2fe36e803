//! A call its store refused (503 `store_unavailable`) leaves nothing anyone can see: its
//! entry, counters, session record and event all as before it. Compiled only under
//! `#[cfg(test)]` (`open.rs`), with the journal's test hook for a full disk.

use super::{open_runtime, runtime_journaled};
use crate::store::SqliteStore;
use crate::store::journal::Journal;
use crate::{ExecuteReply, Runtime, RuntimeConfig};
use serde_json::{Value, json};
use spyglass_protocol::Event;
use spyglass_protocol::events::Outcome;
use spyglass_protocol::rest::CreateSession;
use std::sync::Arc;

fn config() -> RuntimeConfig {
    RuntimeConfig {
        test_mode: true,
        ..RuntimeConfig::default()
    }
}

/// What each `tool.called` event the runtime holds was served, in seq order, with the seqs.
fn served_events(rt: &Runtime) -> Vec<(u64, Value)> {
    rt.events_since(0, usize::MAX)
        .into_iter()
        .filter_map(|f| match f.event {
            Event::ToolCalled(call) => match call.outcome {
                Outcome::Result(data) => Some((f.seq, data.to_value())),
                Outcome::Envelope(envelope) => Some((f.seq, json!(envelope.code()))),
            },
            _ => None,
        })
        .collect()
}

async fn execute(rt: &Runtime, id: &str) -> Result<Value, (u16, String)> {
    match rt
        .execute("default", id, "pay/charge", json!({}).into())
        .await
    {
        Ok(ExecuteReply::Ok(result)) => Ok(result.data.to_value()),
        Ok(ExecuteReply::Envelope(envelope)) => panic!("{envelope:?}"),
        Err(err) => Err((err.status, err.error.code)),
    }
}

/// The session's detail as `GET /v1/sessions/{id}` answers it.
fn detail(rt: &Runtime, id: &str) -> Value {
    serde_json::to_value(rt.session_detail("default", id).unwrap()).unwrap()
}

#[tokio::test]
async fn a_refused_call_is_served_again_and_shown_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.db");
    let sqlite = SqliteStore::open(&db).unwrap();
    let journal = Journal::recover(&db, &sqlite).unwrap();
    let rt = runtime_journaled(config(), Arc::new(sqlite), Arc::clone(&journal)).unwrap();
    let body: CreateSession = serde_json::from_value(json!({
        "user_id": "u",
        "mocks": {"pay/charge": [{"n": 1}, {"n": 2}, {"n": 3}]}
    }))
    .unwrap();
    let id = rt.create_session("default", body).unwrap().id;
    rt.committed().await.unwrap();
    let mut live = rt.inner.log.subscribe();
    assert_eq!(execute(&rt, &id).await, Ok(json!({"n": 1})));
    let before = detail(&rt, &id);
    let events_before = served_events(&rt);
    let next_seq = rt.inner.log.next_seq("default");

    // The disk fills: the call is refused, and so is the next while it stays full.
    journal.fail_writes(true);
    for _ in 0..2 {
        assert_eq!(
            execute(&rt, &id).await,
            Err((503, crate::STORE_UNAVAILABLE.to_owned()))
        );
        assert_eq!(
            detail(&rt, &id),
            before,
            "the session's detail is as before"
        );
        assert_eq!(
            served_events(&rt),
            events_before,
            "GET /v1/events is as before"
        );
        assert_eq!(rt.inner.log.next_seq("default"), next_seq);
    }

    // What is not a call stays done though its answer was a 503 too: a session created
    // while the disk is full is on the stream once it is written.
    let body: CreateSession = serde_json::from_value(json!({"user_id": "other"})).unwrap();
    let other = rt.create_session("default", body).unwrap().id;
    assert!(rt.committed().await.is_err());

    // Space returns: the retry is served the entry the refused call would have been.
    journal.fail_writes(false);
    assert_eq!(execute(&rt, &id).await, Ok(json!({"n": 2})));
    let after = detail(&rt, &id);
    assert_eq!(after["calls"].as_array().unwrap().len(), 2, "{after}");
    assert_eq!(after["calls_total"], json!(2), "{after}");
    assert_eq!(after["mocks"][0]["calls"], json!(2), "{after}");
    assert_eq!(
        after["mocks"][0]["counter"],
        json!({"consumed": 2, "total": 3}),
        "{after}"
    );
    let events = served_events(&rt);
    assert_eq!(
        events.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
        vec![json!({"n": 1}), json!({"n": 2})]
    );
    let all = rt.events_since(0, usize::MAX);
    let seqs: Vec<u64> = all.iter().map(|f| f.seq).collect();
    assert_eq!(
        seqs,
        (1..=all.len() as u64).collect::<Vec<_>>(),
        "no seq was spent on the refused calls"
    );
    assert!(
        all.iter()
            .any(|f| matches!(f.event, Event::SessionCreated(_))
                && f.session_id.as_deref() == Some(other.as_str())),
        "the other session's session.created is kept"
    );

    // Live subscribers saw the two answered calls, in order, and nothing of the refused.
    let mut seen = Vec::new();
    while let Ok(logged) = live.try_recv() {
        if let Event::ToolCalled(call) = &logged.frame.event {
            seen.push((logged.frame.seq, call.outcome.clone()));
        }
    }
    let seen: Vec<(u64, Value)> = seen
        .into_iter()
        .map(|(seq, outcome)| match outcome {
            Outcome::Result(data) => (seq, data.to_value()),
            Outcome::Envelope(envelope) => (seq, json!(envelope.code())),
        })
        .collect();
    assert_eq!(
        seen, events,
        "the live stream shows what GET /v1/events shows"
    );

    // And what the store keeps is what was answered: a reopen serves the third entry.
    drop(rt);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let rt = loop {
        match open_runtime(config(), &db) {
            Ok(rt) => break rt,
            Err(crate::store::StoreError::Locked { .. })
                if std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(err) => panic!("{err}"),
        }
    };
    assert_eq!(served_events(&rt), events);
    assert_eq!(execute(&rt, &id).await, Ok(json!({"n": 3})));
}

#[tokio::test]
async fn a_refused_held_call_leaves_no_approval_behind() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runtime.db");
    let sqlite = SqliteStore::open(&db).unwrap();
    let journal = Journal::recover(&db, &sqlite).unwrap();
    let config = RuntimeConfig {
        policy: crate::policy::Policy::from_toml(
            r#"
            [[rule]]
            id = "held"
            tool = "pay/*"
            action = "approval"
            "#,
        )
        .unwrap(),
        ..config()
    };
    let rt = runtime_journaled(config, Arc::new(sqlite), Arc::clone(&journal)).unwrap();
    let body: CreateSession = serde_json::from_value(json!({
        "user_id": "u",
        "mocks": {"pay/charge": [{"n": 1}]}
    }))
    .unwrap();
    let id = rt.create_session("default", body).unwrap().id;
    rt.committed().await.unwrap();
    let all = |rt: &Runtime| {
        rt.list_approvals(
            "default",
            crate::approvals::StatusFilter::All,
            &crate::sessions::Page::default(),
        )
        .unwrap()
        .approvals
        .len()
    };

    journal.fail_writes(true);
    assert_eq!(
        execute_held(&rt, &id).await,
        Err((503, crate::STORE_UNAVAILABLE.to_owned()))
    );
    assert_eq!(all(&rt), 0, "no approval waits for the refused call");
    journal.fail_writes(false);
    assert_eq!(execute_held(&rt, &id).await, Ok(202));
    assert_eq!(all(&rt), 1);
    let requested = rt
        .events_since(0, usize::MAX)
        .into_iter()
        .filter(|f| matches!(f.event, Event::ApprovalRequested(_)))
        .count();
    assert_eq!(requested, 1, "one approval.requested: the retry's");
}

/// A call a policy rule holds: 202 when held, else the refusal's status and code.
async fn execute_held(rt: &Runtime, id: &str) -> Result<u16, (u16, String)> {
    match rt
        .execute("default", id, "pay/charge", json!({}).into())
        .await
    {
        Ok(ExecuteReply::Envelope(envelope)) => Ok(envelope.http_status()),
        Ok(ExecuteReply::Ok(result)) => panic!("not held: {result:?}"),
        Err(err) => Err((err.status, err.error.code)),
    }
}
