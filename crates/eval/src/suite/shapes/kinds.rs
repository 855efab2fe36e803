//! The serde shapes of `[case.assert]`: each assertion kind in the forms it takes (a
//! value or a list, a string or a table), each refusing a wrong one in the suite's words.

use super::{Count, Flag, Items, Name, Table, Tbl, Text, Texts, given, refused, wrong};
use crate::judge::{DEFAULT_THRESHOLD, JudgeSpec, SemanticSpec};
use crate::suite::{Assertion, MAX_ARG_BYTES, MAX_ARGS, NoEnvelope};
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};
use std::fmt;

/// `[case.assert]`, and each child table of `all` / `any`: its fields in the order of
/// [`ASSERTION_KINDS`](super::ASSERTION_KINDS).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::suite) struct RawAssert {
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) contains: Option<Texts>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) equals: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) regex: Option<Texts>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) operation_called: Option<Items<Operation>>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) sequence: Option<Sequence>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) not_called: Option<Texts>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) envelope: Option<Texts>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) no_envelope: Option<Codes>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) json_path: Option<Items<Tbl<RawJsonPath>>>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) json_schema: Option<Items<Tbl<RawSchema>>>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) prompted: Option<Items<Tbl<RawPrompted>>>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) max_tokens: Option<Count>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) max_cost: Option<Dollars>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) llm_judge: Option<Judged>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) semantic_match: Option<Semantic>,
    #[serde(default, deserialize_with = "all_children")]
    pub(in crate::suite) all: Option<Vec<RawAssert>>,
    #[serde(default, deserialize_with = "any_children")]
    pub(in crate::suite) any: Option<Vec<RawAssert>>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) command: Option<Commands>,
}

impl RawAssert {
    pub(in crate::suite) fn kinds(self) -> [(&'static str, Option<Given>); 18] {
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
pub(in crate::suite) struct RawJsonPath {
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) path: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) equals: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::suite) struct RawOperation {
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) name: Option<Name>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) times: Option<Count>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) args: Option<Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::suite) struct RawSequence {
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) tools: Option<Texts>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) gaps: Option<Flag>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::suite) struct RawPrompted {
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) step: Option<Count>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) contains: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) matches: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) path: Option<Text>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) equals: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::suite) struct RawCommand {
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) argv: Option<Argv>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) timeout_ms: Option<Count>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::suite) struct RawSchema {
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) schema: Option<Value>,
    #[serde(default, deserialize_with = "given")]
    pub(in crate::suite) tool: Option<Name>,
}

/// `max_cost = 0.01`: a finite amount of US dollars, 0 or more. TOML's `nan` and `inf`
/// reach here as null (JSON has no such numbers), and are named.
pub(in crate::suite) struct Dollars(pub(in crate::suite) f64);

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
pub(in crate::suite) struct Codes(pub(in crate::suite) NoEnvelope);

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
pub(in crate::suite) enum Given {
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

/// `"server/tool"` or `{ name, times, args }`: one expected operation call.
pub(in crate::suite) enum Operation {
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
pub(in crate::suite) enum Sequence {
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

/// `llm_judge = "rubric"` or `llm_judge = { rubric = "..." }`.
pub(in crate::suite) struct Judged(pub(in crate::suite) JudgeSpec);

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

/// `semantic_match = "text"` or `{ expected = "...", threshold = 0.85 }` (in (0, 1]; default 0.85).
pub(in crate::suite) struct Semantic(pub(in crate::suite) SemanticSpec);

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
pub(in crate::suite) enum Commands {
    Argv(Vec<String>),
    Each(Items<Command>),
}

/// One command of a list (or the one table).
pub(in crate::suite) enum Command {
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
pub(in crate::suite) struct Argv(pub(in crate::suite) Vec<String>);

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
