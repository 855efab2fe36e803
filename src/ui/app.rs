//! App state: the model, the connection as the client last reported it, which tab and row
//! is selected, and what is open. Key presses become `Action`s through the keymap; client
//! messages are folded into the model. Either marks the app dirty; nothing here draws.

use super::action::{Action, Tab};
use super::clock::Clock;
use super::keymap::{Context, Keymap};
use super::requests::Requests;
use super::theme::Theme;
use super::views::evals::EvalsState;
use super::views::sessions::SessionsState;
use crate::client::ClientMsg;
use crate::model::{Limits, Model};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The stream's state as the status bar shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conn {
    Connecting {
        attempt: u32,
    },
    Connected,
    Reconnecting {
        attempt: u32,
        retry_at: Instant,
    },
    /// No stream at all (replay, or the client task has ended).
    Offline,
}

/// Frames per second over the last whole second, without storing every arrival.
#[derive(Debug, Clone)]
struct Rate {
    window_start: Instant,
    count: u32,
    last: f64,
}

impl Rate {
    fn new(now: Instant) -> Self {
        Self {
            window_start: now,
            count: 0,
            last: 0.0,
        }
    }

    fn roll(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= Duration::from_secs(1) {
            self.last = f64::from(self.count) / elapsed.as_secs_f64();
            self.window_start = now;
            self.count = 0;
        }
    }

    fn hit(&mut self, now: Instant) {
        self.roll(now);
        self.count += 1;
    }
}

pub struct App {
    pub model: Model,
    pub tab: Tab,
    pub conn: Conn,
    pub url: String,
    pub theme: Theme,
    pub keymap: Keymap,
    pub clock: Arc<dyn Clock>,
    pub sessions: SessionsState,
    pub evals: EvalsState,
    /// REST requests to the runtime (eval reruns); `None` without a runtime to ask.
    pub requests: Option<Requests>,
    pub show_help: bool,
    /// A one-line message for the status bar (a REST error, say); cleared by the next key.
    pub notice: Option<String>,
    pub quit: bool,
    dirty: bool,
    rate: Rate,
}

impl App {
    pub fn new(url: &str, limits: Limits, clock: Arc<dyn Clock>) -> Self {
        let now = clock.now();
        Self {
            model: Model::new(limits),
            tab: Tab::Sessions,
            conn: Conn::Connecting { attempt: 0 },
            url: url.to_owned(),
            theme: Theme::default(),
            keymap: Keymap::default(),
            clock,
            sessions: SessionsState::default(),
            evals: EvalsState::default(),
            requests: None,
            show_help: false,
            notice: None,
            quit: false,
            dirty: true,
            rate: Rate::new(now),
        }
    }

    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    pub fn mark_drawn(&mut self) {
        self.dirty = false;
    }

    pub fn events_per_sec(&self) -> f64 {
        self.rate.last
    }

    /// Folds one message from the network side.
    pub fn on_client(&mut self, msg: ClientMsg) {
        let now = self.clock.now();
        match msg {
            ClientMsg::Connecting { attempt } => {
                // Keep showing the countdown's end state rather than flicker to
                // "connecting" for the instant a redial takes.
                if !matches!(self.conn, Conn::Reconnecting { .. }) {
                    self.conn = Conn::Connecting { attempt };
                }
            }
            ClientMsg::Connected => self.conn = Conn::Connected,
            ClientMsg::Frame(frame) => {
                self.model.apply(&frame);
                self.rate.hit(now);
            }
            ClientMsg::ParseError(err) => {
                tracing::warn!(%err, "frame not decoded");
                self.model.note_parse_error();
            }
            ClientMsg::Disconnected {
                attempt, retry_in, ..
            } => {
                self.conn = Conn::Reconnecting {
                    attempt,
                    retry_at: now + retry_in,
                }
            }
            ClientMsg::Hydrated {
                sessions,
                approvals,
            } => self.model.hydrate(sessions, approvals),
            ClientMsg::RestError(err) => self.notice = Some(err),
        }
        self.sessions.after_model_change(&self.model);
        self.evals.after_model_change(&self.model);
        self.dirty = true;
    }

    /// The client task is gone: no more frames will come.
    pub fn on_client_closed(&mut self) {
        self.conn = Conn::Offline;
        self.dirty = true;
    }

    /// Once a second: things that change with time alone (countdowns, ages, the rate).
    pub fn on_tick(&mut self) {
        let before = self.rate.last;
        self.rate.roll(self.clock.now());
        let time_shown = matches!(self.conn, Conn::Reconnecting { .. })
            || self.model.sessions_len() > 0
            || before != self.rate.last;
        if time_shown {
            self.dirty = true;
        }
    }

    /// Contexts for key lookup, most specific first.
    fn contexts(&self) -> Vec<Context> {
        let mut contexts = Vec::with_capacity(3);
        if self.tab == Tab::Sessions {
            if self.sessions.editing_filter {
                contexts.push(Context::FilterInput);
            } else if self.sessions.detail.is_some() {
                contexts.push(Context::Detail);
            } else {
                contexts.push(Context::Sessions);
            }
        }
        if self.tab == Tab::Evals {
            contexts.push(self.evals.context());
        }
        contexts.push(Context::Global);
        contexts
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        if key.kind != KeyEventKind::Press {
            return;
        }
        self.dirty = true;
        self.notice = None;
        if self.show_help {
            // Any key closes help; the quit keys still quit.
            if let Some(Action::Quit) = self.keymap.lookup(&[Context::Global], key) {
                self.quit = true;
            }
            self.show_help = false;
            return;
        }
        let contexts = self.contexts();
        if contexts[0] == Context::FilterInput {
            let ctrl_c =
                key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
            match self.keymap.lookup(&[Context::FilterInput], key) {
                Some(action) => self.dispatch(action),
                None if ctrl_c => self.quit = true,
                None => self.sessions.filter_key(key, &self.model),
            }
            return;
        }
        if let Some(action) = self.keymap.lookup(&contexts, key) {
            self.dispatch(action);
        }
    }

    pub fn dispatch(&mut self, action: Action) {
        self.dirty = true;
        match action {
            Action::Quit => self.quit = true,
            Action::Help => self.show_help = !self.show_help,
            Action::NextTab => self.tab = self.tab.next(),
            Action::PrevTab => self.tab = self.tab.prev(),
            Action::GoTab(tab) => self.tab = tab,
            other => match self.tab {
                Tab::Sessions => self.sessions.dispatch(other, &self.model),
                Tab::Evals => super::views::evals::dispatch(self, other),
                _ => {}
            },
        }
    }
}
