//! Drawing the Sessions tab from its state: the list, the mocks, the timeline waterfall
//! and an open call. Nothing here changes state; what was laid out is returned.

use super::lines::{TimelineCache, TimelineRow, build_timeline};
use super::state::{CallSort, Detail, Focus, SessionsState};
use crate::model::{RunOutcome, Session, SessionStatus};
use crate::ui::action::Action;
use crate::ui::app::Watching;
use crate::ui::safe;
use crate::ui::theme::Theme;
use crate::ui::views::fitted_table;
use crate::ui::views::{Col, fit_columns_stretching, placed_list, shown_cells};
use crate::ui::views::{
    Cx, Drawn, Pane, Placed, fit, fit_name, fmt_age, fmt_ms, focused_block, header, key_cap, pad,
    plural, scroll_hint,
};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row};
use spyglass_protocol::events::MockMode;
use spyglass_protocol::sanitize::{sanitize, shown};
use unicode_width::UnicodeWidthStr;

pub(super) fn render(state: &SessionsState, frame: &mut Frame, area: Rect, cx: &Cx) -> Drawn {
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(42), Constraint::Percentage(58)]).areas(area);
    let mut drawn = Drawn::default();
    if let Some(placed) = render_list(frame, left, state, cx) {
        drawn.push(placed);
    }
    let model = cx.model;
    let theme = cx.theme;
    let session = state
        .list
        .selected
        .as_deref()
        .and_then(|id| model.session(id));
    let Some(session) = session else {
        let block = Block::default().borders(Borders::ALL).title(" Session ");
        let text = Paragraph::new(Line::from(Span::styled(
            "Select a session on the left.",
            theme.muted(),
        )))
        .block(block);
        frame.render_widget(text, right);
        return drawn;
    };
    if let Some(detail) = &state.detail {
        drawn.push(render_detail(frame, right, detail, cx));
        return drawn;
    }
    // What a debugger wants first, when the stream told it: how the run ended and with
    // what, above the mocks and the timeline.
    let summary = summary_lines(
        session,
        right.width.saturating_sub(2) as usize,
        theme,
        cx.watching,
    );
    let summary_height = if summary.is_empty() {
        0
    } else {
        // Up to two fifths of the pane: at 80x24 the ending, the model, the tokens and
        // the cost (or why there is none) all fit above the mocks.
        (summary.len() as u16 + 2).min(right.height * 2 / 5)
    };
    let [summary_area, right] =
        Layout::vertical([Constraint::Length(summary_height), Constraint::Min(0)]).areas(right);
    if summary_height > 0 {
        let block = Block::default()
            .borders(Borders::ALL)
            .title(Span::styled(" Run ", theme.title()));
        frame.render_widget(
            Paragraph::new(safe::lines(summary)).block(block),
            summary_area,
        );
    }
    let mocks_focused = state.focus == Focus::Mocks;
    // Focused, the mocks take up to two thirds: their payloads are what is being read.
    let mocks_height = if mocks_focused {
        let lines = u16::try_from(state.mocks.pane.lines().len()).unwrap_or(u16::MAX);
        lines
            .saturating_add(2)
            .clamp(4, (right.height * 2 / 3).max(4))
    } else {
        (session.mocks.len() as u16 + 3).clamp(4, (right.height / 2).max(4))
    };
    let [mocks_area, timeline_area] =
        Layout::vertical([Constraint::Length(mocks_height), Constraint::Min(3)]).areas(right);
    if mocks_focused {
        drawn.push(render_mocks_focused(frame, mocks_area, state, cx));
    } else {
        // From the timeline, the focus key goes up to the mocks: say so.
        let hint = (state.focus == Focus::Timeline && !session.mocks.is_empty())
            .then(|| format!("· {} focus ", key_cap(cx.keymap, Action::FocusRight)));
        render_mocks(frame, mocks_area, session, hint, theme);
        drawn.push(Placed {
            pane: Pane::MocksTable,
            rows: mocks_area,
            offset: 0,
            page: 0,
        });
    }
    // The order is cached as the model changes; a stale one (the model changed without
    // `after_model_change`) is built for this frame only.
    let built;
    let cache = match &state.cache {
        Some(c)
            if c.session_id == session.id
                && c.rev == session.rev
                && c.sort == state.sort
                && c.collapsed == state.collapsed =>
        {
            c
        }
        _ => {
            built = build_timeline(session, state.sort, &state.collapsed);
            &built
        }
    };
    if let Some(placed) = render_timeline(frame, timeline_area, session, cache, state, cx) {
        drawn.push(placed);
    }
    drawn
}

/// Lines of a text the summary keeps, at most.
const SUMMARY_TEXT_LINES: usize = 3;

/// The run summary at `width`: the ending (the error or the final text, wrapped, a few
/// lines at most), the model and the numbers (tokens, cost), the prompt, the metadata. Empty when the
/// stream told none of it. Everything is masked and sanitised here.
fn summary_lines(
    session: &Session,
    width: usize,
    theme: &Theme,
    watching: &Watching,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    // A session the stream knew before a restart without history: what is shown is the
    // old runtime's word, and the one running now does not hold it.
    if session.status == SessionStatus::Previous {
        let text = format!(
            "from the runtime before the restart at {}: the one running now does not hold it",
            clock_at(session.gone_at_ms, false, watching)
        );
        lines.extend(
            crate::ui::views::wrap_words(&text, width)
                .into_iter()
                .map(|l| Line::from(Span::styled(l, theme.warn()))),
        );
    }
    let Some(summary) = session.summary.as_deref() else {
        return lines;
    };
    let para = |label: &str, text: &str, style: Style, max: usize| {
        let text = format!("{label}{}", shown(text));
        let wrapped = crate::ui::views::wrap_words(&text, width);
        styled(wrapped, max, width, style)
    };
    if let Some(run) = &summary.run {
        let (word, style) = if run.failed {
            ("failed: ", theme.error())
        } else {
            ("completed: ", theme.ok())
        };
        let output = if run.output.is_empty() {
            "(no text)"
        } else {
            &run.output
        };
        lines.extend(para(word, output, style, SUMMARY_TEXT_LINES));
        let mut numbers = vec![format!("model {}", run.model)];
        if !run.provider.is_empty() {
            numbers[0].push_str(&format!(" ({})", run.provider));
        }
        let steps = if run.steps > 0 {
            run.steps as usize
        } else {
            session.timeline.steps.len()
        };
        numbers.push(plural(steps, "step"));
        numbers.push(if run.tokens.total == 0 {
            "0 tokens".to_owned()
        } else {
            format!(
                "{} tokens ({} in, {} out)",
                run.tokens.total, run.tokens.prompt, run.tokens.completion
            )
        });
        if let Some(note) = steps_tokens_note(session, run) {
            numbers.push(note);
        }
        match (run.cost, &run.cost_missing) {
            // The scripted model (provider `fake`) is free by definition: `$0` tells nothing.
            (Some(cost), _) if cost == 0.0 && run.provider == "fake" => {}
            (Some(cost), _) => numbers.push(fmt_cost(cost)),
            (None, Some(why)) => numbers.push(format!("cost unknown: {why}")),
            (None, None) => {}
        }
        numbers.push(fmt_ms(run.duration_ms));
        // A failed run's finish reason only repeats that it failed.
        if !run.finish_reason.is_empty() && !run.failed {
            numbers.push(format!("finish {}", run.finish_reason));
        }
        if run.failover_attempts > 0 {
            numbers.push(plural(run.failover_attempts, "failover"));
        }
        let numbers: Vec<String> = numbers.iter().map(|n| shown(n).into_owned()).collect();
        lines.extend(styled(pack(&numbers, width), 4, width, theme.muted()));
        // The prompt the caller wrote comes after what only the run could tell.
        lines.extend(para("prompt: ", &run.prompt, Style::default(), 2));
    }
    if !summary.metadata.is_empty() {
        let pairs: Vec<String> = summary
            .metadata
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        lines.extend(para("metadata: ", &pairs.join(" · "), theme.muted(), 2));
    }
    lines
}

/// Why the timeline's steps do not add up to the run's tokens, when they do not: steps
/// that fell out of the ring, steps of earlier runs in the same session (an external
/// sender's runs keyed by agent), or a sender whose counts disagree.
fn steps_tokens_note(session: &Session, run: &RunOutcome) -> Option<String> {
    let steps = &session.timeline.steps;
    let sum: u64 = steps.iter().map(|s| s.tokens_total).sum();
    if steps.is_empty() || sum == run.tokens.total {
        return None;
    }
    // A step numbered no higher than the one before starts another run.
    let runs = 1 + steps
        .iter()
        .zip(steps.iter().skip(1))
        .filter(|(before, after)| after.iteration <= before.iteration)
        .count();
    Some(if session.timeline.dropped_steps > 0 {
        format!(
            "steps held: {sum} tokens ({} older steps dropped)",
            session.timeline.dropped_steps
        )
    } else if runs > 1 {
        format!("steps: {sum} tokens over {runs} runs")
    } else {
        format!("its steps sum to {sum} tokens")
    })
}

/// At most `max` of `wrapped`, the last ending `…` when some were cut, in `style`.
fn styled(mut wrapped: Vec<String>, max: usize, width: usize, style: Style) -> Vec<Line<'static>> {
    if wrapped.len() > max {
        wrapped.truncate(max);
        if let Some(last) = wrapped.last_mut() {
            *last = fit(&format!("{last}…"), width);
        }
    }
    wrapped
        .into_iter()
        .map(|l| Line::from(Span::styled(l, style)))
        .collect()
}

/// `items` joined with ` · `, a line broken only between items (an item wider than the
/// line is word-wrapped on its own), so `908 tokens (812 in, 96 out)` stays whole.
fn pack(items: &[String], width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for item in items {
        let len = item.chars().count();
        if !line.is_empty() {
            if line.chars().count() + 3 + len <= width {
                line.push_str(" · ");
                line.push_str(item);
                continue;
            }
            lines.push(std::mem::take(&mut line));
        }
        if len <= width {
            line.clone_from(item);
        } else {
            let mut wrapped = crate::ui::views::wrap_words(item, width);
            line = wrapped.pop().unwrap_or_default();
            lines.extend(wrapped);
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Dollars as a person reads them: cents above a dollar, four significant digits under
/// it (`$0.000462`), `$0` for nothing.
pub(crate) fn fmt_cost(cost: f64) -> String {
    if cost == 0.0 {
        "$0".to_owned()
    } else if cost >= 1.0 {
        format!("${cost:.2}")
    } else {
        // Digits past the first significant one: 0.0123 → 4 decimals' worth of 3 more.
        let decimals = (-cost.log10()).floor().clamp(0.0, 12.0) as usize + 4;
        let text = format!("${cost:.decimals$}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// An epoch-milliseconds instant as a UTC clock time (`21:43:30`, with `.123` when
/// `millis`), the date before it in a replay, where the day is not today; `-` unknown.
pub(super) fn clock_at(ms: Option<f64>, millis: bool, watching: &Watching) -> String {
    let Some(at) = ms.and_then(|ms| chrono::DateTime::from_timestamp_millis(ms as i64)) else {
        return "-".into();
    };
    let date = if matches!(watching, Watching::Replay { .. }) {
        "%Y-%m-%d "
    } else {
        ""
    };
    let time = if millis { "%H:%M:%S%.3f" } else { "%H:%M:%S" };
    at.format(&format!("{date}{time}")).to_string()
}

fn render_list(frame: &mut Frame, area: Rect, state: &SessionsState, cx: &Cx) -> Option<Placed> {
    let model = cx.model;
    let theme = cx.theme;
    let len = state.list_len(model);
    let mut title = vec![Span::styled(" Sessions ", theme.title())];
    if state.filtering() || state.editing_filter {
        title.push(Span::raw(format!("{len}/{} ", model.sessions_len())));
        if !state.filter.is_empty() || state.editing_filter {
            let cursor = if state.editing_filter { "▏" } else { "" };
            title.push(Span::styled(
                format!("/{}{cursor} ", state.filter),
                theme.warn(),
            ));
        }
        if state.hide_evals {
            title.push(Span::styled("· no closed evals ", theme.warn()));
        }
    } else {
        title.push(Span::raw(format!("{len} ")));
    }
    let block = focused_block(Line::from(title), state.focus == Focus::List, theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if len == 0 {
        let msg = if !state.filter.is_empty() {
            format!(
                "No session matches “{}” (status:X user:X source:X id:X, -word excludes). {} \
                 clears the filter.",
                state.filter,
                key_cap(cx.keymap, Action::Back)
            )
        } else if state.hide_evals && model.sessions_len() > 0 {
            format!(
                "Every session is a closed eval session. {} shows them.",
                key_cap(cx.keymap, Action::HideEvals)
            )
        } else {
            match cx.watching {
                Watching::Embedded => format!(
                    "No sessions yet. An empty test-mode runtime is listening at {url}: \
                     point your tests at it with  export CODESPAR_BASE_URL={url}",
                    url = cx.url
                ),
                Watching::Replay { file } => format!("No sessions in {file} yet."),
                _ => match &cx.trouble {
                    Some(trouble) => format!("No sessions. {trouble}"),
                    None => format!("No sessions yet. Waiting for {}", cx.url),
                },
            }
        };
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(msg, theme.muted())))
                .wrap(ratatui::widgets::Wrap { trim: true }),
            inner,
        );
        return None;
    }
    let height = inner.height.saturating_sub(1) as usize;
    let sel = state.selected_row(model).unwrap_or(0);
    let offset = state.list.window(len, sel, height);
    let now = cx.now_ms;
    // LAST as an age, or as the clock time it happened.
    let last = |s: &Session| {
        if state.absolute_times {
            clock_at(s.last_activity_ms, false, cx.watching)
        } else {
            fmt_age(now, s.last_activity_ms)
        }
    };
    let visible = offset..len.min(offset + height);
    // Each column as wide as what it shows on screen; when they do not all fit, the id is
    // cut (with an ellipsis, its start telling sessions apart) down to 13, then whole
    // columns give way, the least telling first: LAST, USER, CALLS, ENV.
    let widest = |header: &str, cell: &dyn Fn(&Session) -> usize| {
        visible
            .clone()
            .filter_map(|row| state.list_row(model, row))
            .map(cell)
            .max()
            .unwrap_or(0)
            .max(header.chars().count())
    };
    // The ordering column's header carries ▲ or ▼.
    let mut names = [" ID", "USER", "STATUS", "CALLS", "ENV", "LAST", "PROJECT"].map(str::to_owned);
    if let Some(column) = state.order.column {
        names[column.index()].push(if state.order.descending { '▼' } else { '▲' });
    }
    let id_want = widest(&names[0], &|s| {
        1 + usize::from(s.external) + shown(&s.id).chars().count()
    });
    // Up to 32: a user name is what a person reads a row by (`shopping-assistant-2`).
    let user_full = widest(&names[1], &|s| shown(&s.user).chars().count());
    let user_want = user_full.min(32);
    let cols = [
        Col {
            want: id_want,
            min: id_want.min(13),
            priority: 0,
        },
        Col {
            want: user_want,
            min: user_want.min(6),
            priority: 4,
        },
        Col::whole(widest(&names[2], &|s| s.status.as_str().len()), 1),
        Col::whole(widest(&names[3], &|s| s.calls.to_string().len()), 3),
        Col::whole(widest(&names[4], &|s| s.envelopes.to_string().len()), 2),
        Col::whole(widest(&names[5], &|s| last(s).chars().count()), 5),
        // Whose session it is, on the every-project stream only: whole or not at all
        // (a cut project id could name another project), and before the counts.
        if cx.all_projects {
            Col::whole(
                widest(&names[6], &|s| shown(&s.project).chars().count()).min(32),
                1,
            )
        } else {
            Col::whole(0, 6)
        },
    ];
    // Room to spare goes to the id column.
    let widths = fit_columns_stretching(&cols, inner.width as usize, 0);
    let keep = |cells: Vec<Cell<'static>>| shown_cells(cells, &widths);
    let rows = visible.filter_map(|row| {
        let s = state.list_row(model, row)?;
        // A marker as well as the colour, so the selection survives a monochrome terminal.
        let mark = if row == sel { "›" } else { " " };
        let ext = if s.external { "↗" } else { "" };
        let id = format!("{mark}{ext}{}", shown(&s.id));
        let status_style = match s.status {
            crate::model::SessionStatus::Failed => theme.error(),
            crate::model::SessionStatus::Active => theme.ok(),
            _ => theme.muted(),
        };
        let env_style = if s.envelopes > 0 {
            theme.warn()
        } else {
            Style::default()
        };
        let r = Row::new(keep(vec![
            Cell::from(fit(&id, widths[0].unwrap_or(0))),
            Cell::from(fit(&shown(&s.user), widths[1].unwrap_or(0))),
            Cell::from(Span::styled(s.status.as_str(), status_style)),
            Cell::from(Line::from(s.calls.to_string()).right_aligned()),
            Cell::from(
                Line::from(Span::styled(s.envelopes.to_string(), env_style)).right_aligned(),
            ),
            Cell::from(Line::from(last(s)).right_aligned()),
            Cell::from(fit(&shown(&s.project), widths[6].unwrap_or(0))),
        ]));
        Some(if row == sel {
            r.style(if state.focus == Focus::List {
                theme.selection()
            } else {
                Style::default().add_modifier(Modifier::REVERSED)
            })
        } else {
            r
        })
    });
    // A cut id or user says so in its header.
    names[0] = header(&names[0], &cols[0], widths[0]);
    let user_col = Col {
        want: user_full,
        ..cols[1]
    };
    names[1] = header(&names[1], &user_col, widths[1]);
    let header = Row::new(keep(names.map(Cell::from).to_vec())).style(theme.muted());
    let table = fitted_table(rows, header, &widths);
    frame.render_widget(table, inner);
    Some(placed_list(
        frame,
        area,
        (Pane::List, inner),
        offset,
        len,
        theme,
    ))
}

fn gauge(consumed: u32, entries: u32, width: usize) -> String {
    let filled = if entries == 0 {
        0
    } else {
        ((consumed.min(entries) as usize * width) + entries as usize / 2) / entries as usize
    };
    format!(
        "{}{} {consumed}/{entries}",
        "█".repeat(filled),
        "░".repeat(width - filled)
    )
}

/// A rules mock's CONSUMED cell: calls per rule by index, then the fallback's
/// (`#0:2 #1:0 fb:1`), so a reader sees which rule answered. Past six rules only those
/// that answered are listed, so the cell stays narrow enough to be shown.
fn rule_hits(m: &crate::model::MockRow) -> String {
    let many = m.rule_hits.len() > 6;
    let mut parts: Vec<String> = m
        .rule_hits
        .iter()
        .enumerate()
        .filter(|(_, hits)| !many || **hits > 0)
        .map(|(i, hits)| format!("#{i}:{hits}"))
        .collect();
    if let Some(hits) = m.fallback_hits {
        parts.push(format!("fb:{hits}"));
    }
    parts.join(" ")
}

/// The focused Mocks pane: every mock's header, the opened ones' payloads, the cursor's
/// header in the selection's colours.
fn render_mocks_focused(frame: &mut Frame, area: Rect, state: &SessionsState, cx: &Cx) -> Placed {
    let hints = format!(
        "{}{} mock · {} open/close · {} {} scroll",
        key_cap(cx.keymap, Action::Up),
        key_cap(cx.keymap, Action::Down),
        key_cap(cx.keymap, Action::Open),
        key_cap(cx.keymap, Action::PageUp),
        key_cap(cx.keymap, Action::PageDown),
    );
    let placed = state.mocks.pane.draw_marked(
        frame,
        area,
        ("Mocks", &hints),
        state.mocks.selected_line(),
        cx,
    );
    Placed {
        pane: Pane::Mocks,
        ..placed
    }
}

fn render_mocks(
    frame: &mut Frame,
    area: Rect,
    session: &Session,
    hint: Option<String>,
    theme: &Theme,
) {
    let mut title = vec![Span::styled(" Mocks ", theme.title())];
    title.extend(hint.map(|h| Span::styled(h, theme.muted())));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(safe::line(title));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if session.mocks.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled("No mocks declared.", theme.muted())),
            inner,
        );
        return;
    }
    let visible = inner.height.saturating_sub(1) as usize;
    let cells = |m: &crate::model::MockRow| {
        let (mode, consumed) = match m.mode {
            MockMode::Stateful => ("stateful", gauge(m.consumed, m.entries, 6)),
            // A static mock never runs out: what it served, when a counter told it.
            MockMode::Static if m.counted && !m.never_called() => {
                ("static", format!("{} served", m.consumed))
            }
            MockMode::Static => ("static", "—".to_owned()),
            MockMode::Rules => ("rules", rule_hits(m)),
        };
        let (note, style) = if m.exhausted() {
            (" exhausted", theme.error())
        } else if m.never_called() {
            (" ○ never called", theme.muted())
        } else {
            ("", Style::default())
        };
        (mode, consumed, note, style)
    };
    // CONSUMED (`2/2 exhausted`) and MODE are shown whole or not at all, the tool cut
    // with an ellipsis; CALLS, then MODE give way first.
    let shown_mocks = || session.mocks.iter().take(visible);
    let widest = |header: &str, cell: &dyn Fn(&crate::model::MockRow) -> usize| {
        shown_mocks()
            .map(cell)
            .max()
            .unwrap_or(0)
            .max(header.chars().count())
    };
    let tool_want = widest("TOOL", &|m| sanitize(&m.tool).chars().count());
    let cols = [
        Col {
            want: tool_want,
            min: tool_want.min(14),
            priority: 0,
        },
        Col::whole(widest("MODE", &|m| cells(m).0.len()), 2),
        Col::whole(
            widest("CONSUMED", &|m| {
                let (_, consumed, note, _) = cells(m);
                consumed.chars().count() + note.chars().count()
            }),
            1,
        ),
        Col::whole(widest("CALLS", &|m| m.calls.to_string().len()), 3),
    ];
    // Room to spare goes to the tool column.
    let widths = fit_columns_stretching(&cols, inner.width as usize, 0);
    let keep = |cells: Vec<Cell<'static>>| shown_cells(cells, &widths);
    let rows = shown_mocks().map(|m| {
        let (mode, consumed, note, style) = cells(m);
        let gauge_style = if m.exhausted() {
            theme.error()
        } else {
            theme.bar()
        };
        Row::new(keep(vec![
            Cell::from(fit_name(&sanitize(&m.tool), widths[0].unwrap_or(0))),
            Cell::from(mode),
            Cell::from(Line::from(vec![
                Span::styled(consumed, gauge_style),
                Span::raw(note),
            ])),
            Cell::from(Line::from(m.calls.to_string()).right_aligned()),
        ]))
        .style(style)
    });
    let header = Row::new(keep(vec![
        Cell::from(header("TOOL", &cols[0], widths[0])),
        Cell::from("MODE"),
        Cell::from("CONSUMED"),
        Cell::from("CALLS"),
    ]))
    .style(theme.muted());
    let table = fitted_table(rows, header, &widths);
    frame.render_widget(table, inner);
}

/// A call's OUTCOME cell: `ok` or the envelope's code; a call held for approval says how
/// the hold stands (`pending`, `approved → ok`, `denied`, `expired`), so a denied call does
/// not read like a waiting one.
fn call_outcome(
    c: &crate::model::Call,
    model: &crate::model::Model,
    theme: &Theme,
) -> Span<'static> {
    use spyglass_protocol::Envelope;
    use spyglass_protocol::rest::ApprovalStatus;
    let code = c.envelope_code();
    let held = match c.outcome.envelope() {
        Some(Envelope::ApprovalRequired { approval_id, .. }) => Some(approval_id),
        _ => None,
    };
    let Some(held) = held else {
        return Span::styled(code.unwrap_or("ok").to_owned(), theme.outcome(code));
    };
    let approval = model
        .approvals
        .get(c.approval_id.as_deref().unwrap_or(held));
    let replayed = c.replay.as_ref().map(|r| {
        r.outcome
            .envelope()
            .map(spyglass_protocol::envelope::Envelope::code)
    });
    match (approval.map(|a| a.status), replayed) {
        (_, Some(code)) => Span::styled(
            format!("approved → {}", code.unwrap_or("ok")),
            theme.outcome(code),
        ),
        (Some(ApprovalStatus::Approved), None) => Span::styled("approved → …", theme.ok()),
        (Some(ApprovalStatus::Denied), None) => Span::styled("denied", theme.error()),
        (Some(ApprovalStatus::Expired), None) => Span::styled("expired", theme.muted()),
        (Some(ApprovalStatus::Cancelled), None) => Span::styled("cancelled", theme.muted()),
        (Some(ApprovalStatus::Pending), None) => Span::styled("pending", theme.warn()),
        // The approval fell out of the model's bound: only the hold is known.
        (None, None) => Span::styled("held", theme.warn()),
    }
}

fn render_timeline(
    frame: &mut Frame,
    area: Rect,
    session: &Session,
    cache: &TimelineCache,
    state: &SessionsState,
    cx: &Cx,
) -> Option<Placed> {
    let theme = cx.theme;
    let sort = match state.sort {
        CallSort::Start => "in order",
        CallSort::Duration => "by duration",
    };
    let title = Line::from(vec![
        Span::styled(" Timeline ", theme.title()),
        Span::styled(
            format!("· {sort} ({}) ", key_cap(cx.keymap, Action::Sort)),
            theme.muted(),
        ),
    ]);
    let block = focused_block(title, state.focus == Focus::Timeline, theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if cache.rows.is_empty() {
        frame.render_widget(
            Paragraph::new(Span::styled("No calls yet.", theme.muted())),
            inner,
        );
        return None;
    }
    let width = inner.width as usize;
    let span = (cache.t1 - cache.t0).max(f64::EPSILON);
    let height = inner.height.saturating_sub(1) as usize;
    let len = cache.rows.len();
    let sel = state.timeline_sel().min(len - 1);
    let offset = state.timeline.window(len, sel, height);
    let calls = session.timeline.calls();
    // The visible rows' outcomes first: OUTCOME is as wide as the widest of them (up to
    // half the pane), so it grows with the terminal instead of cutting at a fixed width.
    let outcomes: Vec<Span> = cache
        .rows
        .iter()
        .skip(offset)
        .take(height)
        .map(|entry| match *entry {
            TimelineRow::Step(i) => session.timeline.steps.get(i).map_or_else(
                || Span::raw(""),
                |s| match &s.first_failure {
                    // A retried model call shows on its step: what it threw, in warning.
                    Some(error) => Span::styled(format!("retried: {}", shown(error)), theme.warn()),
                    None => Span::styled(format!("{} tokens", s.tokens_total), theme.muted()),
                },
            ),
            TimelineRow::Call(i) => calls
                .get(i)
                .map_or_else(|| Span::raw(""), |c| call_outcome(c, cx.model, theme)),
            TimelineRow::Failure => Span::styled(
                shown(failed_run(session).map_or("", |run| run.output.as_str())).into_owned(),
                theme.error(),
            ),
        })
        .collect();
    let (left, right) = if state.absolute_times {
        (
            clock_at(Some(cache.t0), true, cx.watching),
            clock_at(Some(cache.t1), true, cx.watching),
        )
    } else {
        (
            "+0ms".to_owned(),
            format!("+{}", fmt_ms(cache.t1 - cache.t0)),
        )
    };
    let rows = timeline_rows(session, cache, state, (offset, height), theme);
    // DUR as wide as its widest visible value: columns of blanks go before names do.
    let dur_w = rows
        .iter()
        .flatten()
        .map(|r| fmt_ms(r.shown_dur).chars().count())
        .max()
        .unwrap_or(0)
        .max("DUR".len());
    let label_want = rows
        .iter()
        .flatten()
        .map(|r| r.indent.len() + r.label.width())
        .max()
        .unwrap_or(0);
    let (label_w, bar_w, out_w) = timeline_widths(
        width,
        label_want,
        outcomes.iter().map(Span::width).max().unwrap_or(0),
        dur_w,
        right.chars().count(),
    );
    let cut_label_header = if label_w < label_want {
        fit("STEP / CALL…", label_w)
    } else {
        fit("STEP / CALL", label_w)
    };
    let mut lines = Vec::with_capacity(height + 1);

    let axis_w = left.len() + right.chars().count() + 2;
    // Too narrow for both ends of the axis: its end (the span) alone.
    let axis = if axis_w <= bar_w {
        format!("{left} {} {right}", "─".repeat(bar_w - axis_w))
    } else {
        pad(&fit(&right, bar_w), bar_w)
    };
    lines.push(Line::from(vec![
        Span::styled(
            format!(" {} ", pad(&cut_label_header, label_w)),
            theme.muted(),
        ),
        Span::styled(axis, theme.muted()),
        Span::styled(
            format!(" {:>dur_w$} {}", "DUR", fit("OUTCOME", out_w)),
            theme.muted(),
        ),
    ]));
    for ((row, entry), outcome) in (offset..).zip(rows).zip(outcomes) {
        let outcome = Span::styled(fit(&outcome.content, out_w), outcome.style);
        let Some(TimelineEntry {
            indent,
            label,
            call,
            start,
            dur,
            shown_dur,
            bar_char,
            bar_style,
        }) = entry
        else {
            continue;
        };
        // A call's tool keeps its end (`…/create_paymet` is not `…/create_payment`); a
        // step's label keeps its start.
        let room = label_w.saturating_sub(indent.len());
        let label = if call {
            fit_name(&label, room)
        } else {
            fit(&label, room)
        };
        let bar = match start {
            Some(start) => {
                let x = (((start - cache.t0) / span) * bar_w as f64).floor() as usize;
                let x = x.min(bar_w - 1);
                let w = ((dur / span) * bar_w as f64).round().max(1.0) as usize;
                let w = w.min(bar_w - x);
                vec![
                    Span::raw(" ".repeat(x)),
                    Span::styled(bar_char.repeat(w), bar_style),
                    Span::raw(" ".repeat(bar_w - x - w)),
                ]
            }
            None => vec![Span::styled(
                format!("{:<bar_w$}", "(no start)"),
                theme.muted(),
            )],
        };
        let mut spans = vec![Span::raw(format!(
            "{} ",
            pad(&format!("{indent}{label}"), label_w)
        ))];
        spans.extend(bar);
        spans.push(Span::raw(format!(" {:>dur_w$} ", fmt_ms(shown_dur))));
        spans.push(outcome);
        let selected = row == sel && state.focus == Focus::Timeline;
        if selected {
            spans.insert(0, Span::raw("›"));
        } else {
            spans.insert(0, Span::raw(" "));
        }
        let mut line = Line::from(spans);
        if selected {
            line = line.style(theme.selection());
        }
        lines.push(line);
    }
    frame.render_widget(Paragraph::new(lines), inner);
    Some(placed_list(
        frame,
        area,
        (Pane::Timeline, inner),
        offset,
        len,
        theme,
    ))
}

/// One visible timeline row before it is laid out: its label (a step, or a call's tool),
/// where its bar starts and how long it is.
struct TimelineEntry {
    indent: &'static str,
    label: String,
    call: bool,
    start: Option<f64>,
    /// How long the bar is.
    dur: f64,
    /// What DUR says (the bar's length, but a failed run's row has a mark for a bar and
    /// the run's duration here).
    shown_dur: f64,
    bar_char: &'static str,
    bar_style: Style,
}

fn timeline_rows(
    session: &Session,
    cache: &TimelineCache,
    state: &SessionsState,
    (offset, height): (usize, usize),
    theme: &Theme,
) -> Vec<Option<TimelineEntry>> {
    let calls = session.timeline.calls();
    let mut rows = Vec::with_capacity(height);
    for entry in cache.rows.iter().skip(offset).take(height) {
        let row = match *entry {
            TimelineRow::Step(i) => {
                let Some(s) = session.timeline.steps.get(i) else {
                    rows.push(None);
                    continue;
                };
                let glyph = if state.collapsed.contains(&i) {
                    "▸"
                } else {
                    "▾"
                };
                // Before the finish reason: a narrow column cuts the label's end.
                let replayed = if s.cassette { "cassette · " } else { "" };
                // ↻N: the step's model call was retried N times (its error is the outcome).
                let retried = match s.failed_attempts {
                    0 => String::new(),
                    n => format!(" ↻{n}"),
                };
                TimelineEntry {
                    indent: "",
                    call: false,
                    label: format!(
                        "{glyph} step {}{retried} · {replayed}{}",
                        s.iteration, s.finish_reason
                    ),
                    start: Some(s.start_ms),
                    dur: s.duration_ms,
                    shown_dur: s.duration_ms,
                    bar_char: "─",
                    bar_style: theme.muted(),
                }
            }
            TimelineRow::Call(i) => {
                let Some(c) = calls.get(i) else {
                    rows.push(None);
                    continue;
                };
                let indent = if c.iteration.is_some() && state.sort == CallSort::Start {
                    "  "
                } else {
                    ""
                };
                TimelineEntry {
                    indent,
                    label: c.tool.to_string(),
                    call: true,
                    start: c.start_ms,
                    dur: c.duration_ms,
                    shown_dur: c.duration_ms,
                    bar_char: "█",
                    bar_style: match c.envelope_code() {
                        Some(code) => theme.outcome(Some(code)),
                        None => theme.bar(),
                    },
                }
            }
            TimelineRow::Failure => {
                let Some(run) = failed_run(session) else {
                    rows.push(None);
                    continue;
                };
                TimelineEntry {
                    indent: "",
                    label: "✕ failed".to_owned(),
                    call: false,
                    start: Some(cache.t1),
                    dur: 0.0,
                    shown_dur: run.duration_ms,
                    bar_char: "✕",
                    bar_style: theme.error(),
                }
            }
        };
        rows.push(Some(row));
    }
    rows
}

/// The session's run, when it failed.
fn failed_run(session: &Session) -> Option<&RunOutcome> {
    session
        .summary
        .as_ref()
        .and_then(|s| s.run.as_ref())
        .filter(|run| run.failed)
}

/// The timeline's (label, bar, outcome) widths in a pane `width` wide whose labels want
/// `label_want` columns, outcomes `out_want` and durations `dur_w`. OUTCOME is as wide as
/// its widest visible value, up to half the pane; the label takes what it wants of the
/// rest (the name tells calls apart; when there is room it gets a third of the pane, up
/// to 28); the bars keep room for the axis's end (`axis_end` columns, `+3.4ms`) and take
/// what is left.
fn timeline_widths(
    width: usize,
    label_want: usize,
    out_want: usize,
    dur_w: usize,
    axis_end: usize,
) -> (usize, usize, usize) {
    const LABEL_MAX: usize = 40;
    let bar_min = axis_end.max(4);
    let avail = width.saturating_sub(dur_w + 4);
    let out_w = out_want.max("OUTCOME".len()).min(width / 2);
    let label_w = label_want
        .max((width / 3).clamp(10, 28))
        .min(LABEL_MAX)
        .min(avail.saturating_sub(out_w + bar_min))
        .max(6);
    let bar_w = avail.saturating_sub(label_w + out_w).max(4);
    (label_w, bar_w, out_w)
}

fn render_detail(frame: &mut Frame, area: Rect, detail: &Detail, cx: &Cx) -> Placed {
    detail
        .pane
        .draw(frame, area, "Call", &scroll_hint(cx.keymap), cx)
}

#[cfg(test)]
mod tests {
    use super::rule_hits;
    use crate::model::MockRow;
    use spyglass_protocol::events::MockMode;

    fn row(hits: Vec<u32>, fallback: Option<u32>) -> MockRow {
        MockRow {
            tool: "a/b".into(),
            mode: MockMode::Rules,
            entries: u32::try_from(hits.len()).unwrap(),
            consumed: hits.iter().sum(),
            counted: true,
            calls: 0,
            saw_exhausted: false,
            rule_hits: hits,
            fallback_hits: fallback,
            payload: None,
            payload_bytes: None,
        }
    }

    #[test]
    fn a_long_rule_list_shows_only_the_rules_that_answered() {
        assert_eq!(rule_hits(&row(vec![1, 0, 2], None)), "#0:1 #1:0 #2:2");
        assert_eq!(
            rule_hits(&row(vec![0, 0, 0, 0, 0, 0, 3, 0], Some(1))),
            "#6:3 fb:1"
        );
    }
}
