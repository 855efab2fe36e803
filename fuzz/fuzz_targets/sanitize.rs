//! Fuzzes the terminal-safe text helpers: `sanitize` and `sanitize_text` on any UTF-8
//! leave no control, escape or bidi character, and give ordinary text back unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spyglass::sanitize::{sanitize, sanitize_text};
use std::borrow::Cow;

/// The characters that can drive or reorder a terminal: C0 (ESC too), DEL, C1 and the
/// bidi controls (embeddings, overrides, isolates, LRM/RLM, the Arabic letter mark).
fn dangerous(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{061C}')
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let line = sanitize(text);
    if let Some(c) = line.chars().find(|&c| dangerous(c)) {
        panic!("sanitize left {:?} in {:?}", c, line);
    }
    let block = sanitize_text(text);
    if let Some(c) = block
        .chars()
        .find(|&c| dangerous(c) && c != '\n' && c != '\t')
    {
        panic!("sanitize_text left {:?} in {:?}", c, block);
    }
    // Nothing is lost: each escape is longer than what it replaced.
    assert!(line.len() >= text.len() && block.len() >= text.len());
    if !text.chars().any(|c| dangerous(c) || c == '\\') {
        assert!(matches!(line, Cow::Borrowed(_)), "ordinary text was copied");
        assert_eq!(line, text);
        assert_eq!(block, text);
    }
    // Text with no lines or tabs reads the same either way.
    if !text.contains(['\n', '\t']) {
        assert_eq!(line, block);
    }
});
