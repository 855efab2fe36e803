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
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
