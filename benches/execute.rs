//! `execute` bench: mocked static executes per second through the runtime over real HTTP,
//! 32 keep-alive connections, against a bare axum handler with the same generator.

mod support;

fn main() {
    let conns = std::env::var("BENCH_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    // Profiling aids (docs/PERFORMANCE.md): seconds a side a round, and rounds.
    let secs = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    let rounds = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let result = support::execute::run(conns, secs, rounds);
    if let Ok(r) = &result {
        eprintln!(
            "execute: {} connections, {} answered 200 by the runtime, {} other answers",
            r.connections, r.ok, r.failures
        );
    }
    support::print_figure(result.map(|r| r.figure()));
}
