//! A step whose model answer came from a cassette (`--model-replay`) is marked on its
//! timeline line in the Sessions view; a live step is not.

use crate::support::frames::{frame, session_created, tool_called};
use crate::support::ui::screen;
use serde_json::{Value, json};
use spyglass::client::ClientMsg;
use spyglass::model::Limits;
use spyglass::protocol::decode;
use spyglass::ui::{App, FakeClock};
use std::sync::Arc;

const NOW: &str = "2026-11-23T17:01:05.000000Z";
const SID: &str = "ses_cassette";

fn step(seq: u64, ts: &str, iteration: u32, finish: &str, calls: &Value, cassette: bool) -> Value {
    let mut step = json!({"iteration": iteration, "model": "gpt-4o-mini",
        "tokens": {"prompt": 40, "completion": 12, "total": 52},
        "finishReason": finish, "toolCalls": calls});
    if cassette {
        step["cassette"] = json!(true);
    }
    frame(
        "agent.step.completed",
        seq,
        ts,
        SID,
        json!({"agentName": "spyglass-fake", "model": "gpt-4o-mini", "provider": "openai",
               "iteration": iteration, "step": step,
               "tokens": {"prompt": 40, "completion": 12, "total": 52},
               "duration": 12.5, "streaming": false, "conversationId": SID}),
    )
}

#[test]
fn a_replayed_step_is_marked_on_its_line() {
    let call = json!([{"id": "call_1", "name": "asaas/create_payment", "args": {"value": 5},
        "result": {"id": "pay_1"}, "duration": 0.4, "needsApproval": false}]);
    let frames = [
        session_created(
            1,
            "2026-11-23T17:01:02.000000Z",
            SID,
            "ana",
            &["asaas"],
            &json!([{"tool": "asaas/create_payment", "mode": "static", "entries": 1}]),
        ),
        tool_called(
            2,
            "2026-11-23T17:01:02.100000Z",
            SID,
            "call_1",
            "asaas/create_payment",
        )
        .input(json!({"value": 5}))
        .outcome(json!({"result": {"id": "pay_1"}}))
        .duration(0.4)
        .set("source", json!("send"))
        .set("iteration", json!(0))
        .build(),
        step(
            3,
            "2026-11-23T17:01:02.200000Z",
            0,
            "tool_calls",
            &call,
            true,
        ),
        step(
            4,
            "2026-11-23T17:01:02.300000Z",
            1,
            "stop",
            &json!([]),
            false,
        ),
    ];
    let mut app = App::new(
        "http://127.0.0.1:8000",
        Limits::default(),
        Arc::new(FakeClock::at(NOW)),
    );
    app.on_client(ClientMsg::Connected);
    app.on_client(ClientMsg::Frames(
        frames
            .iter()
            .map(|f| decode(&f.to_string()).unwrap())
            .collect(),
    ));
    let text = screen(&mut app, 120, 24);
    let replayed = text.lines().find(|l| l.contains("▾ step 0")).unwrap();
    assert!(replayed.contains("▾ step 0 · cassette ·"), "{text}");
    let live = text.lines().find(|l| l.contains("▾ step 1")).unwrap();
    assert!(!live.contains("cassette"), "{live}");
    insta::assert_snapshot!("replayed_step", text);
}
