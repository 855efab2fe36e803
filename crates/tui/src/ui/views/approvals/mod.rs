//! The Approvals tab: calls held for a human, pending first (oldest first, with the time
//! left until `expires_at` counting down on the app's clock), then decided ones (newest
//! first) with their decision and the replay's outcome beside the original call. `a`/`d`
//! open a confirm prompt (`prompt.rs`) naming the tool and the input fields the rule
//! looked at, for the approval on screen only and only while it is pending; Enter opens
//! one approval (its input, rule and the session's recent calls), Esc goes back. The
//! decision goes out through the app, never into the model.
//!
//! ```text
//! ┌ Approvals · 1 pending · a approve · d deny · y copy ─────────────────────────────┐
//! │ SESSION       TOOL                  INPUT          RULE          STATE    REPLAY │
//! │›ses_01        asaas/create_payment  {"value":5}    payments      4m 59s          │
//! │ ses_00        asaas/create_payment  {"value":9}    payments      approved → {"id"…│
//! ├──────────────────────────────────────────────────────────────────────────────────┤
//! │ apr_… · call call_… · requested … · expires … (or the prompt while confirming)   │
//! └──────────────────────────────────────────────────────────────────────────────────┘
//! ```

mod prompt;

use super::{
    Cx, Drawn, Effect, ListCursor, Pane, Placed, TextKey, View, fit, hints, key_cap, scroll_hint,
    wrap_words,
};
use crate::model::{Approval, Model};
use crate::ui::action::{Action, Scope};
use crate::ui::safe;
use crate::ui::theme::Theme;
use crate::ui::views::fitted_table;
use crate::ui::views::pane::{PaneKey, PaneLine, TextPane};
use crate::ui::views::query::Query;
use crate::ui::views::{
    Col, fit_columns_marked, fit_name, header, marked_header, placed_list, plural, shown_cells,
};
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row};
use spyglass_protocol::events::Outcome;
use spyglass_protocol::mask::mask;
use spyglass_protocol::rest::{ApprovalStatus, ApprovalView};
use spyglass_protocol::sanitize::{sanitize, shown, shown_text};

use prompt::prompt_lines;

/// An approve or deny waiting for `y`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub approval_id: String,
    /// The other marked approvals the same decision goes to (empty for one).
    pub also: Vec<String>,
    pub approve: bool,
    pub note: String,
    pub editing_note: bool,
}

/// One approval opened: its lines (masked and sanitised once, when built) and where the
/// pane is scrolled to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDetail {
    pub approval_id: String,
    pub pane: TextPane,
}

/// How many of the session's calls the detail lists (the newest).
const RECENT_CALLS: usize = 6;

#[derive(Debug, Clone, Default)]
pub struct ApprovalsState {
    /// Selection by approval id, so rows arriving never move it.
    pub list: ListCursor<String>,
    pub prompt: Option<Prompt>,
    pub detail: Option<ApprovalDetail>,
    /// Display order (ids): pending oldest first, then decided newest first.
    rows: Vec<String>,
    /// How many of `rows` lead as pending.
    pending_rows: usize,
    built_rev: Option<u64>,
    /// The rows shown are those this filter keeps (see `query::Query`).
    pub filter: String,
    pub editing_filter: bool,
    /// Approvals marked to be decided together, in the order they were marked.
    pub marked: Vec<String>,
}

/// Whether the filter keeps an approval: `status:`, `session:`, `tool:`, `rule:`, `id:`,
/// or text in its id, session, tool, rule or its INPUT cell as shown (`6000` finds the
/// call whose value is 6000).
fn keeps(query: &Query, a: &Approval) -> bool {
    let input = input_cell(a);
    query.matches(
        &[
            ("status", status_word(a.status)),
            ("session", &a.session_id),
            ("tool", &a.tool),
            ("rule", &a.rule_id),
            ("id", &a.id),
        ],
        &[&a.id, &a.session_id, &a.tool, &a.rule_id, &input],
    )
}

/// Whole seconds until `expires_ms` at `now_ms`; `None` once past (or unreadable).
pub fn seconds_left(expires_ms: Option<f64>, now_ms: f64) -> Option<u64> {
    let left = (expires_ms? - now_ms) / 1000.0;
    (left > 0.0).then(|| left.ceil() as u64)
}

/// `1h 02m`, `4m 05s`, `59s`.
pub fn fmt_left(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, (secs % 3600) / 60),
    }
}

/// A replay's outcome in one cell: the result's JSON, or the envelope's code.
pub fn outcome_summary(outcome: &Outcome) -> (String, Option<&str>) {
    match outcome {
        Outcome::Result(raw) => (shown(raw.get()).into_owned(), None),
        Outcome::Envelope(env) => (env.code().to_owned(), Some(env.code())),
    }
}

impl ApprovalsState {
    pub fn editing_note(&self) -> bool {
        self.prompt.as_ref().is_some_and(|p| p.editing_note)
    }

    pub fn start_note(&mut self) {
        if let Some(prompt) = &mut self.prompt {
            prompt.editing_note = true;
        }
    }

    /// A key while typing the note: `open` keeps it and returns to the prompt, `back`
    /// drops it and returns to the prompt.
    fn note_key(&mut self, key: TextKey) -> Effect {
        let Some(prompt) = &mut self.prompt else {
            return Effect::None;
        };
        match key {
            TextKey::Keep => prompt.editing_note = false,
            TextKey::Discard => {
                prompt.editing_note = false;
                prompt.note.clear();
            }
            TextKey::Quit => return Effect::Quit,
            TextKey::Edit(key) => match key.code {
                KeyCode::Char(c) => prompt.note.push(c),
                KeyCode::Backspace => {
                    prompt.note.pop();
                }
                _ => {}
            },
            TextKey::Ignore => {}
        }
        Effect::None
    }

    /// A key while the confirm prompt is open: confirm sends, note starts typing one, any
    /// other key cancels.
    fn prompt_key(&mut self, key: KeyEvent, cx: &Cx) -> Effect {
        match cx.keymap.lookup(&[Scope::Prompt], &key) {
            Some(Action::Confirm) => match self.prompt.take() {
                Some(p) if !p.also.is_empty() => {
                    self.marked.clear();
                    let mut ids = vec![p.approval_id];
                    ids.extend(p.also);
                    Effect::DecideAll {
                        approval_ids: ids,
                        approve: p.approve,
                        note: p.note,
                    }
                }
                Some(p) => Effect::Decide {
                    approval_id: p.approval_id,
                    approve: p.approve,
                    note: p.note,
                },
                None => Effect::None,
            },
            Some(Action::Note) => {
                self.start_note();
                Effect::None
            }
            _ => {
                self.prompt = None;
                Effect::Notice("cancelled: nothing sent".into())
            }
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Rebuilds the row order when the approvals changed, and keeps the selection on the
    /// same approval (the first row when there was none or it is gone).
    pub fn after_model_change(&mut self, model: &Model) {
        // The open approval follows its decision and its session's calls; one approval's
        // lines are cheap to build.
        if let Some(detail) = &mut self.detail {
            match model.approvals.get(&detail.approval_id) {
                Some(a) => detail.pane.set_lines(detail_pane_lines(a, model)),
                None => self.detail = None,
            }
        }
        let approvals = &model.approvals;
        // Most frames are not about approvals: then there is nothing to do at all.
        if self.built_rev == Some(approvals.rev()) {
            return;
        }
        // Where the selection was among the pending rows: a decision moves its row down to
        // the decided ones, and the cursor stays at this place in the pending list.
        let was_pending_at = self
            .list
            .selected
            .as_ref()
            .and_then(|id| self.rows.iter().position(|r| r == id))
            .filter(|row| *row < self.pending_rows);
        let query = Query::parse(&self.filter);
        self.rows.clear();
        self.rows.extend(
            approvals
                .iter()
                .filter(|a| a.status == ApprovalStatus::Pending && keeps(&query, a))
                .map(|a| a.id.clone()),
        );
        let pending_now = self.rows.len();
        self.rows.extend(
            approvals
                .iter()
                .rev()
                .filter(|a| a.status != ApprovalStatus::Pending && keeps(&query, a))
                .map(|a| a.id.clone()),
        );
        self.built_rev = Some(approvals.rev());
        self.pending_rows = pending_now;
        let decided = self
            .list
            .selected
            .as_ref()
            .and_then(|id| approvals.get(id))
            .is_some_and(|a| a.status != ApprovalStatus::Pending);
        if let Some(row) = was_pending_at
            && decided
            && pending_now > 0
        {
            self.list.selected = self.rows.get(row.min(pending_now - 1)).cloned();
        }
        let still_there = self
            .list
            .selected
            .as_ref()
            .is_some_and(|id| self.rows.contains(id));
        if !still_there {
            self.list.selected = self.rows.first().cloned();
        }
    }

    /// Shows one approval (a jump): a filter hiding it is cleared, an open pane closed.
    pub fn select(&mut self, id: &str, model: &Model) {
        if !self.rows.iter().any(|r| r == id) {
            self.filter.clear();
            self.editing_filter = false;
            self.refilter(model);
        }
        self.detail = None;
        self.prompt = None;
        self.list.selected = Some(id.to_owned());
    }

    /// Approve or deny with rows marked: one prompt for the marked ones still pending;
    /// the decided ones are left out and said so.
    fn prompt_marked(&mut self, approve: bool, model: &Model) -> Option<String> {
        let pending: Vec<String> = self
            .marked
            .iter()
            .filter(|id| {
                model
                    .approvals
                    .get(id)
                    .is_some_and(|a| a.status == ApprovalStatus::Pending)
            })
            .cloned()
            .collect();
        let skipped = self.marked.len() - pending.len();
        let Some((first, rest)) = pending.split_first() else {
            return Some(format!(
                "none of the {} marked calls is still pending: nothing to decide",
                self.marked.len()
            ));
        };
        self.prompt = Some(Prompt {
            approval_id: first.clone(),
            also: rest.to_vec(),
            approve,
            note: String::new(),
            editing_note: false,
        });
        (skipped > 0).then(|| {
            let calls = plural(skipped, "marked call");
            let verb = if skipped == 1 { "was" } else { "were" };
            format!("{calls} {verb} already decided: left out")
        })
    }

    /// The filter changed: the rows are matched again.
    fn refilter(&mut self, model: &Model) {
        self.built_rev = None;
        self.after_model_change(model);
    }

    /// A key while the filter is typed.
    fn filter_key(&mut self, key: TextKey, model: &Model) -> Effect {
        match key {
            TextKey::Keep => self.editing_filter = false,
            TextKey::Discard => {
                self.editing_filter = false;
                self.filter.clear();
                self.refilter(model);
            }
            TextKey::Quit => return Effect::Quit,
            TextKey::Edit(key) => {
                if super::edit_filter(&mut self.filter, key) {
                    self.refilter(model);
                }
            }
            TextKey::Ignore => {}
        }
        Effect::None
    }

    fn selected_row(&self) -> usize {
        self.list
            .selected
            .as_ref()
            .and_then(|id| self.rows.iter().position(|r| r == id))
            .unwrap_or(0)
    }

    pub fn selected<'m>(&self, model: &'m Model) -> Option<&'m Approval> {
        model.approvals.get(self.list.selected.as_deref()?)
    }

    /// Navigation and `a`/`d`; a line for the status bar when there is something to say
    /// (e.g. the selected approval is already decided).
    fn dispatch(&mut self, action: Action, model: &Model, now_ms: f64) -> Option<String> {
        if let Some(detail) = &mut self.detail {
            match detail.pane.on_action(action) {
                PaneKey::Used => return None,
                PaneKey::Close => {
                    self.detail = None;
                    return None;
                }
                PaneKey::Other => {}
            }
        }
        let row = match action {
            Action::Filter => {
                self.editing_filter = true;
                return None;
            }
            Action::Back if !self.filter.is_empty() => {
                self.filter.clear();
                self.refilter(model);
                return None;
            }
            Action::Back if !self.marked.is_empty() => {
                let n = self.marked.len();
                self.marked.clear();
                return Some(format!("{} cleared", plural(n, "mark")));
            }
            Action::Open => {
                let a = self.selected(model)?;
                self.detail = Some(ApprovalDetail {
                    approval_id: a.id.clone(),
                    pane: TextPane::new(detail_pane_lines(a, model)),
                });
                return None;
            }
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => self.list.step(self.selected_row(), self.rows.len(), action),
            Action::Mark => {
                let id = self.list.selected.clone()?;
                match self.marked.iter().position(|m| *m == id) {
                    Some(i) => {
                        self.marked.remove(i);
                    }
                    None => self.marked.push(id),
                }
                // On to the next row, so a run of rows is marked by repeating the key.
                self.list
                    .step(self.selected_row(), self.rows.len(), Action::Down)
            }
            Action::Approve | Action::Deny if !self.marked.is_empty() => {
                return self.prompt_marked(action == Action::Approve, model);
            }
            Action::Approve | Action::Deny => {
                let approve = action == Action::Approve;
                // The approval on screen: the one open in the pane, else the selected row
                // (after a decision the list's selection moves on, the pane does not).
                let shown = match &self.detail {
                    Some(detail) => model.approvals.get(&detail.approval_id),
                    None => self.selected(model),
                };
                let Some(approval) = shown else {
                    return Some("no approval selected".into());
                };
                if approval.status != ApprovalStatus::Pending {
                    return Some(format!(
                        "{} is already {}: only a pending call can be decided",
                        approval.id,
                        status_word(approval.status)
                    ));
                }
                self.prompt = Some(Prompt {
                    approval_id: approval.id.clone(),
                    also: vec![],
                    approve,
                    note: String::new(),
                    editing_note: false,
                });
                // Past its expiry by our clock the runtime will most likely answer 410;
                // it is the judge, so the request still goes out if confirmed.
                if seconds_left(approval.expires_ms, now_ms).is_none() {
                    return Some(format!("{} looks expired by this clock", approval.id));
                }
                return None;
            }
            _ => return None,
        };
        self.list.selected = self.rows.get(row).cloned();
        None
    }
}

impl View for ApprovalsState {
    fn after_model_change(&mut self, model: &Model) {
        ApprovalsState::after_model_change(self, model);
    }

    fn on_key(&mut self, key: KeyEvent, cx: &Cx) -> Option<Effect> {
        if self.prompt.is_none()
            && let Some(detail) = &mut self.detail
            && detail.pane.typing()
        {
            match super::text_key(cx.keymap, key) {
                TextKey::Quit => return Some(Effect::Quit),
                other => detail.pane.search_key(other),
            }
            return Some(Effect::None);
        }
        if self.editing_note() {
            Some(self.note_key(super::text_key(cx.keymap, key)))
        } else if self.editing_filter {
            Some(self.filter_key(super::text_key(cx.keymap, key), cx.model))
        } else if self.prompt.is_some() {
            Some(self.prompt_key(key, cx))
        } else {
            None
        }
    }

    fn on_action(&mut self, action: Action, cx: &Cx) -> Effect {
        self.dispatch(action, cx.model, cx.now_ms)
            .map_or(Effect::None, Effect::Notice)
    }

    fn on_click(&mut self, at: Position, _model: &Model) -> Effect {
        if self.detail.is_some() {
            return Effect::None;
        }
        if let Some(row) = self.list.row_at(at)
            && let Some(id) = self.rows.get(row)
        {
            self.list.selected = Some(id.clone());
            self.prompt = None;
        }
        Effect::None
    }

    fn on_hide(&mut self) {
        self.prompt = None;
    }

    fn pane_open(&self) -> bool {
        self.detail.is_some() && self.prompt.is_none()
    }

    fn render(&self, frame: &mut Frame, area: Rect, cx: &Cx) -> Drawn {
        // The footer grows with what it says (a prompt wraps rather than being cut), up
        // to half the tab.
        let footer_lines = self.footer_lines(cx, area.width.saturating_sub(2) as usize);
        let footer_h = if self.detail.is_some() && self.prompt.is_none() {
            // The open approval already says all the footer would.
            0
        } else {
            (footer_lines.len() as u16 + 2).clamp(4, (area.height / 2).max(4))
        };
        let [table_area, footer] =
            Layout::vertical([Constraint::Min(4), Constraint::Length(footer_h)]).areas(area);
        let mut drawn = Drawn::default();
        if let Some(detail) = &self.detail {
            drawn.push(render_detail(frame, table_area, detail, cx));
        } else if let Some(placed) = self.render_table(frame, table_area, cx) {
            drawn.push(placed);
        }
        if footer_h > 0 {
            self.render_footer(frame, footer, footer_lines, cx);
        }
        drawn
    }

    fn place(&mut self, drawn: &Drawn, _model: &Model) {
        self.list.place(drawn.get(Pane::List));
        if let Some(detail) = &mut self.detail {
            detail.pane.place(drawn.get(Pane::Detail));
        }
    }

    /// What `copy` takes here: the selected approval as the REST API shows it.
    fn copy_text(&self, model: &Model) -> Option<(String, String)> {
        let a = self.selected(model)?;
        let view = ApprovalView {
            id: a.id.clone(),
            session_id: a.session_id.clone(),
            call_id: a.call_id.clone(),
            tool: a.tool.clone(),
            input: a.input.clone(),
            rule_id: a.rule_id.clone(),
            status: a.status,
            requested_at: a.requested_at.clone(),
            expires_at: a.expires_at.clone(),
            decided_by: a.decided_by.clone(),
            note: a.note.clone(),
            replay: a.replay.clone(),
        };
        let text = serde_json::to_string_pretty(&view).ok()?;
        Some((format!("approval {}", a.id), text))
    }
}

fn status_word(status: ApprovalStatus) -> &'static str {
    match status {
        ApprovalStatus::Pending => "pending",
        ApprovalStatus::Approved => "approved",
        ApprovalStatus::Denied => "denied",
        ApprovalStatus::Expired => "expired",
        ApprovalStatus::Cancelled => "cancelled",
    }
}

// ---- rendering ---------------------------------------------------------------------------

impl ApprovalsState {
    fn render_table(&self, frame: &mut Frame, area: Rect, cx: &Cx) -> Option<Placed> {
        // One row's cells as text, measured before any is drawn.
        struct Cells {
            row: usize,
            session: String,
            tool: String,
            input: String,
            rule: String,
            state: Span<'static>,
            replay: (String, Style),
            style: Style,
        }
        let theme = cx.theme;
        let model = cx.model;
        let pending = model.approvals.pending_count();
        let keys = hints(
            cx.keymap,
            &[
                (Action::Open, "open"),
                (Action::Approve, "approve"),
                (Action::Deny, "deny"),
                (Action::Copy, "copy"),
            ],
        );
        let mut title = vec![
            Span::styled(" Approvals ", theme.title()),
            Span::styled(format!("· {pending} pending "), theme.warn()),
        ];
        if !self.filter.is_empty() || self.editing_filter {
            let cursor = if self.editing_filter { "▏" } else { "" };
            title.push(Span::raw(format!(
                "· {}/{} ",
                self.rows.len(),
                model.approvals.len()
            )));
            title.push(Span::styled(
                format!("/{}{cursor} ", self.filter),
                theme.warn(),
            ));
        }
        if !self.marked.is_empty() {
            title.push(Span::styled(
                format!("· {} marked ", self.marked.len()),
                theme.accent(),
            ));
        }
        title.push(Span::styled(format!("· {keys} "), theme.muted()));
        let title = safe::line(title);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border())
            .title(title);
        let inner = block.inner(area);
        frame.render_widget(block, area);
        if self.rows.is_empty() {
            let msg = if let (true, Some(trouble)) = (self.filter.is_empty(), &cx.trouble) {
                format!("No approvals. {trouble}")
            } else if self.filter.is_empty() {
                "No approvals yet. Calls a policy holds for a human appear here.".to_owned()
            } else {
                format!(
                    "No approval matches “{}” (status:X session:X tool:X rule:X, -word \
                     excludes). {} clears the filter.",
                    self.filter,
                    key_cap(cx.keymap, Action::Back)
                )
            };
            let mut text = Paragraph::new(safe::span(msg, theme.muted()));
            if !self.filter.is_empty() || cx.trouble.is_some() {
                text = text.wrap(ratatui::widgets::Wrap { trim: true });
            }
            frame.render_widget(text, inner);
            return None;
        }
        let height = inner.height.saturating_sub(1) as usize;
        let sel = self.selected_row();
        let offset = self.list.window(self.rows.len(), sel, height);
        let now = cx.now_ms;
        // Each row's cells as text first, so every column but INPUT is as wide as what it
        // shows (or its header); INPUT takes what is left.
        let visible: Vec<Cells> = self
            .rows
            .iter()
            .enumerate()
            .skip(offset)
            .take(height)
            .filter_map(|(row, id)| {
                let a = model.approvals.get(id)?;
                let cursor = if row == sel { "›" } else { " " };
                let mark = if self.marked.contains(id) {
                    format!("{cursor}●")
                } else {
                    cursor.to_owned()
                };
                let (state, replay, style) = cells(a, now, theme);
                Some(Cells {
                    row,
                    session: format!("{mark}{}", shown(&a.session_id)),
                    tool: sanitize(&a.tool).into_owned(),
                    input: input_cell(a),
                    rule: sanitize(&a.rule_id).into_owned(),
                    state,
                    replay,
                    style,
                })
            })
            .collect();
        let width = inner.width as usize;
        let col = |header: &str, max: usize, f: &dyn Fn(&Cells) -> usize| {
            visible
                .iter()
                .map(f)
                .max()
                .unwrap_or(0)
                .max(header.chars().count())
                .min(max)
        };
        let count = |t: &str| t.chars().count();
        // Cut with an ellipsis down to a least width, or shown whole (STATE): when even
        // those do not fit, whole columns give way, the rule first, then the replay, the
        // session and the input; the tool and the state stay. INPUT keeps a quarter.
        let cut = |want: usize, min: usize, priority: u8| Col {
            want,
            min: want.min(min),
            priority,
        };
        let cols = [
            cut(col(" SESSION", 28, &|c| count(&c.session)), 10, 3),
            cut(col("TOOL", 32, &|c| count(&c.tool)), 12, 0),
            cut((width / 4).max(8), 8, 2),
            cut(col("RULE", 28, &|c| count(&c.rule)), 10, 5),
            Col::whole(col("STATE", 10, &|c| c.state.width()), 1),
            cut(
                col("REPLAY", (width / 4).max(6), &|c| count(&c.replay.0)),
                6,
                4,
            ),
        ];
        // Room to spare goes to the input column.
        let widths = fit_columns_marked(&cols, width, 2);
        // A column narrower than its widest value says so in its header (`TOOL…`); the
        // widths above are capped, so the mark compares with the values themselves.
        let names: Vec<String> = [
            (
                " SESSION",
                0,
                col(" SESSION", usize::MAX, &|c| count(&c.session)),
            ),
            ("TOOL", 1, col("TOOL", usize::MAX, &|c| count(&c.tool))),
            ("INPUT", 2, 0),
            ("RULE", 3, col("RULE", usize::MAX, &|c| count(&c.rule))),
            ("STATE", 4, 0),
            (
                "REPLAY",
                5,
                col("REPLAY", usize::MAX, &|c| count(&c.replay.0)),
            ),
        ]
        .iter()
        .map(|&(name, i, want)| header(name, &Col { want, ..cols[i] }, widths[i]))
        .collect();
        let keep = |cells: Vec<Cell<'static>>| shown_cells(cells, &widths);
        let w = |i: usize| widths[i].unwrap_or(0);
        let (session_w, tool_w, input_w, rule_w, replay_w) = (w(0), w(1), w(2), w(3), w(5));
        let rows = visible.into_iter().map(|c| {
            let r = Row::new(keep(vec![
                Cell::from(fit(&c.session, session_w)),
                Cell::from(fit_name(&c.tool, tool_w)),
                Cell::from(fit(&c.input, input_w)),
                Cell::from(fit(&c.rule, rule_w)),
                Cell::from(c.state),
                Cell::from(Span::styled(fit(&c.replay.0, replay_w), c.replay.1)),
            ]))
            .style(c.style);
            if c.row == sel {
                r.style(theme.selection())
            } else {
                r
            }
        });
        let header = Row::new(marked_header(
            names.into_iter().map(Cell::from).collect(),
            &widths,
        ))
        .style(theme.muted());
        let table = fitted_table(rows, header, &widths);
        frame.render_widget(table, inner);
        Some(placed_list(
            frame,
            area,
            (Pane::List, inner),
            offset,
            self.rows.len(),
            theme,
        ))
    }

    /// The footer's lines at `width`: the prompt while confirming, else the selected
    /// approval's one-line detail.
    fn footer_lines(&self, cx: &Cx, width: usize) -> Vec<Line<'static>> {
        match (&self.prompt, self.selected(cx.model)) {
            (Some(prompt), _) => prompt_lines(prompt, cx, width),
            (None, Some(a)) => detail_lines(a, cx.theme, width),
            (None, None) => vec![],
        }
    }

    fn render_footer(&self, frame: &mut Frame, area: Rect, lines: Vec<Line<'static>>, cx: &Cx) {
        let theme = cx.theme;
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(if self.prompt.is_some() {
                theme.accent()
            } else {
                theme.border()
            });
        let inner = block.inner(area);
        frame.render_widget(block, area);
        frame.render_widget(Paragraph::new(safe::lines(lines)), inner);
    }
}

/// The STATE and REPLAY cells of a row (REPLAY as text and style, fitted by the table),
/// and the row's style.
fn cells(a: &Approval, now: f64, theme: &Theme) -> (Span<'static>, (String, Style), Style) {
    match a.status {
        ApprovalStatus::Pending => match seconds_left(a.expires_ms, now) {
            Some(left) => (
                Span::styled(fmt_left(left), theme.warn()),
                (String::new(), Style::default()),
                Style::default(),
            ),
            // Greyed as soon as our clock says so, before the runtime's event.
            None => (
                Span::styled("expired", theme.muted()),
                (String::new(), Style::default()),
                theme.muted(),
            ),
        },
        ApprovalStatus::Approved => {
            let replay = match &a.replay {
                Some(outcome) => {
                    let (text, code) = outcome_summary(outcome);
                    (format!("→ {text}"), theme.outcome(code))
                }
                None => ("replaying…".to_owned(), theme.muted()),
            };
            (
                Span::styled("approved", theme.ok()),
                replay,
                Style::default(),
            )
        }
        ApprovalStatus::Denied => (
            Span::styled("denied", theme.error()),
            ("—".to_owned(), theme.muted()),
            Style::default(),
        ),
        ApprovalStatus::Expired => (
            Span::styled("expired", theme.muted()),
            ("—".to_owned(), theme.muted()),
            theme.muted(),
        ),
        ApprovalStatus::Cancelled => (
            Span::styled("cancelled", theme.muted()),
            ("—".to_owned(), theme.muted()),
            theme.muted(),
        ),
    }
}

/// `input.value = 5000` for each field `condition` (`input.value > 1000`) reads, from the
/// masked input; a field the input lacks reads `(absent)`.
pub fn condition_fields(condition: &str, input: &spyglass_protocol::RawJson) -> Vec<String> {
    let masked = mask(input.get());
    let value: serde_json::Value = serde_json::from_str(&masked).unwrap_or_default();
    condition
        .split("&&")
        .filter_map(|part| {
            let left = part.split(['=', '!', '<', '>']).next()?.trim();
            let path = left.strip_prefix("input.")?;
            let mut at = Some(&value);
            for key in path.split('.') {
                at = at.and_then(|v| match v {
                    serde_json::Value::Array(items) => {
                        key.parse::<usize>().ok().and_then(|i| items.get(i))
                    }
                    _ => v.get(key),
                });
            }
            let shown_value =
                at.map_or_else(|| "(absent)".to_owned(), std::string::ToString::to_string);
            Some(format!("{left} = {shown_value}"))
        })
        .collect()
}

/// The INPUT cell: the fields the rule read first (`value=5000`), so the amount shows
/// even when the rest of the input is cut, then the input as sent; masked.
fn input_cell(a: &Approval) -> String {
    let json = mask(a.input.get());
    let Some(condition) = &a.condition else {
        return json.into_owned();
    };
    let fields: Vec<String> = condition_fields(condition, &a.input)
        .into_iter()
        .map(|f| f.trim_start_matches("input.").replacen(" = ", "=", 1))
        .collect();
    format!("{} {json}", fields.join(" "))
}

/// The open approval: what was called with what, why it was held, how it stands, and
/// what else the session did. Masked and sanitised here, once.
fn detail_pane_lines(a: &Approval, model: &Model) -> Vec<PaneLine> {
    let mut lines = vec![PaneLine::heading(shown(&format!("{} · {}", a.tool, a.id)))];
    lines.push(PaneLine::plain(
        shown(&format!(
            "{} · session {} · call {}",
            status_word(a.status),
            a.session_id,
            a.call_id
        ))
        .into_owned(),
    ));
    let mut state = format!(
        "requested {} · expires {}",
        clock_part(&a.requested_at),
        clock_part(&a.expires_at)
    );
    if let Some(by) = &a.decided_by {
        state.push_str(&format!(" · by {by}"));
    }
    lines.push(PaneLine::plain(shown(&state).into_owned()));
    if let Some(note) = &a.note {
        lines.push(PaneLine::plain(
            shown(&format!("note: {note}")).into_owned(),
        ));
    }
    if let Some(outcome) = &a.replay {
        let (text, _) = outcome_summary(outcome);
        lines.push(PaneLine::plain(format!("replayed → {text}")));
    }
    lines.push(PaneLine::plain(String::new()));
    lines.push(PaneLine::heading(
        shown(&format!("Rule {}", a.rule_id)).into_owned(),
    ));
    if !a.message.is_empty() {
        lines.push(PaneLine::plain(shown(&a.message).into_owned()));
    }
    if let Some(condition) = &a.condition {
        lines.push(PaneLine::plain(
            shown(&format!("when {condition}")).into_owned(),
        ));
        for field in condition_fields(condition, &a.input) {
            lines.push(PaneLine::plain(shown(&format!("  {field}")).into_owned()));
        }
    }
    lines.push(PaneLine::plain(String::new()));
    lines.push(PaneLine::heading("Input".to_owned()));
    lines.extend(PaneLine::json_lines(&shown_text(&a.input.pretty())));
    let Some(session) = model.session(&a.session_id) else {
        return lines;
    };
    let calls = session.timeline.calls();
    lines.push(PaneLine::plain(String::new()));
    lines.push(PaneLine::heading(
        shown(&format!(
            "Recent calls in {} ({} of {})",
            a.session_id,
            calls.len().min(RECENT_CALLS),
            calls.len()
        ))
        .into_owned(),
    ));
    for call in calls.iter().skip(calls.len().saturating_sub(RECENT_CALLS)) {
        let outcome = call.envelope_code().unwrap_or("ok");
        let this = if call.id == a.call_id {
            "  ◂ this call"
        } else {
            ""
        };
        lines.push(PaneLine::plain(
            shown(&format!("{}  {}  {outcome}{this}", call.id, call.tool)).into_owned(),
        ));
    }
    lines
}

fn render_detail(frame: &mut Frame, area: Rect, detail: &ApprovalDetail, cx: &Cx) -> Placed {
    let hints = format!(
        "{} · {} approve · {} deny",
        scroll_hint(cx.keymap),
        key_cap(cx.keymap, Action::Approve),
        key_cap(cx.keymap, Action::Deny)
    );
    detail.pane.draw(frame, area, "Approval", &hints, cx)
}

fn detail_lines(a: &Approval, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    let mut first = format!(
        "{} · call {} · requested {} · expires {}",
        a.id,
        a.call_id,
        clock_part(&a.requested_at),
        clock_part(&a.expires_at)
    );
    if let Some(by) = &a.decided_by {
        first.push_str(&format!(" · by {by}"));
    }
    let mut lines: Vec<Line<'static>> = wrap_words(&shown(&first), width)
        .into_iter()
        .map(|l| Line::from(Span::styled(l, theme.muted())))
        .collect();
    if let Some(note) = &a.note {
        lines.extend(
            wrap_words(&shown(&format!("note: {note}")), width)
                .into_iter()
                .map(Line::from),
        );
    }
    lines
}

/// The time of day of an RFC 3339 stamp as written (UTC from the runtime): no timezone
/// conversion, so what is shown does not depend on where spyglass runs.
pub fn clock_part(ts: &str) -> &str {
    ts.split_once('T')
        .map_or(ts, |(_, t)| t.trim_end_matches('Z'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn countdown_is_whole_seconds_and_none_once_past() {
        assert_eq!(seconds_left(Some(10_000.0), 0.0), Some(10));
        assert_eq!(seconds_left(Some(10_000.0), 9_001.0), Some(1));
        assert_eq!(seconds_left(Some(10_000.0), 10_000.0), None);
        assert_eq!(seconds_left(None, 0.0), None);
        assert_eq!(fmt_left(59), "59s");
        assert_eq!(fmt_left(299), "4m 59s");
        assert_eq!(fmt_left(3_725), "1h 02m");
        assert_eq!(clock_part("2026-11-22T21:44:00.000Z"), "21:44:00.000");
    }
}

#[cfg(test)]
mod view_tests {
    use super::*;
    use crate::ui::views::testing::{Screen, model};
    use crossterm::event::KeyModifiers;

    fn held(seq: u64, n: u32, expires: &str) -> [String; 2] {
        [
            format!(
                r#"{{"kind":"tool.called","seq":{seq},"ts":"2026-11-22T21:43:31.000Z","sessionId":"ses_01","callId":"call_0{n}","tool":"asaas/create_payment","input":{{"value":{n}}},"outcome":{{"envelope":{{"code":"approval_required","approval_id":"apr_0{n}","expires_at":"{expires}","message":"held"}}}},"startedAt":"2026-11-22T21:43:31.000Z","duration":0.4,"source":"execute"}}"#
            ),
            format!(
                r#"{{"kind":"approval.requested","seq":{},"ts":"2026-11-22T21:43:31.000Z","sessionId":"ses_01","approvalId":"apr_0{n}","callId":"call_0{n}","tool":"asaas/create_payment","input":{{"value":{n}}},"ruleId":"payments","expiresAt":"{expires}","message":"held"}}"#,
                seq + 1
            ),
        ]
    }

    fn two_pending() -> (Screen, ApprovalsState) {
        let mut frames = vec![];
        frames.extend(held(1, 1, "2026-11-22T21:49:00.000Z"));
        frames.extend(held(3, 2, "2026-11-22T21:43:00.000Z"));
        let screen = Screen::new(model(&frames));
        let mut view = ApprovalsState::default();
        view.after_model_change(&screen.model);
        (screen, view)
    }

    #[test]
    fn pending_calls_count_down_and_a_past_one_reads_expired() {
        let (screen, mut view) = two_pending();
        insta::assert_snapshot!(screen.text(&mut view, 80, 12));
    }

    #[test]
    fn approve_opens_a_prompt_and_confirm_hands_the_decision_to_the_app() {
        let (screen, mut view) = two_pending();
        assert_eq!(screen.act(&mut view, Action::Approve), Effect::None);
        insta::assert_snapshot!(screen.text(&mut view, 80, 12));
        let cx = Cx {
            model: &screen.model,
            theme: &screen.theme,
            keymap: &screen.keymap,
            now_ms: crate::ui::views::testing::NOW_MS,
            url: "",
            watching: &crate::ui::app::Watching::Runtime,
            all_projects: false,
            trouble: None,
        };
        let y = KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE);
        assert_eq!(
            view.on_key(y, &cx),
            Some(Effect::Decide {
                approval_id: "apr_01".into(),
                approve: true,
                note: String::new()
            })
        );
        assert!(view.prompt.is_none());
        // With no prompt, keys go to the keymap.
        assert_eq!(view.on_key(y, &cx), None);
    }
}

#[cfg(test)]
mod readable_tests {
    use super::*;
    use crate::ui::views::testing::{Screen, model};

    /// A payment held by `input.value > 1000`, its session with one earlier call, and an
    /// input long enough that no table column can show it whole.
    fn held_payment() -> (Screen, ApprovalsState) {
        let input = r#"{"billingType":"BOLETO","customer":"cus_000005219613","value":5000,"dueDate":"2026-12-01","description":"Invoice 2026-118 for consulting","apiKey":"sk_live_abcdefghijklmnop"}"#;
        let frames = vec![
            r#"{"kind":"session.created","seq":1,"ts":"2026-11-22T21:43:30.000Z","sessionId":"ses_01","userId":"ana","servers":["asaas"],"project":"default","mocks":[]}"#.to_owned(),
            r#"{"kind":"tool.called","seq":2,"ts":"2026-11-22T21:43:30.500Z","sessionId":"ses_01","callId":"call_00","tool":"asaas/list_customers","input":{},"outcome":{"result":{"data":[]}},"startedAt":"2026-11-22T21:43:30.500Z","duration":0.3,"source":"execute"}"#.to_owned(),
            format!(
                r#"{{"kind":"tool.called","seq":3,"ts":"2026-11-22T21:43:31.000Z","sessionId":"ses_01","callId":"call_01","tool":"asaas/create_payment","input":{input},"outcome":{{"envelope":{{"code":"approval_required","approval_id":"apr_01","expires_at":"2026-11-22T21:49:00.000Z","message":"payments over 1000 need a human"}}}},"startedAt":"2026-11-22T21:43:31.000Z","duration":0.4,"source":"execute"}}"#
            ),
            format!(
                r#"{{"kind":"approval.requested","seq":4,"ts":"2026-11-22T21:43:31.000Z","sessionId":"ses_01","approvalId":"apr_01","callId":"call_01","tool":"asaas/create_payment","input":{input},"ruleId":"payments_over_1000","expiresAt":"2026-11-22T21:49:00.000Z","message":"payments over 1000 need a human","condition":"input.value > 1000"}}"#
            ),
        ];
        let screen = Screen::new(model(&frames));
        let mut view = ApprovalsState::default();
        view.after_model_change(&screen.model);
        (screen, view)
    }

    #[test]
    fn enter_opens_the_approval_with_its_whole_input_rule_and_recent_calls() {
        let (screen, mut view) = held_payment();
        screen.act(&mut view, Action::Open);
        assert!(view.detail.is_some());
        let narrow = screen.text(&mut view, 80, 30);
        // The amount the approver decides on, the rule and its condition are all there;
        // the key is masked like everywhere else.
        assert!(narrow.contains(r#""value": 5000"#), "{narrow}");
        assert!(narrow.contains("input.value = 5000"), "{narrow}");
        assert!(!narrow.contains("abcdefghijklmnop"), "{narrow}");
        insta::assert_snapshot!("approval_detail_80", narrow);
        insta::assert_snapshot!("approval_detail_200", screen.text(&mut view, 200, 30));
        // Esc goes back to the list.
        screen.act(&mut view, Action::Back);
        assert!(view.detail.is_none());
        assert!(screen.text(&mut view, 80, 30).contains("SESSION"));
    }

    #[test]
    fn the_detail_scrolls_with_the_shared_pane_keys() {
        let (screen, mut view) = held_payment();
        screen.act(&mut view, Action::Open);
        screen.draw(&mut view, 80, 12);
        screen.act(&mut view, Action::Bottom);
        let scrolled = view.detail.as_ref().map_or(0, |d| d.pane.scroll);
        assert!(scrolled > 0, "a long detail scrolls");
        let text = screen.text(&mut view, 80, 12);
        assert!(text.contains("◂ this call"), "{text}");
    }

    #[test]
    fn the_prompt_names_the_tool_and_the_field_the_rule_read_and_wraps_at_80() {
        let (screen, mut view) = held_payment();
        screen.act(&mut view, Action::Approve);
        let narrow = screen.text(&mut view, 80, 14);
        assert!(narrow.contains("input.value = 5000"), "{narrow}");
        assert!(narrow.contains("any other key cancels"), "{narrow}");
        insta::assert_snapshot!("approval_prompt_80", narrow);
        insta::assert_snapshot!("approval_prompt_200", screen.text(&mut view, 200, 14));
    }

    #[test]
    fn columns_size_to_what_they_show() {
        let (screen, mut view) = held_payment();
        insta::assert_snapshot!("approvals_columns_80", screen.text(&mut view, 80, 8));
        insta::assert_snapshot!("approvals_columns_200", screen.text(&mut view, 200, 8));
    }

    #[test]
    fn condition_fields_read_the_masked_input_and_say_when_a_field_is_absent() {
        let input = spyglass_protocol::RawJson::from_text(r#"{"value":5000,"a":{"b":[1,2]}}"#)
            .expect("json");
        assert_eq!(
            condition_fields("input.value > 1000", &input),
            vec!["input.value = 5000"]
        );
        assert_eq!(
            condition_fields("input.a.b.1 == 2", &input),
            vec!["input.a.b.1 = 2"]
        );
        assert_eq!(
            condition_fields("input.method == \"pix\"", &input),
            vec!["input.method = (absent)"]
        );
    }

    #[test]
    fn words_wrap_and_a_long_word_is_split_never_lost() {
        assert_eq!(wrap_words("ab cd ef", 5), vec!["ab cd", "ef"]);
        assert_eq!(wrap_words("abcdefgh", 3), vec!["abc", "def", "gh"]);
        assert_eq!(wrap_words("", 3), vec![""]);
        let text = "Approve asaas/create_payment for ses_01 (apr_01)?";
        assert!(wrap_words(text, 20).iter().all(|l| l.chars().count() <= 20));
        assert_eq!(wrap_words(text, 20).join(" "), text);
    }
}
