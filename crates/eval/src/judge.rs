//! Judge assertions, answered by a model rather than by rules: `llm_judge` (a rubric; the
//! model's verdict and reason are the `actual`) and `semantic_match` (embedding similarity
//! over a threshold). The runtime supplies the model through the `Judge` trait.

use super::assert::{CaseResult, CaseRun, result};
use super::suite::{Assertion, Case, Suite};
use serde_json::{Value, json};
use spyglass_protocol::events::{AssertionResult, EvalStatus};
use std::future::Future;
use std::pin::Pin;

/// `llm_judge = "rubric"` or `llm_judge = { rubric = "..." }` (read by the suite's shapes).
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeSpec {
    pub rubric: String,
}

/// `semantic_match = { expected = "...", threshold = 0.85 }` (in (0, 1]; 0.85 when left out).
#[derive(Debug, Clone, PartialEq)]
pub struct SemanticSpec {
    pub expected: String,
    pub threshold: f64,
}

/// The similarity `semantic_match` asks for when the file names none.
pub const DEFAULT_THRESHOLD: f64 = 0.85;

/// A suite name and a case id.
pub type Place = (String, String);

/// Which judge kinds a suite needs: (`llm_judge` used, `semantic_match` used), with the
/// first case using each, for the validation message.
pub fn needs(suites: &[Suite]) -> (Option<Place>, Option<Place>) {
    let mut judge = None;
    let mut semantic = None;
    for suite in suites {
        for case in &suite.cases {
            let at = || Some((suite.name.clone(), case.id.clone()));
            let uses = |test: &dyn Fn(&Assertion) -> bool| {
                case.assertions.iter().any(|a| a.any_in_tree(test))
            };
            if judge.is_none() && uses(&|a| matches!(a, Assertion::LlmJudge(_))) {
                judge = at();
            }
            if semantic.is_none() && uses(&|a| matches!(a, Assertion::SemanticMatch(_))) {
                semantic = at();
            }
        }
    }
    (judge, semantic)
}

pub type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// The model behind the judge assertions.
pub trait Judge: Sync {
    /// One completion of `prompt` (no tools): the model's text.
    fn complete<'a>(&'a self, prompt: &'a str) -> Answer<'a, String>;
    /// One embedding per text, in order.
    fn embed<'a>(&'a self, texts: &'a [String]) -> Answer<'a, Vec<Vec<f64>>>;
}

/// What the judge model is asked: the rubric, the user's input, the answer and the tool
/// calls, and a verdict as JSON.
pub fn judge_prompt(rubric: &str, case: &Case, run: &CaseRun) -> String {
    let calls: Vec<Value> = run
        .tool_calls
        .iter()
        .map(|c| json!({"tool": c.tool_name, "input": c.input, "output": c.output}))
        .collect();
    format!(
        "You grade an AI agent's answer against a rubric.\n\
         Rubric: {rubric}\n\
         User input: {}\n\
         Tool calls: {}\n\
         Agent answer: {}\n\
         Reply with JSON only: {{\"pass\": true or false, \"reason\": \"one sentence\"}}",
        case.input,
        Value::Array(calls),
        run.output.as_deref().unwrap_or_default()
    )
}

/// The verdict in the judge's text: a JSON object with `pass` (and `reason`) anywhere in
/// it, else a leading PASS or FAIL.
pub fn parse_verdict(text: &str) -> Option<(bool, String)> {
    if let (Some(start), Some(end)) = (text.find('{'), text.rfind('}'))
        && start < end
        && let Ok(value) = serde_json::from_str::<Value>(&text[start..=end])
        && let Some(pass) = value.get("pass").and_then(Value::as_bool)
    {
        let reason = value
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        return Some((pass, reason));
    }
    let upper = text.trim_start().to_ascii_uppercase();
    let rest = || {
        text.trim_start()[4..]
            .trim_start_matches([':', ' ', '-'])
            .trim()
            .to_owned()
    };
    if upper.starts_with("PASS") {
        Some((true, rest()))
    } else if upper.starts_with("FAIL") {
        Some((false, rest()))
    } else {
        None
    }
}

pub fn cosine(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    (na > 0.0 && nb > 0.0).then(|| dot / (na * nb))
}

/// Adds the case's judge assertions to a judged result: a failing one fails a passed
/// case; a judge that cannot answer makes the case an error (it was not judged). Cases
/// that errored or were skipped stay as they are.
pub async fn apply(
    case: &Case,
    run: &CaseRun,
    mut judged: CaseResult,
    judge: &dyn Judge,
) -> CaseResult {
    if !matches!(judged.status, EvalStatus::Passed | EvalStatus::Failed) {
        return judged;
    }
    for assertion in &case.assertions {
        let Some(outcome) = judge_one(assertion, case, run, judge).await else {
            continue;
        };
        match outcome {
            Ok(assertion) => {
                if !assertion.pass && judged.status == EvalStatus::Passed {
                    judged.status = EvalStatus::Failed;
                    judged.reason.clone_from(&assertion.message);
                }
                judged.assertions.push(assertion);
            }
            Err(error) => {
                judged.status = EvalStatus::Error;
                judged.reason = Some(format!("the judge model failed: {error}"));
                return judged;
            }
        }
    }
    judged
}

/// One judge assertion against the run: `None` for a kind no model answers, `Err` when
/// the model could not answer.
pub async fn judge_one(
    assertion: &Assertion,
    case: &Case,
    run: &CaseRun,
    judge: &dyn Judge,
) -> Option<Result<AssertionResult, String>> {
    Some(match assertion {
        Assertion::LlmJudge(spec) => {
            let prompt = judge_prompt(&spec.rubric, case, run);
            judge
                .complete(&prompt)
                .await
                .map(|text| match parse_verdict(&text) {
                    Some((pass, reason)) => result(
                        "llm_judge",
                        pass,
                        json!(spec.rubric),
                        json!({"pass": pass, "reason": reason}),
                        (!pass).then(|| format!("llm_judge: {reason}")),
                    ),
                    None => result(
                        "llm_judge",
                        false,
                        json!(spec.rubric),
                        json!({"answer": text}),
                        Some("llm_judge: the judge's answer holds no verdict".to_owned()),
                    ),
                })
        }
        Assertion::SemanticMatch(spec) => {
            let texts = [
                spec.expected.clone(),
                run.output.clone().unwrap_or_default(),
            ];
            judge.embed(&texts).await.and_then(|vectors| {
                let similarity = match vectors.as_slice() {
                    [a, b] => cosine(a, b),
                    _ => None,
                }
                .ok_or("semantic_match: the embeddings answer is not two vectors of one length")?;
                let pass = similarity >= spec.threshold;
                Ok(result(
                    "semantic_match",
                    pass,
                    json!({"text": spec.expected, "threshold": spec.threshold}),
                    json!({"similarity": (similarity * 1000.0).round() / 1000.0}),
                    (!pass).then(|| {
                        format!(
                            "semantic_match: similarity {similarity:.3} is under {}",
                            spec.threshold
                        )
                    }),
                ))
            })
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_from_json_or_a_leading_word() {
        assert_eq!(
            parse_verdict("Sure: {\"pass\": false, \"reason\": \"rude\"}"),
            Some((false, "rude".to_owned()))
        );
        assert_eq!(
            parse_verdict("PASS - all good"),
            Some((true, "all good".to_owned()))
        );
        assert_eq!(parse_verdict("I think so"), None);
    }

    #[test]
    fn judge_kinds_nested_in_compositions_are_needs_too() {
        let suite = crate::suite::parse_suite(
            "s.toml",
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\nall = [ { contains = \"a\" }, { any = [ { semantic_match = \"paid\" } ] } ]",
        )
        .unwrap();
        assert_eq!(
            needs(&[suite]),
            (None, Some(("s".to_owned(), "a".to_owned())))
        );
    }

    #[test]
    fn cosine_needs_two_vectors_of_one_length() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]).unwrap() - 1.0).abs() < 1e-9);
        assert!(cosine(&[1.0, 0.0], &[0.0, 1.0]).unwrap().abs() < 1e-9);
        assert_eq!(cosine(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 2.0]), None);
    }
}
