//! Fuzzes eval suite files as TOML and as JSON: `parse_suite` must answer any text with a
//! suite or a `SuiteError` naming the file, and a parsed suite must plan.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spyglass::eval::suite::{parse_suite, plan};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for file in ["fuzz.toml", "fuzz.json", "fuzz"] {
        match parse_suite(file, text) {
            Ok(suite) => {
                let suites = [suite];
                let all = plan(&suites, 2, None);
                assert_eq!(all.len(), suites[0].cases.len() * 2);
                let _ = plan(&suites, 1, Some("*a?*"));
            }
            Err(err) => assert_eq!(err.file, file),
        }
    }
});
