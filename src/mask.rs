//! Secret masking: Authorization values, `csk_…` API keys and secret-named fields are
//! replaced by `****` in any text before it is shown, logged or copied. Masking is
//! idempotent, so text may pass through it more than once.

use regex::{Captures, Regex};
use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::LazyLock;

/// What a masked secret becomes.
pub const MASK: &str = "****";

/// `Authorization: Bearer xyz`, `"Authorization":"Basic xyz"`, `authorization=xyz`: the
/// scheme stays (it tells the reader what kind of credential it was), the credential goes.
static AUTHORIZATION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"(?i-u:\b((?:proxy-)?authorization)\b)(["']?\s*[:=]\s*["']?)((?i-u:bearer|basic|token|digest)\s+)?([^\s"',;}]+)"#,
    )
    .ok()
});

/// A bare bearer token anywhere else (a curl line, a log message).
static BEARER: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i-u:\b(bearer)\s+)([A-Za-z0-9._~+/\-]+=*)").ok());

/// CodeSpar keys: `csk_live_…`, `csk_test_…`, or `csk_…`. The environment part is kept
/// because "which key was it" is often the question when debugging.
static CSK: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\bcsk_([A-Za-z0-9_\-]*)(\*+)?").ok());

/// A secret-named field with a quoted or bare value: `"api_key": "…"`, `apiKey=…`,
/// `password: …`. Authorization is left to its own rule so its scheme survives.
static SECRET_FIELD: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"(?i-u:(["']?)\b(api[_-]?key|x-api-key|access[_-]?token|refresh[_-]?token|id[_-]?token|client[_-]?secret|secret[_-]?key|secret|password|passwd|token)\b(["']?))(\s*[:=]\s*)(?:"((?:[^"\\]|\\.)*)"|([^\s"',;}&]+))"#,
    )
    .ok()
});

/// Mask every secret in `text`. Borrows when nothing needed masking.
pub fn mask(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    if let Some(re) = AUTHORIZATION.as_ref() {
        out = replace(out, re, |c| {
            format!(
                "{}{}{}{MASK}",
                &c[1],
                &c[2],
                c.get(3).map_or("", |m| m.as_str())
            )
        });
    }
    if let Some(re) = BEARER.as_ref() {
        out = replace(out, re, |c| format!("{} {MASK}", &c[1]));
    }
    if let Some(re) = CSK.as_ref() {
        out = replace(out, re, mask_csk);
    }
    if let Some(re) = SECRET_FIELD.as_ref() {
        out = replace(out, re, |c| {
            let name = format!("{}{}{}{}", &c[1], &c[2], &c[3], &c[4]);
            match (c.get(5), c.get(6)) {
                (Some(quoted), _) => format!("{name}\"{}\"", mask_secret(quoted.as_str())),
                (None, Some(bare)) => format!("{name}{}", mask_secret(bare.as_str())),
                (None, None) => c[0].to_string(),
            }
        });
    }
    out
}

/// Mask one value known to be secret (an API key setting, a token): keeps a `csk_`
/// prefix and an auth scheme, hides the rest. Empty stays empty.
pub fn mask_secret(value: &str) -> String {
    if value.is_empty() || value.chars().all(|c| c == '*') {
        return value.to_string();
    }
    if let Some((scheme, _)) = value.split_once(' ')
        && ["bearer", "basic", "token", "digest"].contains(&scheme.to_ascii_lowercase().as_str())
    {
        return format!("{scheme} {MASK}");
    }
    if value.starts_with("csk_") {
        return mask(value).into_owned();
    }
    MASK.to_string()
}

fn mask_csk(c: &Captures<'_>) -> String {
    let rest = &c[1];
    let already_masked = c.get(2).is_some();
    // `csk_` alone is prose ("keys start with csk_"), not a key.
    if rest.is_empty() && !already_masked {
        return c[0].to_string();
    }
    let env = ["live_", "test_"]
        .into_iter()
        .find(|p| rest.starts_with(p))
        .unwrap_or("");
    format!("csk_{env}{MASK}")
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
        assert!(AUTHORIZATION.is_some());
        assert!(BEARER.is_some());
        assert!(CSK.is_some());
        assert!(SECRET_FIELD.is_some());
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
