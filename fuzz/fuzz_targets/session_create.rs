//! Fuzzes session-create bodies through the runtime's own create path: JSON parsing, the
//! mocks gates (size, shape) and the model script. Any body gets a session or an error
//! with a 4xx/5xx status and a code; an accepted one must be readable back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spyglass::protocol::rest::CreateSession;
use spyglass::runtime::mocks::{MAX_MOCKS_BYTES, MockTable, MocksRejection};
use spyglass::runtime::{Runtime, RuntimeConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    // The gate on its own: a refusal names a JSON pointer under /mocks.
    match MockTable::from_payload(&value) {
        Ok(table) => {
            assert!(serde_json::to_string(&value).map_or(0, |t| t.len()) <= MAX_MOCKS_BYTES);
            assert_eq!(table.declared().len(), table.slots.len());
        }
        Err(MocksRejection::TooLarge { bytes }) => assert!(bytes > MAX_MOCKS_BYTES),
        Err(MocksRejection::Invalid { field, message }) => {
            assert!(field.starts_with("/mocks"), "{field}");
            assert!(!message.is_empty());
        }
    }
    let Ok(req) = serde_json::from_value::<CreateSession>(value) else {
        return;
    };
    let rt = Runtime::new(RuntimeConfig {
        test_mode: true,
        retained_events: 4,
        subscriber_queue: 1,
        ..RuntimeConfig::default()
    });
    match rt.create_session("default", req) {
        Ok(body) => {
            let detail = rt
                .session_detail("default", &body.id)
                .unwrap_or_else(|err| panic!("created session is unreadable: {err}"));
            assert_eq!(detail.summary.calls, 0);
            assert_eq!(rt.events_since(0, 10).len(), 1, "one session.created");
        }
        Err(err) => {
            assert!((400..600).contains(&err.status), "{err}");
            assert!(!err.error.code.is_empty());
            assert!(rt.events_since(0, 10).is_empty(), "a refusal emits nothing");
        }
    }
});
