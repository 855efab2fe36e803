//! OpenTelemetry in: OTLP trace export requests decoded (decode.rs), each span read through
//! the `GenAI` conventions (map.rs), and assembled here into the observer events of sessions.
//!
//! A conversation id (else the trace id) is a session; a model call is a step; a tool span
//! is a call of the step that is its ancestor, else of the session's latest step. Spans
//! arrive children first, across requests: each is turned into its event as it arrives
//! (a session shows live from its first span) and nothing already emitted is reordered;
//! order and nesting come from arrival and parent ids, never from the span clocks.

pub mod decode;
pub mod map;

pub use decode::{DecodeError, Encoding, Rejected, SpanIn};

use foldhash::{HashMap, HashMapExt, HashSet};
use map::{Failure, ReadSpans, Role};
use spyglass_protocol::events::{
    AgentRun, AgentStepCompleted, CallSource, Outcome, SessionCreated, Step, StepToolCall, Tokens,
    ToolCalled,
};
use spyglass_protocol::{Envelope, Event, RawJson};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

pub use spyglass_protocol::OTEL_SOURCE as SOURCE;
/// The event kind a span no convention matched is shown as (Events tab).
pub const SPAN_KIND: &str = "otel.span";
/// Sessions the assembler remembers per runtime (their step counts and token sums); the
/// oldest is forgotten first, and a span of it later starts its count again.
const MAX_SESSIONS: usize = 10_000;
/// Tool call ids remembered per session to keep call ids unique within it.
const MAX_CALL_IDS: usize = 4_096;
/// Ancestors walked to find a tool span's model call.
const MAX_ANCESTORS: usize = 64;

/// One event for the runtime to emit on a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Emit {
    pub session_id: String,
    pub event: Event,
}

/// What one request turned into.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngestStats {
    pub spans: usize,
    pub sessions: usize,
    pub runs: usize,
    pub steps: usize,
    pub calls: usize,
    /// Spans no convention matched, shown as `otel.span` events.
    pub unmatched: usize,
}

/// What the assembler holds and has let go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AssemblerStats {
    /// Traces remembered (their spans' parents, their run), pending or ended.
    pub pending_traces: usize,
    pub pending_bytes: usize,
    /// Traces forgotten, oldest first, to stay within the byte bound.
    pub evicted_traces: u64,
    pub unmatched_spans: u64,
}

/// A span remembered while its trace is: enough to find a tool's step. Plain data, so a
/// trace's notes are one block, freed without visiting each.
#[derive(Debug, Clone, Copy)]
struct Note {
    id: u64,
    /// The parent span's id, 0 for a root (OTLP ids are never 0).
    parent: u64,
    /// A model span's step, numbered from 1 when the span is first seen; 0 for others.
    step: u32,
    /// Whether its own event went out already.
    emitted: bool,
}

impl Note {
    fn step(&self) -> Option<u32> {
        (self.step > 0).then_some(self.step)
    }
}

/// A trace's notes in the order first seen. An agent run's trace holds a few spans, found
/// by a scan of one small block; past `INDEXED_FROM` a map finds them instead.
#[derive(Debug, Default)]
struct Notes {
    list: Vec<Note>,
    index: Option<HashMap<u64, usize>>,
}

impl Notes {
    const INDEXED_FROM: usize = 16;

    fn position(&self, id: u64) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(&id).copied(),
            None => self.list.iter().position(|n| n.id == id),
        }
    }

    fn get(&self, id: u64) -> Option<&Note> {
        self.position(id).map(|at| &self.list[at])
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Note> {
        self.position(id).map(|at| &mut self.list[at])
    }

    /// Adds a note whose id is not yet noted.
    fn push(&mut self, note: Note) {
        self.list.push(note);
        if let Some(index) = &mut self.index {
            index.insert(note.id, self.list.len() - 1);
        } else if self.list.len() > Self::INDEXED_FROM {
            self.index = Some(
                self.list
                    .iter()
                    .enumerate()
                    .map(|(at, n)| (n.id, at))
                    .collect(),
            );
        }
    }
}

/// What the byte bound counts per remembered span (the note and its id as hex text, as
/// the bound was first set).
const NOTE_BYTES: usize = 96;
const NOTE_ID_BYTES: usize = 32;

#[derive(Debug)]
struct Trace {
    session: Arc<str>,
    spans: Notes,
    /// Tool calls under a model span whose step has not gone out yet, by that span's id:
    /// the step claims them.
    claimed: Vec<(u64, StepToolCall)>,
    bytes: usize,
    /// Token usage of this trace's model calls: a run's total (the Vercel AI SDK's root
    /// span reports its last step's usage only).
    tokens: Tokens,
    /// The run its root ended (`agent.failed` when true), kept so a model call that comes
    /// after the root corrects the run's tokens.
    run: Option<Box<(bool, AgentRun)>>,
}

#[derive(Debug, Default)]
struct Conversation {
    steps: u32,
    last_step: Option<u32>,
    tokens: Tokens,
    first_ns: Option<u64>,
    agent: String,
    model: String,
    provider: String,
    prompt: Option<String>,
    call_ids: HashSet<String>,
}

/// One tenant's traces (by trace id) and conversations (by session id): a span finds its
/// own by the tenant's name and its ids, without building a key.
#[derive(Debug)]
struct Tenant {
    name: Arc<str>,
    traces: HashMap<u128, Trace>,
    sessions: HashMap<Arc<str>, Conversation>,
}

impl Tenant {
    fn is_empty(&self) -> bool {
        self.traces.is_empty() && self.sessions.is_empty()
    }
}

/// The pending state between requests, bounded to `max_bytes`.
#[derive(Debug)]
pub struct Assembler {
    max_bytes: usize,
    bytes: usize,
    tenants: HashMap<Arc<str>, Tenant>,
    /// Traces, oldest first: the first forgotten past the byte bound.
    order: VecDeque<(Arc<str>, u128)>,
    /// Conversations, oldest first: the first forgotten past `MAX_SESSIONS`.
    session_order: VecDeque<(Arc<str>, Arc<str>)>,
    evicted_traces: u64,
    unmatched: u64,
    stamps: Stamps,
}

impl Assembler {
    /// `max_bytes` bounds the pending traces (the runtime gives it a share of its byte
    /// budget); past it the oldest pending trace is forgotten.
    pub fn new(max_bytes: usize) -> Assembler {
        Assembler {
            max_bytes: max_bytes.max(NOTE_BYTES * 16),
            bytes: 0,
            tenants: HashMap::new(),
            order: VecDeque::new(),
            session_order: VecDeque::new(),
            evicted_traces: 0,
            unmatched: 0,
            stamps: Stamps::default(),
        }
    }

    pub fn stats(&self) -> AssemblerStats {
        AssemblerStats {
            pending_traces: self.tenants.values().map(|t| t.traces.len()).sum(),
            pending_bytes: self.bytes,
            evicted_traces: self.evicted_traces,
            unmatched_spans: self.unmatched,
        }
    }

    /// The events `spans` (one request's, in the order sent) make for `tenant`. The spans'
    /// strings move into the events.
    pub fn ingest(
        &mut self,
        tenant: &str,
        spans: impl Into<ReadSpans>,
    ) -> (Vec<Emit>, IngestStats) {
        let (_, emits, stats) = self.ingest_named(tenant, spans);
        (emits, stats)
    }

    /// `ingest`, and the tenant's name as the assembler shares it (its events keep it).
    pub fn ingest_named(
        &mut self,
        tenant: &str,
        spans: impl Into<ReadSpans>,
    ) -> (Arc<str>, Vec<Emit>, IngestStats) {
        // Each span's attributes are read once, before the tenant's state is touched: its
        // role and the conversation it names (`ReadSpans`).
        let read = spans.into();
        // The tenant's state is taken out of the map for the request, so a span finds its
        // trace and conversation without looking its tenant up again.
        let mut state = self.tenants.remove(tenant).unwrap_or_else(|| Tenant {
            name: Arc::from(tenant),
            traces: HashMap::new(),
            sessions: HashMap::new(),
        });
        let (emits, stats) = self.ingest_into(&mut state, read);
        let name = state.name.clone();
        if !state.is_empty() {
            self.tenants.insert(state.name.clone(), state);
        }
        // A trace stays after its root (within the byte bound, oldest forgotten first):
        // an exporter that flushes its batches at once can deliver a child after its root.
        self.enforce_bytes();
        (name, emits, stats)
    }

    fn ingest_into(&mut self, state: &mut Tenant, read: ReadSpans) -> (Vec<Emit>, IngestStats) {
        let ReadSpans { spans, reads } = read;
        let mut out = Vec::with_capacity(spans.len() + 1);
        let mut stats = IngestStats {
            spans: spans.len(),
            ..IngestStats::default()
        };
        let spans = &spans[..];
        // The conversation each trace of the request names: its first span naming one.
        let mut conversations: HashMap<u128, &str> = HashMap::new();
        for (span, read) in spans.iter().zip(&reads) {
            if let Some(id) = &read.conversation {
                conversations.entry(span.trace_id).or_insert(id);
            }
        }
        // Exporters send a trace's spans together: each run of spans of one trace finds
        // its trace (and conversation) once.
        let runs = trace_runs(spans);
        // First every span is noted, so a tool finds the model call above it even when
        // that call comes later in the same request.
        for (from, to) in runs.iter().copied() {
            let first = &spans[from];
            if !state.traces.contains_key(&first.trace_id) {
                let session: Arc<str> = conversations
                    .get(&first.trace_id)
                    .map_or_else(|| first.trace_hex().into(), |id| Arc::from(*id));
                if !state.sessions.contains_key(&session) {
                    out.push(Emit {
                        session_id: session.to_string(),
                        event: Event::SessionCreated(created(first)),
                    });
                    stats.sessions += 1;
                    state
                        .sessions
                        .insert(session.clone(), Conversation::default());
                    self.session_order
                        .push_back((state.name.clone(), session.clone()));
                    self.trim_sessions(state);
                }
                state.traces.insert(
                    first.trace_id,
                    Trace {
                        session,
                        spans: Notes {
                            list: Vec::with_capacity(to - from),
                            index: None,
                        },
                        claimed: Vec::new(),
                        bytes: 0,
                        tokens: Tokens::default(),
                        run: None,
                    },
                );
                self.order.push_back((state.name.clone(), first.trace_id));
            }
            let Some(trace) = state.traces.get_mut(&first.trace_id) else {
                continue;
            };
            let models = reads[from..to]
                .iter()
                .any(|r| matches!(r.role, Role::Model(_)));
            let mut conversation = if models {
                state.sessions.get_mut(&trace.session)
            } else {
                None
            };
            for (span, read) in spans[from..to].iter().zip(&reads[from..to]) {
                if trace.spans.get(span.span_id).is_some() {
                    continue;
                }
                let step = if matches!(read.role, Role::Model(_)) {
                    conversation.as_mut().map(|c| {
                        c.steps += 1;
                        c.steps
                    })
                } else {
                    None
                };
                let bytes = NOTE_BYTES + NOTE_ID_BYTES;
                trace.spans.push(Note {
                    id: span.span_id,
                    parent: span.parent_id.unwrap_or(0),
                    step: step.unwrap_or(0),
                    emitted: false,
                });
                trace.bytes += bytes;
                self.bytes += bytes;
            }
        }
        let mut roles: Vec<Role> = reads.into_iter().map(|r| r.role).collect();
        for (from, to) in runs {
            let group = &spans[from..to];
            let roles = &mut roles[from..to];
            let Tenant {
                name,
                traces,
                sessions,
            } = &mut *state;
            let Some(trace) = traces.get_mut(&group[0].trace_id) else {
                continue;
            };
            if !sessions.contains_key(&trace.session) {
                // Forgotten past `MAX_SESSIONS` while its trace was not: counted afresh
                // (and forgotten again in its turn).
                sessions.insert(trace.session.clone(), Conversation::default());
                self.session_order
                    .push_back((name.clone(), trace.session.clone()));
            }
            let Some(conversation) = sessions.get_mut(&trace.session) else {
                continue;
            };
            for (span, role) in group.iter().zip(roles.iter_mut()) {
                let emitted = trace.spans.get(span.span_id).is_some_and(|n| n.emitted);
                if emitted {
                    continue;
                }
                let event = match std::mem::replace(role, Role::Other) {
                    Role::Model(model) => {
                        stats.steps += 1;
                        let step = step_event(span, model, trace, conversation, &mut self.stamps);
                        if let Some(ended) = trace.run.as_mut() {
                            // The run already ended (an exporter flushed its batches at
                            // once): this step is placed after it, and the run's total says
                            // it too.
                            out.push(Emit {
                                session_id: trace.session.to_string(),
                                event: step,
                            });
                            ended.1.tokens = trace.tokens;
                            let (failed, run) = (ended.0, ended.1.clone());
                            Some(if failed {
                                Event::AgentFailed(run)
                            } else {
                                Event::AgentCompleted(run)
                            })
                        } else {
                            Some(step)
                        }
                    }
                    Role::Tool(tool) => {
                        stats.calls += 1;
                        tool_event(span, tool, trace, conversation, &mut self.stamps)
                    }
                    Role::Agent(agent) => {
                        stats.runs += 1;
                        let event = run_event(span, agent, trace.tokens, conversation);
                        if span.parent_id.is_none()
                            && let Event::AgentCompleted(run) | Event::AgentFailed(run) = &event
                        {
                            let failed = matches!(event, Event::AgentFailed(_));
                            let bytes = run.input.get().len() + run.output.get().len() + 256;
                            trace.bytes += bytes;
                            self.bytes += bytes;
                            trace.run = Some(Box::new((failed, run.clone())));
                        }
                        Some(event)
                    }
                    Role::Other => {
                        stats.unmatched += 1;
                        self.unmatched += 1;
                        Some(unmatched_event(span, &mut self.stamps))
                    }
                };
                if let Some(note) = trace.spans.get_mut(span.span_id) {
                    note.emitted = true;
                }
                if let Some(event) = event {
                    out.push(Emit {
                        session_id: trace.session.to_string(),
                        event,
                    });
                }
            }
        }
        self.trim_sessions(state);
        (out, stats)
    }

    /// Forgets the oldest conversations past `MAX_SESSIONS`; `current` is the tenant whose
    /// request is being read (out of the map meanwhile).
    fn trim_sessions(&mut self, current: &mut Tenant) {
        while self.session_order.len() > MAX_SESSIONS {
            let Some((tenant, session)) = self.session_order.pop_front() else {
                break;
            };
            if Arc::ptr_eq(&tenant, &current.name) || *tenant == *current.name {
                current.sessions.remove(&session);
            } else if let Some(state) = self.tenants.get_mut(&tenant) {
                state.sessions.remove(&session);
                if state.is_empty() {
                    self.tenants.remove(&tenant);
                }
            }
        }
    }

    fn enforce_bytes(&mut self) {
        while self.bytes > self.max_bytes {
            let Some((tenant, id)) = self.order.pop_front() else {
                break;
            };
            let Some(state) = self.tenants.get_mut(&tenant) else {
                continue;
            };
            if let Some(trace) = state.traces.remove(&id) {
                self.bytes = self.bytes.saturating_sub(trace.bytes);
                self.evicted_traces += 1;
            }
            if state.is_empty() {
                self.tenants.remove(&tenant);
            }
        }
    }
}

/// The runs of consecutive spans of one trace, as index ranges (`from..to`).
fn trace_runs(spans: &[SpanIn]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut from = 0;
    for at in 1..=spans.len() {
        if at == spans.len() || spans[at].trace_id != spans[from].trace_id {
            runs.push((from, at));
            from = at;
        }
    }
    runs
}

/// Span times as RFC 3339 text (UTC, microseconds). A trace's spans share their seconds,
/// so the text up to the fraction is kept from the last call and only the six digits of
/// the fraction are written; chrono formats a second once.
#[derive(Debug, Default)]
struct Stamps {
    secs: Option<i64>,
    /// `YYYY-MM-DDTHH:MM:SS.` of `secs`.
    prefix: String,
}

impl Stamps {
    fn format(&mut self, ns: u64) -> String {
        let ns = i64::try_from(ns).unwrap_or(i64::MAX);
        let (secs, micros) = (ns / 1_000_000_000, (ns % 1_000_000_000) / 1_000);
        if self.secs != Some(secs) {
            let Some(at) = chrono::DateTime::from_timestamp(secs, 0) else {
                return rfc3339(ns);
            };
            let whole = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            self.prefix.clear();
            self.prefix.push_str(whole.trim_end_matches('Z'));
            self.prefix.push('.');
            self.secs = Some(secs);
        }
        let mut out = String::with_capacity(self.prefix.len() + 7);
        out.push_str(&self.prefix);
        let mut digits = [b'0'; 6];
        let mut rest = micros;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        out.extend(digits.iter().map(|d| char::from(*d)));
        out.push('Z');
        out
    }
}

fn rfc3339(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn created(span: &SpanIn) -> SessionCreated {
    let mut metadata = BTreeMap::new();
    metadata.insert("source".to_owned(), SOURCE.to_owned());
    if !span.service.is_empty() {
        metadata.insert("service".to_owned(), (*span.service).to_owned());
    }
    metadata.insert("trace".to_owned(), span.trace_hex());
    SessionCreated {
        user_id: span.service.as_ref().into(),
        metadata,
        ..SessionCreated::default()
    }
}

fn step_event(
    span: &SpanIn,
    model: map::ModelSpan,
    trace: &mut Trace,
    conversation: &mut Conversation,
    stamps: &mut Stamps,
) -> Event {
    let iteration = trace
        .spans
        .get(span.span_id)
        .and_then(Note::step)
        .unwrap_or(conversation.steps.max(1));
    let tool_calls = take_claimed(&mut trace.claimed, span.span_id);
    let tokens = Tokens {
        prompt: model.input_tokens,
        completion: model.output_tokens,
        total: model.input_tokens + model.output_tokens,
    };
    for sum in [&mut conversation.tokens, &mut trace.tokens] {
        sum.prompt += tokens.prompt;
        sum.completion += tokens.completion;
        sum.total += tokens.total;
    }
    conversation.last_step = Some(iteration);
    let first = *conversation.first_ns.get_or_insert(span.start_ns);
    if !model.model.is_empty() {
        conversation.model.clone_from(&model.model);
    }
    if !model.provider.is_empty() {
        conversation.provider.clone_from(&model.provider);
    }
    if conversation.prompt.is_none() {
        conversation.prompt = model.prompt;
    }
    let finish_reason = match (&model.error, model.finish_reason.is_empty()) {
        (Some(_), _) => "error".to_owned(),
        (None, false) => model.finish_reason,
        (None, true) => String::new(),
    };
    Event::AgentStepCompleted(AgentStepCompleted {
        agent_name: if conversation.agent.is_empty() {
            span.service.as_ref().into()
        } else {
            conversation.agent.as_str().into()
        },
        model: model.model.as_str().into(),
        provider: model.provider.into(),
        iteration,
        step: Step {
            iteration,
            model: model.model.into(),
            tokens,
            finish_reason: finish_reason.into(),
            tool_calls,
            cassette: false,
            failed_attempts: Box::default(),
        },
        tokens: conversation.tokens,
        duration: span.end_ns.saturating_sub(first) as f64 / 1e6,
        streaming: memchr::memmem::find(span.name.as_bytes(), b"doStream").is_some(),
        conversation_id: None,
        started_at: Some(stamps.format(span.start_ns).into_boxed_str()),
    })
}

/// The calls claimed by model span `id`, in the order they came, taken out of `claimed`.
fn take_claimed(claimed: &mut Vec<(u64, StepToolCall)>, id: u64) -> Vec<StepToolCall> {
    if !claimed.iter().any(|(model, _)| *model == id) {
        return Vec::new();
    }
    let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(claimed)
        .into_iter()
        .partition(|(model, _)| *model == id);
    *claimed = rest;
    mine.into_iter().map(|(_, call)| call).collect()
}

/// The model call above `span`, if one is among its noted ancestors.
fn ancestor_step(span: &SpanIn, trace: &Trace) -> Option<u64> {
    let mut parent = span.parent_id;
    for _ in 0..MAX_ANCESTORS {
        let id = parent.filter(|id| *id != 0)?;
        let note = trace.spans.get(id)?;
        if note.step > 0 {
            return Some(id);
        }
        parent = Some(note.parent);
    }
    None
}

fn error_json(failure: &Failure) -> RawJson {
    RawJson::from_value(&serde_json::json!({
        "type": failure.kind,
        "message": failure.message,
    }))
}

fn tool_event(
    span: &SpanIn,
    tool: map::ToolSpan,
    trace: &mut Trace,
    conversation: &mut Conversation,
    stamps: &mut Stamps,
) -> Option<Event> {
    let mut call_id = tool.call_id.unwrap_or_else(|| span.span_hex());
    if conversation.call_ids.contains(&call_id) {
        call_id = format!("{call_id}#{}", span.span_hex());
    }
    if conversation.call_ids.len() < MAX_CALL_IDS {
        conversation.call_ids.insert(call_id.clone());
    }
    let outcome = match &tool.error {
        Some(failure) => Outcome::Envelope(Box::new(Envelope::Other {
            code: failure.kind.clone(),
            message: failure.message.clone(),
        })),
        None => Outcome::Result(tool.result.clone()),
    };
    let duration = span.duration_ms();
    let iteration = match ancestor_step(span, trace) {
        Some(model_id) => {
            let note = *trace.spans.get(model_id)?;
            if !note.emitted {
                // The step is still to come: it lists this call as its own.
                trace.claimed.push((
                    model_id,
                    StepToolCall {
                        id: call_id.as_str().into(),
                        name: tool.name.as_str().into(),
                        args: tool.args.clone(),
                        result: match &tool.error {
                            Some(failure) => error_json(failure),
                            None => tool.result.clone(),
                        },
                        duration,
                        needs_approval: false,
                    },
                ));
            }
            note.step()
        }
        None => conversation.last_step,
    };
    Some(Event::ToolCalled(ToolCalled {
        call_id: call_id.into(),
        tool: tool.name.into(),
        input: tool.args,
        outcome,
        started_at: stamps.format(span.start_ns).into(),
        duration,
        counter: None,
        source: CallSource::Send,
        iteration,
    }))
}

/// A run's tokens: what its model calls reported, summed, when any came; else what the
/// agent span says.
fn run_event(
    span: &SpanIn,
    agent: map::AgentSpan,
    steps: Tokens,
    conversation: &mut Conversation,
) -> Event {
    conversation.agent.clone_from(&agent.name);
    let tokens = match (agent.input_tokens, agent.output_tokens) {
        _ if steps.total > 0 => steps,
        (None, None) => Tokens::default(),
        (input, output) => {
            let (prompt, completion) = (input.unwrap_or(0), output.unwrap_or(0));
            Tokens {
                prompt,
                completion,
                total: prompt + completion,
            }
        }
    };
    let run = AgentRun {
        agent_name: agent.name,
        model: if agent.model.is_empty() {
            conversation.model.clone()
        } else {
            agent.model
        },
        provider: if agent.provider.is_empty() {
            conversation.provider.clone()
        } else {
            agent.provider
        },
        input: agent
            .input
            .or_else(|| conversation.prompt.as_ref().map(RawJson::from_value))
            .unwrap_or_default(),
        output: agent.output.unwrap_or_default(),
        steps: Box::default(),
        tokens,
        duration: span.duration_ms(),
        finish_reason: agent.finish_reason,
        streaming: false,
        conversation_id: None,
        failover_attempts: 0,
        error: agent.error.as_ref().map(error_json),
        cost: None,
        cost_missing: None,
    };
    if run.error.is_some() {
        Event::AgentFailed(run)
    } else {
        Event::AgentCompleted(run)
    }
}

/// The span as it came. Keys are named so that, in the stream's sorted key order, the
/// duration, name and service lead the Events tab's one-line view and the attributes
/// follow.
fn unmatched_event(span: &SpanIn, stamps: &mut Stamps) -> Event {
    let mut raw = serde_json::json!({
        "kind": SPAN_KIND,
        "name": span.name,
        "service": &*span.service,
        "durationMs": span.duration_ms(),
        "traceId": span.trace_hex(),
        "spanId": span.span_hex(),
        "startedAt": stamps.format(span.start_ns),
        "spanAttributes": span.attributes.to_map(),
    });
    if let Some(parent) = span.parent_id {
        raw["parentSpanId"] = decode::span_hex(parent).into();
    }
    if let Some(error) = &span.error {
        raw["error"] = error.clone().into();
    }
    if span.dropped_attributes > 0 {
        raw["spanDroppedAttributes"] = span.dropped_attributes.into();
    }
    Event::Unknown {
        kind: SPAN_KIND.to_owned(),
        raw: RawJson::from_value(&raw),
    }
}

#[cfg(test)]
mod tests;
