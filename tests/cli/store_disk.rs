//! A store on a bad disk, for real: `spyglass serve --store` on a tmpfs of its own (in a
//! user and mount namespace, so no privilege is needed) that is read-only or full. Start
//! refuses naming the file and the fix, leaves the file as it was; a disk that fills up
//! under a running runtime is a 503 naming the cause and a failing `/health`, and the
//! runtime recovers when space returns.

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `script` with `sh` as root of a new user and mount namespace, with `$B` the
/// binary and `$T` a directory shared with the test. Fails, saying what to install, when
/// the machine cannot make such a namespace.
fn in_namespace(script: &str, shared: &Path) -> Command {
    let probe = Command::new("unshare")
        .args(["--user", "--map-root-user", "--mount", "true"])
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "this test needs unprivileged user namespaces (`unshare --user --map-root-user --mount`): {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(err) => panic!("this test needs `unshare` from util-linux: {err}"),
    }
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "--mount", "sh", "-euc", script])
        .env("B", env!("CARGO_BIN_EXE_spyglass"))
        .env("T", shared)
        .env("XDG_DATA_HOME", shared.join("data"))
        .env_remove("SPYGLASS_URL")
        .env_remove("CODESPAR_BASE_URL")
        .env_remove("CODESPAR_API_KEY")
        .stdin(Stdio::null());
    cmd
}

fn run(script: &str, shared: &Path) -> Output {
    let child = in_namespace(script, shared)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A refused start: exit 2, one message naming the file and the way out, no panic.
fn assert_refused(out: &str, status: i32, file: &str, cause: &str) {
    assert_eq!(status, 2, "{out}");
    assert!(out.contains(file), "names the file: {out}");
    assert!(out.contains(cause), "says why ({cause}): {out}");
    assert!(
        out.contains("--store memory"),
        "says what else to do: {out}"
    );
    assert!(
        !out.contains("damaged"),
        "a disk problem is not damage: {out}"
    );
}

/// The part of the namespace script every case starts with: a 1 MiB tmpfs at `$T/m`.
const MOUNT: &str = r#"mkdir -p "$T/m"; mount -t tmpfs -o size=1m tmpfs "$T/m"
"#;

/// Starts `serve` on `$1` in the background, waits for its line, stops it.
const SERVE_ONCE: &str = r#"serve_once() {
  "$B" serve --test-mode --addr 127.0.0.1:0 --store "$1" > "$T/once.out" 2>&1 &
  pid=$!
  for i in $(seq 200); do grep -q "runtime on" "$T/once.out" && break; sleep 0.05; done
  kill $pid; wait $pid || true
}
"#;

#[test]
fn a_read_only_disk_refuses_start_naming_the_file_and_keeps_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        r#"{MOUNT}{SERVE_ONCE}
serve_once "$T/m/runtime.db"
before=$(cksum < "$T/m/runtime.db")
mount -o remount,ro "$T/m"
set +e
"$B" serve --test-mode --addr 127.0.0.1:0 --store "$T/m/runtime.db" 2> "$T/existing.err"; echo $? > "$T/existing.rc"
"$B" serve --test-mode --addr 127.0.0.1:0 --store "$T/m/new/runtime.db" 2> "$T/new.err"; echo $? > "$T/new.rc"
set -e
[ "$before" = "$(cksum < "$T/m/runtime.db")" ] && echo unchanged > "$T/same"
"#
    );
    let out = run(&script, dir.path());
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let code = |name: &str| read(name).trim().parse::<i32>().unwrap();
    assert_refused(
        &read("existing.err"),
        code("existing.rc"),
        "m/runtime.db",
        "Read-only file system",
    );
    assert_refused(
        &read("new.err"),
        code("new.rc"),
        "m/new/runtime.db",
        "Read-only file system",
    );
    assert_eq!(
        read("same").trim(),
        "unchanged",
        "the store is left as it was"
    );
}

#[test]
fn a_full_disk_refuses_a_new_store_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        r#"{MOUNT}dd if=/dev/zero of="$T/m/fill" bs=4k 2>/dev/null || true
set +e
"$B" serve --test-mode --addr 127.0.0.1:0 --store "$T/m/runtime.db" 2> "$T/full.err"; echo $? > "$T/full.rc"
"#
    );
    let out = run(&script, dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = std::fs::read_to_string(dir.path().join("full.err")).unwrap();
    let rc: i32 = std::fs::read_to_string(dir.path().join("full.rc"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_refused(&err, rc, "m/runtime.db", "the disk is full");
}

/// Waits (up to 10 s) for `name` in the shared directory.
async fn wait_for(dir: &Path, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dir.join(name).exists() {
        assert!(Instant::now() < deadline, "{name} never came");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `serve` on a 1 MiB tmpfs of its own, inside the namespace: the test drives it over
/// loopback and tells the namespace when to fill and free the disk through files in `$T`
/// (`fill`, then `filled` back; `free`, then `freed`; `stop`).
async fn serve_on_a_small_disk(shared: &Path) -> (std::process::Child, String) {
    let script = format!(
        r#"{MOUNT}"$B" serve --test-mode --addr 127.0.0.1:0 --store "$T/m/runtime.db" > "$T/serve.out" 2> "$T/serve.err" &
pid=$!
wait_file() {{ for i in $(seq 400); do [ -e "$T/$1" ] && return 0; sleep 0.05; done; return 1; }}
wait_file fill
dd if=/dev/zero of="$T/m/fill" bs=4k 2>/dev/null || true
touch "$T/filled"
wait_file free
rm -f "$T/m/fill"
touch "$T/freed"
wait_file stop || true
kill $pid; wait $pid || true
"#
    );
    let child = in_namespace(&script, shared)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let url = loop {
        // serve announces itself on stderr (stdout is kept for what a script reads).
        let out = std::fs::read_to_string(shared.join("serve.err")).unwrap_or_default();
        if let Some(url) = out
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
        {
            break url.to_owned();
        }
        assert!(Instant::now() < deadline, "serve never started: {out}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    (child, url)
}

#[tokio::test]
async fn a_disk_that_fills_under_a_running_runtime_is_a_503_naming_it_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path();
    let (mut child, url) = serve_on_a_small_disk(shared).await;
    let http = reqwest::Client::new();
    let create = || async {
        let response = http
            .post(format!("{url}/v1/sessions"))
            .json(&json!({"servers": [], "mocks": {"asaas/create_payment": {"ok": true}}}))
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap(),
        )
    };
    let health = || async {
        http.get(format!("{url}/health"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    assert_eq!(create().await.0, 201);
    assert_eq!(health().await["store"]["state"], "ok");

    std::fs::write(shared.join("fill"), "").unwrap();
    wait_for(shared, "filled").await;
    // Filling leaves a few pages of slack; a handful of sessions use them up.
    let mut refused = None;
    for _ in 0..200 {
        let (status, body) = create().await;
        if status != 201 {
            refused = Some((status, body));
            break;
        }
    }
    let (status, body) = refused.expect("a full disk refuses a write");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "store_unavailable");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("runtime.db") && message.contains("full"),
        "{message}"
    );
    let failing = health().await;
    assert_eq!(failing["store"]["state"], "failing", "{failing}");
    assert!(failing["store"]["failed_commits"].as_u64().unwrap() >= 1);

    std::fs::write(shared.join("free"), "").unwrap();
    wait_for(shared, "freed").await;
    let (status, body) = create().await;
    assert_eq!(status, 201, "space back, writes back: {body}");
    assert_eq!(health().await["store"]["state"], "ok");

    std::fs::write(shared.join("stop"), "").unwrap();
    let status = crate::support::cli::wait_exit(&mut child, Duration::from_secs(10));
    assert!(status.success());
}

/// The `tool.called` events of `session` in `frames`: each call's entry `n` and its seq.
fn calls_in(frames: &[Value], session: &str) -> Vec<(u64, u64)> {
    frames
        .iter()
        .filter(|e| e["kind"] == "tool.called" && e["sessionId"] == session)
        .map(|e| {
            (
                e["outcome"]["result"]["n"].as_u64().unwrap_or(0),
                e["seq"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_call_refused_on_a_full_disk_changes_nothing_and_its_retry_gets_its_entry() {
    use futures_util::StreamExt as _;
    use std::sync::{Arc, Mutex};
    use tokio_tungstenite::tungstenite::Message;

    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path();
    let (mut child, url) = serve_on_a_small_disk(shared).await;
    let http = reqwest::Client::new();
    // Entries of half a KiB (within the mocks' 64 KiB), so the disk's slack goes in a
    // few calls.
    let pad = "x".repeat(512);
    let entries: Vec<Value> = (1..=100).map(|n| json!({"n": n, "pad": pad})).collect();
    let created: Value = http
        .post(format!("{url}/v1/sessions"))
        .json(&json!({"servers": [], "mocks": {"pay/charge": entries}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session = created["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    // An observer from the start, collecting every frame it is sent.
    let observe = format!("{}/v1/observe?since=0", url.replacen("http", "ws", 1));
    let (mut ws, _) = tokio_tungstenite::connect_async(observe).await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let reader = {
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Some(Ok(message)) = ws.next().await {
                if let Message::Text(text) = message {
                    seen.lock()
                        .unwrap()
                        .push(serde_json::from_str(&text).unwrap());
                }
            }
        })
    };
    let execute = || async {
        let response = http
            .post(format!("{url}/v1/sessions/{session}/execute"))
            .json(&json!({"tool": "pay/charge", "input": {}}))
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap(),
        )
    };
    let detail = || async {
        http.get(format!("{url}/v1/sessions/{session}"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let events = || async {
        let page: Value = http
            .get(format!("{url}/v1/events?since=0&limit=5000"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        calls_in(page["events"].as_array().unwrap(), &session)
    };
    assert_eq!(execute().await.0, 200);

    std::fs::write(shared.join("fill"), "").unwrap();
    wait_for(shared, "filled").await;
    let mut answered = 1;
    let refused = loop {
        let (status, body) = execute().await;
        if status != 200 {
            break (status, body);
        }
        answered += 1;
        assert!(answered < 90, "the full disk never refused a call");
    };
    assert_eq!(refused.0, 503, "{}", refused.1);
    assert_eq!(refused.1["code"], "store_unavailable");
    // While the disk stays full, calls are refused and change nothing either.
    assert_eq!(execute().await.0, 503);
    let refused_detail = detail().await;
    assert_eq!(
        refused_detail["calls_total"],
        json!(answered),
        "{refused_detail}"
    );
    assert_eq!(
        refused_detail["mocks"][0]["counter"]["consumed"],
        json!(answered)
    );
    assert_eq!(refused_detail["mocks"][0]["calls"], json!(answered));
    assert_eq!(
        refused_detail["calls"].as_array().unwrap().len(),
        answered as usize
    );

    std::fs::write(shared.join("free"), "").unwrap();
    wait_for(shared, "freed").await;
    let (status, body) = execute().await;
    assert_eq!(status, 200, "space back, calls back: {body}");
    assert_eq!(
        body["data"]["n"],
        json!(answered + 1),
        "the retry is served the entry the refused call would have been"
    );
    let healed = detail().await;
    assert_eq!(healed["calls_total"], json!(answered + 1), "{healed}");
    assert_eq!(
        healed["mocks"][0]["counter"]["consumed"],
        json!(answered + 1)
    );

    // GET /v1/events and the live observer show the answered calls, each entry once,
    // seqs contiguous: nothing of the refused attempts.
    let listed = events().await;
    let ns: Vec<u64> = listed.iter().map(|(n, _)| *n).collect();
    assert_eq!(ns, (1..=answered + 1).collect::<Vec<_>>());
    assert!(
        listed.windows(2).all(|w| w[1].1 == w[0].1 + 1),
        "{listed:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let observed = calls_in(&seen.lock().unwrap(), &session);
        if observed.len() >= listed.len() {
            assert_eq!(
                observed, listed,
                "the observer saw what GET /v1/events lists"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "observer saw {observed:?}, listed {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    reader.abort();

    std::fs::write(shared.join("stop"), "").unwrap();
    let status = crate::support::cli::wait_exit(&mut child, Duration::from_secs(10));
    assert!(status.success());
}
