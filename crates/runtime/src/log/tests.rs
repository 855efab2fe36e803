//! Tests of the event log: retention, eviction, gaps, subscriptions.
//! Kept beside log.rs so the production file stays short.

use super::writer::{MAX_PENDING, excess};
use super::*;
use spyglass_protocol::events::SessionClosed;

fn closed() -> Event {
    Event::SessionClosed(SessionClosed::default())
}

#[test]
fn evicted_events_are_freed_a_batch_at_a_time_and_counted_at_once() {
    let budget = Arc::new(Budget::new(usize::MAX));
    let log = EventLog::new(4, 8, budget.clone());
    let first: Vec<_> = (0..4)
        .map(|_| Arc::downgrade(&log.append("t".into(), None, closed())))
        .collect();
    let held = budget.stats().log_bytes;
    // Each append past capacity evicts one: gone from the ring and the budget at once,
    // its memory let go with its batch.
    for n in 1..spyglass_protocol::retire::BATCH {
        log.append("t".into(), None, closed());
        assert_eq!(log.stats().retained, 4);
        assert_eq!(budget.stats().log_bytes, held);
        if n <= first.len() {
            assert!(
                first[n - 1].upgrade().is_some(),
                "held until its batch goes"
            );
        }
    }
    log.append("t".into(), None, closed());
    assert!(
        first.iter().all(|e| e.upgrade().is_none()),
        "the batch went"
    );
    assert_eq!(log.since("t", 0, 10).events.len(), 4);
}

#[test]
fn events_waiting_for_an_away_store_are_bounded_by_count_and_bytes_oldest_first() {
    assert_eq!(excess([10, 10, 10].into_iter()), 0);
    assert_eq!(excess(std::iter::repeat_n(1, MAX_PENDING + 5)), 5);
    let mib = 1024 * 1024;
    // The newest two fit in 64 MiB; the oldest would not.
    assert_eq!(excess([40 * mib, 30 * mib, 1].into_iter()), 1);
    // One event over the whole bound is dropped too: nothing can hold it.
    assert_eq!(excess([65 * mib].into_iter()), 1);
}

#[test]
fn text_is_the_encoded_stamped_frame_and_is_made_once() {
    let log = EventLog::new(4, 4, Arc::new(Budget::new(usize::MAX)));
    let logged = log.append("default".into(), Some("ses_1".into()), closed());
    let read = log.since("default", 0, 1).events[0].clone();
    assert_eq!(read.text(), encode(&logged.frame));
    assert!(read.text().contains("\"seq\":1,"), "{}", read.text());
    // A second reader gets the same text, not a second encoding.
    assert!(std::ptr::eq(read.text(), logged.text()));
}

#[test]
fn a_fresh_log_has_its_own_epoch_and_a_continued_one_keeps_it() {
    let budget = || Arc::new(Budget::new(usize::MAX));
    let a = EventLog::new(4, 4, budget());
    let b = EventLog::new(4, 4, budget());
    assert_ne!(a.epoch(), b.epoch());
    assert!(a.epoch().starts_with("ep_") && a.epoch().len() == 19);
    let c = EventLog::new(4, 4, budget()).continuing(
        a.epoch().to_owned(),
        vec![("default".into(), 8), ("b".into(), 3)],
    );
    assert_eq!(c.epoch(), a.epoch());
    // Seqs go on per tenant; a tenant the store never saw starts at 1.
    assert_eq!(c.append("default".into(), None, closed()).frame.seq, 8);
    assert_eq!(c.append("b".into(), None, closed()).frame.seq, 3);
    assert_eq!(c.append("new".into(), None, closed()).frame.seq, 1);
}

/// A big event as the wire has it (an object, so it decodes back).
fn wire_big(bytes: usize) -> Event {
    Event::Unknown {
        kind: "x.big".into(),
        raw: spyglass_protocol::RawJson::from_value(
            &serde_json::json!({"kind": "x.big", "blob": "a".repeat(bytes)}),
        ),
    }
}

fn restored(tenant: &str, seq: u64, event: Event) -> Logged {
    let text = encode(&Frame {
        seq,
        ts: "2026-11-22T21:43:31.123456Z".into(),
        session_id: None,
        event,
    });
    Logged::restore(&text, tenant.into()).unwrap()
}

#[test]
fn a_logged_events_shared_block_fits_mimallocs_384_byte_class() {
    // `Arc`'s block: its two counts, then the value. At 408 bytes each event took a
    // 448-byte block; the largest events (`agent.step.completed`, `agent.completed`)
    // keep `Event` at 264 bytes for this.
    let block = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<Logged>();
    assert!(block <= 384, "Arc<Logged> is {block} bytes");
}

#[test]
fn restored_history_keeps_tenants_seqs_and_counts_its_bytes() {
    let budget = Arc::new(Budget::new(usize::MAX));
    let log = EventLog::new(10, 4, budget.clone())
        .continuing("ep_x".into(), vec![("a".into(), 4), ("b".into(), 3)])
        .with_history(vec![
            restored("a", 1, wire_big(100)),
            restored("b", 1, closed()),
            restored("a", 2, wire_big(100)),
            restored("a", 3, wire_big(100)),
            restored("b", 2, closed()),
        ]);
    let seqs = |t: &str| -> Vec<u64> {
        log.since(t, 0, 10)
            .events
            .iter()
            .map(|e| e.frame.seq)
            .collect()
    };
    assert_eq!(seqs("a"), [1, 2, 3]);
    assert_eq!(seqs("b"), [1, 2]);
    assert_eq!(log.since("b", 0, 10).gap, None);
    let all: Vec<(String, u64)> = log
        .all_since(0, 10)
        .iter()
        .map(|e| (e.tenant.to_string(), e.frame.seq))
        .collect();
    assert_eq!(all[..2], [("a".into(), 1), ("b".into(), 1)], "stored order");
    let bytes: usize = log.all_since(0, 10).iter().map(|e| e.bytes()).sum();
    assert!(bytes >= 300);
    assert_eq!(
        budget.stats().log_bytes,
        bytes,
        "restored bytes are counted"
    );
    assert_eq!(log.append("a".into(), None, closed()).frame.seq, 4);
}

#[test]
fn restored_history_stays_within_the_byte_budget_and_a_broken_run_is_a_gap() {
    let budget = Arc::new(Budget::new(5_000));
    let log = EventLog::new(100, 4, budget.clone())
        .continuing("ep_x".into(), vec![("a".into(), 6)])
        .with_history(
            (1..=5)
                .map(|seq| restored("a", seq, wire_big(2_000)))
                .collect(),
        );
    assert!(
        budget.stats().retained_bytes <= 5_000,
        "{:?}",
        budget.stats()
    );
    assert_eq!(budget.stats().evicted_events, 3);
    assert_eq!(log.since("a", 0, 10).gap, Some((1, 3)));
    // Seq 3 missing from the store: only 4 and 5 join on to the newest.
    let log = EventLog::new(100, 4, Arc::new(Budget::new(usize::MAX)))
        .continuing("ep_x".into(), vec![("a".into(), 6)])
        .with_history(
            [1, 2, 4, 5]
                .into_iter()
                .map(|seq| restored("a", seq, closed()))
                .collect(),
        );
    let slice = log.since("a", 0, 10);
    assert_eq!(slice.gap, Some((1, 3)));
    assert_eq!(slice.events.len(), 2);
}

#[test]
fn ring_drops_oldest_and_reports_gap() {
    let log = EventLog::new(3, 8, Arc::new(Budget::new(usize::MAX)));
    for _ in 0..5 {
        log.append("default".into(), None, closed());
    }
    let slice = log.since("default", 0, 10);
    assert_eq!(slice.gap, Some((1, 2)));
    let seqs: Vec<u64> = slice.events.iter().map(|e| e.frame.seq).collect();
    assert_eq!(seqs, vec![3, 4, 5]);
    let slice = log.since("default", 3, 10);
    assert_eq!(slice.gap, None);
    assert_eq!(slice.events.len(), 2);
    assert!(log.since("default", 5, 10).events.is_empty());
    assert_eq!(log.since("default", 2, 1).events[0].frame.seq, 3);
}

#[test]
fn a_flood_evicts_its_own_history_not_a_quieter_tenants() {
    let log = EventLog::new(10, 8, Arc::new(Budget::new(usize::MAX)));
    for _ in 0..3 {
        log.append("quiet".into(), None, closed());
    }
    for _ in 0..100 {
        log.append("loud".into(), None, closed());
    }
    let quiet = log.since("quiet", 0, 100);
    assert_eq!(quiet.gap, None);
    assert_eq!(quiet.events.len(), 3);
    let loud = log.since("loud", 0, 100);
    assert_eq!(loud.events.len(), 7);
    assert_eq!(loud.gap, Some((1, 93)));
    assert_eq!(log.stats().retained, 10);
    // Seqs count per tenant: quiet's next is 4 whatever loud logged.
    assert_eq!(log.append("quiet".into(), None, closed()).frame.seq, 4);
    // Quiet over its share now pays for its own events.
    for _ in 0..10 {
        log.append("quiet".into(), None, closed());
    }
    assert_eq!(log.since("quiet", 0, 100).events.len(), 5);
    assert_eq!(log.since("loud", 0, 100).events.len(), 5);
}

fn big(bytes: usize) -> Event {
    Event::Unknown {
        kind: "x.big".into(),
        raw: spyglass_protocol::RawJson::from_value(&"a".repeat(bytes)),
    }
}

#[test]
fn bytes_past_the_budget_evict_the_oldest_events_and_are_counted() {
    let budget = Arc::new(Budget::new(10_000));
    let log = EventLog::new(1000, 8, budget.clone());
    for _ in 0..10 {
        log.append("default".into(), None, big(3_000));
    }
    let stats = budget.stats();
    assert!(stats.retained_bytes <= 10_000, "{stats:?}");
    assert_eq!(log.stats().retained, 3, "{stats:?}");
    assert_eq!(stats.evicted_events, 7);
    assert!(stats.evicted_event_bytes >= 7 * 3_000);
    assert_eq!(log.since("default", 0, 10).gap, Some((1, 7)));
    // Sessions count against the same budget: the log yields to them.
    budget.add_session(8_000);
    log.append("default".into(), None, big(10));
    assert_eq!(log.stats().retained, 1);
    // One event larger than the whole budget is still kept: the newest always is.
    budget.remove_session(8_000, false);
    log.append("default".into(), None, big(50_000));
    assert_eq!(log.stats().retained, 1);
}

#[test]
fn one_tenants_bytes_evict_its_own_events_not_a_quieter_tenants() {
    let budget = Arc::new(Budget::new(20_000));
    let log = EventLog::new(1000, 8, budget.clone());
    for _ in 0..3 {
        log.append("quiet".into(), None, big(100));
    }
    for _ in 0..50 {
        log.append("loud".into(), None, big(3_000));
    }
    assert_eq!(log.since("quiet", 0, 10).events.len(), 3);
    assert!(budget.stats().retained_bytes <= 20_000);
    assert!(log.since("loud", 0, 100).gap.is_some());
}
