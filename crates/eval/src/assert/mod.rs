//! Judging a case: its assertions against what the case produced (`CaseRun`), into a
//! `CaseResult` whose every assertion keeps what it expected and what it saw. The JSON
//! path language of `json_path` (`$.a.b[0]`) is `path`, re-exported here.

mod path;

pub use path::{JsonPath, JsonPathError, PathSegment};

use super::script::{MESSAGE_TEXT_BYTES, PROMPT_BYTES, PromptRecord};
use super::suite::{ArgCheck, Assertion, Case, NoEnvelope, PromptCheck, PromptTest, SchemaCheck};
use serde_json::{Map, Value, json};
use spyglass_protocol::RawJson;
use spyglass_protocol::events::AssertionStatus;
use spyglass_protocol::events::{
    AgentEvalCompleted, AssertionResult, EvalScope, EvalStatus, Tokens,
};
use spyglass_protocol::rest::ToolCallRecord;
use std::collections::BTreeMap;

/// What one attempt of a case produced.
#[derive(Debug, Clone, Default)]
pub struct CaseRun {
    /// The loop's final text; `None` when it produced none.
    pub output: Option<String>,
    pub tool_calls: Vec<ToolCallRecord>,
    pub tokens: Tokens,
    /// The loop's model steps, in order (what a `command` checker is told of them).
    pub steps: Vec<spyglass_protocol::events::Step>,
    /// Why the loop produced no result (model failed on a step, engine error, timeout).
    pub error: Option<String>,
    /// Fractional milliseconds: a mocked run takes microseconds.
    pub duration_ms: f64,
    /// What the scripted model received at each model call (`prompted` reads these).
    pub prompts: Vec<super::script::PromptRecord>,
    /// What the run cost in US dollars, as the runtime priced it; `None` when it could
    /// not, with `cost_missing` saying why (`max_cost` then errors with it).
    pub cost: Option<f64>,
    pub cost_missing: Option<String>,
}

/// The reason of a case whose run had a call held for approval.
pub const HELD: &str = "held for approval";

/// The judged outcome of one attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    pub status: EvalStatus,
    pub assertions: Vec<AssertionResult>,
    /// Why it failed, errored or was skipped.
    pub reason: Option<String>,
    pub tokens: Tokens,
    pub duration_ms: f64,
    /// The run's cost in dollars; `None` when unknown (the event then writes 0, as seed
    /// 001's `cost` is a number).
    pub cost: Option<f64>,
}

impl CaseResult {
    /// The first assertion that did not hold.
    pub fn first_failure(&self) -> Option<&AssertionResult> {
        self.assertions.iter().find(|a| !a.pass)
    }

    /// The `agent.eval.completed` body for this result (no run id or attempt yet).
    pub fn to_event(&self, suite: &str, case: &str) -> AgentEvalCompleted {
        let total = self.assertions.len();
        let passed = self.assertions.iter().filter(|a| a.pass).count();
        AgentEvalCompleted {
            suite: suite.to_owned(),
            case: case.to_owned(),
            status: self.status,
            pass: self.status == EvalStatus::Passed,
            score: (total > 0).then(|| passed as f64 / total as f64),
            reason: self.reason.clone(),
            tokens: self.tokens,
            cost: self.cost.unwrap_or(0.0),
            duration: self.duration_ms,
            run_id: None,
            assertions: self.assertions.clone(),
            attempt: None,
            scope: EvalScope::Suite,
        }
    }
}

/// The result of a case the file marks `skip`.
pub fn skipped(case: &Case) -> CaseResult {
    CaseResult {
        status: EvalStatus::Skipped,
        assertions: Vec::new(),
        reason: Some(case.skip.clone().unwrap_or_else(|| "skipped".to_owned())),
        tokens: Tokens::default(),
        duration_ms: 0.0,
        cost: None,
    }
}

/// Judges one attempt: error when it produced no result, else passed or failed by its
/// assertions.
pub fn evaluate(case: &Case, run: &CaseRun) -> CaseResult {
    if case.skip.is_some() {
        return skipped(case);
    }
    let base = |status, assertions, reason| CaseResult {
        status,
        assertions,
        reason,
        tokens: run.tokens,
        duration_ms: run.duration_ms,
        cost: run.cost,
    };
    if let Some(error) = &run.error {
        return base(EvalStatus::Error, Vec::new(), Some(error.clone()));
    }
    // A call held for approval suspends the agent (agent test harnesses' hibernation): whatever text
    // followed, the case did not run to its end, so it is no pass and says why.
    if run
        .tool_calls
        .iter()
        .any(|call| call.error_code.as_deref() == Some("approval_required"))
    {
        return base(EvalStatus::Error, Vec::new(), Some(HELD.to_owned()));
    }
    let Some(output) = &run.output else {
        return base(
            EvalStatus::Error,
            Vec::new(),
            Some("the case produced no final output".to_owned()),
        );
    };
    let facts = Facts::new(output, run);
    let mut results = Vec::new();
    for assertion in &case.assertions {
        check(assertion, &facts, &mut results);
    }
    // An assertion that could not be judged leaves the case unjudged: an error, not a
    // pass nor a fail, whatever the others said.
    if let Some(errored) = results
        .iter()
        .find(|a| a.status == Some(AssertionStatus::Errored))
    {
        let reason = errored.message.clone();
        return base(EvalStatus::Error, results, reason);
    }
    match results.iter().find(|a| !a.pass) {
        Some(failure) => {
            let reason = failure
                .message
                .clone()
                .unwrap_or_else(|| format!("{} did not hold", failure.kind));
            base(EvalStatus::Failed, results, Some(reason))
        }
        None => base(EvalStatus::Passed, results, None),
    }
}

/// What the assertions look at, computed once per run.
pub(crate) struct Facts<'a> {
    output: &'a str,
    /// Every call in order: its canonical name and its arguments.
    ordered: Vec<(String, &'a Value)>,
    /// Called operations (canonical `server/tool` names) with their counts.
    calls: BTreeMap<String, u32>,
    /// Envelope codes the calls returned, in call order.
    codes: Vec<String>,
    tokens: Tokens,
    prompts: &'a [PromptRecord],
    cost: Option<f64>,
    cost_missing: Option<&'a str>,
}

impl<'a> Facts<'a> {
    pub(crate) fn new(output: &'a str, run: &'a CaseRun) -> Self {
        let mut calls = BTreeMap::new();
        let mut ordered = Vec::with_capacity(run.tool_calls.len());
        for call in &run.tool_calls {
            let name = canonical_name(call);
            *calls.entry(name.clone()).or_insert(0) += 1;
            ordered.push((name, &call.input));
        }
        let codes = run
            .tool_calls
            .iter()
            .filter_map(|call| call.error_code.clone())
            .collect();
        Facts {
            output,
            ordered,
            calls,
            codes,
            tokens: run.tokens,
            prompts: &run.prompts,
            cost: run.cost,
            cost_missing: run.cost_missing.as_deref(),
        }
    }

    fn calls_json(&self) -> Value {
        Value::Object(
            self.calls
                .iter()
                .map(|(name, count)| (name.clone(), json!(count)))
                .collect::<Map<_, _>>(),
        )
    }

    /// The calls of `name` (a bare tool name matches any server's) whose arguments hold
    /// every check, in order.
    fn matching<'s>(
        &'s self,
        name: &'s str,
        args: &'s [ArgCheck],
    ) -> impl Iterator<Item = &'s Value> + 's {
        self.ordered
            .iter()
            .filter(move |(called, _)| names_match(name, called))
            .filter(move |(_, input)| args.iter().all(|check| check.holds(input)))
            .map(|(_, input)| *input)
    }

    /// The called names in order.
    fn names(&self) -> Vec<&str> {
        self.ordered.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// Times `name` was called; a bare tool name (no server) matches any server's.
    fn count(&self, name: &str) -> u32 {
        if name.contains('/') {
            return self.calls.get(name).copied().unwrap_or(0);
        }
        self.calls
            .iter()
            .filter(|(called, _)| called.rsplit('/').next() == Some(name))
            .map(|(_, count)| count)
            .sum()
    }
}

/// Whether an expected operation name means this called one: a bare tool name (no
/// server) matches any server's.
fn names_match(expected: &str, called: &str) -> bool {
    if expected.contains('/') {
        expected == called
    } else {
        called.rsplit('/').next() == Some(expected)
    }
}

impl ArgCheck {
    /// Whether the call's arguments hold this check: the value at the key (or path) has
    /// everything the expected value says (`subset`).
    fn holds(&self, input: &Value) -> bool {
        let found = match &self.path {
            Some(path) => path.lookup(input),
            None => input.as_object().and_then(|o| o.get(&self.key)),
        };
        found.is_some_and(|found| subset(&self.expected, found))
    }
}

/// Whether `actual` holds everything `expected` says: objects by their keys (extra keys in
/// `actual` allowed, recursively), arrays element by element at the same length, other
/// values equal (numbers by value, `5` equals `5.0`).
pub fn subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => want
            .iter()
            .all(|(key, value)| have.get(key).is_some_and(|found| subset(value, found))),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| subset(w, h))
        }
        _ => json_equal(expected, actual),
    }
}

/// Whether `want` appears in `called` in order: anywhere with `gaps`, else as a run of
/// consecutive calls.
fn in_order(want: &[String], called: &[&str], gaps: bool) -> bool {
    if gaps {
        let mut rest = called.iter();
        want.iter()
            .all(|name| rest.any(|called| names_match(name, called)))
    } else {
        called.windows(want.len()).any(|window| {
            window
                .iter()
                .zip(want)
                .all(|(called, name)| names_match(name, called))
        })
    }
}

/// `server/tool`, whether the record carries the server in its name or beside it.
fn canonical_name(call: &ToolCallRecord) -> String {
    if call.tool_name.contains('/') || call.server_id.is_empty() {
        call.tool_name.clone()
    } else {
        format!("{}/{}", call.server_id, call.tool_name)
    }
}

/// One assertion's result, its expected and actual kept as JSON text.
pub(crate) fn result(
    kind: &str,
    pass: bool,
    expected: Value,
    actual: Value,
    message: Option<String>,
) -> AssertionResult {
    AssertionResult {
        kind: kind.to_owned(),
        pass,
        expected: RawJson::from(expected),
        actual: RawJson::from(actual),
        message,
        status: None,
        children: Vec::new(),
    }
}

/// One `json_schema` check: the final text parsed as JSON, or every call of `tool`'s
/// arguments, validated; `actual` is what was checked, the message the first errors.
fn schema_result(check: &SchemaCheck, facts: &Facts<'_>, text: &Value) -> AssertionResult {
    let expected = match &check.tool {
        Some(tool) => json!({"tool": tool, "schema": check.schema}),
        None => json!({"schema": check.schema}),
    };
    let fail = |actual: Value, message: String| {
        result(
            "json_schema",
            false,
            expected.clone(),
            actual,
            Some(message),
        )
    };
    let validator = match jsonschema::validator_for(&check.schema) {
        Ok(validator) => validator,
        // Compiled when the suite was read; a failure here is still a failure, never a pass.
        Err(err) => {
            return fail(
                Value::Null,
                format!("json_schema: the schema does not compile: {err}"),
            );
        }
    };
    let errors = |instance: &Value| -> Vec<String> {
        validator
            .iter_errors(instance)
            .take(3)
            .map(|err| {
                let at = err.instance_path().to_string();
                if at.is_empty() {
                    err.to_string()
                } else {
                    format!("{at}: {err}")
                }
            })
            .collect()
    };
    match &check.tool {
        None => match parse_output_json(facts.output) {
            Err(err) => fail(
                text.clone(),
                format!("json_schema: the output is not JSON ({err})"),
            ),
            Ok(document) => {
                let found = errors(&document);
                let pass = found.is_empty();
                let message = (!pass).then(|| format!("json_schema: {}", found.join("; ")));
                result("json_schema", pass, expected.clone(), document, message)
            }
        },
        Some(tool) => {
            let calls: Vec<&Value> = facts.matching(tool, &[]).collect();
            if calls.is_empty() {
                return fail(json!([]), format!("json_schema: {tool} was not called"));
            }
            let found: Vec<String> = calls
                .iter()
                .enumerate()
                .flat_map(|(i, input)| {
                    errors(input)
                        .into_iter()
                        .map(move |e| format!("call {}: {e}", i + 1))
                })
                .collect();
            let pass = found.is_empty();
            let message = (!pass).then(|| format!("json_schema: {}", found.join("; ")));
            result("json_schema", pass, expected.clone(), json!(calls), message)
        }
    }
}

/// One `prompted` check on the prompt of its model call; `actual` is the prompt's text
/// (or the value at the path), the message says what was missing.
fn prompt_result(check: &PromptCheck, prompts: &[PromptRecord]) -> AssertionResult {
    let step = check.step;
    let expected = match &check.test {
        PromptTest::Contains(text) => json!({"step": step, "contains": text}),
        PromptTest::Matches(regex) => json!({"step": step, "matches": regex.as_str()}),
        PromptTest::Path { path, equals } => {
            json!({"step": step, "path": path.to_string(), "equals": equals})
        }
    };
    let Some(record) = prompts.iter().find(|p| p.call == step) else {
        return result(
            "prompted",
            false,
            expected,
            Value::Null,
            Some(format!(
                "prompted: the model was called {} time(s); there is no model call {step}",
                prompts.len()
            )),
        );
    };
    let cut = if record.cut {
        format!(
            " (the recorded prompt was cut: a long text keeps {} KiB, a prompt {} KiB)",
            MESSAGE_TEXT_BYTES / 1024,
            PROMPT_BYTES / 1024
        )
    } else {
        String::new()
    };
    let (pass, actual, message) = match &check.test {
        PromptTest::Contains(needle) => {
            let text = record.text();
            let pass = text.contains(needle.as_str());
            let message = format!("prompted: model call {step}'s prompt lacks {needle:?}{cut}");
            (pass, Value::String(text), message)
        }
        PromptTest::Matches(regex) => {
            let text = record.text();
            let pass = regex.is_match(&text);
            let message = format!(
                "prompted: /{}/ does not match model call {step}'s prompt{cut}",
                regex.as_str()
            );
            (pass, Value::String(text), message)
        }
        PromptTest::Path { path, equals } => {
            let messages = Value::Array(record.messages.clone());
            match path.lookup(&messages) {
                None => (
                    false,
                    Value::Null,
                    format!("prompted: nothing at {path} in model call {step}'s messages{cut}"),
                ),
                Some(found) => (
                    json_equal(found, equals),
                    found.clone(),
                    format!(
                        "prompted: {path} of model call {step}'s messages is {found}, expected {equals}"
                    ),
                ),
            }
        }
    };
    result(
        "prompted",
        pass,
        expected,
        actual,
        (!pass).then_some(message),
    )
}

/// The rule assertions' results, one per item of a list kind; the kinds judged later
/// (models, compositions, programs) add nothing here.
pub(crate) fn check(assertion: &Assertion, facts: &Facts<'_>, out: &mut Vec<AssertionResult>) {
    let text = Value::String(facts.output.to_owned());
    match assertion {
        Assertion::Contains(needles) => {
            for needle in needles {
                let pass = facts.output.contains(needle.as_str());
                let message = (!pass).then(|| format!("contains: {needle:?} not found"));
                out.push(result(
                    "contains",
                    pass,
                    json!(needle),
                    text.clone(),
                    message,
                ));
            }
        }
        Assertion::Equals(expected) => {
            let pass = facts.output == expected;
            let message = (!pass).then(|| "equals: the output differs".to_owned());
            out.push(result("equals", pass, json!(expected), text, message));
        }
        Assertion::Regex(patterns) => {
            for regex in patterns {
                let pass = regex.is_match(facts.output);
                let message =
                    (!pass).then(|| format!("regex: /{}/ does not match", regex.as_str()));
                out.push(result(
                    "regex",
                    pass,
                    json!(regex.as_str()),
                    text.clone(),
                    message,
                ));
            }
        }
        Assertion::OperationCalled(expectations) => {
            for expectation in expectations.iter().filter(|e| !e.args.is_empty()) {
                let count = facts.matching(&expectation.name, &expectation.args).count();
                let count = u32::try_from(count).unwrap_or(u32::MAX);
                let args: Map<String, Value> = expectation
                    .args
                    .iter()
                    .map(|check| (check.key.clone(), check.expected.clone()))
                    .collect();
                let mut expected = json!({"name": expectation.name, "args": args});
                let pass = match expectation.times {
                    None => count > 0,
                    Some(times) => {
                        expected["times"] = json!(times);
                        count == times
                    }
                };
                let sent: Vec<&Value> = facts
                    .ordered
                    .iter()
                    .filter(|(called, _)| names_match(&expectation.name, called))
                    .map(|(_, input)| *input)
                    .collect();
                let message = (!pass).then(|| match expectation.times {
                    None if sent.is_empty() => {
                        format!("operation_called: {} was not called", expectation.name)
                    }
                    None => format!(
                        "operation_called: no call of {} had those arguments ({} call(s))",
                        expectation.name,
                        sent.len()
                    ),
                    Some(times) => format!(
                        "operation_called: {} called {count} time(s) with those arguments, expected {times}",
                        expectation.name
                    ),
                });
                out.push(result(
                    "operation_called",
                    pass,
                    expected,
                    json!({ "calls with their arguments": sent }),
                    message,
                ));
            }
            for expectation in expectations.iter().filter(|e| e.args.is_empty()) {
                let count = facts.count(&expectation.name);
                let (pass, expected, message) = match expectation.times {
                    None => (
                        count > 0,
                        json!(expectation.name),
                        format!("operation_called: {} was not called", expectation.name),
                    ),
                    Some(times) => (
                        count == times,
                        json!({"name": expectation.name, "times": times}),
                        format!(
                            "operation_called: {} called {count} time(s), expected {times}",
                            expectation.name
                        ),
                    ),
                };
                out.push(result(
                    "operation_called",
                    pass,
                    expected,
                    facts.calls_json(),
                    (!pass).then_some(message),
                ));
            }
        }
        Assertion::Sequence(sequence) => {
            let called = facts.names();
            let pass = in_order(&sequence.tools, &called, sequence.gaps);
            let message = (!pass).then(|| {
                format!(
                    "sequence: {} not called in this order{}",
                    sequence.tools.join(" → "),
                    if sequence.gaps {
                        ""
                    } else {
                        " one after another"
                    }
                )
            });
            out.push(result(
                "sequence",
                pass,
                json!({"tools": sequence.tools, "gaps": sequence.gaps}),
                json!(called),
                message,
            ));
        }
        Assertion::NotCalled(names) => {
            for name in names {
                let count = facts.count(name);
                let pass = count == 0;
                let message =
                    (!pass).then(|| format!("not_called: {name} was called {count} time(s)"));
                out.push(result(
                    "not_called",
                    pass,
                    json!(name),
                    facts.calls_json(),
                    message,
                ));
            }
        }
        Assertion::JsonSchema(checks) => {
            for check in checks {
                out.push(schema_result(check, facts, &text));
            }
        }
        Assertion::Prompted(checks) => {
            for check in checks {
                out.push(prompt_result(check, facts.prompts));
            }
        }
        Assertion::Envelope(codes) => {
            for code in codes {
                let pass = facts.codes.iter().any(|seen| seen == code);
                let message = (!pass).then(|| format!("envelope: no call returned {code}"));
                out.push(result(
                    "envelope",
                    pass,
                    json!(code),
                    json!(facts.codes),
                    message,
                ));
            }
        }
        Assertion::NoEnvelope(forbidden) => {
            let (pass, expected, message) = match forbidden {
                NoEnvelope::Any => (
                    facts.codes.is_empty(),
                    json!("no envelope"),
                    format!("no_envelope: calls returned {}", facts.codes.join(", ")),
                ),
                NoEnvelope::Codes(codes) => {
                    let hit: Vec<&String> = facts
                        .codes
                        .iter()
                        .filter(|seen| codes.contains(seen))
                        .collect();
                    let names: Vec<&str> = hit.iter().map(|s| s.as_str()).collect();
                    (
                        hit.is_empty(),
                        json!(codes),
                        format!("no_envelope: calls returned {}", names.join(", ")),
                    )
                }
            };
            out.push(result(
                "no_envelope",
                pass,
                expected,
                json!(facts.codes),
                (!pass).then_some(message),
            ));
        }
        Assertion::JsonPath(checks) => {
            let parsed = parse_output_json(facts.output);
            for check in checks {
                let expected = json!({"path": check.path.to_string(), "equals": check.equals});
                let (pass, actual, message) = match &parsed {
                    Err(err) => (
                        false,
                        text.clone(),
                        Some(format!("json_path: the output is not JSON ({err})")),
                    ),
                    Ok(document) => match check.path.lookup(document) {
                        None => (
                            false,
                            Value::Null,
                            Some(format!("json_path: nothing at {}", check.path)),
                        ),
                        Some(found) => {
                            let pass = json_equal(found, &check.equals);
                            let message = (!pass).then(|| {
                                format!(
                                    "json_path: {} is {found}, expected {}",
                                    check.path, check.equals
                                )
                            });
                            (pass, found.clone(), message)
                        }
                    },
                };
                out.push(result("json_path", pass, expected, actual, message));
            }
        }
        Assertion::MaxTokens(max) => {
            let used = facts.tokens.total;
            let pass = used <= *max;
            let message = (!pass).then(|| format!("max_tokens: used {used}, limit {max}"));
            out.push(result("max_tokens", pass, json!(max), json!(used), message));
        }
        // A model answers these (`eval::judge::apply`, after the rules), and compositions
        // and programs come last (`eval::compose::apply`).
        Assertion::LlmJudge(_)
        | Assertion::SemanticMatch(_)
        | Assertion::All(_)
        | Assertion::Any(_)
        | Assertion::Command(_) => {}
        Assertion::MaxCost(max) => out.push(match facts.cost {
            Some(cost) => {
                let pass = cost <= *max;
                let message = (!pass)
                    .then(|| format!("max_cost: cost {}, limit {}", dollars(cost), dollars(*max)));
                result("max_cost", pass, json!(max), json!(cost), message)
            }
            // Unknown is not cheap: the case cannot be judged on cost, and says why.
            None => AssertionResult {
                status: Some(AssertionStatus::Errored),
                ..result(
                    "max_cost",
                    false,
                    json!(max),
                    Value::Null,
                    Some(format!(
                        "max_cost: cannot be checked: {}",
                        facts.cost_missing.unwrap_or("the run's cost is not known")
                    )),
                )
            },
        }),
    }
}

/// Dollars to six significant digits, trailing zeros dropped: `$0.0036`, never
/// `$0.0036000000000000003`.
fn dollars(amount: f64) -> String {
    if amount == 0.0 || !amount.is_finite() {
        return format!("${amount}");
    }
    let decimals = (5.0 - amount.abs().log10().floor()).clamp(0.0, 15.0) as usize;
    let text = format!("{amount:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("${text}")
}

/// The output as JSON, allowing the `` ```json `` fences models like to wrap it in.
fn parse_output_json(output: &str) -> Result<Value, serde_json::Error> {
    let trimmed = output.trim();
    let unfenced = trimmed
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
        .map_or(trimmed, |inner| {
            inner
                .trim_start_matches(|c: char| c.is_ascii_alphanumeric())
                .trim()
        });
    serde_json::from_str(unfenced)
}

/// JSON equality where `5` and `5.0` are the same number.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) if x.is_finite() && y.is_finite() => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, value)| y.get(key).is_some_and(|other| json_equal(value, other)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests;
