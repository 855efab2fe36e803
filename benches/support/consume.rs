//! `consume`: 64 concurrent clients drain one session's stateful mock over HTTP. Exact
//! means every entry is served once and only once (successes = entries, each `n` seen
//! once) and each client then gets `mocks_exhausted`. The baseline is the same 64
//! clients making as many calls to a static mock of the same session.

use super::http::{Conn, create_session, execute_path, post};
use super::{Figure, median};
use anyhow::bail;
use serde::Deserialize;
use spyglass::runtime::{RuntimeConfig, start};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

const STATEFUL_BODY: &str = r#"{"tool":"bench/consume","input":{"order":"ord_1"}}"#;
const STATIC_BODY: &str = r#"{"tool":"bench/static","input":{"order":"ord_1"}}"#;

#[derive(Debug, Clone)]
pub struct ConsumeResult {
    pub clients: usize,
    pub rounds: usize,
    pub entries: usize,
    pub successes: usize,
    pub exhausted: usize,
    /// Every entry served exactly once, in every round.
    pub exact: bool,
    pub rate: f64,
    pub baseline: f64,
}

impl ConsumeResult {
    pub fn figure(&self) -> Figure {
        Figure {
            name: "consume",
            value: self.rate,
            baseline: self.baseline,
            unit: "req/s",
            paired: Vec::new(),
        }
    }
}

fn mocks(entries: usize) -> String {
    let list: Vec<String> = (0..entries).map(|n| format!(r#"{{"n":{n}}}"#)).collect();
    format!(
        r#"{{"bench/consume":[{}],"bench/static":{{"n":-1}}}}"#,
        list.join(",")
    )
}

#[derive(Deserialize)]
struct Served {
    data: Entry,
}

#[derive(Deserialize)]
struct Entry {
    n: i64,
}

/// One round: the stateful drain, then the static baseline. Returns (served n's,
/// exhausted answers, drain rate, static rate).
async fn round(
    addr: SocketAddr,
    clients: usize,
    entries: usize,
) -> anyhow::Result<(Vec<i64>, usize, f64, f64)> {
    let session = create_session(addr, &mocks(entries)).await?;
    let path = execute_path(&session);
    let stateful = Arc::new(post(&path, STATEFUL_BODY));
    let mut conns = vec![];
    for _ in 0..clients {
        conns.push(Conn::open(addr).await?);
    }
    let start = Instant::now();
    let mut tasks = vec![];
    for mut conn in conns {
        let request = stateful.clone();
        tasks.push(tokio::spawn(async move {
            let mut served = vec![];
            loop {
                let (status, body) = conn.request(&request).await?;
                match status {
                    200 => served.push(serde_json::from_slice::<Served>(body)?.data.n),
                    422 if String::from_utf8_lossy(body).contains("mocks_exhausted") => {
                        return Ok::<_, anyhow::Error>((served, conn));
                    }
                    other => bail!("stateful execute answered {other}"),
                }
            }
        }));
    }
    let (mut served, mut exhausted, mut conns) = (vec![], 0, vec![]);
    for task in tasks {
        let (mine, conn) = task.await??;
        served.extend(mine);
        exhausted += 1;
        conns.push(conn);
    }
    let calls = served.len() + exhausted;
    let rate = calls as f64 / start.elapsed().as_secs_f64();

    // The same number of calls on the static mock of the same session.
    let tickets = Arc::new(AtomicI64::new(i64::try_from(calls)?));
    let fixed = Arc::new(post(&path, STATIC_BODY));
    let start = Instant::now();
    let mut tasks = vec![];
    for mut conn in conns {
        let (tickets, request) = (tickets.clone(), fixed.clone());
        tasks.push(tokio::spawn(async move {
            while tickets.fetch_sub(1, Ordering::Relaxed) > 0 {
                let (status, _) = conn.request(&request).await?;
                if status != 200 {
                    bail!("static execute answered {status}");
                }
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let baseline = calls as f64 / start.elapsed().as_secs_f64();
    Ok((served, exhausted, rate, baseline))
}

pub fn run(clients: usize, entries: usize, rounds: usize) -> anyhow::Result<ConsumeResult> {
    let servers = super::tokio_rt(2)?;
    let generator = super::tokio_rt(2)?;
    let handle = servers.block_on(start(
        RuntimeConfig {
            test_mode: true,
            ..RuntimeConfig::default()
        },
        "127.0.0.1:0".parse()?,
    ))?;
    let (mut rates, mut bases) = (vec![], vec![]);
    let (mut successes, mut exhausted, mut exact) = (0, 0, true);
    for _ in 0..rounds.max(1) {
        let (mut served, ex, rate, base) =
            generator.block_on(round(handle.addr, clients, entries))?;
        served.sort_unstable();
        let expected: Vec<i64> = (0..i64::try_from(entries)?).collect();
        exact &= served == expected && ex == clients;
        successes += served.len();
        exhausted += ex;
        rates.push(rate);
        bases.push(base);
    }
    servers.block_on(handle.shutdown());
    Ok(ConsumeResult {
        clients,
        rounds: rounds.max(1),
        entries: entries * rounds.max(1),
        successes,
        exhausted,
        exact,
        rate: median(&mut rates),
        baseline: median(&mut bases),
    })
}
