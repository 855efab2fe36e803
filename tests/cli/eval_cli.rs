//! `spyglass eval` as a user runs it: the real binary on temp suite files, its table and
//! summary line, exit codes, the `JUnit` and JSON files it writes, a `--url` runtime and an
//! unreachable one, and the example payments suite's promised counts.

use crate::support::runtime::{server, test_config};
use serde_json::Value;
use spyglass::protocol::rest::EvalRunDetail;
use spyglass::runtime::RuntimeConfig;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn spyglass(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args(args)
        .env_remove("SPYGLASS_URL")
        .env_remove("CODESPAR_BASE_URL")
        .env_remove("CODESPAR_API_KEY")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

const PASSING: &str = r#"
suite = "greetings"

[[case]]
id = "says hello"
input = "Hi"
model = { sequence = [ { text = "Hello there" } ] }
[case.assert]
contains = "Hello"

[[case]]
id = "polite"
input = "Hi"
model = { default_text = "Hello, how can I help?" }
[case.assert]
regex = 'help\?$'
max_tokens = 500
"#;

const FAILING: &str = r#"
suite = "charges"

[defaults]
mocks = { "asaas/create_payment" = { id = "pay_1" } }

[[case]]
id = "charges"
input = "Charge"
model = { sequence = [ { tool_calls = [ { name = "asaas/create_payment" } ] }, { text = "pay_1" } ] }
[case.assert]
equals = "pay_1"

[[case]]
id = "wrong id"
input = "Charge"
model = { sequence = [ { text = "pay_7" } ] }
[case.assert]
equals = "pay_1"

[[case]]
id = "outage"
input = "Charge"
model = { fail_on_step = [ { step = 0, error = "Rate limited" } ] }

[[case]]
id = "later"
input = "Charge"
skip = true
"#;

fn last_line(out: &str) -> &str {
    out.trim_end().lines().last().unwrap_or_default()
}

#[test]
fn an_all_pass_suite_exits_zero_with_its_table_and_summary_line() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write(dir.path(), "greetings.toml", PASSING);
    let out = spyglass(&["eval", suite.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.starts_with("greetings  (2 passed, 0 failed, 0 errored, 0 skipped)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("passed") && stdout.contains("says hello") && stdout.contains("polite")
    );
    assert_eq!(
        last_line(&stdout),
        "2 passed, 0 failed, 0 errored, 0 skipped"
    );
    assert!(
        text(&out.stderr).contains("embedded runtime on http://127.0.0.1:"),
        "without --url the runtime is embedded"
    );
}

#[test]
fn a_failing_suite_exits_one_and_writes_junit_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let passing = write(dir.path(), "greetings.toml", PASSING);
    let failing = write(dir.path(), "charges.toml", FAILING);
    let junit = dir.path().join("junit.xml");
    let json = dir.path().join("results.json");
    let out = spyglass(&[
        "eval",
        passing.to_str().unwrap(),
        failing.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert_eq!(
        last_line(&stdout),
        "3 passed, 1 failed, 1 errored, 1 skipped"
    );
    let wrong = stdout.lines().find(|l| l.contains("wrong id")).unwrap();
    assert!(wrong.trim_start().starts_with("failed"), "{wrong}");
    assert!(
        wrong.contains("\"pay_1\"") && wrong.contains("\"pay_7\""),
        "expected and actual: {wrong}"
    );
    let outage = stdout.lines().find(|l| l.contains("outage")).unwrap();
    assert!(
        outage.trim_start().starts_with("error") && outage.contains("Rate limited"),
        "{outage}"
    );

    let xml = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
    let suites = testsuites(&xml);
    assert_eq!(
        suites,
        vec![
            ("greetings".to_owned(), 2, 0, 0, 0),
            ("charges".to_owned(), 4, 1, 1, 1),
        ],
        "{xml}"
    );
    let root = attrs(xml.lines().find(|l| l.contains("<testsuites")).unwrap());
    assert_eq!(
        (
            root["tests"].as_str(),
            root["failures"].as_str(),
            root["errors"].as_str()
        ),
        (Some("6"), Some("1"), Some("1"))
    );
    assert_eq!(xml.matches("<testcase ").count(), 6);
    assert_eq!(xml.matches("<failure ").count(), 1);
    assert_eq!(xml.matches("<error ").count(), 1);
    let failure = xml.lines().find(|l| l.contains("<failure ")).unwrap();
    assert!(
        failure.contains("expected") && failure.contains("pay_7"),
        "{failure}"
    );

    let detail: EvalRunDetail =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(detail.status, "completed");
    assert_eq!(detail.suites, vec!["greetings", "charges"]);
    assert_eq!(
        (detail.passed, detail.failed, detail.errored, detail.skipped),
        (3, 1, 1, 1)
    );
    assert_eq!(detail.cases.len(), 6);
    assert!(
        detail
            .cases
            .iter()
            .filter(|c| c.result.case != "later")
            .all(|c| c.session_id.is_some())
    );
}

/// (name, tests, failures, errors, skipped) of every `<testsuite>`.
fn testsuites(xml: &str) -> Vec<(String, u32, u32, u32, u32)> {
    xml.lines()
        .filter(|l| l.trim_start().starts_with("<testsuite "))
        .map(|line| {
            let a = attrs(line);
            let n = |k: &str| a[k].as_str().unwrap().parse::<u32>().unwrap();
            (
                a["name"].as_str().unwrap().to_owned(),
                n("tests"),
                n("failures"),
                n("errors"),
                n("skipped"),
            )
        })
        .collect()
}

/// The attributes of one XML start tag.
fn attrs(tag: &str) -> serde_json::Map<String, Value> {
    let re = regex::Regex::new(r#"(\w+)="([^"]*)""#).unwrap();
    re.captures_iter(tag)
        .map(|c| (c[1].to_owned(), Value::String(c[2].to_owned())))
        .collect()
}

#[test]
fn a_broken_file_exits_two_naming_file_case_and_field_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "greetings.toml", PASSING);
    let broken = write(
        dir.path(),
        "payments.toml",
        "suite = \"payments\"\n[[case]]\nid = \"charge\"\ninput = \"x\"\n[case.assert]\nregex = \"pay_(\"\n",
    );
    let junit = dir.path().join("junit.xml");
    let out = spyglass(&[
        "eval",
        good.to_str().unwrap(),
        broken.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("payments.toml: case \"charge\": assert.regex: invalid regex"),
        "{stderr}"
    );
    assert!(text(&out.stdout).is_empty(), "nothing ran");
    assert!(!junit.exists());

    let missing = dir.path().join("nope.toml");
    let out = spyglass(&["eval", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("nope.toml: cannot read the file"));

    for args in [
        vec!["eval", good.to_str().unwrap(), "--case", "nothing*"],
        vec!["eval", good.to_str().unwrap(), "--repeat", "0"],
        vec!["eval"],
        vec!["eval", good.to_str().unwrap(), "--url", "localhost:8000"],
    ] {
        let out = spyglass(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(!text(&out.stderr).trim().is_empty());
    }
}

#[test]
fn an_unreachable_runtime_exits_three_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write(dir.path(), "greetings.toml", PASSING);
    // A port that was free a moment ago: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = spyglass(&["eval", suite.to_str().unwrap(), "--url", &url]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot reach the runtime at {url}")),
        "{stderr}"
    );
    // In the words `tail` uses: the cause, then what to check.
    assert!(
        stderr.contains(&format!(
            "connection refused by 127.0.0.1; is `spyglass serve` running at {url}?"
        )),
        "{stderr}"
    );
}

#[test]
fn a_directory_runs_every_toml_suite_under_it_in_path_order() {
    let dir = tempfile::tempdir().unwrap();
    let suite =
        |name: &str| PASSING.replace("suite = \"greetings\"", &format!("suite = \"{name}\""));
    write(dir.path(), "b.toml", &suite("bravo"));
    write(dir.path(), "a.toml", &suite("alpha"));
    std::fs::create_dir(dir.path().join("more")).unwrap();
    write(&dir.path().join("more"), "c.toml", &suite("charlie"));
    // Neither is a suite: a checker script and an earlier run's results.
    write(dir.path(), "check.py", "print('ok')\n");
    write(dir.path(), "results.json", "{}");
    let out = spyglass(&["eval", dir.path().to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let headers: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("  (2 passed"))
        .map(|l| l.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(headers, ["alpha", "bravo", "charlie"], "{stdout}");
    assert_eq!(
        last_line(&stdout),
        "6 passed, 0 failed, 0 errored, 0 skipped"
    );

    let empty = tempfile::tempdir().unwrap();
    let out = spyglass(&["eval", empty.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no *.toml suite file under this directory"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_shell_glob_over_the_examples_skips_the_checker_script_with_a_note() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/evals");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let script = examples.join("check_payment.py");
    assert!(
        paths.contains(&script),
        "the examples keep a checker script"
    );
    let mut args = vec!["eval"];
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    let out = spyglass(&args);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "spyglass eval: skipping {}: not a suite file (.toml or .json)",
            script.display()
        )),
        "{stderr}"
    );
    // The payments example fails a case and errors another on purpose: exit 1, not 2.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let stdout = text(&out.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("payments  (")),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_url_the_run_happens_on_that_runtime_and_lands_in_its_history() {
    let handle = server(RuntimeConfig {
        api_keys: vec!["csk_eval".to_owned()],
        ..test_config()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let suite = write(dir.path(), "greetings.toml", PASSING);
    let url = handle.url();
    let run = |key: Option<&'static str>| {
        let (suite, url) = (suite.clone(), url.clone());
        tokio::task::spawn_blocking(move || {
            let mut args = vec!["eval", suite.to_str().unwrap(), "--url", &url];
            if let Some(key) = key {
                args.extend(["--api-key", key]);
            }
            spyglass(&args)
        })
    };
    let refused = run(None).await.unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("401 unauthorized"),
        "{}",
        text(&refused.stderr)
    );
    assert!(
        text(&refused.stderr).contains("pass --api-key KEY or set CODESPAR_API_KEY"),
        "{}",
        text(&refused.stderr)
    );
    let out = run(Some("csk_eval")).await.unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("embedded"));
    let summary = handle.runtime().eval_summary("default", None);
    assert_eq!(summary.suites.len(), 1);
    assert_eq!(summary.suites[0].suite, "greetings");
    assert_eq!(summary.suites[0].passed, 2);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_project_the_run_and_its_history_belong_to_that_project() {
    let handle = server(test_config()).await;
    let dir = tempfile::tempdir().unwrap();
    let suite = write(dir.path(), "greetings.toml", PASSING);
    let url = handle.url();
    let out = tokio::task::spawn_blocking(move || {
        spyglass(&[
            "eval",
            suite.to_str().unwrap(),
            "--url",
            &url,
            "--project",
            "prj_evals",
        ])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let ours = handle.runtime().eval_summary("prj_evals", None);
    assert_eq!(ours.suites.len(), 1, "{ours:?}");
    assert_eq!(ours.suites[0].passed, 2);
    let default = handle.runtime().eval_summary("default", None);
    assert!(default.suites.is_empty(), "{default:?}");
    handle.shutdown().await;
}

/// The counts an example suite's header promises (`# Expected on one run: …`), without
/// the trailing period or a parenthesised remark.
fn promised_counts(example: &Path) -> String {
    let header = std::fs::read_to_string(example).unwrap();
    header
        .lines()
        .find_map(|l| l.strip_prefix("# Expected on one run: "))
        .unwrap()
        .split(" (")
        .next()
        .unwrap()
        .trim_end_matches('.')
        .to_owned()
}

#[test]
fn the_example_payments_suite_gives_the_counts_its_header_promises() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/evals/payments.toml");
    let promised = promised_counts(&example);
    let out = spyglass(&["eval", example.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "a failure and an error");
    assert_eq!(last_line(&text(&out.stdout)), promised);
    // Exit 1 says why on stderr, once, as every role's error does.
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr
            .matches("spyglass eval: 1 failed and 1 errored of 8 case attempt(s)")
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(promised, "5 passed, 1 failed, 1 errored, 1 skipped");

    let out = spyglass(&[
        "eval",
        example.to_str().unwrap(),
        "--repeat",
        "4",
        "--case",
        "flaky*",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(
        last_line(&stdout),
        "2 passed, 2 failed, 0 errored, 0 skipped",
        "{stdout}"
    );
    // One row for the case, its four attempts as a strip, and the flaky line naming it.
    let row = stdout
        .lines()
        .find(|l| l.contains("flaky confirmation"))
        .unwrap_or_default();
    assert!(row.starts_with("  flaky "), "{stdout}");
    assert!(
        row.contains("flaky confirmation  PFPF    2/4  #2: "),
        "{stdout}"
    );
    assert!(
        stdout.contains("\n1 flaky: payments/flaky confirmation (2/4, 50 % [15–85 %])\n"),
        "{stdout}"
    );
}

#[test]
fn the_example_mocks_by_input_suite_passes_with_each_rule_answering() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/evals/mocks_by_input.toml");
    let header = std::fs::read_to_string(&example).unwrap();
    let promised = header
        .lines()
        .find_map(|l| l.strip_prefix("# Expected on one run: "))
        .unwrap()
        .trim_end_matches('.')
        .to_owned();
    let out = spyglass(&["eval", example.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert_eq!(last_line(&stdout), promised);
}

#[test]
fn the_example_what_was_sent_suite_gives_the_counts_its_header_promises() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/evals/what_was_sent.toml");
    let promised = promised_counts(&example);
    assert_eq!(promised, "2 passed, 1 failed, 0 errored, 0 skipped");
    let out = spyglass(&["eval", example.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(last_line(&stdout), promised);
    assert!(
        stdout.contains("operation_called: expected {\"args\":{\"value\":50}"),
        "{stdout}"
    );
}

#[test]
fn the_example_faithful_fake_suite_gives_the_counts_its_header_promises() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/evals/faithful_fake.toml");
    let promised = promised_counts(&example);
    assert_eq!(promised, "2 passed, 1 failed, 1 errored, 0 skipped");
    let out = spyglass(&["eval", example.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(last_line(&stdout), promised);
    assert!(
        stdout.contains("prompted: expected {\"contains\":\"pay_2\",\"step\":1}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("unscripted model call 1: the script has 1 step(s) and is strict"),
        "{stdout}"
    );
}

#[test]
fn the_example_custom_checks_suite_runs_its_python_checker() {
    crate::support::cli::python3();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/evals/custom_checks.toml");
    let promised = promised_counts(&example);
    assert_eq!(promised, "2 passed, 1 failed, 0 errored, 0 skipped");
    let dir = tempfile::tempdir().unwrap();
    let json_file = dir.path().join("results.json");
    // Run from elsewhere: the checker is found beside the suite file, not in the cwd.
    let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args(["eval", example.to_str().unwrap(), "--json"])
        .arg(&json_file)
        .current_dir(dir.path())
        .env_remove("SPYGLASS_URL")
        .env_remove("CODESPAR_BASE_URL")
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert_eq!(last_line(&stdout), promised);
    // The failing composition is shown whole under its row, one child a line.
    assert!(
        stdout.contains(
            "all[0]: command: charged 500, over the limit of 100\n           ✗ all (1 failed, 1 skipped)\n             ✗ command: charged 500, over the limit of 100\n             - contains (skipped)\n"
        ),
        "{stdout}"
    );
    let detail: EvalRunDetail =
        serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    let passing = detail
        .cases
        .iter()
        .find(|c| c.result.case == "charges within the limit and names the payment")
        .unwrap();
    let verdict = passing.result.assertions[0].actual.to_value();
    assert_eq!(verdict["pass"], true, "{verdict}");
    assert_eq!(verdict["score"], 1.0);
    assert_eq!(
        verdict["reason"],
        "1 payment(s) within 100, named in the answer"
    );
    let composed = detail
        .cases
        .iter()
        .find(|c| c.result.case == "a confirmation in either wording")
        .unwrap();
    let all = &composed.result.assertions[0];
    assert_eq!(all.children.len(), 3);
    assert_eq!(all.children[1].kind, "any");
    assert_eq!(all.children[1].children.len(), 2);
}

#[tokio::test]
async fn a_runtime_at_url_that_refuses_checkers_stops_the_run_naming_the_setting() {
    let handle = server(test_config()).await;
    let url = handle.url();
    let dir = tempfile::tempdir().unwrap();
    let suite = write(
        dir.path(),
        "checks.toml",
        "suite = \"checks\"\n[[case]]\nid = \"a\"\ninput = \"x\"\nmodel = { default_text = \"ok\" }\n[case.assert]\ncommand = [\"true\"]\n",
    );
    let out = tokio::task::spawn_blocking(move || {
        spyglass(&["eval", suite.to_str().unwrap(), "--url", &url])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("403 command_assertions_disabled"),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-command-assertions"), "{stderr}");
    handle.shutdown().await;
}

#[test]
fn a_bad_command_in_a_suite_file_stops_eval_naming_file_case_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write(
        dir.path(),
        "checks.toml",
        "suite = \"checks\"\n[[case]]\nid = \"a\"\ninput = \"x\"\n[case.assert]\nall = [ { command = { argv = [\"python3\"], timeout_ms = 0 } } ]\n",
    );
    let out = spyglass(&["eval", suite.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}: case \"a\": assert.all[0].command.timeout_ms: 0 is out of range: 1 to 120000 ms",
            suite.display()
        )),
        "{stderr}"
    );
}

/// `--repeat` up to 2^32 - 1 is counted, not planned: the runtime refuses a billion
/// attempts by its limit at once, and the command says so with exit 2.
#[test]
fn a_billion_repeats_are_refused_by_the_attempt_limit_without_planning_them() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write(dir.path(), "greetings.toml", PASSING);
    let out = spyglass(&["eval", "--repeat", "1000000000", suite.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("2000000000 case attempt(s) from 1 suite(s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "400 invalid_body: the run plans 2000000000 case attempts; the limit is 10000"
        ),
        "{stderr}"
    );
}
