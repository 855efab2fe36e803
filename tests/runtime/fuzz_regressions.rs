//! Inputs the fuzzers (fuzz/, see docs/RELIABILITY.md) found, kept as regular tests so
//! the fixes stay fixed. Each names its target and what was wrong.

use spyglass::protocol::{decode, encode};

/// `decode_event`: an unknown kind carrying a number too long for an exact f64 changed its
/// digits on every re-encoding (`serde_json`'s fast float parser was off by one ulp), so a
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

/// `decode_event`: an unknown-kind frame holding a number beyond f64 (`5e668`) decoded, but
/// re-encoding it (to restamp it for the stream) produced `null`: the runtime would have
/// accepted it on ingest and streamed `null` to every observer. It is now refused at
/// decode with a syntax error, and ingest answers 400 with its index.
#[tokio::test]
async fn an_unknown_frame_that_cannot_be_re_encoded_is_refused() {
    let bad = r#"{"kind":"apppoval.requested","seq":4,"input":{"value":500666666e660}}"#;
    let err = spyglass::protocol::decode(bad).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");

    let handle = spyglass::runtime::start(
        spyglass::runtime::RuntimeConfig::default(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let good = r#"{"kind":"custom.thing","v":1}"#;
    let res = reqwest::Client::new()
        .post(format!("{}/v1/events", handle.url()))
        .header("content-type", "application/x-ndjson")
        .body(format!("{good}\n{bad}\n"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["code"], "invalid_event");
    assert_eq!(body["index"], 1);
    assert!(
        handle.runtime().events_since(0, 10).is_empty(),
        "nothing of the batch applied"
    );

    // Inside a known kind the same number travels as raw text, unchanged.
    let known = r#"{"kind":"tool.called","seq":5,"ts":"t","callId":"c","tool":"a/b","input":{"value":500666666e660},"outcome":{"result":null},"startedAt":"t","duration":1,"source":"execute"}"#;
    let once = encode(&decode(known).unwrap());
    assert!(once.contains("500666666e660"), "{once}");
    assert_eq!(encode(&decode(&once).unwrap()), once);
    handle.shutdown().await;
}
