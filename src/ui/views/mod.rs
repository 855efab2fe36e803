//! One module per tab (and `diff`, the Evals tab's expected-vs-actual diffs). Each tab
//! exposes a `render` that reads the app and draws only what is visible.

pub mod approvals;
pub mod diff;
pub mod evals;
pub mod events;
pub mod sessions;

use crate::ui::action::Action;
use ratatui::layout::{Position, Rect};

/// Moves a scrolled pane (a call's JSON, an event, a case's assertions) for a key: a line,
/// a page of `page` lines, either end; the last line stops at the bottom. False when the
/// key is not a scrolling one, so the view can give it another meaning.
pub fn scroll_pane(scroll: &mut usize, lines: usize, page: usize, action: Action) -> bool {
    let page = page.max(1);
    let last = lines.saturating_sub(page);
    *scroll = match action {
        Action::Up => scroll.saturating_sub(1),
        Action::Down => (*scroll + 1).min(last),
        Action::PageUp => scroll.saturating_sub(page),
        Action::PageDown => (*scroll + page).min(last),
        Action::Top => 0,
        Action::Bottom => last,
        _ => return false,
    };
    true
}

/// The list row under a click: `rows` is where the rows were drawn, `offset` the first
/// row shown. `None` outside them.
pub fn row_at(rows: Rect, at: Position, offset: usize) -> Option<usize> {
    rows.contains(at)
        .then(|| offset + usize::from(at.y - rows.y))
}

/// Fits text into `width` columns, with an ellipsis when cut; terminal controls in it
/// are shown escaped.
pub fn fit(text: &str, width: usize) -> String {
    let text = &*crate::sanitize::sanitize(text);
    if text.chars().count() <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// A duration in milliseconds, short: `850µs`, `3.5ms`, `120ms`, `2.3s`.
pub fn fmt_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{:.0}µs", ms * 1000.0)
    } else if ms < 10.0 {
        format!("{ms:.1}ms")
    } else if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.1}s", ms / 1000.0)
    }
}

/// How long ago, short: `now`, `12s`, `3m`, `2h`, `4d`.
pub fn fmt_age(now_ms: f64, then_ms: Option<f64>) -> String {
    let Some(then) = then_ms else {
        return "-".into();
    };
    let secs = ((now_ms - then) / 1000.0).floor();
    if secs < 1.0 {
        "now".into()
    } else if secs < 60.0 {
        format!("{secs:.0}s")
    } else if secs < 3600.0 {
        format!("{:.0}m", (secs / 60.0).floor())
    } else if secs < 86_400.0 {
        format!("{:.0}h", (secs / 3600.0).floor())
    } else {
        format!("{:.0}d", (secs / 86_400.0).floor())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_forms() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
        assert_eq!(fmt_ms(0.25), "250µs");
        assert_eq!(fmt_ms(3.5), "3.5ms");
        assert_eq!(fmt_ms(2300.0), "2.3s");
        assert_eq!(fmt_age(10_000.0, Some(9_500.0)), "now");
        assert_eq!(fmt_age(200_000.0, Some(10_000.0)), "3m");
        assert_eq!(fmt_age(0.0, None), "-");
    }

    #[test]
    fn a_pane_scrolls_by_line_and_page_and_stops_with_its_last_line_at_the_bottom() {
        let mut at = 0;
        // Ten lines in a four-line pane: the last first line is 6.
        assert!(scroll_pane(&mut at, 10, 4, Action::Up));
        assert_eq!(at, 0);
        assert!(scroll_pane(&mut at, 10, 4, Action::Down));
        assert_eq!(at, 1);
        assert!(scroll_pane(&mut at, 10, 4, Action::PageDown));
        assert_eq!(at, 5);
        assert!(scroll_pane(&mut at, 10, 4, Action::PageDown));
        assert_eq!(at, 6);
        assert!(scroll_pane(&mut at, 10, 4, Action::Top));
        assert_eq!(at, 0);
        assert!(scroll_pane(&mut at, 10, 4, Action::Bottom));
        assert_eq!(at, 6);
        // Shorter than the pane: nowhere to go.
        let mut short = 0;
        assert!(scroll_pane(&mut short, 3, 4, Action::Bottom));
        assert_eq!(short, 0);
        // Other keys are left to the view, the position untouched.
        assert!(!scroll_pane(&mut at, 10, 4, Action::Back));
        assert_eq!(at, 6);
    }
}
