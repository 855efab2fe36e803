//! The session mock store: the create-time gates on a `mocks` payload (size, then shape,
//! named by JSON pointer) and the per-tool consume counters that `execute` advances.
//! Mocks are immutable once a session holds them; only the counters move.
//!
//! Besides `CodeSpar` test mode's static object and stateful array, a tool may be mocked by input:
//! `{"$rules": [{"match": {...}, "output": {...}}, ...], "$fallback": {...}}`, the first
//! rule whose `match` the call's input satisfies answers (a key starting with `$` is a
//! JSON path into the input, any other key a subset match on the input's own key).

use serde_json::Value;
use spyglass_eval::assert::JsonPath;
pub use spyglass_eval::assert::subset;
use spyglass_protocol::events::{Counter, DeclaredMock, MAX_STREAMED_PAYLOAD_BYTES, MockMode};
use spyglass_protocol::json::json_type;
use spyglass_protocol::rest::MockState;
use spyglass_protocol::{Envelope, RawJson};
use std::collections::BTreeMap;

/// Serialized mocks above this many bytes are refused (`CodeSpar` test mode: 64 KiB).
pub const MAX_MOCKS_BYTES: usize = 65_536;

/// Why a `mocks` payload was refused at create time.
#[derive(Debug, Clone, PartialEq)]
pub enum MocksRejection {
    TooLarge { bytes: usize },
    Invalid { field: String, message: String },
}

/// Whether a name is the canonical `server/tool` form,
/// `^[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9_-]*$`.
pub fn is_canonical(name: &str) -> bool {
    let Some((server, tool)) = name.split_once('/') else {
        return false;
    };
    let part = |text: &str, extra: &[u8]| {
        let bytes = text.as_bytes();
        let head = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        bytes.first().is_some_and(head) && bytes[1..].iter().all(|b| head(b) || extra.contains(b))
    };
    part(server, b"-") && part(tool, b"_-")
}

/// Names of `CodeSpar`'s built-in tools start with this (`codespar_charge`, …).
pub const BUILTIN_PREFIX: &str = "codespar_";
/// The one built-in that is answered by the runtime itself and bypasses every gate.
pub const LIST_TOOLS: &str = "codespar_list_tools";

/// Whether a name is a `CodeSpar` built-in's, `codespar_` then `[a-z0-9_]`. `CodeSpar` test mode: a
/// built-in that reaches external state (the SDK's `charge()`, `ship()`, `issue()`,
/// `discover()` wrappers call them) declares its fixtures in `mocks` like a normal tool.
pub fn is_builtin(name: &str) -> bool {
    name.strip_prefix(BUILTIN_PREFIX).is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    })
}

/// Escapes one JSON-pointer reference token (RFC 6901: `~` → `~0`, `/` → `~1`).
pub fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The key that turns a mock's object into rules answering by input.
pub const RULES_KEY: &str = "$rules";
/// The optional answer of a rules mock when no rule matches.
pub const FALLBACK_KEY: &str = "$fallback";

/// One declared mock: a static object, a stateful array consumed in order, or rules tried
/// in order on the call's input. Entries are kept as the JSON text they are served as: a
/// call copies the text into its answer and its `tool.called` event instead of cloning a
/// tree and writing it out twice.
#[derive(Debug, Clone, PartialEq)]
pub enum Fixture {
    Static(RawJson),
    Stateful(Vec<RawJson>),
    Rules {
        rules: Vec<Rule>,
        fallback: Option<RawJson>,
    },
}

/// One `{match, output}` rule: every condition must hold for `output` to answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub conditions: Vec<Condition>,
    pub output: RawJson,
}

/// One key of a rule's `match`: the input's own key (subset match) or a JSON path.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// As written in `match` (`value`, `$.customer.id`).
    pub key: String,
    pub path: Option<JsonPath>,
    pub expected: Value,
}

impl Condition {
    fn found<'v>(&self, input: &'v Value) -> Option<&'v Value> {
        match &self.path {
            Some(path) => path.lookup(input),
            None => input.as_object()?.get(&self.key),
        }
    }

    fn holds(&self, input: &Value) -> bool {
        self.found(input)
            .is_some_and(|found| subset(&self.expected, found))
    }

    /// Why this condition did not hold, for the miss message.
    fn miss(&self, input: &Value) -> String {
        match self.found(input) {
            None => format!("`{}` is absent, expected {}", self.key, self.expected),
            Some(found) => format!("`{}` is {found}, expected {}", self.key, self.expected),
        }
    }
}

/// Which entry of a stateful mock a call gets: the local counter's next, or what a store
/// shared by several runtimes claimed for it (`Runtime::claim_for`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Claim {
    #[default]
    Local,
    /// This entry (from 0), given to this call alone.
    Entry(u32),
    /// Every entry was taken.
    Exhausted,
}

/// What answered a successful call of a rules mock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Rule(u32),
    Fallback,
}

/// A mock and its counter: `consumed` successful returns, `calls` dispatches naming it;
/// for a rules mock, how many calls each rule and the fallback answered.
#[derive(Debug, Clone, PartialEq)]
pub struct MockSlot {
    pub fixture: Fixture,
    pub consumed: u32,
    pub calls: u32,
    pub rule_hits: Vec<u32>,
    pub fallback_hits: u32,
    /// What answered the call being dispatched, taken into its counter by `note_call`.
    answered: Option<Answer>,
}

impl MockSlot {
    fn new(fixture: Fixture) -> Self {
        let rules = match &fixture {
            Fixture::Rules { rules, .. } => rules.len(),
            _ => 0,
        };
        Self {
            fixture,
            consumed: 0,
            calls: 0,
            rule_hits: vec![0; rules],
            fallback_hits: 0,
            answered: None,
        }
    }

    /// Counts one answer (a replayed call's, or one a restored store missed).
    pub fn note_answer(&mut self, answer: Answer) {
        match answer {
            Answer::Rule(i) => {
                if let Some(hits) = self.rule_hits.get_mut(i as usize) {
                    *hits = hits.saturating_add(1);
                }
            }
            Answer::Fallback => self.fallback_hits = self.fallback_hits.saturating_add(1),
        }
    }

    pub fn declared(&self, tool: &str) -> DeclaredMock {
        match &self.fixture {
            Fixture::Static(_) => DeclaredMock {
                tool: tool.to_owned(),
                mode: MockMode::Static,
                entries: 1,
                fallback: false,
                payload: None,
                payload_bytes: None,
            },
            Fixture::Stateful(entries) => DeclaredMock {
                tool: tool.to_owned(),
                mode: MockMode::Stateful,
                entries: len_u32(entries.len()),
                fallback: false,
                payload: None,
                payload_bytes: None,
            },
            Fixture::Rules { rules, fallback } => DeclaredMock {
                tool: tool.to_owned(),
                mode: MockMode::Rules,
                entries: len_u32(rules.len()),
                fallback: fallback.is_some(),
                payload: None,
                payload_bytes: None,
            },
        }
    }

    pub fn counter(&self) -> Counter {
        Counter {
            consumed: self.consumed,
            total: match &self.fixture {
                Fixture::Stateful(entries) => Some(len_u32(entries.len())),
                Fixture::Static(_) | Fixture::Rules { .. } => None,
            },
            rule: None,
            fallback: false,
        }
    }
}

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Every mock of one session, keyed by canonical tool name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MockTable {
    pub slots: BTreeMap<String, MockSlot>,
}

impl MockTable {
    /// Runs the size and shape gates (`CodeSpar` test mode's gates 2 and 3) on a `mocks` value.
    pub fn from_payload(mocks: &Value) -> Result<MockTable, MocksRejection> {
        let bytes = serde_json::to_string(mocks).map_or(0, |text| text.len());
        if bytes > MAX_MOCKS_BYTES {
            return Err(MocksRejection::TooLarge { bytes });
        }
        let invalid = |field: String, message: String| MocksRejection::Invalid { field, message };
        let Value::Object(map) = mocks else {
            return Err(invalid(
                "/mocks".into(),
                "mocks must be an object keyed by canonical tool name".into(),
            ));
        };
        let mut table = MockTable::default();
        for (tool, value) in map {
            let field = format!("/mocks/{}", pointer_token(tool));
            if tool == LIST_TOOLS {
                return Err(invalid(
                    field,
                    format!(
                        "`{LIST_TOOLS}` is built in and answered by the runtime; it cannot be mocked"
                    ),
                ));
            }
            if !is_canonical(tool) && !is_builtin(tool) {
                let hint = if tool.contains("__") {
                    " (the server__tool form is not accepted; write server/tool)"
                } else {
                    ""
                };
                return Err(invalid(
                    field,
                    format!(
                        "`{tool}` is not a canonical tool name matching ^[a-z0-9][a-z0-9-]*/[a-z0-9][a-z0-9_-]*$ nor a built-in codespar_[a-z0-9_]+{hint}"
                    ),
                ));
            }
            let fixture = match value {
                Value::Object(map) if map.contains_key(RULES_KEY) => {
                    rules_fixture(tool, &field, map)?
                }
                Value::Object(_) => Fixture::Static(RawJson::from_value(value)),
                Value::Array(entries) => {
                    if let Some(i) = entries.iter().position(|entry| !entry.is_object()) {
                        return Err(invalid(
                            format!("{field}/{i}"),
                            format!("entry {i} of `{tool}` must be an object"),
                        ));
                    }
                    if entries.is_empty() {
                        return Err(invalid(
                            field,
                            format!(
                                "`{tool}` is an empty array: a stateful mock needs at least one entry to serve"
                            ),
                        ));
                    }
                    Fixture::Stateful(entries.iter().map(RawJson::from_value).collect())
                }
                other => {
                    return Err(invalid(
                        field,
                        format!(
                            "`{tool}` must be an object or an array of objects, found {}",
                            json_type(other)
                        ),
                    ));
                }
            };
            table.slots.insert(tool.clone(), MockSlot::new(fixture));
        }
        Ok(table)
    }

    /// The server gate, after the shape: a session that lists its `servers` mocks tools of
    /// those servers only (a built-in belongs to every session). An empty list names no
    /// server, and then the mocks name the session's servers (`connections`).
    pub fn check_servers(&self, servers: &[String]) -> Result<(), MocksRejection> {
        if servers.is_empty() {
            return Ok(());
        }
        let unlisted = self.slots.keys().find(|tool| {
            !is_builtin(tool)
                && tool
                    .split_once('/')
                    .is_none_or(|(server, _)| !servers.iter().any(|s| s == server))
        });
        let Some(tool) = unlisted else {
            return Ok(());
        };
        let server = tool
            .split_once('/')
            .map_or(tool.as_str(), |(server, _)| server);
        let listed = servers
            .iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", ");
        Err(MocksRejection::Invalid {
            field: format!("/mocks/{}", pointer_token(tool)),
            message: format!(
                "`{tool}` mocks a tool of server `{server}`, which this session does not list in servers ({listed}); add `{server}` to servers or drop the mock"
            ),
        })
    }

    pub fn declared(&self) -> Vec<DeclaredMock> {
        self.slots
            .iter()
            .map(|(tool, slot)| slot.declared(tool))
            .collect()
    }

    /// `declared`, each with its payload as written in `mocks` (for `session.created`).
    pub fn declared_with_payloads(&self, mocks: Option<&Value>) -> Vec<DeclaredMock> {
        self.slots
            .iter()
            .map(|(tool, slot)| {
                let payload = mocks.and_then(|m| m.get(tool)).map(RawJson::from_value);
                let bytes = payload.as_ref().map_or(0, |p| p.get().len());
                if bytes > MAX_STREAMED_PAYLOAD_BYTES {
                    DeclaredMock {
                        payload_bytes: Some(len_u32(bytes)),
                        ..slot.declared(tool)
                    }
                } else {
                    DeclaredMock {
                        payload,
                        ..slot.declared(tool)
                    }
                }
            })
            .collect()
    }

    pub fn states(&self) -> Vec<MockState> {
        self.slots
            .iter()
            .map(|(tool, slot)| MockState {
                declared: slot.declared(tool),
                counter: slot.counter(),
                calls: slot.calls,
                served: slot.consumed,
                rule_hits: slot.rule_hits.clone(),
                fallback_hits: slot.fallback_hits,
            })
            .collect()
    }

    /// Notes a dispatch naming `tool` (whatever its outcome) and returns its counter,
    /// naming the rule that answered it when a rules mock did.
    pub fn note_call(&mut self, tool: &str) -> Option<Counter> {
        let slot = self.slots.get_mut(tool)?;
        slot.calls = slot.calls.saturating_add(1);
        let answered = slot.answered.take();
        let mut counter = slot.counter();
        match answered {
            Some(Answer::Rule(i)) => counter.rule = Some(i),
            Some(Answer::Fallback) => counter.fallback = true,
            None => {}
        }
        Some(counter)
    }

    /// Takes back a call `note_call` counted (its `counter`), and the entry it was
    /// `served`: a call its store refused, so the next call is served what it was.
    pub fn unnote_call(&mut self, tool: &str, counter: &Counter, served: bool) {
        let Some(slot) = self.slots.get_mut(tool) else {
            return;
        };
        slot.calls = slot.calls.saturating_sub(1);
        if !served {
            return;
        }
        slot.consumed = slot.consumed.saturating_sub(1);
        if let Some(hits) = counter
            .rule
            .and_then(|i| slot.rule_hits.get_mut(i as usize))
        {
            *hits = hits.saturating_sub(1);
        }
        if counter.fallback {
            slot.fallback_hits = slot.fallback_hits.saturating_sub(1);
        }
    }

    pub fn counter(&self, tool: &str) -> Option<Counter> {
        self.slots.get(tool).map(MockSlot::counter)
    }

    /// The mock-store gate: the fixture for this call, advancing the counter only when an
    /// entry is returned. `replay` turns a missing mock into `mocks_engine_error` (the call
    /// was authorised once; its mock vanishing is an inconsistency, not a miss). A rules
    /// mock reads `input`; the others ignore it. `claim`: which entry a stateful mock
    /// serves.
    pub fn consume(
        &mut self,
        tool: &str,
        input: &RawJson,
        replay: bool,
        claim: Claim,
    ) -> Result<RawJson, Envelope> {
        let Some(slot) = self.slots.get_mut(tool) else {
            return Err(if replay {
                Envelope::MocksEngineError {
                    message: format!("replay of {tool} found no mock for it in the session"),
                }
            } else {
                not_mocked(tool, self.slots.is_empty())
            });
        };
        slot.answered = None;
        match &slot.fixture {
            Fixture::Static(value) => {
                let value = value.clone();
                slot.consumed = slot.consumed.saturating_add(1);
                Ok(value)
            }
            Fixture::Rules { rules, fallback } => {
                let input = input
                    .try_value()
                    .map_err(|err| Envelope::MocksEngineError {
                        message: format!(
                            "the rules mock for {tool} cannot read this call's input: {err}"
                        ),
                    })?;
                let (value, answer) = match rules
                    .iter()
                    .position(|rule| rule.conditions.iter().all(|c| c.holds(&input)))
                {
                    Some(i) => (rules[i].output.clone(), Answer::Rule(len_u32(i))),
                    None => match fallback {
                        Some(value) => (value.clone(), Answer::Fallback),
                        None => {
                            return Err(Envelope::ToolNotMocked {
                                tool_name: tool.to_owned(),
                                message: no_rule_matched(tool, rules, &input),
                            });
                        }
                    },
                };
                slot.consumed = slot.consumed.saturating_add(1);
                slot.note_answer(answer);
                slot.answered = Some(answer);
                Ok(value)
            }
            Fixture::Stateful(entries) if entries.is_empty() => Err(Envelope::MocksEngineError {
                message: format!("mock for {tool} is an empty array; there is nothing to serve"),
            }),
            Fixture::Stateful(entries) => {
                let next = match claim {
                    Claim::Entry(index) => index as usize,
                    Claim::Exhausted => entries.len(),
                    Claim::Local => slot.consumed as usize,
                };
                let Some(value) = entries.get(next) else {
                    // Every entry is taken (by this runtime or, claimed, another).
                    slot.consumed = slot.consumed.max(len_u32(entries.len()));
                    return Err(Envelope::MocksExhausted {
                        message: format!(
                            "stateful mock for {tool} is exhausted: all {} entries consumed",
                            entries.len()
                        ),
                    });
                };
                // A claimed entry says how many were taken overall, this one included.
                slot.consumed = match claim {
                    Claim::Local => slot.consumed.saturating_add(1),
                    _ => len_u32(next + 1),
                };
                Ok(value.clone())
            }
        }
    }
}

/// The miss message of a rules mock: the closest rule (most conditions held, the first
/// of equals) and the first of its conditions that failed.
fn no_rule_matched(tool: &str, rules: &[Rule], input: &Value) -> String {
    let closest = rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let held = rule.conditions.iter().filter(|c| c.holds(input)).count();
            (i, rule, held)
        })
        .fold(None::<(usize, &Rule, usize)>, |best, next| match best {
            Some(best) if best.2 >= next.2 => Some(best),
            _ => Some(next),
        });
    match closest {
        None => format!("{tool} has no rule and no {FALLBACK_KEY} in this session"),
        Some((i, rule, held)) => {
            let why = rule
                .conditions
                .iter()
                .find(|c| !c.holds(input))
                .map(|c| c.miss(input))
                .unwrap_or_default();
            format!(
                "{tool} is mocked by input, but no rule matches this call and there is no {FALLBACK_KEY}; closest is rule {i} ({held} of {} conditions held): {why}",
                rule.conditions.len()
            )
        }
    }
}

/// Reads a `{"$rules": [...], "$fallback": {...}}` mock, every error named by pointer.
fn rules_fixture(
    tool: &str,
    field: &str,
    map: &serde_json::Map<String, Value>,
) -> Result<Fixture, MocksRejection> {
    let invalid = |field: String, message: String| MocksRejection::Invalid { field, message };
    if let Some(key) = map.keys().find(|k| *k != RULES_KEY && *k != FALLBACK_KEY) {
        return Err(invalid(
            format!("{field}/{}", pointer_token(key)),
            format!(
                "a rules mock of `{tool}` holds only `{RULES_KEY}` and `{FALLBACK_KEY}`, found `{key}`"
            ),
        ));
    }
    let rules_field = format!("{field}/{RULES_KEY}");
    let Some(Value::Array(items)) = map.get(RULES_KEY) else {
        return Err(invalid(
            rules_field,
            format!("`{RULES_KEY}` of `{tool}` must be an array of {{match, output}} rules"),
        ));
    };
    let fallback = match map.get(FALLBACK_KEY) {
        None => None,
        Some(value @ Value::Object(_)) => Some(RawJson::from_value(value)),
        Some(other) => {
            return Err(invalid(
                format!("{field}/{FALLBACK_KEY}"),
                format!(
                    "`{FALLBACK_KEY}` of `{tool}` must be an object, found {}",
                    json_type(other)
                ),
            ));
        }
    };
    if items.is_empty() && fallback.is_none() {
        return Err(invalid(
            rules_field,
            format!("`{RULES_KEY}` of `{tool}` is empty and there is no `{FALLBACK_KEY}`"),
        ));
    }
    let mut rules = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("{rules_field}/{i}");
        let Value::Object(rule) = item else {
            return Err(invalid(
                at,
                format!("rule {i} of `{tool}` must be an object {{match, output}}"),
            ));
        };
        if let Some(key) = rule.keys().find(|k| *k != "match" && *k != "output") {
            return Err(invalid(
                format!("{at}/{}", pointer_token(key)),
                format!(
                    "rule {i} of `{tool}` has an unknown field `{key}` (expected match, output)"
                ),
            ));
        }
        let Some(Value::Object(matcher)) = rule.get("match") else {
            return Err(invalid(
                format!("{at}/match"),
                format!(
                    "rule {i} of `{tool}` needs `match`, an object of input keys or JSON paths"
                ),
            ));
        };
        let output = match rule.get("output") {
            Some(value @ Value::Object(_)) => RawJson::from_value(value),
            Some(other) => {
                return Err(invalid(
                    format!("{at}/output"),
                    format!(
                        "`output` of rule {i} of `{tool}` must be an object, found {}",
                        json_type(other)
                    ),
                ));
            }
            None => {
                return Err(invalid(
                    format!("{at}/output"),
                    format!("rule {i} of `{tool}` needs `output`, the object it answers with"),
                ));
            }
        };
        let mut conditions = Vec::with_capacity(matcher.len());
        for (key, expected) in matcher {
            let path = if key.starts_with('$') {
                Some(JsonPath::parse(key).map_err(|err| {
                    invalid(
                        format!("{at}/match/{}", pointer_token(key)),
                        err.to_string(),
                    )
                })?)
            } else {
                None
            };
            conditions.push(Condition {
                key: key.clone(),
                path,
                expected: expected.clone(),
            });
        }
        rules.push(Rule { conditions, output });
    }
    Ok(Fixture::Rules { rules, fallback })
}

/// The `tool_not_mocked` envelope for a dispatch with no matching mock.
pub fn not_mocked(tool: &str, no_mocks_at_all: bool) -> Envelope {
    let message = if no_mocks_at_all {
        format!(
            "{tool} is not mocked: this session declared no mocks, and test mode dispatches only mocked tools"
        )
    } else {
        format!("{tool} is not mocked in this session; declare it in mocks at create time")
    };
    Envelope::ToolNotMocked {
        tool_name: tool.to_owned(),
        message,
    }
}

/// The `tool_not_mocked` envelope of a runtime not in test mode: its sessions hold no
/// mocks and it runs no live connectors, so no tool can be dispatched at all.
pub fn not_mocked_live(tool: &str) -> Envelope {
    Envelope::ToolNotMocked {
        tool_name: tool.to_owned(),
        message: format!(
            "{tool} cannot be dispatched: this runtime serves mocked tools only, runs no live connectors, and was started without mocks enabled"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_other_than_list_tools_are_mockable() {
        let table = MockTable::from_payload(&serde_json::json!({
            "codespar_charge": {"id": "chg_1"},
            "codespar_ship": [{"id": "shp_1"}],
        }))
        .unwrap();
        assert_eq!(table.slots.len(), 2);
        for (name, field) in [
            ("codespar_list_tools", "/mocks/codespar_list_tools"),
            ("codespar_", "/mocks/codespar_"),
            ("codespar_Charge", "/mocks/codespar_Charge"),
            ("codespar-charge", "/mocks/codespar-charge"),
        ] {
            let err = MockTable::from_payload(&serde_json::json!({ name: {} })).unwrap_err();
            match err {
                MocksRejection::Invalid { field: f, .. } => assert_eq!(f, field),
                other @ MocksRejection::TooLarge { .. } => panic!("{name}: {other:?}"),
            }
        }
    }
    use serde_json::json;

    fn rejection(mocks: &Value) -> MocksRejection {
        MockTable::from_payload(mocks).unwrap_err()
    }

    #[test]
    fn shape_errors_name_the_field_by_pointer() {
        assert_eq!(
            rejection(&json!({"asaas/x": [{}, 3]})),
            MocksRejection::Invalid {
                field: "/mocks/asaas~1x/1".into(),
                message: "entry 1 of `asaas/x` must be an object".into()
            }
        );
        let MocksRejection::Invalid { field, message } = rejection(&json!({"asaas__x": {}})) else {
            panic!("expected invalid");
        };
        assert_eq!(field, "/mocks/asaas__x");
        assert!(message.contains("server/tool"));
        let MocksRejection::Invalid { field, .. } = rejection(&json!({"a~b/c": {}})) else {
            panic!("expected invalid");
        };
        assert_eq!(field, "/mocks/a~0b~1c");
        let MocksRejection::Invalid { field, .. } = rejection(&json!([1])) else {
            panic!("expected invalid");
        };
        assert_eq!(field, "/mocks");
        let MocksRejection::Invalid { field, .. } = rejection(&json!({"a/b": "x"})) else {
            panic!("expected invalid");
        };
        assert_eq!(field, "/mocks/a~1b");
        let MocksRejection::Invalid { field, message } = rejection(&json!({"a/b": []})) else {
            panic!("expected invalid");
        };
        assert_eq!(field, "/mocks/a~1b");
        assert!(message.contains("empty array"), "{message}");
    }

    #[test]
    fn subset_matching_allows_extra_keys_and_compares_numbers_by_value() {
        assert!(subset(
            &json!({"a": {"b": 1}}),
            &json!({"a": {"b": 1.0, "c": 2}, "d": 3})
        ));
        assert!(subset(&json!([{"k": 1}]), &json!([{"k": 1, "x": 0}])));
        assert!(!subset(&json!([1]), &json!([1, 2])));
        assert!(!subset(&json!({"a": 1}), &json!({"a": "1"})));
        assert!(!subset(&json!({"a": null}), &json!({})));
        assert!(subset(&json!({}), &json!({"anything": true})));
    }

    #[test]
    fn size_gate_runs_before_shape() {
        let big = "x".repeat(MAX_MOCKS_BYTES);
        assert!(matches!(
            rejection(&json!({"NOT CANONICAL": {"pad": big}})),
            MocksRejection::TooLarge { .. }
        ));
    }

    #[test]
    fn stateful_counter_advances_only_on_return() {
        let mut table =
            MockTable::from_payload(&json!({"a/b": [{"n": 1}, {"n": 2}], "a/s": {"k": 0}}))
                .unwrap();
        // Refused at create, an empty array can still come back from an older store.
        table
            .slots
            .insert("a/e".into(), MockSlot::new(Fixture::Stateful(Vec::new())));
        assert_eq!(
            table
                .consume("a/b", &RawJson::null(), false, Claim::Local)
                .unwrap()
                .to_value(),
            json!({"n": 1})
        );
        assert_eq!(
            table
                .consume("a/b", &RawJson::null(), false, Claim::Local)
                .unwrap()
                .to_value(),
            json!({"n": 2})
        );
        assert!(matches!(
            table.consume("a/b", &RawJson::null(), false, Claim::Local),
            Err(Envelope::MocksExhausted { .. })
        ));
        assert_eq!(
            table.counter("a/b"),
            Some(Counter {
                consumed: 2,
                total: Some(2),
                ..Counter::default()
            })
        );
        for _ in 0..3 {
            assert_eq!(
                table
                    .consume("a/s", &RawJson::null(), false, Claim::Local)
                    .unwrap()
                    .to_value(),
                json!({"k": 0})
            );
        }
        assert_eq!(
            table.counter("a/s"),
            Some(Counter {
                consumed: 3,
                total: None,
                ..Counter::default()
            })
        );
        assert!(matches!(
            table.consume("a/e", &RawJson::null(), false, Claim::Local),
            Err(Envelope::MocksEngineError { .. })
        ));
        assert!(matches!(
            table.consume("a/zz", &RawJson::null(), false, Claim::Local),
            Err(Envelope::ToolNotMocked { .. })
        ));
        assert!(matches!(
            table.consume("a/zz", &RawJson::null(), true, Claim::Local),
            Err(Envelope::MocksEngineError { .. })
        ));
    }
}
