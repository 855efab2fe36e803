//! `approval.requested` carries the holding rule's `when` as written, so an approver can be
//! shown the input fields it read; a rule without one sends no `condition` at all.

use crate::support::runtime::*;
use serde_json::json;
use spyglass::protocol::Event;
use spyglass::runtime::{Policy, RuntimeConfig};

fn config() -> RuntimeConfig {
    RuntimeConfig {
        policy: Policy::from_toml(
            "[[rule]]\nid = \"big\"\ntool = \"*/create_payment\"\naction = \"approval\"\nwhen = \"input.value > 1000\"\n\n[[rule]]\nid = \"refunds\"\ntool = \"*/refund\"\naction = \"approval\"\n",
        )
        .expect("a policy"),
        ..test_config()
    }
}

#[tokio::test]
async fn the_condition_of_the_rule_that_held_a_call_is_on_the_wire() {
    let handle = server(config()).await;
    let api = Api::new(&handle);
    let sid = api
        .session(
            json!({"asaas/create_payment": [{"id": "pay_1"}], "asaas/refund": [{"id": "r_1"}]}),
        )
        .await;
    let (status, body) = api
        .execute(&sid, "asaas/create_payment", json!({"value": 5000}))
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = api.execute(&sid, "asaas/refund", json!({"value": 1})).await;
    assert_eq!(status, 202, "{body}");
    let requested: Vec<_> = handle
        .runtime()
        .events_since(0, 1000)
        .into_iter()
        .filter_map(|f| match &f.event {
            Event::ApprovalRequested(r) => Some((r.rule_id.clone(), r.condition.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        requested,
        vec![
            ("big".to_owned(), Some("input.value > 1000".to_owned())),
            ("refunds".to_owned(), None),
        ]
    );
    // Absent, the field is not written at all (older readers see the frame they know).
    let frames = handle.runtime().events_since(0, 1000);
    let refund = frames
        .iter()
        .find(|f| matches!(&f.event, Event::ApprovalRequested(r) if r.rule_id == "refunds"))
        .expect("the refund was held");
    assert!(!spyglass::protocol::encode(refund).contains("condition"));
}
