//! The Evals tab's state: the selected suite and case (by name, so results arriving never
//! move them), the focus, and the open case with its prepared lines.

use super::lines::{Tone, case_lines};
use crate::model::Model;
use crate::ui::action::{Action, KeyMap};
use crate::ui::views::pane::{PaneKey, PaneLine, TextPane};
use crate::ui::views::query::Query;
use crate::ui::views::{Effect, ListCursor, TextKey, edit_filter, key_cap};
use ratatui::layout::Position;
use spyglass_protocol::rest::{CaseSummary, SuiteSummary};

/// A case's lines in the shared pane's tones.
fn pane_lines(lines: Vec<(Tone, String)>) -> Vec<PaneLine> {
    use crate::ui::views::pane::Tone as T;
    lines
        .into_iter()
        .map(|(tone, text)| {
            let tone = match tone {
                Tone::Heading => T::Heading,
                Tone::Plain => T::Plain,
                Tone::Muted => T::Muted,
                Tone::Pass | Tone::Added => T::Ok,
                Tone::Fail | Tone::Removed => T::Error,
                Tone::Changed => T::Warn,
            };
            PaneLine::new(tone, text)
        })
        .collect()
}

/// A case's statistics in its suite's newest run, with that run's id, when the run
/// repeated it (with one attempt the status line already says all of it).
fn run_stats<'m>(
    model: &'m Model,
    suite: &str,
    case: &str,
) -> Option<(&'m str, &'m spyglass_eval::stats::CaseStats)> {
    let latest = model.evals.latest(suite)?;
    let stats = latest.cases.get(case)?;
    (stats.strip.chars().count() > 1).then_some((latest.run_id.as_str(), stats))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvalFocus {
    #[default]
    Suites,
    Cases,
}

/// The open case: its lines, prepared once per model change, and how far it is scrolled.
#[derive(Debug, Clone)]
pub struct CaseDetail {
    pub suite: String,
    pub case: String,
    pub(super) rev: u64,
    pub pane: TextPane,
}

/// Selection is by name, so results arriving never move what the user is looking at.
#[derive(Debug, Clone, Default)]
pub struct EvalsState {
    pub suites: ListCursor<String>,
    pub cases: ListCursor<String>,
    pub focus: EvalFocus,
    pub detail: Option<CaseDetail>,
    /// The run later runs are compared with (`p`), by id.
    pub pinned: Option<String>,
    /// The selected suite's cases shown are those this filter keeps (`query::Query`).
    pub filter: String,
    pub editing_filter: bool,
}

/// Whether the filter keeps a case: `status:failed`, `flaky:yes`, `case:X`, or its name.
fn keeps(query: &Query, case: &CaseSummary) -> bool {
    let flaky = if case.flaky { "yes" } else { "no" };
    query.matches(
        &[
            ("status", case.last_status.as_str()),
            ("flaky", flaky),
            ("case", &case.case),
        ],
        &[&case.case],
    )
}

impl EvalsState {
    pub(super) fn suite<'m>(&self, model: &'m Model) -> Option<&'m SuiteSummary> {
        self.suites
            .selected
            .as_deref()
            .and_then(|s| model.evals.suite(s))
    }

    /// The suite's cases the filter keeps, in the suite's order.
    pub(super) fn shown_cases<'m>(&self, suite: &'m SuiteSummary) -> Vec<&'m CaseSummary> {
        let query = Query::parse(&self.filter);
        suite.cases.iter().filter(|c| keeps(&query, c)).collect()
    }

    /// The selected case's row among the shown cases.
    pub(super) fn case_row(&self, suite: &SuiteSummary) -> Option<usize> {
        let case = self.cases.selected.as_deref()?;
        if self.filter.is_empty() {
            return suite.cases.iter().position(|c| c.case == case);
        }
        self.shown_cases(suite).iter().position(|c| c.case == case)
    }

    /// Shows one case (a jump): its suite selected, the cases focused, a filter hiding
    /// it cleared.
    pub fn select_case(&mut self, suite: &str, case: &str, model: &Model) {
        self.detail = None;
        self.suites.selected = Some(suite.to_owned());
        self.cases.selected = Some(case.to_owned());
        self.focus = EvalFocus::Cases;
        if let Some(summary) = self.suite(model)
            && self.case_row(summary).is_none()
        {
            self.filter.clear();
            self.editing_filter = false;
        }
    }

    /// A key while the filter is typed; the selection moves to the first shown case when
    /// the filter hides it.
    pub(super) fn filter_key(&mut self, key: TextKey, model: &Model) -> Effect {
        match key {
            TextKey::Keep => self.editing_filter = false,
            TextKey::Discard => {
                self.editing_filter = false;
                self.filter.clear();
            }
            TextKey::Quit => return Effect::Quit,
            TextKey::Edit(key) => {
                edit_filter(&mut self.filter, key);
            }
            TextKey::Ignore => {}
        }
        self.after_model_change(model);
        Effect::None
    }

    /// Picks the first suite and case when none is selected (or it is gone).
    pub fn after_model_change(&mut self, model: &Model) {
        if self.suite(model).is_none() {
            self.suites.selected = model.evals.suite_at(0).map(|s| s.suite.clone());
            self.cases.selected = None;
        }
        if let Some(suite) = self.suite(model)
            && self.case_row(suite).is_none()
        {
            self.cases.selected = self.shown_cases(suite).first().map(|c| c.case.clone());
        }
        // The open case follows its latest result.
        if let Some(detail) = &mut self.detail
            && detail.rev != model.evals.rev
            && let Some(case) = model.evals.case(&detail.suite, &detail.case)
        {
            detail.pane.set_lines(pane_lines(case_lines(
                &detail.suite,
                case,
                run_stats(model, &detail.suite, &detail.case),
            )));
            detail.rev = model.evals.rev;
        }
    }

    fn select_suite_row(&mut self, model: &Model, row: usize) {
        let Some(suite) = model.evals.suite_at(row) else {
            return;
        };
        if self.suites.selected.as_deref() != Some(&suite.suite) {
            self.suites.selected = Some(suite.suite.clone());
            self.cases.selected = self.shown_cases(suite).first().map(|c| c.case.clone());
            self.cases.offset = 0;
        }
    }

    pub fn dispatch(&mut self, action: Action, model: &Model, keymap: &KeyMap) -> Effect {
        if let Some(detail) = &mut self.detail {
            match detail.pane.on_action(action) {
                PaneKey::Used => return Effect::None,
                PaneKey::Close => {
                    self.detail = None;
                    return Effect::None;
                }
                PaneKey::Other => {}
            }
            match action {
                Action::PinRun => return self.pin(model),
                Action::RerunCase => return self.rerun_case(),
                Action::RerunSuite => return self.rerun_suite(),
                Action::JumpToSession => return self.jump(model),
                _ => {}
            }
            return Effect::None;
        }
        self.after_model_change(model);
        match action {
            Action::Filter => {
                self.editing_filter = true;
                self.focus = EvalFocus::Cases;
            }
            Action::Back if !self.filter.is_empty() => {
                self.filter.clear();
                self.after_model_change(model);
            }
            Action::FocusLeft | Action::Back => self.focus = EvalFocus::Suites,
            Action::FocusRight if self.cases.selected.is_some() => self.focus = EvalFocus::Cases,
            Action::Open => match self.focus {
                EvalFocus::Suites if self.cases.selected.is_some() => self.focus = EvalFocus::Cases,
                EvalFocus::Cases => self.open(model),
                EvalFocus::Suites => {}
            },
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => match self.focus {
                EvalFocus::Suites => {
                    let len = model.evals.suites_len();
                    let cur = self
                        .suites
                        .selected
                        .as_deref()
                        .and_then(|s| model.evals.suite_row(s))
                        .unwrap_or(0);
                    let row = self.suites.step(cur, len, action);
                    self.select_suite_row(model, row);
                }
                EvalFocus::Cases => {
                    if let Some(suite) = self.suite(model) {
                        let shown = self.shown_cases(suite);
                        let cur = self.case_row(suite).unwrap_or(0);
                        let row = self.cases.step(cur, shown.len(), action);
                        self.cases.selected = shown.get(row).map(|c| c.case.clone());
                    }
                }
            },
            Action::RerunCase | Action::JumpToSession if self.focus == EvalFocus::Suites => {
                return Effect::Notice(format!(
                    "pick a case first ({} shows the suite's cases); {} reruns the whole suite",
                    key_cap(keymap, Action::Open),
                    key_cap(keymap, Action::RerunSuite)
                ));
            }
            Action::RerunCase => return self.rerun_case(),
            Action::RerunSuite => return self.rerun_suite(),
            Action::JumpToSession => return self.jump(model),
            Action::PinRun => return self.pin(model),
            _ => {}
        }
        Effect::None
    }

    /// A click picks a suite or a case; a suite click closes an open case.
    pub(super) fn click(&mut self, at: Position, model: &Model) {
        if let Some(row) = self.suites.row_at(at) {
            if row < model.evals.suites_len() {
                self.detail = None;
                self.focus = EvalFocus::Suites;
                self.select_suite_row(model, row);
            }
        } else if let Some(row) = self.cases.row_at(at)
            && let Some(suite) = self.suite(model)
            && let Some(case) = self.shown_cases(suite).get(row)
        {
            self.cases.selected = Some(case.case.clone());
            self.focus = EvalFocus::Cases;
        }
    }

    /// The wheel scrolls the list under the pointer (or the open case).
    pub(super) fn focus_at(&mut self, at: Position) {
        if self.detail.is_some() {
            return;
        }
        if self.suites.contains(at) {
            self.focus = EvalFocus::Suites;
        } else if self.cases.contains(at) && self.cases.selected.is_some() {
            self.focus = EvalFocus::Cases;
        }
    }

    /// What `copy` takes: the selected case's summary (latest assertions included) when the
    /// cases or a case are in view, else the selected suite's.
    pub fn copy_text(&self, model: &Model) -> Option<(String, String)> {
        let suite = self.suite(model)?;
        let on_case = self.detail.is_some() || self.focus == EvalFocus::Cases;
        if on_case && let Some(case) = self.shown_cases(suite).get(self.case_row(suite)?) {
            let text = serde_json::to_string_pretty(case).ok()?;
            return Some((format!("case {} / {}", suite.suite, case.case), text));
        }
        let text = serde_json::to_string_pretty(suite).ok()?;
        Some((format!("suite {}", suite.suite), text))
    }

    fn open(&mut self, model: &Model) {
        let (Some(suite), Some(case)) = (
            self.suites.selected.as_deref(),
            self.cases.selected.as_deref(),
        ) else {
            return;
        };
        if let Some(summary) = model.evals.case(suite, case) {
            self.detail = Some(CaseDetail {
                suite: suite.to_owned(),
                case: case.to_owned(),
                rev: model.evals.rev,
                pane: TextPane::new(pane_lines(case_lines(
                    suite,
                    summary,
                    run_stats(model, suite, case),
                ))),
            });
        }
    }

    /// Pins the newest completed run, or unpins it when it is the pinned one.
    fn pin(&mut self, model: &Model) -> Effect {
        let newest = model
            .evals
            .runs
            .iter()
            .rev()
            .find(|r| r.completed.is_some() && !r.results.is_empty());
        match newest {
            None => Effect::Notice("no completed eval run to pin yet".to_owned()),
            Some(run) if self.pinned.as_deref() == Some(run.run_id.as_str()) => {
                self.pinned = None;
                Effect::Notice(format!("unpinned run {}", run.run_id))
            }
            Some(run) => {
                self.pinned = Some(run.run_id.clone());
                Effect::Notice(format!(
                    "pinned run {}: later runs show what changed against it",
                    run.run_id
                ))
            }
        }
    }

    fn rerun_case(&self) -> Effect {
        match (&self.suites.selected, &self.cases.selected) {
            (Some(suite), Some(case)) => Effect::Rerun {
                suite: suite.clone(),
                case: Some(case.clone()),
            },
            _ => Effect::Notice("no case to rerun yet".into()),
        }
    }

    fn rerun_suite(&self) -> Effect {
        match &self.suites.selected {
            Some(suite) => Effect::Rerun {
                suite: suite.clone(),
                case: None,
            },
            None => Effect::Notice("no suite to rerun yet".into()),
        }
    }

    fn jump(&self, model: &Model) -> Effect {
        let (Some(suite), Some(case)) = (
            self.suites.selected.as_deref(),
            self.cases.selected.as_deref(),
        ) else {
            return Effect::Notice("no case selected".into());
        };
        match model
            .evals
            .case(suite, case)
            .and_then(|c| c.last_session_id.clone())
        {
            Some(id) => Effect::ShowSession(id),
            None => Effect::Notice(format!(
                "{case} has no session to show (skipped, or reported without one)"
            )),
        }
    }
}
