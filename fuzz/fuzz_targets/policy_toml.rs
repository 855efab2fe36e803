//! Fuzzes policy files: `Policy::from_toml` must answer any text with a policy or an
//! error that names where, and a loaded policy must judge any tool and input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use spyglass::runtime::Policy;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // After a NUL byte: a tool name to judge, so globs meet fuzzed names too.
    let (policy_text, tool) = text
        .split_once('\0')
        .unwrap_or((text, "asaas/create_payment"));
    match Policy::from_toml(policy_text) {
        Ok(policy) => {
            let inputs = [
                json!({}),
                json!({"value": 5, "amount": 1e300, "to": "x", "nested": {"a": [1, 2]}}),
                json!({"value": "5", "amount": null}),
            ];
            for input in &inputs {
                let _ = policy.evaluate(tool, input);
            }
        }
        Err(err) => assert!(!err.to_string().is_empty()),
    }
});
