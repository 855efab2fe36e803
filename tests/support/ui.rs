//! What the inspector's screen tests share: an App on a fixed clock, frames fed to it, the
//! screen as text, keys typed into it, and a wait that folds client messages until the
//! screen shows what a test expects.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;
use spyglass::client::ClientMsg;
use spyglass::model::Limits;
use spyglass::protocol::decode;
use spyglass::ui::render::draw;
use spyglass::ui::{Action, App, FakeClock, InspectorConfig, Source, Tab, Wired, wire};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The fixed "now" of the screen tests' clock.
pub const NOW: &str = "2026-11-22T21:44:00.000Z";
/// The runtime the screen tests' App says it watches (nothing listens there).
pub const URL: &str = "http://127.0.0.1:8000";

/// An App watching `URL` on a clock stopped at `NOW`, already told it is connected.
pub fn app() -> (App, Arc<FakeClock>) {
    let clock = Arc::new(FakeClock::at(NOW));
    let mut app = App::new(URL, Limits::default(), clock.clone());
    app.on_client(ClientMsg::Connected);
    (app, clock)
}

/// An App at `NOW` fed by the real observer client of the runtime at `url`: the client's
/// messages arrive on `rx` for `until` to fold.
pub struct Live {
    pub app: App,
    pub rx: mpsc::Receiver<ClientMsg>,
    pub observer: JoinHandle<()>,
}

impl Live {
    /// Watching only: the App has no way to send.
    pub fn watching(url: &str) -> Live {
        Live::new(url, false)
    }

    /// Watching, and sending decisions and reruns through the real REST outbox.
    pub fn acting(url: &str) -> Live {
        Live::new(url, true)
    }

    /// Watching and acting for one project (`--project`).
    pub fn for_project(url: &str, project: &str) -> Live {
        let config = InspectorConfig {
            project: Some(project.to_owned()),
            ..InspectorConfig::new(url)
        };
        Live::wired(config, true)
    }

    fn new(url: &str, outbox: bool) -> Live {
        Live::wired(InspectorConfig::new(url), outbox)
    }

    /// The production wiring (`ui::wire`), on the fake clock; a watching-only App then
    /// loses its outbox so a test can see what the App does without one.
    fn wired(config: InspectorConfig, outbox: bool) -> Live {
        let Wired { mut app, rx, feed } =
            wire(config, Arc::new(FakeClock::at(NOW)), Source::Live).unwrap();
        assert!(app.outbox.is_some());
        if !outbox {
            app.outbox = None;
        }
        Live {
            app,
            rx,
            observer: feed,
        }
    }
}

/// A frame as a test holds it: built as a JSON value, or wire text kept as written.
pub trait Wire {
    fn wire(&self) -> String;
}

impl Wire for Value {
    fn wire(&self) -> String {
        self.to_string()
    }
}

impl Wire for str {
    fn wire(&self) -> String {
        self.to_owned()
    }
}

impl Wire for String {
    fn wire(&self) -> String {
        self.clone()
    }
}

/// One frame through the real decoder into the App, as the observer client delivers it.
pub fn feed(app: &mut App, frame: &(impl Wire + ?Sized)) {
    let text = frame.wire();
    let frame = decode(&text).unwrap_or_else(|err| panic!("{err}: {text}"));
    app.on_client(ClientMsg::Frames(vec![frame]));
}

/// The app drawn once into a `width`×`height` buffer, one line per row, trailing blanks cut.
pub fn screen(app: &mut App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| draw(f, app)).unwrap();
    let buf = terminal.backend().buffer();
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

/// Feeds client messages into the app, drawing a `width`×`height` screen after each, until
/// `want` holds for it; 15 s without that fails the test with the last screen.
pub async fn until(
    app: &mut App,
    rx: &mut mpsc::Receiver<ClientMsg>,
    size: (u16, u16),
    what: &str,
    want: impl Fn(&str) -> bool,
) -> String {
    until_app(app, rx, size, what, |_, text| want(text)).await
}

/// `until`, with a condition that may also read the app's state.
pub async fn until_app(
    app: &mut App,
    rx: &mut mpsc::Receiver<ClientMsg>,
    (width, height): (u16, u16),
    what: &str,
    want: impl Fn(&App, &str) -> bool,
) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut text = screen(app, width, height);
    while !want(app, &text) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(msg)) => app.on_client(msg),
            Ok(None) => panic!("client channel closed while waiting for {what}; screen:\n{text}"),
            Err(elapsed) => panic!("{elapsed} waiting for {what}; screen:\n{text}"),
        }
        text = screen(app, width, height);
    }
    text
}

/// The first screen line mentioning `needle`, or "" when none does.
pub fn row<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_default()
}

/// The Sessions detail row of `tool`'s stateful mock (its counter), or "" when not shown.
pub fn mock_row(text: &str, tool: &str) -> String {
    text.lines()
        .find(|l| l.contains(tool) && l.contains("stateful"))
        .unwrap_or_default()
        .to_owned()
}

/// The help screen lists every key of the actions that apply on `tab`.
pub fn assert_help_lists_the_keys_of(text: &str, tab: Tab) {
    let shown = tab.help_scopes();
    for action in Action::ALL
        .into_iter()
        .filter(|a| shown.iter().any(|s| a.applies_in(*s)))
    {
        assert!(
            text.contains(action.description()),
            "{} missing from help",
            action.name()
        );
    }
}

/// One key press, as the terminal reports a plain character.
pub fn key(app: &mut App, c: char) {
    app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
}

/// A special key (Enter, Esc, Tab …).
pub fn press(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}
