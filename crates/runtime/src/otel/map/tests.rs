//! Tests of the OTLP-to-span mapping: attributes, JSON texts, lineage.
//! Kept beside map.rs so the production file stays short.

use super::*;
use crate::otel::decode;

/// What every JSON text became before `canonical_json`: parsed, cleaned, written.
fn parsed(s: &str) -> RawJson {
    match serde_json::from_str::<Value>(s) {
        Ok(value) => RawJson::from_value(&clean(value)),
        Err(_) => RawJson::from_value(&Value::String(text(s))),
    }
}

fn random_string(rng: &mut fastrand::Rng) -> String {
    const PIECES: &[&str] = &[
        "a", "b", "k", "city", "Oslo", " ", "é", "日本", "🦀", "\\n", "\\\"", "\\u001b", "\\u0041",
        "\u{202e}", "\u{85}", "\t", "\u{7f}", "0", "-", ":", ",", "{", "}",
    ];
    let mut s = String::from("\"");
    for _ in 0..rng.usize(0..6) {
        s.push_str(PIECES[rng.usize(..PIECES.len())]);
    }
    s.push('"');
    s
}

fn random_number(rng: &mut fastrand::Rng) -> String {
    const NUMBERS: &[&str] = &[
        "0",
        "-0",
        "7",
        "-7",
        "42",
        "007",
        "1.5",
        "1.0",
        "-2.50",
        "1e3",
        "1E-2",
        "2.5e+3",
        "123456789012345678",
        "1234567890123456789",
        "99999999999999999999",
        "-9223372036854775808",
        "18446744073709551615",
        "1.7976931348623157e308",
        "-",
        "01",
    ];
    NUMBERS[rng.usize(..NUMBERS.len())].to_owned()
}

fn space(rng: &mut fastrand::Rng) -> &'static str {
    [" ", "", "", "\n", "\t", "  ", "\r\n"][rng.usize(..7)]
}

fn random_value(rng: &mut fastrand::Rng, depth: usize) -> String {
    match rng.usize(0..if depth > 3 { 4 } else { 7 }) {
        0 => random_string(rng),
        1 => random_number(rng),
        2 => ["true", "false", "null", "nul", "True"][rng.usize(..5)].to_owned(),
        3 => format!("\"{}\"", ["x", "y", "", "long"][rng.usize(..4)]),
        4 | 5 => {
            let keys = ["a", "b", "c", "ab", "B", "é", "a\\u0000", "k\\t"];
            let mut s = format!("{{{}", space(rng));
            for i in 0..rng.usize(0..4) {
                if i > 0 {
                    s.push_str(&format!("{},{}", space(rng), space(rng)));
                }
                let key = keys[rng.usize(..keys.len())];
                s.push_str(&format!("\"{key}\"{}:{}", space(rng), space(rng)));
                s.push_str(&random_value(rng, depth + 1));
            }
            s.push_str(&format!("{}}}", space(rng)));
            s
        }
        _ => {
            let mut s = format!("[{}", space(rng));
            for i in 0..rng.usize(0..4) {
                if i > 0 {
                    s.push_str(&format!("{},{}", space(rng), space(rng)));
                }
                s.push_str(&random_value(rng, depth + 1));
            }
            s.push_str(&format!("{}]", space(rng)));
            s
        }
    }
}

fn check(s: &str, fast: &mut usize) {
    if canonical_json(s).is_some() {
        *fast += 1;
    }
    assert_eq!(json_text(s).get(), parsed(s).get(), "text {s:?}");
}

#[test]
fn the_one_pass_copy_writes_what_parsing_writes() {
    let mut fast = 0;
    for case in [
        r#"{"city":"Oslo","units":"C"}"#,
        r#"{"city": "Oslo", "units": "C"}"#,
        r#"{"units":"C","city":"Oslo"}"#,
        r#"{"a":1,"a":2}"#,
        r#"  [1, 2, {"z": null, "y": [true, false]}]  "#,
        r#"{"n":1.50}"#,
        r#"{"n":-0}"#,
        r#"{"n":1e2}"#,
        r#"{"s":"\u001b[31m"}"#,
        r#"{"s":"tab\there"}"#,
        r#"{"s":"bidi \u202e"}"#,
        "{\"s\":\"raw bidi \u{202e}\"}",
        "{\"s\":\"raw c1 \u{85}\"}",
        "{\"s\":\"raw del \u{7f}\"}",
        r#"{"k":"v"} trailing"#,
        r#"{"k":"v""#,
        "[]",
        "{}",
        "[ ]",
        "{ }",
        "[01]",
        "[1,]",
        "{\"a\":1,}",
        &format!(
            "{{\"long\":\"{}\"}}",
            "x".repeat(decode::MAX_VALUE_BYTES + 10)
        ),
        &format!("{{\"{}\":1}}", "k".repeat(decode::MAX_NAME_BYTES + 1)),
        &format!("{}{}", "[".repeat(100), "]".repeat(100)),
        &format!("{}{}", "[".repeat(200), "]".repeat(200)),
    ] {
        check(case, &mut fast);
    }
    let mut rng = fastrand::Rng::with_seed(17);
    for _ in 0..20_000 {
        let mut s = random_value(&mut rng, 0);
        if !(s.starts_with('{') || s.starts_with('[')) {
            s = format!("[{s}]");
        }
        check(&s, &mut fast);
        // And a byte's worth of damage.
        let mut damaged: Vec<char> = s.chars().collect();
        let at = rng.usize(..damaged.len());
        match rng.u8(0..3) {
            0 => {
                damaged.remove(at);
            }
            1 => damaged.insert(at, [',', '"', '\\', ' ', '1', '}'][rng.usize(..6)]),
            _ => damaged.truncate(at.max(1)),
        }
        check(&damaged.into_iter().collect::<String>(), &mut fast);
    }
    assert!(fast > 5_000, "the fast path was taken {fast} times");
    // Members sent out of key order (a Python dict's order) are put in order in the one
    // pass, nested objects too; a key named twice is left to the parser.
    assert_eq!(
        canonical_json(r#"{"temp": 21, "sky": {"z": [1, {"b": 2, "a": 1}], "a": null}}"#)
            .as_deref(),
        Some(r#"{"sky":{"a":null,"z":[1,{"a":1,"b":2}]},"temp":21}"#)
    );
    assert_eq!(canonical_json(r#"{"b":1,"a":2,"b":3}"#), None);
}

/// `first_user_text` read from trees: every message parsed into one (each on its own,
/// so a number past `f64`'s range in one does not hide another's text).
fn first_user_text_parsed(messages: &str) -> Option<String> {
    let messages: Vec<&RawValue> = serde_json::from_str(messages).ok()?;
    let user = messages
        .iter()
        .filter_map(|m| serde_json::from_str::<Value>(m.get()).ok())
        .find(|m| m["role"] == "user")?;
    let content = tree_content(&user)?;
    (!content.is_empty()).then(|| text(&content))
}

fn random_message(rng: &mut fastrand::Rng) -> String {
    let role = [
        r#""user""#,
        r#""assistant""#,
        r#""system""#,
        r#""\u0075ser""#,
        r#""us\u0065r""#,
        r#""User""#,
        "1",
        "null",
    ][rng.usize(..8)];
    let content = match rng.usize(0..5) {
        0 => random_string(rng),
        1 => random_value(rng, 2),
        2 => format!(
            r#"[{{"type":"text","content":{}}},{{"content":{}}}]"#,
            random_string(rng),
            random_value(rng, 3)
        ),
        3 => format!(
            r#"[{{"content":{},"content":{}}}, {}, {{"type":"text"}}, {{"content":null}}, [{{"content":"x"}}]]"#,
            random_string(rng),
            random_string(rng),
            random_value(rng, 3)
        ),
        _ => r#""what is the weather in Oslo? (the user asks)""#.to_owned(),
    };
    match rng.usize(0..6) {
        0 => format!(r#"{{"role":{role},"content":{content}}}"#),
        1 => format!(r#"{{"role":{role},"parts":{content}}}"#),
        2 => format!(
            r#"{{"parts":{content}, "role" : {role}, "x":{}}}"#,
            random_value(rng, 2)
        ),
        3 => format!(r#"{{"role":"assistant","role":{role},"content":{content}}}"#),
        4 => random_value(rng, 1),
        _ => format!(r#"{{"content":{content}}}"#),
    }
}

#[test]
fn the_first_user_text_is_what_parsing_every_message_reads() {
    let mut found = 0;
    let mut rng = fastrand::Rng::with_seed(29);
    for _ in 0..20_000 {
        let messages: Vec<String> = (0..rng.usize(0..5))
            .map(|_| random_message(&mut rng))
            .collect();
        let mut text = format!("[{}]", messages.join(","));
        if rng.usize(0..8) == 0 {
            // Damaged: a byte gone or added.
            let mut chars: Vec<char> = text.chars().collect();
            let at = rng.usize(..chars.len());
            if rng.bool() {
                chars.remove(at);
            } else {
                chars.insert(at, [',', '"', '\\', '{', ']'][rng.usize(..5)]);
            }
            text = chars.into_iter().collect();
        }
        let expected = first_user_text_parsed(&text);
        found += usize::from(expected.is_some());
        assert_eq!(first_user_text(&text), expected, "messages {text:?}");
    }
    assert!(found > 1_000, "a user's text was found {found} times");
}

#[test]
fn every_conventions_key_is_found_and_no_other_name() {
    for (name, key) in KEYS {
        assert_eq!(key_of(name), Some(*key), "{name}");
    }
    let table = KeyTable::new();
    let crowded = table.slots.iter().map(Vec::len).max().unwrap_or(0);
    assert!(crowded <= 3, "a slot holds {crowded} keys");
    for name in [
        "",
        "g",
        "gen_ai.conversation.i",
        "gen_ai.conversation.idx",
        "Gen_ai.conversation.id",
        "gen_ai.conversation.iD",
        "logfire.msg",
        "code.filepath",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
        "ai.telemetry.metadata.sessionid",
        "é",
        "gen_ai.usage.input_tokens\u{0}",
    ] {
        assert_eq!(key_of(name), None, "{name:?}");
    }
}
