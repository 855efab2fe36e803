//! The serde shapes of a suite file: each table's keys (unknown keys refused by serde) and
//! the typed values that name a wrong kind in the suite's words ("expected a string, found …").

use super::{Assertion, NoEnvelope};
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;
use std::marker::PhantomData;

/// The shapes of a suite file: serde refuses unknown keys; typed fields name a wrong kind
/// (`null` included) with what was expected, and `serde_path_to_error` gives its place.
/// Fields still raw are read by the validation pass in `read.rs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSuite {
    #[serde(default, deserialize_with = "given")]
    pub(super) suite: Option<Name>,
    #[serde(default, deserialize_with = "given")]
    pub(super) defaults: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) case: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) cases: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    #[serde(default, deserialize_with = "given")]
    pub(super) mocks: Option<Table>,
    #[serde(default, deserialize_with = "given")]
    pub(super) model: Option<Value>,
    #[serde(default, deserialize_with = "given")]
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
    #[serde(default, deserialize_with = "given")]
    pub(super) model: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) model_variants: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) servers: Option<Strings>,
    #[serde(default, deserialize_with = "given")]
    pub(super) metadata: Option<Table>,
    #[serde(default, deserialize_with = "given")]
    pub(super) skip: Option<Skip>,
    #[serde(default, deserialize_with = "given")]
    pub(super) timeout_ms: Option<Count>,
    #[serde(default, deserialize_with = "given")]
    pub(super) assert: Option<Value>,
}

/// `[case.assert]`, its fields in the order of [`ASSERTION_KINDS`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAssert {
    #[serde(default, deserialize_with = "given")]
    pub(super) contains: Option<Texts>,
    #[serde(default, deserialize_with = "given")]
    pub(super) equals: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(super) regex: Option<Texts>,
    #[serde(default, deserialize_with = "given")]
    pub(super) operation_called: Option<Items<Operation>>,
    #[serde(default, deserialize_with = "given")]
    pub(super) sequence: Option<Sequence>,
    #[serde(default, deserialize_with = "given")]
    pub(super) not_called: Option<Texts>,
    #[serde(default, deserialize_with = "given")]
    pub(super) envelope: Option<Texts>,
    #[serde(default, deserialize_with = "given")]
    pub(super) no_envelope: Option<Codes>,
    #[serde(default, deserialize_with = "given")]
    pub(super) json_path: Option<Items<Tbl<RawJsonPath>>>,
    #[serde(default, deserialize_with = "given")]
    pub(super) json_schema: Option<Items<Tbl<RawSchema>>>,
    #[serde(default, deserialize_with = "given")]
    pub(super) prompted: Option<Items<Tbl<RawPrompted>>>,
    #[serde(default, deserialize_with = "given")]
    pub(super) max_tokens: Option<Count>,
    #[serde(default, deserialize_with = "given")]
    pub(super) max_cost: Option<Dollars>,
    #[serde(default, deserialize_with = "given")]
    pub(super) llm_judge: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) semantic_match: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) all: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) any: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) command: Option<Value>,
}

impl RawAssert {
    pub(super) fn kinds(self) -> [(&'static str, Option<Given>); 18] {
        use Given::{Patterns, Raw, Ready};
        [
            (
                "contains",
                self.contains.map(|Texts(t)| Ready(Assertion::Contains(t))),
            ),
            (
                "equals",
                self.equals.map(|Text(t)| Ready(Assertion::Equals(t))),
            ),
            ("regex", self.regex.map(|Texts(p)| Patterns(p))),
            (
                "operation_called",
                self.operation_called.map(Given::Operations),
            ),
            ("sequence", self.sequence.map(Given::Sequence)),
            (
                "not_called",
                self.not_called
                    .map(|Texts(t)| Ready(Assertion::NotCalled(t))),
            ),
            (
                "envelope",
                self.envelope.map(|Texts(t)| Ready(Assertion::Envelope(t))),
            ),
            (
                "no_envelope",
                self.no_envelope
                    .map(|Codes(n)| Ready(Assertion::NoEnvelope(n))),
            ),
            ("json_path", self.json_path.map(Given::JsonPath)),
            ("json_schema", self.json_schema.map(Given::JsonSchema)),
            ("prompted", self.prompted.map(Given::Prompted)),
            (
                "max_tokens",
                self.max_tokens
                    .map(|Count(n)| Ready(Assertion::MaxTokens(n))),
            ),
            (
                "max_cost",
                self.max_cost.map(|Dollars(d)| Ready(Assertion::MaxCost(d))),
            ),
            ("llm_judge", self.llm_judge.map(Raw)),
            ("semantic_match", self.semantic_match.map(Raw)),
            ("all", self.all.map(Raw)),
            ("any", self.any.map(Raw)),
            ("command", self.command.map(Raw)),
        ]
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJsonPath {
    #[serde(default, deserialize_with = "given")]
    pub(super) path: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(super) equals: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOperation {
    #[serde(default, deserialize_with = "given")]
    pub(super) name: Option<Name>,
    #[serde(default, deserialize_with = "given")]
    pub(super) times: Option<Count>,
    #[serde(default, deserialize_with = "given")]
    pub(super) args: Option<Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSequence {
    #[serde(default, deserialize_with = "given")]
    pub(super) tools: Option<Texts>,
    #[serde(default, deserialize_with = "given")]
    pub(super) gaps: Option<Flag>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrompted {
    #[serde(default, deserialize_with = "given")]
    pub(super) step: Option<Count>,
    #[serde(default, deserialize_with = "given")]
    pub(super) contains: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(super) matches: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(super) path: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(super) equals: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCommand {
    #[serde(default, deserialize_with = "given")]
    pub(super) argv: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) timeout_ms: Option<Count>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSchema {
    #[serde(default, deserialize_with = "given")]
    pub(super) schema: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(super) tool: Option<Name>,
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
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Strings, A::Error> {
                Strings::from_seq(seq)
            }
            refuse!("a list of strings"; bool, int, float, str, unit, map);
        }
        d.deserialize_any(V)
    }
}

impl Strings {
    fn from_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(Text(text)) = seq.next_element()? {
            out.push(text);
        }
        Ok(Strings(out))
    }
}

impl Texts {
    /// A non-empty list of strings.
    fn from_seq<'de, A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error> {
        let Strings(items) = Strings::from_seq(seq)?;
        if items.is_empty() {
            return Err(de::Error::custom("the list is empty"));
        }
        Ok(Texts(items))
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

/// `true` or `false`.
pub(super) struct Flag(pub(super) bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("true or false")
            }
            fn visit_bool<E: de::Error>(self, flag: bool) -> Result<Flag, E> {
                Ok(Flag(flag))
            }
            refuse!("true or false"; int, float, str, unit, seq, map);
        }
        d.deserialize_any(V)
    }
}

/// `"a"` or `["a", "b"]`: a string or a non-empty list of strings.
pub(super) struct Texts(pub(super) Vec<String>);

impl<'de> Deserialize<'de> for Texts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "a string or a list of strings";
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Texts;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Texts, E> {
                Ok(Texts(vec![text.to_owned()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Texts, A::Error> {
                Texts::from_seq(seq)
            }
            refuse!(WHAT; bool, int, float, unit, map);
        }
        d.deserialize_any(V)
    }
}

/// `max_cost = 0.01`: a finite amount of US dollars, 0 or more. TOML's `nan` and `inf`
/// reach here as null (JSON has no such numbers), and are named.
pub(super) struct Dollars(pub(super) f64);

impl<'de> Deserialize<'de> for Dollars {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "US dollars as a number, 0 or more (like 0.01)";
        fn amount<E: de::Error>(n: &Number) -> Result<Dollars, E> {
            match n.as_f64() {
                Some(d) if d.is_finite() && d >= 0.0 => Ok(Dollars(d)),
                _ => Err(wrong(WHAT, &n.to_string())),
            }
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Dollars;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Dollars, E> {
                amount(&Number::from(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Dollars, E> {
                amount(&Number::from(n))
            }
            fn visit_f64<E: de::Error>(self, d: f64) -> Result<Dollars, E> {
                match Number::from_f64(d) {
                    Some(n) => amount(&n),
                    None => self.visit_unit(),
                }
            }
            fn visit_unit<E: de::Error>(self) -> Result<Dollars, E> {
                Err(wrong(WHAT, "null (nan and inf are not amounts)"))
            }
            refuse!(WHAT; bool, str, seq, map);
        }
        d.deserialize_any(V)
    }
}

/// `no_envelope = true` (none at all), or a code or a list of codes that must not appear.
pub(super) struct Codes(pub(super) NoEnvelope);

impl<'de> Deserialize<'de> for Codes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "true, a code or a list of codes";
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Codes;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_bool<E: de::Error>(self, any: bool) -> Result<Codes, E> {
                if any {
                    Ok(Codes(NoEnvelope::Any))
                } else {
                    Err(wrong(WHAT, "a boolean"))
                }
            }
            fn visit_str<E: de::Error>(self, code: &str) -> Result<Codes, E> {
                Ok(Codes(NoEnvelope::Codes(vec![code.to_owned()])))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Codes, A::Error> {
                Texts::from_seq(seq).map(|Texts(codes)| Codes(NoEnvelope::Codes(codes)))
            }
            refuse!(WHAT; int, float, unit, map);
        }
        d.deserialize_any(V)
    }
}

/// One assertion kind as `[case.assert]` gave it: read whole already, a list of patterns
/// to compile, or a value its own reader in `read.rs` takes apart.
pub(super) enum Given {
    Ready(Assertion),
    Patterns(Vec<String>),
    Operations(Items<Operation>),
    Sequence(Sequence),
    JsonPath(Items<Tbl<RawJsonPath>>),
    JsonSchema(Items<Tbl<RawSchema>>),
    Prompted(Items<Tbl<RawPrompted>>),
    Raw(Value),
}

/// A table read into its shape `T`; anything else is named as not a table.
pub(super) struct Tbl<T>(pub(super) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Tbl<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Tbl<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Tbl<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Tbl)
            }
            refuse!("a table"; bool, int, float, str, unit, seq);
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// `json_path = { ... }` or `json_path = [ { ... }, { ... } ]`: one value or a non-empty
/// list of them, each read as `T` (a wrong item is named `kind[i]`).
pub(super) struct Items<T> {
    items: Vec<T>,
    listed: bool,
}

impl<T> Items<T> {
    /// Each item with the field its errors name: `kind[i]` from a list, else `kind`.
    pub(super) fn fields(self, kind: &str) -> impl Iterator<Item = (String, T)> {
        let listed = self.listed;
        self.items.into_iter().enumerate().map(move |(i, item)| {
            let field = if listed {
                format!("{kind}[{i}]")
            } else {
                kind.to_owned()
            };
            (field, item)
        })
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Items<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<T> V<T> {
            fn one<'de, E: de::Error>(d: impl Deserializer<'de, Error = E>) -> Result<Items<T>, E>
            where
                T: Deserialize<'de>,
            {
                Ok(Items {
                    items: vec![T::deserialize(d)?],
                    listed: false,
                })
            }
        }
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Items<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value or a list of values")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Items<T>, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                if items.is_empty() {
                    return Err(de::Error::custom("the list is empty"));
                }
                Ok(Items {
                    items,
                    listed: true,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Items<T>, A::Error> {
                Self::one(MapAccessDeserializer::new(map))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Items<T>, E> {
                Self::one(v.into_deserializer())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Items<T>, E> {
                Self::one(v.into_deserializer())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Items<T>, E> {
                Self::one(v.into_deserializer())
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Items<T>, E> {
                Self::one(v.into_deserializer())
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Items<T>, E> {
                Self::one(v.into_deserializer())
            }
            fn visit_unit<E: de::Error>(self) -> Result<Items<T>, E> {
                Self::one(().into_deserializer())
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// `"server/tool"` or `{ name, times, args }`: one expected operation call.
pub(super) enum Operation {
    Name(String),
    Table(RawOperation),
}

impl<'de> Deserialize<'de> for Operation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "an operation name or { name, times, args }";
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Operation;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Operation, E> {
                if name.trim().is_empty() {
                    return Err(wrong(WHAT, "a string"));
                }
                Ok(Operation::Name(name.to_owned()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Operation, A::Error> {
                RawOperation::deserialize(MapAccessDeserializer::new(map)).map(Operation::Table)
            }
            refuse!(WHAT; bool, int, float, unit, seq);
        }
        d.deserialize_any(V)
    }
}

/// `sequence = ["a", "b"]` or `sequence = { tools = [...], gaps = false }`.
pub(super) enum Sequence {
    Tools(Vec<String>),
    Table(RawSequence),
}

impl<'de> Deserialize<'de> for Sequence {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "a string or a list of strings";
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Sequence;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_str<E: de::Error>(self, tool: &str) -> Result<Sequence, E> {
                Ok(Sequence::Tools(vec![tool.to_owned()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Sequence, A::Error> {
                Texts::from_seq(seq).map(|Texts(tools)| Sequence::Tools(tools))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Sequence, A::Error> {
                RawSequence::deserialize(MapAccessDeserializer::new(map)).map(Sequence::Table)
            }
            refuse!(WHAT; bool, int, float, unit);
        }
        d.deserialize_any(V)
    }
}
