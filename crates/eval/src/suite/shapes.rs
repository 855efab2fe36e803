//! The serde shapes of a suite file: each table's keys (unknown keys refused by serde) and
//! the typed values that name a wrong kind in the suite's words ("expected a string, found …").

use super::{Assertion, MAX_ARG_BYTES, MAX_ARGS, NoEnvelope};
use crate::judge::{DEFAULT_THRESHOLD, JudgeSpec, SemanticSpec};
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use spyglass_protocol::rest::ModelScript;
use std::fmt;
use std::marker::PhantomData;

/// The shapes of a suite file: serde refuses unknown keys; typed fields name a wrong kind
/// (`null` included) with what was expected, and `serde_path_to_error` gives its place.
/// What serde cannot say (a missing key, a pattern that does not compile, a bound) is
/// checked by the validation pass in `read.rs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSuite {
    #[serde(default, deserialize_with = "given")]
    pub(super) suite: Option<Name>,
    #[serde(default, deserialize_with = "given")]
    pub(super) defaults: Option<Tbl<RawDefaults>>,
    #[serde(default, deserialize_with = "given")]
    pub(super) case: Option<Cases>,
    #[serde(default, deserialize_with = "given")]
    pub(super) cases: Option<Cases>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDefaults {
    #[serde(default, deserialize_with = "given")]
    pub(super) mocks: Option<Table>,
    #[serde(default, deserialize_with = "given")]
    pub(super) model: Option<Script>,
    #[serde(default, deserialize_with = "given")]
    pub(super) model_variants: Option<Scripts>,
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
    pub(super) model: Option<Script>,
    #[serde(default, deserialize_with = "given")]
    pub(super) model_variants: Option<Scripts>,
    #[serde(default, deserialize_with = "given")]
    pub(super) servers: Option<Strings>,
    #[serde(default, deserialize_with = "given")]
    pub(super) metadata: Option<Table>,
    #[serde(default, deserialize_with = "given")]
    pub(super) skip: Option<Skip>,
    #[serde(default, deserialize_with = "given")]
    pub(super) timeout_ms: Option<Count>,
    #[serde(default, deserialize_with = "given")]
    pub(super) assert: Option<Tbl<RawAssert>>,
}

/// `[case.assert]`, and each child table of `all` / `any`: its fields in the order of
/// [`ASSERTION_KINDS`](super::ASSERTION_KINDS).
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
    pub(super) llm_judge: Option<Judged>,
    #[serde(default, deserialize_with = "given")]
    pub(super) semantic_match: Option<Semantic>,
    #[serde(default, deserialize_with = "all_children")]
    pub(super) all: Option<Vec<RawAssert>>,
    #[serde(default, deserialize_with = "any_children")]
    pub(super) any: Option<Vec<RawAssert>>,
    #[serde(default, deserialize_with = "given")]
    pub(super) command: Option<Commands>,
}

impl RawAssert {
    pub(super) fn kinds(self) -> [(&'static str, Option<Given>); 18] {
        use Given::{Patterns, Ready};
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
            (
                "llm_judge",
                self.llm_judge
                    .map(|Judged(j)| Ready(Assertion::LlmJudge(j))),
            ),
            (
                "semantic_match",
                self.semantic_match
                    .map(|Semantic(s)| Ready(Assertion::SemanticMatch(s))),
            ),
            ("all", self.all.map(Given::All)),
            ("any", self.any.map(Given::Any)),
            ("command", self.command.map(Given::Command)),
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
    pub(super) argv: Option<Argv>,
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

/// Refuses a value of the kind `found` with the message `say` gives for it.
fn refused<E: de::Error>(say: impl FnOnce(&str) -> String, found: &str) -> E {
    E::custom(say(found))
}

/// The visit methods of the kinds a visitor does not take, each refusing with [`wrong`]
/// and the name the messages give that kind (or, `with` a closure, its own message).
macro_rules! refuse {
    (with $say:expr; $($kind:ident),*) => { $( refuse!(@one $say; $kind); )* };
    ($what:expr; $($kind:ident),*) => {
        refuse!(with |found: &str| format!("expected {}, found {found}", $what); $($kind),*);
    };
    (@one $say:expr; bool) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Err(refused($say, "a boolean"))
        }
    };
    (@one $say:expr; int) => {
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Err(refused($say, "an integer"))
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
            Err(refused($say, if n < 0 { "a negative integer" } else { "an integer" }))
        }
    };
    (@one $say:expr; float) => {
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Err(refused($say, "a float"))
        }
    };
    (@one $say:expr; str) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Err(refused($say, "a string"))
        }
    };
    (@one $say:expr; unit) => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Err(refused($say, "null"))
        }
    };
    (@one $say:expr; seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(refused($say, "a list"))
        }
    };
    (@one $say:expr; map) => {
        fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(refused($say, "a table"))
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

/// One assertion kind as `[case.assert]` gave it: read whole already, or in its shape
/// for the validation pass in `read.rs` (patterns to compile, bounds, children to nest).
pub(super) enum Given {
    Ready(Assertion),
    Patterns(Vec<String>),
    Operations(Items<Operation>),
    Sequence(Sequence),
    JsonPath(Items<Tbl<RawJsonPath>>),
    JsonSchema(Items<Tbl<RawSchema>>),
    Prompted(Items<Tbl<RawPrompted>>),
    All(Vec<RawAssert>),
    Any(Vec<RawAssert>),
    Command(Commands),
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

/// The whole document: a table at top level.
pub(super) struct Doc(pub(super) RawSuite);

impl<'de> Deserialize<'de> for Doc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Doc;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a suite table")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Doc, A::Error> {
                RawSuite::deserialize(MapAccessDeserializer::new(map)).map(Doc)
            }
            refuse!(with |_: &str| "a suite file is a table (object) at top level".to_owned();
                bool, int, float, str, unit, seq);
        }
        d.deserialize_any(V)
    }
}

/// `[[case]]` (or `cases = [...]`): a list of case tables, each read into [`RawCase`]
/// (empty is the validation pass's "at least one case").
pub(super) struct Cases(pub(super) Vec<RawCase>);

impl<'de> Deserialize<'de> for Cases {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Cases;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of case tables")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Cases, A::Error> {
                let mut cases = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(CaseTable(case)) = seq.next_element()? {
                    cases.push(case);
                }
                Ok(Cases(cases))
            }
            refuse!(with |_: &str| "expected an array of case tables".to_owned();
                bool, int, float, str, unit, map);
        }
        d.deserialize_any(V)
    }
}

/// One case of the list: a table.
struct CaseTable(RawCase);

impl<'de> Deserialize<'de> for CaseTable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CaseTable;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a case table")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<CaseTable, A::Error> {
                RawCase::deserialize(MapAccessDeserializer::new(map)).map(CaseTable)
            }
            refuse!(with |found: &str| format!("a case is a table, found {found}");
                bool, int, float, str, unit, seq);
        }
        d.deserialize_any(V)
    }
}

/// Only the case ids of a document, whatever else it holds: what names the case a shape
/// error sits in. Anything not a string where an id would be reads as no id.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct CaseIds {
    case: Loose<Vec<Loose<CaseId>>>,
    cases: Loose<Vec<Loose<CaseId>>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CaseId {
    id: Loose<String>,
}

impl CaseIds {
    /// The id the case at `index` of the list under `key` gives, if it gives a string.
    pub(super) fn get(self, key: &str, index: usize) -> Option<String> {
        let Loose(Some(list)) = (if key == "cases" {
            self.cases
        } else {
            self.case
        }) else {
            return None;
        };
        list.into_iter().nth(index)?.0?.id.0
    }
}

/// A value read as `T` when it is one, else nothing (for naming, never for refusing).
struct Loose<T>(Option<T>);

impl<T> Default for Loose<T> {
    fn default() -> Self {
        Loose(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Loose<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Loose(T::deserialize(d).ok()))
    }
}

/// `model = { ... }`: the runtime's scripted model, read by its own serde shape; a problem
/// inside it is named where it sits (`model.sequence[0].txt`) as a bad model script.
pub(super) struct Script(pub(super) ModelScript);

impl<'de> Deserialize<'de> for Script {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Script;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a model script table")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Script, A::Error> {
                ModelScript::deserialize(MapAccessDeserializer::new(map))
                    .map(Script)
                    .map_err(|err| de::Error::custom(format_args!("{BAD_SCRIPT}{err}")))
            }
            refuse!("a table"; bool, int, float, str, unit, seq);
        }
        d.deserialize_any(V)
    }
}

/// What a problem inside a model script's shape starts with.
pub(super) const BAD_SCRIPT: &str = "bad model script: ";

/// `model_variants = [ {...}, {...} ]`: a non-empty list of model scripts.
pub(super) struct Scripts(pub(super) Vec<ModelScript>);

impl<'de> Deserialize<'de> for Scripts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "a non-empty list of model scripts";
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scripts;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scripts, A::Error> {
                let mut scripts = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(Script(script)) = seq.next_element()? {
                    scripts.push(script);
                }
                if scripts.is_empty() {
                    return Err(wrong(WHAT, "a list"));
                }
                Ok(Scripts(scripts))
            }
            refuse!(WHAT; bool, int, float, str, unit, map);
        }
        d.deserialize_any(V)
    }
}

/// `llm_judge = "rubric"` or `llm_judge = { rubric = "..." }`.
pub(super) struct Judged(pub(super) JudgeSpec);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJudge {
    #[serde(default, deserialize_with = "given")]
    rubric: Option<Text>,
}

impl<'de> Deserialize<'de> for Judged {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        fn rubric<E: de::Error>(rubric: String) -> Result<Judged, E> {
            if rubric.trim().is_empty() {
                return Err(E::custom("the rubric is empty"));
            }
            Ok(Judged(JudgeSpec { rubric }))
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Judged;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a rubric string or a table with rubric")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Judged, E> {
                rubric(text.to_owned())
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Judged, A::Error> {
                match RawJudge::deserialize(MapAccessDeserializer::new(map))?.rubric {
                    Some(Text(text)) => rubric(text),
                    None => Err(de::Error::custom("rubric must be a string")),
                }
            }
            refuse!(with |_: &str| "expected a rubric string or a table with rubric".to_owned();
                bool, int, float, unit, seq);
        }
        d.deserialize_any(V)
    }
}

/// `semantic_match = "text"` or `{ expected = "...", threshold = 0.8 }` (in (0, 1]).
pub(super) struct Semantic(pub(super) SemanticSpec);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSemantic {
    #[serde(default, deserialize_with = "given")]
    expected: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    threshold: Option<Fraction>,
}

impl<'de> Deserialize<'de> for Semantic {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Semantic;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a table with expected and threshold")
            }
            fn visit_str<E: de::Error>(self, expected: &str) -> Result<Semantic, E> {
                Ok(Semantic(SemanticSpec {
                    expected: expected.to_owned(),
                    threshold: DEFAULT_THRESHOLD,
                }))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Semantic, A::Error> {
                let raw = RawSemantic::deserialize(MapAccessDeserializer::new(map))?;
                let Some(Text(expected)) = raw.expected else {
                    return Err(de::Error::custom("expected must be a string"));
                };
                let threshold = raw.threshold.map_or(DEFAULT_THRESHOLD, |Fraction(t)| t);
                if !(threshold > 0.0 && threshold <= 1.0) {
                    return Err(de::Error::custom(format_args!(
                        "threshold {threshold} is not in (0, 1]"
                    )));
                }
                Ok(Semantic(SemanticSpec {
                    expected,
                    threshold,
                }))
            }
            refuse!(with |_: &str| "expected a string or a table with expected and threshold".to_owned();
                bool, int, float, unit, seq);
        }
        d.deserialize_any(V)
    }
}

/// A number, integer or not (a similarity threshold).
struct Fraction(f64);

impl<'de> Deserialize<'de> for Fraction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fraction;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number")
            }
            #[expect(clippy::cast_precision_loss, reason = "a threshold, not an id")]
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Fraction, E> {
                Ok(Fraction(n as f64))
            }
            #[expect(clippy::cast_precision_loss, reason = "a threshold, not an id")]
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Fraction, E> {
                Ok(Fraction(n as f64))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Fraction, E> {
                Ok(Fraction(n))
            }
            refuse!("a number"; bool, str, unit, seq, map);
        }
        d.deserialize_any(V)
    }
}

/// `all = [ { contains = "a" }, { any = [...] } ]`: a non-empty list of assertion tables.
fn all_children<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<RawAssert>>, D::Error> {
    d.deserialize_any(Children("all")).map(Some)
}

/// `any = [ ... ]`, read as [`all_children`].
fn any_children<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<RawAssert>>, D::Error> {
    d.deserialize_any(Children("any")).map(Some)
}

/// The children of the composite kind it names (the name is in its messages).
struct Children(&'static str);

impl<'de> Visitor<'de> for Children {
    type Value = Vec<RawAssert>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of assertion tables")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut children = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(Tbl(child)) = seq.next_element()? {
            children.push(child);
        }
        if children.is_empty() {
            return Err(de::Error::custom("the list is empty"));
        }
        Ok(children)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(self.refuse("a boolean"))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(self.refuse("an integer"))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
        Err(self.refuse(if n < 0 {
            "a negative integer"
        } else {
            "an integer"
        }))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(self.refuse("a float"))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(self.refuse("a string"))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(self.refuse("null"))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(self.refuse("a table"))
    }
}

impl Children {
    fn refuse<E: de::Error>(&self, found: &str) -> E {
        let kind = self.0;
        E::custom(format_args!(
            "expected a list of assertion tables (`{kind} = [ {{ contains = \"a\" }}, {{ regex = \"b\" }} ]`), found {found}"
        ))
    }
}

/// `command = ["python3", "check.py"]` (one argv), `{ argv = [...], timeout_ms = 5000 }`,
/// or a list of such tables (or of argv lists): a list starting with a string is one argv.
pub(super) enum Commands {
    Argv(Vec<String>),
    Each(Items<Command>),
}

/// One command of a list (or the one table).
pub(super) enum Command {
    Argv(Vec<String>),
    Table(RawCommand),
}

/// What a command item that is neither an argv nor a table is refused with.
const COMMAND: &str = "a list of strings (the program and its arguments) or { argv, timeout_ms }";

/// Reads one command item; `lead` is the first item of `command`'s list, where a string
/// starts one argv instead.
struct CommandSeed {
    lead: bool,
}

/// A command item, or (first in the list) the program an argv starts with.
enum Lead {
    Program(String),
    Command(Command),
}

impl<'de> de::DeserializeSeed<'de> for CommandSeed {
    type Value = Lead;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Lead, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CommandSeed {
    type Value = Lead;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(COMMAND)
    }
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Lead, E> {
        if self.lead {
            program(text).map(Lead::Program)
        } else {
            Err(wrong(COMMAND, "a string"))
        }
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Lead, A::Error> {
        Argv::from_seq(seq).map(|Argv(argv)| Lead::Command(Command::Argv(argv)))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Lead, A::Error> {
        RawCommand::deserialize(MapAccessDeserializer::new(map))
            .map(|raw| Lead::Command(Command::Table(raw)))
    }
    refuse!(COMMAND; bool, int, float, unit);
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match d.deserialize_any(CommandSeed { lead: false })? {
            Lead::Command(command) => Ok(command),
            Lead::Program(_) => Err(wrong(COMMAND, "a string")),
        }
    }
}

impl<'de> Deserialize<'de> for Commands {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Commands;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(COMMAND)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Commands, A::Error> {
                match seq.next_element_seed(CommandSeed { lead: true })? {
                    None => Err(de::Error::custom("the list is empty")),
                    Some(Lead::Program(program)) => {
                        Argv::rest(program, seq).map(|Argv(argv)| Commands::Argv(argv))
                    }
                    Some(Lead::Command(first)) => {
                        let mut items = vec![first];
                        while let Some(command) = seq.next_element()? {
                            items.push(command);
                        }
                        Ok(Commands::Each(Items {
                            items,
                            listed: true,
                        }))
                    }
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Commands, A::Error> {
                let raw = RawCommand::deserialize(MapAccessDeserializer::new(map))?;
                Ok(Commands::Each(Items {
                    items: vec![Command::Table(raw)],
                    listed: false,
                }))
            }
            refuse!(COMMAND; bool, int, float, str, unit);
        }
        d.deserialize_any(V)
    }
}

/// A command's argv: a non-empty list of strings, at most [`MAX_ARGS`] of them, each
/// without NUL bytes (which no program can receive) and at most [`MAX_ARG_BYTES`].
pub(super) struct Argv(pub(super) Vec<String>);

impl<'de> Deserialize<'de> for Argv {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "a list of strings (the program and its arguments)";
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Argv;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Argv, A::Error> {
                Argv::from_seq(seq)
            }
            refuse!(WHAT; bool, int, float, str, unit, map);
        }
        d.deserialize_any(V)
    }
}

impl Argv {
    fn from_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        match seq.next_element::<Program>()? {
            None => Err(de::Error::custom(
                "the list is empty: name the program to run",
            )),
            Some(Program(program)) => Self::rest(program, seq),
        }
    }

    /// The arguments after the program; past [`MAX_ARGS`] only counted, for the message.
    fn rest<'de, A: SeqAccess<'de>>(program: String, mut seq: A) -> Result<Self, A::Error> {
        let mut argv = vec![program];
        let mut count = 1;
        loop {
            if count < MAX_ARGS {
                let Some(Arg(arg)) = seq.next_element()? else {
                    break;
                };
                argv.push(arg);
            } else if seq.next_element::<de::IgnoredAny>()?.is_none() {
                break;
            }
            count += 1;
        }
        if count > MAX_ARGS {
            return Err(de::Error::custom(format_args!(
                "{count} arguments; the limit is {MAX_ARGS}"
            )));
        }
        Ok(Argv(argv))
    }
}

/// An argv's first string: the program, not blank.
struct Program(String);

impl<'de> Deserialize<'de> for Program {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Text(text) = Text::deserialize(d)?;
        program(&text).map(Program)
    }
}

fn program<E: de::Error>(text: &str) -> Result<String, E> {
    if text.trim().is_empty() {
        return Err(E::custom("the program name is empty"));
    }
    argument(text)
}

/// One argument after the program.
struct Arg(String);

impl<'de> Deserialize<'de> for Arg {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Text(text) = Text::deserialize(d)?;
        argument(&text).map(Arg)
    }
}

fn argument<E: de::Error>(text: &str) -> Result<String, E> {
    if text.contains('\0') {
        return Err(E::custom("holds a NUL byte"));
    }
    if text.len() > MAX_ARG_BYTES {
        return Err(E::custom(format_args!(
            "{} bytes; the limit is {MAX_ARG_BYTES}",
            text.len()
        )));
    }
    Ok(text.to_owned())
}
