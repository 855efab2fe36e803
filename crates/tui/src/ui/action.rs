//! The tabs, and the one enum of things a user can ask for. `Action` and its keymap live in
//! `config::keys` (the config file rebinds actions by name); they are re-exported here so
//! the UI speaks of `ui::Action`.

pub use crate::config::keys::{Action, KeyMap, Scope};

/// The four tabs, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tab {
    Sessions,
    Approvals,
    Evals,
    Events,
}

impl Tab {
    pub const ALL: [Tab; 4] = [Tab::Sessions, Tab::Approvals, Tab::Evals, Tab::Events];

    pub fn title(self) -> &'static str {
        match self {
            Self::Sessions => "Sessions",
            Self::Approvals => "Approvals",
            Self::Evals => "Evals",
            Self::Events => "Events",
        }
    }

    pub fn index(self) -> usize {
        match self {
            Self::Sessions => 0,
            Self::Approvals => 1,
            Self::Evals => 2,
            Self::Events => 3,
        }
    }

    #[must_use]
    pub fn next(self) -> Self {
        Self::ALL[(self.index() + 1) % 4]
    }

    #[must_use]
    pub fn prev(self) -> Self {
        Self::ALL[(self.index() + 3) % 4]
    }

    /// The keys that apply on this tab besides the list and global ones.
    pub fn scope(self) -> Scope {
        match self {
            Self::Sessions => Scope::Sessions,
            Self::Approvals => Scope::Approvals,
            Self::Evals => Scope::Evals,
            Self::Events => Scope::Events,
        }
    }

    /// The scopes the help overlay lists on this tab: the global keys and this tab's
    /// own (all tabs at once do not fit a screen). The prompt's keys show with Approvals.
    pub fn help_scopes(self) -> &'static [Scope] {
        match self {
            Self::Sessions => &[Scope::Global, Scope::List, Scope::Sessions, Scope::Pane],
            Self::Approvals => &[
                Scope::Global,
                Scope::List,
                Scope::Approvals,
                Scope::Pane,
                Scope::Prompt,
            ],
            Self::Evals => &[Scope::Global, Scope::List, Scope::Evals, Scope::Pane],
            Self::Events => &[Scope::Global, Scope::List, Scope::Events, Scope::Pane],
        }
    }

    /// Whether the tab has a text field (a filter or a note) the user can type into:
    /// every tab has a filter.
    pub fn has_text_input(self) -> bool {
        true
    }

    /// The tab a "go to tab" action goes to.
    pub fn of_action(action: Action) -> Option<Tab> {
        match action {
            Action::TabSessions => Some(Self::Sessions),
            Action::TabApprovals => Some(Self::Approvals),
            Action::TabEvals => Some(Self::Evals),
            Action::TabEvents => Some(Self::Events),
            _ => None,
        }
    }
}
