//! One module per tab (and `diff`, the Evals tab's expected-vs-actual diffs), and the one
//! contract they share: `View` (keys, clicks, copy, a read-only `render`), `Effect` (what a
//! view asks of the app), `ListCursor` (a list's selection and window) and `scroll_pane`.

pub mod approvals;
pub mod diff;
pub mod evals;
pub mod events;
pub mod pane;
pub mod query;
pub mod search;
pub mod sessions;

use crate::model::Model;
use crate::ui::action::{Action, KeyMap};
use crate::ui::app::Watching;
use crate::ui::theme::Theme;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// What a view reads besides its own state: the model and how things are shown.
pub struct Cx<'a> {
    pub model: &'a Model,
    pub theme: &'a Theme,
    pub keymap: &'a KeyMap,
    /// The app clock's wall time, for countdowns and ages.
    pub now_ms: f64,
    pub url: &'a str,
    pub watching: &'a Watching,
    /// The stream is every project's: rows say whose they are.
    pub all_projects: bool,
    /// Why nothing arrives (the runtime cannot be reached, or refused the key), for an
    /// empty list to say instead of "waiting".
    pub trouble: Option<String>,
}

/// What a view asks of the app after a key or a click; the app alone sends, copies,
/// switches tabs or writes the status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    None,
    /// A line for the status bar.
    Notice(String),
    /// Send a confirmed approve or deny.
    Decide {
        approval_id: String,
        approve: bool,
        note: String,
    },
    /// Send one confirmed decision to several marked approvals.
    DecideAll {
        approval_ids: Vec<String>,
        approve: bool,
        note: String,
    },
    /// Rerun a case (or, without one, the whole suite).
    Rerun {
        suite: String,
        case: Option<String>,
    },
    /// Show this session in the Sessions tab.
    ShowSession(String),
    /// Put `text` on the clipboard; `what` names it in the status line.
    Copy {
        what: String,
        text: String,
    },
    Quit,
}

/// Which of a view's panes a `Placed` is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    List,
    Timeline,
    Suites,
    Cases,
    Detail,
    /// The Sessions tab's Mocks pane as focused.
    Mocks,
    /// The Sessions tab's Mocks table, not focused: a click there focuses it.
    MocksTable,
}

/// Where a pane's rows were drawn: the area under its header, the first row shown, and
/// how many rows fit (a page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    pub pane: Pane,
    pub rows: Rect,
    pub offset: usize,
    pub page: usize,
}

impl Placed {
    /// The rows of a table whose first line inside `inner` is its header.
    pub fn under_header(pane: Pane, inner: Rect, offset: usize) -> Self {
        let rows = Rect {
            y: inner.y + 1,
            height: inner.height.saturating_sub(1),
            ..inner
        };
        Self {
            pane,
            rows,
            offset,
            page: rows.height as usize,
        }
    }
}

/// A list's rows drawn under their header in `inner`, `offset` the first of `len`: where
/// they were placed, with the rows hidden above and below marked on the bottom border of
/// the list's frame `outer` (` ↑3 above · ↓5 below `), so a cut list says it is one.
pub fn placed_list(
    frame: &mut Frame,
    outer: Rect,
    (pane, inner): (Pane, Rect),
    offset: usize,
    len: usize,
    theme: &Theme,
) -> Placed {
    let placed = Placed::under_header(pane, inner, offset);
    let above = offset.min(len);
    let below = len.saturating_sub(offset + placed.page);
    if let Some(text) = scroll_marker(above, below, (outer.width as usize).saturating_sub(4))
        && outer.height >= 2
    {
        let width = text.chars().count() as u16;
        let at = Rect {
            x: outer.x + outer.width - 2 - width,
            y: outer.y + outer.height - 1,
            width,
            height: 1,
        };
        frame.render_widget(
            ratatui::widgets::Paragraph::new(ratatui::text::Span::styled(text, theme.muted())),
            at,
        );
    }
    placed
}

/// ` ↑3 above · ↓5 below ` (or ` ↑3 ↓5 ` when that does not fit in `room`); `None` when
/// nothing is hidden or not even the short form fits.
pub fn scroll_marker(above: usize, below: usize, room: usize) -> Option<String> {
    let part = |n: usize, arrow: &str, word: &str| (n > 0).then(|| format!("{arrow}{n}{word}"));
    let join = |parts: [Option<String>; 2], sep: &str| {
        let parts: Vec<String> = parts.into_iter().flatten().collect();
        (!parts.is_empty()).then(|| format!(" {} ", parts.join(sep)))
    };
    let long = join(
        [part(above, "↑", " above"), part(below, "↓", " below")],
        " · ",
    )?;
    if long.chars().count() <= room {
        return Some(long);
    }
    join([part(above, "↑", ""), part(below, "↓", "")], " ").filter(|s| s.chars().count() <= room)
}

/// What one `render` recorded: the panes it laid out. The app hands it back to the view
/// (`View::place`), so clicks and page keys use what is on screen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drawn(pub Vec<Placed>);

impl Drawn {
    pub fn push(&mut self, placed: Placed) {
        self.0.push(placed);
    }

    pub fn get(&self, pane: Pane) -> Option<Placed> {
        self.0.iter().copied().find(|p| p.pane == pane)
    }
}

/// The contract every tab keeps. `render` only reads; what it laid out comes back through
/// `place`. Keys arrive as `Action`s from the keymap (`on_key` sees a raw key first only
/// while a view has a text field or a prompt open).
pub trait View {
    /// The model changed: keep selections on the same items, rebuild what is cached.
    fn after_model_change(&mut self, model: &Model);
    /// A key before the keymap sees it; `None` when the view does not take raw keys now.
    fn on_key(&mut self, _key: KeyEvent, _cx: &Cx) -> Option<Effect> {
        None
    }
    fn on_action(&mut self, action: Action, cx: &Cx) -> Effect;
    fn on_click(&mut self, at: Position, model: &Model) -> Effect;
    /// The wheel is over `at`: focus the pane there before it scrolls.
    fn on_wheel(&mut self, _at: Position) {}
    /// Another tab is being shown by a click.
    fn on_hide(&mut self) {}
    /// Whether a text pane has the keys (`Scope::Pane` comes first).
    fn pane_open(&self) -> bool {
        false
    }
    /// The selected thing as text for the clipboard, and its name.
    fn copy_text(&self, model: &Model) -> Option<(String, String)>;
    fn render(&self, frame: &mut Frame, area: Rect, cx: &Cx) -> Drawn;
    /// What the last `render` laid out (offsets, pages, click areas).
    fn place(&mut self, drawn: &Drawn, model: &Model);
}

/// A list's cursor: the selection (by id, so arriving rows never move it), the first row
/// shown and the page height as last drawn, and where its rows were for clicks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor<K> {
    pub selected: Option<K>,
    pub offset: usize,
    pub page: usize,
    rows: Rect,
}

impl<K> Default for ListCursor<K> {
    fn default() -> Self {
        Self {
            selected: None,
            offset: 0,
            page: 0,
            rows: Rect::default(),
        }
    }
}

impl<K> ListCursor<K> {
    /// The row `action` moves `cur` to in a list of `len` rows (a page is as last drawn).
    pub fn step(&self, cur: usize, len: usize, action: Action) -> usize {
        step(cur, len, action, self.page)
    }

    /// The first row to draw so that `sel` shows in `height` rows, starting from where
    /// the list was last drawn (see [`window`]).
    pub fn window(&self, len: usize, sel: usize, height: usize) -> usize {
        window(self.offset, len, sel, height)
    }

    /// Takes what render laid out; `None` when the rows were not drawn (no clicks land).
    pub fn place(&mut self, placed: Option<Placed>) {
        match placed {
            Some(p) => {
                self.offset = p.offset;
                self.page = p.page;
                self.rows = p.rows;
            }
            None => self.rows = Rect::default(),
        }
    }

    /// The row under a click, `None` outside the drawn rows.
    pub fn row_at(&self, at: Position) -> Option<usize> {
        row_at(self.rows, at, self.offset)
    }

    pub fn contains(&self, at: Position) -> bool {
        self.rows.contains(at)
    }
}

/// Moves a cursor in a list of `len` rows.
pub fn step(cur: usize, len: usize, action: Action, page: usize) -> usize {
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

/// The first row to draw of `len` rows in `height`, from `offset` (where the list was last
/// drawn), so that `sel` shows and no row is hidden above while there is room below: the
/// pane may have grown or the list shrunk (a filter, a decision) since.
pub fn window(offset: usize, len: usize, sel: usize, height: usize) -> usize {
    scroll_to(offset.min(len.saturating_sub(height.max(1))), sel, height)
}

/// Keeps `sel` inside the window `[offset, offset + height)`.
pub fn scroll_to(offset: usize, sel: usize, height: usize) -> usize {
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

/// A bordered pane; the accent border marks the one keys go to.
pub fn focused_block<'a>(title: Line<'a>, focused: bool, theme: &Theme) -> Block<'a> {
    let border = if focused {
        theme.accent()
    } else {
        theme.border()
    };
    Block::default()
        .borders(Borders::ALL)
        .border_style(border)
        .title(crate::ui::safe::line(title))
}

/// The first key bound to `action` as the keymap writes it (`a`, `enter`); `?` when
/// nothing is bound.
pub fn key_label(keymap: &KeyMap, action: Action) -> String {
    keymap.hint(action).unwrap_or_else(|| "?".into())
}

/// The first key bound to `action` as printed on the keycap, for pane titles and short
/// sentences: arrows and page keys as symbols, `Esc` and `Enter` capitalised.
pub fn key_cap(keymap: &KeyMap, action: Action) -> String {
    let key = key_label(keymap, action);
    match key.as_str() {
        "up" => "↑".into(),
        "down" => "↓".into(),
        "left" => "←".into(),
        "right" => "→".into(),
        "pageup" => "PgUp".into(),
        "pagedown" => "PgDn".into(),
        "esc" => "Esc".into(),
        "enter" => "Enter".into(),
        _ => key,
    }
}

/// `a approve · d deny`: each action's key and what it does, for a title.
pub fn hints(keymap: &KeyMap, pairs: &[(Action, &str)]) -> String {
    pairs
        .iter()
        .filter(|(a, _)| keymap.hint(*a).is_some())
        .map(|(a, word)| format!("{} {word}", key_label(keymap, *a)))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// A key while typing a filter or a note, as the keymap reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKey {
    /// The `open` key: keep the text.
    Keep,
    /// The `back` key: discard it.
    Discard,
    /// A control-quit still quits.
    Quit,
    /// A character or a backspace.
    Edit(KeyEvent),
    Ignore,
}

pub fn text_key(keymap: &KeyMap, key: KeyEvent) -> TextKey {
    if keymap.matches(Action::Open, &key) {
        TextKey::Keep
    } else if keymap.matches(Action::Back, &key) {
        TextKey::Discard
    } else if key.modifiers.contains(KeyModifiers::CONTROL) && keymap.matches(Action::Quit, &key) {
        TextKey::Quit
    } else if matches!(key.code, KeyCode::Char(_) | KeyCode::Backspace) {
        TextKey::Edit(key)
    } else {
        TextKey::Ignore
    }
}

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

/// Typing into a list filter: a character or Backspace edits `text`; true when it changed
/// (the rows must be matched again).
pub fn edit_filter(text: &mut String, key: KeyEvent) -> bool {
    match key.code {
        KeyCode::Char(c) => text.push(c),
        KeyCode::Backspace => {
            text.pop();
        }
        _ => return false,
    }
    true
}

/// An action while a filter is typed: Enter keeps it, Esc drops it (any other action is
/// ignored). True when the text was dropped (the rows must be matched again).
pub fn end_filter(editing: &mut bool, text: &mut String, action: Action) -> bool {
    match action {
        Action::Open => *editing = false,
        Action::Back => {
            *editing = false;
            text.clear();
            return true;
        }
        _ => {}
    }
    false
}

/// The frame of an opened detail pane, ` Name · line N/M · <hints> · Esc back `, in the
/// accent border every detail pane wears; returns the area inside it.
pub fn detail_frame(
    frame: &mut Frame,
    area: Rect,
    name: &str,
    hints: &str,
    (scroll, len): (usize, usize),
    cx: &Cx,
) -> Rect {
    let theme = cx.theme;
    let title = Line::from(vec![
        ratatui::text::Span::styled(format!(" {name} "), theme.title()),
        ratatui::text::Span::styled(
            format!(
                "· line {}/{len} · {hints} · {} back ",
                scroll + 1,
                key_cap(cx.keymap, Action::Back)
            ),
            theme.muted(),
        ),
    ]);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.accent())
        .title(crate::ui::safe::line(title));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    inner
}

/// `↑↓ PgUp PgDn scroll`, from the keymap.
pub fn scroll_hint(keymap: &KeyMap) -> String {
    format!(
        "{}{} {} {} scroll",
        key_cap(keymap, Action::Up),
        key_cap(keymap, Action::Down),
        key_cap(keymap, Action::PageUp),
        key_cap(keymap, Action::PageDown)
    )
}

/// The list row under a click: `rows` is where the rows were drawn, `offset` the first
/// row shown. `None` outside them.
fn row_at(rows: Rect, at: Position, offset: usize) -> Option<usize> {
    rows.contains(at)
        .then(|| offset + usize::from(at.y - rows.y))
}

/// Fits text into `width` columns, with an ellipsis when cut; terminal controls in it
/// are shown escaped.
pub fn fit(text: &str, width: usize) -> String {
    let text = &*spyglass_protocol::sanitize::sanitize(text);
    if text.width() <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = head(text, width - 1);
    out.push('…');
    out
}

/// A name (a tool, an id, a case) fitted to `width` display columns keeping what tells two
/// names apart: its end. `server/tool` loses the server's end first (`nuvem…/create_nfe`),
/// then the middle of the tool (`…/creat…paymet`), below 10 columns all but the tool's end
/// (`…_paymet`); any other name loses its middle. Wide
/// (CJK) characters count two columns; the answer is never wider than `width`.
pub fn fit_name(text: &str, width: usize) -> String {
    let text = &*spyglass_protocol::sanitize::sanitize(text);
    if text.width() <= width {
        return text.to_owned();
    }
    if let Some((server, tool)) = text.split_once('/') {
        let tool_w = tool.width();
        // At least one character of the server, its ellipsis and the slash.
        if server.width() > 0 && tool_w + 3 <= width {
            let mut out = head(server, width - tool_w - 2);
            out.push_str("…/");
            out.push_str(tool);
            return out;
        }
        if width >= 10 {
            let mut out = "…/".to_owned();
            out.push_str(&middle(tool, width - 2));
            return out;
        }
        // Too narrow for both ends of the tool: its end.
        if width > 1 {
            let mut out = "…".to_owned();
            out.push_str(&tail(tool, width - 1));
            return out;
        }
    }
    middle(text, width)
}

/// `text` with its middle replaced by `…` to fit `width` columns; the end keeps the larger
/// half (what differs between similar names is more often at the end).
fn middle(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let room = width - 1;
    let front = room / 2;
    let mut out = head(text, front);
    let used = out.width();
    out.push('…');
    out.push_str(&tail(text, room - used));
    out
}

/// The longest start of `text` at most `width` columns wide.
fn head(text: &str, width: usize) -> String {
    let mut used = 0;
    text.chars()
        .take_while(|c| {
            used += c.width().unwrap_or(0);
            used <= width
        })
        .collect()
}

/// The longest end of `text` at most `width` columns wide.
fn tail(text: &str, width: usize) -> String {
    let mut used = 0;
    let mut end: Vec<char> = text
        .chars()
        .rev()
        .take_while(|c| {
            used += c.width().unwrap_or(0);
            used <= width
        })
        .collect();
    end.reverse();
    end.into_iter().collect()
}

/// `text` (already fitted) padded with spaces to `width` display columns: `format!`'s
/// padding counts characters, so a wide character would push what follows off the row.
pub fn pad(text: &str, width: usize) -> String {
    let mut out = text.to_owned();
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(text.width())));
    out
}

/// A table column as [`fit_columns`] sees it: the width its widest value (or header)
/// wants, the least it may be cut to (with an ellipsis; `min == want` never cuts), and how
/// much it matters (0 first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Col {
    pub want: usize,
    pub min: usize,
    pub priority: u8,
}

impl Col {
    /// A column whose values lose their meaning when cut: shown whole or not at all.
    pub fn whole(want: usize, priority: u8) -> Self {
        Self {
            want,
            min: want,
            priority,
        }
    }
}

/// Column widths for a table `width` wide (one space between shown columns): the least
/// important columns are dropped (`None`) until every shown one gets its `min`; what is
/// left widens the shown ones toward `want`, most important first. A column never gets
/// less than its `min`, so a value is shown whole, cut with an ellipsis, or not at all.
pub fn fit_columns(cols: &[Col], width: usize) -> Vec<Option<usize>> {
    let mut order: Vec<usize> = (0..cols.len()).collect();
    order.sort_by_key(|&i| (cols[i].priority, i));
    let mut shown = vec![false; cols.len()];
    let mut used = 0usize;
    for &i in &order {
        // A column with nothing to show (no flaky case, say) takes no room at all.
        if cols[i].want == 0 {
            continue;
        }
        let need = cols[i].min + usize::from(used > 0);
        if used + need <= width {
            shown[i] = true;
            used += need;
        }
    }
    let mut widths: Vec<Option<usize>> = (0..cols.len())
        .map(|i| shown[i].then_some(cols[i].min))
        .collect();
    let mut spare = width.saturating_sub(used);
    for &i in &order {
        if let Some(w) = &mut widths[i] {
            let more = cols[i].want.saturating_sub(*w).min(spare);
            *w += more;
            spare -= more;
        }
    }
    widths
}

/// A column's header, marked `NAME…` when the column is narrower than its widest value
/// (so the user knows its values are cut); as given when whole or hidden.
pub fn header(name: &str, col: &Col, width: Option<usize>) -> String {
    match width {
        Some(w) if w < col.want => fit(&format!("{}…", name.trim_end_matches(['▲', '▼'])), w),
        _ => name.to_owned(),
    }
}

/// `fit_columns`, then the room left goes to column `stretch` (when shown), so the other
/// columns stay together on the right.
pub fn fit_columns_stretching(cols: &[Col], width: usize, stretch: usize) -> Vec<Option<usize>> {
    let mut widths = fit_columns(cols, width);
    let used: usize = widths.iter().flatten().map(|w| w + 1).sum();
    if let Some(w) = widths.get_mut(stretch).and_then(Option::as_mut) {
        *w += (width + 1).saturating_sub(used);
    }
    widths
}

/// `fit_columns_stretching`, and when a column with something to show had to be dropped,
/// the widths for two columns less plus a last one of width 1, for the `…` that
/// [`marked_header`] puts at the header's end to say a column is not shown. The mark
/// never costs a column: when those two would drop one more, there is none.
pub fn fit_columns_marked(cols: &[Col], width: usize, stretch: usize) -> Vec<Option<usize>> {
    let widths = fit_columns_stretching(cols, width, stretch);
    let dropped = cols
        .iter()
        .zip(&widths)
        .any(|(col, w)| col.want > 0 && w.is_none());
    if !dropped || width < 3 {
        return widths;
    }
    let shown = |widths: &[Option<usize>]| widths.iter().map(Option::is_some).collect::<Vec<_>>();
    let mut narrower = fit_columns_stretching(cols, width - 2, stretch);
    if shown(&narrower) != shown(&widths) {
        return widths;
    }
    narrower.push(Some(1));
    narrower
}

/// The header cells of the shown columns, then `…` when [`fit_columns_marked`] dropped
/// a column.
pub fn marked_header<'a>(
    cells: Vec<ratatui::widgets::Cell<'a>>,
    widths: &[Option<usize>],
) -> Vec<ratatui::widgets::Cell<'a>> {
    let marked = widths.len() > cells.len();
    let mut shown = shown_cells(cells, widths);
    if marked {
        shown.push(ratatui::widgets::Cell::from("…"));
    }
    shown
}

/// A table of the columns `fit_columns` shows, at the widths it gave them.
pub fn fitted_table<'a>(
    rows: impl IntoIterator<Item = ratatui::widgets::Row<'a>>,
    header: ratatui::widgets::Row<'a>,
    widths: &[Option<usize>],
) -> ratatui::widgets::Table<'a> {
    let widths = widths
        .iter()
        .flatten()
        .map(|w| ratatui::layout::Constraint::Length(u16::try_from(*w).unwrap_or(u16::MAX)));
    ratatui::widgets::Table::new(rows, widths).header(header)
}

/// The cells of the columns `fit_columns` shows, in order.
pub fn shown_cells<T>(cells: Vec<T>, widths: &[Option<usize>]) -> Vec<T> {
    cells
        .into_iter()
        .zip(widths)
        .filter_map(|(cell, w)| w.map(|_| cell))
        .collect()
}

/// Words of `text` laid into lines of at most `width` columns; a word longer than a line
/// is split. Never empty.
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines: Vec<String> = vec![];
    let mut line = String::new();
    let mut used = 0;
    for word in text.split(' ') {
        let chars: Vec<char> = word.chars().collect();
        if used > 0 && used + 1 + chars.len() > width {
            lines.push(std::mem::take(&mut line));
            used = 0;
        }
        if used > 0 {
            line.push(' ');
            used += 1;
        }
        // A word wider than a line fills lines of its own.
        let mut rest = chars.as_slice();
        while used + rest.len() > width {
            let (head, tail) = rest.split_at(width - used);
            line.extend(head);
            lines.push(std::mem::take(&mut line));
            used = 0;
            rest = tail;
        }
        line.extend(rest);
        used += rest.len();
    }
    lines.push(line);
    lines
}

pub use crate::units::{FMT_MS_MAX, fmt_ms, plural};

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
    fn a_cut_name_keeps_what_tells_it_from_its_neighbours() {
        // The demo's misspelling and the real tool stay apart at every width.
        for width in 6..20 {
            let a = fit_name("asaas/create_paymet", width);
            let b = fit_name("asaas/create_payment", width);
            assert_ne!(a, b, "at {width}");
            assert!(
                a.width() <= width && b.width() <= width,
                "{a} {b} at {width}"
            );
        }
        assert_eq!(
            fit_name("nuvem-fiscal/create_nfe", 20),
            "nuvem-fi…/create_nfe"
        );
        assert_eq!(fit_name("asaas/create_payment", 14), "…/creat…ayment");
        assert_eq!(fit_name("ses_0123456789", 9), "ses_…6789");
        assert_eq!(fit_name("short", 9), "short");
    }

    #[test]
    fn wide_characters_count_two_columns() {
        let name = "店铺/创建订单";
        for width in 0..16 {
            assert!(fit_name(name, width).width() <= width, "at {width}");
            assert!(fit(name, width).width() <= width, "at {width}");
        }
        assert_eq!(pad(&fit("创建订单", 5), 6), "创建… ");
    }

    #[test]
    fn short_forms() {
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("abc", 4), "abc");
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(fmt_age(10_000.0, Some(9_500.0)), "now");
        assert_eq!(fmt_age(200_000.0, Some(10_000.0)), "3m");
        assert_eq!(fmt_age(0.0, None), "-");
    }

    #[test]
    fn columns_give_way_by_priority_and_are_never_cut_below_their_minimum() {
        let cols = [
            Col {
                want: 25,
                min: 13,
                priority: 0,
            },
            Col::whole(9, 1),
            Col::whole(5, 3),
            Col::whole(3, 2),
        ];
        // Everything fits: every column as wide as it wants.
        assert_eq!(
            fit_columns(&cols, 60),
            [Some(25), Some(9), Some(5), Some(3)]
        );
        // Tighter: the id is cut before any column goes.
        assert_eq!(
            fit_columns(&cols, 35),
            [Some(15), Some(9), Some(5), Some(3)]
        );
        // Tighter still: the least important column goes, the next stays whole.
        assert_eq!(fit_columns(&cols, 28), [Some(14), Some(9), None, Some(3)]);
        // The status no longer fits whole: it goes rather than show `clos`.
        assert_eq!(fit_columns(&cols, 20), [Some(16), None, None, Some(3)]);
        assert_eq!(fit_columns(&cols, 0), [None, None, None, None]);
    }

    #[test]
    fn a_dropped_column_is_marked_when_the_mark_costs_no_other_column() {
        let cols = [
            Col::whole(10, 0),
            Col {
                want: 20,
                min: 8,
                priority: 1,
            },
            Col::whole(6, 2),
        ];
        // Everything fits: no mark.
        assert_eq!(
            fit_columns_marked(&cols, 40, 1),
            [Some(10), Some(22), Some(6)]
        );
        // The last column gives way; the stretched one yields two for ` …`.
        assert_eq!(
            fit_columns_marked(&cols, 24, 1),
            [Some(10), Some(11), None, Some(1)]
        );
        // Two columns less would drop the stretched one too: no mark then.
        assert_eq!(fit_columns_marked(&cols, 19, 1), [Some(10), Some(8), None]);
    }

    #[test]
    fn the_scroll_marker_counts_hidden_rows_and_shortens_to_fit() {
        assert_eq!(scroll_marker(0, 0, 80), None);
        assert_eq!(
            scroll_marker(3, 5, 80).as_deref(),
            Some(" ↑3 above · ↓5 below ")
        );
        assert_eq!(scroll_marker(0, 12, 80).as_deref(), Some(" ↓12 below "));
        assert_eq!(scroll_marker(3, 5, 10).as_deref(), Some(" ↑3 ↓5 "));
        assert_eq!(scroll_marker(3, 5, 4), None);
    }

    #[test]
    fn a_window_never_hides_rows_above_while_there_is_room_below() {
        // Scrolled to the end of 11 rows in 1 row, then 28 rows tall: all show.
        assert_eq!(window(10, 11, 10, 28), 0);
        // A filter left 16 rows of 706; the old offset was 690.
        assert_eq!(window(690, 16, 15, 26), 0);
        // Taller than the rest: the last rows fill the pane.
        assert_eq!(window(8, 20, 19, 5), 15);
        // Still scrolled where it fits.
        assert_eq!(window(4, 20, 6, 5), 4);
        assert_eq!(window(4, 20, 2, 5), 2);
        assert_eq!(window(0, 0, 0, 5), 0);
        assert_eq!(window(3, 10, 3, 0), 3);
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

/// Per-view screens: one view drawn into a small `TestBackend`, with its layout handed
/// back as the app would, so a change to the status bar or the tabs does not touch them.
#[cfg(test)]
pub(crate) mod testing {
    use super::{Cx, Drawn, Effect, View};
    use crate::model::{Limits, Model};
    use crate::ui::action::{Action, KeyMap};
    use crate::ui::app::Watching;
    use crate::ui::theme::Theme;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::buffer::Buffer;
    use spyglass_protocol::events::decode;

    pub const NOW_MS: f64 = 1_795_383_840_000.0; // 2026-11-22T21:44:00Z
    const URL: &str = "http://127.0.0.1:8000";

    /// A model folded from frames written as the wire writes them.
    pub fn model(frames: &[String]) -> Model {
        let mut model = Model::new(Limits::default());
        for json in frames {
            model.fold(Box::new(decode(json).expect("a test frame decodes")));
        }
        model
    }

    pub struct Screen {
        pub model: Model,
        pub theme: Theme,
        pub keymap: KeyMap,
        pub all_projects: bool,
    }

    impl Screen {
        pub fn new(model: Model) -> Self {
            Self {
                model,
                theme: Theme::default(),
                keymap: KeyMap::default(),
                all_projects: false,
            }
        }

        fn cx(&self) -> Cx<'_> {
            Cx {
                model: &self.model,
                theme: &self.theme,
                keymap: &self.keymap,
                now_ms: NOW_MS,
                url: URL,
                watching: &Watching::Runtime,
                all_projects: self.all_projects,
                trouble: None,
            }
        }

        /// The view drawn at `width`×`height`; its layout is placed as the app places it.
        pub fn draw(&self, view: &mut dyn View, width: u16, height: u16) -> Buffer {
            let mut terminal =
                Terminal::new(TestBackend::new(width, height)).expect("a test terminal");
            let mut drawn = Drawn::default();
            terminal
                .draw(|f| drawn = view.render(f, f.area(), &self.cx()))
                .expect("a test frame draws");
            view.place(&drawn, &self.model);
            terminal.backend().buffer().clone()
        }

        /// `draw`, as text: one line per row, trailing blanks cut.
        pub fn text(&self, view: &mut dyn View, width: u16, height: u16) -> String {
            text(&self.draw(view, width, height))
        }

        pub fn act(&self, view: &mut dyn View, action: Action) -> Effect {
            view.on_action(action, &self.cx())
        }
    }

    pub fn text(buf: &Buffer) -> String {
        let mut out = String::new();
        for y in 0..buf.area.height {
            let mut line = String::new();
            for x in 0..buf.area.width {
                line.push_str(buf[(x, y)].symbol());
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}
