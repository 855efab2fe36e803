//! The Events tab: the raw stream from the model's bounded event log, newest at the
//! bottom. It follows the stream by default; `f` holds the view still (selection and rows
//! kept by absolute position) while frames keep being folded. `/` filters by kind,
//! session or text; Enter shows one frame as pretty JSON. Each row says what happened in
//! the words `spyglass tail` uses; rows are summarised (and masked) only when drawn, so the
//! fold path never pays for this view. Columns are as wide as what they show.
//!
//! ```text
//! ┌ Events 1,204 · following (f) · /tool ──────────────────────────────────────┐
//! │ SEQ  TIME         KIND               SESSION WHAT                          │
//! │ 1203 21:43:31.000 tool.called        ses_01  asaas/x -> ok {"id":1} (400µs) │
//! │›1204 21:43:31.020 approval.requested ses_01  apr_1 asaas/x waits for approval│
//! └────────────────────────────────────────────────────────────────────────────┘
//! ```

use super::approvals::clock_part;
use super::{
    Cx, Drawn, Effect, ListCursor, Pane, TextKey, View, edit_filter, end_filter, fit, key_cap,
    scroll_hint, text_key,
};
use crate::client::tail::what_happened;
use crate::model::{EventLog, Model};
use crate::ui::action::Action;
use crate::ui::safe;
use crate::ui::views::fitted_table;
use crate::ui::views::pane::{PaneKey, PaneLine, TextPane};
use crate::ui::views::{Col, fit_columns_marked, header, marked_header, placed_list, shown_cells};
use crossterm::event::KeyEvent;
use ratatui::Frame as TermFrame;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row};
use spyglass_protocol::Frame;
use spyglass_protocol::events::{encode, encode_fields};
use spyglass_protocol::mask::mask;
use spyglass_protocol::sanitize::{sanitize, shown};

/// One frame opened as pretty JSON.
#[derive(Debug, Clone)]
pub struct EventDetail {
    pub seq: u64,
    pub pane: TextPane,
}

#[derive(Debug, Clone)]
pub struct EventsState {
    pub follow: bool,
    pub filter: String,
    pub editing_filter: bool,
    pub detail: Option<EventDetail>,
    /// The selected frame by absolute log position; its offset is the first row drawn.
    pub list: ListCursor<u64>,
    /// Absolute log position of the top row while held still.
    top: u64,
    /// Matching positions, ascending; extended as frames arrive.
    matches: Vec<u64>,
    scanned_to: u64,
}

impl Default for EventsState {
    fn default() -> Self {
        Self {
            follow: true,
            filter: String::new(),
            editing_filter: false,
            detail: None,
            list: ListCursor::default(),
            top: 0,
            matches: Vec::new(),
            scanned_to: 0,
        }
    }
}

/// The session an event is filed under, as the Sessions list names it: its `sessionId`;
/// for a forwarded run (an external agent's, no `sessionId`) `↗` and the conversation
/// or agent it is kept by; `-` for an event of no session.
fn session_of(frame: &Frame) -> std::borrow::Cow<'_, str> {
    match frame.session_id.as_deref() {
        Some(id) => id.into(),
        None => match crate::model::Model::agent_session(frame) {
            Some((key, true)) => format!("↗{key}").into(),
            Some((key, false)) => key.into(),
            None => "-".into(),
        },
    }
}

/// A filter: `kind:X`, `session:X`, or text matched against kind, session and fields.
fn matches_filter(frame: &Frame, needle: &str) -> bool {
    let kind = frame.event.kind().to_lowercase();
    let session = session_of(frame).to_lowercase();
    if let Some(k) = needle.strip_prefix("kind:") {
        return kind.contains(k.trim());
    }
    if let Some(s) = needle.strip_prefix("session:") {
        return session.contains(s.trim());
    }
    // Matched against what is shown (masked), so a search cannot find a hidden secret.
    kind.contains(needle)
        || session.contains(needle)
        || mask(&encode_fields(&frame.event))
            .to_lowercase()
            .contains(needle)
}

impl EventsState {
    fn filtering(&self) -> bool {
        !self.filter.is_empty()
    }

    /// Rows in view order (the whole log, or the matches).
    pub fn len(&self, log: &EventLog) -> usize {
        if self.filtering() {
            self.matches.len()
        } else {
            log.len()
        }
    }

    pub fn is_empty(&self, log: &EventLog) -> bool {
        self.len(log) == 0
    }

    fn row_abs(&self, log: &EventLog, row: usize) -> Option<u64> {
        if self.filtering() {
            self.matches.get(row).copied()
        } else {
            (row < log.len()).then(|| log.first_abs() + row as u64)
        }
    }

    /// The row of `abs`, or of the first retained row after it.
    fn row_of(&self, log: &EventLog, abs: u64) -> usize {
        if self.filtering() {
            self.matches.partition_point(|m| *m < abs)
        } else {
            abs.saturating_sub(log.first_abs()) as usize
        }
    }

    fn selected_row(&self, log: &EventLog) -> usize {
        let len = self.len(log);
        match self.list.selected {
            Some(abs) if !self.follow => self.row_of(log, abs).min(len.saturating_sub(1)),
            _ => len.saturating_sub(1),
        }
    }

    /// The selected frame.
    pub fn selected_frame<'m>(&self, log: &'m EventLog) -> Option<&'m Frame> {
        self.row_abs(log, self.selected_row(log))
            .and_then(|abs| log.get(abs))
    }

    fn refresh_matches(&mut self, log: &EventLog, rescan: bool) {
        let first = log.first_abs();
        if rescan {
            self.matches.clear();
            self.scanned_to = first;
        }
        let stale = self.matches.partition_point(|abs| *abs < first);
        self.matches.drain(..stale);
        if !self.filtering() {
            self.scanned_to = log.end_abs();
            return;
        }
        let needle = self.filter.to_lowercase();
        for abs in self.scanned_to.max(first)..log.end_abs() {
            if log.get(abs).is_some_and(|f| matches_filter(f, &needle)) {
                self.matches.push(abs);
            }
        }
        self.scanned_to = log.end_abs();
    }

    /// New frames are checked against the filter once, as they arrive. Held still, the
    /// selection and the top row stay where they are.
    pub fn after_model_change(&mut self, model: &Model) {
        self.refresh_matches(&model.events, false);
    }

    pub fn filter_key(&mut self, key: KeyEvent, model: &Model) {
        if edit_filter(&mut self.filter, key) {
            self.refresh_matches(&model.events, true);
        }
    }

    /// Holds the view where it is now: the selection and the top row by position.
    fn hold(&mut self, log: &EventLog) {
        if self.follow {
            let len = self.len(log);
            let sel = len.saturating_sub(1);
            self.list.selected = self.row_abs(log, sel);
            let top = len.saturating_sub(self.list.page.max(1));
            self.top = self.row_abs(log, top).unwrap_or(log.first_abs());
            self.follow = false;
        }
    }

    pub fn dispatch(&mut self, action: Action, model: &Model) {
        let log = &model.events;
        if let Some(detail) = &mut self.detail {
            if detail.pane.on_action(action) == PaneKey::Close {
                self.detail = None;
            }
            return;
        }
        if self.editing_filter {
            if end_filter(&mut self.editing_filter, &mut self.filter, action) {
                self.refresh_matches(log, true);
            }
            return;
        }
        match action {
            Action::Follow => {
                if self.follow {
                    self.hold(log);
                } else {
                    self.follow = true;
                }
            }
            Action::Filter => self.editing_filter = true,
            Action::Back if self.filtering() => {
                self.filter.clear();
                self.refresh_matches(log, true);
            }
            Action::Open => {
                if let Some(frame) = self.selected_frame(log) {
                    let lines = pretty_lines(frame)
                        .iter()
                        .map(|l| PaneLine::json(sanitize(l)))
                        .collect();
                    self.detail = Some(EventDetail {
                        seq: frame.seq,
                        pane: TextPane::new(lines),
                    });
                }
            }
            Action::Bottom => self.follow = true,
            Action::Up | Action::Down | Action::PageUp | Action::PageDown | Action::Top => {
                // Moving through the stream means reading it: hold still.
                self.hold(log);
                let len = self.len(log);
                let row = self.list.step(self.selected_row(log), len, action);
                self.list.selected = self.row_abs(log, row);
            }
            _ => {}
        }
    }
}

impl View for EventsState {
    fn after_model_change(&mut self, model: &Model) {
        EventsState::after_model_change(self, model);
    }

    fn on_key(&mut self, key: KeyEvent, cx: &Cx) -> Option<Effect> {
        if let Some(detail) = &mut self.detail
            && detail.pane.typing()
        {
            match text_key(cx.keymap, key) {
                TextKey::Quit => return Some(Effect::Quit),
                other => detail.pane.search_key(other),
            }
            return Some(Effect::None);
        }
        if !self.editing_filter {
            return None;
        }
        match text_key(cx.keymap, key) {
            TextKey::Keep => self.dispatch(Action::Open, cx.model),
            TextKey::Discard => self.dispatch(Action::Back, cx.model),
            TextKey::Quit => return Some(Effect::Quit),
            TextKey::Edit(key) => self.filter_key(key, cx.model),
            TextKey::Ignore => {}
        }
        Some(Effect::None)
    }

    fn on_action(&mut self, action: Action, cx: &Cx) -> Effect {
        self.dispatch(action, cx.model);
        Effect::None
    }

    fn pane_open(&self) -> bool {
        self.detail.is_some()
    }

    fn on_click(&mut self, at: Position, model: &Model) -> Effect {
        if self.detail.is_some() {
            return Effect::None;
        }
        let log = &model.events;
        if let Some(row) = self.list.row_at(at)
            && row < self.len(log)
        {
            self.hold(log);
            self.list.selected = self.row_abs(log, row);
        }
        Effect::None
    }

    fn render(&self, frame: &mut TermFrame, area: Rect, cx: &Cx) -> Drawn {
        render(self, frame, area, cx)
    }

    fn place(&mut self, drawn: &Drawn, model: &Model) {
        if let Some(detail) = &mut self.detail {
            detail.pane.place(drawn.get(Pane::Detail));
        }
        let placed = drawn.get(Pane::List);
        self.list.place(placed);
        // Held still, the top row is kept by position so arriving frames do not move it.
        if let Some(p) = placed
            && !self.follow
        {
            self.top = self
                .row_abs(&model.events, p.offset)
                .unwrap_or(model.events.first_abs());
        }
    }

    /// What `copy` takes here: the selected frame as JSON.
    fn copy_text(&self, model: &Model) -> Option<(String, String)> {
        let frame = self.selected_frame(&model.events)?;
        Some((
            format!("event seq {}", frame.seq),
            pretty_lines(frame).join("\n"),
        ))
    }
}

/// The frame as pretty JSON, masked. Only when opened or copied: never on the fold path.
fn pretty_lines(frame: &Frame) -> Vec<String> {
    let text = encode(frame);
    let pretty = serde_json::from_str::<serde_json::Value>(&text)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or(text);
    mask(&pretty).lines().map(str::to_owned).collect()
}

// ---- rendering ---------------------------------------------------------------------------

fn render(state: &EventsState, frame: &mut TermFrame, area: Rect, cx: &Cx) -> Drawn {
    let theme = cx.theme;
    let log = &cx.model.events;
    let mut drawn = Drawn::default();
    if let Some(detail) = &state.detail {
        let name = format!("Event seq {}", detail.seq);
        drawn.push(
            detail
                .pane
                .draw(frame, area, &name, &scroll_hint(cx.keymap), cx),
        );
        return drawn;
    }
    let len = state.len(log);
    let mut title = vec![
        Span::styled(" Events ", theme.title()),
        Span::raw(if state.filtering() {
            format!("{len}/{} ", log.len())
        } else {
            format!("{len} ")
        }),
    ];
    let block_inner_h = area.height.saturating_sub(3) as usize;
    let follow_key = key_cap(cx.keymap, Action::Follow);
    if state.follow {
        title.push(Span::styled(
            format!("· following ({follow_key}) "),
            theme.ok(),
        ));
    } else {
        let top_row = state.row_of(log, state.top);
        let below = len.saturating_sub(top_row + block_inner_h);
        title.push(Span::styled(
            format!("· held, {below} more below ({follow_key} follows) "),
            theme.warn(),
        ));
    }
    if state.filtering() || state.editing_filter {
        let cursor = if state.editing_filter { "▏" } else { "" };
        title.push(Span::styled(
            format!("· /{}{cursor} ", state.filter),
            theme.warn(),
        ));
    }
    let dropped = cx.model.counters.dropped.events;
    if dropped > 0 {
        title.push(Span::styled(
            format!("· {dropped} older dropped "),
            theme.muted(),
        ));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border())
        .title(safe::line(title));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if len == 0 {
        let msg = if state.filtering() {
            format!(
                "No event matches “{}” (kind:X, session:X or any text). {} clears the filter.",
                state.filter,
                key_cap(cx.keymap, Action::Back)
            )
        } else if let Some(trouble) = &cx.trouble {
            format!("No events. {trouble}")
        } else {
            "No events yet.".to_owned()
        };
        frame.render_widget(
            Paragraph::new(safe::span(msg, theme.muted()))
                .wrap(ratatui::widgets::Wrap { trim: true }),
            inner,
        );
        return drawn;
    }
    let height = inner.height.saturating_sub(1) as usize;
    let sel = state.selected_row(log);
    let top = if state.follow {
        len.saturating_sub(height)
    } else {
        super::window(state.row_of(log, state.top), len, sel, height)
    };
    let visible: Vec<(usize, &Frame)> = (top..len.min(top + height))
        .filter_map(|row| Some((row, log.get(state.row_abs(log, row)?)?)))
        .collect();
    // Each column as wide as its widest visible cell (a µs time included); WHAT takes
    // the rest.
    let col = |header: &str, max: usize, cell: &dyn Fn(&Frame) -> usize| {
        visible
            .iter()
            .map(|(_, f)| cell(f))
            .max()
            .unwrap_or(0)
            .max(header.chars().count())
            .min(max)
    };
    // WHAT is the point of a row: it keeps a third of it. The session id (its start
    // tells sessions apart) and the kind are cut with an ellipsis; SEQ and TIME are shown
    // whole or, TIME first, not at all.
    let width = inner.width as usize;
    let session_want = col("SESSION", 28, &|f| session_of(f).chars().count());
    let kind_want = col("KIND", 24, &|f| f.event.kind().chars().count());
    let cols = [
        Col::whole(col(" SEQ", 12, &|f| f.seq.to_string().len() + 1), 0),
        Col::whole(col("TIME", 24, &|f| clock_part(&f.ts).chars().count()), 3),
        Col {
            want: kind_want,
            min: kind_want.min(12),
            priority: 1,
        },
        Col {
            want: session_want,
            min: session_want.min(10),
            priority: 4,
        },
        Col {
            want: (width / 3).max(8),
            min: 8,
            priority: 2,
        },
    ];
    // Room to spare goes to the what column.
    let widths = fit_columns_marked(&cols, width, 4);
    // A cut kind or session says so in its header (`KIND…`), against the values' own width.
    let kind_full = col("KIND", usize::MAX, &|f| f.event.kind().chars().count());
    let session_full = col("SESSION", usize::MAX, &|f| session_of(f).chars().count());
    let names = [
        " SEQ".to_owned(),
        "TIME".to_owned(),
        header(
            "KIND",
            &Col {
                want: kind_full,
                ..cols[2]
            },
            widths[2],
        ),
        header(
            "SESSION",
            &Col {
                want: session_full,
                ..cols[3]
            },
            widths[3],
        ),
        "WHAT".to_owned(),
    ];
    let keep = |cells: Vec<Cell<'static>>| shown_cells(cells, &widths);
    let w = |i: usize| widths[i].unwrap_or(0);
    let (kind_w, session_w, what_w) = (w(2), w(3), w(4));
    let rows = visible.into_iter().map(|(row, f)| {
        let mark = if row == sel { "›" } else { " " };
        let kind_style = match f.event.kind() {
            "agent.failed" | "stream.gap" => theme.error(),
            k if k.starts_with("approval.") => theme.warn(),
            _ => theme.accent(),
        };
        // Summarised for this row only, now that it is on screen; masked before shown.
        let what = what_happened(&f.event);
        let r = Row::new(keep(vec![
            Cell::from(format!("{mark}{}", f.seq)),
            Cell::from(clock_part(&f.ts).to_owned()),
            Cell::from(Span::styled(fit(f.event.kind(), kind_w), kind_style)),
            Cell::from(fit(&shown(&session_of(f)), session_w)),
            Cell::from(fit(&mask(&what), what_w)),
        ]));
        if row == sel && !state.follow {
            r.style(theme.selection())
        } else {
            r.style(Style::default())
        }
    });
    let header = Row::new(marked_header(
        names.into_iter().map(Cell::from).collect(),
        &widths,
    ))
    .style(theme.muted());
    let table = fitted_table(rows, header, &widths);
    frame.render_widget(table, inner);
    drawn.push(placed_list(
        frame,
        area,
        (Pane::List, inner),
        top,
        len,
        theme,
    ));
    drawn
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::views::testing::{Screen, model};

    fn frames(n: u64) -> Vec<String> {
        (1..=n)
            .map(|seq| {
                format!(
                    r#"{{"kind":"session.created","seq":{seq},"ts":"2026-11-22T21:43:{:02}.000Z","sessionId":"ses_{seq:02}","userId":"ana","servers":[],"project":"default","mocks":[]}}"#,
                    seq % 60
                )
            })
            .collect()
    }

    #[test]
    fn following_shows_the_newest_at_the_bottom() {
        let screen = Screen::new(model(&frames(20)));
        let mut view = EventsState::default();
        view.after_model_change(&screen.model);
        insta::assert_snapshot!(screen.text(&mut view, 80, 12));
    }

    #[test]
    fn held_still_the_rows_stay_while_frames_arrive() {
        let mut screen = Screen::new(model(&frames(20)));
        let mut view = EventsState::default();
        view.after_model_change(&screen.model);
        screen.draw(&mut view, 80, 12);
        screen.act(&mut view, Action::Up);
        let before = screen.text(&mut view, 80, 12);
        for json in frames(25).iter().skip(20) {
            screen
                .model
                .fold(Box::new(spyglass_protocol::decode(json).expect("decodes")));
        }
        view.after_model_change(&screen.model);
        let after = screen.text(&mut view, 80, 12);
        // Only the counts move: in the title, and the rows below in the bottom border.
        let rows = |t: &str| {
            let lines: Vec<&str> = t.lines().collect();
            lines[1..lines.len() - 1].join("\n")
        };
        assert_eq!(rows(&before), rows(&after));
        assert!(before.ends_with("─ ↑11 above ─┘\n"), "{before}");
        assert!(after.ends_with("─ ↑11 above · ↓5 below ─┘\n"), "{after}");
        insta::assert_snapshot!(after);
    }

    /// A run as the stream tells it, stamped to the microsecond as the runtime writes.
    fn a_run() -> Vec<String> {
        vec![
            r#"{"kind":"session.created","seq":1,"ts":"2026-11-22T21:44:00.123456Z","sessionId":"ses_01","userId":"ana","servers":["asaas"],"project":"default","mocks":[{"tool":"asaas/create_payment","mode":"stateful","entries":2}]}"#.to_owned(),
            r#"{"kind":"tool.called","seq":2,"ts":"2026-11-22T21:44:00.223456Z","sessionId":"ses_01","callId":"call_1","tool":"asaas/create_payment","input":{"value":5,"apiKey":"sk_live_abcdefghijklmnop"},"outcome":{"result":{"id":"pay_1"}},"startedAt":"2026-11-22T21:44:00.223000Z","duration":0.4,"counter":{"consumed":1,"total":2},"source":"execute"}"#.to_owned(),
            r#"{"kind":"approval.requested","seq":3,"ts":"2026-11-22T21:44:00.323456Z","sessionId":"ses_01","approvalId":"apr_1","callId":"call_2","tool":"asaas/create_payment","input":{"value":5000},"ruleId":"big","expiresAt":"2026-11-22T21:59:00.000Z","message":"held","condition":"input.value > 1000"}"#.to_owned(),
            r#"{"kind":"agent.failed","seq":4,"ts":"2026-11-22T21:44:01.000001Z","sessionId":"ses_01","agentName":"billing","model":"gpt-4o-mini","provider":"openai","input":"Charge","output":null,"steps":[],"tokens":{"prompt":1,"completion":1,"total":2},"duration":900,"finishReason":"error","streaming":false,"failoverAttempts":0,"error":"Rate limited by provider"}"#.to_owned(),
        ]
    }

    #[test]
    fn rows_say_what_happened_with_the_whole_time_and_the_raw_json_on_enter() {
        let screen = Screen::new(model(&a_run()));
        let mut view = EventsState::default();
        view.after_model_change(&screen.model);
        let narrow = screen.text(&mut view, 80, 8);
        assert!(narrow.contains("21:44:00.123456"), "{narrow}");
        assert!(narrow.contains("billing failed: Rate"), "{narrow}");
        assert!(!narrow.contains("abcdefghijklmnop"), "{narrow}");
        insta::assert_snapshot!("events_readable_80", narrow);
        let wide = screen.text(&mut view, 200, 8);
        assert!(
            wide.contains("billing failed: Rate limited by provider"),
            "{wide}"
        );
        insta::assert_snapshot!("events_readable_200", wide);
        // The raw frame is one Enter away.
        screen.act(&mut view, Action::Open);
        let detail = screen.text(&mut view, 80, 30);
        assert!(
            detail.contains(r#""error": "Rate limited by provider""#),
            "{detail}"
        );
    }

    #[test]
    fn a_decision_row_keeps_the_approval_ids_case() {
        let screen = Screen::new(model(&[
            r#"{"kind":"approval.resolved","seq":1,"ts":"2026-11-22T21:44:00.000Z","sessionId":"ses_01","approvalId":"apr_BoXv9Q","decision":"denied"}"#.to_owned(),
        ]));
        let mut view = EventsState::default();
        view.after_model_change(&screen.model);
        let text = screen.text(&mut view, 80, 6);
        assert!(text.contains("apr_BoXv9Q denied"), "{text}");
    }
}
