//! `spyglass import` and `spyglass view` on files the real tools wrote
//! (tests/fixtures/imports): per-status counts in the runtime's history equal each tool's
//! own summary, broken files are exit 2 naming the file, and pytest's `JUnit` regenerated.

use crate::support::runtime::{server, test_config};
use serde_json::Value;
use spyglass::eval::history::{EvalHistory, HistorySettings};
use spyglass::protocol::decode;
use spyglass::roles::import::{ImportArgs, read_all, replay_text};
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

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/imports")
        .join(name)
}

/// (passed, failed, errored, skipped) as the tool itself summed them up in the file.
fn tool_summary(name: &str) -> (u64, u64, u64, u64) {
    let path = fixture(name);
    let n = |v: &Value| v.as_u64().unwrap();
    match name {
        "pytest.xml" => {
            let xml = std::fs::read_to_string(path).unwrap();
            let attr = |key: &str| -> u64 {
                let at = xml.find(&format!(" {key}=\"")).unwrap() + key.len() + 3;
                xml[at..].split('"').next().unwrap().parse().unwrap()
            };
            let (tests, failures, errors, skipped) = (
                attr("tests"),
                attr("failures"),
                attr("errors"),
                attr("skipped"),
            );
            (
                tests - failures - errors - skipped,
                failures,
                errors,
                skipped,
            )
        }
        "promptfoo.json" => {
            let json: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            let stats = &json["results"]["stats"];
            (
                n(&stats["successes"]),
                n(&stats["failures"]),
                n(&stats["errors"]),
                0,
            )
        }
        "inspect.json" => {
            let json: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            let results = &json["results"];
            let (total, completed) = (
                n(&results["total_samples"]),
                n(&results["completed_samples"]),
            );
            let accuracy = results["scores"][0]["metrics"]["accuracy"]["value"]
                .as_f64()
                .unwrap();
            let passed = (accuracy * completed as f64).round() as u64;
            (passed, completed - passed, total - completed, 0)
        }
        other => panic!("no summary reader for {other}"),
    }
}

fn counts(suite: &spyglass::protocol::rest::SuiteSummary) -> (u64, u64, u64, u64) {
    (
        u64::from(suite.passed),
        u64::from(suite.failed),
        u64::from(suite.errored),
        u64::from(suite.skipped),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_counts_equal_each_tools_own_summary_in_the_runtime_history() {
    let handle = server(test_config()).await;
    let url = handle.url();
    let files: Vec<String> = [
        "pytest.xml",
        "promptfoo.json",
        "inspect.json",
        "inspect.eval",
    ]
    .iter()
    .map(|name| fixture(name).display().to_string())
    .collect();
    let out = tokio::task::spawn_blocking(move || {
        let mut args = vec!["import", "--url", &url];
        args.extend(files.iter().map(String::as_str));
        spyglass(&args)
    })
    .await
    .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("pytest.xml: JUnit XML, run junit-20261123T202110-"),
        "{stdout}"
    );
    assert!(
        stdout.contains("2 passed, 2 failed, 1 errored, 1 skipped"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("posted ").count(), 4, "{stdout}");
    let summary = handle.runtime().eval_summary("default", None);
    let suite = |name: &str| {
        summary
            .suites
            .iter()
            .find(|s| s.suite == name)
            .unwrap_or_else(|| panic!("no suite {name} in {summary:?}"))
    };
    assert_eq!(counts(suite("pytest")), tool_summary("pytest.xml"));
    assert_eq!(
        counts(suite("greeting checks")),
        tool_summary("promptfoo.json")
    );
    // The .json and .eval logs are two runs of the same task: twice the log's counts.
    let (p, f, e, s) = tool_summary("inspect.json");
    assert_eq!(counts(suite("arithmetic")), (2 * p, 2 * f, 2 * e, 2 * s));
    assert_eq!(suite("arithmetic").runs, 2);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn importing_the_same_file_again_does_not_count_its_results_twice() {
    let handle = server(test_config()).await;
    let url = handle.url();
    let file = fixture("pytest.xml").display().to_string();
    let import = |url: String, file: String| {
        tokio::task::spawn_blocking(move || spyglass(&["import", "--url", &url, &file]))
    };
    let first = import(url.clone(), file.clone()).await.unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert!(
        !text(&first.stdout).contains("already there"),
        "{}",
        text(&first.stdout)
    );
    let again = import(url, file).await.unwrap();
    let stdout = text(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    let (p, f, e, s) = tool_summary("pytest.xml");
    let total = p + f + e + s;
    assert!(stdout.contains("posted 0 event(s)"), "{stdout}");
    assert!(
        stdout.contains(&format!("{total} result(s) of run junit-")),
        "{stdout}"
    );
    assert!(stdout.contains("already there"), "{stdout}");
    let summary = handle.runtime().eval_summary("default", None);
    let suite = summary
        .suites
        .iter()
        .find(|s| s.suite == "pytest")
        .unwrap_or_else(|| panic!("no pytest suite in {summary:?}"));
    assert_eq!(counts(suite), (p, f, e, s));
    assert_eq!(
        suite.runs, 1,
        "the same file is one run, however often imported"
    );
    handle.shutdown().await;
}

#[test]
fn view_plays_the_same_events_into_the_inspectors_history() {
    let files = ["pytest.xml", "promptfoo.json", "inspect.eval"]
        .iter()
        .map(|name| fixture(name))
        .collect();
    let imported = read_all(&ImportArgs { files, suite: None }).unwrap();
    let mut history = EvalHistory::new(HistorySettings::default());
    let text = replay_text(&imported);
    for line in text.lines() {
        assert!(history.apply_frame(&decode(line).unwrap()), "{line}");
    }
    let summary = history.summary();
    let find = |name: &str| summary.suites.iter().find(|s| s.suite == name).unwrap();
    assert_eq!(counts(find("pytest")), tool_summary("pytest.xml"));
    assert_eq!(
        counts(find("greeting checks")),
        tool_summary("promptfoo.json")
    );
    assert_eq!(counts(find("arithmetic")), tool_summary("inspect.json"));
}

/// Writes `bytes` as `name` in a temp dir and runs `import` on it with an unreachable
/// runtime: reading fails first, so nothing is ever sent.
fn import_bytes(name: &str, bytes: &[u8]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let out = spyglass(&[
        "import",
        "--url",
        "http://127.0.0.1:9",
        path.to_str().unwrap(),
    ]);
    (out.status.code(), text(&out.stderr))
}

#[test]
fn broken_files_are_exit_2_naming_the_file_and_what_was_wrong() {
    let xml = std::fs::read(fixture("pytest.xml")).unwrap();
    let json = std::fs::read(fixture("promptfoo.json")).unwrap();
    let inspect = std::fs::read(fixture("inspect.json")).unwrap();
    let zip = std::fs::read(fixture("inspect.eval")).unwrap();
    let deep_xml = format!("<testsuites>{}", "<testsuite>".repeat(10_000));
    let deep_json = format!(
        "{{\"version\":2,\"status\":\"success\",\"eval\":{{\"task\":\"t\"}},\"samples\":[{}{}]}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let cases: Vec<(&str, &[u8], &str)> = vec![
        ("cut.xml", &xml[..xml.len() / 2], "damaged JUnit XML"),
        (
            "cut.json",
            &json[..json.len() / 2],
            "damaged promptfoo results JSON",
        ),
        (
            "cut-log.json",
            &inspect[..inspect.len() / 2],
            "damaged Inspect AI log (.json)",
        ),
        (
            "cut.eval",
            &zip[..zip.len() / 2],
            "not a readable ZIP archive",
        ),
        ("deep.xml", deep_xml.as_bytes(), "nest deeper than 256"),
        (
            "deep.json",
            deep_json.as_bytes(),
            "recursion limit exceeded",
        ),
        (
            "suite.toml",
            b"suite = \"x\"\n",
            "not a results file spyglass can import",
        ),
        ("other.json", b"{\"cases\": []}", "expected JUnit XML"),
    ];
    for (name, bytes, want) in cases {
        let (code, stderr) = import_bytes(name, bytes);
        assert_eq!(code, Some(2), "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: {stderr}");
        assert!(stderr.contains(want), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    }
}

#[test]
fn a_huge_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.json");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let started = std::time::Instant::now();
    let out = spyglass(&[
        "import",
        "--url",
        "http://127.0.0.1:9",
        path.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("huge.json: 1073741824 bytes is more than"),
        "{stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partly_readable_file_imports_what_it_can_and_says_what_it_skipped() {
    let handle = server(test_config()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("partial.xml");
    std::fs::write(
        &path,
        r#"<testsuite name="partial" tests="3" failures="1">
             <testcase name="ok"/><testcase classname="nameless"/>
             <testcase name="bad"><failure message="no"/></testcase></testsuite>"#,
    )
    .unwrap();
    let url = handle.url();
    let out = tokio::task::spawn_blocking(move || {
        spyglass(&[
            "import",
            "--url",
            &url,
            "--suite",
            "renamed",
            path.to_str().unwrap(),
        ])
    })
    .await
    .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("1 passed, 1 failed, 0 errored, 0 skipped"),
        "{stdout}"
    );
    assert!(
        stdout.contains("skipped 1 unreadable entry: a <testcase> without a name"),
        "{stdout}"
    );
    assert!(stdout.contains("posted 2 event(s)"), "{stdout}");
    let summary = handle.runtime().eval_summary("default", None);
    assert_eq!(summary.suites.len(), 1);
    assert_eq!(summary.suites[0].suite, "renamed");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_file_among_good_ones_posts_nothing() {
    let handle = server(test_config()).await;
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.xml");
    std::fs::write(&bad, "<testsuite name=\"x\"><testcase name=\"a\">").unwrap();
    let (url, good) = (handle.url(), fixture("pytest.xml"));
    let out = tokio::task::spawn_blocking(move || {
        spyglass(&[
            "import",
            "--url",
            &url,
            good.to_str().unwrap(),
            bad.to_str().unwrap(),
        ])
    })
    .await
    .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.xml: damaged JUnit XML: the file ends inside <testcase> (truncated?)"),
        "{stderr}"
    );
    assert!(
        handle
            .runtime()
            .eval_summary("default", None)
            .suites
            .is_empty()
    );
    handle.shutdown().await;
}

#[test]
fn without_a_runtime_import_says_to_pass_url_or_use_view() {
    let out = spyglass(&["import", fixture("pytest.xml").to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pass --url URL"), "{stderr}");
    assert!(stderr.contains("spyglass view FILE"), "{stderr}");
}

/// pytest in a venv of its own under target/ (made on first use, like the SDK's), run on
/// the fixture's source now: the report it writes imports with the same counts as the
/// committed fixture and as pytest's own summary line.
#[test]
fn pytest_junit_regenerated_with_the_real_tool_imports_alike() {
    let python = crate::support::venv::tool_python("import-venv", "pytest==9.2.0", "pytest");
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.xml");
    let out = Command::new(&python)
        .current_dir(fixture("src"))
        .args([
            "-m",
            "pytest",
            "test_sample.py",
            "-q",
            "-p",
            "no:cacheprovider",
        ])
        .arg(format!("--junitxml={}", report.display()))
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("2 failed, 2 passed, 1 skipped, 1 error"),
        "{stdout}"
    );
    let fresh = read_all(&ImportArgs {
        files: vec![report],
        suite: None,
    })
    .unwrap();
    let kept = read_all(&ImportArgs {
        files: vec![fixture("pytest.xml")],
        suite: None,
    })
    .unwrap();
    assert_eq!(fresh[0].counts(), kept[0].counts());
    assert_eq!(fresh[0].summary, Some(fresh[0].counts()));
    let names = |i: &spyglass::import::Imported| {
        let mut names: Vec<_> = i
            .results
            .iter()
            .map(|r| (r.case.clone(), r.status))
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        names
    };
    assert_eq!(names(&fresh[0]), names(&kept[0]));
}

/// Inspect AI from `PyPI` in a venv of its own, the fixture's task run now on
/// `mockllm/model` in both log formats: each imports with the counts Inspect's own
/// `results` give, and like the committed fixtures.
#[test]
fn inspect_logs_regenerated_with_the_real_tool_import_alike() {
    let python = crate::support::venv::tool_python(
        "import-inspect-venv",
        "inspect-ai==0.3.285",
        "inspect-ai",
    );
    let dir = tempfile::tempdir().unwrap();
    for format in ["eval", "json"] {
        let logs = dir.path().join(format);
        let out = Command::new(&python)
            .current_dir(fixture("src"))
            .args([
                "-m",
                "inspect_ai",
                "eval",
                "inspect_task.py",
                "--display",
                "none",
            ])
            .args(["--log-format", format, "--log-dir"])
            .arg(&logs)
            .output()
            .unwrap();
        assert!(out.status.success(), "inspect eval: {}", text(&out.stderr));
        let log = std::fs::read_dir(&logs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == format))
            .unwrap_or_else(|| panic!("no .{format} log in {}", logs.display()));
        let fresh = read_all(&ImportArgs {
            files: vec![log],
            suite: None,
        })
        .unwrap();
        let c = fresh[0].counts();
        assert_eq!(
            (c.passed, c.failed, c.errored, c.skipped),
            tool_summary("inspect.json")
        );
        assert_eq!(fresh[0].skipped, 0);
    }
}

/// promptfoo from npm into target/import-npm (installed on first use), the fixture's
/// config run now with its echo provider and the scripted failing one: the results
/// import with the counts promptfoo printed and wrote.
#[test]
fn promptfoo_results_regenerated_with_the_real_tool_import_alike() {
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/import-npm");
    let bin = prefix.join("node_modules/.bin/promptfoo");
    let ready = Command::new(&bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| text(&o.stdout).contains("0.121.20"));
    if !ready {
        std::fs::create_dir_all(&prefix).unwrap();
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg("promptfoo@0.121.20")
            .output()
            .unwrap_or_else(|err| {
                panic!("npm: cannot run ({err}); install Node.js 20+ with npm (apt-get install nodejs npm)")
            });
        assert!(
            out.status.success(),
            "npm install promptfoo: {}",
            text(&out.stderr)
        );
    }
    let dir = tempfile::tempdir().unwrap();
    for name in ["promptfooconfig.yaml", "failing_provider.js"] {
        std::fs::copy(fixture("src").join(name), dir.path().join(name)).unwrap();
    }
    let out = Command::new(&bin)
        .current_dir(dir.path())
        .args(["eval", "-c", "promptfooconfig.yaml", "-o", "results.json"])
        .args(["--no-cache", "--no-progress-bar", "--no-table"])
        .env("PROMPTFOO_DISABLE_TELEMETRY", "1")
        .env("PROMPTFOO_DISABLE_UPDATE", "1")
        .env("PROMPTFOO_CONFIG_DIR", dir.path().join(".promptfoo"))
        .output()
        .unwrap();
    let printed = text(&out.stdout) + &text(&out.stderr);
    assert!(printed.contains("2 passed"), "{printed}");
    assert!(printed.contains("1 error"), "{printed}");
    let fresh = read_all(&ImportArgs {
        files: vec![dir.path().join("results.json")],
        suite: None,
    })
    .unwrap();
    let c = fresh[0].counts();
    assert_eq!(
        (c.passed, c.failed, c.errored, c.skipped),
        tool_summary("promptfoo.json")
    );
    assert_eq!(fresh[0].summary, Some(c));
}

/// `view` reads every file before it takes the terminal: a damaged one is a plain error
/// on stderr, exit 2, and nothing drawn.
#[test]
fn view_of_a_damaged_file_is_exit_2_before_the_terminal_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("cut.eval");
    let zip = std::fs::read(fixture("inspect.eval")).unwrap();
    std::fs::write(&bad, &zip[..zip.len() / 3]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args([
            "view",
            fixture("pytest.xml").to_str().unwrap(),
            bad.to_str().unwrap(),
        ])
        .env("XDG_STATE_HOME", dir.path())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("spyglass view: "), "{stderr}");
    assert!(
        stderr.contains("cut.eval: damaged Inspect AI log (.eval)"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing drawn: {:?}",
        text(&out.stdout)
    );
}

#[test]
fn import_into_a_store_is_in_the_history_the_store_reopens_with() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("history.db");
    let store_arg = store.display().to_string();
    let pytest = fixture("pytest.xml").display().to_string();
    let out = spyglass(&["import", "--store", &store_arg, &pytest]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("posted 6 event(s)"),
        "{}",
        text(&out.stdout)
    );
    // The process is gone; the file alone holds what it imported.
    let runtime =
        spyglass::store::open_runtime(spyglass::runtime::RuntimeConfig::default(), &store).unwrap();
    let summary = runtime.eval_summary("default", None);
    let suite = summary
        .suites
        .iter()
        .find(|s| s.suite == "pytest")
        .unwrap_or_else(|| panic!("no pytest suite in {summary:?}"));
    assert_eq!(counts(suite), tool_summary("pytest.xml"));
    // --url and --store name two different runtimes: refused, nothing imported.
    let both = spyglass(&[
        "import",
        "--url",
        "http://127.0.0.1:9",
        "--store",
        &store_arg,
        &pytest,
    ]);
    assert_eq!(both.status.code(), Some(2), "{}", text(&both.stderr));
    assert!(
        text(&both.stderr).contains("--store"),
        "{}",
        text(&both.stderr)
    );
}

/// Plays the terminal for `spyglass ARGS…` (answering its cursor queries), sends `q` once
/// the first whole frame is drawn (the end of its synchronized update), and returns all
/// it wrote.
fn first_screen(home: &Path, args: &[&str]) -> String {
    const DRIVER: &str = r#"
import os, pty, select, struct, sys, termios, fcntl, time
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    os.execvp(sys.argv[1], sys.argv[1:])
out, answered, quit_sent = bytearray(), 0, False
deadline = time.time() + 60
while time.time() < deadline:
    ready, _, _ = select.select([fd], [], [], 0.1)
    if not ready:
        continue
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
    while out.count(b"\x1b[6n") > answered:
        os.write(fd, b"\x1b[1;1R")
        answered += 1
    if not quit_sent and b"\x1b[?2026l" in out:
        os.write(fd, b"q")
        quit_sent = True
sys.stdout.buffer.write(bytes(out))
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let out = Command::new(crate::support::cli::python3())
        .args(["-c", DRIVER, env!("CARGO_BIN_EXE_spyglass")])
        .args(args)
        .env("XDG_STATE_HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .env("TERM", "xterm-256color")
        .output()
        .unwrap();
    let screen = text(&out.stdout);
    assert!(out.status.success(), "{out:?}\n{screen}");
    screen
}

/// `spyglass eval --json` writes a results file that `view` opens (on the Evals tab, where
/// results show) and `import` takes, with the run's own id and counts.
#[test]
fn spyglass_eval_json_is_a_results_file_view_opens_on_the_evals_tab() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("checkout.toml");
    std::fs::write(
        &suite,
        "suite = \"checkout\"\n\
         [[case]]\nid = \"pays\"\ninput = \"go\"\nmodel = { default_text = \"ok\" }\n\
         [case.assert]\ncontains = \"ok\"\n\
         [[case]]\nid = \"refunds\"\ninput = \"go\"\nmodel = { default_text = \"no\" }\n\
         [case.assert]\ncontains = \"ok\"\n",
    )
    .unwrap();
    let results = dir.path().join("results.json");
    let (suite, results) = (suite.to_str().unwrap(), results.to_str().unwrap());
    let ran = spyglass(&["eval", suite, "--json", results]);
    assert_eq!(ran.status.code(), Some(1), "{}", text(&ran.stderr));
    let run_id = serde_json::from_str::<Value>(&std::fs::read_to_string(results).unwrap()).unwrap()
        ["run_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let screen = first_screen(dir.path(), &["view", results]);
    assert!(
        screen.contains(&format!("spyglass eval results JSON, run {run_id}, ")),
        "{screen}"
    );
    assert!(
        screen.contains("1 passed, 1 failed, 0 errored, 0 skipped"),
        "{screen}"
    );
    // The Evals tab's panes, not the Sessions tab's.
    assert!(screen.contains("Suites"), "{screen}");
    assert!(screen.contains("Cases"), "{screen}");

    let store = dir.path().join("history.db");
    let out = spyglass(&["import", "--store", store.to_str().unwrap(), results]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("posted 2 event(s)"),
        "{}",
        text(&out.stdout)
    );
}

/// A file with not one observer frame is refused before the terminal is taken: how many
/// lines it has and why the first was refused, exit 2.
#[test]
fn replay_of_a_file_without_one_frame_says_why_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("notes.jsonl");
    std::fs::write(&junk, "hello\n{\"seq\": \"one\"}\n\nnot json either\n").unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n").unwrap();
    for (file, why) in [
        (&junk, "none of its 3 line(s) is an observer frame"),
        (&empty, "the file has no lines"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
            .args(["replay", file.to_str().unwrap()])
            .env("XDG_STATE_HOME", dir.path())
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.starts_with("spyglass replay: nothing to replay in "),
            "{stderr}"
        );
        assert!(stderr.contains(why), "{stderr}");
        assert!(
            out.stdout.is_empty(),
            "nothing drawn: {:?}",
            text(&out.stdout)
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args(["replay", junk.to_str().unwrap()])
        .env("XDG_STATE_HOME", dir.path())
        .output()
        .unwrap();
    assert!(
        text(&out.stderr).contains("line 1 was refused: "),
        "{}",
        text(&out.stderr)
    );
}

/// jest-junit's files (tests/fixtures/imports/jest) into a store: each file's results go
/// in at the time it records whatever the command-line order, the output names the store
/// (not the embedded runtime's passing URL), and a case only ever skipped reads `—` in
/// `eval --history`, while a title given twice is two cases.
#[test]
fn jest_files_enter_a_store_in_their_own_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("history.db");
    let store_arg = store.display().to_string();
    let (new, old) = (
        fixture("jest/new-fail.xml").display().to_string(),
        fixture("jest/old-pass.xml").display().to_string(),
    );
    let out = spyglass(&["import", "--store", &store_arg, &new, &old]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        stdout
            .matches(&format!("  posted 1 event(s) to {store_arg}\n"))
            .count(),
        2,
        "{stdout}"
    );
    assert!(!stdout.contains("http://"), "{stdout}");
    let (at_old, at_new) = (stdout.find(&old).unwrap(), stdout.find(&new).unwrap());
    assert!(at_old < at_new, "the older file first: {stdout}");
    let runtime =
        spyglass::store::open_runtime(spyglass::runtime::RuntimeConfig::default(), &store).unwrap();
    let summary = runtime.eval_summary("default", None);
    let suite = summary
        .suites
        .iter()
        .find(|s| s.suite == "checkout")
        .unwrap_or_else(|| panic!("no checkout suite in {summary:?}"));
    assert_eq!(suite.trend, [Some(1.0), Some(0.0)], "pass → fail");
    let case = &suite.cases[0];
    assert_eq!(
        case.last_status,
        spyglass::protocol::events::EvalStatus::Failed
    );
    assert_eq!(
        case.last_reason.as_deref(),
        Some("Error: expect(received).toBe(expected) // Object.is equality")
    );
    drop(runtime);

    let jest = fixture("jest/jest.xml").display().to_string();
    let out = spyglass(&["import", "--store", &store_arg, &jest]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("posted 3 event(s)"),
        "a title given twice is two results: {}",
        text(&out.stdout)
    );
    let suite_file = dir.path().join("tiny.toml");
    std::fs::write(
        &suite_file,
        "suite = \"tiny\"\n[[case]]\nid = \"hi\"\ninput = \"Hi\"\nmodel = { default_text = \"Hello\" }\n[case.assert]\ncontains = \"Hello\"\n",
    )
    .unwrap();
    let out = spyglass(&[
        "eval",
        suite_file.to_str().unwrap(),
        "--store",
        &store_arg,
        "--history",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let row = |case: &str| {
        stdout
            .lines()
            .find(|l| l.contains(&format!("checkout / {case}  ")))
            .unwrap_or_else(|| panic!("no row for {case}: {stdout}"))
            .to_owned()
    };
    let skipped = row("checkout refunds later::checkout refunds later");
    assert!(skipped.trim_end().ends_with("  —"), "{stdout}");
    assert!(!skipped.contains("passed"), "{stdout}");
    let twice = "checkout charges the card::checkout charges the card";
    assert!(row(twice).trim_end().ends_with("1/1 passed"), "{stdout}");
    assert!(
        row(&format!("{twice} #2"))
            .trim_end()
            .ends_with("0/1 passed"),
        "{stdout}"
    );
}

/// jest-junit from npm into target/import-jest (installed on first use), the fixture's
/// script run now: the files it writes import like the committed ones (a title given twice
/// as two cases, the failure text's first line as the reason).
#[test]
fn jest_junit_files_regenerated_with_the_real_tool_import_alike() {
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/import-jest");
    let installed = prefix.join("node_modules/jest-junit/package.json");
    let ready = std::fs::read_to_string(&installed).is_ok_and(|p| p.contains("\"16.0.0\""));
    if !ready {
        std::fs::create_dir_all(&prefix).unwrap();
        let out = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg("jest-junit@16.0.0")
            .output()
            .unwrap_or_else(|err| {
                panic!("npm: cannot run ({err}); install Node.js 20+ with npm (apt-get install nodejs npm)")
            });
        assert!(
            out.status.success(),
            "npm install jest-junit: {}",
            text(&out.stderr)
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("node")
        .arg(fixture("src/jest_junit.js"))
        .arg(dir.path())
        .env("NODE_PATH", prefix.join("node_modules"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    for name in ["jest.xml", "old-pass.xml", "new-fail.xml"] {
        let [fresh, kept] = [dir.path().join(name), fixture("jest").join(name)].map(|file| {
            read_all(&ImportArgs {
                files: vec![file],
                suite: None,
            })
            .unwrap()
            .remove(0)
        });
        let shown = |i: &spyglass::import::Imported| {
            i.results
                .iter()
                .map(|r| (r.case.clone(), r.status, r.reason.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(shown(&fresh), shown(&kept), "{name}");
        assert_eq!((fresh.ts, fresh.summary), (kept.ts, kept.summary), "{name}");
    }
}

/// pytest (the venv of the test above) run twice on one test, passing and then failing:
/// imported newest first, the reports still enter the store oldest first, so the suite's
/// trend reads pass → fail and its case's latest outcome is the failure.
#[test]
fn pytest_reports_imported_newest_first_keep_their_own_order() {
    let python = crate::support::venv::tool_python("import-venv", "pytest==9.2.0", "pytest");
    let dir = tempfile::tempdir().unwrap();
    let report = |name: &str, fails: bool| {
        let path = dir.path().join(name);
        let mut command = Command::new(&python);
        command
            .current_dir(fixture("src"))
            .args([
                "-m",
                "pytest",
                "test_confirm.py",
                "-q",
                "-p",
                "no:cacheprovider",
            ])
            .arg(format!("--junitxml={}", path.display()))
            .env_remove("CONFIRM_FAILS");
        if fails {
            command.env("CONFIRM_FAILS", "1");
        }
        let out = command.output().unwrap();
        let expected = if fails { "1 failed" } else { "1 passed" };
        assert!(
            text(&out.stdout).contains(expected),
            "{}",
            text(&out.stdout)
        );
        path.display().to_string()
    };
    let old = report("old-pass.xml", false);
    // pytest stamps its report to the microsecond; the second run starts later.
    let new = report("new-fail.xml", true);
    let store = dir.path().join("history.db");
    let store_arg = store.display().to_string();
    let out = spyglass(&["import", "--store", &store_arg, &new, &old]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runtime =
        spyglass::store::open_runtime(spyglass::runtime::RuntimeConfig::default(), &store).unwrap();
    let summary = runtime.eval_summary("default", None);
    let suite = summary
        .suites
        .iter()
        .find(|s| s.suite == "pytest")
        .unwrap_or_else(|| panic!("no pytest suite in {summary:?}"));
    assert_eq!(suite.trend, [Some(1.0), Some(0.0)], "pass → fail");
    assert_eq!(
        suite.cases[0].last_status,
        spyglass::protocol::events::EvalStatus::Failed
    );
    assert_eq!(
        suite.cases[0].last_reason.as_deref(),
        Some("AssertionError: the payment was not confirmed")
    );
}
