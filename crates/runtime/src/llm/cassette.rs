//! Model cassettes: each exchange as one JSON file (`<provider>-<key>.json`) holding the
//! redacted request and the answer, keyed by a stable hash of that request; replay serves
//! them with no network, and a miss names the nearest recording and how it differs.

use super::Reply;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// One recorded exchange, as the file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub version: u32,
    pub key: String,
    pub provider: String,
    /// The run step that made it (informational: the key alone selects it).
    pub step: u32,
    pub request: Value,
    pub reply: Reply,
}

/// The request as kept and hashed: streaming flags dropped (a streamed and a plain run
/// share recordings), every string masked, object keys sorted.
pub fn redact(request: &Value) -> Value {
    match request {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map
                .keys()
                .filter(|k| k.as_str() != "stream" && k.as_str() != "stream_options")
                .collect();
            keys.sort();
            let mut out = serde_json::Map::new();
            for key in keys {
                out.insert(key.clone(), redact(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        Value::String(text) => Value::String(spyglass_protocol::mask::mask(text).into_owned()),
        other => other.clone(),
    }
}

/// Sorted-key JSON text: stable whatever order the map keeps.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// FNV-1a, 64 bits, over the canonical text of the redacted request: stable across
/// builds and platforms (no std hasher, whose seed may change).
pub fn key(redacted: &Value) -> String {
    let mut text = String::new();
    canonical(redacted, &mut text);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn file_name(provider: &str, key: &str) -> String {
    format!("{provider}-{key}.json")
}

/// Writes one exchange (temp file, then rename: a reader never sees half of one).
pub fn record(
    dir: &Path,
    provider: &str,
    step: u32,
    request: &Value,
    reply: &Reply,
) -> Result<(), String> {
    let request = redact(request);
    let key = key(&request);
    let entry = Entry {
        version: 1,
        key: key.clone(),
        provider: provider.to_owned(),
        step,
        request,
        reply: reply.clone(),
    };
    let fail = |e: std::io::Error| format!("cannot record into {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(fail)?;
    let text = serde_json::to_string_pretty(&entry).map_err(|e| e.to_string())?;
    let path = dir.join(file_name(provider, &key));
    let tmp = dir.join(format!(".{}.tmp", file_name(provider, &key)));
    std::fs::write(&tmp, text).map_err(fail)?;
    std::fs::rename(&tmp, &path).map_err(fail)
}

/// The recorded answer to `request`, or why there is none: the nearest recording of the
/// same provider and the first place the requests differ.
pub fn replay(dir: &Path, provider: &str, request: &Value) -> Result<Reply, String> {
    let request = redact(request);
    let key = key(&request);
    let path = dir.join(file_name(provider, &key));
    if let Ok(text) = std::fs::read_to_string(&path) {
        let entry: Entry = serde_json::from_str(&text)
            .map_err(|e| format!("cassette {} is not a recording: {e}", path.display()))?;
        return Ok(entry.reply);
    }
    let mut nearest: Option<(usize, String, Entry)> = None;
    let listing = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read the cassette directory {}: {e}", dir.display()))?;
    for item in listing.flatten() {
        let name = item.file_name().to_string_lossy().into_owned();
        let json = Path::new(&name)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        if !name.starts_with(&format!("{provider}-")) || !json {
            continue;
        }
        let Ok(entry) = std::fs::read_to_string(item.path())
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<Entry>(&t).map_err(|e| e.to_string()))
        else {
            continue;
        };
        let mut diffs = Vec::new();
        differences(&entry.request, &request, "", &mut diffs);
        if nearest.as_ref().is_none_or(|(n, _, _)| diffs.len() < *n) {
            let first = diffs.first().cloned().unwrap_or_default();
            nearest = Some((diffs.len(), first, entry));
        }
    }
    Err(match nearest {
        None => format!(
            "no {provider} recording for this request (key {key}) and none at all in {}",
            dir.display()
        ),
        Some((count, first, entry)) => format!(
            "no {provider} recording for this request (key {key}); the nearest, {} (step {}), differs in {count} place(s), first {first}",
            file_name(provider, &entry.key),
            entry.step
        ),
    })
}

fn short(value: Option<&Value>) -> String {
    let text = value.map_or_else(|| "(absent)".to_owned(), Value::to_string);
    if text.chars().count() > 80 {
        format!("{}…", text.chars().take(80).collect::<String>())
    } else {
        text
    }
}

/// Every JSON pointer where `recorded` and `now` differ, as `pointer: recorded X, now Y`.
fn differences(recorded: &Value, now: &Value, at: &str, out: &mut Vec<String>) {
    match (recorded, now) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let here = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differences(x, y, &here, out),
                    (x, y) => out.push(format!("{here}: recorded {}, now {}", short(x), short(y))),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                let here = format!("{at}/{i}");
                match (a.get(i), b.get(i)) {
                    (Some(x), Some(y)) => differences(x, y, &here, out),
                    (x, y) => out.push(format!("{here}: recorded {}, now {}", short(x), short(y))),
                }
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(format!(
            "{}: recorded {}, now {}",
            if at.is_empty() { "/" } else { at },
            short(Some(a)),
            short(Some(b))
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reply(text: &str) -> Reply {
        Reply {
            text: text.to_owned(),
            calls: Vec::new(),
            usage: None,
            finish: "stop".to_owned(),
        }
    }

    #[test]
    fn key_ignores_order_and_streaming_and_masks_secrets() {
        let a = json!({"model": "m", "messages": [{"role": "user", "content": "key sk-abc123def456ghi789jkl012"}], "stream": true});
        let b = json!({"messages": [{"content": "key sk-abc123def456ghi789jkl012", "role": "user"}], "model": "m"});
        assert_eq!(key(&redact(&a)), key(&redact(&b)));
        assert!(!redact(&a).to_string().contains("abc123def456ghi789"));
        assert_ne!(key(&redact(&a)), key(&redact(&json!({"model": "n"}))));
    }

    #[test]
    fn replay_serves_a_recording_and_a_miss_names_the_nearest_difference() {
        let dir = std::env::temp_dir().join(format!("spyglass-cassette-{}", fastrand::u64(..)));
        let asked = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        record(&dir, "openai", 0, &asked, &reply("hello")).unwrap();
        assert_eq!(replay(&dir, "openai", &asked).unwrap().text, "hello");
        let other = json!({"model": "m", "messages": [{"role": "user", "content": "bye"}]});
        let miss = replay(&dir, "openai", &other).unwrap_err();
        assert!(
            miss.contains("/messages/0/content: recorded \"hi\", now \"bye\""),
            "{miss}"
        );
        assert!(miss.contains("step 0"), "{miss}");
        let none = replay(&dir, "anthropic", &asked).unwrap_err();
        assert!(none.contains("none at all"), "{none}");
        std::fs::write(dir.join("openai-junk.json"), "{").unwrap();
        assert!(replay(&dir, "openai", &other).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
