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

use super::diff::{LineDiff, PathDiff, json_diff, line_diff};
use super::{fit, fmt_ms, row_at, scroll_pane};
use crate::model::Model;
use crate::protocol::events::{AssertionResult, EvalStatus};
use crate::protocol::rest::{CaseSummary, SuiteSummary};
use crate::sanitize::sanitize;
use crate::ui::action::{Action, Tab};
use crate::ui::app::App;
use crate::ui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvalFocus {
    #[default]
    Suites,
    Cases,
}

/// How a detail line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tone {
    Heading,
    Plain,
    Muted,
    Pass,
    Fail,
    /// Only in the expected value.
    Removed,
    /// Only in the actual value.
    Added,
    /// In both, different.
    Changed,
}

/// The open case: its lines, prepared once per model change, and how far it is scrolled.
#[derive(Debug, Clone)]
pub struct CaseDetail {
    pub suite: String,
    pub case: String,
    rev: u64,
    lines: Vec<(Tone, String)>,
    pub scroll: usize,
}

/// Selection is by name, so results arriving never move what the user is looking at.
#[derive(Debug, Clone, Default)]
pub struct EvalsState {
    pub suite: Option<String>,
    pub case: Option<String>,
    pub focus: EvalFocus,
    pub detail: Option<CaseDetail>,
    suite_offset: usize,
    suite_height: usize,
    case_offset: usize,
    case_height: usize,
    detail_height: usize,
    /// Where the rows were last drawn, for clicks; empty when not drawn.
    suite_rows: Rect,
    case_rows: Rect,
}

/// What a key on this tab asks of the rest of the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Nothing,
    Notice(String),
    /// Show this session in the Sessions tab.
    Jump(String),
    Rerun {
        suite: String,
        case: Option<String>,
    },
}

impl EvalsState {
    fn suite<'m>(&self, model: &'m Model) -> Option<&'m SuiteSummary> {
        self.suite.as_deref().and_then(|s| model.evals.suite(s))
    }

    fn case_row(&self, suite: &SuiteSummary) -> Option<usize> {
        let case = self.case.as_deref()?;
        suite.cases.iter().position(|c| c.case == case)
    }

    /// Picks the first suite and case when none is selected (or it is gone).
    pub fn after_model_change(&mut self, model: &Model) {
        if self.suite(model).is_none() {
            self.suite = model.evals.suite_at(0).map(|s| s.suite.clone());
            self.case = None;
        }
        if let Some(suite) = self.suite(model)
            && self.case_row(suite).is_none()
        {
            self.case = suite.cases.first().map(|c| c.case.clone());
        }
    }

    fn select_suite_row(&mut self, model: &Model, row: usize) {
        let Some(suite) = model.evals.suite_at(row) else {
            return;
        };
        if self.suite.as_deref() != Some(&suite.suite) {
            self.suite = Some(suite.suite.clone());
            self.case = suite.cases.first().map(|c| c.case.clone());
            self.case_offset = 0;
        }
    }

    pub fn dispatch(&mut self, action: Action, model: &Model) -> Effect {
        if let Some(detail) = &mut self.detail {
            let page = self.detail_height;
            if scroll_pane(&mut detail.scroll, detail.lines.len(), page, action) {
                return Effect::Nothing;
            }
            match action {
                Action::Back | Action::Open => self.detail = None,
                Action::RerunCase => return self.rerun_case(),
                Action::RerunSuite => return self.rerun_suite(),
                Action::JumpToSession => return self.jump(model),
                _ => {}
            }
            return Effect::Nothing;
        }
        self.after_model_change(model);
        match action {
            Action::FocusLeft | Action::Back => self.focus = EvalFocus::Suites,
            Action::FocusRight if self.case.is_some() => self.focus = EvalFocus::Cases,
            Action::Open => match self.focus {
                EvalFocus::Suites if self.case.is_some() => self.focus = EvalFocus::Cases,
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
                        .suite
                        .as_deref()
                        .and_then(|s| model.evals.suite_row(s))
                        .unwrap_or(0);
                    let row = step(cur, len, action, self.suite_height);
                    self.select_suite_row(model, row);
                }
                EvalFocus::Cases => {
                    if let Some(suite) = self.suite(model) {
                        let cur = self.case_row(suite).unwrap_or(0);
                        let row = step(cur, suite.cases.len(), action, self.case_height);
                        self.case = suite.cases.get(row).map(|c| c.case.clone());
                    }
                }
            },
            Action::RerunCase | Action::JumpToSession if self.focus == EvalFocus::Suites => {
                return Effect::Notice(
                    "pick a case first (Enter shows the suite's cases); R reruns the whole suite"
                        .into(),
                );
            }
            Action::RerunCase => return self.rerun_case(),
            Action::RerunSuite => return self.rerun_suite(),
            Action::JumpToSession => return self.jump(model),
            _ => {}
        }
        Effect::Nothing
    }

    /// A click picks a suite or a case; a suite click closes an open case.
    pub fn click(&mut self, at: Position, model: &Model) {
        if let Some(row) = row_at(self.suite_rows, at, self.suite_offset) {
            if row < model.evals.suites_len() {
                self.detail = None;
                self.focus = EvalFocus::Suites;
                self.select_suite_row(model, row);
            }
        } else if let Some(row) = row_at(self.case_rows, at, self.case_offset)
            && let Some(suite) = self.suite(model)
            && let Some(case) = suite.cases.get(row)
        {
            self.case = Some(case.case.clone());
            self.focus = EvalFocus::Cases;
        }
    }

    /// The wheel scrolls the list under the pointer (or the open case).
    pub fn focus_at(&mut self, at: Position) {
        if self.detail.is_some() {
            return;
        }
        if self.suite_rows.contains(at) {
            self.focus = EvalFocus::Suites;
        } else if self.case_rows.contains(at) && self.case.is_some() {
            self.focus = EvalFocus::Cases;
        }
    }

    /// What `copy` takes: the selected case's summary (latest assertions included) when the
    /// cases or a case are in view, else the selected suite's.
    pub fn copy_text(&self, model: &Model) -> Option<(String, String)> {
        let suite = self.suite(model)?;
        let on_case = self.detail.is_some() || self.focus == EvalFocus::Cases;
        if on_case && let Some(row) = self.case_row(suite) {
            let case = &suite.cases[row];
            let text = serde_json::to_string_pretty(case).ok()?;
            return Some((format!("case {} / {}", suite.suite, case.case), text));
        }
        let text = serde_json::to_string_pretty(suite).ok()?;
        Some((format!("suite {}", suite.suite), text))
    }

    fn open(&mut self, model: &Model) {
        let (Some(suite), Some(case)) = (self.suite.as_deref(), self.case.as_deref()) else {
            return;
        };
        if let Some(summary) = model.evals.case(suite, case) {
            self.detail = Some(CaseDetail {
                suite: suite.to_owned(),
                case: case.to_owned(),
                rev: model.evals.rev,
                lines: case_lines(suite, summary),
                scroll: 0,
            });
        }
    }

    fn rerun_case(&self) -> Effect {
        match (&self.suite, &self.case) {
            (Some(suite), Some(case)) => Effect::Rerun {
                suite: suite.clone(),
                case: Some(case.clone()),
            },
            _ => Effect::Notice("no case to rerun yet".into()),
        }
    }

    fn rerun_suite(&self) -> Effect {
        match &self.suite {
            Some(suite) => Effect::Rerun {
                suite: suite.clone(),
                case: None,
            },
            None => Effect::Notice("no suite to rerun yet".into()),
        }
    }

    fn jump(&self, model: &Model) -> Effect {
        let (Some(suite), Some(case)) = (self.suite.as_deref(), self.case.as_deref()) else {
            return Effect::Notice("no case selected".into());
        };
        match model
            .evals
            .case(suite, case)
            .and_then(|c| c.last_session_id.clone())
        {
            Some(id) => Effect::Jump(id),
            None => Effect::Notice(format!(
                "{case} has no session to show (skipped, or reported without one)"
            )),
        }
    }
}

/// Handles a key's action on the Evals tab, including what it asks of other tabs and of
/// the runtime.
pub fn dispatch(app: &mut App, action: Action) {
    match app.evals.dispatch(action, &app.model) {
        Effect::Nothing => {}
        Effect::Notice(text) => app.notice = Some(text),
        Effect::Jump(id) => {
            if app.sessions.select_session(&id, &app.model) {
                app.tab = Tab::Sessions;
            } else {
                app.notice = Some(format!(
                    "session {id} is no longer held (older sessions are dropped past the limit)"
                ));
            }
        }
        Effect::Rerun { suite, case } => {
            let what = match &case {
                Some(case) => format!("{suite} / {case}"),
                None => format!("suite {suite}"),
            };
            app.notice = Some(match &app.outbox {
                Some(outbox) => {
                    outbox.rerun(suite, case);
                    format!("rerunning {what}; results stream in")
                }
                None => app.offline(&format!("rerun {what}")).unwrap_or_default(),
            });
        }
    }
}

/// A case's duration, to the microsecond; an exact 0 comes from a runtime that reported
/// whole milliseconds (older history), where it meant under one.
fn case_ms(ms: f64) -> String {
    if ms <= 0.0 {
        "<1ms".to_owned()
    } else {
        fmt_ms(ms)
    }
}

/// Moves a cursor in a list of `len` rows.
fn step(cur: usize, len: usize, action: Action, page: usize) -> usize {
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
fn scroll_to(offset: usize, sel: usize, height: usize) -> usize {
    if height == 0 {
        offset
    } else if sel < offset {
        sel
    } else if sel >= offset + height {
        sel + 1 - height
    } else {
        offset
    }
}

// ---- text pieces ---------------------------------------------------------------------------

fn pct(rate: Option<f64>) -> String {
    match rate {
        Some(rate) => format!("{:>3.0}%", rate * 100.0),
        None => "   —".into(),
    }
}

fn gauge(rate: Option<f64>, width: usize) -> String {
    let filled = rate.map_or(0, |r| (r.clamp(0.0, 1.0) * width as f64).round() as usize);
    format!("{}{}", "█".repeat(filled), "░".repeat(width - filled))
}

/// The last `width` runs as block heights; `·` for a run whose cases were all skipped.
fn sparkline(trend: &[Option<f64>], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let skip = trend.len().saturating_sub(width);
    trend[skip..]
        .iter()
        .map(|r| match r {
            Some(r) => BARS[(r.clamp(0.0, 1.0) * 7.0).round() as usize],
            None => '·',
        })
        .collect()
}

fn status_label(status: EvalStatus) -> &'static str {
    match status {
        EvalStatus::Passed => "✓ passed",
        EvalStatus::Failed => "✗ failed",
        EvalStatus::Error => "! error",
        EvalStatus::Skipped => "- skipped",
    }
}

fn status_style(status: EvalStatus, theme: &Theme) -> Style {
    match status {
        EvalStatus::Passed => theme.ok(),
        EvalStatus::Failed | EvalStatus::Error => theme.error(),
        EvalStatus::Skipped => theme.muted(),
    }
}

fn judged(c: &CaseSummary) -> u32 {
    c.passed + c.failed + c.errored
}

fn compact(value: &Value) -> String {
    fit(&value.to_string(), 120)
}

/// A value as lines: a string's own lines, anything else pretty-printed.
fn value_lines(value: &Value) -> Vec<String> {
    match value {
        Value::String(text) if text.is_empty() => vec!["\"\"".into()],
        Value::String(text) => text.lines().map(str::to_owned).collect(),
        other => serde_json::to_string_pretty(other)
            .unwrap_or_else(|_| other.to_string())
            .lines()
            .map(str::to_owned)
            .collect(),
    }
}

/// A case's latest result, prepared for the detail pane.
fn case_lines(suite: &str, case: &CaseSummary) -> Vec<(Tone, String)> {
    let status_tone = match case.last_status {
        EvalStatus::Passed => Tone::Pass,
        EvalStatus::Failed | EvalStatus::Error => Tone::Fail,
        EvalStatus::Skipped => Tone::Muted,
    };
    let mut lines = vec![(
        Tone::Heading,
        sanitize(&format!("{suite} · {}", case.case)).into_owned(),
    )];
    let flaky = if case.flaky { " · flaky" } else { "" };
    // The latest result may come from running this case alone, which no rate counts.
    let rerun = if case.last_rerun {
        " (rerun of this case)"
    } else {
        ""
    };
    lines.push((
        status_tone,
        format!(
            "{}{rerun} · {} · pass {} {}/{} over {} run(s){flaky}",
            status_label(case.last_status),
            case_ms(case.last_duration),
            pct(case.pass_rate).trim_start(),
            case.passed,
            judged(case),
            case.runs,
        ),
    ));
    lines.push((
        Tone::Muted,
        format!(
            "session {} · run {}",
            case.last_session_id.as_deref().unwrap_or("-"),
            case.last_run_id.as_deref().unwrap_or("-"),
        ),
    ));
    if let Some(reason) = &case.last_reason {
        lines.push((Tone::Fail, format!("reason: {}", sanitize(reason))));
    }
    lines.push((Tone::Plain, String::new()));
    if case.last_assertions.is_empty() {
        lines.push((
            Tone::Muted,
            "No assertions in the latest result.".to_owned(),
        ));
    }
    for assertion in &case.last_assertions {
        if assertion.pass {
            lines.push((
                Tone::Pass,
                format!(
                    "✓ {}  expected {}",
                    assertion.kind,
                    compact(&assertion.expected.to_value())
                ),
            ));
            continue;
        }
        // Runner messages already start with the kind (`equals: the output differs`).
        let headline = match assertion.message.as_deref() {
            Some(m) if m.starts_with(&format!("{}:", assertion.kind)) => format!("✗ {m}"),
            Some(m) => format!("✗ {} — {m}", assertion.kind),
            None => format!("✗ {}", assertion.kind),
        };
        lines.push((Tone::Fail, headline));
        assertion_diff(assertion, &mut lines);
        lines.push((Tone::Plain, String::new()));
    }
    if lines.last().is_some_and(|(_, text)| text.is_empty()) {
        lines.pop();
    }
    lines
}

/// Expected vs actual of a failed assertion: a path diff when both are JSON objects or
/// arrays, a line diff when both are texts to compare whole, else both values in full.
fn assertion_diff(assertion: &AssertionResult, lines: &mut Vec<(Tone, String)>) {
    let mut expected = assertion.expected.to_value();
    let actual = assertion.actual.to_value();
    let mut root = "$".to_owned();
    // json_path expects `{path, equals}`; what it saw is the value at that path.
    if assertion.kind == "json_path"
        && let Value::Object(map) = &expected
        && let (Some(Value::String(path)), Some(equals)) = (map.get("path"), map.get("equals"))
    {
        root = path.clone();
        expected = equals.clone();
    }
    let composite = |v: &Value| matches!(v, Value::Object(_) | Value::Array(_));
    // `contains` and `regex` expect a part of the text: a whole-text diff would say nothing.
    let whole_text = !matches!(assertion.kind.as_str(), "contains" | "regex");
    match (&expected, &actual) {
        (e, a) if composite(e) && composite(a) => {
            lines.push((
                Tone::Muted,
                "  JSON diff by path (- missing, + not expected, ~ changed):".into(),
            ));
            let diff = json_diff(&root, e, a);
            if diff.is_empty() {
                lines.push((Tone::Muted, "  the values are equal".into()));
            }
            for d in diff {
                lines.push(match d {
                    PathDiff::Changed {
                        path,
                        expected,
                        actual,
                    } => (
                        Tone::Changed,
                        format!("  ~ {path}: {} → {}", compact(&expected), compact(&actual)),
                    ),
                    PathDiff::Missing { path, expected } => {
                        (Tone::Removed, format!("  - {path}: {}", compact(&expected)))
                    }
                    PathDiff::Added { path, actual } => {
                        (Tone::Added, format!("  + {path}: {}", compact(&actual)))
                    }
                });
            }
        }
        (Value::String(e), Value::String(a)) if whole_text => {
            lines.push((Tone::Muted, "  line diff (- expected, + actual):".into()));
            for d in line_diff(e, a) {
                lines.push(match d {
                    LineDiff::Same(l) => (Tone::Plain, format!("    {l}")),
                    LineDiff::Removed(l) => (Tone::Removed, format!("  - {l}")),
                    LineDiff::Added(l) => (Tone::Added, format!("  + {l}")),
                });
            }
        }
        (e, a) => {
            let label = if root == "$" {
                "  expected:".to_owned()
            } else {
                format!("  expected at {root}:")
            };
            lines.push((Tone::Muted, label));
            lines.extend(
                value_lines(e)
                    .into_iter()
                    .map(|l| (Tone::Removed, format!("    {l}"))),
            );
            lines.push((Tone::Muted, "  actual:".into()));
            lines.extend(
                value_lines(a)
                    .into_iter()
                    .map(|l| (Tone::Added, format!("    {l}"))),
            );
        }
    }
}

// ---- rendering -----------------------------------------------------------------------------

pub fn render(frame: &mut Frame, area: Rect, app: &mut App) {
    app.evals.after_model_change(&app.model);
    app.evals.suite_rows = Rect::default();
    app.evals.case_rows = Rect::default();
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(area);
    render_suites(frame, left, app);
    let state = &mut app.evals;
    let model = &app.model;
    let theme = &app.theme;
    if let Some(detail) = &mut state.detail {
        if detail.rev != model.evals.rev
            && let Some(case) = model.evals.case(&detail.suite, &detail.case)
        {
            detail.lines = case_lines(&detail.suite, case);
            detail.rev = model.evals.rev;
        }
        state.detail_height = right.height.saturating_sub(2) as usize;
        let last = detail.lines.len().saturating_sub(state.detail_height);
        detail.scroll = detail.scroll.min(last);
        render_detail(frame, right, detail, theme);
        return;
    }
    let Some(suite) = state.suite.as_deref().and_then(|s| model.evals.suite(s)) else {
        let block = Block::default().borders(Borders::ALL).title(" Cases ");
        let text =
            Paragraph::new(Span::styled("Select a suite on the left.", theme.muted())).block(block);
        frame.render_widget(text, right);
        return;
    };
    render_cases(frame, right, suite, model.evals.window(), state, theme);
}

fn focused_block<'a>(title: Line<'a>, focused: bool, theme: &Theme) -> Block<'a> {
    let border = if focused {
        theme.accent()
    } else {
        Style::default()
    };
    Block::default()
        .borders(Borders::ALL)
        .border_style(border)
        .title(title)
}

fn render_suites(frame: &mut Frame, area: Rect, app: &mut App) {
    let state = &mut app.evals;
    let evals = &app.model.evals;
    let theme = &app.theme;
    let len = evals.suites_len();
    let title = Line::from(vec![
        Span::styled(" Suites ", theme.title()),
        Span::raw(format!("{len} ")),
    ]);
    let mut block = focused_block(title, state.focus == EvalFocus::Suites, theme);
    if let Some(run) = evals.running() {
        block = block.title_bottom(Line::from(Span::styled(
            format!(" ⟳ a run is going: {} case(s) ", run.cases),
            theme.warn(),
        )));
    } else if let Some(done) = evals.runs.back().and_then(|r| r.completed.as_ref()) {
        block = block.title_bottom(Line::from(Span::styled(
            format!(
                " last run: {} passed, {} failed, {} errored ",
                done.passed, done.failed, done.errored
            ),
            theme.muted(),
        )));
    }
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if len == 0 {
        let msg = format!(
            "No eval results yet. Run `spyglass eval SUITE.toml --url {}` and they appear here.",
            app.url
        );
        frame.render_widget(
            Paragraph::new(Span::styled(msg, theme.muted())).wrap(Wrap { trim: true }),
            inner,
        );
        return;
    }
    let height = inner.height.saturating_sub(1) as usize;
    state.suite_height = height;
    state.suite_rows = Rect {
        y: inner.y + 1,
        height: inner.height.saturating_sub(1),
        ..inner
    };
    let sel = state
        .suite
        .as_deref()
        .and_then(|s| evals.suite_row(s))
        .unwrap_or(0);
    state.suite_offset = scroll_to(state.suite_offset.min(len - 1), sel, height);
    const GAUGE_W: usize = 8;
    const TREND_W: usize = 8;
    let rows = evals
        .suites()
        .enumerate()
        .skip(state.suite_offset)
        .take(height)
        .map(|(row, s)| {
            let mark = if row == sel { "›" } else { " " };
            let rate_style = match s.pass_rate {
                Some(r) if r >= 1.0 => theme.ok(),
                Some(r) if r >= 0.5 => theme.warn(),
                Some(_) => theme.error(),
                None => theme.muted(),
            };
            let r = Row::new(vec![
                Cell::from(format!("{mark}{}", sanitize(&s.suite))),
                Cell::from(Line::from(vec![
                    Span::styled(gauge(s.pass_rate, GAUGE_W), rate_style),
                    Span::raw(format!(" {}", pct(s.pass_rate))),
                ])),
                Cell::from(Span::styled(sparkline(&s.trend, TREND_W), theme.bar())),
                Cell::from(Line::from(s.runs.to_string()).right_aligned()),
            ]);
            if row == sel {
                r.style(if state.focus == EvalFocus::Suites {
                    theme.selection()
                } else {
                    Style::default().add_modifier(Modifier::REVERSED)
                })
            } else {
                r
            }
        });
    let header = Row::new(vec![
        Cell::from(" SUITE"),
        Cell::from("PASS"),
        Cell::from("TREND"),
        Cell::from(Line::from("RUNS").right_aligned()),
    ])
    .style(theme.muted());
    let table = Table::new(
        rows,
        [
            Constraint::Min(8),
            Constraint::Length(GAUGE_W as u16 + 5),
            Constraint::Length(TREND_W as u16),
            Constraint::Length(4),
        ],
    )
    .header(header);
    frame.render_widget(table, inner);
}

fn render_cases(
    frame: &mut Frame,
    area: Rect,
    suite: &SuiteSummary,
    window: usize,
    state: &mut EvalsState,
    theme: &Theme,
) {
    let title = Line::from(vec![
        Span::styled(format!(" {} ", suite.suite), theme.title()),
        Span::styled(format!("· {} cases ", suite.cases.len()), theme.muted()),
    ]);
    let block = focused_block(title, state.focus == EvalFocus::Cases, theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [head, body] = Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(inner);
    let judged_all = suite.passed + suite.failed + suite.errored;
    let gauge_w = (head.width as usize).saturating_sub(40).clamp(8, 30);
    let head_lines = vec![
        Line::from(vec![
            Span::styled("pass  ", theme.muted()),
            Span::styled(gauge(suite.pass_rate, gauge_w), theme.bar()),
            Span::raw(format!(
                " {} {}/{judged_all} · {} run(s)",
                pct(suite.pass_rate),
                suite.passed,
                suite.runs
            )),
        ]),
        Line::from(vec![
            Span::styled("trend ", theme.muted()),
            Span::styled(sparkline(&suite.trend, gauge_w), theme.bar()),
            Span::styled(format!("  oldest → newest, window {window}"), theme.muted()),
        ]),
    ];
    frame.render_widget(Paragraph::new(head_lines), head);

    let len = suite.cases.len();
    let height = body.height.saturating_sub(1) as usize;
    state.case_height = height;
    state.case_rows = Rect {
        y: body.y + 1,
        height: body.height.saturating_sub(1),
        ..body
    };
    let sel = state.case_row(suite).unwrap_or(0);
    state.case_offset = scroll_to(state.case_offset.min(len.saturating_sub(1)), sel, height);
    let focused = state.focus == EvalFocus::Cases;
    let rows = suite
        .cases
        .iter()
        .enumerate()
        .skip(state.case_offset)
        .take(height)
        .map(|(row, c)| {
            let mark = if row == sel && focused { "›" } else { " " };
            let flaky = if c.flaky {
                Span::styled("flaky", theme.warn().add_modifier(Modifier::BOLD))
            } else {
                Span::raw("")
            };
            let r = Row::new(vec![
                Cell::from(Line::from(vec![
                    Span::raw(mark),
                    Span::styled(
                        status_label(c.last_status),
                        status_style(c.last_status, theme),
                    ),
                ])),
                Cell::from(sanitize(&c.case).into_owned()),
                Cell::from(format!("{} {}/{}", pct(c.pass_rate), c.passed, judged(c))),
                Cell::from(flaky),
                Cell::from(Line::from(case_ms(c.last_duration)).right_aligned()),
            ]);
            if row == sel && focused {
                r.style(theme.selection())
            } else {
                r
            }
        });
    let header = Row::new(vec![
        Cell::from(" STATUS"),
        Cell::from("CASE"),
        Cell::from("PASS"),
        Cell::from(""),
        Cell::from(Line::from("DUR").right_aligned()),
    ])
    .style(theme.muted());
    let table = Table::new(
        rows,
        [
            Constraint::Length(10),
            Constraint::Min(10),
            Constraint::Length(10),
            Constraint::Length(5),
            Constraint::Length(7),
        ],
    )
    .header(header);
    frame.render_widget(table, body);
}

fn render_detail(frame: &mut Frame, area: Rect, detail: &CaseDetail, theme: &Theme) {
    let title = Line::from(vec![
        Span::styled(" Case ", theme.title()),
        Span::styled(
            format!(
                "· line {}/{} · t session · r rerun · Esc back ",
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
    // Wrap only what is shown: a long actual output costs nothing until it is on screen.
    let mut out: Vec<Line> = Vec::with_capacity(height);
    for (tone, text) in detail.lines.iter().skip(detail.scroll) {
        if out.len() >= height {
            break;
        }
        let style = match tone {
            Tone::Heading => theme.title(),
            Tone::Plain => Style::default(),
            Tone::Muted => theme.muted(),
            Tone::Pass | Tone::Added => theme.ok(),
            Tone::Fail | Tone::Removed => theme.error(),
            Tone::Changed => theme.warn(),
        };
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            out.push(Line::from(""));
        }
        for chunk in chars.chunks(width) {
            if out.len() >= height {
                break;
            }
            out.push(Line::from(Span::styled(
                chunk.iter().collect::<String>(),
                style,
            )));
        }
    }
    frame.render_widget(Paragraph::new(out), inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_case_under_a_millisecond_reads_as_such_not_as_zero() {
        assert_eq!(case_ms(0.0), "<1ms");
        assert_eq!(case_ms(0.042), "42µs");
        assert_eq!(case_ms(1.3), "1.3ms");
        assert_eq!(case_ms(12.0), "12ms");
        assert_eq!(case_ms(1500.0), "1.5s");
    }

    #[test]
    fn gauges_and_sparklines() {
        assert_eq!(gauge(Some(0.5), 4), "██░░");
        assert_eq!(gauge(None, 3), "░░░");
        assert_eq!(pct(Some(2.0 / 3.0)), " 67%");
        assert_eq!(pct(None), "   —");
        assert_eq!(sparkline(&[Some(0.0), None, Some(1.0)], 8), "▁·█");
        assert_eq!(sparkline(&[Some(0.0), Some(0.5), Some(1.0)], 2), "▅█");
    }

    fn failed(kind: &str, expected: Value, actual: Value) -> Vec<(Tone, String)> {
        let assertion = AssertionResult {
            kind: kind.into(),
            pass: false,
            expected: expected.into(),
            actual: actual.into(),
            message: None,
        };
        let mut lines = vec![];
        assertion_diff(&assertion, &mut lines);
        lines
    }

    fn texts(lines: &[(Tone, String)]) -> Vec<&str> {
        lines.iter().map(|(_, t)| t.as_str()).collect()
    }

    #[test]
    fn a_partial_match_shows_both_values_not_a_whole_text_diff() {
        let lines = failed("contains", json!("pay_2"), json!("Charged pay_1\nbye"));
        assert_eq!(
            texts(&lines),
            [
                "  expected:",
                "    pay_2",
                "  actual:",
                "    Charged pay_1",
                "    bye"
            ]
        );
        assert_eq!(lines[1].0, Tone::Removed);
        assert_eq!(lines[3].0, Tone::Added);
    }

    #[test]
    fn odd_shapes_never_fail_the_view() {
        // json_path whose expectation lacks `equals`: shown whole, rooted at `$`.
        let lines = failed("json_path", json!({"path": "$.id"}), Value::Null);
        assert_eq!(lines[0].1, "  expected:");
        assert!(texts(&lines).contains(&"  actual:"));
        // json_path on a scalar: both values, named by the path.
        let lines = failed(
            "json_path",
            json!({"path": "$.total", "equals": 5}),
            json!(6),
        );
        assert_eq!(
            texts(&lines),
            ["  expected at $.total:", "    5", "  actual:", "    6"]
        );
        // Equal composite values (a judge that disagrees with us): said plainly.
        let lines = failed("equals", json!([1]), json!([1.0]));
        assert_eq!(lines[1].1, "  the values are equal");
        // An empty expected text is still visible.
        let lines = failed("regex", json!(""), json!("x"));
        assert_eq!(lines[1].1, "    \"\"");
    }

    #[test]
    fn a_case_without_a_message_or_session_still_reads_well() {
        let case = CaseSummary {
            case: "c".into(),
            runs: 1,
            failed: 1,
            pass_rate: Some(0.0),
            last_status: EvalStatus::Failed,
            last_assertions: vec![AssertionResult {
                kind: "equals".into(),
                pass: false,
                expected: json!("a").into(),
                actual: json!("b").into(),
                message: None,
            }],
            ..CaseSummary::default()
        };
        let lines = case_lines("s", &case);
        let texts = texts(&lines);
        assert_eq!(texts[2], "session - · run -");
        let rerun = CaseSummary {
            last_rerun: true,
            last_run_id: Some("run_2".into()),
            ..case.clone()
        };
        let rerun_lines = case_lines("s", &rerun);
        assert_eq!(
            rerun_lines[1].1,
            "✗ failed (rerun of this case) · <1ms · pass 0% 0/1 over 1 run(s)"
        );
        assert!(texts.contains(&"✗ equals"));
        assert!(texts.contains(&"  - a") && texts.contains(&"  + b"));
    }
}
