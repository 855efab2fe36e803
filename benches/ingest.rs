//! `ingest` bench: `cargo bench --bench ingest -- --figure` prints the figure line;
//! without `--figure`, criterion compares decode alone, decode + fold, and the WebSocket.

mod support;

use criterion::{Criterion, Throughput};
use std::time::Duration;
use support::ingest;

fn main() {
    if support::figure_mode() {
        let result = ingest::run(200_000, 9);
        if let Ok(r) = &result {
            eprintln!(
                "ingest: {} frames over loopback WebSocket, {} folded, {} sessions; decode alone {:.0}/s; decode+fold in-process {:.0}/s; fold loop busy {:.0} %",
                r.frames,
                r.folded,
                r.sessions,
                r.baseline,
                r.in_process,
                r.fold_busy * 100.0
            );
        }
        support::print_figure(result.map(|r| r.figure()));
        return;
    }
    let texts = ingest::workload(20_000).texts();
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let mut group = c.benchmark_group("ingest");
    group.throughput(Throughput::Elements(texts.len() as u64));
    group.bench_function("parse_only", |b| {
        b.iter(|| ingest::parse_only(&texts).map_err(|e| e.to_string()));
    });
    group.bench_function("decode_fold", |b| {
        b.iter(|| ingest::decode_and_fold(&texts).map_err(|e| e.to_string()));
    });
    let msgs = ingest::messages(&texts);
    let rt = support::tokio_rt(2).map_err(|e| e.to_string());
    if let Ok(rt) = rt {
        group.sample_size(10);
        group.bench_function("websocket_fold", |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    if let Ok((rate, _, _)) = rt.block_on(ingest::over_websocket(&msgs)) {
                        total += Duration::from_secs_f64(texts.len() as f64 / rate);
                    }
                }
                total
            });
        });
    }
    group.finish();
    c.final_summary();
}
