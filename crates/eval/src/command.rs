//! The `command` assertion: a checker program (an argv, no shell) run with the case's
//! observations as JSON on stdin, whose `{pass, score?, reason?}` on stdout is the verdict.
//! Bounded in time (its whole process group killed) and in bytes; never a hang.

use super::assert::{CaseRun, result};
use super::suite::{Case, CommandSpec};
use serde_json::{Value, json};
use spyglass_protocol::events::{AssertionResult, AssertionStatus};
use spyglass_protocol::sanitize::sanitize_text;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Bytes a checker may print on stdout: a verdict is a line of JSON.
pub const MAX_STDOUT_BYTES: usize = 64 * 1024;
/// Bytes of stderr kept (its end) for the message of a checker that failed.
pub const STDERR_TAIL_BYTES: usize = 2048;

/// What the checker reads on stdin: the case's input, the final text, every call with its
/// arguments and outcome, the model steps and the tokens.
pub fn observations(case: &Case, run: &CaseRun) -> Value {
    let calls: Vec<Value> = run
        .tool_calls
        .iter()
        .map(|call| {
            let tool = if call.tool_name.contains('/') || call.server_id.is_empty() {
                call.tool_name.clone()
            } else {
                format!("{}/{}", call.server_id, call.tool_name)
            };
            json!({
                "tool": tool,
                "arguments": call.input,
                "output": call.output,
                "status": call.status,
                "envelope": call.error_code,
                "duration_ms": call.duration_ms,
            })
        })
        .collect();
    let steps: Vec<Value> = run
        .steps
        .iter()
        .map(|step| {
            json!({
                "step": step.iteration,
                "finish_reason": step.finish_reason,
                "tokens": step.tokens,
                "tools": step.tool_calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "case": case.id,
        "input": case.input,
        "output": run.output,
        "calls": calls,
        "steps": steps,
        "tokens": run.tokens,
        "duration_ms": run.duration_ms,
    })
}

/// Runs one checker on the observations and reads its verdict. A checker that cannot
/// start, runs past its timeout, exits non-zero, prints too much or prints no verdict
/// is `errored`, its message saying why (with the end of its stderr, escaped).
pub async fn check(spec: &CommandSpec, observations: &Value) -> AssertionResult {
    let expected = json!({"argv": spec.argv, "timeout_ms": spec.timeout_ms});
    let input = serde_json::to_vec(observations).unwrap_or_default();
    match run(spec, &input).await {
        Err(failure) => errored(expected, &failure),
        Ok(run) => verdict(expected, &run),
    }
}

/// What a checker did that was no verdict, and what it left on stderr.
#[derive(Debug)]
struct Failure {
    reason: String,
    stderr: String,
}

fn errored(expected: Value, failure: &Failure) -> AssertionResult {
    let mut message = format!("command: {}", failure.reason);
    if !failure.stderr.trim().is_empty() {
        message.push_str(&format!("; stderr: {}", failure.stderr.trim_end()));
    }
    let mut out = result(
        "command",
        false,
        expected,
        json!({"error": failure.reason, "stderr": failure.stderr}),
        Some(message),
    );
    out.status = Some(AssertionStatus::Errored);
    out
}

/// A checker that ran to its end: its exit status and what it printed.
struct Ran {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
}

fn verdict(expected: Value, ran: &Ran) -> AssertionResult {
    let fail = |reason: String| {
        errored(
            expected.clone(),
            &Failure {
                reason,
                stderr: ran.stderr.clone(),
            },
        )
    };
    if !ran.status.success() {
        return fail(match ran.status.code() {
            Some(code) => format!("exited with status {code}"),
            None => "was killed by a signal".to_owned(),
        });
    }
    let text = String::from_utf8_lossy(&ran.stdout);
    let parsed = read_verdict(&text);
    let (pass, score, reason) = match parsed {
        Ok(found) => found,
        Err(why) => {
            let shown: String = text.trim().chars().take(200).collect();
            return fail(format!(
                "printed no verdict ({why}); expected one JSON object {{\"pass\": true|false, \"score\"?: number, \"reason\"?: string}}, got {:?}",
                sanitize_text(&shown)
            ));
        }
    };
    let mut actual = json!({"pass": pass});
    if let Some(score) = score {
        actual["score"] = json!(score);
    }
    if let Some(reason) = &reason {
        actual["reason"] = json!(reason);
    }
    let message = (!pass).then(|| match &reason {
        Some(reason) => format!("command: {}", sanitize_text(reason)),
        None => "command: the checker said fail".to_owned(),
    });
    result("command", pass, expected, actual, message)
}

/// The verdict in stdout: the whole of it as one JSON object, else its last non-empty
/// line (a checker may log before it answers).
fn read_verdict(text: &str) -> Result<(bool, Option<f64>, Option<String>), String> {
    let whole = serde_json::from_str::<Value>(text.trim());
    let value = match whole {
        Ok(value) => value,
        Err(err) => {
            let last = text.lines().rev().find(|l| !l.trim().is_empty());
            match last.map(|l| serde_json::from_str::<Value>(l.trim())) {
                Some(Ok(value)) => value,
                _ if text.trim().is_empty() => return Err("stdout is empty".to_owned()),
                _ => return Err(format!("not JSON: {err}")),
            }
        }
    };
    let Value::Object(map) = value else {
        return Err("not a JSON object".to_owned());
    };
    let pass = match map.get("pass") {
        Some(Value::Bool(pass)) => *pass,
        Some(_) => return Err("`pass` is not true or false".to_owned()),
        None => return Err("no `pass`".to_owned()),
    };
    let score = match map.get("score") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_f64() {
            Some(score) if score.is_finite() => Some(score),
            _ => return Err("`score` is not a number".to_owned()),
        },
    };
    let reason = match map.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(_) => return Err("`reason` is not a string".to_owned()),
    };
    Ok((pass, score, reason))
}

/// Starts the program in its own process group, feeds stdin, reads stdout (bounded) and
/// the end of stderr, and waits, all within the timeout; past it, or when stdout runs
/// over, the whole group is killed.
async fn run(spec: &CommandSpec, input: &[u8]) -> Result<Ran, Failure> {
    let failure = |reason: String| Failure {
        reason,
        stderr: String::new(),
    };
    let Some(program) = spec.argv.first() else {
        return Err(failure("no program named".to_owned()));
    };
    // A relative path with a `/` means the suite's directory, not wherever the runtime
    // was started (std leaves that case to the platform).
    let resolved = match &spec.dir {
        Some(dir) if program.contains('/') && !program.starts_with('/') => {
            dir.join(program).display().to_string()
        }
        _ => program.clone(),
    };
    let mut command = tokio::process::Command::new(&resolved);
    command
        .args(&spec.argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own group, so a timeout kills whatever it started too.
    #[cfg(unix)]
    command.process_group(0);
    if let Some(dir) = &spec.dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn().map_err(|err| {
        let at = spec
            .dir
            .as_ref()
            .map(|d| format!(" in {}", d.display()))
            .unwrap_or_default();
        failure(format!(
            "cannot start {:?}{at}: {err}",
            sanitize_text(program)
        ))
    })?;
    let group = child.id().and_then(|id| i32::try_from(id).ok());
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let tail = std::sync::Mutex::new(Vec::new());
    let exchange = {
        let (tail, child) = (&tail, &mut child);
        async move {
            let write = async {
                if let Some(mut stdin) = stdin {
                    // A checker that does not read its input may close it: not an error.
                    let _ = stdin.write_all(input).await;
                }
                Ok::<(), String>(())
            };
            let read_out = async {
                match stdout {
                    Some(stdout) => read_bounded(stdout).await,
                    None => Ok(Vec::new()),
                }
            };
            let read_err = async {
                if let Some(stderr) = stderr {
                    read_tail(stderr, tail).await;
                }
                Ok::<(), String>(())
            };
            let ((), stdout, ()) = tokio::try_join!(write, read_out, read_err)?;
            let status = child
                .wait()
                .await
                .map_err(|err| format!("could not be waited for: {err}"))?;
            Ok::<_, String>((status, stdout))
        }
    };
    let limit = Duration::from_millis(spec.timeout_ms);
    let outcome = tokio::time::timeout(limit, exchange).await;
    let stderr_tail = || {
        let bytes = tail.lock().map(|t| t.clone()).unwrap_or_default();
        sanitize_text(&String::from_utf8_lossy(&bytes)).into_owned()
    };
    match outcome {
        Ok(Ok((status, stdout))) => Ok(Ran {
            status,
            stdout,
            stderr: stderr_tail(),
        }),
        Ok(Err(reason)) => {
            kill_group(group);
            let _ = child.kill().await;
            Err(Failure {
                reason,
                stderr: stderr_tail(),
            })
        }
        Err(_) => {
            kill_group(group);
            let _ = child.kill().await;
            Err(Failure {
                reason: format!("gave no verdict within {} ms (killed)", spec.timeout_ms),
                stderr: stderr_tail(),
            })
        }
    }
}

/// Kills the checker's process group: the program and whatever it started. (Elsewhere
/// than on Unix only the program itself is killed, by `kill_on_drop` and `kill`.)
#[cfg(not(unix))]
fn kill_group(_group: Option<i32>) {}

#[cfg(unix)]
fn kill_group(group: Option<i32>) {
    if let Some(id) = group {
        // Gone already is fine; nothing else can be done about a failure here.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(id),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Stdout up to the bound; past it the checker is cut off.
async fn read_bounded(mut stream: impl AsyncRead + Unpin) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let read = stream
            .read(&mut chunk)
            .await
            .map_err(|err| format!("stdout could not be read: {err}"))?;
        if read == 0 {
            return Ok(out);
        }
        if out.len() + read > MAX_STDOUT_BYTES {
            return Err(format!(
                "printed more than {MAX_STDOUT_BYTES} bytes on stdout (cut off)"
            ));
        }
        out.extend_from_slice(&chunk[..read]);
    }
}

/// Reads stderr to its end, keeping its last bytes.
async fn read_tail(mut stream: impl AsyncRead + Unpin, tail: &std::sync::Mutex<Vec<u8>>) {
    let mut chunk = [0u8; 4096];
    while let Ok(read) = stream.read(&mut chunk).await {
        if read == 0 {
            break;
        }
        if let Ok(mut kept) = tail.lock() {
            kept.extend_from_slice(&chunk[..read]);
            let excess = kept.len().saturating_sub(STDERR_TAIL_BYTES);
            kept.drain(..excess);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn sh(script: &str, timeout_ms: u64) -> CommandSpec {
        CommandSpec {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            timeout_ms,
            dir: None,
        }
    }

    fn observed() -> Value {
        json!({"case": "c", "output": "Charged pay_1", "calls": [{"tool": "asaas/create_payment", "arguments": {"value": 5}}]})
    }

    async fn checked(script: &str) -> AssertionResult {
        check(&sh(script, 5_000), &observed()).await
    }

    #[tokio::test]
    async fn a_verdict_on_stdout_is_the_result() {
        let found = checked(
            "cat >/dev/null; echo '{\"pass\": true, \"score\": 0.75, \"reason\": \"cheap enough\"}'",
        )
        .await;
        assert!(found.pass, "{found:?}");
        assert_eq!(found.status, None);
        assert_eq!(
            found.actual.to_value(),
            json!({"pass": true, "score": 0.75, "reason": "cheap enough"})
        );
        assert_eq!(found.expected.to_value()["argv"][0], "sh");
        let found = checked("echo '{\"pass\": false, \"reason\": \"charged twice\"}'").await;
        assert!(!found.pass);
        assert_eq!(found.outcome(), AssertionStatus::Failed);
        assert_eq!(found.message.as_deref(), Some("command: charged twice"));
        // Lines a checker logs before its verdict are allowed.
        let found = checked("echo checking...; echo; echo '{\"pass\": true}'").await;
        assert!(found.pass, "{found:?}");
    }

    #[tokio::test]
    async fn the_checker_reads_the_observations_on_stdin() {
        let found = checked(
            "if grep -q '\"output\":\"Charged pay_1\"'; then echo '{\"pass\": true}'; else echo '{\"pass\": false}'; fi",
        )
        .await;
        assert!(found.pass, "{found:?}");
    }

    #[tokio::test]
    async fn a_checker_that_gives_no_verdict_is_errored_with_why() {
        let cases = [
            (
                "echo boom >&2; exit 3",
                "command: exited with status 3; stderr: boom",
            ),
            ("echo hello", "command: printed no verdict (not JSON"),
            ("true", "command: printed no verdict (stdout is empty)"),
            (
                "echo '{\"score\": 1}'",
                "command: printed no verdict (no `pass`)",
            ),
            (
                "echo '{\"pass\": \"yes\"}'",
                "command: printed no verdict (`pass` is not true or false)",
            ),
            (
                "echo '[true]'",
                "command: printed no verdict (not a JSON object)",
            ),
            (
                "echo '{\"pass\": true, \"score\": \"high\"}'",
                "command: printed no verdict (`score` is not a number)",
            ),
            ("kill -9 $$", "command: was killed by a signal"),
        ];
        for (script, says) in cases {
            let found = checked(script).await;
            assert_eq!(found.outcome(), AssertionStatus::Errored, "{script}");
            assert!(!found.pass);
            let message = found.message.unwrap_or_default();
            assert!(message.starts_with(says), "{script}: {message}");
        }
    }

    #[tokio::test]
    async fn a_program_that_cannot_start_is_errored() {
        let spec = CommandSpec {
            argv: vec!["/nonexistent/checker".into()],
            timeout_ms: 1_000,
            dir: None,
        };
        let found = check(&spec, &observed()).await;
        assert_eq!(found.outcome(), AssertionStatus::Errored);
        assert!(
            found
                .message
                .unwrap_or_default()
                .starts_with("command: cannot start \"/nonexistent/checker\""),
        );
    }

    #[tokio::test]
    async fn a_checker_past_its_timeout_is_killed_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild.pid");
        let script = format!(
            "sleep 30 & echo $! > {}; echo started >&2; wait",
            pid_file.display()
        );
        let clock = Instant::now();
        let found = check(&sh(&script, 300), &observed()).await;
        assert!(clock.elapsed() < Duration::from_secs(5), "no hang");
        assert_eq!(found.outcome(), AssertionStatus::Errored);
        assert_eq!(
            found.message.as_deref(),
            Some("command: gave no verdict within 300 ms (killed); stderr: started")
        );
        // The background `sleep` went with its group.
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let stat = format!("/proc/{}/stat", pid.trim());
        let gone = (0..50).any(|_| {
            let alive = std::fs::read_to_string(&stat)
                .is_ok_and(|s| s.split(' ').nth(2).is_none_or(|state| state != "Z"));
            if alive {
                std::thread::sleep(Duration::from_millis(20));
            }
            !alive
        });
        assert!(gone, "the checker's child {pid} outlived the timeout");
    }

    #[tokio::test]
    async fn too_much_output_is_cut_off_not_buffered() {
        let clock = Instant::now();
        let found = check(&sh("yes", 5_000), &observed()).await;
        assert!(clock.elapsed() < Duration::from_secs(4), "cut at the bound");
        assert_eq!(
            found.message.as_deref(),
            Some("command: printed more than 65536 bytes on stdout (cut off)")
        );
    }

    #[tokio::test]
    async fn stderr_is_escaped_and_only_its_end_kept() {
        let found =
            checked("printf 'x%.0s' $(seq 1 5000) >&2; printf '\\033[31mred\\n' >&2; exit 1").await;
        let message = found.message.unwrap_or_default();
        assert!(!message.contains('\u{1b}'), "{message}");
        assert!(message.contains("\\e[31mred"), "{message}");
        let stderr = found.actual.to_value()["stderr"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(stderr.len() <= STDERR_TAIL_BYTES + 16, "{}", stderr.len());
    }

    #[test]
    fn observations_name_calls_canonically_with_their_outcomes() {
        let case = crate::suite::parse_suite(
            "s.toml",
            "suite = \"s\"\n[[case]]\nid = \"c\"\ninput = \"Charge\"",
        )
        .unwrap()
        .cases
        .remove(0);
        let run = CaseRun {
            output: Some("ok".into()),
            tool_calls: vec![spyglass_protocol::rest::ToolCallRecord {
                id: "call_1".into(),
                tool_name: "create_payment".into(),
                server_id: "asaas".into(),
                status: "error".into(),
                duration_ms: 4,
                input: json!({"value": 5}),
                output: json!({"code": "policy_denied"}),
                error_code: Some("policy_denied".into()),
            }],
            ..CaseRun::default()
        };
        let seen = observations(&case, &run);
        assert_eq!(seen["case"], "c");
        assert_eq!(seen["input"], "Charge");
        assert_eq!(seen["output"], "ok");
        assert_eq!(seen["calls"][0]["tool"], "asaas/create_payment");
        assert_eq!(seen["calls"][0]["arguments"]["value"], 5);
        assert_eq!(seen["calls"][0]["envelope"], "policy_denied");
        assert_eq!(seen["tokens"]["total"], 0);
        assert_eq!(seen["steps"], json!([]));
    }
}
