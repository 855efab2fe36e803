//! Terminal-safe text: escapes control characters, escape sequences and bidi overrides
//! visibly, so text from clients cannot drive the terminal that shows it.

use crate::mask::mask;
use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether line breaks and tabs survive: a one-line field (a tail line, a table cell)
/// must not forge a second line; a block of text (an error report) keeps its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lines {
    Escape,
    Keep,
}

/// Text for one line of a terminal: every C0 control (line breaks and tabs too), DEL, C1
/// control and bidi override, isolate or mark becomes a visible escape (`\e`, `\n`,
/// `\x07`, `\u{9b}`, `\u{202e}`). Other text, accents, CJK and emoji included, is kept;
/// borrows when nothing needed escaping.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    escape(text, Lines::Escape)
}

/// As [`sanitize`], but line breaks (`\n`) and tabs stay: for multi-line text such as
/// error messages and reports.
pub fn sanitize_text(text: &str) -> Cow<'_, str> {
    escape(text, Lines::Keep)
}

/// What a human-readable view shows of text from the wire: secrets masked, then made
/// safe for one terminal line. Borrows when neither changed anything.
pub fn shown(text: &str) -> Cow<'_, str> {
    match mask(text) {
        Cow::Borrowed(text) => sanitize(text),
        Cow::Owned(masked) => match sanitize(&masked) {
            Cow::Borrowed(_) => Cow::Owned(masked),
            Cow::Owned(clean) => Cow::Owned(clean),
        },
    }
}

/// As [`shown`], for multi-line text (pretty JSON): lines are kept.
pub fn shown_text(text: &str) -> Cow<'_, str> {
    match mask(text) {
        Cow::Borrowed(text) => sanitize_text(text),
        Cow::Owned(masked) => match sanitize_text(&masked) {
            Cow::Borrowed(_) => Cow::Owned(masked),
            Cow::Owned(clean) => Cow::Owned(clean),
        },
    }
}

/// Bidi controls that reorder what follows them on screen: LRM/RLM, the embeddings and
/// overrides (U+202A–U+202E), the isolates (U+2066–U+2069) and the Arabic letter mark.
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{061C}')
}

fn needs_escape(c: char, lines: Lines) -> bool {
    match c {
        '\n' | '\t' => lines == Lines::Escape,
        c => c.is_control() || is_bidi(c),
    }
}

/// A byte that may start a character needing escape: ASCII controls and DEL, and the
/// lead bytes of C1 controls (0xC2), the Arabic letter mark (0xD8) and the bidi controls
/// (0xE2). Lets the common case scan bytes without decoding.
fn suspect(b: u8) -> bool {
    b < 0x20 || b == 0x7F || b == 0xC2 || b == 0xD8 || b == 0xE2
}

/// The first byte `suspect` holds for. Eight bytes at a time while they are all printable
/// ASCII (the common case: names, ids, JSON text), byte by byte in a word that is not.
fn first_suspect(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let x = u64::from_le_bytes(word);
        // A byte under 0x20, a byte equal to 0x7F, or a byte with its high bit set (any
        // non-ASCII byte, among them 0xC2, 0xD8 and 0xE2) sets its high bit here.
        let del = x ^ (0x7F * ONES);
        let flagged = (x.wrapping_sub(0x20 * ONES) & !x) | (del.wrapping_sub(ONES) & !del) | x;
        if flagged & HIGH != 0
            && let Some(i) = chunk.iter().position(|b| suspect(*b))
        {
            return Some(at + i);
        }
        at += 8;
    }
    let rest = chunks.remainder();
    if rest.is_empty() {
        return None;
    }
    // The tail as one more word, padded with spaces (not suspect).
    let mut word = [b' '; 8];
    word[..rest.len()].copy_from_slice(rest);
    let x = u64::from_le_bytes(word);
    let del = x ^ (0x7F * ONES);
    let flagged = (x.wrapping_sub(0x20 * ONES) & !x) | (del.wrapping_sub(ONES) & !del) | x;
    if flagged & HIGH == 0 {
        return None;
    }
    rest.iter().position(|b| suspect(*b)).map(|i| at + i)
}

#[inline]
fn escape(text: &str, lines: Lines) -> Cow<'_, str> {
    match first_suspect(text.as_bytes()) {
        None => Cow::Borrowed(text),
        Some(first) => escape_from(text, first, lines),
    }
}

/// `escape` once a suspect byte is found at `first`: kept out of line, so the common
/// clean case is a scan and a return.
#[inline(never)]
fn escape_from(text: &str, first: usize, lines: Lines) -> Cow<'_, str> {
    // A suspect lead byte is only a guess (é is 0xC3, but ¡ is 0xC2): decode from there.
    let Some(at) = text[first..]
        .char_indices()
        .find(|(_, c)| needs_escape(*c, lines))
        .map(|(i, _)| first + i)
    else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..at]);
    for c in text[at..].chars() {
        if !needs_escape(c, lines) {
            out.push(c);
            continue;
        }
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_scan_finds_the_byte_the_byte_scan_finds() {
        let mut bytes: Vec<u8> = (0u8..=255).collect();
        bytes.extend(b"plain ascii text, long enough for several words of eight");
        for len in 0..bytes.len().min(40) {
            for start in 0..bytes.len() - len {
                let slice = &bytes[start..start + len];
                assert_eq!(
                    first_suspect(slice),
                    slice.iter().position(|b| suspect(*b)),
                    "{slice:?}"
                );
            }
        }
        for b in 0u8..=255 {
            for at in 0..24 {
                let mut text = vec![b'a'; 24];
                text[at] = b;
                let want = text.iter().position(|b| suspect(*b));
                assert_eq!(first_suspect(&text), want, "byte {b:#x} at {at}");
            }
        }
    }

    #[test]
    fn normal_text_is_borrowed_unchanged() {
        for text in [
            "",
            "plain ascii, with punctuation: {\"a\":1} \\ / ~",
            "café naïve façade ¡hola! ¿qué? Ø æ ß",
            "日本語のテキスト 中文 한국어",
            "emoji 🦀🚀 👩‍👩‍👧 ✓ → … — ‘quotes’",
            "Arabic العربية and Hebrew עברית without overrides",
            "C:\\path\\to\\file and \\e literally",
        ] {
            assert!(
                matches!(sanitize(text), Cow::Borrowed(_)),
                "changed: {text}"
            );
            assert!(matches!(sanitize_text(text), Cow::Borrowed(_)));
        }
    }

    #[test]
    fn escape_sequences_become_visible() {
        let hostile = "U\u{1b}]52;c;aGk=\u{7}\u{1b}]0;HACKED\u{7}\u{1b}[2J";
        assert_eq!(
            sanitize(hostile),
            "U\\e]52;c;aGk=\\x07\\e]0;HACKED\\x07\\e[2J"
        );
    }

    #[test]
    fn every_c0_control_del_and_c1_control_is_escaped() {
        for b in (0u32..0x20).chain([0x7F]) {
            let c = char::from_u32(b).unwrap();
            let out = sanitize(&format!("a{c}b")).into_owned();
            assert!(!out.chars().any(char::is_control), "{b:#x} -> {out:?}");
            assert!(out.starts_with("a\\") && out.ends_with('b'), "{out:?}");
        }
        assert_eq!(sanitize("\u{0}\u{8}\u{7f}"), "\\x00\\x08\\x7f");
        assert_eq!(sanitize("a\r\nb\tc"), "a\\r\\nb\\tc");
        for b in 0x80u32..0xA0 {
            let c = char::from_u32(b).unwrap();
            assert_eq!(sanitize(&format!("x{c}y")), format!("x\\u{{{b:x}}}y"));
        }
        // CSI as one C1 character: the 8-bit form of ESC [.
        assert_eq!(sanitize("\u{9b}2J"), "\\u{9b}2J");
    }

    #[test]
    fn bidi_overrides_isolates_and_marks_are_escaped() {
        let cases = [
            ('\u{202A}', "\\u{202a}"),
            ('\u{202B}', "\\u{202b}"),
            ('\u{202C}', "\\u{202c}"),
            ('\u{202D}', "\\u{202d}"),
            ('\u{202E}', "\\u{202e}"),
            ('\u{2066}', "\\u{2066}"),
            ('\u{2067}', "\\u{2067}"),
            ('\u{2068}', "\\u{2068}"),
            ('\u{2069}', "\\u{2069}"),
            ('\u{200E}', "\\u{200e}"),
            ('\u{200F}', "\\u{200f}"),
            ('\u{061C}', "\\u{61c}"),
        ];
        for (c, escaped) in cases {
            assert_eq!(sanitize(&format!("ab{c}cd")), format!("ab{escaped}cd"));
            assert_eq!(sanitize_text(&format!("{c}")), escaped);
        }
        // Neighbours of the ranges are ordinary text.
        for c in [
            '\u{2029}', '\u{202F}', '\u{2065}', '\u{206A}', '\u{2010}', '\u{061B}',
        ] {
            let text = format!("a{c}b");
            assert!(matches!(sanitize(&text), Cow::Borrowed(_)), "{c:?}");
        }
    }

    #[test]
    fn multi_byte_text_around_escapes_is_kept_whole() {
        let text = "é\u{1b}日\u{202e}🦀\u{85}ñ";
        let out = sanitize(text);
        assert_eq!(out, "é\\e日\\u{202e}🦀\\u{85}ñ");
        // Lead bytes shared with escaped characters (0xC2, 0xE2) but not escaped.
        assert!(matches!(sanitize("¡ ° — € ‘’"), Cow::Borrowed(_)));
    }

    #[test]
    fn text_mode_keeps_lines_and_tabs_only() {
        assert_eq!(
            sanitize_text("line 1\n\tline 2\u{1b}[31m\r"),
            "line 1\n\tline 2\\e[31m\\r"
        );
        assert!(matches!(sanitize_text("a\nb\tc"), Cow::Borrowed(_)));
    }

    #[test]
    fn shown_masks_then_escapes() {
        assert_eq!(
            shown("{\"password\":\"x\u{1b}]0;t\u{7}\"} \u{202e}"),
            "{\"password\":\"****\"} \\u{202e}"
        );
        assert!(matches!(shown("nothing here"), Cow::Borrowed(_)));
        assert!(matches!(shown("token=abc"), Cow::Owned(_)));
    }
}
