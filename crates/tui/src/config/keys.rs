//! The one keymap: every action a user can ask for, where it applies, its default keys,
//! and the bindings the config's `[keys]` table changes by action name. The UI dispatches
//! through it and the help overlay is generated from it, so the two cannot disagree.

use super::ConfigError;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// A key as bound: code plus modifiers, normalised (see [`normalize`]).
pub type Key = (KeyCode, KeyModifiers);

/// Where an action applies. A key press is looked up in the active scopes, most specific
/// first, so the same key may mean different things in different places (`y` confirms in
/// the approve/deny prompt and copies elsewhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Global,
    /// Every list and scrollable pane.
    List,
    Sessions,
    Approvals,
    Evals,
    Events,
    /// An open text pane (a call, an event, an approval, a case, the focused Mocks pane):
    /// its keys come before the tab's, and the pane-focus keys mean nothing under it.
    Pane,
    /// The approve/deny confirmation prompt.
    Prompt,
}

impl Scope {
    /// In the order the help overlay lists them.
    pub const ALL: [Scope; 8] = [
        Scope::Global,
        Scope::List,
        Scope::Sessions,
        Scope::Approvals,
        Scope::Evals,
        Scope::Events,
        Scope::Pane,
        Scope::Prompt,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Scope::Global => "Everywhere",
            Scope::List => "Lists and panes",
            Scope::Sessions => "Sessions",
            Scope::Approvals => "Approvals",
            Scope::Evals => "Evals",
            Scope::Events => "Events",
            Scope::Pane => "An open pane (call, event, approval, case, mocks)",
            Scope::Prompt => "Approve / deny prompt",
        }
    }
}

/// An action's config name, help line, default keys and the scopes it applies in.
type ActionInfo = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [Scope],
);

/// Every action a key can be bound to, named as in the config's `[keys]` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Quit,
    Help,
    NextTab,
    PrevTab,
    TabSessions,
    TabApprovals,
    TabEvals,
    TabEvents,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Open,
    Back,
    Filter,
    Copy,
    Sort,
    FocusLeft,
    FocusRight,
    Approve,
    Deny,
    Confirm,
    Note,
    Follow,
    RerunCase,
    RerunSuite,
    JumpToSession,
    PinRun,
    HideEvals,
    SortList,
    FlipOrder,
    Jump,
    Mark,
    FoldSteps,
    NextMatch,
    PrevMatch,
    Times,
    ScrollLeft,
    ScrollRight,
}

impl Action {
    pub const ALL: [Action; 41] = [
        Action::Quit,
        Action::Help,
        Action::NextTab,
        Action::PrevTab,
        Action::TabSessions,
        Action::TabApprovals,
        Action::TabEvals,
        Action::TabEvents,
        Action::Up,
        Action::Down,
        Action::PageUp,
        Action::PageDown,
        Action::Top,
        Action::Bottom,
        Action::Open,
        Action::Back,
        Action::Filter,
        Action::Copy,
        Action::Sort,
        Action::FocusLeft,
        Action::FocusRight,
        Action::Approve,
        Action::Deny,
        Action::Confirm,
        Action::Note,
        Action::Follow,
        Action::RerunCase,
        Action::RerunSuite,
        Action::JumpToSession,
        Action::PinRun,
        Action::HideEvals,
        Action::SortList,
        Action::FlipOrder,
        Action::Jump,
        Action::Mark,
        Action::FoldSteps,
        Action::NextMatch,
        Action::PrevMatch,
        Action::Times,
        Action::ScrollLeft,
        Action::ScrollRight,
    ];

    /// The action's name in the config file.
    pub fn name(self) -> &'static str {
        self.info().0
    }

    /// One line for the help overlay.
    pub fn description(self) -> &'static str {
        self.info().1
    }

    /// The keys bound when the config does not say otherwise.
    pub fn default_keys(self) -> &'static [&'static str] {
        self.info().2
    }

    /// Where the action applies: one scope, or the tabs that share it (pane focus).
    pub fn scopes(self) -> &'static [Scope] {
        self.info().3
    }

    pub fn applies_in(self, scope: Scope) -> bool {
        self.scopes().contains(&scope)
    }

    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == name)
    }

    fn info(self) -> ActionInfo {
        use Scope::{Approvals, Evals, Events, Global, List, Pane, Prompt, Sessions};
        match self {
            Action::Quit => ("quit", "quit", &["q", "ctrl-c"], &[Global]),
            Action::Help => ("help", "show or hide this help", &["?"], &[Global]),
            Action::Jump => (
                "jump",
                "jump to a session, approval or case by id",
                &[":"],
                &[Global],
            ),
            Action::NextTab => ("next_tab", "next tab", &["tab"], &[Global]),
            Action::PrevTab => ("prev_tab", "previous tab", &["shift-tab"], &[Global]),
            Action::TabSessions => ("tab_sessions", "Sessions tab", &["1"], &[Global]),
            Action::TabApprovals => ("tab_approvals", "Approvals tab", &["2"], &[Global]),
            Action::TabEvals => ("tab_evals", "Evals tab", &["3"], &[Global]),
            Action::TabEvents => ("tab_events", "Events tab", &["4"], &[Global]),
            Action::Up => ("up", "move up", &["up", "k"], &[List]),
            Action::Down => ("down", "move down", &["down", "j"], &[List]),
            Action::PageUp => ("page_up", "page up", &["pageup"], &[List]),
            Action::PageDown => ("page_down", "page down", &["pagedown"], &[List]),
            Action::Top => ("top", "first row", &["home", "g"], &[List]),
            Action::Bottom => ("bottom", "last row", &["end", "G"], &[List]),
            Action::Open => ("open", "open the selected item", &["enter"], &[List]),
            Action::Back => (
                "back",
                "close the pane, clear the filter",
                &["esc"],
                &[List],
            ),
            // Only the lists that can be filtered: a key listed in help must do something.
            Action::Filter => (
                "filter",
                "filter the list, or search an open pane",
                &["/"],
                &[Sessions, Approvals, Evals, Events, Pane],
            ),
            Action::Copy => ("copy", "copy the selected item as JSON", &["y"], &[List]),
            Action::Sort => ("sort", "calls in order or by duration", &["s"], &[Sessions]),
            Action::FocusLeft => (
                "focus_left",
                "focus the left pane (sessions, suites)",
                &["left", "h"],
                &[Sessions, Evals],
            ),
            Action::FocusRight => (
                "focus_right",
                "focus the right pane (timeline, then mocks; cases)",
                &["right", "l"],
                &[Sessions, Evals],
            ),
            Action::Approve => ("approve", "approve the selected call", &["a"], &[Approvals]),
            Action::Deny => ("deny", "deny the selected call", &["d"], &[Approvals]),
            Action::Mark => (
                "mark",
                "mark a call and move to the next; a/d then decide all marked",
                &["space", "m"],
                &[Approvals],
            ),
            Action::Confirm => ("confirm", "confirm an approve or deny", &["y"], &[Prompt]),
            Action::Note => ("note", "add a note before confirming", &["n"], &[Prompt]),
            Action::Follow => (
                "follow",
                "events: follow the stream or hold",
                &["f"],
                &[Events],
            ),
            Action::RerunCase => (
                "rerun_case",
                "rerun the selected eval case",
                &["r"],
                &[Evals],
            ),
            Action::RerunSuite => ("rerun_suite", "rerun the selected suite", &["R"], &[Evals]),
            Action::JumpToSession => (
                "jump_to_session",
                "show the case's session timeline",
                &["t"],
                &[Evals],
            ),
            Action::PinRun => (
                "pin_run",
                "pin the newest run; later ones show changes",
                &["p"],
                &[Evals],
            ),
            Action::HideEvals => (
                "hide_evals",
                "hide or show closed eval sessions",
                &["e"],
                &[Sessions],
            ),
            Action::SortList => (
                "sort_list",
                "order sessions by the next column",
                &["o"],
                &[Sessions],
            ),
            Action::NextMatch => ("next_match", "next match of the / search", &["n"], &[Pane]),
            Action::PrevMatch => (
                "prev_match",
                "previous match of the / search",
                &["N"],
                &[Pane],
            ),
            Action::ScrollLeft => (
                "scroll_left",
                "scroll long lines left",
                &["left", "h"],
                &[Pane],
            ),
            Action::ScrollRight => (
                "scroll_right",
                "scroll long lines right",
                &["right", "l"],
                &[Pane],
            ),
            Action::Times => (
                "times",
                "times as ages or as clock times",
                &["T"],
                &[Sessions],
            ),
            Action::FoldSteps => (
                "fold_steps",
                "fold or unfold every step (enter: one)",
                &["z"],
                &[Sessions],
            ),
            Action::FlipOrder => (
                "flip_order",
                "sessions ascending or descending",
                &["O"],
                &[Sessions],
            ),
        }
    }
}

/// Which key does what. Built from the defaults, then the config's `[keys]` table
/// replaces the keys of each action it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyMap {
    bindings: Vec<(Action, Vec<Key>)>,
}

impl Default for KeyMap {
    fn default() -> KeyMap {
        let bindings = Action::ALL
            .into_iter()
            .map(|action| {
                let keys = action
                    .default_keys()
                    .iter()
                    .filter_map(|s| parse_key(s).ok())
                    .collect();
                (action, keys)
            })
            .collect();
        KeyMap { bindings }
    }
}

impl KeyMap {
    /// Replace the keys of one action.
    pub fn bind(&mut self, action: Action, keys: Vec<Key>) {
        if let Some(slot) = self.bindings.iter_mut().find(|(a, _)| *a == action) {
            slot.1 = keys;
        }
    }

    pub fn keys(&self, action: Action) -> &[Key] {
        self.bindings
            .iter()
            .find(|(a, _)| *a == action)
            .map_or(&[], |(_, keys)| keys.as_slice())
    }

    /// Does this key press trigger `action`? Releases and repeats never do: some
    /// terminals report all three for one press.
    pub fn matches(&self, action: Action, event: &KeyEvent) -> bool {
        if event.kind != KeyEventKind::Press {
            return false;
        }
        let pressed = normalize(event.code, event.modifiers);
        self.keys(action).contains(&pressed)
    }

    /// Every action bound to this key press, in [`Action::ALL`] order.
    pub fn actions_for(&self, event: &KeyEvent) -> Vec<Action> {
        let pressed = normalize(event.code, event.modifiers);
        self.bindings
            .iter()
            .filter(|(_, keys)| keys.contains(&pressed))
            .map(|(a, _)| *a)
            .collect()
    }

    /// The action a key press means in the active scopes, most specific first. Only
    /// presses count.
    pub fn lookup(&self, scopes: &[Scope], event: &KeyEvent) -> Option<Action> {
        if event.kind != KeyEventKind::Press {
            return None;
        }
        let pressed = normalize(event.code, event.modifiers);
        scopes.iter().find_map(|scope| {
            self.bindings
                .iter()
                .find(|(a, keys)| a.applies_in(*scope) && keys.contains(&pressed))
                .map(|(a, _)| *a)
        })
    }

    /// The keys of an action as help text: "q, ctrl-c".
    pub fn describe(&self, action: Action) -> String {
        let keys: Vec<String> = self
            .keys(action)
            .iter()
            .map(|(c, m)| format_key(*c, *m))
            .collect();
        if keys.is_empty() {
            "(unbound)".to_string()
        } else {
            keys.join(", ")
        }
    }

    /// The first key of an action, for one-line hints ("a approve"); `None` if unbound.
    pub fn hint(&self, action: Action) -> Option<String> {
        self.keys(action).first().map(|(c, m)| format_key(*c, *m))
    }

    /// The first key two actions share where both can be asked for at once (on one tab, or
    /// both in the approve/deny prompt): the more specific one would silently shadow the
    /// other. A prompt key may repeat a tab key (`y` confirms there and copies elsewhere):
    /// the prompt is modal.
    pub fn first_conflict(&self) -> Option<KeyConflict> {
        for (i, (first, first_keys)) in self.bindings.iter().enumerate() {
            for (second, second_keys) in &self.bindings[i + 1..] {
                let Some(key) = first_keys.iter().find(|k| second_keys.contains(k)) else {
                    continue;
                };
                if let Some(place) = shared_place(*first, *second) {
                    return Some(KeyConflict {
                        key: format_key(key.0, key.1),
                        first: *first,
                        second: *second,
                        place,
                    });
                }
            }
        }
        None
    }

    /// (keys, description) for every action, for the help overlay.
    pub fn help_lines(&self) -> Vec<(String, &'static str)> {
        Action::ALL
            .into_iter()
            .map(|a| (self.describe(a), a.description()))
            .collect()
    }
}

/// Two actions bound to one key where both apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyConflict {
    pub key: String,
    pub first: Action,
    pub second: Action,
    /// Where both apply: "everywhere", "on the Approvals tab", "in the approve/deny prompt".
    pub place: &'static str,
}

/// Where two actions can both be asked for, if anywhere: the scopes active together are a
/// tab's own, the lists' and the global ones; the prompt's stand alone.
fn shared_place(a: Action, b: Action) -> Option<&'static str> {
    let together: [(&[Scope], &'static str); 5] = [
        (
            &[Scope::Global, Scope::List, Scope::Sessions],
            "on the Sessions tab",
        ),
        (
            &[Scope::Global, Scope::List, Scope::Approvals],
            "on the Approvals tab",
        ),
        (
            &[Scope::Global, Scope::List, Scope::Evals],
            "on the Evals tab",
        ),
        (
            &[Scope::Global, Scope::List, Scope::Events],
            "on the Events tab",
        ),
        (&[Scope::Prompt], "in the approve/deny prompt"),
    ];
    let active = |action: Action, scopes: &[Scope]| scopes.iter().any(|s| action.applies_in(*s));
    let both = |scopes: &[Scope]| active(a, scopes) && active(b, scopes);
    let lists = [Scope::Global, Scope::List];
    if both(&lists) {
        return Some("everywhere");
    }
    if let Some((_, place)) = together.into_iter().find(|(scopes, _)| both(scopes)) {
        return Some(place);
    }
    // An open pane's keys come first, with the tab's own still active under it (approve
    // in an open approval, rerun in an open case); the pane-focus keys are not, so a pane
    // may take `h`/`l` for scrolling sideways.
    let pane_only = |x: Action| x.scopes() == [Scope::Pane];
    let focus = |x: Action| matches!(x, Action::FocusLeft | Action::FocusRight);
    if (pane_only(a) && focus(b)) || (pane_only(b) && focus(a)) {
        return None;
    }
    let in_pane: [(&[Scope], &'static str); 4] = [
        (
            &[Scope::Pane, Scope::Sessions],
            "in an open pane on the Sessions tab",
        ),
        (
            &[Scope::Pane, Scope::Approvals],
            "in an open pane on the Approvals tab",
        ),
        (
            &[Scope::Pane, Scope::Evals],
            "in an open pane on the Evals tab",
        ),
        (
            &[Scope::Pane, Scope::Events],
            "in an open pane on the Events tab",
        ),
    ];
    let with_lists = |scopes: &[Scope]| {
        let mut all = scopes.to_vec();
        all.extend(lists);
        both(&all) && (active(a, &[Scope::Pane]) || active(b, &[Scope::Pane]))
    };
    in_pane
        .into_iter()
        .find(|(scopes, _)| with_lists(scopes))
        .map(|(_, place)| place)
}

/// Make a key press comparable with a binding. Terminals disagree on whether `Q` or `?`
/// arrives with SHIFT set, and Shift-Tab arrives as `BackTab` with or without it: for
/// characters the case already says it, so SHIFT is dropped.
pub fn normalize(code: KeyCode, modifiers: KeyModifiers) -> Key {
    match code {
        KeyCode::Char(_) | KeyCode::BackTab => (code, modifiers - KeyModifiers::SHIFT),
        _ => (code, modifiers),
    }
}

/// Parse a key string: an optional chain of modifiers (`ctrl-`, `alt-`, `shift-`,
/// `super-`; `+` works as a separator too) and a key: one character, or a name such as
/// `enter`, `esc`, `tab`, `space`, `up`, `pageup`, `f5`.
pub fn parse_key(text: &str) -> Result<Key, ConfigError> {
    let bad = |reason: String| ConfigError::BadKey {
        value: text.to_string(),
        reason,
    };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad("empty key".to_string()));
    }
    let mut modifiers = KeyModifiers::NONE;
    loop {
        let lower = rest.to_ascii_lowercase();
        let found = [
            ("ctrl", KeyModifiers::CONTROL),
            ("control", KeyModifiers::CONTROL),
            ("alt", KeyModifiers::ALT),
            ("meta", KeyModifiers::ALT),
            ("shift", KeyModifiers::SHIFT),
            ("super", KeyModifiers::SUPER),
        ]
        .into_iter()
        .find_map(|(name, m)| {
            let after = lower.strip_prefix(name)?;
            // The separator must be followed by a key: "ctrl--" is ctrl and '-'.
            let sep_then_key =
                after.len() >= 2 && (after.starts_with('-') || after.starts_with('+'));
            sep_then_key.then_some((name.len() + 1, m))
        });
        match found {
            Some((skip, m)) => {
                modifiers |= m;
                rest = &rest[skip..];
            }
            None => break,
        }
    }

    let mut chars = rest.chars();
    let code = match (chars.next(), chars.next()) {
        (Some(c), None) => KeyCode::Char(c),
        _ => match rest.to_ascii_lowercase().as_str() {
            "enter" | "return" => KeyCode::Enter,
            "esc" | "escape" => KeyCode::Esc,
            "tab" => KeyCode::Tab,
            "backtab" => KeyCode::BackTab,
            "space" => KeyCode::Char(' '),
            "backspace" => KeyCode::Backspace,
            "delete" | "del" => KeyCode::Delete,
            "insert" | "ins" => KeyCode::Insert,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "pageup" | "pgup" => KeyCode::PageUp,
            "pagedown" | "pgdn" => KeyCode::PageDown,
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            name => match name.strip_prefix('f').and_then(|n| n.parse::<u8>().ok()) {
                Some(n @ 1..=24) => KeyCode::F(n),
                _ => {
                    return Err(bad(format!(
                        "`{rest}` is not a key: use one character, or one of enter, esc, tab, \
                         space, backspace, delete, insert, home, end, pageup, pagedown, up, \
                         down, left, right, f1-f24, with optional ctrl-, alt-, shift-"
                    )));
                }
            },
        },
    };

    // Shift is carried by the character's case, and Shift-Tab is its own key code.
    let code = match code {
        KeyCode::Char(c) if modifiers.contains(KeyModifiers::SHIFT) => {
            KeyCode::Char(c.to_uppercase().next().unwrap_or(c))
        }
        KeyCode::Tab if modifiers.contains(KeyModifiers::SHIFT) => KeyCode::BackTab,
        other => other,
    };
    Ok(normalize(code, modifiers))
}

/// A key as the help text shows it; the inverse of [`parse_key`].
pub fn format_key(code: KeyCode, modifiers: KeyModifiers) -> String {
    let mut out = String::new();
    for (m, name) in [
        (KeyModifiers::CONTROL, "ctrl-"),
        (KeyModifiers::ALT, "alt-"),
        (KeyModifiers::SUPER, "super-"),
    ] {
        if modifiers.contains(m) {
            out.push_str(name);
        }
    }
    let shifted_named =
        modifiers.contains(KeyModifiers::SHIFT) && !matches!(code, KeyCode::Char(_));
    if shifted_named {
        out.push_str("shift-");
    }
    let key = match code {
        KeyCode::Char(' ') => "space".to_string(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Enter => "enter".to_string(),
        KeyCode::Esc => "esc".to_string(),
        KeyCode::Tab => "tab".to_string(),
        KeyCode::BackTab => "shift-tab".to_string(),
        KeyCode::Backspace => "backspace".to_string(),
        KeyCode::Delete => "delete".to_string(),
        KeyCode::Insert => "insert".to_string(),
        KeyCode::Home => "home".to_string(),
        KeyCode::End => "end".to_string(),
        KeyCode::PageUp => "pageup".to_string(),
        KeyCode::PageDown => "pagedown".to_string(),
        KeyCode::Up => "up".to_string(),
        KeyCode::Down => "down".to_string(),
        KeyCode::Left => "left".to_string(),
        KeyCode::Right => "right".to_string(),
        KeyCode::F(n) => format!("f{n}"),
        other => format!("{other:?}").to_lowercase(),
    };
    out.push_str(&key);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::{KeyEventKind, KeyEventState};

    fn press(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent {
            code,
            modifiers,
            kind: KeyEventKind::Press,
            state: KeyEventState::NONE,
        }
    }

    #[test]
    fn parses_the_documented_key_strings() {
        let none = KeyModifiers::NONE;
        let cases = [
            ("q", (KeyCode::Char('q'), none)),
            ("Q", (KeyCode::Char('Q'), none)),
            ("shift-q", (KeyCode::Char('Q'), none)),
            ("ctrl-c", (KeyCode::Char('c'), KeyModifiers::CONTROL)),
            ("Ctrl+C", (KeyCode::Char('C'), KeyModifiers::CONTROL)),
            (
                "alt-ctrl-x",
                (
                    KeyCode::Char('x'),
                    KeyModifiers::CONTROL | KeyModifiers::ALT,
                ),
            ),
            ("shift-tab", (KeyCode::BackTab, none)),
            ("backtab", (KeyCode::BackTab, none)),
            ("tab", (KeyCode::Tab, none)),
            ("enter", (KeyCode::Enter, none)),
            ("Esc", (KeyCode::Esc, none)),
            ("up", (KeyCode::Up, none)),
            ("shift-up", (KeyCode::Up, KeyModifiers::SHIFT)),
            ("f5", (KeyCode::F(5), none)),
            ("F12", (KeyCode::F(12), none)),
            ("space", (KeyCode::Char(' '), none)),
            ("/", (KeyCode::Char('/'), none)),
            ("?", (KeyCode::Char('?'), none)),
            ("-", (KeyCode::Char('-'), none)),
            ("ctrl--", (KeyCode::Char('-'), KeyModifiers::CONTROL)),
            ("f", (KeyCode::Char('f'), none)),
            ("pgdn", (KeyCode::PageDown, none)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_key(text).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn bad_key_strings_are_errors_naming_the_string() {
        for text in [
            "", "  ", "ctrl-", "hyper-q", "f0", "f25", "qq", "page up", "ctrl-foo",
        ] {
            let err = parse_key(text).unwrap_err();
            assert!(
                matches!(&err, ConfigError::BadKey { value, .. } if value == text),
                "{text:?}: {err}"
            );
        }
        let msg = parse_key("enterr").unwrap_err().to_string();
        assert!(msg.contains("enterr") && msg.contains("pageup"), "{msg}");
    }

    #[test]
    fn format_round_trips_through_parse() {
        for text in [
            "q",
            "Q",
            "ctrl-c",
            "alt-x",
            "shift-tab",
            "tab",
            "enter",
            "esc",
            "up",
            "shift-up",
            "f5",
            "space",
            "/",
            "?",
            "pageup",
            "pagedown",
            "home",
            "end",
            "ctrl-alt-delete",
        ] {
            let (code, mods) = parse_key(text).unwrap();
            let shown = format_key(code, mods);
            assert_eq!(
                parse_key(&shown).unwrap(),
                (code, mods),
                "{text} -> {shown}"
            );
        }
        assert_eq!(
            format_key(KeyCode::Char('c'), KeyModifiers::CONTROL),
            "ctrl-c"
        );
        assert_eq!(
            format_key(KeyCode::BackTab, KeyModifiers::NONE),
            "shift-tab"
        );
    }

    #[test]
    fn terminal_shift_reports_do_not_matter() {
        let map = KeyMap::default();
        // Some terminals send '?' and 'G' with SHIFT set, some without.
        for mods in [KeyModifiers::NONE, KeyModifiers::SHIFT] {
            assert!(map.matches(Action::Help, &press(KeyCode::Char('?'), mods)));
            assert!(map.matches(Action::Bottom, &press(KeyCode::Char('G'), mods)));
            assert!(map.matches(Action::PrevTab, &press(KeyCode::BackTab, mods)));
        }
        assert!(!map.matches(Action::Top, &press(KeyCode::Char('G'), KeyModifiers::NONE)));
        assert!(map.matches(
            Action::Quit,
            &press(KeyCode::Char('c'), KeyModifiers::CONTROL)
        ));
        assert!(!map.matches(Action::Quit, &press(KeyCode::Char('c'), KeyModifiers::NONE)));
    }

    #[test]
    fn defaults_cover_every_action_and_help_lists_them() {
        let map = KeyMap::default();
        for action in Action::ALL {
            assert!(!map.keys(action).is_empty(), "{} has no key", action.name());
            assert_eq!(
                map.keys(action).len(),
                action.default_keys().len(),
                "a default key of {} does not parse",
                action.name()
            );
            assert_eq!(Action::from_name(action.name()), Some(action));
        }
        let help = map.help_lines();
        assert_eq!(help.len(), Action::ALL.len());
        assert!(help.contains(&("q, ctrl-c".to_string(), "quit")));
        // `y` is both confirm (in the prompt) and copy (elsewhere).
        let y = map.actions_for(&press(KeyCode::Char('y'), KeyModifiers::NONE));
        assert_eq!(y, vec![Action::Copy, Action::Confirm]);
    }

    #[test]
    fn a_key_means_the_action_of_the_most_specific_active_scope() {
        let map = KeyMap::default();
        let y = press(KeyCode::Char('y'), KeyModifiers::NONE);
        let list = [Scope::Approvals, Scope::List, Scope::Global];
        assert_eq!(map.lookup(&list, &y), Some(Action::Copy));
        assert_eq!(map.lookup(&[Scope::Prompt], &y), Some(Action::Confirm));
        let a = press(KeyCode::Char('a'), KeyModifiers::NONE);
        assert_eq!(map.lookup(&list, &a), Some(Action::Approve));
        let events = [Scope::Events, Scope::List, Scope::Global];
        assert_eq!(map.lookup(&events, &a), None, "approve only on Approvals");
        let mut release = press(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert_eq!(map.lookup(&list, &release), None);
        assert!(!map.matches(Action::Quit, &release));
    }

    #[test]
    fn no_default_key_means_two_things_in_one_place() {
        // Scopes that can be active at once: a tab's own, the lists', the global one.
        let together = |a: Scope, b: Scope| {
            let shared = [Scope::Global, Scope::List];
            a == b
                || (a != Scope::Prompt
                    && b != Scope::Prompt
                    && (shared.contains(&a) || shared.contains(&b)))
        };
        let map = KeyMap::default();
        for (i, a) in Action::ALL.iter().enumerate() {
            for b in &Action::ALL[i + 1..] {
                let meet = a
                    .scopes()
                    .iter()
                    .any(|sa| b.scopes().iter().any(|sb| together(*sa, *sb)));
                if !meet {
                    continue;
                }
                for key in map.keys(*a) {
                    assert!(
                        !map.keys(*b).contains(key),
                        "{} and {} share {:?}",
                        a.name(),
                        b.name(),
                        key
                    );
                }
            }
        }
    }

    #[test]
    fn eval_keys_live_only_on_the_evals_tab() {
        let mut map = KeyMap::default();
        let none = KeyModifiers::NONE;
        let evals = [Scope::Evals, Scope::List, Scope::Global];
        let at =
            |map: &KeyMap, scopes: &[Scope], c| map.lookup(scopes, &press(KeyCode::Char(c), none));
        assert_eq!(at(&map, &evals, 'r'), Some(Action::RerunCase));
        assert_eq!(at(&map, &evals, 'R'), Some(Action::RerunSuite));
        assert_eq!(at(&map, &evals, 't'), Some(Action::JumpToSession));
        // Pane focus is shared by the two tabs with two panes.
        assert_eq!(at(&map, &evals, 'h'), Some(Action::FocusLeft));
        assert_eq!(at(&map, &evals, 'l'), Some(Action::FocusRight));
        let sessions = [Scope::Sessions, Scope::List, Scope::Global];
        assert_eq!(at(&map, &sessions, 'r'), None);
        assert_eq!(at(&map, &sessions, 't'), None);
        assert_eq!(at(&map, &sessions, 'h'), Some(Action::FocusLeft));
        let events = [Scope::Events, Scope::List, Scope::Global];
        assert_eq!(at(&map, &events, 'h'), None);
        map.bind(Action::RerunCase, vec![parse_key("x").unwrap()]);
        assert_eq!(at(&map, &evals, 'x'), Some(Action::RerunCase));
        assert_eq!(at(&map, &evals, 'r'), None);
    }

    #[test]
    fn the_default_keys_do_not_conflict() {
        assert_eq!(KeyMap::default().first_conflict(), None);
    }

    #[test]
    fn a_key_two_actions_share_where_both_apply_is_a_conflict() {
        let mut map = KeyMap::default();
        map.bind(Action::Approve, vec![parse_key("y").unwrap()]);
        let conflict = map.first_conflict().unwrap();
        assert_eq!(
            (conflict.key.as_str(), conflict.first, conflict.second),
            ("y", Action::Copy, Action::Approve)
        );
        assert_eq!(conflict.place, "on the Approvals tab");

        let mut map = KeyMap::default();
        map.bind(Action::Help, vec![parse_key("j").unwrap()]);
        assert_eq!(map.first_conflict().unwrap().place, "everywhere");

        let mut map = KeyMap::default();
        map.bind(Action::Note, vec![parse_key("y").unwrap()]);
        assert_eq!(
            map.first_conflict().unwrap().place,
            "in the approve/deny prompt"
        );
    }

    #[test]
    fn an_open_pane_takes_h_and_l_for_sideways_but_no_other_key_of_its_tab() {
        let map = KeyMap::default();
        let h = press(KeyCode::Char('h'), KeyModifiers::NONE);
        let pane = [Scope::Pane, Scope::Sessions, Scope::List, Scope::Global];
        assert_eq!(map.lookup(&pane, &h), Some(Action::ScrollLeft));
        assert_eq!(map.lookup(&pane[1..], &h), Some(Action::FocusLeft));
        let right = press(KeyCode::Right, KeyModifiers::NONE);
        assert_eq!(map.lookup(&pane, &right), Some(Action::ScrollRight));
        // A pane key on a key its tab uses in the pane too is refused, naming both.
        let mut map = KeyMap::default();
        map.bind(Action::ScrollLeft, vec![parse_key("a").unwrap()]);
        let conflict = map.first_conflict().unwrap();
        assert_eq!(
            (conflict.first, conflict.second, conflict.place),
            (
                Action::Approve,
                Action::ScrollLeft,
                "in an open pane on the Approvals tab"
            )
        );
        let mut map = KeyMap::default();
        map.bind(Action::NextMatch, vec![parse_key("j").unwrap()]);
        assert_eq!(
            map.first_conflict().unwrap().place,
            "in an open pane on the Sessions tab"
        );
    }

    #[test]
    fn one_key_on_different_tabs_or_in_the_prompt_is_not_a_conflict() {
        let mut map = KeyMap::default();
        // `f` follows on Events; rerunning a case on Evals with it is fine.
        map.bind(Action::RerunCase, vec![parse_key("f").unwrap()]);
        // The prompt is modal: `a` there does not shadow approve.
        map.bind(Action::Note, vec![parse_key("a").unwrap()]);
        assert_eq!(map.first_conflict(), None);
    }

    #[test]
    fn rebinding_replaces_that_actions_keys_only() {
        let mut map = KeyMap::default();
        map.bind(Action::Quit, vec![parse_key("ctrl-q").unwrap()]);
        assert!(!map.matches(Action::Quit, &press(KeyCode::Char('q'), KeyModifiers::NONE)));
        assert!(map.matches(
            Action::Quit,
            &press(KeyCode::Char('q'), KeyModifiers::CONTROL)
        ));
        assert_eq!(map.describe(Action::Quit), "ctrl-q");
        assert_eq!(map.describe(Action::Help), "?");
    }
}
