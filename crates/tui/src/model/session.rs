//! One session as the inspector sees it: its summary row, declared mocks with their
//! consume counters, and a bounded timeline of agent steps and tool calls joined by call id.

use compact_str::CompactString;
use hashbrown::HashTable;
use spyglass_protocol::RawJson;
use spyglass_protocol::events::{AgentRun, Counter, MockMode, Outcome, Step, Tokens};
use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::hash::BuildHasher;

/// Lifecycle of a session as the stream has told it so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionStatus {
    #[default]
    Active,
    Closed,
    Completed,
    Failed,
    /// Known before a `stream.reset`: the runtime that held it restarted without it.
    Previous,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Closed => "closed",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Previous => "gone",
        }
    }

    pub(crate) fn from_wire(status: &str) -> Self {
        match status {
            "closed" => Self::Closed,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            _ => Self::Active,
        }
    }
}

/// A declared mock and how far it has been consumed.
#[derive(Debug, Clone, PartialEq)]
pub struct MockRow {
    pub tool: String,
    pub mode: MockMode,
    /// Entries of a stateful mock (1 for a static one).
    pub entries: u32,
    /// Successful returns so far (a static mock's answers served).
    pub consumed: u32,
    /// A call's counter (or a REST read) told `consumed`: without one it is unknown.
    pub counted: bool,
    /// Every call that reached this mock, including envelopes.
    pub calls: u32,
    /// A call came back `mocks_exhausted`, even if the counter says otherwise.
    pub saw_exhausted: bool,
    /// A rules mock: calls each rule answered, by index.
    pub rule_hits: Vec<u32>,
    /// A rules mock: calls its `$fallback` answered; `None` when it has none.
    pub fallback_hits: Option<u32>,
    /// The mock as declared, when the stream told it (`session.created` of a runtime that
    /// sends it); a session read from a snapshot has none.
    pub payload: Option<spyglass_protocol::RawJson>,
    /// The payload's size when it was too large for the stream to carry.
    pub payload_bytes: Option<u32>,
}

impl MockRow {
    /// Counts the rule (or fallback) a call's counter says answered it.
    pub fn note_answer(&mut self, counter: &spyglass_protocol::events::Counter) {
        if let Some(rule) = counter.rule {
            let at = rule as usize;
            if self.rule_hits.len() <= at {
                self.rule_hits.resize(at + 1, 0);
            }
            self.rule_hits[at] += 1;
        } else if counter.fallback {
            *self.fallback_hits.get_or_insert(0) += 1;
        }
    }

    pub fn exhausted(&self) -> bool {
        self.saw_exhausted || (self.mode == MockMode::Stateful && self.consumed >= self.entries)
    }

    pub fn never_called(&self) -> bool {
        self.calls == 0
    }

    /// Fraction consumed, for a gauge: stateful only (a static mock never runs out).
    pub fn ratio(&self) -> Option<f64> {
        match self.mode {
            MockMode::Stateful if self.entries > 0 => {
                Some((f64::from(self.consumed) / f64::from(self.entries)).min(1.0))
            }
            _ => None,
        }
    }
}

/// The outcome of an approved call's replay, kept beside the original call.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub outcome: Outcome,
    pub duration_ms: f64,
    pub counter: Option<Counter>,
}

/// One tool call, whichever events told of it (`tool.called`, a step's `toolCalls[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: CompactString,
    pub tool: CompactString,
    pub input: RawJson,
    pub outcome: Outcome,
    /// Epoch milliseconds; `None` until placed (seed-001 calls are placed inside their step).
    pub start_ms: Option<f64>,
    pub duration_ms: f64,
    pub counter: Option<Counter>,
    /// Iteration of the agent step it belongs to, when it belongs to one.
    pub iteration: Option<u32>,
    /// `tool.called` told of it: its start is the runtime's own, not a guess.
    pub from_runtime: bool,
    pub approval_id: Option<String>,
    /// Boxed: few calls are ever replayed, and a call is the model's most numerous row, so
    /// the unboxed outcome cost every call ~90 bytes (docs/PERFORMANCE.md, memory).
    pub replay: Option<Box<Replay>>,
}

impl Call {
    pub fn envelope_code(&self) -> Option<&str> {
        self.outcome
            .envelope()
            .map(spyglass_protocol::envelope::Envelope::code)
    }
}

/// One agent loop iteration on the time axis.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    pub iteration: u32,
    pub model: CompactString,
    pub finish_reason: CompactString,
    pub tokens_total: u64,
    pub start_ms: f64,
    pub duration_ms: f64,
    /// The step's calls in dispatch order (its `toolCalls` list).
    pub call_ids: Vec<CompactString>,
    /// The model's answer was served from a cassette (`--model-replay`).
    pub cassette: bool,
    /// Model calls of this step that threw and were retried: how many, and the first's
    /// error (bounded), so the timeline shows the failed attempt on its step.
    pub failed_attempts: u32,
    pub first_failure: Option<String>,
    /// Absolute call position the step stands before in `Timeline::rows`: its first call,
    /// or for a step without calls, the next call to arrive after it.
    anchor: u64,
}

/// One row of a session's timeline in display order: a step, or a call, by its position
/// in the `steps` and `calls()` rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimelineRow {
    Step(usize),
    Call(usize),
    /// The run failed: its last row, saying why (the timeline, not only the Run pane).
    Failure,
}

/// Calls by id: each entry is a call's absolute position, hashed by the call's id and
/// compared with the call itself, so the index keeps no copy of the id (an allocation and
/// a copy per call, and a cold free when the call goes, on the fold's hot path).
#[derive(Clone, Default)]
struct CallIndex {
    table: HashTable<u64>,
    hasher: foldhash::fast::RandomState,
}

impl CallIndex {
    fn hash(&self, id: &str) -> u64 {
        self.hasher.hash_one(id)
    }
}

impl std::fmt::Debug for CallIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallIndex")
            .field("len", &self.table.len())
            .finish_non_exhaustive()
    }
}

/// Steps and calls of one session, each a ring bounded by `Limits`. Calls are found by id
/// through an index of absolute positions, so a join or an update is O(1).
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub steps: VecDeque<StepRow>,
    calls: VecDeque<Call>,
    index: CallIndex,
    /// Absolute position of `calls[0]`: how many calls were dropped from the front.
    base: u64,
    /// Cumulative agent duration at the end of the last step (seed-001 `duration`).
    last_cumulative_ms: f64,
    /// The run's tokens so far at the last step (a step event's own `tokens`).
    last_cumulative_tokens: u64,
    /// Steps that fell out of the ring.
    pub dropped_steps: u64,
}

/// A count's total: `total`, or prompt + completion when the sender left the total out.
pub fn tokens_total(tokens: &Tokens) -> u64 {
    if tokens.total > 0 {
        tokens.total
    } else {
        tokens.prompt.saturating_add(tokens.completion)
    }
}

impl Timeline {
    /// Notes a step event's run-so-far tokens: a step its sender sent without tokens of
    /// its own gets the difference from the step before (a first step, or a count that
    /// went down, starts a run).
    pub(crate) fn note_cumulative_tokens(&mut self, iteration: u32, cumulative: &Tokens) {
        let total = tokens_total(cumulative);
        let before = if iteration > 0 && total >= self.last_cumulative_tokens {
            self.last_cumulative_tokens
        } else {
            0
        };
        self.last_cumulative_tokens = total;
        if let Some(step) = self.steps.back_mut()
            && step.tokens_total == 0
        {
            step.tokens_total = total - before;
        }
    }

    pub fn calls(&self) -> &VecDeque<Call> {
        &self.calls
    }

    /// The absolute position of the call `id`, if retained.
    fn find(&self, id: &str) -> Option<u64> {
        let (calls, base) = (&self.calls, self.base);
        self.index
            .table
            .find(self.index.hash(id), |&abs| {
                calls.get((abs - base) as usize).is_some_and(|c| c.id == id)
            })
            .copied()
    }

    pub fn call(&self, id: &str) -> Option<&Call> {
        let abs = self.find(id)?;
        self.calls.get((abs - self.base) as usize)
    }

    pub fn call_mut(&mut self, id: &str) -> Option<&mut Call> {
        let abs = self.find(id)?;
        self.calls.get_mut((abs - self.base) as usize)
    }

    /// Steps and calls in the order they happened, each call under the step that made it:
    /// steps in arrival order (a run's iterations in order), a step's calls in its
    /// `toolCalls` order, and calls no step claims (`execute`, or a step still running) at
    /// their arrival (seq) order. Start stamps are not consulted: a mocked call takes
    /// microseconds, and agents that forward steps give calls no start at all.
    pub fn rows(&self) -> Vec<TimelineRow> {
        let mut claimed = vec![false; self.calls.len()];
        let mut nested: Vec<Vec<usize>> = Vec::with_capacity(self.steps.len());
        for step in &self.steps {
            let mut own = Vec::with_capacity(step.call_ids.len());
            for id in &step.call_ids {
                let Some(abs) = self.find(id) else {
                    continue;
                };
                let i = (abs - self.base) as usize;
                if !claimed[i] {
                    claimed[i] = true;
                    own.push(i);
                }
            }
            nested.push(own);
        }
        let mut rows = Vec::with_capacity(self.steps.len() + self.calls.len());
        let mut next_call = 0;
        let free_until = |rows: &mut Vec<TimelineRow>, next: &mut usize, end: usize| {
            while *next < end.min(self.calls.len()) {
                if !claimed[*next] {
                    rows.push(TimelineRow::Call(*next));
                }
                *next += 1;
            }
        };
        for (s, step) in self.steps.iter().enumerate() {
            let anchor = step.anchor.saturating_sub(self.base) as usize;
            free_until(&mut rows, &mut next_call, anchor);
            rows.push(TimelineRow::Step(s));
            rows.extend(nested[s].iter().map(|i| TimelineRow::Call(*i)));
        }
        free_until(&mut rows, &mut next_call, usize::MAX);
        rows
    }

    /// Adds a call (its id not in the timeline yet), dropping the oldest past `max`;
    /// returns how many were dropped.
    pub(crate) fn push_call(&mut self, call: Call, max: usize) -> u64 {
        let abs = self.base + self.calls.len() as u64;
        let hash = self.index.hash(&call.id);
        self.calls.push_back(call);
        let (calls, base, index) = (&self.calls, self.base, &mut self.index);
        let hasher = &index.hasher;
        index.table.insert_unique(hash, abs, |&at| {
            calls
                .get((at - base) as usize)
                .map_or(0, |c| hasher.hash_one(c.id.as_str()))
        });
        let mut dropped = 0;
        while self.calls.len() > max.max(1) {
            if let Some(old) = self.calls.pop_front() {
                let hash = self.index.hash(&old.id);
                let at = self.base;
                if let Ok(entry) = self.index.table.find_entry(hash, |&abs| abs == at) {
                    entry.remove();
                }
            }
            self.base += 1;
            dropped += 1;
        }
        dropped
    }

    /// Folds a seed-001 step: its calls, new or already told by `tool.called`, are joined
    /// by id; calls with no start of their own are laid one after another from the step's
    /// start (`started_ms` when the sender told it, else its end less its own duration).
    /// Returns (new calls, dropped calls, dropped steps).
    pub(crate) fn push_step(
        &mut self,
        step: &Step,
        end_ms: f64,
        started_ms: Option<f64>,
        cumulative_ms: f64,
        limits: &super::Limits,
    ) -> (u32, u64, u64) {
        let own = if cumulative_ms >= self.last_cumulative_ms && step.iteration > 0 {
            cumulative_ms - self.last_cumulative_ms
        } else {
            cumulative_ms
        };
        self.last_cumulative_ms = cumulative_ms;
        let calls_ms: f64 = step.tool_calls.iter().map(|c| c.duration.max(0.0)).sum();
        let duration_ms = own.max(calls_ms);
        let start_ms = started_ms.unwrap_or(end_ms - duration_ms);
        let mut cursor = start_ms;
        let mut anchor = self.base + self.calls.len() as u64;
        let (mut added, mut dropped_calls) = (0, 0);
        let mut call_ids = Vec::with_capacity(step.tool_calls.len());
        for tc in &step.tool_calls {
            call_ids.push(tc.id.clone());
            let duration = tc.duration.max(0.0);
            let found = self.find(&tc.id);
            if let Some(abs) = found {
                anchor = anchor.min(abs);
            }
            if let Some(call) = found.and_then(|abs| self.calls.get_mut((abs - self.base) as usize))
            {
                call.iteration.get_or_insert(step.iteration);
                if call.start_ms.is_none() {
                    call.start_ms = Some(cursor);
                }
                if !call.from_runtime {
                    call.duration_ms = duration;
                }
            } else {
                let call = Call {
                    id: tc.id.clone(),
                    tool: tc.name.clone(),
                    input: tc.args.clone(),
                    outcome: Outcome::Result(tc.result.clone()),
                    start_ms: Some(cursor),
                    duration_ms: duration,
                    counter: None,
                    iteration: Some(step.iteration),
                    from_runtime: false,
                    approval_id: None,
                    replay: None,
                };
                dropped_calls += self.push_call(call, limits.calls_per_session);
                added += 1;
            }
            cursor += duration;
        }
        self.steps.push_back(StepRow {
            iteration: step.iteration,
            model: step.model.clone(),
            finish_reason: step.finish_reason.clone(),
            tokens_total: tokens_total(&step.tokens),
            start_ms,
            duration_ms,
            call_ids,
            cassette: step.cassette,
            failed_attempts: u32::try_from(step.failed_attempts.len()).unwrap_or(u32::MAX),
            first_failure: step.failed_attempts.first().map(|f| bounded(&f.error)),
            anchor,
        });
        let mut dropped_steps = 0;
        while self.steps.len() > limits.steps_per_session.max(1) {
            self.steps.pop_front();
            dropped_steps += 1;
        }
        self.dropped_steps += dropped_steps;
        (added, dropped_calls, dropped_steps)
    }
}

/// Longest text a summary keeps of a prompt, an output or an error (chars); metadata
/// keeps at most `SUMMARY_METADATA` pairs, each value cut the same way.
const SUMMARY_TEXT: usize = 2_000;
const SUMMARY_METADATA: usize = 16;

fn bounded(text: &str) -> String {
    match text.char_indices().nth(SUMMARY_TEXT) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// What a debugger wants first about a session, kept as `session.created` and
/// `agent.completed` / `agent.failed` tell it: bounded copies, not the frames.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSummary {
    pub metadata: Vec<(String, String)>,
    pub run: Option<RunOutcome>,
}

/// The end of an agent run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunOutcome {
    pub agent: String,
    pub model: String,
    pub provider: String,
    pub prompt: String,
    /// The final text (completed) or the error (failed).
    pub output: String,
    pub failed: bool,
    pub steps: u32,
    pub tokens: Tokens,
    pub duration_ms: f64,
    pub finish_reason: String,
    pub failover_attempts: u32,
    /// Dollars, as the run event told it (a finite, non-negative number only).
    pub cost: Option<f64>,
    /// Why the run has no cost, when the runtime said.
    pub cost_missing: Option<String>,
}

impl RunSummary {
    pub(crate) fn note_metadata(&mut self, metadata: &BTreeMap<String, String>) {
        self.metadata = metadata
            .iter()
            .take(SUMMARY_METADATA)
            .map(|(k, v)| (bounded(k), bounded(v)))
            .collect();
    }

    pub(crate) fn note_run(&mut self, run: &AgentRun, failed: bool) {
        let output = match (&run.error, failed) {
            (Some(error), _) => error.as_text(),
            (None, true) => String::new(),
            (None, false) => run.output.as_text(),
        };
        self.run = Some(RunOutcome {
            agent: bounded(&run.agent_name),
            model: bounded(&run.model),
            provider: bounded(&run.provider),
            prompt: bounded(&run.input.as_text()),
            output: bounded(&output),
            failed,
            steps: u32::try_from(run.steps.len()).unwrap_or(u32::MAX),
            tokens: Tokens {
                total: tokens_total(&run.tokens),
                ..run.tokens
            },
            duration_ms: run.duration,
            finish_reason: bounded(&run.finish_reason),
            failover_attempts: run.failover_attempts,
            cost: run.cost.filter(|c| c.is_finite() && *c >= 0.0),
            cost_missing: run.cost_missing.as_deref().map(bounded),
        });
    }
}

/// A session row and everything the inspector knows of it.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub id: String,
    pub user: String,
    /// The project (tenant) `session.created` named; empty when the stream did not say.
    pub project: String,
    pub status: SessionStatus,
    /// Epoch milliseconds.
    pub created_ms: Option<f64>,
    pub last_activity_ms: Option<f64>,
    pub calls: u32,
    pub envelopes: u32,
    /// Grouped from agent events that named no session (by conversation, else agent).
    pub external: bool,
    pub mocks: Vec<MockRow>,
    pub timeline: Timeline,
    /// Metadata and how the agent run ended; boxed, as most sessions have neither.
    pub summary: Option<Box<RunSummary>>,
    /// Bumped on every change, so views can cache what they derive from this session.
    pub rev: u64,
    /// The runtime's `last_seq` for this session at the last REST re-read: its frames up
    /// to here are already in the counters and must not be counted again.
    pub hydrated_seq: u64,
    /// What the model's byte budget counts for it: the frames folded into its timeline.
    pub bytes: usize,
    /// `Previous`: when (epoch ms, the `stream.reset` stamp) the runtime that held it
    /// was found restarted without it.
    pub gone_at_ms: Option<f64>,
}

impl Session {
    pub(crate) fn new(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            ..Self::default()
        }
    }

    pub(crate) fn summary_mut(&mut self) -> &mut RunSummary {
        self.summary.get_or_insert_with(Box::default)
    }

    /// Mocks are a handful per session: a scan beats a map here.
    pub fn mock_mut(&mut self, tool: &str) -> Option<&mut MockRow> {
        self.mocks.iter_mut().find(|m| m.tool == tool)
    }

    pub(crate) fn touch(&mut self, at_ms: Option<f64>) {
        if let Some(at) = at_ms {
            self.last_activity_ms = Some(self.last_activity_ms.map_or(at, |t| t.max(at)));
            self.created_ms.get_or_insert(at);
        }
        self.rev += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spyglass_protocol::RawJson;

    #[test]
    fn a_runs_summary_keeps_bounded_copies_and_the_error_of_a_failed_run() {
        let huge = "x".repeat(SUMMARY_TEXT * 3);
        let run = AgentRun {
            agent_name: "billing".into(),
            model: "gpt-4o-mini".into(),
            input: RawJson::from_value(&serde_json::json!(huge)),
            output: RawJson::from_value(&serde_json::json!("never shown")),
            error: Some(RawJson::from_value(&serde_json::json!(
                "Rate limited by provider"
            ))),
            ..AgentRun::default()
        };
        let mut summary = RunSummary::default();
        summary.note_run(&run, true);
        let out = summary.run.clone().expect("a run");
        assert_eq!(out.output, "Rate limited by provider");
        assert!(out.failed);
        assert_eq!(out.prompt.chars().count(), SUMMARY_TEXT + 1);
        assert!(out.prompt.ends_with('…'));
        let metadata: BTreeMap<String, String> = (0..40)
            .map(|i| (format!("k{i:02}"), huge.clone()))
            .collect();
        summary.note_metadata(&metadata);
        assert_eq!(summary.metadata.len(), SUMMARY_METADATA);
        assert!(
            summary
                .metadata
                .iter()
                .all(|(_, v)| v.chars().count() == SUMMARY_TEXT + 1)
        );
    }
}
