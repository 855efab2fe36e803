//! The tabs whose work has not landed yet: a short note naming the issue that brings them.

use crate::ui::action::Tab;
use crate::ui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

pub fn render(frame: &mut Frame, area: Rect, tab: Tab, theme: &Theme) {
    let issue = match tab {
        Tab::Approvals => "Inspector: approvals with replay, the events log, and everyday comforts",
        Tab::Evals => "Evals: suite files, runner, CLI and the Evals view",
        Tab::Events => "Inspector: approvals with replay, the events log, and everyday comforts",
        Tab::Sessions => "",
    };
    let text = vec![
        Line::from(""),
        Line::from(Span::styled(
            format!("The {} tab is not in this build yet.", tab.title()),
            theme.accent(),
        )),
        Line::from(Span::styled(
            format!("It comes with: {issue}"),
            theme.muted(),
        )),
    ];
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(format!(" {} ", tab.title()), theme.title()));
    frame.render_widget(Paragraph::new(text).block(block), area);
}
