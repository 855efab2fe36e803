//! `RawJson`: an arbitrary JSON value kept as its compact text, never parsed into a tree.
//! Tool inputs, results and agent outputs travel through the stream this way, so folding a
//! frame costs one validation pass and the retained event stays close to its wire size.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::fmt;

/// Any JSON value, stored as its raw text; `null` (absent inputs, outputs and results,
/// two in every run event) is no text at all, so it costs no allocation.
#[derive(Clone)]
pub struct RawJson(Option<Box<RawValue>>);

impl RawJson {
    /// The JSON `null`.
    pub fn null() -> Self {
        Self(None)
    }

    /// `raw`, with the text `null` kept as no text.
    fn kept(raw: Box<RawValue>) -> Self {
        if raw.get() == "null" {
            Self(None)
        } else {
            Self(Some(raw))
        }
    }

    /// The value as `serde_json`'s raw text.
    fn raw(&self) -> &RawValue {
        self.0.as_deref().unwrap_or(RawValue::NULL)
    }

    /// Serialises any value; `serde_json`'s own types cannot fail here, a custom `Serialize`
    /// that fails becomes `null` rather than a panic.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Self {
        match serde_json::value::to_raw_value(value) {
            Ok(raw) => Self::kept(raw),
            Err(_) => Self::null(),
        }
    }

    /// Parses JSON text, keeping it raw.
    pub fn from_text(text: &str) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text.to_owned()).map(Self::kept)
    }

    /// `from_text` of text already owned: kept without a copy.
    pub fn from_string(text: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(text).map(Self::kept)
    }

    /// The JSON text as received (compact when produced by spyglass).
    pub fn get(&self) -> &str {
        self.raw().get()
    }

    /// Parses the text into a `serde_json::Value`. Valid text can still fail here: nesting
    /// past `serde_json`'s recursion limit (128), a number out of f64 range (`1e400`), or
    /// an object naming a key twice (`{"value":5000,"value":1}`: a reader keeping the first
    /// and one keeping the last would judge two different inputs).
    /// Anything that decides on the value (policy) must use this and refuse on `Err`.
    pub fn try_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str::<UniqueKeys>(self.get()).map(|v| v.0)
    }

    /// The value for views and assertions (off the hot path). Text that cannot become a
    /// tree comes back as a string that says so and carries the text as sent, never as
    /// `null`: a reader must not mistake it for an absent value.
    pub fn to_value(&self) -> serde_json::Value {
        self.try_value()
            .unwrap_or_else(|err| serde_json::Value::String(unreadable_marker(self.get(), &err)))
    }

    /// The text of a parsed value starts at the value, so its first byte says.
    pub fn is_object(&self) -> bool {
        self.get().starts_with('{')
    }

    /// What kind of value the text is, as `json_type` names it, read off its first byte:
    /// unlike `json_type(&self.to_value())` it holds for text too deep to parse.
    pub fn type_name(&self) -> &'static str {
        match self.get().as_bytes().first() {
            Some(b'{') => "an object",
            Some(b'[') => "an array",
            Some(b'"') => "a string",
            Some(b't' | b'f') => "a boolean",
            Some(b'n') => "null",
            _ => "a number",
        }
    }

    pub fn is_null(&self) -> bool {
        self.0.is_none()
    }

    /// The string's content when the value is a JSON string, else the JSON text itself.
    pub fn as_text(&self) -> String {
        let text = self.get();
        if text.starts_with('"') {
            serde_json::from_str::<String>(text).unwrap_or_else(|_| text.to_owned())
        } else {
            text.to_owned()
        }
    }

    /// Pretty-printed JSON for detail panes; text that cannot become a tree is shown as
    /// sent, under a line saying why.
    pub fn pretty(&self) -> String {
        match self.try_value() {
            Ok(value) => {
                serde_json::to_string_pretty(&value).unwrap_or_else(|_| self.get().to_owned())
            }
            Err(err) => unreadable_marker(self.get(), &err),
        }
    }
}

/// What views show for JSON text that cannot be parsed into a tree.
fn unreadable_marker(text: &str, err: &serde_json::Error) -> String {
    format!("(not shown as a tree: {err})\n{text}")
}

/// What kind of JSON value this is, as messages name it ("an object", "a number", ...).
pub fn json_type(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Default for RawJson {
    fn default() -> Self {
        Self::null()
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get() || self.to_value() == other.to_value()
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl From<serde_json::Value> for RawJson {
    fn from(value: serde_json::Value) -> Self {
        Self::from_value(&value)
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Self::kept)
    }
}

/// A `serde_json::Value` whose objects name each key once; built by `RawJson::try_value`.
struct UniqueKeys(serde_json::Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(UniqueKeysVisitor)
            .map(UniqueKeys)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        serde_json::Number::from_f64(v)
            .map(serde_json::Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(serde_json::Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(serde_json::Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        UniqueKeys::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(serde_json::Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let UniqueKeys(value) = map.next_value()?;
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "the key {key:?} appears twice in one object"
                )));
            }
            object.insert(key, value);
        }
        Ok(serde_json::Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_text_and_compares_by_value() {
        let a = RawJson::from_text(r#"{"a": 1, "b": [true]}"#).unwrap();
        let b = RawJson::from_value(&serde_json::json!({"a": 1, "b": [true]}));
        assert_eq!(a, b);
        assert_eq!(a.to_value()["b"][0], true);
        assert_eq!(RawJson::from_text(r#""hi""#).unwrap().as_text(), "hi");
        assert!(RawJson::from_text("{").is_err());
    }

    #[test]
    fn null_is_kept_as_no_text_and_still_reads_and_writes_as_null() {
        for raw in [
            RawJson::null(),
            RawJson::from_text(" null ").unwrap(),
            serde_json::from_str::<RawJson>("null").unwrap(),
            RawJson::from_value(&serde_json::Value::Null),
            RawJson::default(),
        ] {
            assert!(raw.0.is_none());
            assert!(raw.is_null());
            assert_eq!(raw.get(), "null");
            assert_eq!(serde_json::to_string(&raw).unwrap(), "null");
            assert_eq!(raw.to_value(), serde_json::Value::Null);
            assert_eq!(raw, RawJson::null());
        }
        let text = RawJson::from_text(r#""null""#).unwrap();
        assert!(!text.is_null());
        assert_eq!(serde_json::to_string(&text).unwrap(), r#""null""#);
    }

    #[test]
    fn text_past_the_parse_limits_is_never_null() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for text in [deep.as_str(), r#"{"value": 1e400}"#] {
            let raw: RawJson = serde_json::from_str(text).unwrap();
            assert!(raw.try_value().is_err(), "{text}");
            let shown = raw.to_value();
            let shown = shown.as_str().unwrap();
            assert!(shown.starts_with("(not shown as a tree: "), "{shown}");
            assert!(shown.ends_with(text), "{shown}");
            assert!(raw.pretty().ends_with(text));
        }
    }

    #[test]
    fn names_the_type_of_a_parsed_value() {
        let kinds: Vec<&str> = [
            r#" {"a":1}"#,
            "[1]",
            r#""s""#,
            "true",
            "false",
            "null",
            "-1.5e3",
            "0",
        ]
        .iter()
        .map(|text| json_type(&serde_json::from_str::<RawJson>(text).unwrap().to_value()))
        .collect();
        assert_eq!(
            kinds,
            [
                "an object",
                "an array",
                "a string",
                "a boolean",
                "a boolean",
                "null",
                "a number",
                "a number"
            ]
        );
        let by_text: Vec<&str> = [
            r#" {"a":1}"#,
            "[1]",
            r#""s""#,
            "true",
            "false",
            "null",
            "-1.5e3",
            "0",
        ]
        .iter()
        .map(|text| serde_json::from_str::<RawJson>(text).unwrap().type_name())
        .collect();
        assert_eq!(by_text, kinds);
        let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
        let deep: RawJson = serde_json::from_str(&deep).unwrap();
        assert_eq!(deep.type_name(), "an array");
        let padded: RawJson = serde_json::from_str("  {\"a\": 1}  ").unwrap();
        assert!(padded.is_object());
        assert!(!serde_json::from_str::<RawJson>("[]").unwrap().is_object());
    }

    #[test]
    fn a_key_named_twice_is_refused_and_single_keys_still_parse() {
        let twice = RawJson::from_text(r#"{"value":5000,"pad":{"a":1},"value":1}"#).unwrap();
        let err = twice.try_value().unwrap_err().to_string();
        assert!(err.contains(r#"the key "value" appears twice"#), "{err}");
        let nested = RawJson::from_text(r#"{"a":[{"k":1,"k":2}]}"#).unwrap();
        assert!(nested.try_value().is_err());
        let fine = RawJson::from_text(r#"{"value":5000,"list":[1,2.5,"x",null,true,{"value":1}]}"#)
            .unwrap();
        assert_eq!(
            fine.try_value().unwrap(),
            serde_json::json!({"value":5000,"list":[1,2.5,"x",null,true,{"value":1}]})
        );
    }
}
