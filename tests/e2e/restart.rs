//! A runtime restarted on the same port: the stream's epoch tells the old history from the
//! new one, a resume that the new runtime cannot continue gets `stream.reset` and the whole
//! history (never a silent skip), and the real clients (observer + model, `tail`) show it.

use crate::support::runtime::{Api, Ws, frames, observe};
use serde_json::{Value, json};
use spyglass::client::{ClientMsg, ObserverConfig, RestClient, spawn_observer};
use spyglass::model::{Limits, Model};
use spyglass::runtime::{RuntimeConfig, ServerHandle, start};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

fn config() -> RuntimeConfig {
    RuntimeConfig {
        test_mode: true,
        ..RuntimeConfig::default()
    }
}

async fn runtime_at(addr: SocketAddr) -> ServerHandle {
    start(config(), addr).await.unwrap()
}

/// A session for `user` with a stateful mock, and `calls` executes of it: 1 + calls events.
async fn session_with_calls(url: &str, user: &str, calls: usize) -> String {
    let http = reqwest::Client::new();
    let created: Value = http
        .post(format!("{url}/v1/sessions"))
        .json(&json!({"servers": ["asaas"], "user_id": user,
                      "mocks": {"asaas/create_payment": [{"id": "pay_1"}, {"id": "pay_2"}]}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    for _ in 0..calls {
        http.post(format!("{url}/v1/sessions/{id}/execute"))
            .json(&json!({"tool": "asaas/create_payment", "input": {}}))
            .send()
            .await
            .unwrap();
    }
    id
}

/// `/v1/observe` as `tenant` (`x-codespar-project`).
async fn observe_as(handle: &ServerHandle, tenant: &str, query: &str) -> Ws {
    let mut request = format!("{}{query}", handle.observe_url())
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("x-codespar-project", tenant.parse().unwrap());
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

/// `spyglass tail --url URL` as a user runs it, and its stdout line by line.
fn spawn_tail(url: &str) -> (std::process::Child, mpsc::UnboundedReceiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args(["tail", "--url", url])
        .env_remove("SPYGLASS_URL")
        .env_remove("CODESPAR_BASE_URL")
        .env_remove("CODESPAR_API_KEY")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = mpsc::unbounded_channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, lines)
}

/// The next `n` lines `tail` prints, each within 10 s.
async fn read_lines(lines: &mut mpsc::UnboundedReceiver<String>, n: usize) -> Vec<String> {
    let mut got = Vec::new();
    while got.len() < n {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.recv())
            .await
            .expect("a line within 10 s")
            .expect("tail still running");
        got.push(line);
    }
    got
}

async fn get(url: &str) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn a_resume_the_runtime_cannot_continue_gets_a_reset_then_the_whole_history() {
    let handle = runtime_at("127.0.0.1:0".parse().unwrap()).await;
    session_with_calls(&handle.url(), "u", 2).await;
    let page = get(&format!("{}/v1/events?since=0", handle.url())).await;
    let epoch = page["epoch"].as_str().unwrap().to_owned();
    assert!(epoch.starts_with("ep_"), "{page}");
    assert!(page.get("reset").is_none(), "{page}");

    // Beyond the newest seq (3): a restarted runtime, even to a client that sent no epoch.
    let mut ws = observe(&handle, "?since=21").await;
    let got = frames(&mut ws, 4).await;
    assert_eq!(got[0]["kind"], "stream.reset", "{got:?}");
    assert_eq!(got[0]["seq"], 0);
    assert_eq!(got[0]["epoch"], epoch.as_str());
    assert!(
        got[0]["reason"].as_str().unwrap().contains("since 21"),
        "{got:?}"
    );
    let seqs: Vec<u64> = got[1..]
        .iter()
        .map(|f| f["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3]);

    // Another epoch, even with a seq this log has.
    let mut ws = observe(&handle, "?since=1&epoch=ep_00000000deadbeef").await;
    let got = frames(&mut ws, 2).await;
    assert_eq!(got[0]["kind"], "stream.reset", "{got:?}");
    assert_eq!(got[1]["seq"], 1, "the history starts over: {got:?}");

    // The same epoch: a hello naming it, then exactly what was asked for.
    let mut ws = observe(&handle, &format!("?since=1&epoch={epoch}")).await;
    let got = frames(&mut ws, 3).await;
    assert_eq!(got[0]["kind"], "stream.hello", "{got:?}");
    assert_eq!(got[0]["epoch"], epoch.as_str());
    assert_eq!(got[0]["seq"], 1);
    assert_eq!([&got[1]["seq"], &got[2]["seq"]], [2, 3]);

    // Polling says the same.
    let page = get(&format!("{}/v1/events?since=40", handle.url())).await;
    assert_eq!(page["reset"]["epoch"], epoch.as_str(), "{page}");
    assert_eq!(page["events"].as_array().unwrap().len(), 3, "{page}");
    assert_eq!(page["next"], 3);
    let page = get(&format!("{}/v1/events?since=2&epoch={epoch}", handle.url())).await;
    assert!(page.get("reset").is_none(), "{page}");
    assert_eq!(page["events"][0]["seq"], 3, "{page}");
    handle.shutdown().await;
}

async fn next(rx: &mut mpsc::Receiver<ClientMsg>) -> ClientMsg {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("a client message within 10 s")
        .expect("channel open")
}

/// Folds client messages into `model` as the inspector does until `done` holds.
async fn fold_until(
    rx: &mut mpsc::Receiver<ClientMsg>,
    model: &mut Model,
    done: impl Fn(&Model) -> bool,
) {
    while !done(model) {
        match next(rx).await {
            ClientMsg::Frames(frames) => frames.into_iter().for_each(|f| model.fold(Box::new(f))),
            ClientMsg::Hydrated {
                sessions,
                approvals,
            } => model.hydrate(sessions, approvals),
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_observer_sees_a_restart_and_the_model_marks_the_old_runtimes_sessions_previous() {
    let first = runtime_at("127.0.0.1:0".parse().unwrap()).await;
    let addr = first.addr;
    let url = first.url();
    let old = session_with_calls(&url, "old_user", 20).await;

    let (tx, mut rx) = mpsc::channel(256);
    let mut config = ObserverConfig::new(&url, None);
    config.backoff_base = Duration::from_millis(5);
    let task = spawn_observer(config, RestClient::new(&url, None).unwrap(), tx);
    let mut model = Model::new(Limits::default());
    fold_until(&mut rx, &mut model, |m| m.counters.last_seq == 21).await;
    assert!(model.session(&old).is_some());

    first.shutdown().await;
    let second = runtime_at(addr).await;
    let new = session_with_calls(&url, "new_user", 1).await;
    fold_until(&mut rx, &mut model, |m| {
        m.counters.resets == 1 && m.counters.last_seq == 2
    })
    .await;
    assert_eq!(
        model.session(&old).map(|s| s.status),
        Some(spyglass::model::SessionStatus::Previous),
        "the old runtime's session stays readable, not active"
    );
    assert_eq!(model.sessions_len(), 2);
    let session = model.session(&new).unwrap();
    assert_eq!(session.user, "new_user");
    assert_eq!(session.mocks.len(), 1, "its declared mock is shown");
    assert_eq!(session.mocks[0].consumed, 1);

    // Later events of the new runtime arrive once, in order.
    session_with_calls(&url, "later", 0).await;
    fold_until(&mut rx, &mut model, |m| m.counters.last_seq == 3).await;
    assert_eq!(model.counters.duplicates, 0);
    assert_eq!(model.sessions_len(), 3);
    task.abort();
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_prints_a_marker_line_across_a_restart() {
    let first = runtime_at("127.0.0.1:0".parse().unwrap()).await;
    let addr = first.addr;
    let url = first.url();
    session_with_calls(&url, "old_user", 2).await;
    let (mut child, mut lines) = spawn_tail(&url);
    let mut read = async |n: usize| read_lines(&mut lines, n).await;
    let before = read(3).await;
    assert!(before[2].starts_with("#3 "), "{before:?}");

    first.shutdown().await;
    let second = runtime_at(addr).await;
    let new = session_with_calls(&url, "new_user", 0).await;
    let after = read(2).await;
    assert!(
        after[0].contains("runtime restarted") && after[0].contains("starts over"),
        "{after:?}"
    );
    assert!(
        after[1].starts_with("#1 ") && after[1].contains(&new),
        "the new runtime's history from its first seq: {after:?}"
    );
    let _ = child.kill();
    let _ = child.wait();
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_store_the_stream_continues_and_the_observer_sees_every_event_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let first = spyglass::store::open_runtime(config(), &path).unwrap();
    let handle = first
        .serve(crate::support::runtime::rebindable_addr())
        .await
        .unwrap();
    let (addr, url) = (handle.addr, handle.url());
    let old = session_with_calls(&url, "kept_user", 3).await;
    let epoch = get(&format!("{url}/v1/events?since=0")).await["epoch"].clone();

    let (tx, mut rx) = mpsc::channel(256);
    let mut observer = ObserverConfig::new(&url, None);
    observer.backoff_base = Duration::from_millis(5);
    let task = spawn_observer(observer, RestClient::new(&url, None).unwrap(), tx);
    let mut seqs = Vec::new();
    let mut resets = 0;
    let mut collect = async |until: u64, seqs: &mut Vec<u64>| {
        while seqs.last() != Some(&until) {
            if let ClientMsg::Frames(frames) = next(&mut rx).await {
                for frame in frames {
                    if frame.event.kind() == "stream.reset" {
                        resets += 1;
                    }
                    seqs.push(frame.seq);
                }
            }
        }
    };
    collect(4, &mut seqs).await;

    handle.shutdown().await;
    first.flush_store();
    drop(first);
    let second = spyglass::store::open_runtime(config(), &path).unwrap();
    let handle = second.serve(addr).await.unwrap();
    let page = get(&format!("{url}/v1/events?since=0")).await;
    assert_eq!(page["epoch"], epoch, "a reopened store keeps its stream");
    assert_eq!(page["events"].as_array().unwrap().len(), 4, "{page}");
    session_with_calls(&url, "after", 1).await;
    collect(6, &mut seqs).await;
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6], "every event once, in order");
    assert_eq!(resets, 0, "the same stream goes on: no reset");
    let last = get(&format!("{url}/v1/events?since=4")).await;
    assert_eq!(last["events"][0]["kind"], "session.created", "{last}");
    assert_ne!(last["events"][0]["sessionId"], old.as_str());
    task.abort();
    handle.shutdown().await;
}

#[tokio::test]
async fn a_reset_is_judged_against_the_observers_tenants_newest_seq() {
    let handle = runtime_at("127.0.0.1:0".parse().unwrap()).await;
    session_with_calls(&handle.url(), "loud_user", 20).await;
    let quiet = Api::new(&handle).with_tenant("quiet");
    let id = quiet.session(json!({})).await;
    let (_, page) = quiet.get("/v1/events?since=0").await;
    let epoch = page["epoch"].as_str().unwrap().to_owned();
    assert_eq!(page["events"].as_array().unwrap().len(), 1, "{page}");

    // Seq 5 exists for the default tenant (21 events), not for quiet (1): quiet resets,
    // the default tenant goes on, in the same epoch.
    let mut ws = observe_as(&handle, "quiet", &format!("?since=5&epoch={epoch}")).await;
    let got = frames(&mut ws, 2).await;
    assert_eq!(got[0]["kind"], "stream.reset", "{got:?}");
    assert_eq!(got[0]["epoch"], epoch.as_str());
    assert!(
        got[0]["reason"].as_str().unwrap().contains("newest seq 1"),
        "{got:?}"
    );
    assert_eq!(
        (&got[1]["seq"], &got[1]["sessionId"]),
        (&json!(1), &json!(id))
    );
    let mut ws = observe(&handle, &format!("?since=5&epoch={epoch}")).await;
    let got = frames(&mut ws, 2).await;
    assert_eq!(got[0]["kind"], "stream.hello", "{got:?}");
    assert_eq!(
        got[0]["epoch"],
        epoch.as_str(),
        "one epoch for every tenant"
    );
    assert_eq!(got[1]["seq"], 6);

    let (_, page) = quiet.get("/v1/events?since=5").await;
    assert!(page["reset"]["reason"].is_string(), "{page}");
    let (_, page) = Api::new(&handle).get("/v1/events?since=5").await;
    assert!(page.get("reset").is_none(), "{page}");
    assert_eq!(page["events"][0]["seq"], 6);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_store_goes_on_per_tenant_and_counts_the_restored_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let first = spyglass::store::open_runtime(config(), &path).unwrap();
    let handle = first
        .serve(crate::support::runtime::rebindable_addr())
        .await
        .unwrap();
    let addr = handle.addr;
    session_with_calls(&handle.url(), "loud_user", 2).await;
    let quiet_id = Api::new(&handle)
        .with_tenant("quiet")
        .session(json!({}))
        .await;
    let (_, health) = Api::new(&handle).get("/health").await;
    let log_bytes = health["memory"]["log_bytes"].as_u64().unwrap();
    assert!(log_bytes > 0, "{health}");
    let (_, page) = Api::new(&handle).get("/v1/events?since=0").await;
    let epoch = page["epoch"].clone();
    handle.shutdown().await;
    first.flush_store();
    drop(first);

    let second = spyglass::store::open_runtime(config(), &path).unwrap();
    let handle = second.serve(addr).await.unwrap();
    let (_, health) = Api::new(&handle).get("/health").await;
    assert_eq!(
        health["memory"]["log_bytes"], log_bytes,
        "restored events count against the byte budget as before: {health}"
    );
    let quiet = Api::new(&handle).with_tenant("quiet");
    let (_, page) = quiet.get("/v1/events?since=0").await;
    assert_eq!(page["epoch"], epoch, "one epoch, kept");
    let events = page["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "quiet's own events only: {page}");
    assert_eq!(
        (&events[0]["seq"], &events[0]["sessionId"]),
        (&json!(1), &json!(quiet_id))
    );
    // Each tenant's seqs go on from its own newest, not from a shared counter.
    quiet.session(json!({})).await;
    let (_, page) = quiet.get("/v1/events?since=1").await;
    assert_eq!(page["events"][0]["seq"], 2, "{page}");
    session_with_calls(&handle.url(), "later", 0).await;
    let (_, page) = Api::new(&handle).get("/v1/events?since=3").await;
    assert_eq!(page["events"][0]["seq"], 4, "{page}");
    assert_eq!(page["events"][0]["kind"], "session.created", "{page}");
    // The quiet observer resuming in the kept epoch is no reset.
    let mut ws = observe_as(
        &handle,
        "quiet",
        &format!("?since=1&epoch={}", epoch.as_str().unwrap()),
    )
    .await;
    let got = frames(&mut ws, 2).await;
    assert_eq!(got[0]["kind"], "stream.hello", "{got:?}");
    assert_eq!(got[1]["seq"], 2);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_before_a_restart_does_not_cost_a_quieter_tenant_its_stored_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let small = || RuntimeConfig {
        retained_events: 10,
        ..config()
    };
    let first = spyglass::store::open_runtime(small(), &path).unwrap();
    let handle = first
        .serve(crate::support::runtime::rebindable_addr())
        .await
        .unwrap();
    let addr = handle.addr;
    let quiet = Api::new(&handle).with_tenant("quiet");
    for _ in 0..3 {
        quiet.session(json!({})).await;
    }
    // 41 events of the default tenant: it evicts its own history, not quiet's.
    session_with_calls(&handle.url(), "loud_user", 40).await;
    handle.shutdown().await;
    first.flush_store();
    drop(first);

    let second = spyglass::store::open_runtime(small(), &path).unwrap();
    let handle = second.serve(addr).await.unwrap();
    let (_, page) = Api::new(&handle)
        .with_tenant("quiet")
        .get("/v1/events?since=0")
        .await;
    let seqs: Vec<&Value> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["seq"])
        .collect();
    assert_eq!(seqs, [1, 2, 3], "{page}");
    assert!(page.get("gap").is_none(), "{page}");
    let (_, page) = Api::new(&handle).get("/v1/events?since=0").await;
    assert_eq!(page["events"].as_array().unwrap().len(), 7, "{page}");
    assert_eq!(page["gap"], json!({"from": 1, "to": 34}), "{page}");
    handle.shutdown().await;
}

#[test]
fn serve_on_a_damaged_store_fails_naming_the_file_and_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    std::fs::write(&path, b"not a database, a user's file".repeat(200)).unwrap();
    let before = std::fs::read(&path).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_spyglass"))
        .args(["serve", "--addr", "127.0.0.1:0", "--store"])
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("--store memory"),
        "says what to do: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "never a fresh start over it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_says_the_runtime_restarted_and_marks_the_old_sessions_gone() {
    let first = runtime_at("127.0.0.1:0".parse().unwrap()).await;
    let (addr, url) = (first.addr, first.url());
    session_with_calls(&url, "old_user", 20).await;
    let (tx, mut rx) = mpsc::channel(256);
    let mut observer = ObserverConfig::new(&url, None);
    observer.backoff_base = Duration::from_millis(5);
    let task = spawn_observer(observer, RestClient::new(&url, None).unwrap(), tx);
    let clock = std::sync::Arc::new(spyglass::ui::FakeClock::at("2026-11-23T03:00:00.000Z"));
    let mut app = spyglass::ui::App::new(&url, Limits::default(), clock);
    let size = (160, 30);
    crate::support::ui::until(&mut app, &mut rx, size, "seq 21", |s| s.contains("seq 21")).await;
    assert!(crate::support::ui::screen(&mut app, 160, 30).contains("old_user"));

    first.shutdown().await;
    let second = runtime_at(addr).await;
    session_with_calls(&url, "new_user", 1).await;
    let text = crate::support::ui::until(&mut app, &mut rx, size, "the new runtime", |s| {
        s.contains("new_user") && s.contains("seq 2 ")
    })
    .await;
    assert!(text.contains("runtime restarted at "), "{text}");
    let old_row = text
        .lines()
        .find(|l| l.contains("old_user"))
        .unwrap_or_else(|| panic!("the old runtime's session stays listed:\n{text}"));
    assert!(
        old_row.contains(" gone ") && !old_row.contains("active"),
        "the old session reads as the previous runtime's, not active:\n{text}"
    );
    task.abort();
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_keeps_the_reset_and_its_replay_clears_there() {
    let first = runtime_at("127.0.0.1:0".parse().unwrap()).await;
    let (addr, url) = (first.addr, first.url());
    session_with_calls(&url, "old_user", 1).await;
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let recorder = {
        let url = url.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            spyglass::client::tail::tail(
                &spyglass::client::Endpoint::new(&url),
                spyglass::client::tail::Format::JsonLines,
                Some(5),
                || Ok(&mut out),
                std::io::sink(),
                async {
                    let _ = done_rx.await;
                },
                std::future::pending(),
            )
            .await
            .unwrap();
            String::from_utf8(out).unwrap()
        })
    };
    // The recorder has the first runtime's two events before it restarts.
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.shutdown().await;
    let second = runtime_at(addr).await;
    session_with_calls(&url, "new_user", 1).await;
    let recording = tokio::time::timeout(Duration::from_secs(10), recorder)
        .await
        .expect("five lines recorded")
        .unwrap();
    drop(done_tx);
    let kinds: Vec<String> = recording
        .lines()
        .map(|l| {
            spyglass::protocol::decode(l)
                .unwrap()
                .event
                .kind()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "session.created",
            "tool.called",
            "stream.reset",
            "session.created",
            "tool.called"
        ],
        "{recording}"
    );

    let (tx, mut rx) = mpsc::channel(64);
    let _player = spyglass::client::replay::spawn_replay(recording, 0.0, tx);
    let mut model = Model::new(Limits::default());
    fold_until(&mut rx, &mut model, |m| {
        m.counters.last_seq == 2 && m.counters.resets == 1
    })
    .await;
    assert_eq!(
        model.sessions_len(),
        2,
        "the replayed reset keeps the old session"
    );
    assert_eq!(
        (0..model.sessions_len())
            .filter_map(|row| model.session_newest(row))
            .filter(|s| s.status == spyglass::model::SessionStatus::Previous)
            .count(),
        1,
        "the replayed reset marks the old session previous"
    );
    second.shutdown().await;
}

/// With a store, a restart is invisible to the user but for the pause: `tail` prints every
/// event once, in order, with no marker, and the inspector (real client, `TestBackend`)
/// keeps the old session active with its calls and says nothing of a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_store_tail_and_the_inspector_go_on_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let first = spyglass::store::open_runtime(config(), &path).unwrap();
    let handle = first
        .serve(crate::support::runtime::rebindable_addr())
        .await
        .unwrap();
    let (addr, url) = (handle.addr, handle.url());
    let kept = session_with_calls(&url, "kept_user", 2).await;

    let (mut child, mut lines) = spawn_tail(&url);
    let mut read = async |n: usize| read_lines(&mut lines, n).await;
    let (tx, mut rx) = mpsc::channel(256);
    let mut observer = ObserverConfig::new(&url, None);
    observer.backoff_base = Duration::from_millis(5);
    let task = spawn_observer(observer, RestClient::new(&url, None).unwrap(), tx);
    let clock = std::sync::Arc::new(spyglass::ui::FakeClock::at("2026-11-23T03:00:00.000Z"));
    let mut app = spyglass::ui::App::new(&url, Limits::default(), clock);
    let size = (160, 30);
    crate::support::ui::until(&mut app, &mut rx, size, "seq 3", |s| s.contains("seq 3 ")).await;
    let before = read(3).await;

    handle.shutdown().await;
    first.flush_store();
    drop(first);
    let second = spyglass::store::open_runtime(config(), &path).unwrap();
    let handle = second.serve(addr).await.unwrap();
    let after_user = session_with_calls(&url, "after_user", 1).await;
    let after = read(2).await;
    let seqs: Vec<&str> = before
        .iter()
        .chain(&after)
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(
        seqs,
        ["#1", "#2", "#3", "#4", "#5"],
        "every event once, in order, no marker: {before:?} {after:?}"
    );
    assert!(after[0].contains(&after_user), "{after:?}");

    let text = crate::support::ui::until(&mut app, &mut rx, size, "the new session", |s| {
        s.contains("after_user") && s.contains("seq 5 ")
    })
    .await;
    assert!(!text.contains("restarted"), "{text}");
    let kept_row = text
        .lines()
        .find(|l| l.contains("kept_user"))
        .unwrap_or_else(|| panic!("the kept session is listed:\n{text}"));
    assert!(
        kept_row.contains("active") && !kept_row.contains("gone"),
        "the kept session {kept} is still the runtime's:\n{text}"
    );
    let _ = child.kill();
    let _ = child.wait();
    task.abort();
    handle.shutdown().await;
}
