//! The whole screen: tab bar, the current tab's view, the status bar, and the help overlay
//! drawn on top when open. Rendering reads the app and touches only what is visible.
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

use super::action::Tab;
use super::app::{App, Conn};
use super::keymap::{Context, label};
use super::views;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

pub fn draw(frame: &mut Frame, app: &mut App) {
    let [tabs, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    render_tabs(frame, tabs, app);
    match app.tab {
        Tab::Sessions => views::sessions::render(frame, body, app),
        Tab::Evals => views::evals::render(frame, body, app),
        other => views::placeholder::render(frame, body, other, &app.theme),
    }
    render_status(frame, status, app);
    if app.show_help {
        render_help(frame, body, app);
    }
}

fn render_tabs(frame: &mut Frame, area: Rect, app: &App) {
    let mut spans = vec![Span::raw(" ")];
    for (i, tab) in Tab::ALL.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" │ ", app.theme.muted()));
        }
        let mut title = format!("{} {}", i + 1, tab.title());
        if *tab == Tab::Approvals && app.model.approvals.pending_count() > 0 {
            title.push_str(&format!(" ({})", app.model.approvals.pending_count()));
        }
        let style = if *tab == app.tab {
            app.theme.selection().add_modifier(Modifier::BOLD)
        } else {
            Style::default()
        };
        spans.push(Span::styled(title, style));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn render_status(frame: &mut Frame, area: Rect, app: &App) {
    let theme = &app.theme;
    let conn = match &app.conn {
        Conn::Connected => Span::styled("● connected", theme.ok()),
        Conn::Connecting { attempt: 0 } => Span::styled("◌ connecting", theme.warn()),
        Conn::Connecting { attempt } => {
            Span::styled(format!("◌ connecting (attempt {attempt})"), theme.warn())
        }
        Conn::Reconnecting { attempt, retry_at } => {
            let left = retry_at.saturating_duration_since(app.clock.now());
            Span::styled(
                format!(
                    "◌ reconnecting in {} s (attempt {attempt})",
                    left.as_secs_f64().ceil() as u64
                ),
                theme.warn(),
            )
        }
        Conn::Offline => Span::styled("○ offline", theme.error()),
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
    let mut spans = vec![
        Span::raw(" "),
        conn,
        sep(),
        Span::raw(app.url.clone()),
        sep(),
        Span::raw(format!("seq {}", c.last_seq)),
        sep(),
        Span::raw(format!("{:.1} ev/s", app.events_per_sec())),
        sep(),
        Span::styled(format!("parse errors {}", c.parse_errors), errors),
        sep(),
        Span::styled(format!("dropped {}", c.dropped.total()), dropped),
        sep(),
    ];
    match &app.notice {
        Some(notice) => spans.push(Span::styled(notice.clone(), theme.warn())),
        None => spans.push(Span::styled("? help  q quit", theme.muted())),
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// Help is the keymap itself, grouped by where each key applies.
fn render_help(frame: &mut Frame, area: Rect, app: &App) {
    let theme = &app.theme;
    let mut lines = vec![];
    // The keys of the tab in view: all tabs' keys at once no longer fit a screen.
    let contexts = std::iter::once(Context::Global).chain(Context::of_tab(app.tab).iter().copied());
    for ctx in contexts {
        let bindings: Vec<_> = app
            .keymap
            .bindings()
            .iter()
            .filter(|b| b.context == ctx)
            .collect();
        if bindings.is_empty() {
            continue;
        }
        lines.push(Line::from(Span::styled(ctx.title(), theme.title())));
        // Keys for the same action share a line: "↑ k  move up".
        let mut seen: Vec<(super::action::Action, Vec<String>)> = vec![];
        for b in bindings {
            match seen.iter_mut().find(|(a, _)| *a == b.action) {
                Some((_, keys)) => keys.push(label(b)),
                None => seen.push((b.action, vec![label(b)])),
            }
        }
        for (action, keys) in seen {
            lines.push(Line::from(vec![
                Span::styled(format!("  {:<16}", keys.join(" ")), theme.accent()),
                Span::raw(action.describe_in(ctx)),
            ]));
        }
        if ctx == Context::FilterInput {
            lines.push(Line::from(vec![
                Span::styled(format!("  {:<16}", "other keys"), theme.accent()),
                Span::raw("type the filter (Backspace deletes)"),
            ]));
        }
    }
    let width = area.width.min(72);
    let height = (lines.len() as u16 + 2).min(area.height);
    let popup = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, popup);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.accent())
        .title(Span::styled(" Keys · any key closes ", theme.title()));
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}
