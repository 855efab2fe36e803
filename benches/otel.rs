//! `otel` bench: `cargo bench --bench otel -- --figure` prints the figure line (spans/s
//! decoded and folded into sessions, against decoding alone, on the requests real
//! producers sent; the same for a minimal synthetic set on stderr); without `--figure`,
//! criterion compares the two; `-- --profile N` runs each once over N copies for a
//! profiler; `-- --cpu` times the figure's rounds by this thread's CPU time; `-- --steady`
//! runs them in a runtime at its default bounds, evicting as it folds.

mod support;

use criterion::{Criterion, Throughput};
use spyglass::runtime::{Runtime, RuntimeConfig};
use std::time::Duration;
use support::otel::{self, Workload};

/// Copies of the captured runs a figure round folds (11 spans each).
const CAPTURED_COPIES: usize = 10_000;
/// Traces of the minimal set a figure round folds (4 spans each).
const MINIMAL_TRACES: usize = 50_000;

/// `--profile N` (`--minimal` for that set): one round of the figure over N copies, for a
/// profiler (`perf record`, `valgrind --tool=callgrind`: decoding alone is
/// `support::otel::decode_only`, decoding and folding `decode_and_fold`), and what the
/// fold left resident.
fn profile(workload: &Workload, copies: usize) -> anyhow::Result<()> {
    let r = otel::run(workload, copies, 1)?;
    eprintln!(
        "otel profile: {} spans decoded and folded, {} events retained; resident size grew \
         {:.0} bytes a span; the budget counts {:.0} a span",
        r.spans, r.events, r.resident_per_span, r.bytes_per_span
    );
    Ok(())
}

/// CPU time this thread has run, from `/proc/thread-self/schedstat` (Linux): unlike the
/// wall clock it does not count the time other processes held the core. `None` where the
/// file is missing (a new thread may read 0 until it is first scheduled out).
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// `--cpu`: the figure's rounds measured in this thread's CPU time instead of the wall
/// clock, for a machine other work keeps busy. Coarse: the kernel brings a running
/// thread's count up to date at scheduler ticks, and a batch takes a few milliseconds, so
/// its rounds spread wider than the wall clock's on a quiet machine.
fn cpu_figure() -> anyhow::Result<()> {
    anyhow::ensure!(thread_cpu().is_some(), "no /proc/thread-self/schedstat");
    for (name, workload, copies) in [
        ("captured", Workload::captured()?, CAPTURED_COPIES),
        ("minimal", Workload::Minimal, MINIMAL_TRACES),
    ] {
        let r = otel::run_timed(&workload, copies, 5, &|| thread_cpu().unwrap_or_default())?;
        eprintln!(
            "otel cpu, {name}: decode alone {:.0} ns/span, decode+fold {:.0} ns/span, rounds {:.3?}",
            1e9 / r.baseline,
            1e9 / r.rate,
            r.paired
        );
        println!("otel cpu {name} ratio median {:.3}", r.figure().ratio());
    }
    Ok(())
}

fn figure() -> anyhow::Result<support::Figure> {
    // The captured runs first, so their first round grows a fresh process.
    let r = otel::run(&Workload::captured()?, CAPTURED_COPIES, 5)?;
    let minimal = otel::run(&Workload::Minimal, MINIMAL_TRACES, 5)?;
    eprintln!(
        "otel, minimal synthetic spans ({} spans in {} requests): decode alone {:.0}/s; \
         decode+fold {:.0}/s; ratio {:.2}; the budget counts {:.0} bytes a span",
        minimal.spans,
        minimal.requests,
        minimal.baseline,
        minimal.rate,
        minimal.figure().ratio(),
        minimal.bytes_per_span
    );
    eprintln!(
        "otel, captured runs ({} spans in {} requests): decode alone {:.0}/s; decode+fold \
         {:.0}/s; {} events retained; the budget counts {:.0} bytes a span, the resident \
         size grew {:.0} a span",
        r.spans, r.requests, r.baseline, r.rate, r.events, r.bytes_per_span, r.resident_per_span
    );
    Ok(r.figure())
}

/// `--steady`: the figure's rounds in a runtime at its default bounds (`run_steady`).
/// `--minimal` or `--captured` runs that set alone.
fn steady_figure(only: Option<&str>) -> anyhow::Result<()> {
    for (name, workload, warm, copies) in [
        ("captured", Workload::captured()?, 10_000, CAPTURED_COPIES),
        ("minimal", Workload::Minimal, 40_000, MINIMAL_TRACES),
    ] {
        if only.is_some_and(|only| only != name) {
            continue;
        }
        let r = otel::run_steady(&workload, warm, copies, 5)?;
        eprintln!(
            "otel steady, {name}: decode alone {:.0}/s, decode+fold {:.0}/s, {} events \
             retained, rounds {:.3?}",
            r.baseline, r.rate, r.events, r.paired
        );
        println!("otel steady {name} ratio median {:.3}", r.figure().ratio());
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--steady") {
        let only = if args.iter().any(|a| a == "--minimal") {
            Some("minimal")
        } else if args.iter().any(|a| a == "--captured") {
            Some("captured")
        } else {
            None
        };
        if let Err(err) = steady_figure(only) {
            eprintln!("otel steady: {err:#}");
            std::process::exit(1);
        }
        return;
    }
    if args.iter().any(|a| a == "--cpu") {
        if let Err(err) = cpu_figure() {
            eprintln!("otel cpu: {err:#}");
            std::process::exit(1);
        }
        return;
    }
    if let Some(at) = args.iter().position(|a| a == "--profile") {
        let copies = args
            .get(at + 1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(2_000);
        let workload = if args.iter().any(|a| a == "--minimal") {
            Ok(Workload::Minimal)
        } else {
            Workload::captured()
        };
        if let Err(err) = workload.and_then(|w| profile(&w, copies)) {
            eprintln!("otel profile: {err:#}");
            std::process::exit(1);
        }
        return;
    }
    if support::figure_mode() {
        support::print_figure(figure());
        return;
    }
    let workload = match Workload::captured() {
        Ok(workload) => workload,
        Err(err) => {
            eprintln!("otel: {err:#}");
            std::process::exit(1);
        }
    };
    let (bodies, spans) = workload.all(500);
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let mut group = c.benchmark_group("otel");
    group.throughput(Throughput::Elements(spans as u64));
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
