//! `postgres` bench: mocked static executes per second with the runtime's state in
//! Postgres (a throwaway local cluster), on one replica alone and over two, against the
//! in-memory runtime in the same run. Prints two figure lines: `postgres`, `postgres2`.

mod support;

// The tests' throwaway cluster; the bench uses only part of it.
#[allow(dead_code)]
#[path = "../tests/support/postgres.rs"]
mod cluster;

fn main() {
    let conns = std::env::var("BENCH_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let one = cluster::fresh_database("bench_one");
    let two = cluster::fresh_database("bench_two");
    match support::postgres::run(conns, 1.0, 7, &one, &two) {
        Ok(r) => {
            eprintln!(
                "postgres: {conns} connections, {} answered 200 on the replicas (each committed first), {} other answers",
                r.ok, r.failures
            );
            support::print_figure(Ok(r.one));
            support::print_figure(Ok(r.two));
        }
        Err(err) => support::print_figure(Err(err)),
    }
}
