//! `execute` bench: mocked static executes per second through the runtime over real HTTP,
//! 32 keep-alive connections, against a bare axum handler with the same generator.

mod support;

fn main() {
    let conns = std::env::var("BENCH_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let result = support::execute::run(conns, 1.0, 9);
    if let Ok(r) = &result {
        eprintln!(
            "execute: {} connections, {} answered 200 by the runtime, {} other answers",
            r.connections, r.ok, r.failures
        );
    }
    support::print_figure(result.map(|r| r.figure()));
}
