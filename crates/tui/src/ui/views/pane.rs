//! The one text pane every tab opens (a call, an event, an approval, a case, the focused
//! Mocks pane): its lines scrolled down and sideways, `/` search with `n`/`N`, JSON in colour.
//!
//! Lines are never wrapped: a long one runs past the right edge and `h`/`l` (←/→) scroll
//! the pane sideways, the bottom border saying where (` ◀ col 41 · ▶ `). So a search hit's
//! line is a screen row, and a word is never broken in two.

use super::search::PaneSearch;
use super::{Cx, Pane, Placed, TextKey, detail_frame, key_cap, scroll_pane};
use crate::ui::action::Action;
use crate::ui::theme::{Role, Theme};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use spyglass_protocol::sanitize::sanitize_text;

/// How a line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Heading,
    Plain,
    Muted,
    Ok,
    Error,
    Warn,
    /// A line of pretty-printed JSON: keys, strings, numbers, literals and punctuation each
    /// in their theme colour.
    Json,
}

/// One line of a pane; its text is masked by whoever built it and made terminal-safe by
/// [`PaneLine::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneLine {
    pub tone: Tone,
    pub text: String,
}

impl PaneLine {
    /// A line of `text`: whatever control, escape sequence or bidi control is left in it
    /// is shown escaped here (text already sanitised is kept as it is).
    pub fn new(tone: Tone, text: impl Into<String>) -> Self {
        let text = text.into();
        let text = match sanitize_text(&text) {
            std::borrow::Cow::Borrowed(_) => text,
            std::borrow::Cow::Owned(clean) => clean,
        };
        Self { tone, text }
    }

    pub fn heading(text: impl Into<String>) -> Self {
        Self::new(Tone::Heading, text)
    }

    pub fn plain(text: impl Into<String>) -> Self {
        Self::new(Tone::Plain, text)
    }

    pub fn json(text: impl Into<String>) -> Self {
        Self::new(Tone::Json, text)
    }

    /// Every line of a (pretty) JSON text.
    pub fn json_lines(text: &str) -> impl Iterator<Item = PaneLine> + '_ {
        text.lines().map(PaneLine::json)
    }
}

impl AsRef<str> for PaneLine {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

/// What a key did to a pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaneKey {
    /// The pane moved (or started a search).
    Used,
    /// `back` or `open`: the view closes it.
    Close,
    /// Not a pane key: the view may give it a meaning (approve, rerun…).
    Other,
}

/// A pane's lines, where it is scrolled to (line and column) and its search; the page and
/// width are as last drawn, for page keys and sideways steps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextPane {
    lines: Vec<PaneLine>,
    pub scroll: usize,
    /// The first column shown.
    pub col: usize,
    pub search: PaneSearch,
    page: usize,
    width: usize,
}

impl TextPane {
    pub fn new(lines: Vec<PaneLine>) -> Self {
        Self {
            lines,
            ..Self::default()
        }
    }

    pub fn lines(&self) -> &[PaneLine] {
        &self.lines
    }

    /// New text for the same thing (a replay arrived, a case reran): the place and the
    /// search are kept.
    pub fn set_lines(&mut self, lines: Vec<PaneLine>) {
        self.lines = lines;
        self.scroll = self.scroll.min(self.last_scroll());
    }

    /// Scrolls so `line` shows; a line out of view comes to the top (what follows it is
    /// what the reader wants next).
    pub fn show_line(&mut self, line: usize) {
        let page = self.page.max(1);
        if line < self.scroll || line >= self.scroll + page {
            self.scroll = line.min(self.last_scroll());
        }
    }

    /// Scrolls `line` to the top (as far as the last line allows).
    pub fn scroll_to(&mut self, line: usize) {
        self.scroll = line.min(self.last_scroll());
    }

    /// Whether keys are text for the search.
    pub fn typing(&self) -> bool {
        self.search.typing
    }

    fn last_scroll(&self) -> usize {
        self.lines.len().saturating_sub(self.page.max(1))
    }

    /// A key while the search is typed: the pane follows the first match.
    pub fn search_key(&mut self, key: TextKey) {
        if let Some(line) = self.search.key(key, &self.lines, self.scroll) {
            self.show_match(line);
        }
    }

    /// Scrolls so the match on `line` shows: the line near the top, its column in view.
    fn show_match(&mut self, line: usize) {
        self.scroll = line.min(self.last_scroll());
        let Some(text) = self.lines.get(line) else {
            return;
        };
        let needle = self.search.text.to_lowercase();
        let lower = text.text.to_lowercase();
        let Some(byte) = lower.find(&needle) else {
            return;
        };
        let at = lower[..byte].chars().count();
        // Not drawn yet: the first draw shows the line's start.
        let width = self.width;
        if width == 0 {
            return;
        }
        if at < self.col || at + needle.chars().count() > self.col + width {
            self.col = at.saturating_sub(width / 4);
        }
    }

    /// The widest line, in columns.
    fn widest(&self) -> usize {
        self.lines
            .iter()
            .map(|l| l.text.chars().count())
            .max()
            .unwrap_or(0)
    }

    /// A pane key: scrolling down and sideways, `/` and `n`/`N`; `back`/`open` close.
    pub fn on_action(&mut self, action: Action) -> PaneKey {
        match action {
            Action::Filter => {
                self.search.start();
                return PaneKey::Used;
            }
            Action::NextMatch | Action::PrevMatch => {
                if let Some(line) = self.search.step(&self.lines, action == Action::NextMatch) {
                    self.show_match(line);
                }
                return PaneKey::Used;
            }
            Action::ScrollLeft | Action::ScrollRight => {
                let step = (self.width / 4).max(4);
                let last = self.widest().saturating_sub(self.width.max(1));
                self.col = if action == Action::ScrollLeft {
                    self.col.saturating_sub(step)
                } else {
                    (self.col + step).min(last)
                };
                return PaneKey::Used;
            }
            Action::Back | Action::Open => return PaneKey::Close,
            _ => {}
        }
        if scroll_pane(&mut self.scroll, self.lines.len(), self.page, action) {
            PaneKey::Used
        } else {
            PaneKey::Other
        }
    }

    /// Takes where the pane was last drawn.
    pub fn place(&mut self, placed: Option<Placed>) {
        if let Some(p) = placed {
            self.page = p.page;
            self.width = p.rows.width as usize;
            self.scroll = p.offset;
        }
    }

    /// The title's hints: the search (`/word 2/5 · n/N next/previous`) before the view's.
    pub fn hints(&self, view_hints: &str, cx: &Cx) -> String {
        let found = self.search.label(&self.lines);
        if found.is_empty() {
            return view_hints.to_owned();
        }
        format!(
            "{found} · {}/{} next/previous · {view_hints}",
            key_cap(cx.keymap, Action::NextMatch),
            key_cap(cx.keymap, Action::PrevMatch)
        )
    }

    /// The pane in its accent frame, titled ` name · line N/M · hints · Esc back `.
    pub fn draw(
        &self,
        frame: &mut Frame,
        area: Rect,
        name: &str,
        view_hints: &str,
        cx: &Cx,
    ) -> Placed {
        self.draw_marked(frame, area, (name, view_hints), None, cx)
    }

    /// `draw`, with line `marked` (a cursor) in the selection's colours.
    pub fn draw_marked(
        &self,
        frame: &mut Frame,
        area: Rect,
        (name, view_hints): (&str, &str),
        marked: Option<usize>,
        cx: &Cx,
    ) -> Placed {
        let hints = self.hints(view_hints, cx);
        let height = area.height.saturating_sub(2) as usize;
        let scroll = self
            .scroll
            .min(self.lines.len().saturating_sub(height.max(1)));
        let inner = detail_frame(frame, area, name, &hints, (scroll, self.lines.len()), cx);
        self.draw_body(frame, inner, scroll, marked, cx.theme);
        self.sideways_marker(frame, area, inner, scroll, cx.theme);
        Placed {
            pane: Pane::Detail,
            rows: inner,
            offset: scroll,
            page: inner.height as usize,
        }
    }

    /// The lines from `scroll` into `inner` (no frame), `marked` in the selection's colours.
    pub fn draw_body(
        &self,
        frame: &mut Frame,
        inner: Rect,
        scroll: usize,
        marked: Option<usize>,
        theme: &Theme,
    ) {
        let width = inner.width as usize;
        let needle: Vec<char> = self.search.text.to_lowercase().chars().collect();
        let out: Vec<Line> = self
            .lines
            .iter()
            .enumerate()
            .skip(scroll)
            .take(inner.height as usize)
            .map(|(i, line)| {
                if marked != Some(i) {
                    return visible(line, self.col, width, &needle, theme);
                }
                // The cursor's line: a `›` in its leading space as well as the colours, so
                // it shows on a monochrome terminal too.
                let mut text = line.text.clone();
                if text.starts_with(' ') {
                    text.replace_range(..1, "›");
                }
                let cursor = PaneLine::new(line.tone, text);
                visible(&cursor, self.col, width, &needle, theme).style(theme.selection())
            })
            .collect();
        frame.render_widget(Paragraph::new(out), inner);
    }

    /// ` ◀ col 41 · ▶ ` on the bottom border: scrolled sideways, and more to the right.
    pub fn sideways_marker(
        &self,
        frame: &mut Frame,
        outer: Rect,
        inner: Rect,
        scroll: usize,
        theme: &Theme,
    ) {
        let width = inner.width as usize;
        let cut = self
            .lines
            .iter()
            .skip(scroll)
            .take(inner.height as usize)
            .any(|l| l.text.chars().count() > self.col + width);
        let mut parts = vec![];
        if self.col > 0 {
            parts.push(format!("◀ col {}", self.col + 1));
        }
        if cut {
            parts.push("▶".to_owned());
        }
        if parts.is_empty() || outer.height < 2 {
            return;
        }
        let text = format!(" {} ", parts.join(" · "));
        let w = text.chars().count() as u16;
        if w + 4 > outer.width {
            return;
        }
        let at = Rect {
            x: outer.x + outer.width - 2 - w,
            y: outer.y + outer.height - 1,
            width: w,
            height: 1,
        };
        frame.render_widget(Paragraph::new(Span::styled(text, theme.muted())), at);
    }
}

/// The style of a line's tone (JSON lines are styled per token instead).
fn tone_style(tone: Tone, theme: &Theme) -> Style {
    match tone {
        Tone::Heading => theme.title(),
        Tone::Plain | Tone::Json => Style::default(),
        Tone::Muted => theme.muted(),
        Tone::Ok => theme.ok(),
        Tone::Error => theme.error(),
        Tone::Warn => theme.warn(),
    }
}

/// The columns `[col, col + width)` of a line, styled; search hits reversed.
fn visible(
    line: &PaneLine,
    col: usize,
    width: usize,
    needle: &[char],
    theme: &Theme,
) -> Line<'static> {
    // Only what can show is looked at: a megabyte on one line costs its visible part.
    let end = col + width;
    let chars: Vec<char> = line.text.chars().take(end + needle.len()).collect();
    let mut styles: Vec<Style> = match line.tone {
        Tone::Json => json_styles(&chars, theme),
        tone => vec![tone_style(tone, theme); chars.len()],
    };
    if !needle.is_empty() && chars.len() >= needle.len() {
        let lower: Vec<char> = chars
            .iter()
            .map(|c| c.to_lowercase().next().unwrap_or(*c))
            .collect();
        let mut i = 0;
        while i + needle.len() <= lower.len() {
            if lower[i..i + needle.len()] == *needle {
                for s in &mut styles[i..i + needle.len()] {
                    *s = s.add_modifier(Modifier::REVERSED);
                }
                i += needle.len();
            } else {
                i += 1;
            }
        }
    }
    let mut spans: Vec<Span<'static>> = vec![];
    let mut run = String::new();
    let mut run_style: Option<Style> = None;
    for (c, style) in chars.iter().zip(styles).skip(col).take(width) {
        if run_style != Some(style) {
            if let Some(s) = run_style {
                spans.push(Span::styled(std::mem::take(&mut run), s));
            }
            run_style = Some(style);
        }
        run.push(*c);
    }
    if let Some(s) = run_style {
        spans.push(Span::styled(run, s));
    }
    Line::from(spans)
}

/// A style per character of one line of pretty-printed JSON: a string followed by `:` is
/// a key. Anything that is not JSON (a note, a cut value) keeps the text's colour.
pub fn json_styles(chars: &[char], theme: &Theme) -> Vec<Style> {
    let role = |r: Role| theme.style(r);
    let mut out = vec![Style::default(); chars.len()];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        let style = match c {
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i = (i + 1).min(chars.len());
                let mut next = i;
                while next < chars.len() && chars[next] == ' ' {
                    next += 1;
                }
                if chars.get(next) == Some(&':') {
                    role(Role::JsonKey)
                } else {
                    role(Role::JsonString)
                }
            }
            '-' | '0'..='9' => {
                i += 1;
                while i < chars.len() && matches!(chars[i], '0'..='9' | '.' | 'e' | 'E' | '+' | '-')
                {
                    i += 1;
                }
                role(Role::JsonNumber)
            }
            'a'..='z' => {
                while i < chars.len() && chars[i].is_ascii_alphabetic() {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                if matches!(word.as_str(), "true" | "false" | "null") {
                    role(Role::JsonLiteral)
                } else {
                    Style::default()
                }
            }
            '{' | '}' | '[' | ']' | ',' | ':' => {
                i += 1;
                role(Role::JsonPunct)
            }
            _ => {
                i += 1;
                Style::default()
            }
        };
        for s in &mut out[start..i.min(chars.len())] {
            *s = style;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane(lines: &[&str]) -> TextPane {
        let mut pane = TextPane::new(lines.iter().map(|l| PaneLine::json(*l)).collect());
        pane.place(Some(Placed {
            pane: Pane::Detail,
            rows: Rect::new(0, 0, 20, 3),
            offset: 0,
            page: 3,
        }));
        pane
    }

    #[test]
    fn json_tokens_take_their_roles() {
        let theme = Theme::default();
        let chars: Vec<char> = r#"  "id": "pay_1", "n": -1.5e3, "ok": true, "x": null"#
            .chars()
            .collect();
        let styles = json_styles(&chars, &theme);
        let at = |s: &str| {
            let text: String = chars.iter().collect();
            styles[text[..text.find(s).unwrap()].chars().count()]
        };
        assert_eq!(at("\"id\""), theme.style(Role::JsonKey));
        assert_eq!(at("\"pay_1\""), theme.style(Role::JsonString));
        assert_eq!(at("-1.5e3"), theme.style(Role::JsonNumber));
        assert_eq!(at("true"), theme.style(Role::JsonLiteral));
        assert_eq!(at("null"), theme.style(Role::JsonLiteral));
        assert_eq!(at(":"), theme.style(Role::JsonPunct));
        assert_eq!(at(","), theme.style(Role::JsonPunct));
        // An escaped quote does not end the string.
        let chars: Vec<char> = r#""a\"b": 1"#.chars().collect();
        let styles = json_styles(&chars, &theme);
        assert_eq!(styles[4], theme.style(Role::JsonKey));
    }

    #[test]
    fn sideways_steps_stop_at_the_widest_line_and_at_zero() {
        let long = "x".repeat(50);
        let mut p = pane(&["short", &long]);
        assert_eq!(p.on_action(Action::ScrollRight), PaneKey::Used);
        assert_eq!(p.col, 5);
        for _ in 0..20 {
            p.on_action(Action::ScrollRight);
        }
        assert_eq!(p.col, 30, "the widest line's end at the right edge");
        for _ in 0..20 {
            p.on_action(Action::ScrollLeft);
        }
        assert_eq!(p.col, 0);
        assert_eq!(p.on_action(Action::Back), PaneKey::Close);
        assert_eq!(p.on_action(Action::Approve), PaneKey::Other);
    }

    #[test]
    fn a_match_past_the_right_edge_scrolls_the_pane_sideways_to_it() {
        let far = format!("{}needle", "y".repeat(40));
        let mut p = pane(&["a", "b", "c", "d", &far]);
        p.on_action(Action::Filter);
        for c in "needle".chars() {
            let key = crossterm::event::KeyEvent::new(
                crossterm::event::KeyCode::Char(c),
                crossterm::event::KeyModifiers::NONE,
            );
            p.search_key(TextKey::Edit(key));
        }
        assert_eq!(p.scroll, 2, "the last line at the bottom");
        assert!(p.col <= 40 && p.col + 20 >= 46, "col {}", p.col);
    }
}
