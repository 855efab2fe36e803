//! `execute`: mocked static executes per second through the runtime's real HTTP stack,
//! 32 keep-alive connections, against a bare axum handler that parses the same request
//! JSON and returns the same body, driven by the same generator in the same run.

use super::http::{Conn, create_session, execute_path, post};
use super::{Figure, median};
use anyhow::{Context, bail};
use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post as route_post;
use spyglass::protocol::rest::ExecuteRequest;
use spyglass::runtime::{RuntimeConfig, start};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const STATIC_MOCK: &str =
    r#"{"bench/echo":{"id":"pay_123","status":"CONFIRMED","value":4200,"customer":"cus_1"}}"#;
pub const EXECUTE_BODY: &str =
    r#"{"tool":"bench/echo","input":{"customer":"cus_1","value":4200,"description":"bench"}}"#;

#[derive(Debug, Clone)]
pub struct ExecuteResult {
    pub connections: usize,
    pub rate: f64,
    pub baseline: f64,
    /// Runtime rate over bare rate, per round.
    pub paired: Vec<f64>,
    /// Answers other than 200 (there must be none).
    pub failures: u64,
    pub ok: u64,
}

impl ExecuteResult {
    pub fn figure(&self) -> Figure {
        Figure {
            name: "execute",
            value: self.rate,
            baseline: self.baseline,
            unit: "req/s",
            paired: self.paired.clone(),
        }
    }
}

/// Starts the bare handler: parse `ExecuteRequest`, answer `body` as JSON.
pub async fn bare_server(body: Bytes) -> anyhow::Result<SocketAddr> {
    let app = Router::new().route(
        "/v1/sessions/{id}/execute",
        route_post(move |request: Bytes| {
            let body = body.clone();
            async move {
                match serde_json::from_slice::<ExecuteRequest>(&request) {
                    Ok(req) if req.input.is_object() => {
                        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
                    }
                    _ => axum::http::StatusCode::BAD_REQUEST.into_response(),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

/// Every connection sends its own request in a loop for `secs`; returns (ok/s, ok, other).
pub async fn load(
    addr: SocketAddr,
    requests: Vec<Vec<u8>>,
    secs: f64,
) -> anyhow::Result<(f64, u64, u64)> {
    load_on(requests.into_iter().map(|r| (addr, r)).collect(), secs).await
}

/// `load` with each connection to its own server (replicas behind no balancer).
pub async fn load_on(
    targets: Vec<(SocketAddr, Vec<u8>)>,
    secs: f64,
) -> anyhow::Result<(f64, u64, u64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut conns = Vec::with_capacity(targets.len());
    let mut requests = Vec::with_capacity(targets.len());
    for (addr, request) in targets {
        conns.push(Conn::open(addr).await?);
        requests.push(request);
    }
    let start = Instant::now();
    let mut tasks = vec![];
    for (mut conn, request) in conns.into_iter().zip(requests) {
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut other) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let (status, _) = conn.request(&request).await?;
                if status == 200 { ok += 1 } else { other += 1 }
            }
            Ok::<_, anyhow::Error>((ok, other))
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut other) = (0, 0);
    for task in tasks {
        let (o, x) = task.await??;
        ok += o;
        other += x;
    }
    let elapsed = start.elapsed().as_secs_f64();
    Ok((ok as f64 / elapsed, ok, other))
}

pub fn run(connections: usize, secs: f64, rounds: usize) -> anyhow::Result<ExecuteResult> {
    run_on(connections, secs, rounds, None)
}

/// `run`, the runtime keeping its state in the `SQLite` store at `store` when given: each
/// answer then waits for the commit holding its call (the `store` figure).
pub fn run_on(
    connections: usize,
    secs: f64,
    rounds: usize,
    store: Option<&Path>,
) -> anyhow::Result<ExecuteResult> {
    // The servers get their own two workers and the generator its own, as with wrk -t2.
    let servers = super::tokio_rt(2)?;
    let generator = super::tokio_rt(2)?;
    let config = RuntimeConfig {
        test_mode: true,
        ..RuntimeConfig::default()
    };
    let addr: SocketAddr = "127.0.0.1:0".parse()?;
    let handle = match store {
        None => servers.block_on(start(config, addr))?,
        Some(path) => {
            let runtime = spyglass::store::open_runtime(config, path)?;
            servers.block_on(runtime.serve(addr))?
        }
    };
    let runtime_addr = handle.addr;
    // One session per connection, as 32 test processes would have; the answer the bare
    // handler gives is one the runtime really gave.
    let (sessions, answer) = generator.block_on(async {
        let mut sessions = vec![];
        for _ in 0..connections {
            sessions.push(create_session(runtime_addr, STATIC_MOCK).await?);
        }
        let probe = create_session(runtime_addr, STATIC_MOCK).await?;
        let mut conn = Conn::open(runtime_addr).await?;
        let (status, body) = conn
            .request(&post(&execute_path(&probe), EXECUTE_BODY))
            .await?;
        if status != 200 {
            bail!("probe execute answered {status}");
        }
        Ok::<_, anyhow::Error>((sessions, Bytes::copy_from_slice(body)))
    })?;
    let bare_addr = servers.block_on(bare_server(answer))?;
    let requests: Vec<Vec<u8>> = sessions
        .iter()
        .map(|s| post(&execute_path(s), EXECUTE_BODY))
        .collect();
    let (mut rates, mut bases, mut paired) = (vec![], vec![], vec![]);
    let (mut ok, mut failures) = (0, 0);
    if let Some(side) = Side::from_env()? {
        // A profiling aid: one side alone, so `perf stat`/`perf record` of the process
        // sees only that side's server (and the generator, the same for both).
        let target = match side {
            Side::Ours => runtime_addr,
            Side::Bare => bare_addr,
        };
        for round in 0..rounds.max(1) {
            let before = cpu_ticks();
            let (rate, o, other) = generator.block_on(load(target, requests.clone(), secs))?;
            let cpu = cpu_ticks().zip(before).map(|(a, b)| (a.0 - b.0, a.1 - b.1));
            let per = |ticks: u64| ticks as f64 * 1e6 / clock_ticks() / o.max(1) as f64;
            match cpu {
                Some((user, sys)) => eprintln!(
                    "round {round}: {side:?} {rate:.0} req/s, CPU per request user {:.2} µs sys {:.2} µs (server and generator)",
                    per(user),
                    per(sys)
                ),
                None => eprintln!("round {round}: {side:?} {rate:.0} req/s"),
            }
            match side {
                Side::Ours => rates.push(rate),
                Side::Bare => bases.push(rate),
            }
            ok += o;
            failures += other;
        }
    }
    let paired_rounds = if Side::from_env()?.is_some() {
        0
    } else {
        rounds.max(1)
    };
    for round in 0..paired_rounds {
        // Which side goes first alternates, so neither always gets the warmer machine.
        let bare = || generator.block_on(load(bare_addr, requests.clone(), secs));
        let ours = || generator.block_on(load(runtime_addr, requests.clone(), secs));
        let ((base, _, bare_other), (rate, o, other)) = if round % 2 == 0 {
            let b = bare()?;
            (b, ours()?)
        } else {
            let r = ours()?;
            (bare()?, r)
        };
        bases.push(base);
        rates.push(rate);
        if base > 0.0 {
            paired.push(rate / base);
        }
        ok += o;
        failures += other + bare_other;
    }
    servers.block_on(handle.shutdown());
    Ok(ExecuteResult {
        connections,
        rate: median(&mut rates),
        baseline: median(&mut bases),
        paired,
        failures,
        ok,
    })
    .and_then(|r| (r.ok > 0).then_some(r).context("no execute answered 200"))
}

/// `BENCH_SIDE=ours|bare`: run one side alone (a profiling aid, see docs/PERFORMANCE.md).
#[derive(Debug, Clone, Copy)]
enum Side {
    Ours,
    Bare,
}

impl Side {
    fn from_env() -> anyhow::Result<Option<Side>> {
        match std::env::var("BENCH_SIDE").ok().as_deref() {
            None | Some("") => Ok(None),
            Some("ours") => Ok(Some(Side::Ours)),
            Some("bare") => Ok(Some(Side::Bare)),
            Some(other) => bail!("BENCH_SIDE={other}: expected ours or bare"),
        }
    }
}

/// This process's (user, system) CPU time in clock ticks, from /proc/self/stat (Linux).
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis; utime and stime are the 14th and
    // 15th of the whole line, the 12th and 13th after it.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// Clock ticks a second (`getconf CLK_TCK`; 100 on Linux).
fn clock_ticks() -> f64 {
    100.0
}
