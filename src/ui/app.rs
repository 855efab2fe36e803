//! App state: the model, the connection as the client last reported it, which tab and row
//! is selected, and what is open. Key presses and mouse events become `Action`s through
//! the one keymap; client messages are folded into the model. Either marks the app dirty;
//! nothing here draws, and nothing here does network IO (decisions and eval reruns go out
//! via the one `Outbox`).

use super::action::{Action, KeyMap, Scope, Tab};
use super::clock::Clock;
use super::theme::Theme;
use super::views::approvals::ApprovalsState;
use super::views::evals::EvalsState;
use super::views::events::EventsState;
use super::views::sessions::SessionsState;
use crate::client::{ClientMsg, Outbox};
use crate::clipboard::CopyOutcome;
use crate::model::{Limits, Model};
use crate::protocol::rest::DecisionRequest;
use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Position, Rect};
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

/// What the inspector is watching, as the status bar names it; a replay is offline, so
/// it also says why nothing can be approved or rerun.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Watching {
    /// A runtime someone else runs, at the URL.
    #[default]
    Runtime,
    /// An empty runtime this process started because no URL was given.
    Embedded,
    /// The demo's own runtime, driven by the demo workload.
    Demo,
    /// A recorded file, played offline.
    Replay { file: String },
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

/// Puts text on the user's clipboard; swapped for a fake in tests.
pub type Copier = Box<dyn FnMut(&str) -> CopyOutcome + Send>;

/// Where the tab titles were drawn, for mouse clicks.
#[derive(Debug, Clone, Default)]
pub struct TabHits(pub Vec<(Rect, Tab)>);

pub struct App {
    pub model: Model,
    pub tab: Tab,
    pub conn: Conn,
    pub url: String,
    pub watching: Watching,
    pub theme: Theme,
    pub keymap: KeyMap,
    pub clock: Arc<dyn Clock>,
    pub sessions: SessionsState,
    pub approvals: ApprovalsState,
    pub evals: EvalsState,
    pub events: EventsState,
    pub show_help: bool,
    /// A one-line message for the status bar (a REST error, say); cleared by the next key.
    pub notice: Option<String>,
    /// Who decisions are sent as (`by` in the request body).
    pub user: String,
    pub quit: bool,
    /// Where REST requests (decisions, eval reruns) go; `None` with no runtime to send to.
    pub outbox: Option<Outbox>,
    pub copier: Copier,
    pub tab_hits: TabHits,
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
            watching: Watching::default(),
            theme: Theme::default(),
            keymap: KeyMap::default(),
            clock,
            sessions: SessionsState::default(),
            approvals: ApprovalsState::default(),
            evals: EvalsState::default(),
            events: EventsState::default(),
            show_help: false,
            notice: None,
            user: "spyglass".to_owned(),
            quit: false,
            outbox: None,
            copier: Box::new(|_| CopyOutcome::Failed("no clipboard attached".into())),
            tab_hits: TabHits::default(),
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

    /// Why `doing` cannot reach a runtime, or `None` when it can.
    pub fn offline(&self, doing: &str) -> Option<String> {
        match (&self.watching, &self.outbox) {
            (Watching::Replay { file }, _) => Some(format!(
                "cannot {doing}: this is a replay of {file}, with no runtime behind it"
            )),
            (_, Some(_)) => None,
            (_, None) => Some(format!("cannot {doing}: no runtime to send it to")),
        }
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
            ClientMsg::Frames(frames) => {
                for frame in frames {
                    if let crate::protocol::Event::StreamReset(reset) = &frame.event {
                        self.notice = Some(restarted_notice(&frame.ts, &reset.epoch));
                    }
                    self.model.fold(frame);
                    self.rate.hit(now);
                }
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
        self.approvals.after_model_change(&self.model);
        self.evals.after_model_change(&self.model);
        self.events.after_model_change(&self.model);
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
            || self.model.approvals.pending_count() > 0
            || before != self.rate.last;
        if time_shown {
            self.dirty = true;
        }
    }

    /// Which text field keys are typed into, if any.
    fn typing(&self) -> bool {
        match self.tab {
            Tab::Sessions => self.sessions.editing_filter,
            Tab::Events => self.events.editing_filter,
            Tab::Approvals => self.approvals.editing_note(),
            Tab::Evals => false,
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        if key.kind != KeyEventKind::Press {
            return;
        }
        self.dirty = true;
        self.notice = None;
        if self.show_help {
            // Any key closes help; the quit keys still quit.
            if self.keymap.matches(Action::Quit, &key) {
                self.quit = true;
            }
            self.show_help = false;
            return;
        }
        if self.typing() {
            self.on_text_key(key);
            return;
        }
        if self.tab == Tab::Approvals && self.approvals.prompt.is_some() {
            match self.keymap.lookup(&[Scope::Prompt], &key) {
                Some(Action::Confirm) => self.send_decision(),
                Some(Action::Note) => self.approvals.start_note(),
                _ => {
                    self.approvals.prompt = None;
                    self.notice = Some("cancelled: nothing sent".into());
                }
            }
            return;
        }
        let scopes = [self.tab.scope(), Scope::List, Scope::Global];
        if let Some(action) = self.keymap.lookup(&scopes, &key) {
            self.dispatch(action);
        }
    }

    /// A key while typing a filter or a note: the `open` key keeps the text, `back`
    /// discards it, a control-quit still quits, anything else is text.
    fn on_text_key(&mut self, key: KeyEvent) {
        let open = self.keymap.matches(Action::Open, &key);
        let back = self.keymap.matches(Action::Back, &key);
        if !open && !back {
            if key.modifiers.contains(KeyModifiers::CONTROL)
                && self.keymap.matches(Action::Quit, &key)
            {
                self.quit = true;
                return;
            }
            if !matches!(key.code, KeyCode::Char(_) | KeyCode::Backspace) {
                return;
            }
        }
        match self.tab {
            Tab::Sessions => match (open, back) {
                (true, _) => self.sessions.dispatch(Action::Open, &self.model),
                (_, true) => self.sessions.dispatch(Action::Back, &self.model),
                _ => self.sessions.filter_key(key, &self.model),
            },
            Tab::Events => match (open, back) {
                (true, _) => self.events.dispatch(Action::Open, &self.model),
                (_, true) => self.events.dispatch(Action::Back, &self.model),
                _ => self.events.filter_key(key, &self.model),
            },
            Tab::Approvals => self.approvals.note_key(key, open, back),
            Tab::Evals => {}
        }
    }

    pub fn dispatch(&mut self, action: Action) {
        self.dirty = true;
        if let Some(tab) = Tab::of_action(action) {
            self.tab = tab;
            return;
        }
        match action {
            Action::Quit => self.quit = true,
            Action::Help => self.show_help = !self.show_help,
            Action::NextTab => self.tab = self.tab.next(),
            Action::PrevTab => self.tab = self.tab.prev(),
            Action::Copy => self.copy_selected(),
            other => match self.tab {
                Tab::Sessions => self.sessions.dispatch(other, &self.model),
                Tab::Approvals => {
                    // A replay can never send: say so at the key, not after a confirm.
                    if matches!(self.watching, Watching::Replay { .. })
                        && matches!(other, Action::Approve | Action::Deny)
                    {
                        let verb = if other == Action::Approve {
                            "approve"
                        } else {
                            "deny"
                        };
                        if let Some(why) = self.offline(verb) {
                            self.notice = Some(why);
                            return;
                        }
                    }
                    let now = self.clock.wall_ms();
                    if let Some(notice) = self.approvals.dispatch(other, &self.model, now) {
                        self.notice = Some(notice);
                    }
                }
                Tab::Events => self.events.dispatch(other, &self.model),
                Tab::Evals => super::views::evals::dispatch(self, other),
            },
        }
    }

    /// The confirmed decision goes out over REST in a task; the view changes only when
    /// the runtime's `approval.resolved` / `approval.replayed` events arrive.
    fn send_decision(&mut self) {
        let Some(prompt) = self.approvals.prompt.take() else {
            return;
        };
        let verb = if prompt.approve { "approve" } else { "deny" };
        let Some(outbox) = &self.outbox else {
            let why = self.offline(&format!("{verb} {}", prompt.approval_id));
            self.notice = why.map(|why| format!("{why}; nothing sent"));
            return;
        };
        let note = prompt.note.trim();
        let body = DecisionRequest {
            by: Some(self.user.clone()),
            note: (!note.is_empty()).then(|| note.to_owned()),
        };
        outbox.decide(&prompt.approval_id, prompt.approve, body);
        self.notice = Some(format!(
            "{verb} {} sent; waiting for the runtime",
            prompt.approval_id
        ));
    }

    /// `y`: the selected thing as JSON (masked by the clipboard), and which way it went.
    fn copy_selected(&mut self) {
        let picked = match self.tab {
            Tab::Sessions => self.sessions.copy_text(&self.model),
            Tab::Approvals => self.approvals.copy_text(&self.model),
            Tab::Events => self.events.copy_text(&self.model),
            Tab::Evals => self.evals.copy_text(&self.model),
        };
        self.notice = Some(match picked {
            Some((what, text)) => format!("{what}: {}", (self.copier)(&text).status()),
            None => "nothing selected to copy".to_owned(),
        });
    }

    /// Clicks select tabs and rows; the wheel scrolls what is under the pointer.
    pub fn on_mouse(&mut self, event: MouseEvent) {
        let at = Position::new(event.column, event.row);
        match event.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                self.show_help = false;
                if let Some((_, tab)) = self.tab_hits.0.iter().find(|(r, _)| r.contains(at)) {
                    self.tab = *tab;
                    self.approvals.prompt = None;
                } else {
                    match self.tab {
                        Tab::Sessions => self.sessions.click(at, &self.model),
                        Tab::Approvals => self.approvals.click(at),
                        Tab::Events => self.events.click(at, &self.model),
                        Tab::Evals => self.evals.click(at, &self.model),
                    }
                }
            }
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let action = if event.kind == MouseEventKind::ScrollUp {
                    Action::Up
                } else {
                    Action::Down
                };
                match self.tab {
                    Tab::Sessions => self.sessions.focus_at(at),
                    Tab::Evals => self.evals.focus_at(at),
                    Tab::Approvals | Tab::Events => {}
                }
                // Three rows a notch, as most terminals scroll text.
                for _ in 0..3 {
                    self.dispatch(action);
                }
            }
            _ => return,
        }
        self.dirty = true;
    }
}

/// The status bar's word after `stream.reset`: the runtime restarted without the history
/// shown so far, when (UTC, from the frame's stamp), and that the screen shows the new one.
fn restarted_notice(ts: &str, epoch: &str) -> String {
    let time = ts.get(11..19).unwrap_or(ts);
    format!("runtime restarted at {time} UTC (stream {epoch}): earlier state cleared")
}
