//! Secret masking: secret-named fields (matched by their decoded, normalised name),
//! Authorization values and values shaped like keys or tokens become `****` in any text
//! before it is shown, logged or copied. Masking is idempotent.

use regex::{Captures, Regex};
use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::LazyLock;

/// What a masked secret becomes.
pub const MASK: &str = "****";

/// Field names whose value is secret, lower-case and without separators (`-`, `_`, `.`,
/// spaces are ignored when comparing). A name matches as a suffix, so `db_password`,
/// `aws_secret_access_key` and `x-api-key` are covered by `password`, `accesskey` and
/// `apikey`.
const SECRET_SUFFIXES: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "accesskeyid",
    "secretkey",
    "privatekey",
    "signingkey",
    "encryptionkey",
    "clientsecret",
    "authorization",
    "cookie",
    "cookies",
    "credential",
    "credentials",
];

/// Words that make a name secret wherever they are in it (`privateKeyPem`,
/// `password_hash`, `api_key_value`, `secretValue`): a name holding one of these is
/// masked even when it ends in something else. Over-masking a `password_policy` is the
/// safe side.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "privatekey",
    "apikey",
    "accesskey",
    "credential",
];

/// Names too short or too common to match as a suffix (`oauth`, `user_session_count`):
/// only the whole name counts.
const SECRET_NAMES: &[&str] = &["session", "auth"];

/// Auth schemes kept in front of a masked credential: they say what kind it was.
const SCHEMES: &[&str] = &["bearer", "basic", "token", "digest"];

/// Values secret by their shape, wherever they appear: `Bearer …`, `CodeSpar` `csk_…`
/// keys, OpenAI-style `sk-…`, Stripe `sk_live_…`/`rk_test_…`, Google `AIza…` keys, JWTs,
/// AWS key ids, GitHub and Slack (`xox…-`, `xapp-`) tokens, the password in a URL's
/// `user:PASS@`, and the body of a PEM private key. One regex, so a line is searched
/// once; the literal prefixes let it skip most text quickly.
static SHAPED: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?-u)",
        r"\b(?P<bearer>(?i:bearer))\s+[A-Za-z0-9._~+/\-]+=*",
        r"|\bcsk_(?P<csk>[A-Za-z0-9_\-]*)(?P<cskmask>\*+)?",
        r"|\b(?P<sk>sk-)[A-Za-z0-9_\-]*[0-9][A-Za-z0-9_\-]*",
        r"|\b(?P<stripe>[sr]k_(?:live|test)_)[A-Za-z0-9]{8,}",
        r"|\b(?P<google>AIza)[0-9A-Za-z_\-]{35}",
        r"|\b(?P<jwt>eyJ)[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
        r"|\b(?P<aws>A[KS]IA)[0-9A-Z]{16}\b",
        r"|\b(?P<gh>gh[pousr]_|github_pat_)[A-Za-z0-9_]{20,}",
        r"|\b(?P<slack>xox[abposr]-|xapp-)[A-Za-z0-9\-]{10,}",
        r"|\b(?P<userinfo>[A-Za-z][A-Za-z0-9+.\-]{0,31}://[A-Za-z0-9._~%!$&()+,;=\-]{1,128}:)[A-Za-z0-9._~%!$&()+,;=:\-]{1,256}@",
        r"|(?P<pem>-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----)",
    ))
    .ok()
});

/// Where a PEM block's `-----END …-----` line ends: the private key between is masked
/// whole. Searched from the `BEGIN` line on, and only that far.
fn pem_end(text: &str, from: usize) -> Option<usize> {
    let end = from + text.get(from..)?.find("-----END ")?;
    let close = end + "-----END ".len();
    Some(close + text.get(close..)?.find("-----")? + "-----".len())
}

/// Mask every secret in `text`. Borrows when nothing needed masking.
pub fn mask(text: &str) -> Cow<'_, str> {
    let out = mask_pem(mask_fields(text));
    match SHAPED.as_ref() {
        Some(re) => replace(out, re, mask_shaped),
        None => out,
    }
}

/// Replaces the body of every PEM private key with the mask, keeping its two lines'
/// labels; a `BEGIN` with no `END` masks to the end of the text.
fn mask_pem(text: Cow<'_, str>) -> Cow<'_, str> {
    const BEGIN: &str = "-----BEGIN ";
    if !text.contains(BEGIN) {
        return text;
    }
    let Some(re) = SHAPED.as_ref() else {
        return text;
    };
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for caps in re.captures_iter(&text) {
        let Some(begin) = caps.name("pem") else {
            continue;
        };
        if begin.start() < copied {
            continue;
        }
        out.push_str(&text[copied..begin.end()]);
        out.push_str(MASK);
        match pem_end(&text, begin.end()) {
            Some(end) => {
                let label = text[begin.end()..end]
                    .rfind("-----END ")
                    .map_or(end, |at| begin.end() + at);
                out.push_str(&text[label..end]);
                copied = end;
            }
            None => copied = text.len(),
        }
    }
    if copied == 0 {
        return text;
    }
    out.push_str(&text[copied..]);
    if out == *text { text } else { Cow::Owned(out) }
}

/// Mask one value known to be secret (an API key setting, a token): keeps a `csk_`
/// prefix and an auth scheme, hides the rest. Empty stays empty.
pub fn mask_secret(value: &str) -> String {
    if value.is_empty() || value.chars().all(|c| c == '*') {
        return value.to_string();
    }
    if let Some((scheme, _)) = value.split_once(' ')
        && SCHEMES.contains(&scheme.to_ascii_lowercase().as_str())
    {
        return format!("{scheme} {MASK}");
    }
    if value.starts_with("csk_") {
        return mask(value).into_owned();
    }
    MASK.to_string()
}

fn mask_shaped(c: &Captures<'_>) -> String {
    if let Some(scheme) = c.name("bearer") {
        return format!("{} {MASK}", scheme.as_str());
    }
    if let Some(user) = c.name("userinfo") {
        return format!("{}{MASK}@", user.as_str());
    }
    // Masked by `mask_pem` before: what is left is a `BEGIN` already followed by the mask.
    if c.name("pem").is_some() {
        return c[0].to_string();
    }
    if let Some(rest) = c.name("csk") {
        let rest = rest.as_str();
        // `csk_` alone is prose ("keys start with csk_"), not a key.
        if rest.is_empty() && c.name("cskmask").is_none() {
            return c[0].to_string();
        }
        let env = ["live_", "test_"]
            .into_iter()
            .find(|p| rest.starts_with(p))
            .unwrap_or("");
        return format!("csk_{env}{MASK}");
    }
    // `sk-` needs a key's length, so a short hyphenated word stays.
    if c.name("sk").is_some() && c[0].len() < 23 {
        return c[0].to_string();
    }
    let prefix = ["sk", "stripe", "google", "jwt", "aws", "gh", "slack"]
        .into_iter()
        .find_map(|name| c.name(name))
        .map_or("", |m| m.as_str());
    format!("{prefix}{MASK}")
}

fn replace<'a>(
    text: Cow<'a, str>,
    re: &Regex,
    f: impl FnMut(&Captures<'_>) -> String,
) -> Cow<'a, str> {
    // A rule may match and decide to keep the text (`csk_` in prose); comparing keeps
    // such text borrowed, so callers can tell "nothing was secret".
    match re.replace_all(&text, f) {
        Cow::Owned(s) if s != *text => Cow::Owned(s),
        _ => text,
    }
}

/// Whether a field name (raw, as written) names a secret.
fn is_secret_name(name: &str) -> bool {
    // The last 32 significant bytes, lower-cased, read from the end: enough for every
    // suffix; `len` counts them all, for whole-name matches.
    let mut tail = [0u8; 32];
    let mut len = 0usize;
    for b in name.bytes().rev() {
        if matches!(b, b'-' | b'_' | b'.' | b' ') {
            continue;
        }
        if len < tail.len() {
            tail[tail.len() - 1 - len] = b.to_ascii_lowercase();
        }
        len += 1;
    }
    let kept = &tail[tail.len() - len.min(tail.len())..];
    SECRET_SUFFIXES.iter().any(|s| kept.ends_with(s.as_bytes()))
        || (len <= tail.len() && SECRET_NAMES.iter().any(|s| kept == s.as_bytes()))
        || contains_secret_word(name)
}

/// Whether the name, lower-cased and without separators, holds one of `SECRET_WORDS`.
fn contains_secret_word(name: &str) -> bool {
    let squeezed: Vec<u8> = name
        .bytes()
        .filter(|b| !matches!(b, b'-' | b'_' | b'.' | b' '))
        .map(|b| b.to_ascii_lowercase())
        .collect();
    SECRET_WORDS
        .iter()
        .any(|w| squeezed.windows(w.len()).any(|win| win == w.as_bytes()))
}

/// Whether the name is a cookie header's, whose value is every pair to the line's end.
fn is_cookie_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == "cookie" || lower == "set-cookie" || lower == "cookies"
}

/// How a field's name was quoted, which says how its string value is quoted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    /// `password=…`, `password: …`
    Bare,
    /// `"password": …` (JSON) or `'password': …`
    Plain(u8),
    /// `\"password\": …`: JSON text inside a JSON string.
    Escaped,
}

/// Masks the values of secret-named fields: `"api_key": "…"`, `password=…`,
/// `Authorization: Bearer …`, `\"token\":\"…\"` inside a JSON string. Names written with
/// JSON escapes (`"pass\u0077ord"`) are matched by what they decode to. One pass over the
/// text; only a `:` or `=` makes it look back at a name.
fn mask_fields(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    // Bytes before `copied` are in `out` (when there is one).
    let mut copied = 0usize;
    let mut at = 0usize;
    while let Some(off) = bytes[at..].iter().position(|&b| b == b':' || b == b'=') {
        let sep = at + off;
        at = sep + 1;
        let Some((quote, name)) = field_name(text, sep) else {
            continue;
        };
        if !is_secret_name(&name) {
            continue;
        }
        let Some((start, mut end, kind)) = field_value(bytes, sep + 1, quote) else {
            continue;
        };
        if matches!(kind, Value::Bare)
            && quote == Quote::Bare
            && bytes[sep] == b':'
            && is_cookie_name(&name)
        {
            // `Cookie: a=1; sid=2`: every pair is the cookie, not only the first.
            end = (end..bytes.len())
                .find(|&i| matches!(bytes[i], b'\r' | b'\n' | b'"' | b'\'' | b'\\'))
                .unwrap_or(bytes.len());
        }
        let value = &text[start..end];
        let masked = match kind {
            Value::Str | Value::Bare => mask_secret(value),
            Value::Number => format!("\"{MASK}\""),
        };
        if masked != value {
            let buf = out.get_or_insert_with(|| String::with_capacity(text.len()));
            buf.push_str(&text[copied..start]);
            buf.push_str(&masked);
            copied = end;
        }
        at = end.max(at);
    }
    match out {
        Some(mut buf) => {
            buf.push_str(&text[copied..]);
            Cow::Owned(buf)
        }
        None => Cow::Borrowed(text),
    }
}

/// The name in front of the separator at `sep`, decoded when JSON escapes spell it.
fn field_name(text: &str, sep: usize) -> Option<(Quote, Cow<'_, str>)> {
    let bytes = text.as_bytes();
    let mut end = sep;
    while end > 0 && matches!(bytes[end - 1], b' ' | b'\t') {
        end -= 1;
    }
    let last = *bytes.get(end.checked_sub(1)?)?;
    if last == b'"' || last == b'\'' {
        let close = end - 1;
        if last == b'"' && close > 0 && bytes[close - 1] == b'\\' {
            // `\"name\"`: the name runs back to the previous `\"`.
            let inner_end = close - 1;
            let lo = inner_end.saturating_sub(128);
            let open = text[lo..inner_end].rfind("\\\"")? + lo;
            return Some((Quote::Escaped, Cow::Borrowed(&text[open + 2..inner_end])));
        }
        let lo = close.saturating_sub(256);
        let open = (lo..close)
            .rev()
            .find(|&i| bytes[i] == last && !escaped(bytes, i))?;
        let raw = &text[open + 1..close];
        let name = if last == b'"' && raw.contains('\\') {
            Cow::Owned(serde_json::from_str::<String>(&text[open..=close]).ok()?)
        } else {
            Cow::Borrowed(raw)
        };
        return Some((Quote::Plain(last), name));
    }
    let start = (0..end)
        .rev()
        .take_while(|&i| bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'-' | b'.'))
        .last()?;
    Some((Quote::Bare, Cow::Borrowed(&text[start..end])))
}

/// Whether the byte at `i` is escaped by an odd run of backslashes before it.
fn escaped(bytes: &[u8], i: usize) -> bool {
    bytes[..i].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
}

#[derive(Clone, Copy)]
enum Value {
    /// The inside of a quoted string.
    Str,
    /// A JSON number, replaced by a masked string so the JSON stays valid.
    Number,
    /// A bare word (and the credential after an auth scheme).
    Bare,
}

/// Where the value after a separator is: `[start, end)` and what it is. Objects, arrays,
/// `true`/`false`/`null` and empty values are not masked (names inside are looked at on
/// their own).
fn field_value(bytes: &[u8], from: usize, quote: Quote) -> Option<(usize, usize, Value)> {
    let mut start = from;
    while start < bytes.len() && matches!(bytes[start], b' ' | b'\t') {
        start += 1;
    }
    let first = *bytes.get(start)?;
    if quote == Quote::Escaped && first == b'\\' && bytes.get(start + 1) == Some(&b'"') {
        let open = start + 2;
        let len = find(&bytes[open..], b"\\\"")?;
        return Some((open, open + len, Value::Str));
    }
    if first == b'"' || first == b'\'' {
        let open = start + 1;
        let close = (open..bytes.len()).find(|&i| bytes[i] == first && !escaped(bytes, i))?;
        return Some((open, close, Value::Str));
    }
    let stop = |b: u8| {
        b.is_ascii_whitespace()
            || matches!(b, b'"' | b'\'' | b',' | b';' | b'}' | b']' | b'&' | b'\\')
    };
    let word_end = |from: usize| {
        (from..bytes.len())
            .find(|&i| stop(bytes[i]))
            .unwrap_or(bytes.len())
    };
    let mut end = word_end(start);
    let word = &bytes[start..end];
    if word.is_empty() || matches!(first, b'{' | b'[') {
        return None;
    }
    if matches!(quote, Quote::Plain(b'"')) {
        if matches!(word, b"true" | b"false" | b"null") {
            return None;
        }
        if first == b'-' || first.is_ascii_digit() {
            return Some((start, end, Value::Number));
        }
    }
    // `Bearer xyz`: the scheme is part of the value, so it can be kept.
    if SCHEMES
        .iter()
        .any(|s| word.eq_ignore_ascii_case(s.as_bytes()))
        && bytes.get(end) == Some(&b' ')
    {
        let next = (end..bytes.len())
            .find(|&i| bytes[i] != b' ')
            .unwrap_or(bytes.len());
        if next < bytes.len() && !stop(bytes[next]) {
            end = word_end(next);
        }
    }
    Some((start, end, Value::Bare))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A writer that masks what passes through it, for the log file. tracing's fmt layer
/// writes each event with one `write_all`, so a secret is never split across two writes;
/// bytes that are not UTF-8 pass through unchanged.
#[derive(Debug)]
pub struct MaskingWriter<W: Write>(pub W);

impl<W: Write> Write for MaskingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match std::str::from_utf8(buf) {
            Ok(text) => self.0.write_all(mask(text).as_bytes())?,
            Err(_) => self.0.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patterns_compile() {
        assert!(SHAPED.is_some());
    }

    #[test]
    fn a_frame_with_a_key_in_its_input_and_a_bearer_header_is_masked() {
        let frame = r#"{"kind":"tool.called","seq":7,"sessionId":"ses_1","tool":"http.get","input":{"url":"https://api.example.com/x","apiKey":"csk_test_abc123XYZ","note":"use csk_live_9f8e7d6c"},"headers":{"Authorization":"Bearer csk_live_supersecret"},"outcome":{"result":{"ok":true}}}"#;
        let masked = mask(frame);
        assert_eq!(
            masked,
            r#"{"kind":"tool.called","seq":7,"sessionId":"ses_1","tool":"http.get","input":{"url":"https://api.example.com/x","apiKey":"csk_test_****","note":"use csk_live_****"},"headers":{"Authorization":"Bearer ****"},"outcome":{"result":{"ok":true}}}"#
        );
        for secret in ["abc123XYZ", "9f8e7d6c", "supersecret"] {
            assert!(!masked.contains(secret), "{secret} leaked: {masked}");
        }
        // Still the same JSON shape: masking must not break what is then pretty-printed.
        let v: serde_json::Value = serde_json::from_str(&masked).unwrap();
        assert_eq!(v["input"]["apiKey"], "csk_test_****");
    }

    #[test]
    fn pretty_json_and_header_lines() {
        let pretty = "{\n  \"api_key\": \"sk-verysecret\",\n  \"password\": \"hun\\\"ter2\",\n  \"token\": \"\"\n}";
        assert_eq!(
            mask(pretty),
            "{\n  \"api_key\": \"****\",\n  \"password\": \"****\",\n  \"token\": \"\"\n}"
        );
        assert_eq!(
            mask("Authorization: Bearer eyJhbGciOi.J9x-y_z"),
            "Authorization: Bearer ****"
        );
        assert_eq!(
            mask("curl -H 'authorization: basic dXNlcjpwYXNz' http://x"),
            "curl -H 'authorization: basic ****' http://x"
        );
        assert_eq!(mask("sent bearer abc.def== ok"), "sent bearer **** ok");
        assert_eq!(
            mask("GET /v1/x?api_key=abc123&page=2"),
            "GET /v1/x?api_key=****&page=2"
        );
        assert_eq!(
            mask("CODESPAR_API_KEY=csk_live_x1"),
            "CODESPAR_API_KEY=csk_live_****"
        );
        assert_eq!(mask("key csk_abc"), "key csk_****");
    }

    #[test]
    fn non_secrets_are_unchanged_and_borrowed() {
        for text in [
            r#"{"kind":"session.created","sessionId":"ses_1","mocks":[{"tool":"search","entries":2}]}"#,
            "max_tokens: 512, tokens=40, token_count: 3",
            "keys start with csk_ and are sent as a bearer",
            "The basic idea: authorization happens later.",
            "",
        ] {
            assert!(matches!(mask(text), Cow::Borrowed(_)), "changed: {text}");
        }
    }

    #[test]
    fn every_secret_name_is_masked_whatever_its_case_and_separators() {
        for name in [
            "password",
            "Password",
            "PASSWD",
            "pwd",
            "db_password",
            "passphrase",
            "secret",
            "client_secret",
            "clientSecret",
            "token",
            "access_token",
            "refreshToken",
            "api_key",
            "apikey",
            "api-key",
            "X-Api-Key",
            "openai_api_key",
            "access_key",
            "aws_access_key_id",
            "secret_access_key",
            "aws_secret_access_key",
            "AWS_SECRET_ACCESS_KEY",
            "private_key",
            "privateKey",
            "ssh.private.key",
            "secret_key",
            "authorization",
            "Proxy-Authorization",
            "cookie",
            "Set-Cookie",
            "session",
            "auth",
            "credential",
            "credentials",
            "privateKeyPem",
            "password_hash",
            "api_key_value",
            "secretValue",
            "aws_secret_access_key_id",
        ] {
            let json = format!(r#"{{"{name}":"hunter2","n":1}}"#);
            assert_eq!(
                mask(&json),
                format!(r#"{{"{name}":"****","n":1}}"#),
                "{name}"
            );
            assert_eq!(
                mask(&format!("{name}=hunter2&x=1")),
                format!("{name}=****&x=1")
            );
            assert_eq!(mask(&format!("{name}: hunter2")), format!("{name}: ****"));
        }
    }

    #[test]
    fn a_name_written_with_json_escapes_is_matched_by_what_it_decodes_to() {
        let frame = r#"{"pass\u0077ord":"hunter2","\u0074oken":"t0k","ok\"":1}"#;
        let masked = mask(frame);
        assert_eq!(
            masked,
            r#"{"pass\u0077ord":"****","\u0074oken":"****","ok\"":1}"#
        );
        let v: serde_json::Value = serde_json::from_str(&masked).unwrap();
        assert_eq!(v["password"], "****");
    }

    #[test]
    fn nested_and_embedded_secrets_are_masked() {
        // An object under a secret name keeps its shape; its secret fields are masked.
        assert_eq!(
            mask(r#"{"credentials":{"user":"bob","pwd":"hunter2"}}"#),
            r#"{"credentials":{"user":"bob","pwd":"****"}}"#
        );
        // JSON text inside a JSON string (a tool's input passed as text).
        assert_eq!(
            mask(r#"{"input":"{\"password\":\"hunter2\",\"q\":\"x\"}"}"#),
            r#"{"input":"{\"password\":\"****\",\"q\":\"x\"}"}"#
        );
        // A number stays valid JSON once masked; booleans and null say nothing secret.
        let masked = mask(r#"{"pin_token":123456,"secret":true,"token":null}"#);
        assert_eq!(masked, r#"{"pin_token":"****","secret":true,"token":null}"#);
        assert!(serde_json::from_str::<serde_json::Value>(&masked).is_ok());
        // A cookie header is every pair to the line's end, whichever one is the session.
        assert_eq!(mask("Cookie: sid=abc123; theme=dark"), "Cookie: ****");
        assert_eq!(
            mask("Cookie: theme=dark; sessionid=abc123\r\nHost: x"),
            "Cookie: ****\r\nHost: x"
        );
        assert_eq!(
            mask("set-cookie: a=1; b=2\ncookie=q&x=1"),
            "set-cookie: ****\ncookie=****&x=1"
        );
    }

    #[test]
    fn values_shaped_like_keys_are_masked_wherever_they_are() {
        let cases = [
            (
                "note sk-proj-4f9a8b7c6d5e4f3a2b1c0d here",
                "note sk-**** here",
            ),
            ("sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", "sk-****"),
            ("key csk_live_abc123", "key csk_live_****"),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U end",
                "jwt eyJ**** end",
            ),
            ("id AKIAIOSFODNN7EXAMPLE.", "id AKIA****."),
            ("temp ASIAIOSFODNN7EXAMPLE", "temp ASIA****"),
            ("gh ghp_16C7e42F292c6912E7710c838347Ae178B4a", "gh ghp_****"),
            (
                "pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
                "pat github_pat_****",
            ),
            ("slack xoxb-123456789012-abcdefghij", "slack xoxb-****"),
            ("user xoxp-1234567890-abcdef", "user xoxp-****"),
            (
                "curl -H 'X: Bearer abc.def-ghi'",
                "curl -H 'X: Bearer ****'",
            ),
            (r#"["eyJhbGciOi.eyJzdWIi.sig"]"#, r#"["eyJ****"]"#),
            (
                "db postgres://app:hunter2@db.internal:5432/x",
                "db postgres://app:****@db.internal:5432/x",
            ),
            (
                r#"{"url":"redis://default:s3cr%40t@cache:6379"}"#,
                r#"{"url":"redis://default:****@cache:6379"}"#,
            ),
            (
                "stripe sk_live_51HxYzABCDEF0123456789",
                "stripe sk_live_****",
            ),
            (
                "restricted rk_test_abcdefgh12345678",
                "restricted rk_test_****",
            ),
            (
                "maps AIzaSyA1234567890abcdefghijklmnopqrstuv end",
                "maps AIza**** end",
            ),
            (
                "app xapp-1-A0123456789-0123456789012-abcdef",
                "app xapp-****",
            ),
            (
                "k -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc==\n-----END RSA PRIVATE KEY----- after",
                "k -----BEGIN RSA PRIVATE KEY-----****-----END RSA PRIVATE KEY----- after",
            ),
            (
                r#"{"pem":"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n"}"#,
                r#"{"pem":"-----BEGIN PRIVATE KEY-----****-----END PRIVATE KEY-----\n"}"#,
            ),
            (
                "cut -----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI",
                "cut -----BEGIN EC PRIVATE KEY-----****",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(mask(text), want, "{text}");
            assert_eq!(mask(want), want, "not idempotent: {want}");
        }
    }

    #[test]
    fn words_that_only_look_secret_are_left_alone() {
        for text in [
            r#"{"token_count":3,"tokens":512,"max_tokens":40,"tokenizer":"bpe"}"#,
            "skip the sketch, sk-learn is a library; task-1234567890123456789 done",
            r#"{"sessionId":"ses_1","sessions":2,"session_count":4,"keys":["a"]}"#,
            r#"{"key":"ArrowUp","pass":true,"author":"ana","oauth_provider":"x"}"#,
            "eyJ alone, AKIA1234 short, ghp_short, xoxb-1",
            "The password policy: see docs. tokens: 12",
            "secret: ",
            "see https://example.com/a:b@c and http://host:8080/ and mailto:a@b.c",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
            "pk_live_51HxYzABCDEF0123456789 is a publishable key",
        ] {
            assert!(
                matches!(mask(text), Cow::Borrowed(_)),
                "changed: {text} -> {}",
                mask(text)
            );
        }
    }

    #[test]
    fn masking_is_idempotent() {
        for text in [
            r#"{"apiKey":"csk_test_abc","Authorization":"Bearer csk_live_x","password":"p"}"#,
            "Authorization: Bearer abc\nbearer def\ncsk_live_1 csk_2 token=t",
            "api_key = \"csk_test_q\"",
        ] {
            let once = mask(text).into_owned();
            assert_ne!(once, text);
            let twice = mask(&once).into_owned();
            assert_eq!(twice, once);
        }
    }

    #[test]
    fn mask_secret_keeps_only_the_prefix() {
        assert_eq!(mask_secret("csk_test_abc123"), "csk_test_****");
        assert_eq!(mask_secret("csk_live_abc123"), "csk_live_****");
        assert_eq!(mask_secret("hunter2"), "****");
        assert_eq!(mask_secret("Bearer xyz"), "Bearer ****");
        assert_eq!(mask_secret(""), "");
        assert_eq!(mask_secret("****"), "****");
    }

    #[test]
    fn the_log_writer_masks_each_line() {
        let mut w = MaskingWriter(Vec::new());
        w.write_all(b"INFO hydrate url=http://x authorization: Bearer sekrit\n")
            .unwrap();
        w.write_all(&[0xff, 0xfe, b'\n']).unwrap();
        assert_eq!(
            w.0,
            b"INFO hydrate url=http://x authorization: Bearer ****\n\xff\xfe\n".to_vec()
        );
    }
}
