//! Where in a suite file a value sits (file, case, dotted field) and reading a value there
//! into its shape: each wrong kind or key a `SuiteError` naming its place and what was expected.

use super::shapes::unknown_field;
use super::{SuiteError, SuiteErrorKind};
use crate::suite::CaseRef;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use spyglass_protocol::rest::ModelScript;

/// Where in the file a value sits, for error messages.
pub(super) struct Place<'a> {
    pub(super) file: &'a str,
    pub(super) case: Option<CaseRef>,
    pub(super) prefix: String,
}

impl Place<'_> {
    pub(super) fn nested(&self, name: &str) -> Self {
        Place {
            file: self.file,
            case: self.case.clone(),
            prefix: self.field(name),
        }
    }

    pub(super) fn field(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_owned()
        } else if name.starts_with('[') {
            format!("{}{name}", self.prefix)
        } else {
            format!("{}.{name}", self.prefix)
        }
    }

    pub(super) fn error(
        &self,
        field: Option<&str>,
        kind: SuiteErrorKind,
        message: &str,
    ) -> SuiteError {
        let field = match field {
            Some(name) => Some(self.field(name)),
            None if self.prefix.is_empty() => None,
            None => Some(self.prefix.clone()),
        };
        SuiteError {
            file: self.file.to_owned(),
            case: self.case.clone(),
            field,
            kind,
            message: message.to_owned(),
        }
    }

    pub(super) fn invalid(&self, field: Option<&str>, message: &str) -> SuiteError {
        self.error(field, SuiteErrorKind::Invalid, message)
    }

    /// Reads a table into its shape; an unknown key is named with the known ones (`what`
    /// names the table's own keys: "key", "assertion kind").
    pub(super) fn strict<T: DeserializeOwned>(
        &self,
        value: &Value,
        what: &str,
    ) -> Result<T, SuiteError> {
        serde_path_to_error::deserialize(value).map_err(|err| {
            // The path names the wrong value (`servers[1]`), an unknown key included; a
            // key in a table nested in this one is a plain key, whatever `what` says.
            let own_key = err.path().iter().count() <= 1;
            let path = err.path().to_string();
            let field = (path != ".").then_some(path);
            let message = err.into_inner().to_string();
            match unknown_field(&message) {
                Some((key, known)) => self.error(
                    Some(field.as_deref().unwrap_or(&key)),
                    SuiteErrorKind::Unknown,
                    &format!(
                        "unknown {}; expected one of: {known}",
                        if own_key { what } else { "key" }
                    ),
                ),
                None => self.invalid(field.as_deref(), &message),
            }
        })
    }

    /// Reads the value at `field` as `T`: a wrong kind is named at `field` (or inside it).
    pub(super) fn read<T: DeserializeOwned>(
        &self,
        value: &Value,
        field: &str,
    ) -> Result<T, SuiteError> {
        self.nested(field).strict(value, "key")
    }

    pub(super) fn table<'v>(
        &self,
        value: &'v Value,
        field: &str,
    ) -> Result<&'v Map<String, Value>, SuiteError> {
        value.as_object().ok_or_else(|| {
            self.invalid(
                Some(field),
                &format!("expected a table, found {}", type_name(value)),
            )
        })
    }

    pub(super) fn model(&self, value: &Value, field: &str) -> Result<ModelScript, SuiteError> {
        self.table(value, field)?;
        // The problem names its place inside the script: `model.sequence[1].when[0].path`.
        crate::script::parse(value).map_err(|problem| {
            let inner = problem.field_dotted();
            let at = if inner.is_empty() {
                field.to_owned()
            } else {
                format!("{field}.{inner}")
            };
            let kind = if problem.message.starts_with("unknown field") {
                SuiteErrorKind::Unknown
            } else {
                SuiteErrorKind::Invalid
            };
            self.error(
                Some(&at),
                kind,
                &format!("bad model script: {}", problem.message),
            )
        })
    }

    pub(super) fn models(
        &self,
        model: Option<&Value>,
        variants: Option<&Value>,
    ) -> Result<Option<Vec<ModelScript>>, SuiteError> {
        match (model, variants) {
            (Some(_), Some(_)) => Err(self.invalid(
                Some("model_variants"),
                "use `model` or `model_variants`, not both",
            )),
            (Some(model), None) => Ok(Some(vec![self.model(model, "model")?])),
            (None, Some(Value::Array(items))) if !items.is_empty() => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.model(item, &format!("model_variants[{i}]")))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            (None, Some(other)) => Err(self.invalid(
                Some("model_variants"),
                &format!(
                    "expected a non-empty list of model scripts, found {}",
                    type_name(other)
                ),
            )),
            (None, None) => Ok(None),
        }
    }
}

pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a float",
        Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => "a negative integer",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a table",
    }
}
