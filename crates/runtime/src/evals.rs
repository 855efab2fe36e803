//! The eval runner as a runtime service: a run request becomes planned case attempts, each
//! in a fresh test-mode session driven through the same model loop as `send`, judged and
//! emitted as `agent.eval.completed`; plus `EvalState`, which owns the per-tenant run table,
//! the pass-rate history, the suite documents and their store documents.

use super::approvals::Verdict;
use super::log::{Budget, EventLog};
use super::sessions::{CaseDecisions, new_id};
use super::{ApiErrorWithStatus, Runtime, lock, persist};
use serde_json::Value;
use spyglass_eval::assert::{CaseRun, evaluate, skipped};
use spyglass_eval::history::{EvalHistory, HistorySettings};
use spyglass_eval::report::Counts;
use spyglass_eval::suite::{
    CaseDecision, PlannedCase, Suite, plan, planned_attempts, suite_from_request,
};
use spyglass_protocol::envelope::codes;
use spyglass_protocol::events::{
    AgentEvalCompleted, EvalRunCompleted, EvalRunStarted, EvalScope, EvalStatus, Event,
};
use spyglass_protocol::rest::{
    CreateSession, EvalCall, EvalCaseRecord, EvalRunDetail, EvalRunRequest, EvalSummary,
};
use spyglass_protocol::{ApiError, Frame};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The `user_id` of the sessions the runner creates.
pub const EVAL_USER_ID: &str = "spyglass-eval";

/// A run the runtime remembers: its detail so far and a flag that flips when it ends.
struct RunEntry {
    tenant: String,
    detail: EvalRunDetail,
    started: Instant,
    done: watch::Sender<bool>,
    /// When it started (`EvalState::stamp`), for evicting the oldest first.
    stamp: u64,
    /// Its detail's JSON text length, as the byte budget counts it.
    bytes: usize,
}

/// A suite document kept for reruns, with what the budget counts for it (its JSON text
/// length) and when it was kept (`EvalState::stamp`), for evicting the oldest first.
struct Document {
    value: Value,
    bytes: usize,
    stamp: u64,
}

/// What the byte budget counts for a document or record: its JSON text.
fn json_len<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_string(value).map_or(0, |text| text.len())
}

#[derive(Default)]
struct RunTable {
    by_id: HashMap<String, RunEntry>,
    /// Run ids, oldest first, for eviction.
    order: VecDeque<String>,
}

/// Eval runs and pass-rate history, per tenant.
pub(crate) struct EvalState {
    runs: Mutex<RunTable>,
    history: Mutex<HashMap<String, EvalHistory>>,
    /// Per tenant, each suite as its latest run request gave it, for reruns by name.
    documents: Mutex<HashMap<String, BTreeMap<String, Document>>>,
    /// Orders the documents kept, across tenants.
    stamp: AtomicU64,
    settings: HistorySettings,
    retained_runs: usize,
    /// Runs and documents count against the runtime's byte budget.
    budget: Arc<Budget>,
    /// Store documents of runs and suites dropped here, `(kind, tenant, key)`, for the
    /// runtime to delete from its store (`EvalState::unpersist`).
    removed: Mutex<Vec<(&'static str, String, String)>>,
    /// Per `(tenant, suite, case)` the outcomes stored so far: the next slot of its ring.
    pub(crate) outcome_slots: Mutex<HashMap<(String, String, String), u64>>,
}

impl EvalState {
    /// A run of this tenant as it stands: running with the results so far, or completed.
    /// Another tenant's run is indistinguishable from a missing one.
    fn run_detail(&self, tenant: &str, run_id: &str) -> Result<EvalRunDetail, ApiErrorWithStatus> {
        let table = lock(&self.runs);
        match table.by_id.get(run_id) {
            Some(run) if run.tenant == tenant => {
                let mut detail = run.detail.clone();
                if detail.status == RUNNING {
                    detail.duration_ms = run.started.elapsed().as_secs_f64() * 1000.0;
                }
                Ok(detail)
            }
            _ => Err(ApiErrorWithStatus::not_found(format!(
                "no eval run {run_id}"
            ))),
        }
    }

    /// What turns true once this tenant's run has completed.
    fn run_done(
        &self,
        tenant: &str,
        run_id: &str,
    ) -> Result<watch::Receiver<bool>, ApiErrorWithStatus> {
        let table = lock(&self.runs);
        match table.by_id.get(run_id) {
            Some(run) if run.tenant == tenant => Ok(run.done.subscribe()),
            _ => Err(ApiErrorWithStatus::not_found(format!(
                "no eval run {run_id}"
            ))),
        }
    }

    /// Pass rates of this tenant's suites and cases over the last `window` runs (the
    /// configured window when `None`).
    fn summary(&self, tenant: &str, window: Option<usize>) -> EvalSummary {
        let history = lock(&self.history);
        let window = window.unwrap_or(self.settings.window);
        match history.get(tenant) {
            Some(history) => history.summary_over(window),
            None => EvalHistory::new(self.settings).summary_over(window),
        }
    }

    /// This tenant's eval outcomes per suite and case, oldest first.
    fn outcomes(&self, tenant: &str) -> Vec<(String, String, Vec<EvalStatus>)> {
        lock(&self.history)
            .get(tenant)
            .map(EvalHistory::outcomes)
            .unwrap_or_default()
    }

    /// Deletes from the store the runs and suite documents the eval tables dropped.
    pub(crate) fn unpersist(&self, log: &EventLog) {
        let removed = std::mem::take(&mut *lock(&self.removed));
        for (kind, tenant, key) in removed {
            log.unpersist(kind, &tenant, &key);
        }
    }

    /// Stores one `agent.eval.completed` for the pass-rate history, in its case's ring
    /// of `max_outcomes_per_case` slots, so the file holds what the history can use.
    pub(crate) fn persist_outcome(
        &self,
        log: &EventLog,
        tenant: &str,
        logged: &super::log::Logged,
    ) {
        let Event::AgentEvalCompleted(event) = &logged.frame.event else {
            return;
        };
        let cap = self.settings.max_outcomes_per_case.max(1) as u64;
        let slot = {
            let mut slots = lock(&self.outcome_slots);
            let next = slots
                .entry((tenant.to_owned(), event.suite.clone(), event.case.clone()))
                .or_default();
            let slot = *next % cap;
            *next += 1;
            slot
        };
        let key = outcome_key(&event.suite, &event.case, slot);
        log.persist(persist::OUTCOME, tenant, &key, &RawText(logged.text()));
    }

    /// Puts stored eval runs, suite documents and history back. A run that was going
    /// when the runtime stopped cannot finish: it comes back `interrupted`, with the cases
    /// it finished. Returns the tenants of those runs (whose case sessions left open go:
    /// `Runtime::restore_state`).
    pub(crate) fn restore(
        &self,
        log: &EventLog,
        runs: &[crate::store::StoredRecord],
        suites: &[crate::store::StoredRecord],
        outcomes: &[crate::store::StoredRecord],
    ) -> Vec<String> {
        let mut interrupted = Vec::new();
        let evals = self;
        let mut details: Vec<(String, EvalRunDetail)> = runs
            .iter()
            .filter_map(|r| persist::decode(r).map(|d| (r.tenant.clone(), d)))
            .collect();
        // Run ids are random: the store's order is not the start order; the cases'
        // count is no better. Stable, and the newest kept is what retention needs.
        details.sort_by(|(_, a), (_, b)| a.run_id.cmp(&b.run_id));
        for (tenant, mut detail) in details {
            if detail.status == RUNNING {
                INTERRUPTED.clone_into(&mut detail.status);
                log.persist(persist::EVAL_RUN, &tenant, &detail.run_id, &detail);
                interrupted.push(tenant.clone());
            }
            let (done, _) = watch::channel(true);
            let run_id = detail.run_id.clone();
            evals.insert(
                &run_id,
                RunEntry {
                    tenant,
                    detail,
                    started: Instant::now(),
                    done,
                    stamp: 0,
                    bytes: 0,
                },
            );
        }
        {
            let mut documents = lock(&evals.documents);
            for record in suites {
                let Some(value) = persist::decode::<Value>(record) else {
                    continue;
                };
                let kept = Document {
                    bytes: json_len(&value),
                    value,
                    stamp: evals.stamp.fetch_add(1, Ordering::Relaxed),
                };
                evals.budget.add_evals(kept.bytes);
                documents
                    .entry(record.tenant.clone())
                    .or_default()
                    .insert(record.key.clone(), kept);
            }
        }
        let mut frames: Vec<(String, Frame, u64)> = Vec::new();
        for record in outcomes {
            let Ok(frame) = spyglass_protocol::decode(&record.value) else {
                tracing::warn!(key = %record.key, "stored eval outcome unreadable; skipped");
                continue;
            };
            let slot = record
                .key
                .rsplit('\u{1f}')
                .next()
                .and_then(|slot| slot.parse().ok())
                .unwrap_or(0);
            frames.push((record.tenant.clone(), frame, slot));
        }
        // Seqs count per tenant and go on across restarts: they order each tenant's.
        frames.sort_by(|(ta, a, _), (tb, b, _)| (ta, a.seq).cmp(&(tb, b.seq)));
        let mut slots = lock(&evals.outcome_slots);
        for (tenant, frame, slot) in &frames {
            evals.observe(tenant, frame);
            if let Event::AgentEvalCompleted(event) = &frame.event {
                // The newest stored outcome's slot is followed by the next one.
                slots.insert(
                    (tenant.clone(), event.suite.clone(), event.case.clone()),
                    slot + 1,
                );
            }
        }
        drop(slots);
        self.unpersist(log);
        interrupted
    }

    pub(crate) fn new(
        settings: HistorySettings,
        retained_runs: usize,
        budget: Arc<Budget>,
    ) -> Self {
        Self {
            runs: Mutex::new(RunTable::default()),
            history: Mutex::new(HashMap::new()),
            documents: Mutex::new(HashMap::new()),
            stamp: AtomicU64::new(0),
            settings,
            retained_runs: retained_runs.max(1),
            budget,
            removed: Mutex::new(Vec::new()),
            outcome_slots: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the tenant's history already holds this result (same suite, run id, case
    /// and attempt): ingest leaves such a result out rather than count it twice.
    pub(crate) fn holds(&self, tenant: &str, event: &AgentEvalCompleted) -> bool {
        lock(&self.history)
            .get(tenant)
            .is_some_and(|history| history.holds(event))
    }

    /// Folds every `agent.eval.completed` the log takes, the runner's and ingested ones
    /// alike, into the tenant's history.
    pub(crate) fn observe(&self, tenant: &str, frame: &Frame) {
        let Event::AgentEvalCompleted(event) = &frame.event else {
            return;
        };
        let mut histories = lock(&self.history);
        let history = histories
            .entry(tenant.to_owned())
            .or_insert_with(|| EvalHistory::new(self.settings));
        let before = history.bytes();
        // seq 0: frames may reach here slightly out of seq order across threads, and the
        // log never replays, so the history's replay guard must not drop any of them.
        history.record(0, frame.session_id.as_deref(), event);
        let after = history.bytes();
        self.budget.add_evals(after);
        self.budget.remove_evals(before, false);
        // Pass-rate history keeps within a quarter of the budget, every tenant's together:
        // this tenant's oldest cases go first (its newest stays), then the others'. It is
        // not among what `make_room` drops for the log: the rates outlive the events.
        let cap = self.budget.max / 4;
        let mut total: usize = histories.values().map(EvalHistory::bytes).sum();
        while total > cap {
            let dropped = histories
                .get_mut(tenant)
                .and_then(|h| h.drop_oldest_case(1))
                .map(|d| (tenant.to_owned(), d))
                .or_else(|| {
                    histories
                        .iter_mut()
                        .filter(|(t, _)| t.as_str() != tenant)
                        .max_by_key(|(_, h)| h.bytes())
                        .and_then(|(t, h)| h.drop_oldest_case(0).map(|d| (t.clone(), d)))
                });
            let Some((owner, (freed, suite, case))) = dropped else {
                break;
            };
            self.budget.remove_evals(freed, true);
            total -= freed;
            self.forget_outcomes(&owner, &suite, &case);
        }
    }

    /// A case gone from the history: its stored outcome slots go from the store too
    /// (`EvalState::unpersist`), so the file keeps what the history keeps.
    fn forget_outcomes(&self, tenant: &str, suite: &str, case: &str) {
        let slots = lock(&self.outcome_slots).remove(&(
            tenant.to_owned(),
            suite.to_owned(),
            case.to_owned(),
        ));
        let used = slots
            .unwrap_or(0)
            .min(self.settings.max_outcomes_per_case.max(1) as u64);
        let mut removed = lock(&self.removed);
        for slot in 0..used {
            removed.push((
                persist::OUTCOME,
                tenant.to_owned(),
                outcome_key(suite, case, slot),
            ));
        }
    }

    /// Remembers each suite of a run request under its name (the latest one wins).
    fn keep_documents(&self, tenant: &str, suites: &[Suite], request: &EvalRunRequest) {
        let mut documents = lock(&self.documents);
        let documents = documents.entry(tenant.to_owned()).or_default();
        for (suite, document) in suites.iter().zip(&request.suites) {
            if !documents.contains_key(&suite.name)
                && documents.len() >= MAX_SUITE_DOCUMENTS
                && let Some((name, old)) = documents.pop_first()
            {
                // Bounded like every other table; the name sorted first gives way.
                self.budget.remove_evals(old.bytes, false);
                lock(&self.removed).push((persist::SUITE, tenant.to_owned(), name));
            }
            let kept = Document {
                value: document.clone(),
                bytes: json_len(document),
                stamp: self.stamp.fetch_add(1, Ordering::Relaxed),
            };
            self.budget.add_evals(kept.bytes);
            if let Some(old) = documents.insert(suite.name.clone(), kept) {
                self.budget.remove_evals(old.bytes, false);
            }
        }
    }

    pub(crate) fn document(&self, tenant: &str, suite: &str) -> Option<Value> {
        lock(&self.documents)
            .get(tenant)?
            .get(suite)
            .map(|d| d.value.clone())
    }

    /// Drops the oldest of the finished runs and the suite documents (a run's age is its
    /// start), counted as evicted; false when there is nothing left that may go.
    pub(crate) fn evict_oldest(&self) -> bool {
        let run = {
            let table = lock(&self.runs);
            table
                .order
                .iter()
                .find_map(|id| table.by_id.get(id).filter(|r| r.detail.status != RUNNING))
                .map(|r| (r.stamp, r.detail.run_id.clone()))
        };
        let mut documents = lock(&self.documents);
        let document = documents
            .iter()
            .flat_map(|(tenant, docs)| docs.iter().map(move |(name, d)| (d.stamp, tenant, name)))
            .min_by_key(|(stamp, _, _)| *stamp)
            .map(|(stamp, tenant, name)| (stamp, tenant.clone(), name.clone()));
        match (run, document) {
            (Some((run_stamp, _)), Some((doc_stamp, tenant, name))) if doc_stamp < run_stamp => {
                self.drop_document(&mut documents, &tenant, &name)
            }
            (None, Some((_, tenant, name))) => self.drop_document(&mut documents, &tenant, &name),
            (Some((_, id)), _) => {
                drop(documents);
                let mut table = lock(&self.runs);
                table.order.retain(|kept| *kept != id);
                match table.by_id.remove(&id) {
                    Some(run) => {
                        self.budget.remove_evals(run.bytes, true);
                        lock(&self.removed).push((persist::EVAL_RUN, run.tenant, id));
                        true
                    }
                    None => false,
                }
            }
            (None, None) => false,
        }
    }

    fn drop_document(
        &self,
        documents: &mut HashMap<String, BTreeMap<String, Document>>,
        tenant: &str,
        name: &str,
    ) -> bool {
        let Some(docs) = documents.get_mut(tenant) else {
            return false;
        };
        let Some(old) = docs.remove(name) else {
            return false;
        };
        if docs.is_empty() {
            documents.remove(tenant);
        }
        self.budget.remove_evals(old.bytes, true);
        lock(&self.removed).push((persist::SUITE, tenant.to_owned(), name.to_owned()));
        true
    }

    fn insert(&self, run_id: &str, mut entry: RunEntry) {
        entry.bytes = json_len(&entry.detail);
        entry.stamp = self.stamp.fetch_add(1, Ordering::Relaxed);
        self.budget.add_evals(entry.bytes);
        let mut table = lock(&self.runs);
        table.order.push_back(run_id.to_owned());
        table.by_id.insert(run_id.to_owned(), entry);
        // Finished runs go first; a run still going is never dropped under its runner.
        while table.order.len() > self.retained_runs {
            let Some(at) = table.order.iter().position(|id| {
                table
                    .by_id
                    .get(id)
                    .is_none_or(|run| run.detail.status != RUNNING)
            }) else {
                break;
            };
            if let Some(id) = table.order.remove(at)
                && let Some(run) = table.by_id.remove(&id)
            {
                self.budget.remove_evals(run.bytes, false);
                lock(&self.removed).push((persist::EVAL_RUN, run.tenant, id));
            }
        }
    }

    fn push_case(&self, run_id: &str, record: EvalCaseRecord) {
        let bytes = json_len(&record);
        let mut table = lock(&self.runs);
        if let Some(run) = table.by_id.get_mut(run_id) {
            run.bytes += bytes;
            self.budget.add_evals(bytes);
            let detail = &mut run.detail;
            match record.result.status {
                EvalStatus::Passed => detail.passed += 1,
                EvalStatus::Failed => detail.failed += 1,
                EvalStatus::Error => detail.errored += 1,
                EvalStatus::Skipped => detail.skipped += 1,
            }
            detail.cases.push(record);
        }
    }

    fn finish(&self, run_id: &str, duration_ms: f64) {
        let mut table = lock(&self.runs);
        if let Some(run) = table.by_id.get_mut(run_id) {
            COMPLETED.clone_into(&mut run.detail.status);
            run.detail.duration_ms = duration_ms;
            run.done.send_replace(true);
        }
    }
}

const RUNNING: &str = "running";
/// Suite documents kept per tenant for `GET /v1/evals/suites/:name`.
const MAX_SUITE_DOCUMENTS: usize = 1000;
const COMPLETED: &str = "completed";

/// A case run (`scope: "case"`) runs one case again on its own: its `case` must be given
/// and leave exactly one case of one suite.
fn check_scope(
    planned: &[PlannedCase<'_>],
    request: &EvalRunRequest,
) -> Result<EvalScope, ApiErrorWithStatus> {
    if request.scope == EvalScope::Suite {
        return Ok(EvalScope::Suite);
    }
    let Some(glob) = &request.case else {
        return Err(bad_request(
            "/scope",
            "scope \"case\" runs one case again: give its id as `case`",
        ));
    };
    let first = planned.first().map(|p| (&p.suite.name, &p.case.id));
    if planned
        .iter()
        .any(|p| Some((&p.suite.name, &p.case.id)) != first)
    {
        return Err(bad_request(
            "/scope",
            format!(
                "scope \"case\" runs one case again, and `{glob}` matches several; name one case"
            ),
        ));
    }
    Ok(EvalScope::Case)
}

/// A runtime that does not run checker programs refuses a suite with a `command`
/// assertion (anywhere, nested ones too) before anything runs, naming the case and the
/// setting that allows it.
fn check_no_commands(suites: &[Suite]) -> Result<(), ApiErrorWithStatus> {
    use spyglass_eval::suite::Assertion;
    for (index, suite) in suites.iter().enumerate() {
        for case in &suite.cases {
            let uses = case
                .assertions
                .iter()
                .any(|a| a.any_in_tree(&|a| matches!(a, Assertion::Command(_))));
            if uses {
                return Err(ApiErrorWithStatus {
                    status: 403,
                    error: ApiError::new(
                        codes::COMMAND_ASSERTIONS_DISABLED,
                        format!(
                            "{}: case {:?}: assert.command runs a program on the runtime's host, which this runtime does not allow; start it with `spyglass serve --allow-command-assertions` (or SPYGLASS_ALLOW_COMMAND_ASSERTIONS=true), or run the file locally with `spyglass eval FILE`",
                            suite.file, case.id
                        ),
                    )
                    .with_field(format!("/suites/{index}"))
                    .with_index(index),
                });
            }
        }
    }
    Ok(())
}

/// A case's `decisions` name rules of this runtime's policy that hold calls for approval;
/// any other rule id is refused (400 `invalid_suite`) before anything runs, naming the
/// case and the rule.
fn check_decisions(
    suites: &[Suite],
    policy: &super::policy::Policy,
) -> Result<(), ApiErrorWithStatus> {
    use super::policy::Action;
    for (index, suite) in suites.iter().enumerate() {
        for case in &suite.cases {
            let unknown = case.decisions.keys().find(|rule| {
                !policy
                    .rules
                    .iter()
                    .any(|r| &r.id == *rule && r.action == Action::Approval)
            });
            if let Some(rule) = unknown {
                return Err(ApiErrorWithStatus {
                    status: 400,
                    error: ApiError::new(
                        codes::INVALID_SUITE,
                        format!(
                            "{}: case {:?}: decisions names rule {rule:?}, which is no rule of this runtime's policy that holds calls for approval",
                            suite.file, case.id
                        ),
                    )
                    .with_field(format!("/suites/{index}"))
                    .with_index(index),
                });
            }
        }
    }
    Ok(())
}

/// An attempt that produced no result, and why.
fn no_result(error: String, duration_ms: f64) -> CaseRun {
    CaseRun {
        error: Some(error),
        duration_ms,
        ..CaseRun::default()
    }
}

fn bad_request(field: &str, message: impl Into<String>) -> ApiErrorWithStatus {
    ApiErrorWithStatus {
        status: 400,
        error: ApiError::new(codes::INVALID_BODY, message).with_field(field),
    }
}

/// Every suite of the request, checked; the first bad one answers 400 `invalid_suite`
/// with the suite file error (file, case, field) as the message.
fn read_suites(request: &EvalRunRequest) -> Result<Vec<Suite>, ApiErrorWithStatus> {
    if request.suites.is_empty() {
        return Err(bad_request(
            "/suites",
            "suites is empty; give at least one suite document or suite file text",
        ));
    }
    request
        .suites
        .iter()
        .enumerate()
        .map(|(index, value)| {
            suite_from_request(index, value).map_err(|err| ApiErrorWithStatus {
                status: 400,
                error: ApiError::new(codes::INVALID_SUITE, err.to_string())
                    .with_field(format!("/suites/{index}"))
                    .with_index(index),
            })
        })
        .collect()
}

impl Runtime {
    /// Starts an eval run for `tenant` and answers its id at once; the cases run in a
    /// background task (so this needs a Tokio runtime). `eval.run.started` is already on
    /// the stream when this returns. Await the end with `wait_eval_run`.
    // By value like the request an HTTP handler decodes; borrowing would change every
    // caller's signature for no saving.
    #[expect(clippy::needless_pass_by_value)]
    pub fn run_evals(
        &self,
        tenant: &str,
        request: EvalRunRequest,
    ) -> Result<String, ApiErrorWithStatus> {
        let suites = read_suites(&request)?;
        super::llm::judge::check_suites(&suites, &self.inner.config.models).map_err(|message| {
            ApiErrorWithStatus {
                status: 400,
                error: ApiError::new(codes::INVALID_SUITE, message).with_field("/suites"),
            }
        })?;
        if !self.inner.config.allow_command_assertions {
            check_no_commands(&suites)?;
        }
        check_decisions(&suites, &self.inner.config.policy)?;
        let repeat = request.repeat.unwrap_or(1);
        if repeat == 0 {
            return Err(bad_request("/repeat", "repeat must be at least 1"));
        }
        let glob = request.case.clone();
        if let Some(err) = glob
            .as_deref()
            .and_then(|g| spyglass_protocol::glob::check_pattern(g).err())
        {
            return Err(bad_request("/case", format!("case: {err}")));
        }
        // Counted before anything is built: `repeat` may be up to 2^32 - 1.
        let attempts = planned_attempts(&suites, repeat, glob.as_deref());
        let limit = self.inner.config.max_eval_attempts;
        if attempts > u64::try_from(limit).unwrap_or(u64::MAX) {
            return Err(bad_request(
                "/repeat",
                format!("the run plans {attempts} case attempts; the limit is {limit}"),
            ));
        }
        let planned = plan(&suites, repeat, glob.as_deref());
        if planned.is_empty() {
            return Err(match &glob {
                Some(glob) => bad_request(
                    "/case",
                    format!("no case id matches `{glob}` in the given suites"),
                ),
                None => bad_request("/suites", "the suites have no cases"),
            });
        }
        if !self.inner.config.test_mode
            && let Some(p) = planned
                .iter()
                .find(|p| p.case.skip.is_none() && p.case.mocks.is_some())
        {
            return Err(ApiErrorWithStatus::new(
                501,
                codes::MOCKS_NOT_PERMITTED,
                format!(
                    "{}: case {:?} declares mocks, which need test mode; start the runtime with --test-mode or CODESPAR_TEST_MODE_ENABLED=true",
                    p.suite.file, p.case.id
                ),
            ));
        }
        let scope = check_scope(&planned, &request)?;
        self.inner.evals.keep_documents(tenant, &suites, &request);
        if self.inner.log.has_store() {
            for (suite, document) in suites.iter().zip(&request.suites) {
                self.inner
                    .log
                    .persist(persist::SUITE, tenant, &suite.name, document);
            }
        }
        let attempts = u32::try_from(planned.len()).unwrap_or(u32::MAX);
        let run_id = new_id("run_");
        let names: Vec<String> = suites.iter().map(|s| s.name.clone()).collect();
        let (done, _) = watch::channel(false);
        let detail = EvalRunDetail {
            run_id: run_id.clone(),
            status: RUNNING.to_owned(),
            suites: names.clone(),
            repeat,
            scope,
            ..EvalRunDetail::default()
        };
        self.inner
            .log
            .persist(persist::EVAL_RUN, tenant, &run_id, &detail);
        self.inner.evals.insert(
            &run_id,
            RunEntry {
                tenant: tenant.to_owned(),
                detail,
                started: Instant::now(),
                done,
                stamp: 0,
                bytes: 0,
            },
        );
        self.make_room();
        self.inner.evals.unpersist(&self.inner.log);
        self.emit_for(
            tenant,
            None,
            Event::EvalRunStarted(EvalRunStarted {
                run_id: run_id.clone(),
                suites: names,
                cases: attempts,
                repeat,
                scope,
            }),
        );
        let rt = self.clone();
        let tenant = tenant.to_owned();
        let id = run_id.clone();
        tokio::spawn(async move {
            RunJob {
                rt,
                tenant,
                run_id: id,
                scope,
            }
            .run(&suites, repeat, glob.as_deref())
            .await;
        });
        Ok(run_id)
    }

    /// A run of this tenant as it stands: running with the results so far, or completed.
    pub fn eval_run(
        &self,
        tenant: &str,
        run_id: &str,
    ) -> Result<EvalRunDetail, ApiErrorWithStatus> {
        self.inner.evals.run_detail(tenant, run_id)
    }

    /// Waits until the run has completed, then answers its detail.
    pub async fn wait_eval_run(
        &self,
        tenant: &str,
        run_id: &str,
    ) -> Result<EvalRunDetail, ApiErrorWithStatus> {
        let mut done = self.inner.evals.run_done(tenant, run_id)?;
        // An error means the run was dropped from the table; the lookup below says so.
        let _ = done.wait_for(|done| *done).await;
        self.eval_run(tenant, run_id)
    }

    /// Pass rates of this tenant's suites and cases over the last `window` runs (the
    /// configured window when `None`).
    pub fn eval_summary(&self, tenant: &str, window: Option<usize>) -> EvalSummary {
        self.inner.evals.summary(tenant, window)
    }
}

/// An eval run going in the background: its runtime, tenant, id and scope, shared by
/// every case attempt it runs.
struct RunJob {
    rt: Runtime,
    tenant: String,
    run_id: String,
    scope: EvalScope,
}

impl RunJob {
    /// Runs every planned attempt in turn, then announces and stores the run completed.
    async fn run(self, suites: &[Suite], repeat: u32, glob: Option<&str>) {
        let (rt, tenant, run_id, scope) = (&self.rt, &self.tenant, &self.run_id, self.scope);
        let clock = Instant::now();
        let mut counts = Counts::default();
        for planned in plan(suites, repeat, glob) {
            let record = self.run_case(planned).await;
            counts.add(record.result.status);
            rt.inner.evals.push_case(run_id, record);
            rt.make_room();
            // Stored with each case it finishes, so a runtime killed mid-run comes back
            // with them (the run `interrupted`); a store that refuses it changes nothing
            // of the run, which goes on.
            if rt.inner.log.has_store()
                && let Ok(detail) = rt.eval_run(tenant, run_id)
            {
                rt.inner
                    .log
                    .persist(persist::EVAL_RUN, tenant, run_id, &detail);
                let _ = rt.committed().await;
            }
        }
        let duration = clock.elapsed().as_secs_f64() * 1000.0;
        // On the stream before the run reads as completed, so a poller that saw
        // `completed` finds the event there too.
        rt.emit_for(
            tenant,
            None,
            Event::EvalRunCompleted(EvalRunCompleted {
                run_id: run_id.clone(),
                passed: counts.passed,
                failed: counts.failed,
                errored: counts.errored,
                skipped: counts.skipped,
                duration,
                scope,
            }),
        );
        // Stored before it reads as completed, so whoever saw `completed` and then
        // flushed the store (`spyglass eval --store`) finds it there.
        if rt.inner.log.has_store()
            && let Ok(mut detail) = rt.eval_run(tenant, run_id)
        {
            COMPLETED.clone_into(&mut detail.status);
            detail.duration_ms = duration;
            rt.inner
                .log
                .persist(persist::EVAL_RUN, tenant, run_id, &detail);
        }
        rt.inner.evals.finish(run_id, duration);
    }

    /// One attempt: run (unless skipped), judge, emit `agent.eval.completed`, close the
    /// session.
    async fn run_case(&self, planned: PlannedCase<'_>) -> EvalCaseRecord {
        let (rt, tenant, run_id, scope) =
            (&self.rt, self.tenant.as_str(), &self.run_id, self.scope);
        let case = planned.case;
        let (session_id, result, output) = if case.skip.is_some() {
            (None, skipped(case), None)
        } else {
            let (session_id, run) = self.attempt(planned).await;
            let result = evaluate(case, &run);
            let judge = super::llm::judge::RuntimeJudge::new(&rt.inner.config.models);
            let result = spyglass_eval::judge::apply(case, &run, result, &judge).await;
            let judging = spyglass_eval::compose::Judging {
                case,
                run: &run,
                judge: &judge,
                allow_commands: rt.inner.config.allow_command_assertions,
            };
            let result = spyglass_eval::compose::apply(&judging, result).await;
            (session_id, result, run.output)
        };
        // `cost` is the run's, priced by the settings' table as `agent.completed` is (0
        // when unknown: `@gemstack/ai-sdk` makes it a number; `max_cost` errors on it instead).
        let mut event = result.to_event(&planned.suite.name, &case.id);
        event.run_id = Some(run_id.clone());
        event.attempt = Some(planned.attempt);
        event.scope = scope;
        rt.emit_for(
            tenant,
            session_id.clone(),
            Event::AgentEvalCompleted(event.clone()),
        );
        let (calls, calls_omitted) = session_id
            .as_deref()
            .map(|id| case_calls(rt, tenant, id))
            .unwrap_or_default();
        if let Some(id) = &session_id {
            // The session is ours and open; a failure here changes nothing about the result.
            let _ = rt.close_session(tenant, id);
        }
        EvalCaseRecord {
            session_id,
            result: event,
            output,
            calls,
            calls_omitted,
        }
    }

    /// Runs one attempt in a fresh session through the `send` loop, bounded by the case's
    /// timeout. Anything that keeps the loop from producing a result is the run's error.
    async fn attempt(&self, planned: PlannedCase<'_>) -> (Option<String>, CaseRun) {
        let (rt, tenant) = (&self.rt, self.tenant.as_str());
        let case = planned.case;
        let request = CreateSession {
            servers: case.servers.clone(),
            user_id: EVAL_USER_ID.to_owned(),
            metadata: (!case.metadata.is_empty()).then(|| case.metadata.clone()),
            mocks: case.mocks.clone(),
            model: case.model_for_attempt(planned.attempt).cloned(),
        };
        let session = match rt.create_session(tenant, request) {
            Ok(session) => session,
            Err(err) => {
                // The field (`/mocks/asaas~1x/$rules/0/output`) says where in the case.
                let at = err
                    .error
                    .field
                    .as_deref()
                    .map(|field| format!(" at {field}"))
                    .unwrap_or_default();
                let error = format!(
                    "the case's session could not be created: {} ({}{at})",
                    err.error.message, err.error.code
                );
                return (None, no_result(error, 0.0));
            }
        };
        if !case.decisions.is_empty()
            && let Ok(held) = rt.session(tenant, &session.id)
        {
            lock(&held).decisions = Some(Arc::new(CaseDecisions {
                by: format!("eval:{}/{}", planned.suite.name, case.id),
                rules: case
                    .decisions
                    .iter()
                    .map(|(rule, decision)| {
                        let verdict = match decision {
                            CaseDecision::Approve => Verdict::Approve,
                            CaseDecision::Deny => Verdict::Deny,
                        };
                        (rule.clone(), verdict)
                    })
                    .collect(),
            }));
        }
        let limit = case
            .timeout_ms
            .map_or(rt.inner.config.eval_case_timeout, Duration::from_millis);
        let clock = Instant::now();
        let elapsed = || clock.elapsed().as_secs_f64() * 1000.0;
        let outcome =
            tokio::time::timeout(limit, rt.run_agent(tenant, &session.id, &case.input, None)).await;
        let run = match outcome {
            Err(_) => no_result(
                format!("timed out after {} ms", limit.as_millis()),
                elapsed(),
            ),
            Ok(Err(err)) => no_result(
                format!("{} ({})", err.error.message, err.error.code),
                elapsed(),
            ),
            Ok(Ok(result)) => CaseRun {
                output: result.error.is_none().then(|| result.message.clone()),
                tool_calls: result.tool_calls,
                tokens: result.tokens,
                steps: result.steps,
                error: result.error,
                duration_ms: result.duration_ms,
                prompts: result.prompts,
                cost: result.cost,
                cost_missing: result.cost_missing,
            },
        };
        (Some(session.id), run)
    }
}

impl Runtime {
    /// This tenant's eval outcomes per suite and case, oldest first (`EvalHistory::outcomes`).
    pub fn eval_outcomes(&self, tenant: &str) -> Vec<(String, String, Vec<EvalStatus>)> {
        self.inner.evals.outcomes(tenant)
    }
}

/// The calls a case's session made, in order, as the session retains them, and how many
/// older ones it no longer holds.
fn case_calls(rt: &Runtime, tenant: &str, session_id: &str) -> (Vec<EvalCall>, u64) {
    let Ok(detail) = rt.session_detail(tenant, session_id) else {
        return (Vec::new(), 0);
    };
    let omitted = u64::from(detail.summary.calls).saturating_sub(detail.calls.len() as u64);
    let calls = detail
        .calls
        .into_iter()
        .map(|call| EvalCall {
            tool: call.tool,
            arguments: call.input,
            outcome: call.outcome,
            duration_ms: call.duration,
        })
        .collect();
    (calls, omitted)
}

/// `suite`, `case` and the slot, joined by a unit separator no name holds in practice.
fn outcome_key(suite: &str, case: &str, slot: u64) -> String {
    format!("{suite}\u{1f}{case}\u{1f}{slot}")
}

/// Text already JSON, stored as it is.
struct RawText<'a>(&'a str);

impl serde::Serialize for RawText<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serde_json::value::RawValue::from_string(self.0.to_owned())
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}

const INTERRUPTED: &str = "interrupted";
