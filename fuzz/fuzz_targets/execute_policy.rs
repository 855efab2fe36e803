//! Fuzzes the runtime's execute path under a policy with `when` rules and a deny-list:
//! any tool name and raw JSON input gets an answer, and what the policy must refuse, or
//! cannot read, is never answered 200.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use spyglass::protocol::RawJson;
use spyglass::protocol::rest::CreateSession;
use spyglass::runtime::mocks::LIST_TOOLS;
use spyglass::runtime::{ExecuteReply, Policy, Runtime, RuntimeConfig};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

const POLICY: &str = r#"
deny_list = ["forbidden/*", "*/drop_*"]

[[rule]]
id = "big"
tool = "*"
action = "deny"
when = "input.value > 1000"

[[rule]]
id = "nested"
tool = "asaas/*"
action = "approval"
when = "input.payment.amount >= 10"

[[rule]]
id = "method"
tool = "*"
action = "deny"
when = 'input.method == "blocked"'
"#;

/// `Runtime::execute` never waits on anything; a pending future would be a finding.
fn now<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("execute did not answer at once"),
    }
}

fn runtime() -> (Runtime, String) {
    let policy = Policy::from_toml(POLICY).unwrap_or_else(|err| panic!("{err}"));
    let rt = Runtime::new(RuntimeConfig {
        test_mode: true,
        policy,
        retained_events: 16,
        subscriber_queue: 1,
        ..RuntimeConfig::default()
    });
    let req: CreateSession = serde_json::from_value(json!({
        "servers": ["asaas"],
        "user_id": "u",
        "mocks": {
            "asaas/create_payment": {"id": "pay_1"},
            "asaas/refund": [{"n": 1}, {"n": 2}],
            "forbidden/anything": {"ok": true},
            "x/y": {"ok": true}
        }
    }))
    .unwrap_or_else(|err| panic!("{err}"));
    let id = rt
        .create_session("default", req)
        .unwrap_or_else(|err| panic!("{err}"))
        .id;
    (rt, id)
}

/// Runs one call and checks what every answer must hold; returns the status.
fn call(rt: &Runtime, id: &str, tool: &str, input: RawJson) -> u16 {
    match now(rt.execute("default", id, tool, input)) {
        Ok(reply) => {
            let status = reply.status();
            match &reply {
                ExecuteReply::Ok(result) => assert!(result.success && status == 200),
                ExecuteReply::Envelope(_) => assert_ne!(status, 200),
            }
            status
        }
        Err(err) => {
            assert!((400..600).contains(&err.status), "{err}");
            assert!(!err.error.code.is_empty());
            err.status
        }
    }
}

fn denied_tool(tool: &str) -> bool {
    tool.starts_with("forbidden/")
        || tool
            .split_once('/')
            .is_some_and(|(_, t)| t.starts_with("drop_"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The first line names the tool, the rest is the input's raw JSON text.
    let (tool, input) = text
        .split_once('\n')
        .unwrap_or(("asaas/create_payment", text));
    let Ok(raw) = RawJson::from_text(input) else {
        return;
    };
    if !raw.is_object() {
        return; // the HTTP handler answers 400 before the runtime sees it
    }
    let (rt, id) = runtime();
    let policed = tool != LIST_TOOLS;
    let status = call(&rt, &id, tool, raw);
    if policed && denied_tool(tool) {
        assert_ne!(status, 200, "{tool} is on the deny-list");
    }
    // What the policy reads is the input parsed as a tree (duplicate keys: the last one).
    match serde_json::from_str::<Value>(input) {
        Ok(tree) => {
            let big = tree
                .get("value")
                .and_then(Value::as_f64)
                .is_some_and(|v| v > 1000.0);
            if policed && big {
                assert_ne!(status, 200, "{tool} with value > 1000 was allowed: {input}");
            }
        }
        // Too deep or out of range: the `big` rule cannot be checked, so no allow.
        Err(_) if policed => assert_ne!(status, 200, "unreadable input allowed: {input}"),
        Err(_) => {}
    }
    // The same input under a top-level "value": 5000 must never be answered 200, however
    // deep or odd what sits beside it.
    let wrapped = format!("{{\"value\":5000,\"x\":{input}}}");
    if let Ok(raw) = RawJson::from_text(&wrapped) {
        let status = call(&rt, &id, tool, raw);
        if policed {
            assert_ne!(status, 200, "{tool} with value 5000 was allowed: {wrapped}");
        }
    }
});
