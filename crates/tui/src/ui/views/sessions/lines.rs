//! Text the Sessions tab builds from the model: the timeline's row order (in order or by
//! duration) and a call's detail (input, output, replay) as masked lines.

use super::state::CallSort;
pub(super) use crate::model::TimelineRow;
use crate::model::{Call, Session};
use crate::ui::views::fmt_ms;
use crate::ui::views::pane::PaneLine;
use spyglass_protocol::sanitize::{shown, shown_text};

/// The selected session's rows in display order, rebuilt only when that session changes.
#[derive(Debug, Clone)]
pub(super) struct TimelineCache {
    pub(super) session_id: String,
    pub(super) rev: u64,
    pub(super) sort: CallSort,
    /// The folded steps (by step index) the rows were built with.
    pub(super) collapsed: Vec<usize>,
    pub(super) rows: Vec<TimelineRow>,
    pub(super) t0: f64,
    pub(super) t1: f64,
}

/// The rows in order, without the calls of a folded step (each call is listed right under
/// the step that made it; a call no step made is never hidden).
fn unfolded_rows(session: &Session, collapsed: &[usize]) -> Vec<TimelineRow> {
    let calls = session.timeline.calls();
    let mut under: Option<usize> = None;
    session
        .timeline
        .rows()
        .into_iter()
        .filter(|row| match *row {
            TimelineRow::Step(i) => {
                under = Some(i);
                true
            }
            TimelineRow::Call(i) => {
                let made_by_step = calls.get(i).is_some_and(|c| c.iteration.is_some());
                !(made_by_step && under.is_some_and(|s| collapsed.contains(&s)))
            }
            TimelineRow::Failure => true,
        })
        .collect()
}

pub(super) fn build_timeline(
    session: &Session,
    sort: CallSort,
    collapsed: &[usize],
) -> TimelineCache {
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
        // Each call under the step that made it, in dispatch order (the model's order).
        CallSort::Start => unfolded_rows(session, collapsed),
        CallSort::Duration => {
            let mut idx: Vec<usize> = (0..calls.len()).collect();
            idx.sort_by(|a, b| calls[*b].duration_ms.total_cmp(&calls[*a].duration_ms));
            idx.into_iter().map(TimelineRow::Call).collect()
        }
    };
    let mut rows = rows;
    if session
        .summary
        .as_ref()
        .and_then(|s| s.run.as_ref())
        .is_some_and(|run| run.failed)
    {
        rows.push(TimelineRow::Failure);
    }
    if !t0.is_finite() {
        (t0, t1) = (0.0, 0.0);
    }
    TimelineCache {
        session_id: session.id.clone(),
        rev: session.rev,
        sort,
        collapsed: collapsed.to_vec(),
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

pub(super) fn detail_lines(call: &Call) -> Vec<PaneLine> {
    let mut lines = vec![PaneLine::heading(shown(&format!(
        "{} · {}",
        call.tool, call.id
    )))];
    let mut meta = format!("duration {}", fmt_ms(call.duration_ms));
    if let Some(counter) = call.counter {
        match counter.total {
            Some(total) => meta.push_str(&format!(" · counter {}/{}", counter.consumed, total)),
            None => meta.push_str(&format!(" · counter {}", counter.consumed)),
        }
        if let Some(rule) = counter.rule {
            meta.push_str(&format!(" · rule #{rule}"));
        } else if counter.fallback {
            meta.push_str(" · fallback");
        }
    }
    if let Some(it) = call.iteration {
        meta.push_str(&format!(" · step {it}"));
    }
    lines.push(PaneLine::plain(meta));
    lines.push(PaneLine::plain(""));
    let mut section = |title: &str, text: String| {
        lines.push(PaneLine::heading(title));
        lines.extend(PaneLine::json_lines(&text));
        lines.push(PaneLine::plain(""));
    };
    // Masked once here, so every line the pane shows is already safe.
    section("Input", shown_text(&call.input.pretty()).into_owned());
    section("Output", shown_text(&pretty(&call.outcome)).into_owned());
    if let Some(replay) = &call.replay {
        section(
            &format!("Replay after approval ({})", fmt_ms(replay.duration_ms)),
            shown_text(&pretty(&replay.outcome)).into_owned(),
        );
    }
    lines.pop();
    lines
}
