//! The crate's one glob matcher (policy tool globs, eval `case` filters, observer `kinds=`)
//! and the length bounds every pattern and id is held to where it enters.
//!
//! Syntax: `*` matches any run of characters (slashes too, empty too), `?` exactly one
//! character; everything else is literal, with no escapes and no classes.
//!
//! Matching never backtracks: the pattern is split on `*`, the first and last pieces are
//! anchored at the ends of the text and each middle piece is found leftmost after the one
//! before it (leftmost is always safe because a `*` can absorb whatever a later match
//! would have skipped). Pieces without `?` are found with `memchr::memmem`, so the whole
//! match is linear in pattern + text. A piece that holds a `?` is tried at each candidate
//! position its first literal run allows, which can cost text × piece in the worst case;
//! the length bounds below cap that at a few million character steps.

use memchr::memmem;

/// The longest glob pattern accepted anywhere (bytes).
pub const MAX_PATTERN_LEN: usize = 1024;

/// The longest id a glob is matched against that is accepted where ids enter (bytes).
pub const MAX_ID_LEN: usize = 4096;

/// A pattern or id over its bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("glob pattern is {len} bytes long; the limit is {MAX_PATTERN_LEN}")]
    PatternTooLong { len: usize },
    #[error("id is {len} bytes long; the limit is {MAX_ID_LEN}")]
    IdTooLong { len: usize },
}

/// Refuses a pattern longer than [`MAX_PATTERN_LEN`].
pub fn check_pattern(pattern: &str) -> Result<(), GlobError> {
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(GlobError::PatternTooLong { len: pattern.len() });
    }
    Ok(())
}

/// Refuses an id longer than [`MAX_ID_LEN`].
pub fn check_id(id: &str) -> Result<(), GlobError> {
    if id.len() > MAX_ID_LEN {
        return Err(GlobError::IdTooLong { len: id.len() });
    }
    Ok(())
}

/// Whether `text` matches `pattern` as a whole.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(last) = pieces.next_back() else {
        // No `*`: the one piece must cover the text exactly.
        return match_at(first, text, 0) == Some(text.len());
    };
    let Some(mut from) = match_at(first, text, 0) else {
        return false;
    };
    let Some(end) = match_back(last, text, text.len()) else {
        return false;
    };
    if from > end {
        return false;
    }
    // Middle pieces must fit between the anchored first and last ones.
    let window = &text[..end];
    for piece in pieces {
        match find_from(piece, window, from) {
            Some(after) => from = after,
            None => return false,
        }
    }
    true
}

/// Matches `piece` (no `*`) starting at byte `at`; the byte just past it.
fn match_at(piece: &str, text: &str, mut at: usize) -> Option<usize> {
    for (i, run) in piece.split('?').enumerate() {
        if i > 0 {
            at += text[at..].chars().next()?.len_utf8();
        }
        if !text[at..].starts_with(run) {
            return None;
        }
        at += run.len();
    }
    Some(at)
}

/// Matches `piece` (no `*`) ending at byte `end`; the byte where it starts.
fn match_back(piece: &str, text: &str, mut end: usize) -> Option<usize> {
    for (i, run) in piece.rsplit('?').enumerate() {
        if i > 0 {
            end -= text[..end].chars().next_back()?.len_utf8();
        }
        if !text[..end].ends_with(run) {
            return None;
        }
        end -= run.len();
    }
    Some(end)
}

/// The leftmost match of `piece` (no `*`) at or after byte `from`; the byte past it.
fn find_from(piece: &str, text: &str, from: usize) -> Option<usize> {
    let lead = piece.split('?').next().unwrap_or_default();
    if lead.len() == piece.len() {
        return memmem::find(&text.as_bytes()[from..], lead.as_bytes())
            .map(|at| from + at + lead.len());
    }
    if lead.is_empty() {
        // Starts with `?`: every character boundary is a candidate.
        let mut at = from;
        loop {
            if let Some(after) = match_at(piece, text, at) {
                return Some(after);
            }
            at += text[at..].chars().next()?.len_utf8();
        }
    }
    let finder = memmem::Finder::new(lead.as_bytes());
    let mut at = from;
    while let Some(found) = finder.find(&text.as_bytes()[at..]) {
        let start = at + found;
        if let Some(after) = match_at(piece, text, start) {
            return Some(after);
        }
        // Past this occurrence's first character: the next candidate starts later.
        at = start + text[start..].chars().next()?.len_utf8();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// The definition, by dynamic programming over characters: slow and obviously right.
    fn reference(pattern: &str, text: &str) -> bool {
        let p: Vec<char> = pattern.chars().collect();
        let t: Vec<char> = text.chars().collect();
        // row[j]: pattern[..i] matches text[..j].
        let mut row = vec![false; t.len() + 1];
        row[0] = true;
        for &pc in &p {
            let mut next = vec![false; t.len() + 1];
            if pc == '*' {
                next[0] = row[0];
            }
            for j in 1..=t.len() {
                next[j] = match pc {
                    '*' => next[j - 1] || row[j],
                    '?' => row[j - 1],
                    c => row[j - 1] && t[j - 1] == c,
                };
            }
            row = next;
        }
        row[t.len()]
    }

    #[test]
    fn semantics_of_star_and_question_mark() {
        assert!(glob_match("*/create_payment", "asaas/create_payment"));
        assert!(glob_match("*create_payment*", "asaas/create_payment_v2"));
        assert!(glob_match("asaas/?reate_payment", "asaas/create_payment"));
        assert!(!glob_match("*/create_payment", "asaas/create_refund"));
        assert!(glob_match("*", ""));
        assert!(glob_match("", ""));
        assert!(!glob_match("", "a"));
        assert!(!glob_match("a?", "a"));
        assert!(glob_match("ch?rge*t", "charge small amount"));
        assert!(!glob_match("charge", "charge small amount"));
        // `?` is one character, not one byte.
        assert!(glob_match("caf?", "café"));
        assert!(glob_match("*?", "é"));
        assert!(!glob_match("??", "é"));
        // The first and last pieces may not share characters.
        assert!(!glob_match("ab*ba", "aba"));
        assert!(glob_match("ab*ba", "abba"));
        assert!(glob_match("a*?*b", "axb"));
        assert!(!glob_match("a*?*b", "ab"));
    }

    #[test]
    fn agrees_with_the_reference_on_random_small_cases() {
        let mut rng = fastrand::Rng::with_seed(7);
        let pattern_chars = ['a', 'b', 'é', '?', '*'];
        let text_chars = ['a', 'b', 'é'];
        for _ in 0..60_000 {
            let pattern: String = (0..rng.usize(0..8))
                .map(|_| pattern_chars[rng.usize(0..pattern_chars.len())])
                .collect();
            let text: String = (0..rng.usize(0..10))
                .map(|_| text_chars[rng.usize(0..text_chars.len())])
                .collect();
            assert_eq!(
                glob_match(&pattern, &text),
                reference(&pattern, &text),
                "pattern {pattern:?} text {text:?}"
            );
        }
    }

    fn timed(pattern: &str, text: &str) -> (bool, Duration) {
        let start = Instant::now();
        let matched = glob_match(pattern, text);
        (matched, start.elapsed())
    }

    #[test]
    fn hostile_patterns_answer_in_linear_time() {
        // Many stars against a long text: a backtracking matcher retries every star.
        let pattern = "*a".repeat(100_000);
        let text = "b".repeat(200_000);
        let (matched, took) = timed(&pattern, &text);
        assert!(!matched);
        assert!(took < Duration::from_secs(1), "took {took:?}");

        let text = "a".repeat(200_000);
        let (matched, took) = timed(&pattern, &text);
        assert!(matched);
        assert!(took < Duration::from_secs(1), "took {took:?}");

        // A long literal after a star that almost matches everywhere.
        let pattern = format!("*{}b", "a".repeat(1_000));
        let text = "a".repeat(200_000);
        let (matched, took) = timed(&pattern, &text);
        assert!(!matched);
        assert!(took < Duration::from_secs(1), "took {took:?}");
        let pattern = format!("*{}b*", "a".repeat(1_000));
        let (matched, took) = timed(&pattern, &text);
        assert!(!matched);
        assert!(took < Duration::from_secs(1), "took {took:?}");
    }

    #[test]
    fn bounds_refuse_long_patterns_and_ids() {
        assert_eq!(check_pattern(&"*".repeat(MAX_PATTERN_LEN)), Ok(()));
        let err = check_pattern(&"*".repeat(MAX_PATTERN_LEN + 1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "glob pattern is 1025 bytes long; the limit is 1024"
        );
        assert_eq!(check_id(&"a".repeat(MAX_ID_LEN)), Ok(()));
        assert!(check_id(&"a".repeat(MAX_ID_LEN + 1)).is_err());
    }
}
