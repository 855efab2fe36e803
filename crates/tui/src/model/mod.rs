//! The inspector's pure state: `Model::apply` folds observer frames into sessions, mocks
//! and counters, timelines, approvals and eval stats; `hydrate` merges a REST re-read.
//! No IO and no terminal here; every history is bounded by `Limits`, drops are counted.

pub mod approvals;
pub mod evals;
pub mod events;
pub mod session;

pub use approvals::{Approval, Approvals};
pub use evals::{EvalRun, Evals, LatestRun};
pub use events::EventLog;
pub use session::{
    Call, MockRow, Replay, RunOutcome, Session, SessionStatus, StepRow, Timeline, TimelineRow,
};

use foldhash::HashMap;
use spyglass_protocol::events::{AgentRun, Event, MockMode, Outcome, ToolCalled};
use spyglass_protocol::rest::{ApprovalList, ApprovalStatus, ApprovalView, SessionList};
use spyglass_protocol::{Envelope, Frame};
use std::collections::VecDeque;

/// Bounds on every history that grows with the stream. Each is a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub sessions: usize,
    pub calls_per_session: usize,
    pub steps_per_session: usize,
    pub approvals: usize,
    /// Runs per eval suite that pass rates, trends and flakiness look back over.
    pub eval_window: usize,
    pub eval_runs: usize,
    /// Raw frames kept for the Events tab.
    pub events: usize,
    /// Bytes the Events tab's frames and the sessions' timelines may hold together
    /// (`Event::approx_bytes`); past it the oldest closed sessions go, then the oldest
    /// frames, then the oldest sessions, each counted in `Dropped`.
    pub bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            sessions: 20_000,
            calls_per_session: 5_000,
            steps_per_session: 1_000,
            approvals: 5_000,
            eval_window: 20,
            eval_runs: 200,
            events: 20_000,
            bytes: 256 * 1024 * 1024,
        }
    }
}

/// What fell off a bounded history, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    pub sessions: u64,
    pub calls: u64,
    pub steps: u64,
    pub approvals: u64,
    pub eval_results: u64,
    pub eval_runs: u64,
    pub events: u64,
}

impl Dropped {
    pub fn total(&self) -> u64 {
        self.sessions
            + self.calls
            + self.steps
            + self.approvals
            + self.eval_results
            + self.eval_runs
            + self.events
    }
}

/// Stream bookkeeping the status bar shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Highest seq folded; a frame at or below it is a duplicate.
    pub last_seq: u64,
    pub applied: u64,
    pub duplicates: u64,
    pub unknown_kinds: u64,
    pub parse_errors: u64,
    /// Agent events that named no session, conversation or agent, so fit nowhere.
    pub orphans: u64,
    pub gaps: u64,
    /// `stream.reset` frames: the runtime restarted without the history folded so far.
    pub resets: u64,
    pub hydrations: u64,
    pub dropped: Dropped,
}

/// Everything the inspector shows, folded from the stream.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub limits: Limits,
    pub counters: Counters,
    /// Oldest first; the list view reads it from the back.
    sessions: VecDeque<Session>,
    index: HashMap<String, u64>,
    /// Absolute position of `sessions[0]`.
    base: u64,
    pub approvals: Approvals,
    pub evals: Evals,
    /// The raw stream, most recent frames, for the Events tab.
    pub events: EventLog,
    /// Sum of the retained sessions' `bytes`.
    session_bytes: usize,
}

/// RFC 3339 to epoch milliseconds; an unreadable stamp places nothing rather than failing.
pub fn parse_ms(ts: &str) -> Option<f64> {
    utc_ms(ts).or_else(|| {
        chrono::DateTime::parse_from_rfc3339(ts)
            .ok()
            .map(|t| t.timestamp_micros() as f64 / 1000.0)
    })
}

/// The shape the runtime writes, `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, read directly: every
/// frame carries one or two stamps and chrono's general parser was a third of a fold.
/// Anything else (offsets, leap seconds, lowercase) is left to chrono.
#[expect(clippy::many_single_char_names)] // y, mo, d, h, mi, s: the date's own names.
fn utc_ms(ts: &str) -> Option<f64> {
    let b = ts.as_bytes();
    let shape = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[b.len() - 1] == b'Z';
    if !shape {
        return None;
    }
    let num = |digits: &[u8]| {
        digits.iter().try_fold(0i64, |acc, c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let (y, mo, d) = (num(&b[0..4])?, num(&b[5..7])?, num(&b[8..10])?);
    let (h, mi, s) = (num(&b[11..13])?, num(&b[14..16])?, num(&b[17..19])?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = match mo {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if d < 1 || d > month_days || h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let fraction = &b[19..b.len() - 1];
    let micros = match fraction.split_first() {
        None => 0,
        Some((b'.', digits)) if !digits.is_empty() => {
            num(digits)?;
            let mut micros = 0;
            for i in 0..6 {
                micros = micros * 10 + digits.get(i).map_or(0, |c| i64::from(c - b'0'));
            }
            micros
        }
        Some(_) => return None,
    };
    // Days from the civil date (H. Hinnant's algorithm), proleptic Gregorian.
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * ((mo + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + h * 3_600 + mi * 60 + s;
    Some((secs * 1_000_000 + micros) as f64 / 1000.0)
}

impl Model {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            evals: Evals::new(limits.eval_window),
            ..Self::default()
        }
    }

    // ---- reads -------------------------------------------------------------------------

    pub fn sessions_len(&self) -> usize {
        self.sessions.len()
    }

    pub fn session(&self, id: &str) -> Option<&Session> {
        let abs = *self.index.get(id)?;
        self.sessions.get((abs - self.base) as usize)
    }

    /// Row `row` of the newest-first list.
    pub fn session_newest(&self, row: usize) -> Option<&Session> {
        let len = self.sessions.len();
        (row < len).then(|| &self.sessions[len - 1 - row])
    }

    /// Where a session sits in the newest-first list.
    pub fn newest_row_of(&self, id: &str) -> Option<usize> {
        let abs = *self.index.get(id)?;
        Some(self.sessions.len() - 1 - (abs - self.base) as usize)
    }

    /// Absolute positions never reused: `[first_abs, end_abs)` spans the retained sessions.
    pub fn first_abs(&self) -> u64 {
        self.base
    }

    pub fn end_abs(&self) -> u64 {
        self.base + self.sessions.len() as u64
    }

    pub fn abs_of(&self, id: &str) -> Option<u64> {
        self.index.get(id).copied()
    }

    pub fn session_abs(&self, abs: u64) -> Option<&Session> {
        abs.checked_sub(self.base)
            .and_then(|i| self.sessions.get(i as usize))
    }

    // ---- writes ------------------------------------------------------------------------

    /// The client could not decode a frame: counted, shown, never fatal.
    pub fn note_parse_error(&mut self) {
        self.counters.parse_errors += 1;
    }

    fn session_mut_or_new(&mut self, id: &str) -> &mut Session {
        let abs = if let Some(abs) = self.index.get(id) {
            *abs
        } else {
            let abs = self.end_abs();
            self.index.insert(id.to_owned(), abs);
            self.sessions.push_back(Session::new(id));
            while self.sessions.len() > self.limits.sessions.max(1) {
                self.drop_oldest_session();
            }
            abs
        };
        let i = (abs - self.base) as usize;
        let session = &mut self.sessions[i];
        // Named by the runtime running now: it restored the session, no longer the old one's.
        if session.status == SessionStatus::Previous {
            session.status = SessionStatus::Active;
            session.gone_at_ms = None;
        }
        session
    }

    fn session_mut(&mut self, id: &str) -> Option<&mut Session> {
        let abs = *self.index.get(id)?;
        self.sessions.get_mut((abs - self.base) as usize)
    }

    /// Folds one frame and keeps it in the event log. The frame is moved in, not copied:
    /// this is the stream's hot path.
    pub fn fold(&mut self, frame: Box<Frame>) {
        if self.apply(&frame) {
            let bytes = frame.event.approx_bytes();
            // What lands in a timeline also counts against the budget, on its session.
            let timed = matches!(
                frame.event,
                Event::ToolCalled(_)
                    | Event::AgentStepCompleted(_)
                    | Event::AgentCompleted(_)
                    | Event::AgentFailed(_)
            );
            if timed
                && let Some(session) = frame.session_id.as_deref().and_then(|id| {
                    let abs = *self.index.get(id)?;
                    self.sessions.get_mut((abs - self.base) as usize)
                })
            {
                session.bytes += bytes;
                self.session_bytes += bytes;
            }
            self.counters.dropped.events += self.events.push(frame, bytes, self.limits.events);
            self.enforce_bytes();
        }
    }

    /// Bytes the model holds now (frames plus sessions), as its budget counts them.
    pub fn retained_bytes(&self) -> usize {
        self.events.bytes() + self.session_bytes
    }

    fn drop_oldest_session(&mut self) {
        if let Some(old) = self.sessions.pop_front() {
            self.index.remove(&old.id);
            self.counters.dropped.sessions += 1;
            self.counters.dropped.calls += old.timeline.calls().len() as u64;
            self.session_bytes = self.session_bytes.saturating_sub(old.bytes);
            self.base += 1;
        }
    }

    /// Within `limits.bytes`: the oldest sessions while they are closed (positions are
    /// never reused, so only the front can go), then the oldest frames, then the oldest
    /// sessions whatever their state. The newest session and frame always stay.
    fn enforce_bytes(&mut self) {
        let max = self.limits.bytes.max(1);
        while self.retained_bytes() > max
            && self.sessions.len() > 1
            && self.sessions.front().is_some_and(|s| {
                matches!(s.status, SessionStatus::Closed | SessionStatus::Previous)
            })
        {
            self.drop_oldest_session();
        }
        while self.retained_bytes() > max && self.events.len() > 1 {
            self.events.pop_oldest();
            self.counters.dropped.events += 1;
        }
        while self.retained_bytes() > max && self.sessions.len() > 1 {
            self.drop_oldest_session();
        }
    }

    /// Folds one frame; false for a duplicate. Frames at or below the last seq are
    /// duplicates (a resume that overlapped) and change nothing but the duplicate count.
    pub fn apply(&mut self, frame: &Frame) -> bool {
        match &frame.event {
            // Says which stream this is, nothing about its state.
            Event::StreamHello(_) => return false,
            // Seq 0 of a history that does not continue the one folded so far: checked
            // before the duplicate test, which compares seqs of one stream only.
            Event::StreamReset(_) => {
                self.reset(parse_ms(&frame.ts));
                self.counters.applied += 1;
                return true;
            }
            _ => {}
        }
        if frame.seq <= self.counters.last_seq && self.counters.applied > 0 {
            self.counters.duplicates += 1;
            return false;
        }
        self.apply_new(frame);
        true
    }

    fn apply_new(&mut self, frame: &Frame) {
        self.counters.last_seq = frame.seq;
        self.counters.applied += 1;
        let at = parse_ms(&frame.ts);
        let sid = frame.session_id.as_deref();
        match &frame.event {
            Event::SessionCreated(created) => {
                let Some(id) = sid else {
                    self.counters.orphans += 1;
                    return;
                };
                if self.hydrated_past(id, frame.seq) {
                    return;
                }
                let session = self.session_mut_or_new(id);
                session.user.clear();
                session.user.push_str(&created.user_id);
                session.project.clear();
                session.project.push_str(&created.project);
                if !created.metadata.is_empty() {
                    session.summary_mut().note_metadata(&created.metadata);
                }
                session.status = SessionStatus::Active;
                if let Some(at) = at {
                    session.created_ms = Some(at);
                }
                if session.mocks.is_empty() {
                    session.mocks = created
                        .mocks
                        .iter()
                        .map(|m| MockRow {
                            tool: m.tool.clone(),
                            mode: m.mode,
                            entries: if m.mode == MockMode::Static {
                                1
                            } else {
                                m.entries
                            },
                            consumed: 0,
                            counted: false,
                            calls: 0,
                            saw_exhausted: false,
                            rule_hits: if m.mode == MockMode::Rules {
                                vec![0; m.entries as usize]
                            } else {
                                Vec::new()
                            },
                            fallback_hits: m.fallback.then_some(0),
                            payload: m.payload.clone(),
                            payload_bytes: m.payload_bytes,
                        })
                        .collect();
                }
                session.touch(at);
            }
            Event::SessionClosed(_) => {
                if let Some(session) = sid
                    .filter(|id| !self.hydrated_past(id, frame.seq))
                    .and_then(|id| self.session_mut(id))
                {
                    session.status = SessionStatus::Closed;
                    session.touch(at);
                }
            }
            Event::ToolCalled(called) => match sid {
                Some(id) => {
                    let counted = self.hydrated_past(id, frame.seq);
                    self.tool_called(id, called, at, counted);
                }
                None => self.counters.orphans += 1,
            },
            Event::ApprovalRequested(req) => {
                let approval = Approval {
                    id: req.approval_id.clone(),
                    session_id: sid.unwrap_or_default().to_owned(),
                    call_id: req.call_id.clone(),
                    tool: req.tool.clone(),
                    input: req.input.clone(),
                    rule_id: req.rule_id.clone(),
                    message: req.message.clone(),
                    condition: req.condition.clone(),
                    status: ApprovalStatus::Pending,
                    requested_at: frame.ts.to_string(),
                    expires_at: req.expires_at.clone(),
                    expires_ms: parse_ms(&req.expires_at),
                    decided_by: None,
                    note: None,
                    replay: None,
                    replay_counter: None,
                };
                // A re-read may already know the decision; a request never undoes one.
                let decided = self
                    .approvals
                    .get(&req.approval_id)
                    .is_some_and(|a| a.status != ApprovalStatus::Pending);
                if !decided {
                    self.counters.dropped.approvals +=
                        self.approvals.upsert(approval, self.limits.approvals);
                }
                if let Some(session) = sid.and_then(|id| self.session_mut(id)) {
                    if let Some(call) = session.timeline.call_mut(&req.call_id) {
                        call.approval_id = Some(req.approval_id.clone());
                    }
                    session.touch(at);
                }
            }
            Event::ApprovalResolved(res) => {
                self.approvals
                    .set_status(&res.approval_id, res.decision.into());
                if let Some(approval) = self.approvals.get_mut(&res.approval_id) {
                    approval.decided_by.clone_from(&res.by);
                    approval.note.clone_from(&res.note);
                }
                if let Some(session) = sid.and_then(|id| self.session_mut(id)) {
                    session.touch(at);
                }
            }
            Event::ApprovalReplayed(rep) => {
                if let Some(approval) = self.approvals.get_mut(&rep.approval_id) {
                    approval.replay = Some(rep.outcome.clone());
                    approval.replay_counter = rep.counter;
                }
                let counted = sid.is_some_and(|id| self.hydrated_past(id, frame.seq));
                if let Some(session) = sid.and_then(|id| self.session_mut(id)) {
                    if let Some(call) = session.timeline.call_mut(&rep.call_id) {
                        call.replay = Some(Box::new(Replay {
                            outcome: rep.outcome.clone(),
                            duration_ms: rep.duration,
                            counter: rep.counter,
                        }));
                    }
                    let exhausted = is_exhausted(&rep.outcome);
                    if let Some(mock) = session.mock_mut(&rep.tool).filter(|_| !counted) {
                        mock.calls += 1;
                        if let Some(counter) = rep.counter {
                            mock.consumed = counter.consumed;
                            mock.counted = true;
                            mock.note_answer(&counter);
                        }
                        mock.saw_exhausted |= exhausted;
                    }
                    session.touch(at);
                }
            }
            Event::EvalRunStarted(run) => {
                self.counters.dropped.eval_runs +=
                    self.evals.run_started(run, self.limits.eval_runs);
            }
            Event::EvalRunCompleted(done) => self.evals.run_completed(done),
            Event::AgentEvalCompleted(_) => {
                self.counters.dropped.eval_results += self.evals.record(frame);
            }
            Event::StreamGap(_) => self.counters.gaps += 1,
            // Handled in `apply`, before the duplicate test.
            Event::StreamHello(_) | Event::StreamReset(_) => {}
            Event::AgentStepCompleted(step) => {
                let Some((id, external)) = Self::agent_session(frame) else {
                    self.counters.orphans += 1;
                    return;
                };
                let limits = self.limits;
                let counted = self.hydrated_past(id, frame.seq);
                let session = self.session_mut_or_new(id);
                session.external |= external;
                let end = at.or(session.last_activity_ms).unwrap_or(0.0);
                let started = step.started_at.as_deref().and_then(parse_ms);
                let (added, dropped_calls, dropped_steps) =
                    session
                        .timeline
                        .push_step(&step.step, end, started, step.duration, &limits);
                session
                    .timeline
                    .note_cumulative_tokens(step.iteration, &step.tokens);
                if !counted {
                    session.calls += added;
                }
                session.touch(at);
                self.counters.dropped.calls += dropped_calls;
                self.counters.dropped.steps += dropped_steps;
            }
            Event::AgentCompleted(run) => self.agent_run(frame, run, SessionStatus::Completed, at),
            Event::AgentFailed(run) => self.agent_run(frame, run, SessionStatus::Failed, at),
            Event::Unknown { .. } => self.counters.unknown_kinds += 1,
        }
    }

    /// The session an agent event belongs to: its `sessionId`, else an external session
    /// keyed by conversation, else by agent name (true: external, a forwarded run).
    pub fn agent_session(frame: &Frame) -> Option<(&str, bool)> {
        if let Some(id) = &frame.session_id {
            return Some((id, false));
        }
        let key = frame
            .event
            .conversation_id()
            .filter(|c| !c.is_empty())
            .or_else(|| frame.event.agent_name())?;
        Some((key, true))
    }

    fn agent_run(&mut self, frame: &Frame, run: &AgentRun, status: SessionStatus, at: Option<f64>) {
        let Some((id, external)) = Self::agent_session(frame) else {
            self.counters.orphans += 1;
            return;
        };
        let limits = self.limits;
        let session = self.session_mut_or_new(id);
        session.external |= external;
        session
            .summary_mut()
            .note_run(run, status == SessionStatus::Failed);
        if external || session.status == SessionStatus::Active {
            session.status = status;
        }
        // A sender that forwards only the final event still gets a timeline; one that sent
        // every step already has it, and the join by id keeps calls single either way.
        if session.timeline.steps.is_empty() && !run.steps.is_empty() {
            let end = at.unwrap_or(0.0);
            let total: f64 = run.steps.len() as f64;
            let per_step = if total > 0.0 {
                run.duration / total
            } else {
                0.0
            };
            let mut dropped = (0, 0);
            for (i, step) in run.steps.iter().enumerate() {
                let step_end = end - run.duration + per_step * (i as f64 + 1.0);
                let (added, dc, ds) = session.timeline.push_step(
                    step,
                    step_end,
                    None,
                    per_step * (i as f64 + 1.0),
                    &limits,
                );
                session.calls += added;
                dropped.0 += dc;
                dropped.1 += ds;
            }
            self.counters.dropped.calls += dropped.0;
            self.counters.dropped.steps += dropped.1;
            // Re-borrow after the counters update.
            if let Some(session) = self.session_mut(id) {
                session.touch(at);
            }
            return;
        }
        session.touch(at);
    }

    /// Whether a REST re-read of session `id` already reflected its frame `seq`.
    fn hydrated_past(&self, id: &str, seq: u64) -> bool {
        self.session(id).is_some_and(|s| s.hydrated_seq >= seq)
    }

    /// Folds a `tool.called`; `counted` when a re-read already counted it (the call is
    /// still placed on the timeline, the counters are left alone).
    fn tool_called(&mut self, id: &str, called: &ToolCalled, at: Option<f64>, counted: bool) {
        let limits = self.limits;
        let session = self.session_mut_or_new(id);
        let start = parse_ms(&called.started_at).or(at.map(|t| t - called.duration));
        let is_envelope = called.outcome.envelope().is_some();
        let mut dropped = 0;
        if let Some(call) = session.timeline.call_mut(&called.call_id) {
            // Told first by a step: the runtime's account is the precise one.
            call.outcome = called.outcome.clone();
            call.start_ms = start.or(call.start_ms);
            call.duration_ms = called.duration;
            call.counter = called.counter;
            call.from_runtime = true;
            if is_envelope && !counted {
                session.envelopes += 1;
            }
        } else {
            let call = Call {
                id: called.call_id.clone(),
                tool: called.tool.clone(),
                input: called.input.clone(),
                outcome: called.outcome.clone(),
                start_ms: start,
                duration_ms: called.duration,
                counter: called.counter,
                iteration: called.iteration,
                from_runtime: true,
                approval_id: match called.outcome.envelope() {
                    Some(Envelope::ApprovalRequired { approval_id, .. }) => {
                        Some(approval_id.clone())
                    }
                    _ => None,
                },
                replay: None,
            };
            dropped = session.timeline.push_call(call, limits.calls_per_session);
            if !counted {
                session.calls += 1;
                if is_envelope {
                    session.envelopes += 1;
                }
            }
        }
        let exhausted = is_exhausted(&called.outcome);
        if let Some(mock) = session.mock_mut(&called.tool).filter(|_| !counted) {
            mock.calls += 1;
            if let Some(counter) = called.counter {
                mock.consumed = counter.consumed;
                mock.counted = true;
                if let Some(total) = counter.total {
                    mock.entries = total;
                }
                mock.note_answer(&counter);
            }
            mock.saw_exhausted |= exhausted;
        }
        session.touch(at);
        self.counters.dropped.calls += dropped;
    }

    /// After `stream.reset`: the old stream's frames, approvals and evals are forgotten
    /// (they cannot be decided or trusted on the runtime running now); its sessions stay
    /// readable, marked `Previous`, until a re-read or a new frame says the new runtime
    /// has them, with when (`at`, epoch ms) their runtime went. The limits and the
    /// stream's own bookkeeping (parse errors, resets) stay.
    pub fn reset(&mut self, at: Option<f64>) {
        let counters = Counters {
            resets: self.counters.resets + 1,
            parse_errors: self.counters.parse_errors,
            ..Counters::default()
        };
        let mut sessions = std::mem::take(&mut self.sessions);
        for session in &mut sessions {
            // A session already gone keeps the restart that took it.
            if session.status != SessionStatus::Previous {
                session.gone_at_ms = at;
            }
            session.status = SessionStatus::Previous;
            // The new stream counts seqs from the start again.
            session.hydrated_seq = 0;
            session.rev += 1;
        }
        *self = Model {
            limits: self.limits,
            counters,
            sessions,
            index: std::mem::take(&mut self.index),
            base: self.base,
            session_bytes: self.session_bytes,
            ..Model::default()
        };
    }

    /// Merges a REST re-read (after `stream.gap`): summaries and counters from the runtime
    /// replace what the stream had told, timelines already folded are kept.
    pub fn hydrate(&mut self, sessions: SessionList, approvals: ApprovalList) {
        self.counters.hydrations += 1;
        for summary in sessions.sessions {
            let session = self.session_mut_or_new(&summary.id);
            session.user = summary.user_id;
            session.status = SessionStatus::from_wire(&summary.status);
            session.created_ms = parse_ms(&summary.created_at).or(session.created_ms);
            session.last_activity_ms =
                parse_ms(&summary.last_activity).or(session.last_activity_ms);
            session.calls = summary.calls;
            session.envelopes = summary.envelopes;
            session.hydrated_seq = session.hydrated_seq.max(summary.last_seq);
            // A snapshot does not carry payloads: those the stream told are kept.
            let told: Vec<(String, spyglass_protocol::RawJson)> = session
                .mocks
                .iter_mut()
                .filter_map(|m| Some((m.tool.clone(), m.payload.take()?)))
                .collect();
            session.mocks = summary
                .mocks
                .into_iter()
                .map(|m| {
                    let entries = match m.declared.mode {
                        MockMode::Static => 1,
                        MockMode::Stateful => m.counter.total.unwrap_or(m.declared.entries),
                        MockMode::Rules => m.declared.entries,
                    };
                    let mut rule_hits = m.rule_hits;
                    if m.declared.mode == MockMode::Rules {
                        rule_hits.resize(entries as usize, 0);
                    }
                    let payload = m.declared.payload.or_else(|| {
                        told.iter()
                            .find(|(tool, _)| *tool == m.declared.tool)
                            .map(|(_, p)| p.clone())
                    });
                    MockRow {
                        tool: m.declared.tool,
                        mode: m.declared.mode,
                        entries,
                        consumed: m.counter.consumed,
                        counted: true,
                        calls: m.calls,
                        saw_exhausted: false,
                        rule_hits,
                        fallback_hits: m.declared.fallback.then_some(m.fallback_hits),
                        payload,
                        payload_bytes: None,
                    }
                })
                .collect();
            session.rev += 1;
        }
        for view in approvals.approvals {
            let mut approval = approval_from_view(view);
            // A re-read has no rule message or condition: keep what the frame told.
            if let Some(old) = self.approvals.get(&approval.id) {
                approval.message.clone_from(&old.message);
                approval.condition.clone_from(&old.condition);
            }
            self.counters.dropped.approvals +=
                self.approvals.upsert(approval, self.limits.approvals);
        }
    }
}

fn is_exhausted(outcome: &Outcome) -> bool {
    matches!(outcome.envelope(), Some(Envelope::MocksExhausted { .. }))
}

fn approval_from_view(view: ApprovalView) -> Approval {
    Approval {
        expires_ms: parse_ms(&view.expires_at),
        id: view.id,
        session_id: view.session_id,
        call_id: view.call_id,
        tool: view.tool,
        input: view.input,
        rule_id: view.rule_id,
        message: String::new(),
        condition: None,
        status: view.status,
        requested_at: view.requested_at,
        expires_at: view.expires_at,
        decided_by: view.decided_by,
        note: view.note,
        replay: view.replay,
        replay_counter: None,
    }
}

#[cfg(test)]
mod tests;
