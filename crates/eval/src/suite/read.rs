//! Reading a suite document into `Suite`: the defaults, each case merged with them, and
//! every assertion kind checked (patterns compiled, schemas compiled, limits held).

use super::place::{Place, shape, usable_id};
use super::shapes::{
    Command, Commands, Count, Decisions, Flag, Given, Items, Name, Operation, RawAssert, RawCase,
    RawDefaults, RawJsonPath, RawPrompted, RawSchema, Sequence, Skip, Strings, Table, Tbl, Text,
    Texts,
};
use super::{
    ArgCheck, Assertion, COMMAND_TIMEOUT_MS, Case, CaseDecision, CaseRef, CommandSpec,
    JsonPathCheck, MAX_COMMAND_TIMEOUT_MS, MAX_NESTING, OperationExpectation, PromptCheck,
    PromptTest, SchemaCheck, SequenceExpectation, Suite, SuiteError, SuiteErrorKind,
};
use crate::assert::JsonPath;
use serde_json::{Map, Value};
use spyglass_protocol::rest::ModelScript;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Builds a suite from an already-parsed document (a JSON body, say): its shape read by
/// serde, then what serde cannot say checked here.
pub fn suite_from_value(file: &str, value: &Value) -> Result<Suite, SuiteError> {
    let at = Place {
        file,
        case: None,
        prefix: String::new(),
    };
    let root = shape(file, value)?;
    let Some(Name(name)) = root.suite else {
        return Err(at.error(
            Some("suite"),
            SuiteErrorKind::Missing,
            "missing: every file names its suite (`suite = \"name\"`)",
        ));
    };
    let defaults = match root.defaults {
        None => Defaults::default(),
        Some(Tbl(raw)) => read_defaults(&at.nested("defaults"), raw)?,
    };
    let (list, key) = match (root.case, root.cases) {
        (Some(_), Some(_)) => {
            return Err(at.invalid(Some("cases"), "use `case` or `cases`, not both"));
        }
        (Some(list), None) => (list.0, "case"),
        (None, Some(list)) => (list.0, "cases"),
        (None, None) => {
            return Err(at.error(
                Some("case"),
                SuiteErrorKind::Missing,
                "missing: a suite has at least one `[[case]]`",
            ));
        }
    };
    if list.is_empty() {
        return Err(at.error(
            Some(key),
            SuiteErrorKind::Missing,
            "a suite has at least one case",
        ));
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::with_capacity(list.len());
    for (index, raw) in list.into_iter().enumerate() {
        let case = read_case(file, index + 1, raw, &defaults)?;
        if let Some(first) = seen.insert(case.id.clone(), index + 1) {
            return Err(SuiteError {
                file: file.to_owned(),
                case: Some(CaseRef::Id(case.id.clone())),
                field: Some("id".into()),
                kind: SuiteErrorKind::Duplicate,
                message: format!("duplicate case id (case #{first} has it too)"),
            });
        }
        out.push(case);
    }
    Ok(Suite {
        name,
        file: file.to_owned(),
        cases: out,
    })
}

#[derive(Debug, Default)]
struct Defaults {
    mocks: Option<Map<String, Value>>,
    models: Vec<ModelScript>,
    servers: Option<Vec<String>>,
    metadata: Map<String, Value>,
    timeout_ms: Option<u64>,
    decisions: BTreeMap<String, CaseDecision>,
}

fn read_defaults(at: &Place<'_>, raw: RawDefaults) -> Result<Defaults, SuiteError> {
    Ok(Defaults {
        mocks: raw.mocks.map(|Table(mocks)| mocks),
        models: at
            .models(raw.model, raw.model_variants)?
            .unwrap_or_default(),
        servers: raw.servers.map(|Strings(servers)| servers),
        metadata: raw
            .metadata
            .map(|Table(metadata)| metadata)
            .unwrap_or_default(),
        timeout_ms: raw.timeout_ms.map(|Count(ms)| ms),
        decisions: raw.decisions.map(|Decisions(d)| d).unwrap_or_default(),
    })
}

fn read_case(
    file: &str,
    index: usize,
    raw: RawCase,
    defaults: &Defaults,
) -> Result<Case, SuiteError> {
    // Name the case by its id when it has a usable one.
    let case = match &raw.id {
        Some(Name(id)) if usable_id(id) => CaseRef::Id(id.clone()),
        _ => CaseRef::Index(index),
    };
    let at = Place {
        file,
        case: Some(case),
        prefix: String::new(),
    };
    let Some(Name(id)) = raw.id else {
        return Err(at.error(
            Some("id"),
            SuiteErrorKind::Missing,
            "missing: every case has an id",
        ));
    };
    spyglass_protocol::glob::check_id(&id)
        .map_err(|err| at.invalid(Some("id"), &err.to_string()))?;
    let Some(Text(input)) = raw.input else {
        return Err(at.error(
            Some("input"),
            SuiteErrorKind::Missing,
            "missing: the user message the case sends",
        ));
    };
    let mocks = match raw.mocks {
        None => defaults.mocks.clone().map(Value::Object),
        Some(Table(own)) => {
            let mut merged = defaults.mocks.clone().unwrap_or_default();
            merged.extend(own);
            Some(Value::Object(merged))
        }
    };
    let models = at
        .models(raw.model, raw.model_variants)?
        .unwrap_or_else(|| defaults.models.clone());
    let servers = match raw.servers {
        Some(Strings(servers)) => servers,
        None => defaults.servers.clone().unwrap_or_default(),
    };
    let mut metadata = defaults.metadata.clone();
    if let Some(Table(own)) = raw.metadata {
        metadata.extend(own);
    }
    let skip = raw.skip.and_then(|Skip(reason)| reason);
    let timeout_ms = raw.timeout_ms.map(|Count(ms)| ms).or(defaults.timeout_ms);
    if timeout_ms == Some(0) {
        return Err(at.invalid(Some("timeout_ms"), "must be greater than 0"));
    }
    let mut decisions = defaults.decisions.clone();
    if let Some(Decisions(own)) = raw.decisions {
        decisions.extend(own);
    }
    let assertions = match raw.assert {
        None => Vec::new(),
        Some(Tbl(assert)) => read_assertions(&at.nested("assert"), assert, 0)?,
    };
    Ok(Case {
        id,
        input,
        mocks,
        models,
        servers,
        metadata,
        skip,
        timeout_ms,
        assertions,
        decisions,
    })
}

fn read_assertions(
    at: &Place<'_>,
    raw: RawAssert,
    depth: usize,
) -> Result<Vec<Assertion>, SuiteError> {
    let mut out = Vec::new();
    for (kind, given) in raw.kinds() {
        out.push(match given {
            None => continue,
            Some(Given::Ready(assertion)) => assertion,
            Some(Given::Patterns(patterns)) => read_regexes(at, kind, &patterns)?,
            Some(Given::Operations(items)) => Assertion::OperationCalled(
                items
                    .fields(kind)
                    .map(|(field, op)| read_operation(&at.nested(&field), op))
                    .collect::<Result<_, _>>()?,
            ),
            Some(Given::Sequence(sequence)) => read_sequence(at, kind, sequence)?,
            Some(Given::JsonPath(items)) => read_json_paths(at, kind, items)?,
            Some(Given::JsonSchema(items)) => read_schemas(at, kind, items)?,
            Some(Given::Prompted(items)) => read_prompted(at, kind, items)?,
            Some(Given::All(children)) => {
                Assertion::All(read_children(at, kind, children, depth + 1)?)
            }
            Some(Given::Any(children)) => {
                Assertion::Any(read_children(at, kind, children, depth + 1)?)
            }
            Some(Given::Command(commands)) => read_commands(at, kind, commands)?,
        });
    }
    Ok(out)
}

fn read_operation(at: &Place<'_>, op: Operation) -> Result<OperationExpectation, SuiteError> {
    let raw = match op {
        Operation::Name(name) => {
            return Ok(OperationExpectation {
                name,
                times: None,
                args: Vec::new(),
            });
        }
        Operation::Table(raw) => raw,
    };
    let Some(Name(name)) = raw.name else {
        return Err(at.error(
            Some("name"),
            SuiteErrorKind::Missing,
            "missing: the operation's name",
        ));
    };
    let times = raw
        .times
        .map(|Count(t)| u32::try_from(t).map_err(|_| at.invalid(Some("times"), "too large")))
        .transpose()?;
    let args = match raw.args {
        None => Vec::new(),
        Some(Table(args)) => read_args(at, args)?,
    };
    Ok(OperationExpectation { name, times, args })
}

/// `regex = "a"` or a list of patterns, each compiled so a typo is the suite's error.
fn read_regexes(at: &Place<'_>, kind: &str, patterns: &[String]) -> Result<Assertion, SuiteError> {
    let mut compiled = Vec::with_capacity(patterns.len());
    for pattern in patterns {
        let regex = regex::Regex::new(pattern).map_err(|err| {
            // The regex crate's message spans lines with a caret diagram; keep
            // it on one line so it reads after the file/case/field prefix.
            at.invalid(
                Some(kind),
                &format!("invalid regex {pattern:?}: {}", regex_detail(&err)),
            )
        })?;
        compiled.push(regex);
    }
    Ok(Assertion::Regex(compiled))
}

/// `json_path = { path = "$.id", equals = "cus_1" }` or a list of them.
fn read_json_paths(
    at: &Place<'_>,
    kind: &str,
    items: Items<Tbl<RawJsonPath>>,
) -> Result<Assertion, SuiteError> {
    let mut checks = Vec::new();
    for (field, Tbl(raw)) in items.fields(kind) {
        let inner = at.nested(&field);
        let Some(Text(path_text)) = raw.path else {
            return Err(inner.error(
                Some("path"),
                SuiteErrorKind::Missing,
                "missing: a path like \"$.id\"",
            ));
        };
        let path = JsonPath::parse(&path_text)
            .map_err(|err| inner.invalid(Some("path"), &err.to_string()))?;
        let equals = raw.equals.ok_or_else(|| {
            inner.error(
                Some("equals"),
                SuiteErrorKind::Missing,
                "missing: the value expected at the path",
            )
        })?;
        checks.push(JsonPathCheck { path, equals });
    }
    Ok(Assertion::JsonPath(checks))
}

/// `all = [ { contains = "a" }, { any = [...] } ]`: each child one assertion kind, read
/// like `[case.assert]` (so they nest), at most [`MAX_NESTING`] deep.
fn read_children(
    at: &Place<'_>,
    kind: &str,
    children: Vec<RawAssert>,
    depth: usize,
) -> Result<Vec<Assertion>, SuiteError> {
    if depth > MAX_NESTING {
        return Err(at.invalid(
            Some(kind),
            &format!("`all` / `any` nest {depth} deep here; the limit is {MAX_NESTING}"),
        ));
    }
    let mut out = Vec::with_capacity(children.len());
    for (i, child) in children.into_iter().enumerate() {
        let inner = at.nested(&format!("{kind}[{i}]"));
        let mut read = read_assertions(&inner, child, depth)?;
        if read.len() != 1 {
            return Err(inner.invalid(
                None,
                &format!(
                    "a child is one assertion kind, this has {}; give each its own table (the list keeps their order)",
                    read.len()
                ),
            ));
        }
        out.extend(read.pop());
    }
    Ok(out)
}

/// `command = ["python3", "check.py"]`, `{ argv = [...], timeout_ms = 5000 }`, or a list
/// of such tables (argv checked by its shape). The program runs in the suite file's
/// directory (when the file name has one), so a checker beside the suite is named by its
/// own file name.
fn read_commands(at: &Place<'_>, kind: &str, commands: Commands) -> Result<Assertion, SuiteError> {
    let dir = Path::new(at.file)
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(Path::to_path_buf);
    let items: Vec<(String, Command)> = match commands {
        Commands::Argv(argv) => vec![(kind.to_owned(), Command::Argv(argv))],
        Commands::Each(items) => items.fields(kind).collect(),
    };
    let mut specs = Vec::with_capacity(items.len());
    for (field, command) in items {
        let inner = at.nested(&field);
        let (argv, timeout) = match command {
            Command::Argv(argv) => (argv, None),
            Command::Table(raw) => {
                let Some(argv) = raw.argv else {
                    return Err(inner.error(
                        Some("argv"),
                        SuiteErrorKind::Missing,
                        "missing: the program and its arguments (`argv = [\"python3\", \"check.py\"]`)",
                    ));
                };
                (argv.0, raw.timeout_ms)
            }
        };
        let timeout_ms = match timeout {
            None => COMMAND_TIMEOUT_MS,
            Some(Count(ms)) => {
                if ms == 0 || ms > MAX_COMMAND_TIMEOUT_MS {
                    return Err(inner.invalid(
                        Some("timeout_ms"),
                        &format!("{ms} is out of range: 1 to {MAX_COMMAND_TIMEOUT_MS} ms"),
                    ));
                }
                ms
            }
        };
        specs.push(CommandSpec {
            argv,
            timeout_ms,
            dir: dir.clone(),
        });
    }
    Ok(Assertion::Command(specs))
}

/// `args = { value = 5, "$.customer.id" = "cus_1" }`: checks on a call's arguments.
fn read_args(at: &Place<'_>, table: Map<String, Value>) -> Result<Vec<ArgCheck>, SuiteError> {
    if table.is_empty() {
        return Err(at.invalid(
            Some("args"),
            "the table is empty: name what the arguments hold",
        ));
    }
    let mut checks = Vec::with_capacity(table.len());
    for (key, expected) in table {
        let path = if key.starts_with('$') {
            Some(
                JsonPath::parse(&key)
                    .map_err(|err| at.invalid(Some(&format!("args.{key}")), &err.to_string()))?,
            )
        } else {
            None
        };
        checks.push(ArgCheck {
            key,
            path,
            expected,
        });
    }
    Ok(checks)
}

/// `sequence = ["a", "b"]` or `sequence = { tools = [...], gaps = false }`.
fn read_sequence(at: &Place<'_>, kind: &str, sequence: Sequence) -> Result<Assertion, SuiteError> {
    let (tools, gaps) = match sequence {
        Sequence::Table(raw) => {
            let Some(Texts(tools)) = raw.tools else {
                return Err(at.nested(kind).error(
                    Some("tools"),
                    SuiteErrorKind::Missing,
                    "missing: the operations in the order they must be called",
                ));
            };
            (tools, raw.gaps.is_none_or(|Flag(gaps)| gaps))
        }
        Sequence::Tools(tools) => (tools, true),
    };
    if tools.len() < 2 {
        return Err(at.invalid(
            Some(kind),
            "a sequence names at least two operations (one is operation_called)",
        ));
    }
    Ok(Assertion::Sequence(SequenceExpectation { tools, gaps }))
}

/// The regex crate's message spans lines with a caret diagram; its last line reads after
/// the file/case/field prefix.
fn regex_detail(err: &regex::Error) -> String {
    err.to_string()
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .trim_start_matches("error: ")
        .to_owned()
}

/// `prompted = { step = 1, contains = "pay_1" }` (or `matches = "regex"`, or
/// `path = "$[2].content.id", equals = ...`), or a list of them: one test per item.
fn read_prompted(
    at: &Place<'_>,
    kind: &str,
    items: Items<Tbl<RawPrompted>>,
) -> Result<Assertion, SuiteError> {
    let mut checks = Vec::new();
    for (field, Tbl(raw)) in items.fields(kind) {
        let inner = at.nested(&field);
        let Some(Count(step)) = raw.step else {
            return Err(inner.error(
                Some("step"),
                SuiteErrorKind::Missing,
                "missing: the model call (zero-based, as fail_on_step counts) whose prompt to check",
            ));
        };
        let step = u32::try_from(step).map_err(|_| inner.invalid(Some("step"), "too large"))?;
        let given = [
            raw.contains.is_some(),
            raw.matches.is_some(),
            raw.path.is_some(),
        ]
        .iter()
        .filter(|g| **g)
        .count();
        if given != 1 {
            return Err(inner.invalid(
                None,
                "give one of `contains`, `matches` or `path` (with `equals`); a list of items checks more",
            ));
        }
        let has_equals = raw.equals.is_some();
        let test = if let Some(Text(text)) = raw.contains {
            PromptTest::Contains(text)
        } else if let Some(Text(pattern)) = raw.matches {
            let regex = regex::Regex::new(&pattern).map_err(|err| {
                inner.invalid(
                    Some("matches"),
                    &format!("invalid regex {pattern:?}: {}", regex_detail(&err)),
                )
            })?;
            PromptTest::Matches(regex)
        } else {
            let text = raw.path.map(|Text(path)| path).unwrap_or_default();
            let path = JsonPath::parse(&text)
                .map_err(|err| inner.invalid(Some("path"), &err.to_string()))?;
            let equals = raw.equals.ok_or_else(|| {
                inner.error(
                    Some("equals"),
                    SuiteErrorKind::Missing,
                    "missing: the value expected at the path",
                )
            })?;
            PromptTest::Path { path, equals }
        };
        if has_equals && !matches!(test, PromptTest::Path { .. }) {
            return Err(inner.invalid(Some("equals"), "`equals` goes with `path`"));
        }
        checks.push(PromptCheck { step, test });
    }
    Ok(Assertion::Prompted(checks))
}

/// `json_schema = { schema = {...}, tool = "server/tool" }` or a list of them; the schema
/// must compile, so a typo in it is the suite's error, not a failing case.
fn read_schemas(
    at: &Place<'_>,
    kind: &str,
    items: Items<Tbl<RawSchema>>,
) -> Result<Assertion, SuiteError> {
    let mut checks = Vec::new();
    for (field, Tbl(raw)) in items.fields(kind) {
        let inner = at.nested(&field);
        let Some(schema) = raw.schema else {
            return Err(inner.error(
                Some("schema"),
                SuiteErrorKind::Missing,
                "missing: a JSON Schema (e.g. { type = \"object\", required = [\"id\"] })",
            ));
        };
        if let Err(err) = jsonschema::validator_for(&schema) {
            return Err(inner.invalid(Some("schema"), &format!("not a valid JSON Schema: {err}")));
        }
        let tool = raw.tool.map(|Name(tool)| tool);
        checks.push(SchemaCheck { tool, schema });
    }
    Ok(Assertion::JsonSchema(checks))
}
