//! `latency` bench: emit -> drawn p99 at 10 k events/s sustained for 5 s, against the
//! bare transport (the same stream read by a plain WebSocket client) in the same run.

mod support;

fn main() {
    let result = support::latency::run(10_000, 5.0);
    if let Ok(r) = &result {
        eprintln!(
            "latency: {} events at {}/s, {} frames; emit->drawn p50 {:.2} ms p99 {:.2} ms max {:.2} ms; bare transport p50 {:.3} ms p99 {:.3} ms",
            r.events,
            r.rate,
            r.frames,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.baseline_p50_ms,
            r.baseline_p99_ms
        );
    }
    support::print_figure(result.map(|r| r.figure()));
}
