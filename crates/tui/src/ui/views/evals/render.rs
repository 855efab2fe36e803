//! Drawing the Evals tab from its state: suites, the selected suite's cases, or one case's
//! result. Nothing here changes state; what was laid out is returned.

use super::lines::{
    attempts_text, case_ms, gauge, judged, pct, sparkline, status_label, status_style,
};
use super::state::{CaseDetail, EvalFocus, EvalsState};
use crate::ui::action::Action;
use crate::ui::safe;
use crate::ui::views::fitted_table;
use crate::ui::views::{
    Col, fit, fit_columns_marked, header, marked_header, placed_list, plural, shown_cells,
};
use crate::ui::views::{Cx, Drawn, Pane, Placed, focused_block, hints};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Wrap};
use spyglass_protocol::rest::SuiteSummary;
use spyglass_protocol::sanitize::sanitize;

pub(super) fn render(state: &EvalsState, frame: &mut Frame, area: Rect, cx: &Cx) -> Drawn {
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(area);
    let left = match &state.pinned {
        Some(pinned) => {
            let [top, bottom] =
                Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
                    .areas(left);
            render_pinned(frame, bottom, pinned, cx);
            top
        }
        None => left,
    };
    let mut drawn = Drawn::default();
    if let Some(placed) = render_suites(frame, left, state, cx) {
        drawn.push(placed);
    }
    let model = cx.model;
    let theme = cx.theme;
    if let Some(detail) = &state.detail {
        drawn.push(render_detail(frame, right, detail, cx));
        return drawn;
    }
    let Some(suite) = state.suite(model) else {
        let block = Block::default().borders(Borders::ALL).title(" Cases ");
        let text =
            Paragraph::new(Span::styled("Select a suite on the left.", theme.muted())).block(block);
        frame.render_widget(text, right);
        return drawn;
    };
    drawn.push(render_cases(frame, right, suite, state, cx));
    drawn
}

/// The pinned run and, newest first, what each later run changed against it: a count
/// line per run, then its changed cases (regressions first).
fn render_pinned(frame: &mut Frame, area: Rect, pinned: &str, cx: &Cx) {
    use spyglass_eval::compare::{Change, compare_records};
    let theme = cx.theme;
    let runs = &cx.model.evals.runs;
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Line::from(vec![
            Span::styled(" Pinned ", theme.title()),
            safe::raw(format!("{pinned} ")),
        ]));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(at) = runs.iter().position(|r| r.run_id == pinned) else {
        let text = "The pinned run is no longer held; p pins the newest run.";
        frame.render_widget(Paragraph::new(Span::styled(text, theme.muted())), inner);
        return;
    };
    let base = &runs[at].results;
    let mut lines: Vec<Line> = Vec::new();
    for run in runs.iter().skip(at + 1).rev() {
        if run.completed.is_none() || run.results.is_empty() {
            continue;
        }
        let cmp = compare_records(base, &run.results);
        let regressions = cmp.regressions();
        lines.push(Line::from(Span::styled(
            format!(
                "{}: {}, {} fixed, {} new, {} removed",
                sanitize(&run.run_id),
                plural(regressions, "regression"),
                cmp.count(Change::Fixed),
                cmp.count(Change::New),
                cmp.count(Change::Removed)
            ),
            if regressions > 0 {
                theme.error()
            } else {
                theme.ok()
            },
        )));
        for c in cmp.changed() {
            let style = if c.change.is_regression() {
                theme.error()
            } else {
                theme.muted()
            };
            // A drop says its p-value and the rule that decided it (significant, within
            // noise, or every attempt flipped), as `spyglass eval compare` does.
            let rule = c
                .rule
                .as_deref()
                .map(|rule| format!(" — {rule}"))
                .unwrap_or_default();
            lines.push(Line::from(Span::styled(
                format!(
                    "  {:<13} {}{rule}",
                    c.change.label(),
                    sanitize(&format!("{} / {}", c.suite, c.case))
                ),
                style,
            )));
        }
    }
    if lines.is_empty() {
        lines.push(Line::from(Span::styled(
            "No later run yet: runs after this one show what changed here.",
            theme.muted(),
        )));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), inner);
}

fn render_suites(frame: &mut Frame, area: Rect, state: &EvalsState, cx: &Cx) -> Option<Placed> {
    const GAUGE_W: usize = 8;
    const TREND_W: usize = 8;
    let evals = &cx.model.evals;
    let theme = cx.theme;
    let len = evals.suites_len();
    let title = Line::from(vec![
        Span::styled(" Suites ", theme.title()),
        Span::raw(format!("{len} ")),
    ]);
    let mut block = focused_block(title, state.focus == EvalFocus::Suites, theme);
    if let Some(run) = evals.running() {
        block = block.title_bottom(Line::from(Span::styled(
            format!(" ⟳ a run is going: {} ", plural(run.cases, "case")),
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
            cx.url
        );
        frame.render_widget(
            Paragraph::new(Span::styled(msg, theme.muted())).wrap(Wrap { trim: true }),
            inner,
        );
        return None;
    }
    let height = inner.height.saturating_sub(1) as usize;
    let sel = state
        .suites
        .selected
        .as_deref()
        .and_then(|s| evals.suite_row(s))
        .unwrap_or(0);
    let offset = state.suites.window(len, sel, height);
    // SUITE (cut with an ellipsis down to 8), the pass rate and RUNS whole; the gauge and
    // the trend give way first when narrow, the percentage staying.
    let suite_want = evals
        .suites()
        .skip(offset)
        .take(height)
        .map(|s| 1 + sanitize(&s.suite).chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let cols = [
        Col {
            want: suite_want,
            min: suite_want.min(8),
            priority: 0,
        },
        Col::whole(GAUGE_W, 3),
        Col::whole(4, 1),
        Col::whole(TREND_W, 4),
        Col::whole(4, 2),
    ];
    // Room to spare goes to the name column.
    let widths = fit_columns_marked(&cols, inner.width as usize, 0);
    let keep = |cells: Vec<Cell<'static>>| shown_cells(cells, &widths);
    let rows = evals
        .suites()
        .enumerate()
        .skip(offset)
        .take(height)
        .map(|(row, s)| {
            let mark = if row == sel { "›" } else { " " };
            let rate_style = match s.pass_rate {
                Some(r) if r >= 1.0 => theme.ok(),
                Some(r) if r >= 0.5 => theme.warn(),
                Some(_) => theme.error(),
                None => theme.muted(),
            };
            let r = Row::new(keep(vec![
                Cell::from(fit(
                    &format!("{mark}{}", sanitize(&s.suite)),
                    widths[0].unwrap_or(0),
                )),
                Cell::from(Span::styled(gauge(s.pass_rate, GAUGE_W), rate_style)),
                Cell::from(pct(s.pass_rate)),
                Cell::from(Span::styled(sparkline(&s.trend, TREND_W), theme.bar())),
                Cell::from(Line::from(s.runs.to_string()).right_aligned()),
            ]));
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
    // The gauge's header says PASS; without the gauge the percentage's does.
    let pass_over_gauge = widths[1].is_some();
    // A cut suite name says so in its header; a dropped column with `…` at its end.
    let suite_header = header(" SUITE", &cols[0], widths[0]);
    let header = Row::new(marked_header(
        vec![
            Cell::from(suite_header),
            Cell::from("PASS"),
            Cell::from(if pass_over_gauge { "" } else { "PASS" }),
            Cell::from("TREND"),
            Cell::from(Line::from("RUNS").right_aligned()),
        ],
        &widths,
    ))
    .style(theme.muted());
    let table = fitted_table(rows, header, &widths);
    frame.render_widget(table, inner);
    Some(placed_list(
        frame,
        area,
        (Pane::Suites, inner),
        offset,
        len,
        theme,
    ))
}

fn render_cases(
    frame: &mut Frame,
    area: Rect,
    suite: &SuiteSummary,
    state: &EvalsState,
    cx: &Cx,
) -> Placed {
    let theme = cx.theme;
    let window = cx.model.evals.window();
    let cases = state.shown_cases(suite);
    let mut title = vec![
        Span::styled(format!(" {} ", suite.suite), theme.title()),
        Span::styled(
            format!("· {} ", plural(suite.cases.len(), "case")),
            theme.muted(),
        ),
    ];
    if !state.filter.is_empty() || state.editing_filter {
        let cursor = if state.editing_filter { "▏" } else { "" };
        title.push(Span::raw(format!(
            "· {}/{} ",
            cases.len(),
            suite.cases.len()
        )));
        title.push(Span::styled(
            format!("/{}{cursor} ", state.filter),
            theme.warn(),
        ));
    }
    let title = Line::from(title);
    let block = focused_block(title, state.focus == EvalFocus::Cases, theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let latest = cx.model.evals.latest(&suite.suite);
    // The suite's newest run in the eval crate's words (`pass rate 60 % [23–88 %], …`):
    // as many of its parts as one line holds, the pass rate with its interval first.
    let run_line = latest.map(|run| {
        let room = inner.width as usize;
        let stats = run.suite.line();
        let mut parts = stats.split(", ");
        let rate = parts.next().unwrap_or_default();
        let mut text = sanitize(&format!("run {}: {rate}", run.run_id)).into_owned();
        // Narrow, the rate and its interval stay whole and the run's id gives way.
        if text.chars().count() > room {
            rate.clone_into(&mut text);
        }
        for part in parts {
            if text.chars().count() + 2 + part.chars().count() > room {
                break;
            }
            text.push_str(", ");
            text.push_str(part);
        }
        fit(&text, room)
    });
    let head_h = 2 + u16::from(run_line.is_some());
    let [head, body] =
        Layout::vertical([Constraint::Length(head_h), Constraint::Min(1)]).areas(inner);
    let judged_all = suite.passed + suite.failed + suite.errored;
    let gauge_w = (head.width as usize).saturating_sub(40).clamp(8, 30);
    let head_lines = vec![
        Line::from(vec![
            Span::styled("pass  ", theme.muted()),
            Span::styled(gauge(suite.pass_rate, gauge_w), theme.bar()),
            Span::raw(format!(
                " {} {}/{judged_all} · {}",
                pct(suite.pass_rate),
                suite.passed,
                plural(suite.runs, "run")
            )),
        ]),
        Line::from(vec![
            Span::styled("trend ", theme.muted()),
            Span::styled(sparkline(&suite.trend, gauge_w), theme.bar()),
            Span::styled(format!("  oldest → newest, window {window}"), theme.muted()),
        ]),
    ];
    let head_lines: Vec<Line> = head_lines
        .into_iter()
        .chain(run_line.map(Line::from))
        .collect();
    frame.render_widget(Paragraph::new(head_lines), head);

    let len = cases.len();
    let height = body.height.saturating_sub(1) as usize;
    let sel = state.case_row(suite).unwrap_or(0);
    let offset = state.cases.window(len, sel, height);
    let focused = state.focus == EvalFocus::Cases;
    let shown_cases = || cases.iter().copied().skip(offset).take(height);
    let widest = |header: &str, cell: &dyn Fn(&spyglass_protocol::rest::CaseSummary) -> usize| {
        shown_cases()
            .map(cell)
            .max()
            .unwrap_or(0)
            .max(header.chars().count())
    };
    let pass_text = |c: &spyglass_protocol::rest::CaseSummary| {
        format!("{} {}/{}", pct(c.pass_rate), c.passed, judged(c))
    };
    let case_want = widest("CASE", &|c| sanitize(&c.case).chars().count());
    // A run that repeated its cases shows each case's attempts in it (`PPFPF 3/5`); with
    // one attempt each, the strip would only repeat STATUS.
    let attempts = |c: &spyglass_protocol::rest::CaseSummary| {
        latest
            .filter(|run| run.repeated())
            .and_then(|run| run.cases.get(&c.case))
            .map(attempts_text)
            .unwrap_or_default()
    };
    let attempts_want = if latest.is_some_and(crate::model::LatestRun::repeated) {
        widest("ATTEMPTS", &|c| attempts(c).chars().count())
    } else {
        0
    };
    // STATUS, CASE (cut with an ellipsis down to 8), PASS and DUR are shown whole or
    // not at all, so `<1ms` never reads `1ms` nor `100%` `100`; the flaky badge and then
    // the duration give way first.
    let cols = [
        Col::whole(
            widest(" STATUS", &|c| {
                1 + status_label(c.last_status).chars().count()
            }),
            0,
        ),
        Col {
            want: case_want,
            min: case_want.min(8),
            priority: 1,
        },
        Col::whole(widest("PASS", &|c| pass_text(c).chars().count()), 2),
        Col::whole(attempts_want, 3),
        Col::whole(if shown_cases().any(|c| c.flaky) { 5 } else { 0 }, 5),
        Col::whole(
            widest("DUR", &|c| case_ms(c.last_duration).chars().count()),
            4,
        ),
    ];
    // Room to spare goes to the case column.
    let widths = fit_columns_marked(&cols, body.width as usize, 1);
    let keep = |cells: Vec<Cell<'static>>| shown_cells(cells, &widths);
    let rows = cases
        .iter()
        .copied()
        .enumerate()
        .skip(offset)
        .take(height)
        .map(|(row, c)| {
            let mark = if row == sel && focused { "›" } else { " " };
            let flaky = if c.flaky {
                Span::styled("flaky", theme.warn().add_modifier(Modifier::BOLD))
            } else {
                Span::raw("")
            };
            let r = Row::new(keep(vec![
                Cell::from(Line::from(vec![
                    Span::raw(mark),
                    Span::styled(
                        status_label(c.last_status),
                        status_style(c.last_status, theme),
                    ),
                ])),
                Cell::from(fit(&sanitize(&c.case), widths[1].unwrap_or(0))),
                Cell::from(pass_text(c)),
                Cell::from(attempts(c)),
                Cell::from(flaky),
                Cell::from(Line::from(case_ms(c.last_duration)).right_aligned()),
            ]));
            if row == sel && focused {
                r.style(theme.selection())
            } else {
                r
            }
        });
    let header = Row::new(marked_header(
        vec![
            Cell::from(" STATUS"),
            Cell::from(header("CASE", &cols[1], widths[1])),
            Cell::from("PASS"),
            Cell::from("ATTEMPTS"),
            Cell::from(""),
            Cell::from(Line::from("DUR").right_aligned()),
        ],
        &widths,
    ))
    .style(theme.muted());
    let table = fitted_table(rows, header, &widths);
    frame.render_widget(table, body);
    placed_list(frame, area, (Pane::Cases, body), offset, len, theme)
}

fn render_detail(frame: &mut Frame, area: Rect, detail: &CaseDetail, cx: &Cx) -> Placed {
    let keys = hints(
        cx.keymap,
        &[
            (Action::JumpToSession, "session"),
            (Action::RerunCase, "rerun"),
        ],
    );
    detail.pane.draw(frame, area, "Case", &keys, cx)
}
