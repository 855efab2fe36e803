//! `memory` bench: resident bytes per retained event after 1 M events (10 k sessions of
//! 100 frames) against their raw JSON size, then flatness once the bound is reached.
//! Always prints the figure line; the limits and resident sizes go to stderr.

mod support;

fn main() {
    let result = support::memory::run(10_000, 99);
    if let Ok(r) = &result {
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        eprintln!(
            "memory: {} events, limits sessions={} calls/session={} steps/session={}; kept {} sessions, {} calls",
            r.events,
            r.limits.sessions,
            r.limits.calls_per_session,
            r.limits.steps_per_session,
            r.sessions,
            r.calls
        );
        eprintln!(
            "memory: rss start {:.1} MiB, at bound {:.1} MiB, +1M {:.1} MiB, +2M {:.1} MiB (growth after bound {:.1} %, {} sessions dropped); {:.0} B/event over raw",
            mib(r.rss_start),
            mib(r.rss_full),
            mib(r.rss_next),
            mib(r.rss_last),
            r.growth_after_bound() * 100.0,
            r.dropped_sessions,
            r.per_event - r.raw_per_event
        );
    }
    support::print_figure(result.map(|r| r.figure()));
}
