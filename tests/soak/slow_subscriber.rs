//! A subscriber that connects and never reads while 200,000 events are emitted: the
//! runtime's memory stays flat. The log holds at most `retained_events`, the live queue
//! at most `subscriber_queue`, the process's resident memory does not grow with the
//! stream, and the stalled subscriber still gets a `stream.gap` and goes on once it
//! reads. Its own test binary, so no other test's allocations move the RSS figures.

use crate::support::runtime::*;
use spyglass::protocol::events::{CallSource, Outcome, ToolCalled};
use spyglass::protocol::{Event, RawJson};
use spyglass::runtime::RuntimeConfig;
use std::time::Duration;

const EVENTS: usize = 200_000;
const RETAINED: usize = 5_000;
const QUEUE: usize = 256;

/// Resident memory of this process, from /proc (Linux; the runtime's platform).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A ~700-byte event, so holding every one would be ~140 MiB and impossible to miss.
fn event(i: usize) -> Event {
    Event::ToolCalled(ToolCalled {
        call_id: format!("call_{i}").into(),
        tool: "asaas/x".into(),
        input: RawJson::from_value(&serde_json::json!({"pad": "i".repeat(600)})),
        outcome: Outcome::Result(RawJson::from_value(&serde_json::json!({"ok": i}))),
        source: CallSource::Execute,
        ..ToolCalled::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_subscriber_costs_bounded_memory() {
    let _process = crate::PROCESS.write().await;
    let handle = server(RuntimeConfig {
        retained_events: RETAINED,
        subscriber_queue: QUEUE,
        ..test_config()
    })
    .await;
    let rt = handle.runtime();
    // Connected, then never read: the socket buffers fill and the server's sends stall.
    // `since=0`: it wants every event, so one the server has not sent by the time the
    // subscription starts (a loaded machine) must come as a replay or a gap, never be lost.
    let mut stalled = observe(&handle, "?since=0").await;
    let mut samples = Vec::new();
    for i in 0..EVENTS {
        rt.emit(None, event(i));
        if i % 1000 == 999 {
            tokio::task::yield_now().await;
        }
        if i % 20_000 == 19_999 {
            let stats = rt.stats();
            assert!(stats.retained <= RETAINED, "log grew to {}", stats.retained);
            assert!(
                stats.longest_queue <= QUEUE,
                "queue grew to {}",
                stats.longest_queue
            );
            assert_eq!(stats.subscribers, 1);
            samples.push(rss_kib());
        }
    }
    let stats = rt.stats();
    assert_eq!(stats.emitted, EVENTS as u64);
    assert_eq!(stats.retained, RETAINED);
    // Past the warm-up (log full, buffers at their size) memory is flat: the last sample
    // is within 24 MiB of the second, where keeping the stream would add ~120 MiB.
    let (warm, last) = (samples[1], *samples.last().unwrap());
    println!("RSS KiB every 20k events: {samples:?}");
    assert!(
        last < warm + 24 * 1024,
        "memory grew from {warm} KiB to {last} KiB while the subscriber stalled: {samples:?}"
    );

    // The stalled subscriber, once it reads, is told what it missed and goes on live.
    let mut last_seq = 0u64;
    let mut gaps = 0;
    while last_seq < EVENTS as u64 {
        let frame = next_frame(&mut stalled, Duration::from_secs(10))
            .await
            .unwrap();
        if frame["kind"] == "stream.hello" {
            continue;
        }
        if frame["kind"] == "stream.gap" {
            gaps += 1;
            assert_eq!(frame["from"].as_u64().unwrap(), last_seq + 1);
            last_seq = frame["to"].as_u64().unwrap();
        } else {
            let seq = frame["seq"].as_u64().unwrap();
            assert_eq!(seq, last_seq + 1, "no silent loss");
            last_seq = seq;
        }
    }
    assert!(gaps >= 1);
    rt.emit(None, event(EVENTS));
    let frame = next_frame(&mut stalled, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(frame["seq"].as_u64(), Some(EVENTS as u64 + 1));
    handle.shutdown().await;
}
