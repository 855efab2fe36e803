//! promptfoo results JSON (`promptfoo eval -o results.json`): one result per test case,
//! prompt and provider, with its assertion results, errors, token usage and cost.

use super::{Parsed, StatusCounts, bounded, text_json};
use crate::protocol::events::{AgentEvalCompleted, AssertionResult, EvalStatus, Tokens};
use crate::protocol::json::RawJson;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;

#[derive(Deserialize, Default)]
#[serde(default)]
struct File {
    results: Option<Results>,
    config: Config,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Config {
    description: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Results {
    timestamp: Option<String>,
    /// Kept raw so one unreadable row is skipped, not the file refused.
    #[expect(clippy::struct_field_names, reason = "promptfoo's own field name")]
    results: Option<Vec<Box<RawValue>>>,
    stats: Option<Stats>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Stats {
    successes: u64,
    failures: u64,
    errors: u64,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Row {
    success: bool,
    score: Option<f64>,
    error: Option<String>,
    failure_reason: Option<u8>,
    latency_ms: Option<f64>,
    cost: Option<f64>,
    prompt_idx: Option<u64>,
    test_idx: Option<u64>,
    prompt: Prompt,
    provider: Provider,
    test_case: TestCase,
    vars: Option<BTreeMap<String, Value>>,
    response: Option<Response>,
    token_usage: Option<Usage>,
    grading_result: Option<Grading>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Prompt {
    label: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Provider {
    id: Option<String>,
    label: Option<String>,
}

impl Provider {
    fn name(&self) -> String {
        self.label
            .clone()
            .filter(|l| !l.is_empty())
            .or_else(|| self.id.clone())
            .unwrap_or_default()
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TestCase {
    description: Option<String>,
    vars: Option<BTreeMap<String, Value>>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Response {
    output: Option<Value>,
    token_usage: Option<Usage>,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(default)]
struct Usage {
    prompt: Option<u64>,
    completion: Option<u64>,
    total: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Grading {
    reason: Option<String>,
    component_results: Vec<Component>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Component {
    pass: bool,
    score: Option<f64>,
    reason: Option<String>,
    assertion: Option<Assertion>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Assertion {
    #[serde(rename = "type")]
    kind: Option<String>,
    value: Option<Value>,
}

/// promptfoo's `failureReason`: 1 an assertion failed, 2 the provider or the run errored.
const FAILURE_ERROR: u8 = 2;

fn json_text(value: &Value) -> RawJson {
    match value {
        Value::String(s) => text_json(s),
        other => {
            let text = other.to_string();
            if text.len() <= super::MAX_TEXT_BYTES {
                RawJson::from_value(other)
            } else {
                text_json(&text)
            }
        }
    }
}

fn vars_text(vars: &BTreeMap<String, Value>) -> String {
    vars.iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads the file; a row that does not read as a promptfoo result is skipped and counted.
pub fn read(input: impl BufRead) -> Result<Parsed, String> {
    let file: File =
        serde_json::from_reader(input).map_err(|err| format!("JSON does not parse: {err}"))?;
    let results = file
        .results
        .ok_or("no `results` object (is it the file `promptfoo eval -o results.json` writes?)")?;
    let rows = results
        .results
        .ok_or("no `results.results` list of test results")?;
    let suite = file
        .config
        .description
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| "promptfoo".into());
    let mut parsed = Parsed {
        started: results.timestamp,
        summary: results.stats.map(|s| StatusCounts {
            passed: s.successes,
            failed: s.failures,
            errored: s.errors,
            skipped: 0,
        }),
        ..Parsed::default()
    };
    let mut read_rows = Vec::with_capacity(rows.len());
    for (index, raw) in rows.iter().enumerate() {
        match serde_json::from_str::<Row>(raw.get()) {
            Ok(row) => read_rows.push(row),
            Err(err) => parsed.skip(format!("result {index}: {err}")),
        }
    }
    drop(rows);
    let providers: HashSet<String> = read_rows.iter().map(|r| r.provider.name()).collect();
    let prompts: HashSet<Option<u64>> = read_rows.iter().map(|r| r.prompt_idx).collect();
    let mut seen: HashMap<String, u32> = HashMap::new();
    for row in read_rows {
        let base = row
            .test_case
            .description
            .clone()
            .filter(|d| !d.trim().is_empty())
            .or_else(|| {
                row.test_case
                    .vars
                    .as_ref()
                    .or(row.vars.as_ref())
                    .map(vars_text)
            })
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| format!("test {}", row.test_idx.unwrap_or(0)));
        let mut case = base;
        if prompts.len() > 1 {
            let label = row.prompt.label.clone().unwrap_or_default();
            case = format!("{case} · prompt {}", bounded(&label));
        }
        if providers.len() > 1 {
            case = format!("{case} · {}", row.provider.name());
        }
        // Two tests with one description are two cases, not one case run twice.
        let n = seen.entry(case.clone()).or_insert(0);
        *n += 1;
        if *n > 1 {
            case = format!("{case} #{n}");
        }
        parsed.push(result(&suite, case, row));
    }
    Ok(parsed)
}

fn result(suite: &str, case: String, row: Row) -> AgentEvalCompleted {
    let status = if row.success {
        EvalStatus::Passed
    } else if row.failure_reason == Some(FAILURE_ERROR)
        || (row.failure_reason.is_none() && row.error.is_some() && row.grading_result.is_none())
    {
        EvalStatus::Error
    } else {
        EvalStatus::Failed
    };
    let output = row.response.as_ref().and_then(|r| r.output.as_ref());
    let usage = row
        .response
        .as_ref()
        .and_then(|r| r.token_usage)
        .or(row.token_usage)
        .unwrap_or_default();
    let prompt = usage.prompt.unwrap_or(0);
    let completion = usage.completion.unwrap_or(0);
    let reason = match status {
        EvalStatus::Passed => None,
        _ => row
            .error
            .clone()
            .or_else(|| row.grading_result.as_ref().and_then(|g| g.reason.clone())),
    };
    let assertions = row
        .grading_result
        .map(|g| g.component_results)
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            let assertion = c.assertion.unwrap_or_default();
            AssertionResult {
                kind: assertion.kind.unwrap_or_else(|| "assertion".into()),
                pass: c.pass,
                expected: assertion
                    .value
                    .as_ref()
                    .map_or_else(RawJson::null, json_text),
                actual: output.map_or_else(RawJson::null, json_text),
                message: c.reason.map(|r| match c.score {
                    Some(score) if !c.pass => format!("{} (score {score})", bounded(&r)),
                    _ => bounded(&r),
                }),
                errored: false,
            }
        })
        .collect();
    AgentEvalCompleted {
        suite: suite.to_owned(),
        case,
        status,
        pass: status == EvalStatus::Passed,
        score: row.score.filter(|s| s.is_finite()),
        reason: reason
            .as_deref()
            .map(|r| bounded(r.lines().next().unwrap_or_default())),
        tokens: Tokens {
            prompt,
            completion,
            total: usage.total.unwrap_or(prompt + completion),
        },
        cost: row.cost.filter(|c| c.is_finite()).unwrap_or(0.0),
        duration: row.latency_ms.filter(|d| d.is_finite()).unwrap_or(0.0),
        assertions,
        ..AgentEvalCompleted::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/imports/promptfoo.json");

    #[test]
    fn fixture_counts_match_promptfoo_stats() {
        let parsed = read(FIXTURE.as_bytes()).expect("parses");
        let counts = StatusCounts::of(&parsed.results);
        assert_eq!(Some(counts), parsed.summary);
        assert_eq!((counts.passed, counts.failed, counts.errored), (2, 2, 1));
        assert_eq!(parsed.skipped, 0);
        assert_eq!(parsed.started.as_deref(), Some("2026-11-23T20:22:32.904Z"));
        let hello = parsed
            .results
            .iter()
            .find(|r| r.case == "says hello")
            .expect("case");
        assert_eq!(hello.suite, "greeting checks");
        assert_eq!(hello.status, EvalStatus::Failed);
        assert_eq!(
            hello.reason.as_deref(),
            Some("Expected output to contain \"hello\"")
        );
        assert_eq!(hello.assertions[0].kind, "icontains");
        assert_eq!(hello.assertions[0].expected.get(), "\"hello\"");
        assert_eq!(hello.assertions[0].actual.get(), "\"Greet Bruno politely\"");
        let down = parsed
            .results
            .iter()
            .find(|r| r.case == "provider down")
            .expect("case");
        assert_eq!(down.status, EvalStatus::Error);
        assert_eq!(down.reason.as_deref(), Some("gateway timed out after 30s"));
    }

    #[test]
    fn unreadable_row_is_skipped_and_counted() {
        let text = r#"{"evalId":"e","results":{"results":[{"success":true,"testCase":{"description":"a"}},{"success":"maybe"}],"stats":{"successes":1}},"config":{}}"#;
        let parsed = read(text.as_bytes()).expect("parses");
        assert_eq!(parsed.results.len(), 1);
        assert_eq!(parsed.results[0].suite, "promptfoo");
        assert_eq!(parsed.skipped, 1);
        assert!(
            parsed.notes[0].starts_with("result 1:"),
            "{:?}",
            parsed.notes
        );
    }

    #[test]
    fn same_description_twice_is_two_cases() {
        let text = r#"{"evalId":"e","results":{"results":[{"success":true,"testCase":{"description":"a"}},{"success":false,"testCase":{"description":"a"}}]}}"#;
        let parsed = read(text.as_bytes()).expect("parses");
        let cases: Vec<_> = parsed.results.iter().map(|r| r.case.as_str()).collect();
        assert_eq!(cases, ["a", "a #2"]);
        assert_eq!(parsed.summary, None);
    }

    #[test]
    fn truncated_and_deep_json_are_errors() {
        let err = read(&FIXTURE.as_bytes()[..FIXTURE.len() / 2]).expect_err("truncated");
        assert!(err.contains("JSON does not parse"), "{err}");
        let deep = format!(
            "{{\"evalId\":\"e\",\"results\":{{\"stats\":{}{}}}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let err = read(deep.as_bytes()).expect_err("deep");
        assert!(err.contains("JSON does not parse"), "{err}");
        let err = read(&b"{\"evalId\":\"x\"}"[..]).expect_err("no results");
        assert!(err.contains("no `results`"), "{err}");
    }
}
