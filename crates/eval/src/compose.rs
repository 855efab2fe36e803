//! The assertions judged last: `all` / `any` compositions (in order, short-circuiting, one
//! result per child: passed, failed, errored or skipped) and `command` checkers; and what an
//! assertion that could not be judged makes of the case (an error, with its reason).

use super::assert::{CaseResult, CaseRun, Facts, check, result};
use super::judge::{Judge, judge_one};
use super::suite::{Assertion, Case, CommandSpec};
use serde_json::{Value, json};
use spyglass_protocol::events::{AssertionResult, AssertionStatus, EvalStatus};
use std::future::Future;
use std::pin::Pin;

/// What judging needs beyond the case and its run.
pub struct Judging<'a> {
    pub case: &'a Case,
    pub run: &'a CaseRun,
    pub judge: &'a dyn Judge,
    /// Whether this runtime runs checker programs (`serve --allow-command-assertions`).
    /// Suites using them are refused before they run when it does not; this keeps it so.
    pub allow_commands: bool,
}

/// The case's `all`, `any` and `command` assertions added to a judged result. An
/// assertion that could not be judged (`errored`) makes the case an error with its
/// message as the reason: a broken checker must not read as a pass or as the agent's
/// failure. Cases that errored or were skipped before stay as they are.
pub async fn apply(judging: &Judging<'_>, mut judged: CaseResult) -> CaseResult {
    if !matches!(judged.status, EvalStatus::Passed | EvalStatus::Failed) {
        return judged;
    }
    let output = judging.run.output.clone().unwrap_or_default();
    let facts = Facts::new(&output, judging.run);
    for assertion in &judging.case.assertions {
        match assertion {
            Assertion::All(_) | Assertion::Any(_) => {
                let node = node(judging, &facts, assertion).await;
                judged.assertions.push(node);
            }
            Assertion::Command(specs) => {
                for spec in specs {
                    let node = command(judging, spec).await;
                    judged.assertions.push(node);
                }
            }
            _ => {}
        }
    }
    settle(judged)
}

/// The case's status from its top-level results: an errored one makes it an error, else a
/// failed one a failure.
fn settle(mut judged: CaseResult) -> CaseResult {
    if let Some(errored) = judged
        .assertions
        .iter()
        .find(|a| a.outcome() == AssertionStatus::Errored)
    {
        judged.status = EvalStatus::Error;
        judged.reason.clone_from(&errored.message);
    } else if judged.status == EvalStatus::Passed
        && let Some(failed) = judged.assertions.iter().find(|a| !a.pass)
    {
        judged.status = EvalStatus::Failed;
        judged.reason.clone_from(&failed.message);
    }
    judged
}

type Node<'a> = Pin<Box<dyn Future<Output = AssertionResult> + Send + 'a>>;

/// One assertion as one result: a list kind's items become its children.
fn node<'a>(judging: &'a Judging<'a>, facts: &'a Facts<'a>, assertion: &'a Assertion) -> Node<'a> {
    Box::pin(async move {
        match assertion {
            Assertion::All(children) => compose(judging, facts, Mode::All, children).await,
            Assertion::Any(children) => compose(judging, facts, Mode::Any, children).await,
            Assertion::Command(specs) => {
                let mut items = Vec::with_capacity(specs.len());
                for spec in specs {
                    items.push(command(judging, spec).await);
                }
                one(assertion.kind(), items)
            }
            Assertion::LlmJudge(_) | Assertion::SemanticMatch(_) => {
                match judge_one(assertion, judging.case, judging.run, judging.judge).await {
                    Some(Ok(found)) => found,
                    Some(Err(error)) => errored(
                        assertion.kind(),
                        format!("{}: the judge model failed: {error}", assertion.kind()),
                    ),
                    None => errored(assertion.kind(), "not a judge assertion".to_owned()),
                }
            }
            rule => {
                let mut items = Vec::new();
                check(rule, facts, &mut items);
                one(rule.kind(), items)
            }
        }
    })
}

/// A kind's results as one: itself when it gave one, else a node holding them.
fn one(kind: &str, mut items: Vec<AssertionResult>) -> AssertionResult {
    if items.len() == 1
        && let Some(only) = items.pop()
    {
        return only;
    }
    let status = worst(&items);
    let expected: Vec<Value> = items.iter().map(|a| a.expected.to_value()).collect();
    let actual: Vec<Value> = items.iter().map(|a| a.actual.to_value()).collect();
    let message = items
        .iter()
        .find(|a| !a.pass)
        .and_then(|a| a.message.clone());
    let mut out = result(
        kind,
        status == AssertionStatus::Passed,
        json!(expected),
        json!(actual),
        message,
    );
    out.status = reported(status);
    out.children = items;
    out
}

/// Errored over failed over passed.
fn worst(items: &[AssertionResult]) -> AssertionStatus {
    let outcomes: Vec<AssertionStatus> = items.iter().map(AssertionResult::outcome).collect();
    if outcomes.contains(&AssertionStatus::Errored) {
        AssertionStatus::Errored
    } else if outcomes.contains(&AssertionStatus::Failed) {
        AssertionStatus::Failed
    } else {
        AssertionStatus::Passed
    }
}

/// `status` on the wire only when `pass` does not say it.
fn reported(status: AssertionStatus) -> Option<AssertionStatus> {
    matches!(status, AssertionStatus::Errored | AssertionStatus::Skipped).then_some(status)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    All,
    Any,
}

/// `all`: children in order until one does not hold; `any`: until one does. Children
/// after the decision are `skipped`.
async fn compose<'a>(
    judging: &'a Judging<'a>,
    facts: &'a Facts<'a>,
    mode: Mode,
    children: &'a [Assertion],
) -> AssertionResult {
    let name = if mode == Mode::All { "all" } else { "any" };
    let mut results = Vec::with_capacity(children.len());
    let mut decided: Option<usize> = None;
    for (i, child) in children.iter().enumerate() {
        if decided.is_some() {
            results.push(skipped(child));
            continue;
        }
        let found = node(judging, facts, child).await;
        let stops = match mode {
            Mode::All => found.outcome() != AssertionStatus::Passed,
            Mode::Any => found.outcome() == AssertionStatus::Passed,
        };
        if stops {
            decided = Some(i);
        }
        results.push(found);
    }
    let count = |status| results.iter().filter(|a| a.outcome() == status).count();
    let actual = json!({
        "passed": count(AssertionStatus::Passed),
        "failed": count(AssertionStatus::Failed),
        "errored": count(AssertionStatus::Errored),
        "skipped": count(AssertionStatus::Skipped),
    });
    let total = children.len();
    let (status, message) = match (mode, decided) {
        (Mode::All, None) | (Mode::Any, Some(_)) => (AssertionStatus::Passed, None),
        (Mode::All, Some(i)) => {
            let child = &results[i];
            let says = child
                .message
                .clone()
                .unwrap_or_else(|| format!("{} did not hold", child.kind));
            (child.outcome(), Some(format!("all[{i}]: {says}")))
        }
        (Mode::Any, None) => {
            let errored = count(AssertionStatus::Errored);
            let says: Vec<String> = results
                .iter()
                .map(|a| {
                    a.message
                        .clone()
                        .unwrap_or_else(|| format!("{} did not hold", a.kind))
                })
                .collect();
            if errored > 0 {
                (
                    AssertionStatus::Errored,
                    Some(format!(
                        "any: none of {total} held and {errored} could not be judged: {}",
                        says.join("; ")
                    )),
                )
            } else {
                (
                    AssertionStatus::Failed,
                    Some(format!("any: none of {total} held: {}", says.join("; "))),
                )
            }
        }
    };
    let expected = match mode {
        Mode::All => json!(format!("all {total} hold")),
        Mode::Any => json!(format!("at least one of {total} holds")),
    };
    let mut out = result(
        name,
        status == AssertionStatus::Passed,
        expected,
        actual,
        message,
    );
    out.status = reported(status);
    out.children = results;
    out
}

/// A child never reached: its kind, nothing judged.
fn skipped(child: &Assertion) -> AssertionResult {
    let mut out = result(child.kind(), false, Value::Null, Value::Null, None);
    out.status = Some(AssertionStatus::Skipped);
    out
}

fn errored(kind: &str, message: String) -> AssertionResult {
    let mut out = result(kind, false, Value::Null, Value::Null, Some(message));
    out.status = Some(AssertionStatus::Errored);
    out
}

async fn command(judging: &Judging<'_>, spec: &CommandSpec) -> AssertionResult {
    if !judging.allow_commands {
        return errored(
            "command",
            "command: this runtime does not run checker programs (serve --allow-command-assertions)"
                .to_owned(),
        );
    }
    let observations = super::command::observations(judging.case, judging.run);
    super::command::check(spec, &observations).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assert::evaluate;
    use crate::judge::Answer;
    use crate::suite::parse_suite;
    use spyglass_protocol::events::Tokens;
    use spyglass_protocol::rest::ToolCallRecord;

    /// A judge model that never answers.
    struct Silent;

    impl Judge for Silent {
        fn complete<'a>(&'a self, _prompt: &'a str) -> Answer<'a, String> {
            Box::pin(async { Err("no model configured".to_owned()) })
        }
        fn embed<'a>(&'a self, _texts: &'a [String]) -> Answer<'a, Vec<Vec<f64>>> {
            Box::pin(async { Err("no model configured".to_owned()) })
        }
    }

    fn case(assert: &str) -> Case {
        let text = format!(
            "suite = \"s\"\n[[case]]\nid = \"c\"\ninput = \"Charge R$5\"\n[case.assert]\n{assert}"
        );
        parse_suite("s.toml", &text).unwrap().cases.remove(0)
    }

    fn run() -> CaseRun {
        CaseRun {
            output: Some("Charged pay_1".to_owned()),
            tool_calls: vec![ToolCallRecord {
                id: "call_1".into(),
                tool_name: "create_payment".into(),
                server_id: "asaas".into(),
                status: "success".into(),
                duration_ms: 1,
                input: json!({"value": 5}),
                output: json!({"id": "pay_1"}),
                error_code: None,
            }],
            tokens: Tokens {
                prompt: 20,
                completion: 10,
                total: 30,
            },
            duration_ms: 2.0,
            ..CaseRun::default()
        }
    }

    async fn judge_with(assert: &str, allow_commands: bool) -> CaseResult {
        let case = case(assert);
        let run = run();
        let judged = evaluate(&case, &run);
        let judging = Judging {
            case: &case,
            run: &run,
            judge: &Silent,
            allow_commands,
        };
        apply(&judging, judged).await
    }

    async fn judge(assert: &str) -> CaseResult {
        judge_with(assert, true).await
    }

    /// Each child's (kind, outcome), in order.
    fn children(result: &AssertionResult) -> Vec<(&str, AssertionStatus)> {
        result
            .children
            .iter()
            .map(|c| (c.kind.as_str(), c.outcome()))
            .collect()
    }

    #[tokio::test]
    async fn all_stops_at_the_first_child_that_does_not_hold() {
        let result = judge(
            "all = [ { contains = \"pay_1\" }, { contains = \"pay_9\" }, { regex = \"^Charged\" } ]",
        )
        .await;
        assert_eq!(result.status, EvalStatus::Failed);
        assert_eq!(
            result.reason.as_deref(),
            Some("all[1]: contains: \"pay_9\" not found")
        );
        let all = &result.assertions[0];
        assert_eq!((all.kind.as_str(), all.pass), ("all", false));
        assert_eq!(
            children(all),
            [
                ("contains", AssertionStatus::Passed),
                ("contains", AssertionStatus::Failed),
                ("regex", AssertionStatus::Skipped),
            ]
        );
        assert_eq!(
            all.actual.to_value(),
            json!({"passed": 1, "failed": 1, "errored": 0, "skipped": 1})
        );
        // Each child keeps what it expected and what it saw.
        assert_eq!(all.children[1].expected.to_value(), json!("pay_9"));
        assert_eq!(all.children[1].actual.to_value(), json!("Charged pay_1"));
        let passing = judge("all = [ { contains = \"pay_1\" }, { max_tokens = 30 } ]").await;
        assert_eq!(passing.status, EvalStatus::Passed);
        assert_eq!(passing.assertions[0].status, None, "pass says it");
    }

    #[tokio::test]
    async fn any_stops_at_the_first_child_that_holds() {
        let result = judge(
            "any = [ { equals = \"Refunded\" }, { contains = \"pay_1\" }, { contains = \"never judged\" } ]",
        )
        .await;
        assert_eq!(result.status, EvalStatus::Passed, "{:?}", result.reason);
        assert_eq!(
            children(&result.assertions[0]),
            [
                ("equals", AssertionStatus::Failed),
                ("contains", AssertionStatus::Passed),
                ("contains", AssertionStatus::Skipped),
            ]
        );
        let none =
            judge("any = [ { equals = \"Refunded\" }, { not_called = \"create_payment\" } ]").await;
        assert_eq!(none.status, EvalStatus::Failed);
        assert_eq!(
            none.reason.as_deref(),
            Some(
                "any: none of 2 held: equals: the output differs; not_called: create_payment was called 1 time(s)"
            )
        );
    }

    #[tokio::test]
    async fn compositions_nest_and_list_kinds_become_one_child() {
        let result = judge(
            "all = [ { any = [ { contains = \"pay_9\" }, { operation_called = { name = \"create_payment\", args = { value = 5 } } } ] },\n\
                     { contains = [\"Charged\", \"pay_1\"] } ]",
        )
        .await;
        assert_eq!(result.status, EvalStatus::Passed, "{:?}", result.reason);
        let all = &result.assertions[0];
        assert_eq!(
            children(all),
            [
                ("any", AssertionStatus::Passed),
                ("contains", AssertionStatus::Passed)
            ]
        );
        assert_eq!(
            children(&all.children[0]),
            [
                ("contains", AssertionStatus::Failed),
                ("operation_called", AssertionStatus::Passed)
            ]
        );
        // `contains = [a, b]` is one child holding one result per item.
        assert_eq!(all.children[1].children.len(), 2);
        let rows: Vec<(usize, &str)> = crate::report::flatten(all)
            .into_iter()
            .map(|(depth, a)| (depth, a.kind.as_str()))
            .collect();
        assert_eq!(
            rows,
            [
                (0, "all"),
                (1, "any"),
                (2, "contains"),
                (2, "operation_called"),
                (1, "contains"),
                (2, "contains"),
                (2, "contains"),
            ]
        );
    }

    #[tokio::test]
    async fn a_child_that_cannot_be_judged_makes_the_case_an_error() {
        // The judge model does not answer: the child errored, `all` stops there.
        let result = judge("all = [ { llm_judge = \"polite\" }, { contains = \"pay_1\" } ]").await;
        assert_eq!(result.status, EvalStatus::Error);
        let all = &result.assertions[0];
        assert_eq!(all.status, Some(AssertionStatus::Errored));
        assert_eq!(
            children(all),
            [
                ("llm_judge", AssertionStatus::Errored),
                ("contains", AssertionStatus::Skipped)
            ]
        );
        assert_eq!(
            result.reason.as_deref(),
            Some("all[0]: llm_judge: the judge model failed: no model configured")
        );
        // `any` looks on past an errored child, and a pass decides.
        let result = judge("any = [ { llm_judge = \"polite\" }, { contains = \"pay_1\" } ]").await;
        assert_eq!(result.status, EvalStatus::Passed);
        // With no pass, an errored child makes `any` errored, not failed.
        let result = judge("any = [ { llm_judge = \"polite\" }, { contains = \"pay_9\" } ]").await;
        assert_eq!(result.status, EvalStatus::Error);
        assert!(
            result
                .reason
                .as_deref()
                .unwrap_or_default()
                .starts_with("any: none of 2 held and 1 could not be judged"),
            "{:?}",
            result.reason
        );
    }

    #[tokio::test]
    async fn a_failed_rule_beside_a_passing_composition_still_fails_the_case() {
        let result = judge("contains = \"pay_9\"\nany = [ { contains = \"pay_1\" } ]").await;
        assert_eq!(result.status, EvalStatus::Failed);
        assert_eq!(
            result.reason.as_deref(),
            Some("contains: \"pay_9\" not found")
        );
        assert_eq!(result.assertions.len(), 2);
    }

    #[tokio::test]
    async fn commands_in_a_composition_and_a_runtime_that_refuses_them() {
        let pass = "command = [\"sh\", \"-c\", \"cat >/dev/null; echo '{\\\"pass\\\": true}'\"]";
        let result = judge(&format!(
            "all = [ {{ {pass} }}, {{ contains = \"pay_1\" }} ]"
        ))
        .await;
        assert_eq!(result.status, EvalStatus::Passed, "{:?}", result.reason);
        assert_eq!(result.assertions[0].children[0].kind, "command");
        let result = judge_with(pass, false).await;
        assert_eq!(result.status, EvalStatus::Error);
        assert!(
            result
                .reason
                .as_deref()
                .unwrap_or_default()
                .contains("--allow-command-assertions"),
            "{:?}",
            result.reason
        );
    }
}
