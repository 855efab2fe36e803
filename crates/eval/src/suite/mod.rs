//! Eval suite files: one suite per file, TOML or JSON, read into checked `Suite`/`Case`
//! values. Every problem is a `SuiteError` naming the file, the case and the field.
//!
//! # Format
//!
//! ```toml
//! suite = "payments"            # required
//!
//! [defaults]                    # optional; merged into every case, the case's own values win
//! mocks = { "asaas/create_payment" = { id = "pay_1", status = "PENDING" } }  # per tool
//! servers = ["asaas"]           # replaced whole by a case's own list
//! metadata = { team = "billing" } # merged per key
//! model = { default_text = "ok" } # replaced whole by a case's `model` or `model_variants`
//! timeout_ms = 5000
//!
//! [[case]]                      # `cases` is accepted too (handy in JSON)
//! id = "charge small amount"    # required, unique in the suite
//! input = "Charge R$5 via Pix"  # required: the user message
//! model = { sequence = [ { tool_calls = [ { name = "asaas/create_payment", arguments = { value = 5 } } ] },
//!                        { text = "Charged: pay_1" } ] }
//! skip = "reason"               # or `skip = true`
//! timeout_ms = 2000
//! [case.assert]
//! contains = ["pay_1"]
//! ```
//!
//! `model` is the runtime's scripted model (`sequence`, `fail_on_step`, `default_text`,
//! `strict`, `retries`, `when` / `else` branches), checked by `eval::script`.
//! `model_variants = [ {...}, {...} ]` instead gives one script per attempt: attempt 1
//! uses the first, attempt 2 the second, cycling — so a case run with `repeat` can be
//! made to pass on some attempts and fail on others (a flaky case on purpose).
//!
//! Assertion kinds under `[case.assert]`: `contains` (string or list), `equals`, `regex`
//! (string or list), `operation_called` (name, `{ name, times, args }`, or a list of
//! either), `sequence` (names in call order, or `{ tools, gaps }`), `not_called`,
//! `json_schema` (`{ schema, tool? }` or a list), `prompted` (`{ step, contains |
//! matches | path + equals }` or a list: what the scripted model received at a call),
//! `envelope` (code or list: some call returned it), `no_envelope` (`true`: no call
//! returned any envelope; a code or list: none of those), `json_path` (`{ path = "$.id",
//! equals = ... }` or a list of them, on a final output that is JSON), `max_tokens`,
//! `max_cost` (US dollars, by the runtime's price table), `llm_judge`, `semantic_match`;
//! `all` / `any` (a list of one-kind assertion tables, nestable to [`MAX_NESTING`]) and
//! `command` (a checker program, `eval::command`).
//! Unknown keys anywhere are errors, not silently ignored.

mod place;
mod read;
mod shapes;

pub use read::suite_from_value;

use super::assert::JsonPath;
use serde_json::{Map, Value};
use spyglass_protocol::glob::glob_match;
use spyglass_protocol::rest::ModelScript;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use thiserror::Error;

/// A parsed suite file.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    /// The file it came from, as given (used in messages).
    pub file: String,
    pub cases: Vec<Case>,
}

/// One case with the suite's defaults already merged in.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub input: String,
    /// The session's `mocks` map, passed to the runtime as is (it checks the shape).
    pub mocks: Option<Value>,
    /// One script per attempt, cycling; empty means the runtime's default model.
    pub models: Vec<ModelScript>,
    pub servers: Vec<String>,
    pub metadata: Map<String, Value>,
    /// `Some(reason)` when the case is skipped.
    pub skip: Option<String>,
    pub timeout_ms: Option<u64>,
    pub assertions: Vec<Assertion>,
    /// Per policy rule id, how the run decides the calls that rule holds for approval, as
    /// a human would (`decisions`, the suite's defaults merged in); empty: they stay held.
    pub decisions: BTreeMap<String, CaseDecision>,
}

/// How a case decides a call a policy rule held for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseDecision {
    Approve,
    Deny,
}

impl Case {
    /// The model script of a 1-based attempt (`model_variants` cycle by attempt number).
    pub fn model_for_attempt(&self, attempt: u32) -> Option<&ModelScript> {
        if self.models.is_empty() {
            return None;
        }
        let index = (attempt.max(1) as usize - 1) % self.models.len();
        self.models.get(index)
    }
}

/// An operation that must have been called: at least once, or exactly `times`; with
/// `args`, only the calls whose arguments hold every check count.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationExpectation {
    pub name: String,
    pub times: Option<u32>,
    pub args: Vec<ArgCheck>,
}

/// One check on a call's arguments: a key of the input (its value a subset of what was
/// sent) or, for a key starting with `$`, a JSON path into the input.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgCheck {
    pub key: String,
    pub path: Option<JsonPath>,
    pub expected: Value,
}

/// `sequence`: these operations were called in this order; with `gaps` (the default)
/// other calls may come between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceExpectation {
    pub tools: Vec<String>,
    pub gaps: bool,
}

/// `json_schema`: the final text (parsed as JSON), or with `tool` the arguments of every
/// call of that tool, valid against `schema` (checked to compile when the suite is read).
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaCheck {
    pub tool: Option<String>,
    pub schema: Value,
}

/// One `json_path` check.
#[derive(Debug, Clone)]
pub struct JsonPathCheck {
    pub path: JsonPath,
    pub equals: Value,
}

/// `prompted`: what the scripted model received at model call `step` (zero-based, as
/// `fail_on_step` counts).
#[derive(Debug, Clone)]
pub struct PromptCheck {
    pub step: u32,
    pub test: PromptTest,
}

/// The one test a `prompted` item makes of the prompt.
#[derive(Debug, Clone)]
pub enum PromptTest {
    /// The prompt's text (one message a line) contains this.
    Contains(String),
    /// The pattern matches the prompt's text.
    Matches(regex::Regex),
    /// The value at this path of the messages (a JSON list) equals `equals`.
    Path { path: JsonPath, equals: Value },
}

/// What `no_envelope` forbids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoEnvelope {
    Any,
    Codes(Vec<String>),
}

/// One assertion kind of a case, checked when the file is read.
#[derive(Debug, Clone)]
pub enum Assertion {
    Contains(Vec<String>),
    Equals(String),
    Regex(Vec<regex::Regex>),
    OperationCalled(Vec<OperationExpectation>),
    Sequence(SequenceExpectation),
    NotCalled(Vec<String>),
    Envelope(Vec<String>),
    NoEnvelope(NoEnvelope),
    JsonPath(Vec<JsonPathCheck>),
    JsonSchema(Vec<SchemaCheck>),
    Prompted(Vec<PromptCheck>),
    MaxTokens(u64),
    /// At most this many US dollars, as the runtime prices the run's tokens.
    MaxCost(f64),
    /// Judged by a model (`eval::judge`), after the rules above.
    LlmJudge(super::judge::JudgeSpec),
    SemanticMatch(super::judge::SemanticSpec),
    /// Every child holds; judged in order, stopping at the first that does not.
    All(Vec<Assertion>),
    /// Some child holds; judged in order, stopping at the first that does.
    Any(Vec<Assertion>),
    /// Checker programs, each judging the case's observations (`eval::command`).
    Command(Vec<CommandSpec>),
}

impl Assertion {
    /// Its key in `[case.assert]`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Contains(_) => "contains",
            Self::Equals(_) => "equals",
            Self::Regex(_) => "regex",
            Self::OperationCalled(_) => "operation_called",
            Self::Sequence(_) => "sequence",
            Self::NotCalled(_) => "not_called",
            Self::Envelope(_) => "envelope",
            Self::NoEnvelope(_) => "no_envelope",
            Self::JsonPath(_) => "json_path",
            Self::JsonSchema(_) => "json_schema",
            Self::Prompted(_) => "prompted",
            Self::MaxTokens(_) => "max_tokens",
            Self::MaxCost(_) => "max_cost",
            Self::LlmJudge(_) => "llm_judge",
            Self::SemanticMatch(_) => "semantic_match",
            Self::All(_) => "all",
            Self::Any(_) => "any",
            Self::Command(_) => "command",
        }
    }

    /// Whether this assertion, or one nested in it, satisfies `test`.
    pub fn any_in_tree(&self, test: &dyn Fn(&Assertion) -> bool) -> bool {
        test(self)
            || match self {
                Self::All(children) | Self::Any(children) => {
                    children.iter().any(|child| child.any_in_tree(test))
                }
                _ => false,
            }
    }
}

/// How deep `all` / `any` may nest inside one another: deeper is refused when the suite is
/// read, so judging never recurses without bound.
pub const MAX_NESTING: usize = 32;

/// `command`: a checker program run with the case's observations as JSON on stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// The program and its arguments, run as given (no shell).
    pub argv: Vec<String>,
    /// How long the program may take before it is killed (with its process group).
    pub timeout_ms: u64,
    /// Where it runs: the suite file's directory when the file is named with one, else
    /// the runtime's working directory.
    pub dir: Option<std::path::PathBuf>,
}

/// A checker's time when the file gives none, and the most it may give.
pub const COMMAND_TIMEOUT_MS: u64 = 10_000;
pub const MAX_COMMAND_TIMEOUT_MS: u64 = 120_000;
/// Arguments of one command, and bytes of one argument.
const MAX_ARGS: usize = 64;
const MAX_ARG_BYTES: usize = 4096;

/// Assertion keys in the order they are evaluated and reported.
pub const ASSERTION_KINDS: &[&str] = &[
    "contains",
    "equals",
    "regex",
    "operation_called",
    "sequence",
    "not_called",
    "envelope",
    "no_envelope",
    "json_path",
    "json_schema",
    "prompted",
    "max_tokens",
    "max_cost",
    "llm_judge",
    "semantic_match",
    "all",
    "any",
    "command",
];

/// Which case an error is about: its id when it has one, else its 1-based position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseRef {
    Id(String),
    Index(usize),
}

impl fmt::Display for CaseRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Id(id) => write!(f, "case {id:?}"),
            Self::Index(index) => write!(f, "case #{index}"),
        }
    }
}

/// The class of a suite file problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuiteErrorKind {
    /// The file could not be read.
    Io,
    /// Not TOML / not JSON.
    Syntax,
    /// A required field is absent.
    Missing,
    /// A field has the wrong type or an invalid value.
    Invalid,
    /// A key this format does not have.
    Unknown,
    /// Two cases share an id.
    Duplicate,
}

/// A suite file problem: `payments.toml: case "charge": assert.regex: invalid regex …`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{}", self.describe())]
pub struct SuiteError {
    pub file: String,
    pub case: Option<CaseRef>,
    pub field: Option<String>,
    pub kind: SuiteErrorKind,
    pub message: String,
}

impl SuiteError {
    fn describe(&self) -> String {
        let mut out = self.file.clone();
        if let Some(case) = &self.case {
            out.push_str(&format!(": {case}"));
        }
        if let Some(field) = &self.field {
            out.push_str(&format!(": {field}"));
        }
        out.push_str(&format!(": {}", self.message));
        out
    }
}

/// Reads and parses one suite file; JSON when the name ends in `.json` or the text starts
/// with `{`, else TOML.
pub fn load_suite(path: &Path) -> Result<Suite, SuiteError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| SuiteError {
        file: file.clone(),
        case: None,
        field: None,
        kind: SuiteErrorKind::Io,
        message: format!("cannot read the file: {err}"),
    })?;
    parse_suite(&file, &text)
}

/// Parses suite text; `file` names it in errors and picks the format by extension.
pub fn parse_suite(file: &str, text: &str) -> Result<Suite, SuiteError> {
    let lower = file.to_ascii_lowercase();
    // `lower` is lowercased above, so these compare without case.
    #[expect(clippy::case_sensitive_file_extension_comparisons)]
    let json = if lower.ends_with(".json") {
        true
    } else if lower.ends_with(".toml") {
        false
    } else {
        text.trim_start().starts_with('{')
    };
    let value = if json {
        serde_json::from_str::<Value>(text).map_err(|err| SuiteError {
            file: file.to_owned(),
            case: None,
            field: None,
            kind: SuiteErrorKind::Syntax,
            message: format!("not valid JSON: {err}"),
        })?
    } else {
        toml::from_str::<Value>(text).map_err(|err| SuiteError {
            file: file.to_owned(),
            case: None,
            field: None,
            kind: SuiteErrorKind::Syntax,
            message: toml_message(text, &err),
        })?
    };
    suite_from_value(file, &value)
}

fn toml_message(text: &str, err: &toml::de::Error) -> String {
    let message = err.message().trim();
    match err.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |at| at + 1) + 1;
            format!("not valid TOML (line {line}, column {column}): {message}")
        }
        None => format!("not valid TOML: {message}"),
    }
}

/// A suite as `POST /v1/evals/runs` carries it: a suite document (an object with
/// `suite`), suite file text, or `{ "file": name, "text": text }`. Without a file name
/// the suite is named `suites[index]` in errors.
pub fn suite_from_request(index: usize, value: &Value) -> Result<Suite, SuiteError> {
    let fallback = format!("suites[{index}]");
    match value {
        Value::String(text) => parse_suite(&fallback, text),
        Value::Object(map) if !map.contains_key("suite") && map.contains_key("text") => {
            let file = match map.get("file") {
                None => fallback,
                Some(Value::String(file)) if !file.is_empty() => file.clone(),
                Some(_) => {
                    return Err(SuiteError {
                        file: fallback,
                        case: None,
                        field: Some("file".into()),
                        kind: SuiteErrorKind::Invalid,
                        message: "expected the file name as a string".into(),
                    });
                }
            };
            if let Some(key) = map.keys().find(|key| *key != "file" && *key != "text") {
                return Err(SuiteError {
                    file,
                    case: None,
                    field: Some(key.clone()),
                    kind: SuiteErrorKind::Unknown,
                    message: "unknown key; expected file, text".into(),
                });
            }
            match map.get("text") {
                Some(Value::String(text)) => parse_suite(&file, text),
                _ => Err(SuiteError {
                    file,
                    case: None,
                    field: Some("text".into()),
                    kind: SuiteErrorKind::Invalid,
                    message: "expected the suite file's text as a string".into(),
                }),
            }
        }
        other => suite_from_value(&fallback, other),
    }
}

/// One attempt of one case, in the order a run executes them.
#[derive(Debug, Clone, Copy)]
pub struct PlannedCase<'a> {
    pub suite: &'a Suite,
    pub case: &'a Case,
    /// 1-based.
    pub attempt: u32,
}

/// How many attempts `plan` would make, counted without building them: the check a
/// client's `repeat` (up to `u32::MAX`) must pass before anything is allocated for it.
pub fn planned_attempts(suites: &[Suite], repeat: u32, glob: Option<&str>) -> u64 {
    let cases: u64 = suites
        .iter()
        .flat_map(|suite| &suite.cases)
        .filter(|case| glob.is_none_or(|glob| glob_match(glob, &case.id)))
        .map(|_| 1)
        .sum();
    cases.saturating_mul(u64::from(repeat.max(1)))
}

/// Every attempt a run makes: suite by suite, case by case (those matching `glob`),
/// each case's `repeat` attempts together. Check `planned_attempts` against a limit first.
pub fn plan<'a>(suites: &'a [Suite], repeat: u32, glob: Option<&str>) -> Vec<PlannedCase<'a>> {
    let mut out = Vec::new();
    for suite in suites {
        for case in suite.select(glob) {
            for attempt in 1..=repeat.max(1) {
                out.push(PlannedCase {
                    suite,
                    case,
                    attempt,
                });
            }
        }
    }
    out
}

impl Suite {
    /// The cases whose id matches `glob` (all of them without one).
    pub fn select(&self, glob: Option<&str>) -> Vec<&Case> {
        self.cases
            .iter()
            .filter(|case| glob.is_none_or(|glob| glob_match(glob, &case.id)))
            .collect()
    }
}

#[cfg(test)]
mod tests;
