//! The one source of keys: a list of (context, key, action). Dispatch looks keys up here
//! and the help overlay is rendered from the same list, so the two never disagree.

use super::action::Action;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Where a binding applies. Lookups try the most specific context first, then `Global`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Global,
    /// Lists and timelines: navigation.
    Sessions,
    /// The call detail pane.
    Detail,
    /// Typing a filter: these keys end it, any other character is text.
    FilterInput,
    /// The Evals tab's suite and case lists.
    Evals,
    /// An eval case's assertions.
    EvalCase,
}

impl Context {
    /// The contexts a tab's keys live in, for the help overlay (besides `Global`).
    pub fn of_tab(tab: super::action::Tab) -> &'static [Context] {
        use super::action::Tab;
        match tab {
            Tab::Sessions => &[Context::Sessions, Context::Detail, Context::FilterInput],
            Tab::Evals => &[Context::Evals, Context::EvalCase],
            Tab::Approvals | Tab::Events => &[],
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Self::Global => "Everywhere",
            Self::Sessions => "Sessions",
            Self::Detail => "Call detail",
            Self::FilterInput => "Typing a filter",
            Self::Evals => "Evals",
            Self::EvalCase => "Eval case",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    pub context: Context,
    pub code: KeyCode,
    pub mods: KeyModifiers,
    pub action: Action,
}

#[derive(Debug, Clone)]
pub struct Keymap {
    bindings: Vec<Binding>,
}

fn key(context: Context, code: KeyCode, action: Action) -> Binding {
    Binding {
        context,
        code,
        mods: KeyModifiers::NONE,
        action,
    }
}

impl Default for Keymap {
    fn default() -> Self {
        use Context::*;
        use KeyCode::*;
        let mut bindings = vec![
            key(Global, Char('q'), Action::Quit),
            Binding {
                context: Global,
                code: Char('c'),
                mods: KeyModifiers::CONTROL,
                action: Action::Quit,
            },
            key(Global, Char('?'), Action::Help),
            key(Global, KeyCode::Tab, Action::NextTab),
            key(Global, BackTab, Action::PrevTab),
        ];
        for (n, tab) in ('1'..='4').zip(super::action::Tab::ALL) {
            bindings.push(key(Global, Char(n), Action::GoTab(tab)));
        }
        for ctx in [Sessions, Detail] {
            bindings.extend([
                key(ctx, Up, Action::Up),
                key(ctx, Char('k'), Action::Up),
                key(ctx, Down, Action::Down),
                key(ctx, Char('j'), Action::Down),
                key(ctx, KeyCode::PageUp, Action::PageUp),
                key(ctx, KeyCode::PageDown, Action::PageDown),
                key(ctx, Home, Action::Top),
                key(ctx, Char('g'), Action::Top),
                key(ctx, End, Action::Bottom),
                key(ctx, Char('G'), Action::Bottom),
            ]);
        }
        bindings.extend([
            key(Sessions, Left, Action::FocusLeft),
            key(Sessions, Char('h'), Action::FocusLeft),
            key(Sessions, Right, Action::FocusRight),
            key(Sessions, Char('l'), Action::FocusRight),
            key(Sessions, Enter, Action::Open),
            key(Sessions, Esc, Action::Back),
            key(Sessions, Char('/'), Action::Filter),
            key(Sessions, Char('s'), Action::ToggleSort),
            key(Detail, Esc, Action::Back),
            key(Detail, Enter, Action::Back),
            key(FilterInput, Enter, Action::Open),
            key(FilterInput, Esc, Action::Back),
        ]);
        for ctx in [Evals, EvalCase] {
            bindings.extend(nav_keys(ctx));
            bindings.extend([
                key(ctx, Char('r'), Action::RerunCase),
                key(ctx, Char('R'), Action::RerunSuite),
                key(ctx, Char('t'), Action::JumpToSession),
            ]);
        }
        bindings.extend([
            key(Evals, Left, Action::FocusLeft),
            key(Evals, Char('h'), Action::FocusLeft),
            key(Evals, Right, Action::FocusRight),
            key(Evals, Char('l'), Action::FocusRight),
            key(Evals, Enter, Action::Open),
            key(Evals, Esc, Action::Back),
            key(EvalCase, Esc, Action::Back),
            key(EvalCase, Enter, Action::Back),
        ]);
        Self { bindings }
    }
}

/// Moving through a list or scrolling a pane, the same keys in every context.
fn nav_keys(ctx: Context) -> [Binding; 10] {
    use KeyCode::*;
    [
        key(ctx, Up, Action::Up),
        key(ctx, Char('k'), Action::Up),
        key(ctx, Down, Action::Down),
        key(ctx, Char('j'), Action::Down),
        key(ctx, PageUp, Action::PageUp),
        key(ctx, PageDown, Action::PageDown),
        key(ctx, Home, Action::Top),
        key(ctx, Char('g'), Action::Top),
        key(ctx, End, Action::Bottom),
        key(ctx, Char('G'), Action::Bottom),
    ]
}

impl Keymap {
    pub fn bindings(&self) -> &[Binding] {
        &self.bindings
    }

    /// The action for a key press in the given contexts (most specific first). Releases
    /// and repeats of a press are not actions: some terminals report all three.
    pub fn lookup(&self, contexts: &[Context], event: KeyEvent) -> Option<Action> {
        if event.kind != KeyEventKind::Press {
            return None;
        }
        // Shift is part of the character itself ('?', 'G'); matching it too would make
        // such keys depend on how the terminal reports them.
        let mods = match event.code {
            KeyCode::Char(_) | KeyCode::BackTab => event.modifiers - KeyModifiers::SHIFT,
            _ => event.modifiers,
        };
        contexts.iter().find_map(|ctx| {
            self.bindings
                .iter()
                .find(|b| b.context == *ctx && b.code == event.code && b.mods == mods)
                .map(|b| b.action)
        })
    }

    /// Rebinds an action by name to a key label (`"ctrl-c"`, `"q"`, `"enter"`), replacing
    /// that action's bindings in every context where it had one.
    pub fn rebind(&mut self, action_name: &str, label: &str) -> Result<(), String> {
        let (code, mods) = parse_label(label).ok_or_else(|| format!("unknown key `{label}`"))?;
        let mut found = false;
        let mut contexts = vec![];
        self.bindings.retain(|b| {
            if b.action.name() == action_name {
                found = true;
                if !contexts.contains(&(b.context, b.action)) {
                    contexts.push((b.context, b.action));
                }
                false
            } else {
                true
            }
        });
        if !found {
            return Err(format!("unknown action `{action_name}`"));
        }
        for (context, action) in contexts {
            self.bindings.push(Binding {
                context,
                code,
                mods,
                action,
            });
        }
        Ok(())
    }
}

/// A key as the help overlay writes it.
pub fn label(binding: &Binding) -> String {
    let base = match binding.code {
        KeyCode::Char(' ') => "space".to_owned(),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Enter => "Enter".into(),
        KeyCode::Esc => "Esc".into(),
        KeyCode::Tab => "Tab".into(),
        KeyCode::BackTab => "Shift-Tab".into(),
        KeyCode::Up => "↑".into(),
        KeyCode::Down => "↓".into(),
        KeyCode::Left => "←".into(),
        KeyCode::Right => "→".into(),
        KeyCode::PageUp => "PgUp".into(),
        KeyCode::PageDown => "PgDn".into(),
        KeyCode::Home => "Home".into(),
        KeyCode::End => "End".into(),
        other => format!("{other:?}"),
    };
    if binding.mods.contains(KeyModifiers::CONTROL) {
        format!("Ctrl-{base}")
    } else {
        base
    }
}

fn parse_label(label: &str) -> Option<(KeyCode, KeyModifiers)> {
    let lower = label.to_ascii_lowercase();
    let (mods, rest) = match lower.strip_prefix("ctrl-") {
        Some(rest) => (KeyModifiers::CONTROL, rest),
        None => (KeyModifiers::NONE, lower.as_str()),
    };
    let code = match rest {
        "enter" => KeyCode::Enter,
        "esc" => KeyCode::Esc,
        "tab" => KeyCode::Tab,
        "shift-tab" | "backtab" => KeyCode::BackTab,
        "up" => KeyCode::Up,
        "down" => KeyCode::Down,
        "left" => KeyCode::Left,
        "right" => KeyCode::Right,
        "pgup" | "pageup" => KeyCode::PageUp,
        "pgdn" | "pagedown" => KeyCode::PageDown,
        "home" => KeyCode::Home,
        "end" => KeyCode::End,
        "space" => KeyCode::Char(' '),
        // Keep the user's case for single characters: `G` and `g` differ.
        _ if label.chars().count() == 1 || rest.chars().count() == 1 => {
            KeyCode::Char(label.chars().last()?)
        }
        _ => return None,
    };
    Some((code, mods))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn dispatches_presses_only_most_specific_context_first() {
        let km = Keymap::default();
        let ctx = [Context::Detail, Context::Global];
        assert_eq!(
            km.lookup(&ctx, press(KeyCode::Esc, KeyModifiers::NONE)),
            Some(Action::Back)
        );
        assert_eq!(
            km.lookup(&ctx, press(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(
            km.lookup(&ctx, press(KeyCode::Char('?'), KeyModifiers::SHIFT)),
            Some(Action::Help)
        );
        let mut release = press(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert_eq!(km.lookup(&ctx, release), None);
        assert_eq!(
            km.lookup(&ctx, press(KeyCode::Char('x'), KeyModifiers::NONE)),
            None
        );
    }

    #[test]
    fn eval_keys_live_only_on_the_evals_tab() {
        let km = Keymap::default();
        let none = KeyModifiers::NONE;
        for ctx in [Context::Evals, Context::EvalCase] {
            let at = |code| km.lookup(&[ctx, Context::Global], press(code, none));
            assert_eq!(at(KeyCode::Char('r')), Some(Action::RerunCase));
            assert_eq!(at(KeyCode::Char('R')), Some(Action::RerunSuite));
            assert_eq!(at(KeyCode::Char('t')), Some(Action::JumpToSession));
        }
        let sessions = [Context::Sessions, Context::Global];
        assert_eq!(km.lookup(&sessions, press(KeyCode::Char('r'), none)), None);
        assert_eq!(km.lookup(&sessions, press(KeyCode::Char('t'), none)), None);
        let mut km = km;
        km.rebind("rerun_case", "x").unwrap();
        assert_eq!(
            km.lookup(&[Context::Evals], press(KeyCode::Char('x'), none)),
            Some(Action::RerunCase)
        );
    }

    #[test]
    fn rebinding_by_action_name_moves_the_key() {
        let mut km = Keymap::default();
        km.rebind("quit", "x").unwrap();
        let ctx = [Context::Global];
        assert_eq!(
            km.lookup(&ctx, press(KeyCode::Char('x'), KeyModifiers::NONE)),
            Some(Action::Quit)
        );
        assert_eq!(
            km.lookup(&ctx, press(KeyCode::Char('q'), KeyModifiers::NONE)),
            None
        );
        assert!(km.rebind("fly", "f").is_err());
        assert!(km.rebind("quit", "hyper-q").is_err());
    }
}
