//! Event sequences in, state out: the model's behaviour with no terminal and no network.
//! Built only under `#[cfg(test)]` (declared so in `model/mod.rs`).

use super::*;
use spyglass_protocol::decode;
use spyglass_protocol::events::EvalStatus;
use spyglass_protocol::rest::{MockState, SessionSummary};

fn frame(json: &str) -> Frame {
    decode(json).unwrap()
}

fn created(seq: u64, id: &str) -> Frame {
    frame(&format!(
        r#"{{"kind":"session.created","seq":{seq},"ts":"2026-11-22T21:43:31.000Z","sessionId":"{id}","userId":"user_{seq}","servers":["nuvem-fiscal"],"project":"default","mocks":[{{"tool":"nuvem-fiscal/create_nfe","mode":"stateful","entries":2}},{{"tool":"asaas/create_payment","mode":"static","entries":1}}]}}"#
    ))
}

fn called(seq: u64, sid: &str, call: &str, tool: &str, outcome: &str, counter: &str) -> Frame {
    frame(&format!(
        r#"{{"kind":"tool.called","seq":{seq},"ts":"2026-11-22T21:43:32.000Z","sessionId":"{sid}","callId":"{call}","tool":"{tool}","input":{{"value":5}},"outcome":{outcome},"startedAt":"2026-11-22T21:43:31.{seq:03}Z","duration":3.5{counter},"source":"execute"}}"#
    ))
}

const NFE: &str = "nuvem-fiscal/create_nfe";

fn nfe(seq: u64, call: &str, consumed: u32) -> Frame {
    called(
        seq,
        "ses_1",
        call,
        NFE,
        r#"{"result":{"id":"nfe"}}"#,
        &format!(r#","counter":{{"consumed":{consumed},"total":2}}"#),
    )
}

#[test]
fn stateful_counter_moves_then_exhausts_and_unmocked_calls_count_as_envelopes() {
    let mut m = Model::default();
    m.apply(&created(1, "ses_1"));
    m.apply(&nfe(2, "call_1", 1));
    let mock = &m.session("ses_1").unwrap().mocks[0];
    assert_eq!(
        (mock.consumed, mock.entries, mock.exhausted()),
        (1, 2, false)
    );
    m.apply(&nfe(3, "call_2", 2));
    m.apply(&called(
        4,
        "ses_1",
        "call_3",
        NFE,
        r#"{"envelope":{"code":"mocks_exhausted","message":"all 2 entries consumed"}}"#,
        r#","counter":{"consumed":2,"total":2}"#,
    ));
    m.apply(&called(
        5,
        "ses_1",
        "call_4",
        "asaas/create_paymet",
        r#"{"envelope":{"code":"tool_not_mocked","tool_name":"asaas/create_paymet","message":"no mock"}}"#,
        "",
    ));
    let s = m.session("ses_1").unwrap();
    assert_eq!(s.calls, 4);
    assert_eq!(s.envelopes, 2);
    assert_eq!(s.user, "user_1");
    let nfe = &s.mocks[0];
    assert_eq!((nfe.consumed, nfe.calls), (2, 3));
    assert!(nfe.exhausted());
    assert!(
        s.mocks[1].never_called(),
        "the static mock was declared and never called"
    );
    assert_eq!(
        s.timeline.call("call_4").unwrap().envelope_code(),
        Some("tool_not_mocked")
    );
}

fn step(
    seq: u64,
    sid: Option<&str>,
    conv: &str,
    iteration: u32,
    calls: &str,
    cumulative: f64,
) -> Frame {
    let sid = sid
        .map(|s| format!(r#""sessionId":"{s}","#))
        .unwrap_or_default();
    frame(&format!(
        r#"{{"kind":"agent.step.completed","seq":{seq},"ts":"2026-11-22T21:44:01.000Z",{sid}"agentName":"bot","model":"fake","provider":"fake","iteration":{iteration},"step":{{"iteration":{iteration},"model":"fake","tokens":{{"prompt":1,"completion":1,"total":2}},"finishReason":"tool_calls","toolCalls":[{calls}]}},"tokens":{{"prompt":1,"completion":1,"total":2}},"duration":{cumulative},"streaming":false,"conversationId":"{conv}"}}"#
    ))
}

#[test]
fn a_call_told_by_tool_called_and_by_its_step_is_one_call() {
    let mut m = Model::default();
    m.apply(&created(1, "ses_1"));
    m.apply(&nfe(2, "call_1", 1));
    m.apply(&step(
        3,
        Some("ses_1"),
        "ses_1",
        0,
        r#"{"id":"call_1","name":"nuvem-fiscal/create_nfe","args":{},"result":{"id":"nfe"},"duration":1.0,"needsApproval":false},{"id":"call_x","name":"x/y","args":{},"result":1,"duration":2.0,"needsApproval":false}"#,
        50.0,
    ));
    let s = m.session("ses_1").unwrap();
    assert_eq!(s.calls, 2, "call_1 joined, call_x new");
    assert_eq!(s.timeline.calls().len(), 2);
    let joined = s.timeline.call("call_1").unwrap();
    assert_eq!(joined.iteration, Some(0));
    assert_eq!(joined.duration_ms, 3.5, "the runtime's duration wins");
    assert_eq!(joined.start_ms, parse_ms("2026-11-22T21:43:31.002Z"));
    assert_eq!(s.timeline.steps.len(), 1);

    // The other order: the step first, then the runtime's own account of the same call.
    let mut m = Model::default();
    m.apply(&created(1, "ses_1"));
    m.apply(&step(
        2,
        Some("ses_1"),
        "ses_1",
        0,
        r#"{"id":"call_1","name":"nuvem-fiscal/create_nfe","args":{},"result":{"id":"nfe"},"duration":1.0,"needsApproval":false}"#,
        10.0,
    ));
    m.apply(&nfe(3, "call_1", 1));
    let s = m.session("ses_1").unwrap();
    assert_eq!((s.calls, s.timeline.calls().len()), (1, 1));
    assert_eq!(s.mocks[0].consumed, 1);
}

#[test]
fn seed_001_calls_are_laid_one_after_another_inside_their_step() {
    let mut m = Model::default();
    let calls = r#"{"id":"a","name":"t/a","args":{},"result":1,"duration":10,"needsApproval":false},{"id":"b","name":"t/b","args":{},"result":2,"duration":20,"needsApproval":false}"#;
    m.apply(&step(1, None, "conv_9", 0, calls, 50.0));
    let s = m.session("conv_9").unwrap();
    assert!(s.external);
    let end = parse_ms("2026-11-22T21:44:01.000Z").unwrap();
    let first = &s.timeline.steps[0];
    assert_eq!((first.start_ms, first.duration_ms), (end - 50.0, 50.0));
    assert_eq!(s.timeline.call("a").unwrap().start_ms, Some(end - 50.0));
    assert_eq!(s.timeline.call("b").unwrap().start_ms, Some(end - 40.0));
    // A second step's own duration is the cumulative difference.
    m.apply(&step(2, None, "conv_9", 1, "", 80.0));
    let s = m.session("conv_9").unwrap();
    assert_eq!(s.timeline.steps[1].duration_ms, 30.0);
}

#[test]
fn external_events_group_by_conversation_else_agent_name() {
    let mut m = Model::default();
    m.apply(&step(1, None, "", 0, "", 1.0));
    assert!(m.session("bot").unwrap().external);
    m.apply(&step(2, None, "conv_1", 0, "", 1.0));
    assert!(m.session("conv_1").unwrap().external);
    assert_eq!(m.sessions_len(), 2);
    // The runtime's own agent events name their session and are not external.
    m.apply(&created(3, "ses_1"));
    m.apply(&step(4, Some("ses_1"), "ses_1", 0, "", 1.0));
    assert!(!m.session("ses_1").unwrap().external);
}

#[test]
fn duplicates_by_seq_are_ignored_and_counted() {
    let mut m = Model::default();
    m.apply(&created(1, "ses_1"));
    m.apply(&nfe(2, "call_1", 1));
    m.apply(&nfe(2, "call_1", 1));
    m.apply(&created(1, "ses_1"));
    m.apply(&nfe(3, "call_2", 2));
    let s = m.session("ses_1").unwrap();
    assert_eq!(s.calls, 2);
    assert_eq!(s.mocks[0].calls, 2);
    assert_eq!(m.counters.duplicates, 2);
    assert_eq!((m.counters.applied, m.counters.last_seq), (3, 3));
}

#[test]
fn bounds_drop_the_oldest_and_count_it() {
    let limits = Limits {
        sessions: 2,
        calls_per_session: 2,
        ..Limits::default()
    };
    let mut m = Model::new(limits);
    m.apply(&created(1, "ses_1"));
    m.apply(&nfe(2, "call_1", 1));
    m.apply(&nfe(3, "call_2", 2));
    m.apply(&nfe(4, "call_3", 2));
    let s = m.session("ses_1").unwrap();
    assert_eq!(
        s.calls, 3,
        "the call count is not a history: it keeps counting"
    );
    assert!(s.timeline.call("call_1").is_none());
    assert_eq!(s.timeline.call("call_3").unwrap().id, "call_3");
    assert_eq!(m.counters.dropped.calls, 1);
    m.apply(&created(5, "ses_2"));
    m.apply(&created(6, "ses_3"));
    assert!(m.session("ses_1").is_none());
    assert_eq!(m.sessions_len(), 2);
    assert_eq!(m.counters.dropped.sessions, 1);
    assert_eq!(
        m.counters.dropped.calls, 3,
        "ses_1's two retained calls went with it"
    );
    assert_eq!(m.session_newest(0).unwrap().id, "ses_3");
    assert_eq!(m.newest_row_of("ses_2"), Some(1));
    assert_eq!(m.counters.dropped.total(), 4);
}

#[test]
fn calls_are_found_by_id_through_growth_and_eviction() {
    // The call index holds positions, not ids: it must find every retained call and none
    // that fell off, across the table's regrowths and the ring's turnover.
    let limits = Limits {
        calls_per_session: 300,
        ..Limits::default()
    };
    let mut m = Model::new(limits);
    m.apply(&created(1, "ses_1"));
    for i in 0..1_000u64 {
        m.apply(&called(
            i + 2,
            "ses_1",
            &format!("call_{i}"),
            "asaas/create_payment",
            r#"{"result":{"ok":true}}"#,
            "",
        ));
    }
    let s = m.session("ses_1").unwrap();
    assert_eq!(s.timeline.calls().len(), 300);
    assert_eq!(m.counters.dropped.calls, 700);
    for i in 0..1_000u64 {
        let id = format!("call_{i}");
        match s.timeline.call(&id) {
            Some(call) => assert!(i >= 700 && call.id == id, "{id} found as {}", call.id),
            None => assert!(i < 700, "{id} is retained but not found"),
        }
    }
    // A step naming a retained call joins it; one naming a dropped call adds it anew.
    let calls = r#"{"id":"call_999","name":"asaas/create_payment","args":{},"result":{"ok":true},"duration":1.0,"needsApproval":false},{"id":"call_5","name":"asaas/create_payment","args":{},"result":{"ok":true},"duration":1.0,"needsApproval":false}"#;
    m.apply(&step(1_002, Some("ses_1"), "conv", 1, calls, 10.0));
    let s = m.session("ses_1").unwrap();
    assert_eq!(s.timeline.calls().len(), 300);
    assert_eq!(s.timeline.call("call_5").unwrap().id, "call_5");
    assert!(s.timeline.call("call_700").is_none());
    assert_eq!(s.timeline.call("call_999").unwrap().iteration, Some(1));
}

#[test]
fn unknown_kinds_are_counted_not_dropped_silently() {
    let mut m = Model::default();
    m.apply(&frame(r#"{"kind":"future.thing","seq":1,"ts":"x","x":1}"#));
    m.apply(&frame(r#"{"kind":"future.other","seq":2,"ts":"x"}"#));
    assert_eq!(m.counters.unknown_kinds, 2);
    assert_eq!(m.counters.last_seq, 2);
    m.note_parse_error();
    assert_eq!(m.counters.parse_errors, 1);
}

#[test]
fn approval_replay_sits_beside_the_original_call_and_moves_the_counter() {
    let mut m = Model::default();
    m.apply(&created(1, "ses_1"));
    m.apply(&called(
        2,
        "ses_1",
        "call_3",
        NFE,
        r#"{"envelope":{"code":"approval_required","approval_id":"apr_1","expires_at":"2026-11-22T21:58:32.000Z","message":"needs approval"}}"#,
        "",
    ));
    m.apply(&frame(r#"{"kind":"approval.requested","seq":3,"ts":"2026-11-22T21:43:32.000Z","sessionId":"ses_1","approvalId":"apr_1","callId":"call_3","tool":"nuvem-fiscal/create_nfe","input":{"value":5000},"ruleId":"r1","expiresAt":"2026-11-22T21:58:32.000Z","message":"m"}"#));
    assert_eq!(m.approvals.pending_count(), 1);
    m.apply(&frame(r#"{"kind":"approval.resolved","seq":4,"ts":"2026-11-22T21:44:00.000Z","sessionId":"ses_1","approvalId":"apr_1","decision":"approved","by":"ana"}"#));
    assert_eq!(m.approvals.pending_count(), 0);
    m.apply(&frame(r#"{"kind":"approval.replayed","seq":5,"ts":"2026-11-22T21:44:00.010Z","sessionId":"ses_1","approvalId":"apr_1","callId":"call_3","tool":"nuvem-fiscal/create_nfe","outcome":{"result":{"id":"nfe_1"}},"duration":0.4,"counter":{"consumed":1,"total":2}}"#));
    let a = m.approvals.get("apr_1").unwrap();
    assert_eq!(a.status, ApprovalStatus::Approved);
    assert_eq!(a.decided_by.as_deref(), Some("ana"));
    assert!(matches!(a.replay, Some(Outcome::Result(_))));
    let s = m.session("ses_1").unwrap();
    let call = s.timeline.call("call_3").unwrap();
    assert_eq!(call.envelope_code(), Some("approval_required"));
    assert_eq!(call.approval_id.as_deref(), Some("apr_1"));
    assert!(call.replay.is_some());
    assert_eq!(s.mocks[0].consumed, 1);
    assert_eq!(s.calls, 1, "a replay is not a second call");
}

fn eval(seq: u64, case: &str, status: &str, run: &str) -> Frame {
    let pass = status == "passed";
    frame(&format!(
        r#"{{"kind":"agent.eval.completed","seq":{seq},"ts":"2026-11-22T21:45:00.000Z","sessionId":"ses_{seq}","suite":"payments","case":"{case}","status":"{status}","pass":{pass},"tokens":{{"prompt":0,"completion":0,"total":0}},"cost":0,"duration":12,"runId":"{run}","assertions":[{{"kind":"equals","pass":false,"expected":"a","actual":"b"}}]}}"#
    ))
}

#[test]
fn eval_pass_rates_over_a_bounded_window_of_runs() {
    let mut m = Model::new(Limits {
        eval_window: 3,
        ..Limits::default()
    });
    for (seq, status) in [(1, "failed"), (2, "passed"), (3, "passed"), (4, "failed")] {
        m.apply(&eval(seq, "a", status, &format!("r{seq}")));
    }
    m.apply(&eval(5, "b", "error", "r4"));
    m.apply(&eval(6, "b", "skipped", "r4"));
    let suite = m.evals.suite("payments").unwrap();
    assert_eq!(suite.runs, 3, "the first run fell out of the window");
    let a = m.evals.case("payments", "a").unwrap();
    assert_eq!((a.passed, a.failed), (2, 1));
    assert_eq!(a.pass_rate, Some(2.0 / 3.0));
    assert!(a.flaky);
    let b = m.evals.case("payments", "b").unwrap();
    assert_eq!(b.pass_rate, Some(0.0));
    assert!(!b.flaky, "an error and a skip, never a pass");
    assert_eq!(b.last_status, EvalStatus::Skipped);
    assert_eq!(b.last_session_id.as_deref(), Some("ses_6"));
    assert_eq!(b.last_assertions[0].expected.as_text(), "a");
    assert_eq!(suite.pass_rate, Some(2.0 / 4.0));
    assert_eq!(m.counters.dropped.eval_results, 1);
    // A frame seen again after a resume changes nothing.
    let rev = m.evals.rev;
    m.apply(&eval(6, "b", "passed", "r4"));
    assert_eq!(m.evals.rev, rev);
    assert_eq!(m.evals.case("payments", "b").unwrap().passed, 0);
}

#[test]
fn hydrate_takes_the_runtimes_counters_and_keeps_timelines() {
    let mut m = Model::default();
    m.apply(&created(1, "ses_1"));
    m.apply(&nfe(2, "call_1", 1));
    let summary = |id: &str, calls| SessionSummary {
        id: id.into(),
        user_id: "u".into(),
        servers: vec![],
        status: "active".into(),
        created_at: "2026-11-22T21:43:31.000Z".into(),
        last_activity: "2026-11-22T21:50:00.000Z".into(),
        calls,
        envelopes: 0,
        mocks: vec![MockState {
            declared: spyglass_protocol::events::DeclaredMock {
                tool: NFE.into(),
                mode: MockMode::Stateful,
                entries: 2,
                fallback: false,
                payload: None,
                payload_bytes: None,
            },
            counter: spyglass_protocol::events::Counter {
                consumed: 2,
                total: Some(2),
                ..Default::default()
            },
            calls: 2,
            served: 2,
            rule_hits: Vec::new(),
            fallback_hits: 0,
        }],
        last_seq: 3,
    };
    let approvals = ApprovalList {
        approvals: vec![ApprovalView {
            id: "apr_9".into(),
            session_id: "ses_2".into(),
            call_id: "c".into(),
            tool: NFE.into(),
            input: spyglass_protocol::RawJson::null(),
            rule_id: "r".into(),
            status: ApprovalStatus::Pending,
            requested_at: String::new(),
            expires_at: String::new(),
            decided_by: None,
            note: None,
            replay: None,
        }],
        next_cursor: None,
    };
    m.hydrate(
        SessionList {
            sessions: vec![summary("ses_1", 2), summary("ses_2", 0)],
            next_cursor: None,
        },
        approvals,
    );
    let s = m.session("ses_1").unwrap();
    assert_eq!(s.calls, 2);
    assert!(s.mocks[0].exhausted());
    assert_eq!(s.timeline.calls().len(), 1, "the folded timeline stays");
    assert_eq!(m.sessions_len(), 2);
    assert_eq!(m.approvals.pending_count(), 1);

    // The re-read already counted ses_1's events up to seq 3: seq 3 arriving after it is
    // placed on the timeline but not counted again; seq 4 is new and counts.
    m.apply(&nfe(3, "call_2", 2));
    let s = m.session("ses_1").unwrap();
    assert_eq!((s.calls, s.mocks[0].calls), (2, 2));
    assert_eq!(s.timeline.calls().len(), 2);
    m.apply(&nfe(4, "call_3", 2));
    let s = m.session("ses_1").unwrap();
    assert_eq!((s.calls, s.mocks[0].calls), (3, 3));
}

#[test]
fn a_late_request_does_not_undo_a_decision_the_re_read_knew() {
    let mut m = Model::default();
    let view = ApprovalView {
        id: "apr_1".into(),
        session_id: "ses_1".into(),
        call_id: "c".into(),
        tool: NFE.into(),
        input: spyglass_protocol::RawJson::null(),
        rule_id: "r".into(),
        status: ApprovalStatus::Approved,
        requested_at: String::new(),
        expires_at: String::new(),
        decided_by: Some("ana".into()),
        note: None,
        replay: None,
    };
    m.hydrate(
        SessionList {
            sessions: vec![],
            next_cursor: None,
        },
        ApprovalList {
            approvals: vec![view],
            next_cursor: None,
        },
    );
    m.apply(&frame(
        r#"{"kind":"approval.requested","seq":5,"ts":"2026-11-22T21:43:32.000Z","sessionId":"ses_1","approvalId":"apr_1","callId":"c","tool":"nuvem-fiscal/create_nfe","input":{},"ruleId":"r","expiresAt":"2026-11-22T21:58:32.000Z","message":"m"}"#,
    ));
    let approval = m.approvals.get("apr_1").unwrap();
    assert_eq!(approval.status, ApprovalStatus::Approved);
    assert_eq!(approval.decided_by.as_deref(), Some("ana"));
    assert_eq!(m.approvals.pending_count(), 0);
}

#[test]
fn the_event_log_keeps_the_newest_frames_within_its_bound_and_counts_drops() {
    let mut m = Model::new(Limits {
        events: 3,
        ..Limits::default()
    });
    m.fold(Box::new(created(1, "ses_1")));
    for seq in 2..=5 {
        m.fold(Box::new(nfe(seq, &format!("call_{seq}"), 1)));
    }
    // A resume that overlaps sends an old frame again: folded once, logged once.
    m.fold(Box::new(nfe(4, "call_4", 1)));
    assert_eq!(m.events.len(), 3);
    assert_eq!((m.events.first_abs(), m.events.end_abs()), (2, 5));
    let seqs: Vec<u64> = (2..5)
        .filter_map(|a| m.events.get(a))
        .map(|f| f.seq)
        .collect();
    assert_eq!(seqs, vec![3, 4, 5]);
    assert!(m.events.get(1).is_none(), "dropped frames are gone");
    assert_eq!(m.counters.dropped.events, 2);
    assert_eq!(m.counters.duplicates, 1);
    assert_eq!(m.session("ses_1").unwrap().calls, 4);
}

#[test]
fn stamps_read_without_chrono_agree_with_chrono() {
    let chrono_ms = |ts: &str| {
        chrono::DateTime::parse_from_rfc3339(ts)
            .ok()
            .map(|t| t.timestamp_micros() as f64 / 1000.0)
    };
    for ts in [
        "2026-11-22T21:43:31.000Z",
        "2026-11-22T21:43:31Z",
        "2026-11-22T21:43:31.5Z",
        "2026-11-22T21:43:31.123456789Z",
        "2024-02-29T00:00:00.001Z",
        "2000-03-01T23:59:59.999Z",
        "1969-12-31T23:59:59.250Z",
        "2026-01-01T00:00:00+02:00",
        "2026-11-22t21:43:31z",
        "2023-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-11-22T21:43:31.Z",
        "2026-11-22T21:43:3x.000Z",
        "not a time",
        "",
    ] {
        assert_eq!(parse_ms(ts), chrono_ms(ts), "{ts}");
    }
}

#[test]
fn a_call_row_stays_small_because_rarely_set_parts_are_boxed() {
    // Every retained tool call is one of these; the memory budget (docs/PERFORMANCE.md)
    // has about 300 bytes per event over its wire size to spend.
    // 232 since a counter names the rule of a rules mock that answered (8 bytes); 184
    // since an outcome's envelope is boxed (most calls have a result).
    let size = std::mem::size_of::<crate::model::Call>();
    assert!(
        size <= 184,
        "Call is {size} bytes (312 with the replay unboxed, 232 with the envelope)"
    );
}

/// A `tool.called` of the model loop, stamped in one millisecond like a mocked run.
fn send_call(seq: u64, call: &str, iteration: Option<u32>, ts: &str) -> Frame {
    let iteration = iteration.map_or(String::new(), |i| format!(r#","iteration":{i}"#));
    let source = if iteration.is_empty() {
        "execute"
    } else {
        "send"
    };
    frame(&format!(
        r#"{{"kind":"tool.called","seq":{seq},"ts":"{ts}","sessionId":"ses_1","callId":"{call}","tool":"t/{call}","input":{{}},"outcome":{{"result":1}},"startedAt":"{ts}","duration":0.04,"source":"{source}"{iteration}}}"#
    ))
}

fn step_call(id: &str) -> String {
    format!(
        r#"{{"id":"{id}","name":"t/{id}","args":{{}},"result":1,"duration":0.04,"needsApproval":false}}"#
    )
}

/// Row labels of a session's timeline: `step N` or a call id, calls under a step indented.
fn labels(m: &Model) -> Vec<String> {
    let s = m.session("ses_1").unwrap();
    s.timeline
        .rows()
        .into_iter()
        .map(|row| match row {
            TimelineRow::Step(i) => format!("step {}", s.timeline.steps[i].iteration),
            TimelineRow::Call(i) => {
                let c = &s.timeline.calls()[i];
                match c.iteration {
                    Some(_) => format!("  {}", c.id),
                    None => c.id.to_string(),
                }
            }
            TimelineRow::Failure => "failure".to_owned(),
        })
        .collect()
}

#[test]
fn calls_nest_under_the_step_that_made_them_whatever_the_clock_says() {
    // Every stamp in one millisecond (an older, ms-only recording of a mocked run), and the
    // steps' own stamps say they began after their calls: only seq and ids can place them.
    let ts = "2026-11-22T21:43:31.007Z";
    let mut m = Model::default();
    m.apply(&created(1, "ses_1"));
    m.apply(&send_call(2, "before", None, ts));
    m.apply(&send_call(3, "c1", Some(0), ts));
    m.apply(&send_call(4, "c2", Some(0), ts));
    let first = format!("{},{}", step_call("c1"), step_call("c2"));
    m.apply(&step(5, Some("ses_1"), "ses_1", 0, &first, 0.2));
    m.apply(&send_call(6, "c3", Some(1), ts));
    m.apply(&step(7, Some("ses_1"), "ses_1", 1, &step_call("c3"), 0.3));
    // The last step calls nothing and stops; an `execute` follows the run.
    m.apply(&step(8, Some("ses_1"), "ses_1", 2, "", 0.4));
    m.apply(&send_call(9, "after", None, ts));
    assert_eq!(
        labels(&m),
        [
            "before", "step 0", "  c1", "  c2", "step 1", "  c3", "step 2", "after"
        ]
    );
    // A call whose step has not completed yet stands at its arrival, after the rest.
    m.apply(&send_call(10, "c4", Some(0), ts));
    assert_eq!(labels(&m).last().map(String::as_str), Some("  c4"));
}

#[test]
fn a_step_told_only_by_its_agent_claims_its_calls_in_list_order() {
    // In `@gemstack/ai-sdk`: no `tool.called` at all; a step's calls arrive inside it.
    let mut m = Model::default();
    let calls = format!("{},{}", step_call("b"), step_call("a"));
    m.apply(&step(1, Some("ses_1"), "ses_1", 0, &calls, 5.0));
    m.apply(&step(2, Some("ses_1"), "ses_1", 1, &step_call("c"), 9.0));
    assert_eq!(labels(&m), ["step 0", "  b", "  a", "step 1", "  c"]);
}

#[test]
fn microsecond_stamps_place_calls_and_steps_to_the_microsecond() {
    let mut m = Model::default();
    m.apply(&created(1, "ses_1"));
    m.apply(&send_call(2, "c1", Some(0), "2026-11-22T21:43:31.000042Z"));
    let at = |ts: &str| parse_ms(ts).unwrap();
    let s = m.session("ses_1").unwrap();
    let call = s.timeline.call("c1").unwrap();
    // Epoch milliseconds in an f64 keep a quarter of a microsecond.
    let offset = call.start_ms.unwrap() - at("2026-11-22T21:43:31Z");
    assert!((offset - 0.042).abs() < 3e-4, "{offset}");
    assert_eq!(call.duration_ms, 0.04);
    // A step that tells when it began is placed there, not at its end less its duration.
    let text = r#"{"kind":"agent.step.completed","seq":3,"ts":"2026-11-22T21:43:31.000900Z","sessionId":"ses_1","iteration":0,"step":{"iteration":0,"toolCalls":[]},"duration":0.5,"startedAt":"2026-11-22T21:43:31.000010Z"}"#;
    m.apply(&frame(text));
    let step = &m.session("ses_1").unwrap().timeline.steps[0];
    let offset = step.start_ms - at("2026-11-22T21:43:31Z");
    assert!((offset - 0.010).abs() < 3e-4, "{offset}");
    // Older, millisecond stamps still read.
    assert_eq!(
        at("2026-11-22T21:43:31.007Z") - at("2026-11-22T21:43:31Z"),
        7.0
    );
}

#[test]
fn a_run_told_only_at_its_end_still_nests_and_a_full_call_ring_keeps_order() {
    // `agent.completed` with its steps, no step events before it.
    let steps = format!(
        r#"[{{"iteration":0,"finishReason":"tool_calls","toolCalls":[{},{}]}},{{"iteration":1,"finishReason":"stop","toolCalls":[]}}]"#,
        step_call("x"),
        step_call("y")
    );
    let text = format!(
        r#"{{"kind":"agent.completed","seq":1,"ts":"2026-11-22T21:44:01.000Z","sessionId":"ses_1","steps":{steps},"duration":3.0}}"#
    );
    let mut m = Model::default();
    m.apply(&frame(&text));
    assert_eq!(labels(&m), ["step 0", "  x", "  y", "step 1"]);

    // Two calls kept: the step whose first call fell off still leads its remaining call.
    let mut m = Model::new(Limits {
        calls_per_session: 2,
        ..Limits::default()
    });
    let ts = "2026-11-22T21:43:31.007Z";
    m.apply(&created(1, "ses_1"));
    m.apply(&send_call(2, "c1", Some(0), ts));
    m.apply(&send_call(3, "c2", Some(0), ts));
    let first = format!("{},{}", step_call("c1"), step_call("c2"));
    m.apply(&step(4, Some("ses_1"), "ses_1", 0, &first, 0.2));
    m.apply(&send_call(5, "after", None, ts));
    assert_eq!(labels(&m), ["step 0", "  c2", "after"]);
    assert_eq!(m.counters.dropped.calls, 1);
}

#[test]
fn large_frames_stay_within_the_byte_budget_and_evictions_are_counted() {
    let limits = Limits {
        bytes: 400_000,
        ..Limits::default()
    };
    let mut m = Model::new(limits);
    let big = "x".repeat(20_000);
    let mut seq = 1;
    for s in 0..5 {
        let sid = format!("ses_{s}");
        m.fold(Box::new(created(seq, &sid)));
        seq += 1;
        for c in 0..10 {
            let outcome = format!(r#"{{"result":{{"blob":"{big}"}}}}"#);
            m.fold(Box::new(called(
                seq,
                &sid,
                &format!("call_{s}_{c}"),
                "a/b",
                &outcome,
                "",
            )));
            seq += 1;
        }
    }
    assert!(m.retained_bytes() <= 400_000, "{}", m.retained_bytes());
    assert!(m.counters.dropped.sessions > 0, "{:?}", m.counters.dropped);
    assert!(m.counters.dropped.total() > 0);
    assert!(m.counters.dropped.events > 0, "{:?}", m.counters.dropped);
    // The newest session is kept, whatever else went.
    assert!(m.session("ses_4").is_some());
}

#[test]
fn a_reset_keeps_old_sessions_as_previous_drops_their_approvals_and_folds_the_new_stream() {
    let mut m = Model::new(Limits::default());
    for seq in 1..=21 {
        m.fold(Box::new(created(seq, &format!("ses_old{seq}"))));
    }
    m.fold(Box::new(frame(
        r#"{"kind":"approval.requested","seq":22,"ts":"2026-11-22T21:43:32.000Z","sessionId":"ses_old1","approvalId":"apr_1","callId":"c","tool":"nuvem-fiscal/create_nfe","input":{},"ruleId":"r","expiresAt":"2026-11-22T21:58:32.000Z","message":"m"}"#,
    )));
    assert_eq!(m.approvals.pending_count(), 1);
    // A hello names the stream and changes nothing.
    assert!(!m.apply(&frame(
        r#"{"kind":"stream.hello","seq":22,"ts":"2026-11-22T21:43:31.000Z","epoch":"ep_a"}"#
    )));
    m.fold(Box::new(frame(
        r#"{"kind":"stream.reset","seq":0,"ts":"2026-11-22T21:44:00.000Z","epoch":"ep_b","reason":"r"}"#,
    )));
    assert_eq!(m.sessions_len(), 21, "old sessions stay readable");
    assert!(
        (1..=21).all(|i| m.session(&format!("ses_old{i}")).map(|s| s.status)
            == Some(SessionStatus::Previous)),
        "none of the old sessions reads as active"
    );
    assert_eq!(SessionStatus::Previous.as_str(), "gone");
    assert!(
        m.approvals.is_empty(),
        "an old approval can no longer be decided"
    );
    assert_eq!(m.counters.resets, 1);
    assert_eq!(m.counters.last_seq, 0);
    assert_eq!(
        m.events.len(),
        1,
        "the reset itself stays on the Events tab"
    );
    m.fold(Box::new(created(1, "ses_new")));
    assert_eq!(
        m.session("ses_new").map(|s| s.status),
        Some(SessionStatus::Active),
        "seq 1 of the new stream is no duplicate"
    );
    // A runtime with a store brings a session back under its id: one row, active again.
    m.fold(Box::new(created(2, "ses_old2")));
    assert_eq!(m.sessions_len(), 22);
    assert_eq!(
        m.session("ses_old2").map(|s| s.status),
        Some(SessionStatus::Active)
    );
    assert_eq!(
        m.session("ses_old3").map(|s| s.status),
        Some(SessionStatus::Previous)
    );
    assert_eq!(m.counters.duplicates, 0);
}
