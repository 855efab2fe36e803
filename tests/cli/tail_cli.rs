//! `spyglass tail` and `spyglass record` as a user runs them: the real binary following a
//! real runtime, readable and JSON lines, a closed pipe and Ctrl-C ending it cleanly.

use crate::support::cli::{interrupt, spyglass, wait_exit, wait_for_lines};
use crate::support::runtime::test_server;
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

async fn session_with_calls(url: &str, calls: usize) -> String {
    let http = reqwest::Client::new();
    let created: serde_json::Value = http
        .post(format!("{url}/v1/sessions"))
        .json(&json!({"servers": ["nuvem-fiscal"], "user_id": "tail_user",
                      "mocks": {"nuvem-fiscal/create_nfe": [{"id": "nfe_1"}, {"id": "nfe_2"}]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    for _ in 0..calls {
        http.post(format!("{url}/v1/sessions/{id}/execute"))
            .json(&json!({"tool": "nuvem-fiscal/create_nfe", "input": {"n": 1}}))
            .send()
            .await
            .unwrap();
    }
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_prints_readable_lines_and_ends_cleanly_on_ctrl_c() {
    let rt = test_server().await;
    let id = session_with_calls(&rt.url(), 3).await;
    let mut child = spyglass(&["tail", "--url", &rt.url()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let read: Vec<String> = tokio::task::spawn_blocking(move || {
        (0..4).map(|_| lines.next().unwrap().unwrap()).collect()
    })
    .await
    .unwrap();
    assert!(read[0].contains("session.created"), "{read:?}");
    assert!(
        read[0].contains(&id) && read[0].contains("user=tail_user"),
        "{read:?}"
    );
    assert!(read[0].contains("nuvem-fiscal/create_nfe×2"), "{read:?}");
    assert!(
        read[1].contains(r#"nuvem-fiscal/create_nfe -> ok {"id":"nfe_1"}"#),
        "{read:?}"
    );
    assert!(read[1].ends_with("[1/2]"), "{read:?}");
    assert!(read[2].ends_with("[2/2]"), "{read:?}");
    assert!(read[3].contains("-> mocks_exhausted"), "{read:?}");
    interrupt(&child);
    let status = wait_exit(&mut child, Duration::from_secs(10));
    assert!(
        status.success(),
        "Ctrl-C should end tail cleanly: {status:?}"
    );
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_ends_cleanly_when_the_reader_closes_the_pipe() {
    let rt = test_server().await;
    let id = session_with_calls(&rt.url(), 1).await;
    let mut child = spyglass(&["tail", "--json", "--url", &rt.url()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let first = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line // the reader (and the pipe's read end) is dropped here, like `| head -1`
    })
    .await
    .unwrap();
    let frame = spyglass::protocol::decode(first.trim()).unwrap();
    assert_eq!(frame.event.kind(), "session.created");
    assert_eq!(frame.session_id.as_deref(), Some(id.as_str()));
    // More events make tail write into the closed pipe.
    let url = rt.url();
    for _ in 0..20 {
        session_with_calls(&url, 2).await;
        if child.try_wait().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = wait_exit(&mut child, Duration::from_secs(10));
    assert!(
        status.success(),
        "a closed pipe should end tail cleanly: {status:?}"
    );
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_writes_json_lines_that_decode_in_order() {
    let rt = test_server().await;
    session_with_calls(&rt.url(), 2).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let mut child = spyglass(&["record", "-o", path.to_str().unwrap(), "--url", &rt.url()])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // session.created + 2 tool.called, then the recorder is stopped.
    wait_for_lines(&path, 3).await;
    interrupt(&child);
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    let text = std::fs::read_to_string(&path).unwrap();
    let frames: Vec<_> = text
        .lines()
        .map(|l| spyglass::protocol::decode(l).unwrap())
        .collect();
    let kinds: Vec<&str> = frames.iter().map(|f| f.event.kind()).collect();
    assert_eq!(kinds, ["session.created", "tool.called", "tool.called"]);
    assert!(frames.windows(2).all(|w| w[0].seq < w[1].seq));
    rt.shutdown().await;
}

#[test]
fn tail_without_a_runtime_url_says_how_to_give_one() {
    let out = spyglass(&["tail"]).stdout(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--url") && stderr.contains("SPYGLASS_URL"),
        "{stderr}"
    );
}

#[test]
fn record_to_an_unwritable_path_fails_naming_it() {
    let out = spyglass(&[
        "record",
        "-o",
        "/nonexistent-dir/x.jsonl",
        "--url",
        "http://127.0.0.1:9",
    ])
    .stdout(Stdio::null())
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent-dir/x.jsonl"), "{stderr}");
}

#[test]
fn tail_with_a_malformed_url_exits_two_naming_it() {
    let out = spyglass(&["tail", "--url", "127.0.0.1 8000"])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("spyglass tail: bad runtime URL `127.0.0.1 8000`"),
        "{stderr}"
    );
}

/// A port nothing listens on (bound, then let go).
fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_refused_for_its_key_exits_two_naming_the_fix() {
    let rt = crate::support::runtime::server(spyglass::runtime::RuntimeConfig {
        api_keys: vec!["csk_right".to_owned()],
        ..crate::support::runtime::test_config()
    })
    .await;
    for extra in [&[][..], &["--api-key", "csk_wrong"][..]] {
        let mut args = vec!["tail", "--url"];
        let url = rt.url();
        args.push(&url);
        args.extend(extra);
        let child = spyglass(&args).stdout(Stdio::null()).spawn().unwrap();
        let out = tokio::task::spawn_blocking(move || {
            let mut child = child;
            let status = wait_exit(&mut child, Duration::from_secs(10));
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            (status, stderr)
        })
        .await
        .unwrap();
        assert_eq!(out.0.code(), Some(2), "{extra:?}: {}", out.1);
        assert!(out.1.contains("401 unauthorized"), "{}", out.1);
        assert!(
            out.1.contains("--api-key") && out.1.contains("CODESPAR_API_KEY"),
            "{}",
            out.1
        );
        assert!(
            !out.1.contains("csk_wrong"),
            "the key is never echoed: {}",
            out.1
        );
    }
    rt.shutdown().await;
}

#[test]
fn tail_gives_up_on_an_unreachable_runtime_with_exit_three() {
    let url = closed_port_url();
    let started = std::time::Instant::now();
    let mut child = spyglass(&["tail", "--url", &url])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(30));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("connection refused by 127.0.0.1"),
        "the cause is named: {stderr}"
    );
    assert!(stderr.contains("unreachable after 5 attempts"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn record_refuses_to_overwrite_a_file_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    std::fs::write(&path, "precious\n").unwrap();
    let out = spyglass(&[
        "record",
        "-o",
        path.to_str().unwrap(),
        "--url",
        "http://127.0.0.1:9",
    ])
    .stdout(Stdio::null())
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("exists") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious\n");
}

#[test]
fn record_leaves_the_file_alone_when_the_runtime_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    std::fs::write(&path, "precious\n").unwrap();
    let fresh = dir.path().join("new.jsonl");
    let url = closed_port_url();
    for (file, force) in [(&path, true), (&fresh, false)] {
        let mut args = vec!["record", "-o", file.to_str().unwrap(), "--url", &url];
        if force {
            args.push("--force");
        }
        let mut child = spyglass(&args).stdout(Stdio::null()).spawn().unwrap();
        assert_eq!(
            wait_exit(&mut child, Duration::from_secs(30)).code(),
            Some(3)
        );
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious\n");
    assert!(
        !fresh.exists(),
        "nothing is created before the stream connects"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_with_force_overwrites_once_connected() {
    let rt = test_server().await;
    session_with_calls(&rt.url(), 1).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    std::fs::write(&path, "old line\nold line\nold line\n").unwrap();
    let mut child = spyglass(&[
        "record",
        "-o",
        path.to_str().unwrap(),
        "--force",
        "--url",
        &rt.url(),
    ])
    .stdout(Stdio::null())
    .spawn()
    .unwrap();
    wait_for_lines(&path, 2).await;
    interrupt(&child);
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("old line"), "{text}");
    assert_eq!(text.lines().count(), 2, "{text}");
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_exits_promptly_when_the_reader_leaves_with_no_event_coming() {
    for json in [true, false] {
        let rt = test_server().await;
        session_with_calls(&rt.url(), 2).await;
        let url = rt.url();
        let mut args = vec!["tail", "--url", &url];
        if json {
            args.push("--json");
        }
        let mut child = spyglass(&args).stdout(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        // Like `| head -2`: two lines read, then the read end closes. No more events come.
        let read = tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stdout).lines();
            (0..2)
                .map(|_| lines.next().unwrap().unwrap())
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        assert_eq!(read.len(), 2);
        let status =
            tokio::task::spawn_blocking(move || wait_exit(&mut child, Duration::from_secs(3)))
                .await
                .unwrap();
        assert!(status.success(), "json={json}: {status:?}");
        rt.shutdown().await;
    }
}

/// The newest seq the runtime's default project holds.
async fn newest_seq(url: &str) -> u64 {
    let page: serde_json::Value = reqwest::get(format!("{url}/v1/events?limit=10000"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .max()
        .unwrap_or(0)
}

/// `tail` prints the recent history, not all of it, then follows: the last 20 events by
/// default, the last N with `-n N`, those after a seq with `--since`, all with `--all`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_prints_the_last_events_then_follows() {
    let rt = test_server().await;
    let url = rt.url();
    session_with_calls(&url, 29).await;
    for (extra, back) in [
        (vec![], Some(20)),
        (vec!["-n", "3"], Some(3)),
        (vec!["-n", "0"], Some(0)),
        (vec!["--since", "25"], None),
        (vec!["--all"], None),
    ] {
        let newest = newest_seq(&url).await;
        assert!(newest >= 30, "{newest}");
        let first = match (back, extra.first().copied()) {
            (Some(back), _) => newest - back + 1,
            (None, Some("--since")) => 26,
            (None, _) => 1,
        };
        let mut args = vec!["tail", "--json", "--url", &url];
        args.extend(&extra);
        let mut child = spyglass(&args).stdout(Stdio::piped()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        // Once it is connected, one new event: it must follow on after the history.
        let _stderr = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            while !line.contains("connected to") {
                line.clear();
                assert!(stderr.read_line(&mut line).unwrap() > 0, "no connection");
            }
            stderr
        })
        .await
        .unwrap();
        session_with_calls(&url, 0).await;
        let seqs: Vec<u64> = tokio::task::spawn_blocking(move || {
            let mut seqs = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let seq = spyglass::protocol::decode(&line.unwrap()).unwrap().seq;
                seqs.push(seq);
                if seq > newest {
                    break;
                }
            }
            seqs
        })
        .await
        .unwrap();
        let expected: Vec<u64> = (first..=newest + 1).collect();
        assert_eq!(seqs, expected, "{extra:?}");
        interrupt(&child);
        assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    }
    // One starting point at a time.
    let out = spyglass(&["tail", "-n", "3", "--all", "--url", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("spyglass tail: the argument"),
        "{stderr}"
    );
    rt.shutdown().await;
}
