//! The Approvals tab: calls held for a human, pending first (oldest first, with the time
//! left until `expires_at` counting down on the app's clock), then decided ones (newest
//! first) with their decision and the replay's outcome beside the original call. `a`/`d`
//! open a confirm prompt; the decision goes out through the app, never into the model.
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

use super::{Cx, Drawn, Effect, ListCursor, Pane, Placed, TextKey, View, fit, hints, key_label};
use crate::mask::mask;
use crate::model::{Approval, Model};
use crate::protocol::events::Outcome;
use crate::protocol::rest::{ApprovalStatus, ApprovalView};
use crate::sanitize::{sanitize, shown};
use crate::ui::action::{Action, Scope};
use crate::ui::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};

/// An approve or deny waiting for `y`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub approval_id: String,
    pub approve: bool,
    pub note: String,
    pub editing_note: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ApprovalsState {
    /// Selection by approval id, so rows arriving never move it.
    pub list: ListCursor<String>,
    pub prompt: Option<Prompt>,
    /// Display order (ids): pending oldest first, then decided newest first.
    rows: Vec<String>,
    built_rev: Option<u64>,
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
        let approvals = &model.approvals;
        // Most frames are not about approvals: then there is nothing to do at all.
        if self.built_rev == Some(approvals.rev()) {
            return;
        }
        self.rows.clear();
        self.rows.extend(
            approvals
                .iter()
                .filter(|a| a.status == ApprovalStatus::Pending)
                .map(|a| a.id.clone()),
        );
        self.rows.extend(
            approvals
                .iter()
                .rev()
                .filter(|a| a.status != ApprovalStatus::Pending)
                .map(|a| a.id.clone()),
        );
        self.built_rev = Some(approvals.rev());
        let still_there = self
            .list
            .selected
            .as_ref()
            .is_some_and(|id| self.rows.contains(id));
        if !still_there {
            self.list.selected = self.rows.first().cloned();
        }
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
        let row = match action {
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => self.list.step(self.selected_row(), self.rows.len(), action),
            Action::Approve | Action::Deny => {
                let approve = action == Action::Approve;
                let Some(approval) = self.selected(model) else {
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
        if self.editing_note() {
            Some(self.note_key(super::text_key(cx.keymap, key)))
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

    fn render(&self, frame: &mut Frame, area: Rect, cx: &Cx) -> Drawn {
        let [table_area, footer] =
            Layout::vertical([Constraint::Min(4), Constraint::Length(4)]).areas(area);
        let mut drawn = Drawn::default();
        if let Some(placed) = self.render_table(frame, table_area, cx) {
            drawn.push(placed);
        }
        self.render_footer(frame, footer, cx);
        drawn
    }

    fn place(&mut self, drawn: &Drawn, _model: &Model) {
        self.list.place(drawn.get(Pane::List));
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
    }
}

// ---- rendering ---------------------------------------------------------------------------

impl ApprovalsState {
    fn render_table(&self, frame: &mut Frame, area: Rect, cx: &Cx) -> Option<Placed> {
        let theme = cx.theme;
        let model = cx.model;
        let pending = model.approvals.pending_count();
        let keys = hints(
            cx.keymap,
            &[
                (Action::Approve, "approve"),
                (Action::Deny, "deny"),
                (Action::Copy, "copy"),
            ],
        );
        let title = Line::from(vec![
            Span::styled(" Approvals ", theme.title()),
            Span::styled(format!("· {pending} pending "), theme.warn()),
            Span::styled(format!("· {keys} "), theme.muted()),
        ]);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(theme.border())
            .title(title);
        let inner = block.inner(area);
        frame.render_widget(block, area);
        if self.rows.is_empty() {
            frame.render_widget(
                Paragraph::new(Span::styled(
                    "No approvals yet. Calls a policy holds for a human appear here.",
                    theme.muted(),
                )),
                inner,
            );
            return None;
        }
        let height = inner.height.saturating_sub(1) as usize;
        let sel = self.selected_row();
        let offset = self.list.window(self.rows.len(), sel, height);
        let now = cx.now_ms;
        // RULE is as wide as the longest rule id on screen (8 to 28); INPUT and REPLAY share
        // what the other columns leave (5 one-column gaps).
        let rule_w = self
            .rows
            .iter()
            .skip(offset)
            .take(height)
            .filter_map(|id| model.approvals.get(id))
            .map(|a| a.rule_id.chars().count())
            .max()
            .unwrap_or(0)
            .clamp(8, 28);
        let free = (inner.width as usize).saturating_sub(16 + 22 + rule_w + 10 + 5);
        let (input_w, replay_w) = ((free / 2).max(8), (free - free / 2).max(8));
        let rows = self
            .rows
            .iter()
            .enumerate()
            .skip(offset)
            .take(height)
            .filter_map(|(row, id)| {
                let a = model.approvals.get(id)?;
                let mark = if row == sel { "›" } else { " " };
                let input = fit(&mask(a.input.get()), input_w);
                let (state_cell, replay_cell, row_style) = cells(a, now, replay_w, theme);
                let r = Row::new(vec![
                    Cell::from(format!("{mark}{}", shown(&a.session_id))),
                    Cell::from(sanitize(&a.tool).into_owned()),
                    Cell::from(input),
                    Cell::from(sanitize(&a.rule_id).into_owned()),
                    Cell::from(state_cell),
                    Cell::from(replay_cell),
                ])
                .style(row_style);
                Some(if row == sel {
                    r.style(theme.selection())
                } else {
                    r
                })
            });
        let header =
            Row::new([" SESSION", "TOOL", "INPUT", "RULE", "STATE", "REPLAY"]).style(theme.muted());
        let table = Table::new(
            rows,
            [
                Constraint::Length(16),
                Constraint::Length(22),
                Constraint::Length(input_w as u16),
                Constraint::Length(rule_w as u16),
                Constraint::Length(10),
                Constraint::Length(replay_w as u16),
            ],
        )
        .header(header);
        frame.render_widget(table, inner);
        Some(Placed::under_header(Pane::List, inner, offset))
    }

    fn render_footer(&self, frame: &mut Frame, area: Rect, cx: &Cx) {
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
        let lines = match (&self.prompt, self.selected(cx.model)) {
            (Some(prompt), _) => prompt_lines(prompt, cx),
            (None, Some(a)) => detail_lines(a, theme),
            (None, None) => vec![],
        };
        frame.render_widget(Paragraph::new(lines), inner);
    }
}

/// The STATE and REPLAY cells of a row, and the row's style.
fn cells(
    a: &Approval,
    now: f64,
    replay_w: usize,
    theme: &Theme,
) -> (Span<'static>, Span<'static>, Style) {
    match a.status {
        ApprovalStatus::Pending => match seconds_left(a.expires_ms, now) {
            Some(left) => (
                Span::styled(fmt_left(left), theme.warn()),
                Span::raw(""),
                Style::default(),
            ),
            // Greyed as soon as our clock says so, before the runtime's event.
            None => (
                Span::styled("expired", theme.muted()),
                Span::raw(""),
                theme.muted(),
            ),
        },
        ApprovalStatus::Approved => {
            let replay = match &a.replay {
                Some(outcome) => {
                    let (text, code) = outcome_summary(outcome);
                    Span::styled(fit(&format!("→ {text}"), replay_w), theme.outcome(code))
                }
                None => Span::styled("replaying…", theme.muted()),
            };
            (
                Span::styled("approved", theme.ok()),
                replay,
                Style::default(),
            )
        }
        ApprovalStatus::Denied => (
            Span::styled("denied", theme.error()),
            Span::styled("—", theme.muted()),
            Style::default(),
        ),
        ApprovalStatus::Expired => (
            Span::styled("expired", theme.muted()),
            Span::styled("—", theme.muted()),
            theme.muted(),
        ),
    }
}

fn prompt_lines<'a>(prompt: &Prompt, cx: &Cx) -> Vec<Line<'a>> {
    let theme = cx.theme;
    let verb = if prompt.approve { "Approve" } else { "Deny" };
    let what = cx
        .model
        .approvals
        .get(&prompt.approval_id)
        .map(|a| format!("{} for {}", sanitize(&a.tool), shown(&a.session_id)))
        .unwrap_or_default();
    let key = |a: Action| key_label(cx.keymap, a);
    let first = Line::from(vec![
        Span::styled(
            format!("{verb} {what} ({})? ", prompt.approval_id),
            theme.warn().add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            format!(
                "{} confirm · {} add a note · any other key cancels",
                key(Action::Confirm),
                key(Action::Note)
            ),
            theme.muted(),
        ),
    ]);
    let note = if prompt.editing_note {
        Line::from(vec![
            Span::styled("note: ", theme.accent()),
            Span::raw(format!("{}▏", prompt.note)),
            Span::styled(
                format!(
                    "  ({} keeps it, {} drops it)",
                    key(Action::Open),
                    key(Action::Back)
                ),
                theme.muted(),
            ),
        ])
    } else if prompt.note.is_empty() {
        Line::from("")
    } else {
        Line::from(vec![
            Span::styled("note: ", theme.accent()),
            Span::raw(shown(&prompt.note).into_owned()),
        ])
    };
    vec![first, note]
}

fn detail_lines<'a>(a: &Approval, theme: &Theme) -> Vec<Line<'a>> {
    let mut first = format!(
        "{} · call {} · requested {} · expires {}",
        a.id,
        a.call_id,
        clock_part(&a.requested_at),
        clock_part(&a.expires_at)
    );
    if let Some(by) = &a.decided_by {
        first.push_str(&format!(" · by {}", shown(by)));
    }
    let second = match &a.note {
        Some(note) => format!("note: {}", shown(note)),
        None => String::new(),
    };
    vec![
        Line::from(Span::styled(first, theme.muted())),
        Line::from(second),
    ]
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
