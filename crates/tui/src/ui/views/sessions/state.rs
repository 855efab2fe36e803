//! The Sessions tab's state: the selected session (kept by id as sessions arrive), the
//! filter, the focus, the timeline's cached order and the open call.

use super::lines::{TimelineCache, TimelineRow, build_timeline, detail_lines, pretty};
use super::mocks::MocksPane;
use crate::model::{Call, Model, Session};
use crate::ui::action::Action;
use crate::ui::views::TextKey;
use crate::ui::views::pane::{PaneKey, TextPane};
use crate::ui::views::query::Query;
use crate::ui::views::{ListCursor, edit_filter, end_filter};
use crossterm::event::KeyEvent;
use ratatui::layout::{Position, Rect};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Focus {
    #[default]
    List,
    Timeline,
    /// The Mocks pane above the timeline: a cursor over the declared mocks.
    Mocks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallSort {
    #[default]
    Start,
    Duration,
}

/// A column the session list can be ordered by, in the order `sort_column` steps through
/// them (after them, the list is newest first again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListColumn {
    Id,
    User,
    Status,
    Calls,
    Env,
    Last,
}

impl ListColumn {
    pub const ALL: [ListColumn; 6] = [
        Self::Id,
        Self::User,
        Self::Status,
        Self::Calls,
        Self::Env,
        Self::Last,
    ];

    /// The column's position among the list's columns (as drawn).
    pub fn index(self) -> usize {
        Self::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }

    fn cmp(self, a: &Session, b: &Session) -> std::cmp::Ordering {
        match self {
            Self::Id => a.id.cmp(&b.id),
            Self::User => a.user.to_lowercase().cmp(&b.user.to_lowercase()),
            Self::Status => a.status.as_str().cmp(b.status.as_str()),
            Self::Calls => a.calls.cmp(&b.calls),
            Self::Env => a.envelopes.cmp(&b.envelopes),
            Self::Last => {
                let at = |s: &Session| s.last_activity_ms.unwrap_or(f64::NEG_INFINITY);
                at(a).total_cmp(&at(b))
            }
        }
    }
}

/// How the session list is ordered: newest first (no column), or by a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListOrder {
    pub column: Option<ListColumn>,
    pub descending: bool,
}

/// The open call detail: its text, prepared once, and how far it is scrolled.
#[derive(Debug, Clone)]
pub struct Detail {
    pub session_id: String,
    pub call_id: String,
    pub(super) rev: u64,
    pub pane: TextPane,
}

#[derive(Debug, Clone, Default)]
pub struct SessionsState {
    /// The selected session, by id.
    pub list: ListCursor<String>,
    pub focus: Focus,
    pub filter: String,
    pub editing_filter: bool,
    /// Closed sessions of the eval runner are left out of the list.
    pub hide_evals: bool,
    pub order: ListOrder,
    /// With a column to order by: the shown sessions' absolute positions, in list order.
    ordered: Vec<u64>,
    pub sort: CallSort,
    pub detail: Option<Detail>,
    /// Absolute positions of matching sessions, ascending; extended as sessions arrive.
    matches: Vec<u64>,
    scanned_to: u64,
    /// The selected timeline row, by position in the cached rows.
    pub(super) timeline: ListCursor<usize>,
    pub(super) cache: Option<TimelineCache>,
    /// The selected session's folded steps (by step index), their calls hidden.
    pub collapsed: Vec<usize>,
    /// Times as the clock read them (LAST, the timeline's ends) rather than ages and offsets.
    pub absolute_times: bool,
    /// The selected session's Mocks pane as focused: cursor, opened mocks, text.
    pub mocks: MocksPane,
    /// Where the Mocks table was drawn unfocused, for a click to focus it.
    pub(super) mocks_table: Option<Rect>,
}

/// Where a session came from, as `source:` reads it: grouped agent events are `external`;
/// the runtime's own are `sdk` (and `runtime`); a `source` in its metadata (an OTLP
/// receiver's `otel`, say) counts too.
fn sources(session: &Session) -> impl Iterator<Item = &str> {
    let own: &[&str] = if session.external {
        &["external"]
    } else {
        &["sdk", "runtime"]
    };
    let declared = session
        .summary
        .iter()
        .flat_map(|s| s.metadata.iter())
        .filter(|(k, _)| k == "source")
        .flat_map(|(_, v)| {
            // The OTLP receiver says `opentelemetry`; people type `otel`.
            let short = (v == spyglass_protocol::OTEL_SOURCE).then_some("otel");
            std::iter::once(v.as_str()).chain(short)
        });
    own.iter().copied().chain(declared)
}

/// Who `spyglass eval` runs sessions as (the runtime's `EVAL_USER_ID`; the UI may not
/// name the runtime layer).
const EVAL_USER_ID: &str = "spyglass-eval";

/// A finished session of the eval runner: the demo and `eval` leave a hundred of them.
pub(super) fn closed_eval(session: &Session) -> bool {
    session.user == EVAL_USER_ID && session.status != crate::model::SessionStatus::Active
}

fn matches_filter(session: &Session, query: &Query, hide_evals: bool) -> bool {
    if hide_evals && closed_eval(session) {
        return false;
    }
    let mut fields = vec![
        ("status", session.status.as_str()),
        ("user", session.user.as_str()),
        ("id", session.id.as_str()),
    ];
    fields.extend(sources(session).map(|s| ("source", s)));
    query.matches(&fields, &[&session.id, &session.user])
}

impl SessionsState {
    /// Whether the list shows fewer than all sessions: a filter typed, or evals hidden.
    pub(super) fn filtering(&self) -> bool {
        !self.filter.is_empty() || self.hide_evals
    }

    /// Hides or shows the closed eval sessions; the selection stays when it still shows.
    pub fn toggle_hide_evals(&mut self, model: &Model) {
        self.hide_evals = !self.hide_evals;
        self.refilter(model);
    }

    /// Matches every held session again (the filter changed), keeping the selection when
    /// it still shows, else the first row.
    fn refilter(&mut self, model: &Model) {
        self.refresh_matches(model, true);
        self.reorder(model);
        if self.selected_row(model).is_none() {
            self.select_row(model, 0);
        }
        self.ensure_cache(model);
    }

    pub fn list_len(&self, model: &Model) -> usize {
        if self.order.column.is_some() {
            self.ordered.len()
        } else if self.filtering() {
            self.matches.len()
        } else {
            model.sessions_len()
        }
    }

    pub fn list_row<'m>(&self, model: &'m Model, row: usize) -> Option<&'m Session> {
        if self.order.column.is_some() {
            model.session_abs(*self.ordered.get(row)?)
        } else if self.filtering() {
            let i = self.matches.len().checked_sub(row + 1)?;
            model.session_abs(self.matches[i])
        } else {
            model.session_newest(row)
        }
    }

    fn row_of(&self, model: &Model, id: &str) -> Option<usize> {
        if self.order.column.is_some() {
            let abs = model.abs_of(id)?;
            self.ordered.iter().position(|a| *a == abs)
        } else if self.filtering() {
            let abs = model.abs_of(id)?;
            let i = self.matches.binary_search(&abs).ok()?;
            Some(self.matches.len() - 1 - i)
        } else {
            model.newest_row_of(id)
        }
    }

    pub fn selected_row(&self, model: &Model) -> Option<usize> {
        self.list
            .selected
            .as_deref()
            .and_then(|id| self.row_of(model, id))
    }

    /// New sessions are checked against the filter once, as they arrive; sessions dropped
    /// by the bound leave the front of `matches`.
    fn refresh_matches(&mut self, model: &Model, rescan: bool) {
        if rescan {
            self.matches.clear();
            self.scanned_to = model.first_abs();
        }
        let first = model.first_abs();
        let stale = self.matches.partition_point(|abs| *abs < first);
        self.matches.drain(..stale);
        if !self.filtering() {
            self.scanned_to = model.end_abs();
            return;
        }
        let query = Query::parse(&self.filter);
        for abs in self.scanned_to.max(first)..model.end_abs() {
            if model
                .session_abs(abs)
                .is_some_and(|s| matches_filter(s, &query, self.hide_evals))
            {
                self.matches.push(abs);
            }
        }
        self.scanned_to = model.end_abs();
    }

    /// Orders the shown sessions by the chosen column (ties newest first). Sessions change
    /// as frames arrive (calls, status), so this runs after every model change; the
    /// selection is by id and stays on its session wherever it lands.
    fn reorder(&mut self, model: &Model) {
        self.ordered.clear();
        let Some(column) = self.order.column else {
            return;
        };
        if self.filtering() {
            self.ordered.extend(self.matches.iter().rev());
        } else {
            self.ordered
                .extend((model.first_abs()..model.end_abs()).rev());
        }
        let descending = self.order.descending;
        self.ordered.sort_by(|a, b| {
            let (Some(sa), Some(sb)) = (model.session_abs(*a), model.session_abs(*b)) else {
                return std::cmp::Ordering::Equal;
            };
            let by = column.cmp(sa, sb);
            let by = if descending { by.reverse() } else { by };
            by.then(b.cmp(a))
        });
    }

    /// The next column to order the list by (after the last, newest first again).
    pub fn sort_column(&mut self, model: &Model) {
        self.order.column = match self.order.column {
            None => Some(ListColumn::ALL[0]),
            Some(c) => ListColumn::ALL.get(c.index() + 1).copied(),
        };
        self.reorder(model);
    }

    /// Ascending and descending swap.
    pub fn flip_order(&mut self, model: &Model) {
        self.order.descending = !self.order.descending;
        self.reorder(model);
    }

    /// Keeps the selection on the same session as rows arrive; picks the newest when there
    /// was none or it is gone. The timeline order and an open call follow the model.
    pub fn after_model_change(&mut self, model: &Model) {
        self.refresh_matches(model, false);
        self.reorder(model);
        if self.selected_row(model).is_none() {
            self.select_row(model, 0);
        }
        self.ensure_cache(model);
        // The open call may have changed since it was opened (a replay arrived).
        if let Some(detail) = &mut self.detail
            && let Some(session) = model.session(&detail.session_id)
            && detail.rev != session.rev
            && let Some(call) = session.timeline.call(&detail.call_id)
        {
            detail.pane.set_lines(detail_lines(call));
            detail.rev = session.rev;
        }
    }

    /// The selected timeline row.
    pub(super) fn timeline_sel(&self) -> usize {
        self.timeline.selected.unwrap_or(0)
    }

    fn reset_timeline(&mut self) {
        self.timeline.selected = Some(0);
        self.timeline.offset = 0;
        self.collapsed.clear();
        self.mocks = MocksPane::default();
        if self.focus == Focus::Mocks {
            self.focus = Focus::Timeline;
        }
    }

    /// Folds the steps given (or unfolds them), the cursor staying on its row or, when
    /// that row was folded away, on its step.
    fn fold(&mut self, model: &Model, change: impl FnOnce(&mut Vec<usize>, &[TimelineRow])) {
        let Some(cache) = &self.cache else { return };
        let rows = cache.rows.clone();
        let sel = self.timeline_sel();
        let before = rows.get(sel).copied();
        let step_of = rows
            .iter()
            .take(sel + 1)
            .rev()
            .find(|r| matches!(r, TimelineRow::Step(_)))
            .copied();
        change(&mut self.collapsed, &rows);
        self.collapsed.sort_unstable();
        self.collapsed.dedup();
        self.ensure_cache(model);
        let Some(cache) = &self.cache else { return };
        let at =
            |want: Option<TimelineRow>| want.and_then(|w| cache.rows.iter().position(|r| *r == w));
        self.timeline.selected = Some(at(before).or_else(|| at(step_of)).unwrap_or(0));
    }

    /// Enter on a step folds or unfolds it.
    fn toggle_step(&mut self, step: usize, model: &Model) {
        self.fold(model, |collapsed, _| {
            match collapsed.iter().position(|s| *s == step) {
                Some(i) => {
                    collapsed.remove(i);
                }
                None => collapsed.push(step),
            }
        });
    }

    /// Folds every step, or unfolds them all when all are folded.
    fn toggle_all_steps(&mut self, model: &Model) {
        let steps = self
            .list
            .selected
            .as_deref()
            .and_then(|id| model.session(id))
            .map_or(0, |s| s.timeline.steps.len());
        self.fold(model, |collapsed, _| {
            if collapsed.len() >= steps {
                collapsed.clear();
            } else {
                *collapsed = (0..steps).collect();
            }
        });
    }

    fn select_row(&mut self, model: &Model, row: usize) {
        let id = self.list_row(model, row).map(|s| s.id.clone());
        if id != self.list.selected {
            self.reset_timeline();
            self.detail = None;
        }
        self.list.selected = id;
    }

    /// Shows one session's timeline (another tab jumping here). A filter that hides the
    /// session is cleared. Returns false when the model no longer holds the session.
    pub fn select_session(&mut self, id: &str, model: &Model) -> bool {
        if model.session(id).is_none() {
            return false;
        }
        self.editing_filter = false;
        if self.row_of(model, id).is_none() {
            self.filter.clear();
            self.hide_evals = false;
            self.refresh_matches(model, true);
            self.reorder(model);
        }
        if self.list.selected.as_deref() != Some(id) {
            self.reset_timeline();
        }
        self.detail = None;
        self.list.selected = Some(id.to_owned());
        self.focus = Focus::Timeline;
        self.ensure_cache(model);
        true
    }

    /// Whether a key is text for a search in the open call.
    pub fn searching(&self) -> bool {
        match &self.detail {
            Some(d) => d.pane.typing(),
            None => self.focus == Focus::Mocks && self.mocks.pane.typing(),
        }
    }

    /// A key while a search in the open call is typed: the pane follows the first match.
    pub fn search_key(&mut self, key: TextKey) {
        match &mut self.detail {
            Some(detail) => detail.pane.search_key(key),
            None => self.mocks.pane.search_key(key),
        }
    }

    pub fn filter_key(&mut self, key: KeyEvent, model: &Model) {
        if edit_filter(&mut self.filter, key) {
            self.refilter(model);
        }
    }

    /// Builds the selected session's timeline order when it is missing or stale, keeping
    /// the timeline's selection inside it.
    pub(super) fn ensure_cache(&mut self, model: &Model) {
        let Some(session) = self
            .list
            .selected
            .as_deref()
            .and_then(|id| model.session(id))
        else {
            self.cache = None;
            return;
        };
        if let Some(cache) = &self.cache
            && cache.session_id == session.id
            && cache.rev == session.rev
            && cache.sort == self.sort
            && cache.collapsed == self.collapsed
        {
            self.mocks.refresh(session);
            return;
        }
        self.mocks.refresh(session);
        let cache = build_timeline(session, self.sort, &self.collapsed);
        let last = cache.rows.len().saturating_sub(1);
        self.timeline.selected = Some(self.timeline_sel().min(last));
        self.cache = Some(cache);
    }

    fn timeline_len(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.rows.len())
    }

    pub fn dispatch(&mut self, action: Action, model: &Model) {
        self.on_action(action, model);
        self.ensure_cache(model);
    }

    fn on_action(&mut self, action: Action, model: &Model) {
        if let Some(detail) = &mut self.detail {
            if detail.pane.on_action(action) == PaneKey::Close {
                self.detail = None;
            }
            return;
        }
        if self.editing_filter {
            if end_filter(&mut self.editing_filter, &mut self.filter, action) {
                self.refilter(model);
            }
            return;
        }
        self.ensure_cache(model);
        if self.focus == Focus::Mocks {
            self.mocks_action(action, model);
            return;
        }
        match action {
            Action::Filter => {
                self.editing_filter = true;
                self.focus = Focus::List;
            }
            Action::Sort => {
                // The selected call stays selected in the new order (a step, which the
                // duration order does not list, gives way to the first row).
                let before = self
                    .cache
                    .as_ref()
                    .and_then(|c| c.rows.get(self.timeline_sel()).copied());
                self.sort = match self.sort {
                    CallSort::Start => CallSort::Duration,
                    CallSort::Duration => CallSort::Start,
                };
                self.ensure_cache(model);
                let row = self
                    .cache
                    .as_ref()
                    .zip(before)
                    .and_then(|(c, before)| c.rows.iter().position(|r| *r == before));
                self.timeline.selected = Some(row.unwrap_or(0));
            }
            Action::HideEvals => self.toggle_hide_evals(model),
            Action::SortList => self.sort_column(model),
            Action::FoldSteps => self.toggle_all_steps(model),
            Action::Times => self.absolute_times = !self.absolute_times,
            Action::FlipOrder => self.flip_order(model),
            Action::FocusLeft => self.focus = Focus::List,
            // Right of the list is the timeline; from the timeline, the mocks above it.
            Action::FocusRight if self.focus == Focus::Timeline => self.focus_mocks(model),
            Action::FocusRight if self.list.selected.is_some() => self.focus = Focus::Timeline,
            Action::Back => match self.focus {
                Focus::Timeline | Focus::Mocks => self.focus = Focus::List,
                Focus::List if !self.filter.is_empty() => {
                    self.filter.clear();
                    self.refilter(model);
                }
                Focus::List => {}
            },
            Action::Open => match self.focus {
                Focus::List if self.list.selected.is_some() => self.focus = Focus::Timeline,
                Focus::Timeline => match self
                    .cache
                    .as_ref()
                    .and_then(|c| c.rows.get(self.timeline_sel()).copied())
                {
                    Some(TimelineRow::Step(i)) if self.sort == CallSort::Start => {
                        self.toggle_step(i, model);
                    }
                    _ => self.open_detail(model),
                },
                Focus::List | Focus::Mocks => {}
            },
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => match self.focus {
                Focus::List => {
                    let len = self.list_len(model);
                    let cur = self.selected_row(model).unwrap_or(0);
                    let row = self.list.step(cur, len, action);
                    self.select_row(model, row);
                }
                Focus::Timeline => {
                    let len = self.timeline_len();
                    let row = self.timeline.step(self.timeline_sel(), len, action);
                    self.timeline.selected = Some(row);
                }
                Focus::Mocks => {}
            },
            _ => {}
        }
    }

    /// Focuses the Mocks pane, when the selected session declared any.
    fn focus_mocks(&mut self, model: &Model) {
        let Some(session) = self
            .list
            .selected
            .as_deref()
            .and_then(|id| model.session(id))
        else {
            return;
        };
        if session.mocks.is_empty() {
            return;
        }
        self.mocks.refresh(session);
        self.focus = Focus::Mocks;
    }

    /// A key in the focused Mocks pane: ↑↓ (and first/last) move the cursor from mock to
    /// mock, `open` opens or closes one, the page keys scroll a long payload, and the
    /// pane's own keys (search, sideways) work as in any pane; `back` returns to the
    /// timeline.
    fn mocks_action(&mut self, action: Action, model: &Model) {
        let Some(session) = self
            .list
            .selected
            .as_deref()
            .and_then(|id| model.session(id))
        else {
            self.focus = Focus::List;
            return;
        };
        let len = self.mocks.count();
        match action {
            Action::Up | Action::Down | Action::Top | Action::Bottom => {
                let to = crate::ui::views::step(self.mocks.selected, len, action, 1);
                self.mocks.select(to);
            }
            Action::Open => self.mocks.toggle(session),
            Action::Back => self.focus = Focus::Timeline,
            other => {
                self.mocks.pane.on_action(other);
            }
        }
    }

    /// A click on a list row selects it; on a timeline row focuses the timeline there.
    pub(super) fn click(&mut self, at: Position, model: &Model) {
        if self.detail.is_some() {
            return;
        }
        if let Some(row) = self.list.row_at(at) {
            self.focus = Focus::List;
            if row < self.list_len(model) {
                self.select_row(model, row);
                self.ensure_cache(model);
            }
        } else if let Some(row) = self.timeline.row_at(at) {
            self.focus = Focus::Timeline;
            if row < self.timeline_len() {
                self.timeline.selected = Some(row);
            }
        } else if self.mocks_table.is_some_and(|area| area.contains(at)) {
            self.focus_mocks(model);
        }
    }

    /// The wheel scrolls the pane under the pointer.
    pub(super) fn focus_at(&mut self, at: Position) {
        if self.detail.is_some() {
            return;
        }
        if self.list.contains(at) {
            self.focus = Focus::List;
        } else if self.timeline.contains(at) && self.list.selected.is_some() {
            self.focus = Focus::Timeline;
        }
    }

    /// The call under the cursor: the open one, else the selected timeline row.
    fn selected_call<'m>(&self, model: &'m Model) -> Option<&'m Call> {
        let session = model.session(self.list.selected.as_deref()?)?;
        if let Some(detail) = &self.detail {
            return session.timeline.call(&detail.call_id);
        }
        if self.focus != Focus::Timeline {
            return None;
        }
        let cache = self.cache.as_ref().filter(|c| c.session_id == session.id)?;
        match cache.rows.get(self.timeline_sel())? {
            TimelineRow::Call(i) => session.timeline.calls().get(*i),
            TimelineRow::Step(_) | TimelineRow::Failure => None,
        }
    }

    /// What `copy` takes here: the selected mock as declared, the selected call (input and
    /// output), else the session id.
    pub fn copy_text(&self, model: &Model) -> Option<(String, String)> {
        if self.focus == Focus::Mocks
            && self.detail.is_none()
            && let Some(mock) = self
                .list
                .selected
                .as_deref()
                .and_then(|id| model.session(id))
                .and_then(|s| s.mocks.get(self.mocks.selected))
        {
            let payload = mock.payload.as_ref().map_or(
                serde_json::Value::Null,
                spyglass_protocol::RawJson::to_value,
            );
            let value = serde_json::json!({ "tool": mock.tool, "mock": payload });
            return Some((format!("mock {}", mock.tool), pretty(&value)));
        }
        if let Some(call) = self.selected_call(model) {
            let mut value = serde_json::json!({
                "callId": call.id,
                "tool": call.tool,
                "input": call.input,
                "output": call.outcome,
            });
            if let Some(replay) = &call.replay {
                value["replay"] = serde_json::json!(replay.outcome);
            }
            return Some((format!("call {}", call.id), pretty(&value)));
        }
        let id = self.list.selected.as_deref()?;
        let value = serde_json::json!({ "sessionId": id });
        Some((format!("session {id}"), pretty(&value)))
    }

    fn open_detail(&mut self, model: &Model) {
        let (Some(cache), Some(session)) = (
            &self.cache,
            self.list
                .selected
                .as_deref()
                .and_then(|id| model.session(id)),
        ) else {
            return;
        };
        let Some(TimelineRow::Call(i)) = cache.rows.get(self.timeline_sel()).copied() else {
            return;
        };
        if let Some(call) = session.timeline.calls().get(i) {
            self.detail = Some(Detail {
                session_id: session.id.clone(),
                call_id: call.id.to_string(),
                rev: session.rev,
                pane: TextPane::new(detail_lines(call)),
            });
        }
    }
}
