//! The whole screen: tab bar, the current tab's view, the status bar, and the help overlay
//! drawn on top when open. Drawing reads the app and touches only what is visible; what was
//! laid out (tab titles, the view's rows) is handed back to the app for clicks and pages.
//!
//! ```text
//! ┌───────────────────────────────────────────────────────────────┐
//! │ 1 Sessions │ 2 Approvals │ 3 Evals │ 4 Events                  │  tabs (1 row)
//! ├───────────────────────────────────────────────────────────────┤
//! │ the current tab's view (views::*)                             │
//! ├───────────────────────────────────────────────────────────────┤
//! │ ● connected  URL  seq  ev/s  parse errors  dropped  ? help    │  status (1 row)
//! └───────────────────────────────────────────────────────────────┘
//! ```

use super::action::{Action, Tab};
use super::app::{App, Conn, TabHits, Watching};
use super::safe;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use spyglass_protocol::sanitize::{sanitize, shown};
use unicode_width::UnicodeWidthChar;

pub fn draw(frame: &mut Frame, app: &mut App) {
    let [tabs, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let hits = render_tabs(frame, tabs, app);
    let drawn = app.view().render(frame, body, &app.cx());
    render_status(frame, status, app);
    if app.show_help {
        app.help_fit = render_help(frame, body, app);
    }
    // Last: a role's colour on a background it was not chosen for stays readable.
    app.theme.keep_readable(frame.buffer_mut());
    app.tab_hits = hits;
    app.place(&drawn);
}

/// The tab titles as they fit in `width`: whole with `│` between, then closer together,
/// then shortened, then numbers only, so every tab stays on screen and clickable.
pub fn tab_titles(width: usize, pending: usize) -> (Vec<String>, &'static str) {
    let count = if pending > 0 {
        format!(" ({pending})")
    } else {
        String::new()
    };
    let titles = |name: &dyn Fn(Tab) -> &'static str| -> Vec<String> {
        Tab::ALL
            .iter()
            .enumerate()
            .map(|(i, tab)| {
                // The pending count shows from every tab: a held call is waiting on someone.
                let more = if *tab == Tab::Approvals {
                    count.as_str()
                } else {
                    ""
                };
                format!("{} {}{more}", i + 1, name(*tab))
                    .trim_end()
                    .to_owned()
            })
            .collect()
    };
    let short = |tab: Tab| match tab {
        Tab::Sessions => "Sess",
        Tab::Approvals => "Appr",
        Tab::Evals => "Evals",
        Tab::Events => "Events",
    };
    let candidates = [
        (titles(&|t| t.title()), " │ "),
        (titles(&|t| t.title()), " "),
        (titles(&short), " "),
        (titles(&|_| ""), " "),
    ];
    let used = |(titles, sep): &(Vec<String>, &str)| {
        1 + titles.iter().map(|t| t.chars().count()).sum::<usize>()
            + sep.chars().count() * (titles.len() - 1)
    };
    let last = candidates[3].clone();
    candidates
        .into_iter()
        .find(|c| used(c) <= width)
        .unwrap_or(last)
}

/// The tab titles, and where each was drawn.
fn render_tabs(frame: &mut Frame, area: Rect, app: &App) -> TabHits {
    let mut spans = vec![Span::raw(" ")];
    let mut x = area.x + 1;
    let mut hits = TabHits::default();
    let (titles, sep) = tab_titles(usize::from(area.width), app.model.approvals.pending_count());
    for (i, (tab, title)) in Tab::ALL.iter().zip(titles).enumerate() {
        if i > 0 {
            spans.push(Span::styled(sep, app.theme.muted()));
            x += sep.chars().count() as u16;
        }
        let style = if *tab == app.tab {
            app.theme.selection().add_modifier(Modifier::BOLD)
        } else if *tab == Tab::Approvals && app.model.approvals.pending_count() > 0 {
            app.theme.warn()
        } else {
            Style::default()
        };
        let width = title.chars().count() as u16;
        hits.0.push((
            Rect {
                x,
                y: area.y,
                width,
                height: 1,
            },
            *tab,
        ));
        x += width;
        spans.push(Span::styled(title, style));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
    hits
}

fn render_status(frame: &mut Frame, area: Rect, app: &App) {
    let theme = &app.theme;
    let conn = match &app.conn {
        Conn::Connected => Span::styled("● connected", theme.ok()),
        Conn::Connecting { attempt: 0 } => Span::styled("◌ connecting", theme.warn()),
        Conn::Connecting { attempt } => {
            Span::styled(format!("◌ connecting (attempt {attempt})"), theme.warn())
        }
        Conn::Reconnecting {
            attempt,
            retry_at,
            cause,
        } => {
            let left = retry_at.saturating_duration_since(app.clock.now());
            Span::styled(
                format!(
                    "◌ {}; reconnecting in {} s (attempt {attempt})",
                    shown(cause),
                    left.as_secs_f64().ceil() as u64
                ),
                theme.warn(),
            )
        }
        Conn::Rejected { status } => {
            let what = if *status == 403 {
                "403 forbidden"
            } else {
                "401 unauthorized"
            };
            Span::styled(
                format!("✕ {what}: pass --api-key KEY or set CODESPAR_API_KEY"),
                theme.error(),
            )
        }
        Conn::Offline => Span::styled("○ offline", theme.error()),
    };
    // A replay has no connection: say where playback is instead.
    let conn = match (&app.watching, &app.conn) {
        (Watching::Replay { .. }, Conn::Offline) => Span::styled("■ replay ended", theme.muted()),
        (Watching::Replay { .. }, _) => Span::styled("▶ replay", theme.ok()),
        _ => conn,
    };
    let c = &app.model.counters;
    let sep = || Span::styled(" │ ", theme.muted());
    let errors = if c.parse_errors > 0 {
        theme.error()
    } else {
        Style::default()
    };
    let dropped = if c.dropped.total() > 0 {
        theme.warn()
    } else {
        Style::default()
    };
    let mut spans = vec![Span::raw(" "), conn, sep()];
    // A notice (a refused decision, a copy) comes first: it answers what the user just
    // did, and the line is cut at the right on narrow terminals.
    if let Some(notice) = &app.notice {
        spans.push(Span::styled(shown(notice).into_owned(), theme.warn()));
        spans.push(sep());
    }
    spans.extend(source_spans(app));
    spans.extend([
        sep(),
        Span::raw(format!("seq {}", c.last_seq)),
        sep(),
        Span::raw(format!("{:.1} ev/s", app.events_per_sec())),
        sep(),
        Span::styled(format!("parse errors {}", c.parse_errors), errors),
        sep(),
        Span::styled(format!("dropped {}", c.dropped.total()), dropped),
    ]);
    let hint = |a: Action, word: &str| {
        app.keymap
            .hint(a)
            .map(|k| format!("{k} {word}"))
            .unwrap_or_default()
    };
    // The way to help stays on screen at any width: it is drawn at the right, and what
    // does not fit before it is cut with `…`. `q quit` goes when a notice needs the room.
    let keys = if app.notice.is_none() {
        format!(
            "{}  {}",
            hint(Action::Help, "help"),
            hint(Action::Quit, "quit")
        )
    } else {
        hint(Action::Help, "help")
    };
    let keys = [
        Span::styled(" │ ", theme.muted()),
        Span::styled(keys, theme.muted()),
    ];
    let whole = safe::line(
        spans
            .iter()
            .cloned()
            .chain(keys.clone())
            .collect::<Vec<_>>(),
    );
    if whole.width() <= usize::from(area.width) {
        frame.render_widget(Paragraph::new(whole).style(theme.status_bar()), area);
        return;
    }
    let keys = Line::from(keys.to_vec());
    let keys_w = u16::try_from(keys.width())
        .unwrap_or(u16::MAX)
        .min(area.width);
    let [left, right] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(keys_w)]).areas(area);
    let line = cut_line(safe::line(spans), usize::from(left.width));
    frame.render_widget(Paragraph::new(line).style(theme.status_bar()), left);
    frame.render_widget(Paragraph::new(keys).style(theme.status_bar()), right);
}

/// Help lines fitted to `width`: a `key  description` line too wide has its description
/// wrapped onto lines of its own under where it started.
fn wrap_help(lines: Vec<Line<'static>>, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        let [key, what] = line.spans.as_slice() else {
            out.push(line);
            continue;
        };
        if line.width() <= width {
            out.push(line);
            continue;
        }
        let indent = key.width();
        let room = width.saturating_sub(indent).max(12);
        for (i, part) in crate::ui::views::wrap_words(&what.content, room)
            .into_iter()
            .enumerate()
        {
            let key = if i == 0 {
                key.clone()
            } else {
                Span::raw(" ".repeat(indent))
            };
            out.push(Line::from(vec![key, Span::styled(part, what.style)]));
        }
    }
    out
}

/// A help line carrying on the description of the line above.
fn is_continued(line: &Line<'_>) -> bool {
    line.spans.len() == 2 && line.spans[0].content.trim().is_empty()
}

/// `line` cut to `width` columns, its last column a `…` when anything was cut.
fn cut_line(line: Line<'static>, width: usize) -> Line<'static> {
    if line.width() <= width {
        return line;
    }
    let mut left = width.saturating_sub(1);
    let mut spans = vec![];
    for span in line.spans {
        if left == 0 {
            break;
        }
        let w = span.width();
        if w <= left {
            left -= w;
            spans.push(span);
        } else {
            let mut used = 0;
            let text: String = span
                .content
                .chars()
                .take_while(|c| {
                    used += c.width().unwrap_or(0);
                    used <= left
                })
                .collect();
            spans.push(Span::styled(text, span.style));
            break;
        }
    }
    if width > 0 {
        spans.push(Span::raw("…"));
    }
    Line {
        spans,
        style: line.style,
        alignment: line.alignment,
    }
}

/// What is being watched: the URL, or a banner naming the demo, the embedded runtime
/// (with the variable that points tests at it) or the replayed file.
fn source_spans(app: &App) -> Vec<Span<'static>> {
    let theme = &app.theme;
    let url = app.url.clone();
    let badge =
        |text: &str| Span::styled(text.to_owned(), theme.accent().add_modifier(Modifier::BOLD));
    let mut spans = match &app.watching {
        Watching::Runtime => vec![Span::raw(url)],
        Watching::Demo => vec![badge("demo"), Span::raw(format!(" · runtime {url}"))],
        Watching::Embedded => vec![
            badge("embedded runtime"),
            Span::raw(format!(" {url} · export CODESPAR_BASE_URL={url}")),
        ],
        Watching::Replay { file } => vec![badge("replay"), Span::raw(format!(" {file} · offline"))],
    };
    if app.all_projects() {
        spans.push(Span::raw(" · "));
        spans.push(Span::styled("all projects", theme.accent()));
    } else if let Some(project) = &app.project {
        spans.push(Span::raw(" · project "));
        spans.push(Span::styled(sanitize(project).into_owned(), theme.accent()));
    }
    spans
}

/// What the columns of a tab's list mean, for the help overlay.
pub fn column_help(tab: Tab) -> &'static [(&'static str, &'static str)] {
    match tab {
        Tab::Sessions => &[
            ("ID", "session id; ↗ an external agent's run"),
            (
                "STATUS",
                "active, completed, failed, closed, gone (restarted)",
            ),
            ("CALLS", "tool calls the session made"),
            ("ENV", "calls answered with an envelope code, not a result"),
            ("LAST", "time since the session's last event"),
        ],
        Tab::Approvals => &[
            ("RULE", "the policy rule that held the call"),
            ("STATE", "pending (time left), approved, denied, expired"),
            ("REPLAY", "what the approved call's replay answered"),
        ],
        Tab::Evals => &[
            ("PASS", "pass rate over the runs kept (skips left out)"),
            ("TREND", "pass rate per run, oldest to newest"),
            ("RUNS", "runs the rates look back over"),
            ("DUR", "the case's latest duration"),
        ],
        Tab::Events => &[
            ("SEQ", "the event's place in the stream"),
            ("TIME", "when the runtime stamped it"),
            ("WHAT", "the event in a line; Enter shows it whole"),
        ],
    }
}

/// Help is the keymap itself: the global keys and the tab in view's, grouped by where each
/// applies, two columns when tall, scrolled from `app.help_scroll` when taller still.
/// Returns (rows, rows that fit) for the scroll keys.
fn render_help(frame: &mut Frame, area: Rect, app: &App) -> (usize, usize) {
    let theme = &app.theme;
    let mut lines = vec![];
    for &scope in app.tab.help_scopes() {
        lines.push(Line::from(Span::styled(scope.title(), theme.title())));
        for action in Action::ALL.into_iter().filter(|a| a.applies_in(scope)) {
            lines.push(Line::from(vec![
                Span::styled(
                    format!("  {:<16}", app.keymap.describe(action)),
                    theme.accent(),
                ),
                Span::raw(action.description()),
            ]));
        }
    }
    lines.push(Line::from(Span::styled("Columns", theme.title())));
    for (column, meaning) in column_help(app.tab) {
        lines.push(Line::from(vec![
            Span::styled(format!("  {column:<16}"), theme.accent()),
            Span::raw(*meaning),
        ]));
    }
    if app.tab.has_text_input() {
        lines.push(Line::from(Span::styled(
            "Typing a filter or a note",
            theme.title(),
        )));
        for (action, what) in [
            (Action::Open, "keep the text"),
            (Action::Back, "discard the text"),
        ] {
            lines.push(Line::from(vec![
                Span::styled(
                    format!("  {:<16}", app.keymap.describe(action)),
                    theme.accent(),
                ),
                Span::raw(what),
            ]));
        }
        lines.push(Line::from(vec![
            Span::styled(format!("  {:<16}", "other keys"), theme.accent()),
            Span::raw("type (backspace deletes)"),
        ]));
    }
    // Two columns when tall and the screen is wide; else one column as wide as the screen
    // allows. A description too long for its column wraps under itself: never cut.
    let widest = lines.iter().map(Line::width).max().unwrap_or(0);
    let widest = u16::try_from(widest).unwrap_or(u16::MAX);
    let two = lines.len() as u16 + 2 > area.height && area.width >= 100;
    let (width, rows) = if two {
        let width = area.width.min(widest * 2 + 4);
        lines = wrap_help(lines, usize::from(width.saturating_sub(2) / 2));
        // The right column starts at a line of its own, not a wrapped description's rest.
        let mut rows = lines.len().div_ceil(2);
        while lines.get(rows).is_some_and(is_continued) {
            rows += 1;
        }
        (width, rows)
    } else {
        let width = area.width.min(widest.max(70) + 2);
        lines = wrap_help(lines, usize::from(width.saturating_sub(2)));
        (width, lines.len())
    };
    let height = (rows as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    let page = usize::from(height.saturating_sub(2));
    let scroll = app.help_scroll.min(rows.saturating_sub(page));
    frame.render_widget(Clear, popup);
    let title = if rows > page {
        format!(
            " Keys · {} scroll · any other key closes ",
            crate::ui::views::scroll_hint(&app.keymap).trim_end_matches(" scroll")
        )
    } else {
        " Keys · any key closes ".to_owned()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.accent())
        .title(Span::styled(title, theme.title()));
    let inner = block.inner(popup);
    frame.render_widget(block, popup);
    let shown = |lines: Vec<Line<'static>>| Paragraph::new(lines).scroll((scroll as u16, 0));
    if two {
        let right = lines.split_off(rows);
        let [l, r] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
            .areas(inner);
        frame.render_widget(shown(lines), l);
        frame.render_widget(shown(right), r);
    } else {
        frame.render_widget(shown(lines), inner);
    }
    let below = rows.saturating_sub(scroll + page);
    if let Some(text) =
        crate::ui::views::scroll_marker(scroll, below, usize::from(width.saturating_sub(4)))
        && popup.height >= 2
    {
        let w = text.chars().count() as u16;
        let at = Rect {
            x: popup.x + popup.width - 2 - w,
            y: popup.y + popup.height - 1,
            width: w,
            height: 1,
        };
        frame.render_widget(Paragraph::new(Span::styled(text, theme.muted())), at);
    }
    (rows, page)
}
