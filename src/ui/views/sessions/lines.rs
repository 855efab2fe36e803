//! Text the Sessions tab builds from the model: the timeline's row order (by start or by
//! duration) and a call's detail (input, output, replay) as masked lines.

use super::state::CallSort;
use crate::mask::mask;
use crate::model::{Call, Session};
use crate::ui::views::fmt_ms;

/// One row of the timeline: a step or a call, by position in the session's rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TimelineRow {
    Step(usize),
    Call(usize),
}

/// The selected session's rows in display order, rebuilt only when that session changes.
#[derive(Debug, Clone)]
pub(super) struct TimelineCache {
    pub(super) session_id: String,
    pub(super) rev: u64,
    pub(super) sort: CallSort,
    pub(super) rows: Vec<TimelineRow>,
    pub(super) t0: f64,
    pub(super) t1: f64,
}

pub(super) fn build_timeline(session: &Session, sort: CallSort) -> TimelineCache {
    let calls = session.timeline.calls();
    let steps = &session.timeline.steps;
    let mut t0 = f64::INFINITY;
    let mut t1 = f64::NEG_INFINITY;
    let mut widen = |start: f64, dur: f64| {
        t0 = t0.min(start);
        t1 = t1.max(start + dur.max(0.0));
    };
    for s in steps {
        widen(s.start_ms, s.duration_ms);
    }
    for c in calls {
        if let Some(start) = c.start_ms {
            widen(start, c.duration_ms);
        }
    }
    let rows = match sort {
        CallSort::Start => {
            // (start, steps before the calls they contain, arrival) as the order.
            let mut keyed: Vec<(f64, u8, usize, TimelineRow)> =
                Vec::with_capacity(steps.len() + calls.len());
            for (i, s) in steps.iter().enumerate() {
                keyed.push((s.start_ms, 0, i, TimelineRow::Step(i)));
            }
            for (i, c) in calls.iter().enumerate() {
                let start = c.start_ms.unwrap_or(f64::INFINITY);
                keyed.push((start, 1, i, TimelineRow::Call(i)));
            }
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
            keyed.into_iter().map(|k| k.3).collect()
        }
        CallSort::Duration => {
            let mut idx: Vec<usize> = (0..calls.len()).collect();
            idx.sort_by(|a, b| calls[*b].duration_ms.total_cmp(&calls[*a].duration_ms));
            idx.into_iter().map(TimelineRow::Call).collect()
        }
    };
    if !t0.is_finite() {
        (t0, t1) = (0.0, 0.0);
    }
    TimelineCache {
        session_id: session.id.clone(),
        rev: session.rev,
        sort,
        rows,
        t0,
        t1,
    }
}

pub(super) fn pretty<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_else(|e| format!("(cannot show: {e})"))
}

pub(super) fn detail_lines(call: &Call) -> Vec<(bool, String)> {
    let mut lines = vec![(true, format!("{} · {}", call.tool, call.id))];
    let mut meta = format!("duration {}", fmt_ms(call.duration_ms));
    if let Some(counter) = call.counter {
        match counter.total {
            Some(total) => meta.push_str(&format!(" · counter {}/{}", counter.consumed, total)),
            None => meta.push_str(&format!(" · counter {}", counter.consumed)),
        }
    }
    if let Some(it) = call.iteration {
        meta.push_str(&format!(" · step {it}"));
    }
    lines.push((false, meta));
    lines.push((false, String::new()));
    let mut section = |title: &str, text: String| {
        lines.push((true, title.to_owned()));
        lines.extend(text.lines().map(|l| (false, l.to_owned())));
        lines.push((false, String::new()));
    };
    // Masked once here, so every line the pane shows is already safe.
    section("Input", mask(&call.input.pretty()).into_owned());
    section("Output", mask(&pretty(&call.outcome)).into_owned());
    if let Some(replay) = &call.replay {
        section(
            &format!("Replay after approval ({})", fmt_ms(replay.duration_ms)),
            mask(&pretty(&replay.outcome)).into_owned(),
        );
    }
    lines.pop();
    lines
}
