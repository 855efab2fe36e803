//! The session mock store: the create-time gates on a `mocks` payload (size, then shape,
//! named by JSON pointer) and the per-tool consume counters that `execute` advances.
//! Mocks are immutable once a session holds them; only the counters move.

use crate::protocol::events::{Counter, DeclaredMock, MockMode};
use crate::protocol::json::json_type;
use crate::protocol::rest::MockState;
use crate::protocol::{Envelope, RawJson};
use serde_json::Value;
use std::collections::BTreeMap;

/// Serialized mocks above this many bytes are refused (seed 000: 64 KiB).
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

/// Whether a name is a `CodeSpar` built-in's, `codespar_` then `[a-z0-9_]`. Seed 000: a
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

/// One declared mock: a static object, or a stateful array consumed in order. Entries are
/// kept as the JSON text they are served as: a call copies the text into its answer and
/// its `tool.called` event instead of cloning a tree and writing it out twice.
#[derive(Debug, Clone, PartialEq)]
pub enum Fixture {
    Static(RawJson),
    Stateful(Vec<RawJson>),
}

/// A mock and its counter: `consumed` successful returns, `calls` dispatches naming it.
#[derive(Debug, Clone, PartialEq)]
pub struct MockSlot {
    pub fixture: Fixture,
    pub consumed: u32,
    pub calls: u32,
}

impl MockSlot {
    pub fn declared(&self, tool: &str) -> DeclaredMock {
        match &self.fixture {
            Fixture::Static(_) => DeclaredMock {
                tool: tool.to_owned(),
                mode: MockMode::Static,
                entries: 1,
            },
            Fixture::Stateful(entries) => DeclaredMock {
                tool: tool.to_owned(),
                mode: MockMode::Stateful,
                entries: len_u32(entries.len()),
            },
        }
    }

    pub fn counter(&self) -> Counter {
        Counter {
            consumed: self.consumed,
            total: match &self.fixture {
                Fixture::Static(_) => None,
                Fixture::Stateful(entries) => Some(len_u32(entries.len())),
            },
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
    /// Runs the size and shape gates (seed 000 gates 2 and 3) on a `mocks` value.
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
                Value::Object(_) => Fixture::Static(RawJson::from_value(value)),
                Value::Array(entries) => {
                    if let Some(i) = entries.iter().position(|entry| !entry.is_object()) {
                        return Err(invalid(
                            format!("{field}/{i}"),
                            format!("entry {i} of `{tool}` must be an object"),
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
            table.slots.insert(
                tool.clone(),
                MockSlot {
                    fixture,
                    consumed: 0,
                    calls: 0,
                },
            );
        }
        Ok(table)
    }

    pub fn declared(&self) -> Vec<DeclaredMock> {
        self.slots
            .iter()
            .map(|(tool, slot)| slot.declared(tool))
            .collect()
    }

    pub fn states(&self) -> Vec<MockState> {
        self.slots
            .iter()
            .map(|(tool, slot)| MockState {
                declared: slot.declared(tool),
                counter: slot.counter(),
                calls: slot.calls,
            })
            .collect()
    }

    /// Notes a dispatch naming `tool` (whatever its outcome) and returns its counter.
    pub fn note_call(&mut self, tool: &str) -> Option<Counter> {
        let slot = self.slots.get_mut(tool)?;
        slot.calls = slot.calls.saturating_add(1);
        Some(slot.counter())
    }

    pub fn counter(&self, tool: &str) -> Option<Counter> {
        self.slots.get(tool).map(MockSlot::counter)
    }

    /// The mock-store gate: the fixture for this call, advancing the counter only when an
    /// entry is returned. `replay` turns a missing mock into `mocks_engine_error` (the call
    /// was authorised once; its mock vanishing is an inconsistency, not a miss).
    pub fn consume(&mut self, tool: &str, replay: bool) -> Result<RawJson, Envelope> {
        let Some(slot) = self.slots.get_mut(tool) else {
            return Err(if replay {
                Envelope::MocksEngineError {
                    message: format!("replay of {tool} found no mock for it in the session"),
                }
            } else {
                not_mocked(tool, self.slots.is_empty())
            });
        };
        match &slot.fixture {
            Fixture::Static(value) => {
                let value = value.clone();
                slot.consumed = slot.consumed.saturating_add(1);
                Ok(value)
            }
            Fixture::Stateful(entries) if entries.is_empty() => Err(Envelope::MocksEngineError {
                message: format!("mock for {tool} is an empty array; there is nothing to serve"),
            }),
            Fixture::Stateful(entries) => {
                let next = slot.consumed as usize;
                match entries.get(next) {
                    Some(value) => {
                        let value = value.clone();
                        slot.consumed = slot.consumed.saturating_add(1);
                        Ok(value)
                    }
                    None => Err(Envelope::MocksExhausted {
                        message: format!(
                            "stateful mock for {tool} is exhausted: all {} entries consumed",
                            entries.len()
                        ),
                    }),
                }
            }
        }
    }
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
        let mut table = MockTable::from_payload(
            &json!({"a/b": [{"n": 1}, {"n": 2}], "a/s": {"k": 0}, "a/e": []}),
        )
        .unwrap();
        assert_eq!(
            table.consume("a/b", false).unwrap().to_value(),
            json!({"n": 1})
        );
        assert_eq!(
            table.consume("a/b", false).unwrap().to_value(),
            json!({"n": 2})
        );
        assert!(matches!(
            table.consume("a/b", false),
            Err(Envelope::MocksExhausted { .. })
        ));
        assert_eq!(
            table.counter("a/b"),
            Some(Counter {
                consumed: 2,
                total: Some(2)
            })
        );
        for _ in 0..3 {
            assert_eq!(
                table.consume("a/s", false).unwrap().to_value(),
                json!({"k": 0})
            );
        }
        assert_eq!(
            table.counter("a/s"),
            Some(Counter {
                consumed: 3,
                total: None
            })
        );
        assert!(matches!(
            table.consume("a/e", false),
            Err(Envelope::MocksEngineError { .. })
        ));
        assert!(matches!(
            table.consume("a/zz", false),
            Err(Envelope::ToolNotMocked { .. })
        ));
        assert!(matches!(
            table.consume("a/zz", true),
            Err(Envelope::MocksEngineError { .. })
        ));
    }
}
