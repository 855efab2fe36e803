//! `spyglass eval --store F --history`: pass-rate history accumulates across runs of the
//! real binary on one store file, and each case's last outcomes are printed.

use crate::support::cli::spyglass;
use serde_json::json;

#[test]
fn eval_with_a_store_accumulates_history_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("confirm.json");
    std::fs::write(
        &suite,
        json!({
            "suite": "confirm",
            "cases": [
                {"id": "steady", "input": "x", "model": {"sequence": [{"text": "pay_1"}]},
                 "assert": {"contains": "pay_1"}},
                {"id": "broken", "input": "x", "model": {"sequence": [{"text": "nothing"}]},
                 "assert": {"contains": "pay_1"}}
            ]
        })
        .to_string(),
    )
    .unwrap();
    let store = dir.path().join("evals.db");
    let run = |extra: &[&str]| {
        let out = spyglass(&[
            "eval",
            suite.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ])
        .args(extra)
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(1), "a case fails: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = run(&[]);
    assert!(
        !first.contains("History"),
        "no history unless asked: {first}"
    );
    run(&[]);
    let third = run(&["--history"]);
    let line = |case: &str| {
        third
            .lines()
            .find(|l| l.contains(&format!("confirm / {case}")))
            .unwrap_or_else(|| panic!("no {case} line in {third}"))
            .to_owned()
    };
    assert!(third.contains("History (last 10 outcomes"), "{third}");
    let steady = line("steady");
    assert!(
        steady.contains(" PPP ") && steady.ends_with("3/3 passed"),
        "{steady}"
    );
    let broken = line("broken");
    assert!(
        broken.contains(" FFF ") && broken.ends_with("0/3 passed"),
        "{broken}"
    );
    // --history N shows the last N; without --store the history is this run's only.
    let last = run(&["--history", "2"]);
    assert!(last.contains("History (last 2 outcomes"), "{last}");
    let out = spyglass(&["eval", suite.to_str().unwrap(), "--history"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let steady = text
        .lines()
        .find(|l| l.contains("confirm / steady"))
        .unwrap();
    assert!(steady.ends_with("1/1 passed"), "{steady}");
}

#[test]
fn store_and_history_are_refused_with_a_url() {
    let out = spyglass(&["eval", "x.json", "--url", "http://127.0.0.1:9", "--history"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--history"), "{stderr}");
}
