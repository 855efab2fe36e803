//! `postgres`: mocked static executes per second with the runtime's state in Postgres, on
//! one replica alone on its database and spread over two on another, against the in-memory
//! runtime in the same run.

use super::execute::{EXECUTE_BODY, STATIC_MOCK, load_on};
use super::http::{create_session, execute_path, post};
use super::{Figure, median};
use anyhow::Context;
use spyglass::runtime::{RuntimeConfig, ServerHandle, open_shared, start};
use spyglass::store::postgres::{PgSettings, PgStore};
use std::net::SocketAddr;
use std::sync::Arc;

/// What one run measured: the two figures and the answers other than 200 (none expected).
#[derive(Debug, Clone)]
pub struct PostgresResult {
    pub one: Figure,
    pub two: Figure,
    pub ok: u64,
    pub failures: u64,
}

fn config() -> RuntimeConfig {
    RuntimeConfig {
        test_mode: true,
        ..RuntimeConfig::default()
    }
}

async fn replica(url: &str, name: &str, pool_size: usize) -> anyhow::Result<ServerHandle> {
    let settings = PgSettings {
        pool_size,
        replica: name.to_owned(),
    };
    let store = PgStore::connect(url, settings, &|_| {}).await?;
    let runtime = open_shared(config(), Arc::new(store)).await?;
    Ok(runtime.serve("127.0.0.1:0".parse()?).await?)
}

/// `connections` keep-alive connections for `secs` a side, `rounds` rounds of memory, one
/// replica and two, in turn (the order rotating each round); ratios per round against the
/// memory side of the same round. `one_url`, `two_url`: two empty databases, one for the
/// lone replica and one for the pair, so the pair's second replica is not following the
/// lone one's stream while it is measured (a one-replica runtime has no follower).
pub fn run(
    connections: usize,
    secs: f64,
    rounds: usize,
    one_url: &str,
    two_url: &str,
) -> anyhow::Result<PostgresResult> {
    let servers = super::tokio_rt(2)?;
    let generator = super::tokio_rt(2)?;
    let memory = servers.block_on(start(config(), "127.0.0.1:0".parse()?))?;
    let solo = servers.block_on(replica(one_url, "bench_solo", connections.max(2)))?;
    let a = servers.block_on(replica(two_url, "bench_a", connections.max(2)))?;
    let b = servers.block_on(replica(two_url, "bench_b", connections.max(2)))?;
    let (memory_addr, solo_addr, a_addr, b_addr) = (memory.addr, solo.addr, a.addr, b.addr);
    // One session per connection on each side; the pair's sessions are made on one and
    // used from both (the other reads it from the database at its first call).
    let (memory_sessions, solo_sessions, shared_sessions) = generator.block_on(async {
        let mut memory_sessions = vec![];
        let mut solo_sessions = vec![];
        let mut shared_sessions = vec![];
        for _ in 0..connections {
            memory_sessions.push(create_session(memory_addr, STATIC_MOCK).await?);
            solo_sessions.push(create_session(solo_addr, STATIC_MOCK).await?);
            shared_sessions.push(create_session(a_addr, STATIC_MOCK).await?);
        }
        Ok::<_, anyhow::Error>((memory_sessions, solo_sessions, shared_sessions))
    })?;
    let on = |addr: SocketAddr, session: &str| (addr, post(&execute_path(session), EXECUTE_BODY));
    let memory_load: Vec<_> = memory_sessions.iter().map(|s| on(memory_addr, s)).collect();
    let one_load: Vec<_> = solo_sessions.iter().map(|s| on(solo_addr, s)).collect();
    let two_load: Vec<_> = shared_sessions
        .iter()
        .enumerate()
        .map(|(i, s)| on(if i % 2 == 0 { a_addr } else { b_addr }, s))
        .collect();
    // Warm-up: the second replica reads its sessions in, the pools fill.
    generator.block_on(load_on(two_load.clone(), secs.min(0.5)))?;
    generator.block_on(load_on(one_load.clone(), secs.min(0.5)))?;
    let (mut mem_rates, mut one_rates, mut two_rates) = (vec![], vec![], vec![]);
    let (mut one_paired, mut two_paired) = (vec![], vec![]);
    let (mut ok, mut failures) = (0, 0);
    for round in 0..rounds.max(1) {
        let mut measured = [0.0f64; 3];
        for turn in 0..3 {
            let side = (round + turn) % 3;
            let targets = match side {
                0 => memory_load.clone(),
                1 => one_load.clone(),
                _ => two_load.clone(),
            };
            let (rate, o, other) = generator.block_on(load_on(targets, secs))?;
            measured[side] = rate;
            if side > 0 {
                ok += o;
            }
            failures += other;
        }
        mem_rates.push(measured[0]);
        one_rates.push(measured[1]);
        two_rates.push(measured[2]);
        if measured[0] > 0.0 {
            one_paired.push(measured[1] / measured[0]);
            two_paired.push(measured[2] / measured[0]);
        }
    }
    for handle in [memory, solo, a, b] {
        servers.block_on(handle.shutdown());
    }
    let baseline = median(&mut mem_rates);
    let result = PostgresResult {
        one: Figure {
            name: "postgres",
            value: median(&mut one_rates),
            baseline,
            unit: "req/s",
            paired: one_paired,
        },
        two: Figure {
            name: "postgres2",
            value: median(&mut two_rates),
            baseline,
            unit: "req/s",
            paired: two_paired,
        },
        ok,
        failures,
    };
    (result.ok > 0)
        .then_some(result)
        .context("no execute on Postgres answered 200")
}
