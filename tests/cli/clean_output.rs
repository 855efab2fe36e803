//! What a user's terminal receives from `spyglass tail` and `spyglass eval` when clients
//! send hostile text: escape sequences, bell, C1 controls and bidi overrides arrive
//! escaped (`\e`, `\x07`, `\u{202e}`), never raw; `tail --json` stays the exact JSON.

use crate::support::cli::{spyglass, wait_exit};
use serde_json::json;
use spyglass::runtime::{RuntimeConfig, ServerHandle, start};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Writes the clipboard (OSC 52), retitles the window (OSC 0) and clears the screen.
const HOSTILE: &str = "U\u{1b}]52;c;aGFja2Vk\u{7}\u{1b}]0;HACKED\u{7}\u{1b}[2J";

async fn runtime() -> ServerHandle {
    let config = RuntimeConfig {
        test_mode: true,
        ..RuntimeConfig::default()
    };
    start(config, "127.0.0.1:0".parse().unwrap()).await.unwrap()
}

/// Bytes a terminal acts on: C0 controls but the line break, DEL, C1 controls (as
/// UTF-8, 0xC2 0x80–0x9F) and bidi overrides, isolates and marks.
fn terminal_controls(out: &str) -> Vec<char> {
    out.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        })
        .collect()
}

/// A session whose user id and mocked answer are hostile, then agent frames (a tool name,
/// the output), an unknown kind and an eval result with hostile text, posted as another
/// runner would.
async fn hostile_stream(url: &str) {
    let http = reqwest::Client::new();
    let tool = "asaas/create_payment";
    let created = http
        .post(format!("{url}/v1/sessions"))
        .json(&json!({"servers": ["asaas"], "user_id": HOSTILE,
                      "mocks": {tool: [{"echo": "\u{9b}2J\u{202e}"}]}}))
        .send()
        .await
        .unwrap();
    assert!(
        created.status().is_success(),
        "{}",
        created.text().await.unwrap()
    );
    let created: serde_json::Value = created.json().await.unwrap();
    let id = created["id"].as_str().unwrap();
    http.post(format!("{url}/v1/sessions/{id}/execute"))
        .json(&json!({"tool": tool, "input": {"n": 1}}))
        .send()
        .await
        .unwrap();
    let ingested = http
        .post(format!("{url}/v1/events"))
        .json(&json!([
            {"kind": "agent.step.completed", "agentName": "A", "model": "m", "provider": "p",
             "iteration": 1, "step": {"iteration": 1, "model": "m",
                "tokens": {"prompt": 1, "completion": 1, "total": 2}, "finishReason": "tool_calls",
                "toolCalls": [{"id": "t1", "name": format!("evil\u{202e}txt.exe{HOSTILE}"),
                               "args": {}, "result": null, "duration": 1, "needsApproval": false}]},
             "tokens": {"prompt": 1, "completion": 1, "total": 2}, "duration": 1, "streaming": false},
            {"kind": "agent.completed", "agentName": format!("Agent{HOSTILE}"),
             "model": "m", "provider": "p", "input": "hi", "output": format!("done{HOSTILE}\u{202e}"),
             "steps": [], "tokens": {"prompt": 1, "completion": 1, "total": 2},
             "duration": 5, "finishReason": "stop", "streaming": false},
            {"kind": format!("custom.kind{HOSTILE}"), "note": "x"},
            {"kind": "agent.eval.completed", "suite": format!("suite{HOSTILE}"),
             "case": "c\u{202e}", "status": "failed", "pass": false, "duration": 3,
             "reason": format!("because{HOSTILE}")},
        ]))
        .send()
        .await
        .unwrap();
    assert_eq!(
        ingested.status().as_u16(),
        200,
        "{}",
        ingested.text().await.unwrap()
    );
}

/// The first `n` lines `spyglass tail` prints (with `extra` args), then Ctrl-C.
async fn tail_lines(url: &str, extra: &[&str], n: usize) -> Vec<String> {
    let mut args = vec!["tail", "--url", url];
    args.extend_from_slice(extra);
    let mut child = spyglass(&args).stdout(Stdio::piped()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = tokio::task::spawn_blocking(move || {
        // Raw bytes, so a stray control would be seen even if not UTF-8 text.
        let mut reader = BufReader::new(stdout);
        (0..n)
            .map(|_| {
                let mut line = Vec::new();
                reader.read_until(b'\n', &mut line).unwrap();
                String::from_utf8(line).unwrap()
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    wait_exit(&mut child, Duration::from_secs(10));
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_escapes_hostile_user_ids_tools_kinds_and_agent_output() {
    let rt = runtime().await;
    hostile_stream(&rt.url()).await;
    let lines = tail_lines(&rt.url(), &[], 6).await;
    let out = lines.concat();
    assert_eq!(terminal_controls(&out), Vec::<char>::new(), "{out}");
    assert!(
        lines.iter().all(|l| l.matches('\n').count() == 1),
        "one line per frame: {out}"
    );
    let escaped = "U\\e]52;c;aGFja2Vk\\x07\\e]0;HACKED\\x07\\e[2J";
    let expect = [
        format!("user={escaped}"),
        r#"asaas/create_payment -> ok {"echo":"\u{9b}2J\u{202e}"}"#.to_owned(),
        format!("tools=[evil\\u{{202e}}txt.exe{escaped}]"),
        format!("Agent{escaped} done in 5 ms: done{escaped}\\u{{202e}}"),
        format!("custom.kind{escaped}"),
        format!("suite{escaped} / c\\u{{202e}} failed: because{escaped}"),
    ];
    for (line, want) in lines.iter().zip(&expect) {
        assert!(line.contains(want.as_str()), "{want} not in {line}");
    }
    let escapes = ["\\e", "\\x07", "\\u{"]
        .iter()
        .map(|e| out.matches(e).count())
        .sum::<usize>();
    eprintln!(
        "tail: {} bytes, {escapes} characters escaped, 0 raw",
        out.len()
    );
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_json_keeps_the_exact_text() {
    let rt = runtime().await;
    hostile_stream(&rt.url()).await;
    let lines = tail_lines(&rt.url(), &["--json"], 6).await;
    let created: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(created["userId"], HOSTILE);
    let agent: serde_json::Value = serde_json::from_str(&lines[3]).unwrap();
    assert_eq!(agent["output"], format!("done{HOSTILE}\u{202e}"));
    rt.shutdown().await;
}

#[test]
fn eval_prints_a_hostile_suite_name_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.toml");
    // TOML's own escapes put the raw controls into the suite and case names.
    let suite = r#"
suite = "checkout\u001b]52;c;aGFja2Vk\u0007\u001b]0;HACKED\u0007\u001b[2J\u202e"

[[case]]
id = "case\u001b[2J"
input = "Hi"
model = { default_text = "Hello\u009b2J" }
[case.assert]
contains = "nope"
"#;
    std::fs::write(&path, suite).unwrap();
    let out = spyglass(&["eval", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let all = format!("{stdout}{stderr}");
    assert_eq!(terminal_controls(&all), Vec::<char>::new(), "{all}");
    assert!(
        all.contains("checkout\\e]52;c;aGFja2Vk\\x07\\e]0;HACKED\\x07\\e[2J\\u{202e}"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

#[test]
fn a_policy_error_prints_a_hostile_rule_id_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    // TOML's escapes put the raw controls into the id; the action is what is wrong.
    let policy = "[[rule]]\nid = \"hold\\u001b]0;HACKED\\u0007\\u001b[2J\\u202e\"\ntool = \"*/pay\"\naction = \"maybe\"\n";
    std::fs::write(&path, policy).unwrap();
    let out = spyglass(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--policy",
        path.to_str().unwrap(),
    ])
    .stdout(Stdio::piped())
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(terminal_controls(&stderr), Vec::<char>::new(), "{stderr}");
    assert!(
        stderr.contains(r#"(id "hold\e]0;HACKED\x07\e[2J\u{202e}")"#),
        "{stderr}"
    );
}
