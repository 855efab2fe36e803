//! Text on its way to the screen: every span, line and title built from text a client may
//! have sent passes through spyglass-protocol's one sanitiser here, controls shown escaped.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use spyglass_protocol::sanitize::sanitize;

/// A span of `text` in `style`: C0/C1 controls, escape sequences and bidi controls are
/// shown escaped (`\e`, `\u{202e}`) rather than reaching the terminal.
pub fn span(text: impl AsRef<str>, style: Style) -> Span<'static> {
    Span::styled(sanitize(text.as_ref()).into_owned(), style)
}

/// [`span`] without a style of its own.
pub fn raw(text: impl AsRef<str>) -> Span<'static> {
    span(text, Style::default())
}

/// Every span of `line` made safe, its styles and alignment kept: for titles, status
/// lines and prompts assembled from parts.
pub fn line<'a>(line: impl Into<Line<'a>>) -> Line<'static> {
    let line = line.into();
    Line {
        spans: line
            .spans
            .iter()
            .map(|s| span(&s.content, s.style))
            .collect(),
        style: line.style,
        alignment: line.alignment,
    }
}

/// [`line`] for each of `lines`.
pub fn lines<'a>(lines: impl IntoIterator<Item = Line<'a>>) -> Vec<Line<'static>> {
    lines.into_iter().map(line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_from_parts_shows_every_control_escaped() {
        let title = line(vec![
            Span::raw(" "),
            Span::styled(
                "suite\u{202e}\u{1b}[2J\u{2066}x\u{2069}\u{200f}",
                Style::default(),
            ),
        ]);
        let text: String = title.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, " suite\\u{202e}\\e[2J\\u{2066}x\\u{2069}\\u{200f}");
        assert_eq!(raw("\u{9b}").content, "\\u{9b}");
    }
}
