//! The wire, shared by the runtime and the inspector: observer events and their codec,
//! tool-result envelopes, and the REST bodies. No IO here.

pub mod envelope;
pub mod events;
pub mod glob;
pub mod json;
pub mod mask;
pub mod rest;
pub mod retire;
pub mod sanitize;

pub use envelope::{ApiError, Envelope};
pub use events::{
    DecodeError, Event, Frame, decode, decode_event, encode, encode_around_seq, encode_with_seq,
};
pub use json::RawJson;

/// The `source` metadata of a session assembled from OpenTelemetry spans.
pub const OTEL_SOURCE: &str = "opentelemetry";

/// Version of the observer protocol this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The current instant as RFC 3339 with microseconds, UTC (`2026-11-22T21:43:31.123456Z`):
/// a mocked call takes microseconds, so a millisecond stamp could not order or place it.
///
/// Each thread keeps the text of the last second it formatted (everything up to the
/// fraction): a busy runtime stamps dozens of calls and events per millisecond, one of them
/// under the event log's lock, so a stamp is one allocation and six digits, never a format.
pub fn now_rfc3339() -> String {
    use std::cell::RefCell;
    thread_local! {
        static LAST: RefCell<(i64, String)> = const { RefCell::new((i64::MIN, String::new())) };
    }
    let now = chrono::Utc::now();
    let secs = now.timestamp();
    // A leap second reads as 1_000_000 µs and more; it stays inside its second here.
    let micros = now.timestamp_subsec_micros().min(999_999);
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != secs {
            let whole = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            whole.trim_end_matches('Z').clone_into(&mut last.1);
            last.1.push('.');
            last.0 = secs;
        }
        let mut out = String::with_capacity(last.1.len() + 7);
        out.push_str(&last.1);
        let mut digits = [b'0'; 6];
        let mut rest = micros;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        out.extend(digits.iter().map(|d| char::from(*d)));
        out.push('Z');
        out
    })
}

#[cfg(test)]
mod tests {
    use super::{decode, encode_around_seq, encode_with_seq, now_rfc3339};

    /// What the Postgres store writes around a seq it learns in the database is the text
    /// `encode_with_seq` gives, for typed kinds and for unknown ones whose fields hold
    /// `seq`-looking keys and values of their own.
    #[test]
    fn a_frame_written_around_its_seq_is_the_frame_with_that_seq() {
        let texts = [
            r#"{"kind":"tool.called","seq":3,"ts":"2026-11-25T00:00:00.000001Z","sessionId":"ses_1","callId":"call_1","tool":"pay/charge","input":{"seq":0,"note":"\u001b[2J \"seq\":0"},"result":{"ok":true},"startedAt":"2026-11-25T00:00:00Z","duration":0.5}"#,
            r#"{"kind":"session.closed","seq":9,"ts":"t","sessionId":"ses_2"}"#,
            r#"{"kind":"custom.thing","data":{"seq":0},"seq":4,"ts":"t","sessionId":"ses_3"}"#,
            r#"{"seq":5,"kind":"custom.first","ts":"t","x":[0,0,0]}"#,
        ];
        for text in texts {
            let frame = decode(text).unwrap();
            let (zero, at) = encode_around_seq(&frame);
            let at = at.unwrap_or_else(|| panic!("no seq found in {zero}"));
            for seq in [0u64, 1, 10, 7_000_000_000_123] {
                let written = format!("{}{seq}{}", &zero[..at], &zero[at + 1..]);
                assert_eq!(written, encode_with_seq(&frame, seq), "{text}");
            }
        }
    }

    #[test]
    fn stamps_are_rfc3339_micros_utc_and_move_with_the_clock() {
        let first = now_rfc3339();
        let parsed = chrono::DateTime::parse_from_rfc3339(&first).unwrap();
        assert_eq!(first.len(), "2026-11-22T21:43:31.123456Z".len(), "{first}");
        assert!(first.ends_with('Z'));
        let age = chrono::Utc::now().signed_duration_since(parsed);
        assert!(
            age.num_milliseconds() >= 0 && age.num_milliseconds() < 1000,
            "{first}"
        );
        // The per-thread cache must not hold a stamp past its microsecond, nor its second.
        std::thread::sleep(std::time::Duration::from_micros(50));
        let later = now_rfc3339();
        assert!(later > first, "{first} then {later}");
        std::thread::sleep(std::time::Duration::from_millis(1001));
        let next_second = now_rfc3339();
        let gap = chrono::DateTime::parse_from_rfc3339(&next_second).unwrap() - parsed;
        assert!(gap.num_milliseconds() >= 1001, "{first} then {next_second}");
    }
}
