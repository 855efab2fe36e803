//! The inspector's wiring (`wire`: App, channel, observer or player, Outbox) and its loop:
//! one `select!` over terminal input, client messages and a 1 Hz tick. It redraws only
//! when something changed, at most 30 times a second, each frame in a synchronized update;
//! with nothing happening it sleeps.

use super::action::{KeyMap, Tab};
use super::app::{App, Watching};
use super::clock::{Clock, SystemClock};
use super::render::draw;
use super::terminal::TerminalGuard;
use super::theme::Theme;
use crate::client::replay::spawn_replay;
use crate::client::{ClientError, ClientMsg, Endpoint, Outbox, spawn_observer};
use crate::config::{History, Resolved};
use crate::model::Limits;
use crossterm::event::{Event, EventStream};
use crossterm::execute;
use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::stdout;
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The least time between two draws (about 60 a second): a change waits at most this
/// long to be drawn, and a flood of changes costs at most this many frames.
pub const FRAME: Duration = Duration::from_millis(16);
/// Messages folded per wake before drawing gets a chance, so a flood cannot starve input.
pub const BATCH: usize = 4096;

#[derive(Debug, Error)]
pub enum UiError {
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Everything the inspector runs with, resolved (see `config::Config::resolve`).
#[derive(Debug, Clone)]
pub struct InspectorConfig {
    pub url: String,
    pub api_key: Option<String>,
    /// The project the inspector watches (`x-codespar-project`); None: the default one.
    pub project: Option<String>,
    pub limits: Limits,
    pub theme: Theme,
    pub keys: KeyMap,
    /// Capture the mouse; false leaves selection to the terminal.
    pub mouse: bool,
    /// Who decisions are sent as.
    pub user: String,
    /// What the status bar says is being watched.
    pub watching: Watching,
    /// The tab it opens on (`view` opens on Evals).
    pub tab: Tab,
}

impl InspectorConfig {
    /// The defaults for `url`: no key, default limits, theme and keys, mouse captured,
    /// decisions sent as "spyglass" (`inspector_config` takes the login name).
    pub fn new(url: &str) -> InspectorConfig {
        InspectorConfig {
            url: url.to_owned(),
            api_key: None,
            project: None,
            limits: Limits::default(),
            theme: Theme::default(),
            keys: KeyMap::default(),
            mouse: true,
            user: "spyglass".to_owned(),
            watching: Watching::Runtime,
            tab: Tab::Sessions,
        }
    }
}

/// The UI's settings from a resolved config.
pub fn inspector_config(url: String, config: &Resolved) -> InspectorConfig {
    InspectorConfig {
        url,
        api_key: config.api_key.value.as_ref().map(|k| k.expose().to_owned()),
        project: config.project.value.clone(),
        limits: limits(&config.history),
        theme: Theme::clone(&config.theme),
        keys: KeyMap::clone(&config.keys),
        mouse: config.mouse.value,
        user: user(),
        watching: Watching::Runtime,
        tab: Tab::Sessions,
    }
}

/// The model's bounds from the config's `[history]`.
pub fn limits(history: &History) -> Limits {
    Limits {
        sessions: history.sessions,
        calls_per_session: history.calls_per_session,
        approvals: history.approvals,
        eval_runs: history.eval_runs,
        events: history.events,
        bytes: history.bytes(),
        ..Limits::default()
    }
}

/// Who decisions are sent as: the login name, else "spyglass".
fn user() -> String {
    ["USER", "LOGNAME", "USERNAME"]
        .into_iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "spyglass".to_owned())
}

/// Where the inspector's messages come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// The runtime at the config's URL: the observer stream, and REST for decisions and
    /// reruns.
    Live,
    /// A recording's text (JSON lines), played at `speed` with nothing to send to.
    Replay { text: String, speed: f64 },
}

/// An inspector wired to its source, not yet on a terminal: what `run_source` draws, and
/// what end-to-end tests drive with a scripted clock and a test backend.
pub struct Wired {
    pub app: App,
    /// What the observer (or player) and the Outbox's failures send; `App::on_client`
    /// folds each.
    pub rx: mpsc::Receiver<ClientMsg>,
    /// The observer or player task; aborting it stops the feed.
    pub feed: JoinHandle<()>,
}

/// The production wiring: an App with the config's settings, and for a live source the
/// observer on `config.url` plus an Outbox for decisions and reruns (a replay gets only
/// the player, so there is nothing to send to). Spawns, so it needs a tokio runtime.
pub fn wire(
    config: InspectorConfig,
    clock: Arc<dyn Clock>,
    source: Source,
) -> Result<Wired, UiError> {
    let (tx, rx) = mpsc::channel(BATCH);
    let mut app = App::new(&config.url, config.limits, clock);
    let feed = match source {
        Source::Live => {
            let endpoint = Endpoint {
                url: config.url.clone(),
                api_key: config.api_key.clone(),
                project: config.project.clone(),
            };
            let rest = endpoint.rest()?;
            let observer = spawn_observer(endpoint.observer(), rest.clone(), tx.clone());
            app.outbox = Outbox::new(rest, tx);
            observer
        }
        // The player holds the only sender, so the channel closes when playback ends.
        Source::Replay { text, speed } => spawn_replay(text, speed, tx),
    };
    app.watching = config.watching;
    app.tab = config.tab;
    app.project = config.project;
    app.theme = config.theme;
    app.keymap = config.keys;
    app.user = config.user;
    Ok(Wired { app, rx, feed })
}

pub async fn run(config: InspectorConfig) -> Result<(), UiError> {
    run_source(config, Source::Live).await
}

/// `wire` and the terminal loop, until the user quits.
pub async fn run_source(config: InspectorConfig, source: Source) -> Result<(), UiError> {
    let mouse = config.mouse;
    let Wired {
        mut app,
        mut rx,
        feed,
    } = wire(config, Arc::new(SystemClock), source)?;
    // OSC 52 goes to the terminal the inspector draws on; it is invisible there.
    app.copier = Box::new(|text| crate::clipboard::copy(text, &mut stdout()));
    let result = {
        let _guard = TerminalGuard::enter(mouse)?;
        let mut terminal = Terminal::new(CrosstermBackend::new(stdout()))?;
        terminal.clear()?;
        debug_panic();
        event_loop(&mut terminal, &mut app, &mut rx).await
    };
    feed.abort();
    result
}

/// `SPYGLASS_DEBUG_PANIC=1` panics once the terminal is in raw mode on the alternate
/// screen, so a test can check the panic path restores it. Debug builds only.
fn debug_panic() {
    #[cfg(debug_assertions)]
    assert!(
        std::env::var_os("SPYGLASS_DEBUG_PANIC").is_none_or(|v| v != "1"),
        "SPYGLASS_DEBUG_PANIC=1: forced panic with the terminal set up"
    );
}

async fn event_loop(
    terminal: &mut Terminal<CrosstermBackend<std::io::Stdout>>,
    app: &mut App,
    rx: &mut mpsc::Receiver<ClientMsg>,
) -> Result<(), UiError> {
    let mut input = EventStream::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_draw: Option<Instant> = None;
    let mut client_open = true;
    loop {
        if app.is_dirty() {
            let due = last_draw.is_none_or(|t| t.elapsed() >= FRAME);
            if due {
                execute!(terminal.backend_mut(), BeginSynchronizedUpdate)?;
                let drawn = terminal.draw(|frame| draw(frame, app)).map(|_| ());
                execute!(terminal.backend_mut(), EndSynchronizedUpdate)?;
                drawn?;
                app.mark_drawn();
                last_draw = Some(Instant::now());
            }
        }
        if app.quit {
            return Ok(());
        }
        let next_frame = last_draw.map_or_else(Instant::now, |t| t + FRAME);
        tokio::select! {
            event = input.next() => match event {
                Some(Ok(Event::Key(key))) => app.on_key(key),
                Some(Ok(Event::Mouse(mouse))) => app.on_mouse(mouse),
                Some(Ok(Event::Resize(..))) => app.mark_dirty(),
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(err.into()),
                None => return Ok(()),
            },
            msg = rx.recv(), if client_open => if let Some(msg) = msg {
                app.on_client(msg);
                for _ in 0..BATCH {
                    match rx.try_recv() {
                        Ok(msg) => app.on_client(msg),
                        Err(_) => break,
                    }
                }
            } else {
                client_open = false;
                app.on_client_closed();
            },
            _ = tick.tick() => app.on_tick(),
            // Only armed while a redraw is pending, so an idle inspector truly sleeps.
            () = tokio::time::sleep_until(next_frame.into()), if app.is_dirty() => {}
        }
    }
}
