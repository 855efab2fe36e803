//! `otel` bench: `cargo bench --bench otel -- --figure` prints the figure line (spans/s
//! decoded and folded into sessions, against decoding alone); without `--figure`,
//! criterion compares the two.

mod support;

use criterion::{Criterion, Throughput};
use spyglass::runtime::{Runtime, RuntimeConfig};
use std::time::Duration;
use support::otel;

fn main() {
    if support::figure_mode() {
        let result = otel::run(50_000, 5);
        if let Ok(r) = &result {
            eprintln!(
                "otel: {} spans in {} requests; decode alone {:.0}/s; decode+fold {:.0}/s; {} events retained, {:.0} bytes per span",
                r.spans,
                r.spans / otel::SPANS_PER_TRACE,
                r.baseline,
                r.rate,
                r.events,
                r.bytes_per_span
            );
        }
        support::print_figure(result.map(|r| r.figure()));
        return;
    }
    let bodies = otel::requests(5_000);
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let mut group = c.benchmark_group("otel");
    group.throughput(Throughput::Elements(
        (bodies.len() * otel::SPANS_PER_TRACE) as u64,
    ));
    group.bench_function("decode_only", |b| {
        b.iter(|| otel::decode_only(&bodies).map_err(|e| e.to_string()));
    });
    group.bench_function("decode_fold", |b| {
        b.iter(|| {
            let rt = Runtime::new(RuntimeConfig::default());
            otel::decode_and_fold(&rt, &bodies).map_err(|e| e.to_string())
        });
    });
    group.finish();
    c.final_summary();
}
