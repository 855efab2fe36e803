//! The Evals tab: suites with a pass-rate gauge and a trend sparkline on the left; on the
//! right the selected suite's cases (status, pass rate, flaky badge, duration), or one
//! case's assertions with expected vs actual as a line diff (text) or path diff (JSON).
//!
//! ```text
//! ┌ Suites 2 ─────────────────────────────┐┌ payments · 3 cases ───────────────────────────┐
//! │ SUITE      PASS            TREND  RUNS││ pass ████████████░░░░  67%  4/6 · 2 runs        │
//! │›payments   ██████░░░  67%  ▅█        2││ trend ▅█  (oldest → newest, window 20)          │
//! │ support    █████████ 100%  ██        2││  STATUS    CASE                PASS       DUR   │
//! │                                       ││›✗ failed   confirm payment      50% 1/2 flaky … │
//! └ ⟳ a run is going: 1 case(s) ─────────┘└───────────────────────────────────────────────┘
//! ```
//!
//! `r` reruns the selected case and `R` its suite (a REST task; results come back on the
//! stream), `t` shows the case's session in the Sessions tab.

//!
//! `state` holds the selection and the open case, `lines` the text built from results,
//! `render` the drawing.

mod lines;
mod render;
mod state;

pub use state::{CaseDetail, EvalFocus, EvalsState};

use super::{Cx, Drawn, Effect, Pane, View};
use crate::model::Model;
use crate::ui::action::Action;
use ratatui::Frame;
use ratatui::layout::{Position, Rect};

impl View for EvalsState {
    fn after_model_change(&mut self, model: &Model) {
        EvalsState::after_model_change(self, model);
    }

    fn on_action(&mut self, action: Action, cx: &Cx) -> Effect {
        self.dispatch(action, cx.model, cx.keymap)
    }

    fn on_click(&mut self, at: Position, model: &Model) -> Effect {
        self.click(at, model);
        Effect::None
    }

    fn on_wheel(&mut self, at: Position) {
        self.focus_at(at);
    }

    fn copy_text(&self, model: &Model) -> Option<(String, String)> {
        EvalsState::copy_text(self, model)
    }

    fn render(&self, frame: &mut Frame, area: Rect, cx: &Cx) -> Drawn {
        render::render(self, frame, area, cx)
    }

    fn place(&mut self, drawn: &Drawn, _model: &Model) {
        self.suites.place(drawn.get(Pane::Suites));
        self.cases.place(drawn.get(Pane::Cases));
        if let Some(placed) = drawn.get(Pane::Detail) {
            self.detail_page = placed.page;
            if let Some(detail) = &mut self.detail {
                detail.scroll = placed.offset;
            }
        }
    }
}
