//! Every benchmark body run once at tiny scale, so the benches cannot rot: the same code
//! `scripts/bench` times, checked here for what it must have done (frames folded, rows
//! drawn, every entry served once).

#[path = "../../benches/support/mod.rs"]
mod support;

#[test]
fn ingest_folds_every_frame_that_came_over_the_socket() {
    let _process = crate::PROCESS.blocking_read();
    let r = support::ingest::run(2_000, 1).unwrap();
    assert_eq!(r.frames, 2_000);
    assert_eq!(r.folded, 2_000, "every frame folded");
    assert_eq!(r.parse_errors, 0);
    assert_eq!(r.sessions, 20);
    assert!(r.rate > 0.0 && r.baseline > 0.0);
    assert!(r.figure().line().starts_with("ingest="));
}

#[test]
fn frame_draws_every_view_with_the_list_full() {
    let _process = crate::PROCESS.blocking_read();
    let r = support::frame::run(200, 100, 2_000, 2).unwrap();
    assert_eq!(r.views.len(), support::frame::views().len());
    let sessions = r.views.iter().find(|v| v.view == "sessions").unwrap();
    // 50 rows: tab bar, status bar, list borders and header leave 45 session rows.
    let rows = sessions
        .screen_large
        .lines()
        .filter(|l| l.contains("ses_000"))
        .count();
    assert_eq!(rows, 45, "{}", sessions.screen_large);
    assert!(
        sessions.screen_large.contains("›ses_000199"),
        "newest first, selected"
    );
    let detail = r.views.iter().find(|v| v.view == "detail").unwrap();
    assert!(
        detail.screen_large.contains("Input"),
        "{}",
        detail.screen_large
    );
    let filter = r.views.iter().find(|v| v.view == "filter").unwrap();
    assert!(filter.screen_large.contains("/ses_0099"));
    assert!(r.figure().unwrap().value > 0.0);
}

#[test]
fn memory_counts_resident_bytes_for_retained_events() {
    let _process = crate::PROCESS.blocking_read();
    let r = support::memory::run(200, 9).unwrap();
    assert_eq!(r.events, 2_000);
    assert_eq!(r.sessions, 200, "the bound keeps exactly one workload");
    assert_eq!(
        r.dropped_sessions, 400,
        "two more workloads pushed it out twice"
    );
    // 9 payload frames per session: 7 calls from `tool.called`, 2 from steps.
    assert_eq!(r.calls, 200 * 9);
    assert!(r.raw_per_event > 300.0 && r.raw_per_event < 700.0);
    assert!(r.rss_full > 0);
}

#[test]
fn latency_sees_every_emitted_event_drawn() {
    let _process = crate::PROCESS.blocking_read();
    let r = support::latency::run(2_000, 1.0).unwrap();
    assert_eq!(r.folded, 2_000);
    assert!(r.frames >= 2);
    assert!(r.p99_ms >= r.p50_ms && r.p99_ms > 0.0);
    assert!(r.baseline_p99_ms > 0.0);
}

#[test]
fn execute_answers_200_from_runtime_and_bare_handler() {
    let _process = crate::PROCESS.blocking_read();
    let r = support::execute::run(4, 0.2, 1).unwrap();
    assert_eq!(r.failures, 0);
    assert!(r.ok > 0 && r.rate > 0.0 && r.baseline > 0.0);
}

#[test]
fn store_answers_only_what_it_committed() {
    let _process = crate::PROCESS.blocking_read();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.db");
    let r = support::execute::run_on(4, 0.2, 1, Some(&path)).unwrap();
    assert_eq!(r.failures, 0);
    assert!(r.ok > 0 && r.rate > 0.0 && r.baseline > 0.0);
    // Every call answered 200 is in the file: reopened, its stream has at least as many
    // events (the sessions' creations and the probe's call besides).
    let reopened = spyglass::store::open_runtime(
        spyglass::runtime::RuntimeConfig {
            retained_events: 10_000_000,
            ..spyglass::runtime::RuntimeConfig::default()
        },
        &path,
    )
    .unwrap();
    let emitted = reopened.stats().emitted;
    assert!(
        emitted >= r.ok,
        "{} calls answered, {emitted} events stored",
        r.ok
    );
}

#[test]
fn consume_serves_each_entry_once_under_64_clients() {
    let _process = crate::PROCESS.blocking_read();
    let r = support::consume::run(64, 300, 1).unwrap();
    assert!(r.exact);
    assert_eq!(r.successes, 300);
    assert_eq!(r.exhausted, 64, "each client ends on mocks_exhausted");
    assert!(r.rate > 0.0 && r.baseline > 0.0);
}

#[test]
fn otel_decodes_and_folds_every_span() {
    let _process = crate::PROCESS.blocking_read();
    let r = support::otel::run(&support::otel::Workload::Minimal, 50, 1).unwrap();
    assert_eq!(r.spans, 200);
    // Per trace: a session, two steps, a call, the run's end.
    assert_eq!(r.events, 50 * 5);
    assert!(r.rate > 0.0 && r.baseline > 0.0);
    assert!(r.bytes_per_span > 0.0);
    assert!(r.figure().line().starts_with("otel="));
    // The captured runs, three copies: every copy is sessions of its own
    // (Pydantic AI: 5 spans, 6 events; the Vercel AI SDK: 6 spans, 7 events).
    let workload = support::otel::Workload::captured().unwrap();
    let (_, spans) = workload.batch(0, 1);
    assert_eq!(spans, 11);
    let r = support::otel::run(&workload, 3, 1).unwrap();
    assert_eq!((r.spans, r.requests), (33, 18));
    assert_eq!(r.events, 3 * 13);
    // And in a runtime that already holds two copies: three more are new sessions.
    let r = support::otel::run_steady(&workload, 2, 3, 1).unwrap();
    assert_eq!((r.spans, r.events), (33, 5 * 13));
}

#[test]
fn postgres_answers_200_on_one_replica_and_on_two() {
    let _process = crate::PROCESS.blocking_read();
    let one = crate::support::postgres::fresh_database("bench_smoke_one");
    let two = crate::support::postgres::fresh_database("bench_smoke_two");
    let r = support::postgres::run(4, 0.2, 1, &one, &two).unwrap();
    assert_eq!(r.failures, 0);
    assert!(r.ok > 0 && r.one.value > 0.0 && r.two.value > 0.0 && r.one.baseline > 0.0);
    assert!(r.one.line().starts_with("postgres="));
    assert!(r.two.line().starts_with("postgres2="));
}
