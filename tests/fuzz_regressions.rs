//! Inputs the fuzzers (fuzz/, see docs/RELIABILITY.md) found, kept as regular tests so
//! the fixes stay fixed. Each names its target and what was wrong.

use spyglass::protocol::{decode, encode};

/// decode_event: an unknown kind carrying a number too long for an exact f64 changed its
/// digits on every re-encoding (serde_json's fast float parser was off by one ulp), so a
/// frame relayed twice was not the frame relayed once.
#[test]
fn re_encoding_a_frame_is_stable_for_long_numbers() {
    let inputs = [
        r#"{"kind":"age/t.completed","seq":8,"ts":"_ake","model":"fak42","steps":[],"tokens":{"prompt":30,"completion":16,"toatl":46},"duration":31,"finishReason":"stop","stre1a":22222222222222222222222222222222222222222222222222222222222222222222222222222222220}"#,
        r#"{"kind":"agent.completed","seq":9,"ts":"t","duration":0.30000000000000004441,"tokens":{"prompt":1,"completion":2,"total":3},"steps":[]}"#,
        r#"{"kind":"x.y","seq":1,"v":[1.7976931348623157e308,5e-324,123456789012345678901234567890]}"#,
    ];
    for text in inputs {
        let once = encode(&decode(text).unwrap());
        let twice = encode(&decode(&once).unwrap());
        assert_eq!(once, twice, "not stable: {text}");
    }
}
