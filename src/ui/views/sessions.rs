//! The Sessions tab: the session list (newest first, filterable, selection kept by id) on
//! the left; on the right the selected session's Mocks table and its Timeline waterfall, or
//! a call's input and output as pretty JSON. Only visible rows are ever touched.
//!
//! ```text
//! ┌ Sessions 3 ───────────────────────┐┌ Mocks ─────────────────────────────────┐
//! │ ID        USER   STATUS CALLS ... ││ TOOL            MODE     CONSUMED  CALLS│
//! │>ses_3     ana    active     4     ││ nuvem/create    stateful ████░ 1/2     1│
//! │ ses_2     ...                     │└────────────────────────────────────────┘
//! │                                   │┌ Timeline · by start ───────────────────┐
//! │                                   ││ CALL        +0ms ─────────── +12ms  DUR │
//! │                                   ││ tool_a      ███                    3.5ms│
//! └───────────────────────────────────┘└────────────────────────────────────────┘
//! ```

use super::{fit, fmt_age, fmt_ms, row_at, scroll_pane};
use crate::model::{Call, Model, Session, TimelineRow};
use crate::protocol::events::MockMode;
use crate::sanitize::{sanitize, shown, shown_text};
use crate::ui::action::Action;
use crate::ui::app::{App, Watching};
use crate::ui::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Focus {
    #[default]
    List,
    Timeline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallSort {
    #[default]
    Start,
    Duration,
}

/// The selected session's rows in display order, rebuilt only when that session changes.
#[derive(Debug, Clone)]
struct TimelineCache {
    session_id: String,
    rev: u64,
    sort: CallSort,
    rows: Vec<TimelineRow>,
    t0: f64,
    t1: f64,
}

/// The open call detail: its text, prepared once, and how far it is scrolled.
#[derive(Debug, Clone)]
pub struct Detail {
    pub session_id: String,
    pub call_id: String,
    rev: u64,
    /// (is a heading, text)
    lines: Vec<(bool, String)>,
    pub scroll: usize,
}

#[derive(Debug, Clone, Default)]
pub struct SessionsState {
    pub selected: Option<String>,
    pub focus: Focus,
    pub filter: String,
    pub editing_filter: bool,
    pub sort: CallSort,
    pub detail: Option<Detail>,
    /// Absolute positions of matching sessions, ascending; extended as sessions arrive.
    matches: Vec<u64>,
    scanned_to: u64,
    list_offset: usize,
    list_height: usize,
    timeline_sel: usize,
    timeline_offset: usize,
    timeline_height: usize,
    cache: Option<TimelineCache>,
    /// Where the list's and the timeline's rows were last drawn, for mouse clicks.
    list_rows: Rect,
    timeline_rows: Rect,
}

fn matches_filter(session: &Session, needle_lower: &str) -> bool {
    session.id.to_lowercase().contains(needle_lower)
        || session.user.to_lowercase().contains(needle_lower)
}

impl SessionsState {
    fn filtering(&self) -> bool {
        !self.filter.is_empty()
    }

    pub fn list_len(&self, model: &Model) -> usize {
        if self.filtering() {
            self.matches.len()
        } else {
            model.sessions_len()
        }
    }

    pub fn list_row<'m>(&self, model: &'m Model, row: usize) -> Option<&'m Session> {
        if self.filtering() {
            let i = self.matches.len().checked_sub(row + 1)?;
            model.session_abs(self.matches[i])
        } else {
            model.session_newest(row)
        }
    }

    fn row_of(&self, model: &Model, id: &str) -> Option<usize> {
        if self.filtering() {
            let abs = model.abs_of(id)?;
            let i = self.matches.binary_search(&abs).ok()?;
            Some(self.matches.len() - 1 - i)
        } else {
            model.newest_row_of(id)
        }
    }

    pub fn selected_row(&self, model: &Model) -> Option<usize> {
        self.selected
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
        let needle = self.filter.to_lowercase();
        for abs in self.scanned_to.max(first)..model.end_abs() {
            if model
                .session_abs(abs)
                .is_some_and(|s| matches_filter(s, &needle))
            {
                self.matches.push(abs);
            }
        }
        self.scanned_to = model.end_abs();
    }

    /// Keeps the selection on the same session as rows arrive; picks the newest when there
    /// was none or it is gone.
    pub fn after_model_change(&mut self, model: &Model) {
        self.refresh_matches(model, false);
        if self.selected_row(model).is_none() {
            self.select_row(model, 0);
        }
    }

    fn select_row(&mut self, model: &Model, row: usize) {
        let id = self.list_row(model, row).map(|s| s.id.clone());
        if id != self.selected {
            self.timeline_sel = 0;
            self.timeline_offset = 0;
            self.detail = None;
        }
        self.selected = id;
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
            self.refresh_matches(model, true);
        }
        if self.selected.as_deref() != Some(id) {
            self.timeline_sel = 0;
            self.timeline_offset = 0;
        }
        self.detail = None;
        self.selected = Some(id.to_owned());
        self.focus = Focus::Timeline;
        true
    }

    pub fn filter_key(&mut self, key: KeyEvent, model: &Model) {
        match key.code {
            KeyCode::Char(c) => self.filter.push(c),
            KeyCode::Backspace => {
                self.filter.pop();
            }
            _ => return,
        }
        self.refresh_matches(model, true);
        if self.selected_row(model).is_none() {
            self.select_row(model, 0);
        }
    }

    fn ensure_cache(&mut self, model: &Model) {
        let Some(session) = self.selected.as_deref().and_then(|id| model.session(id)) else {
            self.cache = None;
            return;
        };
        if let Some(cache) = &self.cache
            && cache.session_id == session.id
            && cache.rev == session.rev
            && cache.sort == self.sort
        {
            return;
        }
        self.cache = Some(build_timeline(session, self.sort));
    }

    fn timeline_len(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.rows.len())
    }

    pub fn dispatch(&mut self, action: Action, model: &Model) {
        if let Some(detail) = &mut self.detail {
            let page = self.timeline_height;
            let scrolled = scroll_pane(&mut detail.scroll, detail.lines.len(), page, action);
            if !scrolled && matches!(action, Action::Back | Action::Open) {
                self.detail = None;
            }
            return;
        }
        if self.editing_filter {
            match action {
                Action::Open => self.editing_filter = false,
                Action::Back => {
                    self.editing_filter = false;
                    self.filter.clear();
                    self.refresh_matches(model, true);
                }
                _ => {}
            }
            return;
        }
        self.ensure_cache(model);
        match action {
            Action::Filter => {
                self.editing_filter = true;
                self.focus = Focus::List;
            }
            Action::Sort => {
                self.sort = match self.sort {
                    CallSort::Start => CallSort::Duration,
                    CallSort::Duration => CallSort::Start,
                };
                self.timeline_sel = 0;
                self.timeline_offset = 0;
            }
            Action::FocusLeft => self.focus = Focus::List,
            Action::FocusRight if self.selected.is_some() => self.focus = Focus::Timeline,
            Action::Back => match self.focus {
                Focus::Timeline => self.focus = Focus::List,
                Focus::List if self.filtering() => {
                    self.filter.clear();
                    self.refresh_matches(model, true);
                }
                Focus::List => {}
            },
            Action::Open => match self.focus {
                Focus::List if self.selected.is_some() => self.focus = Focus::Timeline,
                Focus::Timeline => self.open_detail(model),
                Focus::List => {}
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
                    let row = step(cur, len, action, self.list_height);
                    self.select_row(model, row);
                }
                Focus::Timeline => {
                    let len = self.timeline_len();
                    self.timeline_sel = step(self.timeline_sel, len, action, self.timeline_height);
                }
            },
            _ => {}
        }
    }

    /// A click on a list row selects it; on a timeline row focuses the timeline there.
    pub fn click(&mut self, at: Position, model: &Model) {
        if self.detail.is_some() {
            return;
        }
        if let Some(row) = row_at(self.list_rows, at, self.list_offset) {
            self.focus = Focus::List;
            if row < self.list_len(model) {
                self.select_row(model, row);
            }
        } else if let Some(row) = row_at(self.timeline_rows, at, self.timeline_offset) {
            self.focus = Focus::Timeline;
            if row < self.timeline_len() {
                self.timeline_sel = row;
            }
        }
    }

    /// The wheel scrolls the pane under the pointer.
    pub fn focus_at(&mut self, at: Position) {
        if self.detail.is_some() {
            return;
        }
        if self.list_rows.contains(at) {
            self.focus = Focus::List;
        } else if self.timeline_rows.contains(at) && self.selected.is_some() {
            self.focus = Focus::Timeline;
        }
    }

    /// The call under the cursor: the open one, else the selected timeline row.
    fn selected_call<'m>(&self, model: &'m Model) -> Option<&'m Call> {
        let session = model.session(self.selected.as_deref()?)?;
        if let Some(detail) = &self.detail {
            return session.timeline.call(&detail.call_id);
        }
        if self.focus != Focus::Timeline {
            return None;
        }
        let cache = self.cache.as_ref().filter(|c| c.session_id == session.id)?;
        match cache.rows.get(self.timeline_sel)? {
            TimelineRow::Call(i) => session.timeline.calls().get(*i),
            TimelineRow::Step(_) => None,
        }
    }

    /// What `copy` takes here: the selected call (input and output), else the session id.
    pub fn copy_text(&self, model: &Model) -> Option<(String, String)> {
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
        let id = self.selected.as_deref()?;
        let value = serde_json::json!({ "sessionId": id });
        Some((format!("session {id}"), pretty(&value)))
    }

    fn open_detail(&mut self, model: &Model) {
        let (Some(cache), Some(session)) = (
            &self.cache,
            self.selected.as_deref().and_then(|id| model.session(id)),
        ) else {
            return;
        };
        let Some(TimelineRow::Call(i)) = cache.rows.get(self.timeline_sel).copied() else {
            return;
        };
        if let Some(call) = session.timeline.calls().get(i) {
            self.detail = Some(Detail {
                session_id: session.id.clone(),
                call_id: call.id.clone(),
                rev: session.rev,
                lines: detail_lines(call),
                scroll: 0,
            });
        }
    }
}

/// Moves a cursor in a list of `len` rows.
pub(crate) fn step(cur: usize, len: usize, action: Action, page: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let last = len - 1;
    let page = page.max(1);
    match action {
        Action::Up => cur.saturating_sub(1),
        Action::Down => (cur + 1).min(last),
        Action::PageUp => cur.saturating_sub(page),
        Action::PageDown => (cur + page).min(last),
        Action::Top => 0,
        Action::Bottom => last,
        _ => cur.min(last),
    }
}

/// Keeps `sel` inside the window `[offset, offset + height)`.
pub(crate) fn scroll_to(offset: usize, sel: usize, height: usize) -> usize {
    if height == 0 {
        return offset;
    }
    if sel < offset {
        sel
    } else if sel >= offset + height {
        sel + 1 - height
    } else {
        offset
    }
}

fn build_timeline(session: &Session, sort: CallSort) -> TimelineCache {
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
        CallSort::Start => session.timeline.rows(),
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

fn pretty<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_else(|e| format!("(cannot show: {e})"))
}

fn detail_lines(call: &Call) -> Vec<(bool, String)> {
    let mut lines = vec![(
        true,
        shown(&format!("{} · {}", call.tool, call.id)).into_owned(),
    )];
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

// ---- rendering ---------------------------------------------------------------------------

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(42), Constraint::Percentage(58)]).areas(area);
    render_list(frame, left, app);
    let state = &mut app.sessions;
    let model = &app.model;
    let theme = &app.theme;
    let session = state.selected.as_deref().and_then(|id| model.session(id));
    let Some(session) = session else {
        let block = Block::default().borders(Borders::ALL).title(" Session ");
        let text = Paragraph::new(Line::from(Span::styled(
            "Select a session on the left.",
            theme.muted(),
        )))
        .block(block);
        frame.render_widget(text, right);
        return;
    };
    if let Some(detail) = &mut state.detail {
        // The call may have changed since it was opened (a replay arrived).
        if detail.rev != session.rev
            && let Some(call) = session.timeline.call(&detail.call_id)
        {
            detail.lines = detail_lines(call);
            detail.rev = session.rev;
        }
        state.timeline_height = right.height.saturating_sub(2) as usize;
        render_detail(frame, right, detail, theme);
        return;
    }
    let mocks_height = (session.mocks.len() as u16 + 3).clamp(4, (right.height / 2).max(4));
    let [mocks_area, timeline_area] =
        Layout::vertical([Constraint::Length(mocks_height), Constraint::Min(3)]).areas(right);
    render_mocks(frame, mocks_area, session, theme);
    state.ensure_cache(model);
    render_timeline(frame, timeline_area, session, state, theme);
}

fn focused_block<'a>(title: Line<'a>, focused: bool, theme: &Theme) -> Block<'a> {
    let border = if focused {
        theme.accent()
    } else {
        theme.border()
    };
    Block::default()
        .borders(Borders::ALL)
        .border_style(border)
        .title(title)
}

fn render_list(frame: &mut Frame, area: Rect, app: &mut App) {
    let state = &mut app.sessions;
    let model = &app.model;
    let theme = &app.theme;
    let len = state.list_len(model);
    let mut title = vec![Span::styled(" Sessions ", theme.title())];
    if state.filtering() || state.editing_filter {
        title.push(Span::raw(format!("{len}/{} ", model.sessions_len())));
        let cursor = if state.editing_filter { "▏" } else { "" };
        title.push(Span::styled(
            format!("/{}{cursor} ", state.filter),
            theme.warn(),
        ));
    } else {
        title.push(Span::raw(format!("{len} ")));
    }
    let block = focused_block(Line::from(title), state.focus == Focus::List, theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if len == 0 {
        let msg = if state.filtering() {
            format!(
                "No session matches “{}”. Esc clears the filter.",
                state.filter
            )
        } else {
            match &app.watching {
                Watching::Embedded => format!(
                    "No sessions yet. An empty test-mode runtime is listening at {url}: \
                     point your tests at it with  export CODESPAR_BASE_URL={url}",
                    url = app.url
                ),
                Watching::Replay { file } => format!("No sessions in {file} yet."),
                _ => format!("No sessions yet. Waiting for {}", app.url),
            }
        };
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(msg, theme.muted())))
                .wrap(ratatui::widgets::Wrap { trim: true }),
            inner,
        );
        return;
    }
    let height = inner.height.saturating_sub(1) as usize;
    state.list_height = height;
    state.list_rows = Rect {
        y: inner.y + 1,
        height: inner.height.saturating_sub(1),
        ..inner
    };
    let sel = state.selected_row(model).unwrap_or(0);
    state.list_offset = scroll_to(state.list_offset.min(len.saturating_sub(1)), sel, height);
    let now = app.clock.wall_ms();
    let visible = state.list_offset..len.min(state.list_offset + height);
    // The user column is as wide as the longest user on screen (4 to 16); the id column
    // takes the rest, so neither is cut while there is room for both.
    let user_w = visible
        .clone()
        .filter_map(|row| state.list_row(model, row))
        .map(|s| s.user.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 16) as u16;
    let rows = visible.filter_map(|row| {
        let s = state.list_row(model, row)?;
        // A marker as well as the colour, so the selection survives a monochrome terminal.
        let mark = if row == sel { "›" } else { " " };
        let ext = if s.external { "↗" } else { "" };
        let id = format!("{mark}{ext}{}", shown(&s.id));
        let status_style = match s.status {
            crate::model::SessionStatus::Failed => theme.error(),
            crate::model::SessionStatus::Active => theme.ok(),
            _ => theme.muted(),
        };
        let env_style = if s.envelopes > 0 {
            theme.warn()
        } else {
            Style::default()
        };
        let r = Row::new(vec![
            Cell::from(id),
            Cell::from(shown(&s.user).into_owned()),
            Cell::from(Span::styled(s.status.as_str(), status_style)),
            Cell::from(Line::from(s.calls.to_string()).right_aligned()),
            Cell::from(
                Line::from(Span::styled(s.envelopes.to_string(), env_style)).right_aligned(),
            ),
            Cell::from(Line::from(fmt_age(now, s.last_activity_ms)).right_aligned()),
        ]);
        Some(if row == sel {
            r.style(if state.focus == Focus::List {
                theme.selection()
            } else {
                Style::default().add_modifier(Modifier::REVERSED)
            })
        } else {
            r
        })
    });
    let header = Row::new([" ID", "USER", "STATUS", "CALLS", "ENV", "LAST"]).style(theme.muted());
    let table = Table::new(
        rows,
        [
            Constraint::Min(9),
            Constraint::Length(user_w),
            Constraint::Length(9),
            Constraint::Length(5),
            Constraint::Length(3),
            Constraint::Length(4),
        ],
    )
    .header(header);
    frame.render_widget(table, inner);
}

fn gauge(consumed: u32, entries: u32, width: usize) -> String {
    let filled = if entries == 0 {
        0
    } else {
        ((consumed.min(entries) as usize * width) + entries as usize / 2) / entries as usize
    };
    format!(
        "{}{} {consumed}/{entries}",
        "█".repeat(filled),
        "░".repeat(width - filled)
    )
}

fn render_mocks(frame: &mut Frame, area: Rect, session: &Session, theme: &Theme) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(" Mocks ", theme.title()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if session.mocks.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled("No mocks declared.", theme.muted())),
            inner,
        );
        return;
    }
    let visible = inner.height.saturating_sub(1) as usize;
    let rows = session.mocks.iter().take(visible).map(|m| {
        let (mode, consumed) = match m.mode {
            MockMode::Stateful => ("stateful", gauge(m.consumed, m.entries, 6)),
            MockMode::Static => ("static", "—".to_owned()),
        };
        let (note, style) = if m.exhausted() {
            (" exhausted", theme.error())
        } else if m.never_called() {
            (" ○ never called", theme.muted())
        } else {
            ("", Style::default())
        };
        let gauge_style = if m.exhausted() {
            theme.error()
        } else {
            theme.bar()
        };
        Row::new(vec![
            Cell::from(sanitize(&m.tool).into_owned()),
            Cell::from(mode),
            Cell::from(Line::from(vec![
                Span::styled(consumed, gauge_style),
                Span::raw(note),
            ])),
            Cell::from(Line::from(m.calls.to_string()).right_aligned()),
        ])
        .style(style)
    });
    let header = Row::new(["TOOL", "MODE", "CONSUMED", "CALLS"]).style(theme.muted());
    let table = Table::new(
        rows,
        [
            Constraint::Min(14),
            Constraint::Length(8),
            Constraint::Length(26),
            Constraint::Length(5),
        ],
    )
    .header(header);
    frame.render_widget(table, inner);
}

const DUR_W: usize = 7;
// The longest envelope code, `approval_required`, fits whole.
const OUT_W: usize = 17;

fn render_timeline(
    frame: &mut Frame,
    area: Rect,
    session: &Session,
    state: &mut SessionsState,
    theme: &Theme,
) {
    let sort = match state.sort {
        CallSort::Start => "by start",
        CallSort::Duration => "by duration",
    };
    let title = Line::from(vec![
        Span::styled(" Timeline ", theme.title()),
        Span::styled(format!("· {sort} (s) "), theme.muted()),
    ]);
    let block = focused_block(title, state.focus == Focus::Timeline, theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(cache) = &state.cache else {
        return;
    };
    if cache.rows.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled("No calls yet.", theme.muted())),
            inner,
        );
        return;
    }
    let width = inner.width as usize;
    // The label gives way first: the bars are the point of a waterfall.
    let label_w = (width / 3).clamp(12, 28);
    let bar_w = width.saturating_sub(label_w + DUR_W + OUT_W + 4).max(4);
    let span = (cache.t1 - cache.t0).max(f64::EPSILON);
    let height = inner.height.saturating_sub(1) as usize;
    state.timeline_height = height;
    state.timeline_rows = Rect {
        y: inner.y + 1,
        height: inner.height.saturating_sub(1),
        ..inner
    };
    let len = cache.rows.len();
    state.timeline_sel = state.timeline_sel.min(len - 1);
    state.timeline_offset = scroll_to(
        state.timeline_offset.min(len - 1),
        state.timeline_sel,
        height,
    );

    let mut lines = Vec::with_capacity(height + 1);
    let left = "+0ms";
    let right = format!("+{}", fmt_ms(cache.t1 - cache.t0));
    let axis_fill = bar_w.saturating_sub(left.len() + right.chars().count() + 2);
    lines.push(Line::from(vec![
        Span::styled(format!(" {:<label_w$} ", "STEP / CALL"), theme.muted()),
        Span::styled(
            format!("{left} {} {right}", "─".repeat(axis_fill)),
            theme.muted(),
        ),
        Span::styled(
            format!(" {:>DUR_W$} {:<OUT_W$}", "DUR", "OUTCOME"),
            theme.muted(),
        ),
    ]));
    let calls = session.timeline.calls();
    for (row, entry) in cache
        .rows
        .iter()
        .enumerate()
        .skip(state.timeline_offset)
        .take(height)
    {
        let (label, start, dur, outcome, bar_char, bar_style) = match *entry {
            TimelineRow::Step(i) => {
                let Some(s) = session.timeline.steps.get(i) else {
                    continue;
                };
                let label = format!("▾ step {} · {}", s.iteration, s.finish_reason);
                let out = Span::styled(format!("{} tokens", s.tokens_total), theme.muted());
                (
                    label,
                    Some(s.start_ms),
                    s.duration_ms,
                    out,
                    "─",
                    theme.muted(),
                )
            }
            TimelineRow::Call(i) => {
                let Some(c) = calls.get(i) else {
                    continue;
                };
                let indent = if c.iteration.is_some() && state.sort == CallSort::Start {
                    "  "
                } else {
                    ""
                };
                let code = c.envelope_code();
                let mut text = code.unwrap_or("ok").to_owned();
                if let Some(replay) = &c.replay {
                    text = format!(
                        "{text} → {}",
                        replay.outcome.envelope().map_or("ok", |e| e.code())
                    );
                }
                let style = theme.outcome(
                    c.replay
                        .as_ref()
                        .map_or(code, |r| r.outcome.envelope().map(|e| e.code())),
                );
                let bar_style = if code.is_some() {
                    theme.outcome(code)
                } else {
                    theme.bar()
                };
                (
                    format!("{indent}{}", c.tool),
                    c.start_ms,
                    c.duration_ms,
                    Span::styled(fit(&text, OUT_W), style),
                    "█",
                    bar_style,
                )
            }
        };
        let bar = match start {
            Some(start) => {
                let x = (((start - cache.t0) / span) * bar_w as f64).floor() as usize;
                let x = x.min(bar_w - 1);
                let w = ((dur / span) * bar_w as f64).round().max(1.0) as usize;
                let w = w.min(bar_w - x);
                vec![
                    Span::raw(" ".repeat(x)),
                    Span::styled(bar_char.repeat(w), bar_style),
                    Span::raw(" ".repeat(bar_w - x - w)),
                ]
            }
            None => vec![Span::styled(
                format!("{:<bar_w$}", "(no start)"),
                theme.muted(),
            )],
        };
        let mut spans = vec![Span::raw(format!("{:<label_w$} ", fit(&label, label_w)))];
        spans.extend(bar);
        spans.push(Span::raw(format!(" {:>DUR_W$} ", fmt_ms(dur))));
        spans.push(outcome);
        let selected = row == state.timeline_sel && state.focus == Focus::Timeline;
        if selected {
            spans.insert(0, Span::raw("›"));
        } else {
            spans.insert(0, Span::raw(" "));
        }
        let mut line = Line::from(spans);
        if selected {
            line = line.style(theme.selection());
        }
        lines.push(line);
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

fn render_detail(frame: &mut Frame, area: Rect, detail: &Detail, theme: &Theme) {
    let title = Line::from(vec![
        Span::styled(" Call ", theme.title()),
        Span::styled(
            format!(
                "· line {}/{} · ↑↓ PgUp PgDn scroll · Esc back ",
                detail.scroll + 1,
                detail.lines.len()
            ),
            theme.muted(),
        ),
    ]);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.accent())
        .title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let width = (inner.width as usize).max(1);
    let height = inner.height as usize;
    // Wrap only what is shown: scroll counts source lines, so a huge value costs nothing
    // until it is on screen.
    let mut out: Vec<Line> = Vec::with_capacity(height);
    'lines: for (heading, text) in detail.lines.iter().skip(detail.scroll) {
        let style = if *heading {
            theme.title()
        } else {
            Style::default()
        };
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            out.push(Line::from(""));
        }
        for chunk in chars.chunks(width) {
            if out.len() >= height {
                break 'lines;
            }
            out.push(Line::from(Span::styled(
                chunk.iter().collect::<String>(),
                style,
            )));
        }
        if out.len() >= height {
            break;
        }
    }
    frame.render_widget(Paragraph::new(out), inner);
}
