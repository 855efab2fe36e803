//! The Sessions tab: the session list (newest first, filterable, selection kept by id) on
//! the left; on the right the selected session's Mocks table and its Timeline waterfall, or
//! a call's input and output as pretty JSON. Only visible rows are ever touched.
//!
//! ```text
//! ┌ Sessions 3 ───────────────────────┐┌ Mocks ─────────────────────────────────┐
//! │ ID        USER   STATUS CALLS ... ││ TOOL            MODE     CONSUMED  CALLS│
//! │>ses_3     ana    active     4     ││ nuvem/create    stateful ████░ 1/2     1│
//! │ ses_2     ...                     │└────────────────────────────────────────┘
//! │                                   │┌ Timeline · in order ───────────────────┐
//! │                                   ││ CALL        +0ms ─────────── +12ms  DUR │
//! │                                   ││ tool_a      ███                    3.5ms│
//! └───────────────────────────────────┘└────────────────────────────────────────┘
//! ```
//!
//! `state` holds the selection and the timeline's cached order, `lines` the text built from
//! the model (the timeline order, a call's detail), `render` the drawing.

mod lines;
mod mocks;
mod render;
mod state;

pub use mocks::MocksPane;
pub use state::{CallSort, Detail, Focus, ListColumn, ListOrder, SessionsState};

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
        if self.searching() {
            match text_key(cx.keymap, key) {
                TextKey::Quit => return Some(Effect::Quit),
                other => self.search_key(other),
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

    fn on_click(&mut self, at: Position, model: &Model) -> Effect {
        self.click(at, model);
        Effect::None
    }

    fn on_wheel(&mut self, at: Position) {
        self.focus_at(at);
    }

    fn pane_open(&self) -> bool {
        self.detail.is_some() || self.focus == Focus::Mocks
    }

    fn copy_text(&self, model: &Model) -> Option<(String, String)> {
        SessionsState::copy_text(self, model)
    }

    fn render(&self, frame: &mut Frame, area: Rect, cx: &Cx) -> Drawn {
        render::render(self, frame, area, cx)
    }

    fn place(&mut self, drawn: &Drawn, _model: &Model) {
        self.list.place(drawn.get(Pane::List));
        self.mocks_table = drawn.get(Pane::MocksTable).map(|p| p.rows);
        self.timeline.place(drawn.get(Pane::Timeline));
        match &mut self.detail {
            Some(detail) => detail.pane.place(drawn.get(Pane::Detail)),
            None => self.mocks.pane.place(drawn.get(Pane::Mocks)),
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
        assert!(text.contains("in order (o)"), "{text}");
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

    /// A session whose payment mock answers by input: three calls answered by rules 1, 0
    /// and 1, one by the fallback; the Mocks pane counts them per rule and the opened
    /// call names the rule that answered it.
    #[test]
    fn a_rules_mock_shows_which_rule_answered_each_call() {
        let call = |seq: u64, n: u32, answered: &str, consumed: u32| {
            format!(
                r#"{{"kind":"tool.called","seq":{seq},"ts":"2026-11-22T21:43:3{n}.000Z","sessionId":"ses_r","callId":"call_{n}","tool":"asaas/create_payment","input":{{"value":{n}}},"outcome":{{"result":{{"id":"pay_{n}"}}}},"startedAt":"2026-11-22T21:43:3{n}.000Z","duration":2.0,"counter":{{"consumed":{consumed}{answered}}},"source":"execute"}}"#
            )
        };
        let screen = Screen::new(model(&[
            r#"{"kind":"session.created","seq":1,"ts":"2026-11-22T21:43:30.000Z","sessionId":"ses_r","userId":"ana","servers":["asaas"],"project":"default","mocks":[{"tool":"asaas/create_payment","mode":"rules","entries":3,"fallback":true},{"tool":"asaas/get_balance","mode":"static","entries":1}]}"#.to_owned(),
            call(2, 1, r#","rule":1"#, 1),
            call(3, 2, r#","rule":0"#, 2),
            call(4, 3, r#","rule":1"#, 3),
            call(5, 4, r#","fallback":true"#, 4),
        ]));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        let text = screen.text(&mut view, 100, 14);
        assert!(text.contains("#0:1 #1:2 #2:0 fb:1"), "{text}");
        insta::assert_snapshot!("rules_mock_pane", text);
        screen.act(&mut view, Action::FocusRight);
        screen.act(&mut view, Action::Open);
        let text = screen.text(&mut view, 100, 14);
        assert!(text.contains("counter 1 · rule #1"), "{text}");
        insta::assert_snapshot!("rules_mock_call", text);
    }

    /// A static mock never runs out, so CONSUMED says how many answers it served (its
    /// counter); one the stream never counted, or never called, still reads `—`.
    #[test]
    fn a_static_mock_says_how_many_answers_it_served() {
        let call = |seq: u64, counter: &str| {
            format!(
                r#"{{"kind":"tool.called","seq":{seq},"ts":"2026-11-22T21:43:3{seq}.000Z","sessionId":"ses_s","callId":"call_{seq}","tool":"asaas/get_balance","input":{{}},"outcome":{{"result":{{"balance":{seq}}}}},"startedAt":"2026-11-22T21:43:3{seq}.000Z","duration":2.0{counter},"source":"execute"}}"#
            )
        };
        let created = r#"{"kind":"session.created","seq":1,"ts":"2026-11-22T21:43:30.000Z","sessionId":"ses_s","userId":"ana","servers":["asaas"],"project":"default","mocks":[{"tool":"asaas/get_balance","mode":"static","entries":1},{"tool":"asaas/get_payment","mode":"static","entries":1}]}"#.to_owned();
        let screen = Screen::new(model(&[
            created.clone(),
            call(2, r#","counter":{"consumed":1}"#),
            call(3, r#","counter":{"consumed":2}"#),
            call(4, r#","counter":{"consumed":3}"#),
        ]));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        let text = screen.text(&mut view, 100, 14);
        let row = |name: &str| {
            text.lines()
                .find(|l| l.contains(name))
                .unwrap_or_default()
                .to_owned()
        };
        assert!(
            row("asaas/get_balance").contains("static 3 served"),
            "{text}"
        );
        assert!(
            row("asaas/get_payment").contains("— ○ never called"),
            "{text}"
        );
        // Calls the stream told without a counter: how many were served is unknown.
        let screen = Screen::new(model(&[created, call(2, ""), call(3, "")]));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        let text = screen.text(&mut view, 100, 14);
        let row = text
            .lines()
            .find(|l| l.contains("asaas/get_balance"))
            .unwrap_or_default();
        assert!(row.contains("static —"), "{text}");
        assert!(!text.contains("served"), "{text}");
    }

    /// A session declaring a static, a stateful (one of two entries served) and a rules
    /// mock (rule #1 answered once), each with its payload on the stream.
    fn mocked(exhaust: bool) -> (Screen, SessionsState) {
        let call = |seq: u64, id: &str, tool: &str, counter: &str| {
            format!(
                r#"{{"kind":"tool.called","seq":{seq},"ts":"2026-11-22T21:43:31.000Z","sessionId":"ses_m","callId":"{id}","tool":"{tool}","input":{{"to":"b"}},"outcome":{{"result":{{"ok":true}}}},"startedAt":"2026-11-22T21:43:31.00{seq}Z","duration":1.0,"counter":{counter},"source":"execute"}}"#
            )
        };
        let mut frames = vec![
            r#"{"kind":"session.created","seq":1,"ts":"2026-11-22T21:43:30.000Z","sessionId":"ses_m","userId":"ana","servers":["asaas"],"project":"default","mocks":[{"tool":"asaas/create_payment","mode":"static","entries":1,"payload":{"id":"pay_1","paid":false,"fee":null}},{"tool":"nuvem-fiscal/create_nfe","mode":"stateful","entries":2,"payload":[{"id":"nfe_1"},{"id":"nfe_2","amount":12.5}]},{"tool":"z-api/send_message","mode":"rules","entries":2,"fallback":true,"payload":{"$rules":[{"match":{"to":"a"},"output":{"id":"m_a"}},{"match":{"to":"b"},"output":{"id":"m_b"}}],"$fallback":{"id":"m_other"}}}]}"#.to_owned(),
            call(2, "call_nfe1", "nuvem-fiscal/create_nfe", r#"{"consumed":1,"total":2}"#),
            call(3, "call_msg", "z-api/send_message", r#"{"consumed":1,"rule":1}"#),
            call(4, "call_pay", "asaas/create_payment", r#"{"consumed":1}"#),
        ];
        if exhaust {
            frames.push(call(
                5,
                "call_nfe2",
                "nuvem-fiscal/create_nfe",
                r#"{"consumed":2,"total":2}"#,
            ));
        }
        let screen = Screen::new(model(&frames));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        (screen, view)
    }

    #[test]
    fn a_click_on_the_mocks_table_focuses_it() {
        let (screen, mut view) = mocked(false);
        let text = screen.text(&mut view, 80, 24);
        // The mocks table is above the timeline: the first row naming the tool is its.
        let y = text
            .lines()
            .position(|l| l.contains("/create_nfe"))
            .unwrap_or_else(|| panic!("a mock row:\n{text}"));
        view.on_click(Position::new(60, u16::try_from(y).unwrap()), &screen.model);
        assert_eq!(view.focus, Focus::Mocks);
        let text = screen.text(&mut view, 80, 24);
        assert!(text.contains("›▸ asaas/create_payment"), "{text}");
    }

    #[test]
    fn the_mocks_pane_takes_the_focus_from_the_timeline_and_opens_each_mock() {
        let (screen, mut view) = mocked(false);
        screen.act(&mut view, Action::FocusRight);
        let text = screen.text(&mut view, 80, 24);
        assert!(text.contains("Mocks · → focus"), "{text}");
        screen.act(&mut view, Action::FocusRight);
        assert_eq!(view.focus, Focus::Mocks);
        assert!(view.pane_open(), "the pane's keys come first");
        let text = screen.text(&mut view, 80, 24);
        assert!(text.contains("›▸ asaas/create_payment"), "{text}");
        insta::assert_snapshot!("mocks_focused_80", text);
        // The cursor moves mock to mock; Enter opens the stateful one.
        screen.act(&mut view, Action::Down);
        screen.act(&mut view, Action::Open);
        let text = screen.text(&mut view, 80, 24);
        assert!(text.contains("›▾ nuvem-fiscal/create_nfe"), "{text}");
        assert!(text.contains("entry #0 · answered call_nfe1"), "{text}");
        assert!(text.contains("entry #1 · ▶ next to be served"), "{text}");
        assert!(text.contains("\"amount\": 12.5"), "{text}");
        insta::assert_snapshot!("mocks_stateful_open_80", text);
        // Every mock open: the static output and each rule with the call it answered.
        screen.act(&mut view, Action::Up);
        screen.act(&mut view, Action::Open);
        let wide = screen.text(&mut view, 200, 50);
        for want in ["output · answered call_pay", "\"paid\": false"] {
            assert!(wide.contains(want), "{want} in\n{wide}");
        }
        screen.act(&mut view, Action::Bottom);
        screen.act(&mut view, Action::Open);
        let wide = screen.text(&mut view, 200, 50);
        for want in [
            "rule #0 · not called yet",
            "rule #1 · answered call_msg",
            "$fallback · not called yet",
        ] {
            assert!(wide.contains(want), "{want} in\n{wide}");
        }
        insta::assert_snapshot!("mocks_all_open_200", wide);
        // Enter closes what it opened; Esc gives the focus back to the timeline.
        screen.act(&mut view, Action::Open);
        let text = screen.text(&mut view, 200, 50);
        assert!(!text.contains("rule #1"), "{text}");
        screen.act(&mut view, Action::Back);
        assert_eq!(view.focus, Focus::Timeline);
        assert!(!view.pane_open());
    }

    #[test]
    fn an_exhausted_mock_stays_red_and_its_payload_is_searched_with_slash() {
        let (screen, mut view) = mocked(true);
        screen.act(&mut view, Action::FocusRight);
        screen.act(&mut view, Action::FocusRight);
        screen.act(&mut view, Action::Down);
        screen.act(&mut view, Action::Open);
        screen.act(&mut view, Action::Down);
        let buf = screen.draw(&mut view, 100, 24);
        let text = crate::ui::views::testing::text(&buf);
        assert!(text.contains("stateful 2/2 · exhausted"), "{text}");
        assert!(text.contains("entry #1 · answered call_nfe2"), "{text}");
        let (x, y) = text
            .lines()
            .enumerate()
            .find_map(|(y, l)| {
                let at = l.find("nuvem-fiscal")?;
                Some((l[..at].chars().count() as u16, y as u16))
            })
            .expect("the header on screen");
        assert_eq!(buf[(x, y)].fg, Theme::default().error);
        // `/` searches the pane; `n` finds the next match.
        screen.act(&mut view, Action::Filter);
        for c in "nfe_".chars() {
            let key = crossterm::event::KeyEvent::new(
                crossterm::event::KeyCode::Char(c),
                crossterm::event::KeyModifiers::NONE,
            );
            view.search_key(TextKey::Edit(key));
        }
        view.search_key(TextKey::Keep);
        screen.act(&mut view, Action::NextMatch);
        let text = screen.text(&mut view, 100, 24);
        assert!(text.contains("/nfe_ 2/2"), "{text}");
    }

    /// Watching every project, each row names its session's project.
    #[test]
    fn the_every_project_list_names_each_sessions_project() {
        let mut screen = Screen::new(model(&[
            created(1, "ses_01"),
            created(2, "ses_02").replace("\"default\"", "\"prj_beta\""),
        ]));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        let one = screen.text(&mut view, 80, 8);
        assert!(!one.contains("PROJECT"), "{one}");
        screen.all_projects = true;
        let all = screen.text(&mut view, 80, 8);
        assert!(all.contains("PROJECT"), "{all}");
        let row = |id: &str| {
            all.lines()
                .find(|l| l.contains(id))
                .unwrap_or_default()
                .to_owned()
        };
        assert!(row("ses_02").contains("prj_beta"), "{all}");
        assert!(row("ses_01").contains("default"), "{all}");
        insta::assert_snapshot!("all_projects_80", all);
    }

    /// A failed run of four payments, each held for approval: one still pending, one
    /// approved and replayed, one denied, one expired. The session has metadata.
    fn failed_run_with_held_calls() -> (Screen, SessionsState) {
        held_calls(true)
    }

    fn held_calls(failed: bool) -> (Screen, SessionsState) {
        let mut frames = vec![format!(
            r#"{{"kind":"session.created","seq":1,"ts":"2026-11-22T21:43:30.000Z","sessionId":"ses_run","userId":"ana","servers":["asaas"],"project":"default","mocks":[{{"tool":"asaas/create_payment","mode":"stateful","entries":2}}],"metadata":{{"branch":"main","ci_job":"1234"}}}}"#
        )];
        let mut seq = 2;
        for (n, decision) in ["pending", "approved", "denied", "expired"]
            .iter()
            .enumerate()
        {
            let (call, apr) = (format!("call_{n}"), format!("apr_{n}"));
            frames.push(format!(
                r#"{{"kind":"tool.called","seq":{seq},"ts":"2026-11-22T21:43:31.00{n}Z","sessionId":"ses_run","callId":"{call}","tool":"asaas/create_payment","input":{{"value":5000}},"outcome":{{"envelope":{{"code":"approval_required","approval_id":"{apr}","expires_at":"2026-11-22T21:58:00.000Z","message":"held"}}}},"startedAt":"2026-11-22T21:43:31.00{n}Z","duration":0.4,"source":"execute"}}"#
            ));
            frames.push(format!(
                r#"{{"kind":"approval.requested","seq":{},"ts":"2026-11-22T21:43:31.00{n}Z","sessionId":"ses_run","approvalId":"{apr}","callId":"{call}","tool":"asaas/create_payment","input":{{"value":5000}},"ruleId":"big","expiresAt":"2026-11-22T21:58:00.000Z","message":"held"}}"#,
                seq + 1
            ));
            seq += 2;
            if *decision != "pending" {
                frames.push(format!(
                    r#"{{"kind":"approval.resolved","seq":{seq},"ts":"2026-11-22T21:43:40.000Z","sessionId":"ses_run","approvalId":"{apr}","decision":"{decision}"}}"#
                ));
                seq += 1;
            }
            if *decision == "approved" {
                frames.push(format!(
                    r#"{{"kind":"approval.replayed","seq":{seq},"ts":"2026-11-22T21:43:40.010Z","sessionId":"ses_run","approvalId":"{apr}","callId":"{call}","tool":"asaas/create_payment","outcome":{{"result":{{"id":"pay_1"}}}},"duration":0.4,"counter":{{"consumed":1,"total":2}}}}"#
                ));
                seq += 1;
            }
        }
        frames.extend(failed.then(|| format!(
            r#"{{"kind":"agent.failed","seq":{seq},"ts":"2026-11-22T21:43:45.000Z","sessionId":"ses_run","agentName":"billing","model":"gpt-4o-mini","provider":"openai","input":"Charge cus_1 5000 by boleto, due Dec 1","output":null,"steps":[],"tokens":{{"prompt":812,"completion":96,"total":908}},"duration":2310.5,"finishReason":"error","streaming":false,"failoverAttempts":1,"error":"Rate limited by provider"}}"#
        )));
        let screen = Screen::new(model(&frames));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        screen.act(&mut view, Action::FocusRight);
        (screen, view)
    }

    #[test]
    fn a_failed_run_says_why_above_its_timeline() {
        let (screen, mut view) = failed_run_with_held_calls();
        let narrow = screen.text(&mut view, 80, 24);
        assert!(
            narrow.contains("failed: Rate limited by provider"),
            "{narrow}"
        );
        assert!(narrow.contains("gpt-4o-mini"), "{narrow}");
        insta::assert_snapshot!("run_summary_80", narrow);
        let wide = screen.text(&mut view, 200, 30);
        assert!(wide.contains("branch=main"), "{wide}");
        assert!(wide.contains("908 tokens"), "{wide}");
        insta::assert_snapshot!("run_summary_200", wide);
    }

    /// A run forwarded by an external sender (`POST /v1/events`, no session id): two steps
    /// whose counts leave `total` out (the second has none of its own, only the run so
    /// far) and a run event without a total. The steps read 20 and 27 tokens and the run
    /// 47, their sum; a second run of the same agent in the session is said, not summed.
    #[test]
    fn an_external_runs_step_tokens_add_up_to_its_total() {
        let step = |seq: u64, iteration: u32, own: &str, so_far: &str| {
            format!(
                r#"{{"kind":"agent.step.completed","seq":{seq},"ts":"2026-11-22T21:43:3{seq}.000Z","agentName":"billing-bot","model":"gpt-4o-mini","provider":"openai","iteration":{iteration},"step":{{"iteration":{iteration},"model":"gpt-4o-mini","tokens":{own},"finishReason":"stop","toolCalls":[]}},"tokens":{so_far},"duration":{seq}000.0,"streaming":false}}"#
            )
        };
        let done = |seq: u64| {
            format!(
                r#"{{"kind":"agent.completed","seq":{seq},"ts":"2026-11-22T21:43:3{seq}.000Z","agentName":"billing-bot","model":"gpt-4o-mini","provider":"openai","input":"Charge R$5","output":"Charged","steps":[],"tokens":{{"prompt":36,"completion":11}},"duration":2000.0,"finishReason":"stop","streaming":false}}"#
            )
        };
        let mut frames = vec![
            step(
                1,
                0,
                r#"{"prompt":12,"completion":8}"#,
                r#"{"prompt":12,"completion":8}"#,
            ),
            step(2, 1, "{}", r#"{"prompt":36,"completion":11}"#),
            done(3),
        ];
        let screen = Screen::new(model(&frames));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        let text = screen.text(&mut view, 200, 30);
        let row = |needle: &str| {
            text.lines()
                .find(|l| l.contains(needle))
                .unwrap_or_default()
                .to_owned()
        };
        assert!(text.contains("47 tokens (36 in, 11 out)"), "{text}");
        assert!(row("step 0").contains("20 tokens"), "{text}");
        assert!(row("step 1").contains("27 tokens"), "{text}");
        assert!(
            !text.contains("steps sum") && !text.contains("runs"),
            "{text}"
        );

        frames.extend([
            step(
                4,
                0,
                r#"{"prompt":12,"completion":8}"#,
                r#"{"prompt":12,"completion":8}"#,
            ),
            step(5, 1, "{}", r#"{"prompt":36,"completion":11}"#),
            done(6),
        ]);
        let screen = Screen::new(model(&frames));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        let text = screen.text(&mut view, 200, 30);
        assert!(text.contains("47 tokens (36 in, 11 out)"), "{text}");
        assert!(text.contains("steps: 94 tokens over 2 runs"), "{text}");
    }

    /// A scripted run whose first model call threw (`fail_on_step` 0) and was retried:
    /// step 0 carries the failed attempt, which the timeline shows on the step's row.
    fn retried_run() -> (Screen, SessionsState) {
        let frames = vec![
            r#"{"kind":"session.created","seq":1,"ts":"2026-11-22T21:43:30.000Z","sessionId":"ses_retry","userId":"ana","servers":["asaas"],"project":"default","mocks":[{"tool":"asaas/get_payment","mode":"static","entries":1}]}"#.to_owned(),
            r#"{"kind":"tool.called","seq":2,"ts":"2026-11-22T21:43:30.020Z","sessionId":"ses_retry","callId":"call_1","tool":"asaas/get_payment","input":{"id":"pay_1"},"outcome":{"result":{"status":"PAID"}},"startedAt":"2026-11-22T21:43:30.015Z","duration":5.0,"source":"send","iteration":0}"#.to_owned(),
            r#"{"kind":"agent.step.completed","seq":3,"ts":"2026-11-22T21:43:30.021Z","sessionId":"ses_retry","agentName":"spyglass-fake","model":"fake","provider":"fake","iteration":0,"step":{"iteration":0,"model":"fake","tokens":{"prompt":12,"completion":8,"total":20},"finishReason":"tool_calls","toolCalls":[{"id":"call_1","name":"asaas/get_payment","args":{"id":"pay_1"},"result":{"status":"PAID"},"duration":5.0,"needsApproval":false}],"failedAttempts":[{"call":0,"error":"Rate limited by provider"}]},"tokens":{"prompt":12,"completion":8,"total":20},"duration":21.0,"streaming":false,"conversationId":"ses_retry","startedAt":"2026-11-22T21:43:30.000Z"}"#.to_owned(),
            r#"{"kind":"agent.step.completed","seq":4,"ts":"2026-11-22T21:43:30.030Z","sessionId":"ses_retry","agentName":"spyglass-fake","model":"fake","provider":"fake","iteration":1,"step":{"iteration":1,"model":"fake","tokens":{"prompt":24,"completion":3,"total":27},"finishReason":"stop","toolCalls":[]},"tokens":{"prompt":36,"completion":11,"total":47},"duration":30.0,"streaming":false,"conversationId":"ses_retry","startedAt":"2026-11-22T21:43:30.021Z"}"#.to_owned(),
            r#"{"kind":"agent.completed","seq":5,"ts":"2026-11-22T21:43:30.031Z","sessionId":"ses_retry","agentName":"spyglass-fake","model":"fake","provider":"fake","input":"Is pay_1 paid?","output":"Paid.","steps":[],"tokens":{"prompt":36,"completion":11,"total":47},"duration":30.0,"finishReason":"stop","streaming":false,"conversationId":"ses_retry","failoverAttempts":1}"#.to_owned(),
        ];
        let screen = Screen::new(model(&frames));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        screen.act(&mut view, Action::FocusRight);
        (screen, view)
    }

    /// One session whose run ended with `run_fields` (JSON members after `tokens`).
    fn priced_run(kind: &str, run_fields: &str) -> (Screen, SessionsState) {
        let frames = [
            created(1, "ses_paid"),
            format!(
                r#"{{"kind":"{kind}","seq":2,"ts":"2026-11-22T21:43:45.000Z","sessionId":"ses_paid","agentName":"spyglass-fake","model":"gpt-4o-mini","provider":"openai","input":"Charge R$5","output":"Charged pay_1","steps":[],"tokens":{{"prompt":1840,"completion":310,"total":2150}},"duration":1840.0,"finishReason":"stop","streaming":true,"failoverAttempts":0{run_fields}}}"#
            ),
        ];
        let screen = Screen::new(model(&frames));
        let mut view = SessionsState::default();
        view.after_model_change(&screen.model);
        screen.act(&mut view, Action::FocusRight);
        (screen, view)
    }

    #[test]
    fn a_retried_model_call_shows_on_its_step() {
        let (screen, mut view) = retried_run();
        let narrow = screen.text(&mut view, 80, 24);
        assert!(narrow.contains("retried: Rate limited"), "{narrow}");
        insta::assert_snapshot!("retried_step_80", narrow);
        let wide = screen.text(&mut view, 200, 30);
        assert!(wide.contains("retried: Rate limited by provider"), "{wide}");
        assert!(wide.contains("step 1 · stop"), "{wide}");
        assert!(wide.contains("step 0 ↻1 · tool_calls"), "{wide}");
        assert!(wide.contains("1 failover"), "{wide}");
        insta::assert_snapshot!("retried_step_200", wide);
    }

    #[test]
    fn a_run_summary_shows_the_model_its_tokens_and_what_they_cost() {
        let (screen, mut view) = priced_run("agent.completed", r#","cost":0.000462"#);
        let narrow = screen.text(&mut view, 80, 24);
        for word in [
            "model gpt-4o-mini (openai)",
            "2150 tokens (1840 in, 310 out) · $0.000462",
        ] {
            assert!(narrow.contains(word), "{word} in\n{narrow}");
        }
        insta::assert_snapshot!("run_cost_80", narrow);
        insta::assert_snapshot!("run_cost_200", screen.text(&mut view, 200, 30));
    }

    #[test]
    fn a_run_without_a_price_says_why_it_has_no_cost() {
        let (screen, mut view) = priced_run(
            "agent.failed",
            r#","error":"openai: the stream broke after 2 text deltas: connection reset","costMissing":"no price for model `gpt-4o-mini` (--model-prices)""#,
        );
        let wide = screen.text(&mut view, 200, 30);
        assert!(
            wide.contains("cost unknown: no price for model `gpt-4o-mini` (--model-prices)"),
            "{wide}"
        );
        assert!(!wide.contains("$0"), "{wide}");
        insta::assert_snapshot!("run_cost_unknown_200", wide);
        // A run event from another agent tells neither: nothing is said of a cost.
        let (screen, mut view) = priced_run("agent.completed", "");
        let text = screen.text(&mut view, 200, 30);
        assert!(!text.contains("cost") && !text.contains("$0"), "{text}");
    }

    #[test]
    fn costs_read_as_dollars_with_their_significant_digits() {
        assert_eq!(render::fmt_cost(0.0), "$0");
        assert_eq!(render::fmt_cost(0.000_462), "$0.000462");
        assert_eq!(render::fmt_cost(0.012_34), "$0.01234");
        assert_eq!(render::fmt_cost(0.45), "$0.45");
        assert_eq!(render::fmt_cost(12.345), "$12.35");
    }

    #[test]
    fn a_held_calls_outcome_says_how_the_hold_stands_and_fits_at_80() {
        let (screen, mut view) = held_calls(false);
        let narrow = screen.text(&mut view, 80, 30);
        for word in ["pending", "approved → ok", "denied", "expired"] {
            assert!(narrow.contains(word), "{word} in\n{narrow}");
        }
        assert!(!narrow.contains("approval_require"), "{narrow}");
        insta::assert_snapshot!("held_outcomes_80", narrow);
        insta::assert_snapshot!("held_outcomes_200", screen.text(&mut view, 200, 30));
    }
}
