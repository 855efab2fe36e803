//! `spyglass eval --baseline` and `spyglass eval compare` as a user runs them: a run
//! written with `--json`, a later run against it (newly failing, fixed, inconclusive,
//! new, removed), `--fail-on regression`'s exit status on significant drops only, the
//! statistics of repeated runs, quarantine files, and broken baseline files.

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
        lines[0].ends_with("2/2 → 0/2: too few attempts for a test (p = 0.167 at best; 3 attempts in each run could reach 0.05); counted as a regression because every attempt flipped"),
        "{compared}"
    );
    // 2/2 → 1/2 is within noise: reported with its p-value, no regression.
    assert!(
        lines[1].starts_with("  inconclusive   checkout / wobbles"),
        "{compared}"
    );
    assert!(
        lines[1].contains("passed → flaky (1/2 passed) — 2/2 → 1/2: p = 0.5 > 0.05, within noise"),
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
        "1 regression(s), 1 fixed, 1 new, 1 removed, 0 unchanged, 1 inconclusive, 1 still failing"
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
            "1 regression(s) against the baseline {}",
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

/// A case whose attempts cycle through `answers` (`ok` passes, anything else fails).
fn cycling(id: &str, answers: &[&str]) -> String {
    let variants: Vec<String> = answers
        .iter()
        .map(|a| format!("{{ default_text = \"{a}\" }}"))
        .collect();
    format!(
        "\n[[case]]\nid = \"{id}\"\ninput = \"go\"\nmodel_variants = [ {} ]\n[case.assert]\ncontains = \"ok\"\n",
        variants.join(", ")
    )
}

fn json_of(file: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

/// The 95 % Wilson score interval, from its formula (z = 1.959964).
fn wilson(passed: f64, n: f64) -> (f64, f64) {
    let z: f64 = 1.959_964;
    let p = passed / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    (centre - half, centre + half)
}

#[test]
fn a_repeated_run_prints_each_case_once_with_its_strip_and_names_the_flaky_ones() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "payments.toml",
        &(String::from("suite = \"payments\"\n")
            + &cycling("charge", &["ok", "ok", "no", "ok", "no"])
            + &cycling("refund", &["ok"])),
    );
    let results = dir.path().join("r.json");
    let out = spyglass(&[
        "eval",
        path(&file),
        "--repeat",
        "5",
        "--json",
        path(&results),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("payments  (8 passed, 2 failed, 0 errored, 0 skipped; pass rate 80 % [49–94 %], pass@k 100 %, pass^k 50 %, flip rate 38 %, 1 flaky)"),
        "{stdout}"
    );
    let charge = lines.iter().find(|l| l.contains(" charge ")).unwrap();
    assert!(charge.starts_with("  flaky "), "{charge}");
    assert!(charge.contains("  PPFPF    3/5  #3: contains:"), "{charge}");
    let refund = lines.iter().find(|l| l.contains(" refund ")).unwrap();
    assert!(refund.trim_end().ends_with("PPPPP    5/5"), "{refund}");
    // One row per case, not one per attempt.
    assert_eq!(stdout.matches(" charge ").count(), 1, "{stdout}");
    assert!(!stdout.contains("#2 "), "{stdout}");
    assert!(
        stdout.contains("\n1 flaky: payments/charge (3/5, 60 % [23–88 %])\n8 passed, 2 failed, 0 errored, 0 skipped\n"),
        "{stdout}"
    );

    let json = json_of(&results);
    let case = &json["stats"]["cases"][0];
    assert_eq!(case["id"], "payments/charge");
    assert_eq!(case["strip"], "PPFPF");
    assert_eq!(
        (case["passed"].as_u64(), case["judged"].as_u64()),
        (Some(3), Some(5))
    );
    assert_eq!(case["pass_rate"], 0.6);
    let (lo, hi) = wilson(3.0, 5.0);
    let bounds = case["wilson_95"].as_array().unwrap();
    assert!((bounds[0].as_f64().unwrap() - lo).abs() < 1e-5, "{case}");
    assert!((bounds[1].as_f64().unwrap() - hi).abs() < 1e-5, "{case}");
    assert_eq!(case["k"], 5);
    assert_eq!(case["pass_at_k"], true);
    assert_eq!(case["pass_all_k"], false);
    assert_eq!(case["flips"], 3);
    assert_eq!(case["flip_rate"], 0.75);
    assert_eq!(case["flaky"], true);
    let suite = &json["stats"]["suites"][0];
    assert_eq!(
        (suite["passed"].as_u64(), suite["judged"].as_u64()),
        (Some(8), Some(10))
    );
    let (lo, _) = wilson(8.0, 10.0);
    assert!((suite["wilson_95"][0].as_f64().unwrap() - lo).abs() < 1e-5);
    assert_eq!(suite["pass_at_k"], 1.0);
    assert_eq!(suite["pass_all_k"], 0.5);
    assert_eq!(suite["flip_rate"], 0.375);
    assert_eq!(suite["flaky"], 1);
    // The file is still a baseline.
    assert_eq!(json["cases"].as_array().unwrap().len(), 10);
}

#[test]
fn only_a_significant_drop_is_a_regression_and_the_p_value_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let base_suite = write(
        dir.path(),
        "base.toml",
        &(String::from("suite = \"payments\"\n")
            + &cycling("charge", &["ok"])
            + &cycling("refund", &["ok", "ok", "ok", "no", "no", "no"])),
    );
    let base = dir.path().join("base.json");
    let out = spyglass(&[
        "eval",
        path(&base_suite),
        "--repeat",
        "6",
        "--json",
        path(&base),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let now_suite = write(
        dir.path(),
        "now.toml",
        &(String::from("suite = \"payments\"\n")
            + &cycling("charge", &["ok", "no", "no", "no", "no", "no"])
            + &cycling("refund", &["ok", "ok", "no", "no", "no", "no"])),
    );
    let now = dir.path().join("now.json");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            path(&now_suite),
            "--repeat",
            "6",
            "--baseline",
            path(&base),
            "--json",
            path(&now),
            "--fail-on",
            "regression",
        ];
        args.extend_from_slice(extra);
        spyglass(&args)
    };
    let out = run(&[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    // 6/6 → 1/6: hypergeometric, C(7,1)·C(5,5)/C(12,6) = 7/924.
    assert!(
        stdout
            .contains("  newly flaky    payments / charge  passed → flaky (1/6 passed): contains:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("— 6/6 → 1/6: p = 0.008 ≤ 0.05, a significant drop\n"),
        "{stdout}"
    );
    // 3/6 → 2/6: (C(5,0)C(7,6) + C(5,1)C(7,5) + C(5,2)C(7,4))/C(12,6) = 462/924 = 0.5.
    assert!(
        stdout.contains("  inconclusive   payments / refund  flaky (3/6 passed) → flaky (2/6 passed) — 3/6 → 2/6: p = 0.5 > 0.05, within noise\n"),
        "{stdout}"
    );
    assert!(
        text(&out.stderr).contains("1 regression(s) against the baseline"),
        "{}",
        text(&out.stderr)
    );
    let json = json_of(&now);
    let cases = json["comparison"]["cases"].as_array().unwrap();
    let charge = cases.iter().find(|c| c["case"] == "charge").unwrap();
    assert_eq!(charge["change"], "newly flaky");
    assert_eq!(charge["regression"], true);
    assert!((charge["p_value"].as_f64().unwrap() - 7.0 / 924.0).abs() < 1e-12);
    assert_eq!(charge["before"]["passed"], 6);
    assert_eq!(charge["after"]["passed"], 1);
    let refund = cases.iter().find(|c| c["case"] == "refund").unwrap();
    assert_eq!(refund["change"], "inconclusive");
    assert_eq!(refund["regression"], false);
    assert!((refund["p_value"].as_f64().unwrap() - 0.5).abs() < 1e-12);
    assert_eq!(json["comparison"]["significance"], 0.05);
    assert_eq!(json["comparison"]["regressions"], 1);

    // At a stricter level 7/924 is noise too, and nothing fails the build.
    let out = run(&["--significance", "0.001"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("p = 0.008 > 0.001, within noise"));
    // The same comparisons without running anything.
    let compare = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            "compare",
            path(&base),
            path(&now),
            "--fail-on",
            "regression",
        ];
        args.extend_from_slice(extra);
        spyglass(&args)
    };
    assert_eq!(compare(&[]).status.code(), Some(1));
    let out = compare(&["--significance", "0.001"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let out = spyglass(&[
        "eval",
        "compare",
        path(&base),
        path(&now),
        "--significance",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("is not a level between 0 and 1"));
}

#[test]
fn one_attempt_each_that_flipped_is_a_regression_by_its_own_rule() {
    let dir = tempfile::tempdir().unwrap();
    let base_suite = write(dir.path(), "base.toml", &suite(&[("breaks", "ok")]));
    let base = dir.path().join("base.json");
    let out = spyglass(&["eval", path(&base_suite), "--json", path(&base)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let now_suite = write(dir.path(), "now.toml", &suite(&[("breaks", "no")]));
    let out = spyglass(&[
        "eval",
        path(&now_suite),
        "--baseline",
        path(&base),
        "--fail-on",
        "regression",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("— 1/1 → 0/1: too few attempts for a test (p = 0.5 at best; 3 attempts in each run could reach 0.05); counted as a regression because every attempt flipped\n"),
        "{stdout}"
    );
}

#[test]
fn quarantined_cases_run_and_report_but_never_fail_the_build() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "payments.toml",
        &(String::from("suite = \"payments\"\n")
            + &cycling("charge", &["ok", "no", "no"])
            + &cycling("refund", &["ok"])
            + &cycling("old", &["ok"])),
    );
    let quarantine = write(
        dir.path(),
        "quarantine.toml",
        "[[case]]\nid = \"payments/charge\"\nreason = \"the model rounds amounts\"\nexpires = 2999-12-31\n\n[[case]]\nid = \"payments/refund\"\nreason = \"was flaky last week\"\n\n[[case]]\nid = \"payments/old\"\nreason = \"an old outage\"\nexpires = 2020-01-01\n",
    );
    let results = dir.path().join("r.json");
    let out = spyglass(&[
        "eval",
        path(&file),
        "--repeat",
        "3",
        "--quarantine",
        path(&quarantine),
        "--json",
        path(&results),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    // The failing case still ran and is reported.
    assert!(stdout.contains("PFF"), "{stdout}");
    assert!(
        stdout.contains(&format!("Quarantine ({}):\n", quarantine.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains("  payments/charge  1/3 passed, not counted (the model rounds amounts)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  payments/refund  passed every attempt (3/3): can leave quarantine\n"),
        "{stdout}"
    );
    assert!(
        stderr.contains(&format!(
            "warning: {}: the quarantine of payments/old expired on 2020-01-01 (an old outage); its failures count again",
            quarantine.display()
        )),
        "{stderr}"
    );
    let json = json_of(&results);
    let entries = json["quarantine"]["entries"].as_array().unwrap();
    assert_eq!(entries[1]["can_leave"], true);
    assert_eq!(entries[2]["expired"], true);

    // Without the file the same run fails.
    let out = spyglass(&["eval", path(&file), "--repeat", "3"]);
    assert_eq!(out.status.code(), Some(1));
    // An expired entry shields nothing: its failing case fails the build again.
    let expired = write(
        dir.path(),
        "expired.toml",
        "[[case]]\nid = \"payments/charge\"\nreason = \"x\"\nexpires = 2020-01-01\n",
    );
    let out = spyglass(&[
        "eval",
        path(&file),
        "--repeat",
        "3",
        "--quarantine",
        path(&expired),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("the quarantine of payments/charge expired on 2020-01-01"));
}

#[test]
fn a_bad_quarantine_file_is_refused_naming_the_entry_and_field_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "s.toml", &suite(&[("good", "ok")]));
    let bad = write(
        dir.path(),
        "q.toml",
        "[[case]]\nid = \"checkout/good\"\nreason = \"x\"\n\n[[case]]\nid = \"checkout/other\"\nreason = \"y\"\nexpires = \"next week\"\n",
    );
    let out = spyglass(&["eval", path(&file), "--quarantine", path(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}: case \"checkout/other\": expires: expected a date like 2026-12-31, found \"next week\"",
            bad.display()
        )),
        "{stderr}"
    );
    assert!(
        !stderr.contains("embedded runtime"),
        "nothing ran: {stderr}"
    );
    let missing = dir.path().join("missing.toml");
    let out = spyglass(&["eval", path(&file), "--quarantine", path(&missing)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(&format!("{}: cannot read the file", missing.display())));
}
