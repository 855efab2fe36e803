//! The serde shapes of a suite file: each table's keys (unknown keys refused by serde) and
//! the typed values that name a wrong kind in the suite's words ("expected a string, found …").

use serde::de::value::MapAccessDeserializer;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// The shapes of a suite file: serde refuses unknown keys; typed fields name a wrong kind
/// (`null` included) with what was expected, and `serde_path_to_error` gives its place.
/// Fields still raw are read by the validation pass in `read.rs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSuite {
    #[serde(default, deserialize_with = "given")]
    pub(super) suite: Option<Name>,
    #[serde(default, deserialize_with = "present")]
    pub(super) defaults: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) case: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) cases: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    #[serde(default, deserialize_with = "given")]
    pub(super) mocks: Option<Table>,
    #[serde(default, deserialize_with = "present")]
    pub(super) model: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) model_variants: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) servers: Option<Strings>,
    #[serde(default, deserialize_with = "given")]
    pub(super) metadata: Option<Table>,
    #[serde(default, deserialize_with = "given")]
    pub(super) timeout_ms: Option<Count>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCase {
    #[serde(default, deserialize_with = "given")]
    pub(super) id: Option<Name>,
    #[serde(default, deserialize_with = "given")]
    pub(super) input: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(super) mocks: Option<Table>,
    #[serde(default, deserialize_with = "present")]
    pub(super) model: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) model_variants: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) servers: Option<Strings>,
    #[serde(default, deserialize_with = "given")]
    pub(super) metadata: Option<Table>,
    #[serde(default, deserialize_with = "given")]
    pub(super) skip: Option<Skip>,
    #[serde(default, deserialize_with = "given")]
    pub(super) timeout_ms: Option<Count>,
    #[serde(default, deserialize_with = "present")]
    pub(super) assert: Option<Value>,
}

/// `[case.assert]`, its fields in the order of [`ASSERTION_KINDS`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAssert {
    #[serde(default, deserialize_with = "present")]
    pub(super) contains: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) equals: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) regex: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) operation_called: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) sequence: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) not_called: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) envelope: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) no_envelope: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) json_path: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) json_schema: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) prompted: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) max_tokens: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) max_cost: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) llm_judge: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) semantic_match: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) all: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) any: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) command: Option<Value>,
}

impl RawAssert {
    pub(super) fn kinds(self) -> [(&'static str, Option<Value>); 18] {
        [
            ("contains", self.contains),
            ("equals", self.equals),
            ("regex", self.regex),
            ("operation_called", self.operation_called),
            ("sequence", self.sequence),
            ("not_called", self.not_called),
            ("envelope", self.envelope),
            ("no_envelope", self.no_envelope),
            ("json_path", self.json_path),
            ("json_schema", self.json_schema),
            ("prompted", self.prompted),
            ("max_tokens", self.max_tokens),
            ("max_cost", self.max_cost),
            ("llm_judge", self.llm_judge),
            ("semantic_match", self.semantic_match),
            ("all", self.all),
            ("any", self.any),
            ("command", self.command),
        ]
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJsonPath {
    #[serde(default, deserialize_with = "present")]
    pub(super) path: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) equals: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOperation {
    #[serde(default, deserialize_with = "present")]
    pub(super) name: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) times: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSequence {
    #[serde(default, deserialize_with = "present")]
    pub(super) tools: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) gaps: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrompted {
    #[serde(default, deserialize_with = "present")]
    pub(super) step: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) contains: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) matches: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) path: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) equals: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCommand {
    #[serde(default, deserialize_with = "present")]
    pub(super) argv: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) timeout_ms: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSchema {
    #[serde(default, deserialize_with = "present")]
    pub(super) schema: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) tool: Option<Value>,
}

/// A key that is there, `null` too (serde's `Option` would read `null` as absent).
pub(super) fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The key and the expected names of serde's "unknown field `k`, expected one of `a`, `b`".
pub(super) fn unknown_field(message: &str) -> Option<(String, String)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, rest) = rest.split_once('`')?;
    let known: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    Some((key.to_owned(), known.join(", ")))
}

/// Serde's wrong-kind error in the suite's words: "expected a string, found an integer".
fn wrong<E: de::Error>(expected: &str, found: &str) -> E {
    E::custom(format_args!("expected {expected}, found {found}"))
}

/// The visit methods of the kinds a visitor does not take, each refusing with [`wrong`]
/// and the name the messages give that kind.
macro_rules! refuse {
    ($what:expr; $($kind:ident),*) => { $( refuse!(@one $what; $kind); )* };
    (@one $what:expr; bool) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Err(wrong($what, "a boolean"))
        }
    };
    (@one $what:expr; int) => {
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Err(wrong($what, "an integer"))
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
            Err(wrong($what, if n < 0 { "a negative integer" } else { "an integer" }))
        }
    };
    (@one $what:expr; float) => {
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Err(wrong($what, "a float"))
        }
    };
    (@one $what:expr; str) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Err(wrong($what, "a string"))
        }
    };
    (@one $what:expr; unit) => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Err(wrong($what, "null"))
        }
    };
    (@one $what:expr; seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(wrong($what, "a list"))
        }
    };
    (@one $what:expr; map) => {
        fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(wrong($what, "a table"))
        }
    };
}

/// A string.
pub(super) struct Text(pub(super) String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text, E> {
                Ok(Text(text.to_owned()))
            }
            refuse!("a string"; bool, int, float, unit, seq, map);
        }
        d.deserialize_any(V)
    }
}

/// A string with something in it besides whitespace.
pub(super) struct Name(pub(super) String);

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Text(text) = Text::deserialize(d)?;
        if text.trim().is_empty() {
            return Err(de::Error::custom("must not be empty"));
        }
        Ok(Name(text))
    }
}

/// A non-negative integer.
pub(super) struct Count(pub(super) u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a non-negative integer")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Count, E> {
                Ok(Count(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Count, E> {
                u64::try_from(n)
                    .map(Count)
                    .map_err(|_| wrong("a non-negative integer", "a negative integer"))
            }
            refuse!("a non-negative integer"; bool, float, str, unit, seq, map);
        }
        d.deserialize_any(V)
    }
}

/// A table, its values kept as they are (mocks and metadata pass through untouched).
pub(super) struct Table(pub(super) Map<String, Value>);

impl<'de> Deserialize<'de> for Table {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Table;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Table, A::Error> {
                Map::deserialize(MapAccessDeserializer::new(map)).map(Table)
            }
            refuse!("a table"; bool, int, float, str, unit, seq);
        }
        d.deserialize_any(V)
    }
}

/// `servers = ["pay", "crm"]`: a list of strings (an item's error names `servers[i]`).
pub(super) struct Strings(pub(super) Vec<String>);

impl<'de> Deserialize<'de> for Strings {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Strings;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of strings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strings, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(Text(text)) = seq.next_element()? {
                    out.push(text);
                }
                Ok(Strings(out))
            }
            refuse!("a list of strings"; bool, int, float, str, unit, map);
        }
        d.deserialize_any(V)
    }
}

/// `skip = true` or `skip = "reason"`: the reason a case is skipped, if it is.
pub(super) struct Skip(pub(super) Option<String>);

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "true or a reason (a non-empty string)";
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Skip;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_bool<E: de::Error>(self, skip: bool) -> Result<Skip, E> {
                Ok(Skip(skip.then(|| "skipped in the suite file".to_owned())))
            }
            fn visit_str<E: de::Error>(self, reason: &str) -> Result<Skip, E> {
                if reason.trim().is_empty() {
                    return Err(wrong(WHAT, "a string"));
                }
                Ok(Skip(Some(reason.to_owned())))
            }
            refuse!(WHAT; int, float, unit, seq, map);
        }
        d.deserialize_any(V)
    }
}

/// A key that is there, read as `T` even when its value is `null` (serde's `Option` would
/// read `null` as absent, and a `null` is a wrong kind to name).
pub(super) fn given<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}
