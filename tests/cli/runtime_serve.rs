//! `spyglass serve` as a user runs it: a bad policy file stops startup naming file, rule
//! and field; a good start prints the bound URL on stderr and honours the test-mode env.

use serde_json::json;
use spyglass::runtime::Policy;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const BAD_POLICY: &str = r#"
[[rule]]
id = "fine"
tool = "*/refund_*"
action = "deny"

[[rule]]
id = "payments_require_approval"
tool = "*/create_payment"
action = "approve"
"#;

#[test]
fn a_bad_policy_file_names_file_rule_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, BAD_POLICY).unwrap();
    let err = Policy::load(&path).unwrap_err();
    assert_eq!(err.file.as_deref(), Some(path.as_path()));
    assert_eq!(err.rule_index, Some(1));
    assert_eq!(err.rule_id.as_deref(), Some("payments_require_approval"));
    assert_eq!(err.field.as_deref(), Some("action"));

    let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args(["serve", "--addr", "127.0.0.1:0", "--policy"])
        .arg(&path)
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("rule #2 (id \"payments_require_approval\")"),
        "{stderr}"
    );
    assert!(stderr.contains("field `action`"), "{stderr}");

    let missing = dir.path().join("nope.toml");
    let err = Policy::load(&missing).unwrap_err();
    assert!(err.to_string().contains("nope.toml"), "{err}");
    std::fs::write(&path, "[[rule]\nid=").unwrap();
    let err = Policy::load(&path).unwrap_err();
    assert_eq!(err.file.as_deref(), Some(path.as_path()));
}

/// Kills the server it started when the test ends, pass or fail.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn serve_prints_its_url_and_reads_the_test_mode_env() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[rule]]\nid = \"no\"\ntool = \"*/refund\"\naction = \"deny\"\n",
    )
    .unwrap();
    let mut child = Child(
        Command::new(env!("CARGO_BIN_EXE_spyglass"))
            .args([
                "serve",
                "--store",
                "memory",
                "--addr",
                "127.0.0.1:0",
                "--api-key",
                "csk_a",
                "--policy",
            ])
            .arg(&policy)
            .env("CODESPAR_TEST_MODE_ENABLED", "TrUe")
            .env("SPYGLASS_API_KEYS", "csk_b, csk_c")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stderr = child.0.stderr.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stderr).lines();
        lines
            .find_map(|line| {
                let line = line.ok()?;
                let at = line.find("http://")?;
                line[at..].split_whitespace().next().map(str::to_owned)
            })
            .unwrap_or_default()
    })
    .await
    .unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let client = reqwest::Client::new();
    let create = |key: &str| {
        client
            .post(format!("{url}/v1/sessions"))
            .bearer_auth(key)
            .json(&json!({"servers": [], "user_id": "u", "mocks": {"a/refund": {}}}))
            .send()
    };
    assert_eq!(create("csk_c").await.unwrap().status().as_u16(), 201);
    assert_eq!(create("csk_a").await.unwrap().status().as_u16(), 201);
    assert_eq!(create("csk_z").await.unwrap().status().as_u16(), 401);
}

/// The model flags are read at startup: contradictory or malformed ones stop it with
/// exit 2 naming the flag, before anything listens.
#[test]
fn bad_model_flags_stop_serve_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.toml");
    std::fs::write(&prices, "[\"gpt-4o-mini\"]\ninput = \"cheap\"\n").unwrap();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--model-record", "a", "--model-replay", "b"],
            "--model-record and --model-replay are exclusive",
        ),
        (
            &["--model-base-url", "gemini=http://x"],
            "--model-base-url gemini=http://x",
        ),
        (
            &["--model-prices", prices.to_str().unwrap()],
            "--model-prices",
        ),
    ];
    for (flags, expected) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
            .args(["serve", "--addr", "127.0.0.1:0", "--store", "memory"])
            .args(flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(expected), "{flags:?}: {stderr}");
    }
}

/// Starts `spyglass serve` (memory store, test mode) with `args` and `env`; its URL.
async fn serve(args: &[&str], env: &[(&str, &str)]) -> (Child, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_spyglass"));
    command
        .args([
            "serve",
            "--store",
            "memory",
            "--addr",
            "127.0.0.1:0",
            "--test-mode",
        ])
        .args(args)
        .env_remove("SPYGLASS_ALLOW_COMMAND_ASSERTIONS")
        .stderr(Stdio::piped())
        .stdout(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = Child(command.spawn().unwrap());
    let stderr = child.0.stderr.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stderr).lines();
        let url = lines
            .find_map(|line| {
                let line = line.ok()?;
                let at = line.find("http://")?;
                line[at..].split_whitespace().next().map(str::to_owned)
            })
            .unwrap_or_default();
        // Keep draining so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        url
    })
    .await
    .unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    (child, url)
}

#[tokio::test]
async fn serve_runs_command_assertions_only_when_allowed_by_flag_or_env() {
    let suite = json!({"suites": [{
        "suite": "checks",
        "cases": [{"id": "a", "input": "x", "model": {"default_text": "ok"},
                   "assert": {"command": ["sh", "-c", "echo '{\"pass\": true}'"]}}]
    }]});
    let client = reqwest::Client::new();
    let post = |url: String| {
        client
            .post(format!("{url}/v1/evals/runs"))
            .json(&suite)
            .send()
    };
    let (_off, url) = serve(&[], &[]).await;
    let refused = post(url).await.unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "command_assertions_disabled");
    let (_flag, url) = serve(&["--allow-command-assertions"], &[]).await;
    assert_eq!(post(url).await.unwrap().status().as_u16(), 202);
    let (_env, url) = serve(&[], &[("SPYGLASS_ALLOW_COMMAND_ASSERTIONS", "1")]).await;
    assert_eq!(post(url).await.unwrap().status().as_u16(), 202);
}

/// The README's SDK path: the quickstart holds a payment, prints where to approve it (the
/// Approvals tab, or a curl line) and waits; running the printed curl line approves it and
/// the quickstart goes on to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_waits_for_the_held_payment_and_its_curl_line_approves_it() {
    let python = tokio::task::spawn_blocking(crate::support::venv::sdk_python)
        .await
        .unwrap();
    let handle = crate::support::runtime::policy_server(spyglass::demo::POLICY).await;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/python/quickstart.py");
    let mut child = Command::new(python)
        .arg(script)
        .env("CODESPAR_BASE_URL", handle.url())
        .env("CODESPAR_API_KEY", "csk_test_local")
        .env("QUICKSTART_WAIT", "1")
        .env_remove("CODESPAR_PROJECT_ID")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (curl, lines) = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            seen.push(line.clone());
            if line.trim_start().starts_with("curl ") {
                return (line, lines);
            }
        }
        panic!("no curl line in {seen:?}");
    })
    .await
    .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let approved = Command::new("sh").args(["-c", &curl]).output().unwrap();
    assert!(approved.status.success(), "{curl}: {approved:?}");
    assert!(
        text(&approved.stdout).contains("\"approved\""),
        "{curl}: {approved:?}"
    );
    let rest: Vec<String> =
        tokio::task::spawn_blocking(move || lines.map(Result::unwrap).collect())
            .await
            .unwrap();
    let out = child.wait_with_output().unwrap();
    let (status, stderr) = (out.status, text(&out.stderr));
    assert!(status.success(), "{rest:?}\n{stderr}");
    assert!(
        rest.iter().any(|l| l == "large payment: approved"),
        "{rest:?}"
    );
    assert!(rest.iter().any(|l| l == "closed"), "{rest:?}");
    handle.shutdown().await;
}

/// The README's SDK block restarts terminal 1's runtime with the policy: a second `serve`
/// in the background would fail on the same port and leave the quickstart without it.
#[test]
fn the_readme_sdk_block_runs_one_runtime_with_the_policy() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let block = readme
        .split_once("With the real SDKs instead")
        .and_then(|(_, rest)| rest.split_once("```sh"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block)
        .unwrap();
    let serves: Vec<&str> = block
        .lines()
        .filter(|l| l.contains("spyglass serve"))
        .collect();
    assert_eq!(serves.len(), 1, "{block}");
    assert!(
        serves[0].contains("--policy examples/demo-policy.toml"),
        "{block}"
    );
    assert!(
        !serves[0]
            .split('#')
            .next()
            .unwrap_or_default()
            .trim_end()
            .ends_with('&'),
        "{block}"
    );
    assert!(serves[0].contains("terminal 1"), "{block}");
    assert!(
        readme.split_whitespace().count() < 1500,
        "the README stays short"
    );
}
