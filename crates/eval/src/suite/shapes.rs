//! The serde shapes of a suite file: each table's keys (unknown keys refused by serde),
//! every value kept raw so the reader can name a wrong kind with its place and what it expects.

use serde::Deserialize;
use serde_json::Value;

/// The shapes of a suite file: serde refuses unknown keys, and every value stays raw
/// (`null` included) so the validation pass below reports a wrong kind with the file, the
/// case, the field and what was expected.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSuite {
    #[serde(default, deserialize_with = "present")]
    pub(super) suite: Option<Value>,
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
    #[serde(default, deserialize_with = "present")]
    pub(super) mocks: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) model: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) model_variants: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) servers: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) metadata: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) timeout_ms: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCase {
    #[serde(default, deserialize_with = "present")]
    pub(super) id: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) input: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) mocks: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) model: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) model_variants: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) servers: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) metadata: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) skip: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    pub(super) timeout_ms: Option<Value>,
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
