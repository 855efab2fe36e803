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
//! └ ⟳ a run is going: 1 case ────────────┘└───────────────────────────────────────────────┘
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

    fn on_key(&mut self, key: crossterm::event::KeyEvent, cx: &Cx) -> Option<Effect> {
        if let Some(detail) = &mut self.detail
            && detail.pane.typing()
        {
            match super::text_key(cx.keymap, key) {
                super::TextKey::Quit => return Some(Effect::Quit),
                other => detail.pane.search_key(other),
            }
            return Some(Effect::None);
        }
        self.editing_filter
            .then(|| self.filter_key(super::text_key(cx.keymap, key), cx.model))
    }

    fn pane_open(&self) -> bool {
        self.detail.is_some()
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
        if let Some(detail) = &mut self.detail {
            detail.pane.place(drawn.get(Pane::Detail));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::theme::Theme;
    use crate::ui::views::testing::{Screen, model};

    fn eval(seq: u64, suite: &str, case: &str, status: &str, assertions: &str) -> String {
        format!(
            r#"{{"kind":"agent.eval.completed","seq":{seq},"ts":"2026-11-22T21:43:{seq:02}.000Z","sessionId":"ses_0{seq}","suite":"{suite}","case":"{case}","status":"{status}","pass":{},"tokens":{{"prompt":10,"completion":5,"total":15}},"cost":0,"duration":12,"runId":"run_1","attempt":1,"assertions":{assertions}}}"#,
            status == "passed"
        )
    }

    const OK: &str =
        r#"[{"kind":"contains","pass":true,"expected":"pay_1","actual":"Charged: pay_1"}]"#;
    const FAIL: &str = r#"[{"kind":"equals","pass":false,"expected":"Charged: pay_1\nstatus: PENDING","actual":"Charged: pay_2\nstatus: PENDING","message":"equals: the output differs"}]"#;

    fn results() -> (Screen, EvalsState) {
        let screen = Screen::new(model(&[
            eval(1, "payments", "charge", "passed", OK),
            eval(2, "payments", "confirm", "failed", FAIL),
            eval(3, "support", "lookup", "passed", OK),
        ]));
        let mut view = EvalsState::default();
        view.after_model_change(&screen.model);
        (screen, view)
    }

    #[test]
    fn suites_and_the_selected_suites_cases() {
        let (screen, mut view) = results();
        screen.act(&mut view, Action::Open);
        screen.act(&mut view, Action::Down);
        insta::assert_snapshot!(screen.text(&mut view, 80, 12));
    }

    #[test]
    fn narrow_columns_give_way_whole_and_never_change_a_value() {
        let quick = eval(4, "payments", "a case with a long name", "passed", OK)
            .replace(r#""duration":12"#, r#""duration":0"#);
        let screen = Screen::new(model(&[eval(1, "payments", "charge", "passed", OK), quick]));
        let mut view = EvalsState::default();
        view.after_model_change(&screen.model);
        screen.act(&mut view, Action::Open);
        for width in [60, 52, 44] {
            let text = screen.text(&mut view, width, 10);
            for line in text.lines() {
                // The eval crate writes a percentage `100 %`: whole, as the table's `100%`.
                let line = line.replace("100 %", "100%");
                // A duration shows whole (`<1ms`) or not at all; a pass rate keeps its `%`.
                assert!(!line.contains(" 1ms"), "{width}: {text}");
                assert!(
                    !line.contains("100 ") && !line.ends_with("100│"),
                    "{width}: {text}"
                );
            }
            assert!(text.contains("100%"), "{width}: {text}");
            // A cut name says so.
            assert!(
                text.contains("a case with a long name")
                    || text
                        .lines()
                        .any(|l| l.contains("a case") && l.contains('…')),
                "{width}: {text}"
            );
        }
        let at_60 = screen.text(&mut view, 60, 10);
        assert!(at_60.contains("<1ms"), "{at_60}");
        insta::assert_snapshot!(at_60);
    }

    #[test]
    fn a_failed_case_with_its_line_diff() {
        let (screen, mut view) = results();
        screen.act(&mut view, Action::Open);
        screen.act(&mut view, Action::Down);
        screen.act(&mut view, Action::Open);
        assert!(view.detail.is_some());
        insta::assert_snapshot!(screen.text(&mut view, 80, 12));
    }

    #[test]
    fn keys_that_need_the_app_come_back_as_effects() {
        let (screen, mut view) = results();
        // On the suites a case key asks for a case first, naming the keys from the keymap.
        let Effect::Notice(text) = screen.act(&mut view, Action::RerunCase) else {
            panic!("a notice");
        };
        assert!(
            text.contains("Enter shows") && text.contains("R reruns"),
            "{text}"
        );
        screen.act(&mut view, Action::Open);
        assert_eq!(
            screen.act(&mut view, Action::RerunCase),
            Effect::Rerun {
                suite: "payments".into(),
                case: Some("charge".into())
            }
        );
        assert_eq!(
            screen.act(&mut view, Action::JumpToSession),
            Effect::ShowSession("ses_01".into())
        );
    }

    #[test]
    fn an_unfocused_pane_has_the_themes_border_as_on_the_sessions_tab() {
        let (screen, mut view) = results();
        let buf = screen.draw(&mut view, 80, 12);
        let theme = Theme::default();
        // Suites (left) have the focus; the cases (right) do not.
        assert_eq!(buf[(0, 0)].style().fg, theme.accent().fg);
        assert_eq!(buf[(79, 0)].style().fg, theme.border().fg);
    }

    /// `p` pins the newest completed run; each later run lists what changed against it,
    /// regressions first; `p` on the pinned run again unpins it.
    #[test]
    fn a_pinned_run_shows_each_later_runs_changes_against_it() {
        let run = |seq: u64, id: &str, results: &[(&str, &str)]| {
            let mut frames = vec![format!(
                r#"{{"kind":"eval.run.started","seq":{seq},"ts":"2026-11-22T21:43:00.000Z","runId":"{id}","suites":["payments"],"cases":{},"repeat":1}}"#,
                results.len()
            )];
            for (i, (case, status)) in results.iter().enumerate() {
                frames.push(
                    eval(seq + 1 + i as u64, "payments", case, status, "[]").replace("run_1", id),
                );
            }
            frames.push(format!(
                r#"{{"kind":"eval.run.completed","seq":{},"ts":"2026-11-22T21:44:00.000Z","runId":"{id}","passed":1,"failed":1}}"#,
                seq + 1 + results.len() as u64
            ));
            frames
        };
        let first = run(
            1,
            "run_1",
            &[
                ("charge", "passed"),
                ("refund", "failed"),
                ("gone", "passed"),
            ],
        );
        let mut screen = Screen::new(model(&first));
        let mut view = EvalsState::default();
        view.after_model_change(&screen.model);
        let Effect::Notice(text) = screen.act(&mut view, Action::PinRun) else {
            panic!("pinning says so");
        };
        assert_eq!(
            text,
            "pinned run run_1: later runs show what changed against it"
        );
        let screen_text = screen.text(&mut view, 100, 14);
        assert!(screen_text.contains("No later run yet"), "{screen_text}");
        for frame in run(
            10,
            "run_2",
            &[
                ("charge", "failed"),
                ("refund", "passed"),
                ("new one", "passed"),
            ],
        )
        .into_iter()
        .chain(run(
            20,
            "run_3",
            &[
                ("charge", "passed"),
                ("refund", "passed"),
                ("gone", "passed"),
            ],
        )) {
            screen.model.fold(Box::new(
                spyglass_protocol::decode(&frame).expect("a test frame"),
            ));
        }
        view.after_model_change(&screen.model);
        let text = screen.text(&mut view, 140, 18);
        assert!(
            text.contains("run_2: 1 regression, 1 fixed, 1 new, 1 removed"),
            "{text}"
        );
        assert!(text.contains("  newly failing payments / charge"), "{text}");
        assert!(
            text.contains("run_3: 0 regressions, 1 fixed, 0 new, 0 removed"),
            "{text}"
        );
        insta::assert_snapshot!(text);
        let Effect::Notice(text) = screen.act(&mut view, Action::PinRun) else {
            panic!("pinning says so");
        };
        assert_eq!(
            text,
            "pinned run run_3: later runs show what changed against it"
        );
        screen.act(&mut view, Action::PinRun);
        assert_eq!(view.pinned, None, "p on the pinned run unpins it");
    }
}
