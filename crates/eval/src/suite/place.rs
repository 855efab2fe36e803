//! Where in a suite file a value sits (file, case, dotted field), and reading a document
//! into its shape: each wrong kind or key a `SuiteError` naming its place and what was expected.

use super::shapes::{BAD_SCRIPT, CaseIds, Doc, RawSuite, Script, Scripts, unknown_field};
use super::{ASSERTION_KINDS, CaseRef, SuiteError, SuiteErrorKind};
use serde::Deserialize;
use serde_json::Value;
use serde_path_to_error::Segment;
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

    fn check_model(&self, script: &ModelScript, field: &str) -> Result<(), SuiteError> {
        // The problem names its place inside the script: `model.sequence[1].when[0].path`.
        crate::script::check(script).map_err(|problem| {
            let inner = problem.field_dotted();
            let at = if inner.is_empty() {
                field.to_owned()
            } else {
                format!("{field}.{inner}")
            };
            self.invalid(Some(&at), &format!("{BAD_SCRIPT}{}", problem.message))
        })
    }

    /// The case's scripts: `model` (one) or `model_variants` (one per attempt), each
    /// checked past its shape (`retries`, branches); `None` when it gives neither.
    pub(super) fn models(
        &self,
        model: Option<Script>,
        variants: Option<Scripts>,
    ) -> Result<Option<Vec<ModelScript>>, SuiteError> {
        match (model, variants) {
            (Some(_), Some(_)) => Err(self.invalid(
                Some("model_variants"),
                "use `model` or `model_variants`, not both",
            )),
            (Some(Script(model)), None) => {
                self.check_model(&model, "model")?;
                Ok(Some(vec![model]))
            }
            (None, Some(Scripts(scripts))) => {
                for (i, script) in scripts.iter().enumerate() {
                    self.check_model(script, &format!("model_variants[{i}]"))?;
                }
                Ok(Some(scripts))
            }
            (None, None) => Ok(None),
        }
    }
}

/// Reads a suite document into its shape. This is where a serde error becomes a
/// `SuiteError`: the path names the case (by its id when it gives a usable one, else its
/// position) and the field; an unknown key is named with the known ones.
pub(super) fn shape(file: &str, value: &Value) -> Result<RawSuite, SuiteError> {
    serde_path_to_error::deserialize(value)
        .map(|Doc(raw)| raw)
        .map_err(|err| {
            let segments: Vec<&Segment> = err.path().iter().collect();
            let (case, rest) = match segments.as_slice() {
                [Segment::Map { key }, Segment::Seq { index }, rest @ ..]
                    if key == "case" || key == "cases" =>
                {
                    (Some(case_ref(value, key, *index)), rest)
                }
                all => (None, all),
            };
            let field = dotted(rest);
            let at = Place {
                file,
                case,
                prefix: String::new(),
            };
            let message = err.into_inner().to_string();
            if let Some((key, known)) = unknown_field(&message) {
                // `[case.assert]` and the children of `all` / `any` list the kinds.
                let what = if known == ASSERTION_KINDS.join(", ") {
                    "assertion kind"
                } else {
                    "key"
                };
                return at.error(
                    Some(field.as_deref().unwrap_or(&key)),
                    SuiteErrorKind::Unknown,
                    &format!("unknown {what}; expected one of: {known}"),
                );
            }
            let kind = if message
                .strip_prefix(BAD_SCRIPT)
                .is_some_and(|inner| inner.starts_with("unknown field"))
            {
                SuiteErrorKind::Unknown
            } else {
                SuiteErrorKind::Invalid
            };
            at.error(field.as_deref(), kind, &message)
        })
}

/// The case at `index` of the list under `key`: by its id when it gives a usable one.
pub(super) fn case_ref(value: &Value, key: &str, index: usize) -> CaseRef {
    CaseIds::deserialize(value)
        .ok()
        .and_then(|ids| ids.get(key, index))
        .filter(|id| usable_id(id))
        .map_or(CaseRef::Index(index + 1), CaseRef::Id)
}

/// An id a case can be named by in messages.
pub(super) fn usable_id(id: &str) -> bool {
    !id.trim().is_empty() && spyglass_protocol::glob::check_id(id).is_ok()
}

/// `assert.all[0].contains`: the path's segments as a field name (none when empty).
fn dotted(segments: &[&Segment]) -> Option<String> {
    let mut out = String::new();
    for segment in segments {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => {}
        }
    }
    (!out.is_empty()).then_some(out)
}
