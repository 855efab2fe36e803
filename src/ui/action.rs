//! The one enum of things a user can ask for. Keys map to these (see `keymap`), the help
//! overlay describes them, and a config can rebind them by `name()`.

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

    pub fn next(self) -> Self {
        Self::ALL[(self.index() + 1) % 4]
    }

    pub fn prev(self) -> Self {
        Self::ALL[(self.index() + 3) % 4]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Quit,
    Help,
    NextTab,
    PrevTab,
    GoTab(Tab),
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    /// Move focus to the pane on the left (the session list).
    FocusLeft,
    /// Move focus to the pane on the right (the timeline).
    FocusRight,
    /// Enter: open what is selected.
    Open,
    /// Esc: close the innermost thing open, or leave filter input.
    Back,
    Filter,
    ToggleSort,
    /// Evals: run the selected case again.
    RerunCase,
    /// Evals: run the selected suite again.
    RerunSuite,
    /// Evals: show the selected case's session in the Sessions tab.
    JumpToSession,
}

impl Action {
    /// Stable name for config files (`[keys] quit = "q"`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Quit => "quit",
            Self::Help => "help",
            Self::NextTab => "next_tab",
            Self::PrevTab => "prev_tab",
            Self::GoTab(Tab::Sessions) => "tab_sessions",
            Self::GoTab(Tab::Approvals) => "tab_approvals",
            Self::GoTab(Tab::Evals) => "tab_evals",
            Self::GoTab(Tab::Events) => "tab_events",
            Self::Up => "up",
            Self::Down => "down",
            Self::PageUp => "page_up",
            Self::PageDown => "page_down",
            Self::Top => "top",
            Self::Bottom => "bottom",
            Self::FocusLeft => "focus_left",
            Self::FocusRight => "focus_right",
            Self::Open => "open",
            Self::Back => "back",
            Self::Filter => "filter",
            Self::ToggleSort => "toggle_sort",
            Self::RerunCase => "rerun_case",
            Self::RerunSuite => "rerun_suite",
            Self::JumpToSession => "jump_to_session",
        }
    }

    /// What the key does where it is bound (help lines are per context).
    pub fn describe_in(self, context: crate::ui::keymap::Context) -> &'static str {
        use crate::ui::keymap::Context;
        match (context, self) {
            (Context::FilterInput, Self::Open) => "keep the filter, back to the list",
            (Context::FilterInput, Self::Back) => "clear the filter",
            (Context::Detail, Self::Up) => "scroll up",
            (Context::Detail, Self::Down) => "scroll down",
            (Context::Detail, Self::Top) => "scroll to the top",
            (Context::Detail, Self::Bottom) => "scroll to the end",
            (Context::Detail, Self::Back) => "close the call",
            (Context::Evals, Self::FocusLeft) => "focus the suites",
            (Context::Evals, Self::FocusRight) => "focus the cases",
            (Context::Evals, Self::Open) => "open: suite -> its cases, case -> its assertions",
            (Context::Evals, Self::Back) => "back to the suites",
            (Context::EvalCase, Self::Up) => "scroll up",
            (Context::EvalCase, Self::Down) => "scroll down",
            (Context::EvalCase, Self::Top) => "scroll to the top",
            (Context::EvalCase, Self::Bottom) => "scroll to the end",
            (Context::EvalCase, Self::Back) => "close the case",
            _ => self.describe(),
        }
    }

    /// What the help overlay says the key does.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Quit => "quit",
            Self::Help => "show or hide this help",
            Self::NextTab => "next tab",
            Self::PrevTab => "previous tab",
            Self::GoTab(Tab::Sessions) => "Sessions tab",
            Self::GoTab(Tab::Approvals) => "Approvals tab",
            Self::GoTab(Tab::Evals) => "Evals tab",
            Self::GoTab(Tab::Events) => "Events tab",
            Self::Up => "move up",
            Self::Down => "move down",
            Self::PageUp => "page up",
            Self::PageDown => "page down",
            Self::Top => "first row",
            Self::Bottom => "last row",
            Self::FocusLeft => "focus the session list",
            Self::FocusRight => "focus the timeline",
            Self::Open => "open: session -> timeline, call -> input/output",
            Self::Back => "close / back",
            Self::Filter => "filter sessions by id or user",
            Self::ToggleSort => "sort calls by start or by duration",
            Self::RerunCase => "rerun the selected case on the runtime",
            Self::RerunSuite => "rerun the selected suite on the runtime",
            Self::JumpToSession => "show the case's session timeline",
        }
    }
}
