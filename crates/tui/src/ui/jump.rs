//! Jump by id: `:` opens a one-line prompt in the status bar; a session id, an approval id
//! or an eval case name (a prefix is enough) shows that thing on its tab.

use super::action::{Action, Tab};
use super::app::App;
use super::views::{TextKey, edit_filter, key_cap, text_key};
use crossterm::event::KeyEvent;

/// What a jump found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Session(String),
    Approval(String),
    Case { suite: String, case: String },
}

impl App {
    /// Opens the prompt (the `jump` key).
    pub fn start_jump(&mut self) {
        self.jump = Some(String::new());
        self.show_jump();
    }

    fn show_jump(&mut self) {
        if let Some(text) = &self.jump {
            self.notice = Some(format!(
                "jump to: {text}▏  (session, approval id or case name; {} goes, {} cancels)",
                key_cap(&self.keymap, Action::Open),
                key_cap(&self.keymap, Action::Back)
            ));
        }
    }

    /// A key while the prompt is open; true when the prompt took it.
    pub fn jump_key(&mut self, key: KeyEvent) -> bool {
        let Some(text) = &mut self.jump else {
            return false;
        };
        match text_key(&self.keymap, key) {
            TextKey::Keep => {
                let wanted = std::mem::take(text);
                self.jump = None;
                self.jump_to(wanted.trim());
                return true;
            }
            TextKey::Discard => {
                self.jump = None;
                self.notice = None;
                return true;
            }
            TextKey::Quit => self.quit = true,
            TextKey::Edit(key) => {
                edit_filter(text, key);
            }
            TextKey::Ignore => {}
        }
        self.show_jump();
        true
    }

    /// Exact ids first, then prefixes: sessions (newest first), approvals, cases.
    fn find(&self, wanted: &str) -> (Option<Target>, usize) {
        let sessions = (0..self.model.sessions_len()).filter_map(|r| self.model.session_newest(r));
        let approvals = || self.model.approvals.iter();
        let cases = || {
            self.model.evals.suites().flat_map(|s| {
                s.cases
                    .iter()
                    .map(move |c| (s.suite.as_str(), c.case.as_str()))
            })
        };
        if self.model.session(wanted).is_some() {
            return (Some(Target::Session(wanted.to_owned())), 1);
        }
        if self.model.approvals.get(wanted).is_some() {
            return (Some(Target::Approval(wanted.to_owned())), 1);
        }
        let mut found: Vec<Target> = sessions
            .filter(|s| s.id.starts_with(wanted))
            .map(|s| Target::Session(s.id.clone()))
            .collect();
        found.extend(
            approvals()
                .filter(|a| a.id.starts_with(wanted))
                .map(|a| Target::Approval(a.id.clone())),
        );
        let lower = wanted.to_lowercase();
        found.extend(
            cases()
                .filter(|(_, c)| c.to_lowercase().starts_with(&lower))
                .map(|(suite, case)| Target::Case {
                    suite: suite.to_owned(),
                    case: case.to_owned(),
                }),
        );
        let count = found.len();
        (found.into_iter().next(), count)
    }

    /// Shows what `wanted` names on its tab, or says in the status bar that nothing is.
    pub fn jump_to(&mut self, wanted: &str) {
        if wanted.is_empty() {
            self.notice = None;
            return;
        }
        let (target, count) = self.find(wanted);
        let Some(target) = target else {
            self.notice = Some(format!(
                "nothing to jump to: no session, approval or eval case starts with “{wanted}”"
            ));
            return;
        };
        let name = match &target {
            Target::Session(id) => {
                self.sessions.select_session(id, &self.model);
                self.tab = Tab::Sessions;
                format!("session {id}")
            }
            Target::Approval(id) => {
                self.approvals.select(id, &self.model);
                self.tab = Tab::Approvals;
                format!("approval {id}")
            }
            Target::Case { suite, case } => {
                self.evals.select_case(suite, case, &self.model);
                self.tab = Tab::Evals;
                format!("case {suite} / {case}")
            }
        };
        self.notice = (count > 1).then(|| {
            format!("{count} matches for “{wanted}”: showing {name} (type more to narrow)")
        });
    }
}
