//! The serde shapes of a suite file: each table's keys (unknown keys refused by serde) and
//! the typed values that name a wrong kind in the suite's words ("expected a string, found …").

use super::CaseDecision;
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use spyglass_protocol::rest::ModelScript;
use std::collections::BTreeMap;
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
    #[serde(default, deserialize_with = "given")]
    pub(super) decisions: Option<Decisions>,
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
    pub(super) decisions: Option<Decisions>,
    #[serde(default, deserialize_with = "given")]
    pub(super) assert: Option<Tbl<RawAssert>>,
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

mod kinds;

pub(super) use kinds::{
    Command, Commands, Given, Operation, RawAssert, RawJsonPath, RawPrompted, RawSchema, Sequence,
};

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

/// `decisions = { rule = "approve" }`: per policy rule id, how the case decides the calls
/// that rule holds for approval (a value's error names `decisions.rule`).
pub(super) struct Decisions(pub(super) BTreeMap<String, CaseDecision>);

/// `"approve"` or `"deny"`.
struct OneDecision(CaseDecision);

impl<'de> Deserialize<'de> for OneDecision {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "\"approve\" or \"deny\"";
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneDecision;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<OneDecision, E> {
                match text {
                    "approve" => Ok(OneDecision(CaseDecision::Approve)),
                    "deny" => Ok(OneDecision(CaseDecision::Deny)),
                    other => Err(E::custom(format_args!("expected {WHAT}, found {other:?}"))),
                }
            }
            refuse!(WHAT; bool, int, float, unit, seq, map);
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Decisions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const WHAT: &str = "a table of policy rule ids to \"approve\" or \"deny\"";
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Decisions;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Decisions, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(rule) = map.next_key::<String>()? {
                    let OneDecision(decision) = map.next_value()?;
                    out.insert(rule, decision);
                }
                Ok(Decisions(out))
            }
            refuse!(WHAT; bool, int, float, str, unit, seq);
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
