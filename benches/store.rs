//! `store` bench: mocked static executes per second with the runtime's state in a `SQLite`
//! store (each answer waits for the journal's write holding its call), against bare axum.

mod support;

fn main() {
    let conns = std::env::var("BENCH_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let dir = std::env::temp_dir().join(format!("spyglass-store-bench-{}", std::process::id()));
    let path = dir.join("runtime.db");
    let result = support::execute::run_on(conns, 1.0, 9, Some(&path)).map(|r| {
        let size = std::fs::read_dir(&dir).map_or(0, |entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum::<u64>()
        });
        eprintln!(
            "store: {} connections, {} answered 200 (each in the journal first), {} other answers; store files {:.1} MiB",
            r.connections,
            r.ok,
            r.failures,
            size as f64 / (1024.0 * 1024.0)
        );
        support::Figure {
            name: "store",
            ..r.figure()
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
    support::print_figure(result);
}
