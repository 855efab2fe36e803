//! Chaos: a mixed workload of 100,000 events streams from the runtime to the real client
//! (`spawn_observer` + `Model::apply`) through a loopback TCP proxy that the test cuts
//! 100 times at random points of the stream; every tenth cut restarts the runtime's
//! server on the same port instead, with its state and event log kept — in memory, or
//! (the store run) by closing the whole runtime and opening a new one on its `SQLite`
//! file. At the end the client's model must equal the runtime's state, with no event
//! lost or applied twice.
//!
//! The seed is printed; `CHAOS_SEED=N cargo test --test chaos` replays a run.

use serde_json::{Value, json};
use spyglass::client::{ClientMsg, ObserverConfig, RestClient, spawn_observer};
use spyglass::model::{Limits, Model, SessionStatus};
use spyglass::protocol::Envelope;
use spyglass::protocol::events::{
    AgentEvalCompleted, EvalRunCompleted, EvalRunStarted, EvalStatus, Event,
};
use spyglass::protocol::rest::{
    ApprovalList, ApprovalStatus, CreateSession, EvalSummary, SessionList,
};
use spyglass::runtime::approvals::Verdict;
use spyglass::runtime::{ExecuteReply, Policy, Runtime, RuntimeConfig, ServerHandle};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

const EVENTS: u64 = 100_000;
const CUTS: usize = 100;
/// The store run's stream: shorter, as each restart reads the whole file back.
const STORE_EVENTS: u64 = 30_000;
const DEFAULT_SEED: u64 = 0x5EED_C4A0_5001;
const TENANT: &str = "default";

fn seed() -> u64 {
    std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED)
}

/// A loopback TCP proxy in front of the runtime: `cut` drops every connection it carries
/// at once, mid-frame or not, as a broken network would.
struct Proxy {
    addr: SocketAddr,
    links: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let links: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let held = links.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                // Registered under the lock it is spawned under, so a cut never misses a
                // link that is already relaying.
                let mut links = held.lock().unwrap();
                links.retain(|l| !l.is_finished());
                let link = tokio::spawn(async move {
                    // While the runtime is restarting the dial fails: the client sees its
                    // connection close and retries.
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                links.push(link.abort_handle());
            }
        })
        .abort_handle();
        Proxy {
            addr,
            links,
            accept,
        }
    }

    /// Drops every live connection; returns how many there were.
    fn cut(&self) -> usize {
        let mut links = self.links.lock().unwrap();
        let live = links.iter().filter(|l| !l.is_finished()).count();
        for link in links.drain(..) {
            link.abort();
        }
        live
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// What the workload emitted that the runtime keeps no state for: eval results.
#[derive(Default)]
struct EvalLedger {
    statuses: BTreeMap<(String, String), Vec<EvalStatus>>,
    runs_started: u32,
    runs_completed: u32,
}

/// The runtime the workload drives: replaced whole when a store run restarts it. The
/// workload holds the read side for each step, so a restart never splits one.
type Host = Arc<tokio::sync::RwLock<Option<Runtime>>>;

fn mocks(rng: &mut fastrand::Rng) -> Value {
    let nfe: Vec<Value> = (0..rng.usize(5..60)).map(|n| json!({"n": n})).collect();
    let pay: Vec<Value> = (0..rng.usize(1..6))
        .map(|n| json!({"id": format!("pay_{n}")}))
        .collect();
    json!({"asaas/x": {"ok": true}, "asaas/create_nfe": nfe, "asaas/pay": pay})
}

/// Drives the runtime through its own API until it has emitted `EVENTS` events: sessions
/// created and closed, calls of every outcome, approvals decided both ways, eval results.
fn spawn_workload(host: Host, seed: u64, events: u64) -> tokio::task::JoinHandle<EvalLedger> {
    tokio::spawn(async move {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut ledger = EvalLedger::default();
        let mut open: Vec<String> = Vec::new();
        let mut pending: Vec<String> = Vec::new();
        let mut run: Option<(String, u32)> = None;
        let mut step = 0u64;
        loop {
            step += 1;
            // Let the server and the client run between bursts, so cuts land mid-stream.
            if step.is_multiple_of(64) {
                tokio::task::yield_now().await;
            }
            let held = host.read().await;
            let rt = held.as_ref().expect("a runtime between restarts");
            if rt.stats().emitted >= events {
                break;
            }
            let roll = rng.u32(0..1000);
            if open.is_empty() || roll < 15 {
                let body = rt
                    .create_session(
                        TENANT,
                        CreateSession {
                            servers: vec!["asaas".into()],
                            user_id: format!("user_{}", rng.u32(0..20)),
                            metadata: None,
                            mocks: Some(mocks(&mut rng)),
                            model: None,
                        },
                    )
                    .unwrap();
                open.push(body.id);
            } else if roll < 25 && open.len() > 3 {
                let sid = open.swap_remove(rng.usize(0..open.len()));
                rt.close_session(TENANT, &sid).unwrap();
            } else if roll < 100 && !pending.is_empty() {
                let id = pending.swap_remove(rng.usize(0..pending.len()));
                let verdict = if rng.bool() {
                    Verdict::Approve
                } else {
                    Verdict::Deny
                };
                // Closing a session expires its pending approvals: those answer 410.
                if let Err(err) = rt.decide(TENANT, &id, verdict, Some("chaos".into()), None) {
                    assert_eq!(err.status, 410, "{err}");
                }
            } else if roll < 200 {
                let suite = ["checkout", "refunds", "pix"][rng.usize(0..3)];
                let case = format!("case_{}", rng.u32(0..6));
                let status = [
                    EvalStatus::Passed,
                    EvalStatus::Passed,
                    EvalStatus::Failed,
                    EvalStatus::Error,
                    EvalStatus::Skipped,
                ][rng.usize(0..5)];
                if run.is_none() {
                    let run_id = format!("run_{step}");
                    rt.emit(
                        None,
                        Event::EvalRunStarted(EvalRunStarted {
                            run_id: run_id.clone(),
                            suites: vec![suite.into()],
                            cases: 8,
                            repeat: 1,
                            ..EvalRunStarted::default()
                        }),
                    );
                    ledger.runs_started += 1;
                    run = Some((run_id, 0));
                }
                let session = open.get(rng.usize(0..open.len())).cloned();
                rt.emit(
                    session,
                    Event::AgentEvalCompleted(AgentEvalCompleted {
                        suite: suite.into(),
                        case: case.clone(),
                        status,
                        pass: status == EvalStatus::Passed,
                        run_id: run.as_ref().map(|(id, _)| id.clone()),
                        duration: 12.5,
                        ..AgentEvalCompleted::default()
                    }),
                );
                ledger
                    .statuses
                    .entry((suite.into(), case))
                    .or_default()
                    .push(status);
                if let Some((run_id, done)) = run.as_mut() {
                    *done += 1;
                    if *done == 8 {
                        rt.emit(
                            None,
                            Event::EvalRunCompleted(EvalRunCompleted {
                                run_id: run_id.clone(),
                                passed: 8,
                                ..EvalRunCompleted::default()
                            }),
                        );
                        ledger.runs_completed += 1;
                        run = None;
                    }
                }
            } else {
                let sid = &open[rng.usize(0..open.len())];
                let tool = match rng.u32(0..100) {
                    0..50 => "asaas/x",
                    50..80 => "asaas/create_nfe",
                    80..92 => "asaas/pay",
                    92..97 => "asaas/not_mocked",
                    _ => "codespar_list_tools",
                };
                let input = json!({"value": rng.u32(0..1000), "note": "chaos"});
                match rt.execute(TENANT, sid, tool, input.into()).await.unwrap() {
                    ExecuteReply::Envelope(Envelope::ApprovalRequired { approval_id, .. }) => {
                        pending.push(approval_id);
                    }
                    ExecuteReply::Ok(_) | ExecuteReply::Envelope(_) => {}
                }
            }
        }
        ledger
    })
}

/// Client-side counters the test watches while it cuts.
#[derive(Default)]
struct Seen {
    last_seq: AtomicU64,
    connected: AtomicU64,
    disconnected: AtomicU64,
    /// The last of Connected / Disconnected the client reported was Connected.
    up: AtomicBool,
}

async fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

struct Outcome {
    model: Model,
    seen: Arc<Seen>,
    ledger: EvalLedger,
    final_seq: u64,
    restarts: usize,
    cuts: usize,
    handle: ServerHandle,
}

/// `burst`: calls made while the server is down at each restart, so a client that was
/// at the head of the stream comes back behind by that many events (0: none).
/// `store`: the runtime keeps its state in this file, and each restart closes it and opens
/// a new runtime there; `None`: in memory, and a restart is of the server alone.
async fn run_chaos(
    config: RuntimeConfig,
    seed: u64,
    events: u64,
    cuts: usize,
    burst: usize,
    store: Option<&Path>,
) -> Outcome {
    let mut rng = fastrand::Rng::with_seed(seed);
    let open = |config: RuntimeConfig| match store {
        Some(path) => spyglass::store::open_runtime(config, path).unwrap(),
        None => Runtime::new(config),
    };
    let rt = open(config.clone());
    let host: Host = Arc::new(tokio::sync::RwLock::new(Some(rt.clone())));
    let mut handle = rt
        .serve(crate::support::runtime::rebindable_addr())
        .await
        .unwrap();
    drop(rt);
    let addr = handle.addr;
    let proxy = Proxy::start(addr).await;
    let url = format!("http://{}", proxy.addr);

    let (tx, mut rx) = mpsc::channel(4096);
    let mut observer = ObserverConfig::new(&url, None);
    observer.backoff_base = Duration::from_millis(2);
    let observer = spawn_observer(observer, RestClient::new(&url, None).unwrap(), tx);
    let seen = Arc::new(Seen::default());
    let consumer = {
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut model = Model::new(Limits {
                sessions: 100_000,
                calls_per_session: 100_000,
                approvals: 100_000,
                eval_runs: 100_000,
                ..Limits::default()
            });
            while let Some(msg) = rx.recv().await {
                match msg {
                    ClientMsg::Frames(frames) => {
                        for frame in frames {
                            model.apply(&frame);
                        }
                    }
                    ClientMsg::Hydrated {
                        sessions,
                        approvals,
                    } => model.hydrate(sessions, approvals),
                    ClientMsg::ParseError(err) => panic!("undecodable frame: {err}"),
                    ClientMsg::Connected => {
                        seen.up.store(true, Ordering::SeqCst);
                        seen.connected.fetch_add(1, Ordering::SeqCst);
                    }
                    ClientMsg::Disconnected { .. } => {
                        seen.up.store(false, Ordering::SeqCst);
                        seen.disconnected.fetch_add(1, Ordering::SeqCst);
                    }
                    ClientMsg::RestError(err) => eprintln!("chaos: rest error: {err}"),
                    ClientMsg::Rejected { status } => {
                        panic!("the keyless runtime refused: {status}")
                    }
                    ClientMsg::Connecting { .. } => {}
                }
                seen.last_seq
                    .store(model.counters.last_seq, Ordering::SeqCst);
            }
            model
        })
    };
    let workload = spawn_workload(host.clone(), seed ^ 0x9E37_79B9_7F4A_7C15, events);

    // Cut points: random seqs of the stream, taken in order as the client passes them.
    let mut points: Vec<u64> = (0..cuts).map(|_| rng.u64(1..events)).collect();
    points.sort_unstable();
    let mut restarts = 0;
    let limit = Duration::from_mins(1);
    for (i, point) in points.iter().enumerate() {
        wait_for(&format!("the client to pass seq {point}"), limit, || {
            seen.last_seq.load(Ordering::SeqCst) >= *point
        })
        .await;
        let disconnects = seen.disconnected.load(Ordering::SeqCst);
        if i % 10 == 9 && store.is_some() {
            // The whole runtime goes (its store flushed and closed, as `serve` does on a
            // clean stop) and a new one opens the file on the same port.
            let mut held = host.write().await;
            handle.shutdown().await;
            let old = held.take().expect("a runtime");
            old.flush_store();
            drop(old);
            tokio::time::sleep(Duration::from_millis(rng.u64(0..20))).await;
            let rt = open(config.clone());
            handle = rt.serve(addr).await.unwrap();
            *held = Some(rt);
            restarts += 1;
        } else if i % 10 == 9 {
            // The server goes away (closing its sockets) and comes back on the same port
            // after a pause in which the client's dials fail.
            let rt = host.read().await.clone().expect("a runtime");
            handle.shutdown().await;
            tokio::time::sleep(Duration::from_millis(rng.u64(0..20))).await;
            if burst > 0 {
                let sid = rt
                    .create_session(
                        TENANT,
                        CreateSession {
                            user_id: "burst".into(),
                            mocks: Some(mocks(&mut rng)),
                            ..CreateSession::default()
                        },
                    )
                    .unwrap()
                    .id;
                for _ in 0..burst {
                    rt.execute(TENANT, &sid, "asaas/x", json!({}).into())
                        .await
                        .unwrap();
                }
            }
            handle = rt.serve(addr).await.unwrap();
            assert_eq!(handle.addr, addr);
            restarts += 1;
        } else {
            let live = proxy.cut();
            assert!(
                live >= 1,
                "cut {i} at seq {point} found no connection to cut"
            );
        }
        // The client reports the drop, then a new connection: only then is the next cut
        // sure to sever a live stream (the reports queue behind frames, so wait for both).
        wait_for(&format!("reconnect after cut {i}"), limit, || {
            seen.disconnected.load(Ordering::SeqCst) > disconnects && seen.up.load(Ordering::SeqCst)
        })
        .await;
    }
    let ledger = workload.await.unwrap();
    let final_seq = handle.runtime().stats().emitted;
    wait_for("the client to catch up", limit, || {
        seen.last_seq.load(Ordering::SeqCst) >= final_seq
    })
    .await;
    observer.abort();
    let model = consumer.await.unwrap();
    Outcome {
        model,
        seen,
        ledger,
        final_seq,
        restarts,
        cuts,
        handle,
    }
}

async fn runtime_state(handle: &ServerHandle) -> (SessionList, ApprovalList) {
    let rest = RestClient::new(&handle.url(), None).unwrap();
    (
        rest.sessions().await.unwrap(),
        rest.approvals().await.unwrap(),
    )
}

/// The model shows exactly what the runtime holds: every session with its status,
/// call and envelope counts and each mock's counter, and every approval with its status
/// and replay.
fn assert_model_matches(model: &Model, sessions: &SessionList, approvals: &ApprovalList) {
    assert_eq!(
        model.sessions_len(),
        sessions.sessions.len(),
        "session count"
    );
    for summary in &sessions.sessions {
        let seen = model
            .session(&summary.id)
            .unwrap_or_else(|| panic!("session {} missing from the model", summary.id));
        let status = match summary.status.as_str() {
            "closed" => SessionStatus::Closed,
            _ => SessionStatus::Active,
        };
        assert_eq!(seen.status, status, "status of {}", summary.id);
        assert_eq!(seen.calls, summary.calls, "calls of {}", summary.id);
        assert_eq!(
            seen.envelopes, summary.envelopes,
            "envelopes of {}",
            summary.id
        );
        assert_eq!(
            seen.mocks.len(),
            summary.mocks.len(),
            "mocks of {}",
            summary.id
        );
        for mock in &summary.mocks {
            let row = seen
                .mocks
                .iter()
                .find(|m| m.tool == mock.declared.tool)
                .unwrap_or_else(|| panic!("mock {} of {}", mock.declared.tool, summary.id));
            assert_eq!(
                (row.consumed, row.calls),
                (mock.counter.consumed, mock.calls),
                "counter of {} in {} (consumed, calls)",
                mock.declared.tool,
                summary.id
            );
        }
    }
    assert_eq!(
        model.approvals.len(),
        approvals.approvals.len(),
        "approval count"
    );
    for view in &approvals.approvals {
        let seen = model
            .approvals
            .get(&view.id)
            .unwrap_or_else(|| panic!("approval {} missing from the model", view.id));
        assert_eq!(seen.status, view.status, "status of {}", view.id);
        assert_eq!(seen.replay, view.replay, "replay of {}", view.id);
    }
}

/// Eval pass rates: the model's per-suite and per-case summaries (rates, tallies, trend,
/// flakiness, last outcome) equal the runtime's own history (`GET /v1/evals/summary`),
/// and every eval run announced reached the model with its completion.
fn assert_evals_match(model: &Model, runtime: &EvalSummary, ledger: &EvalLedger) {
    assert_eq!(
        model.evals.suites_len(),
        runtime.suites.len(),
        "suite count"
    );
    for suite in &runtime.suites {
        let seen = model
            .evals
            .suite(&suite.suite)
            .unwrap_or_else(|| panic!("suite {} missing from the model", suite.suite));
        assert_eq!(seen, suite, "suite {}", suite.suite);
        assert!(
            suite.pass_rate.is_some(),
            "suite {} judged nothing",
            suite.suite
        );
    }
    let emitted: usize = ledger.statuses.values().map(Vec::len).sum();
    assert!(
        emitted > 1000,
        "the workload emitted {emitted} eval results"
    );
    assert_eq!(model.evals.runs.len() as u32, ledger.runs_started);
    let completed = model
        .evals
        .runs
        .iter()
        .filter(|r| r.completed.is_some())
        .count();
    assert_eq!(completed as u32, ledger.runs_completed);
}

/// A runtime that keeps everything the workload makes, so the model can be compared
/// with it whole.
fn chaos_config() -> RuntimeConfig {
    RuntimeConfig {
        test_mode: true,
        policy: policy(),
        retained_events: 200_000,
        // The workload creates ~1,300 sessions: the per-tenant retention of closed ones
        // (1,000 by default) would drop some the model still shows.
        max_sessions_per_tenant: 10_000,
        // Approvals likewise: it leaves over 1,000 waiting, and the model keeps every row.
        max_pending_approvals: 100_000,
        max_resolved_approvals: 100_000,
        ..RuntimeConfig::default()
    }
}

fn policy() -> Policy {
    Policy::from_toml("[[rule]]\nid = \"hold\"\ntool = \"*/pay\"\naction = \"approval\"\n").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_cuts_lose_nothing_and_repeat_nothing() {
    let _process = crate::PROCESS.read().await;
    let seed = seed();
    println!("chaos seed: {seed} (CHAOS_SEED={seed} replays this run)");
    let started = Instant::now();
    let out = run_chaos(chaos_config(), seed, EVENTS, CUTS, 0, None).await;
    assert_lossless(out, EVENTS, started).await;
}

/// The same chaos with the runtime on a `SQLite` store, and every tenth cut a restart of
/// the whole runtime on that file: the stream goes on (same epoch, seqs continue), so the
/// client resumes with no reset and no gap, and the sessions, approvals (decided after a
/// restart too) and eval history it shows equal what the reopened runtime holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_cuts_and_ten_runtime_restarts_on_a_store_lose_nothing() {
    let _process = crate::PROCESS.read().await;
    let seed = seed() ^ 0x57_0E;
    println!("chaos seed (store run): {seed}");
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let out = run_chaos(
        chaos_config(),
        seed,
        STORE_EVENTS,
        CUTS,
        0,
        Some(&dir.path().join("runtime.db")),
    )
    .await;
    assert!(out.restarts >= 10, "{} restarts", out.restarts);
    assert_lossless(out, STORE_EVENTS, started).await;
}

/// Every event reached the client once, in order, and its model equals the runtime's.
async fn assert_lossless(out: Outcome, events: u64, started: Instant) {
    let reconnects = out.seen.connected.load(Ordering::SeqCst) - 1;
    println!(
        "chaos: {} events, {} cuts ({} server restarts), {} reconnects survived, {} disconnects seen, {:.1} s",
        out.final_seq,
        out.cuts,
        out.restarts,
        reconnects,
        out.seen.disconnected.load(Ordering::SeqCst),
        started.elapsed().as_secs_f64()
    );
    let counters = out.model.counters;
    assert!(out.final_seq >= events);
    assert!(
        reconnects >= CUTS as u64,
        "{reconnects} reconnects for {CUTS} cuts"
    );
    assert_eq!(
        counters.last_seq, out.final_seq,
        "the client reached the end"
    );
    assert_eq!(
        counters.applied, out.final_seq,
        "every event applied: none lost"
    );
    assert_eq!(counters.duplicates, 0, "no event applied twice");
    assert_eq!(counters.gaps, 0, "the log held everything: no gap");
    assert_eq!(counters.resets, 0, "the stream went on: no reset");
    assert_eq!(counters.parse_errors, 0);
    let dropped = counters.dropped;
    assert_eq!(
        (
            dropped.sessions,
            dropped.calls,
            dropped.approvals,
            dropped.eval_runs
        ),
        (0, 0, 0, 0),
        "the model's bounds were not hit"
    );
    let (sessions, approvals) = runtime_state(&out.handle).await;
    assert!(
        sessions.sessions.len() > 100,
        "the workload made many sessions"
    );
    assert!(
        approvals
            .approvals
            .iter()
            .any(|a| a.status == ApprovalStatus::Approved)
            && approvals
                .approvals
                .iter()
                .any(|a| a.status == ApprovalStatus::Denied),
        "both decisions were exercised"
    );
    assert_model_matches(&out.model, &sessions, &approvals);
    let evals = out.handle.runtime().eval_summary(TENANT, None);
    assert_evals_match(&out.model, &evals, &out.ledger);
    out.handle.shutdown().await;
}

/// With a log far smaller than the stream, a client that falls behind across a cut gets
/// `stream.gap` and re-reads the state over REST; its model must still equal the
/// runtime's afterwards, with nothing applied twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gaps_are_healed_by_the_rest_re_read() {
    let _process = crate::PROCESS.read().await;
    let seed = seed() ^ 0x6A9;
    println!("chaos seed (gap run): {seed}");
    let config = RuntimeConfig {
        test_mode: true,
        policy: policy(),
        retained_events: 300,
        max_sessions_per_tenant: 10_000,
        max_pending_approvals: 100_000,
        max_resolved_approvals: 100_000,
        ..RuntimeConfig::default()
    };
    let out = run_chaos(config, seed, 30_000, 30, 400, None).await;
    let counters = out.model.counters;
    println!(
        "chaos gap run: {} events, {} gaps, {} hydrations, {} reconnects",
        out.final_seq,
        counters.gaps,
        counters.hydrations,
        out.seen.connected.load(Ordering::SeqCst) - 1
    );
    // Each restart left the client 400+ events behind a 300-event log.
    assert!(
        counters.gaps >= out.restarts as u64,
        "{} gaps for {} restarts",
        counters.gaps,
        out.restarts
    );
    assert_eq!(counters.hydrations, counters.gaps, "every gap was re-read");
    assert_eq!(counters.duplicates, 0, "no event applied twice");
    assert_eq!(counters.last_seq, out.final_seq);
    let (sessions, approvals) = runtime_state(&out.handle).await;
    assert_model_matches(&out.model, &sessions, &approvals);
    out.handle.shutdown().await;
}
