//! The runtime settings a user gives on the command line: `serve --approval-ttl`, and the
//! inspector's embedded runtime taking `--policy`, `--addr` and `--approval-ttl` (so its
//! Approvals tab can fill and an exported URL survives a restart), refused beside `--url`.

use crate::support::cli::{PTY_DRIVER, python3, spyglass, wait_exit};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Holds every payment for a human.
const POLICY: &str =
    "[[rule]]\nid = \"hold\"\ntool = \"*/create_payment\"\naction = \"approval\"\n";

/// Kills the process it holds when the test ends, pass or fail.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Creates a session mocking `asaas/create_payment` and executes it: the policy holds it.
/// Answers the approval as `GET /v1/approvals` lists it.
async fn held_call(url: &str) -> Value {
    let http = reqwest::Client::new();
    let created: Value = http
        .post(format!("{url}/v1/sessions"))
        .json(&json!({"servers": ["asaas"], "user_id": "u",
                      "mocks": {"asaas/create_payment": {"id": "pay_1"}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let answer = http
        .post(format!("{url}/v1/sessions/{id}/execute"))
        .json(&json!({"tool": "asaas/create_payment", "input": {"value": 5}}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 202, "the policy holds the call");
    let listed: Value = http
        .get(format!("{url}/v1/approvals"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    listed["approvals"][0].clone()
}

/// Seconds between `requested_at` and `expires_at` of an approval.
fn ttl_of(approval: &Value) -> i64 {
    let at = |key: &str| {
        chrono::DateTime::parse_from_rfc3339(approval[key].as_str().unwrap())
            .unwrap_or_else(|err| panic!("{key} in {approval}: {err}"))
    };
    (at("expires_at") - at("requested_at")).num_seconds()
}

#[tokio::test]
async fn serve_approval_ttl_sets_when_a_held_call_expires() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let mut cmd = spyglass(&[
        "serve",
        "--test-mode",
        "--store",
        "memory",
        "--addr",
        "127.0.0.1:0",
        "--approval-ttl",
        "1s",
        "--policy",
    ]);
    cmd.arg(&policy).stdout(Stdio::null());
    let mut child = Child(cmd.spawn().unwrap());
    let stderr = child.0.stderr.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        BufReader::new(stderr)
            .lines()
            .find_map(|line| {
                let line = line.ok()?;
                let at = line.find("http://")?;
                line[at..].split_whitespace().next().map(str::to_owned)
            })
            .unwrap_or_default()
    })
    .await
    .unwrap();
    let approval = held_call(&url).await;
    assert_eq!(ttl_of(&approval), 1, "{approval}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let late = reqwest::Client::new()
        .post(format!(
            "{url}/v1/approvals/{}/approve",
            approval["id"].as_str().unwrap()
        ))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(late.status().as_u16(), 410);
    let body: Value = late.json().await.unwrap();
    assert_eq!(body["code"], "approval_expired", "{body}");
}

#[test]
fn a_bad_approval_ttl_is_refused_with_the_units_it_takes() {
    for args in [
        &["serve", "--approval-ttl", "10w"][..],
        &["--approval-ttl", "0s"][..],
    ] {
        let out = spyglass(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("--approval-ttl"), "{args:?}: {stderr}");
    }
}

#[test]
fn embedded_runtime_flags_beside_url_are_refused_naming_both() {
    for flag in [
        &["--policy", "p.toml"][..],
        &["--addr", "127.0.0.1:9"][..],
        &["--approval-ttl", "5m"][..],
    ] {
        let mut args = vec!["--url", "http://127.0.0.1:9"];
        args.extend_from_slice(flag);
        let out = spyglass(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag[0]), "{args:?}: {stderr}");
        assert!(stderr.contains("flag --url"), "{args:?}: {stderr}");
    }
}

#[tokio::test]
async fn the_inspectors_embedded_runtime_takes_policy_addr_and_approval_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let stop = dir.path().join("stop");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let bin = env!("CARGO_BIN_EXE_spyglass");
    let cmd = spyglass(&[]);
    let mut child = cmd
        .get_envs()
        .fold(Command::new(python3()), |mut c, (k, v)| {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
            c
        });
    child
        .args(["-c", PTY_DRIVER])
        .arg(&stop)
        .args([
            bin,
            "--store",
            "memory",
            "--approval-ttl",
            "2m",
            "--addr",
            &addr,
            "--policy",
        ])
        .arg(&policy)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Child(child.spawn().unwrap());
    let url = format!("http://{addr}");
    // The runtime is up once it answers on the address given.
    let http = reqwest::Client::new();
    let mut up = false;
    for _ in 0..200 {
        if http.get(format!("{url}/health")).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "nothing answered on --addr {addr}");
    let approval = held_call(&url).await;
    assert_eq!(ttl_of(&approval), 120, "{approval}");
    assert_eq!(approval["rule_id"], "hold", "{approval}");
    // Let the inspector draw the held call, then quit it.
    tokio::time::sleep(Duration::from_millis(800)).await;
    std::fs::write(&stop, "").unwrap();
    let status = tokio::task::spawn_blocking(move || {
        let status = wait_exit(&mut child.0, Duration::from_secs(30));
        let mut screen = String::new();
        if let Some(mut out) = child.0.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut out, &mut screen);
        }
        (status, screen)
    })
    .await
    .unwrap();
    let (status, screen) = status;
    assert!(status.success(), "inspector exit {status:?}");
    assert!(
        screen.contains(&addr),
        "the status bar names the runtime's address"
    );
    assert!(
        screen.contains("Approvals (1)"),
        "the held call is counted on the tab"
    );
}
