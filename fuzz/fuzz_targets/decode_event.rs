//! Fuzzes the observer frame codec: `decode_event` and `decode` must answer any text with
//! a value or a `DecodeError`, and a decoded frame must survive `encode` and decode again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spyglass::protocol::{decode, decode_event, encode};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = decode_event(text);
    if let Ok(frame) = decode(text) {
        let again = encode(&frame);
        let back = decode(&again).unwrap_or_else(|err| {
            panic!("re-decoding our own encoding failed: {err}\nin:  {text}\nout: {again}")
        });
        // A second pass must be a fixed point: encode(decode(encode(f))) == encode(f).
        assert_eq!(encode(&back), again, "encode is not stable for {text}");
    }
});
