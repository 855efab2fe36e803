//! Sessions: `SessionMap` owns the map (by id, creation order, the closed ones, per-tenant
//! counts: lookup, insert, close, evict, page) and `Session` one session's mocks, calls and
//! counters. Runtime's create (with the mock gates, field and per-tenant caps), close and
//! `make_room` coordinate them with the log and the approvals; dispatch.rs is every tool
//! call. Counters change only under the session lock.

mod dispatch;
mod stored;

use stored::SessionDoc;

use super::log::Budget;
use super::log::{Logged, Retired};
use super::mocks::{MAX_MOCKS_BYTES, MockTable, MocksRejection};
use super::{ApiErrorWithStatus, Runtime, lock, persist, read, write};
use compact_str::CompactString;
use serde_json::{Map, Value, json};
use spyglass_protocol::envelope::codes;
use spyglass_protocol::events::{Outcome, SessionClosed, SessionCreated, ToolCalled};
use spyglass_protocol::rest::{
    CallView, Connections, CreateSession, LastRun, ModelScript, RunTotals, ServerInfo,
    SessionCreatedBody, SessionDetail, SessionList, SessionSummary, ToolInfo, ToolResult,
};
use spyglass_protocol::{ApiError, Envelope, Event, now_rfc3339};
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
    /// Model calls made so far: the Nth answers `model.sequence[N]` (as `@gemstack/ai-sdk` has it).
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
    /// An eval case's decisions for the calls a policy rule holds (`CaseDecisions`); none
    /// for any other session, whose held calls wait for a human.
    pub decisions: Option<Arc<CaseDecisions>>,
}

/// What an eval case decides, as a human would, for the calls a policy rule holds during
/// its run: the verdict per rule id, and who decided (`eval:SUITE/CASE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CaseDecisions {
    pub by: String,
    pub rules: BTreeMap<String, super::approvals::Verdict>,
}

impl Session {
    /// What `GET /v1/sessions/:id` answers: the summary, the calls kept, the last run and
    /// the run totals.
    fn detail(&self) -> SessionDetail {
        SessionDetail {
            summary: self.summary(),
            calls: self
                .calls
                .iter()
                .filter_map(|(call, _)| call_view(call))
                .collect(),
            last_run: self.last_run.clone(),
            runs: (self.runs.runs > 0).then(|| self.runs.clone()),
        }
    }

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

    /// Takes back a call `record` counted, its activity and seq back to `before`.
    fn unrecord(
        &mut self,
        call: &Arc<Logged>,
        envelope: bool,
        before: (String, u64),
        budget: &Budget,
    ) {
        self.call_count = self.call_count.saturating_sub(1);
        if envelope {
            self.envelope_count = self.envelope_count.saturating_sub(1);
        }
        (self.last_activity, self.last_seq) = before;
        if let Some(at) = self.calls.iter().rposition(|(c, _)| Arc::ptr_eq(c, call))
            && let Some((_, bytes)) = self.calls.remove(at)
        {
            self.calls_bytes -= bytes;
            budget.remove_session(bytes, false);
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
    /// The session `id` of `tenant`. Another tenant's session is indistinguishable from a
    /// missing one.
    fn get(&self, tenant: &str, id: &str) -> Result<Arc<Mutex<Session>>, ApiErrorWithStatus> {
        match self.by_id.get(id) {
            Some(entry) if entry.tenant == tenant => Ok(entry.session.clone()),
            _ => Err(ApiErrorWithStatus::not_found(format!("no session {id}"))),
        }
    }

    /// The open sessions of `user` in `tenants`, as (tenant, id).
    pub(crate) fn open_of_user(&self, tenants: &[String], user: &str) -> Vec<(String, String)> {
        if tenants.is_empty() {
            return Vec::new();
        }
        self.by_id
            .iter()
            .filter(|(_, entry)| tenants.contains(&entry.tenant))
            .filter(|(_, entry)| {
                let s = lock(&entry.session);
                !s.closed && s.user_id == user
            })
            .map(|(id, entry)| (entry.tenant.clone(), id.clone()))
            .collect()
    }

    /// The session `id` of `tenant` while it is open; a closed one is refused
    /// (`closed_error`).
    pub(crate) fn get_open(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Arc<Mutex<Session>>, ApiErrorWithStatus> {
        let session = self.get(tenant, id)?;
        if lock(&session).closed {
            return Err(closed_error(id));
        }
        Ok(session)
    }

    /// The tenant a session belongs to.
    pub(crate) fn tenant_of(&self, id: &str) -> Option<String> {
        self.by_id.get(id).map(|e| e.tenant.clone())
    }

    /// Adds a session at the next creation position (its key, returned), open, its
    /// `bytes` not yet counted in the budget.
    fn insert(
        &mut self,
        session: Arc<Mutex<Session>>,
        id: String,
        tenant: &str,
        bytes: usize,
    ) -> u64 {
        let key = self.next_key;
        self.next_key += 1;
        self.order.insert(key, id.clone());
        self.by_id.insert(
            id,
            Entry {
                session,
                tenant: tenant.to_owned(),
                key,
                bytes,
            },
        );
        self.tenants.entry(tenant.to_owned()).or_default().open += 1;
        key
    }

    /// The map's side of a close: the session joins the closed ones (the first the byte
    /// budget evicts) and its tenant counts one open fewer.
    pub(crate) fn count_closed(&mut self, tenant: &str, id: &str) {
        if let Some(key) = self.by_id.get(id).map(|e| e.key) {
            self.closed.insert(key, id.to_owned());
            if let Some(count) = self.tenants.get_mut(tenant) {
                count.open = count.open.saturating_sub(1);
                count.closed += 1;
            }
        }
    }

    /// Removes a session, its bytes (and its calls') leaving the budget as evicted.
    fn evict(&mut self, id: &str, budget: &Budget) -> Option<Entry> {
        let entry = self.remove(id)?;
        budget.remove_session(entry.bytes + lock(&entry.session).calls_bytes, true);
        Some(entry)
    }

    /// Evicts closed sessions, oldest first, while `over` holds and any is left.
    fn evict_closed_while(&mut self, budget: &Budget, over: impl Fn() -> bool) -> Vec<Entry> {
        let mut evicted = Vec::new();
        while over() {
            let Some(old) = self.oldest_closed(None) else {
                break;
            };
            if let Some(entry) = self.evict(&old, budget) {
                evicted.push(entry);
            }
        }
        evicted
    }

    /// The closed sessions whose last activity is before `cutoff`.
    fn closed_before(&self, cutoff: chrono::DateTime<chrono::Utc>) -> Vec<String> {
        self.closed
            .values()
            .filter(|id| {
                self.by_id.get(*id).is_some_and(|e| {
                    chrono::DateTime::parse_from_rfc3339(&lock(&e.session).last_activity)
                        .is_ok_and(|at| at < cutoff)
                })
            })
            .cloned()
            .collect()
    }

    /// One page of this tenant's sessions after creation position `after`, at most
    /// `limit`, and the cursor of the next page while there is one.
    fn page(&self, tenant: &str, after: Option<u64>, limit: usize) -> SessionList {
        let range = match after {
            Some(key) => self.order.range(key.saturating_add(1)..),
            None => self.order.range(..),
        };
        let mut rows = Vec::new();
        let mut next_cursor = None;
        for (key, id) in range {
            let Some(entry) = self.by_id.get(id) else {
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
        SessionList {
            sessions: rows,
            next_cursor,
        }
    }

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

/// A page size a client asked for, checked before anything is sized by it: `default`
/// when none is given, 400 `invalid_query` outside 1..=`max`.
pub fn page_limit(
    limit: Option<usize>,
    default: usize,
    max: usize,
) -> Result<usize, ApiErrorWithStatus> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(ApiErrorWithStatus::new(
            400,
            codes::INVALID_QUERY,
            format!("limit {n} is out of range: a page holds 1 to {max} rows"),
        )),
    }
}

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
    /// With a journal: the session's last activity and last seq before the call, put
    /// back when its store refuses it (`Runtime::take_back_call`).
    before: Option<Box<(String, u64)>>,
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
        read(&self.inner.sessions).get(tenant, id)
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
            Some(value) => MockTable::from_payload(value)
                .and_then(|table| table.check_servers(&req.servers).map(|()| table))
                .map_err(|rejection| match rejection {
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
        super::llm::pick(&mut model, req.metadata.as_ref(), &config.models)?;
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
            decisions: None,
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
            let mut sessions = write(&self.inner.sessions);
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
            let budget = &self.inner.budget;
            if count.open + count.closed >= cap
                && let Some(entry) = sessions
                    .oldest_closed(Some(tenant))
                    .and_then(|old| sessions.evict(&old, budget))
            {
                evicted.push(entry);
            }
            evicted.extend(
                sessions.evict_closed_while(budget, || budget.retained() + bytes > budget.max),
            );
            stored_key = sessions.insert(session.clone(), id.clone(), tenant, bytes);
            budget.add_session(bytes);
        }
        // Freed outside the map's lock.
        if !evicted.is_empty() {
            tracing::info!(
                sessions = evicted.len(),
                "closed sessions evicted to stay within the per-tenant cap or the byte budget"
            );
        }
        stored::unpersist_sessions(&self.inner.log, &evicted);
        drop(evicted);
        // Nobody knows the id before this returns, so nothing else can emit for it yet.
        let mut s = lock(&session);
        if self.inner.log.has_store() {
            self.inner.log.persist(
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
        s.persist_counters(&self.inner.log, self.inner.shared.is_shared());
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
        let limit = page_limit(page.limit, DEFAULT_SESSIONS_PAGE, MAX_SESSIONS_PAGE)?;
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
        Ok(read(&self.inner.sessions).page(tenant, after, limit))
    }

    pub fn session_detail(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<SessionDetail, ApiErrorWithStatus> {
        let session = self.session(tenant, id)?;
        let detail = lock(&session).detail();
        Ok(detail)
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
        if !self.inner.shared.is_shared() {
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
        session.persist_counters(&self.inner.log, self.inner.shared.is_shared());
        drop(session);
        // Taken after the session lock is released: lookups take the map's lock first.
        write(&self.inner.sessions).count_closed(tenant, id);
        self.make_room();
        Ok(())
    }

    /// Drops closed sessions whose last activity is older than `retain_closed_sessions`,
    /// oldest first, from memory and from the store. Runs on the server's sweep and when
    /// a runtime opens on a store; a sweep looks at every closed session, so it is done at
    /// most once a second however often it is asked.
    pub(crate) fn evict_aged_sessions(&self) {
        let now = self.inner.config.clock.instant();
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
        let Some(cutoff) = self.inner.config.clock.now().checked_sub_signed(age) else {
            return;
        };
        let aged = read(&self.inner.sessions).closed_before(cutoff);
        if aged.is_empty() {
            return;
        }
        let mut evicted = Vec::new();
        {
            let mut sessions = write(&self.inner.sessions);
            for id in &aged {
                if let Some(entry) = sessions.evict(id, &self.inner.budget) {
                    evicted.push(entry);
                }
            }
        }
        tracing::info!(
            sessions = evicted.len(),
            "closed sessions past their retention age dropped"
        );
        stored::unpersist_sessions(&self.inner.log, &evicted);
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
        let any_closed = !read(&self.inner.sessions).closed.is_empty();
        let mut evicted = Vec::new();
        if any_closed {
            evicted =
                write(&self.inner.sessions).evict_closed_while(budget, || budget.retained() > mark);
        }
        // Freed outside the map's lock.
        if !evicted.is_empty() {
            tracing::info!(
                sessions = evicted.len(),
                "closed sessions evicted to stay within the byte budget"
            );
        }
        stored::unpersist_sessions(&self.inner.log, &evicted);
        drop(evicted);
        while budget.retained() > mark && lock(&self.inner.approvals).evict_oldest(&self.inner.log)
        {
        }
        while budget.retained() > mark && self.inner.evals.evict_oldest() {}
        self.inner.evals.unpersist(&self.inner.log);
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
