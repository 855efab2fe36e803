//! Tests of reading suite files: each form a field takes, and the file, case and field
//! every error names.

use super::*;

const GOOD: &str = r#"
suite = "payments"
[defaults]
servers = ["asaas"]
metadata = { team = "billing", env = "test" }
timeout_ms = 5000
mocks = { "asaas/create_payment" = { id = "pay_1" }, "asaas/get_payment" = { id = "pay_1" } }

[[case]]
id = "charge small amount"
input = "Charge R$5 via Pix"
mocks = { "asaas/create_payment" = { id = "pay_9" } }
metadata = { env = "ci" }
model = { sequence = [ { tool_calls = [ { name = "asaas/create_payment", arguments = { value = 5 } } ] }, { text = "Charged: pay_9" } ] }
[case.assert]
contains = ["pay_9", "Charged"]
operation_called = [ "asaas/create_payment", { name = "asaas/get_payment", times = 0 } ]
no_envelope = true
json_path = { path = "$.a[0]", equals = 1 }
max_tokens = 100

[[case]]
id = "skipped"
input = "x"
skip = true
servers = []
timeout_ms = 10

[[case]]
id = "variants"
input = "y"
skip = "not ready"
model_variants = [ { default_text = "one" }, { default_text = "two" } ]
[case.assert]
envelope = ["tool_not_mocked"]
no_envelope = "policy_denied"
regex = '^two$'
equals = "two"
"#;

fn err(text: &str) -> SuiteError {
    match parse_suite("payments.toml", text) {
        Ok(suite) => panic!("expected an error, got {} cases", suite.cases.len()),
        Err(err) => err,
    }
}

#[test]
fn max_cost_takes_dollars_and_names_what_is_not() {
    let case = |v: &str| {
        format!("suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\nmax_cost = {v}")
    };
    for (value, want) in [("0.01", 0.01), ("0", 0.0), ("2", 2.0)] {
        let suite = parse_suite("payments.toml", &case(value)).unwrap();
        match suite.cases[0].assertions.as_slice() {
            [Assertion::MaxCost(d)] => assert!((d - want).abs() < 1e-12, "{value}"),
            other => panic!("{value}: {other:?}"),
        }
    }
    for (value, found) in [
        ("-0.5", "found -0.5"),
        ("\"0.01\"", "found a string"),
        ("nan", "found null (nan and inf are not amounts)"),
        ("inf", "found null (nan and inf are not amounts)"),
        ("[0.01]", "found a list"),
    ] {
        let e = err(&case(value));
        assert_eq!(e.kind, SuiteErrorKind::Invalid, "{value}");
        assert_eq!(e.case, Some(CaseRef::Id("a".into())), "{value}");
        assert_eq!(e.field.as_deref(), Some("assert.max_cost"), "{value}");
        assert_eq!(
            e.to_string(),
            format!(
                "payments.toml: case \"a\": assert.max_cost: expected US dollars as a number, 0 or more (like 0.01), {found}"
            ),
            "{value}"
        );
    }
    let json =
        r#"{"suite": "s", "cases": [{"id": "a", "input": "x", "assert": {"max_cost": -1}}]}"#;
    let e = parse_suite("s.json", json).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("assert.max_cost"));
}

#[test]
fn the_new_assertions_name_file_case_and_field_when_broken() {
    let head = "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\n";
    for (assert, field, says) in [
        (
            "operation_called = { name = \"a/b\", args = {} }",
            "assert.operation_called.args",
            "empty",
        ),
        (
            "operation_called = { name = \"a/b\", args = 5 }",
            "assert.operation_called.args",
            "expected a table",
        ),
        (
            "operation_called = { name = \"a/b\", args = { \"$..x\" = 1 } }",
            "assert.operation_called.args.$..x",
            "invalid JSON path",
        ),
        (
            "operation_called = { name = \"a/b\", argz = { x = 1 } }",
            "assert.operation_called.argz",
            "argz",
        ),
        ("sequence = [\"a/b\"]", "assert.sequence", "at least two"),
        (
            "sequence = { tools = [\"a/b\", \"a/c\"], gaps = \"no\" }",
            "assert.sequence.gaps",
            "true or false",
        ),
        (
            "sequence = { gaps = true }",
            "assert.sequence.tools",
            "missing",
        ),
        ("not_called = 3", "assert.not_called", ""),
        (
            "json_schema = { tool = \"a/b\" }",
            "assert.json_schema.schema",
            "missing",
        ),
        (
            "json_schema = { schema = { type = \"objekt\" } }",
            "assert.json_schema.schema",
            "not a valid JSON Schema",
        ),
        ("json_schema = []", "assert.json_schema", "empty"),
    ] {
        let e = err(&format!("{head}{assert}"));
        assert_eq!(e.field.as_deref(), Some(field), "{assert}: {e}");
        assert_eq!(e.file, "payments.toml");
        assert!(
            e.to_string().contains("case \"a\"") || e.case.is_some(),
            "{e}"
        );
        assert!(e.to_string().contains(says), "{assert}: {e}");
    }
}

const HEAD: &str = "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\n";

#[test]
fn compositions_read_in_order_and_nest() {
    let suite = parse_suite(
        "s.toml",
        &format!(
            "{HEAD}all = [ {{ regex = \"b\" }}, {{ any = [ {{ contains = \"a\" }}, {{ not_called = \"x\" }} ] }}, {{ contains = [\"c\", \"d\"] }} ]"
        ),
    )
    .unwrap();
    let Assertion::All(children) = &suite.cases[0].assertions[0] else {
        panic!("{:?}", suite.cases[0].assertions);
    };
    let kinds: Vec<&str> = children.iter().map(Assertion::kind).collect();
    assert_eq!(
        kinds,
        ["regex", "any", "contains"],
        "the list's order, not the kinds'"
    );
    let Assertion::Any(inner) = &children[1] else {
        panic!("{children:?}");
    };
    assert_eq!(inner.len(), 2);
}

#[test]
fn compositions_nest_to_the_bound_and_no_deeper() {
    let nested = |depth: usize| {
        let mut value = "{ contains = \"a\" }".to_owned();
        for _ in 0..depth {
            value = format!("{{ all = [ {value} ] }}");
        }
        // The outermost table is `[case.assert]` itself.
        let inner = value
            .strip_prefix("{ all = ")
            .and_then(|v| v.strip_suffix(" }"))
            .unwrap()
            .to_owned();
        format!("{HEAD}all = {inner}")
    };
    assert!(parse_suite("s.toml", &nested(MAX_NESTING)).is_ok());
    let e = err(&nested(MAX_NESTING + 1));
    assert_eq!(e.case, Some(CaseRef::Id("a".into())));
    let field = e.field.clone().unwrap_or_default();
    assert!(field.starts_with("assert.all[0].all[0]."), "{field}");
    assert_eq!(field.matches("all").count(), MAX_NESTING + 1, "{field}");
    assert!(
        e.message.contains(&format!(
            "nest {} deep here; the limit is {MAX_NESTING}",
            MAX_NESTING + 1
        )),
        "{e}"
    );
}

#[test]
fn bad_compositions_name_the_child() {
    for (assert, field, says) in [
        ("all = []", "assert.all", "the list is empty"),
        (
            "any = { contains = \"a\" }",
            "assert.any",
            "expected a list of assertion tables",
        ),
        (
            "all = [ \"contains\" ]",
            "assert.all[0]",
            "expected a table, found a string",
        ),
        (
            "all = [ { contains = \"a\", regex = \"b\" } ]",
            "assert.all[0]",
            "a child is one assertion kind, this has 2",
        ),
        ("all = [ {} ]", "assert.all[0]", "this has 0"),
        (
            "any = [ { contain = \"a\" } ]",
            "assert.any[0].contain",
            "unknown assertion kind",
        ),
        (
            "all = [ { any = [ { regex = \"(\" } ] } ]",
            "assert.all[0].any[0].regex",
            "invalid regex",
        ),
    ] {
        let e = err(&format!("{HEAD}{assert}"));
        assert_eq!(e.field.as_deref(), Some(field), "{assert}: {e}");
        assert!(
            e.to_string().starts_with("payments.toml: case \"a\": "),
            "{e}"
        );
        assert!(e.message.contains(says), "{assert}: {e}");
    }
}

#[test]
fn judge_specs_read_strings_and_tables_and_refuse_nonsense() {
    let judged = |assert: &str| {
        parse_suite("s.toml", &format!("{HEAD}{assert}")).map(|suite| {
            suite.cases[0]
                .assertions
                .first()
                .cloned()
                .expect("one assertion")
        })
    };
    let rubric = |assert: &str| match judged(assert) {
        Ok(Assertion::LlmJudge(spec)) => spec.rubric,
        other => panic!("{assert}: {other:?}"),
    };
    assert_eq!(rubric("llm_judge = \"polite\""), "polite");
    assert_eq!(rubric("llm_judge = { rubric = \"r\" }"), "r");
    let threshold = |assert: &str| match judged(assert) {
        Ok(Assertion::SemanticMatch(spec)) => spec.threshold,
        other => panic!("{assert}: {other:?}"),
    };
    let spec = threshold("semantic_match = { expected = \"paid\", threshold = 0.9 }");
    assert!((spec - 0.9).abs() < 1e-9);
    // The spec's default: a file naming no threshold asks for a similarity of 0.85.
    assert!((threshold("semantic_match = \"paid\"") - 0.85).abs() < 1e-9);
    assert!((threshold("semantic_match = { expected = \"paid\" }") - 0.85).abs() < 1e-9);
    for (assert, field, says) in [
        (
            "llm_judge = { rubrik = \"r\" }",
            "assert.llm_judge.rubrik",
            "unknown key; expected one of: rubric",
        ),
        (
            "llm_judge = \" \"",
            "assert.llm_judge",
            "the rubric is empty",
        ),
        (
            "llm_judge = 3",
            "assert.llm_judge",
            "expected a rubric string or a table with rubric",
        ),
        (
            "semantic_match = { expected = \"x\", threshold = 1.5 }",
            "assert.semantic_match",
            "threshold 1.5 is not in (0, 1]",
        ),
        (
            "semantic_match = 3",
            "assert.semantic_match",
            "expected a string or a table with expected and threshold",
        ),
        (
            "semantic_match = { expected = \"x\", threshold = \"high\" }",
            "assert.semantic_match.threshold",
            "expected a number, found a string",
        ),
    ] {
        let e = err(&format!("{HEAD}{assert}"));
        assert_eq!(e.field.as_deref(), Some(field), "{assert}: {e}");
        assert!(e.message.contains(says), "{assert}: {e}");
    }
}

#[test]
fn commands_in_each_form_run_beside_the_suite_file() {
    let suite = parse_suite(
        "evals/checks.toml",
        &format!("{HEAD}command = [\"python3\", \"check.py\", \"--strict\"]"),
    )
    .unwrap();
    let Assertion::Command(specs) = &suite.cases[0].assertions[0] else {
        panic!("{:?}", suite.cases[0].assertions);
    };
    assert_eq!(
        specs,
        &vec![CommandSpec {
            argv: vec!["python3".into(), "check.py".into(), "--strict".into()],
            timeout_ms: COMMAND_TIMEOUT_MS,
            dir: Some(std::path::PathBuf::from("evals")),
        }]
    );
    let suite = parse_suite(
        "checks.toml",
        &format!(
            "{HEAD}command = [ {{ argv = [\"./a\"], timeout_ms = 500 }}, {{ argv = [\"b\"] }} ]"
        ),
    )
    .unwrap();
    let Assertion::Command(specs) = &suite.cases[0].assertions[0] else {
        panic!();
    };
    assert_eq!(specs.len(), 2);
    assert_eq!((specs[0].timeout_ms, specs[0].dir.clone()), (500, None));
    let suite = parse_suite(
        "checks.toml",
        &format!("{HEAD}command = {{ argv = [\"c\"] }}"),
    )
    .unwrap();
    assert!(matches!(&suite.cases[0].assertions[0], Assertion::Command(s) if s.len() == 1));
}

#[test]
fn bad_commands_name_the_field() {
    for (assert, field, says) in [
        ("command = []", "assert.command", "the list is empty"),
        (
            "command = \"python3 check.py\"",
            "assert.command",
            "expected a list of strings",
        ),
        (
            "command = [\"\"]",
            "assert.command[0]",
            "the program name is empty",
        ),
        (
            "command = [\"python3\", 3]",
            "assert.command[1]",
            "expected a string, found an integer",
        ),
        (
            "command = { timeout_ms = 5 }",
            "assert.command.argv",
            "missing",
        ),
        (
            "command = { argv = [] }",
            "assert.command.argv",
            "the list is empty",
        ),
        (
            "command = { argv = \"x\" }",
            "assert.command.argv",
            "expected a list of strings",
        ),
        (
            "command = { argv = [\"x\"], timeout_ms = 0 }",
            "assert.command.timeout_ms",
            "out of range: 1 to 120000 ms",
        ),
        (
            "command = { argv = [\"x\"], timeout_ms = 120001 }",
            "assert.command.timeout_ms",
            "out of range",
        ),
        (
            "command = { argv = [\"x\"], timeout_ms = \"5s\" }",
            "assert.command.timeout_ms",
            "non-negative integer",
        ),
        (
            "command = { argv = [\"x\"], timeout = 5 }",
            "assert.command.timeout",
            "unknown key; expected one of: argv, timeout_ms",
        ),
        (
            "command = [ { argv = [\"x\"] }, 3 ]",
            "assert.command[1]",
            "found an integer",
        ),
        (
            "command = [ { argv = [\"x\"] }, { argv = [] } ]",
            "assert.command[1].argv",
            "the list is empty",
        ),
        (
            "command = [\"x\", \"a\\u0000b\"]",
            "assert.command[1]",
            "holds a NUL byte",
        ),
    ] {
        let e = err(&format!("{HEAD}{assert}"));
        assert_eq!(e.field.as_deref(), Some(field), "{assert}: {e}");
        assert!(
            e.to_string().starts_with("payments.toml: case \"a\": "),
            "{e}"
        );
        assert!(e.message.contains(says), "{assert}: {e}");
    }
    let long = format!(
        "{HEAD}command = [\"x\", \"{}\"]",
        "a".repeat(MAX_ARG_BYTES + 1)
    );
    assert_eq!(err(&long).field.as_deref(), Some("assert.command[1]"));
    let many = format!(
        "{HEAD}command = [{}]",
        vec!["\"a\""; MAX_ARGS + 1].join(", ")
    );
    let e = err(&many);
    assert!(e.message.contains("the limit is 64"), "{e}");
}

#[test]
fn reads_a_good_toml_suite_with_defaults_merged() {
    let suite = parse_suite("payments.toml", GOOD).unwrap();
    assert_eq!(suite.name, "payments");
    assert_eq!(suite.cases.len(), 3);
    let first = &suite.cases[0];
    assert_eq!(first.id, "charge small amount");
    assert_eq!(first.input, "Charge R$5 via Pix");
    // Mocks merge per tool, the case's own entry wins.
    let mocks = first.mocks.as_ref().unwrap();
    assert_eq!(mocks["asaas/create_payment"]["id"], "pay_9");
    assert_eq!(mocks["asaas/get_payment"]["id"], "pay_1");
    assert_eq!(first.metadata["env"], "ci");
    assert_eq!(first.metadata["team"], "billing");
    assert_eq!(first.servers, vec!["asaas".to_owned()]);
    assert_eq!(first.timeout_ms, Some(5000));
    assert_eq!(first.models.len(), 1);
    assert_eq!(first.models[0].sequence.len(), 2);
    assert_eq!(
        first.models[0].sequence[1].text.as_deref(),
        Some("Charged: pay_9")
    );
    let kinds: Vec<&str> = first
        .assertions
        .iter()
        .map(|a| match a {
            Assertion::Contains(_) => "contains",
            Assertion::OperationCalled(_) => "operation_called",
            Assertion::NoEnvelope(NoEnvelope::Any) => "no_envelope",
            Assertion::JsonPath(_) => "json_path",
            Assertion::MaxTokens(100) => "max_tokens",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "contains",
            "operation_called",
            "no_envelope",
            "json_path",
            "max_tokens"
        ]
    );
    match &first.assertions[1] {
        Assertion::OperationCalled(ops) => assert_eq!(
            ops,
            &vec![
                OperationExpectation {
                    name: "asaas/create_payment".into(),
                    times: None,
                    args: Vec::new(),
                },
                OperationExpectation {
                    name: "asaas/get_payment".into(),
                    times: Some(0),
                    args: Vec::new(),
                }
            ]
        ),
        other => panic!("{other:?}"),
    }

    let skipped = &suite.cases[1];
    assert_eq!(skipped.skip.as_deref(), Some("skipped in the suite file"));
    assert!(
        skipped.servers.is_empty(),
        "a case's own list replaces the default"
    );
    assert_eq!(skipped.timeout_ms, Some(10));
    assert!(skipped.models.is_empty());

    let variants = &suite.cases[2];
    assert_eq!(variants.skip.as_deref(), Some("not ready"));
    let text = |attempt| {
        variants
            .model_for_attempt(attempt)
            .and_then(|m| m.default_text.clone())
    };
    assert_eq!(text(1).as_deref(), Some("one"));
    assert_eq!(text(2).as_deref(), Some("two"));
    assert_eq!(text(3).as_deref(), Some("one"));
}

#[test]
fn reads_json_by_extension_and_by_content() {
    let text = r#"{"suite": "s", "cases": [{"id": "a", "input": "hi",
        "model": {"sequence": [{"text": "{\"id\": 1}"}]},
        "assert": {"json_path": [{"path": "$.id", "equals": 1}], "equals": "{\"id\": 1}"}}]}"#;
    for name in ["s.json", "from-a-request"] {
        let suite = parse_suite(name, text).unwrap();
        assert_eq!(suite.name, "s");
        assert_eq!(suite.cases[0].id, "a");
        assert_eq!(suite.cases[0].assertions.len(), 2);
    }
}

#[test]
fn not_toml_names_the_file_and_the_line() {
    let e = err("suite = \"x\"\n[[case]\nid = 1");
    assert_eq!(e.kind, SuiteErrorKind::Syntax);
    assert_eq!(e.file, "payments.toml");
    assert!(
        e.to_string()
            .starts_with("payments.toml: not valid TOML (line 2"),
        "{e}"
    );
    let e = parse_suite("s.json", "{\"suite\": ").unwrap_err();
    assert_eq!(e.kind, SuiteErrorKind::Syntax);
    assert!(e.to_string().starts_with("s.json: not valid JSON"), "{e}");
}

#[test]
fn missing_suite_and_missing_cases() {
    let e = err("[[case]]\nid = \"a\"\ninput = \"b\"");
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (SuiteErrorKind::Missing, Some("suite"))
    );
    assert_eq!(e.case, None);
    let e = err("suite = \"s\"");
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (SuiteErrorKind::Missing, Some("case"))
    );
    let e = err("suite = \"s\"\n[[case]]\ninput = \"b\"");
    assert_eq!(e.case, Some(CaseRef::Index(1)));
    assert_eq!(
        e.to_string(),
        "payments.toml: case #1: id: missing: every case has an id"
    );
}

#[test]
fn bad_field_types_name_case_and_field() {
    let e = err("suite = \"s\"\n[[case]]\nid = \"a\"\ninput = 5");
    assert_eq!(e.kind, SuiteErrorKind::Invalid);
    assert_eq!(e.case, Some(CaseRef::Id("a".into())));
    assert_eq!(
        e.to_string(),
        "payments.toml: case \"a\": input: expected a string, found an integer"
    );
    let e =
        err("suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\nmax_tokens = -3");
    assert_eq!(e.field.as_deref(), Some("assert.max_tokens"));
    assert!(e.message.contains("non-negative integer"), "{e}");
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\nmodel = { sequence = [ { txt = \"hi\" } ] }",
    );
    // The field inside the script that is wrong, not only `model`.
    assert_eq!(e.field.as_deref(), Some("model.sequence[0].txt"));
    assert_eq!(e.kind, SuiteErrorKind::Unknown);
    assert!(e.message.contains("unknown field `txt`"), "{e}");
    let e =
        err("suite = \"s\"\n[defaults]\nservers = \"asaas\"\n[[case]]\nid = \"a\"\ninput = \"x\"");
    assert_eq!(
        (e.case.clone(), e.field.as_deref()),
        (None, Some("defaults.servers"))
    );
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\noperation_called = [\"a/b\", { name = \"a/c\", times = \"2\" }]",
    );
    assert_eq!(e.field.as_deref(), Some("assert.operation_called[1].times"));
    let e = err("suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\nskip = 1");
    assert_eq!(e.field.as_deref(), Some("skip"));
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\nno_envelope = false",
    );
    assert_eq!(e.field.as_deref(), Some("assert.no_envelope"));
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\njson_path = { path = \"id\", equals = 1 }",
    );
    assert_eq!(e.field.as_deref(), Some("assert.json_path.path"));
    assert!(e.message.contains("must start with `$`"), "{e}");
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\njson_path = [{ path = \"$.id\" }]",
    );
    assert_eq!(e.field.as_deref(), Some("assert.json_path[0].equals"));
    assert_eq!(e.kind, SuiteErrorKind::Missing);
}

#[test]
fn typed_fields_name_the_wrong_value_and_its_kind() {
    for (text, shown) in [
        (
            "suite = \"s\"\n[defaults]\nservers = [\"a\", 7]\n[[case]]\nid = \"a\"\ninput = \"x\"",
            "payments.toml: defaults.servers[1]: expected a string, found an integer",
        ),
        (
            "suite = \"s\"\n[defaults]\ntimeout_ms = -5\n[[case]]\nid = \"a\"\ninput = \"x\"",
            "payments.toml: defaults.timeout_ms: expected a non-negative integer, found a negative integer",
        ),
        (
            "suite = \"s\"\n[defaults]\nmocks = [1]\n[[case]]\nid = \"a\"\ninput = \"x\"",
            "payments.toml: defaults.mocks: expected a table, found a list",
        ),
        (
            "suite = \"  \"\n[[case]]\nid = \"a\"\ninput = \"x\"",
            "payments.toml: suite: must not be empty",
        ),
        (
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\nmetadata = 1.5",
            "payments.toml: case \"a\": metadata: expected a table, found a float",
        ),
        (
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\nskip = \" \"",
            "payments.toml: case \"a\": skip: expected true or a reason (a non-empty string), found a string",
        ),
        (
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\nprompted = [{ step = 0, contains = \"a\" }, 3]",
            "payments.toml: case \"a\": assert.prompted[1]: expected a table, found an integer",
        ),
        (
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\njson_path = []",
            "payments.toml: case \"a\": assert.json_path: the list is empty",
        ),
        (
            "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\nno_envelope = [\"a\", false]",
            "payments.toml: case \"a\": assert.no_envelope[1]: expected a string, found a boolean",
        ),
    ] {
        let e = err(text);
        assert_eq!(e.kind, SuiteErrorKind::Invalid, "{e}");
        assert_eq!(e.to_string(), shown);
    }
    // A key unknown inside one assertion's table is a key, not an assertion kind.
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\noperation_called = [\"a/b\", { nme = \"a/c\" }]",
    );
    assert_eq!(e.kind, SuiteErrorKind::Unknown, "{e}");
    assert_eq!(
        e.to_string(),
        "payments.toml: case \"a\": assert.operation_called[1].nme: unknown key; expected one of: name, times, args"
    );
}

#[test]
fn unknown_keys_are_errors() {
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\ncontain = \"pay_1\"",
    );
    assert_eq!(e.kind, SuiteErrorKind::Unknown);
    assert_eq!(e.field.as_deref(), Some("assert.contain"));
    assert!(
        e.to_string()
            .starts_with("payments.toml: case \"a\": assert.contain: unknown assertion kind"),
        "{e}"
    );
    let e = err("suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\nimput = \"y\"");
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (SuiteErrorKind::Unknown, Some("imput"))
    );
    let e = err("suite = \"s\"\nowner = \"me\"\n[[case]]\nid = \"a\"\ninput = \"x\"");
    assert_eq!(
        (e.kind, e.field.as_deref()),
        (SuiteErrorKind::Unknown, Some("owner"))
    );
}

#[test]
fn unknown_key_messages_list_the_known_ones_in_order() {
    let e = err("suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\nx = 1");
    let listed = e
        .message
        .split("expected one of: ")
        .nth(1)
        .unwrap_or_default();
    assert_eq!(listed, ASSERTION_KINDS.join(", "), "{e}");
    let e = err("suite = \"s\"\nowner = \"me\"\n[[case]]\nid = \"a\"\ninput = \"x\"");
    assert_eq!(
        e.to_string(),
        "payments.toml: owner: unknown key; expected one of: suite, defaults, case, cases"
    );
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\njson_path = { path = \"$.a\", equals = 1, eq = 2 }",
    );
    assert_eq!(e.field.as_deref(), Some("assert.json_path.eq"), "{e}");
    assert!(e.message.ends_with("expected one of: path, equals"), "{e}");
}

#[test]
fn a_null_is_a_wrong_kind_not_an_absent_key() {
    let e = parse_suite(
        "s.json",
        r#"{"suite": "s", "cases": [{"id": "a", "input": "x", "skip": null}]}"#,
    )
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("skip"), "{e}");
    assert!(e.message.ends_with("found null"), "{e}");
}

#[test]
fn a_case_id_over_the_bound_is_refused_by_position() {
    let id = "a".repeat(spyglass_protocol::glob::MAX_ID_LEN + 1);
    let e = err(&format!(
        "suite = \"s\"\n[[case]]\nid = \"{id}\"\ninput = \"x\""
    ));
    assert_eq!(e.case, Some(CaseRef::Index(1)));
    assert_eq!(e.field.as_deref(), Some("id"));
    assert!(e.message.contains("limit is 4096"), "{e}");
}

#[test]
fn bad_regex_is_named() {
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"charge small amount\"\ninput = \"x\"\n[case.assert]\nregex = \"pay_(\"",
    );
    assert_eq!(
        e.to_string(),
        "payments.toml: case \"charge small amount\": assert.regex: invalid regex \"pay_(\": unclosed group"
    );
}

#[test]
fn duplicate_ids_are_errors() {
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[[case]]\nid = \"b\"\ninput = \"x\"\n[[case]]\nid = \"a\"\ninput = \"y\"",
    );
    assert_eq!(e.kind, SuiteErrorKind::Duplicate);
    assert_eq!(
        e.to_string(),
        "payments.toml: case \"a\": id: duplicate case id (case #1 has it too)"
    );
}

#[test]
fn model_and_variants_are_exclusive() {
    let e = err(
        "suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\nmodel = {}\nmodel_variants = [{}]",
    );
    assert_eq!(e.field.as_deref(), Some("model_variants"));
    let e = err("suite = \"s\"\n[[case]]\nid = \"a\"\ninput = \"x\"\nmodel_variants = []");
    assert_eq!(e.field.as_deref(), Some("model_variants"));
}

#[test]
fn unreadable_file_is_an_io_error_naming_it() {
    let e = load_suite(Path::new("/nonexistent/suite.toml")).unwrap_err();
    assert_eq!(e.kind, SuiteErrorKind::Io);
    assert!(
        e.to_string()
            .starts_with("/nonexistent/suite.toml: cannot read the file")
    );
}

#[test]
fn glob_selects_cases() {
    assert!(glob_match("charge*", "charge small amount"));
    assert!(glob_match("*small*", "charge small amount"));
    assert!(glob_match("ch?rge*t", "charge small amount"));
    assert!(!glob_match("refund*", "charge small amount"));
    assert!(!glob_match("charge", "charge small amount"));
    assert!(glob_match("*", ""));
    let suite = parse_suite("payments.toml", GOOD).unwrap();
    let ids: Vec<&str> = suite
        .select(Some("*a*"))
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["charge small amount", "variants"]);
    assert_eq!(suite.select(None).len(), 3);
}
#[test]
fn request_suites_in_every_form() {
    let doc = serde_json::json!({"suite": "a", "case": [{"id": "x", "input": "hi"}]});
    assert_eq!(suite_from_request(0, &doc).unwrap().name, "a");
    let text = Value::String("suite = \"b\"\n[[case]]\nid = \"x\"\ninput = \"hi\"".into());
    assert_eq!(suite_from_request(1, &text).unwrap().name, "b");
    let named = serde_json::json!({"file": "c.toml", "text": "suite = \"c\"\n[[case]]\nid = 3"});
    let e = suite_from_request(2, &named).unwrap_err();
    assert_eq!(
        e.to_string(),
        "c.toml: case #1: id: expected a string, found an integer"
    );
    let e = suite_from_request(3, &serde_json::json!({"case": []})).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.field.as_deref()),
        ("suites[3]", Some("suite"))
    );
    let e = suite_from_request(4, &serde_json::json!({"text": 5})).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("text"));
    let e = suite_from_request(5, &serde_json::json!(7)).unwrap_err();
    assert_eq!(e.file, "suites[5]");
}

#[test]
fn plan_orders_attempts_and_filters_cases() {
    let suites = vec![parse_suite("payments.toml", GOOD).unwrap()];
    let planned: Vec<(&str, u32)> = plan(&suites, 2, Some("*a*"))
        .iter()
        .map(|p| (p.case.id.as_str(), p.attempt))
        .collect();
    assert_eq!(
        planned,
        [
            ("charge small amount", 1),
            ("charge small amount", 2),
            ("variants", 1),
            ("variants", 2)
        ]
    );
    assert_eq!(plan(&suites, 0, None).len(), 3, "repeat 0 still runs once");
    assert_eq!(planned_attempts(&suites, 2, Some("*a*")), 4);
    assert_eq!(planned_attempts(&suites, 0, None), 3);
    assert_eq!(
        planned_attempts(&suites, u32::MAX, None),
        3 * u64::from(u32::MAX)
    );
    assert!(plan(&suites, 1, Some("nothing")).is_empty());
}

#[test]
fn shape_errors_name_the_case_by_its_id_or_its_position() {
    for (text, shown) in [
        (
            "[1]",
            "s.json: a suite file is a table (object) at top level",
        ),
        (
            r#"{"suite": "s", "case": 5}"#,
            "s.json: case: expected an array of case tables",
        ),
        (
            r#"{"suite": "s", "case": [{"id": "a", "input": "x"}, 3]}"#,
            "s.json: case #2: a case is a table, found an integer",
        ),
        (
            r#"{"suite": "s", "cases": [{"id": "a", "input": "x"}, {"id": "b", "input": 3}]}"#,
            "s.json: case \"b\": input: expected a string, found an integer",
        ),
        (
            r#"{"suite": "s", "case": [{"id": 7, "input": 3}]}"#,
            "s.json: case #1: id: expected a string, found an integer",
        ),
        (
            r#"{"suite": "s", "case": [{"id": "q", "input": "x", "model": null}]}"#,
            "s.json: case \"q\": model: expected a table, found null",
        ),
        (
            r#"{"suite": "s", "case": [{"id": "q", "input": "x", "model_variants": [{}, {"strict": 1}]}]}"#,
            "s.json: case \"q\": model_variants[1].strict: bad model script: invalid type: integer `1`, expected a boolean",
        ),
        (
            r#"{"suite": "s", "case": [{"id": "q", "input": "x", "model": {"retries": 99}}]}"#,
            "s.json: case \"q\": model.retries: bad model script: retries is 99; the most is 10",
        ),
    ] {
        let e = parse_suite("s.json", text).unwrap_err();
        assert_eq!(e.to_string(), shown);
    }
}

#[test]
fn a_command_list_of_argv_lists_is_one_command_each() {
    let suite = parse_suite(
        "s.toml",
        &format!("{HEAD}command = [[\"a\", \"b\"], [\"c\"]]"),
    )
    .unwrap();
    let Assertion::Command(specs) = &suite.cases[0].assertions[0] else {
        panic!("{:?}", suite.cases[0].assertions);
    };
    let argvs: Vec<&[String]> = specs.iter().map(|s| s.argv.as_slice()).collect();
    assert_eq!(
        argvs,
        [&["a".to_owned(), "b".to_owned()][..], &["c".to_owned()][..]]
    );
    let e = err(&format!("{HEAD}command = [[]]"));
    assert_eq!(
        e.to_string(),
        "payments.toml: case \"a\": assert.command[0]: the list is empty: name the program to run"
    );
}

#[test]
fn decisions_merge_over_the_defaults_per_rule() {
    let suite = parse_suite(
        "d.toml",
        r#"
suite = "d"
[defaults]
decisions = { big = "approve", refunds = "deny" }
[[case]]
id = "a"
input = "x"
decisions = { big = "deny" }
[[case]]
id = "b"
input = "x"
"#,
    )
    .unwrap();
    let decided = |i: usize| {
        suite.cases[i]
            .decisions
            .iter()
            .map(|(rule, d)| (rule.as_str(), *d))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        decided(0),
        [("big", CaseDecision::Deny), ("refunds", CaseDecision::Deny)]
    );
    assert_eq!(
        decided(1),
        [
            ("big", CaseDecision::Approve),
            ("refunds", CaseDecision::Deny)
        ]
    );
}

#[test]
fn a_decision_other_than_approve_or_deny_names_its_rule() {
    let e =
        err("suite = \"d\"\n[[case]]\nid = \"a\"\ninput = \"x\"\ndecisions = { big = \"yes\" }\n");
    assert_eq!(
        e.to_string(),
        "payments.toml: case \"a\": decisions.big: expected \"approve\" or \"deny\", found \"yes\""
    );
    let e = err("suite = \"d\"\n[[case]]\nid = \"a\"\ninput = \"x\"\ndecisions = \"approve\"\n");
    assert!(e.to_string().contains("decisions: expected a table"), "{e}");
}
