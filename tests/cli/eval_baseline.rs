//! `spyglass eval --baseline` and `spyglass eval compare` as a user runs them: a run
//! written with `--json`, a later run against it (newly failing, fixed, newly flaky,
//! new, removed), `--fail-on regression`'s exit status, and broken baseline files.

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

/// One case per outcome; `answers` gives each case's final text, `contains = "ok"` judges.
fn suite(cases: &[(&str, &str)]) -> String {
    let mut out = String::from("suite = \"checkout\"\n");
    for (id, answer) in cases {
        out.push_str(&format!(
            "\n[[case]]\nid = \"{id}\"\ninput = \"go\"\nmodel = {{ default_text = \"{answer}\" }}\n[case.assert]\ncontains = \"ok\"\n"
        ));
    }
    out
}

/// A case whose two variants disagree: flaky under `--repeat 2`.
const FLAKY: &str = "\n[[case]]\nid = \"wobbles\"\ninput = \"go\"\nmodel_variants = [ { default_text = \"ok\" }, { default_text = \"no\" } ]\n[case.assert]\ncontains = \"ok\"\n";

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_run_against_its_baseline_names_each_change_and_fail_on_regression_exits_only_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let base_suite = write(
        dir.path(),
        "base.toml",
        &(suite(&[
            ("breaks", "ok"),
            ("heals", "no"),
            ("gone", "ok"),
            ("red", "no"),
            ("wobbles_was_fine", "ok"),
        ])
        .replace("wobbles_was_fine", "wobbles")),
    );
    let base = dir.path().join("base.json");
    let out = spyglass(&[
        "eval",
        path(&base_suite),
        "--repeat",
        "2",
        "--json",
        path(&base),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));

    let now_suite = write(
        dir.path(),
        "now.toml",
        &(suite(&[
            ("breaks", "no"),
            ("heals", "ok"),
            ("fresh", "ok"),
            ("red", "no"),
        ]) + FLAKY),
    );
    let now = dir.path().join("now.json");
    let out = spyglass(&[
        "eval",
        path(&now_suite),
        "--repeat",
        "2",
        "--baseline",
        path(&base),
        "--json",
        path(&now),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let compared = stdout
        .split_once(&format!("Compared with {}:\n", base.display()))
        .unwrap_or_else(|| panic!("no comparison in {stdout}"))
        .1;
    let lines: Vec<&str> = compared.lines().collect();
    assert!(
        lines[0].starts_with("  newly failing  checkout / breaks"),
        "{compared}"
    );
    assert!(
        lines[0].contains("passed → failed: contains:"),
        "{compared}"
    );
    assert!(
        lines[1].starts_with("  newly flaky    checkout / wobbles"),
        "{compared}"
    );
    assert!(
        lines[1].contains("passed → flaky (1/2 passed)"),
        "{compared}"
    );
    assert!(
        lines[2].starts_with("  fixed          checkout / heals"),
        "{compared}"
    );
    assert!(
        lines[3].starts_with("  new            checkout / fresh"),
        "{compared}"
    );
    assert!(
        lines[4].starts_with("  removed        checkout / gone"),
        "{compared}"
    );
    assert_eq!(
        lines[5],
        "2 regression(s), 1 fixed, 1 new, 1 removed, 0 unchanged, 1 still failing"
    );

    // --fail-on regression: the regressions still fail the command, and say so once.
    let out = spyglass(&[
        "eval",
        path(&now_suite),
        "--repeat",
        "2",
        "--baseline",
        path(&base),
        "--fail-on",
        "regression",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "2 regression(s) against the baseline {}",
            base.display()
        )),
        "{stderr}"
    );

    // The same comparison without running anything.
    let out = spyglass(&["eval", "compare", path(&base), path(&now)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    assert!(
        printed.starts_with(&format!("Compared with {}:\n", base.display())),
        "{printed}"
    );
    assert!(printed.contains(&lines[1..].join("\n")), "{printed}");
}

#[test]
fn a_case_failing_in_both_runs_is_no_regression() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "s.toml",
        &suite(&[("good", "ok"), ("red", "no")]),
    );
    let base = dir.path().join("base.json");
    let out = spyglass(&["eval", path(&file), "--json", path(&base)]);
    assert_eq!(out.status.code(), Some(1));
    let now = dir.path().join("now.json");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            path(&file),
            "--baseline",
            path(&base),
            "--json",
            path(&now),
        ];
        args.extend_from_slice(extra);
        spyglass(&args)
    };
    // Without --fail-on the failing case still fails the command.
    assert_eq!(run(&[]).status.code(), Some(1));
    let out = run(&["--fail-on", "regression"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout)
            .contains("0 regression(s), 0 fixed, 0 new, 0 removed, 1 unchanged, 1 still failing")
    );
    // compare: `any` fails on the failing case, `regression` does not.
    let out = spyglass(&["eval", "compare", path(&base), path(&now)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("1 case(s) fail or are flaky in"),
        "{}",
        text(&out.stderr)
    );
    let out = spyglass(&[
        "eval",
        "compare",
        path(&base),
        path(&now),
        "--fail-on",
        "regression",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("  no case changed\n"));
}

#[test]
fn broken_and_mismatched_baselines_are_refused_naming_the_file_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "s.toml", &suite(&[("good", "ok")]));
    let broken = write(dir.path(), "broken.json", "{\"run_id\": ");
    let out = spyglass(&["eval", path(&file), "--baseline", path(&broken)]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}: not a `spyglass eval --json` results file",
            broken.display()
        )),
        "{stderr}"
    );
    assert!(
        !stderr.contains("embedded runtime"),
        "nothing ran: {stderr}"
    );
    let missing = dir.path().join("missing.json");
    let out = spyglass(&["eval", "compare", path(&missing), path(&broken)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!("{}: cannot read the file", missing.display())),
        "{}",
        text(&out.stderr)
    );
    // A results file of other suites.
    let other = write(
        dir.path(),
        "o.toml",
        &suite(&[("good", "ok")]).replace("checkout", "refunds"),
    );
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    assert_eq!(
        spyglass(&["eval", path(&file), "--json", path(&a)])
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        spyglass(&["eval", path(&other), "--json", path(&b)])
            .status
            .code(),
        Some(0)
    );
    let out = spyglass(&["eval", "compare", path(&a), path(&b)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains(&format!(
            "{} and {} share no suite ({} has checkout; {} has refunds)",
            a.display(),
            b.display(),
            a.display(),
            b.display()
        )),
        "{}",
        text(&out.stderr)
    );
    // --fail-on regression needs a baseline.
    let out = spyglass(&["eval", path(&file), "--fail-on", "regression"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--fail-on regression needs --baseline FILE"));
}
