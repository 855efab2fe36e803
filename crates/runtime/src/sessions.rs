//! Sessions and the dispatch path: create (with the mock gates, field and per-tenant
//! caps), read, list by page, close, and every tool call through deny-list, policy and
//! mock store with its `tool.called` event. Counters change only under the session lock.

use super::log::Budget;
use super::log::{Logged, Retired};
use super::mocks::{Claim, MAX_MOCKS_BYTES, MockTable, MocksRejection};
use super::policy::Verdict;
use super::{ApiErrorWithStatus, Runtime, lock, persist};
use compact_str::CompactString;
use serde_json::{Map, Value, json};
use spyglass_protocol::envelope::codes;
use spyglass_protocol::events::{
    CallSource, Counter, Outcome, SessionClosed, SessionCreated, ToolCalled,
};
use spyglass_protocol::rest::{
    CallView, Connections, CreateSession, LastRun, ModelScript, RunTotals, ServerInfo,
    SessionCreatedBody, SessionDetail, SessionList, SessionSummary, ToolInfo, ToolResult,
};
use spyglass_protocol::{ApiError, Envelope, Event, RawJson, now_rfc3339};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::watch;

/// The built-in introspection tool: it bypasses policy and the mock store.
pub use super::mocks::LIST_TOOLS;

/// Random id with a readable prefix: `ses_…`, `call_…`, `apr_…`, 24 bytes in all (at
/// least 16 random characters), so it sits inline in every event and row that holds it
/// (`CompactString` keeps up to 24 bytes without a heap block); 19 or 20 random
/// alphanumerics are over 110 bits.
pub fn new_id(prefix: &str) -> String {
    new_short_id(prefix).into()
}

/// `new_id` as it goes into an event: made inline, no block at all.
pub fn new_short_id(prefix: &str) -> CompactString {
    let random = 24usize.saturating_sub(prefix.len()).max(16);
    let mut id = CompactString::with_capacity(prefix.len() + random);
    id.push_str(prefix);
    id.extend(std::iter::repeat_with(fastrand::alphanumeric).take(random));
    id
}

pub(crate) struct Session {
    pub id: String,
    /// Shared with every event the session emits (`Logged::tenant`): no copy per call.
    pub tenant: Arc<str>,
    pub user_id: String,
    pub servers: Vec<String>,
    pub created_at: String,
    pub last_activity: String,
    pub closed: bool,
    /// Flips to true with `closed`: a run waiting on a scripted delay wakes at once.
    pub closing: watch::Sender<bool>,
    pub mocks: MockTable,
    /// The newest `retained_calls` calls, as the `tool.called` events the log holds: the
    /// record shares the event instead of keeping its own copy of every field. Their
    /// bytes count against the budget (`calls_bytes`), at most a quarter of it per session.
    /// Each with its bytes beside it: the oldest is `retained_calls` calls old when it
    /// goes, out of the cache, and is not read again to be counted out.
    pub calls: VecDeque<(Arc<Logged>, usize)>,
    /// Calls out of `calls`, let go of in batches (`Retired`).
    pub retired: Retired,
    pub calls_bytes: usize,
    pub call_count: u32,
    pub envelope_count: u32,
    pub model: ModelScript,
    /// Model calls made so far: the Nth answers `model.sequence[N]` (seed 001).
    pub model_calls: u32,
    /// Seq of the last event emitted for this session under its lock: what its summary
    /// reflects (`SessionSummary::last_seq`).
    pub last_seq: u64,
    /// On a shared store: the counters count every event of this session up to this seq
    /// and none after it (the checkpoint a written counters document carries).
    pub counted_to: u64,
    /// On a shared store: this runtime's calls and replays of the session counted at
    /// dispatch whose events have not come back stamped yet. The counters are written
    /// only at none, so a document never counts an event past its checkpoint.
    pub unfollowed: u32,
    /// Calls moved its counters since its document was last written (`MovedCounters`).
    pub counters_due: bool,
    /// The last `send` run's model, usage and cost, and every run's added up.
    pub last_run: Option<LastRun>,
    pub runs: RunTotals,
}

impl Session {
    fn summary(&self) -> SessionSummary {
        SessionSummary {
            id: self.id.clone(),
            user_id: self.user_id.clone(),
            servers: self.servers.clone(),
            status: if self.closed { "closed" } else { "active" }.to_owned(),
            created_at: self.created_at.clone(),
            last_activity: self.last_activity.clone(),
            calls: self.call_count,
            envelopes: self.envelope_count,
            mocks: self.mocks.states(),
            last_seq: self.last_seq,
        }
    }

    fn record(&mut self, call: &Arc<Logged>, envelope: bool, retained: usize, budget: &Budget) {
        self.call_count = self.call_count.saturating_add(1);
        if envelope {
            self.envelope_count = self.envelope_count.saturating_add(1);
        }
        self.last_activity.clear();
        self.last_activity.push_str(&call.frame.ts);
        if self.calls.len() >= retained.max(1)
            && let Some((old, bytes)) = self.calls.pop_front()
        {
            self.calls_bytes -= bytes;
            budget.remove_session(bytes, false);
            self.retired.push_release(old);
        }
        let bytes = call.bytes();
        self.calls.push_back((call.clone(), bytes));
        self.calls_bytes += bytes;
        let mut freed = 0;
        while self.calls_bytes - freed > budget.max / 4 && self.calls.len() > 1 {
            if let Some((old, bytes)) = self.calls.pop_front() {
                freed += bytes;
                self.retired.push_release(old);
            }
        }
        self.calls_bytes -= freed;
        budget.add_session(bytes);
        budget.remove_session(freed, false);
    }

    fn tools(&self) -> Vec<ToolInfo> {
        let mut tools: Vec<ToolInfo> = self
            .mocks
            .slots
            .iter()
            .map(|(name, slot)| {
                let declared = slot.declared(name);
                let description = match declared.mode {
                    spyglass_protocol::events::MockMode::Static => {
                        "Mocked in this session (static fixture)".to_owned()
                    }
                    spyglass_protocol::events::MockMode::Stateful => format!(
                        "Mocked in this session (stateful, {} entries)",
                        declared.entries
                    ),
                    spyglass_protocol::events::MockMode::Rules => format!(
                        "Mocked in this session (by input, {} rules{})",
                        declared.entries,
                        if declared.fallback {
                            " and a fallback"
                        } else {
                            ""
                        }
                    ),
                };
                ToolInfo {
                    name: name.clone(),
                    description,
                    input_schema: json!({"type": "object"}),
                    server: server_of(name).to_owned(),
                }
            })
            .collect();
        tools.push(ToolInfo {
            name: LIST_TOOLS.to_owned(),
            description: "List the tools available in this session".to_owned(),
            input_schema: json!({"type": "object", "properties": {}}),
            server: "codespar".to_owned(),
        });
        tools
    }

    fn connections(&self) -> Connections {
        let mut servers: Vec<String> = Vec::new();
        let mocked: BTreeSet<&str> = self.mocks.slots.keys().map(|k| server_of(k)).collect();
        for server in self.servers.iter().map(String::as_str).chain(mocked) {
            if !servers.iter().any(|s| s == server) {
                servers.push(server.to_owned());
            }
        }
        Connections {
            servers: servers
                .into_iter()
                .map(|id| ServerInfo {
                    name: id.clone(),
                    id,
                    category: "mock".to_owned(),
                    country: String::new(),
                    auth_type: "none".to_owned(),
                    connected: true,
                })
                .collect(),
            tools: self.tools(),
        }
    }
}

/// What a call or a run on a closed session answers.
pub(crate) fn closed_error(id: &str) -> ApiErrorWithStatus {
    ApiErrorWithStatus::not_found(format!("session {id} is closed"))
}

/// The server part of a canonical `server/tool` name (the whole name when it has none).
pub fn server_of(tool: &str) -> &str {
    if super::mocks::is_builtin(tool) {
        return "codespar";
    }
    tool.split_once('/').map_or(tool, |(server, _)| server)
}

/// A session as the map holds it: the tenant and creation order are kept beside the lock
/// so listing and eviction need not take every session's lock.
struct Entry {
    session: Arc<Mutex<Session>>,
    tenant: String,
    key: u64,
    bytes: usize,
}

#[derive(Default, Clone, Copy)]
struct TenantCount {
    open: usize,
    closed: usize,
}

#[derive(Default)]
pub(crate) struct SessionMap {
    /// foldhash, not `SipHash`: every call looks its session up here, under the map's lock.
    by_id: foldhash::HashMap<String, Entry>,
    /// Creation order: key to id. Keys are never reused; a page's cursor is one.
    order: BTreeMap<u64, String>,
    /// Closed sessions by creation order: the first the byte budget evicts.
    closed: BTreeMap<u64, String>,
    tenants: HashMap<String, TenantCount>,
    next_key: u64,
}

impl SessionMap {
    fn remove(&mut self, id: &str) -> Option<Entry> {
        let entry = self.by_id.remove(id)?;
        self.order.remove(&entry.key);
        let was_closed = self.closed.remove(&entry.key).is_some();
        if let Some(count) = self.tenants.get_mut(&entry.tenant) {
            if was_closed {
                count.closed = count.closed.saturating_sub(1);
            } else {
                count.open = count.open.saturating_sub(1);
            }
            if count.open == 0 && count.closed == 0 {
                self.tenants.remove(&entry.tenant);
            }
        }
        Some(entry)
    }

    /// The oldest closed session of `tenant` (of any tenant when `None`).
    fn oldest_closed(&self, tenant: Option<&str>) -> Option<String> {
        self.closed
            .values()
            .find(|id| tenant.is_none_or(|t| self.by_id.get(*id).is_some_and(|e| e.tenant == t)))
            .cloned()
    }
}

/// Where closed data starts to give way: a sixteenth of the budget short of it, room for
/// the next call's event and its record before the log reaches the budget itself.
fn room_mark(max: usize) -> usize {
    max - max / 16
}

/// What create answers when a tenant holds `max_sessions_per_tenant` open sessions.
pub const TOO_MANY_SESSIONS: &str = "too_many_sessions";
/// What create answers for a string field longer than `max_string_bytes`.
pub const FIELD_TOO_LARGE: &str = "field_too_large";
/// What create answers for a model script past `max_script_calls`.
pub const SCRIPT_TOO_LARGE: &str = "model_script_too_large";
/// `GET /v1/sessions` answers this many rows when no `limit` is given, and at most
/// `MAX_SESSIONS_PAGE`.
pub const DEFAULT_SESSIONS_PAGE: usize = 100;
pub const MAX_SESSIONS_PAGE: usize = 1000;

/// A fixed cost per session beyond its variable fields: ids, stamps, counters, the lock.
const SESSION_OVERHEAD: usize = 1024;

/// What `execute` answered: the SDK's `ToolResult`, or an envelope (with its own status).
#[derive(Debug, Clone, PartialEq)]
pub enum ExecuteReply {
    Ok(ToolResult),
    Envelope(Envelope),
}

impl ExecuteReply {
    pub fn status(&self) -> u16 {
        match self {
            Self::Ok(_) => 200,
            Self::Envelope(envelope) => envelope.http_status(),
        }
    }

    /// The response body: the `ToolResult`, or the envelope JSON itself.
    pub fn body(&self) -> Value {
        match self {
            Self::Ok(result) => serde_json::to_value(result).unwrap_or(Value::Null),
            Self::Envelope(envelope) => serde_json::to_value(envelope).unwrap_or(Value::Null),
        }
    }
}

/// One call through the gates, as both `execute` and the model loop see it: the
/// `tool.called` event it emitted, as the log holds it. Its id, tool, input, outcome and
/// start are read from there, not copied out of it (an execute's answer is written from
/// the event's own strings).
#[derive(Debug, Clone)]
pub struct Dispatched {
    logged: Arc<Logged>,
}

/// What `Dispatched::call` gives for an event that is not a call; never reached, as
/// `dispatch` makes a `Dispatched` only of the `tool.called` it emitted.
static NO_CALL: std::sync::LazyLock<ToolCalled> = std::sync::LazyLock::new(ToolCalled::default);

/// A recorded call as `GET /v1/sessions/:id` lists it.
fn call_view(call: &Logged) -> Option<CallView> {
    match &call.frame.event {
        Event::ToolCalled(c) => Some(CallView {
            call_id: c.call_id.as_str().into(),
            tool: c.tool.as_str().into(),
            input: c.input.clone(),
            outcome: c.outcome.clone(),
            started_at: c.started_at.as_str().into(),
            duration: c.duration,
        }),
        _ => None,
    }
}

impl Dispatched {
    /// The call: id, tool, input, outcome, start, duration (ms) and counter.
    pub fn call(&self) -> &ToolCalled {
        match &self.logged.frame.event {
            Event::ToolCalled(call) => call,
            _ => &NO_CALL,
        }
    }

    /// The result, or the envelope whole, as one JSON value.
    pub fn output(&self) -> Value {
        match &self.call().outcome {
            Outcome::Result(value) => value.to_value(),
            Outcome::Envelope(envelope) => serde_json::to_value(envelope).unwrap_or(Value::Null),
        }
    }

    /// The envelope the call was answered with, if it was.
    pub fn envelope(&self) -> Option<&Envelope> {
        match &self.call().outcome {
            Outcome::Result(_) => None,
            Outcome::Envelope(envelope) => Some(envelope),
        }
    }
}

/// When a call started: its RFC 3339 stamp and a clock for its duration. The model loop
/// takes it before a scripted tool latency so the wait counts as the tool's time.
pub struct CallStart {
    pub at: String,
    pub clock: Instant,
}

impl CallStart {
    pub fn now() -> CallStart {
        CallStart {
            at: now_rfc3339(),
            clock: Instant::now(),
        }
    }
}

fn metadata_strings(metadata: &Map<String, Value>) -> BTreeMap<String, String> {
    metadata
        .iter()
        .map(|(key, value)| {
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (key.clone(), text)
        })
        .collect()
}

/// The model script: `model` on the body, else a JSON string in `metadata.model_script`.
fn model_script(req: &CreateSession) -> Result<ModelScript, ApiErrorWithStatus> {
    if let Some(model) = &req.model {
        return Ok(model.clone());
    }
    let Some(raw) = req.metadata.as_ref().and_then(|m| m.get("model_script")) else {
        return Ok(ModelScript::default());
    };
    let bad = |field: String, message: String| ApiErrorWithStatus {
        status: 400,
        error: ApiError::new(
            codes::INVALID_BODY,
            format!("metadata.model_script is not a model script: {message}"),
        )
        .with_field(field),
    };
    let parsed;
    let value = match raw {
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text)
                .map_err(|err| bad("/metadata/model_script".to_owned(), err.to_string()))?;
            &parsed
        }
        other => other,
    };
    // Names where a wrong type or an unknown key sits (`sequence[0].when[0].then`).
    spyglass_eval::script::parse(value).map_err(|problem| {
        let at = problem.field_dotted();
        let message = if at.is_empty() {
            problem.message.clone()
        } else {
            format!("{at}: {}", problem.message)
        };
        bad(
            format!("/metadata/model_script{}", problem.field_pointer()),
            message,
        )
    })
}

fn too_large(field: String, message: String) -> ApiErrorWithStatus {
    ApiErrorWithStatus {
        status: 400,
        error: ApiError::new(FIELD_TOO_LARGE, message).with_field(field),
    }
}

/// `user_id`, each server and each metadata key and string value within `max` bytes.
fn check_strings(req: &CreateSession, max: usize) -> Result<(), ApiErrorWithStatus> {
    let over = |len: usize| len > max;
    if over(req.user_id.len()) {
        return Err(too_large(
            "/user_id".to_owned(),
            format!("user_id is {} bytes; the cap is {max}", req.user_id.len()),
        ));
    }
    if let Some(i) = req.servers.iter().position(|s| over(s.len())) {
        return Err(too_large(
            format!("/servers/{i}"),
            format!(
                "servers[{i}] is {} bytes; the cap is {max}",
                req.servers[i].len()
            ),
        ));
    }
    for (key, value) in req.metadata.iter().flatten() {
        // The model script rides in metadata as a document, capped by its own rule.
        if key == "model_script" {
            continue;
        }
        let len = match value {
            Value::String(text) => text.len(),
            _ => 0,
        };
        if over(key.len()) || over(len) {
            return Err(too_large(
                format!("/metadata/{}", key.replace('~', "~0").replace('/', "~1")),
                format!("metadata entry `{key}` is over {max} bytes"),
            ));
        }
    }
    Ok(())
}

/// Steps, and tool calls over all steps, within `max`: a script's calls all answer in
/// one `send`, so this bounds what a 16-byte message can make the runtime do.
fn check_script(script: &ModelScript, field: &str, max: usize) -> Result<(), ApiErrorWithStatus> {
    let steps = script.sequence.len();
    // Every branch's calls count: any of them may run.
    let calls = spyglass_eval::script::tool_call_count(script);
    if steps > max || calls > max {
        return Err(ApiErrorWithStatus {
            status: 400,
            error: ApiError::new(
                SCRIPT_TOO_LARGE,
                format!(
                    "the model script has {steps} steps and {calls} tool calls; the cap is {max} of each"
                ),
            )
            .with_field(field),
        });
    }
    Ok(())
}

/// One page of `GET /v1/sessions`: `limit` rows after `cursor` (an opaque token the
/// previous page's `next_cursor` gave).
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

impl Runtime {
    pub(crate) fn session(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Arc<Mutex<Session>>, ApiErrorWithStatus> {
        let sessions = self
            .inner
            .sessions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match sessions.by_id.get(id) {
            // Another tenant's session is indistinguishable from a missing one.
            Some(entry) if entry.tenant == tenant => Ok(entry.session.clone()),
            _ => Err(ApiErrorWithStatus::not_found(format!("no session {id}"))),
        }
    }

    pub(crate) fn session_tenant(&self, id: &str) -> Option<String> {
        let sessions = self
            .inner
            .sessions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        sessions.by_id.get(id).map(|e| e.tenant.clone())
    }

    /// `POST /v1/sessions`: the three mock gates in order, then the session and its
    /// `session.created` event.
    // By value like the request an HTTP handler decodes; borrowing would change every
    // caller's signature for no saving.
    #[expect(clippy::needless_pass_by_value)]
    pub fn create_session(
        &self,
        tenant: &str,
        req: CreateSession,
    ) -> Result<SessionCreatedBody, ApiErrorWithStatus> {
        let mocks = match &req.mocks {
            None | Some(Value::Null) => MockTable::default(),
            Some(_) if !self.inner.config.test_mode => {
                return Err(ApiErrorWithStatus::new(
                    501,
                    codes::MOCKS_NOT_PERMITTED,
                    "mocks need test mode; start the runtime with --test-mode or CODESPAR_TEST_MODE_ENABLED=true",
                ));
            }
            Some(value) => MockTable::from_payload(value).map_err(|rejection| match rejection {
                MocksRejection::TooLarge { bytes } => ApiErrorWithStatus::new(
                    413,
                    codes::MOCKS_PAYLOAD_TOO_LARGE,
                    format!("serialized mocks are {bytes} bytes; the cap is {MAX_MOCKS_BYTES}"),
                ),
                MocksRejection::Invalid { field, message } => ApiErrorWithStatus {
                    status: 400,
                    error: ApiError::new(codes::MOCKS_INVALID, message).with_field(field),
                },
            })?,
        };
        let config = &self.inner.config;
        check_strings(&req, config.max_string_bytes)?;
        let mut model = model_script(&req)?;
        super::model::pick(&mut model, req.metadata.as_ref(), &config.models)?;
        let script_field = if req.model.is_some() {
            "/model/sequence"
        } else {
            "/metadata/model_script"
        };
        check_script(&model, script_field, config.max_script_calls)?;
        spyglass_eval::script::check(&model).map_err(|problem| {
            let base = if req.model.is_some() {
                "/model"
            } else {
                "/metadata/model_script"
            };
            ApiErrorWithStatus {
                status: 400,
                error: ApiError::new(
                    codes::INVALID_BODY,
                    format!("{}: {}", problem.field_dotted(), problem.message),
                )
                .with_field(format!("{base}{}", problem.field_pointer())),
            }
        })?;
        let metadata = req.metadata.clone().unwrap_or_default();
        // Create is not the hot path: measuring the documents it keeps once is fine.
        let bytes = SESSION_OVERHEAD
            + req.user_id.len()
            + req.servers.iter().map(|s| s.len() + 24).sum::<usize>()
            + req
                .mocks
                .as_ref()
                .map_or(0, |m| serde_json::to_vec(m).map_or(0, |v| v.len()))
            + serde_json::to_vec(&model).map_or(0, |v| v.len());
        let now = now_rfc3339();
        let session = Session {
            id: new_id("ses_"),
            tenant: Arc::from(tenant),
            user_id: req.user_id.clone(),
            servers: req.servers.clone(),
            created_at: now.clone(),
            last_activity: now,
            closed: false,
            closing: watch::Sender::new(false),
            mocks,
            calls: VecDeque::new(),
            retired: Retired::default(),
            calls_bytes: 0,
            call_count: 0,
            envelope_count: 0,
            model,
            model_calls: 0,
            last_seq: 0,
            counted_to: 0,
            unfollowed: 0,
            counters_due: false,
            last_run: None,
            runs: RunTotals::default(),
        };
        let body = SessionCreatedBody {
            id: session.id.clone(),
            user_id: session.user_id.clone(),
            servers: session.servers.clone(),
            status: "active".to_owned(),
            created_at: session.created_at.clone(),
        };
        let event = Event::SessionCreated(SessionCreated {
            user_id: session.user_id.as_str().into(),
            servers: session.servers.clone(),
            project: tenant.into(),
            mocks: session.mocks.declared_with_payloads(req.mocks.as_ref()),
            metadata: metadata_strings(&metadata),
        });
        let id = session.id.clone();
        let session = Arc::new(Mutex::new(session));
        let mut evicted = Vec::new();
        let stored_key;
        {
            let mut sessions = self
                .inner
                .sessions
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let cap = config.max_sessions_per_tenant.max(1);
            let count = sessions.tenants.get(tenant).copied().unwrap_or_default();
            if count.open >= cap {
                return Err(ApiErrorWithStatus::new(
                    429,
                    TOO_MANY_SESSIONS,
                    format!(
                        "this project has {} open sessions, the most it may hold; close one (DELETE /v1/sessions/:id) first",
                        count.open
                    ),
                ));
            }
            // The tenant's closed sessions make room first, then anyone's, oldest first.
            if count.open + count.closed >= cap
                && let Some(entry) = sessions
                    .oldest_closed(Some(tenant))
                    .and_then(|old| sessions.remove(&old))
            {
                self.inner
                    .budget
                    .remove_session(entry.bytes + lock(&entry.session).calls_bytes, true);
                evicted.push(entry);
            }
            let budget = &self.inner.budget;
            while budget.retained() + bytes > budget.max {
                let Some(old) = sessions.oldest_closed(None) else {
                    break;
                };
                if let Some(entry) = sessions.remove(&old) {
                    budget.remove_session(entry.bytes + lock(&entry.session).calls_bytes, true);
                    evicted.push(entry);
                }
            }
            let key = sessions.next_key;
            sessions.next_key += 1;
            stored_key = key;
            sessions.order.insert(key, id.clone());
            sessions.by_id.insert(
                id.clone(),
                Entry {
                    session: session.clone(),
                    tenant: tenant.to_owned(),
                    key,
                    bytes,
                },
            );
            sessions.tenants.entry(tenant.to_owned()).or_default().open += 1;
            budget.add_session(bytes);
        }
        // Freed outside the map's lock.
        if !evicted.is_empty() {
            tracing::info!(
                sessions = evicted.len(),
                "closed sessions evicted to stay within the per-tenant cap or the byte budget"
            );
        }
        self.unpersist_sessions(&evicted);
        drop(evicted);
        // Nobody knows the id before this returns, so nothing else can emit for it yet.
        let mut s = lock(&session);
        if self.has_store() {
            self.persist(
                persist::SESSION,
                tenant,
                &id,
                &SessionDoc {
                    key: stored_key,
                    user_id: s.user_id.clone(),
                    servers: s.servers.clone(),
                    created_at: s.created_at.clone(),
                    mocks: req.mocks.clone().filter(|m| !m.is_null()),
                    model: s.model.clone(),
                    metadata,
                },
            );
        }
        s.last_seq = self.emit_for(tenant, Some(id), event).frame.seq;
        self.persist_counters(&s);
        drop(s);
        Ok(body)
    }

    /// `GET /v1/sessions`: this tenant's sessions, oldest first, the first page.
    pub fn list_sessions(&self, tenant: &str) -> SessionList {
        // The default page has no cursor, which cannot be refused.
        self.list_sessions_page(tenant, &Page::default())
            .unwrap_or(SessionList {
                sessions: Vec::new(),
                next_cursor: None,
            })
    }

    /// One page of this tenant's sessions, oldest first; `next_cursor` names the next
    /// page while there is one. A cursor is a creation position, so sessions created or
    /// evicted between pages neither repeat nor shift the rest.
    pub fn list_sessions_page(
        &self,
        tenant: &str,
        page: &Page,
    ) -> Result<SessionList, ApiErrorWithStatus> {
        let limit = page
            .limit
            .unwrap_or(DEFAULT_SESSIONS_PAGE)
            .clamp(1, MAX_SESSIONS_PAGE);
        let after = match page.cursor.as_deref() {
            None | Some("") => None,
            Some(cursor) => Some(cursor.parse::<u64>().map_err(|_| {
                ApiErrorWithStatus::new(
                    400,
                    codes::INVALID_QUERY,
                    format!("cursor `{cursor}` is not one a page of /v1/sessions gave"),
                )
            })?),
        };
        let sessions = self
            .inner
            .sessions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let range = match after {
            Some(key) => sessions.order.range(key.saturating_add(1)..),
            None => sessions.order.range(..),
        };
        let mut rows = Vec::new();
        let mut next_cursor = None;
        for (key, id) in range {
            let Some(entry) = sessions.by_id.get(id) else {
                continue;
            };
            if entry.tenant != tenant {
                continue;
            }
            if rows.len() == limit {
                // One more row exists: the page ends at the last one returned.
                next_cursor = Some(key.saturating_sub(1).to_string());
                break;
            }
            rows.push(lock(&entry.session).summary());
        }
        Ok(SessionList {
            sessions: rows,
            next_cursor,
        })
    }

    pub fn session_detail(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<SessionDetail, ApiErrorWithStatus> {
        let session = self.session(tenant, id)?;
        let session = lock(&session);
        Ok(SessionDetail {
            summary: session.summary(),
            calls: session
                .calls
                .iter()
                .filter_map(|(call, _)| call_view(call))
                .collect(),
            last_run: session.last_run.clone(),
            runs: (session.runs.runs > 0).then(|| session.runs.clone()),
        })
    }

    pub fn connections(&self, tenant: &str, id: &str) -> Result<Connections, ApiErrorWithStatus> {
        let session = self.session(tenant, id)?;
        let connections = lock(&session).connections();
        Ok(connections)
    }

    /// `DELETE /v1/sessions/:id`: idempotent; `session.closed` is emitted once. An unknown
    /// id (or another tenant's, indistinguishable from it) is already as closed as it can
    /// be: 204 as well, with nothing emitted.
    pub fn close_session(&self, tenant: &str, id: &str) -> Result<(), ApiErrorWithStatus> {
        let Ok(session) = self.session(tenant, id) else {
            return Ok(());
        };
        let mut session = lock(&session);
        if session.closed {
            return Ok(());
        }
        session.closed = true;
        session.closing.send_replace(true);
        // A closed session never runs its script again: its text goes now.
        session.model = ModelScript::default();
        session.last_activity = now_rfc3339();
        // A closed session's calls can never be replayed: its pending approvals end now
        // (on a shared store, decided there first: `Runtime::close_any`).
        if self.shared_store().is_none() {
            self.expire_session_approvals(tenant, id);
        }
        // Emitted under the session lock so no call of this session can follow its close.
        session.last_seq = self
            .emit_for(
                tenant,
                Some(id.to_owned()),
                Event::SessionClosed(SessionClosed { reason: None }),
            )
            .frame
            .seq;
        self.persist_counters(&session);
        drop(session);
        // Taken after the session lock is released: lookups take the map's lock first.
        self.count_closed(tenant, id);
        self.make_room();
        Ok(())
    }

    /// The map's side of a close: the session joins the closed ones (the first the byte
    /// budget evicts) and its tenant counts one open fewer.
    fn count_closed(&self, tenant: &str, id: &str) {
        let mut sessions = self
            .inner
            .sessions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(key) = sessions.by_id.get(id).map(|e| e.key) {
            sessions.closed.insert(key, id.to_owned());
            if let Some(count) = sessions.tenants.get_mut(tenant) {
                count.open = count.open.saturating_sub(1);
                count.closed += 1;
            }
        }
    }

    /// Drops closed sessions whose last activity is older than `retain_closed_sessions`,
    /// oldest first, from memory and from the store. Runs on the server's sweep and when
    /// a runtime opens on a store; a sweep looks at every closed session, so it is done at
    /// most once a second however often it is asked.
    pub(crate) fn evict_aged_sessions(&self) {
        let now = std::time::Instant::now();
        {
            let mut last = lock(&self.inner.aged_sweep);
            if last.is_some_and(|t| now.duration_since(t) < std::time::Duration::from_secs(1)) {
                return;
            }
            *last = Some(now);
        }
        let age = self.inner.config.retain_closed_sessions;
        let Ok(age) = chrono::Duration::from_std(age) else {
            return;
        };
        let Some(cutoff) = chrono::Utc::now().checked_sub_signed(age) else {
            return;
        };
        let aged: Vec<String> = {
            let sessions = self
                .inner
                .sessions
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            sessions
                .closed
                .values()
                .filter(|id| {
                    sessions.by_id.get(*id).is_some_and(|e| {
                        chrono::DateTime::parse_from_rfc3339(&lock(&e.session).last_activity)
                            .is_ok_and(|at| at < cutoff)
                    })
                })
                .cloned()
                .collect()
        };
        if aged.is_empty() {
            return;
        }
        let mut evicted = Vec::new();
        {
            let mut sessions = self
                .inner
                .sessions
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for id in &aged {
                if let Some(entry) = sessions.remove(id) {
                    self.inner
                        .budget
                        .remove_session(entry.bytes + lock(&entry.session).calls_bytes, true);
                    evicted.push(entry);
                }
            }
        }
        tracing::info!(
            sessions = evicted.len(),
            "closed sessions past their retention age dropped"
        );
        self.unpersist_sessions(&evicted);
    }

    /// Past `room_mark` of the byte budget, closed data gives way, oldest first: closed
    /// sessions, then finished eval runs and suite documents. Run when a session closes
    /// and when a call grows a session, so the log, which drops events only once the
    /// whole budget is spent, seldom has to while any closed data is left. Takes the map's
    /// lock and then a session's, never with a session's lock held (the order of every
    /// other path), and only the budget's counters of the log.
    pub(crate) fn make_room(&self) {
        let budget = &self.inner.budget;
        let mark = room_mark(budget.max);
        if budget.retained() <= mark {
            return;
        }
        let any_closed = !self
            .inner
            .sessions
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .closed
            .is_empty();
        let mut evicted = Vec::new();
        if any_closed {
            let mut sessions = self
                .inner
                .sessions
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            while budget.retained() > mark {
                let Some(old) = sessions.oldest_closed(None) else {
                    break;
                };
                if let Some(entry) = sessions.remove(&old) {
                    budget.remove_session(entry.bytes + lock(&entry.session).calls_bytes, true);
                    evicted.push(entry);
                }
            }
        }
        // Freed outside the map's lock.
        if !evicted.is_empty() {
            tracing::info!(
                sessions = evicted.len(),
                "closed sessions evicted to stay within the byte budget"
            );
        }
        self.unpersist_sessions(&evicted);
        drop(evicted);
        while budget.retained() > mark && self.evict_oldest_approval() {}
        while budget.retained() > mark && self.inner.evals.evict_oldest() {}
        self.unpersist_evals();
    }

    /// `POST /v1/sessions/:id/execute`.
    pub async fn execute(
        &self,
        tenant: &str,
        session_id: &str,
        tool: &str,
        input: RawJson,
    ) -> Result<ExecuteReply, ApiErrorWithStatus> {
        let dispatched = self.execute_call(tenant, session_id, tool, input).await?;
        let call = dispatched.call();
        Ok(match &call.outcome {
            Outcome::Result(data) => ExecuteReply::Ok(ToolResult {
                success: true,
                data: data.clone(),
                error: None,
                duration: call.duration.round() as u64,
                server: server_of(&call.tool).to_owned(),
                tool: call.tool.as_str().into(),
                tool_call_id: call.call_id.as_str().into(),
                called_at: call.started_at.as_str().into(),
            }),
            Outcome::Envelope(envelope) => ExecuteReply::Envelope((**envelope).clone()),
        })
    }

    /// `execute`, answered with the call's event (the HTTP handler writes its answer from
    /// the event's strings instead of copies of them).
    pub(crate) async fn execute_call(
        &self,
        tenant: &str,
        session_id: &str,
        tool: &str,
        input: RawJson,
    ) -> Result<Dispatched, ApiErrorWithStatus> {
        let start = CallStart::now();
        // A shared store's futures are boxed: they are kilobytes, and held inline every
        // execute's future (2.5 KB) was copied about as hyper took it, on every call.
        let shared = self.shared_store().is_some();
        if shared {
            Box::pin(self.adopt_if_missing(tenant, session_id)).await?;
        }
        let session = self.open_session(tenant, session_id)?;
        let claimed = if shared {
            Box::pin(self.claim_for(&session, tool, &input)).await?
        } else {
            Claim::Local
        };
        let call = self.dispatch(
            &session,
            tool,
            input,
            CallSource::Execute,
            None,
            start,
            claimed,
        )?;
        // The answer leaves only once its counter and its event are in the store.
        self.committed().await?;
        Ok(call)
    }

    pub(crate) fn open_session(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Arc<Mutex<Session>>, ApiErrorWithStatus> {
        let session = self.session(tenant, id)?;
        if lock(&session).closed {
            return Err(closed_error(id));
        }
        Ok(session)
    }

    /// One call through deny-list, policy and mock store, recorded and emitted as
    /// `tool.called`. The counter moves only on a returned entry, under the session lock.
    /// Refused (nothing queued, counted or emitted): a closed session, 404, and input a
    /// policy rule cannot read, 400 `input_unreadable`. `claim`: the stateful entry a
    /// shared store gave this call (`Runtime::claim_for`).
    #[expect(clippy::too_many_arguments)]
    pub(crate) fn dispatch(
        &self,
        session: &Arc<Mutex<Session>>,
        tool: &str,
        input: RawJson,
        source: CallSource,
        iteration: Option<u32>,
        start: CallStart,
        claim: Claim,
    ) -> Result<Dispatched, ApiErrorWithStatus> {
        let CallStart {
            at: started_at,
            clock,
        } = start;
        let verdict = if tool == LIST_TOOLS {
            Verdict::Allow
        } else {
            self.inner
                .config
                .policy
                .evaluate_raw(tool, &input)
                .map_err(|err| ApiErrorWithStatus {
                    status: 400,
                    error: ApiError::new(codes::INPUT_UNREADABLE, err.to_string())
                        .with_field("/input"),
                })?
        };
        let mut s = lock(session);
        // Checked under the lock `close_session` takes: nothing of this session is queued,
        // counted or emitted after its `session.closed`.
        if s.closed {
            return Err(closed_error(&s.id));
        }
        let call_id = new_short_id("call_");
        let mut approval = None;
        let gated: Option<Envelope> = match verdict {
            Verdict::Allow => None,
            Verdict::Deny { rule_id, message } => Some(Envelope::PolicyDenied { rule_id, message }),
            Verdict::Approval { rule_id, message } => {
                let row = self
                    .queue_approval(&s.tenant, &s.id, &call_id, tool, &input, &rule_id, &message)?;
                let envelope = Envelope::ApprovalRequired {
                    approval_id: row.approval_id.clone(),
                    expires_at: row.expires_at.clone(),
                    message,
                };
                approval = Some(row);
                Some(envelope)
            }
        };
        let outcome = match gated {
            Some(envelope) => Err(envelope),
            None if tool == LIST_TOOLS => Ok(RawJson::from_value(&json!({ "tools": s.tools() }))),
            // Not in test mode a session has no mocks: nothing to name about test mode.
            None if !self.inner.config.test_mode => Err(super::mocks::not_mocked_live(tool)),
            None => s.mocks.consume(tool, &input, false, claim),
        };
        let counter = s.mocks.note_call(tool);
        let duration_ms = clock.elapsed().as_secs_f64() * 1000.0;
        let envelope = outcome.is_err();
        // Emitted under the session lock so the counters in this session's `tool.called`
        // events rise in seq order. Its input, outcome, id and start move into the event
        // (the caller reads them there) and it shares the session's tenant name.
        let logged = self.emit_shared(
            s.tenant.clone(),
            Some(s.id.clone()),
            Event::ToolCalled(ToolCalled {
                call_id,
                tool: tool.into(),
                input,
                outcome: match outcome {
                    Ok(value) => Outcome::Result(value),
                    Err(envelope) => Outcome::Envelope(Box::new(envelope)),
                },
                started_at: started_at.into(),
                duration: duration_ms,
                counter,
                source,
                iteration,
            }),
        );
        s.last_seq = logged.frame.seq;
        s.record(
            &logged,
            envelope,
            self.inner.config.retained_calls,
            &self.inner.budget,
        );
        if self.shared_store().is_some() {
            s.unfollowed += 1;
        }
        let counters_due = self.counters_moved(session, &mut s, logged.ord);
        let announce = approval.map(|row| (s.tenant.clone(), s.id.clone(), row));
        drop(s);
        if counters_due {
            self.write_moved_counters();
        }
        // The record grew the session's bytes: closed data makes room before the log must.
        self.make_room();
        if let Some((tenant, session_id, row)) = announce {
            self.announce_approval(&tenant, &session_id, row);
        }
        Ok(Dispatched { logged })
    }
}

/// A session as its store keeps it from create on (`persist::SESSION`); what its calls
/// change is in `CountersDoc`.
#[derive(serde::Serialize, serde::Deserialize)]
struct SessionDoc {
    /// Its creation position: the list order and page cursors go on across a restart.
    key: u64,
    user_id: String,
    servers: Vec<String>,
    created_at: String,
    #[serde(default)]
    mocks: Option<Value>,
    #[serde(default)]
    model: ModelScript,
    #[serde(default)]
    metadata: Map<String, Value>,
}

/// What a session's calls move (`persist::COUNTERS`), as read back; written as
/// `CountersOut`, which borrows the same fields from the session.
#[derive(serde::Deserialize, Default)]
pub(crate) struct CountersDoc {
    closed: bool,
    calls: u32,
    envelopes: u32,
    model_calls: u32,
    last_activity: String,
    last_seq: u64,
    /// Per mocked tool: entries served, dispatches naming it.
    mocks: BTreeMap<String, (u32, u32)>,
    /// Per rules mock: calls each rule answered, calls its fallback answered.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    rule_hits: BTreeMap<String, (Vec<u32>, u32)>,
    /// The last `send` run and the runs added up (`GET /v1/sessions/:id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_run: Option<LastRun>,
    #[serde(default, skip_serializing_if = "is_no_runs")]
    runs: RunTotals,
}

fn is_no_runs(runs: &RunTotals) -> bool {
    runs.runs == 0
}

/// `CountersDoc` as it is written, borrowing from the session: written at every call, so
/// it copies no tool name, stamp or run to be encoded.
#[derive(serde::Serialize)]
struct CountersOut<'a> {
    closed: bool,
    calls: u32,
    envelopes: u32,
    model_calls: u32,
    last_activity: &'a str,
    last_seq: u64,
    mocks: MockCounts<'a>,
    #[serde(skip_serializing_if = "RuleHits::is_empty")]
    rule_hits: RuleHits<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_run: Option<&'a LastRun>,
    #[serde(skip_serializing_if = "is_no_runs")]
    runs: &'a RunTotals,
}

/// `CountersDoc::mocks` read off the mock table.
struct MockCounts<'a>(&'a MockTable);

impl serde::Serialize for MockCounts<'_> {
    fn serialize<S: serde::Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        out.collect_map(
            self.0
                .slots
                .iter()
                .map(|(tool, slot)| (tool, (slot.consumed, slot.calls))),
        )
    }
}

/// `CountersDoc::rule_hits` read off the mock table: its rules mocks that answered.
struct RuleHits<'a>(&'a MockTable);

impl RuleHits<'_> {
    fn hits(&self) -> impl Iterator<Item = (&String, (&Vec<u32>, u32))> {
        self.0
            .slots
            .iter()
            .filter(|(_, slot)| !slot.rule_hits.is_empty() || slot.fallback_hits > 0)
            .map(|(tool, slot)| (tool, (&slot.rule_hits, slot.fallback_hits)))
    }

    fn is_empty(&self) -> bool {
        self.hits().next().is_none()
    }
}

impl serde::Serialize for RuleHits<'_> {
    fn serialize<S: serde::Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        out.collect_map(self.hits())
    }
}

impl Runtime {
    /// Writes a session's counters to the store (nothing without one). Called under the
    /// session's lock, after the event that moved them, so the store never holds a
    /// counter ahead of or behind its events.
    pub(crate) fn persist_counters(&self, s: &Session) {
        // On a shared store the seq of what just happened is not known yet: the follower
        // writes the counters when the event comes back stamped (`follow_session_event`),
        // so their `last_seq` checkpoint is exact and a restart rolls forward only what
        // they do not count.
        if self.shared_store().is_some() {
            return;
        }
        self.write_counters(s);
    }

    pub(super) fn write_counters(&self, s: &Session) {
        if !self.has_store() {
            return;
        }
        let doc = CountersOut {
            closed: s.closed,
            calls: s.call_count,
            envelopes: s.envelope_count,
            model_calls: s.model_calls,
            last_activity: &s.last_activity,
            // A shared store's checkpoint is what the follower has counted; a local
            // store writes at dispatch, where the event's seq is known.
            last_seq: if self.shared_store().is_some() {
                s.counted_to
            } else {
                s.last_seq
            },
            mocks: MockCounts(&s.mocks),
            rule_hits: RuleHits(&s.mocks),
            last_run: s.last_run.as_ref(),
            runs: &s.runs,
        };
        self.persist(persist::COUNTERS, &s.tenant, &s.id, &doc);
    }

    fn unpersist_sessions(&self, evicted: &[Entry]) {
        if !self.has_store() {
            return;
        }
        for entry in evicted {
            let id = {
                let mut s = lock(&entry.session);
                // Gone from the store: not written again with the moved counters.
                s.counters_due = false;
                s.id.clone()
            };
            self.unpersist(persist::SESSION, &entry.tenant, &id);
            self.unpersist(persist::COUNTERS, &entry.tenant, &id);
        }
    }

    /// Puts stored sessions back in creation order, their counters applied to their
    /// mock tables (the next stateful entry served is the next one) and their calls
    /// taken from the restored `tool.called` events. Their bytes count in the budget.
    ///
    /// A call's event and its counters are two writes: a commit may hold the event and
    /// not yet the counters (never the reverse, they are sent in that order). So the
    /// counters are a checkpoint at their `last_seq`, and the session's newer events roll
    /// them forward: a call whose event is stored is counted, and its entry never served
    /// again.
    /// `adopting` (sessions another runtime on a shared store created): no history to
    /// read, and a session already here, or a creation position taken here, is not
    /// overwritten.
    pub(crate) fn restore_sessions(
        &self,
        records: &[crate::store::StoredRecord],
        counters: &mut HashMap<(String, String), crate::store::StoredRecord>,
        adopting: bool,
    ) {
        let mut docs: Vec<(String, String, SessionDoc)> = records
            .iter()
            .filter_map(|r| {
                persist::decode::<SessionDoc>(r).map(|d| (r.tenant.clone(), r.key.clone(), d))
            })
            .collect();
        docs.sort_by_key(|(_, _, d)| d.key);
        let mut restored: Vec<(u64, usize, Session)> = Vec::new();
        let mut by_id: HashMap<String, usize> = HashMap::new();
        for (tenant, id, doc) in docs {
            let counts: CountersDoc = counters
                .remove(&(tenant.clone(), id.clone()))
                .and_then(|r| persist::decode(&r))
                .unwrap_or_default();
            let mut mocks = match &doc.mocks {
                Some(payload) => {
                    let Ok(table) = MockTable::from_payload(payload) else {
                        tracing::warn!(session = %id, "stored mocks no longer pass the gates; session skipped");
                        continue;
                    };
                    table
                }
                None => MockTable::default(),
            };
            for (tool, (consumed, calls)) in &counts.mocks {
                if let Some(slot) = mocks.slots.get_mut(tool) {
                    slot.consumed = *consumed;
                    slot.calls = *calls;
                }
            }
            for (tool, (hits, fallback)) in &counts.rule_hits {
                if let Some(slot) = mocks.slots.get_mut(tool) {
                    for (have, stored) in slot.rule_hits.iter_mut().zip(hits) {
                        *have = *stored;
                    }
                    slot.fallback_hits = *fallback;
                }
            }
            let bytes = SESSION_OVERHEAD
                + doc.user_id.len()
                + doc.servers.iter().map(|s| s.len() + 24).sum::<usize>()
                + doc
                    .mocks
                    .as_ref()
                    .map_or(0, |m| serde_json::to_vec(m).map_or(0, |v| v.len()))
                + serde_json::to_vec(&doc.model).map_or(0, |v| v.len());
            by_id.insert(id.clone(), restored.len());
            restored.push((
                doc.key,
                bytes,
                Session {
                    id,
                    tenant: Arc::from(tenant),
                    user_id: doc.user_id,
                    servers: doc.servers,
                    created_at: doc.created_at.clone(),
                    last_activity: if counts.last_activity.is_empty() {
                        doc.created_at
                    } else {
                        counts.last_activity.clone()
                    },
                    closed: counts.closed,
                    closing: watch::Sender::new(counts.closed),
                    mocks,
                    calls: VecDeque::new(),
                    retired: Retired::default(),
                    calls_bytes: 0,
                    call_count: counts.calls,
                    envelope_count: counts.envelopes,
                    model: doc.model,
                    model_calls: counts.model_calls,
                    last_seq: counts.last_seq,
                    counted_to: counts.last_seq,
                    unfollowed: 0,
                    counters_due: false,
                    last_run: counts.last_run.clone(),
                    runs: counts.runs.clone(),
                },
            ));
        }
        // The calls a session lists are its `tool.called` events the log still holds;
        // those past its counters' checkpoint are counted too.
        let retained = self.inner.config.retained_calls;
        let history = if adopting {
            Vec::new()
        } else {
            self.inner.log.all_since(0, usize::MAX)
        };
        for logged in history {
            let Some(&at) = logged
                .frame
                .session_id
                .as_deref()
                .and_then(|id| by_id.get(id))
            else {
                continue;
            };
            let s = &mut restored[at].2;
            let newer = logged.frame.seq > s.last_seq;
            // The events a live session's `last_seq` follows (emitted under its lock).
            let moves = matches!(
                logged.frame.event,
                Event::ToolCalled(_)
                    | Event::ApprovalReplayed(_)
                    | Event::SessionClosed(_)
                    | Event::SessionCreated(_)
            );
            match &logged.frame.event {
                Event::ToolCalled(call) => {
                    let envelope = matches!(call.outcome, Outcome::Envelope(_));
                    let (calls, envelopes, activity) =
                        (s.call_count, s.envelope_count, s.last_activity.clone());
                    s.record(&logged, envelope, retained, &self.inner.budget);
                    if newer {
                        roll_forward(&mut s.mocks, &call.tool, call.counter.as_ref());
                    } else {
                        // Counted in the checkpoint, which the log may not hold whole.
                        s.call_count = calls;
                        s.envelope_count = envelopes;
                        s.last_activity = activity;
                    }
                }
                Event::ApprovalReplayed(replay) if newer => {
                    roll_forward(&mut s.mocks, &replay.tool, replay.counter.as_ref());
                    s.last_activity.clear();
                    s.last_activity.push_str(&logged.frame.ts);
                }
                Event::SessionClosed(_) if newer => {
                    s.closed = true;
                    s.closing.send_replace(true);
                }
                _ => {}
            }
            if newer && moves {
                s.last_seq = logged.frame.seq;
                s.counted_to = logged.frame.seq;
            }
        }
        let mut sessions = self
            .inner
            .sessions
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (key, bytes, mut session) in restored {
            if adopting && sessions.by_id.contains_key(&session.id) {
                continue;
            }
            // Each runtime numbers the sessions it creates: another's may be taken here.
            let key = if adopting && sessions.order.contains_key(&key) {
                sessions.next_key
            } else {
                key
            };
            if session.closed {
                // A closed session never runs its script again.
                session.model = ModelScript::default();
            }
            let (id, tenant, closed) = (
                session.id.clone(),
                session.tenant.to_string(),
                session.closed,
            );
            sessions.next_key = sessions.next_key.max(key + 1);
            sessions.order.insert(key, id.clone());
            let count = sessions.tenants.entry(tenant.clone()).or_default();
            if closed {
                count.closed += 1;
            } else {
                count.open += 1;
            }
            if closed {
                sessions.closed.insert(key, id.clone());
            }
            sessions.by_id.insert(
                id,
                Entry {
                    session: Arc::new(Mutex::new(session)),
                    tenant,
                    key,
                    bytes,
                },
            );
            self.inner.budget.add_session(bytes);
        }
    }
}

impl Runtime {
    /// An event of a session taken into the log from a shared store: the session's
    /// `last_seq` follows it, and when another runtime made it (`remote`) what it says
    /// (a call, a replay, the close) is applied to this runtime's copy of the session.
    pub(crate) fn follow_session_event(&self, logged: &Arc<Logged>, remote: bool) {
        let Some(id) = logged.frame.session_id.as_deref() else {
            return;
        };
        let Ok(session) = self.session(&logged.tenant, id) else {
            return;
        };
        let mut s = lock(&session);
        let seq = logged.frame.seq;
        s.last_seq = s.last_seq.max(seq);
        if !remote {
            // This runtime's own, counted at dispatch. Once none of its calls is still
            // on its way back, its copy counts everything up to this seq and nothing
            // after: a checkpoint a restart (or another runtime adopting the session)
            // goes on from. Written at every such event, calls too: a call past the
            // checkpoint is counted at a restart only while its event is still stored,
            // and a busier session can push it out of the retained window first (one
            // write in 32 calls left up to 31 uncounted). The writer keeps one document
            // a session per commit, whatever the calls in it.
            if matches!(
                logged.frame.event,
                Event::ToolCalled(_) | Event::ApprovalReplayed(_)
            ) {
                s.unfollowed = s.unfollowed.saturating_sub(1);
            }
            s.counted_to = s.counted_to.max(seq);
            if s.unfollowed == 0 {
                self.write_counters(&s);
            }
            return;
        }
        if seq <= s.counted_to {
            // Counted already: the document this session was adopted from counts it.
            return;
        }
        s.counted_to = seq;
        match &logged.frame.event {
            Event::ToolCalled(call) => {
                let envelope = matches!(call.outcome, Outcome::Envelope(_));
                s.record(
                    logged,
                    envelope,
                    self.inner.config.retained_calls,
                    &self.inner.budget,
                );
                roll_forward(&mut s.mocks, &call.tool, call.counter.as_ref());
            }
            Event::ApprovalReplayed(replay) => {
                roll_forward(&mut s.mocks, &replay.tool, replay.counter.as_ref());
                s.last_activity.clear();
                s.last_activity.push_str(&logged.frame.ts);
            }
            Event::SessionClosed(_) if !s.closed => {
                s.closed = true;
                s.closing.send_replace(true);
                s.model = ModelScript::default();
                s.last_activity.clear();
                s.last_activity.push_str(&logged.frame.ts);
                drop(s);
                self.count_closed(&logged.tenant, id);
            }
            _ => {}
        }
    }

    /// The entry of a stateful mock a store shared by several runtimes gives this call,
    /// taken before the call is dispatched: `None` without such a store, or when the call
    /// reaches no stateful mock (another tool, a policy that holds or denies it, a closed
    /// session). A store that cannot be reached is 503 `store_unavailable`.
    pub(crate) async fn claim_for(
        &self,
        session: &Arc<Mutex<Session>>,
        tool: &str,
        input: &RawJson,
    ) -> Result<Claim, ApiErrorWithStatus> {
        let Some(store) = self.shared_store() else {
            return Ok(Claim::Local);
        };
        if tool == LIST_TOOLS || !self.inner.config.test_mode {
            return Ok(Claim::Local);
        }
        if !matches!(
            self.inner.config.policy.evaluate_raw(tool, input),
            Ok(Verdict::Allow)
        ) {
            return Ok(Claim::Local);
        }
        let (tenant, id, total) = {
            let s = lock(session);
            if s.closed {
                return Ok(Claim::Local);
            }
            match s.mocks.slots.get(tool).map(|slot| &slot.fixture) {
                Some(super::mocks::Fixture::Stateful(entries)) if !entries.is_empty() => {
                    (s.tenant.clone(), s.id.clone(), entries.len())
                }
                _ => return Ok(Claim::Local),
            }
        };
        let total = u32::try_from(total).unwrap_or(u32::MAX);
        store
            .claim(&tenant, &id, tool, total)
            .await
            .map(|entry| entry.map_or(Claim::Exhausted, Claim::Entry))
            .map_err(|err| super::shared::unavailable(&err))
    }
}

/// A dispatch or replay of `tool` the counters' checkpoint missed: one more call, and
/// the entries served as its event's counter says.
fn roll_forward(mocks: &mut MockTable, tool: &str, counter: Option<&Counter>) {
    if let Some(slot) = mocks.slots.get_mut(tool) {
        slot.calls = slot.calls.saturating_add(1);
        if let Some(counter) = counter {
            slot.consumed = slot.consumed.max(counter.consumed);
            match (counter.rule, counter.fallback) {
                (Some(i), _) => slot.note_answer(super::mocks::Answer::Rule(i)),
                (None, true) => slot.note_answer(super::mocks::Answer::Fallback),
                (None, false) => {}
            }
        }
    }
}
#[cfg(test)]
mod future_size {
    /// hyper moves each request's future into place whole: an execute's future holding
    /// a shared store's futures inline was 2.5 KB copied per call. They are boxed.
    #[test]
    fn an_execute_future_stays_small() {
        let rt = crate::Runtime::new(crate::RuntimeConfig::default());
        let call = rt.execute_call("t", "s", "x", spyglass_protocol::RawJson::null());
        assert!(
            std::mem::size_of_val(&call) <= 512,
            "{} bytes",
            std::mem::size_of_val(&call)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::new_id;

    #[test]
    fn ids_fit_inline_and_differ() {
        for prefix in ["ses_", "call_", "apr_", "run_"] {
            let (a, b) = (new_id(prefix), new_id(prefix));
            assert!(a.starts_with(prefix), "{a}");
            assert_eq!(a.len(), 24, "{a}");
            assert!(!compact_str::CompactString::from(a.as_str()).is_heap_allocated());
            assert_ne!(a, b);
        }
    }
}
