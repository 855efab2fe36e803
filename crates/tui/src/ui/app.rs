//! App state: the model, the connection as the client last reported it, the tab in view and
//! the four views. Key presses and mouse events become `Action`s through the one keymap and
//! go to the view in view (`View`); what it asks back (`Effect`) is applied here alone.
//! Client messages are folded into the model. Nothing here draws, and nothing here does
//! network IO (decisions and eval reruns go out via the one `Outbox`).

use super::action::{Action, KeyMap, Scope, Tab};
use super::clock::Clock;
use super::theme::Theme;
use super::views::approvals::ApprovalsState;
use super::views::evals::EvalsState;
use super::views::events::EventsState;
use super::views::sessions::SessionsState;
use super::views::{Cx, Drawn, Effect, View};
use crate::client::{ClientMsg, Outbox};
use crate::clipboard::CopyOutcome;
use crate::model::{Limits, Model};
use crossterm::event::{KeyEvent, KeyEventKind, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Position, Rect};
use spyglass_protocol::rest::DecisionRequest;
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
        /// Why the last try failed (refused, DNS, TLS, the stream dropped).
        cause: String,
    },
    /// The runtime refused the stream (401/403); nothing is retried until the key changes.
    Rejected {
        status: u16,
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
    /// The project watched, named in the status bar; None: the runtime's default one.
    pub project: Option<String>,
    pub theme: Theme,
    pub keymap: KeyMap,
    pub clock: Arc<dyn Clock>,
    pub sessions: SessionsState,
    pub approvals: ApprovalsState,
    pub evals: EvalsState,
    pub events: EventsState,
    pub show_help: bool,
    /// The first help line shown, when help is taller than the screen.
    pub help_scroll: usize,
    /// The approval a decision was sent for, whose "sent; waiting" notice goes when the
    /// runtime's answer lands.
    awaiting: Option<String>,
    /// Help's (lines, lines that fit) as last drawn, for its scroll keys.
    pub help_fit: (usize, usize),
    /// A one-line message for the status bar (a REST error, say); cleared by the next key.
    pub notice: Option<String>,
    /// The jump prompt's text while it is open (`:`; see `jump`).
    pub jump: Option<String>,
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
            project: None,
            theme: Theme::default(),
            keymap: KeyMap::default(),
            clock,
            sessions: SessionsState::default(),
            approvals: ApprovalsState::default(),
            evals: EvalsState::default(),
            events: EventsState::default(),
            show_help: false,
            help_scroll: 0,
            help_fit: (0, 0),
            awaiting: None,
            notice: None,
            jump: None,
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
        if self.all_projects() {
            return Some(format!(
                "cannot {doing}: watching every project; open the inspector with --project P to act in one"
            ));
        }
        match (&self.watching, &self.outbox) {
            (Watching::Replay { file }, _) => Some(format!(
                "cannot {doing}: this is a replay of {file}, with no runtime behind it"
            )),
            (_, Some(_)) => None,
            (_, None) => Some(format!("cannot {doing}: no runtime to send it to")),
        }
    }

    /// Whether the stream is every project's (`--project '*'`).
    pub fn all_projects(&self) -> bool {
        self.project.as_deref() == Some(crate::client::ALL_PROJECTS)
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
                    if let spyglass_protocol::Event::StreamReset(reset) = &frame.event {
                        // The status line is written by `apply` alone (the View contract);
                        // the views learn of the cleared model in `after_model_change`.
                        self.apply(Effect::Notice(restarted_notice(&frame.ts, &reset.epoch)));
                    }
                    self.model.fold(Box::new(frame));
                    self.rate.hit(now);
                }
            }
            ClientMsg::ParseError(err) => {
                tracing::warn!(%err, "frame not decoded");
                self.model.note_parse_error();
            }
            ClientMsg::Disconnected {
                attempt,
                retry_in,
                reason,
            } => {
                self.conn = Conn::Reconnecting {
                    attempt,
                    retry_at: now + retry_in,
                    cause: reason,
                }
            }
            ClientMsg::Rejected { status } => self.conn = Conn::Rejected { status },
            ClientMsg::Hydrated {
                sessions,
                approvals,
            } => self.model.hydrate(sessions, approvals),
            ClientMsg::RestError(err) => self.notice = Some(err),
        }
        self.settle_awaited();
        self.after_model_change();
        self.dirty = true;
    }

    /// A decision that landed clears its "sent; waiting for the runtime" notice.
    fn settle_awaited(&mut self) {
        let Some(id) = &self.awaiting else { return };
        let landed = self
            .model
            .approvals
            .get(id)
            .is_none_or(|a| a.status != spyglass_protocol::rest::ApprovalStatus::Pending);
        if landed {
            let waiting = format!(" {id} sent; waiting for the runtime");
            if self.notice.as_ref().is_some_and(|n| n.ends_with(&waiting)) {
                self.notice = None;
            }
            self.awaiting = None;
        }
    }

    /// Every view catches up with the model (selections kept, caches rebuilt). Called for
    /// each client message; callers that change `model` directly call it themselves.
    pub fn after_model_change(&mut self) {
        let views: [&mut dyn View; 4] = [
            &mut self.sessions,
            &mut self.approvals,
            &mut self.evals,
            &mut self.events,
        ];
        for view in views {
            view.after_model_change(&self.model);
        }
    }

    /// The view of the tab in view.
    pub fn view(&self) -> &dyn View {
        match self.tab {
            Tab::Sessions => &self.sessions,
            Tab::Approvals => &self.approvals,
            Tab::Evals => &self.evals,
            Tab::Events => &self.events,
        }
    }

    /// What views read besides their own state.
    pub fn cx(&self) -> Cx<'_> {
        Cx {
            model: &self.model,
            theme: &self.theme,
            keymap: &self.keymap,
            now_ms: self.clock.wall_ms(),
            url: &self.url,
            watching: &self.watching,
            all_projects: self.all_projects(),
            trouble: self.trouble(),
        }
    }

    /// Why no event arrives, in a sentence that says what to do: the runtime cannot be
    /// reached, or it refused the key. `None` while connected (or connecting).
    pub fn trouble(&self) -> Option<String> {
        let url = &self.url;
        match &self.conn {
            Conn::Reconnecting { cause, .. } => {
                // "connection refused by HOST": the URL already names the host.
                let cause = if cause.starts_with("connection refused") {
                    "connection refused"
                } else {
                    cause.as_str()
                };
                Some(format!(
                    "Cannot reach {url}: {cause} — is `spyglass serve` running? Retrying."
                ))
            }
            Conn::Rejected { status } => Some(format!(
                "{status}: {url} refused the API key — pass --api-key KEY or set \
                 CODESPAR_API_KEY"
            )),
            Conn::Connecting { .. } | Conn::Connected | Conn::Offline => None,
        }
    }

    /// The view in view, mutable, beside what it reads.
    fn view_mut(&mut self) -> (&mut dyn View, Cx<'_>) {
        let trouble = self.trouble();
        let cx = Cx {
            model: &self.model,
            theme: &self.theme,
            keymap: &self.keymap,
            now_ms: self.clock.wall_ms(),
            url: &self.url,
            watching: &self.watching,
            all_projects: self.project.as_deref() == Some(crate::client::ALL_PROJECTS),
            trouble,
        };
        let view: &mut dyn View = match self.tab {
            Tab::Sessions => &mut self.sessions,
            Tab::Approvals => &mut self.approvals,
            Tab::Evals => &mut self.evals,
            Tab::Events => &mut self.events,
        };
        (view, cx)
    }

    /// Hands the view in view what its last render laid out.
    pub fn place(&mut self, drawn: &Drawn) {
        let (view, cx) = self.view_mut();
        view.place(drawn, cx.model);
    }

    /// The client task is gone: no more frames will come.
    pub fn on_client_closed(&mut self) {
        // A refusal says more than "offline": it stays, naming the fix.
        if !matches!(self.conn, Conn::Rejected { .. }) {
            self.conn = Conn::Offline;
        }
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

    pub fn on_key(&mut self, key: KeyEvent) {
        if key.kind != KeyEventKind::Press {
            return;
        }
        self.dirty = true;
        if self.jump_key(key) {
            return;
        }
        self.notice = None;
        if self.show_help {
            // Any key closes help; the quit keys still quit, and the scroll keys scroll
            // it while it is taller than the screen.
            if self.keymap.matches(Action::Quit, &key) {
                self.quit = true;
            }
            let (lines, page) = self.help_fit;
            if lines > page
                && let Some(action) = self.keymap.lookup(&[Scope::List], &key)
                && crate::ui::views::scroll_pane(&mut self.help_scroll, lines, page, action)
            {
                return;
            }
            self.show_help = false;
            self.help_scroll = 0;
            return;
        }
        // A text field or a prompt takes keys before the keymap does.
        let (view, cx) = self.view_mut();
        if let Some(effect) = view.on_key(key, &cx) {
            self.apply(effect);
            return;
        }
        let pane_open = self.view().pane_open();
        let scopes = [Scope::Pane, self.tab.scope(), Scope::List, Scope::Global];
        let scopes = if pane_open { &scopes[..] } else { &scopes[1..] };
        if let Some(action) = self.keymap.lookup(scopes, &key) {
            self.dispatch(action);
        }
    }

    pub fn dispatch(&mut self, action: Action) {
        self.dirty = true;
        if let Some(tab) = Tab::of_action(action) {
            self.tab = tab;
            return;
        }
        let effect = match action {
            Action::Quit => Effect::Quit,
            Action::Help => {
                self.show_help = !self.show_help;
                Effect::None
            }
            Action::Jump => {
                self.start_jump();
                Effect::None
            }
            Action::NextTab => {
                self.tab = self.tab.next();
                Effect::None
            }
            Action::PrevTab => {
                self.tab = self.tab.prev();
                Effect::None
            }
            Action::Copy => match self.view().copy_text(&self.model) {
                Some((what, text)) => Effect::Copy { what, text },
                None => Effect::Notice("nothing selected to copy".to_owned()),
            },
            // A replay (or the every-project stream) can never send: say so at the key,
            // not after a confirm.
            Action::Approve | Action::Deny
                if matches!(self.watching, Watching::Replay { .. }) || self.all_projects() =>
            {
                let verb = if action == Action::Approve {
                    "approve"
                } else {
                    "deny"
                };
                self.offline(verb).map_or(Effect::None, Effect::Notice)
            }
            other => {
                let (view, cx) = self.view_mut();
                view.on_action(other, &cx)
            }
        };
        self.apply(effect);
    }

    /// Does what a view asked for.
    fn apply(&mut self, effect: Effect) {
        match effect {
            Effect::None => {}
            Effect::Quit => self.quit = true,
            Effect::Notice(text) => self.notice = Some(text),
            Effect::Decide {
                approval_id,
                approve,
                note,
            } => self.send_decision(&approval_id, approve, &note),
            Effect::DecideAll {
                approval_ids,
                approve,
                note,
            } => {
                let verb = if approve { "approve" } else { "deny" };
                let what = format!("{verb} {} calls", approval_ids.len());
                if self.outbox.is_none() {
                    self.notice = self
                        .offline(&what)
                        .map(|why| format!("{why}; nothing sent"));
                    return;
                }
                for id in &approval_ids {
                    self.send_decision(id, approve, &note);
                }
                self.notice = Some(format!("{what} sent; waiting for the runtime"));
            }
            Effect::Rerun { suite, case } => self.rerun(suite, case),
            Effect::ShowSession(id) => {
                if self.sessions.select_session(&id, &self.model) {
                    self.tab = Tab::Sessions;
                } else {
                    self.notice = Some(format!(
                        "session {id} is no longer held (older sessions are dropped past the limit)"
                    ));
                }
            }
            Effect::Copy { what, text } => {
                self.notice = Some(format!("{what}: {}", (self.copier)(&text).status()));
            }
        }
    }

    /// The confirmed decision goes out over REST in a task; the view changes only when
    /// the runtime's `approval.resolved` / `approval.replayed` events arrive.
    fn send_decision(&mut self, approval_id: &str, approve: bool, note: &str) {
        let verb = if approve { "approve" } else { "deny" };
        let Some(outbox) = &self.outbox else {
            let why = self.offline(&format!("{verb} {approval_id}"));
            self.notice = why.map(|why| format!("{why}; nothing sent"));
            return;
        };
        let note = note.trim();
        let body = DecisionRequest {
            by: Some(self.user.clone()),
            note: (!note.is_empty()).then(|| note.to_owned()),
        };
        outbox.decide(approval_id, approve, body);
        self.notice = Some(format!(
            "{verb} {approval_id} sent; waiting for the runtime"
        ));
        self.awaiting = Some(approval_id.to_owned());
    }

    /// An eval rerun goes out over REST in a task; results come back on the stream.
    fn rerun(&mut self, suite: String, case: Option<String>) {
        let what = match &case {
            Some(case) => format!("{suite} / {case}"),
            None => format!("suite {suite}"),
        };
        self.notice = Some(match &self.outbox {
            Some(outbox) => {
                outbox.rerun(suite, case);
                format!("rerunning {what}; results stream in")
            }
            None => self.offline(&format!("rerun {what}")).unwrap_or_default(),
        });
    }

    /// Clicks select tabs and rows; the wheel scrolls what is under the pointer.
    pub fn on_mouse(&mut self, event: MouseEvent) {
        let at = Position::new(event.column, event.row);
        match event.kind {
            MouseEventKind::Down(MouseButton::Left) => {
                self.show_help = false;
                if let Some(&(_, tab)) = self.tab_hits.0.iter().find(|(r, _)| r.contains(at)) {
                    self.view_mut().0.on_hide();
                    self.tab = tab;
                } else {
                    let (view, cx) = self.view_mut();
                    let effect = view.on_click(at, cx.model);
                    self.apply(effect);
                }
            }
            MouseEventKind::ScrollUp | MouseEventKind::ScrollDown => {
                let action = if event.kind == MouseEventKind::ScrollUp {
                    Action::Up
                } else {
                    Action::Down
                };
                self.view_mut().0.on_wheel(at);
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
