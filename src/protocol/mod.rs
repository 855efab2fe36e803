//! The wire, shared by the runtime and the inspector: observer events and their codec,
//! tool-result envelopes, and the REST bodies. No IO here.

pub mod envelope;
pub mod events;
pub mod json;
pub mod rest;

pub use envelope::{ApiError, Envelope};
pub use events::{DecodeError, Event, Frame, decode, decode_event, encode};
pub use json::RawJson;

/// Version of the observer protocol this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The current instant as RFC 3339 with milliseconds, UTC (`2026-11-22T21:43:31.123Z`).
///
/// Each thread keeps the text of the last millisecond it formatted: a busy runtime stamps
/// dozens of calls and events per millisecond, one of them under the event log's lock.
pub fn now_rfc3339() -> String {
    use std::cell::RefCell;
    thread_local! {
        static LAST: RefCell<(i64, String)> = const { RefCell::new((i64::MIN, String::new())) };
    }
    let now = chrono::Utc::now();
    let ms = now.timestamp_millis();
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != ms {
            *last = (ms, now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        }
        last.1.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::now_rfc3339;

    #[test]
    fn stamps_are_rfc3339_millis_utc_and_move_with_the_clock() {
        let first = now_rfc3339();
        let parsed = chrono::DateTime::parse_from_rfc3339(&first).unwrap();
        assert_eq!(first.len(), "2026-11-22T21:43:31.123Z".len(), "{first}");
        assert!(first.ends_with('Z'));
        let age = chrono::Utc::now().signed_duration_since(parsed);
        assert!(
            age.num_milliseconds() >= 0 && age.num_milliseconds() < 1000,
            "{first}"
        );
        // The per-thread cache must not hold a stamp past its millisecond.
        std::thread::sleep(std::time::Duration::from_millis(3));
        let later = now_rfc3339();
        assert!(later > first, "{first} then {later}");
    }
}
