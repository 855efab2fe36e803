//! `otel` bench: `cargo bench --bench otel -- --figure` prints the figure line (spans/s
//! decoded and folded into sessions, against decoding alone); without `--figure`,
//! criterion compares the two; `-- --profile N` runs each once over N requests for a
//! profiler.

mod support;

use criterion::{Criterion, Throughput};
use spyglass::runtime::{Runtime, RuntimeConfig};
use std::time::Duration;
use support::otel;

/// `--profile N`: decoding alone, then decoding and folding into a fresh runtime, of N
/// requests, each behind a function of its own so a profiler (`valgrind --tool=callgrind`,
/// `perf record`) can tell the two apart.
fn profile(traces: usize) -> anyhow::Result<()> {
    #[inline(never)]
    fn profile_decode_only(bodies: &[Vec<u8>]) -> anyhow::Result<usize> {
        otel::decode_only(bodies)
    }
    #[inline(never)]
    fn profile_decode_fold(rt: &Runtime, bodies: &[Vec<u8>]) -> anyhow::Result<usize> {
        otel::decode_and_fold(rt, bodies)
    }
    let bodies = otel::requests(traces);
    let spans = profile_decode_only(&bodies)?;
    let rt = Runtime::new(RuntimeConfig {
        retained_events: spans * 2 + 10,
        ..RuntimeConfig::default()
    });
    let before = resident();
    let folded = profile_decode_fold(&rt, &bodies)?;
    let grown = resident().saturating_sub(before);
    eprintln!(
        "otel profile: {spans} spans decoded, {folded} folded, {} events retained; resident \
         size grew {grown} bytes, {:.0} a span; the budget counts {:.0} a span",
        rt.stats().retained,
        grown as f64 / folded.max(1) as f64,
        rt.budget_stats().retained_bytes as f64 / folded.max(1) as f64
    );
    Ok(())
}

/// The process's resident size in bytes (`VmRSS`), 0 where `/proc` has none.
fn resident() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

/// CPU time this thread has run, from `/proc/thread-self/schedstat` (Linux): unlike the
/// wall clock it does not count the time other processes held the core.
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// `--cpu`: the figure's rounds measured in this thread's CPU time instead of the wall
/// clock, for a machine other work keeps busy.
fn cpu_figure() -> anyhow::Result<()> {
    let traces = 50_000;
    let bodies = otel::requests(traces);
    let spans = (traces * otel::SPANS_PER_TRACE) as f64;
    let mut ratios = Vec::new();
    for _ in 0..5 {
        let cpu = || thread_cpu().ok_or_else(|| anyhow::anyhow!("no /proc/thread-self/schedstat"));
        let started = cpu()?;
        otel::decode_only(&bodies)?;
        let decode = cpu()?.saturating_sub(started).as_secs_f64();
        let rt = Runtime::new(RuntimeConfig {
            retained_events: traces * otel::SPANS_PER_TRACE * 2 + 10,
            ..RuntimeConfig::default()
        });
        let started = cpu()?;
        otel::decode_and_fold(&rt, &bodies)?;
        let fold = cpu()?.saturating_sub(started).as_secs_f64();
        eprintln!(
            "otel cpu: decode alone {:.0} ns/span, decode+fold {:.0} ns/span, ratio {:.3}",
            decode / spans * 1e9,
            fold / spans * 1e9,
            decode / fold
        );
        ratios.push(decode / fold);
    }
    println!("otel cpu ratio median {:.3}", support::median(&mut ratios));
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--cpu") {
        if let Err(err) = cpu_figure() {
            eprintln!("otel cpu: {err:#}");
            std::process::exit(1);
        }
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--profile") {
        let traces = args
            .get(at + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(2_000);
        if let Err(err) = profile(traces) {
            eprintln!("otel profile: {err:#}");
            std::process::exit(1);
        }
        return;
    }
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
