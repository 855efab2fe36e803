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
//!
//! `state` holds the selection and the timeline's cached order, `lines` the text built from
//! the model (the timeline order, a call's detail), `render` the drawing.

mod lines;
mod render;
mod state;

pub use state::{CallSort, Detail, Focus, SessionsState};

use super::{Cx, Drawn, Effect, Pane, TextKey, View, text_key};
use crate::model::Model;
use crate::ui::action::Action;
use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};

impl View for SessionsState {
    fn after_model_change(&mut self, model: &Model) {
        SessionsState::after_model_change(self, model);
    }

    fn on_key(&mut self, key: KeyEvent, cx: &Cx) -> Option<Effect> {
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

    fn on_click(&mut self, at: Position, model: &Model) -> Effect {
        self.click(at, model);
        Effect::None
    }

    fn on_wheel(&mut self, at: Position) {
        self.focus_at(at);
    }

    fn copy_text(&self, model: &Model) -> Option<(String, String)> {
        SessionsState::copy_text(self, model)
    }

    fn render(&self, frame: &mut Frame, area: Rect, cx: &Cx) -> Drawn {
        render::render(self, frame, area, cx)
    }

    fn place(&mut self, drawn: &Drawn, _model: &Model) {
        self.list.place(drawn.get(Pane::List));
        self.timeline.place(drawn.get(Pane::Timeline));
        if let Some(detail) = drawn.get(Pane::Detail) {
            self.detail_page = detail.page;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::theme::Theme;
    use crate::ui::views::testing::{Screen, model};
    use ratatui::layout::Position;

    fn created(seq: u64, id: &str) -> String {
        format!(
            r#"{{"kind":"session.created","seq":{seq},"ts":"2026-11-22T21:43:30.000Z","sessionId":"{id}","userId":"ana","servers":["asaas"],"project":"default","mocks":[{{"tool":"asaas/create_payment","mode":"stateful","entries":2}}]}}"#
        )
    }

    fn called(seq: u64, id: &str, call: &str, start: &str, dur: f64) -> String {
        format!(
            r#"{{"kind":"tool.called","seq":{seq},"ts":"{start}","sessionId":"{id}","callId":"{call}","tool":"asaas/create_payment","input":{{"value":5}},"outcome":{{"result":{{"id":"pay_{seq}"}}}},"startedAt":"{start}","duration":{dur},"counter":{{"consumed":1,"total":2}},"source":"execute"}}"#
        )
    }

    fn two_sessions() -> (Screen, SessionsState) {
        let screen = Screen::new(model(&[
            created(1, "ses_01"),
            created(2, "ses_02"),
            called(3, "ses_02", "call_a", "2026-11-22T21:43:31.000Z", 4.0),
            called(4, "ses_02", "call_b", "2026-11-22T21:43:31.010Z", 12.0),
        ]));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        (screen, view)
    }

    #[test]
    fn the_list_and_the_selected_sessions_timeline() {
        let (screen, mut view) = two_sessions();
        screen.act(&mut view, Action::FocusRight);
        insta::assert_snapshot!(screen.text(&mut view, 80, 12));
    }

    #[test]
    fn a_call_opened_with_its_input_and_output() {
        let (screen, mut view) = two_sessions();
        screen.act(&mut view, Action::FocusRight);
        screen.act(&mut view, Action::Open);
        assert!(view.detail.is_some());
        insta::assert_snapshot!(screen.text(&mut view, 80, 12));
    }

    #[test]
    fn pane_titles_name_the_keys_the_keymap_binds() {
        let (mut screen, mut view) = two_sessions();
        let key = |k: &str| vec![crate::config::keys::parse_key(k).expect("a key")];
        screen.keymap.bind(Action::Sort, key("o"));
        screen.keymap.bind(Action::Back, key("backspace"));
        screen.keymap.bind(Action::Up, key("i"));
        let text = screen.text(&mut view, 100, 12);
        assert!(text.contains("by start (o)"), "{text}");
        screen.act(&mut view, Action::FocusRight);
        screen.act(&mut view, Action::Open);
        let text = screen.text(&mut view, 100, 12);
        assert!(
            text.contains("i↓ PgUp PgDn scroll · backspace back"),
            "{text}"
        );
    }

    #[test]
    fn a_click_lands_on_the_row_drawn_there() {
        let (screen, mut view) = two_sessions();
        // Newest first: ses_02 on the first row (y 2: border, header), ses_01 below it.
        screen.draw(&mut view, 80, 12);
        assert_eq!(view.list.selected.as_deref(), Some("ses_02"));
        view.on_click(Position::new(3, 3), &screen.model);
        assert_eq!(view.list.selected.as_deref(), Some("ses_01"));
        // Below the last row: nothing moves.
        view.on_click(Position::new(3, 8), &screen.model);
        assert_eq!(view.list.selected.as_deref(), Some("ses_01"));
    }

    #[test]
    fn an_unfocused_pane_has_the_themes_border_and_the_focused_one_the_accent() {
        let (screen, mut view) = two_sessions();
        let buf = screen.draw(&mut view, 80, 12);
        let theme = Theme::default();
        // The list (left) has the focus; the timeline (bottom right) does not.
        assert_eq!(buf[(0, 0)].style().fg, theme.accent().fg);
        assert_eq!(buf[(79, 11)].style().fg, theme.border().fg);
    }
}
