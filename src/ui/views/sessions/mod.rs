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
